"""Kafka's admin requests built from the admin dataclasses, and their answers read back into them.

`kafka_admin_client` sends these requests to a Kafka listener; what comes back is the same
`cluster_metadata` and `controller_results` dataclasses the commands and the Admin client read,
whatever protocol carried them.

Rules:
- An error code of 0 is None, any other the `replog.errors` exception for it carrying the
  broker's message (`error_for_code`); -1 ("none", "unknown") is None, as in `controller_errors`.
- The all-zero topic id means "none" (Kafka's `Uuid.ZERO_UUID`).
- A Metadata answer says how current it is in replog's tagged field (`staleness_tag`), when
  the answering node is a controller; without it the answer is taken as current.
- Requests name each topic once, in the order given; results keep the answer's order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING
from uuid import UUID

from replog.admin.cluster_metadata import (
    Broker,
    ClusterDescription,
    ClusterMetadata,
    PartitionInfo,
    TopicInfo,
)
from replog.admin.controller_errors import known
from replog.admin.controller_results import (
    AlterConfigOp,
    ConfigEntry,
    ConfigResource,
    ConfigResourceType,
    ConfigsAltered,
    CreatedTopic,
    DeletedTopic,
    ElectionResult,
    NewPartitions,
    NewTopic,
    OngoingReassignment,
    PartitionsCreated,
    ReassignmentResult,
    ResourceConfigs,
)
from replog.common import TopicPartition
from replog.errors import (
    KafkaError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from replog.kafka import staleness_tag
from replog.kafka.messages import alter_partition_reassignments_request as apr
from replog.kafka.messages import create_partitions_request as cp
from replog.kafka.messages import create_topics_request as ct
from replog.kafka.messages import delete_records_request as drq
from replog.kafka.messages import delete_topics_request as dt
from replog.kafka.messages import describe_configs_request as dc
from replog.kafka.messages import describe_quorum_response as dqr
from replog.kafka.messages import incremental_alter_configs_request as iac
from replog.kafka.messages import list_partition_reassignments_request as lpr
from replog.kafka.messages import metadata_request as mr
from replog.kafka.messages.alter_partition_reassignments_response import (
    AlterPartitionReassignmentsResponse,
)
from replog.kafka.messages.create_partitions_response import CreatePartitionsResponse
from replog.kafka.messages.create_topics_response import CreateTopicsResponse
from replog.kafka.messages.delete_records_response import DeleteRecordsResponse
from replog.kafka.messages.delete_topics_response import DeleteTopicsResponse
from replog.kafka.messages.describe_cluster_response import DescribeClusterResponse
from replog.kafka.messages.describe_configs_response import DescribeConfigsResponse
from replog.kafka.messages.elect_leaders_request import ElectLeadersRequest, TopicPartitions
from replog.kafka.messages.elect_leaders_response import ElectLeadersResponse
from replog.kafka.messages.incremental_alter_configs_response import (
    IncrementalAlterConfigsResponse,
)
from replog.kafka.messages.list_partition_reassignments_response import (
    ListPartitionReassignmentsResponse,
)
from replog.kafka.messages.metadata_response import MetadataResponse
from replog.net_address import format_host_port

if TYPE_CHECKING:
    from replog.admin.quorum import QuorumDescription

ZERO_UUID = UUID(int=0)
# DescribeConfigs' config_source codes -> the names `ConfigEntry.source` carries (the wire's
# ConfigSource names, a topic's and a group's own values as TOPIC_CONFIG and GROUP_CONFIG).
CONFIG_SOURCES = {
    0: "UNKNOWN",
    1: "TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "CLIENT_METRICS_CONFIG",
    8: "GROUP_CONFIG",
}
DEFAULT_CONFIG = 5


def error(code: int, message: str | None = None) -> KafkaError | None:
    """The exception a Kafka error code stands for (None for 0), with the broker's message."""
    if code == 0:
        return None
    found = error_for_code(code, message or "")
    if type(found) is UnknownServerError and code != UnknownServerError.code:
        text = f"error code {code}"
        found = UnknownServerError(f"{text}: {message}" if message else text)
    return found


def _name(code: int) -> str:
    """Kafka's name of an error code (Metadata's errors come without a message)."""
    return error_for_code(code).error_name


def topic_id(value: UUID) -> UUID | None:
    return None if value == ZERO_UUID else value


# --- topics and partitions ------------------------------------------------------------------


