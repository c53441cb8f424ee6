"""The classic group protocol's decisions for the groups of one `__consumer_offsets` partition.

Pure: time comes in as `now_ms`, member ids from an injected uuid source, and every call returns
what to answer, which records to append and (through `next_deadline_ms`) when to call `tick`.
`now_ms` runs the timers; the group record's state timestamp is the wall clock, as Kafka writes
it, from an injected `wall_clock` (read for that field only; nothing here decides on it, so a
record of an older replog, whose timestamp is a monotonic value, loads and works as any).
The rules are Kafka's `GroupMetadataManager` classic handlers (docs/groups.md walks the states):
- JoinGroup: a first join (empty member id) of v4+ gets a fresh id and MEMBER_ID_REQUIRED and
  stays pending for a session timeout; a static member (group.instance.id) joining without its
  id replaces the old id, which is fenced (FENCED_INSTANCE_ID); in Stable, a follower whose
  protocols did not change gets the current generation back, anything else starts a rebalance.
- A rebalance (PreparingRebalance) waits until every member has rejoined or the largest
  rebalance timeout passes (dynamic members that did not rejoin are removed); an Empty group's
  first rebalance waits `group.initial.rebalance.delay.ms`, extended while members keep coming,
  within the rebalance timeout. The generation then goes up: CompletingRebalance (the leader
  gets every member's metadata) or Empty.
- SyncGroup: the leader's assignment moves the group to Stable and is written as the group's
  record; every waiting member gets its assignment. Members that do not sync within the
  rebalance timeout are removed and the group rebalances.
- A member whose session timeout passes without a heartbeat (or a rebalance wait) is removed.
- Records: the group's record when a generation completes, when it empties, when a static
  member is replaced in Stable; a tombstone when it is deleted. `replay` rebuilds the groups.
  A record whose append fails (`append_failed`) is undone as Kafka undoes it: a leader's
  assignment is cleared and the group rebalances; a static member's new id gives way to the
  old one again.
- A group id this core does not hold but the consumer-protocol core holds with members: the
  request is a classic member's of a consumer group and goes to that core (`consumer_groups`,
  KIP-848's online migration); `start_converted` starts a group written back from it.
"""

from __future__ import annotations

import copy
import heapq
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from replog.coordinator.classic_group import ClassicGroup, ClassicMember, GroupState, Protocols
from replog.coordinator.classic_group_messages import (
    UNKNOWN_MEMBER_ID,
    DescribedGroup,
    DescribedMember,
    GroupRecord,
    GroupResult,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    JoinMember,
    LeaveGroupRequest,
    LeaveGroupResponse,
    LeaveMemberResponse,
    ListedGroup,
    SyncGroupRequest,
    SyncGroupResponse,
)
from replog.coordinator.commit_rules import group_id_problem, membership_error
from replog.coordinator.consumer_group_records import ConsumerGroupRecord
from replog.coordinator.group_records import GroupMetadataValue
from replog.coordinator.offsets_records import GroupMetadataKey
from replog.errors import (
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    GroupIdNotFoundError,
    GroupMaxSizeReachedError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    InvalidConfigError,
    InvalidSessionTimeoutError,
    KafkaError,
    MemberIdRequiredError,
    NonEmptyGroupError,
    NotCoordinatorError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)

_HEARTBEAT = "heartbeat"
_JOIN = "join"
_SYNC = "sync"


@dataclass(frozen=True, slots=True)
class ClassicGroupConfig:
    """Kafka's broker settings for classic groups, with Kafka's defaults."""

    min_session_timeout_ms: int = 6000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    initial_rebalance_delay_ms: int = 3000  # group.initial.rebalance.delay.ms
    max_size: int = (1 << 31) - 1  # group.max.size
    # How long a new member's parked JoinGroup may wait (Kafka's fixed 5 minutes).
    new_member_join_timeout_ms: int = 300_000

    def __post_init__(self) -> None:
        if self.min_session_timeout_ms < 0 or self.max_session_timeout_ms < (
            self.min_session_timeout_ms
        ):
            raise InvalidConfigError(
                f"group.min.session.timeout.ms ({self.min_session_timeout_ms}) must be >= 0 and "
                f"<= group.max.session.timeout.ms ({self.max_session_timeout_ms})"
            )
        if self.initial_rebalance_delay_ms < 0:
            raise InvalidConfigError(
                f"group.initial.rebalance.delay.ms is {self.initial_rebalance_delay_ms}; "
                "must be >= 0"
            )
        if self.max_size < 1:
            raise InvalidConfigError(f"group.max.size is {self.max_size}; must be >= 1")


@dataclass(frozen=True, slots=True)
class _Timer:
    deadline_ms: int
    seq: int
    # join: (initial delay, remaining) for the delayed initial join, () to complete the join;
    # sync: (generation,).
    args: tuple[int, ...] = ()


_TimerKey = tuple[str, str, str]  # group id, kind, member id ("" for group timers)


@dataclass(frozen=True, slots=True)
class _SyncUndo:
    """The leader's assignment of `generation`, in memory before its record is durable."""

    group_id: str
    generation: int


@dataclass(frozen=True, slots=True)
class _StaticUndo:
    """A static member's new id (and its new protocols and timeouts) in a Stable group."""

    group_id: str
    instance_id: str
    old_id: str
    new_id: str
    protocols: Protocols
    rebalance_timeout_ms: int
    session_timeout_ms: int


def _random_uuid() -> str:
    return str(uuid.uuid4())


def _no_wall_clock() -> int:
    """No wall clock given: state timestamps are -1, Kafka's "none" (its v0-v1 records)."""
    return -1


