"""A log segment's write hints (replog/storage/write_hints.py): writeback started behind the
appends, and no blocks reserved ahead.

- Writeback is started for consecutive ranges, every `WRITEBACK_BEHIND_BYTES`, never past the
  end and never again for bytes a cut took away.
- A segment holds no blocks past its end, through appends, a roll and a close (the block
  reservation was removed: write_hints says why), and its size and contents are exactly what
  was appended.
- A hint the file system refuses stops being asked; the data never changes.
- Index files (and any file not tuned for appends) are never hinted.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from storage_helpers import HintRecorder as Recorder
from storage_helpers import append_batches, open_log, read_all, small_config

from replog.storage import write_hints
from replog.storage.fs import WRITEBACK_BEHIND_BYTES, SegmentFile

MiB = 1 << 20
BLOCK = 4096

linux_only = pytest.mark.skipif(
    write_hints.start_writeback is None, reason="sync_file_range is a Linux call"
)


def allocated(path: Path | str) -> int:
    return os.stat(path).st_blocks * 512


def tuned(path: Path) -> SegmentFile:
    file = SegmentFile(str(path), create=True)
    file.tune_for_appends()
    return file


@linux_only
def test_the_platform_calls_succeed_on_a_regular_file(tmp_path: Path) -> None:
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    try:
        os.write(fd, b"x" * 10_000)
        assert write_hints.start_writeback is not None
        assert write_hints.start_writeback(fd, 0, 10_000) == 0
        assert os.fstat(fd).st_size == 10_000
    finally:
        os.close(fd)


@linux_only
def test_a_segment_holds_no_blocks_past_its_end(tmp_path: Path) -> None:
    log = open_log(tmp_path, small_config(segment_bytes=10 * MiB))
    append_batches(log, 20, value_size=20_000)
    first = log.active_segment
    path = first.log_path
    os.fsync(first.log_file.fileno())  # blocks are allocated once written back
    assert allocated(path) <= first.size + BLOCK
    log.roll()
    assert allocated(path) <= first.size + BLOCK
    assert os.stat(path).st_size == first.size
    before = read_all(log)
    log.close()
    reopened = open_log(tmp_path, small_config(segment_bytes=10 * MiB))
    assert read_all(reopened) == before
    reopened.close()


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
    started = Recorder()
    monkeypatch.setattr(write_hints, "start_writeback", started)
    file = SegmentFile(str(tmp_path / "a.index"), create=True)
    file.append(b"i" * (2 * WRITEBACK_BEHIND_BYTES))
    file.close()
    assert started.calls == []
    log = open_log(tmp_path / "log", small_config(segment_bytes=16 * MiB))
    append_batches(log, 60, value_size=100_000)  # ~6 MiB: one writeback range
    log.flush()
    log.close()
    assert started.files == {"00000000000000000000.log"}  # never an index


@pytest.mark.parametrize("refusal", [errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL])
def test_a_file_system_that_refuses_a_hint_is_not_asked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, refusal: int
) -> None:
    started = Recorder(refusal)
    monkeypatch.setattr(write_hints, "start_writeback", started)
    file = tuned(tmp_path / "a.log")
    for _ in range(5):
        file.append(b"r" * WRITEBACK_BEHIND_BYTES)
    assert len(started.calls) == 1
    assert file.size == 5 * WRITEBACK_BEHIND_BYTES
    file.close()
    assert (tmp_path / "a.log").read_bytes() == b"r" * (5 * WRITEBACK_BEHIND_BYTES)