def create_topics_request(
    topics: Sequence[NewTopic], validate_only: bool, timeout_ms: int
) -> ct.CreateTopicsRequest:
    return ct.CreateTopicsRequest(
        topics=[
            ct.CreatableTopic(
                name=t.name,
                num_partitions=t.num_partitions,
                replication_factor=t.replication_factor,
                assignments=[
                    ct.CreatableReplicaAssignment(partition_index=p, broker_ids=list(ids))
                    for p, ids in sorted(t.assignments.items())
                ],
                configs=[ct.CreatableTopicConfig(name=k, value=v) for k, v in t.configs.items()],
            )
            for t in topics
        ],
        timeout_ms=timeout_ms,
        validate_only=validate_only,
    )


def created_topics(response: CreateTopicsResponse) -> list[CreatedTopic]:
    return [
        CreatedTopic(
            t.name,
            topic_id(t.topic_id),
            known(t.num_partitions),
            known(t.replication_factor),
            error(t.error_code, t.error_message),
        )
        for t in response.topics
    ]


def delete_topics_request(
    names: Sequence[str], topic_ids: Sequence[UUID], timeout_ms: int
) -> dt.DeleteTopicsRequest:
    # v6 names topics in `topics` (by name or by id); v1-5 only by name, in `topic_names`.
    return dt.DeleteTopicsRequest(
        topics=[dt.DeleteTopicState(name=n, topic_id=ZERO_UUID) for n in names]
        + [dt.DeleteTopicState(name=None, topic_id=i) for i in topic_ids],
        topic_names=list(names),
        timeout_ms=timeout_ms,
    )


def deleted_topics(response: DeleteTopicsResponse) -> list[DeletedTopic]:
    return [
        DeletedTopic(t.name or "", topic_id(t.topic_id), error(t.error_code, t.error_message))
        for t in response.responses
    ]


def create_partitions_request(
    increases: Sequence[NewPartitions], validate_only: bool, timeout_ms: int
) -> cp.CreatePartitionsRequest:
    return cp.CreatePartitionsRequest(
        topics=[
            cp.CreatePartitionsTopic(
                name=i.topic,
                count=i.total_count,
                assignments=[
                    cp.CreatePartitionsAssignment(broker_ids=list(ids)) for ids in i.assignments
                ]
                if i.assignments
                else None,
            )
            for i in increases
        ],
        timeout_ms=timeout_ms,
        validate_only=validate_only,
    )


def partitions_created(response: CreatePartitionsResponse) -> list[PartitionsCreated]:
    return [
        PartitionsCreated(r.name, error(r.error_code, r.error_message)) for r in response.results
    ]


# --- the cluster ----------------------------------------------------------------------------


def metadata_request(topics: Sequence[str] | None) -> mr.MetadataRequest:
    """Every topic (None or empty), or those named; never creates one."""
    return mr.MetadataRequest(
        topics=[mr.MetadataRequestTopic(name=t, topic_id=ZERO_UUID) for t in topics]
        if topics
        else None,
        allow_auto_topic_creation=False,
    )


def cluster_metadata(
    response: MetadataResponse, reassignments: Iterable[OngoingReassignment] = ()
) -> ClusterMetadata:
    """The answer as `ClusterMetadata`; `reassignments` fills the replicas being added and
    removed (Kafka's Metadata does not carry them; ListPartitionReassignments does)."""
    moving = {r.topic_partition: r for r in reassignments}
    topics = []
    for t in response.topics:
        partitions = []
        for p in sorted(t.partitions, key=lambda p: p.partition_index):
            move = moving.get(TopicPartition(t.name or "", p.partition_index))
            partitions.append(
                PartitionInfo(
                    p.partition_index,
                    known(p.leader_id),
                    p.leader_epoch,
                    -1,  # not on Kafka's wire
                    tuple(p.replica_nodes),
                    tuple(p.isr_nodes),
                    tuple(p.offline_replicas),
                    move.adding_replicas if move else (),
                    move.removing_replicas if move else (),
                    error(
                        p.error_code,
                        f"partition {t.name}-{p.partition_index}: {_name(p.error_code)}",
                    ),
                )
            )
        topics.append(
            TopicInfo(
                t.name or "",
                topic_id(t.topic_id),
                tuple(partitions),
                error(
                    t.error_code,
                    f"topic {t.name!r} does not exist"
                    if t.error_code == UnknownTopicOrPartitionError.code
                    else f"topic {t.name!r}: {_name(t.error_code)}",
                ),
            )
        )
    brokers = tuple(
        Broker(b.node_id, b.host, b.port, b.rack, False, False, -1) for b in response.brokers
    )
    staleness = staleness_tag.decode(response.unknown_tagged_fields)
    if staleness is None:
        return ClusterMetadata(
            response.cluster_id or "",
            known(response.controller_id),
            brokers,
            tuple(topics),
            -1,  # not on Kafka's wire
        )
    return ClusterMetadata(
        response.cluster_id or "",
        # Kafka's rule names some live broker as controller: with no quorum leader known to
        # the answering node, there is no active controller.
        known(response.controller_id) if staleness.leader_known else None,
        brokers,
        tuple(topics),
        -1,
        staleness.stale,
        staleness.age_ms,
        staleness.quorum_contact_time_ms,
        staleness.unreachable_brokers,
        staleness.node_id,
    )


