"""`replog.sim.leader_announcements`: runs hear each new leader announce itself, and a Raft core
that announces its leadership before its epoch start is applied is caught."""

from __future__ import annotations

import pytest
from planted_bug_seeds import caught_within

from replog.quorum.raft import CommittedBatch, LeaderChange, LoadSnapshot, SnapshotId
from replog.quorum.raft.node import RaftNode
from replog.quorum.raft.roles import Leader
from replog.sim.invariants import InvariantViolation
from replog.sim.leader_announcements import LeaderAnnouncements
from replog.sim.run import simulate


def test_runs_hear_their_leaders_announce_themselves() -> None:
    assert simulate(2).data["own leaderships announced"] > 0


def test_a_leadership_announced_before_its_epoch_start_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = RaftNode._leader_change_due

    def at_once(self: RaftNode) -> LeaderChange | None:
        """A leader announces itself as soon as it leads, its epoch start not yet applied."""
        if isinstance(self._role, Leader):
            current = LeaderChange(self.node_id, self._election.quorum_epoch)
            return None if current == self._announced else current
        return real(self)

    monkeypatch.setattr(RaftNode, "_leader_change_due", at_once)
    caught_within(range(10), "before applying that epoch's start|MetadataReplayError")


def test_the_rule_on_items_made_by_hand() -> None:
    heard = LeaderAnnouncements()
    hear = heard.listener(1)
    hear(CommittedBatch(0, 0, 1, True, b""))  # epoch 1's start, node 2 leading
    hear(LeaderChange(2, 1))
    hear(LeaderChange(1, 2))  # node 1 leads epoch 2 before applying its start
    with pytest.raises(InvariantViolation, match="before applying that epoch's start"):
        heard.check()
    heard = LeaderAnnouncements()
    hear = heard.listener(1)
    hear(LoadSnapshot(SnapshotId(5, 1)))
    hear(CommittedBatch(5, 5, 2, True, b""))  # epoch 2's start
    hear(LeaderChange(1, 2))
    heard.check()
    assert heard.announcements == 1
