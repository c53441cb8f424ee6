"""ConfigControl: Kafka's config names and types, IncrementalAlterConfigs, replay, defaults."""

from __future__ import annotations

import pytest

from replog.errors import (
    BrokerIdNotRegisteredError,
    InvalidConfigError,
    InvalidRequestError,
    KafkaError,
    UnknownTopicOrPartitionError,
)
from replog.quorum.controller.config_control import (
    AlterConfigOp,
    AlterConfigOpType,
    ConfigControl,
    broker_resource,
    group_resource,
    topic_resource,
)
from replog.quorum.controller.config_definitions import BROKER_CONFIGS, TOPIC_CONFIGS
from replog.quorum.metadata.image import ConfigResource
from replog.quorum.metadata.records import ConfigRecord, ConfigResourceType
from replog.timeline import SnapshotRegistry

SET, DELETE, APPEND, SUBTRACT = (
    AlterConfigOpType.SET,
    AlterConfigOpType.DELETE,
    AlterConfigOpType.APPEND,
    AlterConfigOpType.SUBTRACT,
)
TOPIC = topic_resource("orders")


@pytest.fixture
def configs() -> ConfigControl:
    return ConfigControl(SnapshotRegistry())


def alter(
    configs: ConfigControl,
    changes: dict[ConfigResource, list[AlterConfigOp]],
    topics: tuple[str, ...] = ("orders",),
    brokers: tuple[int, ...] = (1, 2, 3),
    replaced: tuple[ConfigResource, ...] = (),
) -> dict[ConfigResource, KafkaError | None]:
    """Alter and replay the records at once; return the per-resource outcome."""
    result = configs.incremental_alter_configs(
        changes,
        topic_exists=lambda name: name in topics,
        registered_brokers=lambda: brokers,
        replaced=replaced,
    )
    for offset, record in enumerate(result.records):
        assert isinstance(record, ConfigRecord)
        configs.replay(record, offset)
    return result.response


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("min.insync.replicas", "2"),
        ("unclean.leader.election.enable", "TRUE"),
        ("retention.ms", "-1"),
        ("retention.ms", "86400000"),
        ("retention.bytes", "-1"),
        ("retention.bytes", "1099511627776"),
        ("segment.bytes", "64"),
        ("segment.index.bytes", "48"),
        ("cleanup.policy", "compact,delete"),
        ("cleanup.policy", "compact"),
        ("max.message.bytes", "0"),
        ("compression.type", "zstd"),
        ("message.timestamp.type", "LogAppendTime"),
        ("segment.ms", " 3600000 "),
        # Kafka's readings, which brokers and controller must share: list items trimmed, an
        # empty list, any negative size bound.
        ("cleanup.policy", "compact, delete"),
        ("cleanup.policy", ""),
        ("retention.bytes", "-2"),
        ("message.timestamp.type", " LogAppendTime "),  # Kafka trims strings
        ("segment.ms", "+3600000"),
    ],
)
def test_valid_topic_configs(configs: ConfigControl, name: str, value: str) -> None:
    configs.validate(TOPIC, name, value)


@pytest.mark.parametrize(
    ("name", "value", "reason"),
    [
        ("min.insync.replicas", "0", "must be at least 1"),
        ("min.insync.replicas", "two", "not a valid int"),
        ("min.insync.replicas", "2147483648", "out of the int range"),
        ("unclean.leader.election.enable", "yes", "expected true or false"),
        ("retention.ms", "-2", "must be at least -1"),
        ("retention.bytes", "9223372036854775808", "out of the long range"),
        ("segment.bytes", "63", "must be at least 64"),
        ("segment.index.bytes", "47", "must be at least 48"),
        ("cleanup.policy", "compact,forever", "'forever' is not one of compact, delete"),
        ("max.message.bytes", "-1", "must be at least 0"),
        ("compression.type", "brotli", "must be one of"),
        # Python's int() reads these; Kafka does not.
        ("segment.bytes", "1_000_000", "not a valid int"),
        ("retention.ms", "86_400_000", "not a valid long"),
        ("segment.bytes", "\u0661\u0660\u0660\u0660", "not a valid int"),
        ("cleanup.policy", "delete,", "'' is not one of compact, delete"),
    ],
)
def test_invalid_values_are_invalid_config_naming_the_key(
    configs: ConfigControl, name: str, value: str, reason: str
) -> None:
    with pytest.raises(InvalidConfigError) as raised:
        configs.validate(TOPIC, name, value)
    message = str(raised.value)
    assert f"topic 'orders': invalid value {value!r} for config {name}" in message
    assert reason in message
    assert raised.value.code == 40


