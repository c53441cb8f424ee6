"""Start-up of `replog --help`, `topics list`, `cluster status` and `cluster kill` against a bare
Python start (`python -c pass`) and `import grpc, asyncio`.

Usage::

    .venv/bin/python bench/cli_startup.py                  # 9 rounds, about 20 s
    .venv/bin/python bench/cli_startup.py --runs 15 --modules 25
    .venv/bin/python bench/cli_startup.py --vs /tmp/base   # also another checkout, same rounds

What it measures: `python -X importtime -m replog ARGS`, summed as the interpreter reports it
(the cumulative time of every top-level import, from the interpreter's own start-up on), and
the wall-clock time of the whole process, for `replog --help`, `replog topics list`, `replog
cluster status` and `replog cluster kill 1` against a running 1-node cluster that the script
starts in a temporary directory on free ports (and always stops; after each measured kill it
restarts the node, unmeasured). The baselines are `python -X importtime -c pass` (a bare
interpreter: `cluster status` and `kill` have a goal of at most `OVER_BARE_GOAL_S` of wall-clock
time over it) and `python -X importtime -c 'import grpc, asyncio'` (what any gRPC client pays),
measured in the same rounds: the commands run in a different order
every round, so a busy phase of a shared machine hits them all alike, and each command's ratio
is taken per round, then summed up (min / median / max). The CPU time (user + system) of each
whole process is printed too: on a busy machine it swings far less than the wall-clock import
time, which counts the waits for a CPU. Bytecode is compiled first (one
unrecorded run of each command may write it), as an installed or used checkout has it; the
goal is judged on the median.

`--vs DIR` measures the same commands from another checkout (e.g. `git archive main | tar -x
-C DIR`) in the same rounds, run with DIR as the working directory so its `replog` is the one
imported. `--modules N` prints the N modules with the largest cumulative time of
`replog topics list` (the minimum over the rounds: the closest to an idle machine).
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

GOAL_S = 0.25
OVER_BARE_GOAL_S = 0.3  # `cluster status` and `kill`: wall-clock time over `python -c pass`
ROOT = Path(__file__).resolve().parents[1]
BASELINE = "import grpc, asyncio"
BARE = "pass"


@dataclass
class Probe:
    label: str
    argv: list[str]  # after `python -X importtime`
    cwd: Path
    after: list[str] | None = None  # run (unmeasured) after each measured run
    sums_us: list[int] = field(default_factory=list)
    wall_s: list[float] = field(default_factory=list)  # the whole process, start to exit
    cpu_s: list[float] = field(default_factory=list)  # the process's user + system CPU time
    # module -> (self, cumulative) in microseconds, the minimum over the rounds
    modules: dict[str, tuple[int, int]] = field(default_factory=dict)
    depth: dict[str, int] = field(default_factory=dict)


def parse_importtime(stderr: str) -> tuple[int, dict[str, tuple[int, int]], dict[str, int]]:
    """The sum of the top-level cumulative times, and each module's (self, cumulative) and depth
    in the import tree, from `-X importtime`'s lines."""
    total = 0
    modules: dict[str, tuple[int, int]] = {}
    depth: dict[str, int] = {}
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        own, cumulative, name = line.removeprefix("import time:").split("|")
        level = (len(name) - len(name.lstrip()) - 1) // 2
        name = name.strip()
        modules[name] = (int(own), int(cumulative))
        depth[name] = level
        if level == 0:
            total += int(cumulative)
    return total, modules, depth


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(probe: Probe, env: dict[str, str], record: bool = True) -> None:
    cpu_before = children_cpu_s()
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-X", "importtime", *probe.argv],
        cwd=probe.cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if result.returncode != 0:
        tail = [line for line in result.stderr.splitlines() if not line.startswith("import time")]
        raise SystemExit(f"{probe.label} exited {result.returncode}: {' | '.join(tail[-3:])}")
    wall_s = time.perf_counter() - started
    cpu_s = children_cpu_s() - cpu_before
    if probe.after is not None:
        subprocess.run(probe.after, cwd=probe.cwd, env=env, capture_output=True, timeout=120)
    if not record:
        return
    total, modules, depth = parse_importtime(result.stderr)
    probe.sums_us.append(total)
    probe.cpu_s.append(cpu_s)
    probe.wall_s.append(wall_s)
    for name, (own, cumulative) in modules.items():
        old = probe.modules.get(name)
        probe.modules[name] = (
            (own, cumulative) if old is None else (min(old[0], own), min(old[1], cumulative))
        )
    probe.depth.update(depth)


