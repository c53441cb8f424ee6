"""What `ControllerClient` takes and returns: plain dataclasses, not protobuf messages.

Each result of a batch request (one per topic, partition or config resource) carries `error`:
None, or the `replog.errors` exception the controller reported for that item, built from the
wire code and carrying the controller's message. `raise_first_error` turns a list of results
into "all succeeded or raise", which is what a command-line tool wants.

Rules:
- Conversions from the wire live next to the type they build (`from_pb`); "-1 means none" on
  the wire becomes None here (a leader of -1 is `leader=None`).
- Topic ids are `uuid.UUID`; `replog.common.ids.topic_id_text` prints them as Kafka's tools
  do (URL-safe base64 without padding, 22 characters).
- Enums carry Kafka's wire values; they mirror the controller's own on purpose, so that this
  client depends on the wire contract only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import NamedTuple, Protocol
from uuid import UUID

from replog.common import TopicPartition
from replog.common.ids import topic_id_from_bytes
from replog.errors import InvalidRequestError, KafkaError, UnknownServerError, error_for_code
from replog.pb import common_pb2
from replog.pb import controller_pb2 as pb

NONE = -1  # "none", "unknown" or "default" on the wire


# --- errors and ids -------------------------------------------------------------------------


def error_from_status(status: common_pb2.ErrorStatus) -> KafkaError | None:
    """The exception an ErrorStatus stands for (None for code 0), with the server's message."""
    if status.code == 0:
        return None
    error = error_for_code(status.code, status.message)
    if type(error) is UnknownServerError and status.code != UnknownServerError.code:
        # A code this client does not know: keep the server's name for it, or at least the code.
        name = status.error_name or f"error code {status.code}"
        error = UnknownServerError(f"{name}: {status.message}" if status.message else name)
    return error


class HasError(Protocol):
    @property
    def error(self) -> KafkaError | None: ...


def raise_first_error(results: Iterable[HasError]) -> None:
    """Raise the first item's error, if any item failed."""
    for result in results:
        if result.error is not None:
            raise result.error


def _known(value: int) -> int | None:
    return None if value == NONE else value


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
            _known(m.num_partitions),
            _known(m.replication_factor),
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


# --- cluster and topic metadata -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Broker:
    broker_id: int
    host: str
    port: int
    rack: str | None
    fenced: bool
    in_controlled_shutdown: bool
    broker_epoch: int

    @classmethod
    def from_pb(cls, m: pb.BrokerEndpoint) -> Broker:
        return cls(
            m.broker_id,
            m.host,
            m.port,
            m.rack if m.HasField("rack") else None,
            m.fenced,
            m.in_controlled_shutdown,
            m.broker_epoch,
        )


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    cluster_id: str
    controller_id: int | None
    brokers: tuple[Broker, ...]
    metadata_offset: int  # the committed offset the answer was read at

    @classmethod
    def from_pb(cls, m: pb.DescribeClusterResponse) -> ClusterDescription:
        return cls(
            m.cluster_id,
            _known(m.controller_id),
            tuple(Broker.from_pb(b) for b in m.brokers),
            m.metadata_offset,
        )


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    partition: int
    leader: int | None
    leader_epoch: int
    partition_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]
    error: KafkaError | None  # LEADER_NOT_AVAILABLE when there is no leader

    @property
    def replication_factor(self) -> int:
        """The target replica count: during a reassignment, replicas being added do not count
        (as Kafka's tools compute it)."""
        return len(self.replicas) - len(self.adding_replicas)

    @classmethod
    def from_pb(cls, m: pb.PartitionMetadata) -> PartitionInfo:
        return cls(
            m.partition_index,
            _known(m.leader_id),
            m.leader_epoch,
            m.partition_epoch,
            tuple(m.replicas),
            tuple(m.isr),
            tuple(m.offline_replicas),
            tuple(m.adding_replicas),
            tuple(m.removing_replicas),
            error_from_status(m.error),
        )


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    topic_id: UUID | None
    partitions: tuple[PartitionInfo, ...]  # sorted by partition index
    error: KafkaError | None  # UNKNOWN_TOPIC_OR_PARTITION for a name asked for and absent

    @property
    def replication_factor(self) -> int:
        """Partition 0's replica count, as kafka-topics.sh shows it (0: no partitions)."""
        return self.partitions[0].replication_factor if self.partitions else 0

    @classmethod
    def from_pb(cls, m: pb.TopicMetadata) -> TopicInfo:
        partitions = sorted(
            (PartitionInfo.from_pb(p) for p in m.partitions), key=lambda p: p.partition
        )
        return cls(
            m.name, topic_id_from_bytes(m.topic_id), tuple(partitions), error_from_status(m.error)
        )


@dataclass(frozen=True, slots=True)
class ClusterMetadata:
    cluster_id: str
    controller_id: int | None
    brokers: tuple[Broker, ...]  # unfenced brokers only, as clients see them
    topics: tuple[TopicInfo, ...]
    metadata_offset: int
    # How current the answer is (`replog/server/metadata_staleness.py`): the answering node
    # knows no quorum leader now; ms since it last heard from one; the wall-clock time of that
    # (None: never since it started); brokers it has not heard from for the session timeout.
    stale: bool = False
    metadata_age_ms: int = 0
    quorum_contact_time_ms: int | None = None
    unreachable_brokers: frozenset[int] = frozenset()
    answering_node_id: int | None = None

    @classmethod
    def from_pb(cls, m: pb.MetadataResponse) -> ClusterMetadata:
        return cls(
            m.cluster_id,
            _known(m.controller_id),
            tuple(Broker.from_pb(b) for b in m.brokers),
            tuple(TopicInfo.from_pb(t) for t in m.topics),
            m.metadata_offset,
            m.stale,
            m.metadata_age_ms,
            m.quorum_contact_time_ms if m.quorum_contact_time_ms > 0 else None,
            frozenset(m.unreachable_broker_ids),
            m.answering_node_id if m.HasField("answering_node_id") else None,
        )


# --- configs --------------------------------------------------------------------------------


class ConfigResourceType(IntEnum):
    """Kafka's ConfigResource.Type wire codes."""

    TOPIC = 2
    BROKER = 4


class _ConfigResourceFields(NamedTuple):
    resource_type: ConfigResourceType
    name: str


class ConfigResource(_ConfigResourceFields):
    """A topic by name, a broker by id, or `""` with BROKER: the cluster-wide default.

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
