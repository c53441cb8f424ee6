"""The log cleaner's pure rules: the key map's memory bound, the batch filter against a model of
compaction, the transaction and producer rules, the choice of the dirtiest log and the grouping
of segments (replog/storage/cleaner/)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replog.errors import InvalidRecordError
from replog.record import RecordBatch, build_batch, read_header, validate_batch
from replog.record.control_record import CONTROL_ABORT, CONTROL_COMMIT
from replog.record.header import DELETE_HORIZON_FLAG_MASK
from replog.storage.aborted_transactions import AbortedTransaction
from replog.storage.cleaner.batch_filter import BatchFilter, ProducerLastBatch, delete_horizon
from replog.storage.cleaner.cleanable import (
    CompactedLogSummary,
    SegmentSummary,
    cleanable_offsets,
    filthiest,
    log_to_clean,
)
from replog.storage.cleaner.cleaning_state import CleaningStates
from replog.storage.cleaner.grouping import GroupedSegment, group_segments_by_size
from replog.storage.cleaner.offset_map import OffsetMap, OffsetMapFullError
from replog.storage.cleaner.transactions import CleanedTransactions

T0 = 1_700_000_000_000
HOUR = 3_600_000


# --- the offset map ------------------------------------------------------------------------------


def test_the_map_holds_what_the_dedupe_buffer_holds_at_its_load_factor() -> None:
    offset_map = OffsetMap(24 * 100, load_factor=0.9)
    assert (offset_map.slots, offset_map.max_entries) == (100, 90)
    for i in range(90):
        offset_map.put(f"k{i}".encode(), i)
    assert offset_map.is_full
    with pytest.raises(OffsetMapFullError):
        offset_map.put(b"another", 90)
    offset_map.put(b"k3", 95)  # a known key still takes its later offset
    assert offset_map.get(b"k3") == 95
    assert offset_map.get(b"never") == -1
    assert offset_map.latest_offset == 95
    offset_map.clear()
    assert (len(offset_map), offset_map.latest_offset) == (0, -1)


def test_a_key_keeps_its_latest_offset() -> None:
    offset_map = OffsetMap(24 * 10)
    offset_map.put(b"k", 7)
    offset_map.put(b"k", 3)
    assert offset_map.get(b"k") == 7


@settings(max_examples=50, deadline=None)
@given(
    slots=st.integers(2, 40),
    puts=st.lists(st.tuples(st.binary(max_size=3), st.integers(0, 1000)), max_size=60),
)
def test_the_map_answers_as_a_dict_of_latest_offsets_within_its_buffer(
    slots: int, puts: list[tuple[bytes, int]]
) -> None:
    """Open addressing in a buffer of `slots` entries, probed past collisions, at any load."""
    offset_map = OffsetMap(24 * slots, load_factor=1.0)
    assert offset_map.max_entries == slots - 1  # one slot stays empty
    model: dict[bytes, int] = {}
    for key, offset in puts:
        if key not in model and len(model) == offset_map.max_entries:
            with pytest.raises(OffsetMapFullError):
                offset_map.put(key, offset)
            continue
        offset_map.put(key, offset)
        model[key] = max(offset, model.get(key, -1))
    assert len(offset_map) == len(model)
    for key, offset in model.items():
        assert offset_map.get(key) == offset
    assert offset_map.get(b"absent-key") == -1
    assert len(offset_map._buffer) == 24 * slots


@pytest.mark.parametrize("memory", [0, 23])
def test_a_buffer_without_room_for_an_entry_is_refused(memory: int) -> None:
    with pytest.raises(ValueError, match="dedupe buffer"):
        OffsetMap(memory)


# --- batches and a model of compaction -----------------------------------------------------------


@dataclass(frozen=True)
class Rec:
    offset: int
    key: bytes | None
    value: bytes | None


def batch_of(
    base: int, records: list[tuple[bytes | None, bytes | None]], **options: object
) -> bytes:
    return build_batch(
        [(T0 + base + i, k, v, ()) for i, (k, v) in enumerate(records)],
        base_offset=base,
        **options,  # type: ignore[arg-type]
    )


def records_of(batch: bytes) -> list[Rec]:
    parsed = RecordBatch.parse(batch, sparse=True)
    return [Rec(r.offset, r.key, r.value) for r in parsed.records()]


def filter_all(
    batches: list[bytes],
    *,
    now: int,
    retention: int = HOUR,
    last_batches: dict[int, ProducerLastBatch] | None = None,
    aborted: list[AbortedTransaction] | None = None,
    offset_map: OffsetMap | None = None,
) -> list[bytes]:
    if offset_map is None:
        offset_map = OffsetMap(24 * 10_000)
        for batch in batches:
            header = read_header(batch)
            if not header.is_control:
                for record in records_of(batch):
                    if record.key is not None:
                        offset_map.put(record.key, record.offset)
            offset_map.update_latest_offset(header.last_offset)
    batch_filter = BatchFilter(
        offset_map,
        now_ms=now,
        delete_retention_ms=retention,
        last_batches=last_batches or {},
        transactions=CleanedTransactions(aborted or ()),
    )
    return [kept for b in batches if (kept := batch_filter.filter(b)) is not None]


appends = st.lists(
    st.lists(
        st.tuples(
            st.sampled_from([b"a", b"b", b"c", b"d", None]),
            st.one_of(st.none(), st.binary(min_size=1, max_size=8)),
        ),
        min_size=1,
        max_size=5,
    ),
    min_size=1,
    max_size=25,
)


def as_batches(batches: list[list[tuple[bytes | None, bytes | None]]]) -> list[bytes]:
    out, offset = [], 0
    for records in batches:
        out.append(batch_of(offset, records))
        offset += len(records)
    return out


@settings(max_examples=60, deadline=None)
@given(appends=appends)
def test_cleaning_keeps_each_keys_latest_record_at_its_offset(
    appends: list[list[tuple[bytes | None, bytes | None]]],
) -> None:
    batches = as_batches(appends)
    everything = [r for b in batches for r in records_of(b)]
    latest = {r.key: r for r in everything if r.key is not None}
    first = filter_all(batches, now=T0)
    kept = [r for b in first for r in records_of(b)]
    # Exactly the latest record of each key survives, tombstones included (horizon not past),
    # at its own offset, with its own value.
    assert kept == sorted(latest.values(), key=lambda r: r.offset)
    originals = {read_header(b).base_offset: read_header(b) for b in batches}
    for batch in first:
        header = validate_batch(batch, sparse=True)  # a valid CRC
        original = originals[header.base_offset]
        assert header.last_offset == original.last_offset
        assert header.producer_id == original.producer_id
        has_tombstone = any(r.value is None for r in records_of(batch))
        assert (delete_horizon(header) == T0 + HOUR) == has_tombstone
    # A pass before the horizon changes nothing more; one at the horizon drops the tombstones.
    assert filter_all(first, now=T0 + HOUR - 1) == first
    second = [r for b in filter_all(first, now=T0 + HOUR) for r in records_of(b)]
    assert second == [r for r in kept if r.value is not None]


def test_a_batch_that_keeps_everything_is_copied_byte_for_byte() -> None:
    batch = batch_of(0, [(b"a", b"1"), (b"b", b"2")])
    assert filter_all([batch], now=T0) == [batch]


def test_a_rewritten_batch_keeps_its_fields_and_gets_a_new_crc() -> None:
    batch = batch_of(
        10,
        [(b"a", b"1"), (b"b", b"2"), (b"a", b"3")],
        producer_id=7,
        producer_epoch=2,
        base_sequence=40,
        partition_leader_epoch=5,
    )
    [out] = filter_all([batch], now=T0)
    before, after = read_header(batch), validate_batch(out, sparse=True)
    assert (after.base_offset, after.last_offset) == (10, 12)
    assert after.records_count == 2
    assert (after.producer_id, after.producer_epoch, after.base_sequence) == (7, 2, 40)
    assert after.last_sequence == before.last_sequence
    assert after.partition_leader_epoch == 5
    assert after.crc != before.crc
    assert [(r.offset, r.key) for r in records_of(out)] == [(11, b"b"), (12, b"a")]
    # What the key map reads of it: offsets after the gap, keys.
    assert list(RecordBatch.parse(out, sparse=True).keys()) == [(11, b"b"), (12, b"a")]
    assert after.base_timestamp == T0 + 10 + 1  # its first kept record's
    assert after.max_timestamp == T0 + 10 + 2


def test_a_compressed_batch_is_rewritten_with_its_codec() -> None:
    batch = batch_of(0, [(b"a", b"1"), (b"a", b"2")], compression=1)
    [out] = filter_all([batch], now=T0)
    assert read_header(out).compression_codec == 1
    assert records_of(out) == [Rec(1, b"a", b"2")]
    assert list(RecordBatch.parse(out, sparse=True).keys()) == [(1, b"a")]


def test_records_without_a_key_are_removed() -> None:
    [out] = filter_all([batch_of(0, [(None, b"x"), (b"a", b"1")])], now=T0)
    assert records_of(out) == [Rec(1, b"a", b"1")]


def test_records_past_the_maps_reach_are_kept_untouched() -> None:
    offset_map = OffsetMap(24 * 10)
    offset_map.put(b"a", 1)  # the map reached offset 1 only
    covered = batch_of(0, [(b"a", b"old"), (b"a", b"new")])
    beyond = batch_of(2, [(b"a", b"newer"), (None, b"x"), (b"b", None)])
    out = filter_all([covered, beyond], now=T0, offset_map=offset_map)
    assert records_of(out[0]) == [Rec(1, b"a", b"new")]
    assert out[1] == beyond


def test_the_last_batch_of_a_producer_stays_emptied_with_its_sequence() -> None:
    old = batch_of(0, [(b"a", b"1")], producer_id=9, producer_epoch=1, base_sequence=0)
    last = batch_of(1, [(b"a", b"2")], producer_id=9, producer_epoch=1, base_sequence=1)
    newer = batch_of(2, [(b"a", b"3")])
    state = {9: ProducerLastBatch(last_data_offset=1, producer_epoch=1)}
    out = filter_all([old, last, newer], now=T0, last_batches=state)
    assert len(out) == 2
    empty = validate_batch(out[0], sparse=True)
    assert (empty.base_offset, empty.last_offset, empty.records_count) == (1, 1, 0)
    assert (empty.producer_id, empty.producer_epoch, empty.base_sequence) == (9, 1, 1)
    assert empty.base_timestamp == -1
    assert empty.max_timestamp == read_header(last).max_timestamp
    assert out[1] == newer
    # Without the producer's state, the emptied batch goes.
    assert filter_all([old, last, newer], now=T0) == [newer]


def control_batch(base: int, kind: int, producer_id: int, epoch: int = 0) -> bytes:
    key = kind.to_bytes(4, "big")  # version 0, then the type
    return build_batch(
        [(T0 + base, key, b"\x00\x00\x00\x00\x00\x00", ())],
        base_offset=base,
        producer_id=producer_id,
        producer_epoch=epoch,
        is_transactional=True,
        is_control=True,
    )


def txn_batch(base: int, key: bytes, value: bytes, producer_id: int) -> bytes:
    return batch_of(base, [(key, value)], producer_id=producer_id, producer_epoch=0,
                    base_sequence=base, is_transactional=True)  # fmt: skip


def test_a_commit_marker_without_data_left_goes_after_its_delete_horizon() -> None:
    marker = control_batch(0, CONTROL_COMMIT, producer_id=5)
    [first] = filter_all([marker], now=T0)
    header = read_header(first)
    assert header.attributes & DELETE_HORIZON_FLAG_MASK
    assert delete_horizon(header) == T0 + HOUR
    assert filter_all([first], now=T0 + HOUR - 1) == [first]
    assert filter_all([first], now=T0 + HOUR) == []


def test_a_commit_marker_whose_data_is_still_there_stays_without_a_horizon() -> None:
    data = txn_batch(0, b"a", b"1", producer_id=5)
    marker = control_batch(1, CONTROL_COMMIT, producer_id=5)
    out = filter_all([data, marker], now=T0 + 10 * HOUR)
    assert out == [data, marker]


def test_aborted_data_goes_and_its_marker_outlives_it() -> None:
    data = txn_batch(0, b"a", b"aborted", producer_id=5)
    marker = control_batch(1, CONTROL_ABORT, producer_id=5)
    aborted = [AbortedTransaction(5, 0, 1, last_stable_offset=2)]
    assert filter_all([data, marker], now=T0, aborted=aborted) == [marker]
    # Next pass: no data of the transaction left, so the marker gets its horizon, then goes.
    [with_horizon] = filter_all([marker], now=T0, aborted=aborted)
    assert delete_horizon(read_header(with_horizon)) == T0 + HOUR
    assert filter_all([with_horizon], now=T0 + HOUR, aborted=aborted) == []


def test_an_unknown_control_type_is_never_discarded() -> None:
    marker = control_batch(0, 7, producer_id=5)
    assert CleanedTransactions().on_control_batch_read(read_header(marker), 7) is False


# --- the sparse batch format ---------------------------------------------------------------------


def test_a_dense_batch_must_still_have_dense_offset_deltas() -> None:
    batch = batch_of(0, [(b"a", b"1"), (b"b", b"2"), (b"a", b"3")])
    [sparse] = filter_all([batch], now=T0)
    with pytest.raises(InvalidRecordError, match="records_count 2"):
        validate_batch(sparse)  # the default (a producer's batch) stays strict
    assert validate_batch(sparse, sparse=True).records_count == 2


# --- the choice of log ---------------------------------------------------------------------------


def summary(
    sizes: list[int],
    *,
    name: str = "t-0",
    bases: list[int] | None = None,
    lso: int | None = None,
    ratio: float = 0.5,
    min_lag: int = 0,
    max_lag: int = 2**62,
    timestamps: list[int] | None = None,
) -> CompactedLogSummary:
    bases = bases or [i * 100 for i in range(len(sizes))]
    timestamps = timestamps or [T0] * len(sizes)
    segments = [
        SegmentSummary(b, s, t, t) for b, s, t in zip(bases, sizes, timestamps, strict=True)
    ]
    end = bases[-1] + 50
    return CompactedLogSummary(
        name, segments, bases[0], end, end if lso is None else lso, ratio, min_lag, max_lag
    )


def test_the_active_segment_and_the_high_watermark_bound_the_cleanable_range() -> None:
    log = summary([1000, 1000, 1000, 500])
    assert cleanable_offsets(log, None, T0).first_uncleanable == 300  # the active base
    below_hw = summary([1000, 1000, 1000, 500], lso=150)
    assert cleanable_offsets(below_hw, None, T0).first_uncleanable == 150


def test_the_min_compaction_lag_stops_at_the_first_segment_too_new() -> None:
    log = summary([1000, 1000, 1000, 500], min_lag=HOUR, timestamps=[T0, T0 + 2 * HOUR, T0, T0])
    assert cleanable_offsets(log, None, T0 + 2 * HOUR).first_uncleanable == 100


def test_a_checkpoint_outside_the_log_restarts_at_the_log_start() -> None:
    log = summary([1000, 1000, 500], bases=[100, 200, 300])
    assert cleanable_offsets(log, 150, T0) == cleanable_offsets(log, 150, T0)
    below = cleanable_offsets(log, 50, T0)
    past = cleanable_offsets(log, 10_000, T0)
    assert (below.first_dirty, below.force_checkpoint_update) == (100, True)
    assert (past.first_dirty, past.force_checkpoint_update) == (100, True)
    assert cleanable_offsets(log, 200, T0).first_dirty == 200


def test_the_dirtiest_log_past_its_ratio_is_chosen() -> None:
    clean_mostly = log_to_clean(summary([1000, 1000, 1000, 10], name="a"), 200, T0)
    dirty = log_to_clean(summary([1000, 1000, 1000, 10], name="b"), 100, T0)
    assert (clean_mostly.clean_bytes, clean_mostly.cleanable_bytes) == (2000, 1000)
    assert (dirty.clean_bytes, dirty.cleanable_bytes) == (1000, 2000)
    assert filthiest([clean_mostly, dirty]) is dirty
    strict = log_to_clean(summary([1000, 1000, 1000, 10], name="c", ratio=0.9), 100, T0)
    assert filthiest([clean_mostly, strict]) is None


def test_the_max_compaction_lag_forces_a_log_below_its_ratio() -> None:
    log = summary([1000, 1000, 1000, 10], ratio=0.99, max_lag=HOUR)
    assert filthiest([log_to_clean(log, 200, T0 + HOUR)]) is None
    overdue = log_to_clean(log, 200, T0 + HOUR + 5)
    assert (overdue.compaction_delay_ms, overdue.compaction_due_ms) == (5, T0 + HOUR)
    assert filthiest([overdue]) is overdue


def test_a_log_without_cleanable_bytes_is_never_chosen() -> None:
    log = summary([1000, 10], max_lag=0)
    candidate = log_to_clean(log, 100, T0 + HOUR)
    assert candidate.cleanable_bytes == 0
    assert filthiest([candidate]) is None


# --- grouping ------------------------------------------------------------------------------------


def test_segments_are_grouped_within_the_segment_and_index_sizes() -> None:
    segments = [GroupedSegment(i * 10, 400, 8, 12) for i in range(5)]
    assert group_segments_by_size(segments, 1000, 10_000, 50) == [[0, 1], [2, 3], [4]]
    assert group_segments_by_size(segments, 10_000, 24, 50) == [[0, 1], [2, 3], [4]]


def test_a_group_never_spans_more_than_int32_offsets() -> None:
    segments = [GroupedSegment(0, 10, 8, 12), GroupedSegment(2**31, 10, 8, 12)]
    assert group_segments_by_size(segments, 1000, 1000, 2**31 + 5) == [[0], [1]]
    empty_second = [GroupedSegment(0, 10, 8, 12), GroupedSegment(2**31, 0, 8, 12)]
    assert group_segments_by_size(empty_second, 1000, 1000, 2**31 + 5) == [[0, 1]]


# --- cleaning states -----------------------------------------------------------------------------


def test_a_pause_waits_for_a_running_pass_and_pauses_nest() -> None:
    states = CleaningStates()
    tp = ("orders", 0)
    assert states.start(tp) and not states.start(tp)
    assert states.abort_and_pause(tp) is True  # a pass runs: wait for it
    assert states.is_aborted(tp) and not states.is_paused(tp)
    states.done(tp)
    assert states.is_paused(tp) and not states.start(tp)
    assert states.abort_and_pause(tp) is False  # paused twice now
    states.resume(tp)
    assert states.is_paused(tp)
    states.resume(tp)
    assert states.state(tp) is None and states.start(tp)
    states.done(tp)
    assert states.state(tp) is None


def test_resuming_what_is_not_paused_names_the_partition() -> None:
    states = CleaningStates()
    with pytest.raises(ValueError, match="orders-3: cleaning is not paused"):
        states.resume(("orders", 3))
    with pytest.raises(ValueError, match="orders-3: no cleaning in progress"):
        states.done(("orders", 3))
