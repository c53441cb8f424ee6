"""Benchmark drivers: the client libraries a run produces and consumes through.

- `replog`: replog's own Python client (`replog.Producer`, `replog.Consumer`), over Kafka's
  protocol like the others.
- `confluent-kafka`: Confluent's Python client (librdkafka, C), over Kafka's protocol; it drives
  Apache Kafka and replog's Kafka listener alike, so those two compare with the same client.
- `kafka-python`: the pure-Python Kafka client, over Kafka's protocol (a clients run's third
  client on replog's cluster; it reports no produce request count: 0).
- `aiokafka`: the asyncio Kafka client, over Kafka's protocol, on an event loop of its own in a
  daemon thread: the run's thread hands it records in batches (one wake-up of the loop per
  batch, not per record) and waits only while RECORDS_IN_HAND records are still waiting to be
  appended to its own buffer. It reports no produce request count either: 0.
- `etcd`: admin only (a metadata run against etcd): each CreateTopics-sized request is one
  etcd write over gRPC, a Put of one key per topic (a Txn of them for several topics), the
  value `ETCD_BYTES_PER_PARTITION` bytes per partition and one more share for the topic,
  about what the topic's metadata records hold.

Rules: a driver builds producers and consumers with acks=all and the workload's
`producerConfig` on top (a setting a client does not know is its own ConfigError/KafkaException
at the start of the run). Consumers are assigned their partitions (no group protocol: the
benchmark measures the data path) and read from the earliest offset of the run's fresh topics.
A delivery callback reports `None` or the error's text; `send` may block while the client's
buffer is full (that time counts in the record's latency, as in Kafka's perf tools).
A transactional run's producers (`Driver.transactional_producer`: replog's and
confluent-kafka's, the two the systems drive) get a `transactional.id`, call
init_transactions when built, and begin and commit through their client's own calls; its
consumers read with isolation.level read_committed.
"""

from __future__ import annotations

import asyncio
import collections
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from replog.cli.bench.workload import CLIENTS

DeliveryCallback = Callable[[str | None], None]
CONSUME_BATCH = 1000  # records a consumer's poll returns at most
STATS_INTERVAL_MS = 500  # librdkafka's statistics, read for the produce request count
REPLICATION_FACTOR = 3  # every topic of every system (systems.py), a metadata run's too
TOPIC_CONFIGS = {"min.insync.replicas": "2"}
TRANSACTION_INIT_S = 60.0  # init_transactions: finding the coordinator, a fresh cluster's too


def _isolation(read_committed: bool) -> dict[str, str]:
    """A transactional run's consumer setting; other runs keep each client's default."""
    return {"isolation.level": "read_committed"} if read_committed else {}


class BenchProducer(Protocol):
    def send(self, topic: str, key: bytes | None, value: bytes, done: DeliveryCallback) -> None: ...
    def service(self) -> None:
        """Run due delivery callbacks (clients that run them on the caller's thread)."""

    def flush(self, timeout_s: float) -> None: ...
    def requests(self) -> int:
        """Produce requests sent so far (each client's own count)."""

    def close(self) -> None: ...


class TransactionalProducer(BenchProducer, Protocol):
    def begin_transaction(self) -> None: ...
    def commit_transaction(self, timeout_s: float) -> None:
        """Commit the open transaction: every record sent in it delivered, then EndTxn."""


class BenchAdmin(Protocol):
    def create_topics(self, names: Sequence[str], partitions: int) -> None:
        """Create `names` (replication factor 3, min.insync.replicas=2) in one request;
        raises if any failed."""

    def close(self) -> None: ...


class BenchConsumer(Protocol):
    def poll(self, timeout_s: float) -> list[bytes]:
        """The values of the records that arrived (empty after `timeout_s` without any)."""

    def close(self) -> None: ...


DRIVERS = (*CLIENTS, "etcd")  # CLIENTS: the drivers with producers and consumers
ETCD_BYTES_PER_PARTITION = 100  # an etcd "topic": the size of a partition's metadata record


