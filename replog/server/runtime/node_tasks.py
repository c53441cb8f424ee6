"""The node's one `asyncio.TaskGroup`, and what ends the node's run.

Rules:
- Every background task of a node runs in its group: the Raft driver, the stall monitor, the
  Kafka listeners' start, and each task the node's parts start (the Raft transport's calls,
  the broker lifecycle, the replica manager's timers, the replica fetchers, the group
  coordinator's loads and appends, ...). The node hands its `NodeTasks` to the parts it
  builds; a part calls `spawn(work, name=...)` where it would call `create_task`, and keeps
  the task to cancel or await it as before. A part built alone (its tests) is given
  `replog.testing.LoopTasks` instead: both are a `Spawner`.
- A task that raises (an exception other than a cancellation: a bug, or a failed disk) ends
  the node's run: its cause is logged once, here, at CRITICAL with the traceback (a storage
  error said its own already), and the node stops its roles in order and exits with code 1
  (`Node._stop_roles`). The other tasks go on until the stop cancels them: a failure does not
  cancel the group, so that the stop can still resign, hand leaderships over and answer what
  waits. A task's failure is the node's, so the task itself ends with no result (None).
- A task that someone awaits for its answer (a call's failure is that call's, as a group
  call's NOT_COORDINATOR) is not a background task: it stays the part's own.
- The run also ends on a stop signal, on the broker role giving up, or when the Raft driver
  returns. `close` cancels every task still running, so the group ends once the node stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Coroutine
from typing import Any, Protocol

from replog.errors import KafkaStorageError

log = logging.getLogger("replog.server")


class Spawner(Protocol):
    """What starts a background task of a node's part (module Rules); `name` says which in
    the log, as in "the replica manager's timers"."""

    def spawn(self, work: Coroutine[Any, Any, None], *, name: str) -> asyncio.Task[None]: ...


class NodeTasks:
    """The TaskGroup of node `node_id` (module Rules): `async with tasks.group():` holds it,
    `spawn` starts a task in it (raising RuntimeError outside it), `wait` returns once the run
    ended."""

    def __init__(self, node_id: int) -> None:
        self._node_id = node_id
        self._group: asyncio.TaskGroup | None = None
        self._running: set[asyncio.Task[None]] = set()
        self._ended = asyncio.Event()
        self.failure: BaseException | None = None
        self.broker_failure: str | None = None

    @contextlib.asynccontextmanager
    async def group(self) -> AsyncIterator[None]:
        """Hold the group around the node's run: `spawn` works inside; on the way out every
        task still running is cancelled, and the group ends once they all ended."""
        try:
            async with asyncio.TaskGroup() as group:
                self._group = group
                try:
                    yield
                finally:
                    self.close()
        finally:
            self._group = None

    def spawn(self, work: Coroutine[Any, Any, None], *, name: str) -> asyncio.Task[None]:
        """Run `work` in the node's group; its failure ends the run (module Rules)."""
        if self._group is None:
            work.close()
            raise RuntimeError(f"node {self._node_id}: {name} started while the node does not run")
        task = self._group.create_task(self._watch(name, work), name=name)
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        # A task cancelled before its first step never ran `work`: closed, it is not reported
        # as a coroutine never awaited (closing one that ended does nothing).
        task.add_done_callback(lambda _: work.close())
        return task

    def watch(
        self, what: str, work: Coroutine[Any, Any, None], *, ends: bool = False
    ) -> asyncio.Task[None]:
        """`spawn` for a task of the node itself, named `what` in the log; with `ends`, its
        return ends the run too (the Raft driver's)."""
        if not ends:
            return self.spawn(work, name=what)

        async def until_returned() -> None:
            await work
            self._ended.set()

        return self.spawn(until_returned(), name=what)

    async def _watch(self, what: str, work: Coroutine[Any, Any, None]) -> None:
        try:
            await work
        except Exception as exc:
            # Each failure is said once, here, with its traceback (a silent stop leaves nothing
            # to go on); the storage has said its own errors already.
            if not isinstance(exc, KafkaStorageError):
                log.critical(
                    "node %d: stopping: %s failed on an unexpected error",
                    self._node_id,
                    what,
                    exc_info=exc,
                )
            if self.failure is None:
                self.failure = exc
            self._ended.set()

    async def wait(self) -> None:
        """Until the run ended (module Rules)."""
        await self._ended.wait()

    def end(self) -> None:
        """End the run (a stop signal)."""
        self._ended.set()

    def end_broker(self, reason: str) -> None:
        """The broker role cannot go on: end the run with `reason`, said once."""
        if not self._ended.is_set():
            self.broker_failure = reason
            log.critical("node %d: stopping: %s", self._node_id, reason)
        self._ended.set()

    @property
    def failed(self) -> bool:
        """A task failed or the broker role gave up: the node exits with code 1."""
        return self.failure is not None or self.broker_failure is not None

    def close(self) -> None:
        """Cancel every task still running: the group then ends."""
        for task in list(self._running):
            task.cancel()
