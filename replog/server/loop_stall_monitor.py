"""How long the node's event loop was kept from running: the stall every Raft fetch, heartbeat
and request waiting on it saw.

A task asks to wake every `interval_s` and measures how much later than asked it woke; the
lateness is the longest callback (or run of callbacks) that held the loop meanwhile, give or
take the interval. Each lateness goes into the `replog_event_loop_stall_seconds` histogram
(`NodeMetrics`), the longest seen into `longest_s`, and one of `WARN_STALL_S` or more is logged
at WARNING: a stall that long is a bug to find (docs/operations.md, "Metrics").
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

log = logging.getLogger("replog.server.loop_stall")

WARN_STALL_S = 1.0


class LoopStallMonitor:
    """Measures the event loop's stalls (module docstring); `run` until cancelled."""

    def __init__(self, observe: Callable[[float], None], *, interval_s: float = 0.01) -> None:
        self._observe = observe
        self._interval_s = interval_s
        self.longest_s = 0.0

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            asked = loop.time() + self._interval_s
            await asyncio.sleep(self._interval_s)
            stall = max(0.0, loop.time() - asked)
            self._observe(stall)
            if stall > self.longest_s:
                self.longest_s = stall
            if stall >= WARN_STALL_S:
                log.warning("the event loop was held for %.0f ms", stall * 1000)
