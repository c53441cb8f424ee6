"""Checkpoint files on disk (offset checkpoints, the leader-epoch checkpoint), replaced atomically.

Rules:
- `read` of a missing file returns an empty checkpoint, exactly as an empty file does.
- `read` of a malformed file raises `CorruptCheckpointError` naming the file, line and reason;
  a failed read (EIO) is a `KafkaStorageError` naming the file, as a failed write is (below).
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
- A checkpoint of a directory made for a new log (`new=True`) is written in place the first
  time (`FileSystem.write_new_file`: no temporary file and no rename, since no old content is
  there to keep; a crash leaves it missing, empty or whole, and a missing or empty file reads
  as an empty checkpoint), then replaced as above. A new replica's log writes two small files,
  so this saves a rename each (docs/storage.md, "Creating many replicas").
- Unlike Kafka, constructing a checkpoint file does not create an empty file: a missing file
  reads the same as an empty one, and a constructor that does I/O is harder to test.
- No lock: every checkpoint file has one owner that orders its calls (the log manager for the
  per-log-dir offset checkpoints, the partition's log for its leader-epoch checkpoint).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from uuid import UUID

from replog.checkpoints.leader_epoch_checkpoint import (
    EpochEntry,
    parse_leader_epoch_checkpoint,
    render_leader_epoch_checkpoint,
)
from replog.checkpoints.offset_checkpoint import (
    parse_offset_checkpoint,
    render_offset_checkpoint,
)
from replog.checkpoints.partition_metadata import (
    parse_partition_metadata,
    render_partition_metadata,
)
from replog.common import TopicPartitionKey
from replog.errors import KafkaStorageError
from replog.storage.fs import LOCAL_FS, FileSystem


def atomic_replace(fs: FileSystem, path: str, data: bytes) -> None:
    """`fs.atomic_write(path, data)`, its failure a KafkaStorageError naming `path`."""
    try:
        fs.atomic_write(path, data)
    except OSError as exc:
        raise KafkaStorageError(f"{path}: write failed: {exc}") from exc


class _CheckpointFile:
    """A checkpoint at `path`, reached only through the file-system seam `fs`; `new`: no file
    is there yet (module Rules)."""

    __slots__ = ("_fs", "_new", "path")

    def __init__(self, path: str, fs: FileSystem = LOCAL_FS, *, new: bool = False) -> None:
        self.path = path
        self._fs = fs
        self._new = new

    def _read_bytes(self) -> bytes:
        try:
            data = self._fs.read_bytes(self.path)
        except OSError as exc:
            raise KafkaStorageError(f"{self.path}: read failed: {exc}") from exc
        return b"" if data is None else data

    def _replace(self, data: bytes) -> None:
        if self._new:
            self._new = False  # whatever happens now, a later write replaces
            try:
                self._fs.write_new_file(self.path, data)
                return
            except FileExistsError:
                pass  # already there (an earlier process left it): replaced below
            except OSError as exc:
                raise KafkaStorageError(f"{self.path}: write failed: {exc}") from exc
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

    Written inside a `FileSystem.collect_unsynced` block (a broker's round of leadership
    changes on its event loop), the file is not touched: the entries wait (`_pending`) for
    the block's owner to write them off the loop (`write_pending`) and sync them with the
    rest; replacing a file costs a rename over it, a quarter of a millisecond here. Until that
    sync, `make_durable` writes and syncs them itself, and the log calls it before its
    recovery point passes records of an epoch the file may not hold yet (docs/storage.md,
    "Creating many replicas"). A lock orders the writers: the loop's, the block owner's
    thread and the log's flush."""

    __slots__ = ("_lock", "_pending", "needs_sync")

    def __init__(self, path: str, fs: FileSystem = LOCAL_FS, *, new: bool = False) -> None:
        super().__init__(path, fs, new=new)
        self.needs_sync = False
        self._pending: tuple[EpochEntry, ...] | None = None
        self._lock = threading.Lock()

    def read(self) -> list[EpochEntry]:
        return parse_leader_epoch_checkpoint(self._read_bytes(), source=self.path)

    def write(self, entries: Sequence[EpochEntry]) -> None:
        with self._lock:
            if self._fs.defer_file(self, os.path.dirname(self.path) or "."):
                self._pending = tuple(entries)
                self.needs_sync = True
                return
            self._pending = None
            self._replace(render_leader_epoch_checkpoint(entries))

    @property
    def directory(self) -> str:
        return os.path.dirname(self.path) or "."

    def write_pending(self) -> None:
        """Write the entries a deferred `write` left, without a sync (its block syncs)."""
        with self._lock:
            pending, self._pending = self._pending, None
            if pending is not None:
                with self._fs.collect_unsynced():  # no fsync: the caller syncs after
                    self._replace(render_leader_epoch_checkpoint(pending))

    def mark_synced(self) -> None:
        with self._lock:
            if self._pending is None:
                self.needs_sync = False

    def drop_unwritten(self) -> None:
        """Forget the entries a deferred `write` left (the partition directory is being
        renamed aside); nothing is to be synced here any more."""
        with self._lock:
            self._pending = None
            self.needs_sync = False

    def make_durable(self) -> None:
        """Make the last entries written durable now if they may not be (KafkaStorageError
        naming the file if that fails)."""
        with self._lock:
            if not self.needs_sync:
                return
            pending, self._pending = self._pending, None
            with self._fs.undeferred():
                if pending is not None:
                    self._replace(render_leader_epoch_checkpoint(pending))
                else:
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
