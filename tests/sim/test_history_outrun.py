"""The committed history of `replog sim` keeps up with log starts moving to snapshots: seed 6
commits, snapshots and moves every node's metadata log start past a burst of batches within
50 ms of virtual time. Looked at after every iteration, the history holds those batches and
the run is clean (its KIP-966 offline partitions read from a complete committed log); looked
at only every 50 ms, the batches leave every log unseen, and the checker says so instead of
the end-of-run checks replaying a history that stops short."""

from __future__ import annotations

import pytest
from planted_bug_seeds import caught_within

from replog.sim.invariants import SafetyChecker
from replog.sim.run import simulate

SEED = 6
SPARSE_S = 0.05


def test_a_burst_past_the_log_start_is_in_the_history() -> None:
    report = simulate(SEED)
    assert report.data["moved log starts seen"] > 0
    assert (
        report.data["offline partitions"]
        == report.data["offline partitions healed by unclean election"]
    )


def _looks_every_50_ms(monkeypatch: pytest.MonkeyPatch) -> None:
    """The planted bug: the runner's look at the logs skips the iterations of 50 ms after one."""
    check_logs = SafetyChecker.check_logs
    last: dict[int, float] = {}

    def sparse(self: SafetyChecker, *, whole: bool = False) -> None:
        now = self._cluster.loop.time()
        if whole or now >= last.get(id(self), -SPARSE_S) + SPARSE_S:
            last[id(self)] = now
            check_logs(self, whole=whole)

    monkeypatch.setattr(SafetyChecker, "check_logs", sparse)


def test_a_history_outrun_by_every_log_start_is_a_violation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _looks_every_50_ms(monkeypatch)
    caught_within(range(SEED, SEED + 1), r"committed history seen ends at offset \d+, before")
