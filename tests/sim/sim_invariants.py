"""The simulator's safety checker: Raft's properties, checked after every event.

Properties (docs/design/kraft.md#properties, restated for this simulator):
1. Election safety: at most one leader per quorum epoch, judged from every quorum-state write
   (followers persist the leader they know, so every node must agree on it) and from the roles
   nodes take.
2. Durable election state is monotonic: a node's persisted epoch never decreases, its vote never
   changes within an epoch, its known leader is never replaced within an epoch; the in-memory
   epoch never falls below the highest one this node ever persisted.
3. Monotonic high watermark: within one run of a node its high watermark never decreases. A
   restart may reset it (it lives in memory), so across restarts the property is about the
   committed prefix: the highest high watermark any node ever reported, `committed_end`, never
   shrinks, and what lies below it never changes (4).
4. Committed data is consistent and never lost: the committed batches form one history (a table
   filled from whichever node first reported them committed); every node's log below its high
   watermark, every batch delivered to a state machine, and every snapshot equal that history;
   and a majority of voters hold it all, flushed, with the same content.
5. Snapshots: when a log's start offset is above 0 a snapshot ends exactly there; a leader never
   loads a snapshot; a node announces its own leadership to its state machine only after the
   state machine passed the leader's epoch start offset.

`committed_end` is defined precisely as: max over all events so far of the high watermark of any
live node. The table of committed batches always covers [0, committed_end).
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left
from collections.abc import Iterable

from sim_host import ZERO_DIGEST, NodeHost, chain_digest, decode_snapshot

from replog.quorum.raft import (
    ApplyItem,
    CommittedBatch,
    ElectionState,
    LeaderChange,
    LoadSnapshot,
)
from replog.quorum.raft.voters import majority_size


class InvariantViolation(AssertionError):
    """A safety property failed; the message says which and where."""


def _hash(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


class InvariantChecker:
    """Tracks the committed history and each node's progress (module docstring)."""

    def __init__(self, hosts: Iterable[NodeHost]) -> None:
        self.hosts = {host.node_id: host for host in hosts}
        self.voter_ids = sorted(h.node_id for h in self.hosts.values() if h.is_voter)
        self.leaders_by_epoch: dict[int, int] = {}
        self.persisted: dict[int, ElectionState] = {}
        self.epoch_floor: dict[int, int] = dict.fromkeys(self.hosts, 0)
        self.high_watermarks: dict[int, tuple[int, int]] = {}  # node -> (incarnation, hw)
        # The committed history: batch i covers [bases[i], ends[i]) and hashes to hashes[i];
        # digests[i] is the state machine digest after it.
        self.bases: list[int] = []
        self.ends: list[int] = []
        self.hashes: list[bytes] = []
        self.epochs: list[int] = []
        self.digests: list[bytes] = []
        self.committed_end = 0
        # How far each node's written log is known to equal the committed history.
        self.agree_end: dict[int, int] = dict.fromkeys(self.hosts, 0)
        self.log_start: dict[int, int] = dict.fromkeys(self.hosts, 0)
        self.events = 0

    def fail(self, message: str) -> None:
        raise InvariantViolation(message)

    @property
    def table_end(self) -> int:
        return self.ends[-1] if self.ends else 0

    def committed_epoch_at(self, base_offset: int) -> int | None:
        """The epoch of the committed batch starting at `base_offset`, if there is one."""
        index = bisect_left(self.bases, base_offset)
        if index < len(self.bases) and self.bases[index] == base_offset:
            return self.epochs[index]
        return None

    def digest_at(self, offset: int) -> bytes | None:
        if offset == 0:
            return ZERO_DIGEST
        index = bisect_left(self.ends, offset)
        if index < len(self.ends) and self.ends[index] == offset:
            return self.digests[index]
        return None

    # --- HostListener ---------------------------------------------------------------------------

    def on_election_state_written(self, host: NodeHost, state: ElectionState) -> None:
        node_id = host.node_id
        previous = self.persisted.get(node_id)
        if previous is not None:
            problem = previous.successor_problem(state)
            if problem is not None:
                self.fail(f"node {node_id} persisted an illegal election state: {problem}")
        self.persisted[node_id] = state
        self.epoch_floor[node_id] = max(self.epoch_floor[node_id], state.quorum_epoch)
        if state.leader_id is not None:
            self._note_leader(state.quorum_epoch, state.leader_id, f"node {node_id}'s quorum-state")

    def on_apply(self, host: NodeHost, item: ApplyItem) -> None:
        node = host.node
        assert node is not None
        if isinstance(item, CommittedBatch):
            self._extend_table(host, item.last_offset + 1)
            index = bisect_left(self.bases, item.base_offset)
            if index == len(self.bases) or self.bases[index] != item.base_offset:
                self.fail(
                    f"node {host.node_id} applied a batch at {item.base_offset}, which is "
                    "not a committed batch boundary"
                )
            if self.hashes[index] != _hash(item.batch) or self.ends[index] != item.last_offset + 1:
                self.fail(
                    f"node {host.node_id} applied a batch at {item.base_offset} that "
                    "differs from the committed one"
                )
        elif isinstance(item, LoadSnapshot):
            status = node.status()
            if status.role == "leader":
                self.fail(f"leader {host.node_id} was asked to load snapshot {item.snapshot_id}")
            self._check_snapshot(
                host, item.snapshot_id.end_offset, host.log.snapshots[item.snapshot_id]
            )
        elif isinstance(item, LeaderChange) and item.leader_id == host.node_id:
            status = node.status()
            assert status.epoch_start_offset is not None
            if host.machine.next_offset <= status.epoch_start_offset:
                self.fail(
                    f"leader {host.node_id} announced itself at applied offset "
                    f"{host.machine.next_offset}, not past its epoch start "
                    f"{status.epoch_start_offset}"
                )

    # --- after every event ---------------------------------------------------------------------

    def check(self) -> None:
        self.events += 1
        for host in self.hosts.values():
            self._follow_log(host)
        for node_id, host in self.hosts.items():
            node = host.node
            if node is None:
                continue
            election = node.election_state
            if election.quorum_epoch < self.epoch_floor[node_id]:
                self.fail(
                    f"node {node_id} is in quorum epoch {election.quorum_epoch} below "
                    f"{self.epoch_floor[node_id]}, which it reached before"
                )
            self.epoch_floor[node_id] = election.quorum_epoch
            status = node.status()
            high_watermark = status.high_watermark
            before = self.high_watermarks.get(node_id)
            if before is not None and before[0] == host.incarnation and high_watermark < before[1]:
                self.fail(
                    f"node {node_id}'s high watermark went from {before[1]} to {high_watermark}"
                )
            self.high_watermarks[node_id] = (host.incarnation, high_watermark)
            if status.role == "leader":
                self._note_leader(status.quorum_epoch, node_id, f"node {node_id}'s role")
            if high_watermark > self.table_end:
                self._extend_table(host, high_watermark)
            self.committed_end = max(self.committed_end, high_watermark)
        for node_id, host in self.hosts.items():
            self._advance_agreement(host)
            if host.node is None:
                continue
            high_watermark = self.high_watermarks[node_id][1]
            if self.agree_end[node_id] < min(high_watermark, host.log.log_end_offset):
                self.fail(
                    f"node {node_id}'s log differs from the committed history at offset "
                    f"{self.agree_end[node_id]}, below its high watermark {high_watermark}"
                )
        if self.table_end < self.committed_end:
            self.fail(
                f"offsets up to {self.committed_end} are committed but only "
                f"{self.table_end} were found in any log"
            )
        holders = [
            v
            for v in self.voter_ids
            if min(self.agree_end[v], self.hosts[v].log.flushed_end_offset) >= self.committed_end
        ]
        if len(holders) < majority_size(len(self.voter_ids)):
            self.fail(
                f"only voters {holders} hold the committed prefix [0, {self.committed_end}) "
                f"flushed; a majority of {self.voter_ids} must"
            )

    def _note_leader(self, quorum_epoch: int, leader_id: int, source: str) -> None:
        known = self.leaders_by_epoch.setdefault(quorum_epoch, leader_id)
        if known != leader_id:
            self.fail(
                f"two leaders in quorum epoch {quorum_epoch}: {known} and {leader_id} "
                f"(from {source})"
            )

    def _follow_log(self, host: NodeHost) -> None:
        """Account for truncations, crashes and log start moves since the last event."""
        node_id, log = host.node_id, host.log
        floor = log.take_rewrite_floor()
        if floor is not None:
            self.agree_end[node_id] = min(self.agree_end[node_id], floor)
        start = log.log_start_offset
        if start > 0:
            at_start = [s for s in log.snapshots if s.end_offset == start]
            if not at_start:
                self.fail(f"node {node_id}'s log starts at {start} with no snapshot ending there")
            if start != self.log_start[node_id]:
                self._check_snapshot(host, start, log.snapshots[at_start[0]])
        self.log_start[node_id] = start
        self.agree_end[node_id] = max(self.agree_end[node_id], start)

    def _check_snapshot(self, host: NodeHost, end_offset: int, data: bytes) -> None:
        snapshot_end, digest = decode_snapshot(data)
        expected = self.digest_at(end_offset)
        if snapshot_end != end_offset or expected is None or digest != expected:
            self.fail(
                f"node {host.node_id}'s snapshot ending at {end_offset} does not hold the "
                "committed history"
            )

    def _advance_agreement(self, host: NodeHost) -> None:
        node_id, log = host.node_id, host.log
        agree = self.agree_end[node_id]
        index = log.batch_index(agree)
        while index < len(log.batches) and agree < self.table_end:
            stored = log.batches[index]
            position = bisect_left(self.bases, stored.base_offset)
            if (
                stored.base_offset != agree
                or position == len(self.bases)
                or self.bases[position] != agree
                or self.ends[position] != stored.end_offset
                or self.hashes[position] != _hash(stored.data)
            ):
                break
            agree = stored.end_offset
            index += 1
        self.agree_end[node_id] = agree

    def _extend_table(self, host: NodeHost, up_to: int) -> None:
        """Record the batches of `host`'s log below `up_to` (which it reports committed)."""
        self._advance_agreement(host)
        if self.agree_end[host.node_id] < self.table_end:
            return  # checked by the caller against the node's high watermark
        log = host.log
        index = log.batch_index(self.table_end)
        while index < len(log.batches) and self.table_end < up_to:
            stored = log.batches[index]
            assert stored.base_offset == self.table_end, (stored, self.table_end)
            digest = chain_digest(self.digests[-1] if self.digests else ZERO_DIGEST, stored.data)
            self.bases.append(stored.base_offset)
            self.ends.append(stored.end_offset)
            self.hashes.append(_hash(stored.data))
            self.epochs.append(stored.quorum_epoch)
            self.digests.append(digest)
            index += 1
        self._advance_agreement(host)
