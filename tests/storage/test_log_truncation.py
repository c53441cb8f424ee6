"""Truncation: `truncate_to` and `truncate_fully_and_start_at`
(docs/design/replication.md#leader-epoch-cache, #low-watermark)."""

from __future__ import annotations

from pathlib import Path

import pytest
from storage_helpers import (
    T0,
    append_batches,
    assert_every_offset_reads_its_batch,
    epoch_pairs,
    files_with_suffix,
    loaded_index_entries,
    make_batch,
    open_log,
    read_all,
    small_config,
)

from replog.record import read_header
from replog.storage import Log
from replog.testing import ManualClock

CONFIG = small_config(segment_bytes=1024, index_interval_bytes=150)


def three_epoch_log(directory: Path) -> tuple[Log, list[bytes]]:
    """30 one-record batches over several segments: epoch 0 at 0-9, 1 at 10-19, 2 at 20-29."""
    log = open_log(directory, CONFIG, clock=ManualClock(T0))
    batches = []
    for epoch in range(3):
        batches += append_batches(log, 10, epoch=epoch)
    log.high_watermark = 30
    log.flush()
    assert log.segment_count >= 4
    return log, batches


def log_file_bases(log: Log) -> list[int]:
    return [int(p.name.split(".")[0]) for p in files_with_suffix(log.directory, ".log")]


def test_truncate_in_the_middle_of_a_segment(tmp_path: Path) -> None:
    log, batches = three_epoch_log(tmp_path / "t-0")
    bases = [s.base_offset for s in log.segments()]
    target = bases[1] + 3
    entries_before = loaded_index_entries(log.segments()[1])
    assert log.truncate_to(target) is True
    assert log.log_end_offset == target
    assert read_all(log) == batches[:target]
    assert [s.base_offset for s in log.segments()] == bases[:2]
    assert log_file_bases(log) == bases[:2]
    assert log.segments()[1].size == sum(len(b) for b in batches[bases[1] : target])
    # Index entries at or above the target go, the rest stay (Kafka's OffsetIndex.truncateTo).
    offsets, times = loaded_index_entries(log.segments()[1])
    assert offsets == [e for e in entries_before[0] if e[0] < target]
    assert times == [e for e in entries_before[1] if e[1] < target]
    assert offsets
    assert (log.high_watermark, log.recovery_point) == (target, target)
    assert epoch_pairs(log) == ([(0, 0), (1, 10)] if target > 10 else [(0, 0)])
    # Appends continue at the target; the index counter restarted at the cut, as in Kafka.
    more = append_batches(log, 12, epoch=3)
    assert read_all(log) == batches[:target] + more
    assert_every_offset_reads_its_batch(log, batches[:target] + more)
    assert epoch_pairs(log)[-1] == (3, target)


