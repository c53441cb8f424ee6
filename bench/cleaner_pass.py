"""One log cleaner pass, alone: CPU time per record and per MB of `clean_log` over a synthetic
compacted log, against the floor of reading the same batches (issue #78).

The log (per shape) is what bench/cleaner_produce.py's `load` topic holds while its cleaner is
busy: 200-byte values over 5,000 keys written round-robin (`key-N`, N = the record's number
modulo 5,000), `segment.bytes` 256 KiB, `--rounds` rounds of the keys already cleaned once
(about 1.2 MB live), then `--dirty-segments` segments of newer records not cleaned yet, then the
active segment. Shapes: `bench`, batches of 25 records (that producer's linger of 5 ms at
5,000 records a second); `16k`, batches of 70 records (Kafka's default `batch.size`, 16 KiB);
`random`, batches of 25 records over keys drawn at random, so most batches of the clean section
keep some records and lose others (rewritten) instead of going or staying whole; `dirty`, a log
all dirty (never cleaned): 20,000 keys written once each round-robin in batches of 25, 40
segments, as bench/cleaner_throughput.py's `dirty-100k` but smaller.

A run copies the shape's log, opens it and times one pass (`clean_log` from the first dirty
offset to the active segment, a 128 MiB key map as a node's single cleaner thread has, the
swap included) in CPU time of the process (`time.process_time`: user and system, the page
faults of the key map's memory among them), `--repeat` times. The floor, in the same process:
reading the same bytes as the pass does (the dirty segments, then every sealed one) and
decoding each batch's header, no more.

Prints per shape: us per record read by the pass's filter, ms per MB, and the floor's us per
record, min / median / max over the runs; the segment groups the pass swapped in and those it
left as they were (`CleaningPass.groups_kept`); with `--base COMMIT` the same from that
commit's code (fresh processes taking turns, `base_commit.py`) and the working tree / base
ratio per run. Every pass's cleaned log is checked identical to the first's (same bytes: both
versions must clean alike).

`--phases`: where each pass's time goes, wall and CPU ms a pass per phase, each phase's own
time (its inner phases' taken out), timed by wrapping the functions and file operations a
pass calls (`PHASES`; the wrapping costs a few us a call, so the totals are above the plain
run's): the key map, the filter, the rest of writing a cleaned segment (reading, indexing,
the loop), opening and creating files, appending to them, syncing files, the swap's own work
(`Log.replace_with_cleaned`: the log's lock, the segment map, opening the new segment),
renames, syncing the directory, removing files, and the rest of the pass (`other`: planning,
grouping).

    .venv/bin/python bench/cleaner_pass.py [--runs 5] [--repeat 3] [--base main] [--phases]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from base_commit import add_arguments, against_lines, runs_against

from replog.record import build_batch
from replog.record.header import iter_frames, read_header
from replog.storage import Log, LogConfig
from replog.storage.cleaner import log_cleaning
from replog.storage.cleaner.batch_filter import BatchFilter
from replog.storage.cleaner.log_cleaning import clean_log
from replog.storage.cleaner.offset_map import OffsetMap
from replog.storage.fs import OsFileSystem, OsSegmentFile

KEYS = 5_000
VALUE_BYTES = 200
SEGMENT_BYTES = 256 << 10
MAP_BYTES = 128 << 20
T0 = 1_700_000_000_000
HOUR = 3_600_000
# name: (records a batch, keys drawn at random)
SHAPES = {"bench": (25, False), "16k": (70, False), "random": (25, True), "dirty": (25, False)}
# The shapes of a log all dirty: name: (keys, dirty segments); no rounds cleaned first.
ALL_DIRTY = {"dirty": (20_000, 40)}
CONFIG = LogConfig(segment_bytes=SEGMENT_BYTES, cleanup_policy="compact")


def build_template(
    directory: str,
    batch_records: int,
    random_keys: bool,
    rounds: int,
    dirty_segments: int,
    *,
    value_bytes: int = VALUE_BYTES,
    keys: int = KEYS,
) -> dict[str, int]:
    """The shape's log in `directory` (module docstring; `value_bytes` and `keys` its values'
    size and its keys' count); returns the pass's offsets. With no `rounds`, the whole log is
    dirty."""
    rng = random.Random(78)
    log = Log.open(directory, CONFIG)
    written = 0

    def append(count: int) -> None:
        nonlocal written
        records = []
        for n in range(written, written + count):
            key = rng.randrange(keys) if random_keys else n % keys
            records.append((T0 + n, f"key-{key}".encode(), rng.randbytes(value_bytes), ()))
        log.append_as_leader(build_batch(records), 0)
        written += count

    while written < rounds * keys:
        append(batch_records)
    log.high_watermark = log.log_end_offset
    first = clean_log(
        log,
        OffsetMap(MAP_BYTES),
        first_dirty=0,
        first_uncleanable=log.active_segment.base_offset,
        now_ms=T0,
        delete_retention_ms=HOUR,
    )
    segments_before = len(log.segments())
    while len(log.segments()) < segments_before + dirty_segments:
        append(batch_records)
    log.roll()
    log.high_watermark = log.log_end_offset
    offsets = {"first_dirty": first.end_offset, "first_uncleanable": log.active_segment.base_offset}
    log.close()
    return offsets


def floor_cpu(directory: str, first_dirty: int, first_uncleanable: int) -> float:
    """CPU seconds to read what a pass reads and decode each batch's header (module doc)."""
    log = Log.open(directory, CONFIG)
    sealed = [s.log_path for s in log.segments()[:-1]]
    dirty = [s.log_path for s in log.segments()[:-1] if s.base_offset >= first_dirty]
    log.close()
    began = time.process_time()
    for path in [*dirty, *sealed]:
        with open(path, "rb") as file:
            data = file.read()
        for position, _ in iter_frames(data):
            read_header(data, position)
    return time.process_time() - began


