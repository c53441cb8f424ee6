"""CPU a `replog node` process spends to start: from its exec until `replog cluster start`
reports the 1-node cluster ready (imports, configuration, log loading, the Raft quorum of one,
the broker's registration), for this checkout and, with `--vs DIR`, another in the same rounds.

Usage::

    .venv/bin/python bench/node_startup.py                 # 7 rounds, about 30 s
    .venv/bin/python bench/node_startup.py --runs 9 --vs /tmp/base   # against another checkout

Each round starts a fresh 1-node cluster per checkout (in a random order, so a busy phase of a
shared machine hits both alike) with `PYTHONPATH` naming the checkout, so that the node process
`cluster start` spawns imports that checkout's replog; once it is ready the node's own user +
system CPU time is read from /proc (the figure that adds up when a test suite starts hundreds
of nodes on two cores), the wall-clock time of `cluster start` beside it, and the cluster is
stopped. Printed: min / median / max per checkout and of the per-round ratio this / DIR.
Ports are drawn from 23000-28999 (never a default); a draw in use is drawn again.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from base_commit import spread

ROOT = Path(__file__).resolve().parents[1]
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def start_once(checkout: Path) -> tuple[float, float]:
    """(the node's CPU seconds at ready, `cluster start`'s wall seconds) for `checkout`."""
    directory = Path(tempfile.mkdtemp(prefix="replog-node-startup-"))
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    command = [sys.executable, "-m", "replog.cli.main", "cluster"]
    where = ["--data-dir", str(directory)]
    try:
        for _ in range(20):
            base = random.randrange(23000, 28700, 300)
            ports = ["--base-port", str(base), "--kafka-base-port", str(base + 200)]
            started_at = time.perf_counter()
            started = subprocess.run(
                [*command, "start", *where, "--nodes", "1", *ports],
                cwd=checkout,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            wall_s = time.perf_counter() - started_at
            if started.returncode == 0:
                pid = int((directory / "node-1" / "node.pid").read_text().split()[0])
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                # utime and stime: fields 14 and 15 of stat, 12 and 13 after the name.
                return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS, wall_s
            if "in use" not in started.stderr + started.stdout:
                raise SystemExit(f"cluster start failed in {checkout}: {started.stderr[-500:]}")
        raise SystemExit("no free ports found in 20 draws")
    finally:
        subprocess.run(
            [*command, "stop", *where], cwd=checkout, env=env, capture_output=True, timeout=120
        )
        shutil.rmtree(directory, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--vs", type=Path, help="another checkout, measured in the same rounds")
    args = parser.parse_args()
    checkouts = [ROOT] + ([args.vs.resolve()] if args.vs else [])
    cpu: dict[Path, list[float]] = {c: [] for c in checkouts}
    wall: dict[Path, list[float]] = {c: [] for c in checkouts}
    for checkout in checkouts:
        start_once(checkout)  # unrecorded: bytecode written, page cache warm
    for _ in range(args.runs):
        for checkout in random.sample(checkouts, len(checkouts)):
            cpu_s, wall_s = start_once(checkout)
            cpu[checkout].append(cpu_s)
            wall[checkout].append(wall_s)
    print(f"{args.runs} rounds; min / median / max")
    for checkout in checkouts:
        print(
            f"{checkout}: node CPU at ready {spread(cpu[checkout])} s, "
            f"cluster start {spread(wall[checkout])} s wall"
        )
    if args.vs:
        ratios = [a / b for a, b in zip(cpu[ROOT], cpu[checkouts[1]], strict=True)]
        print(f"node CPU ratio this / {checkouts[1]}: {spread(ratios)}")


if __name__ == "__main__":
    main()
