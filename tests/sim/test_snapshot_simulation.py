"""`replog sim` with metadata snapshots: a third of the seeds never snapshot, the others take,
download and check them and move log starts up (each chunk of CI's seeds shows it:
`runs_reach`), and the checks catch a snapshot missing a record of the committed state
(planted by patching the controller's rule, as `test_whole_cluster_simulation` plants its
bugs)."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest
from planted_bug_seeds import caught_within

from replog.quorum.metadata.records import MetadataRecord
from replog.quorum.metadata.steps import Steps
from replog.server.controller.controller_driver import ControllerDriver
from replog.sim.snapshot_shape import NO_SNAPSHOTS, SnapshotShape


def test_a_third_of_the_seeds_never_snapshot_and_the_others_do() -> None:
    shapes = [SnapshotShape.from_seed(random.Random(seed)) for seed in range(300)]
    never = sum(shape == NO_SNAPSHOTS for shape in shapes)
    assert 70 < never < 130
    assert {s.retention_bytes for s in shapes if s.snapshots} == {-1, 4_000, 16_000}


def _drops_the_last_record(monkeypatch: pytest.MonkeyPatch) -> None:
    """The planted bug: a snapshot leaves out the last record of the committed state."""
    state = ControllerDriver._snapshot_state

    def planted(self: ControllerDriver) -> tuple[Steps[Sequence[MetadataRecord]], int]:
        records, quorum_epoch = state(self)

        def fewer() -> Steps[Sequence[MetadataRecord]]:
            return list((yield from records))[:-1]

        return fewer(), quorum_epoch

    monkeypatch.setattr(ControllerDriver, "_snapshot_state", planted)


def test_a_snapshot_missing_a_record_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    _drops_the_last_record(monkeypatch)
    caught_within(range(40), "snapshot .* differs from the replay")
