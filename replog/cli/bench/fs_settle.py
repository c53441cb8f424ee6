"""When the file system has settled after a deletion, and in which order a benchmark that
creates many files deletes them: so that one run's deletion does not slow the next run's
measured period.

On an ext4 file system mounted with `discard`, the minutes after a large `rm -rf` cost every
`mkdir` and `open(O_CREAT)` 2-3x (docs/benchmarks.md, "Partition creation and restart"). A
benchmark that deletes its clusters at its end poisons the next one's figures. Rules here:
- nothing is deleted between the first measurement and the last (`plan_steps`): every run's
  directories are deleted after the last floor, never between runs;
- what an earlier invocation left is deleted first, and the benchmark then waits until the
  file system's floor has settled (`wait_settled`): two consecutive readings, taken
  `interval_s` apart, agree within a relative `tolerance`; the wait is bounded, and a
  reading that never settles is reported as such, not hidden.
The pure parts take their clock, sleep and measure as arguments so that tests drive them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

# The directories a benchmark run leaves in its work directory, by name prefix.
RUN_DIR_PREFIXES = ("create-", "restart-", "fs-floor-")


def agree(earlier: float, later: float, tolerance: float) -> bool:
    """Whether two floor readings agree: their difference within `tolerance` of the smaller
    (a reading falling as a deletion's aftermath fades, or rising with a new one, does not)."""
    if tolerance < 0:
        raise ValueError(f"tolerance must be >= 0, got {tolerance}")
    low = min(earlier, later)
    return abs(later - earlier) <= tolerance * low


@dataclass
class Settle:
    """The readings a wait took (seconds of floor, in order) and whether the last two agreed
    before the wait's bound; `waited_s` from the first reading's start to the last's end."""

    readings: list[float] = field(default_factory=list)
    settled: bool = False
    waited_s: float = 0.0

    @property
    def floor_s(self) -> float:
        """The floor to report: the last reading (the settled one when it settled)."""
        return self.readings[-1]


def wait_settled(
    measure: Callable[[], float],
    *,
    tolerance: float,
    interval_s: float,
    timeout_s: float,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    say: Callable[[str], None] = lambda _: None,
) -> Settle:
    """Measure the floor until two consecutive readings agree (`agree`), sleeping
    `interval_s` between readings, for at most `timeout_s` (a reading is never cut short:
    the bound is checked before each sleep). At least two readings are taken; with
    `timeout_s` <= 0 exactly one (no wait: the caller asked for none)."""
    began = clock()
    found = Settle()
    found.readings.append(measure())
    if timeout_s <= 0:
        found.waited_s = clock() - began
        return found
    while True:
        if clock() - began + interval_s > timeout_s:
            say(
                f"file-system floor not settled after {clock() - began:.0f} s "
                f"(readings {[round(r, 2) for r in found.readings]} s): going on"
            )
            break
        sleep(interval_s)
        found.readings.append(measure())
        earlier, later = found.readings[-2:]
        if agree(earlier, later, tolerance):
            found.settled = True
            break
        say(
            f"waiting for the file-system floor to settle: {earlier:.2f} s then {later:.2f} s, "
            f"not within {tolerance:.0%} (waited {clock() - began:.0f} of {timeout_s:.0f} s)"
        )
    found.waited_s = clock() - began
    return found


def stale_run_dirs(entries: list[str]) -> list[str]:
    """The entries of a work directory an earlier run left (`RUN_DIR_PREFIXES`), sorted."""
    return sorted(e for e in entries if e.startswith(RUN_DIR_PREFIXES))


def plan_steps(runs: int, *, create: bool, restart: bool) -> list[tuple[str, int]]:
    """The benchmark's steps in order, as (step, run): `delete stale` (what an earlier
    invocation left), then per run `settle` (wait for the floor, record it) and `create` /
    `restart`, then `final floor` and, last, `delete runs`. No deletion falls between the
    first `settle` and the `final floor`."""
    steps: list[tuple[str, int]] = [("delete stale", -1)]
    for run in range(runs):
        steps.append(("settle", run))
        if create:
            steps.append(("create", run))
        if restart:
            steps.append(("restart", run))
    steps.append(("final floor", -1))
    steps.append(("delete runs", -1))
    return steps
