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
2. Eligible leader replicas (KIP-966, only with `elr_enabled`): with the target ISR at the
   effective min ISR (`min_isr`, at most the number of replicas) or above, the ELR and the
   last-known ELR are empty. Below it, the ELR is every replica of the current ISR or ELR
   outside the target ISR, except those in `unclean_shutdown_replicas` (their log may have
   lost its unsynced tail); the last-known ELR is what the current ISR, ELR and last-known
   ELR held beyond the new ISR and ELR (those an unclean shutdown took out: the replicas an
   operator's unclean election would choose among). Assigned replicas only, sorted. The HW
   does not move while the ISR is below min ISR, so every ELR member holds every committed
   record.
3. Election. A replica is a *valid* leader when it is acceptable and in the target ISR, or,
   with an empty target ISR, in the ELR.
   - ONLINE and UNCLEAN: keep the current leader if valid; else the first valid replica in
     target-replica order; else, in UNCLEAN mode only, the first acceptable replica at all
     (an unclean election: ISR = [leader], leader recovery state RECOVERING); else no leader.
   - PREFERRED: the first target replica if valid; else the current leader if valid; else the
     first other valid replica; else no leader.
   With the target ISR and ELR both empty nobody may lead cleanly: every replica known to
   hold the commits shut down uncleanly, and the partition waits for an unclean election.
   A leader taken from the ELR is the ISR alone and leaves the ELR (a clean election). The
   record names a leader only if it differs from the current one (naming one bumps the leader
   epoch on replay). If the unclean pass picks the current leader (the target ISR left it
   out), the ISR becomes [leader] and the recovery state stays.
4. Leader epoch bump: if the new replica set lacks some current replica and the leader is not
   already changing, the record names the current leader again, so that the leader epoch goes
   up and fences the removed replicas that are still fetching.
5. ELR fields: an unclean election, or ELR being off, empties both; each is written if it
   differs from the current one.
6. ISR: the target (or the unclean election's [leader]), written if it differs. Without ELR an
   empty ISR is never written: the last ISR member stays in the ISR with leader -1, so that it
   can be elected cleanly when it comes back. With ELR an empty ISR is written; the members
   that left are the ELR.
7. Replicas, adding and removing replicas: each written only if changed (replicas only if
   non-empty).
8. Leader recovery state: the target, if it differs from the current one, unless an unclean
   election set RECOVERING.
9. A record with every field "unchanged" is not emitted.

Not implemented: Kafka 4.x's last-known-leader election (with ISR and ELR empty it elects the
partition's last leader, uncleanly, and keeps only that leader as the last-known ELR), which
loses acknowledged records whenever that leader lost power and an ELR member that held them
only crashed (docs/reliability.md); KIP-966's unclean recovery by log end; directory
assignment; and the leader epoch bump on ISR shrink that Kafka keeps for metadata versions
before 3.6.

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

    Targets left as None keep the partition's current value. `min_isr` is the topic's
    min.insync.replicas; it and `unclean_shutdown_replicas` matter only with `elr_enabled`.
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
    elr_enabled: bool = False
    min_isr: int = 1
    unclean_shutdown_replicas: tuple[int, ...] = ()

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

        # 2. Who may still lead cleanly once the ISR is below min ISR.
        elr, last_known_elr = current.elr, current.last_known_elr
        if self.elr_enabled:
            elr, last_known_elr = self._eligible(isr, replicas)

        # 3. Election.
        record_leader = LEADER_UNCHANGED
        record_recovery_state: int = RECOVERY_STATE_UNCHANGED
        elected = self._elect(isr, elr, replicas)
        if elected.unclean:
            # The leader alone is in sync with itself. A new one may lack committed data and
            # must recover before others follow it; if the unclean pass kept the current leader
            # (the target ISR left it out), its log is the partition's log already.
            isr = (elected.leader,)
        if not isr and elected.leader in elr:
            # An ELR member holds every committed record: it is the ISR from now on.
            isr = (elected.leader,)
            elr = tuple(r for r in elr if r != elected.leader)
        if elected.leader != current.leader:
            record_leader = elected.leader
            if elected.unclean and current.leader_recovery_state != LeaderRecoveryState.RECOVERING:
                record_recovery_state = LeaderRecoveryState.RECOVERING

        # 4. Removed replicas may still be fetching; a new leader epoch fences them.
        if record_leader == LEADER_UNCHANGED and not set(current.replicas) <= set(replicas):
            record_leader = current.leader

        # 5. An unclean leader may lack what the ELR was kept for; without ELR nothing is kept.
        if elected.unclean or not self.elr_enabled:
            elr = last_known_elr = ()
        record_elr = elr if elr != current.elr else None
        record_last_known_elr = last_known_elr if last_known_elr != current.last_known_elr else None

        # 6. Without ELR an empty ISR is never written, so the last member keeps its claim.
        record_isr = isr if (isr or self.elr_enabled) and isr != current.isr else None

        # 7. Assignment fields.
        record_replicas = replicas if replicas and replicas != current.replicas else None
        record_removing = removing if removing != current.removing_replicas else None
        record_adding = adding if adding != current.adding_replicas else None

        # 8. Leader recovery state. An unclean election's RECOVERING wins over the target: a
        # new leader's recovery is not the old leader's to declare finished.
        if (
            record_recovery_state == RECOVERY_STATE_UNCHANGED
            and recovery_state != current.leader_recovery_state
        ):
            record_recovery_state = recovery_state

        # 9. Nothing to say: no record, so no epoch moves.
        if (
            record_leader == LEADER_UNCHANGED
            and record_isr is None
            and record_replicas is None
            and record_removing is None
            and record_adding is None
            and record_recovery_state == RECOVERY_STATE_UNCHANGED
            and record_elr is None
            and record_last_known_elr is None
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
            elr=record_elr,
            last_known_elr=record_last_known_elr,
        )

    # -- eligible leader replicas ------------------------------------------------------------

    def _eligible(
        self, isr: tuple[int, ...], replicas: tuple[int, ...]
    ) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(ELR, last-known ELR) for target ISR `isr` (rule 2)."""
        # Kafka's effective min ISR: a topic may ask for more than its replicas.
        if len(isr) >= min(self.min_isr, len(replicas)):
            return (), ()
        current = self.partition
        left = (set(current.isr) | set(current.elr)) - set(isr)
        elr = left - set(self.unclean_shutdown_replicas)
        last_known = (left | set(current.last_known_elr)) - set(isr) - elr
        assigned = set(replicas)
        return tuple(sorted(elr & assigned)), tuple(sorted(last_known & assigned))

    # -- election -----------------------------------------------------------------------------

    def _elect(
        self, isr: tuple[int, ...], elr: tuple[int, ...], replicas: tuple[int, ...]
    ) -> _Elected:
        acceptable = self.is_acceptable_leader
        # With an empty ISR, the ELR members are the replicas known to hold every commit.
        candidates = isr or elr

        def valid(replica: int) -> bool:
            return replica in candidates and acceptable(replica)

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
