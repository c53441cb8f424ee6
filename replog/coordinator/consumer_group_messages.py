"""The consumer-protocol (KIP-848) group requests and answers, as the coordinator sees them:
ConsumerGroupHeartbeat and ConsumerGroupDescribe with Kafka's fields under snake_case names.

Partitions travel as (topic id, sorted partitions) pairs, as on the wire. In a heartbeat None
means "unchanged since the last heartbeat" (Kafka's nullable fields); errors are
`replog.errors.KafkaError` instances naming what they are about, None is success.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from uuid import UUID

from replog.coordinator.consumer_group_records import TopicPartitions

__all__ = [
    "CONSUMER_GROUP_TYPE",
    "CONSUMER_PROTOCOL_TYPE",
    "ConsumerGroupHeartbeatRequest",
    "ConsumerGroupHeartbeatResponse",
    "DescribedConsumerGroup",
    "DescribedConsumerMember",
    "NamedTopicPartitions",
    "TopicPartitions",
]
from replog.errors import KafkaError

# The protocol type and group type a consumer-protocol group is listed with (ListGroups).
CONSUMER_PROTOCOL_TYPE = "consumer"
CONSUMER_GROUP_TYPE = "consumer"


@dataclass(frozen=True, slots=True)
class ConsumerGroupHeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int  # 0 joins, -1 leaves, -2 a static member leaves for a while
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: TopicPartitions | None = None  # the partitions the member owns
    client_id: str = ""
    client_host: str = ""
    api_version: int = 1  # v1+: the member generates its id (KIP-1082)


@dataclass(frozen=True, slots=True)
class ConsumerGroupHeartbeatResponse:
    error: KafkaError | None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: TopicPartitions | None = None  # None: unchanged


# (topic id, topic name ("" for a topic the coordinator does not know), sorted partitions)
NamedTopicPartitions = tuple[tuple[UUID, str, tuple[int, ...]], ...]
# A member's type in a described group (ConsumerGroupDescribe v1's MemberType, KIP-1099): it
# joined with the classic protocol (JoinGroup) or with the consumer protocol
# (ConsumerGroupHeartbeat). A group without online migration holds members of its own type.
CLASSIC_MEMBER = "classic"
CONSUMER_MEMBER = "consumer"


@dataclass(frozen=True, slots=True)
class DescribedConsumerMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: NamedTopicPartitions
    target_assignment: NamedTopicPartitions
    member_type: str = CONSUMER_MEMBER


@dataclass(frozen=True, slots=True)
class DescribedConsumerGroup:
    group_id: str
    error: KafkaError | None
    state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[DescribedConsumerMember, ...] = field(default=())