def test_unknown_keys_are_invalid_config(configs: ConfigControl) -> None:
    with pytest.raises(
        InvalidConfigError, match=r"topic 'orders': unknown config 'retention.hours'"
    ):
        configs.validate(TOPIC, "retention.hours", "1")
    # Broker-level names are not topic configs, and the other way round.
    with pytest.raises(InvalidConfigError, match=r"unknown config 'log.retention.ms'"):
        configs.validate(TOPIC, "log.retention.ms", "1")
    with pytest.raises(InvalidConfigError, match="cluster default broker config: unknown"):
        configs.validate(broker_resource(), "retention.ms", "1")


def test_every_topic_config_has_a_valid_default_and_broker_synonym() -> None:
    for definition in TOPIC_CONFIGS.values():
        definition.parse(definition.default)
        if definition.broker_name is not None:
            assert BROKER_CONFIGS[definition.broker_name].default == definition.default


def test_broker_resources_are_ids_or_the_cluster_default(configs: ConfigControl) -> None:
    configs.validate(broker_resource(3), "log.retention.ms", "1000")
    configs.validate(broker_resource(), "min.insync.replicas", "2")
    with pytest.raises(InvalidRequestError, match="'b1' is neither a broker id"):
        configs.validate(
            ConfigResource(ConfigResourceType.BROKER, "b1"), "min.insync.replicas", "2"
        )


def test_set_and_delete(configs: ConfigControl) -> None:
    outcome = alter(
        configs,
        {
            TOPIC: [
                AlterConfigOp("retention.ms", SET, "1000"),
                AlterConfigOp("segment.ms", SET, "9"),
            ]
        },
    )
    assert outcome == {TOPIC: None}
    assert configs.describe(TOPIC) == {"retention.ms": "1000", "segment.ms": "9"}
    alter(configs, {TOPIC: [AlterConfigOp("retention.ms", DELETE)]})
    assert configs.describe(TOPIC) == {"segment.ms": "9"}
    alter(configs, {TOPIC: [AlterConfigOp("segment.ms", DELETE)]})
    # A resource with no keys left disappears.
    assert configs.resources() == []


def test_a_replaced_resource_keeps_only_the_keys_given(configs: ConfigControl) -> None:
    """Kafka's legacy AlterConfigs: the keys set before and not given are deleted by the
    controller from its own state, whatever the asking broker's image held."""
    other = topic_resource("payments")
    set_both = [AlterConfigOp("retention.ms", SET, "1000"), AlterConfigOp("segment.ms", SET, "9")]
    alter(configs, {TOPIC: set_both, other: set_both}, topics=("orders", "payments"))
    outcome = alter(
        configs,
        {TOPIC: [AlterConfigOp("cleanup.policy", SET, "compact")], other: []},
        topics=("orders", "payments"),
        replaced=(TOPIC,),
    )
    assert outcome == {TOPIC: None, other: None}
    assert configs.describe(TOPIC) == {"cleanup.policy": "compact"}
    assert configs.describe(other) == {"retention.ms": "1000", "segment.ms": "9"}


