"""`yield_turn` (replog/server/runtime/loop_turns.py): what became ready during a step runs before
the next step, which one `asyncio.sleep(0)` does not give."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import pytest

from replog.server.runtime.loop_turns import yield_turn


async def _order(pause: Callable[[], Awaitable[None]]) -> list[str]:
    """Two steps with `pause` between them; a timer falls due during the first."""
    seen: list[str] = []
    asyncio.get_running_loop().call_later(0.002, seen.append, "timer")
    time.sleep(0.01)  # the first step, holding the loop past the timer's deadline
    seen.append("step 1")
    await pause()
    seen.append("step 2")
    await asyncio.sleep(0.01)
    return seen


async def _sleep_zero() -> None:
    await asyncio.sleep(0)


@pytest.mark.parametrize(
    ("pause", "expected"),
    [
        (yield_turn, ["step 1", "timer", "step 2"]),
        # The reason for yield_turn: with one sleep(0) the due timer waits for the next step.
        (_sleep_zero, ["step 1", "step 2", "timer"]),
    ],
    ids=["yield_turn", "sleep(0)"],
)
def test_a_timer_due_during_a_step_runs_before_the_next_step_only_with_yield_turn(
    pause: Callable[[], Awaitable[None]], expected: list[str]
) -> None:
    assert asyncio.run(_order(pause)) == expected
