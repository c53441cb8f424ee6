"""A batch over the topic's `max.message.bytes` whose records each fit (issue #52 item 2): the
sender splits it and sends the pieces in order, every record exactly once, with or without
idempotence; batches are sized to a topic limit the producer knows; a record too large on its
own still fails, naming its size and the limit. Also the split itself (`ProducerBatch.split`):
records, futures, sequences and reservation shared out in order."""

from __future__ import annotations

import asyncio
import logging

import pytest
from producer_fakes import FakeCluster
from test_producer import Made, cluster, make  # noqa: F401 - fixtures

from replog.client.accumulator import RecordAccumulator
from replog.common import TopicPartition
from replog.errors import MessageSizeTooLargeError
from replog.record import RecordBatch
from replog.record.compression import COMPRESSION_GZIP, COMPRESSION_NONE

VALUES = [b"%d" % i + b"x" * 298 for i in range(10)]  # 10 records of 300 bytes


@pytest.mark.asyncio
@pytest.mark.parametrize("idempotence", [True, False])
async def test_a_batch_over_the_topic_limit_is_split_and_every_record_lands_once(
    cluster: FakeCluster,  # noqa: F811
    make: Made,  # noqa: F811
    idempotence: bool,
    caplog: pytest.LogCaptureFixture,
) -> None:
    cluster.serves_configs = False  # the producer cannot learn the limit up front
    log = cluster.log("one")
    log.max_message_bytes = 1000
    producer = make(linger_ms=100, enable_idempotence=idempotence)
    with caplog.at_level(logging.WARNING, logger="replog.client"):
        results = await asyncio.gather(*(producer.send_nowait("one", v) for v in VALUES))
    assert [r.offset for r in results] == list(range(10))
    assert log.values() == VALUES
    assert all(len(batch) <= 1000 for batch in log.batches)
    assert producer.metrics()["batches_split"] >= 1
    assert producer.metrics()["batches_failed"] == 0
    if idempotence:  # the pieces kept the sequences the whole batch had
        assert [h.base_sequence for h in log.headers()] == [
            sum(h.records_count for h in log.headers()[:i]) for i in range(len(log.batches))
        ]
    warnings = [r.getMessage() for r in caplog.records if "splitting" in r.getMessage()]
    assert 1 <= len(warnings) <= producer.metrics()["batches_split"]
    assert "topic-partition one-0" in warnings[0] and "MESSAGE_TOO_LARGE" in warnings[0]


@pytest.mark.asyncio
async def test_a_known_topic_limit_sizes_batches_up_front(
    cluster: FakeCluster,  # noqa: F811
    make: Made,  # noqa: F811
) -> None:
    log = cluster.log("one")
    log.max_message_bytes = 1000
    producer = make(linger_ms=100)
    assert await producer.partitions_for("one") == {0}  # learns the limit, as a send would
    results = await asyncio.gather(*(producer.send_nowait("one", v) for v in VALUES))
    assert [r.offset for r in results] == list(range(10))
    assert producer.metrics()["batches_split"] == 0
    assert cluster.config_calls == 1
    assert log.values() == VALUES
    assert all(len(batch) <= 1000 for batch in log.batches)


