"""`OsFileSystem.sync_file_systems`: one sync per file system, whatever directories it is given
(a creation batch names hundreds, some renamed or removed since their writes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from replog.storage import fs as fs_module
from replog.storage.fs import OsFileSystem


@pytest.fixture
def synced(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The descriptors `syncfs` was called with (the real one still runs)."""
    calls: list[int] = []
    real = fs_module._SYNCFS
    if real is None:
        pytest.skip("no syncfs on this platform")

    def counting(fd: int) -> int:
        calls.append(fd)
        return real(fd)

    monkeypatch.setattr(fs_module, "_SYNCFS", counting)
    return calls


def test_many_directories_of_one_file_system_cost_one_sync(
    tmp_path: Path, synced: list[int]
) -> None:
    dirs = [tmp_path / f"t-{i}" for i in range(20)]
    for directory in dirs:
        directory.mkdir()
    OsFileSystem().sync_file_systems([str(d) for d in dirs] + [str(tmp_path)])
    assert len(synced) == 1


def test_a_directory_gone_since_its_writes_is_synced_through_its_nearest_parent(
    tmp_path: Path, synced: list[int]
) -> None:
    gone = tmp_path / "t-0" / "nested"  # renamed aside with its parent, say
    not_a_dir = tmp_path / "file"
    not_a_dir.write_bytes(b"")
    OsFileSystem().sync_file_systems([str(gone), str(not_a_dir)])
    assert len(synced) == 1


def test_a_log_dirs_partition_directories_are_not_looked_up_one_by_one(
    tmp_path: Path, synced: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A creation batch names its log dir and every new partition's directory: the log dir's
    file system is theirs, found with one lookup, not one per partition."""
    looked_up: list[str] = []
    real = fs_module._device_of

    def counting(directory: str) -> int | None:
        looked_up.append(directory)
        return real(directory)

    monkeypatch.setattr(fs_module, "_device_of", counting)
    log_dir = tmp_path / "logs"
    dirs = [log_dir / f"t-{i}" for i in range(20)]
    for directory in dirs:
        directory.mkdir(parents=True)
    OsFileSystem().sync_file_systems([str(d) for d in dirs] + [str(log_dir)])
    assert looked_up == [str(log_dir)]
    assert len(synced) == 1
    # Without their log dir (a round's epoch files of existing logs), each is looked up.
    looked_up.clear()
    OsFileSystem().sync_file_systems([str(d) for d in dirs])
    assert len(looked_up) == len(dirs)
