"""Segment rolling (size, time, full index) and the sparse indexes, in memory and on disk
(docs/design/storage.md#segment-files-and-names, #offset-index, #time-index, #segment-roll)."""

from __future__ import annotations

import itertools
import random
import re
from pathlib import Path

import pytest
from storage_helpers import (
    T0,
    append_batches,
    batches_by_segment,
    expected_indexes,
    files_with_suffix,
    index_file_entries,
    loaded_index_entries,
    make_batch,
    open_log,
    read_all,
    small_config,
    stamped,
    with_final_time_entry,
)

from replog.record import read_header
from replog.storage import Log
from replog.testing import ManualClock

SEGMENT_NAME = re.compile(r"^\d{20}\.(log|index|timeindex)$")


def segment_sizes(log: Log) -> list[int]:
    return [segment.size for segment in log.segments()]


def test_rolls_when_the_next_append_would_pass_segment_bytes(tmp_path: Path) -> None:
    config = small_config(segment_bytes=2048)
    log = open_log(tmp_path / "t-0", config, clock=ManualClock(T0))
    batches = append_batches(log, 60, records=[1, 3, 2, 5])
    grouped = batches_by_segment(log, batches)
    assert len(grouped) >= 4
    groups = list(grouped.values())
    for group, following in itertools.pairwise(groups):
        size = sum(len(b) for b in group)
        assert size <= config.segment_bytes
        assert size + len(following[0]) > config.segment_bytes  # it rolled only when it had to
    assert segment_sizes(log) == [sum(len(b) for b in g) for g in groups]
    assert [s.base_offset for s in log.segments()] == [
        read_header(g[0]).base_offset for g in groups
    ]


def test_segment_files_are_named_by_their_20_digit_base_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", small_config(segment_bytes=1024), clock=ManualClock(T0))
    append_batches(log, 30)
    log.close()
    names = sorted(p.name for p in (tmp_path / "t-0").iterdir() if SEGMENT_NAME.match(p.name))
    bases = [s.base_offset for s in log.segments()]
    expected = sorted(
        f"{base:020d}.{suffix}" for base in bases for suffix in ("log", "index", "timeindex")
    )
    assert names == expected
    assert f"{bases[1]:020d}.log" == f"{'0' * (20 - len(str(bases[1])))}{bases[1]}.log"


