"""One consumer-protocol (KIP-848) group as its records build it: Kafka's `ConsumerGroup`.

The group only keeps facts; `consumer_group_coordinator` decides. Every change reaches a group
through `apply` of one of its records (the coordinator writes a record and applies it, a new
coordinator replays the same records from `__consumer_offsets`), so a group rebuilt from its
records is the group that wrote them. Rules:
- Epochs: the group epoch goes up on every change of membership or subscriptions (or of the
  subscribed topics' partitions); the target assignment epoch is the group epoch the target
  assignment was computed at; each member has its own epoch.
- State (derived, Kafka's): Empty without members; Assigning while the group epoch is ahead of
  the target assignment epoch; Reconciling while a member is not reconciled to the target
  assignment epoch; else Stable.
- A partition is held by at most one member (assigned or pending revocation): `holder` answers
  whose it is; applying a record that would give a held partition to another member is a bug
  and raises `CorruptRecordError`.
- A current-assignment tombstone leaves the member at epoch -1 owning nothing; a member
  tombstone removes it; a group-epoch tombstone removes the group (`removed`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum

from replog.coordinator import consumer_group_records as rec
from replog.coordinator.consumer_member import (
    LEAVE_GROUP_MEMBER_EPOCH,
    NO_PARTITIONS,
    TP,
    ConsumerMember,
    MemberState,
    Partitions,
    flatten,
)
from replog.errors import CorruptRecordError


class ConsumerGroupState(Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(eq=False)
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    targets: dict[str, Partitions] = field(default_factory=dict)
    # The subscribed topics as the last target assignment saw them: name -> metadata.
    topics: dict[str, rec.TopicMetadata] = field(default_factory=dict)
    removed: bool = False  # its group-epoch tombstone was applied
    _holders: dict[TP, str] = field(default_factory=dict)

    @property
    def state(self) -> ConsumerGroupState:
        if self.removed:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def copy(self) -> ConsumerGroup:
        """An independent copy (its members, targets and topics are immutable values, so the
        maps alone are copied)."""
        return replace(
            self,
            members=dict(self.members),
            targets=dict(self.targets),
            topics=dict(self.topics),
            _holders=dict(self._holders),
        )

    def holder(self, tp: TP) -> str | None:
        """The member holding `tp` (assigned or pending revocation), if any."""
        return self._holders.get(tp)

    def static_member(self, instance_id: str) -> ConsumerMember | None:
        for member in self.members.values():
            if member.instance_id == instance_id:
                return member
        return None

    def target(self, member_id: str) -> Partitions:
        return self.targets.get(member_id, NO_PARTITIONS)

    # --- records -------------------------------------------------------------------------------

    def apply(self, key: rec.ConsumerGroupKey, value: rec.ConsumerGroupValue | None) -> None:
        """Apply one of the group's records (module docstring)."""
        kind = key.record_type
        if kind == rec.CONSUMER_GROUP_METADATA:
            if value is None:
                self.removed = True
            else:
                assert isinstance(value, rec.GroupEpochValue)
                self.group_epoch = value.epoch
        elif kind == rec.CONSUMER_GROUP_PARTITION_METADATA:
            topics = value.topics if isinstance(value, rec.PartitionMetadataValue) else ()
            self.topics = {t.name: t for t in topics}
        elif kind == rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA:
            if isinstance(value, rec.TargetAssignmentEpochValue):
                self.assignment_epoch = value.assignment_epoch
            else:
                self.assignment_epoch = -1
        elif kind == rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER:
            if isinstance(value, rec.TargetAssignmentMemberValue):
                self.targets[key.member] = flatten(value.partitions)
            else:
                self.targets.pop(key.member, None)
        elif kind == rec.CONSUMER_GROUP_MEMBER_METADATA:
            self._apply_member(key.member, value)
        else:
            self._apply_assignment(key.member, value)

    def _apply_member(self, member_id: str, value: rec.ConsumerGroupValue | None) -> None:
        old = self.members.get(member_id)
        if value is None:
            if old is not None:
                self._set(old, None)
            return
        assert isinstance(value, rec.MemberMetadataValue)
        base = old if old is not None else ConsumerMember(member_id)
        self._set(
            base,
            replace(
                base,
                instance_id=value.instance_id,
                rack_id=value.rack_id,
                client_id=value.client_id,
                client_host=value.client_host,
                subscribed_topic_names=value.subscribed_topic_names,
                subscribed_topic_regex=value.subscribed_topic_regex,
                rebalance_timeout_ms=value.rebalance_timeout_ms,
                server_assignor=value.server_assignor,
                classic=value.classic,
            ),
        )

    def _apply_assignment(self, member_id: str, value: rec.ConsumerGroupValue | None) -> None:
        old = self.members.get(member_id)
        if old is None:
            if value is None:
                return
            raise CorruptRecordError(
                f"group {self.group_id!r}: an assignment of member {member_id!r}, which has no "
                "member record"
            )
        if value is None:
            new = old.with_assignment(
                LEAVE_GROUP_MEMBER_EPOCH,
                LEAVE_GROUP_MEMBER_EPOCH,
                MemberState.STABLE,
                NO_PARTITIONS,
                NO_PARTITIONS,
            )
        else:
            assert isinstance(value, rec.CurrentAssignmentValue)
            new = old.with_assignment(
                value.member_epoch,
                value.previous_member_epoch,
                MemberState.of(value.state),
                flatten(value.assigned),
                flatten(value.pending_revocation),
            )
        self._set(old, new)

    def _set(self, old: ConsumerMember, new: ConsumerMember | None) -> None:
        """Replace `old` by `new` (None: remove it), keeping the holders of partitions."""
        for tp in old.assigned | old.pending_revocation:
            if self._holders.get(tp) == old.member_id:
                del self._holders[tp]
        if new is None:
            self.members.pop(old.member_id, None)
            return
        for tp in new.assigned | new.pending_revocation:
            holder = self._holders.get(tp)
            if holder is not None and holder != new.member_id:
                raise CorruptRecordError(
                    f"group {self.group_id!r}: partition {tp[0]}-{tp[1]} given to member "
                    f"{new.member_id!r} while member {holder!r} holds it"
                )
            self._holders[tp] = new.member_id
        self.members[new.member_id] = new
