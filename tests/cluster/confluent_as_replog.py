"""confluent-kafka behind the part of replog's client API that `separate_hosts_client.py` uses,
so that script runs on either client: its one import line picks which.

Only what that script calls is here, with replog's names and meanings: `Admin`'s
`create_topics` (`NewTopic`) and `describe_topics`; `Producer`'s `send` (a future taking
`add_callback` and `add_errback`), `flush` and `close`; `Consumer(config=...)`'s `assign`,
`seek_to_beginning`, `end_offsets`, `poll` (records by `TopicPartition`) and `close`. Configs
are Kafka's dotted names, which both clients read.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import confluent_kafka
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import NewTopic as ConfluentNewTopic

from replog import ConsumerRecord, NewTopic, RecordMetadata, TopicPartition
from replog.client.admin_results import PartitionDescription, TopicDescription

__all__ = ["Admin", "Consumer", "NewTopic", "Producer", "TopicPartition"]


class Admin:
    def __init__(self, config: Mapping[str, object]) -> None:
        self._admin = AdminClient(dict(config))

    def create_topics(self, new_topics: Iterable[NewTopic]) -> None:
        futures = self._admin.create_topics(
            [
                ConfluentNewTopic(
                    topic.name,
                    num_partitions=topic.num_partitions,
                    replication_factor=topic.replication_factor,
                    config=dict(topic.configs),
                )
                for topic in new_topics
            ]
        )
        for future in futures.values():
            future.result()

    def describe_topics(self, names: Iterable[str]) -> dict[str, TopicDescription]:
        futures = self._admin.describe_topics(confluent_kafka.TopicCollection(list(names)))
        described = {}
        for name, future in futures.items():
            topic = future.result()
            partitions = tuple(
                PartitionDescription(
                    partition=p.id,
                    leader=None if p.leader is None else p.leader.id,
                    leader_epoch=-1,
                    replicas=tuple(node.id for node in p.replicas),
                    isr=tuple(node.id for node in p.isr),
                    offline_replicas=(),
                    adding_replicas=(),
                    removing_replicas=(),
                )
                for p in topic.partitions
            )
            described[name] = TopicDescription(name, None, topic.is_internal, partitions)
        return described

    def close(self) -> None:
        pass


class _Future:
    """The settled outcome of one send, told to the callbacks added before or after."""

    def __init__(self, topic: str) -> None:
        self._topic = topic
        self._lock = threading.Lock()
        self._outcome: tuple[RecordMetadata | None, BaseException | None] | None = None
        self._callbacks: list[Callable[[RecordMetadata], object]] = []
        self._errbacks: list[Callable[[BaseException], object]] = []

    def add_callback(self, fn: Callable[[RecordMetadata], object]) -> _Future:
        return self._add(fn, None)

    def add_errback(self, fn: Callable[[BaseException], object]) -> _Future:
        return self._add(None, fn)

    def _add(
        self,
        callback: Callable[[RecordMetadata], object] | None,
        errback: Callable[[BaseException], object] | None,
    ) -> _Future:
        with self._lock:
            if self._outcome is None:
                if callback is not None:
                    self._callbacks.append(callback)
                if errback is not None:
                    self._errbacks.append(errback)
                return self
            value, error = self._outcome
        if value is not None and callback is not None:
            callback(value)
        if error is not None and errback is not None:
            errback(error)
        return self

    def delivered(self, error: Any, message: Any) -> None:
        if error is not None:
            outcome: tuple[RecordMetadata | None, BaseException | None] = (
                None,
                confluent_kafka.KafkaException(error),
            )
        else:
            outcome = (
                RecordMetadata(
                    self._topic, message.partition(), message.offset(), message.timestamp()[1]
                ),
                None,
            )
        with self._lock:
            self._outcome = outcome
            callbacks, errbacks = self._callbacks, self._errbacks
        value, exception = outcome
        for fn in callbacks if value is not None else ():
            fn(value)
        for on_error in errbacks if exception is not None else ():
            on_error(exception)


class Producer:
    def __init__(self, config: Mapping[str, object]) -> None:
        self._producer = confluent_kafka.Producer(dict(config))

    def send(self, topic: str, value: bytes, key: bytes | None = None) -> _Future:
        future = _Future(topic)
        while True:
            try:
                self._producer.produce(topic, value, key, on_delivery=future.delivered)
                break
            except BufferError:  # its queue is full: serve deliveries, as replog's send blocks
                self._producer.poll(0.1)
        self._producer.poll(0)
        return future

    def flush(self, timeout: float | None = None) -> None:
        left = self._producer.flush(-1 if timeout is None else timeout)
        if left:
            raise TimeoutError(f"{left} records still undelivered after {timeout} s")

    def close(self) -> None:
        self.flush()


class Consumer:
    def __init__(self, *, config: Mapping[str, object]) -> None:
        self._consumer = confluent_kafka.Consumer(
            {"group.id": "confluent-as-replog", **config, "enable.auto.commit": False}
        )

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        self._consumer.assign(
            [confluent_kafka.TopicPartition(tp.topic, tp.partition) for tp in partitions]
        )

    def seek_to_beginning(self) -> None:
        beginning = confluent_kafka.OFFSET_BEGINNING
        self._consumer.assign(
            [
                confluent_kafka.TopicPartition(tp.topic, tp.partition, beginning)
                for tp in self._consumer.assignment()
            ]
        )

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {
            tp: self._consumer.get_watermark_offsets(
                confluent_kafka.TopicPartition(tp.topic, tp.partition), timeout=10
            )[1]
            for tp in partitions
        }

    def poll(self, timeout_ms: int = 0) -> dict[TopicPartition, list[ConsumerRecord]]:
        polled: dict[TopicPartition, list[ConsumerRecord]] = defaultdict(list)
        for message in self._consumer.consume(500, timeout_ms / 1000):
            if message.error() is not None:
                raise confluent_kafka.KafkaException(message.error())
            tp = TopicPartition(message.topic(), message.partition())
            polled[tp].append(
                ConsumerRecord(
                    message.topic(),
                    message.partition(),
                    message.offset(),
                    message.timestamp()[1],
                    message.timestamp()[0],
                    message.key(),
                    message.value(),
                    tuple(message.headers() or ()),
                )
            )
        return dict(polled)

    def close(self) -> None:
        self._consumer.close()
