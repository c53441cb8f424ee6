"""Cross-checks against kafka-python's DefaultRecordBatchBuilder / DefaultRecordBatch.

kafka-python is code nobody here wrote: if both sides agree byte for byte on random records,
varints, lengths, header encoding, timestamps and the CRC are right. Its builder always writes
leader epoch 0 (Java and replog write -1), and base offsets are broker-owned, so uncompressed
batches are compared after `normalise`. Compressed batches cannot be compared byte for byte
(gzip embeds a time, frame options differ), so their decompressed records regions are.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

# kafka-python and every codec's package are dev dependencies: missing, these tests fail.
from kafka import codec as kafka_codec
from kafka.record import default_records
from record_test_support import normalise, producer_states, record_lists

from replog.record import (
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
    RECORD_BATCH_OVERHEAD,
    RecordBatch,
    build_batch,
    decompress,
    is_codec_available,
    read_header,
    stamp_batch,
)
from replog.record.varint import decode_varint

Records = list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]]
ProducerState = tuple[int, int, int, bool]

ORACLE_CODECS = [
    COMPRESSION_NONE,
    COMPRESSION_GZIP,
    COMPRESSION_SNAPPY,
    COMPRESSION_LZ4,
    COMPRESSION_ZSTD,
]


def test_every_codec_is_installed_here_and_in_kafka_python() -> None:
    assert all(is_codec_available(codec) for codec in ORACLE_CODECS)
    assert kafka_codec.has_snappy() and kafka_codec.has_lz4() and kafka_codec.has_zstd()


oracle_settings = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def oracle_build(records: Records, state: ProducerState, codec: int = COMPRESSION_NONE) -> bytes:
    producer_id, producer_epoch, base_sequence, is_transactional = state
    builder = default_records.DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=is_transactional,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=2**31 - 1,
    )
    for offset_delta, (timestamp, key, value, headers) in enumerate(records):
        metadata = builder.append(
            offset_delta, timestamp=timestamp, key=key, value=value, headers=headers
        )
        assert metadata is not None
    return bytes(builder.build())


def replog_build(records: Records, state: ProducerState, codec: int = COMPRESSION_NONE) -> bytes:
    producer_id, producer_epoch, base_sequence, is_transactional = state
    return build_batch(
        records,
        compression=codec,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        is_transactional=is_transactional,
    )


def records_region(batch: bytes) -> bytes:
    """The uncompressed records region, whatever codec the batch says it used."""
    codec = read_header(batch).compression_codec
    return decompress(codec, batch[RECORD_BATCH_OVERHEAD:])


def header_without_size_and_codec(batch: bytes) -> tuple[int, ...]:
    """Header fields that do not depend on the compressed size or codec bits."""
    header = read_header(batch)
    return (
        header.attributes & ~0x07,
        header.last_offset_delta,
        header.base_timestamp,
        header.max_timestamp,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        header.records_count,
    )


def check_records(batch: RecordBatch, records: Records, base_offset: int) -> None:
    decoded = list(batch.records())
    assert len(decoded) == len(records)
    for index, (record, (timestamp, key, value, headers)) in enumerate(
        zip(decoded, records, strict=True)
    ):
        assert record.offset == base_offset + index
        assert record.timestamp == timestamp
        assert record.key == key
        assert record.value == value
        assert record.headers == tuple(headers)


@oracle_settings
@given(record_lists, producer_states)
def test_uncompressed_bytes_match_kafka_python(records: Records, state: ProducerState) -> None:
    ours = replog_build(records, state)
    theirs = oracle_build(records, state)
    assert normalise(ours) == normalise(theirs)
    assert ours[12:16] == b"\xff\xff\xff\xff"  # Java's NO_PARTITION_LEADER_EPOCH
    # Every record's attributes byte must be 0; kafka-python's reader would not notice.
    for record_start in _record_starts(ours):
        assert ours[record_start] == 0


def _record_starts(batch: bytes) -> list[int]:
    """Byte positions of each record's attributes byte, found by walking the length prefixes."""
    starts = []
    position = RECORD_BATCH_OVERHEAD
    while position < len(batch):
        body_size, position = decode_varint(batch, position, len(batch))
        starts.append(position)
        position += body_size
    return starts


