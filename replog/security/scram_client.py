"""The client side of a SCRAM exchange (RFC 5802, Kafka's ScramSaslClient) as a state machine:
`respond(b"")` gives client-first; the server-first gives client-final; the server-final is
verified and gives None.

Rules:
- The server's nonce must begin with the client's, and its iterations be at least 4096 (a
  server asking for fewer weakens the password's protection); the server-final must carry the
  server's signature over the exchange (proof that it holds the credential), or its error.
- Every failure raises `SaslAuthenticationFailedError` and ends the exchange; a message after
  the end raises `IllegalSaslStateError`.
- The client's nonce comes from the caller; the password is dropped once the salted password
  is computed, and the salted password once the exchange ends.
"""

from __future__ import annotations

import hmac
from enum import Enum

from replog.common.scram_mechanism import MIN_ITERATIONS, ScramMechanism
from replog.errors import IllegalSaslStateError, SaslAuthenticationFailedError
from replog.security.scram_credential import (
    CLIENT_KEY,
    SERVER_KEY,
    digest,
    keyed_hash,
    salted_password,
    xor,
)
from replog.security.scram_messages import (
    ClientFinal,
    auth_message,
    client_final_without_proof,
    client_first,
    parse_server_final,
    parse_server_first,
)


class ClientState(Enum):
    SEND_CLIENT_FIRST = "send client first"
    RECEIVE_SERVER_FIRST = "receive server first"
    RECEIVE_SERVER_FINAL = "receive server final"
    COMPLETE = "complete"
    FAILED = "failed"


class ScramClient:
    __slots__ = (
        "_auth_message",
        "_first_bare",
        "_nonce",
        "_password",
        "_salted",
        "mechanism",
        "state",
        "username",
    )

    def __init__(
        self, mechanism: ScramMechanism, username: str, password: str, client_nonce: str
    ) -> None:
        self.mechanism = mechanism
        self.username = username
        self._password: str | None = password
        self._nonce = client_nonce
        self.state = ClientState.SEND_CLIENT_FIRST
        self._first_bare = ""
        self._salted = b""
        self._auth_message = b""

    @property
    def complete(self) -> bool:
        return self.state is ClientState.COMPLETE

    def respond(self, challenge: bytes) -> bytes | None:
        """The next message to send after the server's `challenge` (b"" to begin); None once
        the server's final message is verified."""
        try:
            if self.state is ClientState.SEND_CLIENT_FIRST:
                return self._first(challenge)
            if self.state is ClientState.RECEIVE_SERVER_FIRST:
                return self._final(challenge)
            if self.state is ClientState.RECEIVE_SERVER_FINAL:
                self._verify(challenge)
                return None
        except SaslAuthenticationFailedError:
            self._end(ClientState.FAILED)
            raise
        raise IllegalSaslStateError(
            f"a {self.mechanism.mechanism_name} challenge after the exchange ended "
            f"({self.state.value})"
        )

    def _first(self, challenge: bytes) -> bytes:
        if challenge:
            raise SaslAuthenticationFailedError("a challenge before the client's first message")
        first = client_first(self.username, self._nonce)
        self._first_bare = first.bare
        self.state = ClientState.RECEIVE_SERVER_FIRST
        return first.to_bytes()

    def _final(self, challenge: bytes) -> bytes:
        server_first, text = parse_server_first(challenge)
        if not server_first.nonce.startswith(self._nonce):
            raise SaslAuthenticationFailedError(
                "Invalid server nonce: does not start with client nonce"
            )
        if server_first.iterations < MIN_ITERATIONS:
            raise SaslAuthenticationFailedError(
                f"Requested iterations {server_first.iterations} is less than the minimum "
                f"{MIN_ITERATIONS} for {self.mechanism.mechanism_name}"
            )
        assert self._password is not None
        self._salted = salted_password(
            self.mechanism, self._password, server_first.salt, server_first.iterations
        )
        self._password = None
        without_proof = client_final_without_proof(b"n,,", server_first.nonce)
        self._auth_message = auth_message(self._first_bare, text, without_proof)
        client_key = keyed_hash(self.mechanism, self._salted, CLIENT_KEY)
        signature = keyed_hash(
            self.mechanism, digest(self.mechanism, client_key), self._auth_message
        )
        final = ClientFinal(b"n,,", server_first.nonce, xor(client_key, signature), without_proof)
        self.state = ClientState.RECEIVE_SERVER_FINAL
        return final.to_bytes()

    def _verify(self, challenge: bytes) -> None:
        error, signature = parse_server_final(challenge)
        if error is not None:
            raise SaslAuthenticationFailedError(
                f"Sasl authentication using {self.mechanism.mechanism_name} failed with error: "
                f"{error}"
            )
        server_key = keyed_hash(self.mechanism, self._salted, SERVER_KEY)
        expected = keyed_hash(self.mechanism, server_key, self._auth_message)
        if not hmac.compare_digest(signature, expected):
            raise SaslAuthenticationFailedError("Invalid server signature in server final message")
        self._end(ClientState.COMPLETE)

    def _end(self, state: ClientState) -> None:
        self.state = state
        self._password = None
        self._salted = self._auth_message = b""
