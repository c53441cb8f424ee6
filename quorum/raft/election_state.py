"""The persisted part of a Raft node's state: quorum epoch, known leader, vote in that epoch.

Rules:
- The quorum epoch never decreases.
- Within one epoch the vote never changes once cast, and the leader never changes once known
  (it may be forgotten by an observer, never replaced).
- A node writes a new election state durably before it sends any message that depends on it
  (`Ready` documents the order); the core asserts the first two rules on every transition.

The on-disk format is `replog.checkpoints.quorum_state` (Kafka's `quorum-state` JSON, version 0);
`to_file_data` and `from_file_data` convert, mapping None to -1.
"""

from __future__ import annotations

from dataclasses import dataclass

from replog.checkpoints.quorum_state import NO_ID, QuorumStateData


@dataclass(frozen=True, slots=True)
class ElectionState:
    """(quorum epoch, leader known in it, voter this node voted for in it)."""

    quorum_epoch: int
    leader_id: int | None = None
    voted_id: int | None = None

    def __post_init__(self) -> None:
        assert self.quorum_epoch >= 0, f"negative quorum epoch {self.quorum_epoch}"

    def successor_problem(self, successor: ElectionState) -> str | None:
        """Why `successor` may not replace this state (module Rules), or None when it may."""
        if successor.quorum_epoch < self.quorum_epoch:
            return f"quorum epoch {self.quorum_epoch} -> {successor.quorum_epoch}"
        if successor.quorum_epoch > self.quorum_epoch:
            return None
        if self.voted_id is not None and successor.voted_id != self.voted_id:
            return (
                f"vote in epoch {self.quorum_epoch} changed {self.voted_id} -> {successor.voted_id}"
            )
        if self.leader_id is not None and successor.leader_id not in (None, self.leader_id):
            return (
                f"leader of epoch {self.quorum_epoch} changed "
                f"{self.leader_id} -> {successor.leader_id}"
            )
        return None

    def to_file_data(self, voter_ids: tuple[int, ...]) -> QuorumStateData:
        return QuorumStateData(
            quorum_epoch=self.quorum_epoch,
            leader_id=NO_ID if self.leader_id is None else self.leader_id,
            voted_id=NO_ID if self.voted_id is None else self.voted_id,
            current_voters=voter_ids,
        )

    @staticmethod
    def from_file_data(data: QuorumStateData) -> ElectionState:
        """The state held by a quorum-state file; a file that never saw an epoch is epoch 0."""
        return ElectionState(
            quorum_epoch=max(0, data.quorum_epoch),
            leader_id=None if data.leader_id == NO_ID else data.leader_id,
            voted_id=None if data.voted_id == NO_ID else data.voted_id,
        )

    def __str__(self) -> str:
        leader = "-" if self.leader_id is None else self.leader_id
        voted = "-" if self.voted_id is None else self.voted_id
        return f"epoch={self.quorum_epoch} leader={leader} voted={voted}"
