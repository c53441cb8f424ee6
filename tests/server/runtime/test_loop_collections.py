"""A node's automatic garbage collections run on its event loop, never in another thread
(replog/server/runtime/loop_collections.py), at CPython's thresholds, and free what they always
freed."""

from __future__ import annotations

import asyncio
import gc
import threading
import weakref
from collections.abc import Callable, Iterator

import pytest

from replog.server.runtime import loop_collections
from replog.server.runtime.loop_collections import LoopCollections


class Cyclic:
    def __init__(self) -> None:
        self.me = self


@pytest.fixture
def automatic_collections() -> Iterator[None]:
    """`gc.disable` is process-wide: whatever a test does, the process gets its automatic
    collections back."""
    assert gc.isenabled()
    try:
        yield
    finally:
        loop_collections.stop()
        gc.enable()


@pytest.mark.asyncio
async def test_a_thread_that_allocates_leaves_its_collections_to_the_loop(
    automatic_collections: None,
) -> None:
    collected_in: list[int] = []

    def record(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collected_in.append(threading.get_ident())

    def allocate() -> tuple[weakref.ref[Cyclic], list[list[int]]]:
        garbage = weakref.ref(Cyclic())  # dead at once: the next young collection frees it
        # Far past the young generation's threshold (kept alive, so counted until the next
        # collection): without the loop's collections, this thread would run dozens of them.
        kept = [[i] for i in range(50_000)]
        return garbage, kept

    loop_collections.install_loop_collections()
    assert not gc.isenabled()
    gc.callbacks.append(record)
    try:
        garbage, kept = await asyncio.to_thread(allocate)
        for _ in range(200):  # the loop's next check collects the thread's cycle
            if garbage() is None:
                break
            await asyncio.sleep(0.005)
    finally:
        gc.callbacks.remove(record)
    loop_thread = threading.get_ident()
    assert collected_in and set(collected_in) == {loop_thread}
    assert garbage() is None and len(kept) == 50_000
    loop_collections.stop()
    assert gc.isenabled()


def fake(
    count: tuple[int, int, int],
    found: int = 0,
    young: int = 0,
    during: Callable[[int], None] = lambda generation: None,
) -> tuple[LoopCollections, list[int]]:
    runs: list[int] = []

    def collect(generation: int) -> int:
        runs.append(generation)
        during(generation)
        return found

    collections = LoopCollections(
        get_count=lambda: count,
        get_threshold=lambda: (700, 10, 10),
        collect=collect,
        young_objects=lambda: young,
    )
    return collections, runs


def test_the_collection_chosen_is_cpythons() -> None:
    # Under the young threshold: none; over it, the oldest generation whose count is over.
    assert fake((700, 10, 10))[0].check() == -1
    assert fake((701, 0, 0))[0].check() == 0
    assert fake((701, 11, 0))[0].check() == 1
    # A full one only once young collections moved enough objects to the oldest generation.
    collections, runs = fake((701, 11, 11))
    assert collections.check() == 1  # nothing moved yet
    collections, runs = fake((1000, 11, 11), found=100, young=500)
    collections.check()  # 1,400 objects moved, 100 found dead: 1,400 pending
    assert collections.check() == 2
    assert runs == [1, 2]


def test_the_next_check_comes_when_the_young_generation_should_cross_its_threshold() -> None:
    from replog.server.runtime.loop_collections import CHECK_EVERY_S, IDLE_CHECK_EVERY_S

    # 200 of 700 counted: 500 to go; 100 grew in the last 20 ms, so 100 ms more at that rate.
    assert fake((200, 0, 0))[0].next_check_s(0.02, 100) == pytest.approx(0.1)
    assert fake((200, 0, 0))[0].next_check_s(0.02, 200) == pytest.approx(0.05)
    # Allocating fast: no sooner than the shortest wait; idle or freeing: the longest.
    assert fake((200, 0, 0))[0].next_check_s(0.005, 100_000) == CHECK_EVERY_S
    assert fake((900, 0, 0))[0].next_check_s(0.005, 10) == CHECK_EVERY_S
    assert fake((200, 0, 0))[0].next_check_s(0.1, 0) == IDLE_CHECK_EVERY_S
    assert fake((200, 0, 0))[0].next_check_s(0.1, -50) == IDLE_CHECK_EVERY_S
    assert fake((200, 0, 0))[0].next_check_s(0.1, 1) == IDLE_CHECK_EVERY_S


@pytest.mark.asyncio
async def test_an_idle_loop_checks_rarely(automatic_collections: None) -> None:
    # An idle node's loop wakes about 1/IDLE_CHECK_EVERY_S a second for its collections, not
    # every CHECK_EVERY_S: each wake-up costs it CPU.
    ticks: list[float] = []
    loop_collections.install_loop_collections()
    installed = loop_collections._installed
    assert installed is not None
    real_check = installed.collections.check

    def counted() -> int:
        ticks.append(asyncio.get_running_loop().time())
        return real_check()

    installed.collections.check = counted  # type: ignore[method-assign]
    await asyncio.sleep(0.5)
    assert 2 <= len(ticks) <= 12


def test_a_full_collection_waits_for_a_quarter_of_what_it_left_alive() -> None:
    young = [10_000]
    runs: list[int] = []

    def collect(generation: int) -> int:
        runs.append(generation)
        return 0

    collections = LoopCollections(
        get_count=lambda: (1000, 11, 11),
        get_threshold=lambda: (700, 10, 10),
        collect=collect,
        young_objects=lambda: young[0],
    )
    collections.check()  # 11,000 moved to the oldest generation
    collections.check()  # a full one: 22,000 alive
    young[0] = 0
    for _ in range(7):  # 1,000 moved by each young collection: full after 5,500 and more
        collections.check()
    assert runs == [1, 2, 1, 1, 1, 1, 1, 1, 2]
