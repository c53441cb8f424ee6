"""Cleaning throughput and memory: whole log cleaner passes against a plain sequential read and
write of the same bytes, in the same run (issue #78: >= 0.5x; memory within the dedupe buffer).

Cases (`CASES`): a shape of log (`SHAPES`, built as bench/cleaner_pass.py builds its `load` log:
256 KiB segments, `key-N` keys written round-robin, `rounds` rounds of them cleaned once, then
`dirty` segments not cleaned yet, then the active segment) and a dedupe buffer
(`log.cleaner.dedupe.buffer.size`). `bench`: 200-byte values in batches of 25 records; `16k`:
batches of 70 (Kafka's default `batch.size`); `1k`: 1 KiB values in batches of 15 (Kafka's
usual record size, about 16 KiB a batch); `dirty-100k`: 100,000 keys in 100 segments never
cleaned, with the default 128 MiB buffer (one pass, its keys in the map's dict) and with 1 MiB
(39,321 keys a pass: three passes, the map in its buffer).

A run, per case, the two sides in fresh processes on fresh copies of the case's log (their
files synced before the clock starts, and in the page cache: both sides read from a warm
cache), which goes first swapping every run:
- the cleaner: the log opened and a key map of the buffer's size made (as a node's cleaning
  process keeps them), then `clean_log` from the first dirty offset, again from where each
  pass ended until one reaches the active segment, as the cleaner's next passes would: its
  files, syncs and swaps (renames, directory syncs, removals) included. Its MB/s is the bytes
  its passes read over their wall-clock time. Its memory: the process's peak resident size
  during the passes above its size before them (`VmHWM` of `/proc/self/status`, reset through
  `/proc/self/clear_refs`).
- the plain copy: the same segment files read in order, 1 MiB a read as a pass reads, written
  into one new file per group of the pass (`group_segments_by_size`: at most `segment.bytes`),
  each synced once written as a pass syncs a cleaned segment, the directory synced, the files
  removed and the directory synced again (a swap syncs it twice). Its MB/s is the bytes it
  read over its wall-clock time.

Prints per case: the log's sealed bytes and the passes, each side's MB/s (min / median / max
over the runs), the ratio of the medians and each run's ratio, the cleaner's CPU share of its
wall time, and its peak memory above its start against the buffer; where a case takes several
passes (they reread what earlier ones cleaned), also the log's sealed bytes over the passes'
time against the copy. Every run's cleaned log is checked identical to the first's.

    .venv/bin/python bench/cleaner_throughput.py [--runs 5] [--cases bench,16k,1k,...]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any

from cleaner_pass import CONFIG, HOUR, SEGMENT_BYTES, T0, build_template, log_digest

from replog.storage import Log
from replog.storage.cleaner.grouping import GroupedSegment, group_segments_by_size
from replog.storage.cleaner.log_cleaning import clean_log
from replog.storage.cleaner.offset_map import OffsetMap

READ_BYTES = 1 << 20  # the pass's read size (`log_cleaning._READ_BYTES`)
MIB = 1 << 20
COPY_PREFIX = "plain-copy-"


@dataclass(frozen=True, slots=True)
class Shape:
    batch_records: int
    value_bytes: int
    keys: int
    rounds: int  # rounds of the keys cleaned once; 0: the whole log dirty
    dirty_segments: int


SHAPES = {
    "bench": Shape(25, 200, 5_000, 3, 2),
    "16k": Shape(70, 200, 5_000, 3, 2),
    "1k": Shape(15, 1024, 5_000, 3, 2),
    "dirty-100k": Shape(25, 200, 100_000, 0, 100),
}
# name: (shape, dedupe buffer bytes)
CASES = {
    "bench": ("bench", 128 * MIB),
    "16k": ("16k", 128 * MIB),
    "1k": ("1k", 128 * MIB),
    "dirty-100k": ("dirty-100k", 128 * MIB),
    "dirty-100k-1m": ("dirty-100k", 1 * MIB),
}


def sealed_paths(directory: str, first_uncleanable: int) -> list[str]:
    """The log's segment files below `first_uncleanable`, in offset order."""
    bases = sorted(int(name[:-4]) for name in os.listdir(directory) if name.endswith(".log"))
    return [
        os.path.join(directory, f"{base:020d}.log") for base in bases if base < first_uncleanable
    ]


