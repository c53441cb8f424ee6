"""Run the cyclic garbage collector's automatic collections on the node's event loop, never in
another of its threads.

Why: CPython 3.11 collects in whichever thread's allocation crosses the young generation's
threshold, and a collection holds the GIL from start to end. A node's bulk threads (nice +10,
bulk_threads.py) and its default executor's threads allocate too, so they ran some of the
young collections; preempted mid-collection on a machine with fewer cores than busy threads,
such a thread kept the GIL, and the event loop waiting for it, until it was scheduled again:
a 0.2 ms collection took 10-80 ms of wall, 90 % of it in the collecting thread's run queue
(30,000 partitions created on 3 nodes sharing 2 cores, a loaded machine: 76-84 collections
per node in bulk threads, 108-241 ms of wall on 14-16 ms of CPU).
A collection the loop runs itself costs the loop only its CPU.

So a node process turns automatic collection off (`gc.disable`) and a timer on its loop runs
the collection CPython would have run by then, at CPython's own
thresholds (`gc.get_threshold`; `gc.get_count` keeps counting allocations while automatic
collection is off, and `gc.collect(n)` advances the counts as an automatic collection does):
the oldest generation whose count is over its threshold, a full one only once the objects that
young collections moved to the oldest generation since the last full one reach a quarter of
those a full one found alive (CPython's rule against quadratic full collections). Those two
figures CPython keeps to itself, so they are counted here: the young survivors from
`gc.get_objects(1)` and the count before each generation-1 collection (a few thousand objects),
the survivors of a full one from what it found. A freeze (collector.py) changes neither, as in
CPython: the objects it hides still count as the heap a full collection is weighed against, so
full collections stay as rare as CPython makes them (each one, over a node holding 100,000
partitions, holds the loop 20-150 ms). The timer comes when the young generation should
reach its threshold at the rate it grew since the last check, between `CHECK_EVERY_S` and
`IDLE_CHECK_EVERY_S` (`next_check_s`): a wake-up of the loop costs it about 60 us of CPU, so
checking every 5 ms would cost an idle node more than 1 % of a core, about half of all it
spends idle. Garbage made between two checks waits at most one check more than it did:
memory stays bounded by what `IDLE_CHECK_EVERY_S` of allocation, or a loop turn, makes.

Rules:
- `gc.disable` is process-wide: only a process entry point (`replog node`) turns this on
  (`install_loop_collections`), on its running loop, never the library on an embedding
  application's behalf; `stop` gives the process its automatic collections back.
- Nothing else changes: explicit `gc.collect` calls (collector.py's freezes and thaws, the
  log loading thread's among them) run where they ran, and the `gc.callbacks` entries
  (collector.py, the stall monitor) see these collections as they saw automatic ones.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable

CHECK_EVERY_S = 0.005  # the shortest wait between two checks: while allocating fast
IDLE_CHECK_EVERY_S = 0.1  # the longest: an idle node's
# CPython's rule (Modules/gcmodule.c): a full collection waits until the objects moved to the
# oldest generation since the last one reach this fraction of those it found alive.
FULL_AFTER_FRACTION = 0.25


class LoopCollections:
    """Chooses and runs the collection CPython would run (module docstring); `check` runs one
    when one is due."""

    def __init__(
        self,
        *,
        get_count: Callable[[], tuple[int, int, int]] = gc.get_count,
        get_threshold: Callable[[], tuple[int, int, int]] = gc.get_threshold,
        collect: Callable[[int], int] = gc.collect,
        young_objects: Callable[[], int] = lambda: len(gc.get_objects(1)),
    ) -> None:
        self._get_count = get_count
        self._get_threshold = get_threshold
        self._collect = collect
        self._young_objects = young_objects
        # Objects young collections moved to the oldest generation since the last full one,
        # and those the last full one found alive (module docstring).
        self._pending = 0
        self._long_lived = 0
        self.collections = [0, 0, 0]

    def next_check_s(self, elapsed_s: float, grown: int) -> float:
        """When to check again, `grown` young objects having been counted in the `elapsed_s`
        since the last check: when the young generation should cross its threshold at that
        rate, within [`CHECK_EVERY_S`, `IDLE_CHECK_EVERY_S`]."""
        if grown <= 0 or elapsed_s <= 0:
            return IDLE_CHECK_EVERY_S
        room = self._get_threshold()[0] - self._get_count()[0]
        due_s = max(0, room) * elapsed_s / grown
        return min(IDLE_CHECK_EVERY_S, max(CHECK_EVERY_S, due_s))

    def check(self) -> int:
        """Run the collection that is due, if any; its generation, or -1."""
        count = self._get_count()
        threshold = self._get_threshold()
        if threshold[0] == 0 or count[0] <= threshold[0]:
            return -1
        if count[2] > threshold[2] and self._pending > self._long_lived * FULL_AFTER_FRACTION:
            before = self._long_lived + self._pending + self._young_objects() + count[0]
            self._long_lived = max(0, before - self._collect(2))
            self._pending = 0
            generation = 2
        elif count[1] > threshold[1]:
            before = self._young_objects() + count[0]
            self._pending += max(0, before - self._collect(1))
            generation = 1
        else:
            self._collect(0)
            generation = 0
        self.collections[generation] += 1
        return generation


class _Installed:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.collections = LoopCollections()
        self._loop = loop
        self._handle: asyncio.TimerHandle | None = None
        self._checked_at = 0.0
        self._count_after = 0  # the young generation's count after the last check

    def start(self) -> None:
        gc.disable()
        self._schedule(CHECK_EVERY_S)

    def _schedule(self, delay_s: float) -> None:
        self._checked_at = self._loop.time()
        self._count_after = gc.get_count()[0]
        self._handle = self._loop.call_later(delay_s, self._tick)

    def _tick(self) -> None:
        grown = gc.get_count()[0] - self._count_after
        elapsed_s = self._loop.time() - self._checked_at
        self.collections.check()
        self._schedule(self.collections.next_check_s(elapsed_s, grown))

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        gc.enable()


_installed: _Installed | None = None


def install_loop_collections() -> LoopCollections:
    """Collect on the running loop only, from now on (module Rules)."""
    global _installed
    stop()
    _installed = _Installed(asyncio.get_running_loop())
    _installed.start()
    return _installed.collections


def stop() -> None:
    """Give the process its automatic collections back (module Rules)."""
    global _installed
    if _installed is not None:
        _installed.stop()
        _installed = None
