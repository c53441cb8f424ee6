"""The server-side assignors of consumer-protocol (KIP-848) groups, by Kafka's names
(`group.consumer.assignors`): `uniform` (the default) and `range`.

Both are pure functions of the members' subscriptions (topic ids) and racks, the partition
counts, the partitions' replica racks and the current target assignment; every member gets an
entry (possibly empty); members are ordered by member id so every run computes the same result.

Racks: both use them only when `racks_matter` (some member's rack holds a replica, and some
partition lacks a replica in some member's rack: the rule of the client-side assignors too).

- `uniform`: balanced and sticky. Each member's quota is the partition count divided by the
  member count, one more for the remainder's worth of members, those keeping the most of their
  current target first (so that no member that keeps partitions must also take one from
  another: a move waits for its old owner's next heartbeat). A member keeps the partitions of
  its current target that it still subscribes to, up to its quota; the rest go, one by one in
  (topic, partition) order, to the subscribed member furthest below its quota (then holding
  the fewest); then, while a partition can move from a member to another subscribed member
  holding at least two fewer, it moves. When every member subscribes to the same topics,
  counts differ by at most one (Kafka's uniform assignor's guarantee) and only partitions
  that must change hands do. With racks, balance comes first, then locality, then stickiness
  (the order Kafka's rack-aware uniform builder had): a member keeps only the partitions with
  a replica in its rack (a member without a rack keeps its own), the unassigned partitions go
  first, those with the fewest same-rack members first, to the same-rack member furthest below
  its quota, and only then by quota alone.
- `range`: per topic, its partitions in order split into runs over the members subscribed to
  it, sorted by member id; the first `partitions % members` get one more (co-partitioning:
  members subscribed to the same topics get the same partition numbers of each). It is the
  client-side `range` assignor's algorithm, rack-aware (KIP-881) the same way: within its
  share each member first takes the partitions with a replica in its rack.

**Differs from Kafka 4.x**, whose built-in server assignors do not use racks (its rack-aware
code was taken out of them in 3.8 and has not come back): on a Kafka broker the same group is
assigned as if nobody named a rack.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from uuid import UUID

from replog.common import TopicPartition
from replog.coordinator import assignors as client_assignors
from replog.coordinator.assignor_inputs import Member, racks_matter
from replog.coordinator.consumer_member import TP, Partitions
from replog.coordinator.consumer_protocol import Subscription

UNIFORM = "uniform"
RANGE = "range"

# Each partition's replicas' racks (a partition not listed: none known).
PartitionRacks = Mapping[TP, frozenset[str]]


@dataclass(frozen=True, slots=True)
class AssignorMember:
    member_id: str
    topics: frozenset[UUID]  # the subscribed topics that exist
    current: Partitions  # its current target assignment
    rack: str | None = None


Assignor = Callable[
    [list[AssignorMember], Mapping[UUID, int], PartitionRacks], dict[str, Partitions]
]


def _uses_racks(members: list[AssignorMember], every: list[TP], racks: PartitionRacks) -> bool:
    return racks_matter(
        (m.rack for m in members if m.rack), (racks.get(tp, frozenset()) for tp in every)
    )


def uniform_assign(
    members: list[AssignorMember], counts: Mapping[UUID, int], racks: PartitionRacks | None = None
) -> dict[str, Partitions]:
    members = sorted(members, key=lambda m: m.member_id)
    owned: dict[str, set[TP]] = {m.member_id: set() for m in members}
    subscribers: dict[UUID, list[str]] = {}
    for m in members:
        for topic in m.topics:
            if topic in counts:
                subscribers.setdefault(topic, []).append(m.member_id)
    every = sorted((t, p) for t in subscribers for p in range(counts[t]))
    racks = racks or {}
    rack_of = {m.member_id: m.rack for m in members}
    use_racks = _uses_racks(members, every, racks)

    def same_rack(member_id: str, tp: TP) -> bool:
        rack = rack_of[member_id]
        return rack is not None and rack in racks.get(tp, ())

    valid = {
        m.member_id: sorted(
            tp
            for tp in m.current
            if tp[0] in m.topics
            and tp[0] in counts
            and tp[1] < counts[tp[0]]
            and (not use_racks or m.rack is None or same_rack(m.member_id, tp))
        )
        for m in members
    }
    base, extra = divmod(len(every), len(members)) if members else (0, 0)
    by_kept = sorted(valid, key=lambda mid: (-len(valid[mid]), mid))
    quota = {mid: base + (1 if rank < extra else 0) for rank, mid in enumerate(by_kept)}
    taken: set[TP] = set()
    for m in members:
        for tp in valid[m.member_id]:
            if len(owned[m.member_id]) < quota[m.member_id] and tp not in taken:
                owned[m.member_id].add(tp)
                taken.add(tp)
    if use_racks:  # locality before the rest, the scarcest same-rack partitions first
        local = {tp: [mid for mid in subscribers[tp[0]] if same_rack(mid, tp)] for tp in every}
        for tp in sorted(
            (tp for tp in every if tp not in taken), key=lambda tp: (len(local[tp]), tp)
        ):
            room = [mid for mid in local[tp] if len(owned[mid]) < quota[mid]]
            if room:
                taker = min(room, key=lambda mid: (len(owned[mid]) - quota[mid], mid))
                owned[taker].add(tp)
                taken.add(tp)
    for tp in every:
        if tp not in taken:
            neediest = min(
                subscribers[tp[0]],
                key=lambda mid: (len(owned[mid]) - quota[mid], len(owned[mid]), mid),
            )
            owned[neediest].add(tp)
    _balance(owned, subscribers)
    return {mid: frozenset(tps) for mid, tps in owned.items()}


def _balance(owned: dict[str, set[TP]], subscribers: Mapping[UUID, list[str]]) -> None:
    """Move partitions from fuller to emptier subscribed members until no move of one
    partition narrows a gap of two or more."""
    moved = True
    while moved:
        moved = False
        for giver in sorted(owned, key=lambda mid: (-len(owned[mid]), mid)):
            for tp in sorted(owned[giver]):
                taker = min(subscribers[tp[0]], key=lambda mid: (len(owned[mid]), mid))
                if len(owned[taker]) + 2 <= len(owned[giver]):
                    owned[giver].discard(tp)
                    owned[taker].add(tp)
                    moved = True
            if moved:
                break


def range_assign(
    members: list[AssignorMember], counts: Mapping[UUID, int], racks: PartitionRacks | None = None
) -> dict[str, Partitions]:
    """The client-side `range` over topic ids written as text (module docstring)."""
    named = [
        Member(m.member_id, None, Subscription(tuple(str(t) for t in m.topics), rack=m.rack))
        for m in members
    ]
    plan = client_assignors.range_assign(
        named,
        {str(topic): count for topic, count in counts.items()},
        {TopicPartition(str(t), p): where for (t, p), where in (racks or {}).items()},
    )
    return {
        member_id: frozenset((UUID(tp.topic), tp.partition) for tp in parts)
        for member_id, parts in plan.items()
    }


ASSIGNORS: Mapping[str, Assignor] = {UNIFORM: uniform_assign, RANGE: range_assign}
