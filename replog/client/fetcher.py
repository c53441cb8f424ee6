"""The consumer's fetcher: Fetch requests to partition leaders, answers buffered for `poll`.

Theory of operation: `send_fetches` starts, for every leader that has fetchable partitions
(assigned, position known, no reset pending, not paused, no error buffered, the read-ahead
bound below) and no request in flight, one Fetch (replica id -1) with `fetch.min.bytes`,
`fetch.max.wait.ms`, `fetch.max.bytes` and `max.partition.fetch.bytes`. Answers are buffered per
partition (`fetched_records.fetched_answer`: their batches checked at once, their records
decoded a batch at a time as `drain` reaches them, so what waits ahead of the application is
bytes, not a Python object a record); `drain` hands them out and moves the positions.
Fetches are sent right after a drain and again as each answer arrives, so the network works
while the application processes what `poll` returned (prefetching), and a leader is asked
again without waiting for the next poll. A partition whose records are
still buffered is fetched ahead, from where its last buffered answer ends (librdkafka
prefetches too, up to `queued.max.messages.kbytes`; Kafka's Java consumer waits until they
are handed out): a catch-up read then keeps a fetch in flight to each leader instead of
waiting a round trip each time a partition's buffer runs out. The read-ahead is bounded by
`fetch.max.bytes`: no partition is fetched ahead while the answers buffered for all of them
hold that many record bytes or more (so at most `fetch.max.bytes` plus one answer a
partition is held). An answer ahead that brings an error or nothing is dropped (after an
error its leader is backed off, and a retriable error requests a metadata update at once, as
Kafka's consumer does when it sees one, so the new leader is known by the time the buffer
drains; an empty answer is asked again at once, and the leader waits `fetch.max.wait.ms` for
data): the partition meets it again when fetched at its position, where the rules below
apply. A leader's fetches go one after another
on the broker's fetch connection (`kafka_broker_client.FetchStream`), as a Kafka consumer's
do. A failed fetch ends its session; the next starts another.
A broker's stream is closed once it leads none of the assigned partitions.

Each call holds an incremental fetch session (KIP-227, `replication.fetch_session`), as Kafka's
consumer does: after the call's first request, a fetch carries only the partitions whose entry
changed (a new position, a new leader epoch) or that joined, and names those it no longer
fetches there (the read-ahead bound reached, an error buffered, paused, a reset pending, led
elsewhere now: on the next request to that leader); the leader answers only those with
records, an error, or a high watermark or log start offset it has not yet sent without an
error. A partition missing from an answer has nothing new. A partition whose high watermark
the consumer does not know (newly assigned, or only errors so far) is sent each time until an
answer brings it. So a consumer of many mostly idle partitions exchanges small messages, not
every partition both ways on every fetch (docs/benchmarks.md, "Idle partitions").

Rules:
- An answer is used only if the partition is still assigned and the offset it was fetched
  from is still where the partition's next records start (its position, or the end of its
  buffered answer); a seek or a reset in between discards its records. Its high
  watermark and log start offset are kept even then (`highwater`), if the answering broker is
  still the partition's leader in the metadata: the session reports each value once, so a
  discarded one might not come again.
- Reads never go above the high watermark: the leader serves consumers only committed data,
  and `fetched_answer` drops anything at or above the HW the answer reported. With
  `isolation.level` read_committed (Fetch and ListOffsets isolation level 1) they stop at
  the last stable offset too, and the batches of the aborted transactions the answer names
  are dropped (`read_committed.py`); control batches are never returned at either level.
- OFFSET_OUT_OF_RANGE applies `auto.offset.reset`: earliest/latest mark the partition for a
  reset (looked up before the next fetch), said at WARNING with the log's range ("Fetch
  position 2 is out of range for partition t-0 (the log holds [5, 10)), resetting offset to
  earliest"; Kafka's Fetcher says it at INFO, which a console consumer does not show: a
  position below the log start offset reset to latest returns nothing, and the user must
  learn why); none raises `OffsetOutOfRangeError` from `poll` naming the partition, the
  offset and the log's range.
- NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, UNKNOWN_TOPIC_OR_PARTITION
  and the other retriable answers, and an unreachable broker, mark the metadata stale and
  back the leader off for `retry.backoff.ms`; the partition is fetched again from the new
  leader once the metadata says who it is. They are logged once per change of cause.
- Non-retriable answers and undecodable records (CRC mismatch with `check.crcs`, record bytes
  that hold no whole batch at the position) are raised from `poll`, after the records before
  them in the buffer were handed out (by the next poll at the latest). Such an error is the
  partition's buffered fetch, tied to the position it was fetched at: the partition is not
  fetched again until it is raised, and a seek, a reset or an unassignment in between drops
  it (raised once per fetch, never a stale copy). An answer that is not one
  (`MalformedResponseError`: unparseable bytes, a partition not asked for) is raised too; its
  leader is treated like an unreachable one, as Kafka's NetworkClient treats a connection
  whose bytes are no response (it closes it, and a disconnect requests a metadata update):
  backed off, its channel dropped, the metadata marked stale (the address may now belong to
  another process, or the leader moved).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass

from replog.client.call_guard import guarded
from replog.client.cluster_metadata import ClusterMetadata
from replog.client.config import ConsumerConfig
from replog.client.connections import Connections
from replog.client.fetched_records import CompletedFetch, fetched_answer
from replog.client.records import ConsumerRecord, TopicPartition
from replog.client.subscription import NONE, SubscriptionState
from replog.client.task_owner import TaskOwner
from replog.clock import monotonic_ms
from replog.errors import (
    CorruptRecordError,
    MalformedResponseError,
    OffsetOutOfRangeError,
    ReplogError,
)
from replog.replication import messages as m
from replog.wire.kafka_broker_client import FetchStream

log = logging.getLogger("replog.client.consumer")


@dataclass(frozen=True)
class FetchSettings:
    """What the fetcher takes from the consumer's config."""

    fetch_min_bytes: int = 1
    fetch_max_bytes: int = 52_428_800
    fetch_max_wait_ms: int = 500
    max_partition_fetch_bytes: int = 1_048_576
    isolation_level: m.IsolationLevel = m.IsolationLevel.READ_UNCOMMITTED
    check_crcs: bool = True
    auto_offset_reset: str = "latest"
    retry_backoff_ms: int = 100
    key_deserializer: Callable[[bytes | None], object] | None = None
    value_deserializer: Callable[[bytes | None], object] | None = None

    @classmethod
    def of(cls, config: ConsumerConfig) -> FetchSettings:
        return cls(
            fetch_min_bytes=config.fetch_min_bytes,
            fetch_max_bytes=config.fetch_max_bytes,
            fetch_max_wait_ms=config.fetch_max_wait_ms,
            max_partition_fetch_bytes=config.max_partition_fetch_bytes,
            isolation_level=isolation_level(config.isolation_level),
            check_crcs=config.check_crcs,
            auto_offset_reset=config.auto_offset_reset,
            retry_backoff_ms=config.retry_backoff_ms,
            key_deserializer=config.key_deserializer,
            value_deserializer=config.value_deserializer,
        )


