"""How much do timeline structures cost next to a plain dict?

Measures, in one process and against a plain dict baseline run alongside:
- live reads (`m.live[k]`, `m[k]`, `m.get(k)`, `k in m`) with one snapshot outstanding (the
  usual case), and writes (`m[k] = v`, `del m[k]`) with 0, 1 and 10 outstanding. Writes go
  one batch of keys per fresh snapshot, as a controller replays them, and are measured on
  first touch (every write records a delta, the common case on an active controller) and
  again on keys already recorded;
- revert time against the number of changes since the snapshot, next to what restoring a
  plain dict copy of the same live map costs (the copy-per-snapshot design it replaces);
- bytes per recorded delta (tracemalloc), next to bytes per entry of a plain dict.

Every figure is the median of several runs; loops run with the garbage collector paused, for
the baseline and the timeline alike, as timeit does.

Usage: .venv/bin/python bench/timeline.py [--quick]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from time import perf_counter_ns

# Run as a script, this file's own directory comes first on sys.path, where its name would
# shadow the `timeline` package; put the checkout it belongs to in front.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from replog.timeline import SnapshotRegistry, TimelineHashMap


@dataclass(frozen=True)
class Scale:
    keys: int  # entries in the map for the throughput loops
    batch: int  # keys written per snapshot, as a controller writes per replayed batch
    repeats: int
    changes: tuple[int, ...]  # revert sizes
    revert_live_keys: int  # live map size for the revert measurements


FULL = Scale(
    keys=100_000, batch=1_000, repeats=9, changes=(1_000, 10_000, 100_000), revert_live_keys=200_000
)
QUICK = Scale(keys=5_000, batch=500, repeats=5, changes=(100, 1_000), revert_live_keys=2_000)

Row = tuple[str, float, float, str]  # name, baseline, timeline, goal ("" for none)


def timed(loop: Callable[[], object]) -> int:
    """Nanoseconds one call of `loop` takes, with the garbage collector paused."""
    gc.collect()
    gc.disable()
    try:
        start = perf_counter_ns()
        loop()
        return perf_counter_ns() - start
    finally:
        gc.enable()


def compare(
    baseline: Callable[[], int], candidate: Callable[[], int], repeats: int, ops: int
) -> tuple[float, float]:
    """Median nanoseconds per operation of each run function (each returns nanoseconds for
    `ops` operations). They alternate, so both see the same load on a shared machine."""
    baseline_ns, candidate_ns = [], []
    for _ in range(repeats):
        baseline_ns.append(baseline())
        candidate_ns.append(candidate())
    return statistics.median(baseline_ns) / ops, statistics.median(candidate_ns) / ops


def read_rows(scale: Scale) -> list[Row]:
    keys = [f"topic-{i}" for i in range(scale.keys)]
    reg = SnapshotRegistry()
    m: TimelineHashMap[str, int] = TimelineHashMap(reg)
    d: dict[str, int] = {}
    for i, key in enumerate(keys):
        m[key] = i
        d[key] = i
    reg.get_or_create_snapshot(0)  # reads do not depend on history; one snapshot is typical
    live = m.live

    def dict_index() -> None:
        for k in keys:
            d[k]

    def live_index() -> None:
        for k in keys:
            live[k]

    def map_index() -> None:
        for k in keys:
            m[k]

    def dict_get() -> None:
        for k in keys:
            d.get(k)

    def map_get() -> None:
        for k in keys:
            m.get(k)

    def dict_in() -> None:
        for k in keys:
            k in d  # noqa: B015

    def live_in() -> None:
        for k in keys:
            k in live  # noqa: B015

    def map_in() -> None:
        for k in keys:
            k in m  # noqa: B015

    def row(name: str, baseline: Callable[[], None], loop: Callable[[], None], goal: str) -> Row:
        medians = compare(lambda: timed(baseline), lambda: timed(loop), scale.repeats, len(keys))
        return (name, *medians, goal)

    return [
        row("get: m.live[k] vs d[k]", dict_index, live_index, "<= 1.5x"),
        row("get: m[k] vs d[k]", dict_index, map_index, "<= 1.5x"),
        row("get: m.get(k) vs d.get(k)", dict_get, map_get, ""),
        row("contains: k in m.live vs k in d", dict_in, live_in, ""),
        row("contains: k in m vs k in d", dict_in, map_in, ""),
    ]


class WriteFixture:
    """A map and a dict over the same keys, written one batch per snapshot, keeping
    `outstanding` snapshots alive (0: none are ever created)."""

    def __init__(self, scale: Scale, outstanding: int) -> None:
        self.keys = [f"topic-{i}" for i in range(scale.keys)]
        self.batches = [
            self.keys[start : start + scale.batch] for start in range(0, scale.keys, scale.batch)
        ]
        self.outstanding = outstanding
        self.reg = SnapshotRegistry()
        self.m: TimelineHashMap[str, int] = TimelineHashMap(self.reg)
        self.d: dict[str, int] = {}
        self.next_offset = 0
        self.fill()

    def fill(self) -> None:
        for key in self.keys:
            self.m[key] = 0
            self.d[key] = 0

    def new_snapshot(self) -> None:
        """Start a fresh snapshot (so the next writes record), keeping `outstanding` alive."""
        if self.outstanding == 0:
            return
        self.reg.get_or_create_snapshot(self.next_offset)
        self.next_offset += 1
        offsets = self.reg.snapshot_offsets()
        if len(offsets) > self.outstanding:
            self.reg.delete_snapshots_up_to(offsets[-self.outstanding])
        assert len(self.reg.snapshot_offsets()) <= self.outstanding

    def run(self, write: Callable[[list[str]], None], record_first: bool = False) -> int:
        """Nanoseconds `write` takes over every batch, each after a fresh snapshot (not
        timed); with `record_first`, each batch is written once untimed, so the timed write
        finds its keys already recorded."""
        total = 0
        gc.collect()
        gc.disable()
        try:
            for batch in self.batches:
                self.new_snapshot()
                if record_first:
                    write(batch)
                start = perf_counter_ns()
                write(batch)
                total += perf_counter_ns() - start
        finally:
            gc.enable()
        return total


def write_rows(scale: Scale, outstanding: int) -> list[Row]:
    fixture = WriteFixture(scale, outstanding)
    m, d = fixture.m, fixture.d
    ops = len(fixture.keys)
    goal = "<= 2x" if outstanding == 0 else "<= 4x"
    label = f"{outstanding} snapshot{'s' if outstanding != 1 else ''}"

    def dict_set(batch: list[str]) -> None:
        for k in batch:
            d[k] = 1

    def map_set(batch: list[str]) -> None:
        for k in batch:
            m[k] = 1

    def dict_delete(batch: list[str]) -> None:
        for k in batch:
            del d[k]

    def map_delete(batch: list[str]) -> None:
        for k in batch:
            del m[k]

    def deletes(delete: Callable[[list[str]], None]) -> int:
        fixture.fill()
        return fixture.run(delete)

    rows = [
        (
            f"set, {label}, first touch",
            *compare(
                lambda: fixture.run(dict_set), lambda: fixture.run(map_set), scale.repeats, ops
            ),
            goal,
        )
    ]
    if outstanding:
        rows.append(
            (
                f"set, {label}, key already recorded",
                *compare(
                    lambda: fixture.run(dict_set, record_first=True),
                    lambda: fixture.run(map_set, record_first=True),
                    scale.repeats,
                    ops,
                ),
                goal,
            )
        )
    rows.append(
        (
            f"delete, {label}, first touch",
            *compare(lambda: deletes(dict_delete), lambda: deletes(map_delete), scale.repeats, ops),
            "",
        )
    )
    return rows


def revert_row(changes: int, live_keys: list[str], repeats: int) -> Row:
    """Revert after `changes` writes (a third overwrite, a third delete, a third insert new
    keys), next to restoring a dict copy of the same live map."""
    assert changes <= len(live_keys), "changes must fit in the live map"
    reg = SnapshotRegistry()
    m: TimelineHashMap[str, int] = TimelineHashMap(reg)
    for i, key in enumerate(live_keys):
        m[key] = i
    saved = dict(m.live)
    touched = live_keys[:changes]
    new_keys = [f"new-{i}" for i in range(changes)]

    def revert_once() -> int:
        reg.get_or_create_snapshot(1)
        for i in range(changes):
            kind = i % 3
            if kind == 0:
                m[touched[i]] = -i
            elif kind == 1:
                del m[touched[i]]
            else:
                m[new_keys[i]] = i
        elapsed = timed(lambda: reg.revert_to_snapshot(1))
        reg.delete_snapshot(1)
        assert m == saved, "revert must restore the snapshot exactly"
        return elapsed

    baseline_ms = statistics.median(timed(saved.copy) for _ in range(repeats)) / 1e6
    timeline_ms = statistics.median(revert_once() for _ in range(repeats)) / 1e6
    name = f"revert {changes:,} changes ({len(live_keys):,} live) vs dict copy"
    return (name, baseline_ms, timeline_ms, "")


def revert_rows(scale: Scale) -> list[Row]:
    live_keys = [f"topic-{i}" for i in range(scale.revert_live_keys)]
    return [revert_row(changes, live_keys, scale.repeats) for changes in scale.changes]


def memory_rows(scale: Scale) -> list[Row]:
    """Bytes per recorded delta entry, next to bytes per entry of a plain dict holding the same
    preexisting keys and values: both figures count only the table structures."""
    keys = [f"topic-{i}" for i in range(scale.keys)]
    values = list(range(1000, 1000 + scale.keys))
    reg = SnapshotRegistry()
    m: TimelineHashMap[str, int] = TimelineHashMap(reg)
    for key in keys:
        m[key] = 0
    offsets = iter(range(10**9))

    def traced_bytes(build: Callable[[], object]) -> tuple[int, object]:
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            built = build()
            return tracemalloc.get_traced_memory()[0] - before, built
        finally:
            tracemalloc.stop()

    def build_dict() -> object:
        return dict(zip(keys, values, strict=True))

    def record_deltas() -> object:
        snapshot_offset = next(offsets)
        reg.get_or_create_snapshot(snapshot_offset)
        for key, value in zip(keys, values, strict=True):
            m[key] = value  # first touch: records the old value
        return snapshot_offset

    dict_samples, delta_samples = [], []
    for _ in range(scale.repeats):
        dict_bytes, built = traced_bytes(build_dict)
        del built
        dict_samples.append(dict_bytes / len(keys))
        delta_bytes, snapshot_offset = traced_bytes(record_deltas)
        assert reg.delta_count() == len(keys)
        assert isinstance(snapshot_offset, int)
        reg.delete_snapshots_up_to(snapshot_offset + 1)
        assert reg.delta_count() == 0, "deleting the snapshot frees its deltas"
        delta_samples.append(delta_bytes / len(keys))
    return [
        (
            "bytes per recorded delta vs per dict entry",
            statistics.median(dict_samples),
            statistics.median(delta_samples),
            "",
        )
    ]


def met(goal: str, ratio: float) -> str:
    if not goal:
        return ""
    limit = float(goal.removeprefix("<= ").removesuffix("x"))
    return "met" if ratio <= limit else "MISSED"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    args = parser.parse_args()
    scale = QUICK if args.quick else FULL
    print(
        f"timeline vs dict: {scale.keys:,} keys, median of {scale.repeats} runs, "
        f"Python {sys.version.split()[0]}"
    )
    rows = read_rows(scale)
    for outstanding in (0, 1, 10):
        rows += write_rows(scale, outstanding)
    rows += revert_rows(scale)
    rows += memory_rows(scale)
    print(f"| {'measurement':52} | {'dict':>9} | {'timeline':>9} | {'ratio':>6} | goal")
    print(f"|{'-' * 54}|{'-' * 11}|{'-' * 11}|{'-' * 8}|------")
    for name, baseline, value, goal in rows:
        ratio = value / baseline
        verdict = f"{goal} {met(goal, ratio)}".strip()
        print(f"| {name:52} | {baseline:9.2f} | {value:9.2f} | {ratio:5.2f}x | {verdict}")
    print("units: reads and writes in ns per operation, reverts in ms, memory in bytes per entry")


if __name__ == "__main__":
    main()
