"""Kafka's admin requests built from the admin dataclasses, and the answers of changes read back
into them: topics and partitions, configs, elections, reassignments, records deleted.

`kafka_admin_client` sends these requests to a Kafka listener; what comes back is the same
`controller_results` dataclasses the commands and the Admin client read, whatever protocol
carried them. What the cluster says of itself is `kafka_cluster_answers`.

Rules:
- Errors as `kafka_cluster_answers.error` reads them; a request-level error of an answer is
  every item's.
- Requests name each topic once, in the order given; results keep the answer's order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from uuid import UUID

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
from replog.admin.kafka_cluster_answers import ZERO_UUID, error, topic_id
from replog.common import TopicPartition
from replog.errors import KafkaError, MalformedResponseError, UnknownServerError
from replog.kafka.messages import alter_partition_reassignments_request as apr
from replog.kafka.messages import create_partitions_request as cp
from replog.kafka.messages import create_topics_request as ct
from replog.kafka.messages import delete_records_request as drq
from replog.kafka.messages import delete_topics_request as dt
from replog.kafka.messages import describe_configs_request as dc
from replog.kafka.messages import incremental_alter_configs_request as iac
from replog.kafka.messages import list_partition_reassignments_request as lpr
from replog.kafka.messages.alter_partition_reassignments_response import (
    AlterPartitionReassignmentsResponse,
)
from replog.kafka.messages.create_partitions_response import CreatePartitionsResponse
from replog.kafka.messages.create_topics_response import CreateTopicsResponse
from replog.kafka.messages.delete_records_response import DeleteRecordsResponse
from replog.kafka.messages.delete_topics_response import DeleteTopicsResponse
from replog.kafka.messages.describe_configs_response import DescribeConfigsResponse
from replog.kafka.messages.elect_leaders_request import ElectLeadersRequest, TopicPartitions
from replog.kafka.messages.elect_leaders_response import ElectLeadersResponse
from replog.kafka.messages.incremental_alter_configs_response import (
    IncrementalAlterConfigsResponse,
)
from replog.kafka.messages.list_partition_reassignments_response import (
    ListPartitionReassignmentsResponse,
)

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


def records_deleted(
    response: DeleteRecordsResponse, before: Mapping[TopicPartition, int], address: str
) -> dict[TopicPartition, int | KafkaError]:
    """Per partition: its new low watermark, or its error, naming the offset asked for (Kafka's
    answer carries a code only). An answer that cannot be (a partition not asked for, named
    twice or left out, a low watermark below 0 beside no error) is MalformedResponseError
    naming the broker."""

    def malformed(what: str) -> MalformedResponseError:
        return MalformedResponseError(f"broker at {address} answered DeleteRecords with {what}")

    found: dict[TopicPartition, int | KafkaError] = {}
    for t in response.topics:
        for p in t.partitions:
            tp = TopicPartition(t.name, p.partition_index)
            if tp not in before:
                raise malformed(f"a partition it did not ask for: {tp.topic}-{tp.partition}")
            if tp in found:
                raise malformed(f"partition {tp.topic}-{tp.partition} twice")
            failed = error(p.error_code)
            if failed is not None:
                found[tp] = type(failed)(f"offset {before[tp]}: {failed.error_name}")
            elif p.low_watermark < 0:
                raise malformed(
                    f"low_watermark {p.low_watermark} for {tp.topic}-{tp.partition} beside no error"
                )
            else:
                found[tp] = p.low_watermark
    missing = [tp for tp in before if tp not in found]
    if missing:
        raise malformed("no result for " + ", ".join(f"{t}-{p}" for t, p in missing))
    return found
