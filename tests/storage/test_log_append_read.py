"""Leader appends and reads: dense offsets, stamping, read bounds and sizes
(docs/design/storage.md#leader-validation-on-produce, #reads)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from storage_helpers import (
    T0,
    append_batches,
    epoch_pairs,
    files_with_suffix,
    make_batch,
    open_log,
    read_all,
    small_config,
    split_batches,
)

from replog.errors import LogClosedError, OffsetOutOfRangeError
from replog.record import RecordBatch, build_batch, iter_batches, read_header
from replog.storage import Log
from replog.testing import ManualClock


@pytest.fixture
def log(tmp_path: Path) -> Log:
    return open_log(tmp_path / "orders-3")


def test_offsets_are_dense_and_the_leader_epoch_is_stamped_on_disk(log: Log) -> None:
    counts = [1, 5, 2, 7, 1, 3]
    client_batches = [make_batch(n, tag=i) for i, n in enumerate(counts)]
    infos = [log.append_as_leader(batch, 4) for batch in client_batches]

    expected_first = [sum(counts[:i]) for i in range(len(counts))]
    assert [info.first_offset for info in infos] == expected_first
    assert [info.last_offset for info in infos] == [
        f + n - 1 for f, n in zip(expected_first, counts, strict=True)
    ]
    assert [info.records_count for info in infos] == counts
    assert log.log_end_offset == sum(counts)
    assert epoch_pairs(log) == [(4, 0)]

    (segment_file,) = files_with_suffix(log.directory, ".log")
    on_disk = list(iter_batches(segment_file.read_bytes(), where=str(segment_file)))  # checks CRCs
    assert [batch.base_offset for batch in on_disk] == expected_first
    assert {batch.partition_leader_epoch for batch in on_disk} == {4}
    for batch, client in zip(on_disk, client_batches, strict=True):
        original = RecordBatch.parse(client)
        assert batch.crc == original.crc  # base offset and epoch are outside the CRC
        assert batch.to_bytes()[16:] == client[16:]  # nothing else changed
        assert [r.offset for r in batch.records()] == list(
            range(batch.base_offset, batch.next_offset)
        )


def test_append_info_reports_timestamps_and_the_written_headers(log: Log) -> None:
    append_batches(log, 2)
    batch = make_batch(3, timestamp=T0 + 500)
    info = log.append_as_leader(batch, 0)
    assert (info.first_offset, info.last_offset, info.next_offset) == (2, 4, 5)
    assert info.max_timestamp == T0 + 502
    assert info.offset_of_max_timestamp == 4
    assert info.log_append_time_ms == -1
    assert info.valid_bytes == len(batch)
    assert info.last_leader_epoch == 0
    assert [(h.base_offset, h.partition_leader_epoch) for h in info.batches] == [(2, 0)]


def test_read_starts_with_the_whole_batch_holding_the_start_offset(log: Log) -> None:
    batches = append_batches(log, 4, records=5)  # offsets 0-4, 5-9, 10-14, 15-19
    for start in range(20):
        first = split_batches(log.read(start, 10_000))[0]
        assert first == batches[start // 5], start


def test_read_never_returns_a_batch_at_or_beyond_the_upper_bound(log: Log) -> None:
    batches = append_batches(log, 4, records=5)
    assert split_batches(log.read(0, 10_000, upper_bound_offset=10)) == batches[:2]
    # A bound inside a batch excludes that whole batch, which holds offsets at the bound.
    assert split_batches(log.read(0, 10_000, upper_bound_offset=12)) == batches[:2]
    assert split_batches(log.read(0, 10_000, upper_bound_offset=11)) == batches[:2]
    assert split_batches(log.read(5, 10_000, upper_bound_offset=19)) == batches[1:3]
    assert split_batches(log.read(7, 10_000, upper_bound_offset=20)) == batches[1:]
    # A start inside the batch that straddles the bound: nothing below the bound is whole.
    assert log.read(11, 10_000, upper_bound_offset=12) == b""
    assert log.read(10, 10_000, upper_bound_offset=10) == b""
    assert log.read(12, 10_000, upper_bound_offset=3) == b""  # bound below start: empty, no error


def test_read_returns_whole_batches_within_max_bytes(log: Log) -> None:
    batches = append_batches(log, 5, records=2)
    size = len(batches[0])
    assert {len(b) for b in batches} == {size}
    assert split_batches(log.read(0, 3 * size)) == batches[:3]
    assert split_batches(log.read(0, 3 * size - 1)) == batches[:2]  # never a partial batch
    assert split_batches(log.read(0, 3 * size + size - 1)) == batches[:3]


def test_min_one_message_returns_the_first_batch_even_when_larger_than_max_bytes(log: Log) -> None:
    batches = append_batches(log, 3, records=4)
    assert log.read(0, 10) == batches[0]
    assert log.read(0, 0) == batches[0]
    assert log.read(5, len(batches[1]) + 1) == batches[1]
    assert log.read(0, 10, min_one_message=False) == b""
    assert log.read(0, len(batches[0]), min_one_message=False) == batches[0]
    # The bound still wins over min_one_message.
    assert log.read(0, 10, upper_bound_offset=2) == b""


def test_reads_span_segment_boundaries(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", small_config(segment_bytes=1024))
    batches = append_batches(log, 40)
    segments = log.segments()
    assert len(segments) >= 4
    second = segments[1].base_offset
    # One read serves one segment (as Kafka's): it stops at the end of the segment holding start.
    data = log.read(second - 1, 100_000)
    assert split_batches(data) == [batches[second - 1]]
    assert split_batches(log.read(second, 100_000))[0] == batches[second]
    # A bound in a later segment does not stop a read in an earlier one.
    assert split_batches(log.read(0, 100_000, upper_bound_offset=39)) == batches[:second]
    # A bound exactly at a segment base.
    assert (
        split_batches(log.read(second - 2, 100_000, upper_bound_offset=second))
        == batches[second - 2 : second]
    )
    assert read_all(log) == batches
    assert read_all(log, 7, 33) == batches[7:33]


def test_read_at_the_log_end_is_empty(log: Log) -> None:
    assert log.read(0, 1000) == b""  # empty log
    append_batches(log, 3)
    assert log.read(3, 1000) == b""
    assert log.read(3, 1000, upper_bound_offset=100) == b""


def test_reads_outside_the_log_are_out_of_range(tmp_path: Path) -> None:
    log = open_log(tmp_path / "payments-7", small_config(segment_bytes=1024), clock=ManualClock(T0))
    append_batches(log, 30)
    log.high_watermark = 30
    log.increment_log_start_offset(12)
    with pytest.raises(OffsetOutOfRangeError, match=r"payments-7.*offset 11\b"):
        log.read(11, 1000)
    with pytest.raises(OffsetOutOfRangeError, match=r"payments-7.*offset 31\b"):
        log.read(31, 1000)
    assert read_header(log.read(12, 1)).base_offset == 12
    assert log.delete_old_segments() > 0  # the segments wholly below offset 12 go
    assert 0 < log.segments()[0].base_offset <= 12
    assert log.log_start_offset == 12
    with pytest.raises(OffsetOutOfRangeError, match="payments-7"):
        log.read(0, 1000)


def test_offsets_for_times(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", small_config(segment_bytes=1024))
    # Batch i holds 2 records with timestamps T0 + 10*i and T0 + 10*i + 1.
    append_batches(log, 30, records=2, timestamp_step=10)
    assert len(log.segments()) > 2
    assert log.offsets_for_times(T0) == (0, T0)
    assert log.offsets_for_times(T0 + 1) == (1, T0 + 1)
    assert log.offsets_for_times(T0 + 2) == (2, T0 + 10)
    assert log.offsets_for_times(T0 + 155) == (32, T0 + 160)
    assert log.offsets_for_times(T0 + 291) == (59, T0 + 291)
    assert log.offsets_for_times(T0 + 292) is None
    # Records below the log start are not answered, even inside a batch that straddles it.
    log.high_watermark = 60
    log.increment_log_start_offset(33)
    assert log.offsets_for_times(T0) == (33, T0 + 161)


@pytest.mark.parametrize("stamps", [[100, 100, 100], [100, 90]], ids=["equal", "backwards"])
def test_offsets_for_times_finds_records_before_the_time_index_entry_in_its_batch(
    tmp_path: Path, stamps: list[int]
) -> None:
    # A time-index entry names the last offset of the batch that holds its timestamp: records
    # before it in the batch carry that timestamp too (all of them under LogAppendTime), or a
    # larger one. They must still be found once the index has the entry (after a roll).
    log = open_log(tmp_path / "t-0", small_config())
    log.append_as_leader(build_batch([(ts, None, b"x", ()) for ts in stamps]), 0)
    log.append_as_leader(build_batch([(50, None, b"later", ())]), 0)
    assert log.offsets_for_times(100) == (0, 100)
    log.roll()
    assert log.segments()[0].time_index.entries() == [(100, len(stamps) - 1)]
    assert log.offsets_for_times(100) == (0, 100)
    log.close()
    again = open_log(tmp_path / "t-0", small_config())
    assert again.offsets_for_times(100) == (0, 100)
    again.close()


def test_a_closed_log_refuses_work(log: Log) -> None:
    append_batches(log, 1)
    log.close()
    with pytest.raises(LogClosedError):
        log.append_as_leader(make_batch(), 0)
    with pytest.raises(LogClosedError):
        log.read(0, 100)
    log.close()  # idempotent


@settings(max_examples=40, deadline=None)
@given(
    segment_bytes=st.sampled_from([400, 700, 1000]),
    index_interval_bytes=st.sampled_from([0, 50, 300]),
    steps=st.lists(
        st.one_of(
            st.lists(st.integers(0, 50), min_size=1, max_size=4),  # one batch's timestamps
            st.just("roll"),
            st.just("reopen"),
            st.integers(0, 3),  # move the log start this many offsets up
        ),
        max_size=25,
    ),
)
def test_offsets_for_times_matches_a_scan_of_every_record(
    segment_bytes: int, index_interval_bytes: int, steps: list[object]
) -> None:
    # The first record at or after each time, over timestamps that repeat and go backwards
    # inside and across batches, with rolls (time-index entries) and reopens (rebuilt ones).
    config = small_config(segment_bytes=segment_bytes, index_interval_bytes=index_interval_bytes)
    with tempfile.TemporaryDirectory() as tmp:
        log = open_log(Path(tmp) / "t-0", config)
        model: list[tuple[int, int]] = []  # (offset, timestamp) of every record
        for step in steps:
            if isinstance(step, list):
                info = log.append_as_leader(build_batch([(t, None, b"v", ()) for t in step]), 0)
                model += [(info.first_offset + i, t) for i, t in enumerate(step)]
                log.high_watermark = log.log_end_offset
            elif step == "roll":
                log.roll()
            elif step == "reopen":
                log.close()
                log = open_log(Path(tmp) / "t-0", config)
            else:
                assert isinstance(step, int)
                log.increment_log_start_offset(min(log.log_start_offset + step, log.high_watermark))
            start = log.log_start_offset
            for target in (0, 10, 25, 50):
                expected = next(((o, t) for o, t in model if t >= target and o >= start), None)
                assert log.offsets_for_times(target) == expected, (target, model, start)
        log.close()
