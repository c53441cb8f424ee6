"""Cross-check with kafka-python (an independent implementation of the format): batches it built
go through a replog log, and what comes back, and the segment files themselves, decode with its
reader (issue #2, item 9)."""

from __future__ import annotations

from pathlib import Path

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords
from storage_helpers import (
    T0,
    files_with_suffix,
    open_log,
    read_all,
    small_config,
)

from replog.testing import ManualClock

Record = tuple[int, bytes | None, bytes | None, list[tuple[str, bytes]]]


def kafka_python_batch(
    records: list[Record], *, gzip: bool = False, producer_id: int = -1
) -> bytes:
    codec = DefaultRecordBatchBuilder.CODEC_GZIP if gzip else DefaultRecordBatchBuilder.CODEC_NONE
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    if producer_id >= 0:
        builder.set_producer_state(producer_id, 0, 100, False)
    for offset, (timestamp, key, value, headers) in enumerate(records):
        builder.append(offset, timestamp=timestamp, key=key, value=value, headers=headers)
    return bytes(builder.build())


def records_for(i: int) -> list[Record]:
    count = 1 + i % 4
    return [
        (
            T0 + 10 * i + j,
            None if j == 1 else f"key-{i}-{j}".encode(),
            b"value " * (5 + i % 7),
            [("h", bytes([i, j]))],
        )
        for j in range(count)
    ]


def decoded(
    batch: DefaultRecordBatch,
) -> list[tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes]]]]:
    return [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch]


def test_kafka_python_batches_round_trip_through_a_replog_log(tmp_path: Path) -> None:
    directory = tmp_path / "interop-0"
    log = open_log(directory, small_config(segment_bytes=2048), clock=ManualClock(T0))
    sent: list[tuple[int, list[Record]]] = []
    for i in range(30):
        records = records_for(i)
        batch = kafka_python_batch(records, gzip=i % 3 == 0, producer_id=77 if i % 5 == 0 else -1)
        info = log.append_as_leader(batch, 5)
        assert info.records_count == len(records)
        sent.append((info.first_offset, records))
    assert log.segment_count > 2
    log.close()

    reopened = open_log(directory, small_config(segment_bytes=2048), clock=ManualClock(T0))
    returned = read_all(reopened)
    assert len(returned) == len(sent)
    for i, (raw, (first_offset, records)) in enumerate(zip(returned, sent, strict=True)):
        batch = DefaultRecordBatch(raw)
        assert batch.validate_crc()
        assert batch.compression_type == (DefaultRecordBatch.CODEC_GZIP if i % 3 == 0 else 0)
        assert batch.producer_id == (77 if i % 5 == 0 else -1)
        assert (batch.base_offset, batch.leader_epoch, batch.magic) == (first_offset, 5, 2)
        assert batch.next_offset == first_offset + len(records)
        expected = [(first_offset + j, ts, k, v, h) for j, (ts, k, v, h) in enumerate(records)]
        assert decoded(batch) == expected

    # Every segment file, as a whole, is a valid Kafka record set for kafka-python's reader.
    seen = 0
    for segment_file in files_with_suffix(directory, ".log"):
        record_set = MemoryRecords(segment_file.read_bytes())
        while record_set.has_next():
            batch = record_set.next_batch()
            assert batch.validate_crc()
            assert batch.base_offset == sent[seen][0]
            seen += 1
    assert seen == len(sent)


def test_kafka_python_reads_log_append_time_batches(tmp_path: Path) -> None:
    clock = ManualClock(T0 + 5_000)
    log = open_log(
        tmp_path / "t-0", small_config(message_timestamp_type="LogAppendTime"), clock=clock
    )
    log.append_as_leader(kafka_python_batch(records_for(3)), 1)
    batch = DefaultRecordBatch(read_all(log)[0])
    assert batch.validate_crc()
    assert batch.timestamp_type == 1
    assert batch.max_timestamp == clock.now_ms
    assert [r.timestamp for r in batch] == [clock.now_ms] * 4
