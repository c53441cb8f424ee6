"""Replica fetchers: one asyncio task per source broker, fetching for the partitions this
broker follows there (Kafka's `ReplicaFetcherManager` with `num.replica.fetchers` = 1).

Theory of operation: the replica manager decides everything (what to fetch, from which
offset, what a response means, when to back off); this module only moves its requests to the
leaders, over one ReplicaFetch gRPC stream per leader (`replica_fetch_stream`). The manager
task keeps one fetcher task per broker in `fetch_sources()`, starting and cancelling tasks as
that set changes (it re-reads it whenever the replica manager's `fetch_wakeup` is set, and once
a second). Each fetcher task loops:

    request = build_follower_fetch(source, now)     None: idle until fetch_wakeup or idle_poll_ms
    answer  = the next fetch on the source's ReplicaFetch stream
    process_follower_fetch(source, request, answer, now)   or, on any failure,
    follower_fetch_failed(source, request, now)            (the manager backs the partitions off)

Rules:
- The source's address comes from `addresses(broker_id)` (its registered endpoint in the
  current image) at every request, so a broker that re-registered elsewhere is followed there.
- One gRPC channel and one stream per source, which carries every fetch: the stream is opened
  when needed, and any failed fetch ends it and replaces the channel, so the next attempt
  dials afresh (below). An answer is waited for the request's `max_wait_ms` plus
  `request_timeout_ms` (`replica.socket.timeout.ms`), so a long poll is never cut short and a
  hung leader is noticed.
- The stream holds an incremental fetch session (KIP-227, `replication.fetch_session`):
  after its first request only changed partitions travel, and the answer holds only partitions
  with news (the replica manager builds whole requests, telling the client what changed since
  the previous one, so that only that is compared and encoded; the stream does the rest). A
  failed or replaced stream ends the session; the next one starts with a full fetch.
- Record bytes go from the response into the log append untouched (the codec never decodes
  them).
- A fetch that failed as a whole (no address, a leader unreachable or refusing the fetch, an
  answer that is not one: `MalformedResponseError`) is Kafka's
  `AbstractFetcherThread.processFetchRequest` catch: one WARNING per failure naming the
  leader, its address and what was wrong ("Error in response for fetch request"), then
  `follower_fetch_failed`, where the replica manager backs every partition of the
  request off for `replica.fetch.backoff.ms` (Kafka's `delayPartitions(..., fetchBackOffMs)`),
  so a leader that keeps failing costs one request and one warning per back-off, not per
  poll. The channel is dropped as well, as Kafka's
  `BrokerBlockingSender` closes the connection after any failed request: the next attempt
  dials afresh.
- After a failure the task also pauses `idle_poll_ms` itself, so a manager that has no backoff
  for some partition cannot turn a dead peer into a busy loop.
- A `KafkaStorageError` out of the replica manager goes to `on_storage_error` (the node
  stops) and ends every fetcher; any other exception is a bug: logged with its traceback, and
  treated as a failed fetch so that replication goes on for the others.
- `stop()` cancels every task and closes every stream and channel; a cancelled fetch is
  simply dropped (nothing was appended from it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Protocol

from replog.clock import Clock, monotonic_ms
from replog.errors import KafkaError, KafkaStorageError
from replog.replication.fetch_session import FetchChanges
from replog.replication.messages import FetchRequest, FetchResponse
from replog.server.data_plane.replica_fetch_stream import ReplicaFetchStream
from replog.server.runtime.node_tasks import Spawner

log = logging.getLogger("replog.server.fetcher")

# Kafka's replica.socket.timeout.ms.
REQUEST_TIMEOUT_MS_DEFAULT = 30_000
IDLE_POLL_MS_DEFAULT = 100
SOURCES_POLL_MS = 1000


class FollowerFetching(Protocol):
    """What the fetchers need of the replica manager (`replica_manager.ReplicaManager`)."""

    @property
    def fetch_wakeup(self) -> asyncio.Event: ...
    def fetch_sources(self) -> list[int]: ...
    def build_follower_fetch(self, source_broker_id: int, now_ms: int) -> FetchRequest | None: ...
    def follower_fetch_changes(self, source_broker_id: int) -> FetchChanges | None: ...
    def process_follower_fetch(
        self, source_broker_id: int, request: FetchRequest, response: FetchResponse, now_ms: int
    ) -> None: ...
    def follower_fetch_failed(
        self, source_broker_id: int, request: FetchRequest, now_ms: int
    ) -> None: ...


class FetchStream(Protocol):
    """One leader's fetches, one at a time (`ReplicaFetchStream`, its Rules)."""

    address: str

    async def fetch(
        self, request: FetchRequest, *, changes: FetchChanges | None = None
    ) -> FetchResponse: ...
    def failed(self) -> None: ...
    async def aclose(self) -> None: ...


class FetchStreams(Protocol):
    """Opens the fetch stream to broker `source_id` at `address`."""

    def __call__(self, address: str, source_id: int, *, request_timeout_ms: int) -> FetchStream: ...


async def wait_for_wakeup(event: asyncio.Event, timeout_ms: int) -> None:
    """Until `event` is set or `timeout_ms` passed. The caller cleared it and polled its state
    with no await in between, so a wakeup is never lost."""
    # asyncio.timeout, not wait_for: Python 3.11's wait_for drops a cancellation that arrives
    # as the event is set, and a fetcher told to stop would go on.
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout_ms / 1000):
            await event.wait()


