"""`replog sim`: seeded simulations of a replog cluster under faults, as FoundationDB ships its
simulator in its server binary.

    replog sim [--seeds N] [--first-seed K]     seeds K .. K+N-1 (default: 100 seeds from 0)
    replog sim --seed S                         one seed, with what happened, in order

Each seed is one run (`replog.sim.run`): the nodes' real Raft, controller and broker shells
(the data plane and the transaction coordinators included) on in-memory disks, one virtual
clock, idempotent producers with acks 0, 1 and all and consumers, transactional producers
(their zombies too) and read_committed consumers, a network that delays, drops, duplicates,
reorders and partitions, nodes killed (kill -9) and losing power alone or all at once, disks
that fail, fill up or turn slow, wall clocks that jump; the cluster's guarantees are checked
after every step, and its liveness once the faults stop. A run takes no wall time it does
not compute, and a seed replays byte for byte.

Prints one line per seed. Exit code 0 only when every seed is clean; the first failing seed
stops the command, printing what broke and its replay command (exit code 1). The nodes' own
log lines of WARNING and below are never shown; their errors (a node stopping on its failed
disk, say) are printed with --seed only.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from typing import Any

from replog.cli.arguments import add_documented_command

DEFAULT_SEEDS = 100


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {value}")
    return value


def _positive(text: str) -> int:
    value = _non_negative(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be 1 or more, not 0")
    return value


def run(args: argparse.Namespace) -> int:
    from replog.server.runtime.collector import freeze_startup_objects
    from replog.sim.run import SimulationFailure, simulate

    # As a node process does: what the imports built lives as long as the process, and each
    # full collection would walk it again (seeds 1200-1205 in one process: four full
    # collections, 6% of its CPU; 3% with the imports' objects frozen).
    freeze_startup_objects()

    # The simulated nodes' warnings (a fetch timed out, a call lost) are the faults the run
    # injects, thousands a seed; a break is what the run itself reports.
    logging.disable(logging.WARNING)

    if args.seed is not None:
        seeds = [args.seed]
    else:
        seeds = list(range(args.first_seed, args.first_seed + args.seeds))
        logging.disable(logging.CRITICAL)  # expected under the faults, one line per seed
    started = time.monotonic()
    simulated_s = 0.0
    for seed in seeds:
        try:
            report = simulate(seed)
        except SimulationFailure as failure:
            print(f"FAILED {failure}", file=sys.stderr)
            return 1
        simulated_s += report.virtual_s
        print(report.summary(), flush=True)
        if args.seed is not None:
            for at_ms, what in report.events:
                print(f"  {at_ms:>8} ms  {what}")
            print(f"fingerprint {report.fingerprint} (the same on every replay)")
    took = time.monotonic() - started
    print(
        f"{len(seeds)} seed(s) clean: {simulated_s:.0f} s simulated in {took:.1f} s "
        f"({simulated_s / max(took, 1e-9):.0f} simulated seconds per second)"
    )
    return 0


def register(commands: Any) -> None:
    parser = add_documented_command(commands, "sim", __doc__)
    parser.set_defaults(run=run, command_property=None)
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--seeds",
        type=_positive,
        default=DEFAULT_SEEDS,
        metavar="N",
        help=f"how many seeds to run (default: {DEFAULT_SEEDS})",
    )
    which.add_argument(
        "--seed", type=_non_negative, metavar="S", help="run this one seed and say what happened"
    )
    parser.add_argument(
        "--first-seed",
        type=_non_negative,
        default=0,
        metavar="K",
        help="the first of the --seeds (default: 0)",
    )
