"""A log segment's write hints (replog/storage/write_hints.py): writeback started behind the
appends, and no blocks reserved ahead.

- Writeback is started for consecutive ranges, every `WRITEBACK_BEHIND_BYTES`, never past the
  end and never again for bytes a cut took away.
- A segment holds no blocks past its end, through appends, a roll and a close (the block
  reservation was removed: write_hints says why), and its size and contents are exactly what
  was appended.
- A hint the file system refuses stops being asked; the data never changes.
- Index files (and any file not tuned for appends) are never hinted.
- Hints run on their own thread, in order: an append never waits for one, a hint reaches its
  own file even after the file was closed and deleted, a full queue drops hints without leaking
  descriptors, a refusal there stops the asking, and a hint that raises is logged.
"""

from __future__ import annotations

import errno
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from storage_helpers import HintRecorder as Recorder
from storage_helpers import append_batches, open_log, read_all, small_config

from replog.storage import write_hints
from replog.storage.fs import WRITEBACK_BEHIND_BYTES, OsSegmentFile
from tests.open_descriptors import descriptors_under

MiB = 1 << 20
BLOCK = 4096

linux_only = pytest.mark.skipif(
    write_hints.start_writeback is None, reason="sync_file_range is a Linux call"
)


def allocated(path: Path | str) -> int:
    return os.stat(path).st_blocks * 512


def tuned(path: Path) -> OsSegmentFile:
    file = OsSegmentFile(str(path), create=True)
    file.tune_for_appends()
    return file


def recorded_inline(monkeypatch: pytest.MonkeyPatch, started: Recorder) -> None:
    """Writeback hints go to `started`, at once on the appending thread."""
    monkeypatch.setattr(write_hints, "start_writeback", started)
    monkeypatch.setattr(write_hints, "runner", write_hints.InlineHints())


def on_a_hint_thread(
    monkeypatch: pytest.MonkeyPatch, started: Callable[[int, int, int], int]
) -> write_hints.HintThread:
    """Writeback hints go to `started` on a fresh hint thread, which is returned."""
    runner = write_hints.HintThread()
    monkeypatch.setattr(write_hints, "start_writeback", started)
    monkeypatch.setattr(write_hints, "runner", runner)
    return runner


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
    recorded_inline(monkeypatch, started)
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
    recorded_inline(monkeypatch, started)
    file = OsSegmentFile(str(tmp_path / "a.index"), create=True)
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
    recorded_inline(monkeypatch, started)
    file = tuned(tmp_path / "a.log")
    for _ in range(5):
        file.append(b"r" * WRITEBACK_BEHIND_BYTES)
    assert len(started.calls) == 1
    assert file.size == 5 * WRITEBACK_BEHIND_BYTES
    file.close()
    assert (tmp_path / "a.log").read_bytes() == b"r" * (5 * WRITEBACK_BEHIND_BYTES)


# --- the hint thread ----------------------------------------------------------------------------


class BlockingRecorder(Recorder):
    """A recorder whose calls wait until `release` is set (a block device with a full queue)."""

    def __init__(self, answer: int = 0) -> None:
        super().__init__(answer)
        self.release = threading.Event()
        self.entered = threading.Event()
        self.threads: set[str] = set()

    def __call__(self, fd: int, offset: int, length: int) -> int:
        self.threads.add(threading.current_thread().name)
        self.entered.set()
        assert self.release.wait(10)
        return super().__call__(fd, offset, length)


def test_an_append_never_waits_for_its_hint_and_hints_run_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert isinstance(write_hints.runner, write_hints.HintThread)  # what a broker uses
    started = BlockingRecorder()
    runner = on_a_hint_thread(monkeypatch, started)
    file = tuned(tmp_path / "a.log")
    began = time.monotonic()
    for _ in range(4):
        file.append(b"w" * WRITEBACK_BEHIND_BYTES)  # each one starts a range
    assert time.monotonic() - began < 5  # the first hint is still waiting
    assert started.calls == []
    started.release.set()
    assert runner.wait_idle()
    w = WRITEBACK_BEHIND_BYTES
    assert started.calls == [(i * w, w) for i in range(4)]
    assert started.threads == {"replog-write-hints"}
    file.close()


