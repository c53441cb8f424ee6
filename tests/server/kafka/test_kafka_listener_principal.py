"""A connection's principal on a real Kafka listener (`kafka_listener`): every request carries
it with the client's address, `User:ANONYMOUS` on PLAINTEXT, the client certificate's subject
mapped by `ssl.principal.mapping.rules` on SSL; a certificate no rule maps closes the connection
with one WARNING line naming the subject."""

from __future__ import annotations

import asyncio
import logging
import ssl
import struct
from pathlib import Path

import pytest

from replog.kafka.connection import KafkaRequest
from replog.kafka.messages.metadata_request import MetadataRequest
from replog.kafka.messages.metadata_response import MetadataResponse
from replog.kafka.messages.request_header import RequestHeader
from replog.kafka.protocol.codec import Message
from replog.kafka.protocol.framing import encode_request
from replog.security.principal import ANONYMOUS, KafkaPrincipal
from replog.security.principal_mapping import PrincipalMapper
from replog.server.config.tls_config import TlsConfig
from replog.server.kafka.kafka_listener import KafkaListener
from replog.server.kafka.tls_context import server_ssl_context
from tests.tls_certificates import Pki


class Recorder:
    served = {3: (0, 13), 18: (0, 4)}

    def __init__(self) -> None:
        self.seen: list[tuple[KafkaPrincipal, str]] = []

    def handle(self, request: KafkaRequest, listener_name: str) -> Message:
        self.seen.append((request.principal, request.client_host))
        return MetadataResponse()


async def ask(port: int, client: ssl.SSLContext | None) -> bytes:
    """One Metadata request; the answer's bytes (empty: the connection was closed)."""
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=client, server_hostname="127.0.0.1" if client else None
    )
    header = RequestHeader(request_api_key=3, request_api_version=12, correlation_id=1)
    writer.write(encode_request(header, MetadataRequest(topics=[])))
    try:
        size = await asyncio.wait_for(reader.read(4), 10)
        if len(size) < 4:
            return b""
        return await reader.readexactly(struct.unpack(">i", size)[0])
    except (ConnectionError, ssl.SSLError):
        return b""
    finally:
        writer.close()


def client_context(pki: Pki, name: str) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(pki.truststore))
    context.load_cert_chain(str(pki.directory / f"{name}.crt"), str(pki.directory / f"{name}.key"))
    return context


async def served(listener: KafkaListener, client: ssl.SSLContext | None) -> tuple[Recorder, bytes]:
    recorder = Recorder()
    await listener.start(recorder)
    try:
        return recorder, await ask(listener.port, client)
    finally:
        await listener.stop()


def tls_listener(pki: Pki, rules: str) -> KafkaListener:
    config = TlsConfig(
        keystore_location=str(pki.keystore("broker")),
        truststore_location=str(pki.truststore),
        client_auth="required",
    )
    return KafkaListener(
        "SSL",
        "127.0.0.1",
        0,
        ssl_context=server_ssl_context(config),
        principal_mapper=PrincipalMapper.from_rules(rules),
    )


@pytest.mark.asyncio
async def test_plaintext_requests_carry_anonymous_and_the_clients_address() -> None:
    recorder, answer = await served(KafkaListener("PLAINTEXT", "127.0.0.1", 0), None)
    assert answer and recorder.seen == [(ANONYMOUS, "127.0.0.1")]


@pytest.mark.asyncio
async def test_ssl_requests_carry_the_mapped_certificate_subject(tmp_path: Path) -> None:
    pki = Pki.create(tmp_path)
    pki.keystore("alice")
    listener = tls_listener(pki, "RULE:^CN=([^,]+),.*$/$1/U")
    recorder, answer = await served(listener, client_context(pki, "alice"))
    assert answer and recorder.seen == [(KafkaPrincipal("User", "ALICE"), "127.0.0.1")]


@pytest.mark.asyncio
async def test_a_certificate_no_rule_maps_closes_its_connection_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pki = Pki.create(tmp_path)
    pki.keystore("alice")
    listener = tls_listener(pki, "RULE:^CN=admin,.*$/admin/")
    with caplog.at_level(logging.WARNING, logger="replog.server.kafka"):
        recorder, answer = await served(listener, client_context(pki, "alice"))
    assert answer == b"" and recorder.seen == []
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "CN=alice,O=replog tests" in warnings[0], warnings