@pytest.mark.parametrize("resource", [TOPIC, broker_resource(1), broker_resource()])
def test_deleting_an_unknown_key_is_a_no_op_and_setting_one_is_refused(
    configs: ConfigControl, resource: ConfigResource
) -> None:
    """Kafka's tools clear keys replog may not know (`kafka-reassign-partitions --verify`
    deletes the replication throttles): Kafka writes nothing for a delete of a key not set."""
    known = "retention.ms" if resource is TOPIC else "log.retention.ms"
    alter(configs, {resource: [AlterConfigOp(known, SET, "1000")]})
    unknown = AlterConfigOp("no.such.config", DELETE)
    result = configs.incremental_alter_configs(
        {resource: [unknown]}, topic_exists=lambda _: True, registered_brokers=lambda: (1,)
    )
    assert result.response == {resource: None} and list(result.records) == []
    outcome = alter(configs, {resource: [unknown, AlterConfigOp(known, DELETE)]})
    assert outcome == {resource: None}
    assert configs.describe(resource) == {}
    refused = alter(configs, {resource: [AlterConfigOp("no.such.config", SET, "1")]})[resource]
    assert isinstance(refused, InvalidConfigError)
    assert "unknown config 'no.such.config'" in str(refused)


def test_append_and_subtract_work_on_lists_only(configs: ConfigControl) -> None:
    alter(configs, {TOPIC: [AlterConfigOp("cleanup.policy", APPEND, "compact")]})
    assert configs.describe(TOPIC) == {"cleanup.policy": "delete,compact"}
    alter(configs, {TOPIC: [AlterConfigOp("cleanup.policy", SUBTRACT, "delete")]})
    assert configs.describe(TOPIC) == {"cleanup.policy": "compact"}
    outcome = alter(configs, {TOPIC: [AlterConfigOp("retention.ms", APPEND, "5")]})
    error = outcome[TOPIC]
    assert isinstance(error, InvalidConfigError)
    assert "APPEND applies only to list configs, and retention.ms is a long" in str(error)


def test_each_resource_succeeds_or_fails_alone(configs: ConfigControl) -> None:
    broker = broker_resource(1)
    missing = topic_resource("missing")
    outcome = alter(
        configs,
        {
            TOPIC: [AlterConfigOp("min.insync.replicas", SET, "0")],
            broker: [AlterConfigOp("log.retention.ms", SET, "5000")],
            missing: [AlterConfigOp("retention.ms", SET, "5")],
        },
    )
    assert isinstance(outcome[TOPIC], InvalidConfigError)
    assert "min.insync.replicas" in str(outcome[TOPIC])
    assert outcome[broker] is None
    assert isinstance(outcome[missing], UnknownTopicOrPartitionError)
    assert configs.describe(broker) == {"log.retention.ms": "5000"}
    assert configs.describe(TOPIC) == {}


def test_a_broker_that_is_not_registered_is_refused_naming_the_registered_ones(
    configs: ConfigControl,
) -> None:
    """Kafka's controller refuses a config resource of a node id it does not know
    (BROKER_ID_NOT_REGISTERED); the cluster default needs no broker."""
    absent = broker_resource(9)
    outcome = alter(
        configs,
        {
            absent: [AlterConfigOp("log.retention.ms", SET, "5000")],
            broker_resource(): [AlterConfigOp("log.retention.ms", SET, "6000")],
        },
        brokers=(3, 1, 2),
    )
    error = outcome[absent]
    assert isinstance(error, BrokerIdNotRegisteredError)
    assert "broker 9: no broker with that id is registered (registered brokers: 1, 2, 3)" in (
        str(error)
    )
    assert configs.describe(absent) == {}
    assert configs.describe(broker_resource()) == {"log.retention.ms": "6000"}
    outcome = alter(configs, {absent: [AlterConfigOp("log.retention.ms", SET, "1")]}, brokers=())
    assert "(registered brokers: none)" in str(outcome[absent])


def test_a_key_named_twice_in_one_resource_is_invalid(configs: ConfigControl) -> None:
    outcome = alter(
        configs,
        {
            TOPIC: [
                AlterConfigOp("retention.ms", SET, "1"),
                AlterConfigOp("retention.ms", DELETE),
            ]
        },
    )
    assert isinstance(outcome[TOPIC], InvalidRequestError)


