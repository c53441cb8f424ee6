"""The loop stall monitor measures a held loop and names what held it."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import re
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from replog.clock import SCHEDSTAT, ThreadRunQueueClock
from replog.errors import ConfigError
from replog.server.runtime import loop_stall_monitor
from replog.server.runtime.loop_stall_monitor import LoopStallMonitor, StallSampler, call_chain

DEADLINE_S = 30  # only a broken monitor waits this long


@pytest.fixture(autouse=True)
def timer_handed_over(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests' process hands its timer to the monitors, as `replog node` does."""
    monkeypatch.setattr(loop_stall_monitor, "_timer_handed_over", True)


def hold_the_loop(seconds: float, samples: int = 0) -> None:
    """Hold the loop `seconds`, and on until `samples` stack samples were taken of it (a loaded
    machine gives the sampler thread fewer turns), up to a deadline only a broken sampler
    reaches."""
    taken = 0
    original = StallSampler.add

    def counted(sampler: StallSampler, chain: str) -> None:
        nonlocal taken
        taken += 1
        original(sampler, chain)

    start = time.monotonic()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(StallSampler, "add", counted)
        while time.monotonic() - start < seconds or (
            taken < samples and time.monotonic() - start < DEADLINE_S
        ):
            sum(range(100))


async def warning_of_the_hold(
    monitor: LoopStallMonitor,
    seconds: float,
    caplog: pytest.LogCaptureFixture,
    samples: int = 0,
) -> str:
    """The warning `monitor` logs for the loop held `seconds` (`hold_the_loop`): the first
    logged after the hold, by the tick that measured it. A loaded machine may stall the loop
    before or after too, and those warnings are right but not this one."""
    task = asyncio.create_task(monitor.run())
    await asyncio.sleep(0.05)
    with caplog.at_level(logging.WARNING, logger="replog.server.loop_stall"):
        hold_the_loop(seconds, samples)
        ended = time.time()
        async with asyncio.timeout(DEADLINE_S):
            while not (after := [r for r in caplog.records if r.created >= ended]):
                await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    return after[0].getMessage()


