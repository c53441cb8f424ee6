"""NodeConfig: Kafka's property names for the controller, its static broker configs, the
snapshot schedule and the cluster id; every problem names the key."""

from __future__ import annotations

import pytest

from replog.errors import ConfigError
from replog.server.node_config import NodeConfig


def properties(**extra: str) -> dict[str, str]:
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


def test_defaults_are_kafkas() -> None:
    config = NodeConfig.from_properties(properties())
    assert config.cluster_id == "abc"
    controller = config.controller
    assert controller is not None
    assert (controller.node_id, controller.cluster_id) == (1, "abc")
    assert controller.broker_session_timeout_ms == 9000
    assert controller.metadata_max_idle_interval_ms == 500
    assert controller.leader_imbalance_check_interval_ms == 300_000
    assert dict(controller.static_broker_configs) == {}
    assert config.broker_heartbeat_interval_ms == 2000
    assert config.snapshot_bytes_max == 20 * 1024 * 1024
    assert config.snapshot_interval_ms == 3_600_000
    assert not config.raw_metadata_appends
    assert config.raft.fetch_port == 0  # replog's own: any free port, told to peers over gRPC
    assert (
        NodeConfig.from_properties(
            properties(**{"controller.quorum.fetch.port": "19500"})
        ).raft.fetch_port
        == 19500
    )


def test_controller_settings_map_from_kafkas_names() -> None:
    config = NodeConfig.from_properties(
        properties(
            broker_session_timeout_ms="4000",
            metadata_max_idle_interval_ms="100",
            num_partitions="6",
            default_replication_factor="3",
            auto_leader_rebalance_enable="false",
            leader_imbalance_check_interval_seconds="30",
            min_insync_replicas="2",
            unclean_leader_election_enable="true",
            broker_heartbeat_interval_ms="500",
        )
    )
    controller = config.controller
    assert controller is not None
    assert controller.broker_session_timeout_ms == 4000
    assert controller.metadata_max_idle_interval_ms == 100
    assert (controller.default_num_partitions, controller.default_replication_factor) == (6, 3)
    assert controller.auto_leader_rebalance_enable is False
    assert controller.leader_imbalance_check_interval_ms == 30_000
    assert dict(controller.static_broker_configs) == {
        "auto.leader.rebalance.enable": "false",
        "min.insync.replicas": "2",
        "unclean.leader.election.enable": "true",
        "leader.imbalance.check.interval.seconds": "30",
    }
    assert config.broker_heartbeat_interval_ms == 500


def test_raw_appends_run_no_controller() -> None:
    config = NodeConfig.from_properties(properties(**{"metadata.log.raw.append.enable": "true"}))
    assert config.raw_metadata_appends and config.controller is None


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"cluster.id": ""}, "cluster.id"),
        ({"broker.session.timeout.ms": "soon"}, "broker.session.timeout.ms"),
        ({"broker.session.timeout.ms": "0"}, "broker.session.timeout.ms"),
        ({"num.partitions": "0"}, "num.partitions"),
        ({"auto.leader.rebalance.enable": "yes"}, "auto.leader.rebalance.enable"),
        ({"min.insync.replicas": "none"}, "min.insync.replicas"),
        ({"metadata.log.max.record.bytes.between.snapshots": "0"}, "between.snapshots"),
        ({"metadata.log.max.snapshot.interval.ms": "-1"}, "snapshot.interval.ms"),
        ({"broker.heartbeat.interval.ms": "0"}, "broker.heartbeat.interval.ms"),
        ({"metadata.log.raw.append.enable": "1"}, "metadata.log.raw.append.enable"),
        ({"controller.quorum.fetch.port": "70000"}, "controller.quorum.fetch.port"),
        ({"controller.quorum.fetch.port": "-1"}, "controller.quorum.fetch.port"),
    ],
)
def test_problems_name_the_key(extra: dict[str, str], named: str) -> None:
    props = properties()
    props.update(extra)
    with pytest.raises(ConfigError, match=named):
        NodeConfig.from_properties(props)
