"""`replog sim`'s broker-only nodes (Raft observers of the metadata log): runs draw them, they
run clean (each chunk of CI's seeds draws them: `runs_reach`), and a leader that counts
observers toward its high watermark (as if they voted) is caught: it commits what no majority
of the voters holds."""

from __future__ import annotations

import pytest
from planted_bug_seeds import caught_within

from replog.quorum.raft.node import RaftNode
from replog.quorum.raft.roles import Leader, ReplicaProgress


def test_observers_counted_as_voters_are_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    real = RaftNode._record_progress

    def counted(
        self: RaftNode, leader: Leader, replica_id: int, fetch_offset: int, now_ms: int
    ) -> None:
        """An observer's fetch offset counts toward the leader's high watermark."""
        if replica_id == self.node_id or replica_id in self._voter_ids:
            real(self, leader, replica_id, fetch_offset, now_ms)
            return
        progress = leader.voters.setdefault(replica_id, ReplicaProgress())
        progress.end_offset = fetch_offset
        progress.last_fetch_ms = now_ms
        self._update_leader_high_watermark(leader)

    monkeypatch.setattr(RaftNode, "_record_progress", counted)
    # First caught at seed 6 (at `d0e5ddda`): the scan starts there (planted_bug_seeds).
    caught_within(
        range(6, 106),
        "hold the committed metadata log|lost or replaced|below the high watermark|"
        "acknowledged topic creations lost|acknowledged record lost",
    )
