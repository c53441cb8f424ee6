"""The producer's record accumulator: per-partition batches waiting for the sender.

`send` appends each record to the open batch of its partition (one `BatchBuilder` per batch:
the record is encoded once, here, and never decoded again); the sender drains batches that are
ready, builds their bytes once and sends them. Memory is accounted per batch against
`buffer.memory`, and a full buffer makes appends wait instead of failing (Kafka's backpressure).

Rules:
- Per partition a deque of batches, oldest first; only the last one takes appends (its "open"
  batch). A record that would take the open batch past batch.size (on its exact encoded size,
  decided by `BatchBuilder.try_append`) closes it and starts a new batch; a record larger than
  batch.size gets a batch of its own.
- A new batch reserves max(batch.size, an upper bound of the record's size) of
  `buffer.memory`; the reservation is returned when the batch is done (delivered or failed),
  not when it is sent, since a sent batch may still be retried. When the reservation does not
  fit, `append_new` returns None and the caller waits for memory (`wait_for_memory` in a
  blocking thread, or `memory_listener` on the loop) and asks again.
- A partition's first batch is ready when it is full (a newer batch exists or a record did
  not fit), when `linger.ms` has passed since it was created, when it is a retry whose
  backoff has passed, or while a flush or close runs or an append waits for memory. Once a
  leader gets a request for a ready batch, the first batch of every other partition it leads
  goes along (Kafka's drain), one batch per partition per request, up to `max.request.size`;
  partitions take turns being first.
- Compression and the v2 header happen when a batch is drained (`ProducerBatch.close`): the
  batch's bytes are built exactly once. An idempotent producer's id, epoch and sequence are
  written into the built header afterwards (`stamp`, with a new CRC), because sequences are
  assigned only when a batch leaves (so they follow the send order, and a reset can renumber).
- A retried batch goes back to the front of its deque; with idempotence, among the other
  retried batches in sequence order, so that a partition's batches are resent in order.
- Thread safety: `RecordAccumulator` is for one thread (the asyncio producer: appends and the
  sender share the event loop), so its per-record append takes no lock; structural changes
  (new batches, drains, memory) still do. `ThreadSafeRecordAccumulator` also takes the lock
  for every append, so blocking producers append from any thread while the sender drains on
  the loop; only it offers `wait_for_memory`. `wakeup` (set by the sender) is called outside
  the lock whenever a new batch is started, the only moment the sender may not know that
  something will become ready.

Without a network (benchmarks, tests): ``acc.append(tp, timestamp_ms, key, value, headers,
future)`` for every record (it returns the record's batch, or None when buffer.memory is full);
``acc.drain(now_ms, leader_of, node_ready, max_request_size)`` takes the ready (e.g. full)
batches as the sender does, and ``acc.drain_all()`` every batch; a drained batch's bytes are
``batch.close()``; ``acc.deallocate(batch)`` returns its memory, as a delivery does.
`encode_batches` wraps that loop.
"""

from __future__ import annotations

import struct
import threading
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from crc32c import crc32c

from replog.admin.controller_results import TopicPartition
from replog.client.records import RecordMetadata
from replog.clock import monotonic_ms
from replog.record.builder import BatchBuilder
from replog.record.header import ATTRIBUTES_OFFSET, CRC_OFFSET, RECORD_BATCH_OVERHEAD
from replog.record.record import HeaderInput

if TYPE_CHECKING:
    from replog.client.idempotence import Idempotence

__all__ = [
    "RECORD_OVERHEAD_MAX",
    "DrainResult",
    "ProducerBatch",
    "RecordAccumulator",
    "RecordHandle",
    "ThreadSafeRecordAccumulator",
    "encode_batches",
    "record_size_bound",
]

# Upper bound of a record's encoding beyond its key, value and header bytes: length varint (5),
# attributes (1), timestamp delta varlong (10), offset delta (5), key and value lengths (5 + 5),
# header count (5).
RECORD_OVERHEAD_MAX = 36
HEADER_OVERHEAD_MAX = 10  # a header's key and value length varints

