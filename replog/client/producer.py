"""The asyncio `Producer` (``from replog.aio import Producer``), also the engine the blocking
`replog.Producer` runs on its private loop.

Usage::

    async with Producer({"bootstrap.servers": "127.0.0.1:9092"}) as producer:
        metadata = await producer.send("events", b"payload", key=b"user-1")  # delivered
        future = producer.send_nowait("events", b"more")   # an asyncio.Future[RecordMetadata]
        await producer.flush()

Rules:
- `await send(...)` returns once the record is delivered (acknowledged as `acks` asks), with
  its `RecordMetadata`; `send_nowait(...)` returns the future at once. Both raise at once for
  bad input: a topic name that cannot exist (InvalidTopicError), a key, value or header that is
  not bytes without a serializer (TypeError naming which), a header key that is no UTF-8 text,
  a negative partition or a timestamp outside [0, Int64 max] (ValueError), a record larger
  than `max.request.size` or `buffer.memory` (MessageSizeTooLargeError naming both sizes),
  `batch.size` larger than `buffer.memory` (ConfigError naming both: no batch could ever be
  allocated, so waiting for memory would never end), a closed producer (ClientClosedError), a
  producer whose sender crashed (IllegalStateError naming the crash; `flush` raises it too).
  What a send is checked for here is all that appending it can fail on.
- What needs the cluster goes into the future: an unknown topic fails it with
  UnknownTopicOrPartitionError ("topic 'x' does not exist") as soon as a broker says so; a
  partition the topic does not have, with UnknownTopicOrPartitionError naming the count.
  Waiting for metadata, and for `buffer.memory` when the buffer is full (backpressure), is
  bounded by `max.block.ms` from the call: then the future fails with KafkaTimeoutError naming
  which of the two it waited for. Records that wait keep their order: while one waits, later
  sends queue behind it instead of overtaking. Whatever goes wrong appending a waiting send
  (even a bug) fails that send's future only: the sends behind it go on.
- Cancelling the future (or the `await send`) before the record was appended drops it (a
  waiting send is looked at again after each wait, before it is appended); after that it is
  sent anyway (the batch is shared) and only the future is cancelled.
- Delivery: see `sender` (retries within `delivery.timeout.ms`, expiry errors, idempotence,
  a batch refused as too large split) and `accumulator` (batching, linger, memory). The first
  send to a topic also waits for the topic's `max.message.bytes` (`topic_limits`), to which
  batches are then sized.
- `flush(timeout_ms)` sends everything queued at once and waits for it; `close(timeout_ms)`
  refuses new sends, delivers what is queued within the timeout (None: no limit), fails the
  rest with ClientClosedError and releases the connections; idempotent. `async with` starts
  and closes.
- The first `send_nowait` starts the producer on the running loop (`start()` does it
  explicitly); a producer belongs to that loop.

Thread safety (for the blocking facade only): `_prepare`, `_append` and `_append_fields` may run
in any thread (they touch only the accumulator, under its lock, the partitioner and a topic
cache that is replaced, never mutated in place); everything else runs on the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from replog.client.accumulator import (
    ProducerBatch,
    RecordAccumulator,
    RecordHandle,
    ThreadSafeRecordAccumulator,
    record_size_bound,
)
from replog.client.cluster_metadata import ClusterMetadata, PartitionState
from replog.client.config import ProducerConfig, producer_config
from replog.client.event_loop_binding import EventLoopBinding
from replog.client.loop_thread import WAIT_SLICE_S
from replog.client.partitioner import DefaultPartitioner
from replog.client.records import ConsumerGroupMetadata, OffsetAndMetadata, RecordMetadata
from replog.client.sender import Sender
from replog.client.topic_limits import TopicLimits
from replog.clock import Clock, monotonic_ms, wall_clock_ms
from replog.common import TopicPartition
from replog.errors import (
    ClientClosedError,
    KafkaTimeoutError,
    MessageSizeTooLargeError,
    ReplogError,
    TransactionStateError,
    UnknownTopicOrPartitionError,
)
from replog.record.header import RECORD_BATCH_OVERHEAD
from replog.record.record import RECORD_OVERHEAD_MAX
from replog.record.varint import INT64_MAX
from replog.topic_names import check_topic_name

if TYPE_CHECKING:
    from replog.client.transactions import Transactions

__all__ = ["Producer"]

# A threaded producer's fast send takes the accumulator's lock itself (`_append_from_thread`).
_try_append = RecordAccumulator.try_append

log = logging.getLogger("replog.client")

Headers = tuple[tuple[str, bytes | None], ...]
_BYTES_LIKE = (bytes, bytearray, memoryview)


@dataclass(frozen=True, slots=True)
class _TopicInfo:
    """What `send` needs of a topic: its partition count, the partitions with a leader, and
    each partition's TopicPartition (made once, not per record)."""

    count: int
    available: tuple[int, ...]
    partitions: tuple[TopicPartition, ...]

    @classmethod
    def of(cls, topic: str, states: Sequence[PartitionState]) -> _TopicInfo:
        return cls(
            len(states),
            tuple(s.partition for s in states if s.leader >= 0),
            tuple(TopicPartition(topic, p) for p in range(len(states))),
        )


