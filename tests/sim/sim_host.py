"""A simulated node process: the shell around one `RaftNode`, its disk, and a state machine.

`NodeHost` does what the asyncio shell will do, in the order `Ready` prescribes, but against
in-memory seams: the quorum-state "file" (`QuorumStateStore`, rendered and parsed through the
real `replog.checkpoints.quorum_state` format), a `MemoryLog`, and `ReplicatedStateMachine`, which
chains a digest over every committed batch so that two nodes agree on their committed history
iff their digests at the same offset agree. Processing a `Ready` is split in two phases so the
simulator can crash a node between writing and flushing:

    write_phase:  persist election state, apply log ops (unflushed)
    finish_phase: flush (voters), hand messages back for sending, apply to the state machine,
                  advance
"""

from __future__ import annotations

import hashlib
import random
import struct
from collections.abc import Callable
from typing import Protocol

from sim_memory_log import MemoryLog

from replog.checkpoints.quorum_state import QUORUM_STATE, parse_quorum_state, render_quorum_state
from replog.quorum.raft import (
    ApplyItem,
    CommittedBatch,
    ElectionState,
    LeaderChange,
    LoadSnapshot,
    Message,
    RaftConfig,
    RaftNode,
    Ready,
    SnapshotId,
)
from replog.record import RecordBatch

_SNAPSHOT = struct.Struct(">q32s")
ZERO_DIGEST = bytes(32)


def chain_digest(digest: bytes, batch: bytes) -> bytes:
    """The committed-history digest after `batch`."""
    return hashlib.sha256(digest + hashlib.sha256(batch).digest()).digest()


class HostListener(Protocol):
    """What the invariant checker hears from a host."""

    def on_election_state_written(self, host: NodeHost, state: ElectionState) -> None: ...

    def on_apply(self, host: NodeHost, item: ApplyItem) -> None: ...


class QuorumStateStore:
    """The `quorum-state` file of one node: survives crashes, written atomically."""

    def __init__(self, node_id: int, voter_ids: tuple[int, ...]) -> None:
        self.source = f"node-{node_id}/{QUORUM_STATE}"
        self.voter_ids = voter_ids
        self.data: bytes | None = None

    def read(self) -> ElectionState:
        if self.data is None:
            return ElectionState(0)
        return ElectionState.from_file_data(parse_quorum_state(self.data, source=self.source))

    def write(self, state: ElectionState) -> None:
        self.data = render_quorum_state(state.to_file_data(self.voter_ids))
        # Pair the write with a read-back, as the real shell's file seam would.
        assert self.read() == state, (self.read(), state)


class ReplicatedStateMachine:
    """Applies committed batches in order; its state is (next offset, digest of history)."""

    def __init__(self, *, keep_values: bool = False, snapshot_padding: int = 0) -> None:
        self.next_offset = 0
        # Filler that makes snapshots span several FetchSnapshot chunks in the simulator.
        self.snapshot_padding = snapshot_padding
        self.digest = ZERO_DIGEST
        self.keep_values = keep_values
        self.values: list[tuple[int, bytes]] = []  # (offset, value) when keep_values
        self.leader: LeaderChange | None = None

    def apply_batch(self, batch: CommittedBatch) -> None:
        assert batch.base_offset == self.next_offset, (
            f"committed batch at {batch.base_offset}, expected {self.next_offset}"
        )
        self.digest = chain_digest(self.digest, batch.batch)
        self.next_offset = batch.last_offset + 1
        if self.keep_values and not batch.is_control:
            for record in RecordBatch.parse(batch.batch):
                assert record.value is not None
                self.values.append((record.offset, record.value))

    def snapshot_bytes(self) -> bytes:
        return _SNAPSHOT.pack(self.next_offset, self.digest) + bytes(self.snapshot_padding)

    def load(self, snapshot_id: SnapshotId, data: bytes) -> None:
        end_offset, digest = decode_snapshot(data)
        assert end_offset == snapshot_id.end_offset, (end_offset, snapshot_id)
        self.next_offset = end_offset
        self.digest = digest
        self.values = [(offset, value) for offset, value in self.values if offset < end_offset]


