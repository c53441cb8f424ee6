"""Opening a log costs what its unflushed tail costs, not what the whole log costs (issue #2, item
4):
bytes read through a counting file-system seam."""

from __future__ import annotations

from pathlib import Path

import pytest
from storage_helpers import (
    T0,
    CountingFileSystem,
    append_batches,
    open_log,
    read_all,
    record_recoveries,
    recovered_bases,
    small_config,
)

from replog.storage.fs import OsFileSystem
from replog.storage.standalone_state import StandaloneState, write_state
from replog.testing import ManualClock

CONFIG = small_config(segment_bytes=2048, index_interval_bytes=256)


def build(directory: Path, batches: int, *, clean: bool) -> tuple[int, int]:
    """A log of `batches` 600-byte batches; returns (its size, its active segment's size)."""
    log = open_log(directory, CONFIG, clock=ManualClock(T0))
    append_batches(log, batches, value_size=520)
    size, active = log.size_in_bytes, log.active_segment.size
    if clean:
        log.close()
    else:
        log.close_without_flush()
    return size, active


def bytes_read_by_open(directory: Path) -> tuple[int, int]:
    """(bytes the open read, bytes a full read then reads) through a counting seam."""
    fs = CountingFileSystem()
    log = open_log(directory, CONFIG, fs=fs, clock=ManualClock(T0))
    opened = fs.bytes_read
    read_all(log)
    return opened, fs.bytes_read - opened


@pytest.fixture
def recover_count(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """(partition dir, base offset) of the segments `LogSegment.recover` ran on, in order."""
    return record_recoveries(monkeypatch)


def test_a_clean_open_reads_a_constant_amount_whatever_the_log_size(
    tmp_path: Path, recover_count: list[tuple[str, int]]
) -> None:
    small_size, small_active = build(tmp_path / "small-0", 30, clean=True)
    large_size, large_active = build(tmp_path / "large-0", 120, clean=True)
    assert large_size > 3 * small_size

    small_open, small_data = bytes_read_by_open(tmp_path / "small-0")
    large_open, large_data = bytes_read_by_open(tmp_path / "large-0")
    assert recovered_bases(recover_count) == []
    assert small_data >= small_size and large_data >= large_size  # the seam sees data reads
    # The open reads the state, the epoch checkpoint, the active segment's indexes and at most
    # its tail: bounded by the active segment, nothing per older segment.
    assert small_open <= small_active + 1024
    assert large_open <= large_active + 1024
    assert large_open <= small_open + 256


def test_an_unclean_open_reads_only_from_the_recovery_point(
    tmp_path: Path, recover_count: list[tuple[str, int]]
) -> None:
    _, small_active = build(tmp_path / "small-0", 30, clean=False)
    large_size, large_active = build(tmp_path / "large-0", 120, clean=False)
    small_open, _ = bytes_read_by_open(tmp_path / "small-0")
    large_open, _ = bytes_read_by_open(tmp_path / "large-0")
    assert len(recover_count) == 2  # one segment (the active one) per open
    assert small_open <= 2 * small_active + 1024  # validated once, indexes rebuilt in memory
    assert large_open <= 2 * large_active + 1024
    assert large_open < large_size / 4


def test_a_full_recovery_reads_every_segment(
    tmp_path: Path, recover_count: list[tuple[str, int]]
) -> None:
    size, _ = build(tmp_path / "t-0", 40, clean=True)
    write_state(str(tmp_path / "t-0"), OsFileSystem(), StandaloneState(False, 0, 0, 0))
    opened, _ = bytes_read_by_open(tmp_path / "t-0")
    assert opened >= size  # the counting seam would notice a rescan
    assert len(recover_count) > 1


SMALL_SEGMENTS = small_config(segment_bytes=1 << 20, index_interval_bytes=4096)


def small_segment_log(directory: Path) -> list[bytes]:
    """A cleanly closed log of three 200-byte batches (fewer bytes than one index interval) with
    rising timestamps, the largest in the middle batch."""
    log = open_log(directory, SMALL_SEGMENTS, clock=ManualClock(T0))
    batches = append_batches(log, 2, value_size=140, timestamp=T0 + 50, timestamp_step=10)
    batches += append_batches(log, 1, value_size=140, timestamp=T0)
    log.close()
    return batches


def test_a_clean_open_of_a_segment_within_one_index_interval_reads_no_index(
    tmp_path: Path,
) -> None:
    batches = small_segment_log(tmp_path / "t-0")
    assert (tmp_path / "t-0" / f"{0:020d}.timeindex").stat().st_size == 12  # the final entry
    fs = CountingFileSystem()
    log = open_log(tmp_path / "t-0", SMALL_SEGMENTS, fs=fs, clock=ManualClock(T0))
    assert fs.bytes_read_by_suffix.get(".timeindex", 0) == 0
    assert fs.bytes_read_by_suffix.get(".log", 0) == sum(map(len, batches))
    assert log.log_end_offset == 3
    # The end and the largest timestamp come from the walk: what the indexes would have said.
    assert log.active_segment.max_timestamp_so_far == T0 + 60
    assert log.offsets_for_times(T0 + 55) == (1, T0 + 60)
    assert read_all(log) == batches
    assert fs.bytes_read_by_suffix.get(".timeindex", 0) == 12  # read once something asked


def test_a_segment_past_one_index_interval_still_finds_its_end_from_its_index(
    tmp_path: Path,
) -> None:
    log = open_log(tmp_path / "t-0", SMALL_SEGMENTS, clock=ManualClock(T0))
    append_batches(log, 30, value_size=140)
    log.close()
    fs = CountingFileSystem()
    reopened = open_log(tmp_path / "t-0", SMALL_SEGMENTS, fs=fs, clock=ManualClock(T0))
    assert fs.bytes_read_by_suffix.get(".index", 0) > 0
    assert fs.bytes_read_by_suffix[".log"] < reopened.active_segment.size  # only the tail
    assert reopened.log_end_offset == 30


def test_a_corrupt_index_of_a_small_segment_is_rebuilt_when_first_used(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    batches = small_segment_log(tmp_path / "t-0")
    (tmp_path / "t-0" / f"{0:020d}.timeindex").write_bytes(b"\x00" * 7)  # not whole entries
    log = open_log(tmp_path / "t-0", SMALL_SEGMENTS, clock=ManualClock(T0))
    assert log.log_end_offset == 3
    with caplog.at_level("WARNING", logger="replog.storage"):
        more = append_batches(log, 1, value_size=140, timestamp=T0 + 100)
    assert "rebuilding indexes" in caplog.text
    assert read_all(log) == batches + more
    assert log.offsets_for_times(T0 + 61) == (3, T0 + 100)
    log.close()
    reopened = open_log(tmp_path / "t-0", SMALL_SEGMENTS, clock=ManualClock(T0))
    assert reopened.offsets_for_times(T0 + 55) == (1, T0 + 60)
    assert reopened.offsets_for_times(T0 + 61) == (3, T0 + 100)
