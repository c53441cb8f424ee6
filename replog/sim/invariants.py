"""What must hold at every moment of a simulation run (`SafetyChecker`), checked by the runner
between the loop's iterations; a break is `InvariantViolation`, naming what broke and where.

Rules (the metadata quorum's, KRaft's):
- Election safety: at most one leader per quorum epoch, ever.
- Committed history: every node's committed metadata log (below its high watermark) agrees
  byte for byte with the longest committed log seen so far in the run, whichever node showed
  it, across crashes and power losses: a committed batch is never lost or replaced. (No node
  snapshots or compacts its log in these runs: every node's log starts at offset 0.)
- A node's high watermark never moves back within one of its incarnations.
- No task of a node ends with an error: a shell stops its node on one (fail-stop) and a core
  asserts its own rules (a truncation below the high watermark, say), so such an end is a
  broken guarantee seen from inside, reported as one.
The end-of-run checks (acknowledged writes present, liveness) are the runner's.
"""

from __future__ import annotations

from replog.sim.cluster import SimCluster

__all__ = ["InvariantViolation", "SafetyChecker"]

READ_ALL = 1 << 40


class InvariantViolation(AssertionError):
    """A safety rule broke (module docstring)."""


class SafetyChecker:
    def __init__(self, cluster: SimCluster) -> None:
        self._cluster = cluster
        self.leaders: dict[int, int] = {}  # quorum epoch -> its leader
        self._high_watermarks: dict[tuple[int, int], int] = {}  # (node, incarnation) -> HW
        self.committed = b""  # the longest committed log seen
        self.checks = 0

    def check_states(self) -> None:
        """The cheap rules, after every iteration of the loop."""
        self.checks += 1
        now = self._cluster.loop.now_ms()
        for node in self._cluster.nodes.values():
            if node.tasks.failures:
                raise InvariantViolation(
                    f"at {now} ms a task of node {node.node_id} failed: {node.tasks.failures[0]}"
                )
        for node in self._cluster.up_nodes():
            assert node.raft is not None
            status = node.raft.status()
            if status.role == "leader":
                known = self.leaders.setdefault(status.quorum_epoch, status.node_id)
                if known != status.node_id:
                    raise InvariantViolation(
                        f"at {now} ms two leaders in quorum epoch {status.quorum_epoch}: "
                        f"nodes {known} and {status.node_id}"
                    )
            if status.high_watermark_known:
                key = (node.node_id, node.incarnation)
                last = self._high_watermarks.get(key, -1)
                if status.high_watermark < last:
                    raise InvariantViolation(
                        f"at {now} ms node {node.node_id}'s high watermark moved back from "
                        f"{last} to {status.high_watermark}"
                    )
                self._high_watermarks[key] = status.high_watermark

    def check_logs(self) -> None:
        """The committed history rule: reads every node's committed log (costlier)."""
        now = self._cluster.loop.now_ms()
        for node in self._cluster.up_nodes():
            assert node.raft is not None
            if node.raft.learned_high_watermark() is None:
                continue  # not caught up since its start: its HW is a lower bound only
            data = node.raft.read_committed(0, READ_ALL)[0]
            common = min(len(data), len(self.committed))
            if data[:common] != self.committed[:common]:
                at = next(i for i in range(common) if data[i] != self.committed[i])
                raise InvariantViolation(
                    f"at {now} ms node {node.node_id}'s committed metadata log differs from "
                    f"the committed history at byte {at} of {common}: a committed batch was "
                    "lost or replaced"
                )
            if len(data) > len(self.committed):
                self.committed = data
