"""The group coordinator on a real 3-node cluster, driven through `KafkaCoordinatorClient` on the
brokers' Kafka listeners and signals: the first FindCoordinator creates `__consumer_offsets`
(50 partitions, 3 replicas, compacted), every broker names the same coordinator, commits are
fetched back, and after a kill -9 of the coordinator's node another broker coordinates the
group with the same committed offsets."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

import pytest
from client_cluster import ClientCluster, client_cluster

from replog.admin.controller_results import ConfigResource
from replog.client.records import OffsetAndMetadata, TopicPartition
from replog.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    KafkaError,
    NetworkError,
    NotCoordinatorError,
)
from replog.topic_names import CONSUMER_OFFSETS_TOPIC
from replog.wire.kafka_coordinator_client import KafkaCoordinatorClient

pytestmark = pytest.mark.slow

GROUP = "orders-readers"
TOPIC = "orders"
R = TypeVar("R")
RETRIABLE = (CoordinatorNotAvailableError, CoordinatorLoadInProgressError, NotCoordinatorError)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClientCluster]:
    with client_cluster(tmp_path_factory.mktemp("c")) as started:
        started.create_topic(TOPIC, partitions=3, replication_factor=3)
        yield started


async def retried(call: Callable[[], Awaitable[R]], timeout_s: float, what: str) -> R:
    """`call` until it stops raising a retriable coordinator error or a network failure."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return await call()
        except (*RETRIABLE, NetworkError) as error:
            last = error
        assert time.monotonic() < deadline, f"{what}: still failing after {timeout_s} s: {last!r}"
        await asyncio.sleep(0.1)


async def find(
    clients: dict[int, KafkaCoordinatorClient], timeout_s: float, *, not_on: int | None = None
) -> tuple[int, str]:
    """The coordinator every client's broker names (once they agree, and it is not `not_on`)."""

    async def ask() -> tuple[int, str]:
        answers = {await c.find_coordinator(GROUP) for c in clients.values()}
        if len(answers) != 1 or next(iter(answers))[0] == not_on:
            raise CoordinatorNotAvailableError(f"the brokers answer {answers}")
        return answers.pop()

    return await retried(ask, timeout_s, f"FindCoordinator({GROUP!r})")


def kafka_addresses(cluster: ClientCluster) -> dict[int, str]:
    """Each node's Kafka listener, by node id."""
    addresses = {n.node_id: n.kafka_address for n in cluster.loopback.layout.nodes}
    assert all(addresses.values()), addresses
    return {node: address for node, address in addresses.items() if address is not None}


@pytest.mark.asyncio
async def test_commit_fetch_and_failover_of_the_coordinator(cluster: ClientCluster) -> None:
    kafka = kafka_addresses(cluster)
    clients = {node: KafkaCoordinatorClient(address) for node, address in kafka.items()}
    try:
        # The first call finds no __consumer_offsets and asks the controller for it.
        with pytest.raises(CoordinatorNotAvailableError, match="does not exist yet"):
            await clients[1].find_coordinator(GROUP)
        node_id, address = await find(clients, 30)
        assert address == kafka[node_id]
        with cluster.admin() as admin:
            (topic,) = admin.metadata([CONSUMER_OFFSETS_TOPIC]).topics
            (configs,) = admin.describe_configs([ConfigResource.topic(CONSUMER_OFFSETS_TOPIC)])
        assert len(topic.partitions) == 50 and topic.replication_factor == 3
        # Kafka's configs for it: compacted, offsets.topic.segment.bytes, the producer's codec.
        assert configs.overrides() == {
            "cleanup.policy": "compact",
            "segment.bytes": "104857600",
            "compression.type": "producer",
        }

        offsets = {
            TopicPartition(TOPIC, 0): OffsetAndMetadata(41, "first"),
            TopicPartition(TOPIC, 1): OffsetAndMetadata(7, "", 2),
            TopicPartition(TOPIC, 2): OffsetAndMetadata(0),
        }
        coordinator = clients[node_id]

        async def commit() -> dict[TopicPartition, KafkaError | None]:
            errors, _others = await coordinator.offset_commit(GROUP, offsets)
            return errors

        assert await retried(commit, 20, "OffsetCommit") == dict.fromkeys(offsets)
        assert await coordinator.offset_fetch(GROUP, list(offsets)) == offsets
        assert await coordinator.offset_fetch(GROUP, None) == offsets
        missing = TopicPartition(TOPIC, 9)
        assert await coordinator.offset_fetch(GROUP, [missing]) == {missing: None}
        other = next(n for n in clients if n != node_id)
        with pytest.raises(NotCoordinatorError, match="NOT_COORDINATOR from the coordinator at"):
            await clients[other].offset_fetch(GROUP, None)

        # kill -9 the coordinator's node: another broker leads the group's partition, loads
        # it from its replica of the log, and answers the same offsets.
        cluster.loopback.signal(node_id, signal.SIGKILL)
        await clients.pop(node_id).close()
        # (The brokers name the dead node until the controller fences it: a session timeout.)
        new_id, _ = await find(clients, 40, not_on=node_id)

        async def fetch_again() -> dict[TopicPartition, OffsetAndMetadata | None]:
            return await clients[new_id].offset_fetch(GROUP, None)

        assert await retried(fetch_again, 20, "OffsetFetch after failover") == offsets
        later = {TopicPartition(TOPIC, 0): OffsetAndMetadata(50)}
        errors, others = await clients[new_id].offset_commit(GROUP, later)
        assert errors == {TopicPartition(TOPIC, 0): None} and others == ()
        assert (await clients[new_id].offset_fetch(GROUP, None))[TopicPartition(TOPIC, 0)] == (
            OffsetAndMetadata(50)
        )
    finally:
        for client in clients.values():
            await client.close()
