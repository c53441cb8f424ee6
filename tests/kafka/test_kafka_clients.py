"""Unmodified Kafka clients against a real three-node replog cluster (RF 3) through its Kafka
listeners: confluent-kafka (librdkafka 2.16), kafka-python, aiokafka (PyPI, dev extras), kcat
(Debian's, librdkafka 2.0.2) and kafkajs (npm), the last two installed by `client_tools`.

- Each client produces with acks=all and idempotence, and replog's own consumer reads the
  records back over gRPC: every one, in order, with its key (and headers where the client
  sends them).
- Each client but kafkajs (whose only consumer is a group member: its group is tested in
  test_kafka_groups_node.py) reads the records replog's own producer wrote, from the beginning
  and from a timestamp (ListOffsets by time, then Fetch); kafkajs looks up the offsets by time
  with its admin client.
- confluent-kafka's idempotent producer through a kill -9 of a partition leader: no
  acknowledged record lost, none written twice, each key's records in the order sent.

Consumption from committed offsets (the group APIs) is tested in test_kafka_groups_node.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import aiokafka
import confluent_kafka
import kafka
import pytest

from replog import Consumer, Producer, TopicPartition
from tests.confluent_producer import confluent_producer
from tests.eventually import wait_until
from tests.kafka.client_tools import kcat, run_kafkajs
from tests.kafka.kafka_cluster import KafkaCluster

COUNT = 20
FROM_REPLOG = "from-replog"
# The records replog's producer writes: key k<i % 3>, value replog-<i>, header n=<i>, and a
# create time a second apart, starting at T0.
T0 = (int(time.time()) - 3600) * 1000
FROM = 10  # the record a read "from a timestamp" starts at: T0 + FROM seconds
FETCH_SENT = re.compile(r"Sent FetchRequest \(v(\d+)")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    running = KafkaCluster(tmp_path_factory.mktemp("kafka-clients"))
    try:
        running.start()
        running.create_topic(FROM_REPLOG)
        producer = Producer(bootstrap_servers=running.bootstrap, acks="all")
        try:
            for i in range(COUNT):
                producer.send(
                    FROM_REPLOG,
                    f"replog-{i}".encode(),
                    key=f"k{i % 3}".encode(),
                    headers=[("n", str(i).encode())],
                    timestamp_ms=T0 + i * 1000,
                )
            producer.flush(timeout=30)
        finally:
            producer.close()
        yield running
    finally:
        running.stop()


def expected(start: int = 0) -> list[tuple[bytes, bytes, int]]:
    """(key, value, timestamp) of replog's records from offset `start`."""
    return [
        (f"k{i % 3}".encode(), f"replog-{i}".encode(), T0 + i * 1000) for i in range(start, COUNT)
    ]


def read_with_replog(cluster: KafkaCluster, topic: str, partitions: int = 1) -> list[Any]:
    """Every record of `topic` (up to its end offsets), read with replog's own consumer."""
    consumer = Consumer(bootstrap_servers=cluster.bootstrap)
    try:
        assigned = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(assigned)
        consumer.seek_to_beginning(*assigned)
        ends = consumer.end_offsets(assigned)
        read: dict[int, list[Any]] = defaultdict(list)
        deadline = time.monotonic() + 60
        while any(len(read[tp.partition]) < ends[tp] for tp in assigned):
            assert time.monotonic() < deadline, f"read {dict(read)} of {ends}"
            for tp, records in consumer.poll(timeout_ms=500).items():
                read[tp.partition] += records
        return [r for p in range(partitions) for r in read[p]]
    finally:
        consumer.close()


def assert_replog_reads(cluster: KafkaCluster, topic: str, client: str, headers: bool) -> None:
    records = read_with_replog(cluster, topic)
    assert [(r.offset, r.key, r.value) for r in records] == [
        (i, f"k{i % 3}".encode(), f"{client}-{i}".encode()) for i in range(COUNT)
    ]
    if headers:
        assert [r.headers for r in records] == [(("n", str(i).encode()),) for i in range(COUNT)]