def test_rolls_when_the_segment_spans_more_than_segment_ms_of_record_time(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    log = open_log(tmp_path / "t-0", small_config(segment_ms=1000), clock=clock)
    log.append_as_leader(make_batch(timestamp=T0), 0)
    log.append_as_leader(make_batch(timestamp=T0 + 1000), 0)  # exactly segment.ms: no roll
    assert log.segment_count == 1
    log.append_as_leader(make_batch(timestamp=T0 + 1001), 0)  # waited > segment.ms: roll
    assert [s.base_offset for s in log.segments()] == [0, 2]
    # The new segment measures from its own first batch, not from the clock.
    clock.advance(10_000_000)
    log.append_as_leader(make_batch(timestamp=T0 + 1500), 0)
    assert log.segment_count == 2


def test_segment_jitter_ms_shortens_the_wait_by_a_random_amount_per_segment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    draws: list[int] = []

    def fixed_draw(upper: int) -> int:
        draws.append(upper)
        return 400

    monkeypatch.setattr(random, "randrange", fixed_draw)
    log = open_log(
        tmp_path / "t-0",
        small_config(segment_ms=1000, segment_jitter_ms=5000),
        clock=ManualClock(T0),
    )
    assert draws == [1000]  # uniform in [0, min(segment.jitter.ms, segment.ms))
    log.append_as_leader(make_batch(timestamp=T0), 0)
    log.append_as_leader(make_batch(timestamp=T0 + 600), 0)  # 600 is not > 1000 - 400
    assert log.segment_count == 1
    log.append_as_leader(make_batch(timestamp=T0 + 601), 0)
    assert log.segment_count == 2
    assert draws == [1000, 1000]  # drawn again for the new segment


def test_without_record_timestamps_segment_ms_counts_from_segment_creation(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    log = open_log(tmp_path / "t-0", small_config(segment_ms=1000), clock=clock)
    log.append_as_leader(make_batch(timestamp=-1), 0)
    clock.advance(1000)
    log.append_as_leader(make_batch(timestamp=-1), 0)
    assert log.segment_count == 1
    clock.advance(1)
    log.append_as_leader(make_batch(timestamp=-1), 0)
    assert [s.base_offset for s in log.segments()] == [0, 2]


def test_an_empty_segment_never_rolls_on_time(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    log = open_log(tmp_path / "t-0", small_config(segment_ms=1000), clock=clock)
    clock.advance(50_000)
    log.append_as_leader(make_batch(timestamp=T0 - 40_000), 0)
    assert log.segment_count == 1


def test_rolls_when_the_time_index_is_full(tmp_path: Path) -> None:
    # 48 index bytes: 6 offset entries, 4 time entries of which one is kept for the final entry.
    config = small_config(segment_index_bytes=48, index_interval_bytes=0, segment_bytes=1 << 20)
    log = open_log(tmp_path / "t-0", config, clock=ManualClock(T0))
    batches = append_batches(log, 12)  # growing timestamps: every entry adds a time entry
    # First append: no entry; appends 2-4 fill the 3 usable time slots; the 5th rolls.
    assert [s.base_offset for s in log.segments()] == [0, 4, 8]
    first = log.segments()[0]
    offsets, times = loaded_index_entries(first)
    assert offsets == [(1, len(batches[0])), (2, 2 * len(batches[0])), (3, 3 * len(batches[0]))]
    assert times == [(T0 + 1, 1), (T0 + 2, 2), (T0 + 3, 3)]  # no final entry: 3 was the max


def test_rolls_when_the_offset_index_is_full(tmp_path: Path) -> None:
    config = small_config(segment_index_bytes=48, index_interval_bytes=0, segment_bytes=1 << 20)
    log = open_log(tmp_path / "t-0", config, clock=ManualClock(T0))
    append_batches(log, 16, timestamp_step=0)  # constant timestamps: one time entry only
    assert [s.base_offset for s in log.segments()] == [0, 7, 14]
    offsets, times = loaded_index_entries(log.segments()[0])
    assert [o for o, _ in offsets] == [1, 2, 3, 4, 5, 6]
    assert times == [(T0, 0)]


@pytest.mark.parametrize("records", [1, 4, [1, 7, 2]])
def test_index_entries_follow_kafkas_interval_rule(
    tmp_path: Path, records: int | list[int]
) -> None:
    config = small_config(segment_bytes=2048, index_interval_bytes=300)
    log = open_log(tmp_path / "t-0", config, clock=ManualClock(T0))
    batches = append_batches(log, 80, records=records, value_size=25)
    assert_kafkas_indexes(log, batches, config.index_interval_bytes, sealed_entries=3)


def assert_kafkas_indexes(
    log: Log, batches: list[bytes], interval: int, *, sealed_entries: int
) -> None:
    """Every segment's indexes are those of Kafka's per-batch rule (`expected_indexes`), over
    at least three segments, each rolled one with at least `sealed_entries` offset entries."""
    grouped = batches_by_segment(log, batches)
    assert len(grouped) >= 3
    segments = log.segments()
    for segment in segments:
        expected = expected_indexes(grouped[segment.base_offset], interval)
        offsets, times = loaded_index_entries(segment)
        assert offsets == expected.offset_entries
        if segment is not segments[-1]:
            assert len(expected.offset_entries) >= sealed_entries  # the rule was exercised
        if segment is segments[-1]:
            assert times == expected.time_entries
        else:  # rolled: one final entry with the segment's max timestamp
            assert times == with_final_time_entry(expected)
        assert all(a[0] < b[0] and a[1] <= b[1] for a, b in itertools.pairwise(times))


def test_index_files_hold_big_endian_relative_entries_after_close(tmp_path: Path) -> None:
    config = small_config(segment_bytes=2048, index_interval_bytes=200)
    directory = tmp_path / "t-0"
    log = open_log(directory, config, clock=ManualClock(T0))
    batches = append_batches(log, 50, records=2)
    grouped = batches_by_segment(log, batches)
    log.close()

    index_files = files_with_suffix(directory, ".index")
    time_files = files_with_suffix(directory, ".timeindex")
    assert len(index_files) == len(time_files) == len(grouped) >= 3
    for (base, group), index_path, time_path in zip(
        grouped.items(), index_files, time_files, strict=True
    ):
        assert index_path.name == f"{base:020d}.index"
        expected = expected_indexes(group, config.index_interval_bytes)
        raw_offsets = index_file_entries(index_path, ">ii")
        assert raw_offsets == [
            (offset - base, position) for offset, position in expected.offset_entries
        ]
        assert index_path.stat().st_size == 8 * len(raw_offsets)
        raw_times = index_file_entries(time_path, ">qi")
        # Rolled and closed segments alike end with the final (max timestamp) entry.
        assert raw_times == [(ts, offset - base) for ts, offset in with_final_time_entry(expected)]
        assert time_path.stat().st_size == 12 * len(raw_times)

    reopened = open_log(directory, config, clock=ManualClock(T0))
    assert read_all(reopened) == batches
    for segment, group in zip(reopened.segments(), grouped.values(), strict=True):
        offsets, _ = loaded_index_entries(segment)
        assert offsets == expected_indexes(group, config.index_interval_bytes).offset_entries


@pytest.mark.parametrize(
    ("as_follower", "interval"), [(False, 300), (True, 300), (True, 0), (True, 700)]
)
def test_a_multi_batch_append_is_indexed_per_batch_as_kafka_does(
    tmp_path: Path, as_follower: bool, interval: int
) -> None:
    """Kafka's `LogSegment.append` walks the appended batches: the interval rule, the entry (that
    batch's last offset, its own position) and the time index's largest timestamp so far are
    per batch, whatever batches arrived together."""
    config = small_config(segment_bytes=2048, index_interval_bytes=interval)
    log = open_log(tmp_path / "t-0", config, clock=ManualClock(T0))
    rng = random.Random(interval)
    written: list[bytes] = []
    while len(written) < 90:
        count = rng.choice([2, 3, 5, 9])
        # Timestamps go back and forth, so the largest one so far differs per batch.
        batches = [
            make_batch(
                rng.choice([1, 3]),
                value_size=25,
                timestamp=T0 + rng.randrange(0, 1000),
                tag=len(written) + i,
            )
            for i in range(count)
        ]
        offset = log.log_end_offset
        stamped_batches = []
        for batch in batches:
            stamped_batches.append(stamped(batch, offset, 0))
            offset += read_header(batch).records_count
        if as_follower:
            log.append_as_follower(b"".join(stamped_batches))
        else:
            log.append_as_leader(b"".join(batches), 0)
        written += stamped_batches
    assert read_all(log) == written
    assert_kafkas_indexes(log, written, interval, sealed_entries=1)
