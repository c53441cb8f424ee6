"""Incremental reconciliation of one consumer-protocol member towards its target assignment:
Kafka's `CurrentAssignmentBuilder`, as a pure function.

A member holds `assigned` partitions and, while it gives some up, `pending_revocation` ones.
Rules (by the member's state):
- STABLE: reconciled when its epoch is the target assignment epoch; else reconcile (below).
- UNREVOKED_PARTITIONS: waits until its heartbeat no longer lists any partition pending
  revocation (a heartbeat without the owned list counts as still owning them); then moves to
  epoch + 1 and reconciles.
- UNRELEASED_PARTITIONS: reconciles again (partitions another member released may be free).
- UNKNOWN (a state a newer coordinator wrote): fenced unless it reports owning nothing.

Reconciling: kept = assigned ∩ target; to revoke = assigned - kept; to assign = target - kept,
minus partitions still held (assigned or pending revocation) by another member ("unreleased").
If something must be revoked and the member still owns it: UNREVOKED_PARTITIONS at the same
epoch with `kept` assigned. Else the member moves to the target epoch with kept + to assign, in
UNRELEASED_PARTITIONS when some target partition is still held by another member, else STABLE.
So a partition is always revoked from its owner before another member is given it.
"""

from __future__ import annotations

from collections.abc import Callable

from replog.coordinator.consumer_member import TP, ConsumerMember, MemberState, Partitions
from replog.errors import FencedMemberEpochError


def reconcile(
    member: ConsumerMember,
    target_epoch: int,
    target: Partitions,
    held_by_other: Callable[[TP], bool],
    owned: Partitions | None,
) -> ConsumerMember:
    """The member's next assignment state (module docstring). `owned`: the partitions its
    heartbeat lists (None: not sent); `held_by_other(tp)`: another member still holds tp."""
    if member.state is MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return member
        return _next(member, member.member_epoch, target_epoch, target, held_by_other, owned)
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.pending_revocation):
            return member
        return _next(member, member.member_epoch + 1, target_epoch, target, held_by_other, owned)
    if member.state is MemberState.UNRELEASED_PARTITIONS:
        return _next(member, member.member_epoch, target_epoch, target, held_by_other, owned)
    if owned is None or owned:
        raise FencedMemberEpochError(
            f"member {member.member_id!r} is in an unknown state: it must give up all its "
            "partitions and rejoin"
        )
    return _next(member, target_epoch, target_epoch, target, held_by_other, owned)


def _owns_any(owned: Partitions | None, partitions: Partitions) -> bool:
    return owned is None or not owned.isdisjoint(partitions)


def _next(
    member: ConsumerMember,
    epoch: int,
    target_epoch: int,
    target: Partitions,
    held_by_other: Callable[[TP], bool],
    owned: Partitions | None,
) -> ConsumerMember:
    kept = member.assigned & target
    revoke = member.assigned - kept
    wanted = target - kept
    unreleased = frozenset(tp for tp in wanted if held_by_other(tp))
    to_assign = wanted - unreleased
    if revoke and _owns_any(owned, revoke):
        return _moved(member, MemberState.UNREVOKED_PARTITIONS, epoch, kept, revoke)
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return _moved(member, state, target_epoch, kept | to_assign, frozenset())


def _moved(
    member: ConsumerMember,
    state: MemberState,
    epoch: int,
    assigned: Partitions,
    pending: Partitions,
) -> ConsumerMember:
    # Kafka's `updateMemberEpoch`: the previous epoch is always the epoch being replaced.
    return member.with_assignment(epoch, member.member_epoch, state, assigned, pending)
