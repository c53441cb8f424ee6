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

from replog.storage.fs import FileSystem
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
    write_state(str(tmp_path / "t-0"), FileSystem(), StandaloneState(False, 0, 0, 0))
    opened, _ = bytes_read_by_open(tmp_path / "t-0")
    assert opened >= size  # the counting seam would notice a rescan
    assert len(recover_count) > 1
