"""Checkpoint files on disk: missing files, atomic replacement, crashes before the rename,
failed reads and writes."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from uuid import UUID

import pytest

from replog.checkpoints.leader_epoch_checkpoint import LEADER_EPOCH_CHECKPOINT, EpochEntry
from replog.checkpoints.offset_checkpoint import REPLICATION_OFFSET_CHECKPOINT
from replog.errors import CorruptCheckpointError, KafkaStorageError
from replog.storage.checkpoint_file import (
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
    PartitionMetadataFile,
)
from replog.storage.fs import OsFileSystem

OLD_OFFSETS = {("orders", 0): 100, ("orders", 1): 98}
NEW_OFFSETS = {("orders", 0): 170410, ("orders", 1): 200, ("payments", 0): 7}


class SimulatedCrash(Exception):
    """Stands for the process dying at the point where it is raised."""


@pytest.fixture
def offsets_path(tmp_path: Path) -> Path:
    return tmp_path / REPLICATION_OFFSET_CHECKPOINT


def test_missing_file_reads_as_empty(tmp_path: Path) -> None:
    assert OffsetCheckpointFile(str(tmp_path / "absent")).read() == {}
    assert LeaderEpochCheckpointFile(str(tmp_path / "absent")).read() == []
    assert os.listdir(tmp_path) == []  # reading creates nothing


def test_empty_file_reads_as_empty(offsets_path: Path) -> None:
    offsets_path.write_bytes(b"")
    assert OffsetCheckpointFile(str(offsets_path)).read() == {}


def test_write_replaces_the_file_atomically_and_leaves_no_tmp(offsets_path: Path) -> None:
    checkpoint = OffsetCheckpointFile(str(offsets_path))
    checkpoint.write(OLD_OFFSETS)
    checkpoint.write(NEW_OFFSETS)
    assert checkpoint.read() == NEW_OFFSETS
    assert offsets_path.read_bytes() == b"0\n3\norders 0 170410\norders 1 200\npayments 0 7\n"
    assert os.listdir(offsets_path.parent) == [offsets_path.name]


def test_leader_epoch_checkpoint_file_round_trips(tmp_path: Path) -> None:
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    entries = [EpochEntry(0, 0), EpochEntry(2, 1500), EpochEntry(5, 3200)]
    LeaderEpochCheckpointFile(str(path)).write(entries)
    assert path.read_bytes() == b"0\n3\n0 0\n2 1500\n5 3200\n"
    assert LeaderEpochCheckpointFile(str(path)).read() == entries
    assert os.listdir(tmp_path) == [LEADER_EPOCH_CHECKPOINT]


def test_crash_between_tmp_write_and_rename_keeps_old_content_then_tmp_is_reused(
    offsets_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/design/storage.md#crash-scenarios, S8 item 7: the old checkpoint survives, and the stale
    `.tmp` is ignored, then reused."""
    OffsetCheckpointFile(str(offsets_path)).write(OLD_OFFSETS)

    def crash(source: str, target: str) -> None:
        raise SimulatedCrash(f"died before renaming {source} to {target}")

    with monkeypatch.context() as patch:
        patch.setattr(os, "replace", crash)
        with pytest.raises(SimulatedCrash):
            OffsetCheckpointFile(str(offsets_path)).write(NEW_OFFSETS)
    tmp = offsets_path.with_name(offsets_path.name + ".tmp")
    assert tmp.exists()  # the crash left the new content in the tmp file

    # "Restart": a new checkpoint object reads the old content and ignores the tmp file.
    restarted = OffsetCheckpointFile(str(offsets_path))
    assert restarted.read() == OLD_OFFSETS

    # The next write truncates and reuses the tmp file, however long its stale content.
    tmp.write_bytes(b"stale garbage " * 100)
    restarted.write({("orders", 0): 5})
    assert restarted.read() == {("orders", 0): 5}
    assert os.listdir(offsets_path.parent) == [offsets_path.name]


def test_corrupt_file_raises_naming_the_path_and_line(offsets_path: Path) -> None:
    offsets_path.write_bytes(b"0\n2\norders 0 170410\norders 1 9")
    with pytest.raises(CorruptCheckpointError, match=f"^{offsets_path}: line 4: "):
        OffsetCheckpointFile(str(offsets_path)).read()


def test_corrupt_leader_epoch_file_raises_naming_the_path_and_line(tmp_path: Path) -> None:
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    path.write_bytes(b"0\n2\n3 10\n2 20\n")
    with pytest.raises(CorruptCheckpointError, match=f"^{path}: line 4: leader epoch 2"):
        LeaderEpochCheckpointFile(str(path)).read()