def test_effective_topic_values_fall_back_to_the_cluster_default_then_kafka(
    configs: ConfigControl,
) -> None:
    assert configs.min_insync_replicas("orders") == 1
    assert not configs.unclean_leader_election_enabled("orders")
    alter(
        configs,
        {
            broker_resource(): [
                AlterConfigOp("min.insync.replicas", SET, "2"),
                AlterConfigOp("unclean.leader.election.enable", SET, "true"),
            ]
        },
    )
    assert configs.min_insync_replicas("orders") == 2
    assert configs.unclean_leader_election_enabled("orders")
    alter(configs, {TOPIC: [AlterConfigOp("unclean.leader.election.enable", SET, "false")]})
    assert not configs.unclean_leader_election_enabled("orders")
    assert configs.topic_config("orders", "retention.ms") == "604800000"


def test_reads_at_an_offset_and_topic_deletion(configs: ConfigControl) -> None:
    registry = SnapshotRegistry()
    configs = ConfigControl(registry)
    configs.replay(ConfigRecord(ConfigResourceType.TOPIC, "orders", "retention.ms", "1"), 0)
    registry.get_or_create_snapshot(0)
    configs.delete_topic_configs("orders")
    assert configs.describe(TOPIC) == {}
    assert configs.describe(TOPIC, offset=0) == {"retention.ms": "1"}
    assert configs.snapshot_records(0) == [
        ConfigRecord(ConfigResourceType.TOPIC, "orders", "retention.ms", "1")
    ]
    registry.revert_to_snapshot(0)
    assert configs.describe(TOPIC) == {"retention.ms": "1"}


def test_config_records_for_a_new_topic_are_validated(configs: ConfigControl) -> None:
    new = topic_resource("fresh")
    records = configs.config_records(new, {"segment.bytes": "1024", "cleanup.policy": "compact"})
    assert records == [
        ConfigRecord(ConfigResourceType.TOPIC, "fresh", "cleanup.policy", "compact"),
        ConfigRecord(ConfigResourceType.TOPIC, "fresh", "segment.bytes", "1024"),
    ]
    with pytest.raises(InvalidConfigError, match=r"segment.bytes"):
        configs.validate_topic_configs("fresh", {"segment.bytes": "1"})


def test_the_controller_refuses_segment_sizes_a_broker_log_cannot_use() -> None:
    from replog.storage.log_config import MIN_SEGMENT_BYTES, MIN_SEGMENT_INDEX_BYTES

    assert TOPIC_CONFIGS["segment.bytes"].minimum == MIN_SEGMENT_BYTES
    assert TOPIC_CONFIGS["segment.index.bytes"].minimum == MIN_SEGMENT_INDEX_BYTES


@pytest.mark.parametrize(
    "name",
    [
        "auto.leader.rebalance.enable",
        "leader.imbalance.check.interval.seconds",
        "log.retention.check.interval.ms",
        "replica.lag.time.max.ms",
    ],
)
@pytest.mark.parametrize("broker_id", [None, 1])
def test_read_only_broker_configs_cannot_be_altered(name: str, broker_id: int | None) -> None:
    # Only the node's server.properties sets these, at start-up: a dynamic value would be
    # stored and described but never used. Kafka answers INVALID_REQUEST naming the key.
    configs = ConfigControl(SnapshotRegistry(), {name: BROKER_CONFIGS[name].default})
    resource = broker_resource(broker_id)
    value = "false" if name == "auto.leader.rebalance.enable" else "1000"
    outcome = alter(configs, {resource: [AlterConfigOp(name, SET, value)]})
    error = outcome[resource]
    assert isinstance(error, InvalidRequestError)
    assert f"cannot update these configs dynamically: {name}" in str(error)
    assert configs.describe(resource) == {}
    # A value stored before (an older controller accepted it) is ignored and may be deleted.
    configs.replay(ConfigRecord(ConfigResourceType.BROKER, resource.resource_name, name, value), 0)
    (described,) = configs.describe_configs(resource, [name], None, exists=True)
    assert described.source.name == "STATIC_BROKER_CONFIG"
    assert alter(configs, {resource: [AlterConfigOp(name, DELETE)]}) == {resource: None}
    assert configs.describe(resource) == {}