# --- confluent-kafka ---------------------------------------------------------------------------


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def ck_consume(
    cluster: KafkaCluster, offset: int, count: int, protocol: Lines | None = None
) -> list[Any]:
    logger = logging.getLogger("confluent-kafka-consumer")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    if protocol is not None:
        logger.addHandler(protocol)
    config: dict[str, object] = {
        "bootstrap.servers": cluster.bootstrap,
        # librdkafka needs a group id for a consumer; with assign() and no commits the group is
        # never joined.
        "group.id": "unused",
        "enable.auto.commit": False,
    }
    if protocol is not None:
        config["debug"] = "protocol"
    consumer = confluent_kafka.Consumer(config, logger=logger)
    try:
        consumer.assign([confluent_kafka.TopicPartition(FROM_REPLOG, 0, offset)])
        read: list[Any] = []
        deadline = time.monotonic() + 30
        while len(read) < count:
            assert time.monotonic() < deadline, f"read {len(read)} of {count}"
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            read.append(message)
        return read
    finally:
        consumer.close()
        if protocol is not None:
            logger.removeHandler(protocol)


def test_confluent_kafka(cluster: KafkaCluster) -> None:
    topic = "from-confluent-kafka"
    cluster.create_topic(topic)
    delivered: list[Any] = []
    with confluent_producer(
        {"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True, "acks": "all"}
    ) as producer:
        for i in range(COUNT):
            producer.produce(
                topic,
                value=f"confluent-kafka-{i}",
                key=f"k{i % 3}",
                headers=[("n", str(i).encode())],
                on_delivery=lambda error, message: delivered.append((error, message.offset())),
            )
        assert producer.flush(30) == 0
    assert delivered == [(None, i) for i in range(COUNT)]
    assert_replog_reads(cluster, topic, "confluent-kafka", headers=True)

    protocol = Lines()
    beginning = ck_consume(cluster, confluent_kafka.OFFSET_BEGINNING, COUNT, protocol)
    # librdkafka 2.16 fetches by topic id (Fetch v13+), as Metadata gives it the ids.
    fetches = {m.group(1) for line in protocol.lines if (m := FETCH_SENT.search(line))}
    assert fetches and all(int(v) >= 13 for v in fetches), protocol.lines[:40]
    print(f"librdkafka {confluent_kafka.libversion()[0]} fetched with Fetch v{sorted(fetches)}")
    assert [(m.key(), m.value(), m.timestamp()[1]) for m in beginning] == expected()
    assert [m.headers() for m in beginning] == [[("n", str(i).encode())] for i in range(COUNT)]
    consumer = confluent_kafka.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "u"})
    try:
        wanted = confluent_kafka.TopicPartition(FROM_REPLOG, 0, T0 + FROM * 1000)
        (found,) = consumer.offsets_for_times([wanted], timeout=30)
    finally:
        consumer.close()
    assert found.offset == FROM
    later = ck_consume(cluster, found.offset, COUNT - FROM)
    assert [(m.key(), m.value(), m.timestamp()[1]) for m in later] == expected(FROM)


# --- kafka-python ------------------------------------------------------------------------------


def test_kafka_python(cluster: KafkaCluster) -> None:
    topic = "from-kafka-python"
    cluster.create_topic(topic)
    producer: Any = kafka.KafkaProducer(
        bootstrap_servers=cluster.bootstrap, acks="all", enable_idempotence=True
    )
    try:
        offsets = [
            producer.send(
                topic,
                value=f"kafka-python-{i}".encode(),
                key=f"k{i % 3}".encode(),
                headers=[("n", str(i).encode())],
            )
            .get(timeout=30)
            .offset
            for i in range(COUNT)
        ]
    finally:
        producer.close(timeout=10)
    assert offsets == list(range(COUNT))
    assert_replog_reads(cluster, topic, "kafka-python", headers=True)

    # kafka-python fetches with incremental fetch sessions.
    consumer: Any = kafka.KafkaConsumer(bootstrap_servers=cluster.bootstrap)
    try:
        partition = kafka.TopicPartition(FROM_REPLOG, 0)
        consumer.assign([partition])
        consumer.seek_to_beginning(partition)
        assert [(r.key, r.value, r.timestamp) for r in poll_kafka_python(consumer)] == expected()
        (found,) = consumer.offsets_for_times({partition: T0 + FROM * 1000}).values()
        assert found.offset == FROM
        consumer.seek(partition, found.offset)
        later = poll_kafka_python(consumer, COUNT - FROM)
        assert [(r.key, r.value, r.timestamp) for r in later] == expected(FROM)
        # The reads went through an incremental session (the seek was an incremental change).
        sessions = [h.next_metadata for h in consumer._fetcher._session_handlers.values()]
        assert any(s.session_id > 0 and s.epoch > 1 for s in sessions), sessions
    finally:
        consumer.close()


