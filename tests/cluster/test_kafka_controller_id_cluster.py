"""The controller a broker names to Kafka clients, on a real 3-node combined cluster
(`replog cluster start --kafka-base-port`):

- with the active controller and one more node killed (no election can finish), the survivor's
  Metadata and DescribeCluster name the survivor, a live broker, never the dead Raft leader; a
  CreateTopics sent through it by confluent-kafka's AdminClient is forwarded and answered once
  a killed node is back and a new controller is elected;
- `replog bench`'s controller failover kills the active controller (the quorum's leader by
  DescribeQuorum), whichever broker it asks.
"""

from __future__ import annotations

from pathlib import Path

from cluster_helpers import LoopbackCluster
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic  # where its type stubs declare it

from replog.cli.bench.systems import ReplogSystem
from replog.kafka.messages.describe_cluster_request import DescribeClusterRequest
from replog.kafka.messages.metadata_request import MetadataRequest
from tests.cluster.test_kafka_admin_cluster import kafka_call
from tests.local_ports import KAFKA_PORT_OFFSET, free_base_port

TIMEOUT_S = 60


def kafka_address(cluster: LoopbackCluster, node_id: int) -> str:
    return f"127.0.0.1:{cluster.base_port + KAFKA_PORT_OFFSET + node_id - 1}"


def test_with_the_raft_leader_dead_a_broker_names_a_live_controller(
    cluster: LoopbackCluster,
) -> None:
    cluster.start()
    leader = cluster.wait_for_leader().leader_id
    # The survivor is never the lowest id, which a broker with no live controller to name
    # might name by chance.
    dead, survivor = sorted(n for n in (1, 2, 3) if n != leader)
    cluster.kill(leader)
    cluster.kill(dead)
    address = kafka_address(cluster, survivor)
    # The dead nodes stay registered and unfenced: only an active controller fences.
    metadata = kafka_call(address, MetadataRequest(topics=None), 12)
    assert sorted(b.node_id for b in metadata.brokers) == [1, 2, 3]
    assert metadata.controller_id == survivor
    described = kafka_call(address, DescribeClusterRequest(), 1)
    assert described.controller_id == survivor

    with AdminClient({"bootstrap.servers": address}) as admin:
        futures = admin.create_topics(
            [NewTopic("after-failover", 1, 1)],
            request_timeout=TIMEOUT_S,
            operation_timeout=TIMEOUT_S,
        )
        cluster.restart(dead)  # the survivor and it elect a controller; the request is forwarded
        assert futures["after-failover"].result(timeout=2 * TIMEOUT_S) is None
        listed = admin.list_topics(timeout=TIMEOUT_S)
    assert "after-failover" in listed.topics
    assert listed.controller_id in (survivor, dead)


def test_bench_kills_the_quorum_leader_whichever_broker_it_asks(tmp_path: Path) -> None:
    system = ReplogSystem("replog-kafka", str(tmp_path / "bench"), free_base_port(3))
    system.start()
    try:
        loopback = LoopbackCluster(tmp_path / "bench", system.base_port)
        leader = loopback.wait_for_leader().leader_id
        # Asked of a broker that is not the leader: its DescribeCluster names itself.
        other = min(n for n in (1, 2, 3) if n != leader)
        system.bootstrap_servers = kafka_address(loopback, other)
        killed, failover = system.fail_controller("probe")
        assert killed == leader
        assert leader not in loopback.running()
        assert failover.seconds > 0
    finally:
        system.stop()
