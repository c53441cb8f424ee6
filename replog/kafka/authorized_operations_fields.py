"""The authorized-operations fields of Kafka's answers, filled when the request asks for them
(Kafka's KafkaApis): `operations_fill(api_key, version, body, caller)` gives what completes the
handler's answer, or None when the request asks for none.

Rules:
- Metadata (v8+): with `include_topic_authorized_operations`, every topic entry with a name
  that was not refused (TOPIC_AUTHORIZATION_FAILED keeps the "not requested" value, as in
  Kafka) gets its topic's operations; with `include_cluster_authorized_operations` (v8-10) the
  answer gets the cluster's (`_cluster_operations`: 0 without DESCRIBE on the cluster).
- DescribeGroups (v3+) and ConsumerGroupDescribe: with `include_authorized_operations`, each
  group answered without an error gets its group's operations.
- DescribeCluster: with `include_cluster_authorized_operations`, the cluster's, 0 without
  DESCRIBE on the cluster (Kafka's KafkaApis: whatever else the caller may do there).
- DescribeTopicPartitions: always (its request has no flag; Kafka's handler fills them for
  every answer), each topic entry but those refused TOPIC_AUTHORIZATION_FAILED and the
  INVALID_REQUEST answer of a bad cursor (Kafka's error response) gets its topic's operations,
  an absent topic's name included, as Kafka's handler asks for every entry its cache gave.
- Each field is `authorized_operations`' bit field, asked of the caller without logging; a
  caller of None (authorization off) gets every supported operation, as Kafka answers without
  an authorizer.
- Pure: messages in, messages out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from replog.common.acl_codes import AclOperation, ResourceType
from replog.errors import InvalidRequestError, TopicAuthorizationFailedError
from replog.kafka.api_authorization import CLUSTER_NAME, Caller
from replog.kafka.protocol.codec import Message
from replog.security.authorized_operations import authorized_operations

Fill = Callable[[Message], Message]
METADATA, DESCRIBE_GROUPS, DESCRIBE_CLUSTER, CONSUMER_GROUP_DESCRIBE = 3, 15, 60, 69
DESCRIBE_TOPIC_PARTITIONS = 75
# Topic entries whose operations stay "not filled": refused, or a request refused as a whole.
_UNFILLED_TOPIC_ERRORS = frozenset({TopicAuthorizationFailedError.code, InvalidRequestError.code})
METADATA_FIRST_VERSION = 8
DESCRIBE_GROUPS_FIRST_VERSION = 3


def operations_fill(api_key: int, version: int, body: Any, caller: Caller | None) -> Fill | None:
    """What fills the answer's authorized-operations fields (module rules); None: none asked."""
    if api_key == METADATA and version >= METADATA_FIRST_VERSION:
        topics = bool(body.include_topic_authorized_operations)
        cluster = bool(body.include_cluster_authorized_operations)
        if topics or cluster:
            return lambda answer: _metadata(answer, caller, topics=topics, cluster=cluster)
    elif api_key in (DESCRIBE_GROUPS, CONSUMER_GROUP_DESCRIBE):
        asked = api_key == CONSUMER_GROUP_DESCRIBE or version >= DESCRIBE_GROUPS_FIRST_VERSION
        if asked and body.include_authorized_operations:
            return lambda answer: _groups(answer, caller)
    elif api_key == DESCRIBE_CLUSTER and body.include_cluster_authorized_operations:
        return lambda answer: _cluster(answer, caller)
    elif api_key == DESCRIBE_TOPIC_PARTITIONS:
        return lambda answer: _topic_partitions(answer, caller)
    return None


def _operations(caller: Caller | None, resource_type: ResourceType, name: str) -> int:
    if caller is None:
        return authorized_operations(resource_type, None)

    def may(operation: AclOperation) -> bool:
        return caller.may(operation, resource_type, name, log=False)

    return authorized_operations(resource_type, may)


def _metadata(answer: Message, caller: Caller | None, *, topics: bool, cluster: bool) -> Message:
    metadata: Any = answer
    if topics:
        for topic in metadata.topics:
            if topic.name is not None and topic.error_code != TopicAuthorizationFailedError.code:
                topic.topic_authorized_operations = _operations(
                    caller, ResourceType.TOPIC, topic.name
                )
    if cluster:
        metadata.cluster_authorized_operations = _cluster_operations(caller, log=False)
    return answer


def _topic_partitions(answer: Message, caller: Caller | None) -> Message:
    described: Any = answer
    for topic in described.topics:
        if topic.error_code not in _UNFILLED_TOPIC_ERRORS:
            topic.topic_authorized_operations = _operations(caller, ResourceType.TOPIC, topic.name)
    return answer


def _groups(answer: Message, caller: Caller | None) -> Message:
    described: Any = answer
    for group in described.groups:
        if group.error_code == 0:
            group.authorized_operations = _operations(caller, ResourceType.GROUP, group.group_id)
    return answer


def _cluster(answer: Message, caller: Caller | None) -> Message:
    cluster: Any = answer
    if cluster.error_code == 0:
        cluster.cluster_authorized_operations = _cluster_operations(caller, log=True)
    return answer


def _cluster_operations(caller: Caller | None, *, log: bool) -> int:
    """The cluster's field: 0 unless the caller may DESCRIBE the cluster (`log`: a refusal
    logged, as Kafka's DescribeCluster logs it and its Metadata does not)."""
    if caller is not None and not caller.may(
        AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME, log=log
    ):
        return 0
    return _operations(caller, ResourceType.CLUSTER, CLUSTER_NAME)
