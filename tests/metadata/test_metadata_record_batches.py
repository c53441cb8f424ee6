"""Metadata records in RecordBatch v2 batches: committed Raft batches and snapshot files."""

from __future__ import annotations

from uuid import UUID

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from metadata_strategies import any_record

from replog.errors import CorruptMetadataRecordError, CorruptRecordError
from replog.quorum.metadata import record_batches
from replog.quorum.metadata.record_batches import (
    SNAPSHOT_RECORDS_PER_BATCH,
    decode_batch,
    decode_snapshot,
    decode_snapshot_in_steps,
    encode_snapshot,
    encode_snapshot_in_steps,
)
from replog.quorum.metadata.record_codec import encode_record
from replog.quorum.metadata.records import (
    METADATA_VERSION_FEATURE,
    FeatureLevelRecord,
    MetadataRecord,
    NoOpRecord,
    TopicRecord,
)
from replog.quorum.metadata.steps import run_to_end
from replog.quorum.raft.control_records import LeaderChangeRecord, leader_change_batch
from replog.record import BatchBuilder, build_batch, iter_batches


def test_the_worked_example() -> None:
    records = [FeatureLevelRecord(METADATA_VERSION_FEATURE, 7), NoOpRecord()]
    data = encode_snapshot(records, quorum_epoch=3, timestamp_ms=1000)
    (batch,) = iter_batches(data)
    assert (batch.base_offset, batch.last_offset, batch.partition_leader_epoch) == (0, 1, 3)
    assert not batch.is_control
    assert [r.key for r in batch] == [None, None]
    assert decode_snapshot(data, where="test") == records


@settings(max_examples=30, deadline=None)
@given(st.lists(any_record, max_size=40))
def test_snapshots_round_trip(records: list[MetadataRecord]) -> None:
    data = encode_snapshot(records, quorum_epoch=1, timestamp_ms=0)
    assert decode_snapshot(data, where="test") == records


def test_large_snapshots_are_split_into_dense_batches() -> None:
    records: list[MetadataRecord] = [NoOpRecord()] * (2 * SNAPSHOT_RECORDS_PER_BATCH + 1)
    data = encode_snapshot(records, quorum_epoch=2, timestamp_ms=0)
    bases = [batch.base_offset for batch in iter_batches(data)]
    assert bases == [0, SNAPSHOT_RECORDS_PER_BATCH, 2 * SNAPSHOT_RECORDS_PER_BATCH]
    assert decode_snapshot(data, where="test") == records
    assert encode_snapshot([], quorum_epoch=2, timestamp_ms=0) == b""
    assert decode_snapshot(b"", where="test") == []


def test_a_snapshot_decodes_in_steps_of_records_across_its_batches() -> None:
    records: list[MetadataRecord] = [NoOpRecord()] * (SNAPSHOT_RECORDS_PER_BATCH + 300)
    data = encode_snapshot(records, quorum_epoch=2, timestamp_ms=0)
    steps = list(decode_snapshot_in_steps(data, where="test", records_per_step=250))
    # 1,000 records in 4 steps, a step boundary between the batches, 300 records in 2.
    assert len(steps) == 5
    assert run_to_end(decode_snapshot_in_steps(data, where="test", records_per_step=250)) == (
        records
    )


def test_a_snapshot_encodes_in_steps_of_records_within_its_batches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A batch of 1,000 records took about 10 ms of CPU in one loop turn: each step encodes at
    # most SNAPSHOT_RECORDS_PER_STEP records, and the bytes are the whole encoding's.
    records: list[MetadataRecord] = [NoOpRecord()] * (SNAPSHOT_RECORDS_PER_BATCH + 300)
    encoded = [0]

    def counting(record: MetadataRecord) -> bytes:
        encoded[0] += 1
        return encode_record(record)

    monkeypatch.setattr(record_batches, "encode_record", counting)
    steps = encode_snapshot_in_steps(records, quorum_epoch=2, timestamp_ms=0)
    per_step: list[int] = []
    while True:
        encoded[0] = 0
        try:
            next(steps)
        except StopIteration as done:
            per_step.append(encoded[0])
            data = done.value
            break
        per_step.append(encoded[0])
    # 1,000 records in 4 steps, a step boundary between the batches, 300 records in 2.
    assert per_step == [250, 250, 250, 250, 250, 50]
    assert data == encode_snapshot(records, quorum_epoch=2, timestamp_ms=0)
    assert [b.base_offset for b in iter_batches(data)] == [0, SNAPSHOT_RECORDS_PER_BATCH]


def test_control_batches_hold_no_metadata() -> None:
    control = leader_change_batch(
        LeaderChangeRecord(1, (1, 2, 3), (1, 2)), base_offset=0, quorum_epoch=1, timestamp_ms=0
    )
    assert decode_batch(control, where="test") == ()
    # A snapshot framed with control records (Kafka's header and footer) reads the same.
    data = control + encode_snapshot([NoOpRecord()], quorum_epoch=1, timestamp_ms=0)
    assert decode_snapshot(data, where="test") == [NoOpRecord()]


def test_a_committed_batch_decodes_in_order() -> None:
    topic = TopicRecord("orders", UUID(int=5))
    batch = build_batch(
        [(0, None, encode_record(topic), ()), (0, None, encode_record(NoOpRecord()), ())],
        base_offset=40,
    )
    assert decode_batch(batch, where="test") == (topic, NoOpRecord())


def test_bad_values_name_the_offset() -> None:
    batch = build_batch([(0, None, encode_record(NoOpRecord()), ()), (0, None, b"junk", ())],
                        base_offset=7)  # fmt: skip
    with pytest.raises(CorruptMetadataRecordError, match="node 1: record at offset 8"):
        decode_batch(batch, where="node 1")
    without_value = build_batch([(0, None, None, ())], base_offset=3)
    with pytest.raises(CorruptMetadataRecordError, match="offset 3 has no value"):
        decode_batch(without_value, where="node 1")


def test_framing_errors() -> None:
    one = build_batch([(0, None, encode_record(NoOpRecord()), ())])
    with pytest.raises(CorruptRecordError, match="expected one batch of"):
        decode_batch(one + one, where="test")
    with pytest.raises(CorruptRecordError):
        decode_snapshot(one[:-1], where="test")
    gap = BatchBuilder(base_offset=5)
    gap.append(0, None, encode_record(NoOpRecord()))
    with pytest.raises(CorruptRecordError, match="starts at offset 5, but 0 records"):
        decode_snapshot(gap.build(), where="test")