@dataclass(slots=True)
class _Prepared:
    """A validated, serialized record."""

    topic: str
    partition: int | None
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp_ms: int
    size: int


@dataclass(slots=True)
class _Waiting:
    """A send that waits for metadata or memory (aio only), in send order."""

    record: _Prepared
    future: asyncio.Future[RecordMetadata]
    deadline_ms: int


def _to_bytes(what: str, data: object, hint: str) -> bytes | None:
    """`data` as bytes; a TypeError naming `what` and, as `hint` says, what to do about it."""
    if data is None or type(data) is bytes:
        return data
    if isinstance(data, _BYTES_LIKE):
        return bytes(data)
    raise TypeError(f"{what} must be bytes or None, not {type(data).__name__} ({hint})")


def _serializer_hint(what: str, serializer: object) -> str:
    if serializer is None:
        return f"or configure {what}.serializer"
    return f"as the configured {what}.serializer returned"


class Producer:
    """An asyncio Kafka-style producer (module docstring)."""

    # Appends come from the loop only; the blocking twin's engine (`_for_threads`) takes them
    # from any thread.
    _accumulator_type: type[RecordAccumulator] = RecordAccumulator

    def __init__(
        self,
        config: Mapping[str, object] | ProducerConfig | None = None,
        *,
        clock: Clock = monotonic_ms,
        **kwargs: object,
    ) -> None:
        """`clock`: the client's millisecond clock (deadlines, backoffs, ages); a test may pass
        `replog.testing.ManualClock`."""
        self.config = cfg = producer_config(config, **kwargs)
        self._clock = clock
        self._accumulator = self._accumulator_type(
            batch_size=cfg.batch_size,
            linger_ms=cfg.linger_ms,
            buffer_memory=cfg.buffer_memory,
            compression=cfg.compression_type,
            clock=clock,
        )
        self._partitioner = DefaultPartitioner(ignore_keys=cfg.partitioner_ignore_keys)
        self._metadata = ClusterMetadata.for_client(cfg, clock)
        self._connections = self._metadata.connections
        self._sender = Sender(
            cfg, self._accumulator, self._metadata, self._connections, clock=clock
        )
        self._limits = TopicLimits(
            self._metadata,
            self._accumulator.set_topic_limit,
            self._sender.tasks,
            request_timeout_ms=cfg.request_timeout_ms,
            max_age_ms=cfg.metadata_max_age_ms,
        )
        self._sender.on_too_large = self._limits.stale
        self._txn: Transactions | None = None
        if cfg.transactional_id is not None:
            # Imported here: only a transactional producer loads the coordinator calls.
            from replog.client.transactions import Transactions

            self._txn = Transactions(cfg, self._metadata, self._connections, self._sender, clock)
            self._sender.transactions = self._txn
            assert self._sender.idempotence is not None  # a transactional.id needs it (config)
            self._sender.idempotence.transactional = True
            self._sender.idempotence.gate = self._txn.manager.can_send
        # The largest key + value size a blocking send appends without `_prepare`
        # (`_append_from_thread`): no serializer to call, and small enough that neither
        # max.request.size nor buffer.memory can refuse it (-1: never).
        self._fast_data_limit = (
            min(cfg.max_request_size, cfg.buffer_memory)
            - RECORD_BATCH_OVERHEAD
            - RECORD_OVERHEAD_MAX
            if cfg.key_serializer is None
            and cfg.value_serializer is None
            and cfg.transactional_id is None
            and self._accumulator.first_reservation <= cfg.buffer_memory
            else -1
        )
        self._topics: dict[str, _TopicInfo] = {}
        self._metadata.add_listener(self._on_metadata)
        self._waiting: deque[_Waiting] = deque()
        self._waiting_task: asyncio.Task[None] | None = None
        self._serving = False  # `_serve_waiting` runs or is about to
        self._memory_freed: asyncio.Event | None = None
        self._closed = False
        self._close_task: asyncio.Task[None] | None = None
        self._home = EventLoopBinding("asyncio Producer", "replog.Producer")

    # --- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the sender on the running loop (optional: the first send does it)."""
        self._start()

    def _start(self) -> None:
        first = self._home.loop is None
        if first:
            self._check_open()
        self._home.bind_running("send")  # the loop it started on, and a running one
        if not first:
            return
        self._memory_freed = asyncio.Event()
        self._accumulator.memory_listener = self._memory_freed.set
        self._accumulator.wakeup = self._sender.wakeup
        self._sender.start()

    async def __aenter__(self) -> Producer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError("the producer is closed: create a new one to send")

    def _check_crashed(self, what: str) -> None:
        error = self._sender.crash_error(what)
        if error is not None:
            raise error

    def _check_sender_for(self, topic: str) -> None:
        """A send's crash check (the flag first: the message is built only after a crash)."""
        if self._sender.crashed:
            self._check_crashed(f"send to topic {topic!r}")

    async def close(self, timeout_ms: int | None = None) -> None:
        """Deliver what is queued within `timeout_ms` (None: no limit), fail the rest with
        ClientClosedError, release everything. Idempotent; concurrent calls wait together."""
        if self._home.ended_for_close():
            self._closed = True  # nothing of it can run any more (event_loop_binding)
            return
        if self._close_task is None:
            self._closed = True
            self._close_task = asyncio.get_running_loop().create_task(self._close(timeout_ms))
        await asyncio.shield(self._close_task)

    async def _close(self, timeout_ms: int | None) -> None:
        deadline_ms = None if timeout_ms is None else self._clock() + timeout_ms
        task = self._waiting_task
        if task is not None and not task.done() and timeout_ms != 0:
            # Sends that wait for metadata or memory were accepted: they still go.
            self._accumulator.closing = True  # every batch ready: memory frees sooner
            self._sender.wakeup()
            remaining_s = (
                None if deadline_ms is None else max(deadline_ms - self._clock(), 0) / 1000
            )
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining_s):
                    await asyncio.shield(task)
        while self._waiting:
            waiting = self._waiting.popleft()
            if not waiting.future.done():
                waiting.future.set_exception(
                    ClientClosedError(
                        f"send to topic {waiting.record.topic!r} not started: the producer "
                        "was closed while it still waited for metadata or buffer memory"
                    )
                )
        if self._waiting_task is not None:
            self._waiting_task.cancel()
            await asyncio.gather(self._waiting_task, return_exceptions=True)
        if self._sender.started:
            remaining = None if deadline_ms is None else max(deadline_ms - self._clock(), 0)
            await self._sender.close(remaining)
        await self._limits.close()
        await self._metadata.close()  # and the connections it made

    @property
    def closed(self) -> bool:
        return self._closed

    def undelivered(self) -> int:
        """Records accepted and not yet delivered or failed (any thread: a snapshot)."""
        batches = self._accumulator.incomplete()
        return len(self._waiting) + sum(batch.record_count for batch in batches)

    # --- the blocking twin's entry points (replog/client/sync_producer.py) --------------------

    @staticmethod
    def _for_threads(
        config: Mapping[str, object] | ProducerConfig | None = None,
        *,
        clock: Clock = monotonic_ms,
        **kwargs: object,
    ) -> Producer:
        """The engine of the blocking twin: its accumulator takes appends from any thread
        (`_append_from_thread`); `_serve_threads` once it started on its loop."""
        return _ThreadedProducer(config, clock=clock, **kwargs)

    def _serve_threads(self) -> None:
        """From now on appends come from user threads: the sender is woken through the loop."""
        self._accumulator.wakeup = self._sender.wakeup_threadsafe

    def _append_from_thread(
        self,
        topic: str,
        value: Any,
        key: Any,
        headers: Iterable[tuple[str, Any]] | None,
        partition: int | None,
        timestamp_ms: int | None,
        handle: RecordHandle,
        *,
        run_on_loop: Callable[[Coroutine[Any, Any, _TopicInfo], str], _TopicInfo],
        check_open: Callable[[], None],
    ) -> ProducerBatch:
        """A blocking send from a user thread: append in that thread under the accumulator's
        lock when the topic is known and there is room (no hop to the loop per record), else
        wait within max.block.ms for the metadata (`run_on_loop`) and for memory."""
        if self._sender.crashed:  # `_check_sender_for`, inline: this runs per record
            self._check_crashed(f"send to topic {topic!r}")
        record: _Prepared | None = None
        info: _TopicInfo | None = None
        if (
            headers is None
            and partition is None
            and timestamp_ms is None
            and type(value) is bytes
            and (key is None or type(key) is bytes)
            and type(topic) is str
        ):
            # The common send: bytes in, a known topic, the producer's choice of partition and
            # time. It needs none of `_prepare`'s checks (`_fast_data_limit`).
            info = self._topics.get(topic)
            size = len(value) if key is None else len(key) + len(value)
            if info is not None and size <= self._fast_data_limit:
                now_ms = wall_clock_ms()
                # `_append_fields` inline, for a record that fits the open batch: the partition
                # (sticky, or the key's), then `try_append` under the lock this thread takes
                # itself, two calls fewer per record. Otherwise `_append_fields` decides.
                tp = info.partitions[
                    self._partitioner.partition(topic, key, info.count, available=info.available)
                ]
                acc = self._accumulator
                lock = acc.lock
                lock.acquire()
                try:
                    batch = _try_append(acc, tp, now_ms, key, value, (), handle)
                finally:
                    lock.release()
                if batch is None:
                    batch = self._append_fields(topic, None, key, value, (), now_ms, info, handle)
                if batch is not None:
                    return batch
                record = _Prepared(topic, None, key, value, (), now_ms, RECORD_OVERHEAD_MAX + size)
        if record is None:
            record = self._prepare(topic, value, key, headers, partition, timestamp_ms)
            info = self._topics.get(topic)
            if info is not None and (partition is None or partition < info.count):
                batch = self._append(record, info, handle)
                if batch is not None:
                    return batch
        deadline_ms = self._clock() + self.config.max_block_ms
        if info is None or (partition is not None and partition >= info.count):
            info = run_on_loop(
                self._topic_info(topic, partition, deadline_ms), f"send to topic {topic!r}"
            )
        acc = self._accumulator
        assert isinstance(acc, ThreadSafeRecordAccumulator)
        needed = acc.reservation(record.size)  # a record larger than batch.size needs more
        while True:
            check_open()
            batch = self._append(record, info, handle)
            if batch is not None:
                return batch
            remaining_ms = deadline_ms - self._clock()
            if remaining_ms <= 0:
                raise self._memory_timeout(topic)
            self._sender.wakeup_threadsafe()  # with waiters every batch is ready
            acc.wait_for_memory(min(WAIT_SLICE_S, remaining_ms / 1000), needed)

    # --- sending --------------------------------------------------------------------------------

    async def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: Iterable[tuple[str, Any]] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> RecordMetadata:
        """Send one record and wait until it is delivered (module docstring)."""
        return await self.send_nowait(topic, value, key, headers, partition, timestamp_ms)

    def send_nowait(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: Iterable[tuple[str, Any]] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> asyncio.Future[RecordMetadata]:
        """Queue one record; the future resolves when it is delivered (module docstring)."""
        self._check_open()
        self._check_sender_for(topic)
        if self._txn is not None:
            self._txn.manager.check_sendable()  # at once, not when the record is appended
        self._start()
        record = self._prepare(topic, value, key, headers, partition, timestamp_ms)
        loop = self._home.loop
        assert loop is not None
        future: asyncio.Future[RecordMetadata] = loop.create_future()
        if not self._waiting:
            info = self._topics.get(topic)
            if (
                info is not None
                and (partition is None or partition < info.count)
                and self._append(record, info, future) is not None
            ):
                return future
        self._waiting.append(_Waiting(record, future, self._clock() + self.config.max_block_ms))
        if not self._serving:
            self._waiting_task = self._sender.tasks.spawn(
                self._serve_waiting(), name="sends waiting for metadata or memory"
            )
            self._serving = True
        return future

    def _prepare(
        self,
        topic: str,
        value: Any,
        key: Any,
        headers: Iterable[tuple[str, Any]] | None,
        partition: int | None,
        timestamp_ms: int | None,
    ) -> _Prepared:
        """Validate and serialize one record (any thread)."""
        if not isinstance(topic, str):
            raise TypeError(f"topic must be a str, not {type(topic).__name__}")
        if topic not in self._topics:
            check_topic_name(topic)
        cfg = self.config
        if cfg.key_serializer is not None and key is not None:
            key = cfg.key_serializer(key)
        if cfg.value_serializer is not None and value is not None:
            value = cfg.value_serializer(value)
        # The hint names the configured serializer that returned it, else the setting to use:
        # a misuse review found "configure value.serializer" said with one configured.
        key_bytes = _to_bytes("key", key, _serializer_hint("key", cfg.key_serializer))
        value_bytes = _to_bytes("value", value, _serializer_hint("value", cfg.value_serializer))
        header_tuple: Headers = ()
        if headers:
            header_tuple = tuple(self._header(item) for item in headers)
        if partition is not None and (
            not isinstance(partition, int) or isinstance(partition, bool) or partition < 0
        ):
            raise ValueError(f"partition must be an int >= 0 or None, not {partition!r}")
        if timestamp_ms is None:
            timestamp_ms = wall_clock_ms()
        elif not isinstance(timestamp_ms, int) or isinstance(timestamp_ms, bool):
            raise TypeError(f"timestamp_ms must be an int, not {type(timestamp_ms).__name__}")
        elif not 0 <= timestamp_ms <= INT64_MAX:
            # Checked here, not when appended: a send waiting for metadata must not fail later
            # on what was wrong from the start.
            raise ValueError(
                f"timestamp_ms must be >= 0 and <= {INT64_MAX} (an Int64), not {timestamp_ms}"
            )
        size = record_size_bound(key_bytes, value_bytes, header_tuple)
        if size + RECORD_BATCH_OVERHEAD > cfg.max_request_size:
            raise MessageSizeTooLargeError(
                f"the record to topic {topic!r} is up to {size + RECORD_BATCH_OVERHEAD} bytes "
                f"when serialized, larger than max.request.size={cfg.max_request_size}"
            )
        reserve = self._accumulator.reservation(size)
        if reserve > cfg.buffer_memory:
            # No wait for memory could end: fail now (Kafka's BufferPool does).
            raise self._accumulator.never_fits(topic, reserve)
        return _Prepared(topic, partition, key_bytes, value_bytes, header_tuple, timestamp_ms, size)

    @staticmethod
    def _header(item: object) -> tuple[str, bytes | None]:
        if not isinstance(item, tuple | list) or len(item) != 2:
            raise TypeError(f"a header must be a (str, bytes | None) pair, not {item!r}")
        name, data = item
        if not isinstance(name, str):
            raise TypeError(f"a header key must be a str, not {type(name).__name__}")
        try:
            name.encode()  # what the batch will hold; a lone surrogate cannot be encoded
        except UnicodeEncodeError as exc:
            raise ValueError(f"header key {name!r} is not valid UTF-8 text: {exc.reason}") from None
        return name, _to_bytes(f"header {name!r}", data, "encode header values yourself")

    def _append(
        self, record: _Prepared, info: _TopicInfo, handle: RecordHandle | None
    ) -> ProducerBatch | None:
        """Choose the partition and append (any thread); None when buffer.memory is full.

        The caller checked that an explicit partition exists."""
        return self._append_fields(
            record.topic,
            record.partition,
            record.key,
            record.value,
            record.headers,
            record.timestamp_ms,
            info,
            handle,
        )

    def _append_fields(
        self,
        topic: str,
        partition: int | None,
        key: bytes | None,
        value: bytes | None,
        headers: Headers,
        timestamp_ms: int,
        info: _TopicInfo,
        handle: RecordHandle | None,
    ) -> ProducerBatch | None:
        """`_append` of a prepared record's fields (the fast send has no `_Prepared`)."""
        acc = self._accumulator
        sticky = partition is None and (key is None or self._partitioner.ignore_keys)
        if partition is None:
            partition = self._partitioner.partition(
                topic, key, info.count, available=info.available
            )
        txn = self._txn
        if txn is not None:
            # Inside a transaction only; the partition joins it (added before its first batch
            # leaves). A blocking send runs this in the caller's thread: it reads the state
            # and adds to a set, each atomic under the GIL.
            txn.manager.check_send(info.partitions[partition])
        batch = acc.try_append(
            info.partitions[partition], timestamp_ms, key, value, headers, handle
        )
        if batch is not None:
            return batch
        if sticky:
            # KIP-480: the sticky partition's batch is complete; move on before starting one.
            self._partitioner.on_new_batch(topic, partition, info.count, available=info.available)
            partition = self._partitioner.partition(
                topic, key, info.count, available=info.available
            )
        if txn is not None:
            txn.manager.check_send(info.partitions[partition])
        return acc.append_new(info.partitions[partition], timestamp_ms, key, value, headers, handle)

    async def _serve_waiting(self) -> None:
        """Append waiting sends in order as metadata and memory allow (module docstring)."""
        try:
            await self._append_waiting()
        except asyncio.CancelledError:
            # The sender stopped on a bug (its TaskGroup cancels this): the waiting sends fail
            # with its cause now, as an append after it would, instead of waiting for close.
            for waiting in self._waiting:
                error = self._sender.crash_error(f"send to topic {waiting.record.topic!r}")
                if error is not None and not waiting.future.done():
                    waiting.future.set_exception(error)
            raise
        finally:
            # Said here, in the step the queue ran empty: the task may end a step later
            # (`task_owner`), and a send made meanwhile must start a new one.
            self._serving = False

    async def _append_waiting(self) -> None:
        while self._waiting:
            waiting = self._waiting[0]
            if waiting.future.done():  # cancelled by its caller
                self._waiting.popleft()
                continue
            future = waiting.future
            try:
                info = await self._topic_info(
                    waiting.record.topic, waiting.record.partition, waiting.deadline_ms
                )
                # Cancelled while it waited: dropped, not appended (module docstring).
                while not future.done() and self._append(waiting.record, info, future) is None:
                    await self._wait_for_memory(waiting)
            except Exception as exc:  # whatever it is, it is this send's: the queue goes on
                if not isinstance(exc, ReplogError):  # a bug: say so, loudly
                    log.exception("appending a send to topic %r failed", waiting.record.topic)
                if not future.done():
                    future.set_exception(exc)
            if self._waiting and self._waiting[0] is waiting:
                self._waiting.popleft()

    async def _wait_for_memory(self, waiting: _Waiting) -> None:
        event = self._memory_freed
        assert event is not None
        remaining_ms = waiting.deadline_ms - self._clock()
        if remaining_ms <= 0:
            raise self._memory_timeout(waiting.record.topic)
        event.clear()
        self._accumulator.memory_waiters += 1
        self._sender.wakeup()  # with waiters every batch is ready: free memory sooner
        try:
            async with asyncio.timeout(remaining_ms / 1000):
                await event.wait()
        except TimeoutError:
            raise self._memory_timeout(waiting.record.topic) from None
        finally:
            self._accumulator.memory_waiters -= 1

    def _memory_timeout(self, topic: str) -> KafkaTimeoutError:
        cfg = self.config
        return KafkaTimeoutError(
            f"send to topic {topic!r}: no room in buffer.memory={cfg.buffer_memory} bytes "
            f"within max.block.ms={cfg.max_block_ms} ms (records are produced faster than "
            "the cluster takes them)"
        )

    async def _topic_info(self, topic: str, partition: int | None, deadline_ms: int) -> _TopicInfo:
        """The topic's partitions, waiting for metadata up to `deadline_ms`; raises when the
        topic or the explicit partition does not exist."""
        info = self._topics.get(topic)
        if info is not None and (partition is None or partition < info.count):
            return info
        if info is not None:
            # Maybe partitions were added since: look once more before refusing.
            self._metadata.request_update()
        try:
            states = await self._metadata.partitions_for(
                topic,
                deadline_ms=deadline_ms,
                wait_for_seen_topic=True,
                deadline_name=f"max.block.ms={self.config.max_block_ms}",
            )
        except KafkaTimeoutError as exc:
            raise KafkaTimeoutError(
                f"send to topic {topic!r}: metadata not available within "
                f"max.block.ms={self.config.max_block_ms} ms: {exc}"
            ) from None
        first = topic not in self._topics
        info = self._remember(topic, states)
        if first:  # batches are sized to the topic's max.message.bytes from the start
            await self._limits.ensure(topic, deadline_ms)
        if partition is not None and partition >= info.count:
            raise UnknownTopicOrPartitionError(
                f"partition {partition} of topic {topic!r} does not exist: the topic has "
                f"{info.count} partition(s), 0-{info.count - 1}"
            )
        return info

    def _remember(self, topic: str, states: Sequence[PartitionState]) -> _TopicInfo:
        info = _TopicInfo.of(topic, states)
        topics = dict(self._topics)
        topics[topic] = info
        self._topics = topics  # replaced, not mutated: other threads read it without a lock
        return info

    def _on_metadata(self) -> None:
        topics: dict[str, _TopicInfo] = {}
        for topic in self._topics:
            states = self._metadata.cached_partitions(topic)
            if states:
                topics[topic] = _TopicInfo.of(topic, states)
        self._topics = topics
        self._limits.on_metadata()
        self._sender.wakeup()

    # --- flush and the rest ---------------------------------------------------------------------

    async def flush(self, timeout_ms: int | None = None) -> None:
        """Send everything queued now and wait until each record is delivered or failed;
        KafkaTimeoutError after `timeout_ms` (None: no limit); IllegalStateError naming the crash
        if the sender crashed before or during it (its batches failed: nothing was flushed)."""
        self._check_crashed("flush")
        if not self._sender.started:
            return
        self._home.check()
        deadline_ms = None if timeout_ms is None else self._clock() + timeout_ms
        acc = self._accumulator
        acc.flushing += 1  # every batch is ready at once, also those appended meanwhile
        self._sender.wakeup()
        try:
            # Sends still waiting for metadata or memory are part of "everything sent so far";
            # their futures resolve on delivery, so waiting for them waits for their batches.
            waiting = [w.future for w in self._waiting]
            if waiting:
                remaining_s = (
                    None if deadline_ms is None else max(deadline_ms - self._clock(), 0) / 1000
                )
                _, not_done = await asyncio.wait(waiting, timeout=remaining_s)
                if not_done:
                    raise KafkaTimeoutError(
                        f"flush did not finish within {timeout_ms} ms: {len(not_done)} send(s) "
                        "still waiting for metadata or buffer memory"
                    )
            remaining = None if deadline_ms is None else max(deadline_ms - self._clock(), 0)
            await self._sender.flush(remaining, what=f"flush did not finish within {timeout_ms} ms")
        finally:
            acc.flushing -= 1
        self._check_crashed("flush")

    # --- transactions (a producer with transactional.id; `transactions`) ------------------------

    def _transactions(self, call: str) -> Transactions:
        self._check_open()
        if self._txn is None:
            raise TransactionStateError(
                f"{call}: this producer has no transactional.id (set it to use transactions)"
            )
        return self._txn

    def _txn_deadline(self) -> int:
        return self._clock() + self.config.max_block_ms

    async def init_transactions(self) -> None:
        """Register the transactional.id with its coordinator (Kafka's initTransactions):
        fences an earlier producer with the same id and completes or aborts what it left
        open. Call once, before the first transaction; waits up to max.block.ms."""
        txn = self._transactions("init_transactions")
        self._start()
        await txn.init_transactions(self._txn_deadline())

    def begin_transaction(self) -> None:
        """Start a transaction: sends and send_offsets_to_transaction belong to it until
        commit_transaction or abort_transaction."""
        self._transactions("begin_transaction").begin_transaction()

    async def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        group_metadata: ConsumerGroupMetadata | str,
    ) -> None:
        """Commit a consumer group's `offsets` as part of the transaction: they count only if
        it commits (consume-transform-produce). `group_metadata` is the consumer's
        `group_metadata()` (or a group id: then the coordinator checks no membership)."""
        txn = self._transactions("send_offsets_to_transaction")
        if isinstance(group_metadata, str):
            group_metadata = ConsumerGroupMetadata(group_metadata)
        if not isinstance(group_metadata, ConsumerGroupMetadata):
            raise TypeError(
                "group_metadata must be a consumer's group_metadata() or a group id, not "
                f"{type(group_metadata).__name__}"
            )
        checked = {}
        for tp, committed in offsets.items():
            if not isinstance(committed, OffsetAndMetadata):
                committed = OffsetAndMetadata(int(committed))
            if committed.offset < 0:
                raise ValueError(f"offset {committed.offset} for {tp}: offsets are >= 0")
            checked[TopicPartition(*tp)] = committed
        self._start()
        await txn.send_offsets_to_transaction(checked, group_metadata, self._txn_deadline())

    async def commit_transaction(self) -> None:
        """Send everything of the transaction and commit it: its records become visible to
        read_committed consumers, its offsets committed. A failure that left the transaction
        unable to commit raises the error: call abort_transaction then."""
        txn = self._transactions("commit_transaction")
        self._start()
        await txn.commit_transaction(self._txn_deadline(), self.flush)

    async def abort_transaction(self) -> None:
        """Abort the transaction: records not sent yet fail with TransactionAbortedError,
        those written are hidden from read_committed consumers, its offsets dropped."""
        txn = self._transactions("abort_transaction")
        self._start()
        await txn.abort_transaction(self._txn_deadline())

    async def partitions_for(self, topic: str) -> set[int]:
        """The partition numbers of `topic` (waits up to max.block.ms for metadata)."""
        self._check_open()
        self._start()  # the topic's limit is described in the producer's TaskGroup
        deadline_ms = self._clock() + self.config.max_block_ms
        states = await self._metadata.partitions_for(topic, deadline_ms=deadline_ms)
        self._remember(topic, states)
        await self._limits.ensure(topic, deadline_ms)  # as a first send would
        return {s.partition for s in states}

    def metrics(self) -> dict[str, int]:
        """Counters of what the producer did (Kafka's producer metrics, as counts)."""
        sender = self._sender.metrics
        idempotence = self._sender.idempotence
        return {
            "requests": sender.requests,
            "requests_in_flight": self._sender.in_flight_requests(),
            "batches_sent": sender.batches_sent,
            "records_sent": sender.records_sent,
            "bytes_sent": sender.bytes_sent,
            "records_delivered": sender.records_delivered,
            "batches_retried": sender.batches_retried,
            "batches_failed": sender.batches_failed,
            "batches_expired": sender.batches_expired,
            "batches_split": sender.batches_split,
            "metadata_refreshes": sender.metadata_refreshes,
            "producer_ids": sender.producer_ids,
            "sequence_resets": idempotence.resets if idempotence is not None else 0,
            "buffer_available_bytes": self._accumulator.available_memory,
            "buffer_total_bytes": self.config.buffer_memory,
            "waiting_sends": len(self._waiting),
        }


class _ThreadedProducer(Producer):
    """The blocking twin's engine (`Producer._for_threads`)."""

    _accumulator_type = ThreadSafeRecordAccumulator