@pytest.mark.asyncio
async def test_a_held_loop_is_measured_and_the_warning_names_the_holder(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stalls: list[float] = []
    monitor = LoopStallMonitor(stalls.append, warn_s=0.3)
    warning = await warning_of_the_hold(monitor, 0.5, caplog, samples=3)
    assert 0.4 <= monitor.longest_s < 1.0, stalls
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
    # Its own logger's: threads other tests left behind may log warnings of their own.
    assert not [r for r in caplog.records if r.name == loop_stall_monitor.log.name]
    assert monitor.longest_s < loop_stall_monitor.WARN_STALL_S


@pytest.mark.asyncio
async def test_the_loop_thread_names_its_own_stack_no_other_thread_reads_it(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another thread reading the loop's frames can crash CPython 3.11 (module Rules)."""

    def refused() -> dict[int, object]:
        raise AssertionError("another thread's frames were read")

    monkeypatch.setattr(sys, "_current_frames", refused)
    monitor = LoopStallMonitor(lambda _: None, warn_s=0.3)
    warning = await warning_of_the_hold(monitor, 0.5, caplog, samples=3)
    assert "held in hold_the_loop (" in warning


@pytest.mark.asyncio
async def test_no_thread_watches_a_loop_that_keeps_time_and_its_timer_never_goes_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A watching thread would ask for the GIL each time it woke, and the loop would wait for
    it to get a core (module Rules): the loop re-arms a timer instead, which goes off only
    when it is late."""
    went_off = 0
    original = StallSampler.late

    def counted(sampler: StallSampler) -> bool:
        nonlocal went_off
        went_off += 1
        return original(sampler)

    monkeypatch.setattr(StallSampler, "late", counted)
    # The threads this loop's thread starts: not a count of the process's, in which threads
    # that other tests left behind may start threads of their own at any moment.
    started: list[threading.Thread] = []
    start, loop_thread = threading.Thread.start, threading.get_ident()

    def recorded(thread: threading.Thread) -> None:
        if threading.get_ident() == loop_thread:
            started.append(thread)
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", recorded)
    monitor = LoopStallMonitor(lambda _: None, warn_s=0.02)
    task = asyncio.create_task(monitor.run())
    await asyncio.sleep(0.3)  # 30 ticks, each of which re-armed the timer
    armed = signal.getitimer(loop_stall_monitor.SAMPLE_TIMER)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not started
    assert armed != (0.0, 0.0)
    if monitor.longest_s < 0.01:  # a loaded machine may stall this loop too: then it may go off
        assert went_off == 0
    assert signal.getitimer(loop_stall_monitor.SAMPLE_TIMER) == (0.0, 0.0)  # disarmed


def test_a_signal_met_inside_the_handler_names_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The timer's next signal can come while a handler that was kept from a core still runs:
    it must not name the handler's own frames."""
    sampler = StallSampler(threading.get_ident(), lambda: 0.0, after_s=0.0)
    chains: list[str] = []

    def add_and_meet_the_next_signal(self: StallSampler, chain: str) -> None:
        chains.append(chain)
        if len(chains) == 1:
            loop_stall_monitor._on_sample_signal(signal.SIGALRM, sys._getframe())

    monkeypatch.setattr(StallSampler, "add", add_and_meet_the_next_signal)
    monkeypatch.setattr(loop_stall_monitor, "_sampling", {sampler})
    loop_stall_monitor._on_sample_signal(signal.SIGALRM, sys._getframe())
    assert len(chains) == 1 and "_on_sample_signal" not in chains[0]


def test_a_process_that_kept_its_timer_is_measured_without_samples(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(loop_stall_monitor, "_timer_handed_over", False)
    monkeypatch.setattr(loop_stall_monitor, "_handler_installed", False)
    before = signal.getsignal(loop_stall_monitor.SAMPLE_SIGNAL)

    async def held() -> str:
        monitor = LoopStallMonitor(lambda _: None, warn_s=0.1)
        return await warning_of_the_hold(monitor, 0.3, caplog)

    warning = asyncio.run(held())
    assert "the event loop was held for" in warning and "held in" not in warning
    assert signal.getsignal(loop_stall_monitor.SAMPLE_SIGNAL) is before
    assert signal.getitimer(loop_stall_monitor.SAMPLE_TIMER) == (0.0, 0.0)


def test_a_timer_of_another_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loop_stall_monitor, "_handler_installed", False)
    ours = signal.signal(loop_stall_monitor.SAMPLE_SIGNAL, signal.SIG_IGN)
    signal.signal(loop_stall_monitor.SAMPLE_SIGNAL, signal.SIG_DFL)
    signal.setitimer(loop_stall_monitor.SAMPLE_TIMER, 300)  # theirs, far off
    try:
        main = threading.main_thread().ident
        assert main is not None
        assert not loop_stall_monitor._sample_signal_handled(main)
        assert signal.getsignal(loop_stall_monitor.SAMPLE_SIGNAL) is signal.SIG_DFL
        assert 0 < signal.getitimer(loop_stall_monitor.SAMPLE_TIMER)[0] <= 300
    finally:
        signal.setitimer(loop_stall_monitor.SAMPLE_TIMER, 0)
        signal.signal(loop_stall_monitor.SAMPLE_SIGNAL, ours)


def test_a_loop_off_the_main_thread_is_measured_without_samples(
    caplog: pytest.LogCaptureFixture,
) -> None:
    warnings: list[str] = []

    def run_loop() -> None:
        async def held() -> None:
            monitor = LoopStallMonitor(lambda _: None, warn_s=0.1)
            warnings.append(await warning_of_the_hold(monitor, 0.3, caplog))

        asyncio.run(held())

    thread = threading.Thread(target=run_loop)
    thread.start()
    thread.join()
    (warning,) = warnings
    assert "the event loop was held for" in warning and "ms of it on a CPU" in warning
    assert "held in" not in warning


def test_a_sample_signal_handler_of_another_is_left_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def theirs(signum: int, frame: object) -> None:
        pass

    monkeypatch.setattr(loop_stall_monitor, "_handler_installed", False)
    before = signal.signal(loop_stall_monitor.SAMPLE_SIGNAL, theirs)
    try:
        main = threading.main_thread().ident
        assert main is not None
        assert not loop_stall_monitor._sample_signal_handled(main)
        assert signal.getsignal(loop_stall_monitor.SAMPLE_SIGNAL) is theirs
    finally:
        signal.signal(loop_stall_monitor.SAMPLE_SIGNAL, before)


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
        gc.disable()  # only the collection below: none set off by another test's thread
        clock.take()  # the collections the allocations above triggered
        start = time.perf_counter()
        gc.collect()
        spent = time.perf_counter() - start
    finally:
        gc.enable()
        gc.callbacks.remove(clock)
    del junk
    counted = clock.take()
    assert 0 < counted <= spent
    assert clock.take() == 0.0


def test_the_collection_clock_names_the_oldest_generation_collected() -> None:
    clock = loop_stall_monitor.GarbageCollectionClock()
    gc.callbacks.append(clock)
    try:
        clock.take()
        gc.collect(1)
        _, young = clock.take_with_generation()
        gc.collect()
        _, full = clock.take_with_generation()
    finally:
        gc.callbacks.remove(clock)
    assert (young, full) == (1, 2)
    assert clock.take_with_generation() == (0.0, -1)


def test_the_collection_clock_tells_collections_in_other_threads_apart() -> None:
    clock = loop_stall_monitor.GarbageCollectionClock()
    gc.callbacks.append(clock)
    gc.disable()  # only the collections below: none set off by another test's thread
    try:
        clock.take()
        gc.collect(1)
        _, _, own_elsewhere = clock.take_all()
        worker = threading.Thread(target=gc.collect, args=(1,))
        worker.start()
        worker.join()
        spent, generation, elsewhere = clock.take_all()
    finally:
        gc.enable()
        gc.callbacks.remove(clock)
    assert own_elsewhere == 0.0
    assert 0 < elsewhere <= spent and generation >= 1


@pytest.mark.asyncio
async def test_a_stall_that_ends_before_a_tick_is_due_is_measured_whole() -> None:
    """Between two ticks a run of callbacks held the loop and ended before the next tick was
    due, so the tick was not late: the selector's clock measured the run all the same, and
    the tick reports it."""
    stalls: list[float] = []
    monitor = LoopStallMonitor(stalls.append, interval_s=1.0, warn_s=60)
    task = asyncio.create_task(monitor.run())
    await asyncio.sleep(0.05)  # the first tick is asleep, due in about 0.95 s
    hold_the_loop(0.2)
    async with asyncio.timeout(DEADLINE_S):
        while not stalls:
            await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert stalls[0] >= 0.2, stalls
    assert monitor.longest_s >= 0.2


@pytest.mark.asyncio
async def test_the_selector_is_left_as_it_was_when_the_monitor_stops() -> None:
    selector = asyncio.get_running_loop()._selector  # type: ignore[attr-defined]
    task = asyncio.create_task(LoopStallMonitor(lambda _: None).run())
    await asyncio.sleep(0.01)
    assert "select" in vars(selector)  # timed
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert "select" not in vars(selector)


def test_the_ticks_are_few_unless_a_lowered_threshold_asks_for_samples_sooner() -> None:
    """An idle node's process wakes for each tick (module docstring)."""
    assert LoopStallMonitor(lambda _: None)._interval_s == loop_stall_monitor.TICK_S == 0.05
    assert LoopStallMonitor(lambda _: None, warn_s=0.05)._interval_s == 0.0125


def test_the_warning_threshold_comes_from_the_environment() -> None:
    assert loop_stall_monitor.warn_stall_s({}) == loop_stall_monitor.WARN_STALL_S
    assert loop_stall_monitor.warn_stall_s({"REPLOG_LOOP_STALL_WARN_MS": "50"}) == 0.05
    for bad in ("", "fast", "0", "-5", "nan"):
        with pytest.raises(ConfigError, match=f"REPLOG_LOOP_STALL_WARN_MS={bad!r}"):
            loop_stall_monitor.warn_stall_s({"REPLOG_LOOP_STALL_WARN_MS": bad})


@pytest.mark.asyncio
async def test_a_lowered_threshold_names_a_shorter_stall_and_its_cpu_time(
    caplog: pytest.LogCaptureFixture,
) -> None:
    monitor = LoopStallMonitor(lambda _: None, warn_s=0.1)
    warning = await warning_of_the_hold(monitor, 0.2, caplog, samples=3)
    assert "ms of it on a CPU" in warning
    if os.path.exists(SCHEDSTAT):  # Linux: the wait for a core too, the machine's load
        assert re.search(r"ms of it on a CPU, \d+ ms waiting for one\)", warning), warning
    assert "held in hold_the_loop (" in warning


def test_the_run_queue_clock_reads_the_kernels_run_delay(tmp_path: Path) -> None:
    schedstat = tmp_path / "schedstat"
    schedstat.write_text("123456 4500000000 7\n")
    clock = ThreadRunQueueClock(str(schedstat))
    assert clock() == 4.5
    schedstat.write_text("123456 4750000000 9\n")  # the kernel's file is read afresh each time
    assert clock() == 4.75
    clock.close()
    assert clock() is None
    assert ThreadRunQueueClock(str(tmp_path / "absent"))() is None  # not Linux: no figure
