"""The metrics endpoint, its node properties, and where a local cluster puts each node's."""

from __future__ import annotations

import json
import socket
import urllib.request
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter

from replog.cli.local_cluster import LocalCluster
from replog.config import parse_properties
from replog.errors import ConfigError, ReplogError
from replog.server.config.node_config import NodeConfig
from replog.server.metrics.http_endpoint import MetricsEndpoint


def test_endpoint_serves_its_registry_and_releases_the_port() -> None:
    registry = CollectorRegistry()
    Counter("replog_probe", "a test counter", registry=registry).inc(7)
    endpoint = MetricsEndpoint(registry, "127.0.0.1", 0)
    endpoint.start()
    try:
        assert endpoint.port != 0
        with urllib.request.urlopen(endpoint.url, timeout=5) as response:
            text = response.read().decode()
        assert "replog_probe_total 7.0" in text
    finally:
        endpoint.stop()
    with socket.socket() as again:  # free for a restarted node (as `cluster` checks ports)
        again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        again.bind(("127.0.0.1", endpoint.port))


def test_endpoint_on_a_port_in_use_names_the_address() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        endpoint = MetricsEndpoint(CollectorRegistry(), "127.0.0.1", port)
        with pytest.raises(OSError, match=f"metrics endpoint cannot listen on 127.0.0.1:{port}"):
            endpoint.start()


def node_properties(**extra: str) -> dict[str, str]:
    base = {
        "process.roles": "controller",
        "node.id": "1",
        "cluster.id": "abc",
        "controller.quorum.voters": "1@127.0.0.1:9093",
        "listeners": "CONTROLLER://127.0.0.1:9093",
        "log.dirs": "/tmp/x",
    }
    base.update({key.replace("_", "."): value for key, value in extra.items()})
    return base


def test_metrics_properties() -> None:
    defaults = NodeConfig.from_properties(node_properties())
    assert (defaults.metrics_port, defaults.metrics_host) == (0, "127.0.0.1")  # no endpoint
    set_ = NodeConfig.from_properties(node_properties(metrics_port="9400", metrics_host="0.0.0.0"))
    assert (set_.metrics_port, set_.metrics_host) == (9400, "0.0.0.0")
    with pytest.raises(ConfigError, match=r"metrics\.port='x'"):
        NodeConfig.from_properties(node_properties(metrics_port="x"))
    with pytest.raises(ConfigError, match=r"metrics\.port=70000"):
        NodeConfig.from_properties(node_properties(metrics_port="70000"))
    with pytest.raises(ConfigError, match=r"metrics\.host"):
        NodeConfig.from_properties(node_properties(metrics_host=" "))


def test_local_cluster_assigns_metrics_ports_and_records_them(tmp_path: Path) -> None:
    cluster = LocalCluster.plan(str(tmp_path), 3, 19092)
    assert [n.metrics_url for n in cluster.nodes] == [
        f"http://127.0.0.1:{port}/metrics" for port in (19192, 19193, 19194)
    ]
    cluster.write()
    properties = parse_properties(Path(cluster.node(2).config_path).read_text())
    assert (properties["metrics.host"], properties["metrics.port"]) == ("127.0.0.1", "19193")
    assert NodeConfig.from_properties(properties).metrics_port == 19193
    document = json.loads(Path(LocalCluster.file_path(str(tmp_path))).read_text())
    assert document["nodes"][0]["metrics"] == "http://127.0.0.1:19192/metrics"
    loaded = LocalCluster.load(str(tmp_path))
    assert [n.metrics_address for n in loaded.nodes] == [n.metrics_address for n in cluster.nodes]


def test_a_cluster_file_without_metrics_still_loads(tmp_path: Path) -> None:
    LocalCluster.plan(str(tmp_path), 1, 19092).write()
    path = Path(LocalCluster.file_path(str(tmp_path)))
    document = json.loads(path.read_text())
    del document["nodes"][0]["metrics"]
    path.write_text(json.dumps(document))
    (node,) = LocalCluster.load(str(tmp_path)).nodes
    assert node.metrics_url is None
    assert "metrics.port" not in LocalCluster.load(str(tmp_path)).node_properties(node)
    document["nodes"][0]["metrics"] = "127.0.0.1:1"
    path.write_text(json.dumps(document))
    with pytest.raises(ReplogError, match="expected http://host:port/metrics"):
        LocalCluster.load(str(tmp_path))


def test_base_port_leaves_room_for_the_metrics_ports(tmp_path: Path) -> None:
    LocalCluster.plan(str(tmp_path), 3, 65536 - 3 - 100)
    with pytest.raises(ReplogError, match=r"--base-port 65434: ports 65434\.\.65536"):
        LocalCluster.plan(str(tmp_path), 3, 65434)
