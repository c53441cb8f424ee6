"""`replog.sim.sim_tasks.SimTasks.settle`: a task that ended before its done callback ran is
reported at once, and only once, so that a node's fail-stop sees every error of its turn; its
`on_error` hears of each error once, of a cancelled or finished task never (the simulator's
checks skip the loop iterations in which no task failed)."""

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


def test_on_error_hears_each_error_once_and_nothing_else() -> None:
    heard: list[int] = []

    async def fine() -> None:
        pass

    async def main() -> None:
        tasks = SimTasks(on_error=lambda: heard.append(len(tasks.failures)))
        tasks.spawn(_fail(), name="settled")
        tasks.spawn(fine(), name="fine")
        waiting = tasks.spawn(asyncio.sleep(10), name="cancelled")
        await asyncio.sleep(0)
        tasks.settle()  # the first failure, reported here
        tasks.spawn(_fail(), name="called back")
        waiting.cancel()
        for _ in range(3):
            await asyncio.sleep(0)

    asyncio.run(main())
    assert heard == [1, 2]  # after each failure was recorded
