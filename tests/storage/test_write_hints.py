"""A log segment's write hints (replog/storage/write_hints.py): blocks reserved ahead of the
appends, writeback started behind them.

- The reservation is real (the file holds more blocks than its size needs) and invisible: the
  size and contents are exactly what was appended.
- A roll, a cut and a close give the reserved blocks back; a roll keeps the modification time,
  which retention falls back on for segments without timestamps.
- Writeback is started for consecutive ranges, every `WRITEBACK_BEHIND_BYTES`, never past the
  end and never again for bytes a cut took away.
- A hint the file system refuses stops being asked; a hint that fails otherwise (a full disk)
  never fails the append, and is retried one window later, not on every append; a release the
  disk refuses never fails the close.
- Index files (and any file not tuned for appends) are never hinted.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from storage_helpers import append_batches, open_log, read_all, small_config

from replog.storage import write_hints
from replog.storage.fs import (
    RESERVE_AHEAD_MAX,
    RESERVE_AHEAD_MIN,
    WRITEBACK_BEHIND_BYTES,
    SegmentFile,
)

MiB = 1 << 20
BLOCK = 4096

linux_only = pytest.mark.skipif(
    write_hints.reserve_blocks is None or write_hints.start_writeback is None,
    reason="fallocate and sync_file_range are Linux calls",
)


def allocated(path: Path | str) -> int:
    return os.stat(path).st_blocks * 512


def tuned(path: Path, limit: int = 1 << 30) -> SegmentFile:
    file = SegmentFile(str(path), create=True)
    file.tune_for_appends(limit)
    return file


class Recorder:
    """Stands in for one hint: records (offset, length) and the file's name, answers `answer`."""

    def __init__(self, answer: int = 0) -> None:
        self.calls: list[tuple[int, int]] = []
        self.files: set[str] = set()
        self.answer = answer

    def __call__(self, fd: int, offset: int, length: int) -> int:
        self.calls.append((offset, length))
        self.files.add(os.path.basename(os.readlink(f"/proc/self/fd/{fd}")))
        return self.answer


@linux_only
def test_the_platform_calls_succeed_on_a_regular_file(tmp_path: Path) -> None:
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    try:
        os.write(fd, b"x" * 10_000)
        assert write_hints.reserve_blocks is not None
        assert write_hints.start_writeback is not None
        assert write_hints.reserve_blocks(fd, 0, MiB) == 0
        assert write_hints.start_writeback(fd, 0, 10_000) == 0
        assert os.fstat(fd).st_size == 10_000
    finally:
        os.close(fd)


@linux_only
def test_appends_reserve_blocks_ahead_without_changing_size_or_contents(tmp_path: Path) -> None:
    path = tmp_path / "a.log"
    file = tuned(path)
    data = os.urandom(3 * MiB + 17)
    file.append(data[:5000])
    file.append([data[5000:6000], data[6000:]])
    assert os.stat(path).st_size == len(data) == file.size
    # Reserved ahead by as much as the file holds (at least 1 MiB, at most 16 MiB).
    assert allocated(path) >= len(data) + min(max(len(data), RESERVE_AHEAD_MIN), RESERVE_AHEAD_MAX)
    assert file.read_fully(0, len(data)) == data
    file.close()
    assert path.read_bytes() == data


@linux_only
def test_reserving_never_goes_past_the_limit_unless_an_append_does(tmp_path: Path) -> None:
    path = tmp_path / "a.log"
    file = tuned(path, limit=64 * 1024)
    file.append(b"x" * 1000)
    assert allocated(path) <= 64 * 1024 + BLOCK
    file.append(b"y" * 100_000)  # past the limit: only what the append needs
    assert allocated(path) <= 101_000 + BLOCK
    file.close()


@linux_only
def test_a_roll_gives_the_reserved_blocks_back_and_keeps_the_modification_time(
    tmp_path: Path,
) -> None:
    log = open_log(tmp_path, small_config(segment_bytes=10 * MiB))
    append_batches(log, 20, value_size=20_000)
    first = log.active_segment
    path = first.log_path
    assert allocated(path) > first.size + BLOCK  # reserved past the end
    past = os.stat(path).st_mtime_ns - 5_000_000_000
    os.utime(path, ns=(past, past))
    log.roll()
    assert allocated(path) < first.size + BLOCK
    assert os.stat(path).st_mtime_ns == past
    assert os.stat(path).st_size == first.size
    before = read_all(log)
    log.close()
    reopened = open_log(tmp_path, small_config(segment_bytes=10 * MiB))
    assert read_all(reopened) == before
    reopened.close()


