"""A running local cluster for the client library's tests (issue #7), shared by a test module.

`start_client_cluster` starts a real multi-process cluster through the CLI (`replog cluster
start`) and waits until every broker is unfenced; clients bootstrap from the brokers' Kafka
listeners (`bootstrap`), the controller is asked on the nodes' gRPC addresses (`addresses`).
`ClientCluster.create_topic` creates a topic through the controller and waits until every
broker's metadata shows a leader for each of its partitions, so a client that starts right
after sees the topic; `ClientCluster.wait_healthy` waits until every broker is unfenced and
the partitions of the topics named are led with full ISRs and not being reassigned (after
faults). `stop` kills every process (also after a failed test). Tests drive the cluster only
through the public client API, the CLI and signals.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections.abc import Coroutine, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from cluster_helpers import LoopbackCluster, wait_for

from replog import Consumer, Producer
from replog.admin.controller_client import ControllerClient
from replog.admin.controller_results import NewTopic
from replog.client.records import ConsumerRecord, TopicPartition
from replog.errors import ReplogError, TopicAlreadyExistsError
from replog.kafka.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from replog.kafka.messages.metadata_response import MetadataResponse
from replog.wire.kafka_connection import KafkaConnection
from tests.local_ports import free_base_port

T = TypeVar("T")


@dataclass
class ClientCluster:
    loopback: LoopbackCluster

    @property
    def addresses(self) -> dict[int, str]:
        return self.loopback.addresses

    @property
    def kafka_addresses(self) -> dict[int, str]:
        """Each broker's Kafka listener, what clients connect to."""
        return {
            node.node_id: node.kafka_address
            for node in self.loopback.layout.nodes
            if node.kafka_address is not None
        }

    @property
    def bootstrap(self) -> str:
        """The `bootstrap.servers` value naming every broker's Kafka listener."""
        return ",".join(self.kafka_addresses.values())

    def admin(self) -> ControllerClient:
        addresses = self.addresses
        return ControllerClient(list(addresses.values()), node_addresses=addresses)

    def producer(self, **config: object) -> Producer:
        return Producer(bootstrap_servers=self.bootstrap, **config)

    def consumer(self, **config: object) -> Consumer:
        return Consumer(bootstrap_servers=self.bootstrap, **config)

    def unhealthy(self, topics: Sequence[str]) -> str | None:
        """What keeps the cluster from being healthy, as the active controller sees it: a
        fenced broker, or a partition of `topics` without a leader, with an ISR short of its
        replicas, or being reassigned. None: healthy."""
        try:
            with self.admin() as admin:
                brokers = admin.describe_cluster().brokers
                metadata = admin.metadata(list(topics)) if topics else None
        except ReplogError as exc:
            return f"no answer from the controller: {exc}"
        unfenced = sorted(b.broker_id for b in brokers if not b.fenced)
        if len(unfenced) < self.loopback.node_count:
            return f"unfenced brokers {unfenced} of {self.loopback.node_count}"
        for topic in metadata.topics if metadata else ():
            if topic.error is not None:
                return f"{topic.name}: {topic.error!r}"
            for p in topic.partitions:
                moving = p.adding_replicas or p.removing_replicas
                if p.leader is None or len(p.isr) < len(p.replicas) or moving:
                    return (
                        f"{topic.name}-{p.partition}: leader {p.leader}, replicas "
                        f"{list(p.replicas)}, ISR {list(p.isr)}, adding {list(p.adding_replicas)}"
                        f", removing {list(p.removing_replicas)}"
                    )
        return None

    def wait_healthy(self, topics: Sequence[str], timeout_s: float = 30) -> None:
        """Until every broker is unfenced and every partition of `topics` led, with a full ISR,
        and not being reassigned."""
        deadline = time.monotonic() + timeout_s
        while (problem := self.unhealthy(topics)) is not None:
            assert time.monotonic() < deadline, f"not healthy after {timeout_s:g} s: {problem}"
            time.sleep(0.05)

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = 3,
        configs: Mapping[str, str] | None = None,
        timeout_s: float = 30,
    ) -> None:
        deadline = time.monotonic() + timeout_s
        with self.admin() as admin:
            while True:
                (created,) = admin.create_topics(
                    [NewTopic(name, partitions, replication_factor, dict(configs or {}))]
                )
                if created.error is None or isinstance(created.error, TopicAlreadyExistsError):
                    break
                assert time.monotonic() < deadline, f"creating {name}: {created.error!r}"
                time.sleep(0.2)
        self.wait_for_leaders(name, partitions, deadline - time.monotonic())

    def wait_for_leaders(self, topic: str, partitions: int, timeout_s: float) -> None:
        """Until every node's broker metadata names a leader for each partition of `topic`."""

        def ready() -> bool:
            for address in self.kafka_addresses.values():
                try:
                    answer = run_blocking(kafka_metadata(address, topic))
                except ReplogError:
                    return False
                found = [t for t in answer.topics if t.name == topic and not t.error_code]
                if not found or len(found[0].partitions) != partitions:
                    return False
                if any(p.leader_id < 0 for p in found[0].partitions):
                    return False
            return True

        wait_for(ready, max(timeout_s, 1.0), f"leaders for every partition of {topic}")

    def stop(self) -> None:
        self.loopback.kill_everything()


