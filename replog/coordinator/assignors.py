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
- `sticky` (eager) and `cooperative-sticky` (KIP-429): balanced and sticky, rack-aware
  (`sticky_assignors.py`).

Rules: pure functions of (subscriptions, partition counts, replica racks: `roundrobin` does
not use them); partitions of topics the counts do not know are not
assigned; every member gets an entry (possibly empty). Members are sorted
before anything is dealt, so every leader computes the same assignment.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from replog.common import TopicPartition
from replog.coordinator.assignor_inputs import (
    Assignment,
    Assignor,
    Member,
    Racks,
    ordered_members,
    partitions_of,
    racks_matter,
)
from replog.coordinator.sticky_assignors import (
    COOPERATIVE_STICKY,
    STICKY,
    cooperative_sticky_assign,
    sticky_assign,
)

__all__ = ["ASSIGNORS", "COOPERATIVE", "Assignment", "Member", "Racks"]

RANGE = "range"
ROUNDROBIN = "roundrobin"


def _start(members: list[Member]) -> tuple[list[Member], Assignment, list[str]]:
    """The members in order, an empty assignment for each, every subscribed topic in order."""
    ordered = ordered_members(members)
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
        """Whether racks can change this topic's ranges (`racks_matter`)."""
        return racks_matter(
            (m.subscription.rack for m in self.takers if m.subscription.rack), self.racks.values()
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
            partitions := partitions_of(topic, counts),
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
        for tp in partitions_of(topic, counts):
            # The next member in the ring that subscribes to this topic (one always does).
            while topic not in ordered[turn % len(ordered)].subscription.topics:
                turn += 1
            assignment[ordered[turn % len(ordered)].member_id].append(tp)
            turn += 1
    return assignment


ASSIGNORS: dict[str, Assignor] = {
    RANGE: range_assign,
    ROUNDROBIN: roundrobin_assign,
    STICKY: sticky_assign,
    COOPERATIVE_STICKY: cooperative_sticky_assign,
}
COOPERATIVE = frozenset({COOPERATIVE_STICKY})
