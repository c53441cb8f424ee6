"""The leader's read decisions: epoch fencing, diverging epochs, read bounds, when to answer.

Rules (docs/design/replication.md#offsetsforleaderepoch, #truncate-on-fetch, #read-bounds,
#answer-now-or-wait; Kafka's `Partition.readRecords`, `ReplicaManager.fetchMessages`,
`FetchIsolation`):

- Current-leader-epoch fencing (Fetch, ListOffsets, OffsetsForLeaderEpoch): a negative request
  epoch (-1: none sent) is not checked, as Kafka reads any negative one as absent; below the
  local leader epoch is FENCED_LEADER_EPOCH (the sender is behind); above it is
  UNKNOWN_LEADER_EPOCH (this broker is behind).
- Diverging epoch (a Fetch with LastFetchedEpoch >= 0; a negative one is absent), with (E, O) =
  the leader's end offset for that epoch:
  1. E == -1 or O == -1 (the leader cannot place the epoch): OFFSET_OUT_OF_RANGE.
  2. fetch offset < log start offset: OFFSET_OUT_OF_RANGE, whether or not the epochs diverge.
  3. E < LastFetchedEpoch or O < fetch offset: answer DivergingEpoch(E, O) with no records (and
     the caller must not record this fetch as follower progress).
  4. Otherwise read normally.
- Upper read bound: a follower reads up to the LEO; a read_uncommitted consumer up to the HW; a
  read_committed consumer up to the last stable offset.
- Fetch offsets outside [log start offset, LEO] are OFFSET_OUT_OF_RANGE.
- A fetch is answered at once (not parked in the purgatory) when MaxWaitMs <= 0, it names no
  partitions, it read at least MinBytes, any partition had an error, or any partition reported a
  diverging epoch.
- A parked fetch woken by a partition it reads (docs/design/replication.md#delayed-fetch-completion)
  completes whatever it would read when that partition's current leader epoch no longer
  matches the request's (E), its offset is past the bound (a follower's: the LEO; a consumer's:
  the HW) or below the log start (F), or its last fetched epoch now diverges (H); it re-reads
  when data may exist below the bound (G); else it waits.

Theory of operation: pure functions the replica manager calls per partition while it builds a
Fetch answer; errors are raised as `replog.errors` classes whose message names the
topic-partition (`where`) and the numbers involved, and the shell turns them into the
partition's error field.
"""

from __future__ import annotations

from collections.abc import Callable

from replog.common.offsets import NO_LEADER_EPOCH as NO_LEADER_EPOCH
from replog.errors import FencedLeaderEpochError, OffsetOutOfRangeError, UnknownLeaderEpochError
from replog.replication.messages import EpochEndOffsetResult, IsolationLevel

UNDEFINED_END_OFFSET = -1


def check_current_leader_epoch(
    where: str, request_leader_epoch: int, local_leader_epoch: int
) -> None:
    """Fence a request by its CurrentLeaderEpoch (negative: not checked)."""
    if request_leader_epoch < 0:
        return
    if request_leader_epoch < local_leader_epoch:
        raise FencedLeaderEpochError(
            f"{where}: request leader epoch {request_leader_epoch} is older than "
            f"the current leader epoch {local_leader_epoch}"
        )
    if request_leader_epoch > local_leader_epoch:
        raise UnknownLeaderEpochError(
            f"{where}: request leader epoch {request_leader_epoch} is newer than "
            f"the current leader epoch {local_leader_epoch}"
        )


def diverging_epoch(
    where: str,
    *,
    fetch_offset: int,
    last_fetched_epoch: int,
    leader_end_offset_for_last_epoch: tuple[int, int],
    log_start_offset: int,
) -> EpochEndOffsetResult | None:
    """The leader-side epoch check of a Fetch (Rules, diverging epoch 1-4).

    `leader_end_offset_for_last_epoch` is the leader's `end_offset_for(last_fetched_epoch, LEO)`.
    Returns the DivergingEpoch to answer with, or None to read normally. A `last_fetched_epoch`
    below 0 (-1: the fetcher sent none) skips the check entirely, as Kafka does.
    """
    if last_fetched_epoch < 0:
        return None
    epoch, end_offset = leader_end_offset_for_last_epoch
    if epoch == NO_LEADER_EPOCH or end_offset == UNDEFINED_END_OFFSET:
        raise OffsetOutOfRangeError(
            f"{where}: the leader has no end offset for last fetched epoch {last_fetched_epoch} "
            f"(fetch offset {fetch_offset})"
        )
    if fetch_offset < log_start_offset:
        raise OffsetOutOfRangeError(
            f"{where}: fetch offset {fetch_offset} is below the log start offset "
            f"{log_start_offset} (last fetched epoch {last_fetched_epoch})"
        )
    if epoch < last_fetched_epoch or end_offset < fetch_offset:
        return EpochEndOffsetResult(epoch, end_offset)
    return None


def fetch_upper_bound(
    *,
    is_follower: bool,
    isolation_level: IsolationLevel,
    log_end_offset: int,
    high_watermark: int,
    last_stable_offset: int,
) -> int:
    """The exclusive offset a fetch may read up to (docs/design/replication.md#read-bounds)."""
    if is_follower:
        return log_end_offset
    if isolation_level == IsolationLevel.READ_COMMITTED:
        return last_stable_offset
    return high_watermark


def check_fetch_offset(
    where: str, *, fetch_offset: int, log_start_offset: int, log_end_offset: int
) -> None:
    """OFFSET_OUT_OF_RANGE unless log_start_offset <= fetch_offset <= log_end_offset."""
    if fetch_offset < log_start_offset or fetch_offset > log_end_offset:
        raise OffsetOutOfRangeError(
            f"{where}: fetch offset {fetch_offset} is outside the log's range "
            f"[{log_start_offset}, {log_end_offset}]"
        )


def answer_immediately(
    *,
    max_wait_ms: int,
    partition_count: int,
    bytes_read: int,
    min_bytes: int,
    any_error: bool,
    any_diverging: bool,
) -> bool:
    """Whether a fetch is answered now rather than parked in the fetch purgatory
    (docs/design/replication.md#answer-now-or-wait step 2)."""
    return (
        max_wait_ms <= 0
        or partition_count == 0
        or bytes_read >= min_bytes
        or any_error
        or any_diverging
    )


WOKEN_COMPLETE = "complete"
WOKEN_READ = "read"
WOKEN_WAIT = "wait"


def woken_fetch_verdict(
    *,
    request_leader_epoch: int,
    leader_epoch: int,
    fetch_offset: int,
    last_fetched_epoch: int,
    is_follower: bool,
    log_end_offset: int,
    high_watermark: int,
    log_start_offset: int,
    end_offset_for: Callable[[int], tuple[int, int]],
) -> str:
    """One entry of a woken parked fetch (Rules): WOKEN_COMPLETE, WOKEN_READ or WOKEN_WAIT.
    `end_offset_for(epoch)` is the leader's (epoch, end offset) for an epoch, asked only when
    the request names a last fetched epoch."""
    if request_leader_epoch not in (NO_LEADER_EPOCH, leader_epoch):
        return WOKEN_COMPLETE
    bound = log_end_offset if is_follower else high_watermark
    if fetch_offset > bound or fetch_offset < log_start_offset:
        return WOKEN_COMPLETE
    if last_fetched_epoch != NO_LEADER_EPOCH:
        end_epoch, end_offset = end_offset_for(last_fetched_epoch)
        if end_epoch < last_fetched_epoch or end_offset < fetch_offset:
            return WOKEN_COMPLETE
    return WOKEN_READ if fetch_offset < bound else WOKEN_WAIT