def poll_kafka_python(consumer: Any, count: int = COUNT) -> list[Any]:
    read: list[Any] = []
    deadline = time.monotonic() + 30
    while len(read) < count:
        assert time.monotonic() < deadline, f"read {len(read)} of {count}"
        for records in consumer.poll(timeout_ms=500).values():
            read += records
    return read


# --- aiokafka ----------------------------------------------------------------------------------


def test_aiokafka(cluster: KafkaCluster) -> None:
    topic = "from-aiokafka"
    cluster.create_topic(topic)

    async def run() -> None:
        producer = aiokafka.AIOKafkaProducer(
            bootstrap_servers=cluster.bootstrap, acks="all", enable_idempotence=True
        )
        await producer.start()
        try:
            sent = [
                await producer.send_and_wait(
                    topic,
                    f"aiokafka-{i}".encode(),
                    key=f"k{i % 3}".encode(),
                    headers=[("n", str(i).encode())],
                )
                for i in range(COUNT)
            ]
        finally:
            await producer.stop()
        assert [m.offset for m in sent] == list(range(COUNT))

        consumer = aiokafka.AIOKafkaConsumer(
            bootstrap_servers=cluster.bootstrap, enable_auto_commit=False
        )
        await consumer.start()
        try:
            partition = aiokafka.TopicPartition(FROM_REPLOG, 0)
            consumer.assign([partition])
            await consumer.seek_to_beginning(partition)
            assert await get_aiokafka(consumer, COUNT) == expected()
            (found,) = (await consumer.offsets_for_times({partition: T0 + FROM * 1000})).values()
            assert found.offset == FROM
            consumer.seek(partition, found.offset)
            assert await get_aiokafka(consumer, COUNT - FROM) == expected(FROM)
        finally:
            await consumer.stop()

    asyncio.run(run())
    assert_replog_reads(cluster, topic, "aiokafka", headers=True)


async def get_aiokafka(consumer: Any, count: int) -> list[tuple[bytes, bytes, int]]:
    read: list[tuple[bytes, bytes, int]] = []
    async with asyncio.timeout(30):
        while len(read) < count:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                read += [(r.key, r.value, r.timestamp) for r in records]
    return read


# --- kcat --------------------------------------------------------------------------------------


def test_kcat(cluster: KafkaCluster) -> None:
    tool = kcat()
    topic = "from-kcat"
    cluster.create_topic(topic)
    lines = "".join(f"k{i % 3}:kcat-{i}\n" for i in range(COUNT))
    tool.run(
        "-b",
        cluster.bootstrap,
        "-P",
        "-t",
        topic,
        "-K",
        ":",
        "-X",
        "enable.idempotence=true",
        "-X",
        "acks=all",
        stdin=lines,
    )
    assert_replog_reads(cluster, topic, "kcat", headers=False)

    def consume(offset: str) -> list[tuple[bytes, bytes, int]]:
        out = tool.run(
            "-b", cluster.bootstrap, "-C", "-t", FROM_REPLOG, "-p", "0", "-o", offset, "-e",
            "-q", "-f", "%k %s %T\\n",
        )  # fmt: skip
        read = [line.split(" ") for line in out.splitlines()]
        return [(k.encode(), v.encode(), int(t)) for k, v, t in read]

    assert consume("beginning") == expected()
    assert consume(f"s@{T0 + FROM * 1000}") == expected(FROM)


