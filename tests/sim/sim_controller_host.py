"""A simulated node process whose Raft state machine is the metadata layer.

Voters run a `QuorumController`; observers run the broker-side metadata replay
(`MetadataDelta` into a `MetadataImage`), as a broker's metadata loader does. Both sit behind
the `ReplicatedStateMachine` of `sim_host`, so the Raft simulation's digest chain, and every
Raft invariant built on it, keeps working unchanged.

The shell rules this host follows (`quorum/raft/ready.py`, `quorum/controller/metadata_log.py`):
- Raft's `to_apply` items reach the controller only after `RaftNode.advance`: `NodeHost`'s
  `finish_phase` advances first and applies after, and every other call into the controller
  (requests, ticks) is made by the simulator only while no `Ready` is in flight.
  `RaftMetadataLog.prepare_append` asserts it.
- `prepare_append` encodes the records (`replog.quorum.metadata.record_codec`), one Raft record per
  metadata record, and proposes them as one batch; it refuses with NOT_CONTROLLER unless this
  node is the Raft leader of exactly the quorum epoch the controller names, before touching the
  accumulator.
- Committed batches are decoded and handed to `handle_commit` (a control batch with no
  records), a `LoadSnapshot` to `handle_load_snapshot`, a `LeaderChange` to
  `handle_leader_change`.

Snapshot format, as `sim_host`'s (a state machine writes its own): the `sim_host` header
(end offset, history digest), then the controller's committed view at its last stable offset
(`QuorumController.snapshot_records`) as length-prefixed encoded records. Observers write
`image_to_records` of their image in the same format, so either loads the other's snapshot.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from sim_host import NodeHost, ReplicatedStateMachine

from replog.errors import NotControllerError, NotLeaderOrFollowerError
from replog.quorum.controller.controller import QuorumController
from replog.quorum.controller.controller_config import ControllerConfig
from replog.quorum.metadata.delta import MetadataDelta
from replog.quorum.metadata.image import MetadataImage, MetadataProvenance
from replog.quorum.metadata.log_batches import CommittedRecords, SnapshotRecords
from replog.quorum.metadata.record_codec import decode_record, encode_record
from replog.quorum.metadata.records import MetadataRecord
from replog.quorum.metadata.snapshot import image_from_records, image_to_records
from replog.quorum.raft import (
    ApplyItem,
    CommittedBatch,
    LeaderChange,
    RaftConfig,
    RaftNode,
    SnapshotId,
)
from replog.record import RecordBatch

_HEADER_SIZE = struct.calcsize(">q32s")  # sim_host's snapshot header
_LENGTH = struct.Struct(">I")

ControllerFactory = Callable[..., QuorumController]


# --- encoding ------------------------------------------------------------------------------------


def encode_snapshot_records(records: Sequence[MetadataRecord]) -> bytes:
    parts = [_LENGTH.pack(len(records))]
    for record in records:
        data = encode_record(record)
        parts.append(_LENGTH.pack(len(data)))
        parts.append(data)
    return b"".join(parts)


def decode_snapshot_records(snapshot: bytes) -> tuple[MetadataRecord, ...]:
    """The metadata records of a snapshot written by either machine below."""
    (count,) = _LENGTH.unpack_from(snapshot, _HEADER_SIZE)
    position = _HEADER_SIZE + _LENGTH.size
    records = []
    for _ in range(count):
        (size,) = _LENGTH.unpack_from(snapshot, position)
        position += _LENGTH.size
        records.append(decode_record(snapshot[position : position + size]))
        position += size
    assert position == len(snapshot), "trailing bytes after the snapshot's records"
    return tuple(records)


def decode_batch(batch: CommittedBatch) -> CommittedRecords:
    """A committed Raft batch as the controller hears it (no records for a control batch)."""
    records: tuple[MetadataRecord, ...] = ()
    if not batch.is_control:
        parsed = []
        for record in RecordBatch.parse(batch.batch):
            assert record.value is not None, f"a metadata record without a value at {batch}"
            parsed.append(decode_record(record.value))
        records = tuple(parsed)
    return CommittedRecords(batch.base_offset, batch.last_offset, batch.quorum_epoch, records)


# --- the MetadataLog adapter --------------------------------------------------------------------


@dataclass(frozen=True)
class AppendedBatch:
    """One batch a controller handed to Raft: where it was promised to land."""

    node_id: int
    quorum_epoch: int
    base_offset: int
    last_offset: int
    records: tuple[MetadataRecord, ...]


class RaftMetadataLog:
    """`MetadataLog` over this host's `RaftNode` (module docstring)."""

    def __init__(self, host: ControllerNodeHost) -> None:
        self.host = host

    def prepare_append(self, quorum_epoch: int, records: Sequence[MetadataRecord]) -> int:
        host = self.host
        node = host.node
        assert node is not None, "a crashed node's controller was called"
        # The shell rule: no Raft input between ready() and advance().
        assert host.in_flight is None, "prepare_append while a Raft Ready is in flight"
        current = node.election_state.quorum_epoch
        if current != quorum_epoch:
            # Checked before proposing: a proposal in another epoch would land in the log.
            raise NotControllerError(
                f"node {host.node_id} is in quorum epoch {current}, not {quorum_epoch}"
            )
        try:
            result = node.propose([encode_record(r) for r in records], host.clock())
        except NotLeaderOrFollowerError as e:
            raise NotControllerError(str(e)) from e
        assert result.quorum_epoch == quorum_epoch, (result, quorum_epoch)
        appended = AppendedBatch(
            host.node_id, quorum_epoch, result.base_offset, result.last_offset, tuple(records)
        )
        host.appended_log.append(appended)
        if host.recording is not None:
            host.recording.append(appended)
        return result.last_offset

    def resign(self, quorum_epoch: int) -> None:
        host = self.host
        node = host.node
        assert node is not None and host.in_flight is None
        if node.election_state.quorum_epoch == quorum_epoch:
            node.resign(host.clock())