class ReplicaFetcherManager:
    def __init__(
        self,
        replica_manager: FollowerFetching,
        addresses: Callable[[int], str | None],
        clock: Clock = monotonic_ms,
        *,
        tasks: Spawner,
        request_timeout_ms: int = REQUEST_TIMEOUT_MS_DEFAULT,
        idle_poll_ms: int = IDLE_POLL_MS_DEFAULT,
        on_storage_error: Callable[[KafkaStorageError], None] | None = None,
        streams: FetchStreams = ReplicaFetchStream,
    ) -> None:
        """`streams`: opens each leader's fetch stream (gRPC unless given: the simulator's
        network)."""
        self._streams = streams
        self._spawner = tasks  # its background tasks' owner (node_tasks)
        self._rm = replica_manager
        self._addresses = addresses
        self._clock = clock
        self._request_timeout_ms = request_timeout_ms
        self._idle_poll_ms = idle_poll_ms
        self._on_storage_error = on_storage_error
        self._fetchers: dict[int, asyncio.Task[None]] = {}
        self._task: asyncio.Task[None] | None = None
        self._failed = False
        self.fetches = 0  # answered Fetch calls, for tests and metrics
        self.failures = 0

    @property
    def sources(self) -> set[int]:
        """The brokers a fetcher task runs for now."""
        return {b for b, task in self._fetchers.items() if not task.done()}

    def start(self) -> None:
        if self._task is None:
            self._task = self._spawner.spawn(self._manage(), name="the replica fetcher manager")

    async def stop(self) -> None:
        tasks = [t for t in (self._task, *self._fetchers.values()) if t is not None]
        self._task = None
        self._fetchers.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # --- the manager task --------------------------------------------------------------------

    async def _manage(self) -> None:
        while not self._failed:
            # `fetch_wakeup`, not an event shared with the AlterPartition sender, whose wakes
            # this clear would swallow.
            self._rm.fetch_wakeup.clear()
            self._reconcile(set(self._rm.fetch_sources()))
            await wait_for_wakeup(self._rm.fetch_wakeup, SOURCES_POLL_MS)
        self._reconcile(set())

    def _reconcile(self, wanted: set[int]) -> None:
        for source, task in list(self._fetchers.items()):
            if source not in wanted:
                log.info("stopping the fetcher from broker %d", source)
                task.cancel()
                del self._fetchers[source]
            elif task.done():
                # Only a bug it did not catch ends it: said by the node's group (node_tasks),
                # which stops the node; until then another one fetches.
                del self._fetchers[source]
        for source in sorted(wanted - self._fetchers.keys()):
            log.info("starting the fetcher from broker %d", source)
            self._fetchers[source] = self._spawner.spawn(
                self._fetch_from(source), name=f"the replica fetcher from broker {source}"
            )

    # --- one fetcher task --------------------------------------------------------------------

    async def _fetch_from(self, source: int) -> None:
        fetches: FetchStream | None = None
        try:
            while not self._failed:
                self._rm.fetch_wakeup.clear()
                request = self._rm.build_follower_fetch(source, self._clock())
                if request is None:
                    await wait_for_wakeup(self._rm.fetch_wakeup, self._idle_poll_ms)
                    continue
                address = self._addresses(source)
                if address is None:
                    log.warning(
                        "fetch from leader broker %d failed: it has no known address; backing "
                        "off its partitions",
                        source,
                    )
                    self._failed_fetch(source, request)
                    await asyncio.sleep(self._idle_poll_ms / 1000)
                    continue
                if fetches is None or fetches.address != address:
                    if fetches is not None:
                        await fetches.aclose()
                    fetches = self._streams(
                        address, source, request_timeout_ms=self._request_timeout_ms
                    )
                try:
                    response = await fetches.fetch(
                        request, changes=self._rm.follower_fetch_changes(source)
                    )
                except KafkaError as exc:
                    # The leader unreachable or gone (NetworkError), its refusal (the Kafka
                    # error of its status), an answer that is not one (MalformedResponseError),
                    # or none in time (RequestTimedOutError).
                    self._request_failed(source, address, request, exc)
                    fetches.failed()
                    await asyncio.sleep(self._idle_poll_ms / 1000)
                    continue
                self.fetches += 1
                if not self._process(source, request, response):
                    await asyncio.sleep(self._idle_poll_ms / 1000)
        finally:
            if fetches is not None:
                await fetches.aclose()

    def _process(self, source: int, request: FetchRequest, response: FetchResponse) -> bool:
        try:
            self._rm.process_follower_fetch(source, request, response, self._clock())
        except KafkaStorageError as error:
            self._fatal(error)
            return False
        except Exception:
            log.exception("processing a fetch response from broker %d failed", source)
            self._failed_fetch(source, request)
            return False
        return True

    def _request_failed(
        self, source: int, address: str, request: FetchRequest, exc: BaseException
    ) -> None:
        """One warning for a fetch that failed as a whole, then its partitions back off
        (module docstring)."""
        log.warning(
            "fetch from leader broker %d at %s failed: %s; backing off its %d partition(s)",
            source,
            address,
            _cause(exc),
            len(request.partitions),
        )
        self._failed_fetch(source, request)

    def _failed_fetch(self, source: int, request: FetchRequest) -> None:
        self.failures += 1
        try:
            self._rm.follower_fetch_failed(source, request, self._clock())
        except KafkaStorageError as error:
            self._fatal(error)

    def _fatal(self, error: KafkaStorageError) -> None:
        log.critical("replica fetchers stop on a storage error: %s", error)
        self._failed = True
        self._rm.fetch_wakeup.set()  # the manager task sees `_failed` and cancels the others
        if self._on_storage_error is not None:
            self._on_storage_error(error)


def _cause(exc: BaseException) -> str:
    """What was wrong, in a few words: a typed error's own message (it names the leader, and a
    failed call's status and details)."""
    return f"{type(exc).__name__}: {exc}"
