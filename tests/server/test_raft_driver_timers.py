"""Loop timers of the Raft driver: ticked on the driver's loop when due, and a timer that stays
due is retried every TIMER_RETICK_MS instead of spinning the loop."""

from __future__ import annotations

import asyncio
from pathlib import Path

from quorum.raft import RaftConfig, VoterAddress
from replog.server.raft_driver import TIMER_RETICK_MS, RaftDriver
from replog.server.raft_storage import RaftStorage


class AlwaysDue:
    def __init__(self) -> None:
        self.ticks: list[int] = []

    def next_wake_ms(self, now_ms: int) -> int | None:
        return now_ms  # work it can never finish

    def tick(self, now_ms: int) -> None:
        self.ticks.append(now_ms)


class Once:
    def __init__(self, at_ms: int) -> None:
        self.at_ms: int | None = at_ms
        self.ticked_at: int | None = None

    def next_wake_ms(self, now_ms: int) -> int | None:
        return self.at_ms

    def tick(self, now_ms: int) -> None:
        assert self.at_ms is not None and now_ms >= self.at_ms
        self.ticked_at, self.at_ms = now_ms, None


def test_timers_are_ticked_when_due_and_never_spin(tmp_path: Path) -> None:
    async def scenario() -> None:
        config = RaftConfig(voters=(VoterAddress(1, "127.0.0.1", 1),))
        driver = RaftDriver(1, config, RaftStorage(str(tmp_path), [1]))
        busy, once = AlwaysDue(), Once(driver.clock() + 50)
        driver.add_timer(busy)
        driver.add_timer(once)
        loop = asyncio.create_task(driver.run())
        try:
            await asyncio.sleep(0.3)
        finally:
            await driver.stop(graceful=False)
            await asyncio.wait_for(loop, 5)
            await driver.transport.close()
            driver.storage.close()
        assert once.ticked_at is not None
        gaps = [b - a for a, b in zip(busy.ticks, busy.ticks[1:], strict=False)]
        assert gaps and min(gaps) >= TIMER_RETICK_MS
        assert len(busy.ticks) <= 300 // TIMER_RETICK_MS + 2

    asyncio.run(scenario())
