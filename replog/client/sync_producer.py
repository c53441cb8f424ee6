"""The blocking `Producer` (``from replog import Producer``): kafka-python's shape on the
asyncio engine of `replog.client.producer`, run on a private event loop in a daemon thread.

Usage::

    with Producer(bootstrap_servers="127.0.0.1:9092", linger_ms=5) as producer:
        future = producer.send("events", b"payload", key=b"user-1")
        metadata = future.get(timeout=10)          # RecordMetadata(topic, partition, offset, ...)
        producer.send("events", b"x").add_callback(print).add_errback(log_failure)
        producer.flush()

Rules:
- `send` returns a `FutureRecordMetadata` (`get(timeout)`, `add_callback`, `add_errback`,
  `succeeded()`, `failed()`, `exception`, `is_done`). It raises at once for bad input (as the
  asyncio `send_nowait` does), and blocks up to `max.block.ms` for what it needs from the
  cluster: the topic's metadata (an unknown topic raises UnknownTopicOrPartitionError as soon
  as a broker says so; a missing partition raises it naming the count) and room in
  `buffer.memory` (backpressure). Running out of `max.block.ms` raises KafkaTimeoutError
  naming which of the two it waited for.
- Hot path: when the topic's partitions are known and the buffer has room, `send` appends in
  the calling thread under the accumulator's lock and wakes the sender only when it started a
  new batch: no round trip to the loop thread per record. The engine does it
  (`Producer._append_from_thread`); the other methods are forwarded as `replog.client.twin`
  declares them, as the blocking Consumer's and Admin's are.
- Every blocking wait runs in slices of at most 0.1 s, so Ctrl-C interrupts `send`, `get`,
  `flush` and `close` (KeyboardInterrupt; what ran on the loop on the caller's behalf is
  cancelled). Every one of them has a timeout.
- Callbacks and errbacks run on the producer's loop thread, in the order added, once the
  record is done; added to a future that is already done, they run at once in the caller's
  thread. They must not block: a blocking call of this producer from a callback raises
  IllegalStateError (it would wait for itself), except `close`, which then closes without
  waiting and ends the loop thread once the engine is closed. An exception in a callback is
  logged and does not affect the others.
- `flush(timeout)` and `close(timeout)` take seconds, like kafka-python (None: no limit);
  `close` is idempotent, and the context manager closes. A `close` after one from a callback
  waits (up to its timeout) until that one has ended the loop thread.
- A producer never closed is closed without waiting when the interpreter exits (as
  kafka-python's is); records it had not delivered by then are lost, so a WARNING says how
  many ("call flush() or close() before exiting") rather than lose them silently.
- A `send` that started before `close` (another thread) and appends after it raises
  ClientClosedError (the accumulator refuses appends once the sender gave up its queue): it
  never returns a future that nothing will complete. After the sender crashed (a bug),
  `send` and `flush` raise IllegalStateError naming the crash.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import os
import threading
import weakref
from collections.abc import Callable, Coroutine, Iterable, Mapping
from functools import partial
from typing import Any, TypeVar

from replog.client.accumulator import ProducerBatch
from replog.client.config import ProducerConfig
from replog.client.loop_thread import EXIT_CLOSE_S, WAIT_SLICE_S, LoopThread, checked_wait
from replog.client.producer import Producer as AsyncProducer
from replog.client.records import RecordMetadata
from replog.client.twin import awaited, in_caller, on_loop
from replog.clock import Clock, monotonic_ms
from replog.errors import ClientClosedError, KafkaTimeoutError

__all__ = ["FutureRecordMetadata", "Producer"]

log = logging.getLogger("replog.client")

T = TypeVar("T")

Callback = Callable[..., object]


class _OnFailure:
    """An errback in a future's list: run only when the record failed."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callback) -> None:
        self.fn = fn


