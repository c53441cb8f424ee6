"""Real node processes configured entirely on the IPv6 loopback (`::1`), as Kafka users write it:
`listeners=CONTROLLER://[::1]:port,PLAINTEXT://[::1]:kafka_port`,
`controller.quorum.voters=1@[::1]:port`, `metrics.host=::1`, clients bootstrapped from the
Kafka listener `[::1]:kafka_port`.

- one combined node starts, elects itself, registers its broker (advertised on ::1), and a
  Producer and a Consumer bootstrapped from its Kafka listener round-trip records through it (the
  client dials the broker address the metadata gives: the bare host registered, bracketed);
- two combined nodes elect a leader and the follower catches up over its Raft Fetch connection
  to the leader's ::1 Fetch listener, and a topic replicated on both round-trips records.

Skipped only when this machine cannot bind ::1.
"""

from __future__ import annotations

import contextlib
import socket
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from client_cluster import produce_and_read_back
from cluster_helpers import node_processes, wait_for

from replog import Admin
from replog.admin.controller_results import NewTopic
from replog.admin.quorum import describe_quorum
from replog.admin.quorum_description import QuorumDescription
from replog.errors import InvalidReplicationFactorError, ReplogError
from tests.ipv6_loopback import needs_ipv6

pytestmark = pytest.mark.slow


def _free_ipv6_ports(count: int) -> list[int]:
    with contextlib.ExitStack() as held:
        probes = [held.enter_context(socket.socket(socket.AF_INET6)) for _ in range(count)]
        for probe in probes:
            probe.bind(("::1", 0))
        return [int(probe.getsockname()[1]) for probe in probes]


@contextlib.contextmanager
def ipv6_nodes(
    tmp_path: Path, count: int
) -> Iterator[tuple[dict[int, str], dict[int, int], dict[int, str]]]:
    """`count` combined nodes on ::1: node id -> `[::1]:port`, node id -> metrics port, and
    node id -> its Kafka listener `[::1]:port`."""
    ports = _free_ipv6_ports(3 * count)
    listen, metrics = (
        dict(enumerate(ports[:count], 1)),
        dict(enumerate(ports[count : 2 * count], 1)),
    )
    kafka = dict(enumerate(ports[2 * count :], 1))
    voters = ",".join(f"{n}@[::1]:{port}" for n, port in listen.items())
    properties = {
        node_id: {
            "process.roles": "broker,controller",
            "node.id": str(node_id),
            "cluster.id": "ipv6-test",
            "controller.quorum.voters": voters,
            "listeners": f"CONTROLLER://[::1]:{port},PLAINTEXT://[::1]:{kafka[node_id]}",
            "controller.listener.names": "CONTROLLER",
            "offsets.topic.replication.factor": str(count),
            "metrics.host": "::1",
            "metrics.port": str(metrics[node_id]),
        }
        for node_id, port in listen.items()
    }
    with node_processes(tmp_path, properties):
        kafka_addresses = {n: f"[::1]:{port}" for n, port in kafka.items()}
        yield {n: f"[::1]:{port}" for n, port in listen.items()}, metrics, kafka_addresses


def _leader(addresses: dict[int, str], timeout_s: float = 30) -> QuorumDescription:
    found: list[QuorumDescription] = []

    def elected() -> bool:
        try:
            answer = describe_quorum(list(addresses.values()), addresses, 1.0)
        except ReplogError:
            return False
        if answer.high_watermark is None:
            return False
        found.append(answer)
        return True

    wait_for(elected, timeout_s, "a leader on ::1")
    return found[-1]


def _create_topic(addresses: dict[int, str], name: str, replicas: int) -> None:
    """Create `name` through the Kafka listeners `addresses` once `replicas` brokers are
    unfenced (until then the controller refuses the replication factor); `Admin.create_topics`
    returns only when every broker knows the partition's leader, so a produce right after finds
    it."""
    with Admin(bootstrap_servers=",".join(addresses.values()), request_timeout_ms=30_000) as admin:

        def created() -> bool:
            try:
                admin.create_topics([NewTopic(name, 1, replicas, {})], timeout_ms=30_000)
            except InvalidReplicationFactorError:
                return False  # not every broker unfenced yet
            return True

        wait_for(created, 30, f"topic {name} created on {replicas} unfenced brokers")


@needs_ipv6
def test_one_combined_node_on_ipv6_elects_itself_and_serves_clients(tmp_path: Path) -> None:
    with ipv6_nodes(tmp_path, 1) as (addresses, metrics, kafka):
        leader = _leader(addresses)
        assert (leader.leader_id, leader.answered_by) == (1, addresses[1])
        _create_topic(kafka, "v6", 1)
        produce_and_read_back(kafka[1], "v6", [b"v6-%d" % i for i in range(5)])
        with urllib.request.urlopen(f"http://[::1]:{metrics[1]}/metrics", timeout=5) as answer:
            assert answer.status == 200


@needs_ipv6
def test_two_nodes_on_ipv6_replicate_over_their_fetch_connections(tmp_path: Path) -> None:
    with ipv6_nodes(tmp_path, 2) as (addresses, _, kafka):
        _leader(addresses)

        def follower_caught_up() -> bool:
            quorum = describe_quorum(list(addresses.values()), addresses, 1.0)
            ends = {row.node_id: row.log_end_offset for row in quorum.replicas}
            return len(ends) == 2 and len(set(ends.values())) == 1 and None not in ends.values()

        wait_for(follower_caught_up, 30, "the follower caught up over Raft Fetch")
        _create_topic(kafka, "v6-replicated", 2)
        produce_and_read_back(
            ",".join(kafka.values()), "v6-replicated", [b"v6-%d" % i for i in range(5)]
        )
