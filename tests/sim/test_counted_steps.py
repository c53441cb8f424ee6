"""`replog.sim.counted_steps`: every resumption counted, nothing else changed."""

from __future__ import annotations

import asyncio

import pytest

from replog.sim.counted_steps import counted
from replog.sim.virtual_loop import VirtualLoop


class Counter:
    steps = 0


def test_each_resumption_is_counted_and_the_result_passes_through() -> None:
    loop = VirtualLoop()
    counter = Counter()

    async def work() -> str:
        for _ in range(3):
            await asyncio.sleep(1)
        return "done"

    assert loop.run_until_complete(counted(work(), counter)) == "done"
    assert counter.steps == 4  # the start and three wake-ups
    loop.close()


def test_errors_and_cancellations_pass_through() -> None:
    loop = VirtualLoop()
    counter = Counter()
    cleaned: list[str] = []

    async def failing() -> None:
        await asyncio.sleep(1)
        raise OSError("disk")

    async def forever() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            cleaned.append("finally")

    with pytest.raises(OSError, match="disk"):
        loop.run_until_complete(counted(failing(), counter))

    async def cancel_it() -> None:
        task = asyncio.ensure_future(counted(forever(), counter))
        await asyncio.sleep(1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    loop.run_until_complete(cancel_it())
    assert cleaned == ["finally"]
    loop.close()
