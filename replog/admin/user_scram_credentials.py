"""The SCRAM credential calls of the admin client (Kafka's Admin.alterUserScramCredentials and
describeUserScramCredentials): requests built and answers read.

Rules (Kafka's admin client):
- An upsertion is salted here, on the client: a fresh random salt (Kafka's
  `ScramFormatter.secureRandomBytes`: a 130-bit random number's base-36 digits), and the
  salted password PBKDF2(password, salt, iterations) is what travels; the password never does.
- Iterations default to 4096 (kafka-configs.sh's default).
- Each user's answer keeps its error (None: done); describe answers name each mechanism by
  its SASL name with its iterations.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

from replog.common.scram_mechanism import MECHANISM_BY_CODE, MECHANISM_BY_NAME
from replog.errors import KafkaError, UnsupportedSaslMechanismError, error_for_code
from replog.kafka.messages.alter_user_scram_credentials_request import (
    AlterUserScramCredentialsRequest,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from replog.kafka.messages.alter_user_scram_credentials_response import (
    AlterUserScramCredentialsResponse,
)
from replog.kafka.messages.describe_user_scram_credentials_request import (
    DescribeUserScramCredentialsRequest,
    UserName,
)
from replog.kafka.messages.describe_user_scram_credentials_response import (
    DescribeUserScramCredentialsResponse,
)
from replog.security.scram_credential import salted_password

DEFAULT_ITERATIONS = 4096
_SALT_BITS = 130
_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"


@dataclass(frozen=True, slots=True)
class ScramUserUpsertion:
    user: str
    mechanism: str  # "SCRAM-SHA-256" or "SCRAM-SHA-512"
    password: str = field(repr=False)
    iterations: int = DEFAULT_ITERATIONS


@dataclass(frozen=True, slots=True)
class ScramUserDeletion:
    user: str
    mechanism: str


@dataclass(frozen=True, slots=True)
class UserScramCredentials:
    """One user's answer: its mechanisms and iterations, or its error."""

    user: str
    error: KafkaError | None
    credentials: tuple[tuple[str, int], ...] = ()  # (mechanism name, iterations)


def random_salt() -> bytes:
    value = secrets.randbits(_SALT_BITS)
    digits = ""
    while value:
        value, digit = divmod(value, 36)
        digits = _DIGITS[digit] + digits
    return (digits or "0").encode()


def _mechanism_code(name: str) -> int:
    mechanism = MECHANISM_BY_NAME.get(name.upper())
    if mechanism is None:
        raise UnsupportedSaslMechanismError(
            f"{name}: not a SCRAM mechanism (accepted: {', '.join(MECHANISM_BY_NAME)})"
        )
    return mechanism.code


def alter_request(
    deletions: list[ScramUserDeletion], upsertions: list[ScramUserUpsertion]
) -> AlterUserScramCredentialsRequest:
    salted = []
    for u in upsertions:
        code = _mechanism_code(u.mechanism)
        salt = random_salt()
        salted.append(
            ScramCredentialUpsertion(
                name=u.user,
                mechanism=code,
                iterations=u.iterations,
                salt=salt,
                salted_password=salted_password(
                    MECHANISM_BY_CODE[code], u.password, salt, u.iterations
                ),
            )
        )
    return AlterUserScramCredentialsRequest(
        deletions=[
            ScramCredentialDeletion(name=d.user, mechanism=_mechanism_code(d.mechanism))
            for d in deletions
        ],
        upsertions=salted,
    )


def _error(code: int, message: str | None) -> KafkaError | None:
    return None if code == 0 else error_for_code(code, message or "")


def altered(answer: AlterUserScramCredentialsResponse) -> dict[str, KafkaError | None]:
    return {r.user: _error(r.error_code, r.error_message) for r in answer.results}


def describe_request(users: list[str] | None) -> DescribeUserScramCredentialsRequest:
    return DescribeUserScramCredentialsRequest(
        users=None if not users else [UserName(name=u) for u in users]
    )


def described(answer: DescribeUserScramCredentialsResponse) -> list[UserScramCredentials]:
    whole = _error(answer.error_code, answer.error_message)
    if whole is not None:
        raise whole
    return [
        UserScramCredentials(
            r.user,
            _error(r.error_code, r.error_message),
            tuple(
                (
                    MECHANISM_BY_CODE[c.mechanism].mechanism_name
                    if c.mechanism in MECHANISM_BY_CODE
                    else f"UNKNOWN({c.mechanism})",
                    c.iterations,
                )
                for c in r.credential_infos
            ),
        )
        for r in answer.results
    ]