def isolation_level(name: str) -> m.IsolationLevel:
    if name == "read_committed":
        return m.IsolationLevel.READ_COMMITTED
    return m.IsolationLevel.READ_UNCOMMITTED


class Fetcher:
    def __init__(
        self,
        subscriptions: SubscriptionState,
        metadata: ClusterMetadata,
        connections: Connections,
        settings: FetchSettings,
        *,
        tasks: TaskOwner,
        clock: Callable[[], int] = monotonic_ms,
    ) -> None:
        self._subscriptions = subscriptions
        self._tasks = tasks  # the consumer's TaskGroup: a fetch that dies fails the consumer
        self._metadata = metadata
        self._connections = connections
        self.settings = settings
        self._clock = clock
        self._buffered: dict[TopicPartition, CompletedFetch] = {}
        self._errors: list[ReplogError] = []
        self._in_flight: dict[int, asyncio.Task[None]] = {}
        # Per leader: the address its stream goes to, and the stream (used by one fetch at a
        # time: a leader has at most one in flight).
        self._streams: dict[int, tuple[str, FetchStream]] = {}
        self._backoff_until: dict[int, int] = {}
        self._logged: dict[object, str] = {}  # last cause logged per node / partition
        self._arrived = asyncio.Event()
        self._closed = False

    # --- sending ------------------------------------------------------------------------------

    def send_fetches(self) -> None:
        """Start a Fetch to every leader that has something to fetch and none in flight."""
        now = self._clock()
        by_node: dict[int, list[m.FetchPartition]] = {}
        unknown: dict[int, set[tuple[str, int]]] = {}  # per leader: high watermark not known
        addresses: dict[int, str] = {}
        leading: set[int] = set()  # brokers leading an assigned partition, fetchable or not
        held = self._held_bytes()
        for tp, state in self._subscriptions.items():
            leader = self._metadata.partition(tp)
            if leader is not None and leader.leader >= 0:
                leading.add(leader.leader)
            if not state.fetchable:
                continue
            fetch_offset = self._fetch_offset(tp, state.position, held)
            if fetch_offset is None:
                continue
            if leader is None or leader.leader < 0:
                self._metadata.request_update()
                continue
            node = leader.leader
            if node in self._in_flight or self._backoff_until.get(node, 0) > now:
                continue
            address = self._metadata.broker_address(node)
            if address is None:
                self._metadata.request_update()
                continue
            addresses[node] = address
            assert state.position is not None
            if state.high_watermark < 0:
                # Unknown (newly assigned, or only errors so far): have the leader's session
                # answer it in full even if its entry there has not changed.
                unknown.setdefault(node, set()).add((tp.topic, tp.partition))
            by_node.setdefault(node, []).append(
                m.FetchPartition(
                    tp.topic,
                    tp.partition,
                    fetch_offset,
                    self.settings.max_partition_fetch_bytes,
                    current_leader_epoch=leader.leader_epoch,
                )
            )
        for node, partitions in by_node.items():
            request = m.FetchRequest(
                tuple(partitions),
                max_wait_ms=self.settings.fetch_max_wait_ms,
                min_bytes=self.settings.fetch_min_bytes,
                max_bytes=self.settings.fetch_max_bytes,
                isolation_level=self.settings.isolation_level,
            )
            task = self._tasks.spawn(
                self._fetch(node, addresses[node], request, unknown.get(node, set()))
            )
            self._in_flight[node] = task
            task.add_done_callback(functools.partial(self._fetch_done, node))
        self._close_streams_except(leading)

    def _fetch_offset(
        self, tp: TopicPartition, position: int | None, held: int | None = None
    ) -> int | None:
        """Where the partition's next fetch starts: its position, or, while fetched records are
        buffered, where the last buffered answer ends; None: not now (an error waiting to be
        raised, a seek the buffer has not seen yet, or, with `held` (the record bytes buffered
        for every partition), the read-ahead bound reached)."""
        ahead = self._buffered.get(tp)
        if ahead is None:
            return position
        if ahead.position != position:
            return None
        while True:
            if ahead.error is not None:
                return None
            if ahead.following is None:
                break
            ahead = ahead.following
        if held is not None and held >= self.settings.fetch_max_bytes:
            return None
        return ahead.next_offset

    def _held_bytes(self) -> int:
        """The record bytes of every buffered answer (the read-ahead bound's measure)."""
        held = 0
        for completed in self._buffered.values():
            answer: CompletedFetch | None = completed
            while answer is not None:
                held += answer.size
                answer = answer.following
        return held

    def _close_streams_except(self, leading: set[int]) -> None:
        """Close the stream to every broker that leads none of the assigned partitions and has
        no fetch in flight. A former leader's idle call would hold an HTTP/2 stream and a handler
        task there for the consumer's life, and delay that broker's shutdown by its grace."""
        for node in [n for n in self._streams if n not in leading and n not in self._in_flight]:
            self._streams.pop(node)[1].close()

    def _fetch_done(self, node: int, task: asyncio.Task[None]) -> None:
        if self._in_flight.get(node) is task:
            del self._in_flight[node]
        self._arrived.set()
        if not self._closed and not task.cancelled() and self._tasks.running:
            # The leader is asked again at once (module docstring), not at the next poll.
            self.send_fetches()

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    def _stream(self, node: int, address: str) -> FetchStream:
        """The leader's stream, a new one if it has none or moved to another address."""
        known = self._streams.get(node)
        if known is not None and known[0] == address:
            return known[1]
        if known is not None:
            known[1].close()
        stream = self._connections.broker(address).fetch_stream(sessions=True)
        self._streams[node] = (address, stream)
        return stream

    async def _fetch(
        self, node: int, address: str, request: m.FetchRequest, resend: set[tuple[str, int]]
    ) -> None:
        try:
            response = await guarded(
                self._stream(node, address).fetch(request, resend=resend),
                address=address,
                what="Fetch",
                node_id=node,
            )
        except MalformedResponseError as exc:
            # Not retriable (asking again gets the same answer): `poll` raises it, as Kafka's
            # consumer raises a fetch error it cannot retry; the next poll asks again after
            # the backoff. Once per pending error, not once per fetch.
            self._log_once(node, f"fetch from broker {node} failed: {exc}")
            self._back_off(node)
            self._add_error(exc)
            self._connections.redial(address)
            self._metadata.request_update()
            return
        except ReplogError as exc:  # a lost connection, no answer in time, ...
            self._log_once(node, f"fetch from broker {node} failed: {exc}")
            self._back_off(node)
            self._metadata.distrust(address)  # it may be a leader cut off from the cluster
            return
        self._logged.pop(node, None)
        offsets = {(p.topic, p.partition): p.fetch_offset for p in request.partitions}
        for result in response.partitions:
            fetch_offset = offsets.get((result.topic, result.partition))
            if fetch_offset is not None:
                self._handle(
                    node,
                    address,
                    TopicPartition(result.topic, result.partition),
                    fetch_offset,
                    result,
                )

    def _add_error(self, error: ReplogError) -> None:
        """Queue `error` for `poll` unless the same one is pending (a fetch asked again)."""
        if all(str(pending) != str(error) for pending in self._errors):
            self._errors.append(error)

    def _back_off(self, node: int) -> None:
        self._backoff_until[node] = self._clock() + self.settings.retry_backoff_ms

    def _handle(
        self,
        node: int,
        address: str,
        tp: TopicPartition,
        fetch_offset: int,
        result: m.FetchPartitionResult,
    ) -> None:
        state = self._subscriptions.get(tp)
        if state is None:
            return  # unassigned since the request left
        error = result.error
        leader = self._metadata.partition(tp)
        if error is None and leader is not None and leader.leader == node:
            # The partition's, whatever the position: kept even from a stale answer, since
            # the fetch session sends each new value once; but only from the leader the
            # metadata names, not a late answer of a former one. (A leader the metadata does
            # not know yet answers in full once it does: the entry's leader epoch changes.)
            if result.high_watermark >= 0:
                state.high_watermark = result.high_watermark
            if result.log_start_offset >= 0:
                state.log_start_offset = result.log_start_offset
        if state.reset is not None or self._fetch_offset(tp, state.position) != fetch_offset:
            return  # sought or reset since the request left: the records are stale
        if fetch_offset != state.position and (error is not None or not result.records):
            # A fetch ahead of the buffered records found trouble (or nothing): it is met
            # again, and handled, when the partition is fetched at its position; meanwhile
            # its leader is not asked again at once. A retriable error says the metadata is
            # stale (a new leader, a new epoch): that is asked at once, as at the position,
            # not once the buffer drains.
            if error is not None:
                self._back_off(node)
                if error.retriable:
                    self._metadata.request_update()
            return
        if error is not None or result.records:
            # The others go first in the next full request (a session's leader rotates on
            # its own after that).
            self._subscriptions.move_to_end(tp)
        if error is None:
            self._logged.pop(tp, None)
            if not result.records:
                return
            settings = self.settings
            completed = fetched_answer(
                tp,
                result.records,
                position=fetch_offset,
                high_watermark=result.high_watermark,
                log_start_offset=result.log_start_offset,
                check_crcs=settings.check_crcs,
                key_deserializer=settings.key_deserializer,
                value_deserializer=settings.value_deserializer,
                aborted_transactions=(
                    (result.aborted_transactions or ())
                    if settings.isolation_level == m.IsolationLevel.READ_COMMITTED
                    else None
                ),
                last_stable_offset=result.last_stable_offset,
            )
            if not completed.empty or completed.next_offset > fetch_offset:
                ahead = self._buffered.get(tp)
                if ahead is None:
                    self._buffered[tp] = completed
                elif completed.error is None:
                    while ahead.following is not None:
                        ahead = ahead.following
                    ahead.following = completed
                else:
                    self._back_off(node)  # as above: raised once fetched at the position
                return
            if fetch_offset != state.position:
                self._back_off(node)
                return
            # Bytes, but no whole batch at or after the position: a broker reads whole batches
            # only, the first one even beyond the byte limits (KIP-74), so these are not
            # batches; fetching again would get them again. Kafka's consumer fails the same
            # way ("no complete records were found").
            self._back_off(node)
            self._buffer_error(
                tp,
                fetch_offset,
                result,
                CorruptRecordError(
                    f"fetch of {tp.topic}-{tp.partition} at offset {fetch_offset} from broker "
                    f"{node} at {address}: the answer's {len(result.records)} record bytes "
                    "hold no whole record batch"
                ),
            )
            return
        if isinstance(error, OffsetOutOfRangeError):
            self._out_of_range(tp, fetch_offset, result)
            return
        if error.retriable:
            self._log_once(tp, f"fetch of {tp.topic}-{tp.partition} from broker {node}: {error}")
            self._metadata.request_update()
            self._back_off(node)
            return
        self._buffer_error(tp, fetch_offset, result, error)

    def _buffer_error(
        self,
        tp: TopicPartition,
        fetch_offset: int,
        result: m.FetchPartitionResult,
        error: ReplogError,
    ) -> None:
        """Hold `error` as the partition's buffered fetch, tied to the position it was fetched
        at: `drain` raises it only while the partition is assigned, unpaused and still there
        (a seek, a reset or an unassignment drops it, as Kafka's consumer ignores an error of
        a fetch whose offset is no longer the position), and the partition is not fetched
        again meanwhile, so one cause is not queued once per prefetch."""
        self._buffered[tp] = CompletedFetch(
            tp,
            fetch_offset,
            [],
            fetch_offset,
            result.high_watermark,
            result.log_start_offset,
            error,
        )

    def _out_of_range(
        self, tp: TopicPartition, fetch_offset: int, result: m.FetchPartitionResult
    ) -> None:
        policy = self.settings.auto_offset_reset
        known = ""
        if result.log_start_offset >= 0 and result.high_watermark >= 0:
            known = (
                f" (the log holds [{result.log_start_offset}, {result.high_watermark}) "
                "for consumers)"
            )
        if policy == NONE:
            self._buffer_error(
                tp,
                fetch_offset,
                result,
                OffsetOutOfRangeError(
                    f"{tp.topic}-{tp.partition}: fetch offset {fetch_offset} is out of range"
                    f"{known} and auto.offset.reset is none; seek to a valid offset"
                ),
            )
            return
        log.warning(
            "Fetch position %d is out of range for partition %s-%d%s, resetting offset to %s "
            "(auto.offset.reset)",
            fetch_offset,
            tp.topic,
            tp.partition,
            known,
            policy,
        )
        self._subscriptions.request_reset(tp, policy)

    def _log_once(self, key: object, text: str) -> None:
        if self._logged.get(key) != text:
            self._logged[key] = text
            log.warning("%s", text)

    # --- handing out ------------------------------------------------------------------------------

    def drain(self, max_records: int) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Up to `max_records` buffered records, moving positions; raises a pending error
        once no records come before it."""
        if self._errors:
            # An answer that was no answer (a broker's, not a partition's): raised first, or a
            # partition on another broker that keeps delivering would hold it back for good.
            # The buffered records wait for the next poll.
            raise self._errors.pop(0)
        drained: dict[TopicPartition, list[ConsumerRecord]] = {}
        remaining = max_records
        for tp in list(self._buffered):
            completed = self._buffered[tp]
            state = self._subscriptions.get(tp)
            if state is None or state.position != completed.position or state.reset is not None:
                del self._buffered[tp]  # sought, reset or unassigned since it was fetched
                continue
            if state.paused:
                continue
            if remaining <= 0:
                break
            taken = completed.take(remaining)
            if taken:
                drained[tp] = taken
                remaining -= len(taken)
                state.last_epoch = taken[-1].leader_epoch
            state.position = completed.position
            if completed.exhausted:
                if completed.error is not None:
                    if drained:
                        # Records came before it in this drain: they go out, and the error is
                        # raised by the next poll (it stays in place, ahead of what arrives
                        # later), as Kafka's consumer raises it; never held back while other
                        # partitions keep delivering.
                        continue
                    del self._buffered[tp]
                    raise completed.error
                del self._buffered[tp]
                if completed.following is not None:  # fetched ahead: it starts at the position
                    self._buffered[tp] = completed.following
            else:
                # Not exhausted: rotate it to the back so other partitions get their turn.
                del self._buffered[tp]
                self._buffered[tp] = completed
        return drained

    def has_buffered(self) -> bool:
        """Whether `drain` may return records now (a paused partition's buffer does not count)."""
        for tp in self._buffered:
            state = self._subscriptions.get(tp)
            if state is not None and not state.paused:
                return True
        return bool(self._errors)

    def clear_arrivals(self) -> None:
        """Forget earlier arrivals: `wait` then returns at the next one (or `notify`)."""
        self._arrived.clear()

    def notify(self) -> None:
        """Make a current or the next `wait` return (a wakeup, a close)."""
        self._arrived.set()

    async def wait(self, timeout_ms: int) -> None:
        """Until an answer arrived (or a fetch failed) since `clear_arrivals`, at most
        `timeout_ms`."""
        if timeout_ms <= 0 or self._arrived.is_set():
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_ms / 1000):
                await self._arrived.wait()

    def discard(self, partitions: frozenset[TopicPartition] | None = None) -> None:
        """Drop buffered records (of `partitions`, or all)."""
        if partitions is None:
            self._buffered.clear()
            return
        for tp in partitions:
            self._buffered.pop(tp, None)

    async def close(self) -> None:
        self._closed = True
        tasks = list(self._in_flight.values())
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self._in_flight.clear()
        for _, stream in self._streams.values():
            stream.close()
        self._streams.clear()
        self._buffered.clear()
