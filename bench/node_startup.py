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
The cluster is `bench/cli_startup.py`'s (`one_node_cluster`: ports drawn at random, never a
default, a draw in use drawn again).
"""

from __future__ import annotations

import argparse
import os
import random
import time
from pathlib import Path

from base_commit import spread
from cli_startup import one_node_cluster

ROOT = Path(__file__).resolve().parents[1]
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def start_once(checkout: Path) -> tuple[float, float]:
    """(the node's CPU seconds at ready, `cluster start`'s wall seconds) for `checkout`."""
    # Bytecode may be written (this machine's PYTHONDONTWRITEBYTECODE aside), as an installed or
    # used checkout has it: the unrecorded first start of each side writes it.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(checkout)
    started_at = time.perf_counter()
    with one_node_cluster(env, checkout) as directory:
        wall_s = time.perf_counter() - started_at
        pid = int((Path(directory) / "node-1" / "node.pid").read_text().split()[0])
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        # utime and stime: fields 14 and 15 of stat, 12 and 13 after the name.
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS, wall_s


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