def test_invalid_values_are_refused_before_the_file_is_touched(offsets_path: Path) -> None:
    checkpoint = OffsetCheckpointFile(str(offsets_path))
    checkpoint.write(OLD_OFFSETS)
    with pytest.raises(ValueError, match="negative offset -1"):
        checkpoint.write({("orders", 0): -1})
    assert checkpoint.read() == OLD_OFFSETS
    assert os.listdir(offsets_path.parent) == [offsets_path.name]


def test_all_file_access_goes_through_the_injected_file_system(offsets_path: Path) -> None:
    class RecordingFileSystem(OsFileSystem):
        def __init__(self) -> None:
            self.calls: list[tuple[str, str]] = []

        def read_bytes(self, path: str) -> bytes | None:
            self.calls.append(("read_bytes", path))
            return super().read_bytes(path)

        def atomic_write(self, path: str, data: bytes) -> None:
            self.calls.append(("atomic_write", path))
            super().atomic_write(path, data)

    fs = RecordingFileSystem()
    checkpoint = OffsetCheckpointFile(str(offsets_path), fs)
    checkpoint.write(OLD_OFFSETS)
    assert checkpoint.read() == OLD_OFFSETS
    assert fs.calls == [("atomic_write", str(offsets_path)), ("read_bytes", str(offsets_path))]


class NoSpaceForSmallFiles(OsFileSystem):
    def atomic_write(self, path: str, data: bytes) -> None:
        raise OSError(28, "No space left on device")  # as os.write on a descriptor: no file


@pytest.mark.parametrize("kind", ["offsets", "leader-epochs"])
def test_a_failed_write_is_a_storage_error_naming_the_file(tmp_path: Path, kind: str) -> None:
    # A leader-epoch checkpoint's ENOSPC is a KafkaStorageError: as a bare OSError the
    # broker's metadata listener would log it and go on.
    fs = NoSpaceForSmallFiles()
    if kind == "offsets":
        path = tmp_path / REPLICATION_OFFSET_CHECKPOINT
        with pytest.raises(KafkaStorageError) as failed:
            OffsetCheckpointFile(str(path), fs).write(NEW_OFFSETS)
    else:
        path = tmp_path / LEADER_EPOCH_CHECKPOINT
        with pytest.raises(KafkaStorageError) as failed:
            LeaderEpochCheckpointFile(str(path), fs).write([EpochEntry(3, 10)])
    assert str(failed.value) == f"{path}: write failed: [Errno 28] No space left on device"
    assert isinstance(failed.value.__cause__, OSError)


class FailingReads(OsFileSystem):
    def read_bytes(self, path: str) -> bytes | None:
        raise OSError(errno.EIO, os.strerror(errno.EIO), path)


@pytest.mark.parametrize("kind", ["offsets", "leader-epochs"])
def test_a_failed_read_is_a_storage_error_naming_the_file(tmp_path: Path, kind: str) -> None:
    # A broker's storage-failure paths (a node's fail-stop on its disk) take this type only.
    if kind == "offsets":
        path = tmp_path / REPLICATION_OFFSET_CHECKPOINT
        with pytest.raises(KafkaStorageError) as failed:
            OffsetCheckpointFile(str(path), FailingReads()).read()
    else:
        path = tmp_path / LEADER_EPOCH_CHECKPOINT
        with pytest.raises(KafkaStorageError) as failed:
            LeaderEpochCheckpointFile(str(path), FailingReads()).read()
    assert str(failed.value).startswith(f"{path}: read failed: [Errno 5]")


def test_partition_metadata_round_trips_and_a_missing_file_is_none(tmp_path: Path) -> None:
    import uuid

    metadata = PartitionMetadataFile(str(tmp_path / "partition.metadata"))
    assert metadata.read() is None
    topic_id = uuid.uuid4()
    metadata.write(topic_id)
    assert metadata.read() == topic_id


def test_a_damaged_partition_metadata_is_a_storage_error_of_its_log(tmp_path: Path) -> None:
    from storage_helpers import open_log

    log = open_log(tmp_path / "orders-3")
    (tmp_path / "orders-3" / "partition.metadata").write_bytes(b"version: 0\ntopic_id: nope")
    damaged = r"^orders-3: .*partition\.metadata: topic_id 'nope'"
    with pytest.raises(KafkaStorageError, match=damaged):
        log.topic_id()
    log.close()


class CountingWrites(OsFileSystem):
    def __init__(self) -> None:
        self.calls: list[str] = []

    def write_new_file(self, path: str, data: bytes) -> None:
        self.calls.append("write_new_file")
        super().write_new_file(path, data)

    def atomic_write(self, path: str, data: bytes) -> None:
        self.calls.append("atomic_write")
        super().atomic_write(path, data)


