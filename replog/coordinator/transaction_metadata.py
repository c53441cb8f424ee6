"""One transactional id's state at its transaction coordinator (Kafka's `TransactionMetadata`):
its producer id and epochs, its transaction's state and partitions, and the two-step way every
change is made: *prepare* a transition (the record to append to `__transaction_state`, and the
state marked pending so no other change starts), then *complete* it once the record is
committed, or *abandon* it if the append failed.

Rules (Kafka 4.x's):
- States and the states each may follow (`TxnState.follows`): Empty after Empty or Complete*;
  Ongoing after Ongoing, Empty or Complete*; PrepareCommit after Ongoing; PrepareAbort after
  Ongoing, PrepareEpochFence, Empty or Complete* (the last three with transaction version 2 only);
  Complete* after their Prepare*; Dead after Empty or Complete*; PrepareEpochFence after
  Ongoing. A transition to any other state is a bug (`IllegalTransition`), never a client error.
- One transition at a time: preparing while one is pending is a bug; the rules module answers
  CONCURRENT_TRANSACTIONS before that can happen.
- Epochs: an InitProducerId bumps the epoch (or rotates to a new producer id at epoch 0 when the
  epoch is exhausted, >= 32766, so a coordinator can always fence once more); transaction
  version 2 bumps it again at every EndTxn, the previous one kept as `last_producer_epoch` so a
  retried request is recognised; a fence bumps it once, not again after a failed fence append.
- Completing checks what Kafka's `completeTransitionTo` checks (the epoch is the same, bumped by
  one, or 0 on a new producer id; partitions only grow while Ongoing; Prepare* carries the exact
  partitions; Complete* keeps a start time); a record that breaks them is `IllegalTransition`.
Pure: no I/O, clock or asyncio; times are arguments.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

from replog.common.topic_partition import TopicPartitionKey

__all__ = [
    "EPOCH_EXHAUSTED",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "IllegalTransition",
    "TxnMetadata",
    "TxnState",
    "abandon",
    "complete",
    "is_epoch_exhausted",
    "prepare_abort_or_commit",
    "prepare_add_partitions",
    "prepare_complete",
    "prepare_dead",
    "prepare_fence_producer_epoch",
    "prepare_increment_producer_epoch",
    "prepare_producer_id_rotation",
]

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
SHORT_MAX = 32767
EPOCH_EXHAUSTED = SHORT_MAX - 1  # an epoch at or above this cannot be bumped by a client


class IllegalTransition(AssertionError):
    """A transition the state machine forbids was attempted: a bug in the caller."""


class TxnState(enum.Enum):
    """Kafka's states, with their ids in `__transaction_state` and their DescribeTransactions
    names."""

    EMPTY = (0, "Empty")
    ONGOING = (1, "Ongoing")
    PREPARE_COMMIT = (2, "PrepareCommit")
    PREPARE_ABORT = (3, "PrepareAbort")
    COMPLETE_COMMIT = (4, "CompleteCommit")
    COMPLETE_ABORT = (5, "CompleteAbort")
    DEAD = (6, "Dead")
    PREPARE_EPOCH_FENCE = (7, "PrepareEpochFence")

    @property
    def id(self) -> int:
        return self.value[0]

    @property
    def display_name(self) -> str:
        return self.value[1]

    @classmethod
    def from_id(cls, state_id: int) -> TxnState:
        for state in cls:
            if state.id == state_id:
                return state
        raise ValueError(f"unknown transaction state id {state_id}")

    @property
    def follows(self) -> frozenset[TxnState]:
        """The states this state may follow (module Rules)."""
        return _FOLLOWS[self]

    @property
    def expiration_allowed(self) -> bool:
        """Whether a transactional id in this state may expire (no transaction in flight)."""
        return self in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)

    @property
    def completed(self) -> bool:
        return self in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


_S = TxnState
_FOLLOWS: dict[TxnState, frozenset[TxnState]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset(
        {_S.ONGOING, _S.PREPARE_EPOCH_FENCE, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}
    ),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}


def is_epoch_exhausted(epoch: int) -> bool:
    return epoch >= EPOCH_EXHAUSTED


@dataclass(frozen=True)
class TxnMetadata:
    """A transactional id's state (module docstring). The same shape is the record a prepared
    transition appends (`pending` None there)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    prev_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    timeout_ms: int = 60_000
    state: TxnState = TxnState.EMPTY
    partitions: frozenset[TopicPartitionKey] = field(default_factory=frozenset)
    start_ms: int = -1
    last_update_ms: int = -1
    transaction_version: int = 0  # the client's: 2 bumps the epoch at every EndTxn
    pending: TxnState | None = None
    failed_epoch_fence: bool = False  # a fence's append failed: the next fence does not bump

    @property
    def pending_transition(self) -> bool:
        return self.pending is not None

    @property
    def has_pending_transaction(self) -> bool:
        return self.state in (TxnState.ONGOING, TxnState.PREPARE_ABORT, TxnState.PREPARE_COMMIT)

    def epoch_bumps(self) -> bool:
        return self.transaction_version >= 2


