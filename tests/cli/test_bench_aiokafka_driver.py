"""`replog bench`'s aiokafka driver produces and consumes against Apache Kafka 4.4's recorded
answers (tests/kafka/recorded/aiokafka-bench-driver.json, served by the replay server): every
delivery is reported once, without error, and the consumer hands over what Kafka returned."""

from __future__ import annotations

import time

import pytest

from replog.cli.bench.drivers import RECORDS_IN_HAND, aiokafka_settings, make_driver
from tests.kafka.recorded_exchanges import RECORDED, Recording
from tests.kafka.replay_server import ReplayServer

SCENARIO = RECORDED / "aiokafka-bench-driver.json"
TOPIC = SCENARIO.stem
RECORDS = [b"record-%03d" % i for i in range(20)]  # what record_kafka_clients.py sent
PARTITIONS = 3


def test_the_driver_delivers_each_record_and_reads_kafkas_records_back() -> None:
    with ReplayServer(Recording.load(SCENARIO)) as kafka:
        driver = make_driver("aiokafka", kafka.bootstrap)
        outcomes: list[str | None] = []
        producer = driver.producer({})
        for i, value in enumerate(RECORDS):
            producer.send(TOPIC, b"k%d" % (i % PARTITIONS), value, outcomes.append)
            producer.flush(10)
        producer.close()
        consumer = driver.consumer([(TOPIC, p) for p in range(PARTITIONS)])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < len(RECORDS) and time.monotonic() < deadline:
            got += consumer.poll(0.5)
        consumer.close()
        assert kafka.misses == []
    assert outcomes == [None] * len(RECORDS)
    assert sorted(got) == RECORDS


def test_records_handed_over_faster_than_sent_wait_in_order_and_all_are_reported() -> None:
    """More records than RECORDS_IN_HAND, handed over without waiting: `send` waits for room,
    and each one is reported, in the order handed over per partition."""
    with ReplayServer(Recording.load(SCENARIO)) as kafka:
        producer = make_driver("aiokafka", kafka.bootstrap).producer({"linger.ms": "5"})
        outcomes: list[str | None] = []
        for i in range(RECORDS_IN_HAND + 500):
            producer.send(TOPIC, b"k0", b"x%d" % i, outcomes.append)
        producer.flush(30)
        producer.close()
    assert len(outcomes) == RECORDS_IN_HAND + 500
    assert set(outcomes) == {None}


def test_settings_take_aiokafkas_names() -> None:
    settings = aiokafka_settings(
        {"bootstrap.servers": "a:1,b:2", "batch.size": "65536", "enable.idempotence": "true"}
    )
    assert settings == {
        "bootstrap_servers": ["a:1", "b:2"],
        "max_batch_size": 65536,
        "enable_idempotence": True,
    }


def test_a_setting_aiokafka_lacks_fails_at_the_start() -> None:
    with ReplayServer(Recording.load(SCENARIO)) as kafka, pytest.raises(TypeError):
        make_driver("aiokafka", kafka.bootstrap).producer({"buffer.memory": "1000"})