def test_dynamic_broker_configs_stay_alterable(configs: ConfigControl) -> None:
    resource = broker_resource()
    changes = [
        AlterConfigOp("message.max.bytes", SET, "100"),
        AlterConfigOp("log.retention.ms", SET, "-1"),
        AlterConfigOp("min.insync.replicas", SET, "2"),
        AlterConfigOp("transaction.partition.verification.enable", SET, "false"),
    ]
    assert alter(configs, {resource: changes}) == {resource: None}
    assert configs.describe(resource) == {
        "log.retention.ms": "-1",
        "message.max.bytes": "100",
        "min.insync.replicas": "2",
        "transaction.partition.verification.enable": "false",
    }
    bad = [AlterConfigOp("transaction.partition.verification.enable", SET, "off")]
    refused = alter(configs, {resource: bad})[resource]
    assert isinstance(refused, InvalidConfigError)
    assert "transaction.partition.verification.enable" in str(refused)


# --- group configs (KIP-848's GroupConfig) ------------------------------------------------------

GROUP = group_resource("billing")
SESSION, INTERVAL = "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"


def test_a_group_config_is_set_within_the_brokers_bounds_and_described() -> None:
    static = {
        "group.consumer.min.session.timeout.ms": "10000",
        "group.consumer.session.timeout.ms": "20000",
    }
    configs = ConfigControl(SnapshotRegistry(), static)
    # Any group id, existing or not, has configs.
    assert alter(configs, {GROUP: [AlterConfigOp(SESSION, SET, "12000")]}) == {GROUP: None}
    assert configs.describe(GROUP) == {SESSION: "12000"}
    described = {
        c.name: (c.value, c.source.value)
        for c in configs.describe_configs(GROUP, None, None, exists=True)
    }
    assert described == {
        SESSION: ("12000", "GROUP_CONFIG"),
        INTERVAL: ("5000", "DEFAULT_CONFIG"),
    }
    assert alter(configs, {GROUP: [AlterConfigOp(SESSION, DELETE)]}) == {GROUP: None}
    (session,) = configs.describe_configs(GROUP, [SESSION], None, exists=True)
    assert (session.value, session.source.value) == ("20000", "STATIC_BROKER_CONFIG")


@pytest.mark.parametrize(
    ("ops", "message"),
    [
        ([(SESSION, "44999")], "must be greater than or equal to group.consumer.min.session"),
        ([(SESSION, "60001")], "must be less than or equal to group.consumer.max.session"),
        ([(INTERVAL, "4999")], "must be greater than or equal to group.consumer.min.heartbeat"),
        ([(INTERVAL, "15001")], "must be less than or equal to group.consumer.max.heartbeat"),
        ([(SESSION, "abc")], "invalid value 'abc'"),
        ([("consumer.nonsense", "1")], "unknown config"),
    ],
)
def test_a_group_config_outside_the_bounds_is_invalid_config_naming_the_bound(
    configs: ConfigControl, ops: list[tuple[str, str]], message: str
) -> None:
    outcome = alter(configs, {GROUP: [AlterConfigOp(k, SET, v) for k, v in ops]})
    assert isinstance(outcome[GROUP], InvalidConfigError)
    assert message in str(outcome[GROUP]) and "group 'billing'" in str(outcome[GROUP])
    assert configs.describe(GROUP) == {}


def test_a_group_session_must_stay_above_its_interval() -> None:
    static = {
        "group.consumer.max.heartbeat.interval.ms": "60000",
        "group.consumer.min.session.timeout.ms": "6000",
    }
    configs = ConfigControl(SnapshotRegistry(), static)
    outcome = alter(configs, {GROUP: [AlterConfigOp(INTERVAL, SET, "50000")]})
    assert "consumer.session.timeout.ms must be greater than consumer.heartbeat" in str(
        outcome[GROUP]
    )
    both = [AlterConfigOp(INTERVAL, SET, "50000"), AlterConfigOp(SESSION, SET, "55000")]
    assert alter(configs, {GROUP: both}) == {GROUP: None}
    # The records replay (a failover: every broker's image has them) and snapshot.
    assert [(r.resource_type, r.name) for r in configs.snapshot_records()] == [
        (ConfigResourceType.GROUP, INTERVAL),
        (ConfigResourceType.GROUP, SESSION),
    ]


