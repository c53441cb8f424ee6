"""NodeConfig: Kafka's property names for the controller, its static broker configs, the
snapshot schedule and the cluster id; every problem names the key, the broker's own settings
included; the static broker configs the controller describes are what the logs use."""

from __future__ import annotations

import re

import pytest

from replog.errors import ConfigError
from replog.quorum.controller.config_control import ConfigControl, topic_resource
from replog.server.config.node_config import NodeConfig
from replog.storage.log_config import BY_DOTTED_NAME, LogConfig
from replog.storage.log_manager import LogManagerConfig
from replog.timeline import SnapshotRegistry


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
    assert config.raft.append_port == 0  # likewise, told to callers over gRPC (AppendEndpoint)
    assert (
        NodeConfig.from_properties(
            properties(**{"controller.quorum.append.port": "19501"})
        ).raft.append_port
        == 19501
    )
    with pytest.raises(ConfigError, match=r"controller\.quorum\.append\.port: must be in"):
        NodeConfig.from_properties(properties(**{"controller.quorum.append.port": "65536"}))


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
        ({"controller.quorum.append.port": "-1"}, "controller.quorum.append.port"),
        (
            {"controller.quorum.fetch.port": "19500", "controller.quorum.append.port": "19500"},
            "controller.quorum.append.port: 19500 is controller.quorum.fetch.port's too",
        ),
        # Kafka refuses Python's digit separators: `1_0` is not 10.
        ({"node.id": "1_0"}, "node.id='1_0': must be an integer"),
        ({"num.partitions": "1_0"}, "num.partitions='1_0': must be an integer"),
        ({"metadata.log.dir": ""}, "metadata.log.dir: empty"),
        ({"log.dirs": " , "}, "log.dirs: names no directory"),  # was an IndexError
        ({"metadata.log.dir": " "}, "metadata.log.dir: empty"),
        # The broker's log and replica manager settings, checked before anything starts.
        ({"log.retention.hours": "abc"}, "log.retention.hours='abc': must be an integer"),
        ({"replica.fetch.wait.max.ms": "60000"}, "replica.fetch.wait.max.ms=60000 must not"),
        ({"segment.bytes": "10"}, "segment.bytes='10': must be an integer >= 64"),
        ({"log.page.cache.tail.bytes": "-5"}, "log.page.cache.tail.bytes='-5'"),
        ({"log.flush.offset.checkpoint.interval.ms": "x"}, "checkpoint.interval.ms='x'"),
        ({"log.retention.check.interval.ms": "-1"}, "log.retention.check.interval.ms=-1"),
        ({"log.initial.task.delay.ms": "-7"}, "log.initial.task.delay.ms=-7"),
        ({"bootstrap.metadata.version": "4.0-IV0"}, "bootstrap.metadata.version='4.0-IV0'"),
        ({"bootstrap.metadata.version": "13"}, "bootstrap.metadata.version must be within 1..12"),
        (
            {"bootstrap.metadata.version": "3.5", "eligible.leader.replicas.enable": "true"},
            "eligible.leader.replicas.enable=true needs bootstrap.metadata.version 3.6-IV0",
        ),
    ],
)
def test_problems_name_the_key(extra: dict[str, str], named: str) -> None:
    props = properties()
    props.update(extra)
    with pytest.raises(ConfigError, match=re.escape(named)):
        NodeConfig.from_properties(props)


@pytest.mark.parametrize(("value", "level"), [("7", 7), ("3.3-IV3", 7), ("3.5", 11)])
def test_bootstrap_metadata_version_takes_a_level_or_its_name(value: str, level: int) -> None:
    props = properties(**{"bootstrap.metadata.version": value})
    controller = NodeConfig.from_properties(props).controller
    assert controller is not None and controller.bootstrap_metadata_version == level


def test_the_metadata_log_defaults_to_the_first_log_dir() -> None:
    assert NodeConfig.from_properties(properties(log_dirs="/a,/b")).metadata_log_dir == "/a"
    metadata = properties(**{"metadata.log.dir": " /m "})
    assert NodeConfig.from_properties(metadata).metadata_log_dir == "/m"


@pytest.mark.parametrize(
    ("extra", "static"),
    [
        ({"log.retention.hours": "24"}, {"log.retention.ms": "86400000"}),
        ({"log.retention.minutes": "5"}, {"log.retention.ms": "300000"}),
        ({"log.retention.hours": "-1"}, {"log.retention.ms": "-1"}),  # Kafka: keep forever
        # Two synonyms: the later line wins, for the logs and for describe alike.
        (
            {"log.retention.ms": "1000", "log.retention.hours": "168"},
            {"log.retention.ms": "604800000"},
        ),
        ({"log.roll.hours": "1"}, {"log.roll.ms": "3600000"}),
        ({"segment.bytes": "1048576"}, {"log.segment.bytes": "1048576"}),
        ({"log.cleanup.policy": "compact, delete"}, {"log.cleanup.policy": "compact,delete"}),
        ({"log.flush.scheduler.interval.ms": "2000"}, {"log.flush.interval.ms": "2000"}),
        (
            {"log.flush.scheduler.interval.ms": "2000", "log.flush.interval.ms": "500"},
            {"log.flush.interval.ms": "500"},
        ),
        ({"min.insync.replicas": "2"}, {"min.insync.replicas": "2"}),
    ],
)
def test_static_broker_configs_are_what_the_logs_use(
    extra: dict[str, str], static: dict[str, str]
) -> None:
    # Synonyms reach the controller under their BROKER_CONFIGS names, or DescribeConfigs would
    # report the default for `log.retention.hours=24` while the logs keep a day, and ignore
    # which of two synonyms won.
    props = properties()
    props.update(extra)
    controller = NodeConfig.from_properties(props).controller
    assert controller is not None
    assert dict(controller.static_broker_configs) == static
    logs_use = LogManagerConfig.from_properties(props).log
    configs = ConfigControl(SnapshotRegistry(), controller.static_broker_configs)
    for described in configs.describe_configs(topic_resource("t"), None, None, exists=True):
        if described.name in BY_DOTTED_NAME:
            field = BY_DOTTED_NAME[described.name][0]
            as_described = LogConfig.from_properties({described.name: described.value})
            assert getattr(as_described, field) == getattr(logs_use, field), described


def test_metadata_retention_limits_are_kafkas_and_negative_means_none() -> None:
    default = NodeConfig.from_properties(properties())
    assert (default.retention_bytes, default.retention_ms) == (104_857_600, 604_800_000)
    limits = {"metadata.max.retention.bytes": "-1", "metadata.max.retention.ms": "+60000"}
    configured = NodeConfig.from_properties(properties() | limits)
    assert (configured.retention_bytes, configured.retention_ms) == (-1, 60_000)
