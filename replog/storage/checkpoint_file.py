"""Checkpoint files on disk (offset checkpoints, the leader-epoch checkpoint), replaced atomically.

Rules:
- `read` of a missing file returns an empty checkpoint, exactly as an empty file does.
- `read` of a malformed file raises `CorruptCheckpointError` naming the file, line and reason.
  This module never swallows it: whether a corrupt checkpoint means "recover from scratch"
  (Kafka's log manager for the recovery-point and log-start checkpoints) or "take the log dir
  offline" is the caller's decision.
- `write` replaces the whole file through `FileSystem.atomic_write` (`<path>.tmp`, fsync, rename,
  fsync the directory), so a crash leaves the old content or the new, never a mix. A stale
  `<path>.tmp` left by a crash between write and rename is never read, and the next `write`
  truncates and reuses it. A failed write (a full disk) is a `KafkaStorageError` naming the
  file (`atomic_replace`, also used for the other small files: markers, the Raft quorum state,
  a standalone log's state): the broker's storage-failure paths take that type, and the OS's
  error from writing to a descriptor names no file (a leader-epoch checkpoint's ENOSPC as a
  bare OSError would be logged and the broker would go on).
- Unlike Kafka, constructing a checkpoint file does not create an empty file: a missing file
  reads the same as an empty one, and a constructor that does I/O is harder to test.
- No lock: every checkpoint file has one owner that orders its calls (the log manager for the
  per-log-dir offset checkpoints, the partition's log for its leader-epoch checkpoint).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from uuid import UUID

from checkpoints.leader_epoch_checkpoint import (
    EpochEntry,
    parse_leader_epoch_checkpoint,
    render_leader_epoch_checkpoint,
)
from checkpoints.offset_checkpoint import (
    TopicPartitionKey,
    parse_offset_checkpoint,
    render_offset_checkpoint,
)
from checkpoints.partition_metadata import (
    parse_partition_metadata,
    render_partition_metadata,
)
from replog.errors import KafkaStorageError
from replog.storage.fs import LOCAL_FS, FileSystem


def atomic_replace(fs: FileSystem, path: str, data: bytes) -> None:
    """`fs.atomic_write(path, data)`, its failure a KafkaStorageError naming `path`."""
    try:
        fs.atomic_write(path, data)
    except OSError as exc:
        raise KafkaStorageError(f"{path}: write failed: {exc}") from exc


class _CheckpointFile:
    """A checkpoint at `path`, reached only through the file-system seam `fs`."""

    __slots__ = ("_fs", "path")

    def __init__(self, path: str, fs: FileSystem = LOCAL_FS) -> None:
        self.path = path
        self._fs = fs

    def _read_bytes(self) -> bytes:
        data = self._fs.read_bytes(self.path)
        return b"" if data is None else data

    def _replace(self, data: bytes) -> None:
        atomic_replace(self._fs, self.path, data)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.path!r})"


class OffsetCheckpointFile(_CheckpointFile):
    """A recovery-point, replication-offset (high watermark) or log-start-offset checkpoint."""

    __slots__ = ()

    def read(self) -> dict[TopicPartitionKey, int]:
        return parse_offset_checkpoint(self._read_bytes(), source=self.path)

    def write(self, offsets: Mapping[TopicPartitionKey, int]) -> None:
        self._replace(render_offset_checkpoint(offsets))


class LeaderEpochCheckpointFile(_CheckpointFile):
    """The `leader-epoch-checkpoint` of one partition directory.

    Written inside a `FileSystem.deferred_sync` block (a broker's round of leadership changes),
    the file is replaced without a sync and remembers it until the block's sync tells it
    (`mark_synced`); until then `make_durable` syncs it, and the log calls that before its
    recovery point passes records of an epoch the file may not hold yet (docs/storage.md,
    "Creating many replicas")."""

    __slots__ = ("needs_sync",)

    def __init__(self, path: str, fs: FileSystem = LOCAL_FS) -> None:
        super().__init__(path, fs)
        self.needs_sync = False

    def read(self) -> list[EpochEntry]:
        return parse_leader_epoch_checkpoint(self._read_bytes(), source=self.path)

    def write(self, entries: Sequence[EpochEntry]) -> None:
        deferred = self._fs.defer_file(self, os.path.dirname(self.path) or ".")
        self._replace(render_leader_epoch_checkpoint(entries))
        if deferred:
            self.needs_sync = True

    def mark_synced(self) -> None:
        self.needs_sync = False

    def make_durable(self) -> None:
        """Sync the file if its last write was not (KafkaStorageError naming it if that fails)."""
        if not self.needs_sync:
            return
        try:
            self._fs.fsync_file(self.path)
            self._fs.fsync_dir(os.path.dirname(self.path) or ".")
        except OSError as exc:
            raise KafkaStorageError(f"{self.path}: sync failed: {exc}") from exc
        self.needs_sync = False


class PartitionMetadataFile(_CheckpointFile):
    """The `partition.metadata` of one partition directory: its topic id (None: no file)."""

    __slots__ = ()

    def read(self) -> UUID | None:
        """The topic id; None when there is no file, or an empty one: what a power loss can
        leave of a file written in a batch whose sync had not happened yet (a new replica's,
        docs/storage.md, "Creating many replicas"), which holds no topic id either."""
        data = self._fs.read_bytes(self.path)
        return None if not data else parse_partition_metadata(data, source=self.path)

    def write(self, topic_id: UUID) -> None:
        self._replace(render_partition_metadata(topic_id))