@dataclass(frozen=True, slots=True)
class Driver:
    """A client library (`DRIVERS`) bound to a system's bootstrap servers."""

    name: str
    bootstrap_servers: str

    def producer(self, config: Mapping[str, str]) -> BenchProducer:
        settings = {"bootstrap.servers": self.bootstrap_servers, "acks": "all", **config}
        if self.name == "replog":
            return _ReplogProducer(settings)
        if self.name == "kafka-python":
            return _KafkaPythonProducer(settings)
        if self.name == "aiokafka":
            return _AioKafkaProducer(settings)
        return _ConfluentProducer(settings)

    def transactional_producer(
        self, config: Mapping[str, str], transactional_id: str
    ) -> TransactionalProducer:
        """A producer with `transactional_id`, its transactions initialized."""
        settings = {
            "bootstrap.servers": self.bootstrap_servers,
            "acks": "all",
            **config,
            "transactional.id": transactional_id,
        }
        if self.name == "replog":
            return _ReplogProducer(settings, transactional=True)
        if self.name == "confluent-kafka":
            return _ConfluentProducer(settings, transactional=True)
        raise ValueError(
            f"driver {self.name!r}: no transactional producer (replog, confluent-kafka)"
        )

    def consumer(
        self, partitions: Sequence[tuple[str, int]], *, read_committed: bool = False
    ) -> BenchConsumer:
        if self.name == "replog":
            return _ReplogConsumer(self.bootstrap_servers, partitions, read_committed)
        if read_committed and self.name != "confluent-kafka":
            raise ValueError(f"driver {self.name!r}: no read_committed consumer in the harness")
        if self.name == "kafka-python":
            return _KafkaPythonConsumer(self.bootstrap_servers, partitions)
        if self.name == "aiokafka":
            return _AioKafkaConsumer(self.bootstrap_servers, partitions)
        return _ConfluentConsumer(self.bootstrap_servers, partitions, read_committed)

    def admin(self) -> BenchAdmin:
        if self.name == "replog":
            return _ReplogAdmin(self.bootstrap_servers)
        if self.name == "etcd":
            return _EtcdAdmin(self.bootstrap_servers)
        return _ConfluentAdmin(self.bootstrap_servers)


def make_driver(name: str, bootstrap_servers: str) -> Driver:
    if name not in DRIVERS:
        raise ValueError(f"unknown driver {name!r} (known: {', '.join(DRIVERS)})")
    return Driver(name, bootstrap_servers)


# --- replog's own client ------------------------------------------------------------------------


class _ReplogProducer:
    def __init__(self, config: dict[str, str], transactional: bool = False) -> None:
        from replog.client.sync_producer import Producer

        self._producer = Producer(config)
        if transactional:
            self._producer.init_transactions()

    def begin_transaction(self) -> None:
        self._producer.begin_transaction()

    def commit_transaction(self, timeout_s: float) -> None:
        self._producer.commit_transaction()  # bounded by the client's max.block.ms

    def send(self, topic: str, key: bytes | None, value: bytes, done: DeliveryCallback) -> None:
        self._producer.send(topic, value=value, key=key).add_both(_Delivered(done))

    def service(self) -> None:
        pass  # callbacks run on the client's own loop thread

    def flush(self, timeout_s: float) -> None:
        self._producer.flush(timeout_s)

    def requests(self) -> int:
        return self._producer.metrics()["requests"]

    def close(self) -> None:
        self._producer.close(5)


class _Delivered:
    """A record's delivery callback for the Python clients' `add_both` (replog's and
    kafka-python's futures): one object per record, as a user's callback would be; a pair of
    closures would be four, each walked by the garbage collector while the record waits."""

    __slots__ = ("done",)

    def __init__(self, done: DeliveryCallback) -> None:
        self.done = done

    def __call__(self, outcome: object) -> None:
        if isinstance(outcome, BaseException):
            self.done(f"{type(outcome).__name__}: {outcome}")
        else:
            self.done(None)


class _ReplogConsumer:
    def __init__(
        self,
        bootstrap_servers: str,
        partitions: Sequence[tuple[str, int]],
        read_committed: bool = False,
    ) -> None:
        from replog.client.records import TopicPartition
        from replog.client.sync_consumer import Consumer

        self._consumer = Consumer(
            config={
                "bootstrap.servers": bootstrap_servers,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                **_isolation(read_committed),
            }
        )
        self._consumer.assign([TopicPartition(topic, p) for topic, p in partitions])

    def poll(self, timeout_s: float) -> list[bytes]:
        # At most CONSUME_BATCH records a poll, as the other clients' drivers take.
        batches = self._consumer.poll(timeout_ms=int(timeout_s * 1000), max_records=CONSUME_BATCH)
        return [r.value for records in batches.values() for r in records if r.value is not None]

    def close(self) -> None:
        self._consumer.close()