class _OnEither:
    """A callable added with `add_both`: run whatever the outcome."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callback) -> None:
        self.fn = fn


# What a future's first added callable runs on (`FutureRecordMetadata._first`), 0 for none.
_ON_SUCCESS, _ON_FAILURE, _ON_EITHER = 1, 2, 3
# The first callable of each future that has one and has not run it, by what it runs on:
# here rather than in a list of the future's own, which would be an object more per record
# (`FutureRecordMetadata`), and popped from here by whichever thread runs it (`dict.pop` is
# atomic). Every future with an entry is settled (the producer completes or fails each
# record it accepted), and settling pops it.
_FIRST: tuple[dict[FutureRecordMetadata, Callback], ...] = ({}, {}, {}, {})
_ADDING = threading.Lock()  # threads adding to one future take turns (which one is first)


class FutureRecordMetadata:
    """The outcome of one `send`: kafka-python's `FutureRecordMetadata` (module docstring).

    Few objects per record: a producer holds every undelivered record's future, and each
    object a record keeps alive while it waits is walked by every collection of the cyclic
    garbage collector meanwhile (at 1 KiB records, a third of the sending thread's time went
    to collections with a future, two lists and a tuple per record). So a future with one
    callable added (the common case: a callback, an errback or `add_both`'s) is one object,
    its callable kept in `_FIRST`; the second one added makes a list for the rest, errbacks
    and `add_both`'s wrapped in a small marker each (`functools.partial` only when a callable
    takes arguments)."""

    __slots__ = ("_batch", "_exception", "_first", "_more", "_value", "is_done", "topic")

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.is_done = False
        self._value: RecordMetadata | None = None
        self._exception: BaseException | None = None
        self._batch: ProducerBatch | None = None
        # Added and not yet run, oldest first: the first one in `_FIRST[self._first]`, then
        # the rest in `_more`. No lock to run them: `dict.pop`, `list.append` and `list.pop`
        # are atomic, and each side looks at `is_done` after its own step (`_add`, `set_*`),
        # so every callable is popped, and run or skipped, by exactly one thread (a lock per
        # future would be contended by the loop thread settling a batch's futures while the
        # sending thread adds callbacks). Adding takes one lock (`_ADDING`), so that threads
        # adding to one future at once keep every callable, in order.
        self._first = 0
        self._more: list[Callback | _OnFailure | _OnEither] | None = None

    # --- the accumulator's side (RecordHandle), on the loop thread --------------------------

    def done(self) -> bool:
        return self.is_done

    def set_result(self, result: RecordMetadata, /) -> None:
        if self.is_done:
            return
        self._value = result
        self.is_done = True  # after the outcome: a thread that sees it reads the outcome
        if self._first:
            self._run_added()

    def set_exception(self, exception: BaseException, /) -> None:
        if self.is_done:
            return
        self._exception = exception
        self.is_done = True
        if self._first:
            self._run_added()

    def _run_added(self) -> None:
        """Run what was added so far and fits the outcome, oldest first, each callable popped
        (and so run or skipped) by one thread only."""
        failed = self._exception is not None
        outcome = self._exception if failed else self._value
        kind = self._first
        fn = _FIRST[kind].pop(self, None)
        if fn is not None and kind != (_ON_SUCCESS if failed else _ON_FAILURE):
            self._call(fn, outcome, kind)
        more = self._more
        while more:
            try:
                entry = more.pop(0)
            except IndexError:  # another thread popped the last one
                return
            entry_type = type(entry)
            if entry_type is _OnFailure:
                if failed:
                    self._call(entry.fn, outcome, _ON_FAILURE)  # type: ignore[union-attr]
            elif entry_type is _OnEither:
                self._call(entry.fn, outcome, _ON_EITHER)  # type: ignore[union-attr]
            elif not failed:
                self._call(entry, outcome, _ON_SUCCESS)  # type: ignore[arg-type]

    def _call(self, fn: Callback, outcome: object, kind: int) -> None:
        try:
            fn(outcome)
        except Exception:
            what = "errback" if kind == _ON_FAILURE else "callback"
            log.exception("a producer %s for topic %r raised", what, self.topic)

    def _add(self, kind: int, fn: Callback) -> FutureRecordMetadata:
        with _ADDING:
            if not self._first:
                _FIRST[kind][self] = fn
                self._first = kind  # after the entry: a thread that sees it finds the entry
            else:
                more = self._more
                if more is None:
                    more = self._more = []
                if kind == _ON_SUCCESS:
                    more.append(fn)
                else:
                    more.append(_OnFailure(fn) if kind == _ON_FAILURE else _OnEither(fn))
        if self.is_done:  # settled: whoever pops it runs it
            self._run_added()
        return self

    # --- the user's side ----------------------------------------------------------------------

    @property
    def value(self) -> RecordMetadata | None:
        return self._value

    @property
    def exception(self) -> BaseException | None:
        return self._exception

    def succeeded(self) -> bool:
        return self.is_done and self._exception is None

    def failed(self) -> bool:
        return self.is_done and self._exception is not None

    def add_callback(self, fn: Callback, *args: Any, **kwargs: Any) -> FutureRecordMetadata:
        """Call ``fn(*args, record_metadata, **kwargs)`` on success."""
        return self._add(_ON_SUCCESS, partial(fn, *args, **kwargs) if args or kwargs else fn)

    def add_errback(self, fn: Callback, *args: Any, **kwargs: Any) -> FutureRecordMetadata:
        """Call ``fn(*args, exception, **kwargs)`` on failure."""
        return self._add(_ON_FAILURE, partial(fn, *args, **kwargs) if args or kwargs else fn)

    def add_both(self, fn: Callback, *args: Any, **kwargs: Any) -> FutureRecordMetadata:
        """Call ``fn(*args, record_metadata_or_exception, **kwargs)`` once the record is done,
        whatever the outcome (kafka-python's: a callback and an errback in one)."""
        return self._add(_ON_EITHER, partial(fn, *args, **kwargs) if args or kwargs else fn)

    def get(self, timeout: float | None = None) -> RecordMetadata:
        """The record's metadata once delivered; raises its error if it failed, and
        KafkaTimeoutError if `timeout` seconds pass first (None: wait until it is done, which
        delivery.timeout.ms bounds)."""
        if not self.is_done:
            self._wait(timeout)
        if self._exception is not None:
            raise self._exception
        assert self._value is not None
        return self._value

    def _wait(self, timeout: float | None) -> None:
        batch = self._batch
        event = batch.done_event if batch is not None else None
        deadline_ms = None if timeout is None else monotonic_ms() + int(timeout * 1000)
        while not self.is_done:
            slice_s = WAIT_SLICE_S
            if deadline_ms is not None:
                remaining_ms = deadline_ms - monotonic_ms()
                if remaining_ms <= 0:
                    raise KafkaTimeoutError(
                        f"the record to topic {self.topic!r} was not delivered within "
                        f"get(timeout={timeout}) (it may still be)"
                    )
                slice_s = min(slice_s, remaining_ms / 1000)
            if event is not None:
                event.wait(slice_s)
            else:  # not attached to a batch (only possible before send returned)
                threading.Event().wait(slice_s)


class Producer:
    """A blocking Kafka-style producer (module docstring)."""

    def __init__(
        self,
        config: Mapping[str, object] | ProducerConfig | None = None,
        *,
        clock: Clock = monotonic_ms,
        **kwargs: object,
    ) -> None:
        """`clock`: as the asyncio producer's."""
        self._aio = engine = AsyncProducer._for_threads(config, clock=clock, **kwargs)
        self.config = engine.config
        self._closed = False
        self._close_lock = threading.Lock()
        self._closed_in_callback: threading.Event | None = None  # set once that close is done
        self._close_task: asyncio.Task[None] | None = None  # held: the loop keeps weak references
        self._loop = LoopThread(f"replog-producer-{engine.config.client_id}")
        try:
            self._loop.run(engine.start(), timeout_s=None, what="starting the producer")
        except BaseException:
            self._loop.close()
            raise
        engine._serve_threads()
        # `send`'s per-call arguments, bound once rather than per record.
        self._append = engine._append_from_thread
        self._run_on_loop = self._run_topic_info
        self._check_still_open = self._check_open
        # Registered after the loop thread's own hook, so it runs first (atexit is LIFO).
        self._at_exit = _close_at_exit(engine, self._loop, engine.config.client_id)
        atexit.register(self._at_exit)

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError("the producer is closed: create a new one to send")

    def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: Iterable[tuple[str, Any]] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> FutureRecordMetadata:
        """Queue one record (module docstring); the future tells when it is delivered."""
        if self._closed:
            self._check_open()
        future = FutureRecordMetadata(topic)
        future._batch = self._append(
            topic,
            value,
            key,
            headers,
            partition,
            timestamp_ms,
            future,
            run_on_loop=self._run_on_loop,
            check_open=self._check_still_open,
        )
        return future

    def _run_topic_info(self, coro: Coroutine[Any, Any, T], what: str) -> T:
        """The slow send's wait for metadata, on the loop; max.block.ms bounds it."""
        return self._loop.run(coro, timeout_s=None, what=what)

    def _run(self, coro: Coroutine[Any, Any, T], what: str, timeout_ms: int | None) -> T:
        """Run `coro` on the loop; the engine bounds it (max.block.ms)."""
        if self._closed:
            coro.close()
            self._check_open()
        return self._loop.run(coro, timeout_s=None, what=what)

    def _call(self, what: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """A local-state method (begin_transaction), run on the loop so it never races the
        engine."""

        async def call() -> T:
            return fn(*args, **kwargs)

        return self._run(call(), what, None)

    def flush(self, timeout: float | None = None) -> None:
        """Send everything queued now and wait until each record is delivered or failed;
        KafkaTimeoutError after `timeout` seconds (None: no limit)."""
        self._check_open()
        seconds = checked_wait("flush", "timeout", timeout)
        timeout_ms = None if seconds is None else int(seconds * 1000)
        self._loop.run(self._aio.flush(timeout_ms), timeout_s=None, what="flush")

    def close(self, timeout: float | None = None) -> None:
        """Deliver what is queued within `timeout` seconds (None: no limit), fail the rest,
        stop the loop thread. Idempotent."""
        in_loop = self._loop.in_loop_thread()
        with self._close_lock:
            first = not self._closed
            self._closed = True
            if first and in_loop:
                self._closed_in_callback = threading.Event()
            closed_in_callback = self._closed_in_callback
        atexit.unregister(self._at_exit)
        if not first:
            if closed_in_callback is not None and not in_loop:
                self._wait_closed_in_callback(closed_in_callback, timeout)
            return
        if closed_in_callback is not None:
            # From a callback: waiting would wait for ourselves. Close without waiting; the
            # task then stops the loop (LoopThread.close from its own thread only stops it),
            # which ends the thread.
            self._close_task = self._loop.loop.create_task(
                self._close_from_callback(closed_in_callback)
            )
            return
        timeout_ms = None if timeout is None else int(timeout * 1000)
        try:
            self._loop.run(self._aio.close(timeout_ms), timeout_s=None, what="close")
        finally:
            self._loop.close()

    async def _close_from_callback(self, done: threading.Event) -> None:
        try:
            await self._aio.close(0)
        finally:
            self._loop.close()
            done.set()

    def _wait_closed_in_callback(self, done: threading.Event, timeout: float | None) -> None:
        """Wait in slices (Ctrl-C) until the close a callback started has stopped the loop,
        then join its thread."""
        deadline_ms = None if timeout is None else monotonic_ms() + int(timeout * 1000)
        while not done.wait(WAIT_SLICE_S):
            if deadline_ms is not None and monotonic_ms() >= deadline_ms:
                return
        self._loop.close()  # already told to stop: this joins the thread

    @property
    def closed(self) -> bool:
        return self._closed

    # The asyncio methods a blocking producer forwards as they are (`twin`).
    partitions_for = awaited(AsyncProducer.partitions_for)
    init_transactions = awaited(AsyncProducer.init_transactions)
    begin_transaction = on_loop(AsyncProducer.begin_transaction)
    send_offsets_to_transaction = awaited(AsyncProducer.send_offsets_to_transaction)
    commit_transaction = awaited(AsyncProducer.commit_transaction)
    abort_transaction = awaited(AsyncProducer.abort_transaction)
    metrics = in_caller(AsyncProducer.metrics)


def _close_at_exit(engine: AsyncProducer, loop: LoopThread, client_id: str) -> Callable[[], None]:
    """The exit hook of one producer (module docstring): if its engine is still open, say what
    it had not delivered and close it without waiting for deliveries. It holds the engine and
    the loop thread weakly, not the producer: a producer made in a function and never closed
    is collected when the function returns, while its engine runs on (its tasks hold it), and
    its undelivered records must still be reported. A forked child does nothing: the loop
    thread is its parent's, and waiting for it would hang the child's exit."""
    engine_ref, loop_ref = weakref.ref(engine), weakref.ref(loop)
    owner = os.getpid()

    def close() -> None:
        engine, thread = engine_ref(), loop_ref()
        if os.getpid() != owner or engine is None or thread is None:
            return
        if engine.closed or thread.closed:
            return
        undelivered = engine.undelivered()
        if undelivered:
            log.warning(
                "a replog.Producer (client.id %r) was never closed: the interpreter exits with "
                "%d record(s) it had not delivered, which are lost; call flush() or close() "
                "before exiting",
                client_id,
                undelivered,
            )
        with contextlib.suppress(Exception):  # exiting anyway: the loop's own hook follows
            thread.run(engine.close(0), timeout_s=EXIT_CLOSE_S, what="closing at exit")

    return close
