"""DescribeUserScramCredentials' answer over the SCRAM credentials of a metadata image (Kafka's
ScramImage.describe).

Rules (Kafka 4.4.0):
- No users asked (null or empty): every user with a credential, each with its mechanisms and
  iterations.
- Users asked: each once; a user asked twice is DUPLICATE_RESOURCE ("Cannot describe SCRAM
  credentials for the same user twice in a single request: NAME"), one without any credential
  RESOURCE_NOT_FOUND ("Attempt to describe a user credential that does not exist: NAME").
- Answers in the order users were first asked (all users: by name); mechanisms by code.
  Kafka's order is its hash maps'.
- Never a salt or key: the mechanism and iterations alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from replog.errors import DuplicateResourceError, KafkaError, ResourceNotFoundError

DUPLICATE_USER = "Cannot describe SCRAM credentials for the same user twice in a single request: "
NO_SUCH_USER = "Attempt to describe a user credential that does not exist: "


@dataclass(frozen=True, slots=True)
class UserScramDescription:
    user: str
    error: KafkaError | None
    credentials: tuple[tuple[int, int], ...] = ()  # (mechanism code, iterations)


def describe_credentials(
    iterations: Mapping[tuple[str, int], int], users: Iterable[str] | None
) -> list[UserScramDescription]:
    """Each user's answer, given every credential's iterations by (user, mechanism code)."""
    by_user: dict[str, list[tuple[int, int]]] = {}
    for (user, code), count in sorted(iterations.items()):
        by_user.setdefault(user, []).append((code, count))
    asked = list(users or ())
    if not asked:
        return [UserScramDescription(u, None, tuple(c)) for u, c in sorted(by_user.items())]
    twice = {user for user in asked if asked.count(user) > 1}
    answers = []
    for user in dict.fromkeys(asked):
        if user in twice:
            answers.append(
                UserScramDescription(user, DuplicateResourceError(DUPLICATE_USER + user))
            )
        elif user not in by_user:
            answers.append(UserScramDescription(user, ResourceNotFoundError(NO_SUCH_USER + user)))
        else:
            answers.append(UserScramDescription(user, None, tuple(by_user[user])))
    return answers
