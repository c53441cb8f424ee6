"""Records left in their segment file (`file_region`, `Log.read_or_region`): a region holds
exactly what `read` returns, only from its threshold on; it outlives the segment's own
descriptor (a duplicate of its own), says so when its file was cut back, and releases its
descriptor when closed or collected."""

from __future__ import annotations

import gc
import os
from pathlib import Path

import pytest
from storage_helpers import append_batches, open_log, small_config

from replog.errors import KafkaStorageError
from replog.storage import Log
from replog.storage.file_region import FileRegion


@pytest.fixture
def log(tmp_path: Path) -> Log:
    return open_log(tmp_path / "t-0", small_config(segment_bytes=1 << 20))


def test_a_read_of_the_threshold_or_more_is_a_region_of_what_read_returns(log: Log) -> None:
    batches = append_batches(log, 20, records=3)
    whole = log.read(0, 1 << 20)
    assert len(whole) == sum(len(b) for b in batches)
    region = log.read_or_region(0, 1 << 20, region_min_bytes=len(whole))
    assert isinstance(region, FileRegion)
    assert len(region) == len(whole)
    assert region.read() == whole
    region.close()
    # Below the threshold, and without one, the bytes themselves.
    assert log.read_or_region(0, 1 << 20, region_min_bytes=len(whole) + 1) == whole
    assert log.read_or_region(0, 1 << 20) == whole
    # Bounds and sizes as `read`'s: never an empty region.
    assert log.read_or_region(5, 1 << 20, 5, region_min_bytes=0) == b""
    part = log.read_or_region(3, len(batches[1]) + 1, region_min_bytes=1)
    assert isinstance(part, FileRegion)
    assert part.read() == log.read(3, len(batches[1]) + 1) == batches[1]
    part.close()


def test_a_region_outlives_its_segments_descriptor(log: Log) -> None:
    append_batches(log, 10)
    whole = log.read(0, 1 << 20)
    region = log.read_or_region(0, 1 << 20, region_min_bytes=1)
    assert isinstance(region, FileRegion)
    log.close()  # every segment file's descriptor closed
    other = os.open(os.devnull, os.O_RDONLY)  # maybe its number again: not the region's
    try:
        assert region.read() == whole
    finally:
        os.close(other)
    region.close()


def regions_of(
    path: Path, data: bytes, position: int, size: int, count: int = 1
) -> list[FileRegion]:
    """`count` regions of a file holding `data`, its own descriptor closed."""
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    try:
        return [FileRegion(fd, str(path), position, size) for _ in range(count)]
    finally:
        os.close(fd)


def test_a_region_of_a_file_cut_back_says_so(tmp_path: Path) -> None:
    path = tmp_path / "f"
    (region,) = regions_of(path, b"x" * 1000, 100, 800)
    assert region.read() == b"x" * 800
    os.truncate(path, 500)
    with pytest.raises(KafkaStorageError, match=r"400 of 800 bytes at position 100"):
        region.read()
    region.close()


def test_a_region_releases_its_descriptor_when_closed_or_collected(tmp_path: Path) -> None:
    closed, collected = regions_of(tmp_path / "f", b"y" * 10, 0, 10, count=2)
    closed_fd, collected_fd = closed.fileno(), collected.fileno()
    closed.close()
    closed.close()  # once only
    with pytest.raises(OSError):
        os.fstat(closed_fd)
    del collected
    gc.collect()
    with pytest.raises(OSError):
        os.fstat(collected_fd)
