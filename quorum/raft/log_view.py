"""The Raft log as the pure core sees it: a read-only Protocol plus a summary of its epochs.

The core never writes the log. It reads it through `RaftLog`, which the shell implements over
replog's storage `Log` (and the simulator in memory), and asks for every change through
`Ready.log_ops`. Entries are RecordBatch v2 batches; a batch's `partition_leader_epoch` is the
quorum epoch in which a leader appended it. The core frames and validates batch headers but
never decodes records.

Rules:
- `RaftLog` shows what the shell has *written*, flushed or not; what is flushed is reported
  separately (`RaftNode.advance(..., flushed_end_offset=...)`).
- Offsets are exclusive ends where the name says "end": `log_end_offset` is the next offset to
  be written, a `SnapshotId` covers every offset below its `end_offset`.
- `epoch_starts()` lists, for the offsets in [log_start_offset, log_end_offset), where each
  quorum epoch began; epochs and start offsets both strictly increase. When the log start is
  above 0, a snapshot whose end offset equals the log start must exist: its epoch is the epoch
  of the offset just below the log. Offset 0 is preceded by epoch 0.

Theory of operation:
- `LogSummary` is a small frozen value computed from a `RaftLog` (or from the log as it will
  be once pending operations are applied, see `log_tail.py`). Every epoch question the
  protocol asks (the last epoch for a vote, the end of an epoch for a diverging Fetch) is a
  method of it, so the rules live in one place.
- `end_offset_for_epoch(E)` answers "where does my log stop agreeing with a log whose entries
  at E end?": the largest epoch <= E that this log holds, and the offset where it ends here
  (the start of the next epoch, or the log end offset for the latest). An E below every epoch
  held answers (E, first offset held), so a follower with older data resumes at the oldest
  boundary the leader still has.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from replog.quorum.raft.snapshot_id import SnapshotId


@dataclass(frozen=True, slots=True)
class EpochStart:
    """Quorum epoch `quorum_epoch` began at offset `start_offset` in this log."""

    quorum_epoch: int
    start_offset: int


@dataclass(frozen=True, slots=True)
class EpochEndOffset:
    """An answer of `end_offset_for_epoch`: an epoch and the exclusive offset where it ends."""

    quorum_epoch: int
    end_offset: int

    def __str__(self) -> str:
        return f"{self.quorum_epoch}/{self.end_offset}"


class RaftLog(Protocol):
    """The durable (written) Raft log and its snapshots, read-only; see the module Rules."""

    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    def epoch_starts(self) -> Sequence[EpochStart]:
        """Where each quorum epoch began, for the offsets the log holds (module Rules)."""
        ...

    def read(self, start_offset: int, max_bytes: int) -> bytes:
        """Whole batches from the batch starting at `start_offset`: at most `max_bytes`, but
        always the first batch whole; empty at the log end offset."""
        ...

    def snapshot_ids(self) -> Sequence[SnapshotId]:
        """The frozen (complete, durable) snapshots, ascending."""
        ...

    def snapshot_size(self, snapshot_id: SnapshotId) -> int | None:
        """The size in bytes of a frozen snapshot, or None when there is no such snapshot."""
        ...

    def read_snapshot(self, snapshot_id: SnapshotId, position: int, max_bytes: int) -> bytes:
        """Up to `max_bytes` of a frozen snapshot's bytes from `position`."""
        ...


@dataclass(frozen=True, slots=True)
class LogSummary:
    """Offsets and epochs of a Raft log (see module Theory of operation)."""

    log_start_offset: int
    log_end_offset: int
    epoch_starts: tuple[EpochStart, ...]
    # The epoch of offset log_start_offset - 1: the snapshot's at the log start, else 0.
    start_quorum_epoch: int

    def __post_init__(self) -> None:
        assert 0 <= self.log_start_offset <= self.log_end_offset, self
        for previous, entry in zip(self.epoch_starts, self.epoch_starts[1:], strict=False):
            assert previous.quorum_epoch < entry.quorum_epoch, self
            assert previous.start_offset < entry.start_offset, self
        if self.epoch_starts:
            assert self.epoch_starts[-1].start_offset < self.log_end_offset, self
            assert self.epoch_starts[0].quorum_epoch >= self.start_quorum_epoch, self

    @property
    def last_quorum_epoch(self) -> int:
        """The epoch of the last offset held, or of the snapshot at the log start when empty."""
        if self.epoch_starts:
            return self.epoch_starts[-1].quorum_epoch
        return self.start_quorum_epoch

    def end_offset_for_epoch(self, requested_epoch: int) -> EpochEndOffset:
        """The largest epoch <= `requested_epoch` held and where it ends (module docstring)."""
        if requested_epoch >= self.last_quorum_epoch:
            return EpochEndOffset(self.last_quorum_epoch, self.log_end_offset)
        starts = self.epoch_starts
        higher = bisect_right(starts, requested_epoch, key=_quorum_epoch)
        if higher == 0:
            first = starts[0].start_offset if starts else self.log_end_offset
            return EpochEndOffset(requested_epoch, first)
        # higher < len(starts): requested_epoch is below the last epoch held.
        return EpochEndOffset(starts[higher - 1].quorum_epoch, starts[higher].start_offset)

    def quorum_epoch_at(self, offset: int) -> int:
        """The epoch of the batch holding `offset` (log_start_offset - 1 <= offset < end)."""
        assert self.log_start_offset - 1 <= offset < self.log_end_offset, (offset, self)
        covering = bisect_right(self.epoch_starts, offset, key=_start_offset)
        if covering == 0:
            return self.start_quorum_epoch
        return self.epoch_starts[covering - 1].quorum_epoch


def _quorum_epoch(entry: EpochStart) -> int:
    return entry.quorum_epoch


def _start_offset(entry: EpochStart) -> int:
    return entry.start_offset


def summarize(log: RaftLog) -> LogSummary:
    """The `LogSummary` of what `log` holds now."""
    start = log.log_start_offset
    start_epoch = 0
    if start > 0:
        boundary = [s for s in log.snapshot_ids() if s.end_offset == start]
        assert boundary, f"log start offset {start} has no snapshot ending there"
        start_epoch = boundary[-1].quorum_epoch
    return LogSummary(start, log.log_end_offset, tuple(log.epoch_starts()), start_epoch)
