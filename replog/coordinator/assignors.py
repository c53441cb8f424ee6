"""Client-side partition assignors of the classic protocol: the group leader's member runs one
over every member's subscription and sends the result in its SyncGroup.

Names are Kafka's `partition.assignment.strategy` names, so a group may mix replog's consumer
with Kafka clients (the coordinator picks a name every member lists):

- `range`: per topic, the topic's partitions in order, split into runs over the members that
  subscribe to it, sorted by member id (group.instance.id when set); the first
  `partitions % members` get one more. Eager.
- `roundrobin`: every partition of every subscribed topic, sorted, dealt out one by one to the
  members sorted the same way, skipping members not subscribed to its topic. Eager.
- `cooperative-sticky`: balanced (each member's count within one of every other's when all
  subscribe to the same topics) and sticky (a member keeps the partitions it owns while its
  share allows). Cooperative (KIP-429): a partition moving from one member to another is left
  out of this assignment; its owner revokes it, rejoins, and the next rebalance gives it away.
  Two members claiming one partition: the one with the higher subscription generation keeps it.

Rules: pure functions of (subscriptions, partition counts); partitions of topics the counts do
not know are not assigned; every member gets an entry (possibly empty). Members are sorted
before anything is dealt, so every leader computes the same assignment.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

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
Assignor = Callable[[list[Member], Mapping[str, int]], Assignment]


def _partitions(topic: str, counts: Mapping[str, int]) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in range(counts.get(topic, 0))]


def _start(members: list[Member]) -> tuple[list[Member], Assignment, list[str]]:
    """The members in order, an empty assignment for each, every subscribed topic in order."""
    ordered = sorted(members, key=lambda m: m.sort_key)
    topics = sorted({t for m in ordered for t in m.subscription.topics})
    return ordered, {m.member_id: [] for m in ordered}, topics


def range_assign(members: list[Member], counts: Mapping[str, int]) -> Assignment:
    ordered, assignment, topics = _start(members)
    for topic in topics:
        takers = [m for m in ordered if topic in m.subscription.topics]
        partitions = _partitions(topic, counts)
        share, extra = divmod(len(partitions), len(takers))
        start = 0
        for index, member in enumerate(takers):
            length = share + (1 if index < extra else 0)
            assignment[member.member_id].extend(partitions[start : start + length])
            start += length
    return assignment


def roundrobin_assign(members: list[Member], counts: Mapping[str, int]) -> Assignment:
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


def cooperative_sticky_assign(members: list[Member], counts: Mapping[str, int]) -> Assignment:
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
