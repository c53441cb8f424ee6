"""What a client-side assignor is given and gives back: the members (id, instance id, decoded
subscription), the partition count of each topic, each partition's replica racks; an
assignment per member id. Also the one rule every rack-aware assignor shares (KIP-881's, also
the server assignors'): whether racks can change anything at all.

Rules: pure values; partitions of topics the counts do not know do not exist here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from replog.common import TopicPartition
from replog.coordinator.consumer_protocol import Subscription


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


def partitions_of(topic: str, counts: Mapping[str, int]) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in range(counts.get(topic, 0))]


def ordered_members(members: list[Member]) -> list[Member]:
    """Members sorted by instance id or member id, so every leader computes the same result."""
    return sorted(members, key=lambda m: m.sort_key)


def racks_matter(member_racks: Iterable[str], partition_racks: Iterable[frozenset[str]]) -> bool:
    """Whether rack-aware assignment can change anything: some member's rack holds a replica,
    and some partition (with known racks) has no replica in some member's rack. Otherwise
    every assignor assigns as it does without racks."""
    members = set(member_racks)
    placed = [racks for racks in partition_racks if racks]
    return bool(members & set().union(*placed)) and any(not members <= r for r in placed)
