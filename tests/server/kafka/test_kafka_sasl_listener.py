"""A SASL Kafka listener (`kafka_listener` with `sasl`) over loopback, driven by replog's own
client connection (`replog.wire.sasl_authentication`) and raw sockets: the principal each
request carries, refusals answered with Kafka's errors then closed, one WARNING line and a
counted failure each (never the password), a v0 handshake's unframed tokens, and a session
renewed by the client before the broker would close it."""

from __future__ import annotations

import asyncio
import logging
import ssl
import struct
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from replog.common.scram_mechanism import SCRAM_SHA_256, ScramMechanism
from replog.errors import NetworkError, SaslAuthenticationFailedError, UnsupportedSaslMechanismError
from replog.kafka.connection import KafkaRequest
from replog.kafka.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from replog.kafka.messages.metadata_request import MetadataRequest
from replog.kafka.messages.metadata_response import MetadataResponse
from replog.kafka.protocol.codec import Message
from replog.security.principal import ANONYMOUS, KafkaPrincipal
from replog.security.principal_mapping import PrincipalMapper
from replog.security.scram_credential import ScramCredential, derive_credential
from replog.server.config.sasl_config import SaslListenerConfig
from replog.server.config.tls_config import TlsConfig
from replog.server.kafka.kafka_listener import KafkaListener
from replog.server.kafka.tls_context import server_ssl_context
from replog.wire.kafka_connection import KafkaConnection, KafkaConnections
from replog.wire.sasl_authentication import SaslCredentials
from tests.tls_certificates import Pki

PLAIN_USERS = {"alice": "alice-plain"}
SCRAM = {"bob": derive_credential(SCRAM_SHA_256, "bob-scram", b"salt", 4096)}


class Handlers:
    """ApiVersions and Metadata; each Metadata's principal recorded."""

    served = {3: (0, 13), 18: (0, 4), 17: (0, 1), 36: (0, 2)}

    def __init__(self) -> None:
        self.principals: list[KafkaPrincipal] = []

    def handle(self, request: KafkaRequest, listener_name: str) -> Message:
        if request.api_key == 18:
            return ApiVersionsResponse(
                api_keys=[
                    ApiVersion(api_key=k, min_version=lo, max_version=hi)
                    for k, (lo, hi) in self.served.items()
                ]
            )
        self.principals.append(request.principal)
        return MetadataResponse(cluster_id=listener_name)


def credentials(mechanism: ScramMechanism):  # type: ignore[no-untyped-def]
    def lookup(name: str) -> ScramCredential | None:
        return SCRAM.get(name) if mechanism == SCRAM_SHA_256 else None

    return lookup


@pytest_asyncio.fixture
async def listener() -> AsyncIterator[tuple[KafkaListener, Handlers, list[tuple[str, str]]]]:
    failures: list[tuple[str, str]] = []
    served = KafkaListener(
        "SASL_PLAINTEXT",
        "127.0.0.1",
        0,
        sasl=SaslListenerConfig(
            ("PLAIN", "SCRAM-SHA-256"), PLAIN_USERS, {"PLAIN": 1500, "SCRAM-SHA-256": 0}
        ),
        on_failed_authentication=lambda name, mechanism: failures.append((name, mechanism)),
    )
    handlers = Handlers()
    await served.start(handlers, credentials)
    try:
        yield served, handlers, failures
    finally:
        await served.stop()


async def connect(listener: KafkaListener, credentials: SaslCredentials | None) -> KafkaConnection:
    return await KafkaConnection.open(
        listener.address, client_id="test", setup_timeout_ms=5000, sasl=credentials
    )


@pytest.mark.asyncio
async def test_plain_and_scram_clients_are_served_with_their_principal(listener) -> None:  # type: ignore[no-untyped-def]
    served, handlers, failures = listener
    for credentials, principal in (
        (SaslCredentials("PLAIN", "alice", "alice-plain"), "User:alice"),
        (SaslCredentials("SCRAM-SHA-256", "bob", "bob-scram"), "User:bob"),
    ):
        connection = await connect(served, credentials)
        answer, _ = await connection.call(MetadataRequest(topics=[]), timeout_ms=5000)
        assert answer.cluster_id == "SASL_PLAINTEXT"
        assert str(handlers.principals[-1]) == principal
        connection.close()
    assert failures == []


@pytest.mark.asyncio
async def test_refusals_are_kafkas_errors_logged_once_and_counted(listener, caplog) -> None:  # type: ignore[no-untyped-def]
    served, handlers, failures = listener
    caplog.set_level(logging.INFO, "replog.server.kafka")
    for credentials, error in (
        (SaslCredentials("PLAIN", "alice", "wrong-one"), SaslAuthenticationFailedError),
        (SaslCredentials("SCRAM-SHA-256", "mallory", "bob-scram"), SaslAuthenticationFailedError),
        (SaslCredentials("SCRAM-SHA-512", "bob", "bob-scram"), UnsupportedSaslMechanismError),
    ):
        with pytest.raises(error):
            await connect(served, credentials)
    await asyncio.sleep(0.2)
    assert failures == [
        ("SASL_PLAINTEXT", "PLAIN"),
        ("SASL_PLAINTEXT", "SCRAM-SHA-256"),
        ("SASL_PLAINTEXT", ""),
    ]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 3, warnings
    assert "Invalid username or password" in warnings[0]
    assert "Invalid user credentials" in warnings[1]
    assert "Unsupported SASL mechanism SCRAM-SHA-512" in warnings[2]
    assert all("closing connection from 127.0.0.1:" in w for w in warnings)
    assert not any("wrong-one" in w or "bob-scram" in w for w in warnings)
    assert handlers.principals == []
    # The listener goes on serving.
    connection = await connect(served, SaslCredentials("PLAIN", "alice", "alice-plain"))
    await connection.call(MetadataRequest(topics=[]), timeout_ms=5000)
    connection.close()