def _prepare(meta: TxnMetadata, transit: TxnMetadata) -> tuple[TxnMetadata, TxnMetadata]:
    """`meta` marked pending towards `transit`, and `transit` as the record to append."""
    if meta.pending is not None:
        raise IllegalTransition(
            f"transactional id {meta.transactional_id!r}: preparing {transit.state.display_name} "
            f"while {meta.pending.display_name} is pending"
        )
    if transit.producer_id < 0:
        raise IllegalTransition(f"illegal new producer id {transit.producer_id}")
    if transit.state is not TxnState.DEAD and transit.producer_epoch < 0:
        raise IllegalTransition(f"illegal new producer epoch {transit.producer_epoch}")
    if meta.state not in transit.state.follows:
        raise IllegalTransition(
            f"transactional id {meta.transactional_id!r}: {transit.state.display_name} cannot "
            f"follow {meta.state.display_name}"
        )
    record = replace(transit, prev_producer_id=meta.producer_id, pending=None)
    return replace(meta, pending=transit.state), record


def prepare_fence_producer_epoch(meta: TxnMetadata) -> tuple[TxnMetadata, TxnMetadata]:
    """A newer producer or a timeout fences the ongoing transaction: its epoch bumped once (not
    again after a failed fence append, nor past the maximum)."""
    bumped = (
        meta.producer_epoch
        if meta.failed_epoch_fence or meta.producer_epoch == SHORT_MAX
        else meta.producer_epoch + 1
    )
    return _prepare(meta, replace(meta, state=TxnState.PREPARE_EPOCH_FENCE, producer_epoch=bumped))


def prepare_increment_producer_epoch(
    meta: TxnMetadata, timeout_ms: int, expected_epoch: int | None, now_ms: int
) -> tuple[TxnMetadata, TxnMetadata] | None:
    """InitProducerId on an idle transactional id; None when `expected_epoch` says the caller
    is a fenced producer (PRODUCER_FENCED)."""
    if is_epoch_exhausted(meta.producer_epoch):
        raise IllegalTransition(f"no epoch is left for producer id {meta.producer_id}")
    bumped = meta.producer_epoch + 1
    if expected_epoch is None:
        epoch, last = bumped, NO_PRODUCER_EPOCH
    elif meta.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == meta.producer_epoch:
        epoch, last = bumped, meta.producer_epoch
    elif expected_epoch == meta.last_producer_epoch:
        epoch, last = meta.producer_epoch, meta.last_producer_epoch  # a retry of a bump
    else:
        return None
    return _prepare(
        meta,
        replace(
            meta,
            state=TxnState.EMPTY,
            producer_epoch=epoch,
            last_producer_epoch=last,
            timeout_ms=timeout_ms,
            partitions=frozenset(),
            start_ms=-1,
            last_update_ms=now_ms,
        ),
    )


def prepare_producer_id_rotation(
    meta: TxnMetadata, new_producer_id: int, timeout_ms: int, now_ms: int, record_last_epoch: bool
) -> tuple[TxnMetadata, TxnMetadata]:
    """The epoch is exhausted: a new producer id at epoch 0."""
    if meta.has_pending_transaction:
        raise IllegalTransition("cannot rotate producer ids while a transaction is pending")
    return _prepare(
        meta,
        replace(
            meta,
            state=TxnState.EMPTY,
            producer_id=new_producer_id,
            producer_epoch=0,
            last_producer_epoch=meta.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
            timeout_ms=timeout_ms,
            partitions=frozenset(),
            start_ms=-1,
            last_update_ms=now_ms,
        ),
    )


def prepare_add_partitions(
    meta: TxnMetadata, added: frozenset[TopicPartitionKey], now_ms: int, transaction_version: int
) -> tuple[TxnMetadata, TxnMetadata]:
    starts = meta.state in (TxnState.EMPTY, TxnState.COMPLETE_ABORT, TxnState.COMPLETE_COMMIT)
    return _prepare(
        meta,
        replace(
            meta,
            state=TxnState.ONGOING,
            partitions=meta.partitions | added,
            start_ms=now_ms if starts else meta.start_ms,
            last_update_ms=now_ms,
            transaction_version=transaction_version,
        ),
    )


