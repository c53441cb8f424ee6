"""What a transaction coordinator answers to InitProducerId, AddPartitionsToTxn (and its
verification), AddOffsetsToTxn and EndTxn, and what it does about timed-out and expired
transactional ids (Kafka's `TransactionCoordinator`): each is a decision over one
transactional id's `TxnMetadata`, a `Refuse`, an `Answer` (nothing to write) or an `Append`
(a record for `__transaction_state`; the shell appends it, then `complete`s or `abandon`s).

Rules (Kafka 4.x's, transaction versions 0-1 and 2):
- InitProducerId: no transactional id gets a fresh producer id at epoch 0; an empty one is
  INVALID_REQUEST; a timeout outside 1..transaction.max.timeout.ms is
  INVALID_TRANSACTION_TIMEOUT; a pending transition or a Prepare* state is
  CONCURRENT_TRANSACTIONS (retriable); an expected producer id that is neither the current one
  (nor the previous one at an exhausted epoch, a retried rotation) is PRODUCER_FENCED; idle,
  the epoch is bumped (a new producer id at an exhausted epoch); Ongoing, the transaction is
  fenced and aborted by the coordinator, and the caller told CONCURRENT_TRANSACTIONS, so that
  its retry bumps the epoch once more.
- AddPartitionsToTxn / AddOffsetsToTxn: unknown id or another producer id
  INVALID_PRODUCER_ID_MAPPING, another epoch PRODUCER_FENCED, pending or Prepare*
  CONCURRENT_TRANSACTIONS, partitions already in the Ongoing transaction answered at once.
- EndTxn, either version: another producer id is INVALID_PRODUCER_ID_MAPPING; then, before
  the epoch is looked at, a pending transition (other than an epoch fence) or a Prepare*
  state (its markers being written) is CONCURRENT_TRANSACTIONS, as in Kafka since
  KAFKA-18464: with version 2 the next transaction's first EndTxn carries the epoch the
  previous EndTxn bumped to, and must wait for its Complete* rather than be fenced.
- EndTxn, version 1: the epoch must equal the current one (a coordinator's own abort may be
  higher); Ongoing goes to Prepare*; a commit or abort repeated after its Complete* is
  answered at once; anything else INVALID_TXN_STATE. Version 2 (every EndTxn bumps the
  epoch): a retry is recognised by the caller's epoch being the bumped one minus one; Empty
  and Complete* accept an abort at the current epoch (an abort with no partition); the table
  in `_end_txn_v2`.
- The answer of an EndTxn is sent once Prepare* is committed; the markers follow, then
  Complete* (`complete_after_markers`).
- Timeouts: an Ongoing transaction older than its timeout is fenced and aborted by the
  coordinator (`timed_out`, `abort_timed_out`); an id idle in Empty or Complete* for
  transactional.id.expiration.ms expires (`expired_ids`, then a tombstone).
- A failed append to `__transaction_state` (`state_append_error`, Kafka's
  `TransactionStateManager.appendTransactionToLog`): no partition, too few replicas or no
  acknowledgement in time is COORDINATOR_NOT_AVAILABLE (retriable: the client asks again,
  perhaps elsewhere); a replica that is no longer the leader or a failed disk NOT_COORDINATOR;
  anything else UNKNOWN_SERVER_ERROR.
Pure: the producer-id allocator is a callable; times are arguments.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from replog.common.topic_partition import TopicPartitionKey
from replog.coordinator.transaction_metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    SHORT_MAX,
    TxnMetadata,
    TxnState,
    is_epoch_exhausted,
    prepare_abort_or_commit,
    prepare_add_partitions,
    prepare_complete,
    prepare_fence_producer_epoch,
    prepare_increment_producer_epoch,
    prepare_producer_id_rotation,
)
from replog.errors import (
    ConcurrentTransactionsError,
    CoordinatorNotAvailableError,
    InvalidProducerIdMappingError,
    InvalidRequestError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    KafkaError,
    KafkaStorageError,
    NotCoordinatorError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    ProducerFencedError,
    RequestTimedOutError,
    TransactionAbortableError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
)

__all__ = [
    "Answer",
    "Append",
    "Decision",
    "Refuse",
    "abort_timed_out",
    "add_partitions",
    "complete_after_markers",
    "end_txn",
    "expired_ids",
    "init_producer_id",
    "state_append_error",
    "timed_out",
    "verify_partitions",
]


@dataclass(frozen=True)
class Refuse:
    error: type[KafkaError]
    message: str

    def exception(self) -> KafkaError:
        return self.error(self.message)


@dataclass(frozen=True)
class Answer:
    """Success with nothing to write (a fresh idempotent producer id, a repeated request)."""

    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True)
class Append:
    """Append `record` to `__transaction_state`; `pending` is the metadata to keep meanwhile.
    Once committed: `complete(pending, record)`, then answer `answer_error` if set (an
    InitProducerId that fenced an ongoing transaction) or success; if `record` is Prepare*,
    write the markers. If the append fails: `abandon(pending, fence=fence)`."""

    pending: TxnMetadata
    record: TxnMetadata
    answer_error: type[KafkaError] | None = None
    fence: bool = False


Decision = Refuse | Answer | Append
ProducerIds = Callable[[], int]


def _tid(transactional_id: str | None, meta: TxnMetadata | None) -> str:
    return f"transactional id {transactional_id!r}" + (
        "" if meta is None else f" (producer id {meta.producer_id}, epoch {meta.producer_epoch})"
    )


def init_producer_id(
    meta: TxnMetadata | None,
    transactional_id: str | None,
    timeout_ms: int,
    expected: tuple[int, int] | None,
    *,
    now_ms: int,
    max_timeout_ms: int,
    allocate: ProducerIds,
    server_version: int,
) -> Decision:
    """InitProducerId (module Rules); `expected`: the caller's (producer id, epoch), KIP-360."""
    if transactional_id is None:
        return Answer(allocate(), 0)
    if transactional_id == "":
        return Refuse(InvalidRequestError, "a transactional id must not be empty")
    if not 0 < timeout_ms <= max_timeout_ms:
        return Refuse(
            InvalidTransactionTimeoutError,
            f"transaction timeout {timeout_ms} ms for {_tid(transactional_id, None)} is outside "
            f"1..{max_timeout_ms} ms (transaction.max.timeout.ms)",
        )
    if meta is None:
        meta = TxnMetadata(
            transactional_id, allocate(), timeout_ms=timeout_ms, last_update_ms=now_ms
        )
    who = _tid(transactional_id, meta)
    if meta.pending_transition or meta.state in (TxnState.PREPARE_ABORT, TxnState.PREPARE_COMMIT):
        return Refuse(ConcurrentTransactionsError, f"{who}: the previous transaction is completing")
    if expected is not None and not (
        meta.producer_epoch == NO_PRODUCER_EPOCH
        or expected[0] == meta.producer_id
        or (expected[0] == meta.prev_producer_id and is_epoch_exhausted(expected[1]))
    ):
        return Refuse(ProducerFencedError, f"{who}: producer id {expected[0]} was fenced")
    if meta.state is TxnState.ONGOING:
        decision = abort_timed_out(
            meta, now_ms=now_ms, server_version=server_version, allocate=allocate
        )
        if isinstance(decision, Append):
            return replace(decision, answer_error=ConcurrentTransactionsError)
        return decision
    _check_resting(who, meta.state)
    if is_epoch_exhausted(meta.producer_epoch) and (
        expected is None or expected[1] == meta.producer_epoch
    ):
        pending, record = prepare_producer_id_rotation(
            meta, allocate(), timeout_ms, now_ms, record_last_epoch=expected is not None
        )
        return Append(pending, record)
    prepared = prepare_increment_producer_epoch(
        meta, timeout_ms, None if expected is None else expected[1], now_ms
    )
    if prepared is None:
        return Refuse(ProducerFencedError, f"{who}: epoch {expected and expected[1]} was fenced")
    return Append(*prepared)


