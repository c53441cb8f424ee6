"""`replog cluster` clusters with fewer than 3 brokers get
`offsets.topic.replication.factor=<brokers>`, so `__consumer_offsets` can be created; larger
ones keep Kafka's default; an override still wins, and the node config still parses."""

from __future__ import annotations

from pathlib import Path

import pytest

from replog.cli.local_cluster import LocalCluster
from replog.config import parse_properties
from replog.server.config.data_plane_config import data_plane_config_from_node
from replog.server.config.node_config import NodeConfig


@pytest.mark.parametrize(("nodes", "written"), [(1, "1"), (2, "2"), (3, None), (5, None)])
def test_small_clusters_lower_the_offsets_topic_replication_factor(
    tmp_path: Path, nodes: int, written: str | None
) -> None:
    cluster = LocalCluster.plan(str(tmp_path / "c"), nodes, 29092)
    cluster.write()
    for node in cluster.nodes:
        properties = parse_properties(Path(node.config_path).read_text())
        assert properties.get("offsets.topic.replication.factor") == written
        config = data_plane_config_from_node(NodeConfig.from_properties(properties))
        assert config.group_coordinator.offsets_topic_replication_factor == int(written or 3)


def test_a_controller_only_cluster_and_an_override(tmp_path: Path) -> None:
    controllers = LocalCluster.plan(str(tmp_path / "c"), 1, 29092, roles=("controller",))
    assert "offsets.topic.replication.factor" not in controllers.node_properties(
        controllers.nodes[0]
    )
    cluster = LocalCluster.plan(str(tmp_path / "d"), 1, 29092)
    properties = cluster.node_properties(
        cluster.nodes[0], {"offsets.topic.replication.factor": "7"}
    )
    assert properties["offsets.topic.replication.factor"] == "7"
