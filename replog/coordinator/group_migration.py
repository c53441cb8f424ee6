"""KIP-848's online migration of a group with members between the classic and the consumer
protocol, as Kafka 4.x converts it (`GroupMetadataManager`): pure functions from one protocol's
group to the other's records.

Rules:
- `group.consumer.migration.policy`: `bidirectional` (Kafka's default), `upgrade`, `downgrade`
  or `disabled`, case-insensitive; any other value is INVALID_CONFIG. An Empty group of the
  other protocol is replaced whatever the policy (that is no migration).
- Upgrade (`upgrade_records`): a classic group whose protocol type is `consumer`, in any state
  with members, becomes a consumer group at group epoch = target assignment epoch = its
  generation (a group still in its first join phase reads its members' subscriptions from the
  protocol it would choose). Each member keeps
  its id, instance id, client, rebalance timeout and the partitions its SyncGroup assignment
  held (topics the cluster no longer has are dropped): member epoch and previous epoch = the
  generation, Stable, target = assigned; its subscribed topics and rack come from its JoinGroup
  metadata, and its session timeout and JoinGroup protocols are kept as its classic member
  metadata. Records in Kafka's order: every member's subscription, the group epoch, every
  target, the target epoch, every current assignment (the caller writes the classic group's
  tombstone first). A member's subscription or assignment that does not parse is a
  ValueError; an assignment carrying user data (a custom assignor's, which would be lost) is
  UNSUPPORTED_VERSION, Kafka's answer to the join.
- Downgrade (`downgrade_value`): a consumer group whose members, but the leaving one, all use
  the classic protocol becomes a classic group of protocol type `consumer` at generation = the
  group epoch, Stable, each member with its classic session timeout and protocols and its
  target assignment as ConsumerProtocolAssignment bytes (v3; Kafka writes the version of the
  member's subscription); the protocol is chosen across the members as a JoinGroup round does,
  the first member leads. The caller writes the consumer group's tombstones first
  (`downgrade_tombstones`) and then starts a rebalance, so that the members rejoin.
"""

from __future__ import annotations

from collections.abc import Mapping
from uuid import UUID

from replog.common import TopicPartition
from replog.coordinator import consumer_group_records as rec
from replog.coordinator.classic_group import ClassicGroup, ClassicMember, GroupState
from replog.coordinator.consumer_group import ConsumerGroup
from replog.coordinator.consumer_member import Partitions, by_topic
from replog.coordinator.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    assignment_to_bytes,
    assignment_with_user_data,
    subscription_from_bytes,
)
from replog.coordinator.group_records import GroupMetadataValue
from replog.errors import InvalidConfigError, UnsupportedVersionError

MIGRATION_POLICY_PROPERTY = "group.consumer.migration.policy"
# policy -> (upgrade enabled, downgrade enabled)
MIGRATION_POLICIES: dict[str, tuple[bool, bool]] = {
    "bidirectional": (True, True),
    "upgrade": (True, False),
    "downgrade": (False, True),
    "disabled": (False, False),
}
DEFAULT_MIGRATION_POLICY = "bidirectional"


def check_policy(policy: str) -> None:
    if policy.lower() not in MIGRATION_POLICIES:
        raise InvalidConfigError(
            f"{MIGRATION_POLICY_PROPERTY} is {policy!r}; must be one of "
            f"{sorted(MIGRATION_POLICIES)}"
        )


def upgrade_enabled(policy: str) -> bool:
    return MIGRATION_POLICIES[policy.lower()][0]


def downgrade_enabled(policy: str) -> bool:
    return MIGRATION_POLICIES[policy.lower()][1]


def _key(kind: int, group_id: str, member_id: str = "") -> rec.ConsumerGroupKey:
    return rec.ConsumerGroupKey(kind, group_id, member_id)


