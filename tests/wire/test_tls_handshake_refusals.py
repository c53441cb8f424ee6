"""A framed listener's failed TLS handshakes (issue #81): plaintext bytes, an untrusted issuer,
an expired certificate and no client certificate each end in one WARNING naming the peer and
the cause, and each is counted; the listener serves a node afterwards."""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from pathlib import Path

import pytest

from replog.security.principal_mapping import PrincipalMapper
from replog.wire import framed_wire
from replog.wire.link_peer_check import PeerCheck
from replog.wire.link_security import LinkSecurity, LinkSettings, installed_while
from replog.wire.tls_handshake_failure import handshake_failure_cause, is_authentication_failure
from tests.tls_certificates import Pki


def _settings(pki: Pki) -> LinkSettings:
    return LinkSettings(
        keystore_location=str(pki.directory / "node-1.pem"),
        truststore_location=str(pki.truststore),
        node_principals=frozenset({"User:CN=node-1,O=replog tests"}),
        principal_mapper=PrincipalMapper.from_rules(),
    )


class _Listener(framed_wire.FramedListener):
    def __init__(self) -> None:
        super().__init__()
        self.admitted = 0

    def _connection(self) -> asyncio.Protocol:
        listener = self

        class Inbound(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                if not listener.refuses(transport, "peer"):
                    listener.admitted += 1
                transport.close()

        return Inbound()


def _dial(port: int, context: ssl.SSLContext | None, plaintext: bytes = b"") -> None:
    """A peer's attempt; whatever the listener answers (a refusal) is swallowed."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        if context is None:
            sock.sendall(plaintext)
            sock.recv(1024)  # the listener's abort
            return
        try:
            with context.wrap_socket(sock, server_hostname="127.0.0.1") as tls:
                tls.recv(1024)  # TLS 1.3: the client's certificate is judged after its hello
        except (ssl.SSLError, OSError):
            pass


def _probe(port: int) -> None:
    socket.create_connection(("127.0.0.1", port), timeout=10).close()


def _client(pki: Pki, keystore: Path | None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(pki.truststore))
    if keystore is not None:
        context.load_cert_chain(str(keystore))
    return context


@pytest.mark.asyncio
async def test_each_failed_handshake_is_one_line_naming_peer_and_cause_and_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pki = Pki.create(tmp_path / "pki")
    pki.keystore("node-1")
    expired = pki.keystore("old", expired=True)
    stranger_pki = Pki.create(tmp_path / "stranger")
    stranger = stranger_pki.keystore("stranger")
    security = LinkSecurity(_settings(pki))
    failed: list[str] = []
    listener = _Listener()
    listener.peer_check = PeerCheck(security.settings, lambda: failed.append("one"))
    with installed_while(security):
        port = await listener.start("127.0.0.1", 0)
    attempts = [
        (None, b"RFCH" + bytes(64), "plaintext"),
        (_client(pki, stranger), b"", "untrusted issuer"),
        (_client(pki, expired), b"", "expired certificate"),
        (_client(pki, None), b"", "no client certificate"),
    ]
    try:
        with caplog.at_level(logging.DEBUG, logger="replog.server.tls"):
            for count, (context, plaintext, _) in enumerate(attempts, start=1):
                await asyncio.to_thread(_dial, port, context, plaintext)
                async with asyncio.timeout(10):
                    while len(failed) < count:
                        await asyncio.sleep(0.01)
            # The same peer failing the same way again is counted, not logged again.
            await asyncio.to_thread(_dial, port, None, b"GET / HTTP/1.1\r\n\r\n")
            async with asyncio.timeout(10):
                while len(failed) < 5:
                    await asyncio.sleep(0.01)
            # A port probe (connect, close) is no authentication failure.
            await asyncio.to_thread(_probe, port)
            async with asyncio.timeout(10):  # said at DEBUG only
                while "connection ended during the TLS handshake" not in caplog.text:
                    await asyncio.sleep(0.01)
            await asyncio.to_thread(_dial, port, _client(pki, pki.directory / "node-1.pem"))
            async with asyncio.timeout(10):
                while listener.admitted < 1:
                    await asyncio.sleep(0.01)
    finally:
        await listener.close()
    lines = [r.getMessage() for r in caplog.records if "TLS handshake failed" in r.getMessage()]
    causes = [cause for _, _, cause in attempts]
    assert [next(c for c in causes if c in line) for line in lines[:4]] == causes
    assert all(line.startswith("internal link from 127.0.0.1:") for line in lines)
    assert len(lines) == 5  # the HTTP request's cause is worded apart from the Kafka bytes'
    assert "HTTP_REQUEST" in lines[4]
    assert not listener.connections
    assert len(failed) == 5  # the probe was not counted


def test_causes_are_named_from_the_error_alone() -> None:
    plain = ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number")
    plain.reason = "WRONG_VERSION_NUMBER"
    assert handshake_failure_cause(plain).startswith("plaintext")
    other = ssl.SSLError(1, "[SSL: NO_SHARED_CIPHER] no shared cipher")
    other.reason = "NO_SHARED_CIPHER"
    assert handshake_failure_cause(other) == "TLS error NO_SHARED_CIPHER"
    alert = ssl.SSLError(1, "[SSL: TLSV1_ALERT_UNKNOWN_CA] tlsv1 alert unknown ca")
    alert.reason = "TLSV1_ALERT_UNKNOWN_CA"
    assert (
        handshake_failure_cause(alert) == "the peer refused the handshake (TLSV1_ALERT_UNKNOWN_CA)"
    )
    reset = ConnectionResetError("reset by peer")
    assert handshake_failure_cause(reset) == (
        "connection ended during the TLS handshake (ConnectionResetError: reset by peer)"
    )
    assert is_authentication_failure(plain) and is_authentication_failure(alert)
    assert not is_authentication_failure(reset)
