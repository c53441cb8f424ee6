"""Retention and the log start offset (docs/design/replication.md#low-watermark,
docs/design/storage.md#retention)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from storage_helpers import (
    T0,
    append_batches,
    epoch_pairs,
    files_with_suffix,
    open_log,
    read_all,
    small_config,
)

from replog.errors import OffsetOutOfRangeError
from replog.storage import Log
from replog.testing import ManualClock

DAY_MS = 86_400_000


def filled_log(directory: Path, clock: ManualClock, **config: Any) -> tuple[Log, list[bytes]]:
    """40 batches over several segments; batch i has timestamp T0 + i * 1000; HW at the end."""
    settings: dict[str, Any] = {"segment_bytes": 1024, "retention_ms": -1}
    settings.update(config)
    log = open_log(directory, small_config(**settings), clock=clock)
    batches = append_batches(log, 40, timestamp_step=1000)
    log.high_watermark = log.log_end_offset
    assert log.segment_count >= 5
    return log, batches


def bases(log: Log) -> list[int]:
    return [s.base_offset for s in log.segments()]


def file_bases(log: Log) -> list[int]:
    return [int(p.name.split(".")[0]) for p in files_with_suffix(log.directory, ".log")]


def test_retention_bytes_deletes_oldest_segments_while_the_rest_stays_over_the_limit(
    tmp_path: Path,
) -> None:
    clock = ManualClock(T0)
    log, batches = filled_log(tmp_path / "t-0", clock)
    sizes = [s.size for s in log.segments()]
    limit = sum(sizes) - sizes[0] - sizes[1] - 1  # two segments must go; a third would be too many
    log, batches = filled_log(tmp_path / "t-1", clock, retention_bytes=limit)
    before = bases(log)
    assert log.delete_old_segments() == 2
    assert bases(log) == before[2:]
    assert file_bases(log) == before[2:]
    assert log.log_start_offset == before[2]
    assert read_all(log) == batches[before[2] :]
    assert log.delete_old_segments() == 0


def test_retention_ms_uses_each_segments_largest_timestamp(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    log, batches = filled_log(tmp_path / "t-0", clock, retention_ms=DAY_MS)
    before = bases(log)
    second_last_ts = T0 + (before[2] - 1) * 1000  # the largest timestamp of the second segment
    clock.now_ms = second_last_ts + DAY_MS
    assert log.delete_old_segments() == 1  # not yet *more* than retention.ms for the second
    clock.advance(1)
    assert log.delete_old_segments() == 1
    assert bases(log) == before[2:]
    assert log.log_start_offset == before[2]
    assert read_all(log) == batches[before[2] :]


def test_retention_never_deletes_at_or_above_the_high_watermark(tmp_path: Path) -> None:
    clock = ManualClock(T0 + 100 * DAY_MS)
    log, batches = filled_log(tmp_path / "t-0", clock, retention_ms=DAY_MS, retention_bytes=0)
    before = bases(log)
    log_low = open_log(
        tmp_path / "t-1", small_config(segment_bytes=1024, retention_bytes=0), clock=clock
    )
    append_batches(log_low, 40)
    assert log_low.high_watermark == 0
    assert log_low.delete_old_segments() == 0  # HW 0: nothing is below it

    # HW inside the third segment: the first two may go, the third holds data at the HW.
    log.high_watermark = before[2] + 1
    assert log.delete_old_segments() == 2
    assert bases(log) == before[2:]
    assert read_all(log) == batches[before[2] :]
    # HW exactly at a segment's end makes it deletable.
    log.high_watermark = before[3]
    assert log.delete_old_segments() == 1
    assert bases(log) == before[3:]


def test_when_every_segment_is_deletable_a_new_empty_active_segment_replaces_them(
    tmp_path: Path,
) -> None:
    clock = ManualClock(T0 + 100 * DAY_MS)
    log, _ = filled_log(tmp_path / "t-0", clock, retention_ms=DAY_MS)
    count = log.segment_count
    assert log.delete_old_segments() == count
    assert bases(log) == [40]
    assert file_bases(log) == [40]
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (40, 40, 40)
    assert log.read(40, 100) == b""
    assert log.delete_old_segments() == 0  # an empty active segment is never deleted
    more = append_batches(log, 2, timestamp=clock.now_ms)
    assert read_all(log) == more


def test_only_a_log_of_one_empty_segment_has_no_retention_to_do(tmp_path: Path) -> None:
    # The manager's retention pass skips such logs (LogManager.run_retention): every rule
    # at its most eager must find nothing to delete in them, and something in the others.
    clock = ManualClock(T0 + 100 * DAY_MS)
    eager = {"retention_ms": 0, "retention_bytes": 0}
    fresh = open_log(tmp_path / "t-0", small_config(segment_bytes=1024, **eager), clock=clock)
    assert fresh.has_no_retention_to_do
    assert fresh.delete_old_segments() == 0
    log, _ = filled_log(tmp_path / "t-1", clock, **eager)
    assert not log.has_no_retention_to_do
    assert log.delete_old_segments() > 0
    assert log.has_no_retention_to_do  # what is left: the new empty active segment
    below_start, _ = filled_log(tmp_path / "t-2", clock)
    below_start.increment_log_start_offset(below_start.log_end_offset)
    assert not below_start.has_no_retention_to_do
    assert below_start.delete_old_segments() > 0


def test_segments_below_the_log_start_go_on_the_next_pass(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    log, batches = filled_log(tmp_path / "t-0", clock)
    before = bases(log)
    target = before[2] + 1
    assert log.increment_log_start_offset(target) is True
    assert bases(log) == before  # deletion waits for the retention pass
    assert log.delete_old_segments() == 2
    assert bases(log) == before[2:]
    assert log.log_start_offset == target  # inside the first segment: not moved to its base
    assert read_all(log) == batches[target:]


def test_compact_only_topics_still_drop_segments_below_the_log_start(tmp_path: Path) -> None:
    clock = ManualClock(T0 + 100 * DAY_MS)
    log, _ = filled_log(
        tmp_path / "t-0", clock, retention_ms=DAY_MS, retention_bytes=0, cleanup_policy="compact"
    )
    assert log.delete_old_segments() == 0
    before = bases(log)
    log.increment_log_start_offset(before[1])
    assert log.delete_old_segments() == 1
    assert bases(log) == before[1:]


def test_the_log_start_offset_cannot_pass_the_high_watermark(tmp_path: Path) -> None:
    log = open_log(tmp_path / "events-2", small_config(), clock=ManualClock(T0))
    append_batches(log, 10)
    log.high_watermark = 6
    with pytest.raises(OffsetOutOfRangeError, match=r"events-2.*\b7\b.*high watermark 6"):
        log.increment_log_start_offset(7)
    assert log.log_start_offset == 0
    assert log.increment_log_start_offset(6) is True
    assert log.increment_log_start_offset(3) is False  # never moves back
    assert log.log_start_offset == 6


def test_raising_the_log_start_truncates_the_epoch_cache_from_the_start(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", small_config(segment_bytes=1024), clock=ManualClock(T0))
    for epoch in range(3):
        append_batches(log, 10, epoch=epoch)
    log.high_watermark = 30
    log.increment_log_start_offset(12)
    assert epoch_pairs(log) == [(1, 12), (2, 20)]
    assert (
        log.directory and Path(log.directory, "leader-epoch-checkpoint").read_text()
    ) == "0\n2\n1 12\n2 20\n"
    log.increment_log_start_offset(25)
    log.delete_old_segments()
    assert epoch_pairs(log) == [(2, 25)]


def test_retention_results_survive_a_reopen(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    directory = tmp_path / "t-0"
    log, batches = filled_log(directory, clock)
    log.increment_log_start_offset(17)
    log.delete_old_segments()
    log.close()
    reopened = open_log(directory, small_config(segment_bytes=1024, retention_ms=-1), clock=clock)
    assert reopened.log_start_offset == 17
    assert reopened.high_watermark == 40
    assert read_all(reopened) == batches[17:]
