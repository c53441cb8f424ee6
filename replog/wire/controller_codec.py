"""Translation between the Controller service's protobuf messages and the controller's types.

Requests become the request types of `replog.quorum.controller` (`*_from_proto`); the controller's
results and read views become responses (`*_to_proto`). No protocol decision is made here.

Rules:
- -1 on the wire is "none" or "default" (a leader, a count, a broker epoch); a topic id is 16
  raw bytes, and an empty one is "none". A request the controller's types cannot even hold
  (a topic id that is not 16 bytes, an unknown enum value, a resource named twice) is
  `InvalidRequestError` for the whole request, naming the field and the value.
- Errors cross the wire as `ErrorStatus` (Kafka's code and name, and the message naming the
  topic, partition, broker or config); no error is an unset field.
- Responses are built without `controller_id`; the service fills it from the answer.
- Fields the controller has no use for are dropped, not refused. Every described
  config is writable and none is sensitive (`read_only`, `is_sensitive` false).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from uuid import UUID

from replog.common.ids import UUID_BYTES
from replog.errors import InvalidRequestError, KafkaError
from replog.pb import common_pb2
from replog.pb import controller_pb2 as pb
from replog.quorum.controller.broker_heartbeat import BrokerHeartbeatReply, BrokerHeartbeatRequest
from replog.quorum.controller.cluster_control import (
    BrokerRegistrationReply,
    BrokerRegistrationRequest,
)
from replog.quorum.controller.config_control import AlterConfigOp, AlterConfigOpType
from replog.quorum.controller.producer_id_control import ProducerIdsBlock
from replog.quorum.controller.reads import (
    BrokerView,
    ClusterDescription,
    ConfigDescription,
    MetadataView,
    PartitionView,
    TopicView,
)
from replog.quorum.controller.replication_control import (
    AlterPartitionItem,
    AlterPartitionResult,
    ApiError,
    CreatableTopic,
    CreatePartitionsResult,
    CreatePartitionsTopic,
    CreateTopicResult,
    DeleteTopicResult,
    ElectionType,
    ElectLeadersResult,
    IsrMember,
    OngoingReassignment,
    ReassignablePartition,
    ReassignmentResult,
)
from replog.quorum.metadata.image import ConfigResource
from replog.quorum.metadata.records import (
    ConfigResourceType,
    Endpoint,
    FeatureRange,
    LeaderRecoveryState,
)

NONE = -1


# --- common -------------------------------------------------------------------------------------


def error_status(error: KafkaError | ApiError | None) -> common_pb2.ErrorStatus | None:
    """The wire form of an error; None for no error."""
    if error is None:
        return None
    if isinstance(error, ApiError):
        return common_pb2.ErrorStatus(
            code=error.code, error_name=error.error_name, message=error.message
        )
    return common_pb2.ErrorStatus(code=error.code, error_name=error.error_name, message=str(error))


def uuid_from_proto(value: bytes, field: str) -> UUID:
    if len(value) != UUID_BYTES:
        raise InvalidRequestError(f"{field} must be {UUID_BYTES} bytes, got {len(value)}")
    return UUID(bytes=value)


def _uuid_bytes(value: UUID | None) -> bytes:
    return b"" if value is None else value.bytes


def _partitions(items: Iterable[common_pb2.TopicPartition]) -> list[tuple[str, int]] | None:
    """(topic, partition) pairs; None for an empty list ("every partition")."""
    pairs = [(item.topic, item.partition) for item in items]
    return pairs or None


# --- topics and partitions ------------------------------------------------------------------------


def create_topics_from_proto(request: pb.CreateTopicsRequest) -> list[CreatableTopic]:
    return [
        CreatableTopic(
            name=topic.name,
            num_partitions=topic.num_partitions,
            replication_factor=topic.replication_factor,
            assignments={a.partition_index: tuple(a.broker_ids) for a in topic.assignments},
            configs=dict(topic.configs),
        )
        for topic in request.topics
    ]


def create_topics_to_proto(results: Sequence[CreateTopicResult]) -> pb.CreateTopicsResponse:
    return pb.CreateTopicsResponse(
        topics=[
            pb.CreatableTopicResult(
                name=result.name,
                topic_id=_uuid_bytes(result.topic_id),
                error=error_status(result.error),
                num_partitions=result.num_partitions,
                replication_factor=result.replication_factor,
            )
            for result in results
        ]
    )


def delete_topic_ids_from_proto(request: pb.DeleteTopicsRequest) -> list[UUID]:
    return [uuid_from_proto(topic_id, "DeleteTopics topic_ids") for topic_id in request.topic_ids]


def delete_topics_to_proto(results: Sequence[DeleteTopicResult]) -> pb.DeleteTopicsResponse:
    return pb.DeleteTopicsResponse(
        topics=[
            pb.DeletableTopicResult(
                name=result.name or "",
                topic_id=_uuid_bytes(result.topic_id),
                error=error_status(result.error),
            )
            for result in results
        ]
    )


def create_partitions_from_proto(
    request: pb.CreatePartitionsRequest,
) -> list[CreatePartitionsTopic]:
    return [
        CreatePartitionsTopic(
            name=topic.name,
            count=topic.count,
            assignments=[tuple(a.broker_ids) for a in topic.assignments] or None,
        )
        for topic in request.topics
    ]


def create_partitions_to_proto(
    results: Sequence[CreatePartitionsResult],
) -> pb.CreatePartitionsResponse:
    return pb.CreatePartitionsResponse(
        results=[
            pb.CreatePartitionsTopicResult(name=result.name, error=error_status(result.error))
            for result in results
        ]
    )


# --- metadata reads -------------------------------------------------------------------------------


def broker_to_proto(broker: BrokerView) -> pb.BrokerEndpoint:
    endpoint = broker.endpoint
    return pb.BrokerEndpoint(
        broker_id=broker.broker_id,
        host="" if endpoint is None else endpoint.host,
        port=0 if endpoint is None else endpoint.port,
        rack=broker.rack,
        fenced=broker.fenced,
        in_controlled_shutdown=broker.in_controlled_shutdown,
        broker_epoch=broker.broker_epoch,
    )


def describe_cluster_to_proto(description: ClusterDescription) -> pb.DescribeClusterResponse:
    return pb.DescribeClusterResponse(
        cluster_id=description.cluster_id,
        brokers=[broker_to_proto(broker) for broker in description.brokers],
        metadata_offset=description.offset,
    )


def partition_to_proto(partition: PartitionView) -> pb.PartitionMetadata:
    registration = partition.registration
    return pb.PartitionMetadata(
        error=error_status(partition.error),
        partition_index=partition.partition_id,
        leader_id=registration.leader,
        leader_epoch=registration.leader_epoch,
        partition_epoch=registration.partition_epoch,
        replicas=registration.replicas,
        isr=registration.isr,
        offline_replicas=partition.offline_replicas,
        adding_replicas=registration.adding_replicas,
        removing_replicas=registration.removing_replicas,
    )


def topic_to_proto(topic: TopicView) -> pb.TopicMetadata:
    return pb.TopicMetadata(
        error=error_status(topic.error),
        name=topic.name,
        topic_id=_uuid_bytes(topic.topic_id),
        partitions=[partition_to_proto(partition) for partition in topic.partitions],
    )


def metadata_to_proto(view: MetadataView) -> pb.MetadataResponse:
    return pb.MetadataResponse(
        cluster_id=view.cluster_id,
        brokers=[broker_to_proto(broker) for broker in view.brokers],
        topics=[topic_to_proto(topic) for topic in view.topics],
        metadata_offset=view.offset,
    )


# --- broker lifecycle -----------------------------------------------------------------------------


def broker_registration_from_proto(
    request: pb.BrokerRegistrationRequest,
) -> BrokerRegistrationRequest:
    return BrokerRegistrationRequest(
        broker_id=request.broker_id,
        cluster_id=request.cluster_id,
        incarnation_id=uuid_from_proto(request.incarnation_id, "BrokerRegistration incarnation_id"),
        endpoints=tuple(
            Endpoint(listener.name, listener.host, listener.port, listener.security_protocol)
            for listener in request.listeners
        ),
        features=tuple(
            FeatureRange(f.name, f.min_supported_version, f.max_supported_version)
            for f in request.features
        ),
        rack=request.rack if request.HasField("rack") else None,
        previous_broker_epoch=request.previous_broker_epoch,
    )


def broker_registration_to_proto(reply: BrokerRegistrationReply) -> pb.BrokerRegistrationResponse:
    return pb.BrokerRegistrationResponse(broker_epoch=reply.broker_epoch)


def broker_heartbeat_from_proto(request: pb.BrokerHeartbeatRequest) -> BrokerHeartbeatRequest:
    return BrokerHeartbeatRequest(
        broker_id=request.broker_id,
        broker_epoch=request.broker_epoch,
        current_metadata_offset=request.current_metadata_offset,
        want_fence=request.want_fence,
        want_shut_down=request.want_shut_down,
    )


def broker_heartbeat_to_proto(reply: BrokerHeartbeatReply) -> pb.BrokerHeartbeatResponse:
    return pb.BrokerHeartbeatResponse(
        is_caught_up=reply.is_caught_up,
        is_fenced=reply.is_fenced,
        should_shut_down=reply.should_shut_down,
    )


# --- partition state --------------------------------------------------------------------------


def _recovery_state(value: int, where: str) -> LeaderRecoveryState:
    try:
        return LeaderRecoveryState(value)
    except ValueError:
        raise InvalidRequestError(
            f"{where}: leader_recovery_state {value} is neither 0 (RECOVERED) nor 1 (RECOVERING)"
        ) from None


def alter_partition_from_proto(request: pb.AlterPartitionRequest) -> list[AlterPartitionItem]:
    items = []
    for topic in request.topics:
        topic_id = uuid_from_proto(topic.topic_id, "AlterPartition topic_id")
        for partition in topic.partitions:
            where = f"AlterPartition of {topic_id}-{partition.partition_index}"
            items.append(
                AlterPartitionItem(
                    topic_id=topic_id,
                    partition_id=partition.partition_index,
                    leader_epoch=partition.leader_epoch,
                    new_isr=tuple(
                        IsrMember(m.broker_id, m.broker_epoch) for m in partition.new_isr
                    ),
                    partition_epoch=partition.partition_epoch,
                    leader_recovery_state=_recovery_state(partition.leader_recovery_state, where),
                )
            )
    return items


def alter_partition_to_proto(results: Sequence[AlterPartitionResult]) -> pb.AlterPartitionResponse:
    """Results grouped by topic, topics in the order they first appear."""
    by_topic: dict[UUID, list[pb.AlterPartitionPartitionResult]] = {}
    for result in results:
        by_topic.setdefault(result.topic_id, []).append(
            pb.AlterPartitionPartitionResult(
                partition_index=result.partition_id,
                error=error_status(result.error),
                leader_id=result.leader,
                leader_epoch=result.leader_epoch,
                isr=result.isr,
                leader_recovery_state=int(result.leader_recovery_state),
                partition_epoch=result.partition_epoch,
            )
        )
    return pb.AlterPartitionResponse(
        topics=[
            pb.AlterPartitionTopicResult(topic_id=topic_id.bytes, partitions=partitions)
            for topic_id, partitions in by_topic.items()
        ]
    )


# --- reassignment and elections -------------------------------------------------------------------


def reassignments_from_proto(
    request: pb.AlterPartitionReassignmentsRequest,
) -> list[ReassignablePartition]:
    return [
        ReassignablePartition(
            topic=topic.name,
            partition_id=partition.partition_index,
            replicas=(
                tuple(partition.replicas.broker_ids) if partition.HasField("replicas") else None
            ),
        )
        for topic in request.topics
        for partition in topic.partitions
    ]


def reassignments_to_proto(
    results: Sequence[ReassignmentResult],
) -> pb.AlterPartitionReassignmentsResponse:
    return pb.AlterPartitionReassignmentsResponse(
        results=[
            pb.ReassignablePartitionResult(
                topic=result.topic,
                partition_index=result.partition_id,
                error=error_status(result.error),
            )
            for result in results
        ]
    )


def list_reassignments_from_proto(
    request: pb.ListPartitionReassignmentsRequest,
) -> list[tuple[str, int]] | None:
    return _partitions(request.partitions)


def ongoing_reassignments_to_proto(
    reassignments: Sequence[OngoingReassignment],
) -> pb.ListPartitionReassignmentsResponse:
    return pb.ListPartitionReassignmentsResponse(
        reassignments=[
            pb.OngoingReassignment(
                topic=r.topic,
                partition_index=r.partition_id,
                replicas=r.replicas,
                adding_replicas=r.adding_replicas,
                removing_replicas=r.removing_replicas,
            )
            for r in reassignments
        ]
    )


def elect_leaders_from_proto(
    request: pb.ElectLeadersRequest,
) -> tuple[ElectionType, list[tuple[str, int]] | None]:
    try:
        election_type = ElectionType(request.election_type)
    except ValueError:
        raise InvalidRequestError(
            f"ElectLeaders election_type {request.election_type} is neither 0 (PREFERRED) nor "
            "1 (UNCLEAN)"
        ) from None
    return election_type, _partitions(request.partitions)


def elect_leaders_to_proto(results: Sequence[ElectLeadersResult]) -> pb.ElectLeadersResponse:
    return pb.ElectLeadersResponse(
        results=[
            pb.PartitionElectionResult(
                topic=result.topic,
                partition_index=result.partition_id,
                error=error_status(result.error),
            )
            for result in results
        ]
    )


# --- configs ----------------------------------------------------------------------------------


def config_resource_from_proto(resource_type: int, resource_name: str) -> ConfigResource:
    try:
        kind = ConfigResourceType(resource_type)
    except ValueError:
        raise InvalidRequestError(
            f"config resource {resource_name!r}: resource_type {resource_type} is none of "
            "2 (TOPIC), 4 (BROKER), 32 (GROUP)"
        ) from None
    return ConfigResource(kind, resource_name)


def describe_configs_from_proto(
    request: pb.DescribeConfigsRequest,
) -> list[tuple[ConfigResource, list[str] | None]]:
    return [
        (
            config_resource_from_proto(r.resource_type, r.resource_name),
            list(r.configuration_keys) or None,
        )
        for r in request.resources
    ]


def describe_configs_to_proto(
    descriptions: Sequence[ConfigDescription],
) -> pb.DescribeConfigsResponse:
    results = [
        pb.DescribeConfigsResult(
            resource_type=int(d.resource.resource_type),
            resource_name=d.resource.resource_name,
            error=error_status(d.error),
            configs=[
                pb.ConfigEntry(
                    name=entry.name,
                    value=entry.value,
                    is_default=entry.is_default,
                    read_only=False,
                    is_sensitive=False,
                    source=entry.source.value,
                )
                for entry in d.configs
            ],
        )
        for d in descriptions
    ]
    return pb.DescribeConfigsResponse(results=results)


def alter_configs_from_proto(
    request: pb.IncrementalAlterConfigsRequest,
) -> dict[ConfigResource, list[AlterConfigOp]]:
    changes: dict[ConfigResource, list[AlterConfigOp]] = {}
    for r in request.resources:
        resource = config_resource_from_proto(r.resource_type, r.resource_name)
        if resource in changes:
            raise InvalidRequestError(
                f"IncrementalAlterConfigs names config resource {resource.resource_type.name} "
                f"{resource.resource_name!r} more than once"
            )
        ops = []
        for config in r.configs:
            try:
                op = AlterConfigOpType(config.operation)
            except ValueError:
                raise InvalidRequestError(
                    f"config {config.name} of {resource.resource_type.name} "
                    f"{resource.resource_name!r}: operation {config.operation} is not 0 (SET), "
                    "1 (DELETE), 2 (APPEND) or 3 (SUBTRACT)"
                ) from None
            value = config.value if config.HasField("value") else None
            ops.append(AlterConfigOp(config.name, op, value))
        changes[resource] = ops
    return changes


def replaced_resources_from_proto(
    request: pb.IncrementalAlterConfigsRequest,
) -> set[ConfigResource]:
    """The resources whose other dynamic configs the request deletes (legacy AlterConfigs)."""
    return {
        config_resource_from_proto(r.resource_type, r.resource_name)
        for r in request.resources
        if r.replace
    }


def alter_configs_to_proto(
    outcome: Mapping[ConfigResource, KafkaError | None],
) -> pb.IncrementalAlterConfigsResponse:
    return pb.IncrementalAlterConfigsResponse(
        results=[
            pb.AlterConfigsResult(
                resource_type=int(resource.resource_type),
                resource_name=resource.resource_name,
                error=error_status(error),
            )
            for resource, error in outcome.items()
        ]
    )


# --- producer ids -----------------------------------------------------------------------------


def producer_ids_to_proto(block: ProducerIdsBlock) -> pb.AllocateProducerIdsResponse:
    return pb.AllocateProducerIdsResponse(
        producer_id_start=block.first_producer_id, producer_id_len=block.size
    )
