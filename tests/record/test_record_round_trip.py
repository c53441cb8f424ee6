"""Build -> parse gives back exactly the records and header fields, for every usable codec."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from record_test_support import producer_states, record_lists, reseal, timestamps

from replog.record import (
    BatchBuilder,
    Record,
    RecordBatch,
    available_codecs,
    build_batch,
    iter_batches,
    validate_batch,
)

Records = list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]]
ProducerState = tuple[int, int, int, bool]
CODECS = sorted(available_codecs())


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=record_lists,
    state=producer_states,
    codec=st.sampled_from(CODECS),
    base_offset=st.integers(0, 2**62),
    leader_epoch=st.integers(-1, 2**31 - 1),
    is_control=st.booleans(),
)
def test_build_then_parse(
    records: Records,
    state: ProducerState,
    codec: int,
    base_offset: int,
    leader_epoch: int,
    is_control: bool,
) -> None:
    producer_id, producer_epoch, base_sequence, is_transactional = state
    built = build_batch(
        records,
        compression=codec,
        base_offset=base_offset,
        partition_leader_epoch=leader_epoch,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        is_transactional=is_transactional,
        is_control=is_control,
    )
    batch = RecordBatch.parse(built)
    assert batch.to_bytes() == built
    assert batch.size_in_bytes == len(built)
    assert (batch.base_offset, batch.partition_leader_epoch) == (base_offset, leader_epoch)
    assert batch.compression_codec == codec
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (
        producer_id,
        producer_epoch,
        base_sequence,
    )
    assert (batch.is_transactional, batch.is_control) == (is_transactional, is_control)
    assert not batch.is_log_append_time
    assert batch.records_count == len(records)
    assert batch.last_offset == base_offset + len(records) - 1
    assert batch.base_timestamp == records[0][0]
    assert batch.max_timestamp == max(timestamp for timestamp, *_ in records)
    expected = [
        Record(base_offset + index, timestamp, key, value, tuple(headers))
        for index, (timestamp, key, value, headers) in enumerate(records)
    ]
    assert list(batch.records()) == expected
    assert list(batch) == expected
    assert list(batch.values()) == [value for _, _, value, _ in records]
    assert list(batch.keys()) == [(r.offset, r.key) for r in expected]


@settings(max_examples=40, deadline=None)
@given(records=record_lists, codec=st.sampled_from(CODECS), append_time=timestamps)
def test_log_append_time_replaces_every_timestamp(
    records: Records, codec: int, append_time: int
) -> None:
    built = build_batch(records, compression=codec, log_append_time=append_time)
    batch = RecordBatch.parse(built)
    assert batch.is_log_append_time
    assert batch.max_timestamp == append_time
    assert batch.base_timestamp == records[0][0]  # left alone, as Kafka does
    assert {record.timestamp for record in batch.records()} == {append_time}


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(record_lists, st.sampled_from(CODECS)), min_size=1, max_size=5))
def test_iter_batches_over_a_concatenation(batches: list[tuple[Records, int]]) -> None:
    raw = b""
    next_offset = 0
    for records, codec in batches:
        raw += build_batch(records, compression=codec, base_offset=next_offset)
        next_offset += len(records)
    parsed = list(iter_batches(raw))
    assert len(parsed) == len(batches)
    offsets = [record.offset for batch in parsed for record in batch.records()]
    assert offsets == list(range(next_offset))
    # A bytearray or memoryview of the same bytes parses the same.
    assert [b.to_bytes() for b in iter_batches(memoryview(raw))] == [b.to_bytes() for b in parsed]


def test_incremental_builder_reports_sizes_and_offsets() -> None:
    builder = BatchBuilder()
    assert builder.size_in_bytes == 61
    assert builder.append(1000, b"k", b"v") == 0
    assert builder.append(999, None, None, [("h", None)]) == 1
    assert builder.records_count == 2
    built = builder.build()
    # Uncompressed, the running size is exact.
    assert builder.size_in_bytes == len(built)
    header = validate_batch(built)
    assert (header.base_timestamp, header.max_timestamp) == (1000, 1000)
    records = list(RecordBatch.parse(built).records())
    assert [record.timestamp for record in records] == [1000, 999]


def test_header_keys_survive_invalid_utf8() -> None:
    """A header key with bytes that are not UTF-8 decodes to surrogates and re-encodes exactly."""
    built = build_batch([(0, None, None, [("ok", b"1")])])
    raw = bytearray(built)
    position = raw.index(b"ok")
    raw[position : position + 2] = b"\xff\xfe"
    [record] = RecordBatch.parse(reseal(raw)).records()
    [(key, value)] = record.headers
    assert key == "\udcff\udcfe"
    assert build_batch([(0, None, None, list(record.headers))]) == reseal(raw)
    assert value == b"1"
