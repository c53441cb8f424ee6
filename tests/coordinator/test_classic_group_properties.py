"""Random JoinGroup / SyncGroup / Heartbeat / LeaveGroup / timer sequences keep the classic group
coordinator's invariants (Hypothesis).

Members behave like clients that may be slow, lose answers or use stale ids: each step picks a
known member id (or a made-up one) at random. After every step the groups must hold together:
one leader among the members, generations that never go back, an assignment for every member
of a Stable group, counts that match the members, every waiting request answered at most once,
and the records written so far replaying to the same Stable or Empty group.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replog.coordinator.classic_group import ClassicGroup, GroupState
from replog.coordinator.classic_group_coordinator import (
    ClassicGroupConfig,
    ClassicGroupCoordinator,
)
from replog.coordinator.classic_group_messages import (
    GroupRecord,
    GroupResult,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    LeaveMember,
    SyncGroupRequest,
)
from replog.coordinator.group_records import decode_group_value, encode_group_value

GROUPS = ("g", "h")
PROTOCOLS = (
    (("range", b"r"),),
    (("roundrobin", b"o"), ("range", b"r")),
    (("range", b"r2"), ("sticky", b"s")),
)

step = st.one_of(
    st.tuples(
        st.just("join-new"),
        st.sampled_from(GROUPS),
        st.sampled_from((None, "i1", "i2", "i3")),
        st.sampled_from((3, 5, 9)),
        st.integers(0, len(PROTOCOLS) - 1),
    ),
    st.tuples(st.just("join"), st.sampled_from(GROUPS), st.integers(0, 9), st.integers(0, 2)),
    st.tuples(st.just("sync"), st.sampled_from(GROUPS), st.integers(0, 9), st.integers(-1, 1)),
    st.tuples(st.just("heartbeat"), st.sampled_from(GROUPS), st.integers(0, 9), st.integers(-1, 0)),
    st.tuples(st.just("leave"), st.sampled_from(GROUPS), st.integers(0, 9), st.booleans()),
    st.tuples(st.just("advance"), st.sampled_from((0, 1000, 3000, 6000, 10000, 30000))),
    st.tuples(st.just("sync-leader"), st.sampled_from(GROUPS)),
    st.tuples(st.just("sync-leader"), st.sampled_from(GROUPS)),
    st.tuples(st.just("delete"), st.sampled_from(GROUPS)),
    st.tuples(st.just("failover")),
)


class Harness:
    def __init__(self, delay_ms: int, max_size: int) -> None:
        self.config = ClassicGroupConfig(initial_rebalance_delay_ms=delay_ms, max_size=max_size)
        self.counter = 0
        self.coordinator = self._new()
        self.now_ms = 0
        self.request_id = 0
        self.known: list[str] = []
        self.instance_of: dict[str, str] = {}
        self.log: list[GroupRecord] = []
        self.answered: set[int] = set()
        self.superseded: set[int] = set()
        self.generations: dict[str, int] = {}
        # The generation of each member's latest join answer.
        self.joined: dict[str, int] = {}
        # Group -> (leader, generation, members) of the latest join answer to a leader.
        self.leader_view: dict[str, tuple[str, int, list[str]]] = {}
        self.group_of: dict[int, str] = {}

    def _uuid(self) -> str:
        self.counter += 1
        return str(self.counter)

    def _new(self) -> ClassicGroupCoordinator:
        return ClassicGroupCoordinator(self.config, self._uuid)

    def _next(self, group: str) -> int:
        self.request_id += 1
        self.group_of[self.request_id] = group
        return self.request_id

    def member(self, group: str, index: int) -> str:
        """Mostly a member (or pending member) of `group`; sometimes any id ever seen."""
        live = self.coordinator.groups.get(group)
        current = sorted(live.members) + sorted(live.pending_members) if live else []
        if index < 7 and current:
            return current[index % len(current)]
        return self.known[index % len(self.known)] if self.known else "nobody"

    def absorb(self, result: GroupResult) -> None:
        for record in result.records:
            assert isinstance(record, GroupRecord)  # no consumer-protocol group here
            value = record.value
            if value is not None:
                value = decode_group_value(encode_group_value(value))
            self.log.append(GroupRecord(record.key, value))
        answers = [a.request_id for a in result.joins] + [a.request_id for a in result.syncs]
        for request_id in answers:
            assert request_id not in self.answered, f"request #{request_id} answered twice"
            assert request_id not in self.superseded, f"superseded #{request_id} answered"
            self.answered.add(request_id)
        for request_id in result.superseded:
            assert request_id not in self.answered
            self.superseded.add(request_id)
        for join in result.joins:
            if join.member_id and join.member_id not in self.known:
                self.known.append(join.member_id)
            if join.error is None:
                self.joined[join.member_id] = join.generation_id
                if join.members:
                    self.leader_view[self.group_of[join.request_id]] = (
                        join.member_id,
                        join.generation_id,
                        [m.member_id for m in join.members],
                    )

    def run(self, action: tuple[object, ...]) -> None:
        kind = action[0]
        c = self.coordinator
        if kind == "join-new":
            _, group, instance, version, protocols = action
            request = JoinGroupRequest(
                str(group),
                "",
                "consumer",
                PROTOCOLS[int(str(protocols))],
                10000,
                20000,
                None if instance is None else str(instance),
                client_id="c",
                api_version=int(str(version)),
            )
            self.absorb(c.join(request, self._next(str(group)), self.now_ms))
        elif kind == "join":
            _, group, index, protocols = action
            member = self.member(str(group), int(str(index)))
            instance = self.instance_for(str(group), member)
            request = JoinGroupRequest(
                str(group),
                member,
                "consumer",
                PROTOCOLS[int(str(protocols))],
                10000,
                20000,
                instance,
            )
            self.absorb(c.join(request, self._next(str(group)), self.now_ms))
        elif kind == "sync":
            _, group, index, skew = action
            member = self.member(str(group), int(str(index)))
            generation = self.joined.get(member, 0) + int(str(skew))
            live = c.groups.get(str(group))
            members = list(live.members) if live is not None else []
            assignments = tuple((m, f"{m}@{generation}".encode()) for m in members)
            sync_request = SyncGroupRequest(
                str(group),
                member,
                generation,
                self.instance_for(str(group), member),
                assignments=assignments,
            )
            self.absorb(c.sync(sync_request, self._next(str(group)), self.now_ms))
        elif kind == "sync-leader":
            group = str(action[1])
            if group not in self.leader_view:
                return
            leader, generation, members = self.leader_view[group]
            sync_request = SyncGroupRequest(
                group,
                leader,
                generation,
                self.instance_for(group, leader),
                assignments=tuple((m, f"{m}@{generation}".encode()) for m in members),
            )
            self.absorb(c.sync(sync_request, self._next(group), self.now_ms))
        elif kind == "heartbeat":
            _, group, index, skew = action
            member = self.member(str(group), int(str(index)))
            generation = self.joined.get(member, 0) + int(str(skew))
            c.heartbeat(
                HeartbeatRequest(
                    str(group), member, generation, self.instance_for(str(group), member)
                ),
                self.now_ms,
            )
        elif kind == "leave":
            _, group, index, by_instance = action
            member = self.member(str(group), int(str(index)))
            instance = self.instance_for(str(group), member)
            who = (
                LeaveMember("", instance)
                if by_instance and instance is not None
                else LeaveMember(member, instance)
            )
            _, result = c.leave(LeaveGroupRequest(str(group), (who,)), self.now_ms)
            self.absorb(result)
        elif kind == "advance":
            self.now_ms += int(str(action[1]))
            self.absorb(c.tick(self.now_ms))
        elif kind == "delete":
            answers, result = c.delete([str(action[1])], self.now_ms)
            self.absorb(result)
            if answers[0][1] is None:
                self.generations.pop(str(action[1]), None)
        else:
            result = c.unload()
            self.absorb(result)
            self.coordinator = self._new()
            for record in self.log:
                self.coordinator.replay(record.key, record.value)
            self.coordinator.loaded(self.now_ms)
            # A generation still completing was never written: the new coordinator starts from
            # the last one written (as Kafka's), and goes up from there.
            self.generations = {g: group.generation for g, group in self.coordinator.groups.items()}

    def instance_for(self, group: str, member: str) -> str | None:
        live = self.coordinator.groups.get(group)
        if live is not None and member in live.members:
            return live.members[member].group_instance_id
        prefix = member.split("-", 1)[0]
        return prefix if prefix.startswith("i") else None

    def check(self) -> None:
        for group_id, group in self.coordinator.groups.items():
            check_group(group, {(g, kind, m) for _, g, kind, m in self.coordinator.timers()})
            previous = self.generations.get(group_id, 0)
            assert group.generation >= previous, f"{group_id}: generation went back"
            self.generations[group_id] = group.generation
            if group.state in (GroupState.STABLE, GroupState.EMPTY):
                self.check_replay(group)

    def check_replay(self, group: ClassicGroup) -> None:
        replayed = ClassicGroupCoordinator()
        for record in self.log:
            replayed.replay(record.key, record.value)
        again = replayed.groups[group.group_id]
        assert again.state is group.state
        assert again.generation == group.generation
        assert again.leader_id == group.leader_id
        assert again.protocol_name == group.protocol_name
        assert [
            (m.member_id, m.group_instance_id, m.assignment) for m in again.members.values()
        ] == [(m.member_id, m.group_instance_id, m.assignment) for m in group.members.values()]


def check_group(group: ClassicGroup, timers: set[tuple[str, str, str]]) -> None:
    members = group.members
    if group.state is GroupState.DEAD:
        return
    if group.state is GroupState.EMPTY:
        assert not members
    if not members and group.state is not GroupState.EMPTY:
        # Everyone left during the first rebalance: the delay timer ends it (as in Kafka).
        assert group.state is GroupState.PREPARING_REBALANCE
        assert (group.group_id, "join", "") in timers
    if members:
        assert group.leader_id in members, (group.leader_id, list(members))
    else:
        assert group.leader_id is None
    assert group.awaiting_join_count == sum(m.awaiting_join is not None for m in members.values())
    assert group.pending_sync <= set(members)
    assert not (group.pending_members & set(members))
    statics = {m.group_instance_id: m.member_id for m in members.values() if m.group_instance_id}
    assert statics == group.static_members
    counts: dict[str, int] = {}
    for m in members.values():
        for name, _ in m.protocols:
            counts[name] = counts.get(name, 0) + 1
    assert counts == dict(group.supported_protocols)
    if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
        assert group.protocol_name is not None
        assert group.supported_protocols[group.protocol_name] == len(members)
    if group.state is GroupState.STABLE:
        for m in members.values():
            assert m.assignment, f"{m.member_id} has no assignment in a Stable group"
            assert m.awaiting_join is None and m.awaiting_sync is None
    if group.state is GroupState.PREPARING_REBALANCE:
        assert all(m.awaiting_sync is None for m in members.values())


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    st.sampled_from((0, 3000)),
    st.sampled_from((2, 100)),
    st.lists(step, min_size=20, max_size=80),
)
def test_random_sequences_keep_the_invariants(
    delay_ms: int, max_size: int, steps: list[tuple[object, ...]]
) -> None:
    harness = Harness(delay_ms, max_size)
    for action in steps:
        harness.run(action)
        harness.check()
    # Time alone settles every group: all members eventually leave by their sessions.
    for _ in range(20):
        harness.now_ms += 30000
        harness.absorb(harness.coordinator.tick(harness.now_ms))
        harness.check()
    for group in harness.coordinator.groups.values():
        assert group.state in (GroupState.EMPTY, GroupState.DEAD), group.state
    assert harness.coordinator.next_deadline_ms() is None or all(
        g.state is GroupState.DEAD for g in harness.coordinator.groups.values()
    )
