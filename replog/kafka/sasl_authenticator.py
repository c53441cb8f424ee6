"""One SASL connection's authentication as a state machine (Kafka's SaslServerAuthenticator
with KafkaChannel's re-authentication, KIP-152 and KIP-368): which request a connection may
send when, the SASL answers, and the principal it authenticated as.

States: HANDSHAKE_OR_VERSIONS (a new connection), HANDSHAKE (after ApiVersions), AUTHENTICATE
(after a handshake naming an enabled mechanism), COMPLETE (authenticated), FAILED.

Rules (Kafka 4.x):
- Before the handshake only ApiVersions (once, handled as on any connection) and SaslHandshake
  are read; any other request closes the connection unanswered ("Unexpected Kafka request of
  type X during SASL handshake"), as does a second ApiVersions. A SaslAuthenticate before the
  handshake is answered ILLEGAL_SASL_STATE, then the connection closes.
- SaslHandshake names a mechanism: one not enabled on the listener is answered
  UNSUPPORTED_SASL_MECHANISM with the enabled ones, then the connection closes. v1 means the
  tokens come in SaslAuthenticate requests; v0, as raw size-prefixed tokens (`raw_tokens`).
- While authenticating, each SaslAuthenticate's bytes go to the mechanism (PLAIN, or SCRAM
  over the credentials of the broker's metadata image). A failure is answered
  SASL_AUTHENTICATION_FAILED, then the connection closes: with PLAIN's message, or for SCRAM
  Kafka's generic one ("Authentication failed during authentication due to invalid credentials
  with SASL mechanism SCRAM-SHA-256", the cause kept for the log line); any
  other request closes it (a SaslHandshake answered ILLEGAL_SASL_STATE first).
- Once complete the principal is `User:<authorization id>`. With `connections.max.reauth.ms`
  > 0 the final SaslAuthenticate (v1+) carries it as `session_lifetime_ms`, and the session
  ends that long after: past it, any request but a SaslHandshake closes the connection
  unanswered; a SaslHandshake begins a re-authentication, which must use the same mechanism
  and end with the same principal (else SASL_AUTHENTICATION_FAILED, then close), and starts a
  new session. A SaslAuthenticate after completion is answered ILLEGAL_SASL_STATE (the
  connection stays).
- Every failure is reported in `SaslStep.failure` (one log line and a counted attempt for the
  shell), naming the cause, never a password, key or proof.
- Pure: the time and the SCRAM server nonces come from the caller.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum

from replog.common.scram_mechanism import MECHANISM_BY_NAME, ScramMechanism
from replog.errors import (
    IllegalSaslStateError,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
)
from replog.kafka.connection import api_name
from replog.kafka.messages.sasl_authenticate_request import SaslAuthenticateRequest
from replog.kafka.messages.sasl_authenticate_response import SaslAuthenticateResponse
from replog.kafka.messages.sasl_handshake_request import SaslHandshakeRequest
from replog.kafka.messages.sasl_handshake_response import SaslHandshakeResponse
from replog.kafka.protocol.codec import Message
from replog.kafka.protocol.framing import API_VERSIONS_KEY
from replog.security.plain_server import PLAIN, PlainServer
from replog.security.principal import USER_TYPE, KafkaPrincipal
from replog.security.scram_credential import ScramCredential
from replog.security.scram_server import ScramServer

SASL_HANDSHAKE_KEY = SaslHandshakeRequest.API_KEY
SASL_AUTHENTICATE_KEY = SaslAuthenticateRequest.API_KEY
SASL_MECHANISMS = (PLAIN, *MECHANISM_BY_NAME)
# A user's credential for a SCRAM mechanism, None when it has none (the broker's image).
CredentialLookup = Callable[[ScramMechanism], Callable[[str], ScramCredential | None]]


class SaslState(Enum):
    HANDSHAKE_OR_VERSIONS = "handshake or versions"
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    COMPLETE = "complete"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class SaslStep:
    """What the connection does with a request the authenticator took: answer it with
    `response` (None: no answer), then close when `close`. `failure` names why an attempt
    failed or the connection closes (logged once, counted when `failed_attempt`)."""

    response: Message | None = None
    close: bool = False
    failure: str | None = None
    failed_attempt: bool = False


class SaslAuthenticator:
    __slots__ = (
        "_credentials",
        "_mechanisms",
        "_new_nonce",
        "_plain_users",
        "_reauth_ms",
        "_server",
        "mechanism",
        "principal",
        "raw_tokens",
        "reauthenticating",
        "session_expires_ms",
        "state",
    )

    def __init__(
        self,
        mechanisms: tuple[str, ...],
        *,
        plain_users: Mapping[str, str],
        credentials: CredentialLookup,
        new_nonce: Callable[[], str],
        reauth_ms: Mapping[str, int] | None = None,
    ) -> None:
        self._mechanisms = mechanisms
        self._plain_users = plain_users
        self._credentials = credentials
        self._new_nonce = new_nonce
        self._reauth_ms = reauth_ms or {}  # by mechanism; absent or 0: no session end
        self._server: PlainServer | ScramServer | None = None
        self.state = SaslState.HANDSHAKE_OR_VERSIONS
        self.mechanism = ""
        self.principal: KafkaPrincipal | None = None
        self.session_expires_ms: int | None = None
        self.raw_tokens = False  # a v0 handshake: the tokens come unframed
        self.reauthenticating = False

    @property
    def complete(self) -> bool:
        return self.state is SaslState.COMPLETE

    def step(self, api_key: int, api_version: int, body: Message, now_ms: int) -> SaslStep | None:
        """What to do with a request read at `now_ms`; None: the handlers answer it."""
        state = self.state
        if state is SaslState.COMPLETE:
            return self._after_completion(api_key, api_version, body, now_ms)
        if state is SaslState.AUTHENTICATE:
            if api_key == SASL_AUTHENTICATE_KEY:
                assert isinstance(body, SaslAuthenticateRequest)
                return self._authenticate(body.auth_bytes, now_ms)
            return self._unexpected(api_key, "SASL authentication")
        if api_key == API_VERSIONS_KEY and state is SaslState.HANDSHAKE_OR_VERSIONS:
            self.state = SaslState.HANDSHAKE
            return None
        if api_key == SASL_HANDSHAKE_KEY:
            assert isinstance(body, SaslHandshakeRequest)
            return self._handshake(body.mechanism, api_version)
        return self._unexpected(api_key, "SASL handshake")

    def _after_completion(
        self, api_key: int, api_version: int, body: Message, now_ms: int
    ) -> SaslStep | None:
        if api_key == SASL_HANDSHAKE_KEY:
            assert isinstance(body, SaslHandshakeRequest)
            self.reauthenticating = True
            return self._handshake(body.mechanism, api_version)
        expires = self.session_expires_ms
        if expires is not None and now_ms > expires:
            return self._fail(
                None,
                f"session expired {now_ms - expires} ms ago (connections.max.reauth.ms "
                f"{self._reauth_ms.get(self.mechanism, 0)}) and the client sent "
                f"{api_name(api_key)}, not a re-authentication",
                counted=False,
            )
        if api_key == SASL_AUTHENTICATE_KEY:
            return SaslStep(
                SaslAuthenticateResponse(
                    error_code=IllegalSaslStateError.code,
                    error_message="SaslAuthenticate request received after successful "
                    "authentication",
                )
            )
        return None

    def _handshake(self, mechanism: str, version: int) -> SaslStep:
        enabled = list(self._mechanisms)
        if mechanism not in self._mechanisms:
            return self._fail(
                SaslHandshakeResponse(
                    error_code=UnsupportedSaslMechanismError.code, mechanisms=enabled
                ),
                f"Unsupported SASL mechanism {mechanism} (enabled: {', '.join(enabled)})",
            )
        if self.reauthenticating and mechanism != self.mechanism:
            return self._fail(
                SaslHandshakeResponse(
                    error_code=UnsupportedSaslMechanismError.code, mechanisms=enabled
                ),
                f"SASL mechanism '{mechanism}' requested by client is not supported for "
                f"re-authentication of mechanism '{self.mechanism}'",
            )
        self.mechanism = mechanism
        self.raw_tokens = version == 0
        scram = MECHANISM_BY_NAME.get(mechanism)
        self._server = (
            PlainServer(self._plain_users)
            if scram is None
            else ScramServer(scram, self._credentials(scram), self._new_nonce())
        )
        self.state = SaslState.AUTHENTICATE
        return SaslStep(SaslHandshakeResponse(mechanisms=enabled))

    def _authenticate(self, token: bytes, now_ms: int) -> SaslStep:
        server = self._server
        assert server is not None
        what = "re-authentication" if self.reauthenticating else "authentication"
        try:
            answer = server.respond(token)
        except (SaslAuthenticationFailedError, IllegalSaslStateError) as error:
            cause = str(error)  # the mechanism's own text, which names no secret
            # Kafka's SCRAM server fails with a SaslException, which the client is told only
            # generically (whether the user exists is not its business); PLAIN's text is sent.
            message = (
                cause
                if isinstance(server, PlainServer)
                else f"Authentication failed during {what} due to invalid credentials with SASL "
                f"mechanism {self.mechanism}"
            )
            return self._fail(
                self._authenticate_error(SaslAuthenticationFailedError.code, message),
                f"{what} with {self.mechanism} failed: {cause}",
            )
        if not server.complete:
            return SaslStep(SaslAuthenticateResponse(auth_bytes=answer))
        principal = KafkaPrincipal(USER_TYPE, server.authorization_id)
        if self.reauthenticating and principal != self.principal:
            assert self.principal is not None
            message = (
                f"Cannot change principals during re-authentication from "
                f"{self.principal.principal_type}.{self.principal.name}: "
                f"{principal.principal_type}.{principal.name}"
            )
            return self._fail(
                self._authenticate_error(SaslAuthenticationFailedError.code, message),
                f"{what} with {self.mechanism} failed: {message}",
            )
        self.principal = principal
        self._server = None
        self.state = SaslState.COMPLETE
        self.raw_tokens = False
        lifetime = max(self._reauth_ms.get(self.mechanism, 0), 0)
        self.session_expires_ms = now_ms + lifetime if lifetime else None
        return SaslStep(SaslAuthenticateResponse(auth_bytes=answer, session_lifetime_ms=lifetime))

    def _authenticate_error(self, code: int, message: str) -> SaslAuthenticateResponse | None:
        # Unframed (v0) tokens have no error answer: the connection just closes.
        if self.raw_tokens:
            return None
        return SaslAuthenticateResponse(error_code=code, error_message=message)

    def _unexpected(self, api_key: int, during: str) -> SaslStep:
        response: Message | None = None
        if api_key == SASL_AUTHENTICATE_KEY:
            response = SaslAuthenticateResponse(
                error_code=IllegalSaslStateError.code,
                error_message=f"Unexpected SaslAuthenticate request during {during}",
            )
        elif api_key == SASL_HANDSHAKE_KEY:
            response = SaslHandshakeResponse(
                error_code=IllegalSaslStateError.code, mechanisms=list(self._mechanisms)
            )
        return self._fail(
            response, f"Unexpected Kafka request of type {api_name(api_key)} during {during}"
        )

    def _fail(self, response: Message | None, cause: str, *, counted: bool = True) -> SaslStep:
        self.state = SaslState.FAILED
        self._server = None
        return SaslStep(response, close=True, failure=cause, failed_attempt=counted)
