"""The log as it will be once the shell applied the operations the core decided but not handed out.

Between two `Ready`s the core may decide several log changes (a leader appends three proposals;
a follower truncates and then appends). Each later decision must see the earlier ones, but the
written log (`RaftLog`) shows them only after `advance`. `LogTail` keeps the pending operations
in order and a `LogSummary` of the log with them applied. It plays the part of etcd's
"unstable" log, without holding entries: bytes go straight into the operations.

Rules:
- A committed batch is always read from the written log. A Fetch answer may also carry the
  bytes of pending appends (`read`): the shell applies a Ready's log operations before it sends
  any of its messages, so the answer still only leaves once its bytes are written (a leader may
  send them before its fsync; it counts its own entries only once flushed). This lets a leader
  answer parked fetches in the same Ready as its append instead of one Ready (and one fsync)
  later: the follower's round trip overlaps the leader's fsync.
- Every operation checks its precondition against the pending summary (appends start at its log
  end offset, truncations stay inside it, epochs never go back); a violation is a core bug.
- The summary of the written log is cached until the shell reports the operations applied.
"""

from __future__ import annotations

from replog.quorum.raft.log_view import EpochStart, LogSummary, RaftLog, summarize
from replog.quorum.raft.ready import (
    AbortSnapshot,
    AppendBatches,
    DeleteLogPrefix,
    InstallSnapshot,
    LogOp,
    TruncateTo,
    WriteSnapshot,
    WriteSnapshotChunk,
)
from replog.quorum.raft.snapshot_id import SnapshotId


class LogTail:
    """Pending log operations over a written `RaftLog`, and the summary they lead to."""

    __slots__ = ("_log", "_ops", "_pending", "_written")

    def __init__(self, log: RaftLog) -> None:
        self._log = log
        self._ops: list[LogOp] = []
        self._written: LogSummary | None = None
        self._pending: LogSummary | None = None

    @property
    def written(self) -> RaftLog:
        """The log as the shell has written it (for reading bytes)."""
        return self._log

    def written_summary(self) -> LogSummary:
        if self._written is None:
            self._written = summarize(self._log)
        return self._written

    def summary(self) -> LogSummary:
        """The log with every pending operation applied."""
        return self._pending if self._pending is not None else self.written_summary()

    def stable_end(self) -> int | None:
        """Offsets of the written log below this survive the pending operations unchanged;
        None while a snapshot install (which empties the log) is pending."""
        end = self.written_summary().log_end_offset
        for op in self._ops:
            if isinstance(op, InstallSnapshot):
                return None
            if isinstance(op, TruncateTo):
                end = min(end, op.end_offset)
        return end

    def read(self, start_offset: int, max_bytes: int) -> bytes:
        """Whole batches from `start_offset` (at least one, if any): from the written log, or,
        at or past its end, from the pending appends that follow it (module Rules)."""
        written_end = self.written_summary().log_end_offset
        if start_offset < written_end:
            return self._log.read(start_offset, max_bytes)
        chunks: list[bytes] = []
        size = 0
        for op in self._ops:
            if isinstance(op, TruncateTo | InstallSnapshot):
                # The log end moves: the written log's end no longer locates the pending bytes
                # (a leader never has either pending; this keeps a wrong read impossible).
                return b""
            if not isinstance(op, AppendBatches) or op.end_offset <= start_offset:
                continue
            if op.base_offset != start_offset or (chunks and size + len(op.batches) > max_bytes):
                break
            chunks.append(op.batches)
            size += len(op.batches)
            start_offset = op.end_offset
        return b"".join(chunks)

    def has_ops(self) -> bool:
        return bool(self._ops)

    def take_ops(self) -> tuple[LogOp, ...]:
        """Hand the pending operations to a `Ready`; the summary keeps showing them applied."""
        ops = tuple(self._ops)
        self._ops.clear()
        return ops

    def applied(self) -> None:
        """The shell applied every operation handed out: the written log caught up."""
        assert not self._ops, "advance() with operations that were never handed out"
        expected = self._pending
        self._written = None
        self._pending = None
        if expected is not None:
            actual = self.written_summary()
            # Pair the decision with its result: the shell must have done exactly what we asked.
            assert (actual.log_start_offset, actual.log_end_offset) == (
                expected.log_start_offset,
                expected.log_end_offset,
            ), f"log is {actual}, expected {expected}"
            assert actual.last_quorum_epoch == expected.last_quorum_epoch, (actual, expected)

    # --- operations ---------------------------------------------------------------------------

    def append(
        self,
        base_offset: int,
        end_offset: int,
        batches: bytes,
        epochs: list[EpochStart],
        *,
        as_leader: bool,
    ) -> None:
        """Append batches whose epoch changes are `epochs` (one entry per epoch they start)."""
        current = self.summary()
        assert base_offset == current.log_end_offset, (base_offset, current)
        assert base_offset < end_offset, (base_offset, end_offset)
        starts = list(current.epoch_starts)
        last_epoch = current.last_quorum_epoch
        for entry in epochs:
            assert entry.quorum_epoch >= last_epoch, f"epoch goes back: {entry} after {current}"
            assert base_offset <= entry.start_offset < end_offset, (entry, base_offset, end_offset)
            if not starts or entry.quorum_epoch != starts[-1].quorum_epoch:
                starts.append(entry)
            last_epoch = entry.quorum_epoch
        self._push(
            AppendBatches(base_offset, end_offset, batches, as_leader),
            LogSummary(
                current.log_start_offset, end_offset, tuple(starts), current.start_quorum_epoch
            ),
        )

    def truncate_to(self, end_offset: int) -> None:
        current = self.summary()
        assert current.log_start_offset <= end_offset <= current.log_end_offset, (
            end_offset,
            current,
        )
        if end_offset == current.log_end_offset:
            return
        starts = tuple(e for e in current.epoch_starts if e.start_offset < end_offset)
        self._push(
            TruncateTo(end_offset),
            LogSummary(current.log_start_offset, end_offset, starts, current.start_quorum_epoch),
        )

    def install_snapshot(self, snapshot_id: SnapshotId) -> None:
        end = snapshot_id.end_offset
        self._push(InstallSnapshot(snapshot_id), LogSummary(end, end, (), snapshot_id.quorum_epoch))

    def delete_prefix(self, snapshot_id: SnapshotId) -> None:
        """Start the log at the end of `snapshot_id` (which must be frozen)."""
        current = self.summary()
        start = snapshot_id.end_offset
        assert current.log_start_offset < start <= current.log_end_offset, (snapshot_id, current)
        assert current.quorum_epoch_at(start - 1) == snapshot_id.quorum_epoch, (
            snapshot_id,
            current,
        )
        kept = [e for e in current.epoch_starts if e.start_offset > start]
        if start < current.log_end_offset:
            kept.insert(0, EpochStart(current.quorum_epoch_at(start), start))
        self._push(
            DeleteLogPrefix(start),
            LogSummary(start, current.log_end_offset, tuple(kept), snapshot_id.quorum_epoch),
        )

    def write_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        self._ops.append(WriteSnapshot(snapshot_id, data))

    def write_snapshot_chunk(self, snapshot_id: SnapshotId, position: int, chunk: bytes) -> None:
        self._ops.append(WriteSnapshotChunk(snapshot_id, position, chunk))

    def abort_snapshot(self, snapshot_id: SnapshotId) -> None:
        self._ops.append(AbortSnapshot(snapshot_id))

    def _push(self, op: LogOp, result: LogSummary) -> None:
        self._ops.append(op)
        self._pending = result
