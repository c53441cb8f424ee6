"""PartitionRegistration: one partition's replica assignment, ISR, leader and epochs.

Built from a `PartitionRecord` and advanced by `PartitionChangeRecord`s, with Kafka's replay
rules (KIP-631): each field the change carries overwrites the old value; the leader epoch goes
up by one iff the change names a leader (even the same one: a forced bump); the partition epoch
goes up by one on every change. The controller and every broker use this one type, so they
cannot disagree on what a record means.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from uuid import UUID

from quorum.metadata.records import (
    LEADER_UNCHANGED,
    NO_LEADER,
    RECOVERY_STATE_UNCHANGED,
    LeaderRecoveryState,
    PartitionChangeRecord,
    PartitionRecord,
)


@dataclass(frozen=True, slots=True)
class PartitionRegistration:
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int = NO_LEADER
    leader_epoch: int = 0
    partition_epoch: int = 0
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    leader_recovery_state: LeaderRecoveryState = LeaderRecoveryState.RECOVERED

    @classmethod
    def from_record(cls, record: PartitionRecord) -> PartitionRegistration:
        return cls(
            replicas=record.replicas,
            isr=record.isr,
            leader=record.leader,
            leader_epoch=record.leader_epoch,
            partition_epoch=record.partition_epoch,
            removing_replicas=record.removing_replicas,
            adding_replicas=record.adding_replicas,
            leader_recovery_state=record.leader_recovery_state,
        )

    def to_record(self, topic_id: UUID, partition_id: int) -> PartitionRecord:
        """The record that recreates this registration (snapshots)."""
        return PartitionRecord(
            topic_id=topic_id,
            partition_id=partition_id,
            replicas=self.replicas,
            isr=self.isr,
            leader=self.leader,
            leader_epoch=self.leader_epoch,
            partition_epoch=self.partition_epoch,
            removing_replicas=self.removing_replicas,
            adding_replicas=self.adding_replicas,
            leader_recovery_state=self.leader_recovery_state,
        )

    def merge(self, change: PartitionChangeRecord) -> PartitionRegistration:
        """This registration after `change` (Kafka's replay rules; see the module docstring)."""
        leader_changed = change.leader != LEADER_UNCHANGED
        return replace(
            self,
            replicas=self.replicas if change.replicas is None else change.replicas,
            isr=self.isr if change.isr is None else change.isr,
            leader=change.leader if leader_changed else self.leader,
            leader_epoch=self.leader_epoch + 1 if leader_changed else self.leader_epoch,
            partition_epoch=self.partition_epoch + 1,
            removing_replicas=(
                self.removing_replicas
                if change.removing_replicas is None
                else change.removing_replicas
            ),
            adding_replicas=(
                self.adding_replicas if change.adding_replicas is None else change.adding_replicas
            ),
            leader_recovery_state=(
                self.leader_recovery_state
                if change.leader_recovery_state == RECOVERY_STATE_UNCHANGED
                else LeaderRecoveryState(change.leader_recovery_state)
            ),
        )

    @property
    def has_leader(self) -> bool:
        return self.leader != NO_LEADER

    @property
    def is_reassigning(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)
