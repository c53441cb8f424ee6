"""`replog sim` reads every controller and checks the answers against the committed log
(`controller_reads`): the runs read, and a controller serving reads from its latest state
(uncommitted writes included; planted by patching `QuorumController.read`) is caught."""

from __future__ import annotations

from typing import TypeVar

import pytest
from planted_bug_seeds import caught_within

from replog.quorum.controller.controller import QuorumController
from replog.quorum.controller.operation import ReadContext, ReadOperation
from replog.sim.run import simulate

R = TypeVar("R")


def test_the_runs_read_every_controller() -> None:
    report = simulate(0)
    assert report.data["controller reads checked"] >= report.nodes * 10


def _reads_latest_state(self: QuorumController, query: ReadOperation[R]) -> R:
    return query(
        ReadContext(
            cluster=self.cluster,
            configs=self.configs,
            features=self.features,
            producer_ids=self.producer_ids,
            replication=self.replication,
            scram=self.scram,
            offset=None,  # type: ignore[arg-type]  # the planted bug: the latest state
        )
    )


def test_reads_of_uncommitted_state_are_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(QuorumController, "read", _reads_latest_state)
    # First caught at seed 1 (at `d0e5ddda`): the scan starts there (planted_bug_seeds).
    caught_within(range(1, 21), "answered a read at its committed offset")
