"""One member of a consumer-protocol (KIP-848) group: its subscription and its assignment
state, as Kafka's `ConsumerGroupMember` keeps them.

Partitions are (topic id, partition) pairs, as the protocol names them. A member is frozen: each
change is a new member, which the coordinator compares with the old one to decide which records
to write. Rules: a member is reconciled to an epoch when it is STABLE at that epoch; a new
member starts at epoch 0 (previous 0), STABLE, owning nothing. A member with `classic`
metadata uses the classic protocol (JoinGroup, SyncGroup, Heartbeat) inside the consumer group:
its session timeout is its own, and its JoinGroup protocols are kept for a downgrade.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, replace
from enum import Enum
from uuid import UUID

from replog.coordinator.consumer_group_records import ClassicMemberMetadata, TopicPartitions

TP = tuple[UUID, int]
Partitions = frozenset[TP]
NO_PARTITIONS: Partitions = frozenset()
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class MemberState(Enum):
    """Kafka's `MemberState`, with its record values."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127

    @classmethod
    def of(cls, value: int) -> MemberState:
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


@dataclass(frozen=True, slots=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Partitions = NO_PARTITIONS
    pending_revocation: Partitions = NO_PARTITIONS
    classic: ClassicMemberMetadata | None = None

    def is_reconciled_to(self, epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == epoch

    def with_assignment(
        self,
        epoch: int,
        previous_epoch: int,
        state: MemberState,
        assigned: Partitions,
        pending_revocation: Partitions,
    ) -> ConsumerMember:
        return replace(
            self,
            member_epoch=epoch,
            previous_member_epoch=previous_epoch,
            state=state,
            assigned=assigned,
            pending_revocation=pending_revocation,
        )

    def same_subscription(self, other: ConsumerMember) -> bool:
        return (
            self.subscribed_topic_names == other.subscribed_topic_names
            and self.subscribed_topic_regex == other.subscribed_topic_regex
        )


def by_topic(partitions: Iterable[TP]) -> TopicPartitions:
    """Partitions grouped by topic id, both sorted (the records' and the wire's shape)."""
    topics: defaultdict[UUID, list[int]] = defaultdict(list)
    for topic_id, partition in partitions:
        topics[topic_id].append(partition)
    return tuple((t, tuple(sorted(ps))) for t, ps in sorted(topics.items()))


def flatten(topics: TopicPartitions | Iterable[tuple[UUID, Iterable[int]]]) -> Partitions:
    """The (topic id, partition) pairs of partitions grouped by topic."""
    return frozenset((topic_id, p) for topic_id, partitions in topics for p in partitions)
