"""`Wakeup`: an `asyncio.Event` whose wait takes a timeout, for the loops that sleep until an
input arrives or its next timer is due (the Raft driver's loop; why the replica manager's loops
do not use it: docs/reliability.md, "Speed").

`async with asyncio.timeout(t): await event.wait()` makes a `Timeout`, asks for the current
task, and on expiry cancels the task and turns the `CancelledError` into a `TimeoutError`; the
Raft driver alone waits so about 125 times a simulated second in `replog sim`. `wait(timeout_s)`
does the same with one future and one timer, and says which ended it instead of raising.

Rules:
- `set`, `clear` and `is_set` are `asyncio.Event`'s; `set` wakes every waiter, in the order
  they began to wait.
- `wait(timeout_s)` returns True when set (at once if it is), False when `timeout_s` passed
  first (None: no limit), and False too when both happened before the waiter resumed, as
  `asyncio.timeout` then cancels the task all the same (the caller runs its timers, then
  finds its input). Its timer is scheduled as `asyncio.timeout(timeout_s)` schedules its own
  (`call_at` of the loop's time plus `timeout_s`, `call_soon` when that is not in the
  future), so a run on the simulator's loop takes the same steps in the same order.
- A cancelled waiter's `CancelledError` goes through untouched: no cancellation is made or
  taken back here, so a task told to stop while it waits stops.
"""

from __future__ import annotations

import asyncio
from collections import deque

__all__ = ["Wakeup"]


class Wakeup:
    """An event to wait for with a timeout (module docstring)."""

    __slots__ = ("_value", "_waiters")

    def __init__(self) -> None:
        self._value = False
        self._waiters: deque[asyncio.Future[bool]] = deque()

    def is_set(self) -> bool:
        return self._value

    def set(self) -> None:
        if not self._value:
            self._value = True
            for waiter in self._waiters:
                if not waiter.done():
                    waiter.set_result(True)

    def clear(self) -> None:
        self._value = False

    async def wait(self, timeout_s: float | None = None) -> bool:
        """True once set, False when `timeout_s` passed first (module Rules)."""
        if self._value:
            return True
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[bool] = loop.create_future()
        timer: asyncio.Handle | None = None
        expired: list[bool] = []  # the timer's mark: it came due before the waiter resumed
        if timeout_s is not None:
            now = loop.time()
            when = now + timeout_s
            if when <= now:
                timer = loop.call_soon(_time_out, waiter, expired)
            else:
                timer = loop.call_at(when, _time_out, waiter, expired)
        self._waiters.append(waiter)
        try:
            woken = await waiter
            return woken and not expired
        finally:
            self._waiters.remove(waiter)
            if timer is not None:
                timer.cancel()


def _time_out(waiter: asyncio.Future[bool], expired: list[bool]) -> None:
    expired.append(True)
    if not waiter.done():
        waiter.set_result(False)