def prepare_abort_or_commit(
    meta: TxnMetadata,
    state: TxnState,
    transaction_version: int,
    next_producer_id: int,
    now_ms: int,
    no_partition_added: bool,
) -> tuple[TxnMetadata, TxnMetadata]:
    if transaction_version >= 2:
        at_max_abort = meta.producer_epoch == SHORT_MAX and state is TxnState.PREPARE_ABORT
        epoch = meta.producer_epoch if at_max_abort else meta.producer_epoch + 1
        last = meta.producer_epoch
    else:
        epoch, last = meta.producer_epoch, meta.last_producer_epoch
    return _prepare(
        meta,
        replace(
            meta,
            state=state,
            producer_epoch=epoch,
            last_producer_epoch=last,
            start_ms=now_ms if no_partition_added else meta.start_ms,
            next_producer_id=next_producer_id,
            last_update_ms=now_ms,
            transaction_version=transaction_version,
        ),
    )


def prepare_complete(meta: TxnMetadata, now_ms: int) -> tuple[TxnMetadata, TxnMetadata]:
    """Every marker is written: Complete* (with version 2 and an exhausted epoch, the next
    producer id at epoch 0)."""
    meta = replace(meta, failed_epoch_fence=False)
    done = (
        TxnState.COMPLETE_COMMIT
        if meta.state is TxnState.PREPARE_COMMIT
        else TxnState.COMPLETE_ABORT
    )
    rotate = meta.epoch_bumps() and meta.next_producer_id != NO_PRODUCER_ID
    return _prepare(
        meta,
        replace(
            meta,
            state=done,
            producer_id=meta.next_producer_id if rotate else meta.producer_id,
            producer_epoch=0 if rotate else meta.producer_epoch,
            next_producer_id=NO_PRODUCER_ID,
            partitions=frozenset(),
            last_update_ms=now_ms,
        ),
    )


def prepare_dead(meta: TxnMetadata) -> tuple[TxnMetadata, TxnMetadata]:
    """The transactional id expires (transactional.id.expiration.ms)."""
    return _prepare(meta, replace(meta, state=TxnState.DEAD, partitions=frozenset()))


def abandon(meta: TxnMetadata, *, fence: bool = False) -> TxnMetadata:
    """The prepared transition's append failed: the pending mark goes. A fence's bumped epoch
    stays (it was never returned to a client) and the next fence does not bump it again."""
    return replace(meta, pending=None, failed_epoch_fence=meta.failed_epoch_fence or fence)


def complete(meta: TxnMetadata, record: TxnMetadata) -> TxnMetadata:
    """The prepared transition's record is committed: `meta` becomes it (module Rules)."""
    to = meta.pending
    if to is None or to is not record.state:
        raise IllegalTransition(
            f"transactional id {meta.transactional_id!r}: completing "
            f"{record.state.display_name} while {to.display_name if to else 'nothing'} is pending"
        )
    if not _valid_completion(meta, record):
        raise IllegalTransition(
            f"transactional id {meta.transactional_id!r}: {meta} cannot become {record}"
        )
    return replace(record, pending=None, failed_epoch_fence=meta.failed_epoch_fence)


def _valid_completion(meta: TxnMetadata, record: TxnMetadata) -> bool:
    to = record.state
    if to is TxnState.EMPTY:
        bumped = record.producer_epoch == meta.producer_epoch + 1 or (
            record.producer_epoch == 0 and record.producer_id != meta.producer_id
        )
        return (
            (record.producer_epoch == meta.producer_epoch or bumped)
            and not record.partitions
            and record.start_ms == -1
        )
    if to is TxnState.ONGOING:
        return (
            _valid_epoch(meta, record)
            and record.partitions >= meta.partitions
            and record.timeout_ms == meta.timeout_ms
        )
    if to in (TxnState.PREPARE_ABORT, TxnState.PREPARE_COMMIT):
        empty_abort = (
            to is TxnState.PREPARE_ABORT
            and record.transaction_version >= 2
            and meta.state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
        )
        return (
            _valid_epoch(meta, record)
            and record.partitions == meta.partitions
            and record.timeout_ms == meta.timeout_ms
            and (record.start_ms == meta.start_ms or empty_abort)
        )
    if to in (TxnState.COMPLETE_ABORT, TxnState.COMPLETE_COMMIT):
        return (
            _valid_epoch(meta, record)
            and record.timeout_ms == meta.timeout_ms
            and record.start_ms != -1
        )
    return False  # PrepareEpochFence and Dead are never completed into the log's state


def _valid_epoch(meta: TxnMetadata, record: TxnMetadata) -> bool:
    v2 = record.transaction_version >= 2
    if v2 and record.state.completed and record.producer_epoch == 0:
        return (
            record.last_producer_epoch == meta.last_producer_epoch
            and record.prev_producer_id == meta.producer_id
        )
    if v2 and record.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
        return (
            record.last_producer_epoch == meta.producer_epoch
            and record.producer_id == meta.producer_id
        )
    return record.producer_epoch == meta.producer_epoch and record.producer_id == meta.producer_id
