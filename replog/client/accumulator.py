"""The producer's record accumulator: per-partition batches waiting for the sender.

`send` appends each record to the open batch of its partition, which encodes it at once into
pieces of the batch's records region (the record is encoded once and never decoded again); the
sender drains batches that are ready, builds their bytes once and sends them. Memory is
accounted per batch against `buffer.memory`, and a full buffer makes appends wait instead of
failing (Kafka's backpressure).

Rules:
- Per partition a deque of batches, oldest first; only the last one takes appends (its "open"
  batch). A record that would take the open batch past batch.size (on its exact encoded size)
  closes it and starts a new batch; a record larger than batch.size gets a batch of its own.
- A new batch reserves max(min(batch.size, 16 KiB), an upper bound of its first record's
  size) of `buffer.memory`, and more as records fill it, doubling each time, up to batch.size
  (`_grow`): a partition that gets a trickle of records holds 16 KiB of the buffer whatever
  batch.size is; one with a backlog gets batches of batch.size. A batch that cannot grow (the
  buffer is short, or an append waits for memory) is full: the next record starts a new
  batch. The reservation is returned when the batch is done (delivered or failed), not when
  it is sent, since a sent batch may still be retried. When a new batch's reservation does
  not fit, `append_new` returns None and the caller waits for memory (`wait_for_memory` in a
  blocking thread, or `memory_listener` on the loop) and asks again. A reservation larger
  than all of `buffer.memory` would wait forever: `append_new` raises at once instead
  (Kafka's BufferPool refuses such an allocation), MessageSizeTooLargeError for a record
  larger than the buffer, ConfigError when a new batch's first reservation is
  (`never_fits`). What a batch holds (its encoded pieces and references to the values,
  exactly its uncompressed size) stays within its reservation.
- A partition's first batch is ready when it is full (a newer batch exists or a record did
  not fit), when `linger.ms` has passed since it was created, when it is a retry whose
  backoff has passed, or while a flush or close runs or an append waits for memory. Once a
  leader gets a request for a ready batch, the first batch of every other partition it leads
  goes along (Kafka's drain), up to `max.request.size`; partitions take turns being first.
  A partition whose leader is unknown is reported (`unknown_leaders`) whether or not its batch
  is ready, as Kafka's `ready()` does: the sender then refreshes the metadata while the batch
  lingers, instead of learning of the missing leader only once it is ready (and being woken by
  nothing). A muted partition (`mute`) is not drained at all: with
  max.in.flight.requests.per.connection=1 the sender mutes a partition while one of its
  requests is on the wire (Kafka's `guaranteeMessageOrder`), so that no later batch overtakes
  a retry, not even through a new leader.
- Unlike Kafka, a partition's complete batches behind a ready first batch go along too, in
  order, as one entry of the request (the broker validates an entry's batches together and
  appends them back to back): a producer with a backlog (a full buffer) pays the per-request
  cost, which is what bounds a Python client and broker (docs/benchmarks.md), once per
  request instead of once per batch. Only first sends (a retried batch goes alone: a
  duplicate is recognised per batch, but the broker answers an entry as a whole), never the
  open batch, in the room the first batches of all partitions left in `max.request.size`,
  and with idempotence only within the partition's window (5 batches stamped from its oldest
  unacknowledged one on: `Idempotence.room`), so every retry is still among the broker's
  retained batches.
  Batches keep `batch.size`: what is written is what Kafka's producer would write.
- A topic whose batch limit (the smaller of `max.message.bytes` and `segment.bytes`) is below
  batch.size (`set_topic_limit`, from the producer's describe of the topic) gets batches of at most
  that size (a single larger record still gets a batch of its own). A built batch the broker refused
  as too large is split (`split_and_reenqueue`, `ProducerBatch.split`): its records are decoded
  (this rare path only) and re-encoded into pieces that replace it in its deque and among the
  incomplete batches, in order, with its futures, reservation and (stamped) sequences shared out.
- Compression and the v2 header happen when a batch is drained (`ProducerBatch.close`): the
  batch's bytes are built exactly once. An idempotent producer's id, epoch and sequence are
  given to a first send just before (`stamp`), because sequences are assigned only when a
  batch leaves (so they follow the send order); a built batch renumbered after a reset, or a
  split piece, has them written into its header (`stamp`, with a new CRC).
- A retried batch goes back to the front of its deque, among the other retried batches in
  sequence order with idempotence, else in the order the batches were created (`serial`, then
  a split batch's pieces by `part`), so
  that a partition's batches are resent in order however their answers arrive: a call that
  fails fails its requests oldest first, and each one's retries must not jump ahead of the
  older ones'. (Kafka's producer puts each retry without idempotence first, so retries
  after a lost connection with several requests in flight can go out in reverse.)
- `abort_queued(refuse)` (a close, a crashed sender) takes every queued batch and makes every
  later append raise `refuse(tp)`'s error, under the same lock: a blocking `send` racing
  `close` from another thread either lands in time to be failed with the rest or raises; it
  never lands in a queue nobody drains (Kafka: "Producer closed while send in progress").
- Thread safety: `RecordAccumulator` is for one thread (the asyncio producer: appends and the
  sender share the event loop) and takes no lock at all. `ThreadSafeRecordAccumulator` takes
  `lock` in every method that reads or changes its state, so blocking producers append from
  any thread while the sender drains on the loop; only it offers `wait_for_memory`. Batches
  are built (`close`) and `wakeup` (set by the sender) is called outside the lock; `wakeup`
  after every `append_new` that appended (a new batch was started, unless another thread's
  took the record), the only moment the sender may not know that something will become
  ready.

Speed: the producer's cost per record is mostly `try_append`, one call that encodes the
common record (no headers, a value, the batch's first timestamp or a small delta after it)
from precomputed tables (`replog.record.record`) into two pieces, its fields and its value,
with the batch.size decision on its exact size before anything changes; other records go
through `ProducerBatch.append_general` (`append_record`). `bench/client_encode.py` measures it
against kafka-python.

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
from asyncio import InvalidStateError
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from crc32c import crc32c

from replog.client.records import RecordMetadata
from replog.clock import monotonic_ms
from replog.common import TopicPartition
from replog.errors import ConfigError, MessageSizeTooLargeError, ReplogError
from replog.record.batch import RecordBatch
from replog.record.builder import seal_batch
from replog.record.compression import COMPRESSION_NONE, compress
from replog.record.header import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    RECORD_BATCH_OVERHEAD,
    TRANSACTIONAL_FLAG_MASK,
)
from replog.record.record import (
    AFTER_EMPTY_HEADERS,
    EQUAL_TIMESTAMP_FIELDS,
    FAST_DATA_LIMIT,
    FAST_DELTAS,
    FAST_OFFSETS,
    NO_HEADERS,
    NULL_KEY_FIELDS,
    RECORD_OVERHEAD_MAX,
    TIMESTAMP_FIELDS,
    HeaderInput,
    append_record,
    record_size,
    record_size_bound,
)
from replog.record.varint import (
    INT64_MAX,
    INT64_MIN,
    SMALL_SIZE_LENGTHS,
    SMALL_SIZE_LIMIT,
    SMALL_SIZE_VARINTS,
    SMALL_VARINTS_LOW,
    encode_varlong,
)

if TYPE_CHECKING:
    from replog.client.idempotence import Idempotence

__all__ = [
    "RECORD_OVERHEAD_MAX",
    "RESERVATION_STEP",
    "DrainResult",
    "ProducerBatch",
    "RecordAccumulator",
    "RecordHandle",
    "ThreadSafeRecordAccumulator",
    "encode_batches",
    "record_size_bound",
]

# A new batch reserves this much of buffer.memory (batch.size if less), and more as it fills,
# up to batch.size (`RecordAccumulator._grow`): Kafka's default batch.size, so a partition
# that gets few records holds no more of the buffer than with Kafka's producer.
RESERVATION_STEP = 16_384
_PRODUCER_STATE = struct.Struct(">qhi")  # producer_id, producer_epoch, base_sequence
_PRODUCER_STATE_OFFSET = 43
_CRC = struct.Struct(">I")
_ATTRIBUTES = struct.Struct(">h")
INT32_MAX = 2**31 - 1
_NO_PARTS: list[bytes] = []  # a done or closed batch's: nothing is encoded after that
BENCH_PARTITION = TopicPartition("bench", 0)
# A named tuple built from a plain tuple with no Python-level call (its `__new__` is one): a
# RecordMetadata per record delivered.
_new_tuple = tuple.__new__


class RecordHandle(Protocol):
    """What a record's future must offer the batch that completes it (asyncio.Future does).
    Setting the outcome of a future that is done either does nothing or raises
    asyncio.InvalidStateError (a cancelled asyncio future): the batch ignores both."""

    def done(self) -> bool: ...

    def set_result(self, result: RecordMetadata, /) -> None: ...

    def set_exception(self, exception: BaseException, /) -> None: ...


class ProducerBatch:
    """One batch of one partition: its encoded records while open, its bytes once closed, and
    the records' futures. Completed once (`complete` or `fail`); later calls are ignored.

    The accumulator encodes each record into the open batch as it is appended (inlined in
    `RecordAccumulator.try_append`; records it does not special-case go through
    `append_general`), so the batch knows its exact size: `room` is what is left of batch.size
    for records. Its pieces are joined, compressed and given a header once, by `close`."""

    # Most fields change only when something goes wrong, and a producer makes a batch every
    # few records: their defaults live on the class, so a new batch sets only the others.
    _callbacks: list[Callable[[ProducerBatch], object]] | None = None
    records: bytes | None = None  # the built batch, once closed
    full = False  # a record did not fit: no more appends
    producer_id = -1
    producer_epoch = -1
    base_sequence = -1
    transactional = False  # a transactional producer's: the header's transactional flag
    attempts = 0  # sends so far
    retry_at_ms = 0  # not before this (a retry's backoff)
    in_flight = False
    expired = False
    last_error: BaseException | None = None
    done = False
    compression = COMPRESSION_NONE
    # a piece of a split batch: its place among the pieces (which share the serial), at each
    # level of splitting
    part: tuple[int, ...] = ()

    def __init__(
        self,
        topic_partition: TopicPartition,
        created_ms: int,
        reserved: int,
        done_event: threading.Event | None = None,
        compression: int = COMPRESSION_NONE,
        base_timestamp: int = 0,
        limit: int = 0,
        serial: int = 0,
        cap: int | None = None,
    ) -> None:
        """`base_timestamp`: the first record's (an int64); `limit`: what its records may take
        within its reservation (the first record goes in regardless); `cap`: what they may
        take at most, batch.size minus the header (None: `limit`), up to which the
        accumulator grows the reservation (`RecordAccumulator._grow`); `serial`: the
        accumulator's count of batches created before this one (their order)."""
        self.topic_partition = topic_partition
        self.created_ms = created_ms
        self.serial = serial
        self.reserved = reserved
        self.done_event = done_event
        if compression != COMPRESSION_NONE:
            self.compression = compression
        # The open batch's encoding state, read and written by the accumulator's fast path (set
        # here, in this order, so that every batch has the same attribute layout: the
        # interpreter's attribute caches then hit):
        self.count = 0  # records so far: the next offset delta
        self.base_timestamp = self.max_timestamp = base_timestamp
        self.limit = self.room = limit  # room: what is left (< 0 after an oversized record)
        self.cap = limit if cap is None else cap
        self.parts: list[bytes] = []  # the encoded records, in pieces
        # The pieces end with a record's value, its headers count (0) not written yet: it goes
        # in front of the next record's length (`lengths` is then AFTER_EMPTY_HEADERS, else
        # SMALL_SIZE_VARINTS) or, after the last record, in `close`.
        self.lengths: tuple[bytes, ...] = SMALL_SIZE_VARINTS
        # The future of each record that has one, and its offset delta, timestamp, key size and
        # value size, four ints apiece in a flat list: the ints are not tracked by the cyclic
        # garbage collector, a tuple per record would be (every undelivered record's objects
        # are walked by each collection while the record waits).
        self.handles: list[RecordHandle] = []
        self.handle_fields: list[int] = []

    def __repr__(self) -> str:
        tp = self.topic_partition
        return (
            f"ProducerBatch({tp.topic}-{tp.partition}, {self.count} records, "
            f"seq {self.base_sequence}, attempt {self.attempts})"
        )

    @property
    def record_count(self) -> int:
        return self.count

    @property
    def is_retry(self) -> bool:
        return self.attempts > 0

    @property
    def last_sequence(self) -> int:
        """The sequence of the batch's last record (Int32 max wraps to 0); -1 unstamped."""
        if self.base_sequence < 0:
            return -1
        return (self.base_sequence + self.count - 1) & INT32_MAX

    @property
    def size_in_bytes(self) -> int:
        """The built size once closed, else the exact uncompressed size so far."""
        if self.records is not None:
            return len(self.records)
        return RECORD_BATCH_OVERHEAD + self.limit - self.room

    def append_general(
        self,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: HeaderInput,
        handle: RecordHandle | None,
    ) -> bool:
        """Append any record the fast path does not take: False (and nothing changes) if its
        exact size does not fit the room. ValueError when its timestamp is no int64 or its
        delta to the first one no varlong."""
        if not INT64_MIN <= timestamp_ms <= INT64_MAX:
            raise ValueError(f"timestamp {timestamp_ms} is outside [{INT64_MIN}, {INT64_MAX}]")
        delta = timestamp_ms - self.base_timestamp
        if not SMALL_VARINTS_LOW <= delta < SMALL_SIZE_LIMIT:
            encode_varlong(delta)  # raises ValueError unless an int64
        offset = self.count
        room = self.room - record_size(offset, delta, key, value, headers)
        if room < 0 and offset:
            return False
        parts = self.parts
        if self.lengths is not SMALL_SIZE_VARINTS:
            parts.append(NO_HEADERS)  # the previous record's headers count
            self.lengths = SMALL_SIZE_VARINTS
        append_record(parts, offset, delta, key, value, headers)
        self.room = room
        self.count = offset + 1
        if timestamp_ms > self.max_timestamp:
            self.max_timestamp = timestamp_ms
        if handle is not None:
            self.handles.append(handle)
            self.handle_fields.extend(
                (
                    offset,
                    timestamp_ms,
                    -1 if key is None else len(key),
                    -1 if value is None else len(value),
                )
            )
        return True

    def close(self) -> bytes:
        """Build the batch's bytes (once; compression happens here). The accumulator stops
        appends to it first (it is no longer its partition's open batch)."""
        records = self.records
        if records is None:
            assert not self.done, "a batch failed before it was built has no bytes"
            parts = self.parts
            if self.lengths is not SMALL_SIZE_VARINTS:
                parts.append(NO_HEADERS)  # the last record's headers count
            records = b"".join(parts)
            self.parts = _NO_PARTS
            codec = self.compression
            if codec != COMPRESSION_NONE:
                records = compress(codec, records)
            records = self.records = seal_batch(
                records,
                self.count,
                self.base_timestamp,
                self.max_timestamp,
                codec | TRANSACTIONAL_FLAG_MASK if self.transactional else codec,
                producer_id=self.producer_id,
                producer_epoch=self.producer_epoch,
                base_sequence=self.base_sequence,
            )
        return records

    def stamp(self, producer_id: int, producer_epoch: int, base_sequence: int) -> None:
        """Give the batch an idempotent producer's id, epoch and base sequence: `close` builds
        its header with them (the drain stamps a first send before building it, so its bytes
        are made and checksummed once); a batch built already (a retry renumbered after a
        reset, a split piece) has them written into its header, with a new CRC."""
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        if self.records is None:
            return
        buf = bytearray(self.records)
        _PRODUCER_STATE.pack_into(
            buf, _PRODUCER_STATE_OFFSET, producer_id, producer_epoch, base_sequence
        )
        if self.transactional:
            _ATTRIBUTES.pack_into(
                buf,
                ATTRIBUTES_OFFSET,
                _ATTRIBUTES.unpack_from(buf, ATTRIBUTES_OFFSET)[0] | TRANSACTIONAL_FLAG_MASK,
            )
        _CRC.pack_into(buf, CRC_OFFSET, crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:]))
        self.records = bytes(buf)

    def split(self, max_bytes: int) -> list[ProducerBatch]:
        """New batches holding this built batch's records in order, each at most `max_bytes`
        (built, uncompressed) unless it holds one record, and at least two of them: the
        records are packed greedily up to `max_bytes`, or halved by count when they would
        all fit in one (the broker refused the whole for its size). Each keeps this batch's
        creation time, serial, attempts and compression; its records' futures go with them;
        the reservation is shared out so that the pieces together hold this batch's. With a
        stamped batch each piece is stamped with the same producer id and epoch, its base
        sequence this batch's plus the records before it (Kafka's ProducerBatch.split), so
        the partition's sequences do not change. Decodes the records: for the rare
        MESSAGE_TOO_LARGE, never on the hot path."""
        assert self.records is not None and self.count > 1, "only a built multi-record batch"
        records = list(RecordBatch.parse(self.records, where="split batch").records())
        by_offset = dict(zip(self.handle_fields[::4], self.handles, strict=True))
        room = max_bytes - RECORD_BATCH_OVERHEAD
        sizes = [
            record_size(r.offset, r.timestamp - records[0].timestamp, r.key, r.value, r.headers)
            for r in records
        ]
        groups: list[list[int]] = [[]]
        used = 0
        for index, size in enumerate(sizes):
            if groups[-1] and used + size > room:
                groups.append([])
                used = 0
            groups[-1].append(index)
            used += size
        if len(groups) == 1:
            half = (len(records) + 1) // 2
            groups = [list(range(half)), list(range(half, len(records)))]
        pieces: list[ProducerBatch] = []
        reserved_left = self.reserved
        for number, group in enumerate(groups):
            first = records[group[0]]
            piece = ProducerBatch(
                self.topic_partition,
                self.created_ms,
                0,
                threading.Event() if self.done_event is not None else None,
                self.compression,
                first.timestamp,
                INT32_MAX,  # no room check: the groups are sized already
                self.serial,
            )
            for index in group:
                record = records[index]
                handle = by_offset.get(record.offset)
                piece.append_general(
                    record.timestamp,
                    record.key,
                    record.value,
                    record.headers,
                    handle,
                )
            piece.limit = piece.room = 0  # complete: takes no more records
            piece.full = True
            share = RECORD_BATCH_OVERHEAD + sum(sizes[i] for i in group)
            last = number == len(groups) - 1
            piece.reserved = reserved_left if last else min(share, reserved_left)
            reserved_left -= piece.reserved
            piece.attempts = self.attempts
            piece.part = (*self.part, number)
            piece.transactional = self.transactional
            piece.close()
            pieces.append(piece)
        if self.base_sequence >= 0:
            sequence = self.base_sequence
            for piece in pieces:
                piece.stamp(self.producer_id, self.producer_epoch, sequence)
                sequence = (sequence + piece.count) & INT32_MAX
        self.handles = []  # the pieces settle the records now
        self.handle_fields = []
        left = len(pieces)

        def piece_done(piece: ProducerBatch) -> None:
            # This batch is done once its pieces are (a flush may wait for it).
            nonlocal left
            left -= 1
            if piece.last_error is not None:
                self.last_error = piece.last_error
            if left == 0 and not self.done:
                self.done = True
                self._finish()

        for piece in pieces:
            piece.add_done_callback(piece_done)
        return pieces

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
        new = _new_tuple
        fields = iter(self.handle_fields)
        for handle, relative, timestamp, key_size, value_size in zip(
            self.handles, fields, fields, fields, fields, strict=True
        ):
            # try, rather than a `done()` call per record: only a cancelled future is done
            try:  # noqa: SIM105 (per record: cheaper than contextlib.suppress)
                handle.set_result(
                    new(
                        RecordMetadata,
                        (
                            topic,
                            partition,
                            base_offset + relative if base_offset >= 0 else -1,
                            timestamp if log_append_time_ms < 0 else log_append_time_ms,
                            key_size,
                            value_size,
                        ),
                    )
                )
            except InvalidStateError:
                pass
        self._finish()
        return True

    def fail(self, error: BaseException) -> bool:
        """Fail every record's future with `error` (built or not)."""
        if self.done:
            return False
        self.done = True
        self.last_error = error
        for handle in self.handles:
            try:  # noqa: SIM105 (per record: cheaper than contextlib.suppress)
                handle.set_exception(error)
            except InvalidStateError:  # cancelled
                pass
        self._finish()
        return True

    def _finish(self) -> None:
        self.parts = _NO_PARTS  # their memory goes back with the reservation
        # Settled: the futures need nothing more of the batch, and a blocking send's future
        # refers back to it (`_batch`). Dropping them ends that cycle here, so a delivered
        # batch and its futures are freed by reference counting instead of piling up for the
        # cyclic garbage collector (a collection walks every live future).
        self.handles = []
        self.handle_fields = []
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
    """Per-partition batches and the buffer-memory account, for one thread, without a lock
    (module docstring)."""

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
        # What a new batch reserves of buffer.memory (unless its first record needs more).
        self.first_reservation = min(batch_size, RESERVATION_STEP)
        self.linger_ms = linger_ms
        self.buffer_memory = buffer_memory
        self.compression = compression
        self._clock = clock
        self.lock = threading.Lock()
        self._memory_freed = threading.Condition(self.lock)
        self._available = buffer_memory
        self._deques: dict[TopicPartition, deque[ProducerBatch]] = {}
        self._batches_created = 0  # the next batch's serial
        # min(batch.size, the topic's max.message.bytes) of topics whose limit is lower
        self._batch_limits: dict[str, int] = {}
        self._topic_limits: dict[str, int] = {}  # each topic's max.message.bytes, when known
        # each partition's open batch (the last of its deque, if it still takes appends)
        self._open: dict[TopicPartition, ProducerBatch] = {}
        self._incomplete: set[ProducerBatch] = set()
        self.memory_waiters = 0
        self.flushing = 0
        self.closing = False
        self.wakeup: Callable[[], None] = _nothing
        self.memory_listener: Callable[[], None] = _nothing  # on the loop, after memory is freed
        self.idempotence: Idempotence | None = None
        # partitions with a request on the wire, when the sender keeps one at a time (`mute`)
        self._muted: set[TopicPartition] = set()
        # set by `abort_queued(refuse)`: the error of every later append
        self._refuse: Callable[[TopicPartition], ReplogError] | None = None

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

        The per-record hot path, one call: a record with no headers, a value and small deltas
        (nearly all) is encoded right here from tables (`replog.record.record`), and the
        batch.size decision is made on its exact size before anything changes; any other
        record goes through `ProducerBatch.append_general`."""
        batch = self._open.get(tp)
        if batch is None:
            return None
        offset = batch.count
        delta = timestamp_ms - batch.base_timestamp
        fields = None
        if (
            not headers
            and value is not None
            and (value_size := len(value)) < FAST_DATA_LIMIT
            and offset < FAST_OFFSETS
        ):
            if key is None:
                key_size = -1
                if delta == 0:  # the batch's first timestamp: the commonest case
                    fields = EQUAL_TIMESTAMP_FIELDS[offset] + SMALL_SIZE_VARINTS[value_size]
                elif 0 < delta < FAST_DELTAS:
                    fields = (
                        TIMESTAMP_FIELDS[delta]
                        + NULL_KEY_FIELDS[offset]
                        + SMALL_SIZE_VARINTS[value_size]
                    )
            elif 0 <= delta < FAST_DELTAS and (key_size := len(key)) + value_size < FAST_DATA_LIMIT:
                fields = b"".join(
                    (
                        TIMESTAMP_FIELDS[delta],
                        SMALL_SIZE_VARINTS[offset],
                        SMALL_SIZE_VARINTS[key_size],
                        key,
                        SMALL_SIZE_VARINTS[value_size],
                    )
                )
        if fields is None:
            if batch.append_general(timestamp_ms, key, value, headers, handle):
                return batch
            if self._grow(batch, record_size_bound(key, value, headers)) and (
                batch.append_general(timestamp_ms, key, value, headers, handle)
            ):
                return batch
        else:
            body = len(fields) + value_size + 1  # + the headers count
            needed = body + SMALL_SIZE_LENGTHS[body]
            room = batch.room - needed
            if room < 0 and offset and self._grow(batch, -room):
                room = batch.room - needed
            if room >= 0 or not offset:  # fits, or the first record, which always goes in
                parts = batch.parts
                parts.append(batch.lengths[body] + fields)
                parts.append(value)  # type: ignore[arg-type]  # fields: only with a value
                batch.lengths = AFTER_EMPTY_HEADERS
                batch.room = room
                batch.count = offset + 1
                if delta and timestamp_ms > batch.max_timestamp:
                    batch.max_timestamp = timestamp_ms
                if handle is not None:
                    batch.handles.append(handle)
                    batch.handle_fields += (offset, timestamp_ms, key_size, value_size)
                return batch
        batch.full = True
        del self._open[tp]
        return None

    def _grow(self, batch: ProducerBatch, needed: int) -> bool:
        """Reserve more of buffer.memory for the open `batch` so that `needed` more bytes of
        records fit (module docstring): its reservation doubles, within its cap (batch.size)
        and what is available, and by at least `needed`. False, and nothing changes, when
        that much does not fit its cap or the buffer, or when an append waits for memory (a
        new batch then gets the memory first)."""
        headroom = batch.cap - batch.limit
        available = self._available
        if needed > headroom or needed > available or self.memory_waiters:
            return False
        extra = min(max(batch.reserved, needed), headroom, available)
        self._available = available - extra
        batch.reserved += extra
        batch.limit += extra
        batch.room += extra
        return True

    def append_new(
        self,
        tp: TopicPartition,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: HeaderInput = (),
        handle: RecordHandle | None = None,
    ) -> ProducerBatch | None:
        """Append, starting a new batch if needed; None when buffer.memory cannot hold it.

        The new batch reserves `first_reservation` (min(batch.size, RESERVATION_STEP)), or an
        upper bound of its first record's size plus the header if that is more; the first
        record always goes in. Raises what
        `never_fits` says when that is more than all of buffer.memory, and the error of
        `abort_queued(refuse)` after one."""
        batch = self._append_new(tp, timestamp_ms, key, value, headers, handle)
        if batch is not None:
            self.wakeup()
        return batch

    def _append_new(
        self,
        tp: TopicPartition,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: HeaderInput,
        handle: RecordHandle | None,
    ) -> ProducerBatch | None:
        if self._refuse is not None:
            raise self._refuse(tp)
        if not INT64_MIN <= timestamp_ms <= INT64_MAX:
            raise ValueError(f"timestamp {timestamp_ms} is outside [{INT64_MIN}, {INT64_MAX}]")
        reserve = self.first_reservation
        if (
            headers
            or (0 if key is None else len(key)) + (0 if value is None else len(value))
            > reserve - RECORD_BATCH_OVERHEAD - RECORD_OVERHEAD_MAX
        ):
            reserve = self.reservation(record_size_bound(key, value, headers))
        if reserve > self.buffer_memory:
            raise self.never_fits(tp.topic, reserve)
        batch = self._open.get(tp)
        if batch is not None:  # another thread started one meanwhile
            appended = RecordAccumulator.try_append(
                self, tp, timestamp_ms, key, value, headers, handle
            )
            if appended is not None:
                return appended
        if reserve > self._available:
            return None
        self._available -= reserve
        cap = self._batch_limits.get(tp.topic, self.batch_size) - RECORD_BATCH_OVERHEAD
        batch = ProducerBatch(
            tp,
            self._clock(),
            reserve,
            threading.Event() if self.thread_events else None,
            self.compression,
            timestamp_ms,
            min(cap, reserve - RECORD_BATCH_OVERHEAD),
            self._batches_created,
            cap,
        )
        self._batches_created += 1
        self._open[tp] = batch
        try:  # the first record goes in whatever its size (offset delta 0: no room check)
            RecordAccumulator.try_append(self, tp, timestamp_ms, key, value, headers, handle)
        except BaseException:
            del self._open[tp]
            self._available += reserve
            raise
        dq = self._deques.get(tp)
        if dq is None:
            dq = self._deques[tp] = deque()
        dq.append(batch)
        self._incomplete.add(batch)
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

    def set_topic_limit(self, topic: str, max_message_bytes: int | None) -> None:
        """The topic's batch limit (`topic_limits.batch_limit`; None: unknown): later batches
        of the topic hold at most min(batch.size, it) bytes, unless one record alone is
        larger."""
        if max_message_bytes is None:
            self._topic_limits.pop(topic, None)
        else:
            self._topic_limits[topic] = max_message_bytes
        if max_message_bytes is None or max_message_bytes >= self.batch_size:
            self._batch_limits.pop(topic, None)
        else:
            self._batch_limits[topic] = max(max_message_bytes, RECORD_BATCH_OVERHEAD)

    def topic_limit(self, topic: str) -> int | None:
        """The topic's batch limit as `set_topic_limit` gave it (None: unknown)."""
        return self._topic_limits.get(topic)

    def reservation(self, size_bound: int) -> int:
        """What a new batch for a record of at most `size_bound` bytes reserves of
        buffer.memory (module docstring)."""
        return max(self.first_reservation, size_bound + RECORD_BATCH_OVERHEAD)

    def never_fits(self, topic: str, reserve: int) -> ReplogError:
        """The error for a batch whose reservation is more than all of buffer.memory: no
        amount of waiting makes room for it (Kafka's BufferPool refuses it at once)."""
        if reserve > self.first_reservation:
            return MessageSizeTooLargeError(
                f"the record to topic {topic!r} is up to {reserve} bytes when serialized, "
                f"larger than buffer.memory={self.buffer_memory}"
            )
        if self.batch_size <= RESERVATION_STEP:
            return ConfigError(
                f"batch.size={self.batch_size} is larger than buffer.memory="
                f"{self.buffer_memory}: every batch reserves batch.size bytes of the buffer, so "
                f"no record to topic {topic!r} can ever be sent (raise buffer.memory or lower "
                "batch.size)"
            )
        return ConfigError(
            f"buffer.memory={self.buffer_memory} is smaller than the {RESERVATION_STEP} bytes "
            f"every batch reserves first (batch.size={self.batch_size}), so no record to topic "
            f"{topic!r} can ever be sent (raise buffer.memory or lower batch.size)"
        )

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
        result = self._take_ready(now_ms, leader_of, node_ready, max_request_size)
        idempotence = self.idempotence
        for batches in result.by_node.values():
            for batch in batches:
                if idempotence is not None:
                    idempotence.on_drained(batch)  # stamps a first send before it is built
                batch.close()
        return result

    def _take_ready(
        self,
        now_ms: int,
        leader_of: Callable[[TopicPartition], int | None],
        node_ready: Callable[[int], bool],
        max_request_size: int,
    ) -> DrainResult:
        """`drain` up to closing the batches (under the lock in a thread-safe accumulator)."""
        result = DrainResult()
        by_node = result.by_node
        deques = self._deques
        if not deques:
            return result
        linger_ms = self.linger_ms
        urgent = self.flushing > 0 or self.closing or self.memory_waiters > 0
        lingering: list[tuple[TopicPartition, deque[ProducerBatch], int]] = []
        backlogged: list[tuple[TopicPartition, deque[ProducerBatch], int]] = []
        taken: list[TopicPartition] = []
        sizes: dict[int, int] = {}
        busy: set[int] = set()  # nodes at their in-flight limit
        take = self._take
        muted = self._muted
        for tp, dq in deques.items():
            if muted and tp in muted:
                continue  # its request on the wire is answered first (module docstring)
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
                # Even while it lingers: the refresh wakes the sender when it brings a leader.
                result.unknown_leaders.add(tp)
                continue
            if not sendable:
                result.wake_at(head.created_ms + linger_ms)
                lingering.append((tp, dq, leader))
            elif take(tp, dq, leader, by_node, sizes, busy, node_ready, max_request_size):
                taken.append(tp)
                if dq and not by_node[leader][-1].attempts:
                    backlogged.append((tp, dq, leader))
        # Batches still lingering ride along with a request their leader gets anyway.
        for tp, dq, leader in lingering:
            if leader in by_node and take(
                tp, dq, leader, by_node, sizes, busy, node_ready, max_request_size
            ):
                taken.append(tp)
        # Then, every partition having had its turn, the room left goes to backlogs.
        for tp, dq, leader in backlogged:
            self._take_more(tp, dq, by_node[leader], leader, sizes, max_request_size)
        # Partitions that sent go to the back (the others are first next time); an empty
        # deque goes away, so a drain only walks partitions with something queued.
        for tp in taken:
            dq = deques.pop(tp)
            if dq:
                deques[tp] = dq
                result.wake_at(now_ms)  # its next batch is judged in the next drain
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
        if batches is None and (leader in busy or not node_ready(leader)):
            busy.add(leader)
            return False
        head = dq[0]
        if self.idempotence is not None and not self.idempotence.can_drain(tp, head):
            return False
        records = head.records
        size = RECORD_BATCH_OVERHEAD + head.limit - head.room if records is None else len(records)
        if batches is None:
            sizes[leader] = size
            by_node[leader] = [head]
        else:
            used = sizes[leader] + size
            if used > max_request_size:
                return False  # the next request; the partition keeps its turn
            sizes[leader] = used
            batches.append(head)
        dq.popleft()
        if self._open.get(tp) is head:
            del self._open[tp]
        return True

    def _take_more(
        self,
        tp: TopicPartition,
        dq: deque[ProducerBatch],
        batches: list[ProducerBatch],
        leader: int,
        sizes: dict[int, int],
        max_request_size: int,
    ) -> None:
        """Under the lock, after `_take` moved `tp`'s first batch (a first send) into
        `leader`'s request and every other partition had its turn: its next batches go along
        while they are complete (not the partition's open batch), first sends, and fit in
        `max.request.size`; with idempotence, only while the partition stays within its
        window."""
        idempotence = self.idempotence
        # The taken batch is not stamped yet (`drain` stamps it after this): one less room.
        allowed = idempotence.room(tp) - 1 if idempotence is not None else len(dq)
        used = sizes[leader]
        while allowed > 0 and dq:
            batch = dq[0]
            # A retry is re-enqueued ahead of every first send, so none should follow one
            # here; were it to, it must go alone (the broker answers an entry as a whole).
            if batch.attempts or self._open.get(tp) is batch:
                break
            size = RECORD_BATCH_OVERHEAD + batch.limit - batch.room
            if used + size > max_request_size:
                break
            used += size
            batches.append(batch)
            dq.popleft()
            allowed -= 1
        sizes[leader] = used

    def _close_for_appends(self, tp: TopicPartition, batch: ProducerBatch) -> None:
        """Under the lock: `batch` left its deque, so it takes no more records."""
        if self._open.get(tp) is batch:
            del self._open[tp]

    def reenqueue(self, batch: ProducerBatch, retry_at_ms: int) -> None:
        """Put a batch that will be retried back at the front of its deque (module docstring)."""
        batch.retry_at_ms = retry_at_ms
        dq = self._deques.get(batch.topic_partition)
        if dq is None:
            dq = self._deques[batch.topic_partition] = deque()
        if self.idempotence is None:

            def behind(queued: ProducerBatch) -> bool:
                return (queued.serial, queued.part) > (batch.serial, batch.part)

        elif batch.base_sequence < 0:
            dq.appendleft(batch)
            return
        else:

            def behind(queued: ProducerBatch) -> bool:
                return queued.base_sequence < 0 or queued.base_sequence > batch.base_sequence

        index = 0
        for index, queued in enumerate(dq):  # noqa: B007 - the index is the result
            if behind(queued):
                break
        else:
            index = len(dq)
        dq.insert(index, batch)

    def split_and_reenqueue(
        self, batch: ProducerBatch, max_bytes: int, retry_at_ms: int
    ) -> list[ProducerBatch]:
        """Split a built batch the broker refused as too large (`ProducerBatch.split`) and put
        the pieces back in its place, in order, to be sent from `retry_at_ms`: they replace
        it among the incomplete batches (and take over its reservation)."""
        pieces = batch.split(max_bytes)
        self._replace_incomplete(batch, pieces)
        for piece in pieces:
            self.reenqueue(piece, retry_at_ms)
        return pieces

    def _replace_incomplete(self, batch: ProducerBatch, pieces: list[ProducerBatch]) -> None:
        self._incomplete.discard(batch)
        self._incomplete.update(pieces)

    def expired(self, now_ms: int, delivery_timeout_ms: int) -> list[ProducerBatch]:
        """Remove and return queued batches older than delivery.timeout.ms (from the front of
        each deque, stopping at the first younger one: later batches are younger)."""
        found: list[ProducerBatch] = []
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
        heads = [dq[0].created_ms for dq in self._deques.values() if dq]
        return min(heads) + delivery_timeout_ms if heads else None

    def deallocate(self, batch: ProducerBatch) -> None:
        """Return a done batch's memory (once) and wake whoever waits for memory."""
        incomplete = self._incomplete
        if batch in incomplete:
            incomplete.discard(batch)
            self._available += batch.reserved
            if self.memory_waiters:
                self.memory_listener()

    def abort_queued(
        self, refuse: Callable[[TopicPartition], ReplogError] | None = None
    ) -> list[ProducerBatch]:
        """Remove and return every queued batch (a forced close fails them); with `refuse`,
        every later append raises `refuse(tp)` (module docstring)."""
        if refuse is not None:
            self._refuse = refuse
        batches = [batch for dq in self._deques.values() for batch in dq]
        self._deques.clear()
        self._open.clear()  # so every later append goes through `_append_new`, which refuses
        return batches

    def mute(self, tp: TopicPartition) -> None:
        """Drain nothing of `tp` until `unmute` (its request is on the wire)."""
        self._muted.add(tp)

    def unmute(self, tp: TopicPartition) -> None:
        self._muted.discard(tp)

    def is_muted(self, tp: TopicPartition) -> bool:
        return tp in self._muted

    # --- state --------------------------------------------------------------------------------

    def incomplete(self) -> list[ProducerBatch]:
        """Every batch not done yet (queued or in flight): what a flush waits for."""
        return list(self._incomplete)

    def has_incomplete(self) -> bool:
        return bool(self._incomplete)

    def has_queued(self) -> bool:
        return bool(self._deques)  # only partitions with queued batches have a deque

    def queued_partitions(self) -> list[TopicPartition]:
        return list(self._deques)

    def drain_all(self) -> list[ProducerBatch]:
        """Close and return every queued batch regardless of readiness or leaders (no
        network: benchmarks and tests). Their bytes are in `batch.records`; their memory stays
        reserved until `deallocate`."""
        batches = self.abort_queued()
        for batch in batches:
            batch.close()
        return batches