@pytest.mark.parametrize("kind", ["partition-metadata", "leader-epochs"])
def test_a_new_directorys_file_is_written_in_place_once_then_replaced(
    tmp_path: Path, kind: str
) -> None:
    fs = CountingWrites()
    if kind == "partition-metadata":
        metadata = PartitionMetadataFile(str(tmp_path / "partition.metadata"), fs, new=True)
        metadata.write(UUID(int=1))
        metadata.write(UUID(int=2))
        assert metadata.read() == UUID(int=2)
    else:
        epochs = LeaderEpochCheckpointFile(str(tmp_path / "leader-epoch-checkpoint"), fs, new=True)
        epochs.write([EpochEntry(0, 0)])
        epochs.write([EpochEntry(0, 0), EpochEntry(1, 5)])
        assert epochs.read() == [EpochEntry(0, 0), EpochEntry(1, 5)]
    assert fs.calls == ["write_new_file", "atomic_write"]
    assert len(os.listdir(tmp_path)) == 1  # no temporary file left


def test_a_new_file_found_on_disk_is_replaced_not_appended_to(tmp_path: Path) -> None:
    # What a first write that failed after creating the file leaves: replaced whole.
    path = tmp_path / "partition.metadata"
    path.write_bytes(b"version: 0\ntopic_id: ")
    metadata = PartitionMetadataFile(str(path), new=True)
    metadata.write(UUID(int=7))
    assert metadata.read() == UUID(int=7)


def test_a_failed_new_file_write_is_a_storage_error_naming_the_file(tmp_path: Path) -> None:
    class NoSpace(OsFileSystem):
        def write_new_file(self, path: str, data: bytes) -> None:
            raise OSError(28, "No space left on device")

    path = tmp_path / "partition.metadata"
    with pytest.raises(KafkaStorageError, match=r"partition\.metadata: write failed"):
        PartitionMetadataFile(str(path), NoSpace(), new=True).write(UUID(int=1))


def test_write_new_file_refuses_an_existing_file_and_leaves_it(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"old")
    with pytest.raises(FileExistsError):
        OsFileSystem().write_new_file(str(path), b"new")
    assert path.read_bytes() == b"old"


def test_write_new_file_outside_a_batch_syncs_the_file_and_its_directory(tmp_path: Path) -> None:
    class CountingSyncs(OsFileSystem):
        def __init__(self) -> None:
            self.dirs_synced: list[str] = []

        def fsync_dir(self, path: str) -> None:
            self.dirs_synced.append(path)
            super().fsync_dir(path)

    fs = CountingSyncs()
    fs.write_new_file(str(tmp_path / "f"), b"data")
    assert (tmp_path / "f").read_bytes() == b"data"
    assert fs.dirs_synced == [str(tmp_path)]
    with fs.deferred_sync():
        fs.write_new_file(str(tmp_path / "g"), b"more")
    assert fs.dirs_synced == [str(tmp_path)]  # the block's one file-system sync instead


@pytest.mark.parametrize("kind", ["partition-metadata", "leader-epochs"])
def test_a_new_file_whose_write_fails_halfway_is_not_left_torn_under_its_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    # The disk fills after the file's first bytes (a short write, then ENOSPC). A torn
    # partition.metadata under its own name would stop every later start of the broker
    # (a damaged file is a storage error of its log); an atomic write leaves its torn bytes
    # in the temporary file only, and so must a new file's write.
    real_write = os.write
    calls = 0

    def short_then_full(fd: int, data: object) -> int:
        nonlocal calls
        calls += 1
        if calls > 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, bytes(data)[:5])  # type: ignore[call-overload]

    if kind == "partition-metadata":
        path = tmp_path / "partition.metadata"
        metadata = PartitionMetadataFile(str(path), new=True)
        monkeypatch.setattr(os, "write", short_then_full)
        with pytest.raises(KafkaStorageError, match=r"partition\.metadata: write failed"):
            metadata.write(UUID(int=1))
        monkeypatch.undo()
        assert PartitionMetadataFile(str(path)).read() is None
    else:
        path = tmp_path / "leader-epoch-checkpoint"
        epochs = LeaderEpochCheckpointFile(str(path), new=True)
        monkeypatch.setattr(os, "write", short_then_full)
        with pytest.raises(KafkaStorageError, match=r"leader-epoch-checkpoint: write failed"):
            epochs.write([EpochEntry(0, 0), EpochEntry(1, 5)])
        monkeypatch.undo()
        assert LeaderEpochCheckpointFile(str(path)).read() == []
    assert not path.exists()