@pytest.mark.asyncio
@pytest.mark.parametrize("idempotence", [True, False])
async def test_an_append_over_the_segment_size_is_split_and_every_record_lands_once(
    cluster: FakeCluster,  # noqa: F811
    make: Made,  # noqa: F811
    idempotence: bool,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """batch.size (1 MB by default) over a small-segment topic's segment.bytes: the broker
    refuses the append as RECORD_LIST_TOO_LARGE and the batch is split, not failed."""
    cluster.serves_configs = False  # the producer cannot learn the limit up front
    log = cluster.log("one")
    log.segment_bytes = 1000
    producer = make(linger_ms=100, enable_idempotence=idempotence)
    with caplog.at_level(logging.WARNING, logger="replog.client"):
        results = await asyncio.gather(*(producer.send_nowait("one", v) for v in VALUES))
    assert [r.offset for r in results] == list(range(10))
    assert log.values() == VALUES
    assert all(len(batch) <= 1000 for batch in log.batches)
    assert producer.metrics()["batches_split"] >= 1
    assert producer.metrics()["batches_failed"] == 0
    warnings = [r.getMessage() for r in caplog.records if "splitting" in r.getMessage()]
    assert warnings and "RECORD_LIST_TOO_LARGE" in warnings[0]


@pytest.mark.asyncio
@pytest.mark.parametrize(("max_message_bytes", "segment_bytes"), [(1000, 5000), (5000, 1000)])
async def test_the_smaller_of_max_message_bytes_and_segment_bytes_sizes_batches_up_front(
    cluster: FakeCluster,  # noqa: F811
    make: Made,  # noqa: F811
    max_message_bytes: int,
    segment_bytes: int,
) -> None:
    log = cluster.log("one")
    log.max_message_bytes, log.segment_bytes = max_message_bytes, segment_bytes
    producer = make(linger_ms=100)
    assert await producer.partitions_for("one") == {0}  # learns the limit, as a send would
    results = await asyncio.gather(*(producer.send_nowait("one", v) for v in VALUES))
    assert [r.offset for r in results] == list(range(10))
    assert producer.metrics()["batches_split"] == 0
    assert log.values() == VALUES
    assert all(len(batch) <= 1000 for batch in log.batches)


@pytest.mark.asyncio
@pytest.mark.parametrize("described", [True, False])
async def test_a_record_too_large_alone_fails_naming_its_size_and_the_limit(
    cluster: FakeCluster,  # noqa: F811
    make: Made,  # noqa: F811
    described: bool,
) -> None:
    cluster.log("one").max_message_bytes = 1000
    cluster.serves_configs = described
    producer = make(linger_ms=100)
    small = producer.send_nowait("one", b"small")
    big = producer.send_nowait("one", b"x" * 1500)
    after = producer.send_nowait("one", b"after")
    with pytest.raises(MessageSizeTooLargeError) as raised:
        await big
    assert (await small).offset == 0 and (await after).offset == 1
    message = str(raised.value)
    assert "one-0: the record is 1" in message and "max.message.bytes 1000" in message
    assert ("the smaller of max.message.bytes and segment.bytes, is 1000" in message) == described


@pytest.mark.parametrize("compression", [COMPRESSION_NONE, COMPRESSION_GZIP])
def test_split_shares_out_records_futures_sequences_and_memory(compression: int) -> None:
    tp = TopicPartition("t", 0)
    acc = RecordAccumulator(batch_size=16_384, linger_ms=0, compression=compression)
    futures = [Handle() for _ in VALUES]
    for index, (value, future) in enumerate(zip(VALUES, futures, strict=True)):
        acc.append(tp, 1_000 + index, b"k", value, (("h", b"v"),), future)
    (batch,) = acc.drain_all()
    batch.stamp(7, 1, 40)
    reserved = batch.reserved
    pieces = batch.split(1000)
    assert len(pieces) == 4 and [p.record_count for p in pieces] == [3, 3, 3, 1]
    assert all(len(p.records or b"") <= 1000 for p in pieces)
    assert {RecordBatch.parse(p.records or b"").compression_codec for p in pieces} == {compression}
    assert [p.base_sequence for p in pieces] == [40, 43, 46, 49]
    assert {(p.producer_id, p.producer_epoch) for p in pieces} == {(7, 1)}
    assert sum(p.reserved for p in pieces) == reserved
    records = [r for p in pieces for r in RecordBatch.parse(p.records or b"").records()]
    assert [(r.timestamp, r.key, r.value, r.headers) for r in records] == [
        (1_000 + i, b"k", v, (("h", b"v"),)) for i, v in enumerate(VALUES)
    ]
    for number, piece in enumerate(pieces):
        piece.complete(100 * number)
    assert [f.result[2] for f in futures] == [0, 1, 2, 100, 101, 102, 200, 201, 202, 300]
    assert batch.done  # once every piece is
    halves = pieces[0].split(10_000)  # all would fit in one: halved by count instead
    assert [h.record_count for h in halves] == [2, 1]


class Handle:
    """A record future that keeps what it was given."""

    def __init__(self) -> None:
        self.result: tuple[object, ...] = ()

    def done(self) -> bool:
        return bool(self.result)

    def set_result(self, result: object, /) -> None:
        self.result = tuple(result)  # type: ignore[arg-type]

    def set_exception(self, exception: BaseException, /) -> None:
        self.result = (exception,)


def test_a_transactional_batch_and_its_pieces_carry_the_transactional_flag() -> None:
    tp = TopicPartition("t", 0)
    acc = RecordAccumulator(batch_size=16_384, linger_ms=0)
    for index, value in enumerate(VALUES):
        acc.append(tp, 1_000 + index, b"k", value, (), Handle())
    (batch,) = acc.drain_all()  # built before the flag is set: stamping writes it
    batch.transactional = True
    batch.stamp(7, 1, 0)
    whole = RecordBatch.parse(batch.records or b"")  # parse checks the CRC
    assert whole.is_transactional and (whole.producer_id, whole.producer_epoch) == (7, 1)
    pieces = batch.split(1000)
    parsed = [RecordBatch.parse(p.records or b"") for p in pieces]
    assert all(p.is_transactional and not p.is_control for p in parsed)