class _ReplogAdmin:
    """replog's admin client answers once every broker shows the new topics (its
    create_topics waits for that), later than Kafka's CreateTopics answer: the replog-kafka
    system is the like-for-like comparison."""

    def __init__(self, bootstrap_servers: str) -> None:
        from replog.client.sync_admin import Admin

        self._admin = Admin({"bootstrap.servers": bootstrap_servers})

    def create_topics(self, names: Sequence[str], partitions: int) -> None:
        from replog.client.sync_admin import NewTopic

        self._admin.create_topics(
            [NewTopic(n, partitions, REPLICATION_FACTOR, TOPIC_CONFIGS) for n in names]
        )

    def close(self) -> None:
        self._admin.close()


# --- confluent-kafka (librdkafka) -----------------------------------------------------------------


class _ConfluentProducer:
    def __init__(self, config: dict[str, str], transactional: bool = False) -> None:
        import confluent_kafka

        self._stats: dict[str, Any] = {}
        self._producer = confluent_kafka.Producer(
            {"statistics.interval.ms": STATS_INTERVAL_MS, **config, "stats_cb": self._on_stats}
        )
        if transactional:
            self._producer.init_transactions(TRANSACTION_INIT_S)

    def begin_transaction(self) -> None:
        self._producer.begin_transaction()

    def commit_transaction(self, timeout_s: float) -> None:
        self._producer.commit_transaction(timeout_s)  # flushes, serving delivery callbacks

    def _on_stats(self, text: str) -> None:
        import json

        self._stats = json.loads(text)

    def send(self, topic: str, key: bytes | None, value: bytes, done: DeliveryCallback) -> None:
        def delivered(error: Any, _message: Any) -> None:
            done(None if error is None else str(error))

        while True:
            try:
                self._producer.produce(topic, value, key, on_delivery=delivered)
                return
            except BufferError:  # librdkafka's queue is full: serve callbacks, then retry
                self._producer.poll(0.01)

    def service(self) -> None:
        self._producer.poll(0)

    def flush(self, timeout_s: float) -> None:
        self._producer.flush(timeout_s)

    def requests(self) -> int:
        """From librdkafka's statistics (every broker's "req" counters): the first report
        taken after this call, so that it counts every request sent before it."""
        import time

        self._stats = {}
        deadline = time.monotonic() + 2 * STATS_INTERVAL_MS / 1000
        while not self._stats and time.monotonic() < deadline:
            self._producer.poll(0.05)
        brokers = self._stats.get("brokers", {}).values()
        return sum(int(b.get("req", {}).get("Produce", 0)) for b in brokers)

    def close(self) -> None:
        self._producer.flush(5)


class _ConfluentAdmin:
    def __init__(self, bootstrap_servers: str) -> None:
        from confluent_kafka.admin import AdminClient

        self._admin = AdminClient({"bootstrap.servers": bootstrap_servers})

    def create_topics(self, names: Sequence[str], partitions: int) -> None:
        from confluent_kafka.cimpl import NewTopic  # where its type stubs declare it

        futures = self._admin.create_topics(
            [NewTopic(n, partitions, REPLICATION_FACTOR, config=TOPIC_CONFIGS) for n in names]
        )
        for future in futures.values():
            future.result()

    def close(self) -> None:
        # Its context manager's exit destroys the handle (confluent-kafka >= 2.16): its
        # threads stop reconnecting to a cluster the bench stops next.
        self._admin.__exit__(None, None, None)


