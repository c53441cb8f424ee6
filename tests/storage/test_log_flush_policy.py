"""Flush policies and the recovery point (issue #2, item 3, log_config docstring): the recovery
point moves only when the data below it was fsynced."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from storage_helpers import (
    T0,
    append_batches,
    assert_every_offset_reads_its_batch,
    batches_by_segment,
    expected_indexes,
    index_file_entries,
    open_log,
    read_all,
    small_config,
)

from replog.storage.fs import OsFileSystem, OsSegmentFile
from replog.testing import ManualClock


class SyncCountingSegmentFile(OsSegmentFile):
    def __init__(self, path: str, *, create: bool, syncs: list[str]) -> None:
        super().__init__(path, create=create)
        self.syncs = syncs

    def fsync(self) -> None:
        self.syncs.append(self.path)
        super().fsync()

    def fdatasync(self) -> None:
        self.syncs.append(self.path)
        super().fdatasync()


class SyncCountingFileSystem(OsFileSystem):
    """Records the path of every fsync of a segment or index file."""

    def __init__(self) -> None:
        self.syncs: list[str] = []

    def open_segment_file(self, path: str, *, create: bool = True) -> OsSegmentFile:
        return SyncCountingSegmentFile(path, create=create, syncs=self.syncs)

    def log_syncs(self) -> int:
        return sum(1 for path in self.syncs if path.endswith(".log"))


def test_by_default_only_a_roll_or_a_flush_moves_the_recovery_point(tmp_path: Path) -> None:
    fs = SyncCountingFileSystem()
    log = open_log(tmp_path / "t-0", small_config(segment_bytes=1024), fs=fs, clock=ManualClock(T0))
    append_batches(log, 5)
    assert log.recovery_point == 0
    assert fs.log_syncs() == 0
    append_batches(log, 10)  # rolls at least once
    assert log.segment_count >= 2
    assert log.recovery_point == log.active_segment.base_offset  # the old segments were synced
    assert fs.log_syncs() >= 1
    log.flush()
    assert log.recovery_point == log.log_end_offset


def test_flush_messages_flushes_every_n_messages(tmp_path: Path) -> None:
    fs = SyncCountingFileSystem()
    log = open_log(
        tmp_path / "t-0", small_config(flush_interval_messages=3), fs=fs, clock=ManualClock(T0)
    )
    append_batches(log, 2)
    assert (log.recovery_point, fs.log_syncs()) == (0, 0)
    append_batches(log, 1)
    assert (log.recovery_point, fs.log_syncs()) == (3, 1)
    append_batches(log, 1, records=5)  # one append of 5 messages passes the threshold at once
    assert (log.recovery_point, fs.log_syncs()) == (8, 2)


def test_flush_ms_flushes_once_the_interval_passed(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    fs = SyncCountingFileSystem()
    log = open_log(tmp_path / "t-0", small_config(flush_interval_ms=1000), fs=fs, clock=clock)
    append_batches(log, 2)
    assert log.recovery_point == 0
    clock.advance(999)
    assert log.maybe_flush(clock()) is False
    clock.advance(1)
    assert log.maybe_flush(clock()) is True
    assert log.recovery_point == 2
    append_batches(log, 1)
    assert log.recovery_point == 2
    clock.advance(1000)
    append_batches(log, 1)  # an append after the interval flushes too
    assert log.recovery_point == 4


def test_flush_each_append_syncs_before_returning(tmp_path: Path) -> None:
    fs = SyncCountingFileSystem()
    log = open_log(
        tmp_path / "t-0",
        small_config(flush_each_append=True, segment_bytes=1024),
        fs=fs,
        clock=ManualClock(T0),
    )
    for expected in range(1, 16):
        append_batches(log, 1)
        assert log.recovery_point == expected
    assert fs.log_syncs() >= 15


def test_with_flush_each_append_rolled_segments_keep_their_indexes_on_disk(tmp_path: Path) -> None:
    """The recovery point follows every append, so after a crash nothing below it is rebuilt:
    the indexes of rolled segments must be on disk, not only in memory."""
    config = small_config(flush_each_append=True, segment_bytes=1024, index_interval_bytes=150)
    directory = tmp_path / "t-0"
    log = open_log(directory, config, clock=ManualClock(T0))
    batches = append_batches(log, 40)
    grouped = batches_by_segment(log, batches)
    inactive = log.segments()[:-1]
    assert len(inactive) >= 3
    log.close_without_flush()
    for segment in inactive:
        expected = expected_indexes(grouped[segment.base_offset], config.index_interval_bytes)
        entries = index_file_entries(Path(segment.offset_index.path), ">ii")
        assert entries == [(o - segment.base_offset, p) for o, p in expected.offset_entries]
    reopened = open_log(directory, config, clock=ManualClock(T0))
    assert read_all(reopened) == batches


def test_a_truncated_segment_that_rolls_right_away_keeps_a_correct_index(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Truncation cuts index entries in memory; if the segment then rolls with the recovery
    point already at the new base, those entries must still reach the disk, or after a crash
    the trusted segment below the recovery point answers lookups from stale entries."""
    config = small_config(flush_each_append=True, segment_bytes=2048, index_interval_bytes=100)
    directory = tmp_path / "t-0"
    log = open_log(directory, small_config(segment_bytes=2048, index_interval_bytes=100))
    batches = append_batches(log, 14, value_size=40)  # ~110-byte batches, most indexed
    log.close()  # the index file now holds every entry
    log = open_log(directory, config, clock=ManualClock(T0))
    log.truncate_to(4)
    # One big batch over the stale entries' positions, then one that does not fit: a roll.
    batches = batches[:4] + append_batches(log, 1, records=14, value_size=70)
    assert log.segment_count == 1
    stale = index_file_entries(Path(log.active_segment.offset_index.path), ">ii")
    assert stale[-1][1] < log.active_segment.size  # stale entries that look plausible
    batches += append_batches(log, 1, records=12, value_size=60)
    assert log.segment_count == 2
    first = log.segments()[0]
    in_memory = [(o, p) for o, p in first.offset_index.entries()]
    log.close_without_flush()
    on_disk = index_file_entries(Path(first.offset_index.path), ">ii")
    assert on_disk == in_memory == [(1, 110), (2, 220), (3, 330)]
    with caplog.at_level(logging.WARNING, logger="replog.storage"):
        reopened = open_log(directory, config, clock=ManualClock(T0))
        assert read_all(reopened) == batches
        assert_every_offset_reads_its_batch(reopened, batches)
    # Nothing needed rebuilding (the storage's records: another test's thread may log too).
    assert not [r for r in caplog.records if r.name.startswith("replog.storage")]
