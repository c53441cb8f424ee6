"""The four SCRAM messages (RFC 5802, section 7), parsed and written as Kafka's ScramMessages does.

Grammar (Kafka's patterns; `saslname` escapes "=" as "=3D" and "," as "=2C"):
- client-first: "n," ["a=" saslname] "," ["m=" value ","] "n=" saslname ",r=" nonce
  ("," ext "=" value)*. Only the gs2 flag "n" (no channel binding) is accepted.
- server-first: "r=" nonce ",s=" base64 salt ",i=" iterations (a positive integer).
- client-final: "c=" base64 ",r=" nonce ("," ext "=" value)* ",p=" base64 proof.
- server-final: "e=" error | "v=" base64 signature.
Worked example (RFC 7677): client-first "n,,n=user,r=rOprNGfwEbeRWgbNEkqO"; its bare part
"n=user,r=rOprNGfwEbeRWgbNEkqO"; the final's channel binding "c=biws" is base64 of "n,,".

Rules: a message that does not match its grammar raises `SaslAuthenticationFailedError`
naming which message it was (not its text: it may hold a proof). Messages are UTF-8.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass

from replog.errors import SaslAuthenticationFailedError

_SAFE = r"[\x01-\x2b\x2d-\x3c\x3e-\x7f]"  # 0x01-0x7F but "," and "="
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"  # 0x01-0x7F but ","
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"  # printable ASCII but ","
_SASLNAME = rf"(?:{_SAFE}|=2C|=3D)+"
_B64 = r"[a-zA-Z0-9/+]"
_BASE64 = rf"(?:{_B64}{{4}})*(?:{_B64}{{3}}=|{_B64}{{2}}==)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"

_CLIENT_FIRST = re.compile(
    rf"(?P<gs2>n,(?:a=(?P<authzid>{_SASLNAME}))?,)(?P<bare>(?:m={_VALUE},)?"
    rf"n=(?P<saslname>{_SASLNAME}),r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS}))"
)
_SERVER_FIRST = re.compile(
    rf"(?:m={_VALUE},)?r=(?P<nonce>{_PRINTABLE}),s=(?P<salt>{_BASE64}),i=(?P<iterations>[0-9]+)"
    rf"{_EXTENSIONS}"
)
_CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS})"
    rf",p=(?P<proof>{_BASE64})"
)
_SERVER_FINAL = re.compile(rf"e=(?P<error>{_SAFE}+)|v=(?P<signature>{_BASE64}){_EXTENSIONS}")


def sasl_name(username: str) -> str:
    return username.replace("=", "=3D").replace(",", "=2C")


def username_of(name: str) -> str:
    return name.replace("=2C", ",").replace("=3D", "=")


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _text(message: bytes, what: str) -> str:
    try:
        return message.decode()
    except UnicodeDecodeError:
        raise SaslAuthenticationFailedError(f"the SCRAM {what} is not UTF-8") from None


def _match(pattern: re.Pattern[str], message: bytes, what: str) -> re.Match[str]:
    found = pattern.fullmatch(_text(message, what))
    if found is None:
        raise SaslAuthenticationFailedError(f"invalid SCRAM {what} format")
    return found


def _unb64(text: str) -> bytes:
    # The grammar admits whole base64 quads only, which always decode.
    return base64.b64decode(text, validate=True)


@dataclass(frozen=True, slots=True)
class ClientFirst:
    gs2_header: str  # "n,," or "n,a=NAME,"
    authorization_id: str  # "" when the client named none
    username: str
    nonce: str
    extensions: dict[str, str]
    bare: str  # the message without its gs2 header, as the AuthMessage takes it

    def to_bytes(self) -> bytes:
        return (self.gs2_header + self.bare).encode()


def client_first(username: str, nonce: str) -> ClientFirst:
    bare = f"n={sasl_name(username)},r={nonce}"
    return ClientFirst("n,,", "", username, nonce, {}, bare)


def parse_client_first(message: bytes) -> ClientFirst:
    found = _match(_CLIENT_FIRST, message, "client first message")
    extensions = dict(item.split("=", 1) for item in found["extensions"].split(",") if item)
    authzid = found["authzid"]
    return ClientFirst(
        gs2_header=found["gs2"],
        authorization_id=username_of(authzid) if authzid else "",
        username=username_of(found["saslname"]),
        nonce=found["nonce"],
        extensions=extensions,
        bare=found["bare"],
    )


@dataclass(frozen=True, slots=True)
class ServerFirst:
    nonce: str  # the client's nonce followed by the server's
    salt: bytes
    iterations: int

    def to_bytes(self) -> bytes:
        return f"r={self.nonce},s={b64(self.salt)},i={self.iterations}".encode()


def parse_server_first(message: bytes) -> tuple[ServerFirst, str]:
    """The server-first message and its text (the AuthMessage takes it as received)."""
    found = _match(_SERVER_FIRST, message, "server first message")
    iterations = int(found["iterations"])
    if iterations <= 0:
        raise SaslAuthenticationFailedError(f"invalid SCRAM iterations {iterations}")
    return ServerFirst(found["nonce"], _unb64(found["salt"]), iterations), found.string


@dataclass(frozen=True, slots=True)
class ClientFinal:
    channel_binding: bytes
    nonce: str
    proof: bytes
    without_proof: str  # as the AuthMessage takes it

    def to_bytes(self) -> bytes:
        return f"{self.without_proof},p={b64(self.proof)}".encode()


def client_final_without_proof(channel_binding: bytes, nonce: str) -> str:
    return f"c={b64(channel_binding)},r={nonce}"


def parse_client_final(message: bytes) -> ClientFinal:
    found = _match(_CLIENT_FINAL, message, "client final message")
    return ClientFinal(
        channel_binding=_unb64(found["channel"]),
        nonce=found["nonce"],
        proof=_unb64(found["proof"]),
        without_proof=found["without_proof"],
    )


def server_final(signature: bytes) -> bytes:
    return f"v={b64(signature)}".encode()


def parse_server_final(message: bytes) -> tuple[str | None, bytes]:
    """(the server's error, b"") or (None, its signature)."""
    found = _match(_SERVER_FINAL, message, "server final message")
    if found["error"] is not None:
        return found["error"], b""
    return None, _unb64(found["signature"])


def auth_message(first_bare: str, server_first_text: str, final_without_proof: str) -> bytes:
    return f"{first_bare},{server_first_text},{final_without_proof}".encode()
