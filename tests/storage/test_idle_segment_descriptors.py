"""An empty segment file holds no file descriptor until something writes to it, so a broker's
idle replicas do not count against the process's open-file limit (replog/storage/fs.py)."""

from __future__ import annotations

import gc
import os
import resource
from pathlib import Path

import pytest
from storage_helpers import T0, append_batches, open_log, read_all, small_config

from replog.storage.fs import OsFileSystem, OsSegmentFile
from replog.testing import ManualClock
from tests.open_descriptors import descriptors_under


def open_descriptors() -> int:
    # Garbage of earlier tests in this process (a file region, a socket) closes its descriptor
    # when collected: collected now, not in the middle of a count.
    gc.collect()
    return len(os.listdir("/proc/self/fd"))


pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")


def test_an_empty_file_is_created_without_keeping_a_descriptor(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.log"
    file = OsSegmentFile(str(path), create=True)
    assert path.exists() and not file.holds_descriptor()
    assert file.read(0, 100) == b"" and file.read_fully(0, 100) == b""
    file.fdatasync()  # nothing written: nothing to sync, no descriptor opened for it
    file.fsync()
    assert not file.holds_descriptor()
    assert file.append(b"abc") == 0
    assert file.holds_descriptor() and file.read(0, 3) == b"abc"
    file.close()
    assert path.read_bytes() == b"abc"


def test_a_file_made_empty_elsewhere_is_taken_without_a_system_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`create_empty_file` (a worker thread), then `empty_segment_file` (the event loop)."""
    path = str(tmp_path / "00000000000000000000.log")
    fs = OsFileSystem()
    fs.create_empty_file(path)
    with pytest.raises(FileExistsError):
        fs.create_empty_file(path)
    with monkeypatch.context() as patched:
        for name in ("open", "fstat", "close", "stat"):
            patched.setattr(os, name, None)  # any call fails
        file = fs.empty_segment_file(path)
    assert type(file) is OsSegmentFile and file.size == 0 and not file.holds_descriptor()
    assert file.append(b"abc") == 0
    file.close()
    assert Path(path).read_bytes() == b"abc"

    class Own(OsSegmentFile):
        pass

    class OwnFiles(OsFileSystem):
        def open_segment_file(self, path: str, *, create: bool = True) -> OsSegmentFile:
            return Own(path, create=create)

    # A file system making segment files of its own (fault injection) gets one of them.
    other = str(tmp_path / "00000000000000000100.log")
    OwnFiles().create_empty_file(other)
    assert type(OwnFiles().empty_segment_file(other)) is Own


def test_a_file_with_data_keeps_its_descriptor_and_a_truncation_opens_one(tmp_path: Path) -> None:
    path = tmp_path / "a.log"
    path.write_bytes(b"xyz")
    loaded = OsSegmentFile(str(path), create=False)
    assert loaded.holds_descriptor() and loaded.read(1, 5) == b"yz"
    loaded.close()
    empty = OsSegmentFile(str(tmp_path / "b.log"), create=True)
    empty.truncate(0)
    assert empty.holds_descriptor()
    empty.close()


def test_a_closed_file_is_not_opened_again(tmp_path: Path) -> None:
    file = OsSegmentFile(str(tmp_path / "a.log"), create=True)
    file.close()
    file.close()
    with pytest.raises(OSError, match="closed"):
        file.append(b"abc")
    with pytest.raises(OSError, match="closed"):
        file.read(0, 10)
    assert (tmp_path / "a.log").read_bytes() == b""


def test_idle_logs_hold_no_descriptors_and_written_ones_read_back(tmp_path: Path) -> None:
    logs = [open_log(tmp_path / f"t-{i}", small_config(), clock=ManualClock(T0)) for i in range(50)]
    assert descriptors_under(tmp_path) == 0
    append_batches(logs[7], 3)
    assert descriptors_under(tmp_path) == 1
    assert len(read_all(logs[7])) == 3 and read_all(logs[8]) == []
    for log in logs:
        log.close()
    reopened = [
        open_log(tmp_path / f"t-{i}", small_config(), clock=ManualClock(T0)) for i in (7, 8)
    ]
    assert len(read_all(reopened[0])) == 3
    assert descriptors_under(tmp_path) == 1
    for log in reopened:
        log.close()


def test_more_idle_logs_than_the_open_file_limit(tmp_path: Path) -> None:
    """300 new logs with room for 64 more descriptors (each log held one before)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (open_descriptors() + 64, hard))
    try:
        logs = [
            open_log(tmp_path / f"t-{i}", small_config(), clock=ManualClock(T0)) for i in range(300)
        ]
        append_batches(logs[0], 1)
        for log in logs:
            log.close()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
