"""The controller's decisions on AlterUserScramCredentials (Kafka's ScramControlManager): the
records to write and each user's answer, over the credentials replayed so far.

Rules (Kafka 4.4.0):
- A request alters each user at most once: a second deletion or upsertion of a user (whatever
  the mechanism) fails that user with DUPLICATE_RESOURCE, and drops what the first one would
  have done. A user that already failed is not looked at again.
- Below `metadata.version` 3.5-IV2 (`scram_supported` false) the log takes no SCRAM record:
  every user is UNSUPPORTED_VERSION ("The current metadata.version does not support SCRAM"),
  before any other check.
- A deletion or upsertion needs a user name (UNACCEPTABLE_CREDENTIAL) and a known mechanism
  (UNSUPPORTED_SASL_MECHANISM); a deletion, a credential the user has for that mechanism
  (RESOURCE_NOT_FOUND); an upsertion, iterations in 4096..16384 ("Too few iterations", "Too
  many iterations": UNACCEPTABLE_CREDENTIAL).
- An accepted upsertion writes a `UserScramCredentialRecord` of the stored and server keys the
  client's salted password gives (never the salted password itself); a deletion, a
  `RemoveUserScramCredentialRecord`. All are written together.
- Answers come one per user, in the order users first appear (deletions before upsertions);
  Kafka's order is its hash maps'.
- `alter_credentials_write` is the controller write running these decisions over the
  controller's own credentials (its timeline state), its records atomic.
- Stricter than Kafka: a salted password that is not the mechanism's digest size, or an empty
  salt, is UNACCEPTABLE_CREDENTIAL (no client computes either).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from replog.common.scram_mechanism import (
    MAX_ITERATIONS,
    MECHANISM_BY_CODE,
    MIN_ITERATIONS,
    ScramMechanism,
)
from replog.errors import (
    DuplicateResourceError,
    KafkaError,
    ResourceNotFoundError,
    UnacceptableCredentialError,
    UnsupportedSaslMechanismError,
    UnsupportedVersionError,
)
from replog.quorum.controller.controller_result import ControllerResult
from replog.quorum.controller.operation import WriteContext
from replog.quorum.metadata.records import (
    RemoveUserScramCredentialRecord,
    UserScramCredentialRecord,
)
from replog.security.scram_credential import credential_from_salted_password
from replog.security.scram_store import record_of

TWICE = "A user credential cannot be altered twice in the same request"
NO_SCRAM = "The current metadata.version does not support SCRAM"


@dataclass(frozen=True, slots=True)
class ScramDeletion:
    name: str
    mechanism: int


@dataclass(frozen=True, slots=True)
class ScramUpsertion:
    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes

    def __repr__(self) -> str:
        return f"ScramUpsertion(name={self.name!r}, mechanism={self.mechanism})"


ScramRecord = UserScramCredentialRecord | RemoveUserScramCredentialRecord


class CredentialHolder(Protocol):
    """The credentials replayed so far (`ScramStore`, the controller's `ScramCredentials`)."""

    def mechanisms_of(self, name: str) -> list[int]: ...


def _mechanism(name: str, code: int) -> ScramMechanism:
    if not name:
        raise UnacceptableCredentialError("Username must not be empty")
    mechanism = MECHANISM_BY_CODE.get(code)
    if mechanism is None:
        raise UnsupportedSaslMechanismError("Unknown SCRAM mechanism")
    return mechanism


def _deletion_record(store: CredentialHolder, deletion: ScramDeletion) -> ScramRecord:
    _mechanism(deletion.name, deletion.mechanism)
    if deletion.mechanism not in store.mechanisms_of(deletion.name):
        raise ResourceNotFoundError("Attempt to delete a user credential that does not exist")
    return RemoveUserScramCredentialRecord(deletion.name, deletion.mechanism)


def _upsertion_record(upsertion: ScramUpsertion) -> ScramRecord:
    mechanism = _mechanism(upsertion.name, upsertion.mechanism)
    if upsertion.iterations < MIN_ITERATIONS:
        raise UnacceptableCredentialError("Too few iterations")
    if upsertion.iterations > MAX_ITERATIONS:
        raise UnacceptableCredentialError("Too many iterations")
    credential = credential_from_salted_password(
        mechanism, upsertion.salted_password, upsertion.salt, upsertion.iterations
    )
    return record_of(upsertion.name, mechanism, credential)


def alter_credentials(
    store: CredentialHolder,
    deletions: list[ScramDeletion],
    upsertions: list[ScramUpsertion],
    *,
    scram_supported: bool = True,
) -> tuple[list[ScramRecord], dict[str, KafkaError | None]]:
    """The records to write, and each user's answer (None: done); `scram_supported`: the
    finalized `metadata.version` takes SCRAM records."""
    planned: dict[str, ScramRecord] = {}
    answers: dict[str, KafkaError | None] = {}
    changes: list[ScramDeletion | ScramUpsertion] = [*deletions, *upsertions]
    for change in changes:
        user = change.name
        if isinstance(answers.get(user), KafkaError):
            continue
        if user in planned:
            del planned[user]
            answers[user] = DuplicateResourceError(TWICE)
            continue
        try:
            if not scram_supported:
                raise UnsupportedVersionError(NO_SCRAM)
            if isinstance(change, ScramDeletion):
                planned[user] = _deletion_record(store, change)
            else:
                planned[user] = _upsertion_record(change)
        except KafkaError as error:
            answers[user] = error
            continue
        answers[user] = None
    return list(planned.values()), answers


def alter_credentials_write(
    deletions: list[ScramDeletion], upsertions: list[ScramUpsertion]
) -> Callable[[WriteContext], ControllerResult[dict[str, KafkaError | None]]]:
    """The controller write of an AlterUserScramCredentials request: its decisions over the
    controller's credentials (`WriteContext.scram`), its records written together."""

    def alter(ctx: WriteContext) -> ControllerResult[dict[str, KafkaError | None]]:
        records, answers = alter_credentials(
            ctx.scram, deletions, upsertions, scram_supported=ctx.features.scram_supported()
        )
        return ControllerResult.of(records, answers, is_atomic=True)

    return alter