_PRODUCER_STATE = struct.Struct(">qhi")  # producer_id, producer_epoch, base_sequence
_PRODUCER_STATE_OFFSET = 43
_CRC = struct.Struct(">I")
INT32_MAX = 2**31 - 1
BENCH_PARTITION = TopicPartition("bench", 0)


class RecordHandle(Protocol):
    """What a record's future must offer the batch that completes it (asyncio.Future does)."""

    def done(self) -> bool: ...

    def set_result(self, result: RecordMetadata, /) -> None: ...

    def set_exception(self, exception: BaseException, /) -> None: ...


def record_size_bound(key: bytes | None, value: bytes | None, headers: HeaderInput) -> int:
    """An upper bound of the record's encoded size (for batch.size and max.request.size)."""
    size = RECORD_OVERHEAD_MAX
    if key is not None:
        size += len(key)
    if value is not None:
        size += len(value)
    for header_key, header_value in headers:
        size += HEADER_OVERHEAD_MAX + len(header_key) * 4  # UTF-8: at most 4 bytes a character
        if header_value is not None:
            size += len(header_value)
    return size


class ProducerBatch:
    """One batch of one partition: its builder while open, its bytes once closed, and the
    records' futures. Completed once (`complete` or `fail`); later calls are ignored."""

    # Most fields change only when something goes wrong, and a producer makes a batch every
    # few records: their defaults live on the class, so a new batch sets five fields.
    _record_count = 0  # once the builder is gone
    _callbacks: list[Callable[[ProducerBatch], object]] | None = None
    records: bytes | None = None  # the built batch, once closed
    full = False  # a record did not fit: no more appends
    producer_id = -1
    producer_epoch = -1
    base_sequence = -1
    attempts = 0  # sends so far
    retry_at_ms = 0  # not before this (a retry's backoff)
    in_flight = False
    maybe_written = False  # an attempt whose outcome is unknown (timeout, lost answer)
    expired = False
    last_error: BaseException | None = None
    done = False

    def __init__(
        self,
        topic_partition: TopicPartition,
        builder: BatchBuilder,
        created_ms: int,
        reserved: int,
        done_event: threading.Event | None = None,
    ) -> None:
        self.topic_partition = topic_partition
        self.builder: BatchBuilder | None = builder
        self.created_ms = created_ms
        self.reserved = reserved
        self.done_event = done_event
        # (future, offset delta, timestamp, key size, value size) of each record with a future
        self.handles: list[tuple[RecordHandle, int, int, int, int]] = []

    def __repr__(self) -> str:
        tp = self.topic_partition
        return (
            f"ProducerBatch({tp.topic}-{tp.partition}, {self.record_count} records, "
            f"seq {self.base_sequence}, attempt {self.attempts})"
        )

    @property
    def record_count(self) -> int:
        builder = self.builder
        return builder.records_count if builder is not None else self._record_count

    @property
    def is_retry(self) -> bool:
        return self.attempts > 0

    @property
    def last_sequence(self) -> int:
        """The sequence of the batch's last record (Int32 max wraps to 0); -1 unstamped."""
        if self.base_sequence < 0:
            return -1
        return (self.base_sequence + self.record_count - 1) & INT32_MAX

    @property
    def size_in_bytes(self) -> int:
        """The built size once closed, else the uncompressed size so far."""
        if self.records is not None:
            return len(self.records)
        builder = self.builder
        return builder.size_in_bytes if builder is not None else RECORD_BATCH_OVERHEAD

    def note_record(
        self,
        handle: RecordHandle,
        offset_delta: int,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
    ) -> None:
        """Remember what a record's future will be told (its offset comes with the answer)."""
        self.handles.append(
            (
                handle,
                offset_delta,
                timestamp_ms,
                -1 if key is None else len(key),
                -1 if value is None else len(value),
            )
        )

    def _drop_builder(self) -> BatchBuilder | None:
        builder, self.builder = self.builder, None
        if builder is not None:
            self._record_count = builder.records_count
        return builder

    def close(self) -> bytes:
        """Build the batch's bytes (once; compression happens here). The accumulator stops
        appends to it first (it is no longer its partition's open batch)."""
        if self.records is None:
            builder = self._drop_builder()
            assert builder is not None, "a batch failed before it was built has no bytes"
            self.records = builder.build()
        return self.records

    def stamp(self, producer_id: int, producer_epoch: int, base_sequence: int) -> None:
        """Write an idempotent producer's id, epoch and base sequence into the built header
        (and the CRC, which covers them)."""
        buf = bytearray(self.close())
        _PRODUCER_STATE.pack_into(
            buf, _PRODUCER_STATE_OFFSET, producer_id, producer_epoch, base_sequence
        )
        _CRC.pack_into(buf, CRC_OFFSET, crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:]))
        self.records = bytes(buf)
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence

    def add_done_callback(self, fn: Callable[[ProducerBatch], object]) -> None:
        """Call `fn(batch)` when the batch is done (at once if it already is)."""
        if self.done:
            fn(self)
        elif self._callbacks is None:
            self._callbacks = [fn]
        else:
            self._callbacks.append(fn)

    def complete(self, base_offset: int, log_append_time_ms: int = -1) -> bool:
        """Resolve every record's future (offset -1 when unknown, as with acks=0)."""
        if self.done:
            return False
        self.done = True
        tp = self.topic_partition
        topic, partition = tp.topic, tp.partition
        for handle, relative, timestamp, key_size, value_size in self.handles:
            if handle.done():
                continue
            handle.set_result(
                RecordMetadata(
                    topic,
                    partition,
                    base_offset + relative if base_offset >= 0 else -1,
                    timestamp if log_append_time_ms < 0 else log_append_time_ms,
                    key_size,
                    value_size,
                )
            )
        self._finish()
        return True

    def fail(self, error: BaseException) -> bool:
        """Fail every record's future with `error`."""
        if self.done:
            return False
        self.done = True
        self.last_error = error
        for handle, _, _, _, _ in self.handles:
            if not handle.done():
                handle.set_exception(error)
        self._finish()
        return True

    def _finish(self) -> None:
        self._drop_builder()
        if self.done_event is not None:
            self.done_event.set()
        callbacks, self._callbacks = self._callbacks, None
        for fn in callbacks or ():
            fn(self)