@linux_only  # reads /proc/self/fd
def test_a_hint_still_reaches_its_own_file_after_the_file_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = BlockingRecorder()
    runner = on_a_hint_thread(monkeypatch, started)
    file = tuned(tmp_path / "first.log")
    file.append(b"f" * WRITEBACK_BEHIND_BYTES)
    file.close()
    os.remove(tmp_path / "first.log")  # deleted, as retention does
    other = OsSegmentFile(str(tmp_path / "other.log"), create=True)  # may reuse the number
    started.release.set()
    assert runner.wait_idle()
    assert started.files == {"first.log (deleted)"}
    other.close()


@linux_only  # reads /proc/self/fd
def test_a_full_queue_drops_hints_without_leaking_descriptors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = BlockingRecorder()
    runner = on_a_hint_thread(monkeypatch, started)
    monkeypatch.setattr(runner, "PENDING_MAX", 3)
    file = tuned(tmp_path / "a.log")
    file.append(b"q" * WRITEBACK_BEHIND_BYTES)
    assert started.entered.wait(10)
    for _ in range(9):
        file.append(b"q" * WRITEBACK_BEHIND_BYTES)
    # One hint running, three queued, the other six dropped.
    assert runner.dropped == 6
    started.release.set()
    assert runner.wait_idle()
    assert len(started.calls) == 4
    file.close()
    assert descriptors_under(tmp_path) == 0
    assert (tmp_path / "a.log").read_bytes() == b"q" * (10 * WRITEBACK_BEHIND_BYTES)


def test_a_refusal_on_the_hint_thread_stops_the_asking(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = Recorder(errno.EOPNOTSUPP)
    runner = on_a_hint_thread(monkeypatch, started)
    file = tuned(tmp_path / "a.log")
    file.append(b"r" * WRITEBACK_BEHIND_BYTES)
    assert runner.wait_idle()
    for _ in range(4):
        file.append(b"r" * WRITEBACK_BEHIND_BYTES)
    assert runner.wait_idle()
    assert len(started.calls) == 1
    file.close()


def test_a_hint_that_raises_is_logged_and_the_thread_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[int] = []

    def flaky(fd: int, offset: int, length: int) -> int:
        calls.append(offset)
        if len(calls) == 1:
            raise RuntimeError("hint exploded")
        return 0

    runner = on_a_hint_thread(monkeypatch, flaky)
    file = tuned(tmp_path / "a.log")
    with caplog.at_level("ERROR", logger="replog.storage"):
        for _ in range(3):
            file.append(b"e" * WRITEBACK_BEHIND_BYTES)
        assert runner.wait_idle()
    assert calls == [0, WRITEBACK_BEHIND_BYTES, 2 * WRITEBACK_BEHIND_BYTES]
    assert "hint exploded" in caplog.text
    file.close()


@linux_only  # fork, /proc/self/fd
def test_a_forked_child_starts_a_fresh_hint_thread_and_closes_the_queued_descriptors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = BlockingRecorder()
    runner = on_a_hint_thread(monkeypatch, started)
    file = tuned(tmp_path / "a.log")
    file.append(b"k" * WRITEBACK_BEHIND_BYTES)
    assert started.entered.wait(10)
    file.append(b"k" * WRITEBACK_BEHIND_BYTES)  # queued behind the blocked one
    queued_fd = runner._pending[0][1]
    pid = os.fork()
    if pid == 0:  # the child: its copy of the queued descriptor is closed, hints run again
        status = 1
        try:
            closed = not os.path.exists(f"/proc/self/fd/{queued_fd}")
            started.release.set()  # the child's copy of the event (the parent's thread is gone)
            started.calls.clear()
            file.append(b"c" * WRITEBACK_BEHIND_BYTES)
            ran = runner.wait_idle(5) and started.calls == [
                (2 * WRITEBACK_BEHIND_BYTES, WRITEBACK_BEHIND_BYTES)
            ]
            status = 0 if closed and ran else 2
        finally:
            os._exit(status)
    _, status = os.waitpid(pid, 0)
    started.release.set()
    assert runner.wait_idle()
    assert len(started.calls) == 2  # the parent's hints all ran
    assert os.waitstatus_to_exitcode(status) == 0
    file.close()
