"""Giving the event loop's other work a turn from inside a long piece of work done in steps.

Why not one `asyncio.sleep(0)`: it puts the task at the end of the loop's ready queue, but the
loop takes the I/O events and the due timers of its next iteration (a socket that became
readable during the step, a Raft fetch deadline, the stall monitor's tick) only after that
queue, so behind the task: they run after the task's next step as well, and every one of them
waits for two steps. `yield_turn` lets one iteration pass in which the task does nothing but
queue itself again: what became ready during the step runs before the next step. It costs one
more loop iteration (microseconds) per turn.

Rules: a loop that works in steps (the Raft driver's apply turns, a first image's catch-up,
the replica manager's rounds) yields with `yield_turn` between steps, never with a bare
`asyncio.sleep(0)`.
"""

from __future__ import annotations

import asyncio


async def yield_turn() -> None:
    """Let everything that became ready during the caller's last step run before its next
    (module docstring)."""
    await asyncio.sleep(0)  # behind this iteration's ready callbacks
    await asyncio.sleep(0)  # behind the next iteration's I/O events and due timers
