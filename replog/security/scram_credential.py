"""SCRAM credentials (RFC 5802, section 3, Kafka's ScramFormatter): what a server stores for a user
instead of the password, and the arithmetic both sides of an exchange share.

Rules:
- SaltedPassword = PBKDF2(HMAC-H, UTF-8 password, salt, iterations); ClientKey =
  HMAC(SaltedPassword, "Client Key"); StoredKey = H(ClientKey); ServerKey =
  HMAC(SaltedPassword, "Server Key"). The password is used as its UTF-8 bytes, without
  SASLprep, as Kafka does.
- A credential stores salt, StoredKey, ServerKey and iterations, never the password nor the
  salted password; its repr shows neither key.
- Iterations lie in 4096..16384 and the salt is not empty, else `UnacceptableCredentialError`
  (AlterUserScramCredentials' answer).
- Pure: the salt comes from the caller.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from replog.common.scram_mechanism import MAX_ITERATIONS, MIN_ITERATIONS, ScramMechanism
from replog.errors import UnacceptableCredentialError

CLIENT_KEY = b"Client Key"
SERVER_KEY = b"Server Key"


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:
        return f"ScramCredential(iterations={self.iterations}, salt of {len(self.salt)} bytes)"


def salted_password(
    mechanism: ScramMechanism, password: str, salt: bytes, iterations: int
) -> bytes:
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode(), salt, iterations)


def keyed_hash(mechanism: ScramMechanism, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, mechanism.hash_name).digest()


def digest(mechanism: ScramMechanism, data: bytes) -> bytes:
    return hashlib.new(mechanism.hash_name, data).digest()


def xor(left: bytes, right: bytes) -> bytes:
    return bytes(a ^ b for a, b in zip(left, right, strict=True))


def check_credential_inputs(salt: bytes, iterations: int) -> None:
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise UnacceptableCredentialError(
            f"iterations {iterations} not in {MIN_ITERATIONS}..{MAX_ITERATIONS}"
        )
    if not salt:
        raise UnacceptableCredentialError("the salt is empty")


def credential_from_salted_password(
    mechanism: ScramMechanism, salted: bytes, salt: bytes, iterations: int
) -> ScramCredential:
    """The credential of a salted password (what AlterUserScramCredentials sends)."""
    check_credential_inputs(salt, iterations)
    if len(salted) != mechanism.digest_size:
        raise UnacceptableCredentialError(
            f"a {mechanism.mechanism_name} salted password is {mechanism.digest_size} bytes, "
            f"got {len(salted)}"
        )
    return ScramCredential(
        salt=salt,
        stored_key=digest(mechanism, keyed_hash(mechanism, salted, CLIENT_KEY)),
        server_key=keyed_hash(mechanism, salted, SERVER_KEY),
        iterations=iterations,
    )


def derive_credential(
    mechanism: ScramMechanism, password: str, salt: bytes, iterations: int
) -> ScramCredential:
    """The credential of `password` with `salt` and `iterations`."""
    check_credential_inputs(salt, iterations)
    return credential_from_salted_password(
        mechanism, salted_password(mechanism, password, salt, iterations), salt, iterations
    )
