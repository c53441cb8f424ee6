"""The server side of SASL/PLAIN (RFC 4616, Kafka's PlainSaslServer with its
PlainServerCallbackHandler): one client message, `authzid NUL username NUL password`.

Rules (Kafka's messages):
- The message must hold exactly three NUL-separated tokens; the username and the password must
  not be empty; an authorization id, when given, must be the username.
- The password is checked against the `user_NAME` entries of the listener's PlainLoginModule
  (`jaas_config.JaasConfig.plain_users`) in constant time; an unknown user and a wrong password
  fail alike ("Invalid username or password").
- Every failure raises `SaslAuthenticationFailedError`; its text never holds the password. A
  second message raises `IllegalSaslStateError`.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from replog.errors import IllegalSaslStateError, SaslAuthenticationFailedError

PLAIN = "PLAIN"


class PlainServer:
    __slots__ = ("_users", "authorization_id", "complete", "mechanism_name")

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self.mechanism_name = PLAIN
        self.authorization_id = ""
        self.complete = False

    def respond(self, message: bytes) -> bytes:
        """An empty answer once `message` authenticates its user."""
        if self.complete:
            raise IllegalSaslStateError("a PLAIN message after the exchange ended")
        tokens = message.split(b"\x00")
        if len(tokens) != 3:
            raise SaslAuthenticationFailedError(
                f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}"
            )
        try:
            authorization_id, username, password = (t.decode() for t in tokens)
        except UnicodeDecodeError:
            raise SaslAuthenticationFailedError("Invalid SASL/PLAIN response: not UTF-8") from None
        if not username:
            raise SaslAuthenticationFailedError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationFailedError("Authentication failed: password not specified")
        expected = self._users.get(username)
        # Compared even for an unknown user, so that the time taken does not tell users apart.
        matched = hmac.compare_digest(
            (expected if expected is not None else "\x00" + password).encode(), password.encode()
        )
        if expected is None or not matched:
            raise SaslAuthenticationFailedError(
                "Authentication failed: Invalid username or password"
            )
        if authorization_id and authorization_id != username:
            raise SaslAuthenticationFailedError(
                "Authentication failed: Client requested an authorization id that is different "
                "from username"
            )
        self.authorization_id = username
        self.complete = True
        return b""
