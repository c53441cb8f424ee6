"""The server side of a SCRAM exchange (RFC 5802, Kafka's ScramSaslServer) as a state machine:
client-first in, server-first out; client-final in, server-final out.

Rules:
- `respond` takes each client message in turn. The first names a user: an unknown user, an
  authorization id other than the user name, the delegation-token extension
  ("tokenauth=true": not offered here), or a credential below 4096 iterations fail. The final
  must end with the combined nonce (Kafka's `endsWith`), repeat the gs2 header in its channel
  binding, and its proof must give the stored key. Then the exchange is complete and
  `authorization_id` is the user name.
- Every failure raises `SaslAuthenticationFailedError` (Kafka's SASL_AUTHENTICATION_FAILED)
  and ends the exchange; a message after the end raises `IllegalSaslStateError`. A failure's
  text names the cause, never a key or proof.
- The server's nonce part and the credentials come from the caller: pure and replayable.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from enum import Enum

from replog.common.scram_mechanism import MIN_ITERATIONS, ScramMechanism
from replog.errors import IllegalSaslStateError, SaslAuthenticationFailedError
from replog.security.scram_credential import ScramCredential, digest, keyed_hash, xor
from replog.security.scram_messages import (
    ClientFirst,
    ServerFirst,
    auth_message,
    parse_client_final,
    parse_client_first,
    server_final,
)

TOKEN_AUTH = "tokenauth"


class ServerState(Enum):
    RECEIVE_CLIENT_FIRST = "receive client first"
    RECEIVE_CLIENT_FINAL = "receive client final"
    COMPLETE = "complete"
    FAILED = "failed"


class ScramServer:
    __slots__ = (
        "_credential",
        "_first",
        "_lookup",
        "_server_first",
        "_server_nonce",
        "authorization_id",
        "mechanism",
        "state",
    )

    def __init__(
        self,
        mechanism: ScramMechanism,
        lookup: Callable[[str], ScramCredential | None],
        server_nonce: str,
    ) -> None:
        self.mechanism = mechanism
        self._lookup = lookup  # user name -> its credential for this mechanism, None if none
        self._server_nonce = server_nonce
        self.state = ServerState.RECEIVE_CLIENT_FIRST
        self.authorization_id = ""
        self._first: ClientFirst | None = None
        self._server_first: ServerFirst | None = None
        self._credential: ScramCredential | None = None

    @property
    def complete(self) -> bool:
        return self.state is ServerState.COMPLETE

    def respond(self, message: bytes) -> bytes:
        """The answer to the client's next message."""
        try:
            if self.state is ServerState.RECEIVE_CLIENT_FIRST:
                return self._answer_first(message)
            if self.state is ServerState.RECEIVE_CLIENT_FINAL:
                return self._answer_final(message)
        except SaslAuthenticationFailedError:
            self._end(ServerState.FAILED)
            raise
        raise IllegalSaslStateError(
            f"a {self.mechanism.mechanism_name} message after the exchange ended "
            f"({self.state.value})"
        )

    def _answer_first(self, message: bytes) -> bytes:
        first = parse_client_first(message)
        if first.extensions.get(TOKEN_AUTH, "").lower() == "true":
            raise SaslAuthenticationFailedError(
                "Authentication failed: delegation tokens are not supported"
            )
        credential = self._lookup(first.username)
        if credential is None:
            raise SaslAuthenticationFailedError("Authentication failed: Invalid user credentials")
        if first.authorization_id and first.authorization_id != first.username:
            raise SaslAuthenticationFailedError(
                "Authentication failed: Client requested an authorization id that is different "
                "from username"
            )
        if credential.iterations < MIN_ITERATIONS:
            raise SaslAuthenticationFailedError(
                f"Iterations {credential.iterations} is less than the minimum {MIN_ITERATIONS} "
                f"for {self.mechanism.mechanism_name}"
            )
        self._first, self._credential = first, credential
        self._server_first = ServerFirst(
            first.nonce + self._server_nonce, credential.salt, credential.iterations
        )
        self.state = ServerState.RECEIVE_CLIENT_FINAL
        return self._server_first.to_bytes()

    def _answer_final(self, message: bytes) -> bytes:
        first, server_first, credential = self._first, self._server_first, self._credential
        assert first is not None and server_first is not None and credential is not None
        final = parse_client_final(message)
        # Kafka's check: librdkafka before 2.1 sends its own nonce again in front of the
        # combined one (Debian 12's kcat does), and Kafka's brokers take it.
        if not final.nonce.endswith(server_first.nonce):
            raise SaslAuthenticationFailedError("Invalid client nonce in the final client message.")
        if final.channel_binding != first.gs2_header.encode():
            raise SaslAuthenticationFailedError(
                "Invalid channel binding in the final client message: not the gs2 header"
            )
        signed = auth_message(first.bare, server_first.to_bytes().decode(), final.without_proof)
        client_signature = keyed_hash(self.mechanism, credential.stored_key, signed)
        if len(final.proof) != len(client_signature):
            raise SaslAuthenticationFailedError("Invalid client credentials")
        client_key = xor(final.proof, client_signature)
        if not hmac.compare_digest(digest(self.mechanism, client_key), credential.stored_key):
            raise SaslAuthenticationFailedError("Invalid client credentials")
        answer = server_final(keyed_hash(self.mechanism, credential.server_key, signed))
        self.authorization_id = first.username
        self._end(ServerState.COMPLETE)
        return answer

    def _end(self, state: ServerState) -> None:
        self.state = state
        self._first = self._server_first = self._credential = None
