"""What a client connection's failed TLS, or failed plaintext, first exchange means.

`kafka_connection` dials with the client's TLS context (None: plaintext) and asks this module
to name a failure instead of leaving it a generic lost connection, which the clients would
retry until their timeouts.

Rules:
- A certificate OpenSSL refuses (untrusted, expired, not naming the host dialled), a TLS
  alert from the broker refusing this client's certificate, or a TLS 1.3 broker closing the
  connection before it sent the session tickets that follow its acceptance of the handshake
  (how an asyncio server, replog's node among them, refuses a client certificate: no alert),
  is an `SslAuthenticationError` naming the address, what was said and the setting that
  decides it.
- A connection the peer closed at its first bytes is probed once on a new connection, within
  `PROBE_BUDGET_S`: a TLS client whose handshake met a closed connection asks whether a
  plaintext ApiVersions is answered there; a plaintext client that got nothing, or a TLS
  record, asks whether a TLS handshake is. Either found: a `SecurityProtocolMismatchError`
  naming the `security.protocol` to set. Neither: the original failure stands (a broker
  starting or stopping closes connections too, and is retried).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import struct

from replog.errors import ReplogError, SecurityProtocolMismatchError, SslAuthenticationError
from replog.net_address import parse_host_port

PROBE_BUDGET_S = 2.0
# An ApiVersions v0 request (header v1: api key 18, version 0, correlation id 1, client id "").
_API_VERSIONS_V0 = struct.pack(">ihhih", 10, 18, 0, 1, 0)
_TLS_ALERT, _TLS_HANDSHAKE = 0x15, 0x16  # TLS record content types
# OpenSSL's verify codes (X509_V_ERR_*) that say what is wrong with the broker's certificate.
_EXPIRED, _NOT_YET_VALID, _HOSTNAME_MISMATCH, _IP_MISMATCH = 10, 9, 62, 64


def certificate_failure(address: str, exc: BaseException | None) -> ReplogError | None:
    """The `SslAuthenticationError` that `exc`, raised by a TLS connection to `address`,
    stands for; None when it is no certificate failure (a closed connection, no TLS error)."""
    if not isinstance(exc, ssl.SSLError):
        return None
    if isinstance(exc, ssl.SSLCertVerificationError):
        said = exc.verify_message or exc.reason or str(exc)
        code = exc.verify_code
        if code in (_HOSTNAME_MISMATCH, _IP_MISMATCH):
            return SslAuthenticationError(
                f"{address}: the broker's certificate does not name the host dialled ({said}); "
                "dial a name or address its certificate lists, or set "
                "ssl.endpoint.identification.algorithm= (empty) to skip the host check"
            )
        if code in (_EXPIRED, _NOT_YET_VALID):
            return SslAuthenticationError(
                f"{address}: the broker's certificate is not valid now ({said})"
            )
        return SslAuthenticationError(
            f"{address}: the broker's certificate is not trusted ({said}): "
            "ssl.ca.location (or ssl.truststore.location) must name the CA that signed it"
        )
    if isinstance(exc, ssl.SSLEOFError | ssl.SSLZeroReturnError):
        return None
    reason = (exc.reason or "").lower()
    if "alert" not in reason:
        return None
    # The broker refused the handshake: its TLS alert names why.
    said = reason.replace("_", " ")
    remedy = ""
    if "certificate" in said or "unknown ca" in said:
        remedy = (
            ": a broker that requires client certificates needs one its truststore trusts "
            "(ssl.certificate.location and ssl.key.location, or ssl.keystore.location)"
        )
    return SslAuthenticationError(f"{address} refused this client's TLS handshake ({said}){remedy}")


async def connect_failure(
    lost: ReplogError, exc: OSError, address: str, *, tls: bool
) -> ReplogError:
    """What a failed dial of `address` (`exc`; `lost` the plain failure) means: a certificate
    refused, or a TLS handshake the peer closed, as a PLAINTEXT listener does (module rules)."""
    failure = certificate_failure(address, exc)
    if failure is not None:
        return failure
    closed = isinstance(exc, ssl.SSLError | ConnectionResetError | BrokenPipeError)
    if not tls or not closed:
        return lost
    return await mismatch_or(lost, address, tls=True, first=b"")


async def first_bytes_failure(
    failure: ReplogError,
    address: str,
    *,
    ssl_object: ssl.SSLObject | None,
    tls: bool,
    first: bytes,
    closed_by_peer: bool,
) -> ReplogError:
    """What a failed ApiVersions exchange with `address` means: `failure` as it is, unless the
    peer sent a TLS record, or closed having sent nothing (module rules). `ssl_object`: the
    connection's TLS state (None: plaintext)."""
    if not looks_like_tls(first) and (first or not closed_by_peer):
        return failure
    if tls and not _handshake_accepted(ssl_object):
        return SslAuthenticationError(
            f"{address} closed the connection after this client's TLS handshake without "
            "accepting it (no TLS 1.3 session ticket came): it refused this client's "
            "certificate; a broker that requires client certificates needs one its "
            "truststore trusts (ssl.certificate.location and ssl.key.location, or "
            "ssl.keystore.location)"
        )
    return await mismatch_or(failure, address, tls=tls, first=first)


