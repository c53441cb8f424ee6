"""Transaction verification at a partition leader (KIP-890 part 1) and the partitions Produce
v12 and TxnOffsetCommit v5 add to a transaction (part 2): which appends must ask the
transaction coordinator first, how, and what the coordinator's answer becomes for the client.

Rules (Kafka 4.x's `AddPartitionsToTxnManager` and `ReplicaManager.appendRecords`):
- A transactional batch needs the coordinator when its producer has no transaction open on the
  partition at the batch's epoch (`needs_verification`); a batch of an open transaction, a
  non-transactional batch and a coordinator's own append never do.
- What the leader asks depends on the request's version (`operation_for_produce`,
  `operation_for_txn_offset_commit`): Produce v12+ and TxnOffsetCommit v5+ (transaction
  version 2) add the partition; older versions only verify that the client added it.
- A verification holds until the producer's entry on the partition changes in value (Kafka's
  `VerificationGuard`, which any transactional batch of the producer clears:
  `still_verified`; an entry rebuilt equal by a reload of the producer state is no change,
  while a marker changes its timestamp and coordinator epoch, one of which differs unless
  the marker came in the same millisecond from the same coordinator epoch): a batch of the
  same transaction that landed meanwhile leaves it open at the epoch, so the append needs no
  verification; a marker ended the verified transaction
  (the client's abort at the same epoch, the coordinator's fencing abort at a later one), and
  appending then would open a transaction the coordinator does not know (a hanging
  transaction): such an append is INVALID_TXN_STATE. One marker leaves it standing, as
  Kafka's does: with transaction version 2 (an add) a marker at the batch's own epoch, which
  ends the previous transaction (EndTxn bumps the epoch, so its markers carry the next
  transaction's and may still be landing while its first append is verified). The produce
  path and the group coordinator's TxnOffsetCommit (its `__consumer_offsets` partition) both
  check it right before their append, with no await in between.
- `transaction.partition.verification.enable` (Kafka's broker setting, default true, dynamic:
  this broker's level, else the cluster default, else server.properties:
  `verification_enabled`) false skips the verification of clients that only verify (Produce
  v11-, TxnOffsetCommit v4-); an add (transaction version 2) is still asked, as Kafka's
  `ReplicaManager` does (`skips_verification`).
- The coordinator's answer per partition (`client_error`): PRODUCER_FENCED is
  INVALID_PRODUCER_EPOCH (what producers expect here); CLUSTER_AUTHORIZATION_FAILED
  INVALID_TXN_STATE; TRANSACTION_ABORTABLE INVALID_TXN_STATE for clients older than the
  error (Produce v10-, TxnOffsetCommit v3-); for Produce, a coordinator that could not answer
  (NETWORK_EXCEPTION, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE,
  NOT_COORDINATOR, and CONCURRENT_TRANSACTIONS for clients before transaction version 2) is
  NOT_ENOUGH_REPLICAS, which every producer retries without a metadata refresh.
- An add (transaction version 2) answered CONCURRENT_TRANSACTIONS, the producer's previous
  transaction's markers still being written, is asked again ADD_RETRY_BACKOFF_MS later while
  less than ADD_RETRY_MAX_MS have passed since the first ask (`add_retry_delay_ms`), as Kafka's
  leader does before it answers the client (KAFKA-18654): a producer that starts its next
  transaction at once waits for the markers inside its Produce, not in retries of its own.
Pure: no I/O, clock or asyncio.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from replog.errors import (
    ConcurrentTransactionsError,
    ConfigError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    KafkaError,
    NetworkError,
    NotCoordinatorError,
    NotEnoughReplicasError,
    ProducerFencedError,
    TransactionAbortableError,
)

if TYPE_CHECKING:  # a type only: a node's settings check need not import the producer state
    from replog.replication.producer_state import ProducerEntry

__all__ = [
    "VERIFICATION_ENABLE",
    "TxnOperation",
    "check_static_verification",
    "client_error",
    "needs_verification",
    "operation_for_produce",
    "operation_for_txn_offset_commit",
    "skips_verification",
    "still_verified",
    "verification_enabled",
]


class TxnOperation(enum.Enum):
    """What a leader asks the coordinator, by the client's request version (Kafka's
    `TransactionSupportedOperation`)."""

    DEFAULT_ERROR = "verify"  # older clients: verify, TRANSACTION_ABORTABLE unknown to them
    GENERIC_ERROR_SUPPORTED = "verify, abortable"  # verify; the client knows the error
    ADD_PARTITION = "add"  # transaction version 2: add the partition to the transaction

    @property
    def adds(self) -> bool:
        return self is TxnOperation.ADD_PARTITION


def operation_for_produce(version: int) -> TxnOperation:
    if version >= 12:
        return TxnOperation.ADD_PARTITION
    if version >= 11:
        return TxnOperation.GENERIC_ERROR_SUPPORTED
    return TxnOperation.DEFAULT_ERROR


def operation_for_txn_offset_commit(version: int) -> TxnOperation:
    if version >= 5:
        return TxnOperation.ADD_PARTITION
    if version >= 4:
        return TxnOperation.GENERIC_ERROR_SUPPORTED
    return TxnOperation.DEFAULT_ERROR


def needs_verification(entry: ProducerEntry | None, producer_epoch: int) -> bool:
    """Whether a transactional batch at `producer_epoch` of the producer `entry` describes (None:
    unknown to the partition) must be verified before it is appended."""
    return not (
        entry is not None and entry.in_transaction and entry.producer_epoch == producer_epoch
    )


def still_verified(
    before: ProducerEntry | None,
    now: ProducerEntry | None,
    producer_epoch: int,
    operation: TxnOperation,
) -> bool:
    """Whether a verification of a batch at `producer_epoch`, asked when the producer's entry
    was `before`, still holds with the entry `now` (module Rules): unchanged; its transaction
    open at the epoch; or, for an add (transaction version 2), a marker at the batch's epoch
    (the previous transaction's)."""
    if now == before:  # by value: a reload of the producer state builds equal entries
        return True
    if now is None:  # the producer expired meanwhile: nothing ended the transaction
        return True
    if now.producer_epoch == producer_epoch:
        return now.in_transaction or operation.adds
    return False


VERIFICATION_ENABLE = "transaction.partition.verification.enable"


def verification_enabled(levels: Iterable[Mapping[str, str]]) -> bool:
    """`transaction.partition.verification.enable` from `levels`, strongest first (this
    broker's dynamic config, the cluster default, server.properties): the first that sets it
    to true or false (any case, as Kafka reads a boolean); true, Kafka's default, when none
    does. The controller refuses any other value of a dynamic level; server.properties is
    checked at start-up (`check_static_verification`)."""
    for level in levels:
        value = level.get(VERIFICATION_ENABLE)
        if value is not None and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
    return True


def check_static_verification(properties: Mapping[str, str]) -> None:
    """ConfigError unless server.properties' `transaction.partition.verification.enable`, if
    given, is true or false."""
    value = properties.get(VERIFICATION_ENABLE)
    if value is not None and value.strip().lower() not in ("true", "false"):
        raise ConfigError(f"{VERIFICATION_ENABLE}={value!r}: expected true or false")


def skips_verification(enabled: bool, operation: TxnOperation) -> bool:
    """Whether an append goes on without asking the coordinator (module Rules): verification
    turned off, for a client that only verifies; an add is asked whatever the setting."""
    return not enabled and not operation.adds


_UNANSWERED: tuple[type[KafkaError], ...] = (
    NetworkError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    NotCoordinatorError,
)


def client_error(
    error: KafkaError, operation: TxnOperation, *, produce: bool, where: str
) -> KafkaError:
    """What the client is answered for the coordinator's `error` about one partition (module
    Rules); `where` names the partition and transactional id."""
    underlying = f"{where}: {error.error_name}: {error}"
    if isinstance(error, ProducerFencedError):
        return InvalidProducerEpochError(underlying)
    if (
        error.error_name == "CLUSTER_AUTHORIZATION_FAILED"
        or isinstance(error, InvalidTxnStateError)
        or (
            isinstance(error, TransactionAbortableError) and operation is TxnOperation.DEFAULT_ERROR
        )
    ):
        return InvalidTxnStateError(f"{where}: the partition was not added to the transaction")
    if produce and (
        isinstance(error, _UNANSWERED)
        or (isinstance(error, ConcurrentTransactionsError) and not operation.adds)
    ):
        return NotEnoughReplicasError(
            f"{where}: unable to verify the partition has been added to the transaction; "
            f"underlying error: {error.error_name}: {error}"
        )
    return error


# Kafka's broker defaults `add.partitions.to.txn.retry.backoff.ms` and
# `add.partitions.to.txn.retry.backoff.max.ms`.
ADD_RETRY_BACKOFF_MS = 20
ADD_RETRY_MAX_MS = 100


def add_retry_delay_ms(
    errors: Iterable[KafkaError | None], operation: TxnOperation, elapsed_ms: float
) -> int | None:
    """How long to wait before asking the coordinator again, `elapsed_ms` after the first ask
    that got `errors`; None: answer the client (module Rules)."""
    if (
        operation.adds
        and elapsed_ms < ADD_RETRY_MAX_MS
        and any(isinstance(error, ConcurrentTransactionsError) for error in errors)
    ):
        return ADD_RETRY_BACKOFF_MS
    return None