class DrainResult:
    """What one `drain` found: batches to send by leader, when to look again, and partitions
    whose leader is not known (their topics need a metadata refresh)."""

    __slots__ = ("by_node", "next_ready_ms", "unknown_leaders")

    def __init__(self) -> None:
        self.by_node: dict[int, list[ProducerBatch]] = {}
        self.next_ready_ms: int | None = None
        self.unknown_leaders: set[TopicPartition] = set()

    def wake_at(self, when_ms: int) -> None:
        if self.next_ready_ms is None or when_ms < self.next_ready_ms:
            self.next_ready_ms = when_ms


class RecordAccumulator:
    """Per-partition batches and the buffer-memory account, for one thread (module
    docstring)."""

    thread_events = False  # a threading.Event per batch, for threads that wait on one

    def __init__(
        self,
        *,
        batch_size: int = 16_384,
        linger_ms: int = 5,
        buffer_memory: int = 33_554_432,
        compression: int = 0,
        clock: Callable[[], int] = monotonic_ms,
    ) -> None:
        self.batch_size = batch_size
        self.linger_ms = linger_ms
        self.buffer_memory = buffer_memory
        self.compression = compression
        self._clock = clock
        self.lock = threading.Lock()
        self._memory_freed = threading.Condition(self.lock)
        self._available = buffer_memory
        self._deques: dict[TopicPartition, deque[ProducerBatch]] = {}
        # each partition's open batch (the last of its deque, if it still takes appends)
        self._open: dict[TopicPartition, tuple[ProducerBatch, BatchBuilder]] = {}
        self._incomplete: set[ProducerBatch] = set()
        self.memory_waiters = 0
        self.flushing = 0
        self.closing = False
        self.wakeup: Callable[[], None] = _nothing
        self.memory_listener: Callable[[], None] = _nothing  # on the loop, after memory is freed
        self.idempotence: Idempotence | None = None

    # --- appending (any thread) ---------------------------------------------------------------

    def try_append(
        self,
        tp: TopicPartition,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: HeaderInput = (),
        handle: RecordHandle | None = None,
    ) -> ProducerBatch | None:
        """Append to `tp`'s open batch; None when there is none or the record does not fit
        (the caller then decides on a new batch, KIP-480's moment to move a sticky partition).

        The per-record hot path: one dict lookup and one call into the builder, whose
        `try_append` decides batch.size on the record's exact encoded size."""
        entry = self._open.get(tp)
        if entry is None:
            return None
        batch, builder = entry
        delta = builder.try_append(timestamp_ms, key, value, headers, size_limit=self.batch_size)
        if delta < 0:
            batch.full = True
            del self._open[tp]
            return None
        if handle is not None:
            batch.note_record(handle, delta, timestamp_ms, key, value)
        return batch

    def append_new(
        self,
        tp: TopicPartition,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: HeaderInput = (),
        handle: RecordHandle | None = None,
    ) -> ProducerBatch | None:
        """Append, starting a new batch if needed; None when buffer.memory cannot hold it."""
        with self.lock:
            entry = self._open.get(tp)
            if entry is not None:  # another thread started one meanwhile
                batch, builder = entry
                delta = builder.try_append(
                    timestamp_ms, key, value, headers, size_limit=self.batch_size
                )
                if delta < 0:
                    batch.full = True
                    del self._open[tp]
            if entry is None or delta < 0:
                reserve = self.batch_size
                if (
                    headers
                    or (0 if key is None else len(key)) + (0 if value is None else len(value))
                    > reserve - RECORD_BATCH_OVERHEAD - RECORD_OVERHEAD_MAX
                ):
                    reserve = max(
                        reserve, record_size_bound(key, value, headers) + RECORD_BATCH_OVERHEAD
                    )
                if reserve > self._available:
                    return None
                self._available -= reserve
                builder = BatchBuilder(compression=self.compression)
                batch = ProducerBatch(
                    tp,
                    builder,
                    self._clock(),
                    reserve,
                    threading.Event() if self.thread_events else None,
                )
                delta = builder.append(timestamp_ms, key, value, headers)
                dq = self._deques.get(tp)
                if dq is None:
                    dq = self._deques[tp] = deque()
                dq.append(batch)
                self._open[tp] = (batch, builder)
                self._incomplete.add(batch)
            if handle is not None:
                batch.note_record(handle, delta, timestamp_ms, key, value)
        self.wakeup()
        return batch

    def append(
        self,
        tp: TopicPartition,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: HeaderInput = (),
        handle: RecordHandle | None = None,
    ) -> ProducerBatch | None:
        """`try_append`, else `append_new` (None: no memory)."""
        batch = self.try_append(tp, timestamp_ms, key, value, headers, handle)
        if batch is None:
            batch = self.append_new(tp, timestamp_ms, key, value, headers, handle)
        return batch

    @property
    def available_memory(self) -> int:
        return self._available

    # --- the sender's side (the event loop) ---------------------------------------------------

    def drain(
        self,
        now_ms: int,
        leader_of: Callable[[TopicPartition], int | None],
        node_ready: Callable[[int], bool],
        max_request_size: int,
    ) -> DrainResult:
        """Take the batches that may go now, grouped by leader (module docstring). The taken
        batches are closed (built) and, with idempotence, stamped."""
        result = DrainResult()
        by_node = result.by_node
        with self.lock:
            deques = self._deques
            if not deques:
                return result
            linger_ms = self.linger_ms
            urgent = self.flushing > 0 or self.closing or self.memory_waiters > 0
            lingering: list[tuple[TopicPartition, deque[ProducerBatch], int]] = []
            taken: list[tuple[TopicPartition, deque[ProducerBatch]]] = []
            sizes: dict[int, int] = {}
            busy: set[int] = set()  # nodes at their in-flight limit
            for tp, dq in deques.items():
                head = dq[0]
                if head.attempts:  # a retry: ready once its backoff passed
                    if head.retry_at_ms > now_ms:
                        result.wake_at(head.retry_at_ms)
                        continue
                    sendable = True
                else:
                    sendable = (
                        urgent or head.full or len(dq) > 1 or now_ms >= head.created_ms + linger_ms
                    )
                leader = leader_of(tp)
                if leader is None:
                    if sendable:
                        result.unknown_leaders.add(tp)
                    continue
                if not sendable:
                    result.wake_at(head.created_ms + linger_ms)
                    lingering.append((tp, dq, leader))
                elif self._take(tp, dq, leader, by_node, sizes, busy, node_ready, max_request_size):
                    taken.append((tp, dq))
            # Batches still lingering ride along with a request their leader gets anyway.
            for tp, dq, leader in lingering:
                if leader in by_node and self._take(
                    tp, dq, leader, by_node, sizes, busy, node_ready, max_request_size
                ):
                    taken.append((tp, dq))
            # Partitions that sent go to the back (the others are first next time); an empty
            # deque goes away, so a drain only walks partitions with something queued.
            for tp, dq in taken:
                del deques[tp]
                if dq:
                    deques[tp] = dq
                    result.wake_at(now_ms)  # its next batch is judged in the next drain
        idempotence = self.idempotence
        for batches in by_node.values():
            for batch in batches:
                batch.close()
                if idempotence is not None:
                    idempotence.on_drained(batch)
        return result

    def _take(
        self,
        tp: TopicPartition,
        dq: deque[ProducerBatch],
        leader: int,
        by_node: dict[int, list[ProducerBatch]],
        sizes: dict[int, int],
        busy: set[int],
        node_ready: Callable[[int], bool],
        max_request_size: int,
    ) -> bool:
        """Under the lock: move `dq`'s first batch into `leader`'s request if it may go."""
        batches = by_node.get(leader)
        if batches is None:
            if leader in busy:
                return False
            if not node_ready(leader):
                busy.add(leader)
                return False
        head = dq[0]
        idempotence = self.idempotence
        if idempotence is not None and not idempotence.can_drain(tp, head):
            return False
        size = head.size_in_bytes
        if batches is not None:
            used = sizes[leader]
            if used + size > max_request_size:
                return False  # the next request; the partition keeps its turn
            sizes[leader] = used + size
            batches.append(head)
        else:
            sizes[leader] = size
            by_node[leader] = [head]
        dq.popleft()
        entry = self._open.get(tp)
        if entry is not None and entry[0] is head:
            del self._open[tp]
        return True

    def _close_for_appends(self, tp: TopicPartition, batch: ProducerBatch) -> None:
        """Under the lock: `batch` left its deque, so it takes no more records."""
        entry = self._open.get(tp)
        if entry is not None and entry[0] is batch:
            del self._open[tp]

    def reenqueue(self, batch: ProducerBatch, retry_at_ms: int) -> None:
        """Put a batch that will be retried back at the front of its deque (module docstring)."""
        batch.retry_at_ms = retry_at_ms
        with self.lock:
            dq = self._deques.get(batch.topic_partition)
            if dq is None:
                dq = self._deques[batch.topic_partition] = deque()
            if batch.base_sequence < 0 or self.idempotence is None:
                dq.appendleft(batch)
                return
            index = 0
            for index, queued in enumerate(dq):  # noqa: B007 - the index is the result
                if queued.base_sequence < 0 or queued.base_sequence > batch.base_sequence:
                    break
            else:
                index = len(dq)
            dq.insert(index, batch)

    def expired(self, now_ms: int, delivery_timeout_ms: int) -> list[ProducerBatch]:
        """Remove and return queued batches older than delivery.timeout.ms (from the front of
        each deque, stopping at the first younger one: later batches are younger)."""
        found: list[ProducerBatch] = []
        with self.lock:
            emptied = []
            for tp, dq in self._deques.items():
                while dq and now_ms >= dq[0].created_ms + delivery_timeout_ms:
                    batch = dq.popleft()
                    self._close_for_appends(tp, batch)
                    batch.expired = True
                    found.append(batch)
                if not dq:
                    emptied.append(tp)
            for tp in emptied:
                del self._deques[tp]
        return found

    def next_expiry_ms(self, delivery_timeout_ms: int) -> int | None:
        with self.lock:
            heads = [dq[0].created_ms for dq in self._deques.values() if dq]
        return min(heads) + delivery_timeout_ms if heads else None

    def deallocate(self, batch: ProducerBatch) -> None:
        """Return a done batch's memory (once) and wake whoever waits for memory."""
        with self.lock:
            if batch not in self._incomplete:
                return
            self._incomplete.discard(batch)
            self._available += batch.reserved
            waiters = self.memory_waiters
            if waiters:
                self._memory_freed.notify_all()
        if waiters:
            self.memory_listener()

    def abort_queued(self) -> list[ProducerBatch]:
        """Remove and return every queued batch (a forced close fails them)."""
        with self.lock:
            batches = [batch for dq in self._deques.values() for batch in dq]
            self._deques.clear()
            self._open.clear()
        return batches

    # --- state --------------------------------------------------------------------------------

    def incomplete(self) -> list[ProducerBatch]:
        """Every batch not done yet (queued or in flight): what a flush waits for."""
        with self.lock:
            return list(self._incomplete)

    def has_incomplete(self) -> bool:
        return bool(self._incomplete)

    def has_queued(self) -> bool:
        return bool(self._deques)  # only partitions with queued batches have a deque

    def queued_partitions(self) -> list[TopicPartition]:
        with self.lock:
            return list(self._deques)

    def drain_all(self) -> list[ProducerBatch]:
        """Close and return every queued batch regardless of readiness or leaders (no
        network: benchmarks and tests). Their bytes are in `batch.records`; their memory stays
        reserved until `deallocate`."""
        with self.lock:
            batches = [batch for dq in self._deques.values() for batch in dq]
            self._deques.clear()
            self._open.clear()
        for batch in batches:
            batch.close()
        return batches


