"""What the Controller service says of the cluster: its brokers, topics and partitions.

The admin clients' `metadata` returns a `ClusterMetadata` (brokers, topics with their
partitions' leaders, replicas and ISRs, and how current the answering node's view is);
`describe_cluster` a `ClusterDescription`. Plain dataclasses built from the wire (`from_pb` for
the gRPC Controller service's answers, `kafka_answers` for Kafka's),
with -1 read as None (a leader of -1 is `leader=None`) and topic ids as `uuid.UUID`.

Rules: kept apart from the other results (`controller_results`): `replog topics list` and
`describe` read only these, and a command loads no more than it reads (the dataclasses are a
good part of an admin command's start-up).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING
from uuid import UUID

from replog.admin.controller_errors import error_from_status, known
from replog.common.ids import topic_id_from_bytes
from replog.errors import KafkaError

if TYPE_CHECKING:
    # Only read by `from_pb`: what Kafka's answers build loads no protobuf.
    from replog.pb import controller_pb2 as pb


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
    # A broker's Kafka answer names a live broker here, a controller's the active controller.
    controller_id: int | None
    brokers: tuple[Broker, ...]
    metadata_offset: int  # the committed offset the answer was read at

    @classmethod
    def from_pb(cls, m: pb.DescribeClusterResponse) -> ClusterDescription:
        return cls(
            m.cluster_id,
            known(m.controller_id),
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
            known(m.leader_id),
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
    # Over Kafka's protocol a live broker (where controller-bound requests go), not the active
    # controller; None when the answering node knows no quorum leader.
    controller_id: int | None
    brokers: tuple[Broker, ...]  # unfenced brokers only, as clients see them
    topics: tuple[TopicInfo, ...]
    metadata_offset: int
    # How current the answer is (`replog/server/raft/metadata_staleness.py`): the answering node
    # knows no quorum leader now; ms since it last heard from one; the wall-clock time of that
    # (None: never since it started); brokers it has not heard from for the session timeout.
    stale: bool = False
    metadata_age_ms: int = 0
    quorum_contact_time_ms: int | None = None
    unreachable_brokers: frozenset[int] = frozenset()
    answering_node_id: int | None = None
    # Why the replicas being added and removed could not be read (no controller answered
    # ListPartitionReassignments): they are then left empty. None: read, or not asked for.
    reassignments_unknown: str | None = None

    @classmethod
    def from_pb(cls, m: pb.MetadataResponse) -> ClusterMetadata:
        return cls(
            m.cluster_id,
            known(m.controller_id),
            tuple(Broker.from_pb(b) for b in m.brokers),
            tuple(TopicInfo.from_pb(t) for t in m.topics),
            m.metadata_offset,
            m.stale,
            m.metadata_age_ms,
            m.quorum_contact_time_ms if m.quorum_contact_time_ms > 0 else None,
            frozenset(m.unreachable_broker_ids),
            m.answering_node_id if m.HasField("answering_node_id") else None,
        )