@contextmanager
def one_node_cluster(env: dict[str, str], checkout: Path = ROOT) -> Iterator[str]:
    """A running 1-node cluster's directory, stopped and removed afterwards, its commands run
    in `checkout`. Its ports are drawn at random; `cluster start` refuses ports in use, and
    another draw is tried."""
    directory = tempfile.mkdtemp(prefix="replog-cli-startup-")
    command = [sys.executable, "-m", "replog.cli.main", "cluster"]
    where = ["--data-dir", directory]
    try:
        for _ in range(20):
            base, kafka = random.randrange(20000, 39000), random.randrange(40000, 60000)
            ports = ["--base-port", str(base), "--kafka-base-port", str(kafka)]
            started = subprocess.run(
                [*command, "start", *where, "--nodes", "1", *ports],
                cwd=checkout,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            if started.returncode == 0:
                break
            if "in use" not in started.stderr:
                raise SystemExit(f"cluster start failed: {started.stderr.strip()}")
        else:
            raise SystemExit("cluster start: no free ports found in 20 draws")
        yield directory
    finally:
        subprocess.run([*command, "stop", *where], cwd=checkout, env=env, capture_output=True)
        shutil.rmtree(directory, ignore_errors=True)


def replog_module(checkout: Path) -> str:
    """`replog` where the checkout runs as `python -m replog`, else its CLI module."""
    return "replog" if (checkout / "replog" / "__main__.py").exists() else "replog.cli.main"


def probes(data_dir: str, checkouts: Sequence[tuple[str, Path]]) -> list[Probe]:
    found = [
        Probe(BASELINE, ["-c", BASELINE], ROOT),
        Probe(f"python -c {BARE}", ["-c", BARE], ROOT),
    ]
    for name, checkout in checkouts:
        module = ["-m", replog_module(checkout)]
        where = ["--data-dir", data_dir]
        restart = [sys.executable, "-m", replog_module(checkout), "cluster", "restart", "1", *where]
        found.append(
            Probe(f"{name}replog cluster status", [*module, "cluster", "status", *where], checkout)
        )
        found.append(
            Probe(
                f"{name}replog cluster kill 1",
                [*module, "cluster", "kill", "1", *where],
                checkout,
                after=restart,
            )
        )
        found.append(Probe(f"{name}replog --help", [*module, "--help"], checkout))
        found.append(
            Probe(
                f"{name}replog topics list",
                [*module, "topics", "list", "--data-dir", data_dir],
                checkout,
            )
        )
    return found


def summary(values: Sequence[float], unit: str, digits: int) -> str:
    return " / ".join(
        f"{v:.{digits}f}{unit}" for v in (min(values), statistics.median(values), max(values))
    )


def report(all_probes: Sequence[Probe], modules: int) -> None:
    baseline, bare = all_probes[0], all_probes[1]
    print("\nwall-clock time of the whole process (under -X importtime, the baselines too)")
    print(
        f"{'command':<34} {'seconds (min / median / max)':<36} "
        f"{'over `python -c pass`':<30} ratio to it"
    )
    for probe in all_probes:
        over = [s - b for s, b in zip(probe.wall_s, bare.wall_s, strict=True)]
        ratios = [s / b for s, b in zip(probe.wall_s, bare.wall_s, strict=True)]
        goal = ""
        if " cluster " in probe.label:
            met = statistics.median(over) < OVER_BARE_GOAL_S
            goal = f"  goal +{OVER_BARE_GOAL_S} s: {'met' if met else 'NOT met'}"
        print(
            f"{probe.label:<34} {summary(probe.wall_s, ' s', 3):<36} "
            f"{summary(over, ' s', 3):<30} {summary(ratios, 'x', 2)}{goal}"
        )
    for title, unit_s in (
        ("import time (-X importtime)", lambda p: [us / 1e6 for us in p.sums_us]),
        ("CPU time of the whole process (user + system)", lambda p: p.cpu_s),
    ):
        print(f"\n{title}")
        print(f"{'command':<34} {'seconds (min / median / max)':<36} ratio to `{BASELINE}`")
        base = unit_s(baseline)
        for probe in all_probes:
            seconds = unit_s(probe)
            ratios = [s / b for s, b in zip(seconds, base, strict=True)]
            goal = ""
            if probe.label.endswith(("--help", "topics list")) and title.startswith("import"):
                median = statistics.median(seconds)
                goal = f"  goal {GOAL_S} s: {'met' if median < GOAL_S else 'NOT met'}"
            print(
                f"{probe.label:<34} {summary(seconds, ' s', 3):<36} {summary(ratios, 'x', 2)}{goal}"
            )
    if modules:
        listing = next(p for p in all_probes if p.label.endswith("topics list"))
        print(f"\n{listing.label}: the {modules} largest imports (min over the rounds, us)")
        print(f"{'self':>7} {'cumul.':>7}  module (indented by depth)")
        ranked = sorted(listing.modules.items(), key=lambda item: -item[1][1])[:modules]
        for name, (own, cumulative) in ranked:
            print(f"{own:>7} {cumulative:>7}  {'  ' * listing.depth[name]}{name}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9, help="rounds (default: 9)")
    parser.add_argument("--vs", type=Path, metavar="DIR", help="another checkout to measure too")
    parser.add_argument("--modules", type=int, default=0, metavar="N", help="list N imports")
    args = parser.parse_args(argv)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    checkouts = [("", ROOT)]
    if args.vs is not None:
        checkouts.append((f"[{args.vs.name}] ", args.vs.resolve()))
    load = os.getloadavg()
    with one_node_cluster(env) as data_dir:
        all_probes = probes(data_dir, checkouts)
        for probe in all_probes:
            run(probe, env, record=False)  # writes the bytecode that is missing
        for round_index in range(args.runs):
            order = list(all_probes)
            random.Random(round_index).shuffle(order)
            for probe in order:
                run(probe, env)
    print(
        f"{args.runs} rounds on {os.cpu_count()} CPUs, load average before "
        f"{load[0]:.1f} and after {os.getloadavg()[0]:.1f}; python {sys.version.split()[0]}"
    )
    report(all_probes, args.modules)
    return 0


if __name__ == "__main__":
    sys.exit(main())