def _member_checks(
    meta: TxnMetadata | None, transactional_id: str, producer_id: int, epoch: int
) -> Refuse | None:
    if meta is None or meta.producer_id != producer_id:
        return Refuse(
            InvalidProducerIdMappingError,
            f"{_tid(transactional_id, meta)}: producer id {producer_id} is not its producer id",
        )
    if meta.producer_epoch != epoch:
        return Refuse(
            ProducerFencedError,
            f"{_tid(transactional_id, meta)}: epoch {epoch} is fenced",
        )
    return None


def add_partitions(
    meta: TxnMetadata | None,
    transactional_id: str,
    producer_id: int,
    epoch: int,
    partitions: Iterable[TopicPartitionKey],
    *,
    now_ms: int,
    version: int,
) -> Decision:
    """AddPartitionsToTxn from a client, and AddOffsetsToTxn (the group's offsets partition)."""
    if not transactional_id:
        return Refuse(InvalidRequestError, "a transactional id must not be empty")
    refused = _member_checks(meta, transactional_id, producer_id, epoch)
    if refused is not None:
        return refused
    assert meta is not None
    added = frozenset(partitions)
    if meta.pending_transition or meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
        return Refuse(
            ConcurrentTransactionsError,
            f"{_tid(transactional_id, meta)}: the previous transaction is completing",
        )
    if meta.state is TxnState.ONGOING and added <= meta.partitions:
        return Answer(meta.producer_id, meta.producer_epoch)
    return Append(*prepare_add_partitions(meta, added, now_ms, version))


