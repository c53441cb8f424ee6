"""`replog.sim.virtual_loop`: asyncio on a virtual clock, one thread, a run a function of its
inputs."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Iterator

import pytest

from replog.sim.virtual_loop import SimulationIdleError, VirtualLoop


@pytest.fixture
def loop() -> Iterator[VirtualLoop]:
    virtual = VirtualLoop(start_s=100.0)
    yield virtual
    virtual.close()


def test_an_hour_of_sleep_takes_no_wall_time_and_moves_the_clock_by_an_hour(
    loop: VirtualLoop,
) -> None:
    started = time.monotonic()
    loop.run_until_complete(asyncio.sleep(3600))
    assert time.monotonic() - started < 5  # wall time: far from an hour
    assert loop.time() == pytest.approx(3700.0)
    assert loop.now_ms() == 3_700_000


def test_timeouts_fire_at_their_virtual_deadline(loop: VirtualLoop) -> None:
    async def never() -> None:
        await loop.create_future()

    async def main() -> float:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(never(), timeout=2.5)
        return loop.time()

    assert loop.run_until_complete(main()) == pytest.approx(102.5)


def _trace(seed: int) -> list[tuple[float, str]]:
    """What many tasks with seeded sleeps do, and when, on a fresh loop."""
    rng = random.Random(seed)
    loop = VirtualLoop()
    trace: list[tuple[float, str]] = []

    async def worker(name: str, delays: list[float]) -> None:
        for step, delay in enumerate(delays):
            await asyncio.sleep(delay)
            trace.append((loop.time(), f"{name}.{step}"))

    async def main() -> None:
        await asyncio.gather(
            *(
                worker(f"w{i}", [rng.choice([0, 0.001, 0.25, 1.0]) for _ in range(20)])
                for i in range(8)
            )
        )

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    return trace


def test_a_run_is_a_function_of_its_inputs() -> None:
    """Same seed, same trace (ties included, in scheduling order); another seed differs."""
    first = _trace(7)
    assert first == _trace(7)
    assert first != _trace(8)
    assert [t for t, _ in first] == sorted(t for t, _ in first)  # the clock never goes back


def test_work_handed_to_a_thread_runs_on_the_loops_thread_at_once(loop: VirtualLoop) -> None:
    ran_on: list[int] = []

    def blocking(value: int) -> int:
        ran_on.append(threading.get_ident())
        return value * 2

    def failing() -> None:
        raise OSError("disk gone")

    async def main() -> int:
        doubled = await asyncio.to_thread(blocking, 21)
        with pytest.raises(OSError, match="disk gone"):
            await loop.run_in_executor(None, failing)
        return doubled

    assert loop.run_until_complete(main()) == 42
    assert ran_on == [threading.get_ident()]
    assert loop.time() == 100.0  # no time passed


def test_a_loop_with_nothing_ready_and_no_timer_says_so(loop: VirtualLoop) -> None:
    async def waits_forever() -> None:
        await loop.create_future()

    with pytest.raises(SimulationIdleError, match="nothing is ready and no timer"):
        loop.run_until_complete(waits_forever())


def test_another_thread_may_not_call_in(loop: VirtualLoop) -> None:
    errors: list[BaseException] = []

    def other() -> None:
        try:
            loop.call_soon_threadsafe(lambda: None)
        except RuntimeError as exc:
            errors.append(exc)

    thread = threading.Thread(target=other)
    thread.start()
    thread.join()
    assert len(errors) == 1 and "one thread" in str(errors[0])
    loop.call_soon_threadsafe(lambda: None)  # its own thread may


def test_run_once_steps_one_round(loop: VirtualLoop) -> None:
    """A simulator checks its invariants between iterations: each `run_once` runs what is
    ready, or moves the clock to the next timer and runs what fell due."""
    seen: list[str] = []
    loop.call_soon(seen.append, "now")
    loop.call_later(5, seen.append, "later")
    loop.run_once()
    assert seen == ["now"] and loop.time() == 100.0
    loop.run_once()
    assert seen == ["now", "later"] and loop.time() == pytest.approx(105.0)


def test_work_blocking_in_an_executor_finishes_later_and_holds_up_nothing_else(
    loop: VirtualLoop,
) -> None:
    ticks: list[float] = []

    def slow_fsync() -> str:
        loop.block(0.25)
        return "synced"

    async def ticker() -> None:
        for _ in range(3):
            await asyncio.sleep(0.1)
            ticks.append(round(loop.time() - 100, 3))

    async def main() -> tuple[str, float]:
        other = asyncio.ensure_future(ticker())
        result = await asyncio.to_thread(slow_fsync)
        took = loop.time() - 100
        await other
        return result, took

    result, took = loop.run_until_complete(main())
    assert result == "synced" and took == pytest.approx(0.25)
    assert ticks == [0.1, 0.2, 0.3]  # the loop went on meanwhile


def test_a_failure_after_a_block_in_an_executor_comes_late_too(loop: VirtualLoop) -> None:
    def failing() -> None:
        loop.block(1.0)
        raise OSError(5, "Input/output error")

    async def main() -> float:
        with pytest.raises(OSError):
            await loop.run_in_executor(None, failing)
        return loop.time() - 100

    assert loop.run_until_complete(main()) == pytest.approx(1.0)


def test_blocking_on_the_loop_moves_the_clock_at_once_and_timers_fire_late(
    loop: VirtualLoop,
) -> None:
    fired: list[float] = []
    loop.call_later(0.1, lambda: fired.append(loop.time() - 100))

    async def main() -> None:
        loop.block(0.5)  # the loop's own thread held by a slow write

    loop.run_until_complete(main())
    loop.run_until_complete(asyncio.sleep(0))
    assert loop.time() - 100 == pytest.approx(0.5)
    assert fired == [pytest.approx(0.5)]
    with pytest.raises(ValueError, match="0 seconds or more"):
        loop.block(-1)


def test_a_failing_callback_goes_to_the_exception_handler_and_the_loop_goes_on(
    loop: VirtualLoop,
) -> None:
    """As asyncio's `Handle` reports it: the message names the callback, the context holds the
    exception and the handle."""
    seen: list[dict[str, object]] = []
    loop.set_exception_handler(lambda _, context: seen.append(context))
    ran: list[str] = []

    def broken() -> None:
        raise ValueError("broken callback")

    handle = loop.call_soon(broken)
    loop.call_soon(ran.append, "after")
    timer = loop.call_later(0.2, broken)
    loop.run_until_complete(asyncio.sleep(0.5))
    assert ran == ["after"]
    assert [type(context["exception"]) for context in seen] == [ValueError, ValueError]
    assert [context["handle"] for context in seen] == [handle, timer]
    assert "Exception in callback" in str(seen[0]["message"])
    assert "broken" in str(seen[0]["message"])


def test_callbacks_run_in_order_and_a_cancelled_one_never(loop: VirtualLoop) -> None:
    ran: list[str] = []
    loop.call_later(0.1, ran.append, "late")
    loop.call_at(100.05, ran.append, "at")
    loop.call_soon(ran.append, "first")
    loop.call_soon(ran.append, "cancelled").cancel()
    loop.call_later(0.07, ran.append, "cancelled timer").cancel()
    loop.call_soon(ran.append, "second")
    loop.run_until_complete(asyncio.sleep(0.2))
    assert ran == ["first", "second", "at", "late"]


def test_a_closed_loop_takes_no_callback() -> None:
    closed = VirtualLoop()
    closed.close()
    for schedule in (
        lambda: closed.call_soon(print),
        lambda: closed.call_later(1, print),
        lambda: closed.call_at(1, print),
    ):
        with pytest.raises(RuntimeError, match="closed"):
            schedule()


def test_cancelled_timers_leave_the_heap_as_asyncio_drops_them(loop: VirtualLoop) -> None:
    """Once more than half of over 100 timers are cancelled, the next iteration drops them all
    (asyncio's rule): the count of cancelled timers is kept by each cancel."""
    ran: list[int] = []
    timers = [loop.call_later(1 + i / 1000, ran.append, i) for i in range(300)]
    for timer in timers[100:]:  # behind the first, so only the count finds them
        timer.cancel()
        timer.cancel()  # twice counts once
    loop.run_once()  # drops the cancelled ones, then runs the first live one
    assert ran == [0]
    assert len(loop._scheduled) == 99  # type: ignore[attr-defined]
    loop.run_until_complete(asyncio.sleep(2))
    assert ran == list(range(100))