# What `--phases` wraps: (owner, attribute, phase). The owner's attribute is looked up at each
# call (a module's function, a class's method), so the wrapper is what the pass calls.
PHASES: tuple[tuple[Any, str, str], ...] = (
    (log_cleaning, "_build_offset_map", "key map"),
    (BatchFilter, "filter", "filter"),
    (log_cleaning, "_write_cleaned", "read, index, loop"),
    (OsFileSystem, "open_segment_file", "open and create"),
    (OsSegmentFile, "append", "append"),
    (OsSegmentFile, "fsync", "sync files"),
    (OsSegmentFile, "fdatasync", "sync files"),
    (Log, "replace_with_cleaned", "swap's own work"),
    (OsFileSystem, "rename", "rename"),
    (OsFileSystem, "fsync_dir", "sync directory"),
    (OsFileSystem, "remove_all", "remove"),
)


class Phases:
    """Each phase's own wall and CPU seconds (its inner phases' taken out) while wrapped."""

    def __init__(self) -> None:
        self.wall: dict[str, float] = {}
        self.cpu: dict[str, float] = {}
        # Per phase entered and not left: its start (wall, CPU) and its inner phases' total.
        self._open: list[list[float]] = []

    def wrap(self, function: Callable[..., Any], phase: str) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            self._open.append([time.perf_counter(), time.process_time(), 0.0, 0.0])
            try:
                return function(*args, **kwargs)
            finally:
                began_wall, began_cpu, inner_wall, inner_cpu = self._open.pop()
                wall = time.perf_counter() - began_wall
                cpu = time.process_time() - began_cpu
                self.wall[phase] = self.wall.get(phase, 0.0) + wall - inner_wall
                self.cpu[phase] = self.cpu.get(phase, 0.0) + cpu - inner_cpu
                if self._open:
                    self._open[-1][2] += wall
                    self._open[-1][3] += cpu

        return timed

    def install(self) -> None:
        for owner, name, phase in PHASES:
            setattr(owner, name, self.wrap(getattr(owner, name), phase))

    def reset(self) -> None:
        self.wall.clear()
        self.cpu.clear()


def log_digest(directory: str) -> str:
    digest = hashlib.sha256()
    for name in sorted(os.listdir(directory)):
        if name.endswith(".log"):
            with open(os.path.join(directory, name), "rb") as file:
                digest.update(name.encode() + file.read())
    return digest.hexdigest()