def verify_partitions(
    meta: TxnMetadata | None,
    transactional_id: str,
    producer_id: int,
    epoch: int,
    partitions: Iterable[TopicPartitionKey],
) -> dict[TopicPartitionKey, type[KafkaError] | None]:
    """A broker's AddPartitionsToTxn verification (KIP-890 part 1): per partition None when it
    is in the transaction, TRANSACTION_ABORTABLE when not; the whole request's error otherwise."""
    parts = list(partitions)
    if not transactional_id:
        return dict.fromkeys(parts, InvalidRequestError)
    refused = _member_checks(meta, transactional_id, producer_id, epoch)
    if refused is not None:
        return dict.fromkeys(parts, refused.error)
    assert meta is not None
    if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
        return dict.fromkeys(parts, ConcurrentTransactionsError)
    return {p: None if p in meta.partitions else TransactionAbortableError for p in parts}


def end_txn(
    meta: TxnMetadata | None,
    transactional_id: str,
    producer_id: int,
    epoch: int,
    *,
    commit: bool,
    from_client: bool,
    version: int,
    now_ms: int,
    allocate: ProducerIds,
) -> Decision:
    """EndTxn (module Rules); `from_client` False for the coordinator's own aborts."""
    if not transactional_id:
        return Refuse(InvalidRequestError, "a transactional id must not be empty")
    if meta is None:
        return Refuse(
            InvalidProducerIdMappingError,
            f"{_tid(transactional_id, None)}: no transaction state (InitProducerId first)",
        )
    if version >= 2:
        return _end_txn_v2(
            meta,
            transactional_id,
            producer_id,
            epoch,
            commit,
            from_client,
            version,
            now_ms,
            allocate,
        )
    who = _tid(transactional_id, meta)
    if meta.producer_id != producer_id:
        return Refuse(InvalidProducerIdMappingError, f"{who}: producer id {producer_id} is not its")
    fencing = meta.pending is TxnState.PREPARE_EPOCH_FENCE
    if _in_transition(meta, fencing):
        return _concurrent(who, meta)
    if (from_client and epoch != meta.producer_epoch) or epoch < meta.producer_epoch:
        return Refuse(ProducerFencedError, f"{who}: epoch {epoch} is fenced")
    state = meta.state
    if state is TxnState.ONGOING:
        target = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        fences = fencing and not commit
        base = _fence_handed_over(meta, epoch) if fences else meta
        pending, record = prepare_abort_or_commit(base, target, 0, NO_PRODUCER_ID, now_ms, False)
        return Append(pending, record, fence=fences)
    if state is (TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT):
        return Answer()
    return _no_end(who, state, commit)


