"""What `ControllerClient` takes and returns for the Controller's changes and configs: plain
dataclasses, not protobuf messages (topics and partitions created or deleted, configs,
elections, reassignments; what it says of the cluster is `cluster_metadata`).

Each result of a batch request (one per topic, partition or config resource) carries `error`:
None, or the `replog.errors` exception the controller reported for that item, built from the
wire code and carrying the controller's message (`controller_errors`, whose
`raise_first_error` turns a list of results into "all succeeded or raise").

Rules:
- Conversions from the wire live next to the type they build (`from_pb`); "-1 means none" on
  the wire becomes None here (`controller_errors.known`).
- Topic ids are `uuid.UUID`; `replog.common.ids.topic_id_text` prints them as Kafka's tools
  do (URL-safe base64 without padding, 22 characters).
- Enums carry Kafka's wire values; they mirror the controller's own on purpose, so that this
  client depends on the wire contract only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import NamedTuple
from uuid import UUID

from replog.admin.controller_errors import NONE, error_from_status, known
from replog.common import TopicPartition
from replog.common.ids import topic_id_from_bytes
from replog.errors import InvalidRequestError, KafkaError, UnknownServerError
from replog.pb import common_pb2
from replog.pb import controller_pb2 as pb

# --- topics and partitions ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NewTopic:
    """A topic to create. -1 counts take the cluster's defaults (`num.partitions`,
    `default.replication.factor`); `assignments` (partition -> broker ids) places the replicas
    by hand, and then both counts must be -1."""

    name: str
    num_partitions: int = NONE
    replication_factor: int = NONE
    configs: Mapping[str, str] = field(default_factory=dict)
    assignments: Mapping[int, Sequence[int]] = field(default_factory=dict)

    def to_pb(self) -> pb.CreatableTopic:
        return pb.CreatableTopic(
            name=self.name,
            num_partitions=self.num_partitions,
            replication_factor=self.replication_factor,
            configs=dict(self.configs),
            assignments=[
                pb.ReplicaAssignment(partition_index=p, broker_ids=list(ids))
                for p, ids in sorted(self.assignments.items())
            ],
        )


@dataclass(frozen=True, slots=True)
class CreatedTopic:
    name: str
    topic_id: UUID | None
    num_partitions: int | None
    replication_factor: int | None
    error: KafkaError | None

    @classmethod
    def from_pb(cls, m: pb.CreatableTopicResult) -> CreatedTopic:
        return cls(
            m.name,
            topic_id_from_bytes(m.topic_id),
            known(m.num_partitions),
            known(m.replication_factor),
            error_from_status(m.error),
        )


@dataclass(frozen=True, slots=True)
class DeletedTopic:
    name: str
    topic_id: UUID | None
    error: KafkaError | None

    @classmethod
    def from_pb(cls, m: pb.DeletableTopicResult) -> DeletedTopic:
        return cls(m.name, topic_id_from_bytes(m.topic_id), error_from_status(m.error))


@dataclass(frozen=True, slots=True)
class NewPartitions:
    """Grow `topic` to `total_count` partitions; `assignments`: broker ids per new partition."""

    topic: str
    total_count: int
    assignments: Sequence[Sequence[int]] = ()

    def to_pb(self) -> pb.CreatePartitionsTopic:
        return pb.CreatePartitionsTopic(
            name=self.topic,
            count=self.total_count,
            assignments=[
                pb.ReplicaAssignment(
                    partition_index=self.total_count - len(self.assignments) + i,
                    broker_ids=list(ids),
                )
                for i, ids in enumerate(self.assignments)
            ],
        )


@dataclass(frozen=True, slots=True)
class PartitionsCreated:
    topic: str
    error: KafkaError | None

    @classmethod
    def from_pb(cls, m: pb.CreatePartitionsTopicResult) -> PartitionsCreated:
        return cls(m.name, error_from_status(m.error))


# --- configs --------------------------------------------------------------------------------


class ConfigResourceType(IntEnum):
    """Kafka's ConfigResource.Type wire codes."""

    TOPIC = 2
    BROKER = 4
    GROUP = 32


class _ConfigResourceFields(NamedTuple):
    resource_type: ConfigResourceType
    name: str


class ConfigResource(_ConfigResourceFields):
    """A topic by name, a broker by id, or `""` with BROKER: the cluster-wide default, or a
    consumer group by id (KIP-848's group configs).

    The type may also be given as its wire code (2, 4) or its name in any case ("TOPIC", as
    kafka-python's ConfigResource takes it), and a broker's id as an int: each is made the
    enum and the text, so the resource equals (and finds its result under) the canonical one.
    Anything else is an InvalidRequestError naming it."""

    __slots__ = ()

    def __new__(
        cls, resource_type: ConfigResourceType | int | str, name: str | int
    ) -> ConfigResource:
        kind = _resource_type(resource_type)
        if (
            kind is ConfigResourceType.BROKER
            and isinstance(name, int)
            and not isinstance(name, bool)
        ):
            name = str(name)
        if not isinstance(name, str):
            raise InvalidRequestError(
                f"ConfigResource: the {kind.name.lower()}'s name must be a str, not "
                f"{type(name).__name__} ({name!r})"
            )
        return super().__new__(cls, kind, name)

    @classmethod
    def topic(cls, name: str) -> ConfigResource:
        return cls(ConfigResourceType.TOPIC, name)

    @classmethod
    def group(cls, group_id: str) -> ConfigResource:
        return cls(ConfigResourceType.GROUP, group_id)

    @classmethod
    def broker(cls, broker_id: int | None = None) -> ConfigResource:
        """A broker's resource; None: the cluster-wide default."""
        return cls(ConfigResourceType.BROKER, "" if broker_id is None else str(broker_id))