@linux_only
def test_a_cut_and_a_close_give_the_reserved_blocks_back(tmp_path: Path) -> None:
    path = tmp_path / "a.log"
    file = tuned(path)
    file.append(b"x" * (2 * MiB))
    assert allocated(path) > 3 * MiB
    file.truncate(MiB)
    assert allocated(path) <= MiB + BLOCK
    file.append(b"y" * 1000)
    assert allocated(path) > 2 * MiB  # reserving again
    file.close()
    assert allocated(path) <= MiB + 1000 + BLOCK
    assert os.stat(path).st_size == MiB + 1000


def test_writeback_is_started_for_consecutive_ranges_behind_the_appends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = Recorder()
    monkeypatch.setattr(write_hints, "start_writeback", started)
    file = tuned(tmp_path / "a.log")
    chunk = b"z" * (MiB + 3)
    for _ in range(9):
        file.append(chunk)
    w = WRITEBACK_BEHIND_BYTES
    appended = [(i + 1) * len(chunk) for i in range(9)]
    ends = []
    last = 0
    for end in appended:
        if end - last >= w:
            ends.append(end)
            last = end
    assert started.calls == [(a, b - a) for a, b in zip([0, *ends], ends, strict=False)]
    assert all(offset + length <= file.size for offset, length in started.calls)
    # A cut back below the last range: the next range starts at the cut, not past it.
    file.truncate(MiB)
    started.calls.clear()
    file.append(b"q" * w)
    assert started.calls == [(MiB, w)]
    file.close()


@linux_only  # reads /proc/self/fd
def test_an_untuned_file_is_never_hinted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reserved, started = Recorder(), Recorder()
    monkeypatch.setattr(write_hints, "reserve_blocks", reserved)
    monkeypatch.setattr(write_hints, "start_writeback", started)
    file = SegmentFile(str(tmp_path / "a.index"), create=True)
    file.append(b"i" * (2 * WRITEBACK_BEHIND_BYTES))
    file.close()
    log = open_log(tmp_path / "log", small_config(segment_bytes=MiB))
    append_batches(log, 50, value_size=2000)
    log.flush()
    log.close()
    assert reserved.files == {"00000000000000000000.log"}  # never an index
    assert started.calls == []  # 100 KiB appended: below one writeback range


@pytest.mark.parametrize("refusal", [errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL])
def test_a_file_system_that_refuses_a_hint_is_not_asked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, refusal: int
) -> None:
    reserved, started = Recorder(refusal), Recorder(refusal)
    monkeypatch.setattr(write_hints, "reserve_blocks", reserved)
    monkeypatch.setattr(write_hints, "start_writeback", started)
    file = tuned(tmp_path / "a.log")
    for _ in range(5):
        file.append(b"r" * WRITEBACK_BEHIND_BYTES)
    assert len(reserved.calls) == 1 and len(started.calls) == 1
    assert file.size == 5 * WRITEBACK_BEHIND_BYTES
    file.close()
    assert (tmp_path / "a.log").read_bytes() == b"r" * (5 * WRITEBACK_BEHIND_BYTES)


def test_a_full_disk_for_the_reservation_never_fails_the_append(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reserved = Recorder(errno.ENOSPC)
    monkeypatch.setattr(write_hints, "reserve_blocks", reserved)
    file = tuned(tmp_path / "a.log")
    for _ in range(64):
        file.append(b"f" * 4096)  # 256 KiB in all: inside the first 1 MiB window
    assert file.size == 64 * 4096
    assert reserved.calls == [(0, 4096 + RESERVE_AHEAD_MIN)]  # once a window, not per append
    file.append(b"f" * RESERVE_AHEAD_MIN)  # past the window: asked again
    assert len(reserved.calls) == 2
    file.close()


def test_a_disk_that_refuses_the_release_still_lets_the_file_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(write_hints, "reserve_blocks", Recorder())
    file = tuned(tmp_path / "a.log")
    file.append(b"c" * 1000)

    def failing_ftruncate(fd: int, size: int) -> None:
        raise OSError(errno.EIO, "injected")

    monkeypatch.setattr(os, "ftruncate", failing_ftruncate)
    file.close()
    assert file.fileno() == -1
    assert (tmp_path / "a.log").read_bytes() == b"c" * 1000
