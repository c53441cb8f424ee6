"""What held the nodes' event loops in a benchmark's kept clusters, grouped by the code named.

Reads the node logs a benchmark kept (`bench/partition_creation.py --work-dir DIR`, run with
`REPLOG_LOOP_STALL_WARN_MS=50` in its environment so that every stall of 50 ms or more is logged
with what held the loop: docs/operations.md, "Metrics") and prints, per cluster directory and
phase, each call chain seen with how often, the most loop-thread CPU time one of its stalls
took and its longest wall time. A stall whose CPU time is far below its wall time was the loop
waiting for a core (other processes on a loaded machine) or for the GIL (the node's worker
threads), not work on the loop: sort by CPU to find the work to bound. Per phase it also counts
the stalls that ran a full garbage collection (generation 2, which no stack sample names) and
the most time one of them spent collecting.

Phases: a node log holds one section per start and per stop of the node; "start 1" is
everything up to the first "shutting down", "stop 1" from there until the node process started
again froze its start-up objects (its first lines: the controlled shutdown's moves and the
other nodes' answers to them), and "start 2" what the restarted node logged from there (a
`--restart` run's restart) up to its next "shutting down".

    .venv/bin/python bench/stall_sources.py /tmp/work-dir [--min-cpu-ms 40]
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

STALL = re.compile(
    r"the event loop was held for (?P<wall>\d+) ms \((?P<cpu>\d+) ms of it on a CPU"
    r"(?:, (?P<queued>\d+) ms waiting for one)?\)"
    r"(?:: held in (?P<chain>.*?) \(\d+ of \d+ samples\))?"
)
COLLECTING = re.compile(r"; (?P<ms>\d+) ms of it collecting garbage \(generations up to 2\)")
LINE_NUMBER = re.compile(r"\.py:\d+\)")
ENTRY = re.compile(r"^_watch \(node_tasks\.py\): ")
# A node's own line, not a peer's error quoting one ("... the broker is shutting down").
SHUTTING_DOWN = re.compile(r"replog\.server: node \d+: shutting down")
STARTED = (
    "start-up objects frozen"  # a node process's first lines (replog.server.runtime.collector)
)


@dataclass
class Source:
    """The stalls one call chain was named for."""

    count: int = 0
    cpu_ms: int = 0  # the most CPU time of one of them
    wall_ms: int = 0  # the longest of them


@dataclass
class Phase:
    kind: str = "start"  # or "stop"
    stalls: int = 0
    cpu_ms: int = 0  # the most CPU time of any stall
    full_collections: int = 0  # stalls that ran a full garbage collection
    collecting_ms: int = 0  # the most time one stall spent in full collections
    sources: dict[str, Source] = field(default_factory=dict)


def source_name(chain: str | None) -> str:
    """A chain without line numbers or the task runner's frame (stalls of one place group)."""
    if not chain:
        return "(no sample)"
    return ENTRY.sub("", LINE_NUMBER.sub(".py)", chain))


def read_phases(lines: Iterable[str]) -> list[Phase]:
    """One `Phase` per start and stop of the node (module docstring), from one node log."""
    phases = [Phase()]
    for line in lines:
        if SHUTTING_DOWN.search(line):
            phases.append(Phase("stop"))
            continue
        if STARTED in line and phases[-1].kind == "stop":
            phases.append(Phase("start"))
            continue
        found = STALL.search(line)
        if found is None:
            continue
        wall, cpu = int(found["wall"]), int(found["cpu"])
        phase = phases[-1]
        phase.stalls += 1
        phase.cpu_ms = max(phase.cpu_ms, cpu)
        collecting = COLLECTING.search(line)
        if collecting is not None:
            phase.full_collections += 1
            phase.collecting_ms = max(phase.collecting_ms, int(collecting["ms"]))
        source = phase.sources.setdefault(source_name(found["chain"]), Source())
        source.count += 1
        source.cpu_ms = max(source.cpu_ms, cpu)
        source.wall_ms = max(source.wall_ms, wall)
    return phases


def merged(per_node: list[list[Phase]]) -> list[Phase]:
    """The nodes' phases merged phase by phase."""
    phases: list[Phase] = []
    for node in per_node:
        for index, phase in enumerate(node):
            while len(phases) <= index:
                phases.append(Phase(phase.kind))
            into = phases[index]
            into.stalls += phase.stalls
            into.cpu_ms = max(into.cpu_ms, phase.cpu_ms)
            into.full_collections += phase.full_collections
            into.collecting_ms = max(into.collecting_ms, phase.collecting_ms)
            for name, source in phase.sources.items():
                total = into.sources.setdefault(name, Source())
                total.count += source.count
                total.cpu_ms = max(total.cpu_ms, source.cpu_ms)
                total.wall_ms = max(total.wall_ms, source.wall_ms)
    return phases


def report(directory: str, min_cpu_ms: int) -> None:
    for cluster in sorted(os.listdir(directory)):
        logs = []
        for node in sorted(os.listdir(os.path.join(directory, cluster))):
            path = os.path.join(directory, cluster, node, "node.log")
            if os.path.isfile(path):
                with open(path, encoding="utf-8", errors="replace") as f:
                    logs.append(read_phases(f))
        seen = {"start": 0, "stop": 0}
        for phase in merged(logs):
            seen[phase.kind] += 1
            if not phase.stalls:
                continue
            print(
                f"{cluster}, {phase.kind} {seen[phase.kind]}: {phase.stalls} stalls logged, "
                f"the most CPU "
                f"time of one {phase.cpu_ms} ms; {phase.full_collections} ran a full garbage "
                f"collection (the longest {phase.collecting_ms} ms); sources with a stall of "
                f"{min_cpu_ms} ms CPU or more (count, most CPU, longest wall):"
            )
            heavy = [(n, s) for n, s in phase.sources.items() if s.cpu_ms >= min_cpu_ms]
            for name, source in sorted(heavy, key=lambda item: -item[1].cpu_ms):
                print(f"  {source.count:4d} {source.cpu_ms:5d} ms {source.wall_ms:6d} ms  {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("work_dir", help="a benchmark's --work-dir")
    parser.add_argument("--min-cpu-ms", type=int, default=40)
    args = parser.parse_args()
    report(args.work_dir, args.min_cpu_ms)


if __name__ == "__main__":
    main()
