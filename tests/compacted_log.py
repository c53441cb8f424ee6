"""A compacted partition after a cleaning pass, and a fake leader serving it: for the tests of
what reads compacted topics (replog's consumer, the Spark source, Kafka's clients).

`cleaned_log` builds a real `Log` in a directory, appends batches of several records over a
few keys (one of them an idempotent producer's, every record of it superseded later), cleans it
with the storage layer's pass (`clean_whole_log`, which runs one over any log) and keeps its
batches as a leader would serve them: sparse batches (fewer records than offsets), an empty one
(the producer's last batch), gaps between offsets. `sparse_batch` rewrites one batch with the
cleaner's own filter, keeping the records asked for. `leader_fetch` answers a Fetch from those
batches, a few per answer, from the fetch offset asked for, as a leader does.
`kafka_python_entries` and `confluent_entries` read t-0 with Kafka's clients.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from replog.kafka.messages.fetch_request import FetchRequest
from replog.kafka.messages.fetch_response import (
    FetchableTopicResponse,
    FetchResponse,
    PartitionData,
)
from replog.kafka.protocol.codec import Message
from replog.record import RecordBatch, build_batch
from replog.record.header import read_header
from replog.storage import Log, LogConfig
from replog.storage.cleaner.batch_filter import BatchFilter, ProducerLastBatch
from replog.storage.cleaner.log_cleaning import clean_log
from replog.storage.cleaner.offset_map import OffsetMap
from replog.storage.cleaner.transactions import CleanedTransactions

T0 = 1_700_000_000_000
HOUR = 3_600_000
PRODUCER_ID = 7
Entry = tuple[int, bytes | None, bytes | None]  # offset, key, value


@dataclass(frozen=True)
class CleanedLog:
    batches: list[bytes]  # every batch of the log from offset 0, in order
    entries: list[Entry]  # the records the log holds, in offset order
    end_offset: int  # the log end offset (also its high watermark)

    @property
    def sparse(self) -> list[bytes]:
        """The batches holding fewer records than offsets (possibly none)."""
        return [b for b in self.batches if _count(b) != read_header(b).last_offset_delta + 1]

    def answer_from(self, position: int, batches: int) -> bytes:
        """Up to `batches` whole batches holding offsets at or after `position`."""
        found = [b for b in self.batches if read_header(b).next_offset > position]
        return b"".join(found[:batches])


def _count(batch: bytes) -> int:
    return read_header(batch).records_count


def cleaned_log(directory: Path) -> CleanedLog:
    """The log of module docstring, cleaned, closed, and read back."""
    config = LogConfig(segment_bytes=700, index_interval_bytes=100, cleanup_policy="compact")
    log = Log.open(str(directory), config)
    try:
        producer_last = -1
        for round_ in range(12):
            if round_ == 3:  # the producer's only batch: each of its keys written again later
                info = log.append_as_leader(
                    build_batch(
                        [(T0, b"k0", b"p0", ()), (T0, b"k1", b"p1", ())],
                        producer_id=PRODUCER_ID,
                        producer_epoch=0,
                        base_sequence=0,
                    ),
                    0,
                )
                producer_last = info.last_offset
            records = [
                (T0 + round_, f"k{(round_ * 3 + i) % 13}".encode(), _value(round_, i), ())
                for i in range(4)
            ]
            log.append_as_leader(build_batch(records), 0)
        log.high_watermark = log.log_end_offset
        clean_whole_log(log, last_batches={PRODUCER_ID: ProducerLastBatch(producer_last, 0)})
        batches = [bytes(batch) for _, batch in log.read_batches(0)]
        end_offset = log.log_end_offset
    finally:
        log.close()
    entries = [
        (record.offset, record.key, record.value)
        for batch in batches
        for record in RecordBatch.parse(batch, sparse=True).records()
    ]
    return CleanedLog(batches, entries, end_offset)


def clean_whole_log(log: Log, **options: Any) -> None:
    """One pass over all of `log` a cleaner may clean: below its active segment and its high
    watermark, at time T0, tombstones kept an hour."""
    clean_log(
        log,
        OffsetMap(24 * 1000),
        first_dirty=0,
        first_uncleanable=min(log.active_segment.base_offset, log.high_watermark),
        now_ms=T0,
        delete_retention_ms=HOUR,
        **options,
    )


def sparse_batch(values: list[bytes | None], kept: list[bool], **options: Any) -> bytes:
    """A batch of `values` (key k<i>) rewritten by the log cleaner's filter keeping the
    records `kept` says (the others superseded by a later offset of their key)."""
    offsets = OffsetMap(24 * (2 * len(values) + 8))  # the map fills to 0.9 of its slots
    for i, keep in enumerate(kept):
        offsets.put(b"k%d" % i, i if keep else 1 << 40)
    cleaner = BatchFilter(
        offsets,
        now_ms=T0,
        delete_retention_ms=1 << 40,
        last_batches={},
        transactions=CleanedTransactions(),
    )
    dense = build_batch(
        [(T0 + i, b"k%d" % i, value, ()) for i, value in enumerate(values)], **options
    )
    cleaned = cleaner.filter(dense)
    assert cleaned is not None
    return cleaned


def _value(round_: int, index: int) -> bytes | None:
    return None if (round_ + index) % 7 == 6 else f"v{round_}.{index}".encode()


def leader_fetch(
    log: CleanedLog, topic: str = "t", batches: int = 2
) -> Callable[[Message, int], FetchResponse]:
    """A `FakeKafkaBroker` Fetch answer serving `log` as partition 0 of `topic`: the first
    `batches` batches at or after the fetch offset of each request."""

    def answer(request: Message, version: int) -> FetchResponse:
        assert isinstance(request, FetchRequest)
        partitions = []
        for asked in request.topics:
            for partition in asked.partitions:
                data = log.answer_from(partition.fetch_offset, batches)
                partitions.append(
                    PartitionData(
                        partition_index=partition.partition,
                        high_watermark=log.end_offset,
                        last_stable_offset=log.end_offset,
                        log_start_offset=0,
                        records=data,
                    )
                )
        return FetchResponse(
            responses=[
                FetchableTopicResponse(topic=topic, topic_id=t.topic_id, partitions=partitions)
                for t in request.topics
            ]
        )

    return answer


def kafka_python_entries(address: str, end_offset: int, expected: int) -> tuple[list[Entry], int]:
    """What kafka-python's consumer of t-0 reads from offset 0 (until it has `expected`
    records and its position is `end_offset`, or 4 s), and its position."""
    import kafka

    consumer = kafka.KafkaConsumer(bootstrap_servers=address, enable_auto_commit=False)
    try:
        tp = kafka.TopicPartition("t", 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        found: list[Entry] = []
        for _ in range(40):
            for records in consumer.poll(timeout_ms=100).values():
                found += [(r.offset, r.key, r.value) for r in records]
            if consumer.position(tp) == end_offset and len(found) >= expected:
                break
        return found, consumer.position(tp)
    finally:
        consumer.close()


def confluent_entries(address: str, end_offset: int, expected: int) -> tuple[list[Entry], int]:
    """`kafka_python_entries` for confluent-kafka's consumer (10 s at most)."""
    import confluent_kafka

    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": address, "group.id": "g", "enable.auto.commit": False}
    )
    try:
        consumer.assign([confluent_kafka.TopicPartition("t", 0, 0)])
        found: list[Entry] = []
        position = -1
        for _ in range(100):
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                found.append((message.offset(), message.key(), message.value()))
            position = consumer.position([confluent_kafka.TopicPartition("t", 0)])[0].offset
            if position == end_offset and len(found) >= expected:
                break
        return found, position
    finally:
        consumer.close()
