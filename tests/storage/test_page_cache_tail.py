"""A log segment's page-cache tail (`log.page.cache.tail.bytes`, replog/storage/fs.py): what lies
more than the tail behind the end of the active segment is dropped from the page cache, and a
rolled segment drops all of its cache once synced.

- Drops cover consecutive ranges from the start of the file, at the writeback points, never
  closer to the end than the tail, and only ranges whose writeback was started.
- -1 (and any file not tuned for appends) never drops; 0 drops all that was written back.
- A rolled segment drops its whole cache (the tail, and pages earlier drops skipped while they
  were being written) after its next sync, once, whether the roll synced it at once
  (standalone log) or left it to `flush_rolled_segments` (a log manager's logs).
- A cut restarts the drops at the cut and makes the segment active again: its syncs then keep
  the tail cached.
- A file system that refuses the hint is not asked again; the data never changes.
- On Linux the kernel really frees the pages, and reads still return the same bytes.
"""

from __future__ import annotations

import ctypes
import errno
import itertools
import mmap
import os
from pathlib import Path

import pytest
from storage_helpers import HintRecorder as Recorder
from storage_helpers import append_batches, open_log, read_all, small_config

from replog.errors import ConfigError
from replog.storage import write_hints
from replog.storage.fs import WRITEBACK_BEHIND_BYTES, OsSegmentFile
from replog.storage.log_config import LogConfig

MiB = 1 << 20
PAGE = mmap.PAGESIZE

linux_only = pytest.mark.skipif(
    write_hints.start_writeback is None or write_hints.drop_cached is None,
    reason="sync_file_range and posix_fadvise are Linux calls",
)


@pytest.fixture
def hints(monkeypatch: pytest.MonkeyPatch) -> tuple[Recorder, Recorder]:
    """(writeback started, cache dropped), recorded instead of asked of the kernel."""
    started, dropped = Recorder(), Recorder()
    monkeypatch.setattr(write_hints, "start_writeback", started)
    monkeypatch.setattr(write_hints, "drop_cached", dropped)
    monkeypatch.setattr(write_hints, "runner", write_hints.InlineHints())
    return started, dropped


def tuned(path: Path, cache_tail: int) -> OsSegmentFile:
    file = OsSegmentFile(str(path), create=True)
    file.tune_for_appends(cache_tail)
    return file