def frame(api_key: int, version: int, correlation_id: int, body: bytes = b"") -> bytes:
    header = struct.pack(">hhih", api_key, version, correlation_id, -1)
    return struct.pack(">i", len(header) + len(body)) + header + body


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    return await reader.readexactly(size)


@pytest.mark.asyncio
async def test_a_v0_handshake_exchanges_unframed_tokens(listener) -> None:  # type: ignore[no-untyped-def]
    served, handlers, _ = listener
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    mechanism = b"PLAIN"
    writer.write(frame(17, 0, 1, struct.pack(">h", len(mechanism)) + mechanism))
    answer = await read_frame(reader)
    assert struct.unpack(">ih", answer[:6]) == (1, 0)  # correlation id 1, no error
    token = b"\0alice\0alice-plain"
    writer.write(struct.pack(">i", len(token)) + token)  # no request header
    assert await read_frame(reader) == b""  # PLAIN's empty answer, unframed too
    writer.write(frame(3, 0, 2, struct.pack(">i", 0)))  # Metadata v0, now framed again
    assert struct.unpack(">i", (await read_frame(reader))[:4]) == (2,)
    assert handlers.principals == [KafkaPrincipal("User", "alice")]
    writer.close()


@pytest.mark.asyncio
async def test_another_request_before_authentication_closes_unanswered(listener) -> None:  # type: ignore[no-untyped-def]
    served, handlers, failures = listener
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    writer.write(frame(3, 1, 7, struct.pack(">i", 0)))
    assert await reader.read() == b""
    assert handlers.principals == [] and failures == [("SASL_PLAINTEXT", "")]
    writer.close()


@pytest.mark.asyncio
async def test_the_client_renews_its_session_and_an_expired_one_is_closed(listener) -> None:  # type: ignore[no-untyped-def]
    served, handlers, _ = listener
    credentials = SaslCredentials("PLAIN", "alice", "alice-plain")
    connections = KafkaConnections(client_id="test", setup_timeout_ms=5000, sasl=credentials)
    first = await connections.get(served.address)
    assert first.renew_at_ms is not None
    await asyncio.sleep(1.4)  # past 85% of the 1500 ms session
    second = await connections.get(served.address)
    assert second is not first and first.is_closed
    await second.call(MetadataRequest(topics=[]), timeout_ms=5000)
    await connections.close()
    # A connection kept past its session is closed at its next request.
    stale = await connect(served, credentials)
    await asyncio.sleep(1.7)
    with pytest.raises(NetworkError):
        await stale.call(MetadataRequest(topics=[]), timeout_ms=5000)
    assert all(p != ANONYMOUS for p in handlers.principals)


@pytest.mark.asyncio
async def test_on_sasl_ssl_the_sasl_login_is_the_principal_not_the_certificate(
    tmp_path: Path,
) -> None:
    """replog's client: TLS (with a client certificate), ApiVersions, then SASL inside the TLS
    session. The certificate names nobody: no mapping rule matches it, which on an SSL
    listener closes the connection (`test_kafka_listener_principal`); here alice's login
    decides, as in Kafka."""
    pki = Pki.create(tmp_path)
    pki.keystore("dave")
    served = KafkaListener(
        "SASL_SSL",
        "127.0.0.1",
        0,
        ssl_context=server_ssl_context(
            TlsConfig(
                keystore_location=str(pki.keystore("broker")),
                truststore_location=str(pki.truststore),
                client_auth="required",
            )
        ),
        sasl=SaslListenerConfig(("PLAIN",), PLAIN_USERS),
        principal_mapper=PrincipalMapper.from_rules("RULE:^CN=admin,.*$/admin/"),
    )
    handlers = Handlers()
    await served.start(handlers, credentials)
    client = ssl.create_default_context(cafile=str(pki.truststore))
    client.load_cert_chain(str(pki.directory / "dave.crt"), str(pki.directory / "dave.key"))
    try:
        connection = await KafkaConnection.open(
            served.address,
            client_id="test",
            setup_timeout_ms=5000,
            tls=client,
            sasl=SaslCredentials("PLAIN", "alice", "alice-plain"),
        )
        answer, _ = await connection.call(MetadataRequest(topics=[]), timeout_ms=5000)
        connection.close()
        # The certificate lets no one in by itself: a wrong password is refused.
        with pytest.raises(SaslAuthenticationFailedError):
            await KafkaConnection.open(
                served.address,
                client_id="test",
                setup_timeout_ms=5000,
                tls=client,
                sasl=SaslCredentials("PLAIN", "alice", "wrong"),
            )
    finally:
        await served.stop()
    assert answer.cluster_id == "SASL_SSL"
    assert handlers.principals == [KafkaPrincipal("User", "alice")]
