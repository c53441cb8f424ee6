"""One node of a scenario script: a `RaftNode` over the production metadata log on a disk in
memory, with a state machine that keeps the committed values.

The disk is `RaftStorage` (the replog `Log`, snapshot files, quorum-state) on a
`MemoryFileSystem`, so a crash keeps exactly what the node synced (no torn tail) and a restart
opens what is left, as a node process does. Each Ready is carried out whole (persist, flush,
advance, apply) before the next; the scripts decide which message arrives when, not when a
flush ends.

The state machine's snapshot is its next offset and a digest chained over every committed
batch (40 bytes), so two nodes' snapshots agree iff their committed histories do.
"""

from __future__ import annotations

import hashlib
import random
import struct

from replog.quorum.raft import (
    ApplyItem,
    CommittedBatch,
    LoadSnapshot,
    Message,
    RaftConfig,
    RaftNode,
    SnapshotId,
)
from replog.record import RecordBatch
from replog.server.raft.raft_storage import RaftStorage
from replog.storage.memory_fs import MemoryFileSystem

_SNAPSHOT = struct.Struct(">q32s")
METADATA_DIR = "/metadata"


class ValueMachine:
    """Applies committed batches in order, keeping their values (offset, value)."""

    def __init__(self) -> None:
        self.next_offset = 0
        self.digest = bytes(32)
        self.values: list[tuple[int, bytes]] = []

    def apply_batch(self, batch: CommittedBatch) -> None:
        assert batch.base_offset == self.next_offset, (batch.base_offset, self.next_offset)
        self.digest = hashlib.sha256(self.digest + hashlib.sha256(batch.batch).digest()).digest()
        self.next_offset = batch.last_offset + 1
        if not batch.is_control:
            for record in RecordBatch.parse(batch.batch):
                assert record.value is not None
                self.values.append((record.offset, record.value))

    def snapshot_bytes(self) -> bytes:
        return _SNAPSHOT.pack(self.next_offset, self.digest)

    def load(self, snapshot_id: SnapshotId, data: bytes) -> None:
        end_offset, self.digest = _SNAPSHOT.unpack(data)
        assert end_offset == snapshot_id.end_offset, (end_offset, snapshot_id)
        self.next_offset = end_offset
        self.values = [(offset, value) for offset, value in self.values if offset < end_offset]


class ScenarioHost:
    """One node process (module docstring); `node` is None while it is down."""

    def __init__(self, node_id: int, config: RaftConfig) -> None:
        self.node_id = node_id
        self.config = config
        self.fs = MemoryFileSystem()
        self.log = self._open()
        self.machine = ValueMachine()
        self.node: RaftNode | None = None
        self.incarnation = 0

    def _open(self) -> RaftStorage:
        return RaftStorage(METADATA_DIR, sorted(self.config.voter_ids), fs=self.fs)

    @property
    def flushed_end_offset(self) -> int:
        return self.log.log.recovery_point

    def start(self, now_ms: int) -> None:
        assert self.node is None
        self.incarnation += 1
        self.machine = ValueMachine()
        self.node = RaftNode(
            node_id=self.node_id,
            config=self.config,
            log=self.log,
            election_state=self.log.read_election_state(),
            rng=random.Random(f"0/{self.node_id}/{self.incarnation}"),
            now_ms=now_ms,
        )

    def crash(self) -> None:
        """The machine loses power: memory and every unsynced byte are gone."""
        self.node = None
        self.fs = self.fs.crash()
        self.log = self._open()

    def process_all(self) -> list[Message]:
        """Carry out every pending Ready; the messages they send, in order."""
        messages: list[Message] = []
        while self.node is not None and self.node.has_ready():
            ready = self.node.ready()
            self.node.advance(ready, flushed_end_offset=self.log.apply(ready))
            for item in ready.to_apply:
                self._apply(item)
            messages.extend(ready.messages)
        return messages

    def _apply(self, item: ApplyItem) -> None:
        if isinstance(item, CommittedBatch):
            self.machine.apply_batch(item)
        elif isinstance(item, LoadSnapshot):
            self.machine.load(item.snapshot_id, self.log.read_whole_snapshot(item.snapshot_id))
