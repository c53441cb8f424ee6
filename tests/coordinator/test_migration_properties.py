"""Property: one group id moved back and forth between the protocols (KIP-848's online
migration), through random joins, syncs, heartbeats, leaves and restarts of members of both
kinds, failed appends and the passing of time, keeps the coordinator's invariants after every
step:

- the group id is held by one core at a time (a classic group, or a consumer group);
- no partition is assigned to two members: a consumer group's current assignments and its
  targets are disjoint, and so are a classic group's stored assignments;
- the group's protocol matches its members: a classic group's protocol type is `consumer`
  and a consumer group with members keeps at least one consumer-protocol member (the policy
  is `bidirectional`: once only classic members are left it is written back as classic);
- the group epoch (or classic generation) never goes back while the group has members,
  except when a failed append reverts it;
- the records appended replay to what memory holds: a consumer group as it is, a Stable
  classic group's generation, leader, members and assignments (checked every few steps and
  at the end).

The classic clients are eager consumers talking JoinGroup/SyncGroup/Heartbeat (the leader
assigns round robin; answers come by request id, now or from a later call, as the shell
delivers them); some are static (`group.instance.id`) and restart under a new member id. The
consumer-protocol clients are the ones of `test_consumer_group_properties`, some static too.
An append that fails answers the call's requests with NOT_COORDINATOR and makes the cores
undo its records (`append_failed`), as the broker shell does; an append may stay
unacknowledged through the next step (its answers already given, as the log keeps it), so a
failure may come with an earlier batch still in flight.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from hypothesis import event, given, settings
from hypothesis import strategies as st

from replog.common import TopicPartition
from replog.coordinator.classic_group import GroupState
from replog.coordinator.classic_group_coordinator import ClassicGroupConfig, ClassicGroupCoordinator
from replog.coordinator.classic_group_messages import (
    GroupRecord,
    GroupResult,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveMember,
    SyncGroupRequest,
    SyncGroupResponse,
)
from replog.coordinator.consumer_group_coordinator import ConsumerGroupCoordinator
from replog.coordinator.consumer_group_messages import ConsumerGroupHeartbeatRequest
from replog.coordinator.consumer_group_records import ConsumerGroupRecord
from replog.coordinator.consumer_member import TP, by_topic, flatten
from replog.coordinator.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    Subscription,
    assigned_partitions,
    assignment_to_bytes,
    subscription_to_bytes,
)
from replog.errors import KafkaError, NotCoordinatorError
from tests.coordinator.test_consumer_group_properties import TOPICS, new_core

SUBSCRIPTION = subscription_to_bytes(Subscription(("t", "u")))
NAMES = {topic_id: name for name, (topic_id, _) in TOPICS.items()}
EVERY = sorted((name, p) for name, (_, count) in TOPICS.items() for p in range(count))
FAILED = NotCoordinatorError("the append failed")
WALL = 1_700_000_000_000  # the cores' wall clock; their `now_ms` stays far below it


@dataclass
class Harness:
    """Both cores of one partition, the clock, and the shell's part: answers by request id,
    appends acknowledged or failed."""

    classic: ClassicGroupCoordinator
    core: ConsumerGroupCoordinator
    now_ms: int = 0
    fail_next: bool = False
    hold_next: bool = False
    held: list[Sequence[object]] = field(default_factory=list)  # in the log, not acknowledged
    reverted: bool = False
    next_request: int = 0
    waiting: dict[int, ClassicClient] = field(default_factory=dict)
    log: list[object] = field(default_factory=list)  # the records appended

    def request_id(self, client: ClassicClient) -> int:
        self.next_request += 1
        self.waiting[self.next_request] = client
        return self.next_request

    def settle(self, result: GroupResult) -> bool:
        """Append `result`'s records (failing them if told to) and deliver its answers:
        whether the append failed."""
        failed = self._append(result.records)
        answers: list[JoinGroupResponse | SyncGroupResponse] = [*result.joins, *result.syncs]
        for answer in answers:
            if failed:
                answer = replace(answer, error=FAILED)
            client = self.waiting.pop(answer.request_id, None)
            if client is not None:
                client.answered(answer)
        for request_id in result.superseded:
            client = self.waiting.pop(request_id, None)
            if client is not None:
                client.reset(keep_id=True)
        return failed

    def _append(self, records: Sequence[object]) -> bool:
        if not records:
            return False
        if self.hold_next:
            # In the log, acknowledged after the next step (which may fail its own append).
            self.hold_next = False
            self.log.extend(records)
            self.held.append(records)
            return False
        if self.fail_next:
            self.fail_next, self.reverted = False, True
            undone = self.classic.append_failed(records, self.now_ms)
            self.core.append_failed(records, self.now_ms)
            self.settle(undone)
            return True
        self.log.extend(records)
        self.acknowledge(records)
        return False

    def acknowledge(self, records: Sequence[object]) -> None:
        self.classic.appended(records)
        self.core.appended(records)

    def tick(self, ms: int) -> None:
        self.now_ms += ms
        result = self.classic.tick(self.now_ms)
        result.records += self.core.tick(self.now_ms)
        self.settle(result)


@dataclass
class ClassicClient:
    """An eager classic consumer: it owns only what its last SyncGroup gave it, and gives it
    all up before it rejoins."""

    name: str
    instance_id: str | None
    member_id: str = ""
    generation: int = -1
    state: str = "out"  # out, joining, joined, syncing, stable
    leader: bool = False
    members: tuple[str, ...] = ()
    owned: frozenset[tuple[str, int]] = frozenset()

    def reset(self, *, keep_id: bool) -> None:
        self.state, self.owned, self.leader = "out", frozenset(), False
        if not keep_id:
            self.member_id = ""

    def answered(self, answer: JoinGroupResponse | SyncGroupResponse) -> None:
        error: KafkaError | None = answer.error
        if isinstance(answer, JoinGroupResponse):
            if error is not None and error.error_name == "MEMBER_ID_REQUIRED":
                self.member_id, self.state = answer.member_id, "out"
            elif error is None:
                self.member_id, self.generation = answer.member_id, answer.generation_id
                self.leader = bool(answer.members) and not answer.skip_assignment
                self.members = tuple(m.member_id for m in answer.members)
                self.state = "joined"
            else:
                self.reset(keep_id=error.error_name == "REBALANCE_IN_PROGRESS")
            return
        if error is None:
            self.state = "stable"
            self.owned = frozenset(assigned_partitions(answer.assignment))
        else:
            self.reset(keep_id=error.error_name == "REBALANCE_IN_PROGRESS")

    def step(self, h: Harness) -> None:
        if self.state == "out":
            self.owned = frozenset()
            self.state = "joining"
            request = JoinGroupRequest(
                "g",
                self.member_id,
                CONSUMER_PROTOCOL_TYPE,
                (("range", SUBSCRIPTION),),
                6000,
                2000,
                self.instance_id,
                api_version=5,
            )
            h.settle(h.classic.join(request, h.request_id(self), h.now_ms))
        elif self.state == "joined":
            self.state = "syncing"
            assignments: tuple[tuple[str, bytes], ...] = ()
            if self.leader:
                members = sorted(self.members)
                assignments = tuple(
                    (
                        m,
                        assignment_to_bytes(
                            TopicPartition(t, p) for t, p in EVERY[i :: len(members)]
                        ),
                    )
                    for i, m in enumerate(members)
                )
            sync = SyncGroupRequest(
                "g", self.member_id, self.generation, self.instance_id, assignments=assignments
            )
            h.settle(h.classic.sync(sync, h.request_id(self), h.now_ms))
        elif self.state == "stable":
            error = h.classic.heartbeat(
                HeartbeatRequest("g", self.member_id, self.generation, self.instance_id),
                h.now_ms,
            )
            if error is not None:
                self.reset(keep_id=error.error_name == "REBALANCE_IN_PROGRESS")

    def leave(self, h: Harness) -> None:
        if self.member_id and self.state != "out":
            _, result = h.classic.leave(
                LeaveGroupRequest("g", (LeaveMember(self.member_id, self.instance_id),)),
                h.now_ms,
            )
            h.settle(result)
        self.reset(keep_id=False)

    def restart(self) -> None:
        """A process restart: the member id is forgotten (a static one rejoins by instance)."""
        self.reset(keep_id=False)


@dataclass
class ConsumerClient:
    """A KIP-848 consumer: it owns what its last answer assigned."""

    member_id: str
    instance_id: str | None
    epoch: int = 0
    joined: bool = False
    owned: frozenset[TP] = frozenset()

    def heartbeat(self, h: Harness) -> None:
        request = ConsumerGroupHeartbeatRequest(
            "g",
            self.member_id,
            self.epoch if self.joined else 0,
            instance_id=self.instance_id,
            rebalance_timeout_ms=-1 if self.joined else 2000,
            subscribed_topic_names=None if self.joined else ("t", "u"),
            owned=by_topic(self.owned),
        )
        answer, records = h.core.heartbeat(request, h.now_ms)
        owed = h.core.take_classic_answers()
        owed.records = list(records)
        if h.settle(owed) or answer.error is not None:
            self.joined, self.epoch, self.owned = False, 0, frozenset()
            return
        self.joined, self.epoch = True, answer.member_epoch
        if answer.assignment is not None:
            self.owned = flatten(answer.assignment)

    def leave(self, h: Harness) -> None:
        if self.joined:
            epoch = -2 if self.instance_id is not None else -1
            request = ConsumerGroupHeartbeatRequest(
                "g", self.member_id, epoch, instance_id=self.instance_id
            )
            _, records = h.core.heartbeat(request, h.now_ms)
            h.settle(GroupResult(records=list(records)))
        self.joined, self.epoch, self.owned = False, 0, frozenset()


def _epoch(h: Harness) -> tuple[int, bool]:
    """(group epoch or generation, whether the group has members)."""
    group = h.core.groups.get("g")
    if group is not None:
        return group.group_epoch, bool(group.members)
    classic = h.classic.groups.get("g")
    if classic is not None:
        return classic.generation, bool(classic.members)
    return -1, False


def _check(h: Harness) -> None:
    group = h.core.groups.get("g")
    classic = h.classic.groups.get("g")
    assert group is None or classic is None, "both cores hold the group"
    # Every classic group record, a downgrade's included, is stamped with the wall clock.
    stamps = {
        r.value.current_state_timestamp_ms for r in h.log if isinstance(r, GroupRecord) and r.value
    }
    assert stamps <= {WALL}, stamps
    if group is not None:
        for what, parts in (
            ("assigned", [m.assigned for m in group.members.values()]),
            ("targets", list(group.targets.values())),
        ):
            assert sum(len(p) for p in parts) == len(frozenset().union(*parts)), (what, parts)
        if group.members:
            kinds = [m.classic is None for m in group.members.values()]
            assert any(kinds), "a consumer group of classic members only"
    if classic is not None and classic.members:
        assert classic.protocol_type == CONSUMER_PROTOCOL_TYPE
        if classic.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            stored = [
                frozenset(assigned_partitions(m.assignment)) for m in classic.members.values()
            ]
            assert sum(len(p) for p in stored) == len(frozenset().union(*stored)), stored


def _replay_matches(h: Harness) -> None:
    classic = ClassicGroupCoordinator(ClassicGroupConfig())
    core = new_core(classic)
    for record in h.log:
        if isinstance(record, GroupRecord):
            classic.replay(record.key, record.value)
        else:
            assert isinstance(record, ConsumerGroupRecord)
            core.replay(record.key, record.value)
    group, replayed = h.core.groups.get("g"), core.groups.get("g")
    if group is not None or replayed is not None:
        assert group is not None and replayed is not None, (group, replayed)
        fields = [f.name for f in dataclasses.fields(group)]
        assert [getattr(group, f) for f in fields] == [getattr(replayed, f) for f in fields]
    stable, loaded = h.classic.groups.get("g"), classic.groups.get("g")
    if stable is not None and stable.state is GroupState.STABLE:
        assert loaded is not None and loaded.state is GroupState.STABLE, loaded
        assert (stable.generation, stable.leader_id) == (loaded.generation, loaded.leader_id)
        assert {m: x.assignment for m, x in stable.members.items()} == {
            m: x.assignment for m, x in loaded.members.items()
        }


operations = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "classic",
                "classic",
                "classic",
                "hb",
                "hb",
                "leave",
                "restart",
                "fail",
                "hold",
                "wait",
            ]
        ),
        st.integers(0, 4),
    ),
    min_size=20,
    max_size=150,
)


@settings(max_examples=100, deadline=None)
@given(operations)
def test_a_group_moved_between_protocols_keeps_its_invariants(
    ops: list[tuple[str, int]],
) -> None:
    classic = ClassicGroupCoordinator(
        ClassicGroupConfig(initial_rebalance_delay_ms=0, min_session_timeout_ms=1),
        wall_clock=lambda: WALL,
    )
    core = new_core(classic)
    classic.other_protocol = core.yield_to_classic
    classic.consumer_groups = core
    h = Harness(classic, core)
    # Three classic clients (the first static) and two consumer-protocol ones (the second
    # static, sharing its instance with the static classic client: the same process moved
    # from one protocol to the other).
    classics = [ClassicClient(f"k{i}", "shared" if i == 0 else None) for i in range(3)]
    consumers = [ConsumerClient(f"m{i}", "shared" if i == 1 else None) for i in range(2)]
    kind = "-"
    for step, (op, index) in enumerate(ops):
        before, had_members = _epoch(h)
        h.reverted = False
        in_flight, h.held = h.held, []
        if op == "wait":
            h.tick(700)
        elif op == "fail":
            h.fail_next = True
        elif op == "hold":
            h.hold_next = True
        elif index < 3:
            member = classics[index]
            if op in ("classic", "hb"):
                member.step(h)
            elif op == "leave":
                member.leave(h)
            else:
                member.restart()
        else:
            client = consumers[index - 3]
            if op in ("classic", "hb"):
                client.heartbeat(h)
            elif op == "leave":
                client.leave(h)
            else:
                client.joined, client.epoch, client.owned = False, 0, frozenset()
        for records in in_flight:
            h.acknowledge(records)
        _check(h)
        held = "consumer" if "g" in core.groups else "classic" if "g" in classic.groups else "-"
        if held != kind:
            event(f"{kind} -> {held}")
            kind = held
        if h.reverted:
            event("an append failed" + (" with an earlier one in flight" if in_flight else ""))
        after, _ = _epoch(h)
        if had_members and not h.reverted:
            assert after >= before, (op, before, after)
        if step % 10 == 9:
            _replay_matches(h)
    _replay_matches(h)
