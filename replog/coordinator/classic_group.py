"""One classic-protocol consumer group: its state, generation, members and their protocols.

The group only keeps facts and checks them; `classic_group_coordinator` decides what a request
does. Rules (Kafka's `ClassicGroup`):
- States and the transitions allowed into each: PreparingRebalance from Empty, Stable or
  CompletingRebalance; CompletingRebalance from PreparingRebalance; Stable from
  CompletingRebalance; Empty from PreparingRebalance; Dead from any state.
- The group's protocol type is the first member's; a protocol is a candidate when every member
  lists it; each member votes for its first listed candidate and the most votes win (ties go
  to the name that sorts first, where Kafka leaves the order to a hash map).
- The first member added leads; when the leader leaves, the oldest remaining member does
  (Kafka takes whichever its hash map lists first).
- A pending member (KIP-394) has a member id but has not joined with it yet; it counts against
  "every member has joined" and is not a member.
- Waiting requests are the shell's request ids: a member awaiting join or sync holds the id of
  the request to answer.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field
from enum import Enum

from replog.coordinator.group_records import GroupMetadataValue, MemberMetadata

Protocols = tuple[tuple[str, bytes], ...]


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.EMPTY, GroupState.STABLE, GroupState.COMPLETING_REBALANCE}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


@dataclass(slots=True)
class ClassicMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    assignment: bytes = b""
    # New members have not been through a completed join yet: their session does not count
    # while they wait (Kafka's `isNew`).
    is_new: bool = False
    awaiting_join: int | None = None
    awaiting_sync: int | None = None

    def metadata(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise KeyError(f"member {self.member_id!r} does not support protocol {protocol!r}")

    def vote(self, candidates: set[str]) -> str:
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise KeyError(f"member {self.member_id!r} supports none of {sorted(candidates)}")

    def has_satisfied_heartbeat(self) -> bool:
        """Whether a session expiry spares the member: one waiting in a rebalance is alive."""
        if self.is_new:
            return False
        return self.awaiting_join is not None or self.awaiting_sync is not None


@dataclass(slots=True)
class ClassicGroup:
    group_id: str
    state: GroupState = GroupState.EMPTY
    previous_state: GroupState = GroupState.EMPTY
    state_timestamp_ms: int = -1
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, ClassicMember] = field(default_factory=dict)
    pending_members: set[str] = field(default_factory=set)
    pending_sync: set[str] = field(default_factory=set)
    static_members: dict[str, str] = field(default_factory=dict)
    supported_protocols: Counter[str] = field(default_factory=Counter)
    awaiting_join_count: int = 0
    # Set when a member joins during the initial (delayed) rebalance: the delay extends.
    new_member_added: bool = False

    def transition_to(self, state: GroupState, wall_ms: int) -> None:
        """Move to `state`, stamped with the wall clock (the record's `currentStateTimestamp`)."""
        if self.state not in _VALID_PREVIOUS[state]:
            raise RuntimeError(
                f"group {self.group_id!r}: no transition from {self.state.value} to {state.value}"
            )
        self.previous_state = self.state
        self.state = state
        self.state_timestamp_ms = wall_ms

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    def rebalance_timeout_ms(self) -> int:
        """The largest rebalance timeout of the members: how long a rebalance waits."""
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.awaiting_join_count and not self.pending_members

    def not_yet_rejoined(self) -> list[ClassicMember]:
        return [m for m in self.members.values() if m.awaiting_join is None]

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def add(self, member: ClassicMember, request_id: int | None) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        self.supported_protocols.update(name for name, _ in member.protocols)
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.pending_members.discard(member.member_id)
        self.set_awaiting_join(member, request_id)

    def set_awaiting_join(self, member: ClassicMember, request_id: int | None) -> int | None:
        """Park `request_id` (None: none) as the member's join; the request it replaces."""
        replaced = member.awaiting_join
        if request_id is not None and replaced is None:
            self.awaiting_join_count += 1
        elif request_id is None and replaced is not None:
            self.awaiting_join_count -= 1
        member.awaiting_join = request_id
        return replaced

    def remove(self, member_id: str) -> ClassicMember | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self.supported_protocols.subtract(name for name, _ in member.protocols)
            self.supported_protocols = +self.supported_protocols
            if member.awaiting_join is not None:
                self.awaiting_join_count -= 1
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_members.discard(member_id)
        self.pending_sync.discard(member_id)
        return member

    def update_member(
        self,
        member: ClassicMember,
        protocols: Protocols,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        request_id: int | None,
    ) -> int | None:
        """New protocols and timeouts for a member; parks `request_id` (the replaced one)."""
        self.supported_protocols.subtract(name for name, _ in member.protocols)
        self.supported_protocols.update(name for name, _ in protocols)
        self.supported_protocols = +self.supported_protocols
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        return self.set_awaiting_join(member, request_id)

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> ClassicMember:
        """The member of `instance_id` gets `new_id` (keeping its assignment; callers answer
        the old id's waiting requests)."""
        old = self.members.pop(old_id)
        if old.awaiting_join is not None:
            self.awaiting_join_count -= 1
        # The same member under a new id: nothing of the old id's requests or newness.
        new = dataclasses.replace(
            old, member_id=new_id, is_new=False, awaiting_join=None, awaiting_sync=None
        )
        self.members[new_id] = new
        if self.is_leader(old_id):
            self.leader_id = new_id
        self.static_members[instance_id] = new_id
        return new

    def supports_protocols(self, protocol_type: str, protocols: Protocols) -> bool:
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(protocols)
        return self.protocol_type == protocol_type and any(
            self.supported_protocols[name] == len(self.members) for name, _ in protocols
        )

    def select_protocol(self) -> str:
        candidates = {
            name for name, count in self.supported_protocols.items() if count == len(self.members)
        }
        votes = Counter(member.vote(candidates) for member in self.members.values())
        return min(votes, key=lambda name: (-votes[name], name))

    def init_next_generation(self, wall_ms: int) -> None:
        self.generation += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE, wall_ms)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY, wall_ms)
        self.pending_sync.clear()

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep a leader that rejoined, else the first member that did; False if none did."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].awaiting_join is not None:
            return True
        for member in self.members.values():
            if member.awaiting_join is not None:
                self.leader_id = member.member_id
                return True
        return False

    def to_record(self) -> GroupMetadataValue:
        """The group as Kafka stores it: the generation, and each member's subscription to the
        group's protocol and assignment."""
        protocol = self.protocol_name
        return GroupMetadataValue(
            self.protocol_type or "",
            self.generation,
            protocol,
            self.leader_id,
            self.state_timestamp_ms,
            tuple(
                MemberMetadata(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout_ms,
                    m.session_timeout_ms,
                    b"" if protocol is None else m.metadata(protocol),
                    m.assignment,
                )
                for m in self.members.values()
            ),
        )

    @classmethod
    def from_record(cls, group_id: str, value: GroupMetadataValue) -> ClassicGroup:
        """The group a record describes: Stable with its members, or Empty without."""
        group = cls(
            group_id,
            state=GroupState.STABLE if value.members else GroupState.EMPTY,
            state_timestamp_ms=value.current_state_timestamp_ms,
            generation=value.generation,
            protocol_type=value.protocol_type or None,
            protocol_name=value.protocol,
        )
        for m in value.members:
            protocols: Protocols = ((value.protocol or "", m.subscription),)
            group.add(
                ClassicMember(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout_ms,
                    m.session_timeout_ms,
                    value.protocol_type,
                    protocols,
                    m.assignment,
                ),
                None,
            )
        group.leader_id = value.leader
        return group
