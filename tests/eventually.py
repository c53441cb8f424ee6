"""Waiting in tests for something another task, thread, server or process does: `eventually`
in an event loop, `wait_until` without one."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

TIMEOUT_S = 10.0  # generous: a loaded CI machine runs the other side late, not wrongly
POLL_S = 0.005


async def eventually(
    condition: Callable[[], object], what: str, timeout_s: float = TIMEOUT_S
) -> None:
    """Return once `condition()` is true; AssertionError naming `what` after `timeout_s`."""

    async def poll() -> None:
        while not condition():
            await asyncio.sleep(POLL_S)

    try:
        await asyncio.wait_for(poll(), timeout_s)
    except TimeoutError:
        raise AssertionError(f"not within {timeout_s:g} s: {what}") from None


def wait_until(
    condition: Callable[[], object],
    what: str,
    *,
    timeout_s: float = TIMEOUT_S,
    poll_s: float = 0.01,
) -> None:
    """The same for a test without an event loop (its other side runs in threads or processes):
    poll every `poll_s`, sleeping in between."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() >= deadline:
            raise AssertionError(f"not within {timeout_s:g} s: {what}")
        time.sleep(poll_s)
