"""What must hold of the nodes' metadata snapshots and log starts (`SnapshotChecker`), checked by
the runner on what each running node's Raft storage holds; a break is `InvariantViolation`.

Rules (KRaft's, docs/design/kraft.md#snapshots):
- Every snapshot holds the committed state: it ends at the end of a committed batch, is named
  after that batch's quorum epoch, and its records equal the replay of the committed metadata
  log up to its end, record for record (`image_to_records` of the image there), whichever node
  wrote it and whichever node downloaded it.
- A node's log starts at offset 0 or where one of its snapshots ends: nothing moves the log
  start past what a snapshot holds.
A snapshot ending beyond the committed log seen so far is checked once the log reaches it.
Each snapshot of a node's incarnation is read once (a snapshot file never changes).
"""

from __future__ import annotations

from collections.abc import Callable

from replog.quorum.metadata.record_batches import decode_snapshot
from replog.quorum.raft.snapshot_id import SnapshotId
from replog.sim.cluster import SimCluster
from replog.sim.committed_images import CommittedImages
from replog.sim.invariants import InvariantViolation

__all__ = ["SnapshotChecker"]


class SnapshotChecker:
    def __init__(self, cluster: SimCluster) -> None:
        self._cluster = cluster
        self._checked: set[tuple[int, int, SnapshotId]] = set()  # (node, incarnation, id)
        self.snapshots_checked = 0
        self.log_starts_moved = 0  # looks at a log whose start was past 0

    def check(self, images: CommittedImages) -> None:
        """Both rules (module docstring) for every running node, against `images`, the
        replay of the longest committed metadata log seen."""
        for node in self._cluster.up_nodes():
            assert node.raft is not None
            storage = node.raft.storage
            snapshots = storage.snapshot_ids()
            log_start = storage.log_start_offset
            if log_start > 0:
                self.log_starts_moved += 1
                if not any(s.end_offset == log_start for s in snapshots):
                    raise InvariantViolation(
                        f"at {self._cluster.loop.now_ms()} ms node {node.node_id}'s metadata "
                        f"log starts at {log_start}, where none of its snapshots ends "
                        f"({[s.end_offset for s in snapshots]})"
                    )
            for snapshot_id in snapshots:
                key = (node.node_id, node.incarnation, snapshot_id)
                if key in self._checked or snapshot_id.end_offset > images.end:
                    continue
                self._check_snapshot(node.node_id, snapshot_id, storage.read_whole_snapshot, images)
                self._checked.add(key)

    def _check_snapshot(
        self,
        node_id: int,
        snapshot_id: SnapshotId,
        read: Callable[[SnapshotId], bytes],
        images: CommittedImages,
    ) -> None:
        at = f"at {self._cluster.loop.now_ms()} ms node {node_id}'s snapshot {snapshot_id}"
        expected = images.by_end.get(snapshot_id.end_offset)
        if expected is None:
            raise InvariantViolation(f"{at} does not end at the end of a committed batch")
        if expected.provenance.snapshot_id() != snapshot_id:
            raise InvariantViolation(
                f"{at} is not named after the committed batch it ends with "
                f"({expected.provenance.snapshot_id()})"
            )
        records = decode_snapshot(read(snapshot_id), where=f"node {node_id}: {snapshot_id}")
        if tuple(records) != images.records_at(snapshot_id.end_offset):
            raise InvariantViolation(
                f"{at} differs from the replay of the committed metadata log up to its end"
            )
        self.snapshots_checked += 1