class _ConfluentConsumer:
    def __init__(
        self,
        bootstrap_servers: str,
        partitions: Sequence[tuple[str, int]],
        read_committed: bool = False,
    ) -> None:
        import uuid

        import confluent_kafka

        self._consumer = confluent_kafka.Consumer(
            {
                "bootstrap.servers": bootstrap_servers,
                # librdkafka needs a group id even for assigned partitions; nothing commits.
                "group.id": f"replog-bench-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                **_isolation(read_committed),
            }
        )
        self._consumer.assign(
            [
                confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                for topic, p in partitions
            ]
        )

    def poll(self, timeout_s: float) -> list[bytes]:
        # Waits for the first record only, then takes what else has arrived: `consume` alone
        # returns once it holds `num_messages` records or the timeout passed, so every record
        # would wait for the batch to fill (46 ms of 1,000 at 21,500 records/s) and that wait
        # would count as end-to-end latency.
        first = self._consumer.poll(timeout_s)
        if first is None:
            return []
        messages = [first, *self._consumer.consume(num_messages=CONSUME_BATCH - 1, timeout=0)]
        values = []
        for message in messages:
            value = message.value()
            if message.error() is None and value is not None:
                values.append(value)
        return values

    def close(self) -> None:
        self._consumer.close()


# --- kafka-python ---------------------------------------------------------------------------------


def kafka_python_settings(config: Mapping[str, str]) -> dict[str, Any]:
    """Kafka's dotted setting names as kafka-python's keyword arguments (`linger.ms` ->
    `linger_ms`), whole numbers as ints, `true`/`false` as bools (the string "false" would be
    true to kafka-python); `bootstrap.servers` as a list."""
    settings: dict[str, Any] = {}
    for key, value in config.items():
        name = key.replace(".", "_")
        if name == "bootstrap_servers":
            settings[name] = value.split(",")
        elif value in ("true", "false"):
            settings[name] = value == "true"
        elif value.lstrip("-").isdigit():
            settings[name] = int(value)
        else:
            settings[name] = value
    return settings


class _KafkaPythonProducer:
    def __init__(self, config: dict[str, str]) -> None:
        from kafka import KafkaProducer

        self._producer = KafkaProducer(**kafka_python_settings(config))

    def send(self, topic: str, key: bytes | None, value: bytes, done: DeliveryCallback) -> None:
        self._producer.send(topic, value=value, key=key).add_both(_Delivered(done))

    def service(self) -> None:
        pass  # callbacks run on the client's sender thread

    def flush(self, timeout_s: float) -> None:
        self._producer.flush(timeout_s)

    def requests(self) -> int:
        return 0  # not read from kafka-python's metrics (module docstring)

    def close(self) -> None:
        self._producer.close(5)


