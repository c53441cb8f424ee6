"""An in-memory Raft log with a flushed/unflushed split, for the simulator and scenario tests.

It implements `replog.quorum.raft.RaftLog` and applies the core's `LogOp`s the way a storage shell
would. What a crash keeps: the flushed prefix of the log, frozen snapshots (written with fsync
and rename) and the log start offset; what it loses: unflushed batches (a random prefix of them
may survive, as a page cache may have written some back) and partial snapshot downloads.
Truncations and log-start moves are durable at once (the storage Log rewrites files for them).
"""

from __future__ import annotations

import random
from bisect import bisect_left
from dataclasses import dataclass

from replog.quorum.raft import (
    AbortSnapshot,
    AppendBatches,
    DeleteLogPrefix,
    EpochStart,
    InstallSnapshot,
    LogOp,
    SnapshotId,
    TruncateTo,
    WriteSnapshot,
    WriteSnapshotChunk,
)
from replog.record import iter_frames, read_header


@dataclass(frozen=True, slots=True)
class StoredBatch:
    base_offset: int
    end_offset: int
    quorum_epoch: int
    is_control: bool
    data: bytes


class MemoryLog:
    """See module docstring."""

    def __init__(self) -> None:
        self.batches: list[StoredBatch] = []
        self._bases: list[int] = []
        self._start = 0
        self.flushed_end_offset = 0
        self.snapshots: dict[SnapshotId, bytes] = {}
        self.partial_snapshots: dict[SnapshotId, bytearray] = {}
        # The lowest offset removed since the invariant checker last looked (None: nothing).
        self._rewrite_floor: int | None = None
        self.lies_about_fsync = False  # a deliberately broken disk, for checker self-tests

    # --- RaftLog -------------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._start

    @property
    def log_end_offset(self) -> int:
        return self.batches[-1].end_offset if self.batches else self._start

    def epoch_starts(self) -> list[EpochStart]:
        starts: list[EpochStart] = []
        for batch in self.batches:
            if not starts or starts[-1].quorum_epoch != batch.quorum_epoch:
                starts.append(EpochStart(batch.quorum_epoch, batch.base_offset))
        return starts

    def read(self, start_offset: int, max_bytes: int) -> bytes:
        index = bisect_left(self._bases, start_offset)
        if index == len(self.batches):
            assert start_offset == self.log_end_offset, (start_offset, self.log_end_offset)
            return b""
        assert self._bases[index] == start_offset, f"read at {start_offset} inside a batch"
        parts = [self.batches[index].data]
        size = len(parts[0])
        for batch in self.batches[index + 1 :]:
            if size + len(batch.data) > max_bytes:
                break
            parts.append(batch.data)
            size += len(batch.data)
        return b"".join(parts)

    def snapshot_ids(self) -> list[SnapshotId]:
        return sorted(self.snapshots)

    def snapshot_size(self, snapshot_id: SnapshotId) -> int | None:
        data = self.snapshots.get(snapshot_id)
        return None if data is None else len(data)

    def read_snapshot(self, snapshot_id: SnapshotId, position: int, max_bytes: int) -> bytes:
        return self.snapshots[snapshot_id][position : position + max_bytes]

    def batch_index(self, offset: int) -> int:
        """The index of the first batch whose base offset is >= `offset`."""
        return bisect_left(self._bases, offset)

    # --- what a shell does --------------------------------------------------------------------

    def apply(self, op: LogOp) -> None:
        if isinstance(op, AppendBatches):
            assert op.base_offset == self.log_end_offset, (op.base_offset, self.log_end_offset)
            for position, size in iter_frames(op.batches):
                header = read_header(op.batches, position)
                self._push(
                    StoredBatch(
                        header.base_offset,
                        header.next_offset,
                        header.partition_leader_epoch,
                        header.is_control,
                        op.batches[position : position + size],
                    )
                )
            assert self.log_end_offset == op.end_offset
        elif isinstance(op, TruncateTo):
            self._cut(op.end_offset)
        elif isinstance(op, WriteSnapshot):
            self.snapshots[op.snapshot_id] = op.data
        elif isinstance(op, WriteSnapshotChunk):
            partial = self.partial_snapshots.setdefault(op.snapshot_id, bytearray())
            assert len(partial) == op.position, (len(partial), op)
            partial += op.chunk
        elif isinstance(op, InstallSnapshot):
            partial = self.partial_snapshots.pop(op.snapshot_id, None)
            if partial is not None:
                self.snapshots[op.snapshot_id] = bytes(partial)
            assert op.snapshot_id in self.snapshots, op
            self._note_rewrite(0)
            self.batches.clear()
            self._bases.clear()
            self._start = self.flushed_end_offset = op.snapshot_id.end_offset
        elif isinstance(op, AbortSnapshot):
            self.partial_snapshots.pop(op.snapshot_id, None)
        else:
            assert isinstance(op, DeleteLogPrefix)
            self._delete_prefix(op.log_start_offset)

    def flush(self) -> None:
        self.flushed_end_offset = self.log_end_offset

    def crash(self, rng: random.Random) -> None:
        """Lose what a crash loses (module docstring)."""
        self.partial_snapshots.clear()
        if self.lies_about_fsync:
            self.flushed_end_offset = self._start
        unflushed = [b for b in self.batches if b.end_offset > self.flushed_end_offset]
        if not unflushed:
            return
        survivors = rng.randrange(0, len(unflushed) + 1)
        keep_end = unflushed[survivors - 1].end_offset if survivors else self.flushed_end_offset
        self._cut(keep_end)
        self.flushed_end_offset = self.log_end_offset

    # --- internals --------------------------------------------------------------------------

    def _push(self, batch: StoredBatch) -> None:
        assert batch.base_offset == self.log_end_offset, (batch, self.log_end_offset)
        if self.batches:
            assert batch.quorum_epoch >= self.batches[-1].quorum_epoch, batch
        self.batches.append(batch)
        self._bases.append(batch.base_offset)

    def _cut(self, end_offset: int) -> None:
        if end_offset >= self.log_end_offset:
            return
        index = bisect_left(self._bases, end_offset)
        assert index == len(self.batches) or self._bases[index] == end_offset, end_offset
        self._note_rewrite(end_offset)
        del self.batches[index:]
        del self._bases[index:]
        self.flushed_end_offset = min(self.flushed_end_offset, self.log_end_offset)

    def _delete_prefix(self, start_offset: int) -> None:
        assert start_offset in {s.end_offset for s in self.snapshots}, start_offset
        index = bisect_left(self._bases, start_offset)
        assert index == len(self.batches) or self._bases[index] == start_offset, start_offset
        del self.batches[:index]
        del self._bases[:index]
        self._start = start_offset
        self.flushed_end_offset = max(self.flushed_end_offset, start_offset)
        for snapshot_id in list(self.snapshots):
            if snapshot_id.end_offset < start_offset:
                del self.snapshots[snapshot_id]

    def _note_rewrite(self, offset: int) -> None:
        floor = self._rewrite_floor
        self._rewrite_floor = offset if floor is None else min(floor, offset)

    def take_rewrite_floor(self) -> int | None:
        """The lowest offset removed since the last call (truncation, crash, snapshot install)."""
        floor, self._rewrite_floor = self._rewrite_floor, None
        return floor
