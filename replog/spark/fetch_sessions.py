"""A Python worker's fetch sessions, kept from one Spark task for the next.

A task's fetches need a loop thread, the cluster's metadata and a connection to the leader's
Kafka listener (`partition_fetcher`).
Opening them costs a task about 4 ms of worker CPU and 7-9 ms before its first answer, and
closing them 1-2 ms more; PySpark reuses its Python workers (`spark.python.worker.reuse`, on by
default), so a worker running task after task would open and close the same ones each time.
Spark's own Kafka source keeps its consumers per executor for the same reason
(`spark.kafka.consumer.cache.capacity`, `spark.kafka.consumer.cache.timeout`); this is the same
for the Python source: a worker keeps the session of a task that read its whole range for the
next task with the same consumer settings. The planning worker keeps its `Admin` the same way
(`cluster_view`), in the same pool under a key of its own.

Rules:
- A session is kept only after a task that read its whole range with no fetch in flight
  (`PartitionFetcher.close(keep=True)`); a task that failed, or that Spark stopped early,
  closes its session.
- At most `CAPACITY` sessions per process (the oldest closed beyond it), each for at most
  `IDLE_TIMEOUT_S` after its task ended: a thread of the pool closes it then, and `take`
  never hands out one older than that.
- A taken session is used by one task at a time (it is out of the pool while used); its
  metadata is asked again before its first fetch (`FetchSession.begin_task`), so a task finds
  the partition's current leader as a fresh session would. Inside it, a connection that
  failed or that the leader closed is never used again (`leader_fetch`).
- The pool belongs to the process that made it: a child forked from a worker (PySpark's
  daemon forks its workers) never uses or closes its parent's sessions (their loop threads do
  not exist in the child, their sockets are the parent's); it makes its own pool.
- The pool is closed at the process's normal exit; a worker ended with `os._exit` (as
  PySpark ends its workers) leaves its sockets to the kernel, which closes them.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
import time
from collections.abc import Callable, Hashable, Mapping
from typing import Protocol, TypeVar, cast

from replog.client.cluster_metadata import ClusterMetadata
from replog.client.config import ConsumerConfig
from replog.client.loop_thread import LoopThread
from replog.client.tls_connection import client_ssl_context
from replog.errors import ReplogError
from replog.spark.leader_fetch import LeaderFetches

CAPACITY = 4  # sessions a worker keeps (one per set of consumer settings it reads with)
IDLE_TIMEOUT_S = 60.0  # PySpark ends a Python worker idle this long, too
CLOSE_TIMEOUT_S = 5.0
# How long a connection to a leader may take to open, its ApiVersions answer included (Kafka's
# socket.connection.setup.timeout.ms default).
SETUP_TIMEOUT_MS = 10_000


class Session(Protocol):
    """What the pool keeps: a fetch session, or the planning worker's Admin (`cluster_view`)."""

    @property
    def usable(self) -> bool: ...

    def close(self) -> None: ...


S = TypeVar("S", bound=Session)
_Kept = tuple[Hashable, Session, float]  # (key, session, kept since: the pool's clock)


class FetchSession:
    """One worker's clients for fetching with one set of consumer settings (module docstring):
    a loop thread, and on it the cluster metadata and the fetches' Kafka connections."""

    def __init__(self, config: ConsumerConfig) -> None:
        self.config = config
        self.loop = LoopThread("replog-spark-fetch")
        self.metadata, self.fetches = self.loop.run(self._open(), timeout_s=None, what="open")
        self._tasks = 0

    async def _open(self) -> tuple[ClusterMetadata, LeaderFetches]:
        # Built on the loop: their connections belong to that loop.
        config = self.config
        fetches = LeaderFetches(
            client_id=config.client_id,
            setup_timeout_ms=SETUP_TIMEOUT_MS,
            tls=client_ssl_context(config),
            sasl=config.sasl,
        )
        return ClusterMetadata.for_client(config), fetches

    @property
    def usable(self) -> bool:
        return not self.loop.closed

    def begin_task(self) -> None:
        """A task starts on this session: a kept session asks the metadata again first (on
        the loop, before anything the task submits there)."""
        self._tasks += 1
        if self._tasks > 1:
            self.loop.loop.call_soon_threadsafe(self.metadata.request_update)

    def close(self) -> None:
        try:
            self.loop.run(self._close(), timeout_s=CLOSE_TIMEOUT_S, what="close")
        except ReplogError:
            pass
        finally:
            self.loop.close()

    async def _close(self) -> None:
        try:
            await self.fetches.close()
        finally:
            await self.metadata.close()


