"""The server-side assignors of consumer-protocol (KIP-848) groups, by Kafka's names
(`group.consumer.assignors`): `uniform` (the default) and `range`.

Both are pure functions of the members' subscriptions (topic ids), the partition counts and
the current target assignment; every member gets an entry (possibly empty); members are
ordered by member id so every run computes the same result.

- `uniform`: balanced and sticky. Each member's quota is the partition count divided by the
  member count, one more for the remainder's worth of members, those keeping the most of their
  current target first (so that no member that keeps partitions must also take one from
  another: a move waits for its old owner's next heartbeat). A member keeps the partitions of
  its current target that it still subscribes to, up to its quota; the rest go, one by one in
  (topic, partition) order, to the subscribed member furthest below its quota (then holding
  the fewest); then, while a partition can move from a member to another subscribed member
  holding at least two fewer, it moves. When every member subscribes to the same topics,
  counts differ by at most one (Kafka's uniform assignor's guarantee) and only partitions
  that must change hands do.
- `range`: per topic, its partitions in order split into runs over the members subscribed to
  it, sorted by member id; the first `partitions % members` get one more (co-partitioning:
  members subscribed to the same topics get the same partition numbers of each).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from uuid import UUID

from replog.coordinator.consumer_member import TP, Partitions

UNIFORM = "uniform"
RANGE = "range"


@dataclass(frozen=True, slots=True)
class AssignorMember:
    member_id: str
    topics: frozenset[UUID]  # the subscribed topics that exist
    current: Partitions  # its current target assignment


Assignor = Callable[[list[AssignorMember], Mapping[UUID, int]], dict[str, Partitions]]


def uniform_assign(
    members: list[AssignorMember], counts: Mapping[UUID, int]
) -> dict[str, Partitions]:
    members = sorted(members, key=lambda m: m.member_id)
    owned: dict[str, set[TP]] = {m.member_id: set() for m in members}
    subscribers: dict[UUID, list[str]] = {}
    for m in members:
        for topic in m.topics:
            if topic in counts:
                subscribers.setdefault(topic, []).append(m.member_id)
    every = sorted((t, p) for t in subscribers for p in range(counts[t]))
    valid = {
        m.member_id: sorted(
            tp
            for tp in m.current
            if tp[0] in m.topics and tp[0] in counts and tp[1] < counts[tp[0]]
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
    members: list[AssignorMember], counts: Mapping[UUID, int]
) -> dict[str, Partitions]:
    owned: dict[str, set[TP]] = {m.member_id: set() for m in members}
    for topic, count in sorted(counts.items()):
        subscribed = sorted(m.member_id for m in members if topic in m.topics)
        if not subscribed:
            continue
        quota, extra = divmod(count, len(subscribed))
        start = 0
        for index, member_id in enumerate(subscribed):
            size = quota + (1 if index < extra else 0)
            owned[member_id].update((topic, p) for p in range(start, start + size))
            start += size
    return {mid: frozenset(tps) for mid, tps in owned.items()}


ASSIGNORS: Mapping[str, Assignor] = {UNIFORM: uniform_assign, RANGE: range_assign}
