"""The whole-cluster simulator's speed: simulated seconds per CPU second of `replog sim --seeds N
--first-seed K` (issue #79's goal is 100 per wall second on a quiet machine).

A run is one fresh process running `replog sim`'s own code (`replog.cli.sim.run`: its
process-wide settings, then the seeds one after another), timed in CPU time of the process
(user and system, `resource.getrusage`), the imports and start-up excluded. With `--base
COMMIT` the same runs of that commit's code, the sides taking turns (bench/base_commit.py), and
the working tree / base ratio per pair of runs: above 1, the working tree simulates more per
CPU second. Every run's seeds are checked to run the same as in the first run of both sides
(the fingerprint of each seed's report: its committed metadata log, the network's counts, its
exact virtual end time), so a change that alters the runs says so.

    .venv/bin/python bench/sim_speed.py [--runs 4] [--seeds 10] [--first-seed 1200] [--base main]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import resource
import sys

from base_commit import add_arguments, against_lines, runs_against

RUNS_CASE = "seeds run (fingerprints)"


def one_child(seeds: int, first_seed: int) -> dict[str, list[float]]:
    """One run's figures: simulated seconds per CPU second, CPU seconds, and a digest of every
    seed's fingerprint."""
    import replog.sim.run as sim_run
    from replog.cli import sim as sim_command

    simulate = sim_run.simulate
    fingerprints: list[str] = []
    virtual_s: list[float] = []

    def recorded(seed: int) -> sim_run.SimReport:
        report = simulate(seed)
        fingerprints.append(f"{seed} {report.fingerprint}")
        virtual_s.append(report.virtual_s)
        return report

    sim_run.simulate = recorded  # the command imports it from the module when it runs
    args = argparse.Namespace(seed=None, seeds=seeds, first_seed=first_seed)
    before = resource.getrusage(resource.RUSAGE_SELF)
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        code = sim_command.run(args)
    after = resource.getrusage(resource.RUSAGE_SELF)
    if code != 0 or len(fingerprints) != seeds:
        raise SystemExit(f"replog sim failed: {printed.getvalue()}")
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    digest = hashlib.sha256("\n".join(fingerprints).encode()).hexdigest()
    return {
        "simulated seconds per CPU second": [sum(virtual_s) / cpu_s],
        "CPU seconds": [cpu_s],
        "simulated seconds": [sum(virtual_s)],
        RUNS_CASE: [int(digest[:12], 16)],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=4, help="fresh processes (per side)")
    parser.add_argument("--seeds", type=int, default=10, help="seeds per run")
    parser.add_argument("--first-seed", type=int, default=1200)
    add_arguments(parser)
    args = parser.parse_args()
    if args.emit_json:
        print(json.dumps(one_child(args.seeds, args.first_seed)))
        return
    child_args = ["--seeds", str(args.seeds), "--first-seed", str(args.first_seed)]
    work, base = runs_against(__file__, child_args, args.runs, args.base)
    sides = [work[RUNS_CASE]] + ([base[RUNS_CASE]] if base else [])
    same = len({digest for side in sides for digest in side}) == 1
    print(
        f"seeds {args.first_seed}-{args.first_seed + args.seeds - 1}: "
        f"{'the same runs' if same else 'DIFFERENT runs'} in every process"
        + (" of both sides" if base else "")
    )
    shown = {case: values for case, values in work.items() if case != RUNS_CASE}
    shown_base = {case: base[case] for case in shown} if base else None
    for line in against_lines(shown, shown_base, args.base):
        print(line)
    sys.stdout.flush()


if __name__ == "__main__":
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(__file__)]
    main()