def _in_transition(meta: TxnMetadata, fencing: bool) -> bool:
    """Whether an EndTxn must wait (module Rules): a change other than an epoch fence is being
    appended, or a Prepare* transaction's markers are being written (Kafka's pending Complete*).
    Asked before the epoch: the first EndTxn of the next transaction carries the epoch the
    previous one's EndTxn bumped to, which only its Complete* makes current for a Prepare*."""
    return (meta.pending_transition and not fencing) or meta.state in (
        TxnState.PREPARE_COMMIT,
        TxnState.PREPARE_ABORT,
    )


def _concurrent(who: str, meta: TxnMetadata) -> Refuse:
    doing = "a change is pending" if meta.pending_transition else "its markers are being written"
    return Refuse(ConcurrentTransactionsError, f"{who} is {meta.state.display_name}: {doing}")


def _invalid_state(who: str, state: TxnState, commit: bool) -> Refuse:
    return Refuse(
        InvalidTxnStateError,
        f"{who} is {state.display_name}: cannot {'commit' if commit else 'abort'}",
    )


def _check_resting(who: str, state: TxnState) -> None:
    """Dead and PrepareEpochFence are only ever pending, never a state to answer from."""
    if state in (TxnState.DEAD, TxnState.PREPARE_EPOCH_FENCE):
        raise AssertionError(f"{who} is in state {state.display_name}, never a resting one")


def _no_end(who: str, state: TxnState, commit: bool) -> Refuse:
    """The answer in a resting state that takes no EndTxn of this outcome (Prepare* answered
    CONCURRENT_TRANSACTIONS before)."""
    _check_resting(who, state)
    return _invalid_state(who, state, commit)


def _fence_handed_over(meta: TxnMetadata, epoch: int) -> TxnMetadata:
    """A pending fence becomes the abort about to be prepared: its bumped epoch taken, no
    last epoch (as Kafka's endTransaction does before prepareAbortOrCommit)."""
    return replace(meta, pending=None, producer_epoch=epoch, last_producer_epoch=NO_PRODUCER_EPOCH)


def _end_txn_v2(
    meta: TxnMetadata,
    transactional_id: str,
    producer_id: int,
    epoch: int,
    commit: bool,
    from_client: bool,
    version: int,
    now_ms: int,
    allocate: ProducerIds,
) -> Decision:
    """EndTxn with transaction version 2. For Empty and Complete*, a retry is the caller's epoch
    one below the stored one (PF fenced, ITS invalid state, EB an epoch bump):

        state           abort retry / current    commit retry / current
        Empty           PF / EB                  PF / ITS
        CompleteAbort   answered / EB            ITS / ITS
        CompleteCommit  ITS / EB                 answered / ITS
    """
    who = _tid(transactional_id, meta)
    fencing = meta.pending is TxnState.PREPARE_EPOCH_FENCE
    retry_on_overflow = (
        not fencing
        and meta.prev_producer_id == producer_id
        and epoch == SHORT_MAX - 1
        and meta.producer_epoch == 0
    )
    retry_on_bump = not fencing and meta.producer_epoch == epoch + 1
    state = meta.state
    if fencing:
        valid_epoch = (not from_client or epoch == meta.producer_epoch) and (
            epoch >= meta.producer_epoch
        )
    elif state.completed:
        valid_epoch = retry_on_bump or retry_on_overflow or epoch == meta.producer_epoch
    else:
        valid_epoch = epoch == meta.producer_epoch
    is_retry = retry_on_bump or retry_on_overflow
    if meta.producer_id != producer_id and not retry_on_overflow:
        return Refuse(InvalidProducerIdMappingError, f"{who}: producer id {producer_id} is not its")
    if _in_transition(meta, fencing):
        return _concurrent(who, meta)
    if not valid_epoch:
        return Refuse(ProducerFencedError, f"{who}: epoch {epoch} is fenced")

    def completion(target: TxnState, no_partition_added: bool) -> Decision:
        next_id = NO_PRODUCER_ID
        if not fencing and is_epoch_exhausted(meta.producer_epoch):
            next_id = allocate()
        fences = fencing and target is TxnState.PREPARE_ABORT
        base = _fence_handed_over(meta, epoch) if fences else meta
        pending, record = prepare_abort_or_commit(
            base, target, version, next_id, now_ms, no_partition_added
        )
        return Append(pending, record, fence=fences)

    if state is TxnState.ONGOING:
        return completion(TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT, False)
    if state is TxnState.COMPLETE_COMMIT:
        if commit:
            return (
                Answer(meta.producer_id, meta.producer_epoch)
                if is_retry
                else _invalid_state(who, state, commit)
            )
        if is_retry:
            return _invalid_state(who, state, commit)
        return completion(TxnState.PREPARE_ABORT, True)
    if state is TxnState.COMPLETE_ABORT:
        if not commit:
            if is_retry:
                return Answer(meta.producer_id, meta.producer_epoch)
            return completion(TxnState.PREPARE_ABORT, True)
        return _invalid_state(who, state, commit)
    if state is TxnState.EMPTY and not commit:
        return completion(TxnState.PREPARE_ABORT, True)
    return _no_end(who, state, commit)


