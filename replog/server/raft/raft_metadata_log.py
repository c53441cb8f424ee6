"""The controller's `MetadataLog` over a `RaftNode`, and Raft's apply items as controller inputs.

Writing (`RaftMetadataLog`): `prepare_append` encodes each record (`record_codec`) and proposes
the values as one batch; Raft assigns the offsets at once and appends the batch after its
linger time. `resign` gives up Raft leadership of an epoch.

Hearing (`committed_records`, `snapshot_records`): a `CommittedBatch` becomes
`CommittedRecords` (its record values decoded; a control batch has none) and a `LoadSnapshot`
becomes `SnapshotRecords` (the snapshot file decoded, `replog.quorum.metadata.record_batches`).

Rules:
- Called only on the Raft driver's loop, outside a `ready()`/`advance()` cycle (see
  `controller_driver`).
- `prepare_append` checks before proposing that the node leads in exactly the controller's
  quorum epoch: a node that leads a newer epoch must not take records meant for an older one.
  Raft's NOT_LEADER_OR_FOLLOWER becomes the controller's `NotControllerError`; any other error
  (a batch too large) means nothing was appended.
- A record that cannot be decoded is `CorruptMetadataRecordError`, naming the batch: fatal for
  the node, as the log is committed and reading it again gives the same bytes.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from replog.clock import Clock
from replog.errors import NotControllerError, NotLeaderOrFollowerError
from replog.quorum.metadata.log_batches import CommittedRecords, SnapshotRecords
from replog.quorum.metadata.record_batches import decode_batch_in_steps, decode_snapshot_in_steps
from replog.quorum.metadata.record_codec import encode_record
from replog.quorum.metadata.records import MetadataRecord
from replog.quorum.metadata.steps import REPLAY_STEP_RECORDS, Steps, run_to_end
from replog.quorum.raft.node import RaftNode
from replog.quorum.raft.ready import CommittedBatch, LoadSnapshot

LEADER_ROLE = "leader"


class RaftMetadataLog:
    """Implements `replog.quorum.controller.metadata_log.MetadataLog` over one node's Raft core."""

    def __init__(self, node: RaftNode, clock: Clock) -> None:
        self._node = node
        self._clock = clock  # the Raft driver's: the core asserts its time never goes back

    def prepare_append(self, quorum_epoch: int, records: Sequence[MetadataRecord]) -> int:
        status = self._node.status()
        if status.role != LEADER_ROLE or status.quorum_epoch != quorum_epoch:
            raise NotControllerError(
                f"node {self._node.node_id} is not the quorum leader in quorum epoch "
                f"{quorum_epoch} (it is {status.role} in quorum epoch {status.quorum_epoch})"
            )
        values = [encode_record(record) for record in records]
        try:
            result = self._node.propose(values, self._clock())
        except NotLeaderOrFollowerError as error:
            raise NotControllerError(str(error)) from None
        assert result.quorum_epoch == quorum_epoch, (result, quorum_epoch)
        return result.last_offset

    def resign(self, quorum_epoch: int) -> None:
        status = self._node.status()
        if status.role == LEADER_ROLE and status.quorum_epoch == quorum_epoch:
            self._node.resign(self._clock())


# A combined node's controller and broker listeners both hear every committed batch, one after
# the other: remembering the last two decodes makes that one decode per batch, not two (about a
# sixth of a node's CPU while topics are created). Batches and results are immutable, and bytes
# cache their hash, so the key costs nothing after the first call.
_DECODES_KEPT = 2
_decoded: OrderedDict[tuple[CommittedBatch, int], CommittedRecords] = OrderedDict()


def committed_records(batch: CommittedBatch, *, node_id: int) -> CommittedRecords:
    """The controller's view of one committed Raft batch."""
    return run_to_end(committed_records_in_steps(batch, node_id=node_id))


def committed_records_in_steps(batch: CommittedBatch, *, node_id: int) -> Steps[CommittedRecords]:
    """`committed_records` decoded `REPLAY_STEP_RECORDS` records a step (a controlled
    shutdown's batch holds thousands), for a stepped listener of the Raft driver."""
    key = (batch, node_id)
    found = _decoded.get(key)
    if found is not None:
        _decoded.move_to_end(key)
        return found
    records: tuple[MetadataRecord, ...] = ()
    if not batch.is_control:
        records = yield from decode_batch_in_steps(
            batch.batch,
            where=f"node {node_id}: committed metadata batch at offset {batch.base_offset}",
            records_per_step=REPLAY_STEP_RECORDS,
        )
    decoded = CommittedRecords(batch.base_offset, batch.last_offset, batch.quorum_epoch, records)
    _decoded[key] = decoded
    while len(_decoded) > _DECODES_KEPT:
        _decoded.popitem(last=False)
    return decoded


# The same for a snapshot load, which a combined node's two listeners hear too: a restart's
# snapshot of 10,000 partitions is 11,000 records, about 0.3 s of CPU to decode. The bytes are
# kept and compared (a memcmp, not a decode): a snapshot id names one state in one cluster
# only, and another cluster's node of the same id may run in the same process.
_snapshot_decoded: OrderedDict[tuple[LoadSnapshot, int], tuple[bytes, SnapshotRecords]] = (
    OrderedDict()
)


def snapshot_records(item: LoadSnapshot, data: bytes, *, node_id: int) -> SnapshotRecords:
    """The controller's view of the snapshot `item` names, whose file holds `data`."""
    return run_to_end(snapshot_records_in_steps(item, data, node_id=node_id))


def snapshot_records_in_steps(
    item: LoadSnapshot, data: bytes, *, node_id: int
) -> Steps[SnapshotRecords]:
    """`snapshot_records` decoded `REPLAY_STEP_RECORDS` records a step, for a stepped listener
    of the Raft driver."""
    key = (item, node_id)
    found = _snapshot_decoded.pop(key, None)  # the second listener's: nobody asks again
    if found is not None and found[0] == data:
        return found[1]
    snapshot_id = item.snapshot_id
    records = yield from decode_snapshot_in_steps(
        data,
        where=f"node {node_id}: metadata snapshot {snapshot_id.file_name()}",
        records_per_step=REPLAY_STEP_RECORDS,
    )
    decoded = SnapshotRecords(snapshot_id.end_offset - 1, snapshot_id.quorum_epoch, tuple(records))
    _snapshot_decoded.clear()  # at most one kept: loads are rare, and their records many
    _snapshot_decoded[key] = (data, decoded)
    return decoded