def cluster_description(response: DescribeClusterResponse) -> ClusterDescription:
    brokers = tuple(
        Broker(b.broker_id, b.host, b.port, b.rack, b.is_fenced, False, -1)
        for b in response.brokers
    )
    return ClusterDescription(response.cluster_id, known(response.controller_id), brokers, -1)


# --- configs --------------------------------------------------------------------------------


def describe_configs_request(
    resources: Sequence[ConfigResource], keys: Sequence[str]
) -> dc.DescribeConfigsRequest:
    return dc.DescribeConfigsRequest(
        resources=[
            dc.DescribeConfigsResource(
                resource_type=int(r.resource_type),
                resource_name=r.name,
                configuration_keys=list(keys) if keys else None,
            )
            for r in resources
        ]
    )


def resource_configs(response: DescribeConfigsResponse) -> list[ResourceConfigs]:
    return [
        ResourceConfigs(
            _resource(r.resource_type, r.resource_name),
            tuple(
                ConfigEntry(
                    c.name,
                    c.value,
                    c.is_default or c.config_source == DEFAULT_CONFIG,
                    c.read_only,
                    c.is_sensitive,
                    CONFIG_SOURCES.get(c.config_source, "UNKNOWN"),
                )
                for c in r.configs
            ),
            error(r.error_code, r.error_message),
        )
        for r in response.results
    ]


def incremental_alter_configs_request(
    changes: Mapping[ConfigResource, Sequence[AlterConfigOp]], validate_only: bool
) -> iac.IncrementalAlterConfigsRequest:
    return iac.IncrementalAlterConfigsRequest(
        resources=[
            iac.AlterConfigsResource(
                resource_type=int(resource.resource_type),
                resource_name=resource.name,
                configs=[
                    iac.AlterableConfig(name=op.name, config_operation=int(op.op), value=op.value)
                    for op in ops
                ],
            )
            for resource, ops in changes.items()
        ],
        validate_only=validate_only,
    )


def configs_altered(response: IncrementalAlterConfigsResponse) -> list[ConfigsAltered]:
    return [
        ConfigsAltered(
            _resource(r.resource_type, r.resource_name), error(r.error_code, r.error_message)
        )
        for r in response.responses
    ]


def _resource(resource_type: int, name: str) -> ConfigResource:
    try:
        return ConfigResource(ConfigResourceType(resource_type), name)
    except ValueError:
        raise UnknownServerError(
            f"the broker answered about config resource type {resource_type} ({name!r}), "
            "which this client does not know"
        ) from None


# --- elections and reassignments ------------------------------------------------------------


def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    for topic, partition in partitions:
        found.setdefault(topic, []).append(partition)
    return found


def elect_leaders_request(
    election_type: int, partitions: Iterable[TopicPartition] | None, timeout_ms: int
) -> ElectLeadersRequest:
    """None: every eligible partition (a null list, as Kafka's admin sends it)."""
    return ElectLeadersRequest(
        election_type=election_type,
        topic_partitions=None
        if partitions is None
        else [TopicPartitions(topic=t, partitions=ps) for t, ps in _by_topic(partitions).items()],
        timeout_ms=timeout_ms,
    )


def election_results(response: ElectLeadersResponse) -> list[ElectionResult]:
    whole = error(response.error_code)
    return [
        ElectionResult(
            TopicPartition(t.topic, p.partition_id),
            whole or error(p.error_code, p.error_message),
        )
        for t in response.replica_election_results
        for p in t.partition_result
    ]


def list_partition_reassignments_request(
    partitions: Iterable[TopicPartition] | None, timeout_ms: int
) -> lpr.ListPartitionReassignmentsRequest:
    return lpr.ListPartitionReassignmentsRequest(
        timeout_ms=timeout_ms,
        topics=None
        if partitions is None
        else [
            lpr.ListPartitionReassignmentsTopics(name=t, partition_indexes=ps)
            for t, ps in _by_topic(partitions).items()
        ],
    )


def ongoing_reassignments(
    response: ListPartitionReassignmentsResponse,
) -> list[OngoingReassignment]:
    return [
        OngoingReassignment(
            TopicPartition(t.name, p.partition_index),
            tuple(p.replicas),
            tuple(p.adding_replicas),
            tuple(p.removing_replicas),
        )
        for t in response.topics
        for p in t.partitions
    ]


