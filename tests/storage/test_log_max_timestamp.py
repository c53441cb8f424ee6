"""ListOffsets' MAX_TIMESTAMP lookup (`Log.max_timestamp_and_offset`, KIP-734) against a scan of
every batch: the largest timestamp among the batches holding an offset in [log start, bound),
answered with the offset of the first record that carries it (Kafka 3.8, KAFKA-16310).

The lookup reads each segment's tracked maximum and its time index instead of the batches, so
the property runs it over small segments with a dense index, timestamps that rise, fall and
repeat, a log start moved inside a segment, truncations, rolls and reopens (which make the
segments load their maximum lazily from the time index).
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from storage_helpers import open_log, small_config

from replog.record import build_batch
from replog.storage import Log
from replog.storage.segment import LogSegment

Batch = tuple[int, int, list[int]]  # (base offset, last offset, each record's timestamp)


def scanned(batches: list[Batch], start: int, bound: int) -> tuple[int, int] | None:
    """The answer by reading every batch, the obvious way: the first batch (by its header's
    largest timestamp) wins, then its first record at or above the start with that timestamp
    (else its first offset at or above the start)."""
    best: tuple[int, Batch] | None = None
    for batch in batches:
        base, last, stamps = batch
        if last >= start and base < bound and (best is None or max(stamps) > best[0]):
            best = (max(stamps), batch)
    if best is None or best[0] < 0:
        return None
    largest, (base, _, stamps) = best
    offsets = [base + i for i, ts in enumerate(stamps) if ts == largest and base + i >= start]
    return largest, offsets[0] if offsets else max(start, base)


def append(log: Log, stamps: list[int]) -> Batch:
    info = log.append_as_leader(build_batch([(ts, None, b"v" * 30, ()) for ts in stamps]), 0)
    return info.first_offset, info.last_offset, stamps


stamps = st.lists(st.integers(0, 40), min_size=1, max_size=4)
steps = st.lists(
    st.one_of(
        st.tuples(st.just("append"), stamps),
        st.tuples(st.just("roll"), st.none()),
        st.tuples(st.just("reopen"), st.none()),
        st.tuples(st.just("start"), st.floats(0, 1)),  # move the log start to this fraction
        st.tuples(st.just("truncate"), st.floats(0, 1)),  # of the offsets above the start
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(steps=steps, bounds=st.lists(st.floats(0, 1), min_size=1, max_size=5))
def test_the_lookup_equals_a_scan_of_every_batch(
    steps: list[tuple[str, object]], bounds: list[float]
) -> None:
    config = small_config(segment_bytes=400, index_interval_bytes=100)
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "t-0"
        log = open_log(directory, config)
        batches: list[Batch] = []
        for kind, arg in steps:
            start, end = log.log_start_offset, log.log_end_offset
            if kind == "append":
                assert isinstance(arg, list)
                batches.append(append(log, arg))
            elif kind == "roll" and end > 0:
                log.roll()
            elif kind == "reopen":
                log.close()
                log = open_log(directory, config)
            elif kind == "start":
                assert isinstance(arg, float)
                log.high_watermark = end
                log.increment_log_start_offset(start + int(arg * (end - start)))
                log.delete_old_segments()
            elif kind == "truncate":
                assert isinstance(arg, float)
                log.truncate_to(start + int(arg * (end - start)))
                batches = [b for b in batches if b[1] < log.log_end_offset]
        start, end = log.log_start_offset, log.log_end_offset
        for fraction in bounds:
            bound = start + round(fraction * (end - start))
            assert log.max_timestamp_and_offset(bound) == scanned(batches, start, bound), (
                start,
                bound,
                batches,
            )
        log.close()


def record_walks(segment: LogSegment) -> list[int]:
    """Patch `segment` to note the base offset of every batch header it reads."""
    walked: list[int] = []
    real_walk = segment._walk_headers

    def counting_walk(position: int, *args: Any, **kwargs: Any) -> Iterator[tuple[int, Any]]:
        for found in real_walk(position, *args, **kwargs):
            walked.append(found[1].base_offset)
            yield found

    segment._walk_headers = counting_walk  # type: ignore[method-assign]
    return walked


def test_a_sealed_segment_answers_without_scanning_its_batches(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", small_config(segment_bytes=4096, index_interval_bytes=100))
    for i in range(20):
        append(log, [1000 + i])
    log.roll()
    append(log, [5])
    walked = record_walks(log.segments()[0])
    assert log.max_timestamp_and_offset(log.log_end_offset) == (1019, 19)
    # Only the found batch is read, from its offset-index entry: no scan of the segment.
    assert walked and min(walked) >= 15
    log.close()


def test_the_active_segment_reads_only_past_its_last_time_index_entry(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", small_config(segment_bytes=1 << 20, index_interval_bytes=100))
    for i in range(200):
        append(log, [1000 + i])
    segment = log.segments()[0]
    last_indexed = segment.time_index.last_entry_below(150)
    assert last_indexed is not None and 140 <= last_indexed[1] < 150
    walked = record_walks(segment)
    assert log.max_timestamp_and_offset(150) == (1149, 149)
    assert walked and walked[0] >= last_indexed[1] - 5 and len(walked) <= 12
    log.close()


@pytest.mark.parametrize("index_interval_bytes", [100, 1 << 20], ids=["dense", "sparse"])
def test_a_larger_timestamp_below_the_log_start_is_not_the_answer(
    tmp_path: Path, index_interval_bytes: int
) -> None:
    # The segment's maximum (and its only time-index entry) lies below the log start, which
    # DeleteRecords moved inside the segment: the answer comes from the batches above it.
    config = small_config(segment_bytes=1 << 20, index_interval_bytes=index_interval_bytes)
    log = open_log(tmp_path / "t-0", config)
    append(log, [100])
    for i in range(10):
        append(log, [10 + i])
    log.roll()  # seals the segment: its final time-index entry is (100, 0)
    log.high_watermark = log.log_end_offset
    log.increment_log_start_offset(5)
    assert log.segments()[0].time_index.entries() == [(100, 0)]
    assert log.max_timestamp_and_offset(log.log_end_offset) == (19, 10)
    assert log.max_timestamp_and_offset(8) == (16, 7)
    log.close()


def test_batches_without_timestamps_add_no_time_index_entry(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # An empty time index must not take (-1, -1) from a first batch without a timestamp: the
    # next load would refuse it (a negative offset) and rebuild both indexes.
    # Kafka's empty index starts at NO_TIMESTAMP, which no entry is added for.
    config = small_config(segment_bytes=1 << 20, index_interval_bytes=50)
    log = open_log(tmp_path / "t-0", config)
    for ts in (-1, -1, 5, 7):
        append(log, [ts])
    assert log.segments()[0].time_index.entries() == [(5, 2), (7, 3)]
    log.close()
    with caplog.at_level(logging.WARNING, "replog"):
        again = open_log(tmp_path / "t-0", config)
        assert again.max_timestamp_and_offset(again.log_end_offset) == (7, 3)
        again.close()
    assert "rebuild" not in caplog.text


@pytest.mark.parametrize(
    ("stamps", "answer"),
    [([100, 50, 100], (100, 2)), ([100, 50], (100, 1))],
    ids=["a-later-record-carries-it", "only-below-the-start"],
)
def test_in_a_batch_straddling_the_log_start_records_below_it_are_not_the_answer(
    tmp_path: Path, stamps: list[int], answer: tuple[int, int]
) -> None:
    # The batch counts by its header (its largest timestamp may lie below the start); the
    # answer is a record at or above the start: the first carrying that timestamp, else the
    # batch's first offset there.
    log = open_log(tmp_path / "t-0", small_config())
    append(log, stamps)
    log.high_watermark = log.log_end_offset
    log.increment_log_start_offset(1)
    assert log.max_timestamp_and_offset(log.log_end_offset) == answer
    log.close()
