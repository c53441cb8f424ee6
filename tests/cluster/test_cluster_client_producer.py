"""The Producer on a real 3-node cluster (issue #7): round trips through the public API.

The logs are read back with the broker's own Fetch (`KafkaBrokerClient`, not the Consumer), so
a producer bug cannot hide behind a matching consumer bug.

- Every acks mode (0, 1, all) with idempotence off, and acks=all with idempotence on (the
  default), through the blocking Producer: keyed records with headers to 3 partitions. Each
  record is in its partition's log exactly once, in send order, with its key, value and
  headers; each acknowledgement names the offset that holds it (acks=0: offset -1); batches
  carry a producer id and consecutive sequences exactly when idempotence is on.
- The asyncio Producer: `await send` means delivered; `send_nowait` futures in order.
- Compressed batches (gzip) round-trip.
- An unknown topic and a missing partition fail at once, naming them; a record larger than the
  topic's `max.message.bytes` fails with the broker's MessageSizeTooLargeError while the
  records around it are delivered; records that each fit, lingering into one batch that
  would not, all land once and in order (batches sized to the described limit, or split).

How these can fail: the log comparison catches loss, duplicates, reordering and mangled keys,
values or headers; the offset check catches an acknowledgement pointing elsewhere; the header
check fails if idempotence is silently off (or on).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
from client_cluster import ClientCluster, client_cluster

from replog import Producer
from replog.aio import Producer as AsyncProducer
from replog.client.partitioner import murmur2, to_positive
from replog.client.topic_limits import TopicLimits
from replog.errors import MessageSizeTooLargeError, UnknownTopicOrPartitionError
from replog.record import RecordBatch, iter_batches
from replog.replication import messages as m
from tests.kafka_broker_clients import kafka_broker_client

pytestmark = pytest.mark.slow

PARTITIONS = 3


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClientCluster]:
    with client_cluster(tmp_path_factory.mktemp("c")) as started:
        yield started


async def _read_log(
    cluster: ClientCluster, topic: str, partition: int, at_least: int
) -> list[RecordBatch]:
    """Every batch of the partition below its high watermark, from its leader, once the
    high watermark covers `at_least` records (acks=0 and 1 answer before followers have them;
    a consumer reads only below the high watermark)."""
    address = next(iter(cluster.kafka_addresses.values()))
    async with kafka_broker_client(address) as any_broker:
        answer = await any_broker.metadata([topic])
    (found,) = [t for t in answer.topics if t.name == topic]
    leader = next(p.leader_id for p in found.partitions if p.partition_index == partition)
    deadline = time.monotonic() + 15
    async with kafka_broker_client(cluster.kafka_addresses[leader]) as client:
        while True:
            batches: list[RecordBatch] = []
            offset = 0
            while True:
                response = await client.fetch(
                    m.FetchRequest(
                        (m.FetchPartition(topic, partition, offset, 4 << 20),), max_wait_ms=0
                    )
                )
                (result,) = response.partitions
                assert result.error is None, result.error
                for batch in iter_batches(result.records):
                    batches.append(batch)
                    offset = batch.next_offset
                if offset >= result.high_watermark:
                    break
            if sum(b.records_count for b in batches) >= at_least or time.monotonic() > deadline:
                return batches
            await asyncio.sleep(0.05)


def read_log(
    cluster: ClientCluster, topic: str, partition: int, at_least: int = 0
) -> list[RecordBatch]:
    return asyncio.run(_read_log(cluster, topic, partition, at_least))


def records_of(batches: list[RecordBatch]) -> list[Any]:
    return [record for batch in batches for record in batch.records()]


@pytest.mark.parametrize(
    ("acks", "idempotence"),
    [(0, False), (1, False), ("all", False), ("all", True)],
    ids=["acks0", "acks1", "acks-all", "acks-all-idempotent"],
)
def test_round_trip_with_every_acks_mode(
    cluster: ClientCluster, acks: int | str, idempotence: bool
) -> None:
    topic = f"round-trip-{acks}-{'idempotent' if idempotence else 'plain'}"
    cluster.create_topic(topic, PARTITIONS, 3)
    count = 900
    sent: list[tuple[bytes, bytes, tuple[tuple[str, bytes], ...]]] = [
        (b"key-%d" % (i % 37), b"value-%05d" % i, (("n", b"%d" % i),)) for i in range(count)
    ]
    with Producer(
        bootstrap_servers=cluster.bootstrap,
        acks=acks,
        enable_idempotence=idempotence,
        linger_ms=5,
        batch_size=4096,
        # Without idempotence a retry may reorder when several requests are in flight (as in
        # Kafka, docs/client.md "Ordering"); one in flight is Kafka's way to keep send order.
        max_in_flight_requests_per_connection=5 if idempotence else 1,
    ) as producer:
        futures = [producer.send(topic, v, key=k, headers=list(h)) for k, v, h in sent]
        producer.flush(timeout=30)
        results = [f.get(timeout=0) for f in futures]

    expected_partition = [to_positive(murmur2(k)) % PARTITIONS for k, _, _ in sent]
    assert [r.partition for r in results] == expected_partition
    if acks == 0:
        assert {r.offset for r in results} == {-1}
    for partition in range(PARTITIONS):
        mine = [i for i, p in enumerate(expected_partition) if p == partition]
        batches = read_log(cluster, topic, partition, at_least=len(mine))
        records = records_of(batches)
        assert [(r.key, r.value, r.headers) for r in records] == [sent[i] for i in mine]
        if acks != 0:
            assert [results[i].offset for i in mine] == [r.offset for r in records]
        producer_ids = {b.producer_id for b in batches}
        if idempotence:
            assert len(producer_ids) == 1 and min(producer_ids) >= 0
            sequences = [(b.base_sequence, b.records_count) for b in batches]
            expected_sequence = 0
            for base, records_count in sequences:
                assert base == expected_sequence
                expected_sequence += records_count
        else:
            assert producer_ids == {-1}


def test_the_asyncio_producer_round_trips(cluster: ClientCluster) -> None:
    topic = "round-trip-aio"
    cluster.create_topic(topic, 1, 3)

    async def produce() -> list[int]:
        async with AsyncProducer(bootstrap_servers=cluster.bootstrap) as producer:
            first = await producer.send(topic, b"first", key=b"k")
            futures = [producer.send_nowait(topic, b"%d" % i) for i in range(500)]
            await producer.flush(timeout_ms=30_000)
            assert producer.metrics()["records_delivered"] == 501
            return [first.offset] + [f.result().offset for f in futures]

    offsets = asyncio.run(produce())
    assert offsets == list(range(501))
    values = [r.value for r in records_of(read_log(cluster, topic, 0))]
    assert values == [b"first"] + [b"%d" % i for i in range(500)]


def test_gzip_batches_round_trip(cluster: ClientCluster) -> None:
    topic = "round-trip-gzip"
    cluster.create_topic(topic, 1, 3)
    values = [b"compressible text, again and again: %d" % i for i in range(300)]
    with Producer(bootstrap_servers=cluster.bootstrap, compression_type="gzip") as producer:
        futures = [producer.send(topic, v) for v in values]
        producer.flush(timeout=30)
    assert [f.get(0).offset for f in futures] == list(range(300))
    batches = read_log(cluster, topic, 0)
    assert {b.compression_codec for b in batches} == {1}
    assert [r.value for r in records_of(batches)] == values


def test_bad_destinations_fail_at_once_naming_them(cluster: ClientCluster) -> None:
    topic = "two-partitions"
    cluster.create_topic(topic, 2, 3)
    with Producer(bootstrap_servers=cluster.bootstrap, max_block_ms=30_000) as producer:
        started = time.monotonic()
        with pytest.raises(UnknownTopicOrPartitionError, match=r"^topic 'no-such' does not exist"):
            producer.send("no-such", b"v")
        with pytest.raises(UnknownTopicOrPartitionError, match="the topic has 2 partition"):
            producer.send(topic, b"v", partition=2)
        assert time.monotonic() - started < 5


def test_a_record_over_the_topics_limit_fails_alone(cluster: ClientCluster) -> None:
    topic = "small-messages"
    cluster.create_topic(topic, 1, 3, {"max.message.bytes": "2000"})
    with Producer(bootstrap_servers=cluster.bootstrap, batch_size=1) as producer:
        before = producer.send(topic, b"small")
        too_big = producer.send(topic, b"x" * 5000)
        after = producer.send(topic, b"small again")
        producer.flush(timeout=30)
    assert before.get(0).offset == 0
    with pytest.raises(MessageSizeTooLargeError):
        too_big.get(0)
    assert after.get(0).offset == 1
    assert [r.value for r in records_of(read_log(cluster, topic, 0))] == [b"small", b"small again"]


@pytest.mark.parametrize("limit_known", [True, False], ids=["sized-up-front", "split"])
def test_records_that_fit_the_topics_limit_all_land_though_their_batch_would_not(
    cluster: ClientCluster, monkeypatch: pytest.MonkeyPatch, limit_known: bool
) -> None:
    """Issue #52: 10 records of 300 bytes on a topic of max.message.bytes=1000, with a linger
    that batches them together: every record lands once, in order. Either the producer sized
    its batches to the limit it described, or (the limit not known: the describe disabled)
    the broker refused the whole batch and the producer split it."""
    topic = f"small-batches-{'known' if limit_known else 'split'}"
    cluster.create_topic(topic, 1, 3, {"max.message.bytes": "1000"})
    if not limit_known:
        monkeypatch.setattr(TopicLimits, "ensure", _no_describe)
    values = [b"%d" % i + b"x" * 298 for i in range(10)]

    async def produce() -> tuple[list[int], dict[str, int]]:
        async with AsyncProducer(bootstrap_servers=cluster.bootstrap, linger_ms=200) as producer:
            futures = [producer.send_nowait(topic, value) for value in values]
            offsets = [(await future).offset for future in futures]
            return offsets, producer.metrics()

    offsets, metrics = asyncio.run(produce())
    assert offsets == list(range(10))
    assert (metrics["batches_split"] == 0) == limit_known
    batches = read_log(cluster, topic, 0, at_least=10)
    assert [r.value for r in records_of(batches)] == values
    assert all(batch.size_in_bytes <= 1000 for batch in batches)


async def _no_describe(self: TopicLimits, topic: str, deadline_ms: int) -> None:
    return None
