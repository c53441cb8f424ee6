"""The transactional producer's state machine (Kafka's producer `TransactionManager`): which
user call is allowed when, what each coordinator answer means, which partitions and group
must be added to the transaction. Pure: the producer's shell sends what it says and reports
the answers.

States: UNINITIALIZED -> INITIALIZING (init_transactions) -> READY -> IN_TRANSACTION
(begin_transaction) -> COMMITTING_TRANSACTION or ABORTING_TRANSACTION -> READY; an abortable
error puts a transaction in ABORTABLE_ERROR, from which only abort_transaction leads on; a
fatal one puts the producer in FATAL_ERROR for good (close it).

Rules:
- Transitions are Kafka's `State.isTransitionValid`; an init, commit or abort called again
  after one that did not finish (a timeout) resumes it, as Kafka's pending result does; a call the
  state does not allow raises
  `TransactionStateError` naming the call and the state (a send outside a transaction, a
  commit without begin, a second init). In ABORTABLE_ERROR a send, commit or
  send_offsets_to_transaction raises the error that caused it (abort first); in FATAL_ERROR
  every call raises the fatal error.
- Answers are classified per API as Kafka's handlers do (`classify`): retry (after looking
  the coordinator up again for NOT_COORDINATOR and COORDINATOR_NOT_AVAILABLE), abortable, or
  fatal. PRODUCER_FENCED and INVALID_PRODUCER_EPOCH are fatal (another producer with this
  transactional id took over); so are TRANSACTIONAL_ID_AUTHORIZATION_FAILED, INVALID_TXN_STATE
  and every code the API does not name. A batch failing in a transaction is abortable unless
  fatal by Kafka's rule for batches (fenced, unauthorized, an unsupported version, a lost
  producer id mapping; a stale epoch, INVALID_PRODUCER_EPOCH, is abortable there: KIP-588).
- Transaction version 1: a partition is added with AddPartitionsToTxn before the first batch
  of the transaction is sent to it (`partitions_to_add`, `can_send`), the group with
  AddOffsetsToTxn before the TxnOffsetCommit. Version 2 (the brokers' finalized
  `transaction.version` >= 2, KIP-890): the Produce request (v12) and the TxnOffsetCommit add
  them, and every EndTxn answers the producer id and epoch to use next.
- Epoch bump: an abortable error that leaves the producer's sequences unknown (a failed
  batch, UNKNOWN_PRODUCER_ID, INVALID_PRODUCER_ID_MAPPING) needs a new epoch. With version 2
  the abort's EndTxn brings it; with version 1 the abort is followed by an InitProducerId
  with the current id and epoch (KIP-360), before READY.
"""

from __future__ import annotations

from enum import Enum

from replog.common import TopicPartition
from replog.errors import (
    ConcurrentTransactionsError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    IllegalGenerationError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    KafkaError,
    NotCoordinatorError,
    ProducerFencedError,
    ReplogError,
    RequestTimedOutError,
    TransactionAbortableError,
    TransactionStateError,
    UnknownMemberIdError,
    UnknownProducerIdError,
    UnknownTopicOrPartitionError,
)

__all__ = ["Outcome", "TransactionManager", "TxnState", "classify"]


class TxnState(Enum):
    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING_TRANSACTION = "COMMITTING_TRANSACTION"
    ABORTING_TRANSACTION = "ABORTING_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


S = TxnState
# target -> the states it may be entered from (FATAL_ERROR: from any).
_ALLOWED_FROM: dict[TxnState, frozenset[TxnState]] = {
    S.UNINITIALIZED: frozenset({S.READY}),
    S.INITIALIZING: frozenset({S.UNINITIALIZED, S.ABORTING_TRANSACTION}),
    S.READY: frozenset({S.INITIALIZING, S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION}),
    S.IN_TRANSACTION: frozenset({S.READY}),
    S.COMMITTING_TRANSACTION: frozenset({S.IN_TRANSACTION}),
    S.ABORTING_TRANSACTION: frozenset({S.IN_TRANSACTION, S.ABORTABLE_ERROR}),
    S.ABORTABLE_ERROR: frozenset({S.IN_TRANSACTION, S.COMMITTING_TRANSACTION, S.ABORTABLE_ERROR}),
}


