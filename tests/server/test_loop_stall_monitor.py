"""The loop stall monitor measures a held loop and names what held it."""

from __future__ import annotations

import asyncio
import gc
import logging
import sys
import time

import pytest

from replog.server import loop_stall_monitor
from replog.server.loop_stall_monitor import LoopStallMonitor, call_chain


def hold_the_loop(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        sum(range(100))


@pytest.mark.asyncio
async def test_a_held_loop_is_measured_and_the_warning_names_the_holder(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(loop_stall_monitor, "WARN_STALL_S", 0.3)
    stalls: list[float] = []
    monitor = LoopStallMonitor(stalls.append)
    task = asyncio.create_task(monitor.run())
    await asyncio.sleep(0.05)
    with caplog.at_level(logging.WARNING, logger="replog.server.loop_stall"):
        hold_the_loop(0.5)
        await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert 0.4 <= monitor.longest_s < 1.0, stalls
    (warning,) = [r.getMessage() for r in caplog.records]
    assert "the event loop was held for" in warning
    assert "held in hold_the_loop (" in warning and "test_loop_stall_monitor.py:" in warning
    assert " samples)" in warning


@pytest.mark.asyncio
async def test_a_loop_that_keeps_time_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    monitor = LoopStallMonitor(lambda _: None)
    with caplog.at_level(logging.WARNING, logger="replog.server.loop_stall"):
        task = asyncio.create_task(monitor.run())
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert not caplog.records
    assert monitor.longest_s < loop_stall_monitor.WARN_STALL_S


def test_the_chain_names_project_frames_innermost_first() -> None:
    root = loop_stall_monitor._PROJECT_ROOTS[0]
    source = "def inner():\n    return grab()\ndef outer():\n    return inner()\n"
    namespace: dict[str, object] = {"grab": lambda: sys._getframe(1)}
    exec(compile(source, f"{root}/some_module.py", "exec"), namespace)
    frame = namespace["outer"]()  # type: ignore[operator]
    assert call_chain(frame, depth=2) == "inner (some_module.py:2) < outer (some_module.py:4)"


def test_the_garbage_collection_clock_counts_collections() -> None:
    clock = loop_stall_monitor.GarbageCollectionClock()
    gc.callbacks.append(clock)
    try:
        junk = [[i] for i in range(200_000)]
        clock.take()  # the collections the allocations above triggered
        start = time.perf_counter()
        gc.collect()
        spent = time.perf_counter() - start
    finally:
        gc.callbacks.remove(clock)
    del junk
    counted = clock.take()
    assert 0 < counted <= spent
    assert clock.take() == 0.0