def complete_after_markers(meta: TxnMetadata, now_ms: int) -> Append:
    """Every partition's marker is written: append Complete*."""
    if meta.state not in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT) or meta.pending:
        raise AssertionError(
            f"{_tid(meta.transactional_id, meta)}: markers written in state "
            f"{meta.state.display_name}"
        )
    return Append(*prepare_complete(meta, now_ms))


def timed_out(metas: Iterable[TxnMetadata], now_ms: int) -> list[TxnMetadata]:
    """The Ongoing transactions past their timeout with no transition in progress."""
    return [
        m
        for m in metas
        if m.state is TxnState.ONGOING
        and not m.pending_transition
        and m.start_ms + m.timeout_ms < now_ms
    ]


def expired_ids(metas: Iterable[TxnMetadata], now_ms: int, expiration_ms: int) -> list[TxnMetadata]:
    """Transactional ids idle for transactional.id.expiration.ms (Empty or Complete*, no
    transition in progress): the coordinator writes their tombstones (`prepare_dead`)."""
    return [
        m
        for m in metas
        if m.state.expiration_allowed
        and not m.pending_transition
        and m.last_update_ms + expiration_ms <= now_ms
    ]


def abort_timed_out(
    meta: TxnMetadata, *, now_ms: int, server_version: int, allocate: ProducerIds
) -> Decision:
    """The coordinator fences and aborts an Ongoing transaction: one past its timeout, or one
    a new producer's InitProducerId finds (`init_producer_id`)."""
    fenced, fence = prepare_fence_producer_epoch(meta)
    return end_txn(
        fenced,
        meta.transactional_id,
        meta.producer_id,
        fence.producer_epoch,
        commit=False,
        from_client=False,
        version=server_version,
        now_ms=now_ms,
        allocate=allocate,
    )


def state_append_error(error: KafkaError, where: str) -> KafkaError:
    """What a failed append to `__transaction_state` answers (module Rules)."""
    what = f"{where}: the transaction state could not be written: {error.error_name}: {error}"
    if isinstance(
        error,
        UnknownTopicOrPartitionError
        | NotEnoughReplicasError
        | NotEnoughReplicasAfterAppendError
        | RequestTimedOutError,
    ):
        return CoordinatorNotAvailableError(what)
    if isinstance(error, NotLeaderOrFollowerError | KafkaStorageError):
        return NotCoordinatorError(what)
    return UnknownServerError(what)
