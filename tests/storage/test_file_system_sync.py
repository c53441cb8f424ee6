"""`FileSystem.sync_file_systems`: one sync per file system, whatever directories it is given
(a creation batch names hundreds, some renamed or removed since their writes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from replog.storage import fs as fs_module
from replog.storage.fs import FileSystem


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
    FileSystem().sync_file_systems([str(d) for d in dirs] + [str(tmp_path)])
    assert len(synced) == 1


def test_a_directory_gone_since_its_writes_is_synced_through_its_nearest_parent(
    tmp_path: Path, synced: list[int]
) -> None:
    gone = tmp_path / "t-0" / "nested"  # renamed aside with its parent, say
    not_a_dir = tmp_path / "file"
    not_a_dir.write_bytes(b"")
    FileSystem().sync_file_systems([str(gone), str(not_a_dir)])
    assert len(synced) == 1
