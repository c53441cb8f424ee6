"""`replog.sim.sim_tasks.SimTasks.settle`: a task that ended before its done callback ran is
reported at once, and only once, so that a node's fail-stop sees every error of its turn."""

from __future__ import annotations

import asyncio

from replog.sim.sim_tasks import SimTasks


async def _fail() -> None:
    raise OSError("the disk failed")


def test_a_task_ended_in_this_turn_is_reported_by_settle_once() -> None:
    async def main() -> list[str]:
        tasks = SimTasks()
        task = tasks.spawn(_fail(), name="failing")
        await asyncio.sleep(0)  # the task ends; its done callback only waits for the next turn
        assert task.done() and not tasks.failures
        tasks.settle()
        assert tasks.failures == ["failing: OSError: the disk failed"]
        await asyncio.sleep(0)  # the callback runs: reported already
        return tasks.failures

    assert asyncio.run(main()) == ["failing: OSError: the disk failed"]
