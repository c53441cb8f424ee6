"""The blocking `Consumer` (`from replog import Consumer`): the asyncio consumer on a private loop.

Usage::

    with Consumer("events", bootstrap_servers="127.0.0.1:9092", group_id="billing") as consumer:
        for record in consumer:
            handle(record)

Same methods and semantics as `replog.client.consumer.Consumer` (read its docstring), without
`await`. The engine runs on a `LoopThread` owned by this consumer; every call hands its work to
that loop and waits for it. Each method is declared once from its asyncio twin
(`replog.client.twin`).

Rules:
- Every blocking call is bounded: `poll` by its `timeout_ms`, the network calls by their
  `timeout_ms` (default `default.api.timeout.ms`), iteration by `consumer.timeout.ms` (default:
  forever, in 1 s polls). Ctrl-C in the waiting thread interrupts any of them within 0.1 s.
- `wakeup()` and `close()` are safe from any thread: a poll blocked in another thread returns
  (empty) at once, and a `for` loop over the consumer ends.
- `commit_async` returns a `concurrent.futures.Future`; its callback runs on the consumer's
  loop thread, so it must not call blocking methods of this consumer.
- Rebalance callbacks (`subscribe(topics, listener=...)`) run in the thread that waits in
  `poll` (or in iteration, or `close`), as Kafka's do: they may call this consumer's blocking
  methods (commit in `on_partitions_revoked`, seek in `on_partitions_assigned`).
- Iteration hands out records from a local buffer without a thread hop per record; records
  still in that buffer are not committed (see the asyncio consumer).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping
from typing import Any, Literal, TypeVar, overload

from replog.client.config import ConsumerConfig
from replog.client.consumer import CommitCallback
from replog.client.consumer import Consumer as AioConsumer
from replog.client.loop_thread import LoopThread, checked_wait
from replog.client.records import (
    ConsumerRecord,
    OffsetAndMetadata,
    TopicPartition,
)
from replog.client.twin import awaited, on_loop
from replog.clock import Clock, monotonic_ms
from replog.errors import ClientClosedError, InvalidGroupIdError

T = TypeVar("T")

SAFETY_MARGIN_MS = 5_000  # the loop wait outlasts the engine's own deadline by this much


def _dict_or_none(offsets: Any) -> Any:
    return None if offsets is None else dict(offsets)


def _drained(values: Any) -> Any:
    """`values` for the asyncio consumer, which checks them: an iterator drained here, on the
    caller's thread; a string, mapping or tuple (a single TopicPartition included) or anything
    not iterable passed as it is, to be refused there rather than iterated here."""
    if isinstance(values, str | bytes | Mapping | tuple) or not isinstance(values, Iterable):
        return values
    return list(values)


class Consumer:
    """The blocking consumer (module docstring)."""

    def __init__(
        self,
        *topics: str,
        config: Mapping[str, object] | ConsumerConfig | None = None,
        clock: Clock = monotonic_ms,
        **kwargs: object,
    ) -> None:
        """`clock`: as the asyncio consumer's."""
        # Built first: a bad config fails here, before any thread is started.
        self._aio = AioConsumer(*topics, config=config, clock=clock, **kwargs)
        self.config = self._aio.config
        self._loop = LoopThread(f"replog-consumer-{self.config.client_id}")
        self._aio.listener_runner = self._run_in_caller
        self._close_lock = threading.Lock()
        self._closed = False

    # --- plumbing -------------------------------------------------------------------------------

    def _check_open(self, what: str) -> None:
        if self._closed:
            raise ClientClosedError(f"{what}: the consumer is closed")

    def _run(self, coro: Coroutine[Any, Any, T], what: str, timeout_ms: int | None) -> T:
        """Run `coro` on the loop within `timeout_ms` (None: `default.api.timeout.ms`) and a
        margin: the engine bounds its own calls and names the cause."""
        if self._closed:
            coro.close()
            raise ClientClosedError(f"{what}: the consumer is closed")
        try:
            checked_wait(what, "timeout_ms", timeout_ms)
        except ValueError:
            coro.close()
            raise
        timeout_s = (self._api_timeout(timeout_ms) + SAFETY_MARGIN_MS) / 1000
        return self._loop.run(coro, timeout_s=timeout_s, what=what)

    def _call(self, what: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """A local-state method, run on the loop so it never races the engine."""

        async def call() -> T:
            return fn(*args, **kwargs)

        return self._run(call(), what, None)

    async def _run_in_caller(
        self, callback: Callable[[set[TopicPartition]], Any], partitions: set[TopicPartition]
    ) -> None:
        """A rebalance callback, run in the thread waiting on the loop (module docstring)."""
        await asyncio.wrap_future(self._loop.call_in_waiter(callback, partitions))

    def _api_timeout(self, timeout_ms: float | None) -> float:
        return self.config.default_api_timeout_ms if timeout_ms is None else timeout_ms

    # Each asyncio method, run on the loop thread (`twin`): an iterator argument is drained in
    # the caller's thread first.
    assign = on_loop(AioConsumer.assign, convert={"partitions": _drained})
    assignment = on_loop(AioConsumer.assignment)
    group_metadata = on_loop(AioConsumer.group_metadata)
    subscribe = on_loop(AioConsumer.subscribe, convert={"topics": _drained})
    unsubscribe = on_loop(AioConsumer.unsubscribe)
    subscription = on_loop(AioConsumer.subscription)
    poll = awaited(AioConsumer.poll)
    seek = on_loop(AioConsumer.seek)
    seek_to_beginning = on_loop(AioConsumer.seek_to_beginning)
    seek_to_end = on_loop(AioConsumer.seek_to_end)
    position = awaited(AioConsumer.position)
    highwater = on_loop(AioConsumer.highwater)
    pause = on_loop(AioConsumer.pause)
    resume = on_loop(AioConsumer.resume)
    paused = on_loop(AioConsumer.paused)
    offsets_for_times = awaited(AioConsumer.offsets_for_times, convert={"timestamps": dict})
    partitions_for_topic = awaited(AioConsumer.partitions_for_topic)
    topics = awaited(AioConsumer.topics)
    beginning_offsets = awaited(AioConsumer.beginning_offsets, convert={"partitions": list})
    end_offsets = awaited(AioConsumer.end_offsets, convert={"partitions": list})
    commit = awaited(AioConsumer.commit, convert={"offsets": _dict_or_none})

    # --- iteration and wakeup -------------------------------------------------------------------

    def __iter__(self) -> Iterator[ConsumerRecord]:
        return self

    def __next__(self) -> ConsumerRecord:
        record = self._aio.iteration_buffer.pop()
        if record is not None:
            return record
        if self._closed:
            raise StopIteration
        # Bounded by consumer.timeout.ms (or forever by design); Ctrl-C still interrupts.
        record = self._loop.run(self._aio.next_record(), timeout_s=None, what="iteration")
        if record is None:
            raise StopIteration
        return record

    def wakeup(self) -> None:
        """Make a poll blocked in another thread (or the next poll) return at once."""
        if not self._closed:
            with contextlib.suppress(ClientClosedError):
                self._loop.call_soon(self._aio.wakeup)

    # --- committed offsets ----------------------------------------------------------------------

    @overload
    def committed(
        self,
        partition: TopicPartition,
        timeout_ms: int | None = None,
        *,
        metadata: Literal[False] = False,
    ) -> int | None: ...

    @overload
    def committed(
        self, partition: TopicPartition, timeout_ms: int | None = None, *, metadata: Literal[True]
    ) -> OffsetAndMetadata | None: ...

    def committed(
        self, partition: TopicPartition, timeout_ms: int | None = None, *, metadata: bool = False
    ) -> int | OffsetAndMetadata | None:
        if metadata:
            return self._run(
                self._aio.committed(partition, timeout_ms, metadata=True), "committed", timeout_ms
            )
        return self._run(self._aio.committed(partition, timeout_ms), "committed", timeout_ms)

    def commit_async(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
        callback: CommitCallback | None = None,
    ) -> concurrent.futures.Future[None]:
        """Start a commit; the future completes when it is done (callback: module docstring)."""
        self._check_open("commit_async")
        if self.config.group_id is None:
            raise InvalidGroupIdError("commit_async() needs a group.id: this consumer has none")
        chosen = None if offsets is None else dict(offsets)

        async def commit() -> None:
            await self._aio.commit_async(chosen, callback)

        return self._loop.submit(commit())

    # --- closing --------------------------------------------------------------------------------

    def close(self, autocommit: bool = True, timeout_ms: int | None = None) -> None:
        """Commit what was consumed (auto-commit on), release connections, stop the loop thread.

        Safe from any thread and idempotent; a poll blocked in another thread returns."""
        with self._close_lock:
            if self._closed:
                return
            try:
                self._loop.call_soon(self._aio.wakeup)
                self._loop.run(
                    self._aio.close(autocommit, timeout_ms),
                    timeout_s=(self._api_timeout(timeout_ms) + SAFETY_MARGIN_MS) / 1000,
                    what="close",
                )
            finally:
                self._closed = True
                self._loop.close()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
