"""The traffic and the end-of-test checks shared by the tests that spoil the links between
live nodes: the network partition tests (tests/cluster/test_cluster_network_partitions.py) and
the slow and corrupting link tests (tests/cluster/test_cluster_link_faults.py).

`traffic` runs an idempotent acks=all producer stream and a consumer tail through the public
client; `ready_for_the_fault` checks the ground a fault is aimed at; `drain` stops the stream
and reads the settled log; `check_logs` is what every such
test ends with: each acknowledged record exactly once at its acknowledged offset, the consumer
given exactly the log, every replica's files identical below the high watermark.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from proxied_cluster import (
    NODES,
    Log,
    ProxiedCluster,
    Stream,
    Tail,
    assert_consumer_was_given_the_log,
    assert_exactly_once_in_order,
    settled_log,
    start_proxied_cluster,
    stop,
)
from replication_helpers import Brokers, assert_identical, create_topic, in_thread, read_replicas

REPLICA_LAG_TIME_MAX_MS = 2000  # a silent follower leaves the ISR 2-3 s after its last fetch
# The producer gives up on a call to a cut-off leader after this and asks for metadata again.
QUICK = {"request_timeout_ms": 3000}
ACKS = 200  # acknowledgements awaited before, during and after each fault


@contextmanager
def fault_cluster(
    data_dir: Path, properties: dict[str, str] | None = None, nodes: int = NODES
) -> Iterator[ProxiedCluster]:
    """A partitionable proxied cluster of `nodes` nodes (every node-to-node link through the
    proxies) whose silent followers leave the ISR after REPLICA_LAG_TIME_MAX_MS, with
    `properties` (server properties) added; stopped on the way out."""
    cluster = start_proxied_cluster(
        data_dir,
        partitionable=True,
        properties={"replica.lag.time.max.ms": str(REPLICA_LAG_TIME_MAX_MS), **(properties or {})},
        nodes=nodes,
    )
    try:
        yield cluster
    finally:
        stop(cluster)


def all_nodes() -> list[int]:
    return list(range(1, NODES + 1))


async def place_topic(network: ProxiedCluster, topic: str, replicas: list[int]) -> None:
    """One partition on `replicas`, the first its leader, known to every broker."""
    await in_thread(create_topic, network.loopback, topic, replicas, {})
    await in_thread(network.cluster.wait_for_leaders, topic, 1, 30)


@contextmanager
def traffic(network: ProxiedCluster, topic: str, partitions: int) -> Iterator[tuple[Stream, Tail]]:
    """An idempotent acks=all producer stream and a consumer tail on `topic`, through the
    public client, giving up on a call after QUICK's request timeout."""
    with (
        network.producer(acks="all", linger_ms=5, **QUICK) as producer,
        network.consumer(enable_auto_commit=False, **QUICK) as consumer,
        Tail(consumer, topic, partitions) as tail,
        Stream(producer, topic, partitions) as stream,
    ):
        yield stream, tail


async def drain(network: ProxiedCluster, stream: Stream, tail: Tail) -> Log:
    """Stop the stream (every send settled), and the log once it stops moving, read by the
    tail too."""
    await in_thread(stream.stop)
    log = await in_thread(settled_log, network, stream.topic, stream.partitions)
    await in_thread(tail.wait_for, {p: len(entries) for p, entries in log.items()}, 30)
    return log


def check_logs(
    network: ProxiedCluster, stream: Stream, tail: Tail, log: Log, topic: str, scratch: Path
) -> int:
    """The end-of-test checks: exactly once at the acknowledged offsets, the consumer given
    exactly the log, every replica's files identical below the high watermark (the nodes are
    killed to read them). The number of records checked."""
    checked = assert_exactly_once_in_order(stream, log)
    assert_consumer_was_given_the_log(tail, log)
    network.cluster.stop()
    for partition, entries in log.items():
        replicas = read_replicas(
            network.loopback, sorted(network.proxies), topic, scratch / str(partition), partition
        )
        assert_identical(replicas, len(entries), f"{topic}-{partition}")
    return checked


async def ready_for_the_fault(
    network: ProxiedCluster, brokers: Brokers, stream: Stream, topic: str, leader: int, what: str
) -> None:
    """Before a fault aimed at `leader`: ACKS acknowledgements, every node's connections
    named by the proxies, and `leader` leading `topic`, so the fault hits what it means to."""
    await in_thread(stream.wait_acks, ACKS, 30, what)
    assert_node_links_identified(network)
    assert (await brokers.partition(topic)).leader == leader


def assert_node_links_identified(network: ProxiedCluster) -> None:
    """Non-vacuity: the proxies saw connections from every node, so the cuts applied to
    them (a connection a proxy cannot attribute is reset, so none escapes a partition)."""
    sources = network.connection_sources()
    assert all(sources.get(n, 0) > 0 for n in network.proxies), (
        f"the proxies could not tell which node opened each connection: {sources}"
    )
