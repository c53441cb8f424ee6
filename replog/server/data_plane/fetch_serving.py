"""A leader serving Fetch: a consumer's or a follower's, now or from the fetch purgatory.

Rules (docs/design/replication.md#answer-now-or-wait, #delayed-fetch-completion,
#truncate-on-fetch, #follower-progress; Kafka's `ReplicaManager.fetchMessages`):
- Only the leader serves. Followers read up to the LEO, consumers up to the HW (never a batch
  at or above it), read_committed ones up to the last stable offset, with the aborted
  transactions of what they read (`Log.collect_aborted_transactions`); the HW in the answer is
  captured before a follower's fetch updates its progress (its core steps
  `FollowerFetchArrived`), and a fetch that reports a diverging epoch updates nothing. The
  epoch, offset and bound checks are `fetch_rules`'.
- The byte budget is `max_bytes` (at most the broker's fetch.max.bytes) over partitions,
  `partition_max_bytes` each, and the first batch is returned whole until the first partition
  with data. A fetch that cannot be answered at once waits in the fetch purgatory until a wake
  (leader append, HW move, leadership change) finds enough data or a completion condition, or
  `max_wait_ms` passes; either way it re-reads. A full purgatory answers at once.
- A ReplicaFetch session's round reads its dirty partitions only (`fetch_session`); a round
  of more than `FETCH_READ_STEP_PARTITIONS` partitions is read in steps with the loop's other
  tasks run between two, each partition read whole within one step.
- A follower outside the ISR of a partition the leader throttle names gets no records of it
  while the throttle is over its bound (Kafka's `shouldLeaderThrottle`).
- Bytes out count per partition answered to consumers; to a follower, the throttled
  partitions' bytes count against the leader throttle. Hot path: records are read as bytes or
  file regions, never decoded.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Iterable

from replog.common import TopicPartitionKey
from replog.errors import KafkaError, OffsetOutOfRangeError, PurgatoryFullError, UnknownServerError
from replog.replication.fetch_rules import (
    answer_immediately,
    check_current_leader_epoch,
    check_fetch_offset,
    diverging_epoch,
    fetch_upper_bound,
)
from replog.replication.fetch_session import LeaderFetchSession
from replog.replication.messages import (
    NO_OFFSET,
    EpochEndOffsetResult,
    FetchPartition,
    FetchPartitionResult,
    FetchRequest,
    FetchResponse,
    IsolationLevel,
)
from replog.replication.partition_events import FollowerFetchArrived
from replog.server.data_plane.delayed_operations import DelayedFetch, FetchRead, Reread
from replog.server.data_plane.partition import Partition
from replog.server.data_plane.repeat_reads import RepeatReads, asker_of
from replog.server.data_plane.replica_shell import ReplicaShell
from replog.server.runtime.loop_turns import yield_turn
from replog.storage.file_region import Region

log = logging.getLogger("replog.server.data_plane.replica_manager")  # every role's lines

# Partitions one step of a fetch session round's initial reads covers before the loop's other
# tasks run (`_read_entries`): 10-25 us each on a loaded machine, so a step is a few ms; a round
# reads at most `fetch_session.ROUND_PARTITIONS` (250), whose reads held the loop up to 6 ms of
# CPU in one step (creating 10,000-30,000 partitions, three nodes on 2 cores).
FETCH_READ_STEP_PARTITIONS = 100


class FetchServing(ReplicaShell):
    """A leader's Fetch (module docstring)."""

    async def fetch(
        self,
        request: FetchRequest,
        repeats: RepeatReads | None = None,
        session: LeaderFetchSession | None = None,
    ) -> FetchResponse:
        """`fetch_or_wait`'s answer, awaited when the fetch waits."""
        answer = self.fetch_or_wait(request, repeats, session)
        return answer if isinstance(answer, FetchResponse) else await answer

    def fetch_or_wait(
        self,
        request: FetchRequest,
        repeats: RepeatReads | None = None,
        session: LeaderFetchSession | None = None,
    ) -> FetchResponse | Awaitable[FetchResponse]:
        """Answer a fetch now or from the purgatory (docs/design/replication.md#answer-now-or-wait,
        #delayed-fetch-completion): the answer itself when it is given at once, else an
        awaitable of it, the fetch already parked (await it at once: see
        `DelayedOperations.watch_fetch`). `repeats`: the calling fetch session's kept reads
        (`repeat_reads`), which its unchanged idle entries reuse.

        With `session`, `request` is one dirty-only round of that ReplicaFetch session
        (`fetch_session` Rules): its entries are the session's dirty partitions, an idle one
        read is parked, and a round that waits is woken by news for any of the session's
        partitions, which then join its answer. A round of more than
        FETCH_READ_STEP_PARTITIONS partitions is read in steps (`_read_entries`): its answer
        is an awaitable."""
        now_ms = self._clock()
        if session is not None:
            self._fetch_sessions.add(session)  # before the reads: they may make news
            for key in session.take_left():
                if request.is_from_follower:
                    self._unpark(session, request.replica_id, key)
        step = FETCH_READ_STEP_PARTITIONS
        if session is None or len(request.partitions) <= step:
            read = self._read_fetch(request, now_ms, initial=True, repeats=repeats, session=session)
            return self._answer_read(request, read, now_ms, session)
        read = FetchRead([], 0, False, False)
        self._read_entries(request, read, range(step), now_ms, repeats=repeats, session=session)
        return self._answer_stepped_read(request, read, now_ms, repeats, session)

    async def _answer_stepped_read(
        self,
        request: FetchRequest,
        read: FetchRead,
        now_ms: int,
        repeats: RepeatReads | None,
        session: LeaderFetchSession,
    ) -> FetchResponse:
        """A session round of more than FETCH_READ_STEP_PARTITIONS partitions, its first step
        read (`read`): the others read that many at a time (`_read_entries`), the loop's other
        tasks run between two steps, then answered as `fetch_or_wait` answers. News the other
        tasks make meanwhile for any of the session's partitions (`LeaderFetchSession.mark`,
        here with no waiting round to wake) makes the round answer without waiting: a
        partition read in an earlier step and parked is dirty again, and the next round, which
        follows at once, reads it, as it reads one a bounded round deferred."""
        news: list[TopicPartitionKey] = []
        step = FETCH_READ_STEP_PARTITIONS
        count = len(request.partitions)
        for start in range(step, count, step):
            # Only the other tasks' news: the round's own reads' (a HW they moved) is no news
            # to it, as in one step.
            session.waiter = news.append
            try:
                await yield_turn()
            finally:
                session.waiter = None
            indexes = range(start, min(start + step, count))
            self._read_entries(request, read, indexes, now_ms, repeats=repeats, session=session)
        answer = self._answer_read(request, read, now_ms, session, at_once=bool(news))
        return answer if isinstance(answer, FetchResponse) else await answer

    def _answer_read(
        self,
        request: FetchRequest,
        read: FetchRead,
        now_ms: int,
        session: LeaderFetchSession | None,
        *,
        at_once: bool = False,
    ) -> FetchResponse | Awaitable[FetchResponse]:
        """`fetch_or_wait`'s answer to `read`, its initial read of `request` (taken at
        `now_ms`): now, or parked in the purgatory."""
        if session is not None:
            session.clock.advance(now_ms)  # after the round's reads (replica_progress)
        if (
            at_once
            or answer_immediately(
                max_wait_ms=request.max_wait_ms,
                partition_count=len(request.partitions if session is None else session),
                bytes_read=read.bytes_read,
                min_bytes=request.min_bytes,
                any_error=read.any_error,
                any_diverging=read.any_diverging,
            )
            or self._stopped
        ):
            return self._count_sent(request, FetchResponse(tuple(read.results)))
        try:
            waiting = self._delayed.watch_fetch(
                DelayedFetch(request, read), now_ms + request.max_wait_ms, session
            )
        except PurgatoryFullError:
            log.warning("fetch purgatory full: answering a fetch at once")
            return self._count_sent(request, FetchResponse(tuple(read.results)))
        return self._sent_when_answered(request, waiting)

    async def _sent_when_answered(
        self, request: FetchRequest, waiting: Awaitable[FetchResponse]
    ) -> FetchResponse:
        return self._count_sent(request, await waiting)

    def _count_sent(self, request: FetchRequest, response: FetchResponse) -> FetchResponse:
        """Bytes out to consumers, per partition answered (followers' fetches are not); to a
        follower, the bytes of the partitions the leader throttle names count against it,
        an in-sync replica's too (Kafka's `sizeOfThrottledPartitions`)."""
        if request.is_from_follower:
            quota = self.leader_quota
            if quota.throttled:
                size = sum(
                    result.records_size
                    for result in response.partitions
                    if quota.is_throttled(result.topic, result.partition)
                )
                if size:
                    quota.record(size, self._clock())
        else:
            sent = self.counters.sent
            for result in response.partitions:
                size = result.records_size
                if size:
                    sent(result.topic, size)
        return response

    def _read_fetch(
        self,
        request: FetchRequest,
        now_ms: int,
        *,
        initial: bool,
        reread: Reread | None = None,
        repeats: RepeatReads | None = None,
        session: LeaderFetchSession | None = None,
    ) -> FetchRead:
        """Read every partition of a fetch with the byte budget of
        docs/design/replication.md#answer-now-or-wait; with `reread`, only the
        entries it names, the others answered with its results (which hold no records, so
        they take none of the budget). With `repeats` (initial reads only), an entry whose
        kept read still holds is answered from it (no records either)."""
        if reread is None:
            read = FetchRead([], 0, False, False)
            indexes: Iterable[int] = range(len(request.partitions))
        else:
            read = FetchRead(list(reread.results), 0, False, False)
            indexes = sorted(reread.indexes)
        self._read_entries(
            request,
            read,
            indexes,
            now_ms,
            initial=initial,
            reread=reread is not None,
            repeats=repeats,
            session=session,
        )
        return read

    def _read_entries(
        self,
        request: FetchRequest,
        read: FetchRead,
        indexes: Iterable[int],
        now_ms: int,
        *,
        initial: bool = True,
        reread: bool = False,
        repeats: RepeatReads | None = None,
        session: LeaderFetchSession | None = None,
    ) -> None:
        """Read the entries of `request` at `indexes`, in order, into `read` (appended to
        its results; with `reread`, in their places), whose `bytes_read` the byte budget
        (`max_bytes`, `partition_max_bytes`, the first batch) has spent already.

        A session round of many partitions is read in steps of entries with the loop's other
        tasks run between two (`fetch_or_wait`). Each partition is read whole within one step,
        so every rule of one partition's read holds as in one step (its HW captured before its
        follower progress moves, its kept read, parking, the round's `now_ms`), the byte budget
        carries from step to step and the entries are read in the request's order: the answer
        is the one a single step would give on the same logs. What differs is only what a
        leader sees between two partitions' reads, as Kafka's leader, whose appends run beside
        a fetch's reads: a partition read later in the round may hold records appended, or a
        HW moved, after an earlier one was read (each answer is its partition's own consistent
        read); news for a partition read and parked in an earlier step makes it dirty again
        (`_answer_stepped_read` answers at once); the session's clock moves only after the
        last step, so until then a partition parked in an earlier step reads as fetched at the
        previous round's time, never later than true (only the ISR's lag check,
        `replica.lag.time.max.ms`, reads it)."""
        # The broker's fetch.max.bytes bounds what any request may ask for.
        remaining = min(request.max_bytes, self.config.fetch_max_bytes) - read.bytes_read
        min_one_message = not read.bytes_read
        entries = request.partitions
        asker = asker_of(request)
        assert repeats is None or not reread, "kept reads answer initial reads only"
        unpark = session is not None and request.is_from_follower
        for index in indexes:
            entry = entries[index]
            if unpark:
                # Read again: the fetch is recorded by this read or, if it fails, not at all
                # (`fetch_session` Rules).
                assert session is not None
                self._unpark(session, request.replica_id, (entry.topic, entry.partition))
            if repeats is not None:
                repeated = repeats.answer(entry, self._partitions, asker, now_ms)
                if repeated is not None:
                    read.results.append(repeated)  # no records, no error: nothing to count
                    if session is not None:
                        self._park(session, request, entry)
                    continue
            budget = max(0, min(entry.partition_max_bytes, remaining))
            try:
                result, hw_moved = self._read_partition(
                    request,
                    entry,
                    budget,
                    min_one_message,
                    now_ms,
                    initial=initial,
                    repeats=repeats,
                    session=session,
                )
                if hw_moved:
                    read.hw_moved.append(index)
            except KafkaError as exc:
                result = self._fetch_error(request, entry, exc)
            except Exception as exc:  # a bug must not take the other partitions down
                log.exception("%s-%d: fetch failed", entry.topic, entry.partition)
                result = self._fetch_error(
                    request, entry, UnknownServerError(f"{entry.topic}-{entry.partition}: {exc!r}")
                )
            if not reread:
                read.results.append(result)
            else:
                read.results[index] = result
            size = result.records_size
            if size:
                min_one_message = False
                remaining -= size
                read.bytes_read += size
            read.any_error = read.any_error or result.error is not None
            read.any_diverging = read.any_diverging or result.diverging_epoch is not None

    def _read_partition(
        self,
        request: FetchRequest,
        entry: FetchPartition,
        max_bytes: int,
        min_one_message: bool,
        now_ms: int,
        *,
        initial: bool,
        repeats: RepeatReads | None = None,
        session: LeaderFetchSession | None = None,
    ) -> tuple[FetchPartitionResult, bool]:
        """The entry's result, and whether this read then moved the partition's HW (only an
        initial follower read records progress, docs/design/replication.md#follower-progress). A
        read that found nothing to read and
        did not move the HW goes into `repeats` (`repeat_reads` Rules)."""
        partition = self._leader_partition(entry.topic, entry.partition, entry.topic_id)
        leader_state = partition.leader_state
        assert leader_state is not None
        where = partition.name
        check_current_leader_epoch(where, entry.current_leader_epoch, leader_state.leader_epoch)
        plog = partition.log
        # Captured before this fetch changes any progress
        # (docs/design/replication.md#follower-progress).
        log_end_offset = plog.log_end_offset
        log_start_offset = plog.log_start_offset
        high_watermark = leader_state.high_watermark
        diverging = diverging_epoch(
            where,
            fetch_offset=entry.fetch_offset,
            last_fetched_epoch=entry.last_fetched_epoch,
            leader_end_offset_for_last_epoch=plog.leader_epoch_cache.end_offset_for(
                entry.last_fetched_epoch, log_end_offset
            ),
            log_start_offset=log_start_offset,
        )
        if diverging is not None:
            answer = _leader_answer(
                partition, high_watermark, log_start_offset, diverging_epoch=diverging
            )
            return answer, False
        check_fetch_offset(
            where,
            fetch_offset=entry.fetch_offset,
            log_start_offset=log_start_offset,
            log_end_offset=log_end_offset,
        )
        is_follower = request.is_from_follower
        last_stable_offset = (
            high_watermark if is_follower else partition.last_stable_offset(high_watermark)
        )
        committed = request.isolation_level == IsolationLevel.READ_COMMITTED
        bound = fetch_upper_bound(
            is_follower=is_follower,
            isolation_level=request.isolation_level,
            log_end_offset=log_end_offset,
            high_watermark=high_watermark,
            last_stable_offset=last_stable_offset,
        )
        # Nothing to read at or past the bound (the offset is in range: checked above); most
        # partitions of a follower's request are idle, and are asked for every round.
        records = (
            plog.read_or_region(
                entry.fetch_offset,
                max_bytes,
                bound,
                min_one_message=min_one_message,
                region_min_bytes=request.region_min_bytes,
            )
            if entry.fetch_offset < bound
            and not (
                self.leader_quota.throttled
                and request.is_from_follower
                and self._leader_throttles(partition, request.replica_id, now_ms)
            )
            else b""
        )
        result = partition.empty_fetch_result
        if committed and records:
            # The aborted transactions of what it reads (Kafka's: up to the bound it read to).
            aborted = partition.aborted_transactions(entry.fetch_offset, bound)
            result = _leader_answer(
                partition,
                high_watermark,
                log_start_offset,
                records=records,
                last_stable_offset=last_stable_offset,
                aborted_transactions=tuple((a.producer_id, a.first_offset) for a in aborted),
            )
        elif (
            records
            or result is None
            or result.high_watermark != high_watermark
            or result.log_start_offset != log_start_offset
            or result.last_stable_offset != last_stable_offset
        ):
            result = _leader_answer(
                partition,
                high_watermark,
                log_start_offset,
                records=records,
                last_stable_offset=last_stable_offset,
            )
            if not records:
                partition.empty_fetch_result = result
        if request.is_from_follower and initial:
            effects = partition.core.step(
                FollowerFetchArrived(
                    request.replica_id,
                    request.replica_epoch,
                    entry.fetch_offset,
                    entry.log_start_offset,
                    log_end_offset,
                ),
                now_ms,
            )
            if effects and self._execute(partition, effects):
                return result, True  # its answer holds the HW from before: not kept
        if not records and entry.fetch_offset >= bound:
            if repeats is not None:
                repeats.keep(
                    entry, asker_of(request), partition, log_end_offset, log_start_offset, result
                )
            if session is not None and initial:
                self._park(session, request, entry)
        return result, False

    def _leader_throttles(self, partition: Partition, replica_id: int, now_ms: int) -> bool:
        """Whether a fetch by follower `replica_id` gets no records of `partition` now (the
        leader throttle's `throttles_leader_read`). A fetch that gets none of them waits as
        one with nothing to read (Kafka's `DelayedFetch` counts no bytes of such a
        partition)."""
        leader_state = partition.leader_state
        assert leader_state is not None
        return self.leader_quota.throttles_leader_read(
            partition.topic,
            partition.partition,
            in_sync=replica_id in leader_state.isr,
            now_ms=now_ms,
        )

    def _unpark(self, session: LeaderFetchSession, replica_id: int, key: TopicPartitionKey) -> None:
        partition = self._partitions.get(key)
        if partition is not None and partition.leader_state is not None:
            partition.leader_state.unpark_follower(replica_id, session.clock)

    def _park(
        self, session: LeaderFetchSession, request: FetchRequest, entry: FetchPartition
    ) -> None:
        """An initial read of `entry` found nothing to read and moved no HW: it leaves the
        session's dirty partitions, a follower's progress parked on the session's clock
        (`fetch_session` Rules)."""
        key = (entry.topic, entry.partition)
        if request.is_from_follower:
            partition = self._partitions.get(key)
            leader_state = None if partition is None else partition.leader_state
            if (
                partition is None
                or leader_state is None
                or not leader_state.park_follower(
                    request.replica_id,
                    session.clock,
                    leader_log_end_offset=partition.log.log_end_offset,
                )
            ):
                return
        session.park(key)

    def _fetch_error(
        self, request: FetchRequest, entry: FetchPartition, error: KafkaError
    ) -> FetchPartitionResult:
        high_watermark = log_start_offset = log_end_offset = NO_OFFSET
        partition = self._partitions.get((entry.topic, entry.partition))
        if partition is not None and partition.leader_state is not None:
            high_watermark = partition.leader_state.high_watermark
            log_start_offset = partition.log.log_start_offset
            if request.is_from_follower and isinstance(error, OffsetOutOfRangeError):
                # The follower places itself with it
                # (docs/design/replication.md#follower-out-of-range).
                log_end_offset = partition.log.log_end_offset
        return FetchPartitionResult(
            entry.topic,
            entry.partition,
            error,
            high_watermark=high_watermark,
            last_stable_offset=high_watermark,
            log_start_offset=log_start_offset,
            current_leader=self._error_leader(error, entry.topic, entry.partition),
            topic_id=entry.topic_id,
            log_end_offset=log_end_offset,
        )


def _leader_answer(
    partition: Partition,
    high_watermark: int,
    log_start_offset: int,
    *,
    records: bytes | Region = b"",
    diverging_epoch: EpochEndOffsetResult | None = None,
    last_stable_offset: int | None = None,
    aborted_transactions: tuple[tuple[int, int], ...] | None = None,
) -> FetchPartitionResult:
    """A leader's answer for one partition of a fetch (`last_stable_offset`: the HW when not
    given; `aborted_transactions`: a READ_COMMITTED read's)."""
    region = None
    if not isinstance(records, bytes):
        region, records = records, b""
    return FetchPartitionResult(
        partition.topic,
        partition.partition,
        high_watermark=high_watermark,
        last_stable_offset=high_watermark if last_stable_offset is None else last_stable_offset,
        log_start_offset=log_start_offset,
        diverging_epoch=diverging_epoch,
        records=records,
        topic_id=partition.topic_id,
        region=region,
        aborted_transactions=aborted_transactions,
    )