def test_a_group_resource_must_name_a_group(configs: ConfigControl) -> None:
    empty = group_resource("")
    outcome = alter(configs, {empty: [AlterConfigOp(SESSION, SET, "50000")]})
    assert isinstance(outcome[empty], InvalidRequestError)


# --- keys that bound each other ------------------------------------------------------------------

LAG_CONFLICT = "conflict topic config setting min.compaction.lag.ms (2000) > max.compaction.lag.ms"


def test_a_topic_whose_min_compaction_lag_exceeds_its_max_is_refused(
    configs: ConfigControl,
) -> None:
    # Kafka's LogConfig.validateValues, on the effective values: the pair set together, one
    # against the other's value set before, or against the broker default of the other.
    outcome = alter(
        configs,
        {
            TOPIC: [
                AlterConfigOp("min.compaction.lag.ms", SET, "2000"),
                AlterConfigOp("max.compaction.lag.ms", SET, "1000"),
            ]
        },
    )
    assert isinstance(outcome[TOPIC], InvalidConfigError)
    assert str(outcome[TOPIC]) == f"topic 'orders': {LAG_CONFLICT} (1000)"
    assert configs.describe(TOPIC) == {}
    assert alter(configs, {TOPIC: [AlterConfigOp("max.compaction.lag.ms", SET, "1000")]}) == {
        TOPIC: None
    }
    refused = alter(configs, {TOPIC: [AlterConfigOp("min.compaction.lag.ms", SET, "2000")]})
    assert LAG_CONFLICT in str(refused[TOPIC])
    # Equal is accepted; deleting the max leaves the broker default's, which is far above.
    assert alter(configs, {TOPIC: [AlterConfigOp("min.compaction.lag.ms", SET, "1000")]}) == {
        TOPIC: None
    }
    assert alter(
        configs,
        {
            TOPIC: [
                AlterConfigOp("max.compaction.lag.ms", DELETE),
                AlterConfigOp("min.compaction.lag.ms", SET, "2000"),
            ]
        },
    ) == {TOPIC: None}
    # A cluster default below the topic's own minimum makes its topics' alterations conflict.
    default = broker_resource()
    max_default = AlterConfigOp("log.cleaner.max.compaction.lag.ms", SET, "1500")
    assert alter(configs, {default: [max_default]}) == {default: None}
    refused = alter(configs, {TOPIC: [AlterConfigOp("retention.ms", SET, "1")]})
    assert str(refused[TOPIC]) == f"topic 'orders': {LAG_CONFLICT} (1500)"


def test_create_topics_refuses_a_min_compaction_lag_above_the_max() -> None:
    # Against the node's static default of the other key (server.properties).
    configs = ConfigControl(SnapshotRegistry(), {"log.cleaner.max.compaction.lag.ms": "1000"})
    with pytest.raises(InvalidConfigError) as refused:
        configs.validate_topic_configs("fresh", {"min.compaction.lag.ms": "2000"})
    assert str(refused.value) == f"topic 'fresh': {LAG_CONFLICT} (1000)"
    configs.validate_topic_configs("fresh", {"min.compaction.lag.ms": "1000"})
    configs.validate_topic_configs(
        "fresh", {"min.compaction.lag.ms": "2000", "max.compaction.lag.ms": "2000"}
    )


