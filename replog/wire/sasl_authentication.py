"""A client connection's SASL authentication (Kafka's SaslClientAuthenticator, KIP-152):
after ApiVersions, a SaslHandshake v1 naming the mechanism, then the mechanism's tokens in
SaslAuthenticate requests until the exchange completes (docs/security.md, "Clients").

Rules:
- `security.protocol` SASL_PLAINTEXT or SASL_SSL authenticates every connection of the
  client, under SASL_SSL inside its TLS session (`KafkaConnection.open`); PLAINTEXT and SSL
  none. `sasl.mechanism` is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (Kafka's default GSSAPI
  is refused, naming the ones served), and `sasl.username` and `sasl.password` are required.
- A mechanism the broker does not enable is UNSUPPORTED_SASL_MECHANISM naming the ones it
  does; a refused exchange is SASL_AUTHENTICATION_FAILED with the broker's message (a wrong
  password, an unknown user); a SCRAM server whose final signature is wrong fails too. None
  is retriable, and the connection closes.
- The session lifetime the broker gives (KIP-368 `session_lifetime_ms`) is kept on the
  connection: one past `REAUTH_FRACTION` of it with no request waiting is replaced by a fresh,
  authenticated one before its next use (`KafkaConnections`), so the broker does not meet an
  expired session on it; one kept busy to its session's end is closed by the broker and dialled
  again, as after any lost connection.
- The password is never logged nor shown in a repr; SCRAM's client nonce is random.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Protocol

from replog.common.scram_mechanism import MECHANISM_BY_NAME
from replog.errors import (
    ConfigError,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
)
from replog.kafka.messages.sasl_authenticate_request import SaslAuthenticateRequest
from replog.kafka.messages.sasl_authenticate_response import SaslAuthenticateResponse
from replog.kafka.messages.sasl_handshake_request import SaslHandshakeRequest
from replog.kafka.messages.sasl_handshake_response import SaslHandshakeResponse
from replog.kafka.protocol.codec import Message
from replog.security.scram_client import ScramClient

PLAIN = "PLAIN"
CLIENT_MECHANISMS = (PLAIN, *MECHANISM_BY_NAME)
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
# A session is renewed once this much of its lifetime has passed (Kafka's client picks a
# random point between 85% and 95%).
REAUTH_FRACTION = 0.85
SCRAM_NONCE_BYTES = 18


class Connection(Protocol):
    """What authentication needs of a connection (`kafka_connection.KafkaConnection`)."""

    address: str

    async def call(
        self, request: Message, *, timeout_ms: int, min_version: int = 0
    ) -> tuple[Message, int]: ...


@dataclass(frozen=True, slots=True)
class SaslCredentials:
    """Who a client authenticates as, and how."""

    mechanism: str
    username: str
    password: str = field(repr=False)


def sasl_settings(
    security_protocol: str, mechanism: str, username: str | None, password: str | None
) -> SaslCredentials | None:
    """The credentials a client's settings give (None: no SASL); `ConfigError` naming the key
    for what cannot be used (module rules)."""
    protocol = security_protocol.strip().upper()
    if protocol not in PROTOCOLS:
        raise ConfigError(
            f"security.protocol={security_protocol!r}: accepted values: {', '.join(PROTOCOLS)}"
        )
    if protocol not in SASL_PROTOCOLS:
        return None  # PLAINTEXT or SSL: no SASL (SSL's TLS is `client.tls_settings`')
    name = mechanism.strip().upper()
    if name not in CLIENT_MECHANISMS:
        raise ConfigError(
            f"sasl.mechanism={mechanism!r}: accepted values: {', '.join(CLIENT_MECHANISMS)}"
        )
    for key, value in (("sasl.username", username), ("sasl.password", password)):
        if not value:
            raise ConfigError(f"{key}: required with security.protocol={protocol}")
    assert username is not None and password is not None
    return SaslCredentials(name, username, password)


async def authenticate(
    connection: Connection, credentials: SaslCredentials, timeout_ms: int
) -> int:
    """Authenticate `connection`; returns the session lifetime in ms the broker gave (0:
    none). Raises the broker's refusal as a typed error."""
    handshake, _ = await connection.call(
        SaslHandshakeRequest(mechanism=credentials.mechanism), timeout_ms=timeout_ms, min_version=1
    )
    assert isinstance(handshake, SaslHandshakeResponse)
    if handshake.error_code == UnsupportedSaslMechanismError.code:
        raise UnsupportedSaslMechanismError(
            f"{connection.address} does not enable SASL mechanism {credentials.mechanism} "
            f"(it enables: {', '.join(handshake.mechanisms) or 'none'})"
        )
    if handshake.error_code != 0:
        raise SaslAuthenticationFailedError(
            f"{connection.address} refused the SaslHandshake with error code "
            f"{handshake.error_code}: is its listener a SASL one (security.protocol)?"
        )
    scram = MECHANISM_BY_NAME.get(credentials.mechanism)
    client = (
        None
        if scram is None
        else ScramClient(
            scram,
            credentials.username,
            credentials.password,
            secrets.token_urlsafe(SCRAM_NONCE_BYTES),
        )
    )
    token: bytes | None = (
        b"\x00" + credentials.username.encode() + b"\x00" + credentials.password.encode()
        if client is None
        else client.respond(b"")
    )
    while token is not None:
        answer, _ = await connection.call(
            SaslAuthenticateRequest(auth_bytes=token), timeout_ms=timeout_ms
        )
        assert isinstance(answer, SaslAuthenticateResponse)
        if answer.error_code != 0:
            raise SaslAuthenticationFailedError(
                f"{connection.address}: authentication of {credentials.username!r} with "
                f"{credentials.mechanism} failed: {answer.error_message or answer.error_code}"
            )
        token = None if client is None else client.respond(answer.auth_bytes)
        if token is None:
            return max(answer.session_lifetime_ms, 0)
    return 0
