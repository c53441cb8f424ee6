"""`Wakeup`: set wakes every waiter, a timeout ends a wait with False, a cancelled waiter stops;
and on the simulator's loop a script of sets, clears and timed waits runs exactly as it runs
with `asyncio.Event` inside `asyncio.timeout` (the same outcomes at the same virtual times), the
race of a set and a timer before the waiter resumes included."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Iterator

import pytest

from replog.server.runtime.wakeup import Wakeup
from replog.sim.virtual_loop import VirtualLoop


@pytest.fixture
def loop() -> Iterator[VirtualLoop]:
    virtual = VirtualLoop(start_s=10.0)
    yield virtual
    virtual.close()


def test_a_set_wakeup_returns_at_once(loop: VirtualLoop) -> None:
    wakeup = Wakeup()
    wakeup.set()
    assert loop.run_until_complete(wakeup.wait(5)) is True
    assert loop.time() == 10.0


def test_a_wait_ends_false_at_its_timeout_and_leaves_no_timer(loop: VirtualLoop) -> None:
    wakeup = Wakeup()
    assert loop.run_until_complete(wakeup.wait(0.25)) is False
    assert loop.time() == pytest.approx(10.25)
    assert not wakeup.is_set()


def test_set_wakes_every_waiter_in_order_and_cancels_their_timers(loop: VirtualLoop) -> None:
    wakeup = Wakeup()
    woken: list[tuple[str, bool]] = []

    async def waiter(name: str) -> None:
        woken.append((name, await wakeup.wait(60)))

    async def main() -> None:
        tasks = [asyncio.ensure_future(waiter(name)) for name in "abc"]
        await asyncio.sleep(1)
        wakeup.set()
        await asyncio.gather(*tasks)

    loop.run_until_complete(main())
    assert woken == [("a", True), ("b", True), ("c", True)]
    assert loop.time() == pytest.approx(11.0)  # no 60 s timer was left to wait for
    assert all(entry[1].cancelled() for entry in loop._scheduled)


def test_a_cancelled_waiter_stops_and_is_forgotten(loop: VirtualLoop) -> None:
    wakeup = Wakeup()

    async def main() -> None:
        task = asyncio.ensure_future(wakeup.wait(60))
        await asyncio.sleep(0.5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert not wakeup._waiters
        wakeup.set()  # nobody is woken, nothing fails

    loop.run_until_complete(main())
    assert loop.time() == pytest.approx(10.5)


def test_a_set_and_a_timer_in_one_iteration_report_the_timeout(loop: VirtualLoop) -> None:
    """Both before the waiter resumes: False, as `asyncio.timeout` cancels the task anyway."""
    wakeup = Wakeup()

    async def main() -> bool:
        loop.call_later(1.0, wakeup.set)  # scheduled first: runs first in the same iteration
        return await wakeup.wait(1.0)

    assert loop.run_until_complete(main()) is False


async def _event_wait(event: asyncio.Event, timeout_s: float | None) -> bool:
    try:
        async with asyncio.timeout(timeout_s):
            await event.wait()
    except TimeoutError:
        return False
    return True


def _script_trace(seed: int, kind: str) -> list[tuple[float, str, object]]:
    """A seeded script of waiters (timeouts of 0-8 ms, some none) and setters and clearers
    (each at a whole millisecond, so that timers tie), run on a fresh virtual loop with the
    given kind of event: what each waiter saw, and when."""
    rng = random.Random(seed)
    loop = VirtualLoop(start_s=0.0)
    trace: list[tuple[float, str, object]] = []
    event: asyncio.Event | Wakeup = asyncio.Event() if kind == "asyncio" else Wakeup()

    def waits(timeout_s: float | None) -> Awaitable[bool]:
        if isinstance(event, asyncio.Event):
            return _event_wait(event, timeout_s)
        return event.wait(timeout_s)

    async def waiter(name: str, starts_ms: int, rounds: int) -> None:
        await asyncio.sleep(starts_ms / 1000)
        for round_ in range(rounds):
            event.clear()
            timeout_s = None if rng.random() < 0.1 else rng.choice((0, 0, 1, 2, 3, 5, 8)) / 1000
            trace.append((loop.time(), f"{name}.{round_} waits", timeout_s))
            trace.append((loop.time(), f"{name}.{round_} woken", await waits(timeout_s)))

    async def act(at_ms: int, action: Callable[[], None], name: str) -> None:
        await asyncio.sleep(at_ms / 1000)
        action()
        trace.append((loop.time(), name, None))

    async def main() -> None:
        jobs = [waiter(f"w{n}", rng.randint(0, 5), rng.randint(4, 12)) for n in range(3)]
        for n in range(30):
            jobs.append(act(rng.randint(0, 40), event.set, f"set{n}"))
        for n in range(10):
            jobs.append(act(rng.randint(0, 40), event.clear, f"clear{n}"))
        jobs.append(act(400, event.set, "last set"))  # a waiter without timeout ends too
        await asyncio.gather(*jobs)

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    return trace


@pytest.mark.parametrize("seed", range(40))
def test_a_script_runs_as_with_an_event_inside_asyncio_timeout(seed: int) -> None:
    assert _script_trace(seed, "wakeup") == _script_trace(seed, "asyncio")
