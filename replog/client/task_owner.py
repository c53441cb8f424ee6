"""The one owner of a client engine's background tasks: an `asyncio.TaskGroup`.

Rules:
- One task holds the group: `start(body)` runs the engine's main loop as the group's body,
  `open()` (awaited) holds it with no body. `spawn` adds a task to the group. Spawned between
  `start` and the holder's first step (a first send starts the producer and may queue work at
  once), the task it returns moves the work into the group at that step and stands in for
  the group's task, ending a step after it: an engine that must know in the very step its
  work ended keeps a flag of its own.
- A task the engine starts outside the group is the call's own: the call that started it
  awaits or cancels it (a blocking call's task on the loop thread, a close shared by
  concurrent callers, an asynchronous commit whose future the caller holds, a metadata
  refresh its callers share and `ClusterMetadata.close` ends).
- The first task that fails (an exception other than a cancellation: a bug) is the engine's
  failure: its cause is logged once, at ERROR with the traceback, and handed to `on_failure`,
  which fails the engine's pending calls with it; the group then cancels its other tasks, and
  `spawn` raises `error(...)` (IllegalStateError naming the cause) from then on.
- `close` cancels the group (its body and every task) and waits until they ended.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from replog.errors import IllegalStateError

T = TypeVar("T")


class TaskOwner:
    """The TaskGroup of one client engine (module docstring); `name` says which, as in "the
    producer's sender"."""

    def __init__(
        self, name: str, on_failure: Callable[[BaseException], None], log: logging.Logger
    ) -> None:
        self.name = name
        self._on_failure = on_failure
        self._log = log
        self._holder: asyncio.Task[None] | None = None
        self._group: asyncio.TaskGroup | None = None
        self._entered: asyncio.Event | None = None
        self.failure: BaseException | None = None

    @property
    def started(self) -> bool:
        return self._holder is not None

    @property
    def running(self) -> bool:
        """Whether `spawn` takes work now: started, and neither failed nor closed."""
        holder = self._holder
        return holder is not None and not holder.done() and self.failure is None

    def start(self, body: Coroutine[Any, Any, None] | None = None) -> None:
        """Hold the group on the running loop, with `body` as its main loop (once)."""
        if self._holder is not None:
            if body is not None:
                body.close()
            return
        self._entered = asyncio.Event()
        self._holder = asyncio.get_running_loop().create_task(self._hold(body), name=self.name)

    async def open(self) -> None:
        """`start` without a body, and wait until `spawn` works."""
        self.start()
        assert self._entered is not None
        await self._entered.wait()

    def spawn(self, work: Coroutine[Any, Any, T], *, name: str | None = None) -> asyncio.Task[T]:
        """Run `work` as a task of the group (after `start` and its first step, or `open`)."""
        group = self._group
        entered = self._entered
        if group is None and self.failure is None and entered is not None and not entered.is_set():
            adopted = asyncio.get_running_loop().create_task(self._adopt(work, name), name=name)
            adopted.add_done_callback(_retrieve)
            return adopted
        if self.failure is not None or group is None:
            work.close()
            failed = self.error("start a task")
            if failed is not None:
                raise failed
            raise RuntimeError(f"{self.name}: a task started before the engine ran or after close")
        task = group.create_task(self._guard(work), name=name)
        # A task cancelled before its first step never ran `work`: closed, it is not reported
        # as a coroutine never awaited (closing one that ended does nothing).
        task.add_done_callback(lambda _: work.close())
        return task

    def error(self, what: str) -> IllegalStateError | None:
        """The error of a call after the failure (None while there was none)."""
        if self.failure is None:
            return None
        error = IllegalStateError(
            f"{what}: {self.name} stopped on an unexpected error "
            f"({type(self.failure).__name__}: {self.failure})"
        )
        error.__cause__ = self.failure
        return error

    async def close(self) -> None:
        """Cancel the body and every task; return once all ended."""
        holder = self._holder
        if holder is None:
            return
        holder.cancel()
        await asyncio.wait({holder})
        self._group = None
        assert self._entered is not None
        self._entered.set()  # a holder cancelled before its first step never set it

    async def _adopt(self, work: Coroutine[Any, Any, T], name: str | None) -> T:
        """`work` spawned before the holder entered its group: a task of the group from the
        holder's first step on; cancelling this cancels it (module docstring)."""
        assert self._entered is not None
        try:
            await self._entered.wait()
        except BaseException:
            work.close()
            raise
        if self._group is None:  # closed (or failed) before the group was entered
            work.close()
            raise asyncio.CancelledError
        return await self.spawn(work, name=name)

    async def _hold(self, body: Coroutine[Any, Any, None] | None) -> None:
        assert self._entered is not None
        try:
            async with asyncio.TaskGroup() as group:
                self._group = group
                self._entered.set()
                if body is None:
                    await asyncio.get_running_loop().create_future()  # until cancelled
                else:
                    await self._guard(body)
        except BaseExceptionGroup as failed:
            # Each failure was reported by `_guard`; what is not an Exception goes on.
            rest = failed.subgroup(lambda error: not isinstance(error, Exception))
            if rest is not None:
                _, not_closing = rest.split(GeneratorExit)
                if not_closing is None:
                    # This coroutine was closed (its task destroyed with an unclosed client's
                    # loop): it must end with GeneratorExit itself, not a group holding it.
                    raise GeneratorExit from None
                raise rest from None
        finally:
            if body is not None:
                body.close()  # as `spawn` does for a task cancelled before its first step
            self._group = None
            self._entered.set()  # `open` returns; `spawn` then says why it cannot

    async def _guard(self, work: Coroutine[Any, Any, T]) -> T:
        """Run `work`; its failure is the engine's (module docstring) and aborts the group."""
        try:
            return await work
        except Exception as exc:
            if self.failure is None:
                self.failure = exc
                self._log.error("%s stopped on an unexpected error", self.name, exc_info=exc)
                try:
                    self._on_failure(exc)
                except Exception:
                    self._log.exception("%s: failing its pending calls failed", self.name)
            raise


def _retrieve(task: asyncio.Task[Any]) -> None:
    """A stand-in task's exception is the group task's, which `_guard` reported already."""
    if not task.cancelled():
        task.exception()
