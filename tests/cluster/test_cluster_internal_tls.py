"""TLS inside a 3-node `replog cluster start --security ssl` cluster: the internal gRPC links
(follower fetch, broker to controller, Raft), the Raft Fetch connections and the controllers'
Kafka listeners are mutual TLS with the node certificates the start makes. Produce with
acks=all over in-sync followers, a failover of the active controller, the controllers' Kafka
listener answering over TLS, peers refused by name (plaintext, an untrusted CA, the clients'
certificate) while the nodes go on, plaintext at the Raft listeners logged once and counted,
and a node certificate rotated in place: a client sees the new one and replication goes on."""

from __future__ import annotations

import contextlib
import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from cluster_helpers import LoopbackCluster, replog, wait_for
from metrics_scrape import get, scrape

from replog import Admin, NewTopic, Producer
from replog.cli.cluster_tls_files import ClusterTlsFiles, node_principal
from replog.cli.local_certificates import write_node_keystore
from replog.config import parse_properties
from replog.pb import raft_pb2, raft_pb2_grpc
from tests.local_ports import KAFKA_CONTROLLER_PORT_OFFSET, free_base_port
from tests.tls_certificates import Pki, presented_certificate_to

TOPIC = "secured"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoopbackCluster]:
    cluster = LoopbackCluster(tmp_path_factory.mktemp("tlsinternal") / "cluster", free_base_port(3))
    try:
        cluster.start("--security", "ssl")
        yield cluster
    finally:
        cluster.kill_everything()


def config(cluster: LoopbackCluster) -> dict[str, object]:
    text = (cluster.data_dir / "client.properties").read_text()
    return {**parse_properties(text, source="client.properties"), "request.timeout.ms": 10_000}


def produce(cluster: LoopbackCluster, count: int, start: int = 0) -> None:
    with Producer(config(cluster), acks="all") as producer:
        futures = [
            producer.send(TOPIC, f"v{i}".encode(), key=f"k{i}".encode())
            for i in range(start, start + count)
        ]
        for future in futures:
            future.get(timeout=60)


def fully_in_sync(cluster: LoopbackCluster) -> bool:
    with Admin(config(cluster)) as admin:
        topic = admin.describe_topics([TOPIC])[TOPIC]
    return all(len(p.isr) == 3 and p.leader is not None for p in topic.partitions)


def presented_certificate(cluster: LoopbackCluster, address: str, alpn: str | None) -> bytes:
    """The certificate the listener at `address` presents to a client with the cluster's
    client certificate."""
    files = ClusterTlsFiles(str(cluster.data_dir))
    return presented_certificate_to(
        address,
        Path(files.ca_certificate),
        Path(files.client_certificate),
        alpn,
        key=Path(files.client_key),
    )


def describe_quorum_with(address: str, credentials: grpc.ChannelCredentials | None) -> object:
    """RaftQuorum.DescribeQuorum on a node's internal listener, as some peer."""
    channel = (
        grpc.insecure_channel(address)
        if credentials is None
        else grpc.secure_channel(address, credentials)
    )
    with channel:
        stub = raft_pb2_grpc.RaftQuorumStub(channel)  # type: ignore[no-untyped-call]
        return stub.DescribeQuorum(raft_pb2.DescribeQuorumRequest(), timeout=10)


def test_the_nodes_are_configured_for_tls_inside(cluster: LoopbackCluster) -> None:
    server = parse_properties(
        (cluster.data_dir / "node-1" / "server.properties").read_text(), source="node-1"
    )
    mapped = dict(e.split(":") for e in server["listener.security.protocol.map"].split(","))
    assert set(mapped.values()) == {"SSL"} and "CONTROLLER" in mapped, mapped
    assert set(server["super.users"].split(";")) == {node_principal(i) for i in (1, 2, 3)}


def test_acks_all_over_followers_fetching_with_mutual_tls(cluster: LoopbackCluster) -> None:
    with Admin(config(cluster)) as admin:
        admin.create_topics(
            [NewTopic(TOPIC, 3, 3, configs={"min.insync.replicas": "3"})], timeout_ms=30_000
        )
    # min.insync.replicas=3: every acknowledged record was fetched by both followers.
    produce(cluster, 300)
    wait_for(lambda: fully_in_sync(cluster), 30, "every replica in sync")


def test_the_controllers_kafka_listener_answers_over_tls(cluster: LoopbackCluster) -> None:
    controller = f"127.0.0.1:{cluster.base_port + KAFKA_CONTROLLER_PORT_OFFSET}"
    properties = str(cluster.data_dir / "client.properties")
    described = replog(
        "quorum", "describe", "--json", "--bootstrap-controller", controller,
        "--command-config", properties,
    )  # fmt: skip
    assert described.returncode == 0, described.stderr
    assert json.loads(described.stdout)["leader_id"] in (1, 2, 3), described.stdout
    plain = replog("quorum", "describe", "--bootstrap-controller", controller)
    assert plain.returncode == 1 and "security.protocol=SSL" in plain.stderr, plain.stderr


