"""What must hold at every moment of a simulation run (`SafetyChecker`), checked by the runner
between the loop's iterations; a break is `InvariantViolation`, naming what broke and where.

Rules (the metadata quorum's, KRaft's):
- Election safety: at most one leader per quorum epoch, ever.
- Committed history: every node's committed metadata log (below its high watermark) agrees
  byte for byte with the longest committed log seen so far in the run, whichever node showed
  it, across crashes and power losses: a committed batch is never lost or replaced. A node
  whose log start moved up to a snapshot (`snapshot_invariants` checks the snapshots) is
  compared from its log start on; a log start beyond the history seen so far cannot be placed
  and waits until another node shows the batches before it. The runner looks at the logs
  after every iteration, so some node shows every committed batch before the last copy below
  a log start goes (the start moves to a snapshot loop turns after the high watermark passed
  it). A log start no node can place any more is a violation: every running node's, or at the
  end of a run (`whole`) any node's. The history, which the other checks replay, would miss
  committed batches.
- A node's high watermark never moves back within one of its incarnations.
- A node's election state changes only as Raft allows (`ElectionState.successor_problem`)
  within one of its incarnations: its quorum epoch never decreases, its vote and its known
  leader never change within an epoch. (The core asserts this too; the checker must not rely
  on the code it checks.)
- Durability (`check_durable`): a majority of the voters' disks hold the committed log
  synced (what a power loss of every node would keep, torn tails aside), byte for byte: from
  its first segment on, and what lies below that segment in a synced snapshot.
- No task of a node ends with an error: a shell stops its node on one (fail-stop) and a core
  asserts its own rules (a truncation below the high watermark, say), so such an end is a
  broken guarantee seen from inside, reported as one. The one exception is a storage error
  on a node whose disk the run failed: `node_faults` stops that node first, as the node
  process would exit.
The end-of-run checks (acknowledged writes present, liveness) are the runner's.

Cost: a node's state and log are read only when its Raft driver ran since the last look (its
task is the only code that changes its core), so an iteration in which the cluster's `changes`
did not move (no driver ran, no node started or stopped, no task ended with an error) reads
nothing but the log starts not yet placed; each node's committed log only from where
the last look at the same incarnation ended (a committed batch cannot change in place without a
truncation below the high watermark, which the core refuses); `check_logs(whole=True)`, at
the end of a run, reads every log from its start again.
"""

from __future__ import annotations

from replog.quorum.raft.election_state import ElectionState
from replog.quorum.raft.snapshot_id import parse_snapshot_file_name
from replog.record import iter_frames, read_header
from replog.server.raft.raft_storage import METADATA_PARTITION_DIR
from replog.sim.cluster import SimCluster
from replog.sim.raft_node import METADATA_DIR

__all__ = ["InvariantViolation", "SafetyChecker"]

READ_ALL = 1 << 40
METADATA_LOG_DIR = f"{METADATA_DIR}/{METADATA_PARTITION_DIR}"


class InvariantViolation(AssertionError):
    """A safety rule broke (module docstring)."""