class ClassicMembersHost(Protocol):
    """The consumer-protocol groups of the same partition, which answer a classic member's
    requests for a consumer group with members (`ConsumerGroupCoordinator`)."""

    def holds(self, group_id: str) -> bool: ...

    def classic_join(
        self, request: JoinGroupRequest, request_id: int, now_ms: int
    ) -> GroupResult: ...

    def classic_sync(
        self, request: SyncGroupRequest, request_id: int, now_ms: int
    ) -> GroupResult: ...

    def classic_heartbeat(self, request: HeartbeatRequest, now_ms: int) -> KafkaError | None: ...

    def classic_leave(
        self, request: LeaveGroupRequest, now_ms: int
    ) -> tuple[LeaveGroupResponse, list[GroupRecord | ConsumerGroupRecord]]: ...


class ClassicGroupCoordinator:
    """The classic groups of one `__consumer_offsets` partition (module docstring)."""

    def __init__(
        self,
        config: ClassicGroupConfig | None = None,
        new_uuid: Callable[[], str] = _random_uuid,
        wall_clock: Callable[[], int] = _no_wall_clock,
    ) -> None:
        self.config = config or ClassicGroupConfig()
        self._new_uuid = new_uuid
        self.wall_clock = wall_clock  # milliseconds since the epoch: the state timestamps
        self.groups: dict[str, ClassicGroup] = {}
        # The consumer-protocol groups' say on a join for a group id this core does not hold:
        # a refusal, or the records that delete the other protocol's Empty group first.
        self.other_protocol: (
            Callable[[str], tuple[KafkaError | None, list[GroupRecord | ConsumerGroupRecord]]]
            | None
        ) = None
        # Where a classic member's requests for a consumer group with members go.
        self.consumer_groups: ClassicMembersHost | None = None
        self._timers: dict[_TimerKey, _Timer] = {}
        # (deadline, seq, key) of every timer scheduled; an entry whose seq is no longer the
        # key's timer was cancelled or rescheduled and is skipped when it comes up.
        self._heap: list[tuple[int, int, _TimerKey]] = []
        self._seq = 0
        self._now_ms = 0
        # Join phases that ended with members (a new generation to assign): the rebalances.
        self.rebalances = 0
        # What to undo if a record's append fails, by the record's identity (`append_failed`).
        self._unwritten: dict[int, tuple[GroupRecord, _SyncUndo | _StaticUndo]] = {}

    # --- timers ----------------------------------------------------------------------------

    def _schedule(self, key: _TimerKey, delay_ms: int, args: tuple[int, ...] = ()) -> None:
        self._seq += 1
        timer = self._timers[key] = _Timer(self._now_ms + delay_ms, self._seq, args)
        heapq.heappush(self._heap, (timer.deadline_ms, timer.seq, key))

    def _cancel(self, key: _TimerKey) -> None:
        self._timers.pop(key, None)

    def _heartbeat(self, group: ClassicGroup, member: ClassicMember, timeout_ms: int = -1) -> None:
        key = (group.group_id, _HEARTBEAT, member.member_id)
        self._schedule(key, member.session_timeout_ms if timeout_ms < 0 else timeout_ms)

    def _earliest(self) -> tuple[int, int, _TimerKey] | None:
        """The earliest live timer's heap entry, dropping the stale ones above it."""
        while self._heap:
            deadline, seq, key = self._heap[0]
            timer = self._timers.get(key)
            if timer is not None and timer.seq == seq:
                return deadline, seq, key
            heapq.heappop(self._heap)
        return None

    def next_deadline_ms(self) -> int | None:
        """When `tick` next has something to do; None: no timer."""
        earliest = self._earliest()
        return None if earliest is None else earliest[0]

    def timers(self) -> list[tuple[int, str, str, str]]:
        """(deadline, group, kind, member) of every timer, earliest first (for inspection)."""
        return sorted((t.deadline_ms, g, kind, m) for (g, kind, m), t in self._timers.items())

    def tick(self, now_ms: int) -> GroupResult:
        """Fire every timer due at `now_ms`, in deadline order; each acts at its own deadline
        (what it schedules counts from there), so the outcome does not depend on how often
        the shell ticks."""
        result = GroupResult()
        while True:
            earliest = self._earliest()
            if earliest is None or earliest[0] > now_ms:
                self._now_ms = max(self._now_ms, now_ms)
                return result
            heapq.heappop(self._heap)
            key = earliest[2]
            timer = self._timers.pop(key)
            self._now_ms = max(self._now_ms, timer.deadline_ms)
            group = self.groups.get(key[0])
            if group is None:
                continue
            if key[1] == _HEARTBEAT:
                self._expire_heartbeat(group, key[2], result)
            elif key[1] == _JOIN and timer.args:
                self._initial_join_timer(group, timer.args[0], timer.args[1], result)
            elif key[1] == _JOIN:
                self._complete_join(group, result)
            else:
                self._expire_pending_sync(group, timer.args[0], result)

    # --- JoinGroup -------------------------------------------------------------------------

    def join(self, request: JoinGroupRequest, request_id: int, now_ms: int) -> GroupResult:
        """Handle a JoinGroup; its answer is in the result's `joins` unless it waits."""
        self._now_ms = max(self._now_ms, now_ms)
        result = GroupResult()
        error = self._join_request_error(request)
        if error is not None:
            result.joins.append(JoinGroupResponse(request_id, error, request.member_id))
            return result
        group = self.groups.get(request.group_id)
        if group is None and self._in_consumer_group(request.group_id):
            assert self.consumer_groups is not None
            return self.consumer_groups.classic_join(request, request_id, now_ms)
        if group is None and self.other_protocol is not None:
            refused, tombstones = self.other_protocol(request.group_id)
            if refused is not None:
                result.joins.append(JoinGroupResponse(request_id, refused, request.member_id))
                return result
            result.records.extend(tombstones)
        written = len(result.records)
        unknown = request.member_id == UNKNOWN_MEMBER_ID
        if group is None:
            if not unknown:
                result.joins.append(
                    JoinGroupResponse(
                        request_id,
                        UnknownMemberIdError(
                            f"group {request.group_id!r} does not exist: rejoin with an empty "
                            f"member id instead of {request.member_id!r}"
                        ),
                        request.member_id,
                    )
                )
                return result
            group = self.groups[request.group_id] = ClassicGroup(
                request.group_id, state_timestamp_ms=self.wall_clock()
            )
            created = True
        else:
            created = False
        if not self._accept_joining_member(group, request.member_id):
            self._remove_member(group, request.member_id)
            result.joins.append(
                JoinGroupResponse(
                    request_id,
                    GroupMaxSizeReachedError(
                        f"group {group.group_id!r} has group.max.size "
                        f"({self.config.max_size}) members"
                    ),
                    UNKNOWN_MEMBER_ID,
                )
            )
        elif group.state is GroupState.DEAD:
            result.joins.append(JoinGroupResponse(request_id, self._dead(group), request.member_id))
        elif not group.supports_protocols(request.protocol_type, request.protocols):
            result.joins.append(
                JoinGroupResponse(request_id, self._inconsistent(group, request), request.member_id)
            )
        elif unknown:
            self._join_new_member(group, request, request_id, result)
        else:
            self._join_existing_member(group, request, request_id, result)
        if created and len(result.records) == written:
            # Kafka stores a group as soon as a join creates it, even one the join refuses.
            result.records.append(
                GroupRecord(
                    GroupMetadataKey(group.group_id),
                    GroupMetadataValue("", 0, None, None, group.state_timestamp_ms, ()),
                )
            )
        return result

    def _in_consumer_group(self, group_id: str) -> bool:
        return self.consumer_groups is not None and self.consumer_groups.holds(group_id)

    def _join_request_error(self, request: JoinGroupRequest) -> KafkaError | None:
        problem = group_id_problem(request.group_id)
        if problem is not None:
            return problem
        low, high = self.config.min_session_timeout_ms, self.config.max_session_timeout_ms
        if not low <= request.session_timeout_ms <= high:
            return InvalidSessionTimeoutError(
                f"group {request.group_id!r}: session timeout {request.session_timeout_ms} ms "
                f"is outside group.min.session.timeout.ms ({low}) to "
                f"group.max.session.timeout.ms ({high})"
            )
        return None

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        if group.state in (GroupState.EMPTY, GroupState.DEAD):
            return True
        member = group.members.get(member_id)
        if group.state is GroupState.PREPARING_REBALANCE:
            # Count those already rejoined: the group may be over a lowered limit.
            return (
                member is not None and member.awaiting_join is not None
            ) or group.awaiting_join_count < self.config.max_size
        return member is not None or len(group.members) < self.config.max_size

    @staticmethod
    def _dead(group: ClassicGroup) -> KafkaError:
        return CoordinatorNotAvailableError(
            f"group {group.group_id!r} is no longer here (Dead): find its coordinator again"
        )

    @staticmethod
    def _inconsistent(group: ClassicGroup, request: JoinGroupRequest) -> KafkaError:
        if group.state is GroupState.EMPTY:
            return InconsistentGroupProtocolError(
                f"group {group.group_id!r}: a join needs a protocol type and at least one "
                f"protocol (got type {request.protocol_type!r} and "
                f"{len(request.protocols)} protocols)"
            )
        names = [name for name, _ in request.protocols]
        return InconsistentGroupProtocolError(
            f"group {group.group_id!r} has protocol type {group.protocol_type!r} and protocols "
            f"{sorted(n for n, c in group.supported_protocols.items() if c == len(group.members))}"
            f" in common; the join has type {request.protocol_type!r} and {names}"
        )

    def _new_member(self, request: JoinGroupRequest, member_id: str) -> ClassicMember:
        return ClassicMember(
            member_id,
            request.group_instance_id,
            request.client_id,
            request.client_host,
            _rebalance_timeout(request),
            request.session_timeout_ms,
            request.protocol_type,
            request.protocols,
        )

    def _join_new_member(
        self, group: ClassicGroup, request: JoinGroupRequest, request_id: int, result: GroupResult
    ) -> None:
        prefix = (
            request.group_instance_id
            if request.group_instance_id is not None
            else (request.client_id)
        )
        member_id = f"{prefix}-{self._new_uuid()}"
        if request.group_instance_id is not None:
            old_id = group.static_member_id(request.group_instance_id)
            if old_id is not None:
                self._replace_static_member(group, request, request_id, old_id, member_id, result)
            else:
                self._add_member(group, self._new_member(request, member_id), request_id, result)
        elif request.api_version >= 4:
            group.pending_members.add(member_id)
            self._schedule((group.group_id, _HEARTBEAT, member_id), request.session_timeout_ms)
            result.joins.append(
                JoinGroupResponse(
                    request_id,
                    MemberIdRequiredError(
                        f"group {group.group_id!r}: rejoin with member id {member_id!r}"
                    ),
                    member_id,
                )
            )
        else:
            self._add_member(group, self._new_member(request, member_id), request_id, result)

    def _join_existing_member(
        self, group: ClassicGroup, request: JoinGroupRequest, request_id: int, result: GroupResult
    ) -> None:
        member_id = request.member_id
        if member_id in group.pending_members:
            self._add_member(group, self._new_member(request, member_id), request_id, result)
            return
        error = _member_error(group, member_id, request.group_instance_id, "join")
        if error is not None:
            result.joins.append(JoinGroupResponse(request_id, error, member_id))
            return
        member = group.members[member_id]
        same = member.protocols == request.protocols
        if group.state is GroupState.PREPARING_REBALANCE:
            self._update_member_and_rebalance(group, member, request, request_id, result)
        elif group.state is GroupState.COMPLETING_REBALANCE:
            if same:
                # It lost the first answer: give it this generation again.
                result.joins.append(self._join_answer(group, member, request_id))
            else:
                self._update_member_and_rebalance(group, member, request, request_id, result)
        elif group.state is GroupState.STABLE:
            if group.is_leader(member_id) or not same:
                # A leader rejoins to make the group reassign (topic metadata changed).
                self._update_member_and_rebalance(group, member, request, request_id, result)
            else:
                result.joins.append(
                    self._join_answer(group, member, request_id, with_members=False)
                )
        else:
            result.joins.append(
                JoinGroupResponse(
                    request_id,
                    UnknownMemberIdError(
                        f"group {group.group_id!r} is {group.state.value}: rejoin with an empty "
                        "member id"
                    ),
                    member_id,
                )
            )

    def _join_answer(
        self,
        group: ClassicGroup,
        member: ClassicMember,
        request_id: int,
        *,
        with_members: bool = True,
        skip_assignment: bool = False,
        leader: str | None = None,
    ) -> JoinGroupResponse:
        members: tuple[JoinMember, ...] = ()
        if with_members and group.is_leader(member.member_id) and group.protocol_name:
            protocol = group.protocol_name
            members = tuple(
                JoinMember(m.member_id, m.group_instance_id, m.metadata(protocol))
                for m in group.members.values()
            )
        return JoinGroupResponse(
            request_id,
            None,
            member.member_id,
            group.generation,
            group.protocol_type,
            group.protocol_name,
            (group.leader_id or "") if leader is None else leader,
            skip_assignment,
            members,
        )

    def _add_member(
        self, group: ClassicGroup, member: ClassicMember, request_id: int, result: GroupResult
    ) -> None:
        member.is_new = True
        if (
            group.state is GroupState.PREPARING_REBALANCE
            and group.previous_state is GroupState.EMPTY
        ):
            group.new_member_added = True
        group.add(member, request_id)
        # A parked new member cannot heartbeat: bound how long its join may wait instead.
        self._heartbeat(group, member, self.config.new_member_join_timeout_ms)
        self._rebalance_or_complete_join(group, result)

    def _update_member_and_rebalance(
        self,
        group: ClassicGroup,
        member: ClassicMember,
        request: JoinGroupRequest,
        request_id: int,
        result: GroupResult,
    ) -> None:
        replaced = group.update_member(
            member,
            request.protocols,
            _rebalance_timeout(request),
            request.session_timeout_ms,
            request_id,
        )
        if replaced is not None:
            result.superseded.append(replaced)
        self._rebalance_or_complete_join(group, result)

    def _replace_static_member(
        self,
        group: ClassicGroup,
        request: JoinGroupRequest,
        request_id: int,
        old_id: str,
        new_id: str,
        result: GroupResult,
    ) -> None:
        instance = request.group_instance_id
        assert instance is not None
        old = group.members[old_id]
        fenced = FencedInstanceIdError(
            f"group {group.group_id!r}: instance {instance!r} rejoined as {new_id!r}; "
            f"member {old_id!r} is fenced"
        )
        if old.awaiting_join is not None:
            result.joins.append(JoinGroupResponse(old.awaiting_join, fenced, old_id))
        if old.awaiting_sync is not None:
            result.syncs.append(SyncGroupResponse(old.awaiting_sync, fenced))
        current_leader = group.leader_id or ""
        undo = _StaticUndo(
            group.group_id,
            instance,
            old_id,
            new_id,
            old.protocols,
            old.rebalance_timeout_ms,
            old.session_timeout_ms,
        )
        self._cancel((group.group_id, _HEARTBEAT, old_id))
        member = group.replace_static_member(instance, old_id, new_id)
        if old_id in group.pending_sync:
            group.pending_sync.discard(old_id)
            group.pending_sync.add(new_id)
        self._heartbeat(group, member)
        group.update_member(
            member,
            request.protocols,
            _rebalance_timeout(request),
            request.session_timeout_ms,
            request_id,
        )
        if group.state is GroupState.STABLE:
            if group.protocol_name == group.select_protocol():
                # Nothing another member sees changes: no rebalance, only the new id stored.
                result.records.append(self._record(group, undo))
                group.set_awaiting_join(member, None)
                is_leader = group.is_leader(new_id)
                if request.api_version >= 9:
                    answer = self._join_answer(
                        group,
                        member,
                        request_id,
                        with_members=is_leader,
                        skip_assignment=is_leader,
                    )
                else:
                    # The old leader id: the replaced leader must not assign for a Stable group.
                    answer = self._join_answer(
                        group, member, request_id, with_members=False, leader=current_leader
                    )
                result.joins.append(answer)
            else:
                self._rebalance_or_complete_join(group, result)
        elif group.state is GroupState.COMPLETING_REBALANCE:
            # The leader may be assigning to the old id: assign again.
            self._prepare_rebalance(group, result)
        else:
            self._maybe_complete_join_phase(group, result)

    # --- rebalancing -----------------------------------------------------------------------

    def _rebalance_or_complete_join(self, group: ClassicGroup, result: GroupResult) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, result)
        else:
            self._maybe_complete_join_phase(group, result)

    def _maybe_complete_join_phase(self, group: ClassicGroup, result: GroupResult) -> None:
        if (
            group.state is GroupState.PREPARING_REBALANCE
            and group.has_all_members_joined()
            and group.previous_state is not GroupState.EMPTY
        ):
            self._complete_join(group, result)

    def _prepare_rebalance(self, group: ClassicGroup, result: GroupResult) -> None:
        if group.state is GroupState.COMPLETING_REBALANCE:
            self._propagate_assignment(
                group,
                RebalanceInProgressError(f"group {group.group_id!r} is rebalancing again: rejoin"),
                result,
                reset=True,
            )
        self._cancel((group.group_id, _SYNC, ""))
        initial = group.state is GroupState.EMPTY
        if initial:
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self._schedule((group.group_id, _JOIN, ""), delay, (delay, remaining))
        group.transition_to(GroupState.PREPARING_REBALANCE, self.wall_clock())
        if not initial:
            if group.has_all_members_joined():
                self._complete_join(group, result)
            else:
                self._schedule((group.group_id, _JOIN, ""), group.rebalance_timeout_ms())

    def _initial_join_timer(
        self, group: ClassicGroup, delay_ms: int, remaining_ms: int, result: GroupResult
    ) -> None:
        if group.new_member_added and remaining_ms != 0:
            group.new_member_added = False
            new_delay = min(self.config.initial_rebalance_delay_ms, remaining_ms)
            new_remaining = max(remaining_ms - delay_ms, 0)
            self._schedule((group.group_id, _JOIN, ""), new_delay, (new_delay, new_remaining))
        else:
            self._complete_join(group, result)

    def _complete_join(self, group: ClassicGroup, result: GroupResult) -> None:
        self._cancel((group.group_id, _JOIN, ""))
        for member in group.not_yet_rejoined():
            if member.group_instance_id is None:
                self._remove_member(group, member.member_id)
        if group.state is GroupState.DEAD:
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Nobody rejoined: wait another rebalance timeout for the sessions to expire.
            self._schedule((group.group_id, _JOIN, ""), group.rebalance_timeout_ms())
            return
        group.init_next_generation(self.wall_clock())
        if group.state is GroupState.EMPTY:
            result.records.append(self._record(group))
            return
        self.rebalances += 1
        for member in group.members.values():
            if member.awaiting_join is not None:
                result.joins.append(self._join_answer(group, member, member.awaiting_join))
                group.set_awaiting_join(member, None)
            self._heartbeat(group, member)
            member.is_new = False
            group.pending_sync.add(member.member_id)
        self._schedule(
            (group.group_id, _SYNC, ""), group.rebalance_timeout_ms(), (group.generation,)
        )

    def _expire_pending_sync(
        self, group: ClassicGroup, generation: int, result: GroupResult
    ) -> None:
        if generation != group.generation or group.state not in (
            GroupState.COMPLETING_REBALANCE,
            GroupState.STABLE,
        ):
            return
        if group.pending_sync:
            for member_id in sorted(group.pending_sync):
                self._remove_member(group, member_id)
            self._prepare_rebalance(group, result)

    def _expire_heartbeat(self, group: ClassicGroup, member_id: str, result: GroupResult) -> None:
        if group.state is GroupState.DEAD:
            return
        if member_id in group.pending_members:
            group.remove(member_id)
            if group.state is GroupState.PREPARING_REBALANCE and group.has_all_members_joined():
                self._complete_join(group, result)
            return
        member = group.members.get(member_id)
        if member is not None and not member.has_satisfied_heartbeat():
            self._remove_and_rebalance(group, member, result)

    def _remove_and_rebalance(
        self, group: ClassicGroup, member: ClassicMember, result: GroupResult
    ) -> None:
        if member.awaiting_join is not None:
            result.joins.append(
                JoinGroupResponse(
                    member.awaiting_join,
                    UnknownMemberIdError(
                        f"group {group.group_id!r}: member {member.member_id!r} was removed "
                        "(session timeout): rejoin with an empty member id"
                    ),
                )
            )
        self._remove_member(group, member.member_id)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._rebalance_or_complete_join(group, result)
        elif group.state is GroupState.PREPARING_REBALANCE and group.has_all_members_joined():
            self._complete_join(group, result)

    def _remove_member(self, group: ClassicGroup, member_id: str) -> None:
        group.remove(member_id)
        self._cancel((group.group_id, _HEARTBEAT, member_id))

    def _record(
        self, group: ClassicGroup, undo: _SyncUndo | _StaticUndo | None = None
    ) -> GroupRecord:
        record = GroupRecord(GroupMetadataKey(group.group_id), group.to_record())
        if undo is not None:
            self._unwritten[id(record)] = (record, undo)
        return record

    def _propagate_assignment(
        self,
        group: ClassicGroup,
        error: KafkaError | None,
        result: GroupResult,
        *,
        reset: bool = False,
    ) -> None:
        for member in group.members.values():
            if reset:
                member.assignment = b""
            if member.awaiting_sync is None:
                continue
            if error is None:
                answer = SyncGroupResponse(
                    member.awaiting_sync,
                    None,
                    group.protocol_type,
                    group.protocol_name,
                    member.assignment,
                )
            else:
                answer = SyncGroupResponse(member.awaiting_sync, error)
            result.syncs.append(answer)
            member.awaiting_sync = None
            # Its session did not run while it waited: it starts now.
            self._heartbeat(group, member)

    # --- SyncGroup -------------------------------------------------------------------------

    def sync(self, request: SyncGroupRequest, request_id: int, now_ms: int) -> GroupResult:
        """Handle a SyncGroup; its answer is in the result's `syncs` unless it waits."""
        self._now_ms = max(self._now_ms, now_ms)
        result = GroupResult()
        group = self.groups.get(request.group_id)
        if group is None and self._in_consumer_group(request.group_id):
            assert self.consumer_groups is not None
            return self.consumer_groups.classic_sync(request, request_id, now_ms)
        error = self._sync_error(group, request)
        if error is not None or group is None:
            result.syncs.append(SyncGroupResponse(request_id, error or _no_group(request.group_id)))
            return result
        member = group.members[request.member_id]
        if group.state is GroupState.PREPARING_REBALANCE:
            result.syncs.append(
                SyncGroupResponse(
                    request_id,
                    RebalanceInProgressError(
                        f"group {group.group_id!r} is rebalancing: rejoin before syncing"
                    ),
                )
            )
        elif group.state is GroupState.COMPLETING_REBALANCE:
            if member.awaiting_sync is not None:
                result.superseded.append(member.awaiting_sync)
            member.awaiting_sync = request_id
            self._sync_pending(group, member.member_id)
            if group.is_leader(member.member_id):
                assignments = dict(request.assignments)
                for each in group.members.values():
                    each.assignment = assignments.get(each.member_id, b"")
                group.transition_to(GroupState.STABLE, self.wall_clock())
                result.records.append(
                    self._record(group, _SyncUndo(group.group_id, group.generation))
                )
                self._propagate_assignment(group, None, result)
        else:
            self._sync_pending(group, member.member_id)
            result.syncs.append(
                SyncGroupResponse(
                    request_id, None, group.protocol_type, group.protocol_name, member.assignment
                )
            )
        return result

    def _sync_pending(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            self._cancel((group.group_id, _SYNC, ""))

    def _sync_error(
        self, group: ClassicGroup | None, request: SyncGroupRequest
    ) -> KafkaError | None:
        if group is None:
            return _no_group(request.group_id)
        if group.state is GroupState.DEAD:
            return self._dead(group)
        error = _member_error(group, request.member_id, request.group_instance_id, "sync")
        if error is not None:
            return error
        if request.generation_id != group.generation:
            return _illegal_generation(group, request.generation_id)
        for asked, actual, what in (
            (request.protocol_type, group.protocol_type, "protocol type"),
            (request.protocol_name, group.protocol_name, "protocol"),
        ):
            if asked is not None and actual is not None and asked != actual:
                return InconsistentGroupProtocolError(
                    f"group {group.group_id!r}: the sync names {what} {asked!r}; the group's "
                    f"is {actual!r}"
                )
        return None

    # --- Heartbeat, LeaveGroup -------------------------------------------------------------

    def heartbeat(self, request: HeartbeatRequest, now_ms: int) -> KafkaError | None:
        """Handle a Heartbeat: None, or the error to answer."""
        self._now_ms = max(self._now_ms, now_ms)
        group = self.groups.get(request.group_id)
        if group is None and self._in_consumer_group(request.group_id):
            assert self.consumer_groups is not None
            return self.consumer_groups.classic_heartbeat(request, now_ms)
        if group is None:
            return _no_group(request.group_id)
        if group.state is GroupState.DEAD:
            return self._dead(group)
        error = _member_error(group, request.member_id, request.group_instance_id, "heartbeat")
        if error is not None:
            return error
        if request.generation_id != group.generation:
            return _illegal_generation(group, request.generation_id)
        self._heartbeat(group, group.members[request.member_id])
        if group.state is GroupState.PREPARING_REBALANCE:
            return RebalanceInProgressError(f"group {group.group_id!r} is rebalancing: rejoin")
        return None

    def leave(
        self, request: LeaveGroupRequest, now_ms: int
    ) -> tuple[LeaveGroupResponse, GroupResult]:
        """Handle a LeaveGroup: each member named leaves (by member id, or by instance id
        alone for an administrator's removal)."""
        self._now_ms = max(self._now_ms, now_ms)
        result = GroupResult()
        group = self.groups.get(request.group_id)
        if group is None and self._in_consumer_group(request.group_id):
            assert self.consumer_groups is not None
            answer, records = self.consumer_groups.classic_leave(request, now_ms)
            result.records.extend(records)
            return answer, result
        if group is None:
            return LeaveGroupResponse(_no_group(request.group_id)), result
        if group.state is GroupState.DEAD:
            return LeaveGroupResponse(self._dead(group)), result
        answers: list[LeaveMemberResponse] = []
        left = False
        for who in request.members:
            error: KafkaError | None = None
            if who.member_id == UNKNOWN_MEMBER_ID:
                member_id = group.static_member_id(who.group_instance_id)
                if member_id is None:
                    error = UnknownMemberIdError(
                        f"group {group.group_id!r} has no static member {who.group_instance_id!r}"
                    )
                else:
                    self._leave_member(group, member_id, result)
            elif who.member_id in group.pending_members:
                self._remove_member(group, who.member_id)
            else:
                error = _member_error(group, who.member_id, who.group_instance_id, "leave")
                if error is None:
                    self._leave_member(group, who.member_id, result)
            left = left or error is None
            answers.append(LeaveMemberResponse(who.member_id, who.group_instance_id, error))
        if left:
            if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
                self._rebalance_or_complete_join(group, result)
            elif group.state is GroupState.PREPARING_REBALANCE:
                self._maybe_complete_join_phase(group, result)
        return LeaveGroupResponse(None, tuple(answers)), result

    def _leave_member(self, group: ClassicGroup, member_id: str, result: GroupResult) -> None:
        member = group.members[member_id]
        if member.awaiting_join is not None:
            result.joins.append(
                JoinGroupResponse(
                    member.awaiting_join,
                    UnknownMemberIdError(
                        f"group {group.group_id!r}: member {member_id!r} left the group"
                    ),
                )
            )
        self._remove_member(group, member_id)

    # --- DescribeGroups, ListGroups, DeleteGroups ------------------------------------------

    def describe(self, group_ids: Iterable[str]) -> list[DescribedGroup]:
        """Each group's state and members; a group that is not here is described as Dead.
        Members' metadata and assignments are only given in Stable (as Kafka)."""
        described: list[DescribedGroup] = []
        for group_id in group_ids:
            problem = group_id_problem(group_id)
            group = self.groups.get(group_id)
            if problem is not None or group is None:
                described.append(DescribedGroup(group_id, problem, GroupState.DEAD.value))
                continue
            stable = group.state is GroupState.STABLE and group.protocol_name is not None
            protocol = group.protocol_name or ""
            described.append(
                DescribedGroup(
                    group_id,
                    None,
                    group.state.value,
                    group.protocol_type or "",
                    protocol if stable else "",
                    tuple(
                        DescribedMember(
                            m.member_id,
                            m.group_instance_id,
                            m.client_id,
                            m.client_host,
                            m.metadata(protocol) if stable else b"",
                            m.assignment if stable else b"",
                        )
                        for m in group.members.values()
                    ),
                )
            )
        return described

    def list_groups(self, states: Iterable[str] = ()) -> list[ListedGroup]:
        """Every group, by id; only those in `states` (case-insensitive) when given."""
        wanted = {state.lower() for state in states}
        return [
            ListedGroup(group.group_id, group.protocol_type or "", group.state.value)
            for group_id, group in sorted(self.groups.items())
            if not wanted or group.state.value.lower() in wanted
        ]

    def delete(
        self, group_ids: Iterable[str], now_ms: int
    ) -> tuple[list[tuple[str, KafkaError | None]], GroupResult]:
        """Delete Empty groups: each gets a tombstone record (the shell also deletes the
        group's committed offsets). A group with members is NON_EMPTY_GROUP."""
        self._now_ms = max(self._now_ms, now_ms)
        result = GroupResult()
        answers: list[tuple[str, KafkaError | None]] = []
        for group_id in group_ids:
            group = self.groups.get(group_id)
            error: KafkaError | None = group_id_problem(group_id)
            if error is None and (group is None or group.state is GroupState.DEAD):
                error = GroupIdNotFoundError(f"group {group_id!r} does not exist")
            elif error is None and group is not None and group.state is not GroupState.EMPTY:
                error = NonEmptyGroupError(
                    f"group {group_id!r} is {group.state.value} with {len(group.members)} "
                    "members: only an Empty group can be deleted"
                )
            if error is None and group is not None:
                group.transition_to(GroupState.DEAD, self.wall_clock())
                self._drop_group(group_id)
                result.records.append(GroupRecord(GroupMetadataKey(group_id), None))
            answers.append((group_id, error))
        return answers, result

    def _drop_group(self, group_id: str) -> None:
        del self.groups[group_id]
        for key in [k for k in self._timers if k[0] == group_id]:
            del self._timers[key]

    # --- OffsetCommit fencing --------------------------------------------------------------

    def commit_error(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None = None,
    ) -> KafkaError | None:
        """Whether a (non-transactional) OffsetCommit's generation and member may commit for
        the group: None, or the error of every partition of the commit. A group that is not
        here accepts only a simple commit (generation -1, no member), as before groups."""
        group = self.groups.get(group_id)
        if group is None:
            return membership_error(group_id, generation_id, member_id)
        if group.state is GroupState.DEAD:
            return self._dead(group)
        if generation_id < 0 and group.state is GroupState.EMPTY:
            return None  # an admin's or an assign()-consumer's commit to an idle group
        if generation_id >= 0 or member_id or group_instance_id is not None:
            error = _member_error(group, member_id, group_instance_id, "commit")
            if error is not None:
                return error
            if generation_id != group.generation:
                return _illegal_generation(group, generation_id)
        elif group.state is not GroupState.EMPTY:
            return UnknownMemberIdError(
                f"group {group_id!r} has members: a commit without a member id and generation "
                "is only accepted while it is Empty"
            )
        if group.state is GroupState.COMPLETING_REBALANCE:
            return RebalanceInProgressError(
                f"group {group_id!r} is completing a rebalance: sync, then commit"
            )
        return None

    # --- loading, unloading ----------------------------------------------------------------

    def replay(self, key: GroupMetadataKey, value: GroupMetadataValue | None) -> None:
        """Apply a group record read back from `__consumer_offsets` (None: tombstone)."""
        if key.group in self.groups:
            self._drop_group(key.group)
        if value is not None:
            self.groups[key.group] = ClassicGroup.from_record(key.group, value)

    def loaded(self, now_ms: int) -> None:
        """The partition was replayed: every member's session starts now."""
        self._now_ms = max(self._now_ms, now_ms)
        for group in self.groups.values():
            for member in group.members.values():
                self._heartbeat(group, member)

    def appended(self, records: Sequence[object]) -> None:
        """The shell appended `records` (ones this core returned): they are durable."""
        for record in records:
            entry = self._unwritten.get(id(record))
            if entry is not None and entry[0] is record:
                del self._unwritten[id(record)]

    def append_failed(self, records: Sequence[object], now_ms: int) -> GroupResult:
        """The append of `records` failed (the shell answered their requests with its error):
        undo what they stored, as Kafka does. A leader's assignment: every member's
        assignment is cleared and the group rebalances. A static member's new id: the old id
        (with its protocols and timeouts) is the member again, and the new one unknown. Other
        records (a group's creation, an Empty generation, a deletion) stay as decided."""
        self._now_ms = max(self._now_ms, now_ms)
        result = GroupResult()
        for record in records:
            entry = self._unwritten.get(id(record))
            if entry is None or entry[0] is not record:
                continue
            del self._unwritten[id(record)]
            undo = entry[1]
            group = self.groups.get(undo.group_id)
            if group is None:
                continue
            if isinstance(undo, _SyncUndo):
                if group.state is GroupState.STABLE and group.generation == undo.generation:
                    for member in group.members.values():
                        member.assignment = b""
                    self._prepare_rebalance(group, result)
            elif group.static_member_id(undo.instance_id) == undo.new_id:
                self._cancel((group.group_id, _HEARTBEAT, undo.new_id))
                member = group.replace_static_member(undo.instance_id, undo.new_id, undo.old_id)
                group.update_member(
                    member,
                    undo.protocols,
                    undo.rebalance_timeout_ms,
                    undo.session_timeout_ms,
                    None,
                )
                self._heartbeat(group, member)
        return result

    def snapshot(self, group_id: str) -> ClassicGroup | None:
        """A copy of the group as it is now, for `restore` (the consumer-protocol core takes
        one before it converts the group, or writes one back)."""
        group = self.groups.get(group_id)
        return None if group is None else copy.deepcopy(group)

    def restore(self, group_id: str, group: ClassicGroup | None, now_ms: int) -> None:
        """Put `group` (a `snapshot`; None: no group) back as `group_id`, after a failed
        append of the records that converted it. Its waiting requests were answered with the
        append's error: none waits now, every session starts, and a group caught
        mid-rebalance rebalances again (its members rejoin)."""
        self._now_ms = max(self._now_ms, now_ms)
        if group_id in self.groups:
            self._drop_group(group_id)
        if group is None:
            return
        for member in group.members.values():
            member.awaiting_join = member.awaiting_sync = None
            member.is_new = False
        group.awaiting_join_count = 0
        group.pending_members.clear()
        group.pending_sync.clear()
        self.groups[group_id] = group
        for member in group.members.values():
            self._heartbeat(group, member)
        if group.state is GroupState.PREPARING_REBALANCE:
            self._schedule((group_id, _JOIN, ""), group.rebalance_timeout_ms())
        elif group.state is GroupState.COMPLETING_REBALANCE:
            result = GroupResult()
            self._prepare_rebalance(group, result)
            assert not result.records and not result.joins and not result.syncs

    def start_converted(self, group_id: str, now_ms: int, *, rebalance: bool = True) -> None:
        """The group was just written back from a consumer group (an online downgrade,
        `group_migration`): every member's session starts and, when a member left, a
        rebalance begins, so that the members rejoin and learn the new generation (a static
        member's replacement keeps it Stable: the joining member syncs into it)."""
        self._now_ms = max(self._now_ms, now_ms)
        group = self.groups[group_id]
        for member in group.members.values():
            self._heartbeat(group, member)
        if not rebalance:
            return
        result = GroupResult()
        self._prepare_rebalance(group, result)
        # No member waits in a join yet, so the join phase cannot complete here.
        assert not result.records and not result.joins and not result.syncs

    def answer_waiting(self, group_id: str, error: KafkaError) -> GroupResult:
        """Answer every JoinGroup and SyncGroup of `group_id` still waiting with `error` (the
        group is about to become a consumer group)."""
        result = GroupResult()
        group = self.groups.get(group_id)
        if group is None:
            return result
        for member in group.members.values():
            if member.awaiting_join is not None:
                result.joins.append(
                    JoinGroupResponse(member.awaiting_join, error, member.member_id)
                )
                group.set_awaiting_join(member, None)
            if member.awaiting_sync is not None:
                result.syncs.append(SyncGroupResponse(member.awaiting_sync, error))
                member.awaiting_sync = None
        return result

    def unload(self) -> GroupResult:
        """This broker no longer coordinates the partition: every group is Dead and every
        waiting request answered NOT_COORDINATOR."""
        result = GroupResult()
        for group in self.groups.values():
            error = NotCoordinatorError(
                f"group {group.group_id!r}: this broker no longer coordinates it"
            )
            answered = self.answer_waiting(group.group_id, error)
            result.joins += answered.joins
            result.syncs += answered.syncs
            group.transition_to(GroupState.DEAD, self.wall_clock())
        self._timers.clear()
        self._heap.clear()
        self._unwritten.clear()
        return result


def _rebalance_timeout(request: JoinGroupRequest) -> int:
    if request.rebalance_timeout_ms < 0:
        return request.session_timeout_ms
    return request.rebalance_timeout_ms


def _no_group(group_id: str) -> KafkaError:
    return UnknownMemberIdError(f"group {group_id!r} does not exist: join it first")


def _illegal_generation(group: ClassicGroup, generation_id: int) -> KafkaError:
    return IllegalGenerationError(
        f"group {group.group_id!r} is at generation {group.generation}, not {generation_id}"
    )


def _member_error(
    group: ClassicGroup, member_id: str, instance_id: str | None, what: str
) -> KafkaError | None:
    """UNKNOWN_MEMBER_ID or FENCED_INSTANCE_ID for a member that may not act on the group."""
    if instance_id is None:
        if member_id in group.members:
            return None
        return UnknownMemberIdError(
            f"group {group.group_id!r} has no member {member_id!r} ({what})"
        )
    current = group.static_member_id(instance_id)
    if current is None:
        return UnknownMemberIdError(
            f"group {group.group_id!r} has no static member {instance_id!r} ({what})"
        )
    if current != member_id:
        return FencedInstanceIdError(
            f"group {group.group_id!r}: instance {instance_id!r} is member {current!r} now, "
            f"not {member_id!r} ({what})"
        )
    return None