# --- state machines -----------------------------------------------------------------------------


class ControllerMachine(ReplicatedStateMachine):
    """The digest chain of `sim_host`, plus a `QuorumController` fed with the same batches."""

    def __init__(self, controller: QuorumController) -> None:
        super().__init__()
        self.controller = controller

    def apply_batch(self, batch: CommittedBatch) -> None:
        super().apply_batch(batch)
        self.controller.handle_commit(decode_batch(batch))

    def snapshot_bytes(self) -> bytes:
        controller = self.controller
        assert controller.last_committed_offset == self.next_offset - 1, (controller, self)
        # The stable offset's state equals the committed offset's (only control batches lie
        # between), and a timeline snapshot always exists there.
        records = controller.snapshot_records(controller.last_stable_offset)
        return super().snapshot_bytes() + encode_snapshot_records(records)

    def load(self, snapshot_id: SnapshotId, data: bytes) -> None:
        super().load(snapshot_id, data)
        self.controller.handle_load_snapshot(
            SnapshotRecords(
                snapshot_id.end_offset - 1,
                snapshot_id.quorum_epoch,
                decode_snapshot_records(data),
            )
        )


class ImageMachine(ReplicatedStateMachine):
    """A broker's metadata replay: one `MetadataDelta` per committed batch, applied at its end."""

    def __init__(self) -> None:
        super().__init__()
        self.image = MetadataImage.EMPTY

    def apply_batch(self, batch: CommittedBatch) -> None:
        super().apply_batch(batch)
        committed = decode_batch(batch)
        delta = MetadataDelta(self.image)
        for index, record in enumerate(committed.records):
            delta.replay(record, committed.base_offset + index)
        self.image = delta.apply(MetadataProvenance(batch.last_offset, batch.quorum_epoch))

    def snapshot_bytes(self) -> bytes:
        return super().snapshot_bytes() + encode_snapshot_records(image_to_records(self.image))

    def load(self, snapshot_id: SnapshotId, data: bytes) -> None:
        super().load(snapshot_id, data)
        provenance = MetadataProvenance(snapshot_id.end_offset - 1, snapshot_id.quorum_epoch)
        self.image = image_from_records(decode_snapshot_records(data), provenance)


# --- the host -----------------------------------------------------------------------------------


class ControllerNodeHost(NodeHost):
    """`NodeHost` with the metadata layer as its state machine (module docstring).

    `controller` is None on observers and while crashed. `appended_log` keeps every batch any
    incarnation of this node's controller handed to Raft (for the run's statistics);
    `recording`, when set, also collects those of the request being processed."""

    def __init__(
        self,
        node_id: int,
        config: RaftConfig,
        seed: int,
        *,
        controller_config: Callable[[int], ControllerConfig],
        controller_factory: ControllerFactory,
        clock: Callable[[], int],
        node_factory: Callable[..., RaftNode] = RaftNode,
    ) -> None:
        super().__init__(node_id, config, seed, node_factory=node_factory)
        self.controller_config = controller_config
        self.controller_factory = controller_factory
        self.clock = clock
        self.controller: QuorumController | None = None
        self.appended_log: list[AppendedBatch] = []
        self.recording: list[AppendedBatch] | None = None

    def start(self, now_ms: int) -> None:
        super().start(now_ms)
        if self.is_voter:
            self.controller = self.controller_factory(
                self.controller_config(self.node_id),
                RaftMetadataLog(self),
                random.Random(f"{self.seed}/controller/{self.node_id}/{self.incarnation}"),
            )
            self.machine = ControllerMachine(self.controller)
        else:
            self.machine = ImageMachine()

    def crash(self, rng: random.Random) -> None:
        super().crash(rng)
        self.controller = None  # its memory, pending responses included, is gone

    @property
    def can_call_controller(self) -> bool:
        """Whether the shell may call the controller now (alive, no Ready in flight)."""
        return self.controller is not None and self.node is not None and self.in_flight is None

    @contextmanager
    def record_appends(self) -> Iterator[list[AppendedBatch]]:
        """Collect the batches the controller appends inside the `with` block."""
        assert self.recording is None
        appended: list[AppendedBatch] = []
        self.recording = appended
        try:
            yield appended
        finally:
            self.recording = None

    def _apply(self, item: ApplyItem) -> None:
        super()._apply(item)
        if isinstance(item, LeaderChange):
            if self.controller is not None:
                self.controller.handle_leader_change(
                    item.leader_id, item.quorum_epoch, self.clock()
                )
        else:
            # Lets the checker compare the state after every batch, not only after every event.
            after_apply = getattr(self.listener, "after_apply", None)
            if after_apply is not None:
                after_apply(self)
