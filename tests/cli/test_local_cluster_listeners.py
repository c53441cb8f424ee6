"""A local cluster's listeners are named for what they serve, as in Kafka's `listeners`: a node
with the broker role serves clients (and its controller) on `PLAINTEXT`, a controller-only node
on `CONTROLLER` (combined nodes were labelled `CONTROLLER://`, though clients connect there).
`cluster.json` keeps its own key, so clusters written before still load."""

from __future__ import annotations

from pathlib import Path

import pytest

from replog.cli.local_cluster import LocalCluster
from replog.config import parse_properties
from replog.server.node_config import NodeConfig


@pytest.mark.parametrize(
    ("roles", "name"), [(("broker", "controller"), "PLAINTEXT"), (("controller",), "CONTROLLER")]
)
def test_listeners_are_named_for_what_they_serve(
    tmp_path: Path, roles: tuple[str, ...], name: str
) -> None:
    cluster = LocalCluster.plan(str(tmp_path / "c"), 2, 29092, roles=roles)
    cluster.write()
    loaded = LocalCluster.load(str(tmp_path / "c"))
    for node, port in zip(loaded.nodes, (29092, 29093), strict=True):
        assert node.served_listeners == f"{name}://127.0.0.1:{port}"
        properties = parse_properties(Path(node.config_path).read_text())
        assert properties["listeners"] == f"{name}://127.0.0.1:{port}"
        assert properties["controller.listener.names"] == name
        assert NodeConfig.from_properties(properties).listener == f"127.0.0.1:{port}"
        assert node.controller_address == f"127.0.0.1:{port}"