def test_peers_that_are_no_nodes_are_refused_and_the_nodes_go_on(
    cluster: LoopbackCluster, tmp_path: Path
) -> None:
    address = cluster.addresses[1]
    files = ClusterTlsFiles(str(cluster.data_dir))
    ca = Path(files.ca_certificate).read_bytes()
    client = grpc.ssl_channel_credentials(
        ca, Path(files.client_key).read_bytes(), Path(files.client_certificate).read_bytes()
    )
    with pytest.raises(grpc.RpcError) as refused:
        describe_quorum_with(address, client)
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED  # type: ignore[attr-defined]
    assert "CN=replog-client" in (refused.value.details() or "")  # type: ignore[attr-defined]
    stranger = Pki.create(tmp_path / "stranger")
    stranger.keystore("replog-node-1")  # a node's name, another CA
    untrusted = grpc.ssl_channel_credentials(
        ca,
        (stranger.directory / "replog-node-1.key").read_bytes(),
        (stranger.directory / "replog-node-1.crt").read_bytes(),
    )
    for credentials in (untrusted, None):
        with pytest.raises(grpc.RpcError) as failed:
            describe_quorum_with(address, credentials)
        assert failed.value.code() == grpc.StatusCode.UNAVAILABLE  # type: ignore[attr-defined]
    log = (cluster.data_dir / "node-1" / "node.log").read_text()
    said = [line for line in log.splitlines() if "is not a node of this cluster" in line]
    assert len(said) == 1 and "CN=replog-client" in said[0], said
    # The node serves its own: the cluster's clients and nodes carry on.
    produce(cluster, 10, start=1000)
    status = json.loads(cluster.ask("status", "--json").stdout)
    assert all(node["answers"] for node in status["nodes"]), status


def test_a_controller_failover_over_tls(cluster: LoopbackCluster) -> None:
    # This process asks the quorum over the internal listeners as the `cluster` commands do.
    with cluster.layout.internal_tls():
        before = cluster.wait_for_leader()
        assert before.leader_id is not None
        cluster.kill(before.leader_id)
        after = cluster.wait_for_leader(after_epoch=before.leader_epoch, timeout_s=30)
    assert after.leader_id not in (None, before.leader_id)
    cluster.restart(before.leader_id)
    produce(cluster, 50, start=2000)
    wait_for(lambda: fully_in_sync(cluster), 60, "every replica in sync after the failover")


def test_a_node_certificate_rotated_in_place(cluster: LoopbackCluster) -> None:
    files = ClusterTlsFiles(str(cluster.data_dir))
    node = cluster.layout.node(1)
    kafka = node.kafka_address
    assert kafka is not None
    old = presented_certificate(cluster, kafka, None)
    new = write_node_keystore(files, 1, ("127.0.0.1", "localhost"))
    assert new != old
    # The next connection to each of its listeners gets the new certificate.
    assert presented_certificate(cluster, kafka, None) == new
    assert presented_certificate(cluster, node.controller_address, "h2") == new
    # New internal connections to and from it use it: node 2 dials it again after a restart,
    # and it dials node 2 with it.
    cluster.kill(2)
    cluster.restart(2)
    produce(cluster, 50, start=3000)
    wait_for(lambda: fully_in_sync(cluster), 60, "every replica in sync after the rotation")
    log = (cluster.data_dir / "node-1" / "node.log").read_text()
    assert "loaded again" in log, log[-2000:]


def _listening_ports(pid: int) -> set[int]:
    """The TCP ports process `pid` listens on (its sockets' inodes in /proc/net's tables)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    ports = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # LISTEN
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def test_plaintext_at_the_raft_listeners_is_one_line_and_counted(
    cluster: LoopbackCluster,
) -> None:
    node = cluster.layout.node(2)
    known = {int(a.rsplit(":", 1)[1]) for a in node.listeners.values()}
    assert node.metrics_address is not None
    known.add(int(node.metrics_address.rsplit(":", 1)[1]))
    raft_ports = _listening_ports(cluster.pid(2)) - known  # Raft Fetch, metadata append
    assert len(raft_ports) == 2, raft_ports
    assert node.metrics_url is not None
    counted = ("replog_failed_authentication_total",)
    labels = {"listener": "CONTROLLER", "mechanism": "SSL"}
    before = get(scrape(node.metrics_url), *counted, **labels)
    for port in sorted(raft_ports):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(b"RFCH" + bytes(64))
            try:
                answer = sock.recv(1024)
            except ConnectionResetError:  # aborted
                answer = b""
            assert answer == b""  # closed unserved
    wait_for(
        lambda: get(scrape(node.metrics_url or ""), *counted, **labels) >= before + 2,
        timeout_s=30,
        what="two failed handshakes counted",
    )
    log = (cluster.data_dir / "node-2" / "node.log").read_text()
    said = [line for line in log.splitlines() if "TLS handshake failed: plaintext" in line]
    assert len(said) == 1 and "internal link from 127.0.0.1:" in said[0], said  # once per host