class ThreadSafeRecordAccumulator(RecordAccumulator):
    """A `RecordAccumulator` used from any thread (the blocking producer): every method that
    reads or changes its state takes `lock`, and only this one offers `wait_for_memory`. A
    drain builds its batches and a new batch wakes the sender outside the lock."""

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
        # acquire/release rather than `with`: measurably cheaper, and this runs per record
        lock = self.lock
        lock.acquire()
        try:
            return RecordAccumulator.try_append(self, tp, timestamp_ms, key, value, headers, handle)
        finally:
            lock.release()

    def _append_new(
        self,
        tp: TopicPartition,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: HeaderInput,
        handle: RecordHandle | None,
    ) -> ProducerBatch | None:
        with self.lock:
            return RecordAccumulator._append_new(
                self, tp, timestamp_ms, key, value, headers, handle
            )

    def _take_ready(
        self,
        now_ms: int,
        leader_of: Callable[[TopicPartition], int | None],
        node_ready: Callable[[int], bool],
        max_request_size: int,
    ) -> DrainResult:
        with self.lock:
            return RecordAccumulator._take_ready(
                self, now_ms, leader_of, node_ready, max_request_size
            )

    def reenqueue(self, batch: ProducerBatch, retry_at_ms: int) -> None:
        with self.lock:
            RecordAccumulator.reenqueue(self, batch, retry_at_ms)

    def _replace_incomplete(self, batch: ProducerBatch, pieces: list[ProducerBatch]) -> None:
        with self.lock:
            RecordAccumulator._replace_incomplete(self, batch, pieces)

    def expired(self, now_ms: int, delivery_timeout_ms: int) -> list[ProducerBatch]:
        with self.lock:
            return RecordAccumulator.expired(self, now_ms, delivery_timeout_ms)

    def next_expiry_ms(self, delivery_timeout_ms: int) -> int | None:
        with self.lock:
            return RecordAccumulator.next_expiry_ms(self, delivery_timeout_ms)

    def deallocate(self, batch: ProducerBatch) -> None:
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

    def abort_queued(
        self, refuse: Callable[[TopicPartition], ReplogError] | None = None
    ) -> list[ProducerBatch]:
        with self.lock:
            return RecordAccumulator.abort_queued(self, refuse)

    def mute(self, tp: TopicPartition) -> None:
        with self.lock:
            RecordAccumulator.mute(self, tp)

    def unmute(self, tp: TopicPartition) -> None:
        with self.lock:
            RecordAccumulator.unmute(self, tp)

    def is_muted(self, tp: TopicPartition) -> bool:
        with self.lock:
            return RecordAccumulator.is_muted(self, tp)

    def incomplete(self) -> list[ProducerBatch]:
        with self.lock:
            return RecordAccumulator.incomplete(self)

    def queued_partitions(self) -> list[TopicPartition]:
        with self.lock:
            return RecordAccumulator.queued_partitions(self)

    def wait_for_memory(self, timeout_s: float, needed: int | None = None) -> None:
        """Block the calling thread until some memory is freed or `timeout_s` passes (callers
        wait in short slices and ask again; see `append_new`). `needed`: what the refused
        append would reserve (`reservation`; None: a new batch's first reservation): only
        that much free memory makes the call return at once, else a record larger than
        batch.size would have its caller spin until max.block.ms."""
        with self.lock:
            if self._available >= (self.first_reservation if needed is None else needed):
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
