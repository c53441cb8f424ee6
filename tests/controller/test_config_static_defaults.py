"""ConfigControl below the dynamic configs: the node's static broker configs, DescribeConfigs
sources, and IncrementalAlterConfigs with validate_only."""

from __future__ import annotations

import pytest

from replog.quorum.controller.config_control import (
    AlterConfigOp,
    AlterConfigOpType,
    ConfigControl,
    ConfigSource,
    broker_resource,
    topic_resource,
)
from replog.quorum.controller.controller_config import ControllerConfig
from replog.quorum.metadata.records import ConfigRecord
from replog.timeline import SnapshotRegistry

SET = AlterConfigOpType.SET


def configs_with(static: dict[str, str]) -> ConfigControl:
    return ConfigControl(SnapshotRegistry(), static)


def replay_all(configs: ConfigControl, records: tuple[object, ...]) -> None:
    for offset, record in enumerate(records):
        assert isinstance(record, ConfigRecord)
        configs.replay(record, offset)


def test_static_configs_sit_below_the_dynamic_cluster_default() -> None:
    configs = configs_with({"unclean.leader.election.enable": "true", "log.retention.ms": "5"})
    assert configs.unclean_leader_election_enabled("orders")
    assert configs.topic_config("orders", "retention.ms") == "5"
    result = configs.incremental_alter_configs(
        {broker_resource(): [AlterConfigOp("log.retention.ms", SET, "7")]},
        topic_exists=lambda name: True,
        registered_brokers=lambda: (),
    )
    replay_all(configs, result.records)
    assert configs.topic_config("orders", "retention.ms") == "7"
    result = configs.incremental_alter_configs(
        {topic_resource("orders"): [AlterConfigOp("retention.ms", SET, "9")]},
        topic_exists=lambda name: True,
        registered_brokers=lambda: (),
    )
    replay_all(configs, result.records)
    assert configs.topic_config("orders", "retention.ms") == "9"


@pytest.mark.parametrize(
    ("static", "named"),
    [
        ({"no.such.config": "1"}, "no.such.config"),
        ({"min.insync.replicas": "zero"}, "min.insync.replicas"),
        ({"unclean.leader.election.enable": "maybe"}, "unclean.leader.election.enable"),
    ],
)
def test_bad_static_configs_are_refused_naming_the_key(static: dict[str, str], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        configs_with(static)
    with pytest.raises(ValueError, match=named):
        ControllerConfig(node_id=1, cluster_id="c", static_broker_configs=static)


def test_describe_reports_every_known_key_with_its_source() -> None:
    configs = configs_with({"min.insync.replicas": "2"})
    described = configs.describe_configs(topic_resource("t"), None, None, exists=True)
    by_name = {c.name: c for c in described}
    assert [c.name for c in described] == sorted(by_name)
    assert by_name["min.insync.replicas"].source is ConfigSource.STATIC_BROKER_CONFIG
    assert by_name["min.insync.replicas"].value == "2"
    assert by_name["cleanup.policy"].is_default and by_name["cleanup.policy"].value == "delete"


def test_validate_only_writes_nothing_but_reports_errors() -> None:
    configs = configs_with({})
    result = configs.incremental_alter_configs(
        {
            broker_resource(): [AlterConfigOp("log.retention.ms", SET, "7")],
            topic_resource("t"): [AlterConfigOp("retention.ms", SET, "soon")],
        },
        topic_exists=lambda name: True,
        registered_brokers=lambda: (),
        validate_only=True,
    )
    assert result.records == ()
    assert result.response[broker_resource()] is None
    error = result.response[topic_resource("t")]
    assert error is not None and "retention.ms" in str(error)


def test_controller_config_checks_the_defaults_of_create_topics() -> None:
    with pytest.raises(ValueError, match=r"num\.partitions"):
        ControllerConfig(node_id=1, cluster_id="c", default_num_partitions=0)
    with pytest.raises(ValueError, match=r"default\.replication\.factor"):
        ControllerConfig(node_id=1, cluster_id="c", default_replication_factor=0)