def decode_snapshot(data: bytes) -> tuple[int, bytes]:
    end_offset, digest = _SNAPSHOT.unpack_from(data)
    return end_offset, digest


class NodeHost:
    """One simulated process (module docstring). `node` is None while crashed."""

    def __init__(
        self,
        node_id: int,
        config: RaftConfig,
        seed: int,
        listener: HostListener | None = None,
        *,
        node_factory: Callable[..., RaftNode] = RaftNode,
        keep_values: bool = False,
        snapshot_padding: int = 0,
    ) -> None:
        self.node_id = node_id
        self.config = config
        self.is_voter = node_id in config.voter_ids
        self.seed = seed
        self.listener = listener
        self.node_factory = node_factory
        self.keep_values = keep_values
        self.snapshot_padding = snapshot_padding
        self.log = MemoryLog()
        self.store = QuorumStateStore(node_id, tuple(sorted(config.voter_ids)))
        self.node: RaftNode | None = None
        self.machine = ReplicatedStateMachine(
            keep_values=keep_values, snapshot_padding=snapshot_padding
        )
        self.incarnation = 0
        self.in_flight: Ready | None = None

    @property
    def alive(self) -> bool:
        return self.node is not None

    def start(self, now_ms: int) -> None:
        assert self.node is None
        self.incarnation += 1
        self.machine = ReplicatedStateMachine(
            keep_values=self.keep_values, snapshot_padding=self.snapshot_padding
        )
        self.node = self.node_factory(
            node_id=self.node_id,
            config=self.config,
            log=self.log,
            election_state=self.store.read(),
            rng=random.Random(f"{self.seed}/{self.node_id}/{self.incarnation}"),
            now_ms=now_ms,
        )

    def crash(self, rng: random.Random) -> None:
        """Stop the process: lose memory, unflushed data and any half-processed Ready."""
        self.node = None
        self.in_flight = None
        self.log.crash(rng)

    def write_phase(self) -> tuple[Message, ...]:
        """Persist the election state and write the log; return the messages that may leave
        before the flush (a leader's, whose messages promise nothing about its log)."""
        node = self.node
        assert node is not None and self.in_flight is None
        ready = node.ready()
        if ready.election_state is not None:
            self.store.write(ready.election_state)
            if self.listener is not None:
                self.listener.on_election_state_written(self, ready.election_state)
        for op in ready.log_ops:
            self.log.apply(op)
        self.in_flight = ready
        return () if ready.flush_before_send else ready.messages

    def finish_phase(self) -> tuple[Message, ...]:
        """Flush, advance, apply to the state machine; return the messages still to send."""
        node, ready = self.node, self.in_flight
        assert node is not None and ready is not None
        if ready.flush_log:
            self.log.flush()
        self.in_flight = None
        node.advance(ready, flushed_end_offset=self.log.flushed_end_offset)
        for item in ready.to_apply:
            self._apply(item)
        return ready.messages if ready.flush_before_send else ()

    def process_all(self) -> list[Message]:
        """Both phases for every pending Ready, at once (scenario tests)."""
        messages: list[Message] = []
        while self.node is not None and self.node.has_ready():
            messages.extend(self.write_phase())
            messages.extend(self.finish_phase())
        return messages

    def _apply(self, item: ApplyItem) -> None:
        if self.listener is not None:
            self.listener.on_apply(self, item)
        if isinstance(item, CommittedBatch):
            self.machine.apply_batch(item)
        elif isinstance(item, LoadSnapshot):
            self.machine.load(item.snapshot_id, self.log.snapshots[item.snapshot_id])
        else:
            self.machine.leader = item
