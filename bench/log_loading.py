"""Opening a broker's logs after a clean stop: what a restart of a node holding many partitions
pays before it can serve (issue #50's restart goal), against the file system's own floor.

Measured: `LogManager(log_dir)` (every log opened: its directory listed, segments and the
leader-epoch checkpoint read, leftovers removed) followed by `preload_producer_tables` (each
log's producer snapshots listed), as a starting broker runs them, in one thread, with the
node's garbage-collector policy (`replog.server.runtime.collector`: the growth freezer installed,
and told of the logs as they load). Baseline, same
run, same directories: the floor of that work in plain Python, listing every partition
directory once and reading its leader-epoch checkpoint, so the ratio says how much the loading
code adds to the system calls it cannot avoid.

Each partition holds one small batch stamped with a leader epoch, so every log has a segment
and an epoch entry, as after a benchmark's creation. The page cache is warm in both (a restart
follows a stop); a cold cache would add the disk's reads to both.

    .venv/bin/python bench/log_loading.py --partitions 10000 --runs 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

from replog.record.builder import build_batch
from replog.server.data_plane.producer_state_loader import ProducerExpiry, preload_producer_tables
from replog.server.runtime import collector
from replog.storage.log_manager import LogManager


def make_logs(log_dir: str, partitions: int) -> None:
    manager = LogManager(log_dir)
    records = build_batch([(1_700_000_000_000, None, b"x" * 100, ())])
    for index in range(partitions):
        plog = manager.get_or_create_log(f"t{index // 10:06d}", index % 10)
        plog.leader_epoch_cache.assign(0, 0)
        plog.append_as_leader(records, 0)
    manager.shutdown()


def load(log_dir: str) -> int:
    manager = LogManager(log_dir, on_logs_loaded=collector.logs_loaded)
    expiry = ProducerExpiry(int(time.time() * 1000), 86_400_000)
    tables = preload_producer_tables(manager.all_logs(), expiry)
    manager.shutdown()
    return len(tables)


def floor(log_dir: str) -> int:
    opened = 0
    for name in os.listdir(log_dir):
        path = os.path.join(log_dir, name)
        if not os.path.isdir(path) or name.startswith("__"):
            continue
        os.listdir(path)
        with open(os.path.join(path, "leader-epoch-checkpoint"), "rb") as f:
            f.read()
        opened += 1
    return opened


def timed(run: Callable[[str], int], log_dir: str, expected: int) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process: user + system) of one run."""
    started, cpu_started = time.perf_counter(), time.process_time()
    count = run(log_dir)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    assert count == expected, f"{run.__name__} saw {count} logs, expected {expected}"
    return elapsed, cpu


def spread(values: list[float]) -> str:
    return f"min {min(values):.2f} / median {statistics.median(values):.2f} / max {max(values):.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="replog-log-loading-") as log_dir:
        make_logs(log_dir, args.partitions)
        collector.install_growth_freezer()  # as `replog node` does
        loads: list[tuple[float, float]] = []
        floors: list[tuple[float, float]] = []
        for _ in range(args.runs):
            # Interleaved, so that load on the machine falls on both alike.
            floors.append(timed(floor, log_dir, args.partitions))
            loads.append(timed(load, log_dir, args.partitions))
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    print(f"# commit {commit}; nproc {os.cpu_count()}; load average {os.getloadavg()[0]:.1f}")
    print(f"Open {args.partitions:,} logs after a clean stop, {args.runs} runs")
    # CPU time is the figure to compare on a shared machine: wall time adds the waits for a core.
    for what, index in (("wall", 0), ("CPU", 1)):
        load_s = [run[index] for run in loads]
        floor_s = [run[index] for run in floors]
        ratios = [a / b for a, b in zip(load_s, floor_s, strict=True)]
        print(f"  {what:4} load + producer tables s  {spread(load_s)}")
        print(f"  {what:4} file-system floor s       {spread(floor_s)}")
        print(f"  {what:4} ratio                     {spread(ratios)}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
