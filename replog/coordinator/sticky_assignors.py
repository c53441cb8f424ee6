"""The sticky client-side assignors, `sticky` (eager, Kafka's StickyAssignor) and
`cooperative-sticky` (KIP-429), one algorithm under both (Kafka's AbstractStickyAssignor's
aims, not its code):

- **Previous assignment.** `sticky` reads each member's last assignment and generation from
  its subscription's user data (it revoked everything before joining, so it owns nothing);
  `cooperative-sticky` reads the subscription's owned partitions and generation (or, from a
  subscription older than v2, the generation in its user data). A partition claimed by
  several members belongs to the claim of the highest generation; claimed twice in that
  generation, it belongs to nobody (Kafka invalidates it too).
- **Balanced.** When every member subscribes to the same topics, each member's count is the
  partition count over the member count, plus one for the remainder's worth of members (those
  keeping the most go first), so counts differ by at most one. Otherwise each member keeps what
  it had, the rest goes to the least loaded subscriber, and then partitions move from a member
  to a subscriber holding at least two fewer, while any such move exists.
- **Sticky.** A member keeps the partitions it had (that still exist and that it still
  subscribes to) up to its count; the partitions members give up, and new ones, go to the
  members furthest below their counts. With equal subscriptions a member keeps at least
  min(what it had, the lower count); with nothing changed, nothing moves.
- **Racks (KIP-881).** When `racks_matter` (members name racks, `client.rack`, and some
  partition lacks a replica in some member's rack), a member keeps only partitions with a
  replica in its rack, partitions go first to a member of a rack holding a replica while its
  count allows (those with the fewest such members first), and only then anywhere, their
  previous owner first. So balance comes first, then rack locality, then stickiness, as in
  Kafka: a partition may move to get closer to its reader.
- **Cooperative.** A partition going to another member than its previous owner (or claimed
  twice) is left out of this assignment: its owner revokes it, rejoins, and the next
  rebalance hands it over.

Rules: pure functions of (subscriptions, partition counts, replica racks); every member gets an
entry (possibly empty); ties are broken by member order (instance id, else member id), so
every leader computes the same assignment.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from replog.common import TopicPartition
from replog.coordinator.assignor_inputs import (
    Assignment,
    Member,
    Racks,
    ordered_members,
    partitions_of,
    racks_matter,
)
from replog.coordinator.consumer_protocol import (
    generation_from_user_data,
    generation_user_data,
    sticky_user_data_from_bytes,
    sticky_user_data_to_bytes,
)

STICKY = "sticky"
COOPERATIVE_STICKY = "cooperative-sticky"

# What a member had before this rebalance: its partitions and the generation they are from.
Previous = Callable[[Member], tuple[tuple[TopicPartition, ...], int]]


def _sticky_previous(member: Member) -> tuple[tuple[TopicPartition, ...], int]:
    return sticky_user_data_from_bytes(member.subscription.user_data)


def _owned_previous(member: Member) -> tuple[tuple[TopicPartition, ...], int]:
    sub = member.subscription
    generation = sub.generation if sub.generation >= 0 else generation_from_user_data(sub.user_data)
    return sub.owned, generation


def subscription_user_data(
    assignor: str, last: frozenset[TopicPartition] | None, generation: int
) -> bytes | None:
    """The user data a member puts in its subscription for `assignor`: `sticky` its last
    assignment and generation (none before its first), `cooperative-sticky` its generation."""
    if assignor == STICKY:
        return None if last is None else sticky_user_data_to_bytes(last, generation)
    if assignor == COOPERATIVE_STICKY:
        return generation_user_data(generation)
    return None


@dataclass
class _Plan:
    """One sticky assignment under way."""

    members: list[Member]
    counts: Mapping[str, int]
    racks: Racks
    previous: Previous
    rank: dict[str, int] = field(default_factory=dict)
    wanted: dict[str, set[TopicPartition]] = field(default_factory=dict)
    subscribers: dict[str, list[str]] = field(default_factory=dict)
    every: list[TopicPartition] = field(default_factory=list)
    owner: dict[TopicPartition, str] = field(default_factory=dict)  # the previous owner
    contested: set[TopicPartition] = field(default_factory=set)
    rack: dict[str, str | None] = field(default_factory=dict)
    use_racks: bool = False
    assignment: dict[str, list[TopicPartition]] = field(default_factory=dict)
    base: int = 0
    extra: int | None = None  # members that may still go to base + 1; None: no quotas
    _queues: dict[str, list[tuple[int, int, str]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.rank = {m.member_id: i for i, m in enumerate(self.members)}
        every_topic = {t for m in self.members for t in m.subscription.topics if t in self.counts}
        by_topic = {t: partitions_of(t, self.counts) for t in every_topic}
        for m in self.members:
            topics = [t for t in m.subscription.topics if t in self.counts]
            self.wanted[m.member_id] = {tp for t in topics for tp in by_topic[t]}
            for t in topics:
                self.subscribers.setdefault(t, []).append(m.member_id)
            self.rack[m.member_id] = m.subscription.rack or None
            self.assignment[m.member_id] = []
        self.every = sorted(set().union(*self.wanted.values()))
        self.use_racks = racks_matter(
            (r for r in self.rack.values() if r),
            (self.racks.get(tp, frozenset()) for tp in self.every),
        )
        self._claims()

    def _claims(self) -> None:
        best: dict[TopicPartition, tuple[int, list[str]]] = {}
        for m in self.members:
            partitions, generation = self.previous(m)
            for tp in partitions:
                if tp not in self.wanted[m.member_id]:
                    continue
                claim = best.get(tp)
                if claim is None or generation > claim[0]:
                    best[tp] = (generation, [m.member_id])
                elif generation == claim[0] and m.member_id not in claim[1]:
                    claim[1].append(m.member_id)
        for tp, (_, claimants) in best.items():
            if len(claimants) == 1:
                self.owner[tp] = claimants[0]
            else:
                self.contested.add(tp)

    def same_rack(self, member_id: str, tp: TopicPartition) -> bool:
        rack = self.rack[member_id]
        return rack is not None and rack in self.racks.get(tp, ())

    def keeps(self, member_id: str, tp: TopicPartition) -> bool:
        """Whether `member_id` keeps `tp` at first: its previous owner, in its rack if racks
        matter (or with no rack of its own)."""
        return self.owner.get(tp) == member_id and (
            not self.use_racks or self.rack[member_id] is None or self.same_rack(member_id, tp)
        )

    def room(self, member_id: str) -> bool:
        if self.extra is None:
            return True
        size = len(self.assignment[member_id])
        return size < self.base or (size == self.base and self.extra > 0)

    def give(self, member_id: str, tp: TopicPartition) -> None:
        if self.extra is not None and len(self.assignment[member_id]) == self.base:
            self.extra -= 1
        self.assignment[member_id].append(tp)

    def build(self) -> Assignment:
        kept = {mid: [tp for tp in self.every if self.keeps(mid, tp)] for mid in self.assignment}
        if len({frozenset(w) for w in self.wanted.values()}) == 1:
            self.base, extra = divmod(len(self.every), len(self.members))
            self.extra = extra
            for mid in sorted(kept, key=lambda k: (-len(kept[k]), self.rank[k])):
                limit = self.base + 1 if self.extra and len(kept[mid]) > self.base else self.base
                for tp in kept[mid][:limit]:
                    self.give(mid, tp)
        else:
            for mid, parts in kept.items():
                self.assignment[mid].extend(parts)
        taken = {tp for parts in self.assignment.values() for tp in parts}
        left = [tp for tp in self.every if tp not in taken]
        if self.use_racks:
            left = self._fill_by_rack(left)
        # Per topic, its subscribers by (load, rank): entries go stale as loads grow and are
        # refreshed when they come up.
        self._queues = {
            topic: [(len(self.assignment[mid]), self.rank[mid], mid) for mid in subscribers]
            for topic, subscribers in self.subscribers.items()
        }
        for queue in self._queues.values():
            heapq.heapify(queue)
        for tp in left:
            self.give(self._taker(tp), tp)
        self._balance()
        return {mid: sorted(parts) for mid, parts in self.assignment.items()}

    def _fill_by_rack(self, left: list[TopicPartition]) -> list[TopicPartition]:
        """Each partition to the least loaded member with room in a rack holding a replica,
        the partitions with the fewest such members first; returns the others."""
        by_rack: dict[str, list[str]] = {}
        for mid, rack in self.rack.items():
            if rack is not None:
                by_rack.setdefault(rack, []).append(mid)
        local = {
            tp: [
                mid
                for rack in sorted(self.racks.get(tp, ()))
                for mid in by_rack.get(rack, ())
                if tp in self.wanted[mid]
            ]
            for tp in left
        }
        cap = -(-len(self.every) // max(1, len(self.members)))
        rest = []
        for tp in sorted(left, key=lambda tp: (len(local[tp]), tp)):
            takers = [
                mid
                for mid in local[tp]
                if self.room(mid) and (self.extra is not None or len(self.assignment[mid]) < cap)
            ]
            if takers:
                self.give(min(takers, key=lambda k: self._load_key(k, tp)), tp)
            else:
                rest.append(tp)
        return sorted(rest)

    def _load_key(self, member_id: str, tp: TopicPartition) -> tuple[int, bool, int]:
        return (
            len(self.assignment[member_id]),
            self.owner.get(tp) != member_id,
            self.rank[member_id],
        )

    def _taker(self, tp: TopicPartition) -> str:
        """Who takes an unassigned partition: its previous owner if it has room, else the least
        loaded subscriber with room (a member without room never has room again: loads only
        grow here, and the members that may go one above the lower count only get fewer)."""
        previous = self.owner.get(tp)
        if previous is not None and tp in self.wanted[previous] and self.room(previous):
            return previous
        queue = self._queues[tp.topic]
        while True:
            size, rank, member_id = queue[0]
            if size != len(self.assignment[member_id]):
                heapq.heapreplace(queue, (len(self.assignment[member_id]), rank, member_id))
            elif not self.room(member_id):
                heapq.heappop(queue)
            else:
                return member_id

    def _balance(self) -> None:
        """Move partitions from a member to a subscriber holding two fewer or less, the fullest
        first; a member gives first what it did not have before, then what is not in its rack."""
        while True:
            move = self._next_move()
            if move is None:
                return
            giver, tp, taker = move
            self.assignment[giver].remove(tp)
            self.assignment[taker].append(tp)

    def _next_move(self) -> tuple[str, TopicPartition, str] | None:
        sizes = {mid: len(parts) for mid, parts in self.assignment.items()}
        if not sizes or max(sizes.values()) - min(sizes.values()) <= 1:
            return None
        for giver in sorted(sizes, key=lambda k: (-sizes[k], self.rank[k])):
            takers_of = {
                topic: [m for m in self.subscribers[topic] if sizes[m] + 2 <= sizes[giver]]
                for topic in {tp.topic for tp in self.assignment[giver]}
            }
            movable = [tp for tp in self.assignment[giver] if takers_of[tp.topic]]
            if not movable:
                continue
            tp = min(
                movable,
                key=lambda p: (self.owner.get(p) == giver, self.same_rack(giver, p), p),
            )
            taker = min(
                takers_of[tp.topic],
                key=lambda k: (not self.same_rack(k, tp), sizes[k], self.rank[k]),
            )
            return giver, tp, taker
        return None


def _plan(
    members: list[Member], counts: Mapping[str, int], racks: Racks | None, previous: Previous
) -> _Plan:
    return _Plan(ordered_members(members), counts, racks or {}, previous)


def sticky_assign(
    members: list[Member], counts: Mapping[str, int], racks: Racks | None = None
) -> Assignment:
    return _plan(members, counts, racks, _sticky_previous).build()


def cooperative_sticky_assign(
    members: list[Member], counts: Mapping[str, int], racks: Racks | None = None
) -> Assignment:
    plan = _plan(members, counts, racks, _owned_previous)
    full = plan.build()
    # KIP-429: a partition still owned by another member (or by two) is held back a round.
    return {
        mid: [tp for tp in parts if tp not in plan.contested and plan.owner.get(tp, mid) == mid]
        for mid, parts in full.items()
    }
