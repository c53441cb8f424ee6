"""Producer snapshot files: names, listing, writes renamed into place, durable deletions."""

from __future__ import annotations

from pathlib import Path

from replog.storage.fs import OsFileSystem
from replog.storage.producer_snapshot_file import ProducerSnapshotFiles


class SyncCountingFileSystem(OsFileSystem):
    def __init__(self) -> None:
        self.dir_syncs = 0

    def fsync_dir(self, path: str) -> None:
        self.dir_syncs += 1
        super().fsync_dir(path)


def test_files_are_named_by_offset_like_segments_and_others_are_ignored(tmp_path: Path) -> None:
    files = ProducerSnapshotFiles(str(tmp_path))
    assert files.offsets() == []
    files.write(170410, b"abc")
    files.write(7, b"de")
    assert (tmp_path / "00000000000000170410.snapshot").read_bytes() == b"abc"
    for stray in (
        "00000000000000000009.snapshot.tmp",
        "9.snapshot",
        "0000000000000000000x.snapshot",
    ):
        (tmp_path / stray).write_bytes(b"")
    (tmp_path / "00000000000000000003.log").write_bytes(b"")
    assert files.offsets() == [7, 170410]
    assert files.read(7) == b"de" and files.read(8) is None
    assert not list(tmp_path.glob("*0007.snapshot.tmp"))  # renamed into place


def test_a_missing_directory_has_no_snapshots(tmp_path: Path) -> None:
    assert ProducerSnapshotFiles(str(tmp_path / "gone")).offsets() == []


def test_only_durable_deletions_that_delete_something_sync_the_directory(tmp_path: Path) -> None:
    fs = SyncCountingFileSystem()
    files = ProducerSnapshotFiles(str(tmp_path), fs)
    for offset in (2, 4, 6):
        files.write(offset, b"x")
    files.delete_all([2])
    assert fs.dir_syncs == 0 and files.offsets() == [4, 6]
    files.delete_all([], durable=True)
    assert fs.dir_syncs == 0
    files.delete_all([6], durable=True)
    assert fs.dir_syncs == 1 and files.offsets() == [4]
    files.delete(4)
    files.delete(4)  # twice is harmless
    assert files.offsets() == []
