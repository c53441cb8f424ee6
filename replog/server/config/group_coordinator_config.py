"""The broker settings of the group coordinator, checked once at construction.

Rules: every setting has Kafka's name, default and a lower bound; dotted names are read from
`.properties` in `from_properties`, the one place that maps them to fields. The three
`offsets.topic.*` settings apply when a broker creates `__consumer_offsets` (on the first
FindCoordinator); a topic that exists keeps what it was created with. The two
`offsets.retention.*` settings are Kafka's offsets retention (KIP-211): every replog group is
one without members, whose committed offsets expire `offsets.retention.minutes` after their
commit, checked every `offsets.retention.check.interval.ms` (a group with members keeps its
offsets). The four `group.*` settings are the classic groups' (`ClassicGroupConfig`, checked
there too), the eight `group.consumer.*` ones the consumer-protocol groups'
(`ConsumerGroupConfig`, which checks the session timeout and heartbeat interval against their
min/max settings as Kafka does). `group.consumer.assignors` is a comma-separated list of Kafka's
assignor names (`uniform`, `range`, or Kafka's class names of those two), the first the
default for groups whose members name none; `group.consumer.migration.policy` is
`bidirectional` (Kafka's default), `upgrade`, `downgrade` or `disabled` (online migration of
groups with members between the protocols); the others are integers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from replog.config import integer_settings
from replog.coordinator.classic_group_coordinator import ClassicGroupConfig
from replog.coordinator.commit_rules import OFFSET_METADATA_MAX_BYTES_DEFAULT
from replog.coordinator.consumer_group_coordinator import ConsumerGroupConfig
from replog.coordinator.group_migration import MIGRATION_POLICY_PROPERTY
from replog.errors import ConfigError, InvalidConfigError

OFFSETS_TOPIC_REPLICATION_FACTOR_DEFAULT = 3  # offsets.topic.replication.factor
OFFSETS_TOPIC_SEGMENT_BYTES_DEFAULT = 100 * 1024 * 1024  # offsets.topic.segment.bytes
# Kafka's dotted name -> field of `GroupCoordinatorConfig`.
PROPERTY_NAMES = {
    "offsets.topic.num.partitions": "offsets_topic_num_partitions",
    "offsets.topic.replication.factor": "offsets_topic_replication_factor",
    "offsets.topic.segment.bytes": "offsets_topic_segment_bytes",
    "offset.metadata.max.bytes": "offset_metadata_max_bytes",
    "offsets.commit.timeout.ms": "offsets_commit_timeout_ms",
    "offsets.load.buffer.size": "offsets_load_buffer_size",
    "offsets.retention.minutes": "offsets_retention_minutes",
    "offsets.retention.check.interval.ms": "offsets_retention_check_interval_ms",
    "group.min.session.timeout.ms": "group_min_session_timeout_ms",
    "group.max.session.timeout.ms": "group_max_session_timeout_ms",
    "group.initial.rebalance.delay.ms": "group_initial_rebalance_delay_ms",
    "group.max.size": "group_max_size",
    "group.consumer.session.timeout.ms": "group_consumer_session_timeout_ms",
    "group.consumer.heartbeat.interval.ms": "group_consumer_heartbeat_interval_ms",
    "group.consumer.max.size": "group_consumer_max_size",
    "group.consumer.min.session.timeout.ms": "group_consumer_min_session_timeout_ms",
    "group.consumer.max.session.timeout.ms": "group_consumer_max_session_timeout_ms",
    "group.consumer.min.heartbeat.interval.ms": "group_consumer_min_heartbeat_interval_ms",
    "group.consumer.max.heartbeat.interval.ms": "group_consumer_max_heartbeat_interval_ms",
}
ASSIGNORS_PROPERTY = "group.consumer.assignors"
# Kafka's class names of its built-in server assignors, read as their names.
_ASSIGNOR_CLASSES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}
_CLASSIC = ClassicGroupConfig()
_CONSUMER = ConsumerGroupConfig()


@dataclass(frozen=True, slots=True)
class GroupCoordinatorConfig:
    """Group coordinator settings (Kafka's names in the comments)."""

    offsets_topic_num_partitions: int = 50  # offsets.topic.num.partitions
    offsets_topic_replication_factor: int = OFFSETS_TOPIC_REPLICATION_FACTOR_DEFAULT
    offset_metadata_max_bytes: int = OFFSET_METADATA_MAX_BYTES_DEFAULT  # offset.metadata.max.bytes
    # offsets.commit.timeout.ms: how long a commit waits for acks=all before REQUEST_TIMED_OUT.
    offsets_commit_timeout_ms: int = 5000
    # offsets.load.buffer.size: bytes per read when a partition's offsets are loaded.
    offsets_load_buffer_size: int = 5 * 1024 * 1024
    # offsets.retention.minutes: a committed offset expires this long after its commit (7 days).
    offsets_retention_minutes: int = 7 * 24 * 60
    # offsets.retention.check.interval.ms: how often expired offsets are removed.
    offsets_retention_check_interval_ms: int = 600_000
    group_min_session_timeout_ms: int = _CLASSIC.min_session_timeout_ms
    group_max_session_timeout_ms: int = _CLASSIC.max_session_timeout_ms
    group_initial_rebalance_delay_ms: int = _CLASSIC.initial_rebalance_delay_ms
    group_max_size: int = _CLASSIC.max_size
    group_consumer_session_timeout_ms: int = _CONSUMER.session_timeout_ms
    group_consumer_heartbeat_interval_ms: int = _CONSUMER.heartbeat_interval_ms
    group_consumer_max_size: int = _CONSUMER.max_size
    group_consumer_assignors: tuple[str, ...] = _CONSUMER.assignors
    group_consumer_migration_policy: str = _CONSUMER.migration_policy
    group_consumer_min_session_timeout_ms: int = _CONSUMER.min_session_timeout_ms
    group_consumer_max_session_timeout_ms: int = _CONSUMER.max_session_timeout_ms
    group_consumer_min_heartbeat_interval_ms: int = _CONSUMER.min_heartbeat_interval_ms
    group_consumer_max_heartbeat_interval_ms: int = _CONSUMER.max_heartbeat_interval_ms
    # offsets.topic.segment.bytes: the topic's segment.bytes when a broker creates it.
    offsets_topic_segment_bytes: int = OFFSETS_TOPIC_SEGMENT_BYTES_DEFAULT

    def __post_init__(self) -> None:
        for name, value, minimum in (
            ("offsets.topic.num.partitions", self.offsets_topic_num_partitions, 1),
            ("offsets.topic.replication.factor", self.offsets_topic_replication_factor, 1),
            ("offsets.topic.segment.bytes", self.offsets_topic_segment_bytes, 1),
            ("offset.metadata.max.bytes", self.offset_metadata_max_bytes, 0),
            ("offsets.commit.timeout.ms", self.offsets_commit_timeout_ms, 1),
            ("offsets.load.buffer.size", self.offsets_load_buffer_size, 1),
            ("offsets.retention.minutes", self.offsets_retention_minutes, 1),
            (
                "offsets.retention.check.interval.ms",
                self.offsets_retention_check_interval_ms,
                1,
            ),
        ):
            if value < minimum:
                raise ConfigError(f"{name}={value}: must be at least {minimum}")
        try:
            self.classic  # noqa: B018 (checks the group.* settings together)
            self.consumer  # noqa: B018
        except InvalidConfigError as error:
            raise ConfigError(str(error)) from None

    @property
    def classic(self) -> ClassicGroupConfig:
        """The classic groups' settings."""
        return ClassicGroupConfig(
            min_session_timeout_ms=self.group_min_session_timeout_ms,
            max_session_timeout_ms=self.group_max_session_timeout_ms,
            initial_rebalance_delay_ms=self.group_initial_rebalance_delay_ms,
            max_size=self.group_max_size,
        )

    @property
    def consumer(self) -> ConsumerGroupConfig:
        """The consumer-protocol groups' settings."""
        return ConsumerGroupConfig(
            session_timeout_ms=self.group_consumer_session_timeout_ms,
            heartbeat_interval_ms=self.group_consumer_heartbeat_interval_ms,
            max_size=self.group_consumer_max_size,
            assignors=self.group_consumer_assignors,
            min_session_timeout_ms=self.group_consumer_min_session_timeout_ms,
            max_session_timeout_ms=self.group_consumer_max_session_timeout_ms,
            min_heartbeat_interval_ms=self.group_consumer_min_heartbeat_interval_ms,
            max_heartbeat_interval_ms=self.group_consumer_max_heartbeat_interval_ms,
            migration_policy=self.group_consumer_migration_policy,
        )

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> GroupCoordinatorConfig:
        values: dict[str, object] = dict(integer_settings(properties, PROPERTY_NAMES))
        assignors = properties.get(ASSIGNORS_PROPERTY)
        if assignors is not None:
            values["group_consumer_assignors"] = tuple(
                _ASSIGNOR_CLASSES.get(entry.strip(), entry.strip())
                for entry in str(assignors).split(",")
                if entry.strip()
            )
        policy = properties.get(MIGRATION_POLICY_PROPERTY)
        if policy is not None:
            values["group_consumer_migration_policy"] = str(policy).strip()
        return cls(**values)  # type: ignore[arg-type]
