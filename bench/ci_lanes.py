"""Where a test run's time went, against CI's 25-minute budget: each worker's lane, the
machine's busy CPU, and the slowest modules with the CPU their worker used.

Record a run first (tests/run_times.py), then read it here:

    REPLOG_TEST_TIMES=/tmp/times.tsv .venv/bin/python -m pytest
    .venv/bin/python bench/ci_lanes.py /tmp/times.tsv [--top 40]

Per lane (a worker): the tests' wall seconds end to end, the CPU seconds the worker itself
used, and those of the children its tests reaped (nodes, JVMs, tools). For the machine: the
busy CPU seconds over the run (/proc/stat samples) against the two cores' capacity; what
neither the workers nor their reaped children used went to processes that outlived their
parent (a node a CLI command left running) and the pytest controller. Per module: wall
seconds, the worker's own CPU and its reaped children's; a module whose wall time far exceeds
both waits (or sleeps).
"""

from __future__ import annotations

import argparse
import bisect
import collections
import os
import sys
from dataclasses import dataclass

CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
CORES = os.cpu_count() or 1


@dataclass(frozen=True)
class TestTime:
    worker: str
    nodeid: str
    start: float
    end: float
    cpu: float
    children_cpu: float

    @property
    def module(self) -> str:
        return self.nodeid.split("::", 1)[0]


def read_times(path: str) -> list[TestTime]:
    times = []
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            worker, nodeid, *figures = line.rstrip("\n").split("\t")
            start, end, cpu, children_cpu = (float(figure) for figure in figures)
            times.append(TestTime(worker, nodeid, start, end, cpu, children_cpu))
    return times


class BusyCpu:
    """The machine's busy CPU seconds between two times, from /proc/stat samples."""

    def __init__(self, path: str) -> None:
        self.samples: list[tuple[float, float]] = []
        if os.path.exists(path):
            with open(path, encoding="ascii") as lines:
                for line in lines:
                    at, busy, _ = line.split()
                    self.samples.append((float(at), int(busy) / CLOCK_TICKS))
        self._times = [at for at, _ in self.samples]

    def _at(self, when: float) -> float:
        index = bisect.bisect_left(self._times, when)
        if index <= 0:
            return self.samples[0][1]
        if index >= len(self.samples):
            return self.samples[-1][1]
        (t0, b0), (t1, b1) = self.samples[index - 1], self.samples[index]
        return b0 + (b1 - b0) * (when - t0) / (t1 - t0)

    def between(self, start: float, end: float) -> float | None:
        if len(self.samples) < 2:
            return None
        return self._at(end) - self._at(start)


def report(times: list[TestTime], busy: BusyCpu, top: int) -> list[str]:
    lines = []
    start, end = min(t.start for t in times), max(t.end for t in times)
    lanes: dict[str, list[TestTime]] = collections.defaultdict(list)
    for test in times:
        lanes[test.worker].append(test)
    lines.append(f"run: {end - start:.0f} s of tests from the first start to the last end")
    for worker, tests in sorted(lanes.items()):
        wall = sum(t.end - t.start for t in tests)
        own = sum(t.cpu for t in tests)
        children = sum(t.children_cpu for t in tests)
        lines.append(
            f"  lane {worker}: {len(tests)} tests, {wall:.0f} s of tests, {own:.0f} CPU-s its own,"
            f" {children:.0f} its children's"
        )
    machine = busy.between(start, end)
    if machine is not None:
        own_all = sum(t.cpu for t in times)
        children_all = sum(t.children_cpu for t in times)
        lines.append(
            f"machine: {machine:.0f} busy CPU-s of {CORES * (end - start):.0f} "
            f"({machine / (CORES * (end - start)):.0%}); the workers' own {own_all:.0f}, "
            f"their reaped children's {children_all:.0f}, "
            f"the rest {machine - own_all - children_all:.0f}"
        )
    modules: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0, 0.0])
    worker_of: dict[str, str] = {}
    for test in times:
        row = modules[test.module]
        row[0] += test.end - test.start
        row[1] += test.cpu
        row[2] += test.children_cpu
        worker_of[test.module] = test.worker
    lines.append(f"slowest modules (of {len(modules)}): wall s, own CPU-s, children's CPU-s, lane")
    ranked = sorted(modules.items(), key=lambda item: -item[1][0])[:top]
    for module, (wall, own, children) in ranked:
        lines.append(f"  {wall:7.1f} {own:7.1f} {children:7.1f}  {worker_of[module]}  {module}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("times", help="the file REPLOG_TEST_TIMES named")
    parser.add_argument("--top", type=int, default=40, help="how many modules to list")
    args = parser.parse_args(argv)
    try:
        times = read_times(args.times)
    except (OSError, ValueError) as exc:
        print(f"ci_lanes: cannot read {args.times}: {exc}", file=sys.stderr)
        return 2
    if not times:
        print(f"ci_lanes: {args.times} records no test", file=sys.stderr)
        return 2
    print("\n".join(report(times, BusyCpu(args.times + ".cpu"), args.top)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
