"""`LeaderAnnouncements`: a node's state machine hears of its own leadership only once it has
applied every entry committed before that leadership, checked on what each node's real Raft
driver hands its listeners.

Rule (KIP-595; the Raft core's, `RaftNode._leader_change_due`): a new leader's first entry
of quorum epoch e is its LeaderChange control batch (its epoch start); it announces itself
as leader of e to its listeners only after that batch committed and was handed to them, so
a controller activates on the whole committed log. So the last item a listener heard before
the node's own `LeaderChange` of epoch e is a committed batch of epoch e. Each incarnation of
a node hears its log again from its start (or its snapshot), so each gets its own listener.
A break is recorded and raised by `check` (the runner calls it after every loop iteration):
a listener must not raise into the driver.
"""

from __future__ import annotations

from collections.abc import Callable

from replog.quorum.raft import ApplyItem, CommittedBatch, LeaderChange, LoadSnapshot
from replog.server.raft.raft_driver import RaftDriver
from replog.sim.invariants import InvariantViolation

__all__ = ["LeaderAnnouncements"]


class LeaderAnnouncements:
    """See module docstring."""

    def __init__(self) -> None:
        self.announcements = 0
        self._broken: list[str] = []

    def watch(self, node_id: int, driver: RaftDriver) -> None:
        """Listen to `driver`, node `node_id`'s new Raft driver (before it runs)."""
        driver.add_listener(self.listener(node_id))

    def check(self) -> None:
        if self._broken:
            raise InvariantViolation(self._broken[0])

    def listener(self, node_id: int) -> Callable[[ApplyItem], None]:
        """A listener for one incarnation of node `node_id` (module docstring)."""
        last_epoch: int | None = None  # the quorum epoch of the last batch or snapshot heard

        def hear(item: ApplyItem) -> None:
            nonlocal last_epoch
            if isinstance(item, CommittedBatch):
                last_epoch = item.quorum_epoch
            elif isinstance(item, LoadSnapshot):
                last_epoch = item.snapshot_id.quorum_epoch
            elif isinstance(item, LeaderChange) and item.leader_id == node_id:
                self.announcements += 1
                if last_epoch != item.quorum_epoch:
                    self._broken.append(
                        f"node {node_id} announced its leadership of quorum epoch "
                        f"{item.quorum_epoch} to its state machine before applying that "
                        f"epoch's start (the last batch it applied is of epoch {last_epoch})"
                    )

        return hear