class SessionPool:
    """Sessions kept per key, at most `capacity`, each for `idle_timeout_s` (module
    docstring)."""

    def __init__(
        self,
        capacity: int = CAPACITY,
        idle_timeout_s: float = IDLE_TIMEOUT_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.capacity = capacity
        self.idle_timeout_s = idle_timeout_s
        self.pid = os.getpid()
        self._clock = clock
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._idle: list[_Kept] = []  # oldest first
        self._closed = False
        self._reaper: threading.Thread | None = None

    def take(self, key: Hashable, open_session: Callable[[], S]) -> S:
        """A kept session for `key` (out of the pool until given back), else a new one."""
        stale: list[Session] = []
        found: Session | None = None
        with self._lock:
            self._expired(stale)
            for i, (kept_key, session, _) in enumerate(self._idle):
                if kept_key == key:
                    del self._idle[i]
                    if session.usable:
                        found = session
                    else:
                        stale.append(session)
                    break
        _close_all(stale)
        # The key says what a session is: the one found is what `open_session` makes.
        return open_session() if found is None else cast(S, found)

    def give_back(self, key: Hashable, session: Session) -> None:
        """Keep `session` for the next `take(key)` (module docstring); closed instead when it
        is not usable, the pool is closed or belongs to another process."""
        if os.getpid() != self.pid:
            return  # a forked child's copy of its parent's session: never touched
        stale: list[Session] = []
        with self._lock:
            if self._closed or not session.usable:
                stale.append(session)
            else:
                self._idle.append((key, session, self._clock()))
                while len(self._idle) > self.capacity:
                    stale.append(self._idle.pop(0)[1])
                self._start_reaper()
                self._changed.notify_all()
        _close_all(stale)

    def kept(self) -> int:
        with self._lock:
            return len(self._idle)

    def close(self) -> None:
        """Close every kept session; later ones given back are closed at once."""
        if os.getpid() != self.pid:
            return
        with self._lock:
            self._closed = True
            stale = [session for _, session, _ in self._idle]
            self._idle.clear()
            self._changed.notify_all()
        _close_all(stale)

    def _expired(self, into: list[Session]) -> None:
        """Move the sessions kept longer than the idle timeout into `into` (lock held)."""
        now = self._clock()
        keep = [e for e in self._idle if now - e[2] < self.idle_timeout_s]
        if len(keep) != len(self._idle):
            into.extend(e[1] for e in self._idle if now - e[2] >= self.idle_timeout_s)
            self._idle = keep

    def _start_reaper(self) -> None:
        if self._reaper is None or not self._reaper.is_alive():
            self._reaper = threading.Thread(
                target=self._reap, name="replog-spark-session-reaper", daemon=True
            )
            self._reaper.start()

    def _reap(self) -> None:
        """The pool's thread: closes each session when its idle timeout passes."""
        while True:
            stale: list[Session] = []
            with self._lock:
                self._expired(stale)
                if not stale:
                    if self._closed or not self._idle:
                        self._reaper = None
                        return
                    oldest = self._idle[0][2]
                    wait = max(0.0, oldest + self.idle_timeout_s - self._clock())
                    self._changed.wait(timeout=wait + 0.01)
                    continue
            _close_all(stale)


def _close_all(sessions: list[Session]) -> None:
    for session in sessions:
        # One session's failure must not keep the others open.
        with contextlib.suppress(Exception):
            session.close()


_pool: SessionPool | None = None
_pool_lock = threading.Lock()


def worker_sessions() -> SessionPool:
    """This process's pool (module docstring): made at first use, and again in a forked child."""
    global _pool
    with _pool_lock:
        if _pool is None or _pool.pid != os.getpid():
            _pool = SessionPool()
            atexit.register(_pool.close)
        return _pool


def _forget_after_fork() -> None:
    """In a forked child: the parent's pool and its lock are left as they are, never used."""
    global _pool, _pool_lock
    _pool = None
    _pool_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)


def settings_key(settings: Mapping[str, object]) -> tuple[tuple[str, str], ...]:
    """The pool key of a task's consumer settings: sessions are shared only by equal ones."""
    return tuple(sorted((str(k), str(v)) for k, v in settings.items()))
