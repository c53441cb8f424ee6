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
- A verification holds unless a marker of a later producer epoch reached the partition
  between the question and the append (`still_verified`): the coordinator fenced and aborted
  the verified transaction, and appending then would open one it does not know (a hanging
  transaction): such an append is INVALID_TXN_STATE. A marker at the batch's epoch ends an
  earlier transaction (transaction version 2 bumps the epoch at EndTxn, so the previous
  transaction's markers carry the next one's epoch and may still be landing while its first
  produce is verified) and leaves the verification standing.
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
from collections.abc import Iterable

from replog.errors import (
    ConcurrentTransactionsError,
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
from replog.replication.producer_state import ProducerEntry

__all__ = [
    "TxnOperation",
    "client_error",
    "needs_verification",
    "operation_for_produce",
    "operation_for_txn_offset_commit",
    "still_verified",
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
    before: ProducerEntry | None, now: ProducerEntry | None, producer_epoch: int
) -> bool:
    """Whether a verification of a batch at `producer_epoch`, asked when the producer's entry
    was `before`, still holds with the entry `now` (module Rules): unchanged, or not at a
    later epoch."""
    return now is before or now is None or now.producer_epoch <= producer_epoch


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
