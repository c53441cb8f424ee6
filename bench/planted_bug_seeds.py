"""The first seed that catches each planted bug of the whole-cluster simulation's test
(`tests/sim/test_whole_cluster_simulation.py`, `test_a_planted_bug_is_caught`), scanned from
seed 0, beside the seed the test's row records: what to write back into a row once a change
to the simulator altered the runs.

    .venv/bin/python bench/planted_bug_seeds.py                      # every row
    .venv/bin/python bench/planted_bug_seeds.py "fsync dropped" ...  # these rows (their ids)

Rules: each row's bug is planted as the test plants it (the row's own patch, undone after it)
and seeds run from 0 to the test's window (`PLANTED_BUG_SEEDS`) until one fails with the
row's expected failure; a row that no seed in the window catches, or that fails otherwise,
is printed as such and makes the exit code 1.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import time

# bench/ first on sys.path would let bench/timeline.py shadow the package replog imports.
_BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _BENCH_DIR]
_ROOT = os.path.dirname(_BENCH_DIR)
sys.path.insert(0, _ROOT)
sys.path.insert(0, os.path.join(_ROOT, "tests", "sim"))  # the module's own imports, as pytest's

import pytest  # noqa: E402

from replog.sim.run import SimulationFailure, simulate  # noqa: E402
from tests.sim import test_whole_cluster_simulation as planted  # noqa: E402


def main(argv: list[str]) -> int:
    logging.disable(logging.CRITICAL)  # the nodes' own lines: expected under the faults
    (mark,) = [
        m for m in planted.test_a_planted_bug_is_caught.pytestmark if m.name == "parametrize"
    ]
    rows, ids = mark.args[1], mark.kwargs["ids"]
    unknown = set(argv) - set(ids)
    if unknown:
        print(f"no such row: {sorted(unknown)}; the rows are {ids}", file=sys.stderr)
        return 2
    missed = 0
    for (plant, expected, recorded), name in zip(rows, ids, strict=True):
        if argv and name not in argv:
            continue
        patches = pytest.MonkeyPatch()
        plant(patches)
        started = time.process_time()
        found, what = None, "survived every seed"
        try:
            for seed in range(planted.PLANTED_BUG_SEEDS):
                try:
                    simulate(seed)
                except SimulationFailure as failure:
                    found = seed
                    matches = re.search(expected, str(failure))
                    what = "caught" if matches else f"failed otherwise: {failure}"
                    break
        finally:
            patches.undo()
        missed += found is None or what != "caught"
        print(
            f"{name!r}: first seed {found} ({what}; the row records {recorded}), "
            f"{time.process_time() - started:.0f} s of CPU",
            flush=True,
        )
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
