"""Client-side partition assignors of the classic protocol: the group leader's member runs one
over every member's subscription and sends the result in its SyncGroup.

Names are Kafka's `partition.assignment.strategy` names, so a group may mix replog's consumer
with Kafka clients (the coordinator picks a name every member lists):

- `range`: per topic, the topic's partitions in order, split into runs over the members that
  subscribe to it, sorted by member id (group.instance.id when set); the first
  `partitions % members` get one more. Eager. Rack-aware (KIP-881) when members name their
  rack (`client.rack`, subscription v3) and `racks` says where partitions' replicas are: each
  member first takes, within its share, the partitions with a replica in its rack (topics
  with the same members and partition count, co-partitioned, take the same partition numbers
  together), then the rest are dealt in order as without racks. It does so only when some
  partition lacks a replica in some member's rack; else the plain ranges.
- `roundrobin`: every partition of every subscribed topic, sorted, dealt out one by one to the
  members sorted the same way, skipping members not subscribed to its topic. Eager.
- `cooperative-sticky`: balanced (each member's count within one of every other's when all
  subscribe to the same topics) and sticky (a member keeps the partitions it owns while its
  share allows). Cooperative (KIP-429): a partition moving from one member to another is left
  out of this assignment; its owner revokes it, rejoins, and the next rebalance gives it away.
  Two members claiming one partition: the one with the higher subscription generation keeps it.

Rules: pure functions of (subscriptions, partition counts, replica racks: `roundrobin` and
`cooperative-sticky` do not use them); partitions of topics the counts do not know are not
assigned; every member gets an entry (possibly empty). Members are sorted
before anything is dealt, so every leader computes the same assignment.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from replog.common import TopicPartition
from replog.coordinator.consumer_protocol import Subscription

RANGE = "range"
ROUNDROBIN = "roundrobin"
COOPERATIVE_STICKY = "cooperative-sticky"


@dataclass(frozen=True, slots=True)
class Member:
    """A member as an assignor sees it."""

    member_id: str
    group_instance_id: str | None
    subscription: Subscription

    @property
    def sort_key(self) -> str:
        return self.group_instance_id or self.member_id


Assignment = dict[str, list[TopicPartition]]
# Each partition's replicas' racks (a partition not listed: unknown).
Racks = Mapping[TopicPartition, frozenset[str]]


class Assignor(Protocol):
    def __call__(
        self, members: list[Member], counts: Mapping[str, int], racks: Racks | None = None
    ) -> Assignment: ...


def _partitions(topic: str, counts: Mapping[str, int]) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in range(counts.get(topic, 0))]


def _start(members: list[Member]) -> tuple[list[Member], Assignment, list[str]]:
    """The members in order, an empty assignment for each, every subscribed topic in order."""
    ordered = sorted(members, key=lambda m: m.sort_key)
    topics = sorted({t for m in ordered for t in m.subscription.topics})
    return ordered, {m.member_id: [] for m in ordered}, topics


@dataclass
class _TopicRanges:
    """One topic's range assignment under way (Kafka's `TopicAssignmentState`): the members
    taking it in order, its partitions not yet given, and each member's share."""

    topic: str
    takers: list[Member]
    unassigned: list[TopicPartition]
    racks: dict[TopicPartition, frozenset[str]]
    base: int = 0
    extra: int = 0  # members that may still take one more than `base`
    taken: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.takers:
            self.base, self.extra = divmod(len(self.unassigned), len(self.takers))
        self.taken = {m.member_id: 0 for m in self.takers}

    @property
    def rack_aware(self) -> bool:
        """Whether racks can change anything: members and replicas have racks in common, and
        some partition has no replica in some member's rack."""
        member_racks = {m.subscription.rack for m in self.takers if m.subscription.rack}
        placed = [r for r in self.racks.values() if r]
        return bool(member_racks & set().union(*placed)) and any(
            not member_racks <= r for r in placed
        )

    def same_rack(self, member: Member, tp: TopicPartition) -> bool:
        rack = member.subscription.rack
        return rack is not None and rack in self.racks.get(tp, ())

    def room(self, member: Member) -> int:
        """How many more partitions of this topic `member` may take."""
        share = self.base + (1 if self.extra > 0 else 0)
        return max(0, share - self.taken[member.member_id])

    def give(
        self, member: Member, partitions: list[TopicPartition], assignment: Assignment
    ) -> None:
        assignment[member.member_id].extend(partitions)
        before = self.taken[member.member_id]
        self.taken[member.member_id] = after = before + len(partitions)
        if before <= self.base < after:
            self.extra -= 1
        given = set(partitions)
        self.unassigned = [tp for tp in self.unassigned if tp not in given]

    def deal(
        self, assignment: Assignment, may_take: Callable[[Member, TopicPartition], bool]
    ) -> None:
        """Each member in order takes the first partitions it may, up to its room."""
        for member in self.takers:
            if not self.unassigned:
                return
            wanted = [tp for tp in self.unassigned if may_take(member, tp)][: self.room(member)]
            if wanted:
                self.give(member, wanted, assignment)