class Outcome(Enum):
    DONE = "done"
    RETRY = "retry"  # ask again after the backoff
    FIND_COORDINATOR = "find coordinator"  # look the coordinator up again, then ask again
    ABORTABLE = "abortable"
    FATAL = "fatal"


# Answers every transactional API treats alike.
_FIND_AGAIN = (NotCoordinatorError, CoordinatorNotAvailableError)
_RETRY = (CoordinatorLoadInProgressError, ConcurrentTransactionsError)
_FENCED = (ProducerFencedError, InvalidProducerEpochError)
# Abortable, and the producer's sequence state is lost: a new epoch is needed.
_NEEDS_BUMP = (UnknownProducerIdError, InvalidProducerIdMappingError)
# API -> codes that are abortable for it (Kafka's handlers), beyond TRANSACTION_ABORTABLE.
_ABORTABLE_CODES = {
    "InitProducerId": frozenset[int](),
    "AddPartitionsToTxn": frozenset({29}),  # TOPIC_AUTHORIZATION_FAILED
    "AddOffsetsToTxn": frozenset({30}),  # GROUP_AUTHORIZATION_FAILED
    "TxnOffsetCommit": frozenset(
        {30, UnknownMemberIdError.code, IllegalGenerationError.code, FencedInstanceIdError.code}
    ),
    "EndTxn": frozenset[int](),
}


def classify(api: str, error: KafkaError | None) -> Outcome:
    """What an answer of `api` (a transactional API: InitProducerId, AddPartitionsToTxn,
    AddOffsetsToTxn, TxnOffsetCommit, EndTxn) with `error` means (module docstring)."""
    if api not in _ABORTABLE_CODES:
        raise ValueError(f"{api} is not a transactional API")
    if error is None:
        return Outcome.DONE
    if isinstance(error, _FIND_AGAIN) or (
        api == "TxnOffsetCommit" and isinstance(error, RequestTimedOutError)
    ):
        return Outcome.FIND_COORDINATOR
    if isinstance(error, _RETRY) or (
        api in ("AddPartitionsToTxn", "TxnOffsetCommit")
        and isinstance(error, UnknownTopicOrPartitionError)
    ):
        return Outcome.RETRY
    if isinstance(error, _FENCED):
        return Outcome.FATAL
    if isinstance(error, TransactionAbortableError) or error.code in _ABORTABLE_CODES[api]:
        return Outcome.ABORTABLE
    if api != "InitProducerId" and isinstance(error, _NEEDS_BUMP):
        return Outcome.ABORTABLE
    return Outcome.FATAL