def _resource_type(value: ConfigResourceType | int | str) -> ConfigResourceType:
    try:
        if isinstance(value, str):
            return ConfigResourceType[value.upper()]
        if isinstance(value, int) and not isinstance(value, bool):
            return ConfigResourceType(value)
    except (KeyError, ValueError):
        pass
    known = ", ".join(f"{t.name} ({t.value})" for t in ConfigResourceType)
    raise InvalidRequestError(
        f"ConfigResource: unknown resource type {value!r}; expected one of {known}"
    )


def _resource(resource_type: int, name: str) -> ConfigResource:
    try:
        return ConfigResource(ConfigResourceType(resource_type), name)
    except ValueError:
        raise UnknownServerError(
            f"the controller answered about config resource type {resource_type} ({name!r}), "
            "which this client does not know"
        ) from None


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None  # None: sensitive, or no value
    is_default: bool
    read_only: bool
    is_sensitive: bool
    source: str  # TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DEFAULT_CONFIG, ...

    @classmethod
    def from_pb(cls, m: pb.ConfigEntry) -> ConfigEntry:
        return cls(
            m.name,
            m.value if m.HasField("value") else None,
            m.is_default,
            m.read_only,
            m.is_sensitive,
            m.source,
        )


@dataclass(frozen=True, slots=True)
class ResourceConfigs:
    resource: ConfigResource
    entries: tuple[ConfigEntry, ...]
    error: KafkaError | None

    def overrides(self) -> dict[str, str | None]:
        """The entries not at their default value, by name (what kafka-topics shows)."""
        return {e.name: e.value for e in self.entries if not e.is_default}

    @classmethod
    def from_pb(cls, m: pb.DescribeConfigsResult) -> ResourceConfigs:
        return cls(
            _resource(m.resource_type, m.resource_name),
            tuple(ConfigEntry.from_pb(e) for e in m.configs),
            error_from_status(m.error),
        )


class AlterConfigOpType(IntEnum):
    """IncrementalAlterConfigs operation codes, as on Kafka's wire."""

    SET = 0
    DELETE = 1
    APPEND = 2  # list configs: add items
    SUBTRACT = 3  # list configs: remove items


@dataclass(frozen=True, slots=True)
class AlterConfigOp:
    name: str
    op: AlterConfigOpType
    value: str | None = None  # unused by DELETE

    def to_pb(self) -> pb.AlterableConfig:
        message = pb.AlterableConfig(name=self.name, operation=int(self.op))
        if self.value is not None:
            message.value = self.value
        return message


@dataclass(frozen=True, slots=True)
class ConfigsAltered:
    resource: ConfigResource
    error: KafkaError | None

    @classmethod
    def from_pb(cls, m: pb.AlterConfigsResult) -> ConfigsAltered:
        return cls(_resource(m.resource_type, m.resource_name), error_from_status(m.error))


# --- elections and reassignments ------------------------------------------------------------


class ElectionType(IntEnum):
    """ElectLeaders' election type, with Kafka's wire values."""

    PREFERRED = 0
    UNCLEAN = 1


@dataclass(frozen=True, slots=True)
class ElectionResult:
    topic_partition: TopicPartition
    error: KafkaError | None  # ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE, ...

    @classmethod
    def from_pb(cls, m: pb.PartitionElectionResult) -> ElectionResult:
        return cls(TopicPartition(m.topic, m.partition_index), error_from_status(m.error))


@dataclass(frozen=True, slots=True)
class OngoingReassignment:
    topic_partition: TopicPartition
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]

    @classmethod
    def from_pb(cls, m: pb.OngoingReassignment) -> OngoingReassignment:
        return cls(
            TopicPartition(m.topic, m.partition_index),
            tuple(m.replicas),
            tuple(m.adding_replicas),
            tuple(m.removing_replicas),
        )


@dataclass(frozen=True, slots=True)
class ReassignmentResult:
    topic_partition: TopicPartition
    error: KafkaError | None

    @classmethod
    def from_pb(cls, m: pb.ReassignablePartitionResult) -> ReassignmentResult:
        return cls(TopicPartition(m.topic, m.partition_index), error_from_status(m.error))


def topic_partitions_to_pb(
    partitions: Iterable[TopicPartition] | None,
) -> list[common_pb2.TopicPartition]:
    return [common_pb2.TopicPartition(topic=t, partition=p) for t, p in partitions or ()]