def alter_partition_reassignments_request(
    reassignments: Mapping[TopicPartition, Sequence[int] | None], timeout_ms: int
) -> apr.AlterPartitionReassignmentsRequest:
    """None for a partition cancels its ongoing reassignment (a null replica list)."""
    by_topic: dict[str, list[apr.ReassignablePartition]] = {}
    for (topic, partition), replicas in reassignments.items():
        by_topic.setdefault(topic, []).append(
            apr.ReassignablePartition(
                partition_index=partition, replicas=None if replicas is None else list(replicas)
            )
        )
    return apr.AlterPartitionReassignmentsRequest(
        timeout_ms=timeout_ms,
        topics=[apr.ReassignableTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
    )


def reassignment_results(response: AlterPartitionReassignmentsResponse) -> list[ReassignmentResult]:
    whole = error(response.error_code, response.error_message)
    return [
        ReassignmentResult(
            TopicPartition(t.name, p.partition_index),
            whole or error(p.error_code, p.error_message),
        )
        for t in response.responses
        for p in t.partitions
    ]


# --- records --------------------------------------------------------------------------------


def delete_records_request(
    before: Mapping[TopicPartition, int], timeout_ms: int
) -> drq.DeleteRecordsRequest:
    by_topic: dict[str, list[drq.DeleteRecordsPartition]] = {}
    for (topic, partition), offset in before.items():
        by_topic.setdefault(topic, []).append(
            drq.DeleteRecordsPartition(partition_index=partition, offset=offset)
        )
    return drq.DeleteRecordsRequest(
        topics=[drq.DeleteRecordsTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
        timeout_ms=timeout_ms,
    )


def records_deleted(response: DeleteRecordsResponse) -> dict[TopicPartition, int | KafkaError]:
    """Per partition: its new low watermark, or its error."""
    found: dict[TopicPartition, int | KafkaError] = {}
    for t in response.topics:
        for p in t.partitions:
            failed = error(p.error_code)
            found[TopicPartition(t.name, p.partition_index)] = (
                p.low_watermark if failed is None else failed
            )
    return found


# --- the metadata quorum --------------------------------------------------------------------


def quorum_partition(response: dqr.DescribeQuorumResponse) -> dqr.PartitionData:
    """The one partition a DescribeQuorum answer describes (`__cluster_metadata`-0), or the
    error the answer carries, whole or for that partition."""
    failed = error(response.error_code, response.error_message)
    if failed is not None:
        raise failed
    for topic in response.topics:
        for partition in topic.partitions:
            failed = error(partition.error_code, partition.error_message)
            if failed is not None:
                raise failed
            return partition
    raise UnknownServerError("DescribeQuorum answered no partition")


def quorum_description(response: dqr.DescribeQuorumResponse, address: str) -> QuorumDescription:
    """The answer as `QuorumDescription` (lags computed as Kafka's tool does); the voters'
    addresses are their first listeners (v2 and up)."""
    from replog.admin.quorum import QuorumDescription, ReplicaRow

    partition = quorum_partition(response)
    leader_end = next(
        (
            known(r.log_end_offset)
            for r in partition.current_voters
            if r.replica_id == partition.leader_id
        ),
        None,
    )

    def row(replica: dqr.ReplicaState, status: str) -> ReplicaRow:
        end = known(replica.log_end_offset)
        lag = None if end is None or leader_end is None else max(0, leader_end - end)
        return ReplicaRow(
            replica.replica_id,
            end,
            lag,
            known(replica.last_fetch_timestamp),
            known(replica.last_caught_up_timestamp),
            status,
        )

    voters = partition.current_voters
    leader = [row(r, "Leader") for r in voters if r.replica_id == partition.leader_id]
    followers = [row(r, "Follower") for r in voters if r.replica_id != partition.leader_id]
    observers = [row(r, "Observer") for r in partition.observers]
    return QuorumDescription(
        leader_id=partition.leader_id,
        leader_epoch=partition.leader_epoch,
        high_watermark=known(partition.high_watermark),
        voters=tuple(r.replica_id for r in voters),
        observers=tuple(r.replica_id for r in partition.observers),
        replicas=(*leader, *followers, *observers),
        answered_by=address,
        voter_addresses={
            n.node_id: format_host_port(n.listeners[0].host, n.listeners[0].port)
            for n in response.nodes
            if n.listeners
        },
        voter_listeners={n.node_id: n.listeners[0].name for n in response.nodes if n.listeners},
    )