class _KafkaPythonConsumer:
    def __init__(self, bootstrap_servers: str, partitions: Sequence[tuple[str, int]]) -> None:
        from kafka import KafkaConsumer, TopicPartition

        self._consumer = KafkaConsumer(
            bootstrap_servers=bootstrap_servers.split(","),
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        self._consumer.assign([TopicPartition(topic, p) for topic, p in partitions])

    def poll(self, timeout_s: float) -> list[bytes]:
        batches = self._consumer.poll(timeout_ms=int(timeout_s * 1000), max_records=CONSUME_BATCH)
        return [r.value for records in batches.values() for r in records if r.value is not None]

    def close(self) -> None:
        self._consumer.close()


# --- aiokafka ------------------------------------------------------------------------------------

RECORDS_IN_HAND = 10_000  # records handed to aiokafka's loop and not yet in its own buffer


def aiokafka_settings(config: Mapping[str, str]) -> dict[str, Any]:
    """kafka-python's keyword arguments (`kafka_python_settings`) under aiokafka's names where
    they differ (`batch.size` is its `max_batch_size`)."""
    settings = kafka_python_settings(config)
    if "batch_size" in settings:
        settings["max_batch_size"] = settings.pop("batch_size")
    return settings


class _AioLoop:
    """An event loop in a daemon thread, for aiokafka's producer or consumer."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run(self, coro: Any, timeout_s: float | None = None) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout_s)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


class _AioKafkaProducer:
    def __init__(self, config: dict[str, str]) -> None:
        from aiokafka import AIOKafkaProducer

        self._settings = aiokafka_settings(config)
        self._aio = _AioLoop("aiokafka-producer")

        async def started() -> AIOKafkaProducer:
            producer = AIOKafkaProducer(**self._settings)  # TypeError: a setting it lacks
            await producer.start()
            return producer

        self._producer = self._aio.run(started(), 60)
        self._in_hand: collections.deque[tuple[str, bytes | None, bytes, DeliveryCallback]] = (
            collections.deque()
        )
        self._room = threading.Condition()
        self._draining = False

    def send(self, topic: str, key: bytes | None, value: bytes, done: DeliveryCallback) -> None:
        with self._room:
            while len(self._in_hand) >= RECORDS_IN_HAND:
                self._room.wait(0.1)
            self._in_hand.append((topic, key, value, done))
            if self._draining:
                return
            self._draining = True
        self._aio.loop.call_soon_threadsafe(self._start_draining)

    def _start_draining(self) -> None:
        self._aio.loop.create_task(self._drain())

    async def _drain(self) -> None:
        """On the loop: append each record in hand to aiokafka's buffer (`send` waits there
        while that buffer is full), in the order handed."""
        while True:
            with self._room:
                if not self._in_hand:
                    self._draining = False
                    return
                topic, key, value, done = self._in_hand.popleft()
                self._room.notify()
            try:
                delivery = await self._producer.send(topic, value, key=key)
            except Exception as exc:  # reported as this record's outcome
                done(f"{type(exc).__name__}: {exc}")
                continue
            delivery.add_done_callback(_delivery_callback(done))

    def service(self) -> None:
        pass  # callbacks run on aiokafka's loop thread

    def flush(self, timeout_s: float) -> None:
        async def flushed() -> None:
            while self._draining:
                await asyncio.sleep(0.001)
            await self._producer.flush()

        self._aio.run(flushed(), timeout_s)

    def requests(self) -> int:
        return 0  # not read from aiokafka (module docstring)

    def close(self) -> None:
        try:
            self.flush(5)
            self._aio.run(self._producer.stop(), 10)
        finally:
            self._aio.close()


def _delivery_callback(done: DeliveryCallback) -> Callable[[Any], None]:
    def delivered(future: Any) -> None:
        if future.cancelled():
            done("cancelled")
            return
        exc = future.exception()
        done(None if exc is None else f"{type(exc).__name__}: {exc}")

    return delivered


class _AioKafkaConsumer:
    def __init__(self, bootstrap_servers: str, partitions: Sequence[tuple[str, int]]) -> None:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        self._aio = _AioLoop("aiokafka-consumer")

        async def started() -> AIOKafkaConsumer:
            consumer = AIOKafkaConsumer(
                bootstrap_servers=bootstrap_servers.split(","),
                group_id=None,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
            )
            await consumer.start()
            consumer.assign([TopicPartition(topic, p) for topic, p in partitions])
            return consumer

        self._consumer = self._aio.run(started(), 60)

    def poll(self, timeout_s: float) -> list[bytes]:
        async def polled() -> list[bytes]:
            batches = await self._consumer.getmany(
                timeout_ms=int(timeout_s * 1000), max_records=CONSUME_BATCH
            )
            return [r.value for records in batches.values() for r in records if r.value is not None]

        values: list[bytes] = self._aio.run(polled())
        return values

    def close(self) -> None:
        try:
            self._aio.run(self._consumer.stop(), 10)
        finally:
            self._aio.close()


# --- etcd -----------------------------------------------------------------------------------------


class _EtcdAdmin:
    """Writes to the etcd member at `bootstrap_servers` (the leader: the system gives its
    address), each answered once committed by the members' quorum."""

    def __init__(self, bootstrap_servers: str) -> None:
        import grpc

        from replog.cli.bench.etcd import PUT_METHOD, TXN_METHOD

        self._channel = grpc.insecure_channel(bootstrap_servers.split(",")[0])
        self._put = self._channel.unary_unary(PUT_METHOD)
        self._txn = self._channel.unary_unary(TXN_METHOD)

    def create_topics(self, names: Sequence[str], partitions: int) -> None:
        from replog.cli.bench.etcd import encode_put, encode_txn_puts

        value = b"x" * (ETCD_BYTES_PER_PARTITION * (partitions + 1))
        if len(names) == 1:
            self._put(encode_put(names[0].encode(), value), timeout=30)
        else:
            self._txn(encode_txn_puts([(n.encode(), value) for n in names]), timeout=30)

    def close(self) -> None:
        self._channel.close()
