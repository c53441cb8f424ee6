"""The metadata quorum's durable state on disk: the Raft log, its snapshots and quorum-state.

The pure Raft core (`replog.quorum.raft`) reads the log through the `RaftLog` protocol and asks for
every change through `Ready`; this module is the one place that carries those requests out on
disk. The log is an ordinary replog storage `Log` (same batch format, same recovery, same
leader-epoch cache: a batch's leader epoch is its quorum epoch) in
`<metadata dir>/__cluster_metadata-0/`, next to its snapshots and the `quorum-state` file.

Layout::

    __cluster_metadata-0/
      00000000000000000000.log ...                       the Raft log (replog segments)
      00000000000000001234-0000000003.checkpoint         a frozen snapshot (end offset, epoch)
      00000000000000001234-0000000003.checkpoint.part    a snapshot being downloaded
      quorum-state                                       Kafka's QuorumStateData JSON

Rules:
- `apply(ready)` performs, in order: the quorum-state write (atomic, fsynced), the log
  operations, the fsync the core asked for. Only then may the shell send `ready.messages`
  (persist before send); it returns the flushed end offset the core needs in `advance`.
- A snapshot is written to `.part`, fsynced and renamed: a `.checkpoint` file is always
  complete. Partial downloads left by a crash are deleted on open.
- Every failure of the disk raises `KafkaStorageError` naming the file; the node must stop
  rather than acknowledge anything it could not persist.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

from replog.checkpoints.quorum_state import QUORUM_STATE, parse_quorum_state, render_quorum_state
from replog.clock import Clock, wall_clock_ms
from replog.errors import KafkaStorageError
from replog.quorum.raft.election_state import ElectionState
from replog.quorum.raft.log_view import EpochStart
from replog.quorum.raft.ready import (
    AbortSnapshot,
    AppendBatches,
    DeleteLogPrefix,
    InstallSnapshot,
    LogOp,
    Ready,
    TruncateTo,
    WriteSnapshot,
    WriteSnapshotChunk,
)
from replog.quorum.raft.snapshot_id import SnapshotId, parse_snapshot_file_name
from replog.record import RECORD_BATCH_OVERHEAD, read_header
from replog.storage.checkpoint_file import atomic_replace
from replog.storage.fs import LOCAL_FS, FileSystem
from replog.storage.log import Log
from replog.storage.log_config import LogConfig
from replog.topic_names import CLUSTER_METADATA_TOPIC

log = logging.getLogger("replog.server.raft")

METADATA_PARTITION_DIR = f"{CLUSTER_METADATA_TOPIC}-0"
_PART_SUFFIX = ".part"
# Kafka's metadata.log.segment.bytes default is 1 GiB with an 8 MiB floor; the metadata log is
# small and snapshotted, so smaller segments let retention free space sooner.
METADATA_SEGMENT_BYTES = 64 * 1024 * 1024


class RaftStorage:
    """The Raft log, snapshots and election state of one quorum node (implements `RaftLog`)."""

    def __init__(
        self,
        metadata_dir: str,
        voter_ids: Sequence[int],
        *,
        fs: FileSystem = LOCAL_FS,
        clock: Clock = wall_clock_ms,
        log_config: LogConfig | None = None,
    ) -> None:
        self.directory = os.path.join(metadata_dir, METADATA_PARTITION_DIR)
        self._fs = fs
        self._voter_ids = tuple(sorted(voter_ids))
        config = log_config or LogConfig(segment_bytes=METADATA_SEGMENT_BYTES, retention_ms=-1)
        self.log = Log.open(self.directory, config, fs=fs, clock=clock)
        self._quorum_state_path = os.path.join(self.directory, QUORUM_STATE)
        self._snapshots: list[SnapshotId] = []
        for name in fs.list_dir(self.directory):
            if name.endswith(_PART_SUFFIX):
                log.info("%s: removing partial snapshot %s", self.directory, name)
                fs.remove(os.path.join(self.directory, name))
                continue
            snapshot_id = parse_snapshot_file_name(name)
            if snapshot_id is not None:
                self._snapshots.append(snapshot_id)
        self._snapshots.sort()

    # --- RaftLog ------------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    def epoch_starts(self) -> Sequence[EpochStart]:
        # An epoch begun below the log start begins at it; none begins at the log end (an
        # empty log after its prefix went up to its end holds no epoch, as the core's
        # `LogSummary` says).
        start, end = self.log.log_start_offset, self.log.log_end_offset
        starts = (
            EpochStart(entry.leader_epoch, max(entry.start_offset, start))
            for entry in self.log.leader_epoch_cache.entries()
        )
        return [epoch for epoch in starts if epoch.start_offset < end]

    def read(self, start_offset: int, max_bytes: int) -> bytes:
        return self.log.read(start_offset, max_bytes, min_one_message=True)

    def snapshot_ids(self) -> Sequence[SnapshotId]:
        return tuple(self._snapshots)

    def snapshot_size(self, snapshot_id: SnapshotId) -> int | None:
        if snapshot_id not in self._snapshots:
            return None
        return self._fs.file_size(self._snapshot_path(snapshot_id))

    def read_snapshot(self, snapshot_id: SnapshotId, position: int, max_bytes: int) -> bytes:
        path = self._snapshot_path(snapshot_id)
        try:
            snapshot = self._fs.open_segment_file(path, create=False)
            try:
                return snapshot.read(position, max_bytes)
            finally:
                snapshot.close()
        except OSError as exc:  # the disk's failure, named as one (the node stops on it)
            raise KafkaStorageError(f"{path}: read failed: {exc}") from exc

    def snapshot_timestamp_ms(self, snapshot_id: SnapshotId) -> int | None:
        """When `snapshot_id` was taken: its first batch's timestamp (every record of a
        snapshot carries the time its writer took it, wherever it was downloaded from), else
        the file's modification time; None if the file is gone (retention removed it)."""
        path = self._snapshot_path(snapshot_id)
        try:
            head = self.read_snapshot(snapshot_id, 0, RECORD_BATCH_OVERHEAD)
            if len(head) == RECORD_BATCH_OVERHEAD:
                return read_header(head).max_timestamp
            return self._fs.mtime_ms(path)
        except (OSError, KafkaStorageError):
            return None

    def read_whole_snapshot(self, snapshot_id: SnapshotId) -> bytes:
        path = self._snapshot_path(snapshot_id)
        try:
            data = self._fs.read_bytes(path)
        except OSError as exc:  # the disk's failure, named as one (the node stops on it)
            raise KafkaStorageError(f"{path}: read failed: {exc}") from exc
        if data is None:
            raise KafkaStorageError(f"{self._snapshot_path(snapshot_id)}: snapshot file is gone")
        return data

    # --- election state -----------------------------------------------------------------------

    def read_election_state(self) -> ElectionState:
        """The persisted election state; a node that never wrote one starts at epoch 0."""
        raw = self._fs.read_bytes(self._quorum_state_path)
        if raw is None:
            return ElectionState(0)
        return ElectionState.from_file_data(parse_quorum_state(raw, source=self._quorum_state_path))

    def write_election_state(self, state: ElectionState) -> None:
        data = render_quorum_state(state.to_file_data(self._voter_ids))
        atomic_replace(self._fs, self._quorum_state_path, data)

    # --- carrying out a Ready -----------------------------------------------------------------

    def apply(self, ready: Ready, *, flush: bool = True) -> int:
        """Persist what `ready` asks (election state, log operations and, with `flush`, the
        fsync); return the flushed end offset for `RaftNode.advance`. Messages may be sent only
        after this, unless the Ready allows sending before the fsync (`flush_before_send`)."""
        if ready.election_state is not None:
            self.write_election_state(ready.election_state)
        # The storage log must allow the log start to rise to the snapshot the core retains.
        self.log.update_high_watermark(max(self.log.high_watermark, ready.high_watermark))
        for op in ready.log_ops:
            self._apply_op(op)
        if flush and ready.flush_log:
            self.log.flush()
        return self.log.recovery_point

    def flush(self) -> int:
        """fsync the log; return the flushed end offset."""
        self.log.flush()
        return self.log.recovery_point

    def _apply_op(self, op: LogOp) -> None:
        try:
            if isinstance(op, AppendBatches):
                info = self.log.append_as_follower(op.batches)
                assert info.first_offset == op.base_offset and info.next_offset == op.end_offset, (
                    op.base_offset,
                    op.end_offset,
                    info,
                )
            elif isinstance(op, TruncateTo):
                self.log.truncate_to(op.end_offset)
            elif isinstance(op, WriteSnapshot):
                part = self._snapshot_path(op.snapshot_id) + _PART_SUFFIX
                self._fs.write_bytes(part, op.data, fsync=True)
                self._freeze(op.snapshot_id)
            elif isinstance(op, WriteSnapshotChunk):
                self._write_chunk(op)
            elif isinstance(op, InstallSnapshot):
                part = self._snapshot_path(op.snapshot_id) + _PART_SUFFIX
                # Only a download has a `.part` to freeze; a snapshot already whole stays
                # (`InstallSnapshot`: the core's start-up install after a lost log tail).
                if op.snapshot_id not in self._snapshots or self._fs.exists(part):
                    self._freeze(op.snapshot_id)
                self.log.truncate_fully_and_start_at(op.snapshot_id.end_offset)
            elif isinstance(op, AbortSnapshot):
                self._fs.remove(self._snapshot_path(op.snapshot_id) + _PART_SUFFIX)
            elif isinstance(op, DeleteLogPrefix):
                self._delete_prefix(op.log_start_offset)
            else:  # pragma: no cover - the union is closed
                raise AssertionError(f"unknown log operation {op!r}")
        except OSError as exc:
            raise KafkaStorageError(f"{self.directory}: {type(op).__name__} failed: {exc}") from exc

    def _write_chunk(self, op: WriteSnapshotChunk) -> None:
        part_path = self._snapshot_path(op.snapshot_id) + _PART_SUFFIX
        part = self._fs.open_segment_file(part_path, create=True)
        try:
            if op.position == 0 or op.position < part.size:
                part.truncate(op.position)  # a restarted or repeated download
            if op.position != part.size:
                raise KafkaStorageError(
                    f"{part_path}: chunk at byte {op.position}, but {part.size} bytes are written"
                )
            part.append(op.chunk)
        finally:
            part.close()

    def _freeze(self, snapshot_id: SnapshotId) -> None:
        """Make the `.part` file durable and give it its final name."""
        path = self._snapshot_path(snapshot_id)
        part = self._fs.open_segment_file(path + _PART_SUFFIX, create=False)
        try:
            part.fsync()
        finally:
            part.close()
        self._fs.rename(path + _PART_SUFFIX, path)
        self._fs.fsync_dir(self.directory)
        if snapshot_id not in self._snapshots:
            self._snapshots.append(snapshot_id)
            self._snapshots.sort()

    def _delete_prefix(self, log_start_offset: int) -> None:
        # `apply` already raised the storage high watermark to the core's, as this needs.
        self.log.increment_log_start_offset(log_start_offset, reason="raft snapshot retention")
        self.log.delete_old_segments()
        for old in [s for s in self._snapshots if s.end_offset < log_start_offset]:
            self._fs.remove(self._snapshot_path(old))
            self._snapshots.remove(old)

    def _snapshot_path(self, snapshot_id: SnapshotId) -> str:
        return os.path.join(self.directory, snapshot_id.file_name())

    def close(self) -> None:
        self.log.close()
