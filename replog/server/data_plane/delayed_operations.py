"""The replica manager's delayed operations: acks=all produces, long-poll fetches and
DeleteRecords that wait in a purgatory, and when each completes, expires or is cut short.

Rules (docs/design/replication.md#acks-and-min-isr, #delayed-fetch-completion, #low-watermark;
Kafka's `DelayedProduce`, `DelayedFetch`, `DelayedDeleteRecords`):
- A waiting produce or DeleteRecords partition is done, with what, when its partition core
  says so (`partition_core`: the HW past the append, or the low watermark at the offset;
  NOT_ENOUGH_REPLICAS_AFTER_APPEND; NOT_LEADER_OR_FOLLOWER once this broker no longer leads
  that replica, with the current leader for a produce; REQUEST_TIMED_OUT naming the offset at
  its deadline).
- A woken fetch first takes the cheap docs/design/replication.md#delayed-fetch-completion look
  (`fetch_wake_verdict`) at the partition that woke it; only when something may have changed
  there does it re-read, and it completes when the read reaches `min_bytes`, has an error or a
  diverging epoch, or the look found a condition that answers it whatever it reads. At its
  deadline it answers what a re-read finds, by the next rule.
- A woken or expiring fetch re-reads only the partitions woken since it parked when its first
  read found no records (Kafka's fetch with `min_bytes` 1 always, when it waits): every change
  that alters a partition's answer (an append, an HW move, a leadership change, the leader's
  DeleteRecords) wakes that partition, so the others would read what they read when it
  parked; a follower fetch's own read that moves an HW counts as a wake of that entry
  (docs/design/replication.md#follower-progress). A log start offset that retention moves
  wakes nothing (it runs off the event loop): it never passes the HW, so no parked fetch
  falls out of range, and the next read answers it.
- An operation is answered exactly once: completion goes through `Purgatory.complete` (or
  `expire`), which removes it from every key, before its future is resolved; a caller that goes
  away takes its operation out of the purgatory.
- A dirty-only round of a fetch session (`fetch_session` Rules) reads only the session's
  partitions with news, so it watches no partition: it waits for news of any of the session's
  partitions (`LeaderFetchSession.waiter`). A partition with news that the round did not read
  joins it (an entry woken since it parked, whose parked result is a placeholder every
  re-read replaces), and the round then completes by the rules above; joining costs the same
  whatever the round holds already. Once `round_partitions` of its entries are woken, news of
  a partition it does not hold completes it at once instead (bounded rounds: a re-read reads
  its woken entries, so it reads at most that many), and that partition waits, dirty, for
  the session's next round.
- Stopping answers every waiting operation NOT_LEADER_OR_FOLLOWER ("shutting down").

Theory of operation: `DelayedOperations` owns the three purgatories and nothing else; it reads
the manager's partitions through the mapping it is given and re-reads fetches through the
manager's `read_fetch`, so the replicas have one owner. The manager calls `wake(key)` whenever
a partition's HW, LEO, low watermark or leadership moves, `expire(now_ms)` from its timer, and
`wait_produce`, `wait_delete_records` and `watch_fetch` from the request paths (a fetch is
parked synchronously, in the step that read it, so that no wake falls between its read and its
watch, and the caller awaits its answer); `on_new_deadline(deadline_ms)` tells its timer of
each new deadline.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Generic, TypeVar

from replog.common import TopicPartitionKey
from replog.errors import KafkaError, NotLeaderOrFollowerError
from replog.replication.fetch_rules import (
    WOKEN_COMPLETE,
    WOKEN_READ,
    WOKEN_WAIT,
    woken_fetch_verdict,
)
from replog.replication.fetch_session import LeaderFetchSession
from replog.replication.messages import (
    NO_OFFSET,
    DeleteRecordsPartitionResult,
    FetchPartition,
    FetchPartitionResult,
    FetchRequest,
    FetchResponse,
    LeaderIdAndEpoch,
    ProducePartitionResult,
)
from replog.replication.partition_effects import CompleteDeleteRecords, CompleteParked
from replog.replication.partition_events import (
    ParkedDeleteRecordsExpired,
    ParkedDeleteRecordsWoken,
    ParkedProduceExpired,
    ParkedProduceWoken,
)
from replog.replication.purgatory import Purgatory
from replog.server.data_plane.partition import Partition

_LONG_MAX = 2**63 - 1

ResultT = TypeVar("ResultT", ProducePartitionResult, DeleteRecordsPartitionResult)


class DelayedOperation:
    """A parked request: the future its coroutine awaits. Hashed by identity."""

    __slots__ = ("future",)

    def __init__(self) -> None:
        self.future: asyncio.Future[object] = asyncio.get_running_loop().create_future()

    def finish(self, value: object) -> None:
        if not self.future.done():
            self.future.set_result(value)


class DelayedPartitions(DelayedOperation, Generic[ResultT]):
    """A produce (docs/design/replication.md#acks-and-min-isr) or DeleteRecords
    (docs/design/replication.md#low-watermark) waiting per partition for an offset.

    `pending` maps an index in `results` to (partition, required offset): the offset the HW
    must pass (produce) or the low watermark must reach (DeleteRecords). A partition leaves
    `pending` once its result is final.
    """

    __slots__ = ("pending", "results")

    def __init__(self, results: list[ResultT], pending: dict[int, tuple[Partition, int]]) -> None:
        super().__init__()
        self.results: list[ResultT] = results
        self.pending: dict[int, tuple[Partition, int]] = pending

    def fail_pending(self, error_of: Callable[[Partition, int], KafkaError]) -> None:
        """Give every partition still waiting the error `error_of(partition, offset)`."""
        for index, (partition, offset) in self.pending.items():
            self.results[index] = replace(self.results[index], error=error_of(partition, offset))
        self.pending.clear()


DelayedProduce = DelayedPartitions[ProducePartitionResult]
DelayedDeleteRecords = DelayedPartitions[DeleteRecordsPartitionResult]


@dataclass(slots=True)
class FetchRead:
    """One read of a whole fetch request. `hw_moved`: the indexes of the entries whose HW the
    read itself moved (a follower's progress) after taking it for their answers
    (docs/design/replication.md#follower-progress)."""

    results: list[FetchPartitionResult]
    bytes_read: int
    any_error: bool
    any_diverging: bool
    hw_moved: list[int] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Reread:
    """What a woken fetch reads again: the entries at `indexes` of its request; every other
    entry keeps its result from `results` (its read when it parked, which found no records)."""

    results: Sequence[FetchPartitionResult]
    indexes: Collection[int]


class DelayedFetch(DelayedOperation):
    """A parked fetch. `woken` holds the indexes of the entries whose partitions woke it since
    it parked; `parked_results` are the results of the read that parked it, kept only when that
    read found no records, so the entries never woken are answered from them."""

    __slots__ = ("_index_of", "_request", "entries", "keys", "parked_results", "woken")

    def __init__(self, request: FetchRequest, parked_read: FetchRead) -> None:
        super().__init__()
        self._request = request
        # The request's entries, and those joined since (`extend`); `request` holds them all.
        self.entries = list(request.partitions)
        self.keys = [(entry.topic, entry.partition) for entry in request.partitions]
        self.parked_results: list[FetchPartitionResult] | None = (
            None if parked_read.bytes_read else parked_read.results
        )
        # An entry whose HW its own read moved is stale already: no wake comes for that move.
        self.woken: set[int] = set(parked_read.hw_moved)
        self._index_of: dict[TopicPartitionKey, int] | None = None

    def indexes_of(self, key: TopicPartitionKey) -> Sequence[int]:
        """The indexes of the request's entries for `key`. The map is built at the first wake
        (most parked fetches complete at their first); a request that names a partition twice
        (the service refuses those) is searched instead."""
        if self._index_of is None:
            self._index_of = dict(zip(self.keys, range(len(self.keys)), strict=True))
        if len(self._index_of) == len(self.keys):
            index = self._index_of.get(key)
            return () if index is None else (index,)
        return [index for index, named in enumerate(self.keys) if named == key]

    @property
    def request(self) -> FetchRequest:
        """The request with every entry joined so far; rebuilt only after a join, so joining
        thousands of entries one at a time costs no copy of the request per join."""
        if len(self._request.partitions) != len(self.entries):
            self._request = replace(self._request, partitions=tuple(self.entries))
        return self._request

    @property
    def is_from_follower(self) -> bool:
        return self._request.is_from_follower

    def extend(self, entry: FetchPartition) -> None:
        """Add `entry` to the request, woken (module Rules, dirty-only rounds)."""
        key = (entry.topic, entry.partition)
        index = len(self.keys)
        self.entries.append(entry)
        self.keys.append(key)
        if self._index_of is not None:
            self._index_of[key] = index
        if self.parked_results is not None:
            self.parked_results.append(FetchPartitionResult(entry.topic, entry.partition))
        self.woken.add(index)

    def reread(self) -> Reread | None:
        """What to read again now: the woken entries, or None for the whole request."""
        if self.parked_results is None:
            return None
        return Reread(self.parked_results, self.woken)


_OpT = TypeVar("_OpT", bound=DelayedOperation)


class DelayedOperations:
    """The three purgatories of one broker and the completion of what waits in them."""

    def __init__(
        self,
        *,
        broker_id: int,
        pending_max: int,
        partitions: Mapping[TopicPartitionKey, Partition],
        current_leader: Callable[[str, int], LeaderIdAndEpoch | None],
        read_fetch: Callable[[FetchRequest, int, Reread | None], FetchRead],
        clock: Callable[[], int],
        on_new_deadline: Callable[[int], None],
    ) -> None:
        self._broker_id = broker_id
        self._partitions = partitions
        self._current_leader = current_leader
        self._read_fetch = read_fetch
        self._clock = clock
        self._on_new_deadline = on_new_deadline
        self.produce: Purgatory[TopicPartitionKey, DelayedProduce] = Purgatory(
            "produce", pending_max
        )
        self.fetch: Purgatory[TopicPartitionKey, DelayedFetch] = Purgatory("fetch", pending_max)
        self.delete_records: Purgatory[TopicPartitionKey, DelayedDeleteRecords] = Purgatory(
            "delete-records", pending_max
        )

    # --- waiting --------------------------------------------------------------------------

    async def wait_produce(self, op: DelayedProduce, deadline_ms: int) -> None:
        """Park `op` until its partitions are done or `deadline_ms`; PurgatoryFullError."""
        self.produce.watch(op, [p.key for p, _ in op.pending.values()], deadline_ms)
        self._on_new_deadline(deadline_ms)
        await _wait(op, self.produce)

    def watch_fetch(
        self, op: DelayedFetch, deadline_ms: int, session: LeaderFetchSession | None = None
    ) -> Awaitable[FetchResponse]:
        """Park `op` until it can be answered or `deadline_ms` (PurgatoryFullError), here and
        now: a wake from here on completes it. The answer is the awaitable's; await it at once
        (an awaitable never awaited leaves `op` parked until its deadline). With `session`,
        `op` is a dirty-only round of it, woken by the session's news."""
        self.fetch.watch(op, op.keys if session is None else (), deadline_ms)
        self._on_new_deadline(deadline_ms)
        if session is not None:
            session.waiter = lambda key: self._session_news(op, session, key)
        return self._fetch_answer(op, session)

    async def _fetch_answer(
        self, op: DelayedFetch, session: LeaderFetchSession | None
    ) -> FetchResponse:
        try:
            result = await _wait(op, self.fetch)
        finally:
            if session is not None:
                session.waiter = None
        assert isinstance(result, FetchResponse)
        return result

    def _session_news(
        self, op: DelayedFetch, session: LeaderFetchSession, key: TopicPartitionKey
    ) -> None:
        if op not in self.fetch:
            return
        if not op.indexes_of(key):
            entry = session.entry(key)
            if entry is None:
                return
            if len(op.woken) >= session.round_partitions:
                self._complete_fetch_now(op)  # module Rules: `key` waits for the next round
                return
            op.extend(entry)
        self._try_complete_fetch(op, key)

    def _complete_fetch_now(self, op: DelayedFetch) -> None:
        read = self._read_fetch(op.request, self._clock(), op.reread())
        if self.fetch.complete(op):
            op.finish(FetchResponse(tuple(read.results)))

    async def wait_delete_records(self, op: DelayedDeleteRecords, deadline_ms: int) -> None:
        """Park `op` until the low watermarks reach its offsets or `deadline_ms`."""
        keys = [p.key for p, _ in op.pending.values()]
        self.delete_records.watch(op, keys, deadline_ms)
        self._on_new_deadline(deadline_ms)
        await _wait(op, self.delete_records)

    # --- waking ---------------------------------------------------------------------------

    def wake(
        self,
        key: TopicPartitionKey,
        *,
        produce: bool = True,
        fetch: bool = True,
        delete: bool = True,
    ) -> None:
        """Re-check the operations waiting on `key` (its HW, LEO or leadership moved): fetches
        first, then produces, as Kafka's `checkAndCompleteAll` does. A consumer's fetch that a
        higher HW completes is then answered before the produce that moved the HW: a trace of
        the produce benchmark had the consumer's answer leave 0.5 ms after the producer's."""
        if fetch:
            for fetch_op in self.fetch.watchers(key):
                self._try_complete_fetch(fetch_op, key)
        if produce:
            for produce_op in self.produce.watchers(key):
                if self.check_produce(produce_op) and self.produce.complete(produce_op):
                    produce_op.finish(produce_op.results)
        if delete:
            for delete_op in self.delete_records.watchers(key):
                if self.check_delete_records(delete_op) and self.delete_records.complete(delete_op):
                    delete_op.finish(delete_op.results)

    def check_produce(self, op: DelayedProduce) -> bool:
        """Complete the partitions of `op` that are done; True when none waits any more."""
        now_ms = self._clock()
        for index, (partition, required_offset) in list(op.pending.items()):
            # A replaced replica was stopped: its core leads nothing and answers so.
            effects = partition.core.step(ParkedProduceWoken(required_offset), now_ms)
            if not effects:
                continue
            completed = effects[0]
            assert isinstance(completed, CompleteParked)
            error = completed.error
            if isinstance(error, NotLeaderOrFollowerError):
                op.results[index] = replace(
                    op.results[index],
                    error=error,
                    current_leader=self._current_leader(partition.topic, partition.partition),
                )
            elif error is not None:
                op.results[index] = replace(op.results[index], error=error)
            del op.pending[index]
        return not op.pending

    def check_delete_records(self, op: DelayedDeleteRecords) -> bool:
        """Complete the partitions of `op` whose low watermark arrived; True when all did."""
        now_ms = self._clock()
        for index, (partition, offset) in list(op.pending.items()):
            woken = ParkedDeleteRecordsWoken(offset, _leader_log_start(partition))
            effects = partition.core.step(woken, now_ms)
            if effects:
                completed = effects[0]
                assert isinstance(completed, CompleteDeleteRecords)
                op.results[index] = completed.applied_to(op.results[index])
                del op.pending[index]
        return not op.pending

    def fetch_wake_verdict(self, op: DelayedFetch, indexes: Sequence[int]) -> str:
        """A cheap docs/design/replication.md#delayed-fetch-completion check of the request's
        entries at `indexes` before a woken fetch re-reads.

        "complete": a condition that answers the fetch whatever it reads (A-C: no leader or
        replica here; E, F, H: `fetch_rules.woken_fetch_verdict`). "read": data may exist
        below the bound; re-read and count it against min_bytes (G). "wait": nothing changed
        for it.
        """
        verdict = WOKEN_WAIT
        entries = op.entries
        is_from_follower = op.is_from_follower
        for index in indexes:
            entry = entries[index]
            partition = self._partitions.get((entry.topic, entry.partition))
            if partition is None or partition.leader_state is None:
                return WOKEN_COMPLETE
            plog = partition.log
            log_end_offset = plog.log_end_offset
            entry_verdict = woken_fetch_verdict(
                request_leader_epoch=entry.current_leader_epoch,
                leader_epoch=partition.leader_state.leader_epoch,
                fetch_offset=entry.fetch_offset,
                last_fetched_epoch=entry.last_fetched_epoch,
                is_follower=is_from_follower,
                log_end_offset=log_end_offset,
                high_watermark=partition.leader_state.high_watermark,
                log_start_offset=plog.log_start_offset,
                end_offset_for=_end_offsets_of(partition, log_end_offset),
            )
            if entry_verdict == WOKEN_COMPLETE:
                return WOKEN_COMPLETE
            if entry_verdict == WOKEN_READ:
                verdict = WOKEN_READ
        return verdict

    def _try_complete_fetch(self, op: DelayedFetch, key: TopicPartitionKey) -> None:
        indexes = op.indexes_of(key)
        # Woken even when the verdict waits: its answer (HW, log start) may have moved.
        op.woken.update(indexes)
        verdict = self.fetch_wake_verdict(op, indexes)
        if verdict == WOKEN_WAIT:
            return
        request = op.request
        read = self._read_fetch(request, self._clock(), op.reread())
        if (
            verdict == WOKEN_COMPLETE
            or read.bytes_read >= request.min_bytes
            or read.any_error
            or read.any_diverging
        ) and self.fetch.complete(op):
            op.finish(FetchResponse(tuple(read.results)))

    # --- deadlines ------------------------------------------------------------------------

    def expire_produce(self, op: DelayedProduce) -> None:
        """Answer `op` now: what is done as done, the rest as each partition's core says."""
        self.check_produce(op)
        now_ms = self._clock()
        for index, (partition, required_offset) in op.pending.items():
            (expired,) = partition.core.step(ParkedProduceExpired(required_offset), now_ms)
            assert isinstance(expired, CompleteParked)
            op.results[index] = replace(op.results[index], error=expired.error)
        op.pending.clear()
        op.finish(op.results)

    def expire_delete_records(self, op: DelayedDeleteRecords) -> None:
        """Answer `op` now: what arrived as done, the rest as each partition's core says."""
        self.check_delete_records(op)
        now_ms = self._clock()
        for index, (partition, offset) in op.pending.items():
            expired_event = ParkedDeleteRecordsExpired(offset, _leader_log_start(partition))
            (expired,) = partition.core.step(expired_event, now_ms)
            assert isinstance(expired, CompleteDeleteRecords)
            op.results[index] = expired.applied_to(op.results[index])
        op.pending.clear()
        op.finish(op.results)

    def expire(self, now_ms: int) -> None:
        """Answer every operation whose deadline is at or before `now_ms`."""
        for produce_op in self.produce.expire(now_ms):
            self.expire_produce(produce_op)
        for fetch_op in self.fetch.expire(now_ms):
            # An idle follower's fetch expires every `replica.fetch.wait.max.ms`: a full re-read
            # of its session's partitions each time cost a broker 60 us of CPU per partition
            # per second with nothing to replicate.
            read = self._read_fetch(fetch_op.request, now_ms, fetch_op.reread())
            fetch_op.finish(FetchResponse(tuple(read.results)))
        for delete_op in self.delete_records.expire(now_ms):
            self.expire_delete_records(delete_op)

    def next_deadline_ms(self) -> int | None:
        deadlines = [
            deadline
            for purgatory in (self.produce, self.fetch, self.delete_records)
            if (deadline := purgatory.next_deadline_ms()) is not None
        ]
        return min(deadlines, default=None)

    def answer_all_shutting_down(self) -> None:
        """Answer every waiting operation NOT_LEADER_OR_FOLLOWER: the broker is stopping."""
        for produce_op in self.produce.expire(_LONG_MAX):
            produce_op.fail_pending(lambda partition, _: self._shutting_down(partition.name))
            produce_op.finish(produce_op.results)
        for fetch_op in self.fetch.expire(_LONG_MAX):
            fetch_op.finish(
                FetchResponse(
                    tuple(
                        FetchPartitionResult(
                            e.topic, e.partition, self._shutting_down(f"{e.topic}-{e.partition}")
                        )
                        for e in fetch_op.request.partitions
                    )
                )
            )
        for delete_op in self.delete_records.expire(_LONG_MAX):
            delete_op.fail_pending(lambda partition, _: self._shutting_down(partition.name))
            delete_op.finish(delete_op.results)

    def _shutting_down(self, where: str) -> NotLeaderOrFollowerError:
        return NotLeaderOrFollowerError(f"{where}: broker {self._broker_id} is shutting down")


def _end_offsets_of(partition: Partition, log_end_offset: int) -> Callable[[int], tuple[int, int]]:
    """The leader's (epoch, end offset) lookup of `partition`'s leader-epoch cache."""
    cache = partition.log.leader_epoch_cache
    return lambda epoch: cache.end_offset_for(epoch, log_end_offset)


def _leader_log_start(partition: Partition) -> int:
    """The log start a led replica's low watermark starts from; -1 once it leads no more (its
    log may be closed)."""
    return partition.log.log_start_offset if partition.leader_state is not None else NO_OFFSET


async def _wait(op: _OpT, purgatory: Purgatory[TopicPartitionKey, _OpT]) -> object:
    try:
        return await op.future
    except asyncio.CancelledError:
        # The caller went away: nobody is left to answer.
        purgatory.complete(op)
        raise