def _handshake_accepted(ssl_object: ssl.SSLObject | None) -> bool:
    """Whether the server finished the TLS handshake of `ssl_object` on its side: a TLS 1.3
    server sends session tickets once it has checked the client's certificate, and refuses
    one by closing first (an asyncio server sends no alert then). True where that cannot be
    told (TLS 1.2: a refusal fails the handshake itself)."""
    if ssl_object is None or ssl_object.version() != "TLSv1.3":
        return True
    session = ssl_object.session
    return session is not None and bool(session.has_ticket)


def looks_like_tls(first: bytes) -> bool:
    """Whether `first`, what a peer sent first, begins a TLS record (an alert or handshake)."""
    return len(first) >= 2 and first[0] in (_TLS_ALERT, _TLS_HANDSHAKE) and first[1] == 3


async def mismatch_or(
    failure: ReplogError, address: str, *, tls: bool, first: bytes
) -> ReplogError:
    """`failure` of a connection to `address` that closed at its first bytes (module rules),
    or the `SecurityProtocolMismatchError` a probe finds. `tls`: the client dialled with TLS;
    `first`: what the peer sent before closing (plaintext only)."""
    if tls:
        if await _answers_plaintext_kafka(address):
            return SecurityProtocolMismatchError(
                f"{address} is a PLAINTEXT Kafka listener (it answers ApiVersions without TLS) "
                "and this client has security.protocol=SSL: set security.protocol=PLAINTEXT, or "
                "dial the broker's SSL listener"
            )
        return failure
    if first and not looks_like_tls(first):
        return failure
    if looks_like_tls(first) or await _speaks_tls(address):
        return SecurityProtocolMismatchError(
            f"{address} is a TLS (SSL) listener and this client speaks plaintext: set "
            "security.protocol=SSL and the ssl settings (a local cluster started with "
            "--security ssl writes them to client.properties: --command-config)"
        )
    return failure


async def _answers_plaintext_kafka(address: str) -> bool:
    host, port = parse_host_port(address, "broker address")
    try:
        async with asyncio.timeout(PROBE_BUDGET_S):
            reader, writer = await asyncio.open_connection(host, port)
            try:
                writer.write(_API_VERSIONS_V0)
                answer = await reader.readexactly(8)
            finally:
                writer.close()
    except (OSError, TimeoutError, asyncio.IncompleteReadError):
        return False
    return answer[4:8] == b"\0\0\0\1"  # the correlation id asked


async def _speaks_tls(address: str) -> bool:
    host, port = parse_host_port(address, "broker address")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # a probe of the protocol, not of the certificate
    shook = False
    try:
        async with asyncio.timeout(PROBE_BUDGET_S):
            _, writer = await asyncio.open_connection(host, port, ssl=context)
            shook = True
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
    except (ssl.SSLEOFError, ssl.SSLZeroReturnError):
        return False
    except ssl.SSLError:
        return True  # an alert: a TLS peer refusing this handshake
    except (OSError, TimeoutError):
        return shook  # a handshake done and a slow close is TLS all the same
    return True
