"""Kafka's read_committed consumers against a real node (`replog node`): transactions driven by
hand on the Kafka listener (transactional batches in a Produce, then WriteTxnMarkers as a
transaction coordinator sends it), read back by confluent-kafka and kafka-python with
`isolation.level=read_committed` (aborted data skipped, nothing at or past an open
transaction) and with read_uncommitted (everything)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from replog.kafka.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from replog.kafka.messages.write_txn_markers_request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)
from replog.record import build_batch
from tests.kafka.kafka_node import RunningNode, running_node
from tests.kafka.test_kafka_listener_node import ask, create_topic, wait_serving

TOPIC = "txn"
ABORTED, COMMITTED, OPEN = 4242, 4243, 4244  # producer ids, one per transaction


def produce(node: RunningNode, records: bytes) -> None:
    request = ProduceRequest(
        acks=-1,
        timeout_ms=10_000,
        topic_data=[
            TopicProduceData(
                name=TOPIC, partition_data=[PartitionProduceData(index=0, records=records)]
            )
        ],
    )
    (topic,) = ask(node, request, 9).responses
    assert topic.partition_responses[0].error_code == 0, topic.partition_responses[0]


def txn(producer_id: int, *values: str) -> bytes:
    return build_batch(
        [(int(time.time() * 1000), b"k", v.encode(), ()) for v in values],
        producer_id=producer_id,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
    )


def end(node: RunningNode, producer_id: int, *, committed: bool) -> None:
    marker = WritableTxnMarker(
        producer_id=producer_id,
        producer_epoch=0,
        transaction_result=committed,
        topics=[WritableTxnMarkerTopic(name=TOPIC, partition_indexes=[0])],
        coordinator_epoch=0,
    )
    (answer,) = ask(node, WriteTxnMarkersRequest(markers=[marker]), 1).markers
    assert answer.topics[0].partitions[0].error_code == 0


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningNode]:
    with running_node(tmp_path_factory.mktemp("read-committed"), "read-committed-test") as run:
        create_topic(run, TOPIC, 1)
        wait_serving(run)
        produce(run, txn(ABORTED, "aborted-1", "aborted-2"))
        produce(run, txn(COMMITTED, "committed-1"))
        produce(run, build_batch([(int(time.time() * 1000), b"k", b"plain-1", ())]))
        end(run, ABORTED, committed=False)
        end(run, COMMITTED, committed=True)
        produce(run, build_batch([(int(time.time() * 1000), b"k", b"plain-2", ())]))
        produce(run, txn(OPEN, "open-1"))  # still open: the LSO stays below it
        produce(run, build_batch([(int(time.time() * 1000), b"k", b"plain-3", ())]))
        yield run


EVERYTHING = ["aborted-1", "aborted-2", "committed-1", "plain-1", "plain-2", "open-1", "plain-3"]
COMMITTED_ONLY = ["committed-1", "plain-1", "plain-2"]


def confluent_values(node: RunningNode, isolation: str, expected: int) -> list[str]:
    import confluent_kafka

    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": node.kafka_address,
            "group.id": f"reader-{isolation}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
        }
    )
    values: list[str] = []
    try:
        consumer.assign([confluent_kafka.TopicPartition(TOPIC, 0, 0)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                if len(values) >= expected:
                    break  # nothing more after a quiet half second
                continue
            assert message.error() is None, message.error()
            values.append(message.value().decode())
    finally:
        consumer.close()
    return values


def test_confluent_kafka_read_committed_skips_aborted_and_stops_at_the_open_transaction(
    node: RunningNode,
) -> None:
    assert confluent_values(node, "read_committed", len(COMMITTED_ONLY)) == COMMITTED_ONLY
    assert confluent_values(node, "read_uncommitted", len(EVERYTHING)) == EVERYTHING


def test_kafka_python_read_committed_skips_aborted_and_stops_at_the_open_transaction(
    node: RunningNode,
) -> None:
    import kafka

    def values(isolation: str) -> list[str]:
        consumer: Any = kafka.KafkaConsumer(
            bootstrap_servers=node.kafka_address,
            isolation_level=isolation,
            enable_auto_commit=False,
            consumer_timeout_ms=3000,
        )
        try:
            consumer.assign([kafka.TopicPartition(TOPIC, 0)])
            consumer.seek_to_beginning()
            return [record.value.decode() for record in consumer]
        finally:
            consumer.close()

    assert values("read_committed") == COMMITTED_ONLY
    assert values("read_uncommitted") == EVERYTHING
    # The last stable offset is where read_committed's end is.
    consumer: Any = kafka.KafkaConsumer(
        bootstrap_servers=node.kafka_address, isolation_level="read_committed"
    )
    try:
        partition = kafka.TopicPartition(TOPIC, 0)
        # aborted-1..2, committed-1, plain-1, two markers, plain-2: open-1 is at offset 7
        assert consumer.end_offsets([partition]) == {partition: 7}
    finally:
        consumer.close()
