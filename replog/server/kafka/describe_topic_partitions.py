"""DescribeTopicPartitions (API 75, KIP-966): topics and their partitions with the eligible
leader replicas, from a broker's metadata image, in pages (Kafka's
`DescribeTopicPartitionsRequestHandler` and `KRaftMetadataCache`).

Rules:
- No topic named: every topic. Otherwise the named ones; either way only names at or after
  the cursor's topic, sorted. A cursor naming a topic the request does not name, or a negative
  partition, is INVALID_REQUEST for every topic named (Kafka's error response).
- At most `response_partition_limit` partitions (clamped to 1..`MAX_PARTITIONS`, Kafka's
  `max.request.partition.size.limit`), from the cursor's partition of its topic, 0 of the
  others; where the limit cuts a topic or falls before the next one, `next_cursor` names the
  first partition left out.
- With an authorizer (`visible`: may the caller DESCRIBE the topic), as Kafka's handler: the
  topics the caller may not DESCRIBE are left out before the page is cut (so no cursor names
  one); when topics were named, each such one is TOPIC_AUTHORIZATION_FAILED with a zero
  topic id after the others, whether or not it exists.
- A named topic that is not there: UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for a
  name no topic may have), zero topic id; left out when every topic was asked for.
- Per partition, as Kafka's: the leader only if it is registered with this listener (else -1),
  replicas and ISR as registered, the ELR and last-known ELR, offline replicas (unregistered,
  fenced, or without this listener).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from replog.errors import (
    InvalidRequestError,
    InvalidTopicError,
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
)
from replog.kafka.messages import describe_topic_partitions_response as dtp
from replog.kafka.messages.describe_topic_partitions_request import DescribeTopicPartitionsRequest
from replog.kafka.protocol.codec import ZERO_UUID
from replog.quorum.metadata.image import MetadataImage
from replog.quorum.metadata.partition_registration import PartitionRegistration
from replog.server.kafka.broker_metadata import listener_endpoint
from replog.topic_names import is_internal_topic, topic_name_problem

DESCRIBE_TOPIC_PARTITIONS = 75
MAX_PARTITIONS = 2000  # Kafka's max.request.partition.size.limit default


def describe_topic_partitions(
    image: MetadataImage,
    request: DescribeTopicPartitionsRequest,
    listener_name: str,
    visible: Callable[[str], bool] | None = None,
) -> dtp.DescribeTopicPartitionsResponse:
    """The answer (module Rules); `visible` None: authorization off."""
    try:
        return _described(image, request, listener_name, visible)
    except InvalidRequestError:
        return dtp.DescribeTopicPartitionsResponse(
            topics=[
                dtp.DescribeTopicPartitionsResponseTopic(
                    error_code=InvalidRequestError.code, name=topic.name, is_internal=False
                )
                for topic in request.topics
            ]
        )


def _described(
    image: MetadataImage,
    request: DescribeTopicPartitionsRequest,
    listener_name: str,
    visible: Callable[[str], bool] | None,
) -> dtp.DescribeTopicPartitionsResponse:
    cursor = request.cursor
    after = "" if cursor is None else cursor.topic_name
    every = not request.topics
    names = sorted(image.topics.by_name) if every else sorted({t.name for t in request.topics})
    names = [name for name in names if name >= after]
    if cursor is not None:
        if not every and cursor.topic_name not in names:
            raise InvalidRequestError(
                f"the cursor's topic {cursor.topic_name!r} is not among the topics asked for"
            )
        if cursor.partition_index < 0:
            raise InvalidRequestError(
                f"the cursor's partition {cursor.partition_index} is negative"
            )
    refused: list[str] = []
    if visible is not None:
        refused = [name for name in names if not visible(name)]
        names = [name for name in names if name not in refused]
    remaining = max(min(MAX_PARTITIONS, request.response_partition_limit), 1)
    answer = dtp.DescribeTopicPartitionsResponse()
    for name in names:
        if remaining == 0:
            answer.next_cursor = dtp.Cursor(topic_name=name, partition_index=0)
            break
        topic = image.topics.by_name.get(name)
        if topic is None:
            if not every:
                answer.topics.append(_missing(name))
            continue
        first = cursor.partition_index if cursor is not None and name == after else 0
        end = min(len(topic.partitions), first + remaining)
        answer.topics.append(
            dtp.DescribeTopicPartitionsResponseTopic(
                name=name,
                topic_id=topic.topic_id,
                is_internal=is_internal_topic(name),
                partitions=list(_partitions(image, topic.partitions, first, end, listener_name)),
            )
        )
        if end < len(topic.partitions):
            answer.next_cursor = dtp.Cursor(topic_name=name, partition_index=end)
            break
        remaining -= max(end - first, 0)
    if not every:
        answer.topics.extend(
            dtp.DescribeTopicPartitionsResponseTopic(
                error_code=TopicAuthorizationFailedError.code,
                name=name,
                topic_id=ZERO_UUID,
                is_internal=False,
            )
            for name in refused
        )
    return answer


def _partitions(
    image: MetadataImage,
    partitions: Mapping[int, PartitionRegistration],
    first: int,
    end: int,
    listener_name: str,
) -> Iterator[dtp.DescribeTopicPartitionsResponsePartition]:
    brokers = image.cluster.brokers
    for partition_id in range(first, end):
        registration = partitions.get(partition_id)
        if registration is None:
            continue
        leader = registration.leader
        if listener_endpoint(image, leader, listener_name) is None:
            leader = -1
        offline = [
            r
            for r in registration.replicas
            if (broker := brokers.get(r)) is None
            or broker.fenced
            or listener_endpoint(image, r, listener_name) is None
        ]
        yield dtp.DescribeTopicPartitionsResponsePartition(
            partition_index=partition_id,
            leader_id=leader,
            leader_epoch=registration.leader_epoch,
            replica_nodes=list(registration.replicas),
            isr_nodes=list(registration.isr),
            eligible_leader_replicas=list(registration.elr),
            last_known_elr=list(registration.last_known_elr),
            offline_replicas=offline,
        )


def _missing(name: str) -> dtp.DescribeTopicPartitionsResponseTopic:
    error = InvalidTopicError if topic_name_problem(name) else UnknownTopicOrPartitionError
    return dtp.DescribeTopicPartitionsResponseTopic(
        error_code=error.code, name=name, topic_id=ZERO_UUID, is_internal=is_internal_topic(name)
    )
