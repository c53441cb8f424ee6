"""`SimTasks`: what starts a simulated node's background tasks (a `node_tasks.Spawner`): plain
tasks of the virtual loop, kept so that a crash of the node can cancel every one of them."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

__all__ = ["SimTasks"]


class SimTasks:
    """The live background tasks of one simulated node."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def spawn(self, work: Coroutine[Any, Any, None], *, name: str) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def cancel_all(self) -> None:
        """The node died: none of its tasks runs again."""
        for task in list(self._tasks):
            task.cancel()
