"""PartitionChangeBuilder: the one place that turns a partition's targets into a change record.

Every path that changes a partition (AlterPartition, fencing, unfencing, controlled shutdown,
leader elections, reassignment start and cancel) describes the state it wants (target ISR,
replicas, adding and removing replicas, leader recovery state) plus an election type and an
"acceptable leader" predicate; `build()` returns the single `PartitionChangeRecord` that gets
there, or None when nothing would change. Keeping the rules here means every path elects and
completes reassignments the same way (docs/design/kraft.md#partition-change-builder, Kafka's
`PartitionChangeBuilder`).

Rules, applied in this order:
1. Reassignment completion: while a reassignment is in progress, if the target ISR minus the
   removing replicas is non-empty and covers the replicas minus the removing replicas, the
   reassignment completes: replicas and ISR lose the removing replicas, adding and removing
   become empty.
2. Election. A replica is a *valid* leader when it is in the target ISR and acceptable.
   - ONLINE and UNCLEAN: keep the current leader if valid; else the first valid replica in
     target-replica order; else, in UNCLEAN mode only, the first acceptable replica at all (an
     unclean election: ISR = [leader], leader recovery state RECOVERING); else no leader (-1).
   - PREFERRED: the first target replica if valid; else the current leader if valid; else the
     first other valid replica; else no leader.
   The record names a leader only if it differs from the current one (naming one bumps the
   leader epoch on replay). If the unclean pass picks the current leader (the target ISR left
   it out), the ISR becomes [leader] and the recovery state stays.
3. Leader epoch bump: if the new replica set lacks some current replica and the leader is not
   already changing, the record names the current leader again, so that the leader epoch goes
   up and fences the removed replicas that are still fetching.
4. ISR: the target (or the unclean election's [leader]), written if it differs. An empty ISR is
   never written: the last ISR member stays in the ISR with leader -1, so that it can be
   elected cleanly when it comes back (we run without ELR; see below).
5. Replicas, adding and removing replicas: each written only if changed (replicas only if
   non-empty).
6. Leader recovery state: the target, if it differs from the current one, unless an unclean
   election set RECOVERING.
7. A record with every field "unchanged" is not emitted.

Not implemented: eligible leader replicas (ELR, KIP-966), the last-known-leader recovery that
goes with it, directory assignment, and the leader epoch bump on ISR shrink that Kafka keeps for
metadata versions before 3.6. With ELR off those steps are no-ops in Kafka too.

"Acceptable" is the caller's predicate; normally the broker is registered, unfenced and not in
controlled shutdown, and callers that fence or unfence a broker adjust it for that broker
because the fencing record is not replayed yet.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from uuid import UUID

from replog.quorum.metadata.partition_registration import PartitionRegistration
from replog.quorum.metadata.records import (
    LEADER_UNCHANGED,
    NO_LEADER,
    RECOVERY_STATE_UNCHANGED,
    LeaderRecoveryState,
    PartitionChangeRecord,
)


class Election(Enum):
    """How the builder picks a leader when it needs one."""

    PREFERRED = "preferred"  # prefer replicas[0] even over a valid current leader
    ONLINE = "online"  # only ISR members
    UNCLEAN = "unclean"  # ISR members first, then any acceptable replica (may lose data)


@dataclass(frozen=True, slots=True)
class _Elected:
    leader: int
    unclean: bool


@dataclass(frozen=True, slots=True)
class PartitionChangeBuilder:
    """The inputs of one partition change; `build()` computes the record.

    Targets left as None keep the partition's current value.
    """

    partition: PartitionRegistration
    topic_id: UUID
    partition_id: int
    is_acceptable_leader: Callable[[int], bool]
    election: Election = Election.ONLINE
    target_isr: tuple[int, ...] | None = None
    target_replicas: tuple[int, ...] | None = None
    target_adding_replicas: tuple[int, ...] | None = None
    target_removing_replicas: tuple[int, ...] | None = None
    target_leader_recovery_state: LeaderRecoveryState | None = None

    def build(self) -> PartitionChangeRecord | None:
        """The record that moves the partition to the targets, or None if nothing changes."""
        current = self.partition
        isr = current.isr if self.target_isr is None else tuple(self.target_isr)
        replicas = current.replicas if self.target_replicas is None else self.target_replicas
        adding = (
            current.adding_replicas
            if self.target_adding_replicas is None
            else self.target_adding_replicas
        )
        removing = (
            current.removing_replicas
            if self.target_removing_replicas is None
            else self.target_removing_replicas
        )
        recovery_state = (
            current.leader_recovery_state
            if self.target_leader_recovery_state is None
            else self.target_leader_recovery_state
        )

        # 1. A reassignment completes inside whatever change first makes its target in sync.
        if adding or removing:
            completed = _completed_reassignment(isr, replicas, removing)
            if completed is not None:
                replicas, isr = completed
                adding = removing = ()

        # 2. Election.
        record_leader = LEADER_UNCHANGED
        record_recovery_state: int = RECOVERY_STATE_UNCHANGED
        elected = self._elect(isr, replicas)
        if elected.unclean:
            # The leader alone is in sync with itself. A new one may lack committed data and
            # must recover before others follow it; if the unclean pass kept the current leader
            # (the target ISR left it out), its log is the partition's log already.
            isr = (elected.leader,)
        if elected.leader != current.leader:
            record_leader = elected.leader
            if elected.unclean and current.leader_recovery_state != LeaderRecoveryState.RECOVERING:
                record_recovery_state = LeaderRecoveryState.RECOVERING

        # 3. Removed replicas may still be fetching; a new leader epoch fences them.
        if record_leader == LEADER_UNCHANGED and not set(current.replicas) <= set(replicas):
            record_leader = current.leader

        # 4. Without ELR an empty ISR is never written, so the last member keeps its claim.
        record_isr = isr if isr and isr != current.isr else None

        # 5. Assignment fields.
        record_replicas = replicas if replicas and replicas != current.replicas else None
        record_removing = removing if removing != current.removing_replicas else None
        record_adding = adding if adding != current.adding_replicas else None

        # 6. Leader recovery state. An unclean election's RECOVERING wins over the target: a
        # new leader's recovery is not the old leader's to declare finished.
        if (
            record_recovery_state == RECOVERY_STATE_UNCHANGED
            and recovery_state != current.leader_recovery_state
        ):
            record_recovery_state = recovery_state

        # 7. Nothing to say: no record, so no epoch moves.
        if (
            record_leader == LEADER_UNCHANGED
            and record_isr is None
            and record_replicas is None
            and record_removing is None
            and record_adding is None
            and record_recovery_state == RECOVERY_STATE_UNCHANGED
        ):
            return None
        return PartitionChangeRecord(
            topic_id=self.topic_id,
            partition_id=self.partition_id,
            isr=record_isr,
            leader=record_leader,
            replicas=record_replicas,
            removing_replicas=record_removing,
            adding_replicas=record_adding,
            leader_recovery_state=int(record_recovery_state),
        )

    # -- election -----------------------------------------------------------------------------

    def _elect(self, isr: tuple[int, ...], replicas: tuple[int, ...]) -> _Elected:
        acceptable = self.is_acceptable_leader

        def valid(replica: int) -> bool:
            return replica in isr and acceptable(replica)

        current_leader = self.partition.leader
        if self.election is Election.PREFERRED:
            if replicas and valid(replicas[0]):
                return _Elected(replicas[0], unclean=False)
            if valid(current_leader):
                return _Elected(current_leader, unclean=False)
            for replica in replicas[1:]:
                if valid(replica):
                    return _Elected(replica, unclean=False)
            return _Elected(NO_LEADER, unclean=False)

        # A valid current leader stays: moving leadership costs clients a metadata round trip.
        if valid(current_leader):
            return _Elected(current_leader, unclean=False)
        for replica in replicas:
            if valid(replica):
                return _Elected(replica, unclean=False)
        if self.election is Election.UNCLEAN:
            for replica in replicas:
                if acceptable(replica):
                    return _Elected(replica, unclean=True)
        return _Elected(NO_LEADER, unclean=False)


def _completed_reassignment(
    isr: tuple[int, ...], replicas: tuple[int, ...], removing: tuple[int, ...]
) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """(replicas, ISR) after the reassignment completes, or None if it cannot complete yet."""
    gone = set(removing)
    new_isr = tuple(r for r in isr if r not in gone)
    new_replicas = tuple(r for r in replicas if r not in gone)
    if not new_isr or not new_replicas:
        return None
    if not set(new_replicas) <= set(new_isr):
        return None
    return new_replicas, new_isr