class ThreadSafeRecordAccumulator(RecordAccumulator):
    """A `RecordAccumulator` whose appends may come from any thread (the blocking producer)."""

    thread_events = True

    def try_append(
        self,
        tp: TopicPartition,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: HeaderInput = (),
        handle: RecordHandle | None = None,
    ) -> ProducerBatch | None:
        with self.lock:
            return RecordAccumulator.try_append(self, tp, timestamp_ms, key, value, headers, handle)

    def wait_for_memory(self, timeout_s: float) -> None:
        """Block the calling thread until some memory is freed or `timeout_s` passes (callers
        wait in short slices and ask again; see `append_new`)."""
        with self.lock:
            if self._available >= self.batch_size:
                return  # freed between the refused append and this call
            self.memory_waiters += 1
            try:
                self._memory_freed.wait(timeout_s)
            finally:
                self.memory_waiters -= 1


def _nothing() -> None:
    return None


def encode_batches(
    records: Iterable[tuple[int, bytes | None, bytes | None]],
    *,
    topic_partition: TopicPartition = BENCH_PARTITION,
    batch_size: int = 16_384,
    compression: int = 0,
    headers: Sequence[tuple[str, bytes | None]] = (),
    handles: Callable[[], Any] | None = None,
) -> list[bytes]:
    """Append (timestamp, key, value) records to one partition as `send` does (no network)
    and return the built batches: the producer's per-record encode path, for benchmarks.

    `handles`: a factory of per-record futures (e.g. ``asyncio.get_running_loop().
    create_future``) when the cost of creating them should be counted too."""
    accumulator = RecordAccumulator(batch_size=batch_size, linger_ms=0, compression=compression)
    built: list[bytes] = []
    for timestamp, key, value in records:
        handle = handles() if handles is not None else None
        if accumulator.append(topic_partition, timestamp, key, value, headers, handle) is None:
            for batch in accumulator.drain_all():
                built.append(batch.close())
                accumulator.deallocate(batch)
            accumulator.append(topic_partition, timestamp, key, value, headers, handle)
    for batch in accumulator.drain_all():
        built.append(batch.close())
        accumulator.deallocate(batch)
    return built
