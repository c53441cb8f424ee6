"""Kafka's answers about the cluster read into the admin dataclasses: Metadata, DescribeCluster,
DescribeQuorum, DescribeLogDirs, and the error codes every answer carries.

`kafka_admin_client` reads these; what a change answers (topics created, configs, elections,
reassignments) is `kafka_answers`, apart, so that a command that only reads the cluster
(`replog topics list`) loads none of the change results.

Rules:
- An error code of 0 is None, any other the `replog.errors` exception for it carrying the
  broker's message (`answer_error`); -1 ("none", "unknown") is None, as in `controller_errors`.
  Metadata's errors come without a message: the topic or partition is named instead.
- The all-zero topic id means "none" (Kafka's `Uuid.ZERO_UUID`).
- A Metadata answer says how current it is in replog's tagged field (`staleness_tag`), when
  the answering node is a controller; without it the answer is taken as current.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
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
from replog.common import TopicPartition
from replog.errors import (
    KafkaError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
    answer_error,
    error_for_code,
)
from replog.kafka import replica_offsets_tag, staleness_tag
from replog.kafka.messages import describe_quorum_response as dqr
from replog.kafka.messages import metadata_request as mr
from replog.kafka.messages.describe_cluster_response import DescribeClusterResponse
from replog.kafka.messages.describe_log_dirs_response import DescribeLogDirsResponse
from replog.kafka.messages.metadata_response import MetadataResponse
from replog.net_address import format_host_port

if TYPE_CHECKING:
    from replog.admin.controller_results import OngoingReassignment
    from replog.admin.quorum_description import QuorumDescription
    from replog.replication import messages as m

ZERO_UUID = UUID(int=0)


def error(code: int, message: str | None = None) -> KafkaError | None:
    """The exception a Kafka error code stands for (None for 0), with the broker's message."""
    return answer_error(code, message)


def _name(code: int) -> str:
    """Kafka's name of an error code (Metadata's errors come without a message)."""
    return error_for_code(code).error_name


def topic_id(value: UUID) -> UUID | None:
    return None if value == ZERO_UUID else value


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
    addresses and listener names are their first listeners (v2 and up)."""
    from replog.admin.quorum_description import QuorumDescription

    partition = quorum_partition(response)

    def replicas(states: Sequence[dqr.ReplicaState]) -> list[tuple[int, int, int, int]]:
        return [
            (r.replica_id, r.log_end_offset, r.last_fetch_timestamp, r.last_caught_up_timestamp)
            for r in states
        ]

    listed = [(n.node_id, n.listeners[0]) for n in response.nodes if n.listeners]
    return QuorumDescription.of(
        partition.leader_id,
        partition.leader_epoch,
        partition.high_watermark,
        replicas(partition.current_voters),
        replicas(partition.observers),
        address,
        {node: format_host_port(listener.host, listener.port) for node, listener in listed},
        {node: listener.name for node, listener in listed},
    )


# --- log dirs -------------------------------------------------------------------------------


def log_dirs(
    response: DescribeLogDirsResponse, topics: Collection[str] = ()
) -> m.DescribeLogDirsResponse:
    """One broker's answer: its dirs and their replicas (only `topics`' when given), with the
    offsets of replog's tag (-1 when a broker did not add it)."""
    from replog.replication import messages as m

    dirs = []
    for result in response.results:
        replicas = []
        for topic in result.topics:
            if topics and topic.name not in topics:
                continue
            for p in topic.partitions:
                offsets = replica_offsets_tag.decode(p.unknown_tagged_fields)
                start, end, high = offsets if offsets is not None else (-1, -1, -1)
                replicas.append(
                    m.ReplicaLogInfo(
                        topic.name,
                        p.partition_index,
                        p.partition_size,
                        p.offset_lag,
                        p.is_future_key,
                        start,
                        end,
                        high,
                        replica_offsets_tag.decode_dirty_ratio(p.unknown_tagged_fields),
                    )
                )
        dirs.append(m.LogDirDescription(result.log_dir, error(result.error_code), tuple(replicas)))
    return m.DescribeLogDirsResponse(tuple(dirs))