def copy_groups(paths: list[str], first_uncleanable: int) -> list[list[str]]:
    """`paths` grouped as a pass groups their segments (at most `segment.bytes` a group)."""
    summaries = [
        GroupedSegment(int(os.path.basename(p)[:-4]), os.path.getsize(p), 0, 0) for p in paths
    ]
    groups = group_segments_by_size(summaries, SEGMENT_BYTES, 1, first_uncleanable)
    return [[paths[i] for i in group] for group in groups]


def sync_tree(directory: str) -> None:
    """Every file of `directory` and the directory itself synced: no writeback of the copy
    left to run beside a side's clock."""
    for name in os.listdir(directory):
        fd = os.open(os.path.join(directory, name), os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    fsync_dir(directory)


def fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _status_bytes(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise SystemExit(f"/proc/self/status has no {field}")


def reset_peak_rss() -> int:
    """The process's resident bytes, its peak (`VmHWM`) reset to them."""
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")
    return _status_bytes("VmHWM")


def plain_copy(directory: str, first_uncleanable: int) -> dict[str, Any]:
    """The plain copy's side, in this process (module docstring)."""
    groups = copy_groups(sealed_paths(directory, first_uncleanable), first_uncleanable)
    began = time.perf_counter()
    copied = 0
    made = []
    for number, group in enumerate(groups):
        out_path = os.path.join(directory, f"{COPY_PREFIX}{number}")
        made.append(out_path)
        with open(out_path, "xb") as out:
            for path in group:
                with open(path, "rb", buffering=0) as source:
                    while chunk := source.read(READ_BYTES):
                        out.write(chunk)
                        copied += len(chunk)
            out.flush()
            os.fsync(out.fileno())
    fsync_dir(directory)
    for path in made:
        os.unlink(path)
    fsync_dir(directory)
    return {"seconds": time.perf_counter() - began, "bytes": copied}


def cleaner_passes(
    directory: str, first_dirty: int, first_uncleanable: int, buffer_bytes: int
) -> dict[str, Any]:
    """The cleaner's side, in this process (module docstring)."""
    log = Log.open(directory, CONFIG)
    offset_map = OffsetMap(buffer_bytes)
    resident = reset_peak_rss()
    began, began_cpu = time.perf_counter(), time.process_time()
    passes = bytes_read = 0
    start = first_dirty
    while start < first_uncleanable:
        result = clean_log(
            log,
            offset_map,
            first_dirty=start,
            first_uncleanable=first_uncleanable,
            now_ms=T0,
            delete_retention_ms=HOUR,
        )
        if result.abandoned or result.end_offset <= start:
            raise SystemExit(f"{directory}: a pass from {start} did not move on: {result}")
        passes += 1
        bytes_read += result.stats.bytes_read
        start = result.end_offset
    seconds, cpu = time.perf_counter() - began, time.process_time() - began_cpu
    peak = _status_bytes("VmHWM")
    log.close()
    return {
        "seconds": seconds,
        "cpu_seconds": cpu,
        "bytes": bytes_read,
        "passes": passes,
        "resident_before": resident,
        "peak_extra": peak - resident,
    }


def one_side(side: str, template: str, offsets: dict[str, int], buffer_bytes: int) -> dict:
    """One side's figures from a fresh process over a fresh, synced copy of `template`."""
    with tempfile.TemporaryDirectory(prefix="cleaner-throughput-") as scratch:
        directory = os.path.join(scratch, "load-0")
        shutil.copytree(template, directory)
        sync_tree(directory)
        request = {"side": side, "directory": directory, "buffer": buffer_bytes, **offsets}
        done = subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--side", json.dumps(request)],
            check=True,
            capture_output=True,
        )
        figures: dict[str, Any] = json.loads(done.stdout.decode().splitlines()[-1])
        if side == "cleaner":
            figures["digest"] = log_digest(directory)
    return figures


def run_side(request: dict[str, Any]) -> dict[str, Any]:
    if request["side"] == "copy":
        return plain_copy(request["directory"], request["first_uncleanable"])
    return cleaner_passes(
        request["directory"],
        request["first_dirty"],
        request["first_uncleanable"],
        request["buffer"],
    )


def spread(values: list[float], digits: int = 1) -> str:
    return " / ".join(
        f"{v:.{digits}f}" for v in (min(values), statistics.median(values), max(values))
    )


def report(case: str, buffer_bytes: int, copies: list[dict], passes: list[dict]) -> list[str]:
    """The case's lines (module docstring)."""
    mb = passes[0]["bytes"] / 1e6
    pass_rates = [p["bytes"] / 1e6 / p["seconds"] for p in passes]
    copy_rates = [c["bytes"] / 1e6 / c["seconds"] for c in copies]
    ratio = statistics.median(pass_rates) / statistics.median(copy_rates)
    per_run = [p / c for p, c in zip(pass_rates, copy_rates, strict=True)]
    cpu_shares = [p["cpu_seconds"] / p["seconds"] for p in passes]
    peaks = [p["peak_extra"] / MIB for p in passes]
    resident = statistics.median(p["resident_before"] for p in passes) / MIB
    digests = {p["digest"] for p in passes}
    lines = [
        f"{case}: {copies[0]['bytes'] / 1e6:.2f} MB sealed, {passes[0]['passes']} pass(es) "
        f"reading {mb:.2f} MB; cleaned log "
        f"{'identical' if len(digests) == 1 else 'DIFFERENT'} in every run",
        f"  cleaner MB/s     {spread(pass_rates)}",
        f"  plain copy MB/s  {spread(copy_rates)}",
        f"  ratio of medians {ratio:.2f} (per run {spread(per_run, 2)})",
        f"  cleaner CPU / wall {spread(cpu_shares, 2)}",
        f"  peak memory above the start MiB {spread(peaks, 2)} (buffer "
        f"{buffer_bytes / MIB:g} MiB; resident before {resident:.1f} MiB)",
    ]
    if passes[0]["passes"] > 1:  # the passes reread cleaned segments: the log's own rate too
        log_rates = [c["bytes"] / 1e6 / p["seconds"] for c, p in zip(copies, passes, strict=True)]
        log_ratio = statistics.median(log_rates) / statistics.median(copy_rates)
        lines.append(
            f"  the log's sealed MB over the passes' time: MB/s {spread(log_rates)}, "
            f"ratio of medians {log_ratio:.2f}"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="runs of each side per case")
    parser.add_argument(
        "--cases", default=",".join(CASES), help="comma-separated cases (module docstring)"
    )
    parser.add_argument("--side", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        print(json.dumps(run_side(json.loads(args.side))))
        return
    cases = args.cases.split(",")
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        parser.error(f"unknown cases {unknown}; known: {', '.join(CASES)}")
    with tempfile.TemporaryDirectory(prefix="cleaner-throughput-templates-") as root:
        offsets: dict[str, dict[str, int]] = {}
        for name in dict.fromkeys(CASES[c][0] for c in cases):
            shape = SHAPES[name]
            offsets[name] = build_template(
                os.path.join(root, name),
                shape.batch_records,
                False,
                shape.rounds,
                shape.dirty_segments,
                value_bytes=shape.value_bytes,
                keys=shape.keys,
            )
        for case in cases:
            name, buffer_bytes = CASES[case]
            template = os.path.join(root, name)
            copies: list[dict] = []
            passes: list[dict] = []
            for run in range(args.runs):
                order = ("copy", "cleaner") if run % 2 == 0 else ("cleaner", "copy")
                for side in order:
                    figures = one_side(side, template, offsets[name], buffer_bytes)
                    (copies if side == "copy" else passes).append(figures)
            for line in report(case, buffer_bytes, copies, passes):
                print(line)
            sys.stdout.flush()


if __name__ == "__main__":
    main()