def run_blocking(coroutine: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(coroutine)`, also from code an async test calls synchronously (a loop
    already runs in this thread): then on a thread of its own, the caller blocked meanwhile."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


async def kafka_metadata(address: str, topic: str) -> MetadataResponse:
    """The Metadata answer of the Kafka listener at `address` about `topic`."""
    connection = await KafkaConnection.open(address, client_id="tests", setup_timeout_ms=2000)
    try:
        request = MetadataRequest(topics=[MetadataRequestTopic(name=topic)])
        answer, _ = await connection.call(request, timeout_ms=2000)
    finally:
        connection.close()
    assert isinstance(answer, MetadataResponse)
    return answer


# `cluster start` arguments for tests whose consumers join a group alone: their first join need
# not wait out group.initial.rebalance.delay.ms (3 s) for members that never come.
NO_GROUP_DELAY = ("--override", "group.initial.rebalance.delay.ms=0")


def start_client_cluster(
    data_dir: Path,
    node_count: int = 3,
    *start_args: str,
    timeout_s: float = 60,
    base_port: int | None = None,
) -> ClientCluster:
    """`base_port`: the cluster's first port (`free_base_port`'s by default)."""
    base = free_base_port(node_count) if base_port is None else base_port
    loopback = LoopbackCluster(data_dir, base, node_count)
    cluster = ClientCluster(loopback)
    try:
        loopback.start(*start_args)
        loopback.wait_for_leader(timeout_s=timeout_s)

        def all_unfenced() -> bool:
            try:
                with cluster.admin() as admin:
                    brokers = admin.describe_cluster().brokers
            except ReplogError:
                return False
            return len([b for b in brokers if not b.fenced]) == node_count

        wait_for(all_unfenced, timeout_s, f"{node_count} unfenced brokers")
    except BaseException:
        cluster.stop()
        raise
    return cluster


@contextmanager
def client_cluster(
    data_dir: Path, node_count: int = 3, *start_args: str, base_port: int | None = None
) -> Iterator[ClientCluster]:
    """A started cluster, killed when the block ends (for module-scoped fixtures)."""
    cluster = start_client_cluster(data_dir, node_count, *start_args, base_port=base_port)
    try:
        yield cluster
    finally:
        cluster.stop()


def produce_and_read_back(bootstrap: str, topic: str, values: list[bytes]) -> list[ConsumerRecord]:
    """Send `values` to partition 0 of `topic` through the public Producer (each acknowledged),
    read them back from the earliest offset with a Consumer, and check they came back in order;
    return the records read."""
    with Producer(bootstrap_servers=bootstrap, linger_ms=5) as producer:
        futures = [producer.send(topic, value, partition=0) for value in values]
        producer.flush(timeout=30)
        for future in futures:
            future.get(timeout=30)
    got: list[ConsumerRecord] = []
    with Consumer(
        bootstrap_servers=bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=100
    ) as consumer:
        consumer.assign([TopicPartition(topic, 0)])

        def arrived() -> bool:
            for records in consumer.poll(500).values():
                got.extend(records)
            return len(got) >= len(values)

        wait_for(arrived, 30, f"the records of {topic} back from {bootstrap}")
    assert [r.value for r in got] == values, (
        f"{topic}-0: sent {len(values)} values, read back {len(got)} records (offset, value): "
        f"{[(r.offset, r.value) for r in got][:50]}; sent {values}"
    )
    return got