def test_truncate_inside_a_batch_removes_the_whole_batch(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", CONFIG, clock=ManualClock(T0))
    batches = append_batches(log, 4, records=5)
    assert log.truncate_to(12) is True
    assert log.log_end_offset == 10  # documented: a straddling batch goes whole
    assert read_all(log) == batches[:2]


def test_truncate_at_a_segment_base(tmp_path: Path) -> None:
    log, batches = three_epoch_log(tmp_path / "t-0")
    bases = [s.base_offset for s in log.segments()]
    target = bases[2]
    log.truncate_to(target)
    assert log.log_end_offset == target
    assert read_all(log) == batches[:target]
    assert target not in log_file_bases(log)
    assert all(base < target for base in log_file_bases(log))
    more = append_batches(log, 3, epoch=5)
    assert read_all(log) == batches[:target] + more
    assert read_header(log.read(target, 1)).base_offset == target


def test_truncate_across_many_segments(tmp_path: Path) -> None:
    log, batches = three_epoch_log(tmp_path / "t-0")
    assert log.truncate_to(3) is True
    assert log.segment_count == 1
    assert log_file_bases(log) == [0]
    for suffix in (".index", ".timeindex"):  # nothing left of the deleted segments
        assert {p.name[:20] for p in files_with_suffix(log.directory, suffix)} <= {f"{0:020d}"}
    assert read_all(log) == batches[:3]
    assert epoch_pairs(log) == [(0, 0)]


def test_truncate_below_the_log_start_restarts_the_log(tmp_path: Path) -> None:
    log, _ = three_epoch_log(tmp_path / "t-0")
    log.increment_log_start_offset(20)
    log.delete_old_segments()
    assert log.log_start_offset == 20
    assert log.truncate_to(15) is True
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (15, 15, 15)
    assert log.recovery_point == 15
    assert log_file_bases(log) == [15]
    assert epoch_pairs(log) == []
    assert append_batches(log, 1, epoch=4) and log.log_end_offset == 16


def test_truncate_to_or_past_the_end_changes_nothing_but_drops_a_dangling_epoch(
    tmp_path: Path,
) -> None:
    log, batches = three_epoch_log(tmp_path / "t-0")
    # A new leader records its epoch at the log end before it writes anything, then loses it.
    log.leader_epoch_cache.assign(3, 30)
    assert epoch_pairs(log)[-1] == (3, 30)
    assert log.truncate_to(35) is False
    assert epoch_pairs(log) == [(0, 0), (1, 10), (2, 20)]
    log.leader_epoch_cache.assign(4, 30)
    assert log.truncate_to(30) is False
    assert epoch_pairs(log) == [(0, 0), (1, 10), (2, 20)]
    assert read_all(log) == batches
    assert (log.log_end_offset, log.high_watermark, log.recovery_point) == (30, 30, 30)


def test_truncation_clamps_the_high_watermark_and_recovery_point_and_the_epochs(
    tmp_path: Path,
) -> None:
    log, _ = three_epoch_log(tmp_path / "t-0")
    assert (log.high_watermark, log.recovery_point) == (30, 30)
    log.truncate_to(25)
    assert (log.high_watermark, log.recovery_point) == (25, 25)
    assert epoch_pairs(log) == [(0, 0), (1, 10), (2, 20)]
    log.truncate_to(20)
    assert epoch_pairs(log) == [(0, 0), (1, 10)]
    log.truncate_to(9)
    assert epoch_pairs(log) == [(0, 0)]
    assert (log.high_watermark, log.recovery_point, log.log_end_offset) == (9, 9, 9)


def test_a_truncation_survives_a_crash(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log, batches = three_epoch_log(directory)
    log.truncate_to(14)
    log.close_without_flush()
    reopened = open_log(directory, CONFIG, clock=ManualClock(T0))
    assert reopened.log_end_offset == 14
    assert read_all(reopened) == batches[:14]
    assert epoch_pairs(reopened) == [(0, 0), (1, 10)]


def test_truncate_fully_and_start_at(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log, _ = three_epoch_log(directory)
    log.truncate_fully_and_start_at(500)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark, log.recovery_point) == (
        500,
    ) * 4
    assert log_file_bases(log) == [500]
    assert log.segment_count == 1
    assert epoch_pairs(log) == []
    assert (directory / "leader-epoch-checkpoint").read_bytes() == b"0\n0\n"
    assert log.read(500, 100) == b""
    with pytest.raises(Exception, match="offset 499"):
        log.read(499, 100)
    more = append_batches(log, 2, epoch=7)
    assert read_header(more[0]).base_offset == 500
    log.close()
    reopened = open_log(directory, CONFIG, clock=ManualClock(T0))
    assert (reopened.log_start_offset, reopened.log_end_offset) == (500, 502)
    assert read_all(reopened) == more
    assert epoch_pairs(reopened) == [(7, 500)]


def test_negative_targets_are_refused(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", CONFIG)
    log.append_as_leader(make_batch(), 0)
    with pytest.raises(ValueError, match="negative"):
        log.truncate_to(-1)
    with pytest.raises(ValueError, match="negative"):
        log.truncate_fully_and_start_at(-5)
    assert log.log_end_offset == 1