def one_child(template_root: str, repeat: int, phases: bool) -> dict[str, list[float]]:
    """Each shape's figures over `repeat` passes, in this process (module docstring)."""
    figures: dict[str, list[float]] = {}
    offset_map = OffsetMap(MAP_BYTES)  # one for every pass, as a cleaning process keeps it
    timed = Phases()
    if phases:
        timed.install()
    for shape in SHAPES:
        template = os.path.join(template_root, shape)
        with open(os.path.join(template_root, f"{shape}.json")) as file:
            offsets = json.load(file)
        for number in range(repeat + 1):  # the first unmeasured: the map's pages fault in
            with tempfile.TemporaryDirectory(prefix="cleaner-pass-") as scratch:
                directory = os.path.join(scratch, "load-0")
                shutil.copytree(template, directory)
                log = Log.open(directory, CONFIG)
                timed.reset()
                began_wall = time.perf_counter()
                began = time.process_time()
                result = clean_log(
                    log,
                    offset_map,
                    first_dirty=offsets["first_dirty"],
                    first_uncleanable=offsets["first_uncleanable"],
                    now_ms=T0,
                    delete_retention_ms=HOUR,
                )
                cpu = time.process_time() - began
                wall = time.perf_counter() - began_wall
                spent = phase_figures(timed, wall, cpu)  # before the close's own file work
                log.close()
                if result.abandoned or result.end_offset != offsets["first_uncleanable"]:
                    raise SystemExit(f"{shape}: the pass did not run to its end: {result}")
                digest = log_digest(directory)
                floor = floor_cpu(template, offsets["first_dirty"], offsets["first_uncleanable"])
            if number == 0:
                continue
            stats = result.stats
            figures.setdefault(f"{shape}: pass us/record", []).append(
                cpu * 1e6 / stats.records_read
            )
            figures.setdefault(f"{shape}: pass ms/MB", []).append(
                cpu * 1e3 / (stats.bytes_read / 1e6)
            )
            figures.setdefault(f"{shape}: floor us/record", []).append(
                floor * 1e6 / stats.records_read
            )
            figures.setdefault(f"{shape}: cleaned log", []).append(int(digest[:12], 16))
            figures.setdefault(f"{shape}: records read", []).append(stats.records_read)
            figures.setdefault(f"{shape}: batches rewritten", []).append(stats.batches_rewritten)
            figures.setdefault(f"{shape}: groups swapped", []).append(result.groups_swapped)
            kept = getattr(result, "groups_kept", 0)  # a base without it keeps none
            figures.setdefault(f"{shape}: groups kept", []).append(kept)
            if phases:
                for phase, seconds in spent.items():
                    figures.setdefault(f"{shape}: {phase}", []).append(seconds * 1e3)
    return figures


def phase_figures(timed: Phases, wall: float, cpu: float) -> dict[str, float]:
    """Per phase (`PHASES`' order, then `other`: the pass's time no phase took), its wall and
    CPU seconds in the pass."""
    names = list(dict.fromkeys(phase for _, _, phase in PHASES))
    shown: dict[str, float] = {}
    for kind, total, spent in (("wall", wall, timed.wall), ("cpu", cpu, timed.cpu)):
        for name in names:
            shown[f"{name} ms {kind}"] = spent.get(name, 0.0)
        shown[f"other ms {kind}"] = total - sum(spent.values())
        shown[f"pass ms {kind}"] = total
    return shown


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh processes (per side)")
    parser.add_argument("--repeat", type=int, default=3, help="passes per process and shape")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the keys, cleaned")
    parser.add_argument("--dirty-segments", type=int, default=2)
    parser.add_argument(
        "--phases", action="store_true", help="each pass's time per phase, wall and CPU"
    )
    parser.add_argument("--template-root", help=argparse.SUPPRESS)
    add_arguments(parser)
    args = parser.parse_args()
    if args.emit_json:
        print(json.dumps(one_child(args.template_root, args.repeat, args.phases)))
        return
    with tempfile.TemporaryDirectory(prefix="cleaner-pass-templates-") as root:
        for shape, (batch_records, random_keys) in SHAPES.items():
            keys, dirty_segments = ALL_DIRTY.get(shape, (KEYS, args.dirty_segments))
            offsets = build_template(
                os.path.join(root, shape),
                batch_records,
                random_keys,
                0 if shape in ALL_DIRTY else args.rounds,
                dirty_segments,
                keys=keys,
            )
            with open(os.path.join(root, f"{shape}.json"), "w") as file:
                json.dump(offsets, file)
        child_args = ["--repeat", str(args.repeat), "--template-root", root]
        if args.phases:
            child_args.append("--phases")
        work, base = runs_against(__file__, child_args, args.runs, args.base)
    for case, values in work.items():
        if case.endswith("cleaned log"):
            sides = [values] + ([base[case]] if base else [])
            same = len({v for side in sides for v in side}) == 1
            print(f"{case}: {'identical' if same else 'DIFFERENT'} in every pass")
    shown = {c: v for c, v in work.items() if not c.endswith("cleaned log")}
    shown_base = {c: base[c] for c in shown} if base else None
    for line in against_lines(shown, shown_base, args.base):
        print(line)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