def upgrade_records(
    classic: ClassicGroup, topic_ids: Mapping[str, UUID]
) -> list[rec.ConsumerGroupRecord]:
    """The records that write `classic` as a consumer group (module docstring)."""
    group_id, epoch = classic.group_id, classic.generation
    # A group still in its first join phase has chosen no protocol yet: the one it would.
    protocol = classic.protocol_name or classic.select_protocol()
    subscriptions: list[rec.ConsumerGroupRecord] = []
    targets: list[rec.ConsumerGroupRecord] = []
    currents: list[rec.ConsumerGroupRecord] = []
    for member in classic.members.values():
        where = f"group {group_id!r}, member {member.member_id!r}"
        try:
            subscription = subscription_from_bytes(member.metadata(protocol))
            assigned, user_data = (
                assignment_with_user_data(member.assignment) if member.assignment else ([], None)
            )
        except (ValueError, KeyError) as error:
            raise ValueError(f"{where}: {error}") from None
        if user_data:
            # A custom assignor's data has no place in a consumer group (Kafka's refusal).
            raise UnsupportedVersionError(
                f"{where}: its assignment carries a custom assignor's user data, which a "
                "consumer group would lose: the group stays classic"
            )
        partitions = by_topic((topic_ids[t], p) for t, p in assigned if t in topic_ids)
        subscriptions.append(
            rec.ConsumerGroupRecord(
                _key(rec.CONSUMER_GROUP_MEMBER_METADATA, group_id, member.member_id),
                rec.MemberMetadataValue(
                    member.group_instance_id,
                    subscription.rack,
                    member.client_id,
                    member.client_host,
                    subscription.topics,
                    None,
                    member.rebalance_timeout_ms,
                    None,
                    rec.ClassicMemberMetadata(member.session_timeout_ms, member.protocols),
                ),
            )
        )
        targets.append(
            rec.ConsumerGroupRecord(
                _key(rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, group_id, member.member_id),
                rec.TargetAssignmentMemberValue(partitions),
            )
        )
        currents.append(
            rec.ConsumerGroupRecord(
                _key(rec.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, group_id, member.member_id),
                rec.CurrentAssignmentValue(epoch, epoch, 0, partitions, ()),
            )
        )
    return [
        *subscriptions,
        rec.ConsumerGroupRecord(
            _key(rec.CONSUMER_GROUP_METADATA, group_id), rec.GroupEpochValue(epoch)
        ),
        *targets,
        rec.ConsumerGroupRecord(
            _key(rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, group_id),
            rec.TargetAssignmentEpochValue(epoch),
        ),
        *currents,
    ]


def downgrade_tombstones(group: ConsumerGroup) -> list[rec.ConsumerGroupRecord]:
    """The tombstones of every record of `group`, in Kafka's order."""
    group_id, members = group.group_id, sorted(group.members)
    return [
        *(
            rec.ConsumerGroupRecord(_key(kind, group_id, m), None)
            for kind in (
                rec.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
                rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
            )
            for m in members
        ),
        rec.ConsumerGroupRecord(
            _key(rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, group_id), None
        ),
        *(
            rec.ConsumerGroupRecord(_key(rec.CONSUMER_GROUP_MEMBER_METADATA, group_id, m), None)
            for m in members
        ),
        rec.ConsumerGroupRecord(_key(rec.CONSUMER_GROUP_PARTITION_METADATA, group_id), None),
        rec.ConsumerGroupRecord(_key(rec.CONSUMER_GROUP_METADATA, group_id), None),
    ]


def downgrade_value(
    group: ConsumerGroup, leaving_member_id: str, topic_names: Mapping[UUID, str], wall_ms: int
) -> GroupMetadataValue:
    """The classic group record of `group` without its leaving member (module docstring),
    stamped `wall_ms` (the wall clock, as Kafka stamps a group's state)."""
    classic = ClassicGroup(
        group.group_id,
        state=GroupState.STABLE,
        state_timestamp_ms=wall_ms,
        generation=group.group_epoch,
        protocol_type=CONSUMER_PROTOCOL_TYPE,
    )
    for member in group.members.values():
        if member.member_id == leaving_member_id:
            continue
        assert member.classic is not None, "a consumer-protocol member in a downgrade"
        classic.add(
            ClassicMember(
                member.member_id,
                member.instance_id,
                member.client_id,
                member.client_host,
                member.rebalance_timeout_ms,
                member.classic.session_timeout_ms,
                CONSUMER_PROTOCOL_TYPE,
                member.classic.protocols,
                _assignment(group.target(member.member_id), topic_names),
            ),
            None,
        )
    classic.protocol_name = classic.select_protocol()
    return classic.to_record()


def _assignment(target: Partitions, topic_names: Mapping[UUID, str]) -> bytes:
    return assignment_to_bytes(
        TopicPartition(topic_names[t], p) for t, p in target if t in topic_names
    )