def range_assign(
    members: list[Member], counts: Mapping[str, int], racks: Racks | None = None
) -> Assignment:
    ordered, assignment, topics = _start(members)
    states = [
        _TopicRanges(
            topic,
            [m for m in ordered if topic in m.subscription.topics],
            partitions := _partitions(topic, counts),
            {tp: (racks or {}).get(tp, frozenset()) for tp in partitions},
        )
        for topic in topics
    ]
    # Rack matches first (KIP-881), co-partitioned topics together.
    together: dict[tuple[tuple[str, ...], int], list[_TopicRanges]] = {}
    for state in states:
        key = (tuple(m.member_id for m in state.takers), len(state.unassigned))
        together.setdefault(key, []).append(state)
    for group in together.values():
        if not any(state.rack_aware for state in group):
            continue
        if len(group) == 1:
            group[0].deal(assignment, group[0].same_rack)
        else:
            _co_partitioned_by_rack(group, assignment)
    for state in states:
        state.deal(assignment, lambda member, tp: True)
    return assignment


def _co_partitioned_by_rack(group: list[_TopicRanges], assignment: Assignment) -> None:
    """Partition number p of every topic of `group` to the first member with room in each
    whose rack holds a replica of every topic's partition p (Kafka's co-partitioned matching)."""
    remaining = list(group[0].takers)
    for p in range(len(group[0].unassigned)):
        parts = [TopicPartition(state.topic, p) for state in group]
        chosen = next(
            (
                m
                for m in remaining
                if all(
                    state.same_rack(m, tp) and state.room(m) > 0
                    for state, tp in zip(group, parts, strict=True)
                )
            ),
            None,
        )
        if chosen is None:
            continue
        for state, tp in zip(group, parts, strict=True):
            state.give(chosen, [tp], assignment)
        if not any(state.room(chosen) > 0 for state in group):
            remaining.remove(chosen)
            if not remaining:
                return


def roundrobin_assign(
    members: list[Member], counts: Mapping[str, int], racks: Racks | None = None
) -> Assignment:
    ordered, assignment, topics = _start(members)
    turn = 0
    for topic in topics:
        for tp in _partitions(topic, counts):
            # The next member in the ring that subscribes to this topic (one always does).
            while topic not in ordered[turn % len(ordered)].subscription.topics:
                turn += 1
            assignment[ordered[turn % len(ordered)].member_id].append(tp)
            turn += 1
    return assignment


def cooperative_sticky_assign(
    members: list[Member], counts: Mapping[str, int], racks: Racks | None = None
) -> Assignment:
    ordered, assignment, _ = _start(members)
    if not ordered:
        return assignment
    wanted = {
        m.member_id: {tp for t in m.subscription.topics for tp in _partitions(t, counts)}
        for m in ordered
    }
    every = sorted(set().union(*wanted.values()))
    # Who owned what: a partition claimed twice goes to the newest generation's claim.
    owner: dict[TopicPartition, tuple[int, str]] = {}
    for m in ordered:
        for tp in m.subscription.owned:
            claim = (m.subscription.generation, m.member_id)
            if tp in wanted[m.member_id] and (tp not in owner or claim[0] > owner[tp][0]):
                owner[tp] = claim
    previous = {tp: claim[1] for tp, claim in owner.items()}
    # Shares: all but `extra` members get `base`; members that own more go first to the
    # larger shares, so that fewer partitions move.
    base, extra = divmod(len(every), len(ordered))
    kept: dict[str, list[TopicPartition]] = {
        m.member_id: sorted(tp for tp, who in previous.items() if who == m.member_id)
        for m in ordered
    }
    for member_id in sorted(kept, key=lambda k: (-len(kept[k]), k)):
        limit = base
        if extra and len(kept[member_id]) > base:
            limit, extra = base + 1, extra - 1
        assignment[member_id] = kept[member_id][:limit]
    rank = {m.member_id: i for i, m in enumerate(ordered)}
    taken = {tp for parts in assignment.values() for tp in parts}
    for tp in every:
        if tp in taken:
            continue
        takers = [m.member_id for m in ordered if tp in wanted[m.member_id]]
        chosen = min(takers, key=lambda k: (len(assignment[k]), rank[k]))
        assignment[chosen].append(tp)
    # KIP-429: a partition still owned by another member is held back for one rebalance.
    return {
        member_id: sorted(tp for tp in parts if previous.get(tp, member_id) == member_id)
        for member_id, parts in assignment.items()
    }


ASSIGNORS: dict[str, Assignor] = {
    RANGE: range_assign,
    ROUNDROBIN: roundrobin_assign,
    COOPERATIVE_STICKY: cooperative_sticky_assign,
}
COOPERATIVE = frozenset({COOPERATIVE_STICKY})
