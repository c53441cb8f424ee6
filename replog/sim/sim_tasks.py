"""`SimTasks`: what starts a simulated node's background tasks (a `node_tasks.Spawner`): plain
tasks of the virtual loop, kept so that a crash of the node can cancel every one of them, and
so that a task that ends with an error (a shell's fail-stop, a core's own assertion) is
reported to the simulation (`failures`) instead of passing unseen. The tasks are kept in the
order they started, not in a set: a crash cancels them in that order, and a set's order (by
object address) may differ between two processes that allocated differently, so a seed
would not replay in another process."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

__all__ = ["SimTasks"]


class SimTasks:
    """The live background tasks of one simulated node."""

    def __init__(self, on_error: Callable[[], None] | None = None) -> None:
        self._tasks: dict[asyncio.Task[None], None] = {}  # in start order (module docstring)
        self.failures: list[str] = []  # "<task name>: <error>", in the order they ended
        self.errors: list[BaseException] = []  # the errors of `failures`, in the same order
        self._on_error = on_error  # called after each one is added

    def spawn(self, work: Coroutine[Any, Any, None], *, name: str) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(work, name=name)
        self._tasks[task] = None
        task.add_done_callback(self._ended)
        return task

    def _ended(self, task: asyncio.Task[None]) -> None:
        if task not in self._tasks:
            return  # reported already, by `settle`
        self._tasks.pop(task, None)
        if not task.cancelled() and (error := task.exception()) is not None:
            self.failures.append(f"{task.get_name()}: {type(error).__name__}: {error}")
            self.errors.append(error)
            if self._on_error is not None:
                self._on_error()

    def settle(self) -> None:
        """Report now every task that has ended but whose done callback has not run yet (it
        runs at the loop's next turn): a caller deciding how the node stops sees every error
        its tasks ended with so far."""
        for task in [t for t in self._tasks if t.done()]:
            self._ended(task)

    def cancel_all(self) -> None:
        """The node died: none of its tasks runs again."""
        for task in list(self._tasks):
            task.cancel()

    async def finished(self) -> None:
        """Wait until every task has ended (after `cancel_all`)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