def covered(calls: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The calls as (start, end) ranges."""
    return [(offset, offset + length) for offset, length in calls]


def test_appends_drop_consecutive_ranges_a_tail_behind_the_end(
    tmp_path: Path, hints: tuple[Recorder, Recorder]
) -> None:
    started, dropped = hints
    tail = 6 * MiB
    file = tuned(tmp_path / "a.log", tail)
    chunk = b"t" * (MiB + 7)
    sizes = []
    for _ in range(40):
        before = len(dropped.calls)
        file.append(chunk)
        if len(dropped.calls) > before:
            sizes.append(file.size)
            # Never closer to the end than the tail, and only where writeback was started.
            assert covered(dropped.calls)[-1][1] == file.size - tail
            assert covered(dropped.calls)[-1][1] <= covered(started.calls)[-1][1]
    ranges = covered(dropped.calls)
    assert ranges[0][0] == 0
    assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))  # consecutive
    assert all(end - start >= WRITEBACK_BEHIND_BYTES for start, end in ranges)
    assert ranges[-1][1] >= file.size - tail - 2 * WRITEBACK_BEHIND_BYTES  # kept up
    assert len(sizes) >= 5
    file.close()
    assert (tmp_path / "a.log").read_bytes() == chunk * 40


@pytest.mark.parametrize("cache_tail", [-1, None])
def test_minus_one_and_untuned_files_never_drop(
    tmp_path: Path, hints: tuple[Recorder, Recorder], cache_tail: int | None
) -> None:
    _, dropped = hints
    if cache_tail is None:
        file = OsSegmentFile(str(tmp_path / "a.index"), create=True)  # never tuned
    else:
        file = tuned(tmp_path / "a.log", cache_tail)
    for _ in range(10):
        file.append(b"n" * (2 * MiB))
    file.fdatasync()
    file.close()
    assert dropped.calls == []


def test_a_tail_of_zero_drops_all_that_was_written_back(
    tmp_path: Path, hints: tuple[Recorder, Recorder]
) -> None:
    started, dropped = hints
    file = tuned(tmp_path / "a.log", 0)
    for _ in range(3):
        file.append(b"z" * WRITEBACK_BEHIND_BYTES)
    assert dropped.calls == started.calls
    file.close()


def test_a_rolled_segment_drops_its_whole_cache_once_synced(
    tmp_path: Path, hints: tuple[Recorder, Recorder]
) -> None:
    _, dropped = hints
    config = small_config(segment_bytes=64 * MiB, page_cache_tail_bytes=2 * MiB)
    log = open_log(tmp_path, config)
    append_batches(log, 12, value_size=MiB - 1000)  # ~12 MiB, one segment
    first = log.active_segment
    assert 0 < covered(dropped.calls)[-1][1] <= first.size - 2 * MiB
    log.roll()  # a standalone log syncs the old segment at once
    assert covered(dropped.calls)[-1] == (0, first.size)
    calls = len(dropped.calls)
    first.flush()
    assert len(dropped.calls) == calls  # once
    before = read_all(log)
    log.close()
    reopened = open_log(tmp_path, config)
    assert read_all(reopened) == before
    reopened.close()


def test_a_roll_left_to_the_background_drops_after_that_sync(
    tmp_path: Path, hints: tuple[Recorder, Recorder]
) -> None:
    _, dropped = hints
    log = open_log(tmp_path, small_config(segment_bytes=64 * MiB, page_cache_tail_bytes=2 * MiB))
    log.enable_async_roll_flush()
    append_batches(log, 12, value_size=MiB - 1000)
    first = log.active_segment
    calls = len(dropped.calls)
    log.roll()
    append_batches(log, 1, value_size=1000)
    assert len(dropped.calls) == calls  # not synced yet: the tail stays
    assert log.flush_rolled_segments()
    assert covered(dropped.calls)[-1] == (0, first.size)
    log.close()


def test_a_cut_restarts_the_drops_at_the_cut_and_keeps_the_tail_on_later_syncs(
    tmp_path: Path, hints: tuple[Recorder, Recorder]
) -> None:
    _, dropped = hints
    file = tuned(tmp_path / "a.log", 0)
    file.append(b"c" * (3 * WRITEBACK_BEHIND_BYTES))
    assert covered(dropped.calls)[-1][1] == 3 * WRITEBACK_BEHIND_BYTES
    file.finish_appends()
    file.truncate(MiB)  # a log cut back into this segment: it is active again
    dropped.calls.clear()
    file.fdatasync()
    assert dropped.calls == []  # an active segment's sync keeps its tail
    file.append(b"d" * WRITEBACK_BEHIND_BYTES)
    assert covered(dropped.calls) == [(MiB, MiB + WRITEBACK_BEHIND_BYTES)]
    file.close()


@pytest.mark.parametrize("refusal", [errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL])
def test_a_file_system_that_refuses_the_drop_is_not_asked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, refusal: int
) -> None:
    dropped = Recorder(refusal)
    monkeypatch.setattr(write_hints, "start_writeback", Recorder())
    monkeypatch.setattr(write_hints, "drop_cached", dropped)
    monkeypatch.setattr(write_hints, "runner", write_hints.InlineHints())
    file = tuned(tmp_path / "a.log", 0)
    for _ in range(5):
        file.append(b"r" * WRITEBACK_BEHIND_BYTES)
    file.finish_appends()
    file.fdatasync()
    assert len(dropped.calls) == 1
    file.close()
    assert (tmp_path / "a.log").read_bytes() == b"r" * (5 * WRITEBACK_BEHIND_BYTES)


def test_the_broker_setting_defaults_to_64_mib_and_refuses_below_minus_one() -> None:
    assert LogConfig().page_cache_tail_bytes == 64 * MiB
    for text, value in (("-1", -1), ("0", 0), ("1048576", MiB)):
        config = LogConfig.from_properties({"log.page.cache.tail.bytes": text})
        assert config.page_cache_tail_bytes == value
    with pytest.raises(ConfigError, match=r"log\.page\.cache\.tail\.bytes=-2"):
        LogConfig(page_cache_tail_bytes=-2)


def resident_pages(path: str) -> int:
    """How many of the file's pages are in the page cache (mincore over a private mapping)."""
    libc = ctypes.CDLL(None, use_errno=True)
    size = os.path.getsize(path)
    pages = (size + PAGE - 1) // PAGE
    with open(path, "rb") as f, mmap.mmap(f.fileno(), size, access=mmap.ACCESS_COPY) as mapped:
        address = ctypes.addressof(ctypes.c_char.from_buffer(mapped))
        vector = (ctypes.c_ubyte * pages)()
        mincore = libc.mincore
        mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
        assert mincore(address, size, vector) == 0, os.strerror(ctypes.get_errno())
        resident = sum(byte & 1 for byte in vector)
        del address  # the exported buffer must go before the mapping closes
    return resident


@linux_only
def test_the_kernel_frees_the_pages_and_reads_return_the_same_bytes(tmp_path: Path) -> None:
    config = small_config(segment_bytes=64 * MiB, page_cache_tail_bytes=2 * MiB)
    log = open_log(tmp_path, config)
    append_batches(log, 12, value_size=MiB - 1000)
    first = log.active_segment
    pages = first.size // PAGE
    assert write_hints.runner.wait_idle()  # type: ignore[attr-defined]
    assert resident_pages(first.log_path) > pages // 10  # written: cached (the tail at least)
    log.roll()  # synced, then all dropped (on the hint thread)
    assert write_hints.runner.wait_idle()  # type: ignore[attr-defined]
    assert resident_pages(first.log_path) < pages // 20
    before = read_all(log)
    log.close()
    reopened = open_log(tmp_path, config)
    assert read_all(reopened) == before
    reopened.close()
