"""Append stalls under writeback: log segments with write hints against plain appends, same run.

Usage::

    .venv/bin/python bench/append_stalls.py             # 3 runs of each, about 3 minutes
    .venv/bin/python bench/append_stalls.py --quick     # one short run of each

What it measures. Three files are appended to at `--rate-mb` MB/s each (a broker's three
replicas on one disk, as in bench/produce.py's paced trials), in 256 KiB + 61 byte appends
(batch-sized, not page-aligned), for `--seconds`. Part-way through (at 60%), a thread
`fdatasync`s the first file, as the log manager does when a 1 GiB segment rolls. Each append's
time is measured. The two sides are the same `OsSegmentFile` code: "plain" is an untuned file
(what every append was before write hints), "hinted" is tuned for appends
(`OsSegmentFile.tune_for_appends`: writeback started every 4 MiB, the page cache left to the
kernel; see replog/storage/write_hints.py). The order flips every run; between runs the files
are deleted, `sync` runs, and the machine rests `--rest` seconds, so one run's writeback does
not fall into the next. Figures are medians over the runs.

What to look for: the slowest appends (p99.9, max) and the number over 5 ms. A broker appends
on its event loop, so an append's stall is every request's stall. The fdatasync's own time is
how long a roll's flush took. Without hints, the dirty data grows until the kernel's background
threshold (10% of memory by default) and is then written in a burst; run longer than it takes
to reach it (2.3 GB at 240 MB/s here: about 10 s) to see that phase.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass

from replog.storage.fs import OsSegmentFile

APPEND_BYTES = 256 * 1024 + 61
FILES = 3
SLOW_S = 0.005
SYNC_AT = 0.6


@dataclass
class Run:
    mode: str
    latencies_s: list[float]
    fdatasync_s: float

    def quantile(self, q: float) -> float:
        ordered = sorted(self.latencies_s)
        return ordered[min(len(ordered) - 1, int(len(ordered) * q))]

    @property
    def slow(self) -> int:
        return sum(latency > SLOW_S for latency in self.latencies_s)


def one_run(directory: str, mode: str, rate_mb: float, seconds: float) -> Run:
    files = [OsSegmentFile(os.path.join(directory, f"{i}.log"), create=True) for i in range(FILES)]
    if mode == "hinted":
        for file in files:
            file.tune_for_appends()
    data = os.urandom(APPEND_BYTES)
    interval = APPEND_BYTES / (rate_mb * 1e6)
    latencies: list[float] = []
    synced: list[float] = []

    def roll_flush() -> None:
        time.sleep(seconds * SYNC_AT)
        started = time.perf_counter()
        files[0].fdatasync()
        synced.append(time.perf_counter() - started)

    flusher = threading.Thread(target=roll_flush, daemon=True)
    start = time.perf_counter()
    flusher.start()
    n = 0
    while (now := time.perf_counter()) - start < seconds:
        due = start + n * interval
        if due > now:
            time.sleep(due - now)
        for file in files:
            before = time.perf_counter()
            file.append(data)
            latencies.append(time.perf_counter() - before)
        n += 1
    flusher.join()
    for file in files:
        file.close()
        os.remove(file.path)
    return Run(mode, latencies, synced[0])


def median_of(runs: list[Run], value: str) -> float:
    return statistics.median(float(getattr(run, value)) for run in runs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rate-mb", type=float, default=80.0, help="MB/s into each file")
    parser.add_argument("--rest", type=float, default=5.0)
    parser.add_argument("--dir", default=None, help="where the files go (default: a temp dir)")
    parser.add_argument("--quick", action="store_true", help="1 run of 6 s each")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.seconds, args.rest = 1, 6.0, 1.0
    runs: dict[str, list[Run]] = {"plain": [], "hinted": []}
    print(
        f"# {platform.node()} {platform.machine()} {os.cpu_count()} cpus, Linux "
        f"{platform.release()}; {FILES} files x {args.rate_mb:g} MB/s, {args.seconds:g} s, "
        f"fdatasync of file 0 at {SYNC_AT * args.seconds:g} s, {args.runs} run(s) each"
    )
    with tempfile.TemporaryDirectory(prefix="replog-bench-stalls-", dir=args.dir) as directory:
        for i in range(args.runs):
            order = ("plain", "hinted") if i % 2 == 0 else ("hinted", "plain")
            for mode in order:
                subprocess.run(["sync"], check=True)
                time.sleep(args.rest)
                run = one_run(directory, mode, args.rate_mb, args.seconds)
                runs[mode].append(run)
                print(
                    f"  run {i + 1} {mode:6}  p99 {run.quantile(0.99) * 1e3:6.2f} ms  "
                    f"p99.9 {run.quantile(0.999) * 1e3:6.2f} ms  "
                    f"max {max(run.latencies_s) * 1e3:6.1f} ms  >5 ms: {run.slow:3}  "
                    f"fdatasync {run.fdatasync_s * 1e3:5.0f} ms",
                    flush=True,
                )
    print()
    print("| appends | p50 ms | p99 ms | p99.9 ms | max ms | appends > 5 ms | roll fdatasync ms |")
    print("|---|---|---|---|---|---|---|")
    medians: dict[str, dict[str, float]] = {}
    for mode, done in runs.items():
        figures = {
            "p50": statistics.median(r.quantile(0.5) * 1e3 for r in done),
            "p99": statistics.median(r.quantile(0.99) * 1e3 for r in done),
            "p999": statistics.median(r.quantile(0.999) * 1e3 for r in done),
            "max": statistics.median(max(r.latencies_s) * 1e3 for r in done),
            "slow": median_of(done, "slow"),
            "sync": median_of(done, "fdatasync_s") * 1e3,
        }
        medians[mode] = figures
        print(
            f"| {mode} | {figures['p50']:.3f} | {figures['p99']:.2f} | {figures['p999']:.2f} | "
            f"{figures['max']:.1f} | {figures['slow']:.0f} | {figures['sync']:.0f} |"
        )
    plain, hinted = medians["plain"], medians["hinted"]
    print(
        f"\nhinted / plain: p99.9 {hinted['p999'] / plain['p999']:.2f}x, "
        f"max {hinted['max'] / plain['max']:.2f}x, "
        f"roll fdatasync {hinted['sync'] / max(plain['sync'], 1e-9):.2f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
