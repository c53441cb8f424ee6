"""A leader's memory of one fetch session's reads that found nothing: the next round answers an
unchanged entry of an unchanged partition from it, without reading again.

Why: a leader's session round reads only the session's dirty partitions (`fetch_session`
Rules), but a partition may be marked dirty by news that changes nothing its fetcher would be
answered (a spurious mark); a kept read answers such an entry without the full read path (about
2.3 us of Python per partition: lookup, leader epoch and offset checks, diverging epoch, bound,
answer reuse, follower progress).

Rules:
- A read is kept only when it was a fetch's initial read that found nothing to read (the fetch
  offset at or past the bound: a follower's at the leader's log end offset, a consumer's at the
  high watermark), with no error and no diverging epoch, and, for a follower, whose progress
  update did not move the HW (the answer holds the HW from before it,
  docs/design/replication.md#follower-progress). What the update did move otherwise (a pending ISR
  expansion, the follower's log start offset) is in the state captured after it, so a repeat finds
  nothing to do again, as the full read would.
- The next initial read of the same entry object in the same session, by the same asker
  (replica id, replica epoch, isolation level), reuses it only while nothing it depended on
  changed: the partition object (a re-created topic makes a new one), its log and leader-state
  objects (a new leadership makes a new leader state), the leader state's `fetch_inputs()`
  (leader epoch, partition epoch, ISR, pending ISR change, eligibility, replicas, HW) and the
  log's end and start offsets. Those are all that the checks, the bound and the answer read
  (the leader epoch cache of the diverging-epoch check moves only with the leader epoch or the
  log end offset), so the full read would answer the same. A changed entry is a new object
  (the session replaces it), so it reads in full. A kept read that no longer holds is dropped
  at once.
- A follower's reused read still records the fetch, as every fetch does in Kafka
  (docs/design/replication.md#caught-up-time: the last fetch time, and the last caught-up time while
  at the leader's log end offset), through `PartitionLeaderState.repeat_follower_fetch`; when that
  declines (another fetch of the same replica moved its progress), the entry reads in full.
- Reads woken from the purgatory and expired ones never use it: they are not initial reads and
  record no progress.
- The memory lives as long as the session's call; a full request (epoch 0) starts it afresh and
  a forgotten partition leaves it, so it holds at most the session's partitions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from replog.common import TopicPartitionKey
from replog.common.frozen_init import fast_frozen_init
from replog.replication.leader_state import PartitionLeaderState
from replog.replication.messages import (
    FetchPartition,
    FetchPartitionResult,
    FetchRequest,
    IsolationLevel,
)
from replog.server.data_plane.partition import Partition
from replog.storage.log import Log

# A request's (replica id, replica epoch, isolation level): who asked, and how.
Asker = tuple[int, int, IsolationLevel]


def asker_of(request: FetchRequest) -> Asker:
    return (request.replica_id, request.replica_epoch, request.isolation_level)


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class EmptyRead:
    """One kept read (module Rules) and what it depended on."""

    entry: FetchPartition
    asker: Asker
    partition: Partition
    log: Log
    leader_state: PartitionLeaderState
    inputs: tuple[object, ...]
    log_end_offset: int
    log_start_offset: int
    result: FetchPartitionResult


class RepeatReads:
    """One session's kept reads, by topic-partition; each answers only its own asker."""

    __slots__ = ("_reads",)

    def __init__(self) -> None:
        self._reads: dict[TopicPartitionKey, EmptyRead] = {}

    def __len__(self) -> int:
        return len(self._reads)

    def answer(
        self,
        entry: FetchPartition,
        partitions: Mapping[TopicPartitionKey, Partition],
        asker: Asker,
        now_ms: int,
    ) -> FetchPartitionResult | None:
        """The kept answer for `entry` if its read still holds (module Rules), a follower's
        fetch recorded; None when the entry must be read in full."""
        key = (entry.topic, entry.partition)
        kept = self._reads.get(key)
        if kept is None:
            return None
        if kept.entry is not entry or not _holds(kept, key, partitions, asker, now_ms):
            # Dropped, so that nothing stale lingers: the full read that follows keeps a new
            # one if it finds nothing again.
            del self._reads[key]
            return None
        return kept.result

    def keep(
        self,
        entry: FetchPartition,
        asker: Asker,
        partition: Partition,
        log_end_offset: int,
        log_start_offset: int,
        result: FetchPartitionResult,
    ) -> None:
        """Keep `result`, the read of `entry` that found nothing (module Rules), with what it
        depended on: the log offsets the read took and the partition's objects and inputs."""
        leader_state = partition.leader_state
        assert leader_state is not None, "only a leader's reads are kept"
        self._reads[(entry.topic, entry.partition)] = EmptyRead(
            entry,
            asker,
            partition,
            partition.log,
            leader_state,
            leader_state.fetch_inputs(),
            log_end_offset,
            log_start_offset,
            result,
        )

    def forget(self, keys: Iterable[TopicPartitionKey]) -> None:
        """The session dropped these partitions."""
        for key in keys:
            self._reads.pop(key, None)

    def clear(self) -> None:
        """A full request started the session afresh."""
        self._reads.clear()


def _holds(
    kept: EmptyRead,
    key: TopicPartitionKey,
    partitions: Mapping[TopicPartitionKey, Partition],
    asker: Asker,
    now_ms: int,
) -> bool:
    """Whether nothing `kept` read has changed (module Rules); for a follower, its fetch is
    then recorded."""
    partition = kept.partition
    leader_state = kept.leader_state
    plog = kept.log
    if (
        partitions.get(key) is not partition
        or partition.leader_state is not leader_state
        or partition.log is not plog
        or plog.log_end_offset != kept.log_end_offset
        or plog.log_start_offset != kept.log_start_offset
        or leader_state.fetch_inputs() != kept.inputs
        or kept.asker != asker
    ):
        return False
    replica_id = asker[0]
    entry = kept.entry
    return replica_id < 0 or leader_state.repeat_follower_fetch(
        replica_id=replica_id,
        broker_epoch=asker[1],
        fetch_offset=entry.fetch_offset,
        log_start_offset=entry.log_start_offset,
        leader_log_end_offset=kept.log_end_offset,
        now_ms=now_ms,
    )