# --- kafkajs -----------------------------------------------------------------------------------


def test_kafkajs(cluster: KafkaCluster) -> None:
    topic = "from-kafkajs"
    cluster.create_topic(topic)
    broker = cluster.bootstrap.split(",")[0]
    produced = run_kafkajs(broker, "produce", topic, str(COUNT))
    assert produced["offsets"] == list(range(COUNT))
    assert_replog_reads(cluster, topic, "kafkajs", headers=True)
    offsets = run_kafkajs(broker, "offsets", FROM_REPLOG, str(T0 + FROM * 1000))
    assert [(o["partition"], o["low"], o["high"]) for o in offsets["ends"]] == [
        (0, "0", str(COUNT))
    ]
    assert offsets["byTime"] == [{"partition": 0, "offset": str(FROM)}]


# --- kill -9 of a partition leader under confluent-kafka's idempotent producer -----------------


class Stream:
    """confluent-kafka's idempotent producer sending key:sequence values on `keys` keys from a
    thread; `acked` holds the acknowledged (key, sequence)s in order of acknowledgement."""

    def __init__(self, cluster: KafkaCluster, topic: str, keys: int) -> None:
        self._ending = contextlib.ExitStack()
        self.producer = self._ending.enter_context(
            confluent_producer(
                {
                    "bootstrap.servers": cluster.bootstrap,
                    "enable.idempotence": True,
                    "acks": "all",
                    "linger.ms": 5,
                }
            )
        )
        self.topic = topic
        self.keys = keys
        self.acked: list[tuple[str, int]] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _delivered(self, error: Any, message: Any) -> None:
        if error is not None:
            self.errors.append(str(error))
            return
        key, sequence = message.value().decode().split(":")
        self.acked.append((key, int(sequence)))

    def _run(self) -> None:
        sequence = 0
        while not self._stop.is_set():
            key = f"k{sequence % self.keys}"
            try:
                self.producer.produce(
                    self.topic, value=f"{key}:{sequence}", key=key, on_delivery=self._delivered
                )
                sequence += 1
            except BufferError:
                pass
            self.producer.poll(0.001 if sequence % 50 else 0.01)

    def wait_acks(self, more: int, what: str, timeout_s: float = 60) -> None:
        target = len(self.acked) + more
        wait_until(
            lambda: len(self.acked) >= target or bool(self.errors),
            f"{more} more acknowledged records {what}",
            timeout_s=timeout_s,
        )
        assert not self.errors, self.errors[:5]

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        with self._ending:
            assert self.producer.flush(60) == 0, "records still unacknowledged after 60 s"
        assert not self.errors, self.errors[:5]


def test_confluent_kafka_idempotent_producer_through_kill_9_of_the_leader(
    cluster: KafkaCluster,
) -> None:
    topic, partitions, keys = "kill9", 3, 6
    cluster.create_topic(topic, partitions)
    stream = Stream(cluster, topic, keys)
    try:
        stream.wait_acks(300, "before the kill")
        victim = cluster.leaders(topic, partitions)[0]
        assert victim is not None
        cluster.kill(victim)
        wait_until(
            lambda: cluster.leaders(topic, partitions)[0] not in (None, victim),
            f"a new leader of {topic}-0 after kill -9 of node {victim}",
            timeout_s=30,
        )
        stream.wait_acks(300, "after the failover")
    finally:
        stream.stop()
    log = read_with_replog(cluster, topic, partitions)
    written = [tuple(r.value.decode().split(":")) for r in log]
    in_log = [(key, int(sequence)) for key, sequence in written]
    assert len(set(in_log)) == len(in_log), "a record was written twice"
    assert set(stream.acked) <= set(in_log), "an acknowledged record is missing"
    for key in {k for k, _ in in_log}:
        sequences = [s for k, s in in_log if k == key]
        assert sequences == sorted(sequences), f"records of {key} out of order"
    print(f"kill -9 of node {victim}: {len(stream.acked)} acknowledged, {len(in_log)} in the log")
