"""A local cluster's listeners: `server.properties` names replog's gRPC listener `CONTROLLER`
(Kafka's `PLAINTEXT` is left for a Kafka-protocol listener), and `cluster start` shows each
listener by what it serves, the gRPC one as internal. With a Kafka base port K, every broker
serves Kafka's protocol on K + i - 1 (`PLAINTEXT`) and every controller on K + 100 + i - 1
(`CONTROLLER_KAFKA`, named in `controller.listener.names`), which `cluster status` names
(`kafka_controller`); status leads with the clients' one bootstrap line, the brokers' Kafka
listeners (`bootstrap_servers`), and shows the gRPC listeners as INTERNAL."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from replog.cli.local_cluster import LocalCluster
from replog.config import parse_properties
from replog.errors import ReplogError
from replog.server.config.node_config import NodeConfig
from tests.cluster.cluster_helpers import replog_in_process


@pytest.mark.parametrize(
    ("roles", "served"),
    [(("broker", "controller"), "broker+controller"), (("controller",), "controller")],
)
def test_listeners_are_shown_for_what_they_serve(
    tmp_path: Path, roles: tuple[str, ...], served: str
) -> None:
    cluster = LocalCluster.plan(str(tmp_path / "c"), 2, 29092, roles=roles)
    cluster.write()
    loaded = LocalCluster.load(str(tmp_path / "c"))
    for node, port in zip(loaded.nodes, (29092, 29093), strict=True):
        assert node.listener_summary == f"127.0.0.1:{port} (internal gRPC: {served})"
        assert "CONTROLLER://" not in node.listener_summary
        properties = parse_properties(Path(node.config_path).read_text())
        assert properties["listeners"] == f"CONTROLLER://127.0.0.1:{port}"
        assert properties["controller.listener.names"] == "CONTROLLER"
        assert NodeConfig.from_properties(properties).listener == f"127.0.0.1:{port}"
        assert node.controller_address == f"127.0.0.1:{port}"


def test_a_kafka_base_port_gives_every_broker_a_plaintext_listener(tmp_path: Path) -> None:
    cluster = LocalCluster.plan(str(tmp_path / "c"), 2, 29092, kafka_base_port=29392)
    cluster.write()
    loaded = LocalCluster.load(str(tmp_path / "c"))
    ports = ((29092, 29392, 29492), (29093, 29393, 29493))
    for node, (grpc, kafka, controller) in zip(loaded.nodes, ports, strict=True):
        assert node.kafka_address == f"127.0.0.1:{kafka}"
        assert node.kafka_controller_address == f"127.0.0.1:{controller}"
        assert f"PLAINTEXT://127.0.0.1:{kafka}" in node.listener_summary
        assert f"CONTROLLER_KAFKA://127.0.0.1:{controller}" in node.listener_summary
        properties = parse_properties(Path(node.config_path).read_text())
        listeners = (
            f"CONTROLLER://127.0.0.1:{grpc},PLAINTEXT://127.0.0.1:{kafka},"
            f"CONTROLLER_KAFKA://127.0.0.1:{controller}"
        )
        assert properties["listeners"] == properties["advertised.listeners"] == listeners
        assert properties["controller.listener.names"] == "CONTROLLER,CONTROLLER_KAFKA"
        assert (
            properties["listener.security.protocol.map"]
            == "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,CONTROLLER_KAFKA:PLAINTEXT"
        )
        config = NodeConfig.from_properties(properties)
        assert config.listener == f"127.0.0.1:{grpc}"
        assert [(e.name, e.port) for e in config.kafka_listeners] == [("PLAINTEXT", kafka)]
        assert config.kafka_controller_listener is not None
        assert config.kafka_controller_listener.port == controller
        assert [e.name for e in config.advertised_listeners] == ["CONTROLLER", "PLAINTEXT"]
    status = replog_in_process("cluster", "status", "--json", "--data-dir", str(tmp_path / "c"))
    document = json.loads(status.stdout)
    assert document["bootstrap_servers"] == "127.0.0.1:29392,127.0.0.1:29393"
    rows = document["nodes"]
    assert [n["kafka"] for n in rows] == ["127.0.0.1:29392", "127.0.0.1:29393"]
    assert [n["kafka_controller"] for n in rows] == ["127.0.0.1:29492", "127.0.0.1:29493"]
    assert [n["listener"] for n in rows] == ["127.0.0.1:29092", "127.0.0.1:29093"]
    table = replog_in_process("cluster", "status", "--data-dir", str(tmp_path / "c")).stdout
    lines = table.splitlines()
    # One line for clients, before the table; the gRPC listeners are labelled internal.
    assert lines[1] == "bootstrap.servers: 127.0.0.1:29392,127.0.0.1:29393"
    assert sum("bootstrap" in line for line in lines) == 1
    header = lines[2].split("  ")
    assert "INTERNAL (gRPC)" in header and "LISTENER" not in header
    assert "KAFKA CONTROLLER" in table and "127.0.0.1:29492" in table


def test_a_controller_only_cluster_or_one_without_a_kafka_port_serves_no_kafka(
    tmp_path: Path,
) -> None:
    quorum = LocalCluster.plan(str(tmp_path / "q"), 1, 29092, ("controller",), kafka_base_port=9092)
    plain = LocalCluster.plan(str(tmp_path / "p"), 1, 29092)
    for cluster in (quorum, plain):
        assert cluster.nodes[0].kafka_address is None
    # A controller-only node serves Kafka's protocol as a controller only.
    assert quorum.nodes[0].kafka_controller_address == "127.0.0.1:9192"
    config = NodeConfig.from_properties(quorum.node_properties(quorum.nodes[0]))
    assert config.kafka_listeners == ()
    assert config.kafka_controller_listener is not None
    assert plain.nodes[0].kafka_controller_address is None
    assert "advertised.listeners" not in plain.node_properties(plain.nodes[0])
    for cluster in (quorum, plain):
        cluster.write()
        status = replog_in_process("cluster", "status", "--json", "--data-dir", cluster.directory)
        assert json.loads(status.stdout)["bootstrap_servers"] is None
        table = replog_in_process("cluster", "status", "--data-dir", cluster.directory).stdout
        assert table.splitlines()[1] == "bootstrap.servers: - (no broker serves Kafka's protocol)"


@pytest.mark.parametrize(
    ("kafka_base_port", "refusal"),
    [
        (29093, "port 29093 is also a node's gRPC or metrics port"),
        (29191, "port 29192 is also a node's gRPC or metrics port"),
        (65535, "ports 65535..65636 (brokers, then controllers from 65635) are not all in"),
        (28992, "port 29092 is also a node's gRPC or metrics port"),
    ],
)
def test_kafka_ports_that_clash_or_overflow_are_refused(
    tmp_path: Path, kafka_base_port: int, refusal: str
) -> None:
    with pytest.raises(
        ReplogError, match=re.escape(f"--kafka-base-port {kafka_base_port}: {refusal}")
    ):
        LocalCluster.plan(str(tmp_path / "c"), 2, 29092, kafka_base_port=kafka_base_port)