def test_the_broker_defaults_of_the_compaction_lags_must_agree(configs: ConfigControl) -> None:
    default = broker_resource()
    ops = [AlterConfigOp("log.cleaner.min.compaction.lag.ms", SET, "2000")]
    ops.append(AlterConfigOp("log.cleaner.max.compaction.lag.ms", SET, "1000"))
    outcome = alter(configs, {default: ops})
    assert str(outcome[default]) == (
        "the cluster default broker config: conflict topic config setting "
        "log.cleaner.min.compaction.lag.ms (2000) > log.cleaner.max.compaction.lag.ms (1000)"
    )
    # A broker's own value against the cluster default's.
    assert alter(configs, {default: ops[1:]}) == {default: None}
    broker = broker_resource(1)
    assert "log.cleaner.min.compaction.lag.ms (2000)" in str(
        alter(configs, {broker: ops[:1]})[broker]
    )
    # So do a node's static configs: it does not start (Kafka's broker neither).
    with pytest.raises(ValueError, match="conflict topic config setting"):
        ConfigControl(
            SnapshotRegistry(),
            {"log.cleaner.min.compaction.lag.ms": "2", "log.cleaner.max.compaction.lag.ms": "1"},
        )


@pytest.mark.parametrize("broker_id", [None, 1])
def test_the_log_cleaners_settings_are_alterable_on_a_running_broker(
    configs: ConfigControl, broker_id: int | None
) -> None:
    # Kafka's LogCleaner.ReconfigurableConfigs (its enable flag stays read-only).
    resource = broker_resource(broker_id)
    changes = [
        AlterConfigOp("log.cleaner.threads", SET, "2"),
        AlterConfigOp("log.cleaner.dedupe.buffer.size", SET, "1048576"),
        AlterConfigOp("log.cleaner.io.max.bytes.per.second", SET, "1000000.5"),
        AlterConfigOp("log.cleaner.backoff.ms", SET, "100"),
    ]
    assert alter(configs, {resource: changes}) == {resource: None}
    described = configs.describe_configs(resource, [op.name for op in changes], None, exists=True)
    assert {d.name: d.value for d in described} == {op.name: op.value for op in changes}
    assert {d.source.name for d in described} == {
        "DYNAMIC_DEFAULT_BROKER_CONFIG" if broker_id is None else "DYNAMIC_BROKER_CONFIG"
    }
    enable = alter(configs, {resource: [AlterConfigOp("log.cleaner.enable", SET, "false")]})
    assert isinstance(enable[resource], InvalidRequestError)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        # A rate of 0 would stop the cleaner; the brokers refuse it.
        (
            [("log.cleaner.io.max.bytes.per.second", "0")],
            "invalid value '0' for config log.cleaner.io.max.bytes.per.second: must be above 0",
        ),
        (
            [("log.cleaner.threads", "2"), ("log.cleaner.dedupe.buffer.size", "24")],
            "log.cleaner.dedupe.buffer.size (24) must hold one 24-byte key-map entry for each of "
            "the 2 log.cleaner.threads",
        ),
        # Kafka's bounds on a change of the thread count: half to double the current one.
        (
            [("log.cleaner.threads", "3")],
            "log.cleaner.threads (3): log cleaner threads cannot be increased to more than "
            "double the current value 1",
        ),
    ],
)
def test_cleaner_settings_a_broker_could_not_take_are_refused(
    configs: ConfigControl, changes: list[tuple[str, str]], message: str
) -> None:
    resource = broker_resource()
    ops = [AlterConfigOp(name, SET, value) for name, value in changes]
    outcome = alter(configs, {resource: ops})
    assert isinstance(outcome[resource], InvalidConfigError)
    assert message in str(outcome[resource])
    assert configs.describe(resource) == {}


def test_the_cleaner_threads_move_within_half_and_double_of_their_effective_value() -> None:
    configs = ConfigControl(SnapshotRegistry(), {"log.cleaner.threads": "4"})
    default, broker = broker_resource(), broker_resource(2)

    def threads(resource: ConfigResource, value: str) -> KafkaError | None:
        return alter(configs, {resource: [AlterConfigOp("log.cleaner.threads", SET, value)]})[
            resource
        ]

    assert "reduced to less than half the current value 4" in str(threads(default, "1"))
    assert threads(default, "2") is None
    assert "more than double the current value 2" in str(threads(broker, "5"))
    assert threads(broker, "4") is None
    assert threads(broker, "8") is None
