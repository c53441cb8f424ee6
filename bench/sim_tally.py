"""The whole-cluster simulation's long-run tally: seeds of `replog sim` on every core, each
result appended to a tally file, the clean seeds counted per commit.

    .venv/bin/python bench/sim_tally.py --minutes 20            # as many seeds as fit
    .venv/bin/python bench/sim_tally.py --seeds 1000 --first-seed 5000
    .venv/bin/python bench/sim_tally.py --report                # the tally so far, no run

Rules:
- The tally (`--tally`, JSON lines) holds one line per seed run: seed, commit, clean or the
  first line of what failed, virtual seconds, wall seconds. Lines are appended as seeds end,
  so an interrupted run keeps what it finished.
- A run is resumable: a seed already in the tally at the same commit is skipped; `--minutes`
  goes on from the first seed not yet run at this commit. The commit is the checkout's
  `git rev-parse --short HEAD`, with `+dirty` when tracked files differ from it: a dirty
  tree's results are tallied apart, never as the commit's.
- Seeds run in child processes (`--workers`, default every core), one seed at a time each;
  once the time is up no seed starts, and those running finish.
- The report prints, per commit, the clean seeds (with their range), the failed ones, the
  simulated seconds per wall second of one worker, and each failure's replay command
  (`replog sim --seed S`) at the commit it failed on.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import asdict, dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# bench/ off sys.path (its timeline.py would shadow the package of that name in the workers).
_BENCH_DIR = os.path.join(ROOT, "bench")
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _BENCH_DIR]
DEFAULT_TALLY = os.path.join(ROOT, "bench", "sim-tally.jsonl")  # ignored by git; totals go to docs


@dataclass(frozen=True)
class Result:
    seed: int
    commit: str
    clean: bool
    virtual_s: float
    wall_s: float
    failure: str = ""  # the first line of what broke (empty when clean)


def current_commit(root: str = ROOT) -> str:
    """The checkout's short commit, `+dirty` when tracked files differ from it (module Rules)."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()

    commit = git("rev-parse", "--short", "HEAD")
    return commit + "+dirty" if git("status", "--porcelain", "--untracked-files=no") else commit


def read_tally(path: str) -> list[Result]:
    """Every result in the tally file (none if it does not exist)."""
    if not os.path.exists(path):
        return []
    with open(path) as lines:
        return [Result(**json.loads(line)) for line in lines if line.strip()]


def seeds_to_run(done: set[int], first: int, count: int | None) -> Iterator[int]:
    """Seeds from `first` not in `done`: `count` of the range's seeds, or without end."""
    seed = first
    while count is None or seed < first + count:
        if seed not in done:
            yield seed
        seed += 1


_frozen: list[bool] = []  # this worker froze its start-up objects (`run_seed`)


def run_seed(seed: int, commit: str) -> Result:
    """One seed in this (child) process."""
    import logging

    from replog.server.runtime.collector import freeze_startup_objects
    from replog.sim.run import SimulationFailure, simulate

    logging.disable(logging.CRITICAL)  # the nodes' own lines: expected under the faults
    if not _frozen:  # once per worker, after its imports (`replog sim` does the same)
        freeze_startup_objects()
        _frozen.append(True)
    started = time.perf_counter()
    try:
        report = simulate(seed)
    except SimulationFailure as failure:
        first_line = str(failure).splitlines()[0]
        return Result(seed, commit, False, 0.0, time.perf_counter() - started, first_line)
    return Result(seed, commit, True, report.virtual_s, time.perf_counter() - started)


def run(
    seeds: Iterable[int], commit: str, tally_path: str, workers: int, deadline: float | None
) -> int:
    """Run `seeds` until they or the time run out; how many were run."""
    pending = iter(seeds)
    ran = 0
    with ProcessPoolExecutor(workers) as pool, open(tally_path, "a") as tally:
        running: set[Future[Result]] = set()

        def submit() -> None:
            if deadline is not None and time.monotonic() >= deadline:
                return
            seed = next(pending, None)
            if seed is not None:
                running.add(pool.submit(run_seed, seed, commit))

        for _ in range(workers):
            submit()
        while running:
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                running.discard(future)
                result = future.result()
                tally.write(json.dumps(asdict(result)) + "\n")
                tally.flush()
                ran += 1
                if not result.clean:
                    print(f"seed {result.seed} FAILED: {result.failure}", flush=True)
                submit()
    return ran


def report(results: list[Result]) -> str:
    """The tally per commit (module Rules), in the order commits first appear."""
    from replog.sim.run import replay_command

    by_commit: dict[str, list[Result]] = {}
    for result in results:
        by_commit.setdefault(result.commit, []).append(result)
    lines = []
    for commit, runs in by_commit.items():
        latest: dict[int, Result] = {r.seed: r for r in runs}  # a seed run again: its last
        clean = sorted(s for s, r in latest.items() if r.clean)
        failed = sorted((r for r in latest.values() if not r.clean), key=lambda r: r.seed)
        virtual = sum(r.virtual_s for r in latest.values() if r.clean)
        wall = sum(r.wall_s for r in latest.values() if r.clean)
        span = f" (seeds {clean[0]}-{clean[-1]})" if clean else ""
        rate = f", {virtual / wall:.0f} simulated s per wall s per worker" if wall else ""
        lines.append(f"{commit}: {len(clean)} clean{span}, {len(failed)} failed{rate}")
        lines.extend(
            f"  seed {r.seed}: {r.failure.removeprefix(f'seed {r.seed}: ')}\n"
            f"    replay at {commit}: {replay_command(r.seed)}"
            for r in failed
        )
    total = sum(1 for r in {(r.commit, r.seed): r for r in results}.values() if r.clean)
    lines.append(f"in all: {total} clean seed runs")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    how_long = parser.add_mutually_exclusive_group()
    how_long.add_argument("--minutes", type=float, help="run seeds for this long")
    how_long.add_argument("--seeds", type=int, help="run this many seeds from --first-seed")
    how_long.add_argument("--report", action="store_true", help="print the tally, run nothing")
    parser.add_argument("--first-seed", type=int, default=0, help="the first seed (default 0)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--tally", default=DEFAULT_TALLY, help="the tally file (JSON lines)")
    args = parser.parse_args(argv)
    if args.minutes is not None and args.minutes <= 0:
        parser.error(f"--minutes must be above 0, not {args.minutes}")
    if args.seeds is not None and args.seeds < 1:
        parser.error(f"--seeds must be 1 or more, not {args.seeds}")
    if args.workers < 1:
        parser.error(f"--workers must be 1 or more, not {args.workers}")
    if not args.report:
        if args.minutes is None and args.seeds is None:
            parser.error("say how much to run: --minutes M or --seeds N (or --report)")
        commit = current_commit()
        done = {r.seed for r in read_tally(args.tally) if r.commit == commit}
        deadline = None if args.minutes is None else time.monotonic() + args.minutes * 60
        started = time.monotonic()
        seeds = seeds_to_run(done, args.first_seed, args.seeds)
        ran = run(seeds, commit, args.tally, args.workers, deadline)
        took = time.monotonic() - started
        load = os.getloadavg()[0]
        print(
            f"ran {ran} seeds at {commit} in {took:.0f} s on {args.workers} workers "
            f"(load average {load:.1f})"
        )
    print(report(read_tally(args.tally)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
