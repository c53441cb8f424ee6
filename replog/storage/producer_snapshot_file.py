"""The producer-state snapshot files of one partition directory (`<offset>.snapshot`).

What a file holds is `replog/replication/producer_snapshot.py`'s business; this module only
names, lists, writes and deletes them, through the file-system seam.

Rules:
- A file is named by the offset its table is as of (every batch below it applied), zero-padded
  to 20 digits like the segment files (docs/design/storage.md#segment-files-and-names):
  `00000000000000170410.snapshot`. Other names ending in `.snapshot` (or a leftover `.snapshot.tmp`)
  are ignored.
- A snapshot is a cache of what the log's headers say, never the only copy of anything: the
  replica can always replay the log instead. So a write is `<name>.tmp` then a rename, without
  fsync: after a crash a file may be missing, empty or torn, and the reader's CRC and length
  checks turn that into "replay the log". Skipping the fsync keeps a roll, which writes one
  on the appending event loop, from waiting on the disk.
- Which files to keep is the caller's rule (the partition's): a truncation deletes those above
  the new log end, and those below the log start are useless. Deleting one above a truncation
  point must be durable: if a crash brought it back after the log had been rewritten past it,
  it would describe batches that are gone (a retry answered with the offsets of a batch no
  longer there). So those deletions sync the directory; truncations are rare.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from replog.storage.fs import LOCAL_FS, FileSystem
from replog.storage.segment import segment_file_prefix

SNAPSHOT_SUFFIX = ".snapshot"


def _offset_of(name: str) -> int | None:
    stem = name[: -len(SNAPSHOT_SUFFIX)] if name.endswith(SNAPSHOT_SUFFIX) else ""
    if len(stem) != 20 or not stem.isdigit():
        return None
    return int(stem)


class ProducerSnapshotFiles:
    """The `.snapshot` files of the partition directory `directory`."""

    __slots__ = ("_fs", "directory")

    def __init__(self, directory: str, fs: FileSystem = LOCAL_FS) -> None:
        self.directory = directory
        self._fs = fs

    def __repr__(self) -> str:
        return f"ProducerSnapshotFiles({self.directory!r})"

    def path(self, offset: int) -> str:
        return os.path.join(self.directory, segment_file_prefix(offset) + SNAPSHOT_SUFFIX)

    def offsets(self) -> list[int]:
        """The offsets of the snapshot files present, ascending."""
        try:
            names = self._fs.list_dir(self.directory)
        except (FileNotFoundError, NotADirectoryError):
            return []
        found = (_offset_of(name) for name in names)
        return sorted(offset for offset in found if offset is not None)

    def read(self, offset: int) -> bytes | None:
        """The bytes of the snapshot at `offset`; None if it is gone."""
        return self._fs.read_bytes(self.path(offset))

    def write(self, offset: int, data: bytes) -> None:
        """Create or replace the snapshot at `offset` (Rules: renamed into place, no fsync)."""
        path = self.path(offset)
        self._fs.write_bytes(path + ".tmp", data, fsync=False)
        self._fs.rename(path + ".tmp", path)

    def delete(self, offset: int) -> None:
        self._fs.remove(self.path(offset))

    def delete_all(self, offsets: Iterable[int], *, durable: bool = False) -> None:
        """Delete the snapshots at `offsets`; `durable` also syncs the directory, so a crash
        cannot bring one back (Rules: those above a truncation point)."""
        paths = [self.path(offset) for offset in offsets]
        self._fs.remove_all(paths)
        if durable and paths:
            self._fs.fsync_dir(self.directory)
