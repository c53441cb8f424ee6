"""A local cluster's listeners: `server.properties` names replog's gRPC listener `CONTROLLER`
(Kafka's `PLAINTEXT` is left for a Kafka-protocol listener), and `cluster start` shows each
listener by what it serves, so a combined node is not labelled `CONTROLLER://` although clients
connect there."""

from __future__ import annotations

from pathlib import Path

import pytest

from replog.cli.local_cluster import LocalCluster
from replog.config import parse_properties
from replog.server.node_config import NodeConfig


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
        assert node.listener_summary == f"127.0.0.1:{port} (gRPC: {served})"
        assert "CONTROLLER://" not in node.listener_summary
        properties = parse_properties(Path(node.config_path).read_text())
        assert properties["listeners"] == f"CONTROLLER://127.0.0.1:{port}"
        assert properties["controller.listener.names"] == "CONTROLLER"
        assert NodeConfig.from_properties(properties).listener == f"127.0.0.1:{port}"
        assert node.controller_address == f"127.0.0.1:{port}"
