"""A failure while opening, loading or shutting down logs releases every file descriptor the
storage engine opened for them: an embedding application lives on after it (a node that
failed to start on a bad disk may be built again), and a descriptor lost per segment soon
reaches the process's open-file limit."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from storage_helpers import T0, append_batches, open_log, small_config

from replog.errors import KafkaStorageError
from replog.storage.fs import OsFileSystem, OsSegmentFile
from replog.storage.log_loader import LEADER_EPOCH_FILE
from replog.storage.log_manager import LogManager, LogManagerConfig
from replog.testing import ManualClock
from tests.open_descriptors import descriptors_under, files_left_under

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")

CONFIG = small_config(segment_bytes=1024)


def eio(path: str) -> OSError:
    return OSError(errno.EIO, os.strerror(errno.EIO), path)


class FailingSyncSegmentFile(OsSegmentFile):
    def fdatasync(self) -> None:
        raise eio(self.path)

    fsync = fdatasync


class FailingFileSystem(OsFileSystem):
    """The local disk, where the log in `failing` cannot read its leader-epoch checkpoint
    (which opening reads after the segments) nor sync its segments: EIO."""

    def __init__(self, failing: Path) -> None:
        self.failing = str(failing) + os.sep

    def read_bytes(self, path: str) -> bytes | None:
        if path == self.failing + LEADER_EPOCH_FILE:
            raise eio(path)
        return super().read_bytes(path)

    def open_segment_file(self, path: str, *, create: bool = True) -> OsSegmentFile:
        if path.startswith(self.failing):
            return FailingSyncSegmentFile(path, create=create)
        return super().open_segment_file(path, create=create)


def write_log(directory: Path) -> None:
    """A closed log of several segments, each holding records (so each opens a descriptor)."""
    log = open_log(directory, CONFIG, clock=ManualClock(T0))
    append_batches(log, 20, value_size=200)
    assert log.segment_count > 2
    log.close()


def test_a_log_that_fails_to_open_keeps_no_descriptor(tmp_path: Path) -> None:
    write_log(tmp_path / "t-0")
    with pytest.raises(KafkaStorageError, match="cannot open log"):
        open_log(tmp_path / "t-0", CONFIG, fs=FailingFileSystem(tmp_path / "t-0"))
    assert files_left_under(tmp_path) == []  # once queued write hints let go of their copies


def test_a_log_manager_that_fails_to_load_closes_the_logs_it_opened(tmp_path: Path) -> None:
    for log_dir in ("dir1", "dir2"):  # the same partition in both: a load error
        write_log(tmp_path / log_dir / "t-0")
    with pytest.raises(KafkaStorageError, match="is in both"):
        LogManager([str(tmp_path / "dir1"), str(tmp_path / "dir2")], LogManagerConfig(log=CONFIG))
    assert files_left_under(tmp_path) == []  # once queued write hints let go of their copies


def test_a_shutdown_that_fails_on_one_log_still_closes_the_others(tmp_path: Path) -> None:
    manager = LogManager(
        str(tmp_path), LogManagerConfig(log=CONFIG), fs=FailingFileSystem(tmp_path / "a-0")
    )
    for topic in ("a", "b"):
        append_batches(manager.get_or_create_log(topic, 0), 5, value_size=200)
    assert descriptors_under(tmp_path) > 0
    with pytest.raises(KafkaStorageError, match="a-0: flush failed"):
        manager.shutdown()
    assert files_left_under(tmp_path) == []  # once queued write hints let go of their copies
    # Not a clean shutdown: the next load recovers.
    assert not (tmp_path / ".kafka_cleanshutdown").exists()
