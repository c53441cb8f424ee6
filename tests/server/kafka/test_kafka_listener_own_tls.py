"""An SSL Kafka listener runs TLS itself (`tls_session` over a plain transport) and waits for
the rest of a partly read request (`kafka_listener`, SO_RCVLOWAT):

- the session: a handshake with an in-memory client, records both ways, the least ciphertext
  a record cut short still needs, the client's close_notify seen, a corrupt record refused;
- the core says how many bytes the next frame still needs;
- a request split over three TLS records (as Kafka's Java client writes one) is answered, and
  while its rest is missing the socket's low-water mark is what is missing;
- plaintext bytes at the TLS port close that connection with one INFO line naming the peer and
  the cause, counted as a failed SSL authentication; a client that closes before its handshake
  is not counted.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import struct
import sys
from pathlib import Path

import pytest

from replog.kafka.connection import KafkaConnection, KafkaRequest
from replog.kafka.messages.metadata_request import MetadataRequest
from replog.kafka.messages.metadata_response import MetadataResponse
from replog.kafka.messages.request_header import RequestHeader
from replog.kafka.protocol.codec import Message
from replog.kafka.protocol.framing import encode_request
from replog.server.config.tls_config import TlsConfig
from replog.server.kafka.kafka_listener import KafkaListener
from replog.server.kafka.tls_context import server_ssl_context
from replog.server.kafka.tls_session import TlsSession
from tests.eventually import eventually
from tests.tls_certificates import Pki


class Recorder:
    served = {3: (0, 13), 18: (0, 4)}

    def __init__(self) -> None:
        self.seen = 0

    def handle(self, request: KafkaRequest, listener_name: str) -> Message:
        self.seen += 1
        return MetadataResponse()


def contexts(tmp_path: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """The broker's context (no client certificate asked) and a client's trusting it."""
    pki = Pki.create(tmp_path)
    server = server_ssl_context(
        TlsConfig(keystore_location=str(pki.keystore("broker")), client_auth="none")
    )
    client = ssl.create_default_context(cafile=str(pki.truststore))
    return server, client


def pump(out: ssl.MemoryBIO, into: ssl.MemoryBIO, session: TlsSession) -> list[bytes]:
    """Move the client's output to the session and the session's back, once."""
    plaintext = session.receive(out.read())
    into.write(session.take_output())
    return plaintext


def handshaken(
    server: ssl.SSLContext, client_context: ssl.SSLContext
) -> tuple[TlsSession, ssl.SSLObject, ssl.MemoryBIO, ssl.MemoryBIO]:
    """A session and an in-memory client past their handshake."""
    session = TlsSession(server)
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    client = client_context.wrap_bio(incoming, outgoing, server_hostname="127.0.0.1")
    for _ in range(4):
        try:
            client.do_handshake()
            break
        except ssl.SSLWantReadError:
            assert pump(outgoing, incoming, session) == []
    assert pump(outgoing, incoming, session) == []  # the client's Finished (TLS 1.3)
    assert session.handshake_done
    return session, client, incoming, outgoing


def test_the_session_handshakes_and_carries_records_both_ways(tmp_path: Path) -> None:
    server, client_context = contexts(tmp_path)
    session, client, incoming, outgoing = handshaken(server, client_context)
    client.write(b"first")
    client.write(b"second")
    assert b"".join(pump(outgoing, incoming, session)) == b"firstsecond"
    # A record cut short waits for the rest: before any of its plaintext, the rest of it must
    # come, and for more plaintext than its whole length, at least that much more.
    client.write(b"x" * 1000)
    record = outgoing.read()
    body = len(record) - 5
    assert session.ciphertext_needed(10) == 10  # between records: the bytes themselves
    assert session.receive(record[:3]) == [] and session.ciphertext_needed(10) == 2 + 10
    assert session.receive(record[3:500]) == []
    assert session.ciphertext_needed(10) == len(record) - 500
    assert session.ciphertext_needed(body + 7) == len(record) - 500 + 7
    assert session.receive(record[500:]) == [b"x" * 1000] and session.ciphertext_needed(10) == 10
    session.seal(b"answer")
    incoming.write(session.take_output())
    assert client.read(100) == b"answer"
    with pytest.raises(ssl.SSLWantReadError):
        client.unwrap()  # sends close_notify, waits for the session's
    assert session.receive(outgoing.read()) == [] and session.peer_closed


def test_the_session_refuses_a_corrupt_record(tmp_path: Path) -> None:
    session, client, _, outgoing = handshaken(*contexts(tmp_path))
    client.write(b"tampered")
    bad = bytearray(outgoing.read())
    bad[-1] ^= 1
    with pytest.raises(ssl.SSLError):
        session.receive(bytes(bad))


def test_the_core_says_how_many_bytes_the_next_frame_needs() -> None:
    core = KafkaConnection("peer", {3: (0, 13), 18: (0, 4)})
    header = RequestHeader(request_api_key=3, request_api_version=12, correlation_id=1)
    frame = encode_request(header, MetadataRequest(topics=[]))
    assert core.bytes_missing == 0
    core.feed(frame[:2])
    assert core.bytes_missing == 2  # the rest of the size prefix
    core.feed(frame[2:7])
    assert core.bytes_missing == len(frame) - 7
    core.feed(frame[7:])
    assert core.bytes_missing == 0
    assert core.next_request() is not None and core.bytes_missing == 0


@pytest.mark.skipif(sys.platform != "linux", reason="the mark is set on Linux only")
@pytest.mark.asyncio
async def test_a_request_in_three_records_is_answered_after_one_wait(tmp_path: Path) -> None:
    server, client_context = contexts(tmp_path)
    listener = KafkaListener("SSL", "127.0.0.1", 0, ssl_context=server)
    recorder = Recorder()
    await listener.start(recorder)
    try:
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", listener.port, ssl=client_context, server_hostname="127.0.0.1"
        )
        header = RequestHeader(request_api_key=3, request_api_version=12, correlation_id=1)
        frame = encode_request(header, MetadataRequest(topics=[], allow_auto_topic_creation=True))
        writer.write(frame[:6])  # one TLS record each write
        await writer.drain()
        (connection,) = list(listener._connections)
        assert connection._transport is not None
        sock = connection._transport.get_extra_info("socket")

        def low_water() -> int:
            return int(sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT))

        await eventually(lambda: low_water() == len(frame) - 6, "the mark is the rest")
        writer.write(frame[6:10])
        writer.write(frame[10:])
        size = await asyncio.wait_for(reader.readexactly(4), 10)
        await asyncio.wait_for(reader.readexactly(struct.unpack(">i", size)[0]), 10)
        assert recorder.seen == 1 and low_water() == 1
        writer.close()
    finally:
        await listener.stop()


@pytest.mark.asyncio
async def test_a_failed_handshake_is_said_and_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server, _ = contexts(tmp_path)
    failed: list[tuple[str, str]] = []
    listener = KafkaListener(
        "SSL",
        "127.0.0.1",
        0,
        ssl_context=server,
        on_failed_authentication=lambda name, mechanism: failed.append((name, mechanism)),
    )
    await listener.start(Recorder())
    try:
        with caplog.at_level(logging.INFO, logger="replog.server.kafka"):
            reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
            header = RequestHeader(request_api_key=3, request_api_version=12, correlation_id=1)
            writer.write(encode_request(header, MetadataRequest(topics=[])))
            assert await asyncio.wait_for(reader.read(100), 10) == b""  # closed
            writer.close()
            probe = socket.create_connection(("127.0.0.1", listener.port))
            probe.close()  # a port probe: no handshake to fail
            await eventually(lambda: not listener._connections, "both connections closed")
        lines = [r.getMessage() for r in caplog.records if "TLS handshake" in r.getMessage()]
        assert len(lines) == 1 and "plaintext" in lines[0] and "127.0.0.1:" in lines[0], lines
        assert failed == [("SSL", "SSL")]
        assert all(r.levelno < logging.WARNING for r in caplog.records)
    finally:
        await listener.stop()