@oracle_settings
@given(record_lists, producer_states)
def test_gzip_records_match_kafka_python(records: Records, state: ProducerState) -> None:
    ours = replog_build(records, state, COMPRESSION_GZIP)
    theirs = oracle_build(records, state, COMPRESSION_GZIP)
    # kafka-python falls back to "none" when gzip does not shrink the records; replog does not.
    assert read_header(ours).compression_codec == COMPRESSION_GZIP
    assert header_without_size_and_codec(ours) == header_without_size_and_codec(theirs)
    assert records_region(ours) == records_region(theirs)
    assert records_region(ours) == replog_build(records, state)[RECORD_BATCH_OVERHEAD:]


@oracle_settings
@given(
    record_lists,
    producer_states,
    st.sampled_from(ORACLE_CODECS),
    st.integers(0, 2**62),
    st.integers(0, 2**31 - 1),
)
def test_replog_reads_kafka_python_batches(
    records: Records, state: ProducerState, codec: int, base_offset: int, leader_epoch: int
) -> None:
    built = bytearray(oracle_build(records, state, codec))
    # As a leader would: stamp offset and epoch in place, which must not disturb the CRC.
    stamp_batch(built, 0, base_offset, leader_epoch)
    batch = RecordBatch.parse(built)
    producer_id, producer_epoch, base_sequence, is_transactional = state
    assert (batch.base_offset, batch.partition_leader_epoch) == (base_offset, leader_epoch)
    assert batch.last_offset == base_offset + len(records) - 1
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (
        producer_id,
        producer_epoch,
        base_sequence,
    )
    assert batch.is_transactional == is_transactional
    assert batch.base_timestamp == records[0][0]
    assert batch.max_timestamp == max(timestamp for timestamp, *_ in records)
    check_records(batch, records, base_offset)


@oracle_settings
@given(record_lists, producer_states, st.sampled_from(ORACLE_CODECS))
def test_kafka_python_reads_replog_batches(
    records: Records, state: ProducerState, codec: int
) -> None:
    built = replog_build(records, state, codec)
    theirs = default_records.DefaultRecordBatch(bytearray(built))
    assert theirs.validate_crc()  # before iterating: kafka-python asserts that order
    decoded = list(theirs)
    assert len(decoded) == len(records)
    for index, (record, (timestamp, key, value, headers)) in enumerate(
        zip(decoded, records, strict=True)
    ):
        assert record.offset == index
        assert (record.timestamp, record.key, record.value) == (timestamp, key, value)
        assert list(record.headers) == list(headers)


@pytest.mark.parametrize("codec", ORACLE_CODECS)
def test_large_compressible_batches_agree(codec: int) -> None:
    """Many 1 KiB records: spans several lz4 blocks and exercises real compression ratios."""
    records: Records = [
        (1700000000000 + index, b"key-%d" % index, (b"%06d" % index) * 170, [("trace", b"t")])
        for index in range(300)
    ]
    state: ProducerState = (7, 1, 100, False)
    ours = replog_build(records, state, codec)
    theirs = oracle_build(records, state, codec)
    assert read_header(theirs).compression_codec == codec
    assert records_region(ours) == records_region(theirs)
    check_records(RecordBatch.parse(theirs), records, 0)
    check_records(RecordBatch.parse(ours), records, 0)
    if codec != COMPRESSION_NONE:
        assert len(ours) < len(records_region(ours)) // 2


def test_lz4_frames_are_written_as_kafka_java_writes_them() -> None:
    built = build_batch([(0, None, b"x" * 1000, [])], compression=COMPRESSION_LZ4)
    frame = built[RECORD_BATCH_OVERHEAD:]
    magic, flags, block_descriptor = struct.unpack_from("<IBB", frame)
    assert magic == 0x184D2204
    assert flags == 0x60  # version 01, independent blocks, no checksums, no content size
    assert block_descriptor == 0x40  # 64 KiB maximum block size
