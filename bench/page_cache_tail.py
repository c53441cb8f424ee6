"""Appends into fresh page cache: a log segment with a page-cache tail against one that leaves
the cache to the kernel, and raw `os.pwrite`, same run.

Usage::

    .venv/bin/python bench/page_cache_tail.py             # 3 runs of each, about 4 minutes
    .venv/bin/python bench/page_cache_tail.py --quick     # one 1 GiB run of each

What it measures. One file is appended to as fast as one thread can, in 1 MiB appends, until
`--gib` GiB; each append is timed. Three sides:
- "raw": `os.pwrite` at the end of a plain file, no hints (the baseline);
- "kernel": a `OsSegmentFile` tuned for appends (writeback started every 4 MiB) with
  `log.page.cache.tail.bytes=-1`, which leaves the page cache to the kernel as Kafka does;
- "tail": the same with the default tail (64 MiB): what lies further behind the end is dropped
  from the page cache once its writeback has started (replog/storage/write_hints.py).
The order rotates every run; between sides the file is deleted, `sync` runs and the machine
rests `--rest` seconds. Figures are medians over the runs.

What to look for. Where the machine's free memory is cheap to take (most hosts), "kernel" and
"raw" run at page-cache speed and "tail" costs the drops (a few %). On a VM that hands free
memory back to its host (free page reporting, a balloon), every page the guest has not used
lately must be given back by the host on first touch: "kernel" and "raw" fall to a fraction
of that speed once the cache holds more than the memory the guest freed recently, and "tail",
which hands the same pages back to its next appends, does not.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from replog.storage.fs import OsSegmentFile
from replog.storage.log_config import LogConfig

APPEND_BYTES = 1 << 20
TAIL_BYTES = LogConfig().page_cache_tail_bytes
SIDES = ("raw", "kernel", "tail")


@dataclass
class Run:
    side: str
    latencies_s: list[float]
    seconds: float
    free_mib_before: int
    free_mib_after: int

    @property
    def mb_s(self) -> float:
        return len(self.latencies_s) * APPEND_BYTES / self.seconds / 1e6

    def quantile(self, q: float) -> float:
        ordered = sorted(self.latencies_s)
        return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def free_mib() -> int:
    """MemFree from /proc/meminfo in MiB (0 where there is none)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemFree:"):
                    return int(line.split()[1]) // 1024
    except OSError:
        pass
    return 0


def one_run(directory: str, side: str, total_bytes: int) -> Run:
    """Append `total_bytes` in 1 MiB appends to a new file on `side`; the file is removed."""
    path = os.path.join(directory, f"{side}.log")
    data = os.urandom(APPEND_BYTES)
    latencies: list[float] = []
    before = free_mib()
    start = time.perf_counter()
    if side == "raw":
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            for position in range(0, total_bytes, APPEND_BYTES):
                t = time.perf_counter()
                os.pwrite(fd, data, position)
                latencies.append(time.perf_counter() - t)
        finally:
            os.close(fd)
    else:
        file = OsSegmentFile(path, create=True)
        file.tune_for_appends(TAIL_BYTES if side == "tail" else -1)
        try:
            for _ in range(0, total_bytes, APPEND_BYTES):
                t = time.perf_counter()
                file.append(data)
                latencies.append(time.perf_counter() - t)
        finally:
            file.close()
    seconds = time.perf_counter() - start
    after = free_mib()
    os.remove(path)
    return Run(side, latencies, seconds, before, after)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--gib", type=float, default=6.0, help="GiB appended per side and run")
    parser.add_argument("--rest", type=float, default=5.0)
    parser.add_argument("--dir", default=None, help="where the file goes (default: a temp dir)")
    parser.add_argument("--quick", action="store_true", help="1 run of 1 GiB each")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.gib, args.rest = 1, 1.0, 1.0
    total = int(args.gib * (1 << 30)) // APPEND_BYTES * APPEND_BYTES
    print(
        f"# {platform.node()} {platform.machine()} {os.cpu_count()} cpus, Linux "
        f"{platform.release()}; {args.gib:g} GiB in 1 MiB appends per side, tail "
        f"{TAIL_BYTES >> 20} MiB, {args.runs} run(s) each; free memory {free_mib()} MiB"
    )
    runs: dict[str, list[Run]] = {side: [] for side in SIDES}
    with tempfile.TemporaryDirectory(prefix="replog-bench-tail-", dir=args.dir) as directory:
        for i in range(args.runs):
            order = SIDES[i % len(SIDES) :] + SIDES[: i % len(SIDES)]
            for side in order:
                subprocess.run(["sync"], check=True)
                time.sleep(args.rest)
                run = one_run(directory, side, total)
                runs[side].append(run)
                print(
                    f"  run {i + 1} {side:6} {run.mb_s:7.0f} MB/s  p50 "
                    f"{run.quantile(0.5) * 1e3:5.2f} ms  p99 {run.quantile(0.99) * 1e3:6.2f} ms"
                    f"  max {max(run.latencies_s) * 1e3:6.1f} ms  free memory "
                    f"{run.free_mib_before} -> {run.free_mib_after} MiB",
                    flush=True,
                )
    print()
    print("| side | MB/s | to raw | p50 ms per 1 MiB | p99 ms | max ms | free memory used, MiB |")
    print("|---|---|---|---|---|---|---|")
    raw_mb_s = statistics.median(r.mb_s for r in runs["raw"])
    for side, done in runs.items():
        mb_s = statistics.median(r.mb_s for r in done)
        print(
            f"| {side} | {mb_s:.0f} | {mb_s / raw_mb_s:.2f}x | "
            f"{statistics.median(r.quantile(0.5) for r in done) * 1e3:.2f} | "
            f"{statistics.median(r.quantile(0.99) for r in done) * 1e3:.2f} | "
            f"{statistics.median(max(r.latencies_s) for r in done) * 1e3:.1f} | "
            f"{statistics.median(r.free_mib_before - r.free_mib_after for r in done):.0f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
