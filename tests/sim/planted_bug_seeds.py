"""`caught_within(seeds, expected)`: the first of `seeds` whose `replog sim` run fails, its
failure required to match `expected` (a regular expression), for the tests that plant a bug.

A test whose bug no early seed catches starts its scan at the first seed that caught it when
that was recorded, so CI runs one seed while the runs stay as they were; a change that alters
the runs moves the catch within the scan's window, or fails the test by name."""

from __future__ import annotations

import re

from replog.sim.run import SimulationFailure, simulate


def caught_within(seeds: range, expected: str) -> str:
    """The failure of the first failing seed of `seeds`; AssertionError if none fails or the
    failure is not `expected`."""
    for seed in seeds:
        try:
            simulate(seed)
        except SimulationFailure as failure:
            assert f"replay: replog sim --seed {seed}" in str(failure)
            assert re.search(expected, str(failure)), failure
            return str(failure)
    raise AssertionError(f"the planted bug survived seeds {seeds.start}-{seeds.stop - 1}")
