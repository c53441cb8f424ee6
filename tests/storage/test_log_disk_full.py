"""A full disk under an append (issue #2, item 8): the append fails with KafkaStorageError naming
the partition and the file, the log stays as it was, appends work again once there is space, and a
reopened log is consistent."""

from __future__ import annotations

from pathlib import Path

import pytest
from storage_helpers import (
    T0,
    FullDiskFileSystem,
    append_batches,
    dir_contents,
    epoch_pairs,
    files_with_suffix,
    make_batch,
    open_log,
    read_all,
    small_config,
    stamped,
)

from replog.errors import KafkaStorageError
from replog.storage import Log
from replog.testing import ManualClock

CONFIG = small_config(segment_bytes=2048)


def log_files(log: Log) -> dict[str, bytes]:
    return {
        name: data for name, data in dir_contents(log.directory).items() if name.endswith(".log")
    }


def full_disk_log(tmp_path: Path, *, clean_up: bool) -> tuple[Log, FullDiskFileSystem, list[bytes]]:
    fs = FullDiskFileSystem(clean_up=clean_up)
    log = open_log(tmp_path / "orders-5", CONFIG, fs=fs, clock=ManualClock(T0))
    batches = append_batches(log, 7, records=2)
    log.flush()
    return log, fs, batches


def assert_append_fails_and_changes_nothing(log: Log, fs: FullDiskFileSystem, free: int) -> None:
    files_before = log_files(log)
    end, segments = log.log_end_offset, log.segment_count
    fs.free = free
    batch = make_batch(3, value_size=100)
    with pytest.raises(KafkaStorageError, match=r"orders-5.*\.log") as failure:
        log.append_as_leader(batch, 0)
    assert "No space left" in str(failure.value)
    assert fs.failures == 1
    assert log.log_end_offset == end
    assert log.segment_count in (segments, segments + 1)  # a roll may have happened first
    assert log.read(end, 1000) == b""
    if fs.clean_up:
        after = log_files(log)
        assert {k: v for k, v in after.items() if k in files_before} == files_before
        assert all(not data for name, data in after.items() if name not in files_before)


@pytest.mark.parametrize("clean_up", [True, False], ids=["write-cut-back", "partial-write-left"])
@pytest.mark.parametrize("free", [0, 100], ids=["nothing-written", "partly-written"])
def test_a_full_disk_fails_the_append_and_leaves_the_log_consistent(
    tmp_path: Path, clean_up: bool, free: int
) -> None:
    log, fs, batches = full_disk_log(tmp_path, clean_up=clean_up)
    assert_append_fails_and_changes_nothing(log, fs, free)
    assert read_all(log) == batches

    fs.free = None  # space came back
    later = append_batches(log, 3, records=2)
    assert read_all(log) == batches + later
    assert log.log_end_offset == 20
    assert epoch_pairs(log) == [(0, 0)]

    log.close_without_flush()  # crash, then reopen: the log is the acknowledged batches
    reopened = open_log(tmp_path / "orders-5", CONFIG, clock=ManualClock(T0))
    assert read_all(reopened) == batches + later
    reopened.close()
    again = open_log(tmp_path / "orders-5", CONFIG, clock=ManualClock(T0))
    assert read_all(again) == batches + later


@pytest.mark.parametrize("clean_up", [True, False], ids=["write-cut-back", "partial-write-left"])
def test_a_clean_close_after_a_failed_append_reopens_consistently(
    tmp_path: Path, clean_up: bool
) -> None:
    log, fs, batches = full_disk_log(tmp_path, clean_up=clean_up)
    assert_append_fails_and_changes_nothing(log, fs, 150)
    fs.free = None
    log.close()
    reopened = open_log(tmp_path / "orders-5", CONFIG, clock=ManualClock(T0))
    assert reopened.log_end_offset == 14
    assert read_all(reopened) == batches
    assert append_batches(reopened, 1) and reopened.log_end_offset == 15


def test_a_full_disk_right_after_a_roll(tmp_path: Path) -> None:
    fs = FullDiskFileSystem()
    log = open_log(tmp_path / "orders-5", CONFIG, fs=fs, clock=ManualClock(T0))
    batches = []
    while log.active_segment.size + 400 <= CONFIG.segment_bytes:
        batches += append_batches(log, 1, records=2)
    fs.free = 10
    big = make_batch(4, value_size=100)
    assert log.active_segment.size + len(big) > CONFIG.segment_bytes  # this append rolls
    with pytest.raises(KafkaStorageError, match="orders-5"):
        log.append_as_leader(big, 0)
    end = log.log_end_offset
    assert read_all(log) == batches
    fs.free = None
    info = log.append_as_leader(big, 0)
    assert info.first_offset == end
    log.close_without_flush()
    reopened = open_log(tmp_path / "orders-5", CONFIG, clock=ManualClock(T0))
    assert read_all(reopened) == [*batches, stamped(big, end, 0)]
    assert [p.name[:20] for p in files_with_suffix(reopened.directory, ".log")] == [
        f"{s.base_offset:020d}" for s in reopened.segments()
    ]


def test_a_close_whose_index_writes_fail_names_the_file_and_still_releases_every_segment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The metadata log's close at a node's stop can hit ENOSPC in an index write: that is a
    # KafkaStorageError naming the file, not a bare OSError ending the process.
    log = open_log(tmp_path / "orders-5", CONFIG, clock=ManualClock(T0))
    append_batches(log, 40, records=2)
    segments = list(log.segments())
    assert len(segments) >= 3
    failing = segments[1]

    def no_space(*, fsync: bool) -> None:
        raise OSError(28, "No space left on device")

    # The index writes of the real close fail (a review found the fake close this test first
    # used closed its file itself, so a leak in LogSegment.close went unseen).
    monkeypatch.setattr(failing.offset_index, "flush", no_space)
    with pytest.raises(KafkaStorageError) as failed:
        log.close()
    assert str(failed.value).startswith(
        f"orders-5: close failed: writing the indexes of {failing.log_path}"
    )
    assert "No space left on device" in str(failed.value)
    assert not any(s.log_file.holds_descriptor() for s in segments)  # every file released
    log.close()  # closed: nothing more to do