class TransactionManager:
    """One transactional producer's transaction state (module docstring). Used on the
    client's event loop only."""

    def __init__(self, transactional_id: str, transaction_timeout_ms: int) -> None:
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.state = TxnState.UNINITIALIZED
        self.producer_id = -1
        self.epoch = -1
        self.version2 = False  # the brokers' finalized transaction.version >= 2
        self.last_error: ReplogError | None = None
        self.epoch_bump_required = False
        self.in_transaction: set[TopicPartition] = set()  # added (or, version 2, sent to)
        self.pending_add: set[TopicPartition] = set()  # to add before their first batch
        self.group_added = False  # AddOffsetsToTxn done in this transaction (version 1)

    # --- transitions ------------------------------------------------------------------------

    def _to(self, target: TxnState, call: str) -> None:
        if self.state is TxnState.FATAL_ERROR:
            assert self.last_error is not None
            raise self.last_error
        if target is not TxnState.FATAL_ERROR and self.state not in _ALLOWED_FROM[target]:
            raise TransactionStateError(
                f"transactional producer {self.transactional_id!r}: {call} is not allowed "
                f"in state {self.state.value}"
            )
        self.state = target

    def _require(self, call: str, *states: TxnState) -> None:
        """Raise unless the state is one of `states` (the error itself in an error state)."""
        if self.state in states:
            return
        if self.state in (TxnState.FATAL_ERROR, TxnState.ABORTABLE_ERROR):
            assert self.last_error is not None
            raise self.last_error
        allowed = " or ".join(s.value for s in states)
        raise TransactionStateError(
            f"transactional producer {self.transactional_id!r}: {call} needs state {allowed}, "
            f"not {self.state.value}"
            + (" (call begin_transaction first)" if self.state is TxnState.READY else "")
        )

    # --- init_transactions ------------------------------------------------------------------

    def begin_init(self) -> None:
        """init_transactions: the coordinator's InitProducerId is asked next; called again
        after one that timed out, it resumes it."""
        if self.state is TxnState.INITIALIZING:
            return
        self._to(TxnState.INITIALIZING, "init_transactions")

    def on_producer_id(self, producer_id: int, epoch: int) -> None:
        """InitProducerId answered: the producer is READY under this id and epoch."""
        self._require("InitProducerId's answer", TxnState.INITIALIZING)
        self.producer_id, self.epoch = producer_id, epoch
        self.epoch_bump_required = False
        self._to(TxnState.READY, "InitProducerId's answer")

    # --- the transaction --------------------------------------------------------------------

    def begin_transaction(self) -> None:
        self._require("begin_transaction", TxnState.READY)
        self._to(TxnState.IN_TRANSACTION, "begin_transaction")

    def check_sendable(self) -> None:
        """A send is allowed only inside a transaction (raises otherwise)."""
        self._require("send", TxnState.IN_TRANSACTION)

    def check_send(self, tp: TopicPartition) -> None:
        """A record for `tp` is sent: allowed only inside a transaction; the partition joins
        it (to be added before its first batch leaves, version 1)."""
        self._require("send", TxnState.IN_TRANSACTION)
        if tp not in self.in_transaction:
            if self.version2:
                self.in_transaction.add(tp)
            else:
                self.pending_add.add(tp)

    def can_send(self, tp: TopicPartition) -> bool:
        """Whether a batch of `tp` may leave now: the partition is in the transaction (added,
        or version 2), and no error stops the transaction."""
        if self.state is TxnState.FATAL_ERROR:
            return False
        return tp in self.in_transaction

    def partitions_to_add(self) -> list[TopicPartition]:
        """The partitions the next AddPartitionsToTxn names (version 1), sorted."""
        if self.state not in (TxnState.IN_TRANSACTION, TxnState.COMMITTING_TRANSACTION):
            return []
        return sorted(self.pending_add)

    def on_partitions_added(self, results: dict[TopicPartition, KafkaError | None]) -> Outcome:
        """AddPartitionsToTxn answered per partition: the worst outcome (fatal, abortable,
        find coordinator, retry, done); the partitions answered without error are added."""
        worst = Outcome.DONE
        order = list(Outcome)
        for tp, error in results.items():
            if error is not None and error.code == 55:  # OPERATION_NOT_ATTEMPTED: another failed
                continue
            outcome = classify("AddPartitionsToTxn", error)
            if outcome is Outcome.DONE:
                self.pending_add.discard(tp)
                self.in_transaction.add(tp)
                continue
            if outcome in (Outcome.ABORTABLE, Outcome.FATAL):
                self.fail(error, "AddPartitionsToTxn")  # type: ignore[arg-type]
            if order.index(outcome) > order.index(worst):
                worst = outcome
        return worst

    def check_send_offsets(self) -> None:
        self._require("send_offsets_to_transaction", TxnState.IN_TRANSACTION)

    def needs_add_offsets(self) -> bool:
        """Whether AddOffsetsToTxn goes before the TxnOffsetCommit (version 1, once)."""
        return not self.version2 and not self.group_added

    def on_offsets_added(self) -> None:
        self.group_added = True

    def begin_commit(self) -> None:
        """commit_transaction; called again after one that timed out, it resumes it."""
        if self.state is TxnState.COMMITTING_TRANSACTION:
            return
        self._require("commit_transaction", TxnState.IN_TRANSACTION)
        self._to(TxnState.COMMITTING_TRANSACTION, "commit_transaction")

    def begin_abort(self) -> None:
        """abort_transaction; called again after one that timed out, it resumes it."""
        if self.state is TxnState.ABORTING_TRANSACTION:
            return
        if self.state is not TxnState.ABORTABLE_ERROR:
            self._require("abort_transaction", TxnState.IN_TRANSACTION)
        self._to(TxnState.ABORTING_TRANSACTION, "abort_transaction")

    def needs_end_txn(self) -> bool:
        """Whether the ending transaction has anything at the coordinator (version 1: a
        partition or group added; version 2: a partition sent to or offsets sent). Kafka's
        producer skips EndTxn for an empty transaction."""
        return bool(self.in_transaction) or self.group_added

    def on_end_txn(self, producer_id: int = -1, epoch: int = -1) -> bool:
        """EndTxn answered without error (or skipped); version 2's answer carries the next
        producer id and epoch. True when READY; False when an InitProducerId must bump the
        epoch first (version 1, after an abort that needs it: `begin_init` follows)."""
        if self.state not in (TxnState.COMMITTING_TRANSACTION, TxnState.ABORTING_TRANSACTION):
            self._require(
                "EndTxn's answer", TxnState.COMMITTING_TRANSACTION, TxnState.ABORTING_TRANSACTION
            )
        if self.version2 and producer_id >= 0 and epoch >= 0:
            self.producer_id, self.epoch = producer_id, epoch
            self.epoch_bump_required = False
        self.in_transaction.clear()
        self.pending_add.clear()
        self.group_added = False
        if self.state is TxnState.ABORTING_TRANSACTION and self.epoch_bump_required:
            self._to(TxnState.INITIALIZING, "the epoch bump after the abort")
            return False
        self._to(TxnState.READY, "EndTxn's answer")
        return True

    # --- errors -----------------------------------------------------------------------------

    def fail(self, error: ReplogError, api: str = "Produce") -> Outcome:
        """An error that stops the transaction: fatal (fenced, unauthorized, a code the API
        does not name, anything before READY, an abort's EndTxn failing) or abortable
        (everything else a transaction meets). Returns which it was. A batch failing while
        the transaction aborts changes nothing: its records are aborted anyway."""
        state = self.state
        if api == "Produce" and state is TxnState.ABORTING_TRANSACTION and not _fatal(error, api):
            return Outcome.ABORTABLE
        if _fatal(error, api) or state not in (
            TxnState.IN_TRANSACTION,
            TxnState.COMMITTING_TRANSACTION,
            TxnState.ABORTABLE_ERROR,
        ):
            if state is not TxnState.FATAL_ERROR:
                self.last_error = error
            self.state = TxnState.FATAL_ERROR
            return Outcome.FATAL
        if api == "Produce" or isinstance(error, _NEEDS_BUMP):
            # A failed batch leaves the partition's sequences unknown (Kafka's
            # handleFailedBatch with KIP-360): the next transaction starts on a new epoch.
            self.epoch_bump_required = True
        if state is not TxnState.ABORTABLE_ERROR:
            self.last_error = error
        self.state = TxnState.ABORTABLE_ERROR
        return Outcome.ABORTABLE


# A batch's errors that end the producer (Kafka's maybeTransitionToErrorState):
# CLUSTER_AUTHORIZATION_FAILED, UNSUPPORTED_VERSION, INVALID_PRODUCER_ID_MAPPING,
# TRANSACTIONAL_ID_AUTHORIZATION_FAILED, PRODUCER_FENCED. INVALID_PRODUCER_EPOCH is not among
# them: a batch of an epoch the coordinator bumped (a timed-out transaction) is abortable
# (KIP-588).
_FATAL_FOR_BATCHES = frozenset({31, 35, 49, 53, 90})


def _fatal(error: ReplogError, api: str) -> bool:
    """Whether `error` met by `api` ends the producer (module docstring)."""
    if not isinstance(error, KafkaError):
        return False
    if api == "Produce":
        return error.code in _FATAL_FOR_BATCHES
    return isinstance(error, _FENCED) or classify(api, error) is Outcome.FATAL