class SafetyChecker:
    def __init__(self, cluster: SimCluster) -> None:
        self._cluster = cluster
        self.leaders: dict[int, int] = {}  # quorum epoch -> its leader
        self._high_watermarks: dict[tuple[int, int], int] = {}  # (node, incarnation) -> HW
        self._elections: dict[tuple[int, int], ElectionState] = {}  # (node, incarnation) -> last
        self.committed = bytearray()  # the longest committed log seen
        self.checks = 0
        self._looked_at: dict[int, int] = {}  # node -> its `steps` when its state was checked
        self._log_looked_at: dict[int, int] = {}  # node -> its `steps` when its log was
        # (node, incarnation) -> (offset, byte of `committed`) its log was checked up to
        self._read_to: dict[tuple[int, int], tuple[int, int]] = {}
        # Where each committed batch begins in `committed`, and where it ends: offset -> byte.
        self._positions: dict[int, int] = {0: 0}
        # node -> (incarnation, log start) of a log that starts beyond the history seen
        self._unplaced: dict[int, tuple[int, int]] = {}
        # The cluster's `changes` at the last full look at the states, and at the logs: after
        # one, every running node's `steps` is looked at and no task has failed.
        self._states_seen = self._logs_seen = -1

    def check_states(self) -> None:
        """The cheap rules, after every iteration of the loop."""
        self.checks += 1
        changes = self._cluster.changes
        if changes == self._states_seen:
            return  # every node as at the last look (module docstring, Cost)
        looked_at = self._looked_at
        for node in self._cluster.nodes.values():  # one pass, no list: it runs often
            if node.tasks.failures:
                raise InvariantViolation(
                    f"at {self._cluster.loop.now_ms()} ms a task of node {node.node_id} "
                    f"failed: {node.tasks.failures[0]}"
                )
            raft = node.raft
            if raft is None or looked_at.get(node.node_id) == node.steps:
                continue  # down, or its driver did not run: nothing of its state changed
            looked_at[node.node_id] = node.steps
            now = self._cluster.loop.now_ms()
            core = raft.node  # its parts, not `status()`: this runs after most iterations
            election = core.election_state
            if core.role == "leader":
                known = self.leaders.setdefault(election.quorum_epoch, core.node_id)
                if known != core.node_id:
                    raise InvariantViolation(
                        f"at {now} ms two leaders in quorum epoch {election.quorum_epoch}: "
                        f"nodes {known} and {core.node_id}"
                    )
            key = (node.node_id, node.incarnation)
            last_election = self._elections.get(key)
            if last_election is not None and last_election != election:
                problem = last_election.successor_problem(election)
                if problem is not None:
                    raise InvariantViolation(
                        f"at {now} ms node {node.node_id}'s election state changed illegally: "
                        f"{problem}"
                    )
            self._elections[key] = election
            high_watermark = core.learned_high_watermark()
            if high_watermark is not None:
                last = self._high_watermarks.get(key, -1)
                if high_watermark < last:
                    raise InvariantViolation(
                        f"at {now} ms node {node.node_id}'s high watermark moved back from "
                        f"{last} to {high_watermark}"
                    )
                self._high_watermarks[key] = high_watermark
        self._states_seen = changes

    def check_logs(self, *, whole: bool = False) -> None:
        """The committed history rule: reads what each node committed since the last look
        (module docstring), or with `whole` every node's whole committed log."""
        now = self._cluster.loop.now_ms()
        changes = self._cluster.changes
        if not whole and changes == self._logs_seen:  # every node as at the last look
            if self._unplaced:
                self._check_placed(now, whole=False)
            return
        committed = self.committed
        looked_at, unplaced = self._log_looked_at, self._unplaced
        for node in self._cluster.nodes.values():  # no list made: it runs often
            if node.raft is None:
                continue  # down
            if not whole and looked_at.get(node.node_id) == node.steps:
                continue
            looked_at[node.node_id] = node.steps
            high_watermark = node.raft.learned_high_watermark()
            if high_watermark is None:
                continue  # not caught up since its start: its HW is a lower bound only
            key = (node.node_id, node.incarnation)
            unplaced.pop(node.node_id, None)
            offset, position = (0, 0) if whole else self._read_to.get(key, (0, 0))
            log_start = node.raft.storage.log_start_offset
            if offset < log_start:  # moved up to a snapshot (module docstring)
                placed = self._positions.get(log_start)
                if placed is None:
                    unplaced[node.node_id] = (node.incarnation, log_start)
                    continue
                offset, position = log_start, placed
            if offset >= high_watermark:
                continue  # nothing committed since the last look: most steps commit nothing
            data = node.raft.read_committed(offset, READ_ALL)[0]
            if not data:
                continue
            common = min(len(data), len(committed) - position)
            if data[:common] != committed[position : position + common]:
                at = next(i for i in range(common) if data[i] != committed[position + i])
                raise InvariantViolation(
                    f"at {now} ms node {node.node_id}'s committed metadata log differs from "
                    f"the committed history at byte {position + at} of "
                    f"{position + common}: a committed batch was lost or replaced"
                )
            if len(data) > common:
                self._extend(memoryview(data)[common:])
            last = max(iter_frames(data))[0]  # batches are whole: read below the HW
            self._read_to[key] = (read_header(data, last).next_offset, position + len(data))
        self._logs_seen = changes
        if unplaced:
            self._check_placed(now, whole=whole)

    def _check_placed(self, now: int, *, whole: bool) -> None:
        """A log start no node can place any more (module docstring): at the end of a run any
        node's, else every node's, each running the incarnation that showed it."""
        nodes = self._cluster.nodes
        unplaced = {
            node_id: start
            for node_id, (incarnation, start) in self._unplaced.items()
            if nodes[node_id].up and nodes[node_id].incarnation == incarnation
        }
        if unplaced and (whole or len(unplaced) == len(nodes)):
            raise InvariantViolation(
                f"at {now} ms the committed history seen ends at offset {max(self._positions)}, "
                f"before the metadata log start of nodes {unplaced} (node: offset): the "
                "committed batches between left every log unseen"
            )

    def _extend(self, batches: memoryview) -> None:
        """`batches`, whole ones, follow the committed history."""
        committed, positions = self.committed, self._positions
        start = len(committed)
        committed += batches
        for position, size in iter_frames(committed, start):
            positions[read_header(committed, position).next_offset] = position + size

    def check_durable(self) -> None:
        """The durability rule (module docstring), on the longest committed log seen."""
        cluster = self._cluster
        holders = [
            node_id
            for node_id in cluster.voter_ids
            if self._holds_durably(cluster.nodes[node_id].disk.durable_files(METADATA_LOG_DIR))
        ]
        if len(holders) <= len(cluster.voter_ids) // 2:
            raise InvariantViolation(
                f"at {self._cluster.loop.now_ms()} ms only nodes {holders} hold the committed "
                f"metadata log ({len(self.committed)} bytes) synced; a majority of the voters "
                "must"
            )

    def _holds_durably(self, files: dict[str, bytes]) -> bool:
        """Whether synced `files` (a node's metadata log directory) hold the committed log:
        its segments from the first on, the part below the first in a synced snapshot."""
        committed = self.committed
        segments = sorted(name for name in files if name.endswith(".log"))
        first = int(segments[0].removesuffix(".log")) if segments else 0
        if first > 0:
            snapshots = [parse_snapshot_file_name(name) for name in files]
            if not any(s is not None and s.end_offset >= first for s in snapshots):
                return False
        position = self._positions.get(first)
        if position is None:
            return False  # a segment beginning at no batch of the history seen
        synced = b"".join(files[name] for name in segments)
        return synced[: len(committed) - position] == committed[position:]
