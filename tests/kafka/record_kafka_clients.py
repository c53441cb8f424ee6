"""Record kafka-python's and confluent-kafka's exchanges with a real Apache Kafka cluster, for
tests/kafka/recorded/ (the replay tests, test_kafka_recorded.py, read them).

Usage (run by hand when Kafka or a client version changes; the tests never start a JVM):

    KAFKA_BASE_PORT=48092 KAFKA_CLUSTER_DIR=/tmp/kafka-rec bench/kafka/kafka.sh start
    .venv/bin/python tests/kafka/record_kafka_clients.py --bootstrap 127.0.0.1:48092,...
    KAFKA_BASE_PORT=48092 KAFKA_CLUSTER_DIR=/tmp/kafka-rec bench/kafka/kafka.sh stop

Each scenario goes through a recording proxy (recording_proxy.py) on a topic named as the
scenario (deleted first if an earlier run left it):
- `kafka-python-produce-consume`: an idempotent acks=all producer sends RECORDS records to a
  topic of 3 partitions (RF 3), then a classic-group consumer reads them and commits;
- `kafka-python-admin`: create topics, create partitions, describe cluster, describe and alter
  configs, delete records, list / describe groups and their offsets, list offsets, list
  reassignments, elect leaders, describe the quorum, delete groups, delete topics;
- `confluent-kafka-consumer-group`: librdkafka produces RECORDS records and a consumer of the
  consumer group protocol (KIP-848: ConsumerGroupHeartbeat) reads and commits them;
- `aiokafka-bench-driver`: `replog bench`'s aiokafka driver produces RECORDS records (one per
  request) and reads them back from its assigned partitions.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.kafka.recorded_exchanges import RECORDED  # noqa: E402
from tests.kafka.recording_proxy import RecordingProxy  # noqa: E402

RECORDS = 20
PARTITIONS = 3
VALUE = b"v" * 100


def values() -> list[bytes]:
    return [b"record-%03d" % i for i in range(RECORDS)]


def kafka_python_produce_consume(bootstrap: str, topic: str) -> None:
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, PARTITIONS, 3)])
    admin.close()
    time.sleep(1)  # the new partitions' leaders reach every broker's metadata
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, linger_ms=0
    )
    for i, value in enumerate(values()):
        producer.send(topic, key=b"k%d" % (i % PARTITIONS), value=value).get(timeout=30)
    producer.close(timeout=10)
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=f"{topic}-group",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < RECORDS and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=1000).values():
            got += [record.value for record in records]
    consumer.commit()
    consumer.close()
    if sorted(got) != values():
        raise RuntimeError(f"kafka-python read {len(got)} records back, not the {RECORDS} sent")


def kafka_python_admin(bootstrap: str, topic: str) -> None:
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
    from kafka.admin import (
        ConfigResource,
        ConfigResourceType,
        NewPartitions,
        NewTopic,
    )
    from kafka.protocol.admin.topics import ElectionType
    from kafka.structs import TopicPartition

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, 1, 3)])
    time.sleep(1)
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for value in values()[:5]:
        producer.send(topic, value=value, partition=0).get(timeout=30)
    producer.close(timeout=10)
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=f"{topic}-group",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    deadline = time.monotonic() + 60
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(timeout_ms=1000)
    consumer.commit()
    consumer.close()
    admin.create_partitions({topic: NewPartitions(2)})
    admin.describe_cluster()
    admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    admin.alter_configs(
        [ConfigResource(ConfigResourceType.TOPIC, topic, configs={"retention.ms": "3600000"})]
    )
    admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "1")])
    admin.delete_records({TopicPartition(topic, 0): 2})
    admin.list_groups()
    admin.describe_groups([f"{topic}-group"])
    admin.list_group_offsets(f"{topic}-group")
    admin.list_partition_offsets({TopicPartition(topic, 0): -1, TopicPartition(topic, 1): -2})
    admin.list_partition_reassignments()
    admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0)], raise_errors=False)
    admin.describe_metadata_quorum()
    admin.delete_groups([f"{topic}-group"])
    admin.delete_topics([topic])
    admin.close()


def confluent_consumer_group(bootstrap: str, topic: str) -> None:
    import confluent_kafka
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.cimpl import NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, 3)]).values():
        future.result(30)
    time.sleep(1)
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True}
    )
    for i, value in enumerate(values()):
        producer.produce(topic, value, b"k%d" % (i % PARTITIONS))
    if producer.flush(30) != 0:
        raise RuntimeError("confluent-kafka did not deliver every record within 30 s")
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"{topic}-group",
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < RECORDS and time.monotonic() < deadline:
        message = consumer.poll(1.0)
        data = None if message is None or message.error() else message.value()
        if data is not None:
            got.append(data)
    consumer.commit(asynchronous=False)
    consumer.close()
    if sorted(got) != values():
        raise RuntimeError(f"confluent-kafka read {len(got)} records back, not {RECORDS}")


def aiokafka_bench_driver(bootstrap: str, topic: str) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    from replog.cli.bench.drivers import make_driver

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, PARTITIONS, 3)])
    admin.close()
    time.sleep(1)
    driver = make_driver("aiokafka", bootstrap)
    outcomes: list[str | None] = []
    producer = driver.producer({})
    for i, value in enumerate(values()):
        producer.send(topic, b"k%d" % (i % PARTITIONS), value, outcomes.append)
        producer.flush(30)  # one record per request: the same requests every run
    producer.close()
    consumer = driver.consumer([(topic, p) for p in range(PARTITIONS)])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < RECORDS and time.monotonic() < deadline:
        got += consumer.poll(1.0)
    consumer.close()
    if outcomes != [None] * RECORDS or sorted(got) != values():
        raise RuntimeError(f"aiokafka: {outcomes.count(None)} delivered, {len(got)} read back")


SCENARIOS: dict[str, tuple[str, Callable[[str, str], None]]] = {
    "kafka-python-produce-consume": ("kafka-python", kafka_python_produce_consume),
    "kafka-python-admin": ("kafka-python", kafka_python_admin),
    "confluent-kafka-consumer-group": ("confluent-kafka", confluent_consumer_group),
    "aiokafka-bench-driver": ("aiokafka", aiokafka_bench_driver),
}


def remove_topics(bootstrap: str, names: Sequence[str]) -> None:
    """Delete what an earlier run left (straight to Kafka: not part of any recording)."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    left = [name for name in names if name in admin.list_topics()]
    if left:
        admin.delete_topics(left)
        time.sleep(2)
    admin.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", required=True, help="Kafka's brokers, host:port,...")
    parser.add_argument("--out", type=Path, default=RECORDED)
    parser.add_argument("--only", action="append", choices=sorted(SCENARIOS))
    parser.add_argument("--kafka-version", default="4.4.0")
    args = parser.parse_args(argv)
    remove_topics(args.bootstrap, args.only or list(SCENARIOS))
    proxy = RecordingProxy(args.bootstrap.split(","), kafka_version=args.kafka_version)
    try:
        for name in args.only or SCENARIOS:
            package, run = SCENARIOS[name]
            run(proxy.bootstrap, name)
            time.sleep(0.5)  # the clients' last answers reach the proxy
            client = f"{package} {importlib.metadata.version(package)}"
            recording = proxy.take(name, client=client)
            recording.save(args.out / f"{name}.json")
            print(f"{name}: {len(recording.exchanges)} exchanges -> {args.out}/{name}.json")
    finally:
        proxy.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
