"""Scenarios of the consumer's membership core (`GroupMember`) against the real coordinator core,
on a simulated clock (`group_member_sim`): joining, splitting, eager and cooperative rebalances,
liveness (session and max.poll.interval.ms), commits fenced by generation, fatal errors, and
the reasons each JoinGroup and LeaveGroup gives (KIP-800, the Java consumer's words).
`GroupSim.check` holds after every step: no partition is read by two live members."""

from __future__ import annotations

import pytest
from group_member_sim import GROUP, GroupSim

from replog.common import TopicPartition
from replog.coordinator import classic_group_messages as gm
from replog.coordinator.group_member import (
    LEAVE_UNSUBSCRIBED,
    GroupMember,
    MemberConfig,
    Phase,
)
from replog.errors import (
    CommitFailedError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)

SPLIT = 1_000  # enough simulated time for a rebalance


def test_one_member_gets_every_partition_and_heartbeats() -> None:
    sim = GroupSim({"t": 3})
    a = sim.add("a")
    sim.run(SPLIT)
    assert sim.reads() == {"a": ["t-0", "t-1", "t-2"]}
    assert a.history == [("assigned", ("t-0", "t-1", "t-2"))]
    assert a.core.phase is Phase.STABLE and a.core.leader
    assert sim.state() == "Stable"
    generation = a.core.generation
    sim.run(5_000)  # heartbeats keep the session (1 s) alive
    assert a.core.generation == generation and sim.state() == "Stable"


@pytest.mark.parametrize("assignor", ["range", "roundrobin", "sticky", "cooperative-sticky"])
def test_three_members_split_the_partitions_evenly_and_disjointly(assignor: str) -> None:
    sim = GroupSim({"t": 7})
    for name in "abc":
        sim.add(name, assignors=(assignor,))
    sim.run(3 * SPLIT)
    reads = sim.reads()
    counts = sorted(len(parts) for parts in reads.values())
    assert counts == [2, 2, 3], reads
    assert sorted(p for parts in reads.values() for p in parts) == [f"t-{i}" for i in range(7)]


def test_range_splits_each_topic_in_runs() -> None:
    sim = GroupSim({"t": 4, "u": 2})
    sim.add("a", topics=("t", "u"))
    sim.run(SPLIT)
    sim.add("b", topics=("t", "u"))
    sim.run(2 * SPLIT)
    assert sim.reads() == {"a": ["t-0", "t-1", "u-0"], "b": ["t-2", "t-3", "u-1"]}


def test_eager_revokes_everything_before_it_rejoins() -> None:
    sim = GroupSim({"t": 4})
    a = sim.add("a")
    sim.run(SPLIT)
    sim.add("b")
    sim.run(2 * SPLIT)
    assert a.history == [
        ("assigned", ("t-0", "t-1", "t-2", "t-3")),
        ("revoked", ("t-0", "t-1", "t-2", "t-3")),
        ("assigned", ("t-0", "t-1")),
    ]


def test_sticky_members_keep_their_partitions_through_an_eager_rebalance() -> None:
    """`sticky` revokes everything before it rejoins (eager), but its user data tells the
    leader what it had: when c leaves, a and b get back what they had plus one of c's each
    (range would move t-2 from b to a)."""
    sim = GroupSim({"t": 6})
    for name in "abc":
        sim.add(name, assignors=("sticky",))
    sim.run(3 * SPLIT)
    before = sim.reads()
    assert sorted(len(parts) for parts in before.values()) == [2, 2, 2]
    c = sim.members["c"]
    outgoing = c.core.leave(sim.now)
    assert outgoing is not None
    c.alive = False
    sim._route(sim.coordinator.leave(outgoing.request, sim.now)[1])  # type: ignore[arg-type]
    sim.run(3 * SPLIT)
    after = sim.reads()
    assert sorted(len(parts) for parts in after.values()) == [3, 3]
    for name in "ab":
        assert set(before[name]) < set(after[name])
        assert sim.members[name].history[-2][0] == "revoked"  # eager all the same


def test_cooperative_moves_only_what_must_move_in_two_rebalances() -> None:
    sim = GroupSim({"t": 4})
    a = sim.add("a", assignors=("cooperative-sticky",))
    sim.run(SPLIT)
    b = sim.add("b", assignors=("cooperative-sticky",))
    sim.run(3 * SPLIT)
    # a keeps two of its partitions throughout: never revoked, never reassigned.
    assert a.history[0] == ("assigned", ("t-0", "t-1", "t-2", "t-3"))
    assert a.history[1][0] == "revoked" and len(a.history[1][1]) == 2
    assert a.history[2] == ("assigned", ())
    kept = sorted(set(a.history[0][1]) - set(a.history[1][1]))
    assert sim.reads()["a"] == kept
    assert sorted(sim.reads()["b"]) == sorted(a.history[1][1])
    assert b.history[-1] == ("assigned", a.history[1][1])
    assert a.core.stats.count >= 2  # the second rebalance gave the revoked partitions away


def test_cooperative_member_leaving_hands_its_partitions_over() -> None:
    sim = GroupSim({"t": 6})
    for name in "abc":
        sim.add(name, assignors=("cooperative-sticky",))
    sim.run(4 * SPLIT)
    before = sim.reads()
    c = sim.members["c"]
    outgoing = c.core.leave(sim.now)
    assert outgoing is not None and isinstance(outgoing.request, gm.LeaveGroupRequest)
    c.alive = False
    sim._route(sim.coordinator.leave(outgoing.request, sim.now)[1])
    sim.run(3 * SPLIT)
    after = sim.reads()
    assert sorted(len(p) for p in after.values()) == [3, 3]
    for name in "ab":  # sticky: a survivor keeps what it had
        assert set(before[name]) <= set(after[name])


def test_a_killed_member_loses_its_partitions_after_the_session_timeout() -> None:
    sim = GroupSim({"t": 4})
    sim.add("a", session_ms=500)
    sim.add("b", session_ms=500)
    sim.run(2 * SPLIT)
    assert sorted(len(p) for p in sim.reads().values()) == [2, 2]
    sim.members["b"].alive = False  # kill -9: nothing more from it
    sim.run(400)
    assert sim.reads()["a"] != ["t-0", "t-1", "t-2", "t-3"]  # the session has not expired
    sim.run(600 + SPLIT)
    assert sim.reads() == {"a": ["t-0", "t-1", "t-2", "t-3"]}


def test_a_member_that_stops_polling_leaves_and_its_partitions_are_lost() -> None:
    sim = GroupSim({"t": 4})
    a = sim.add("a", max_poll_ms=2_000)
    b = sim.add("b", max_poll_ms=2_000)
    sim.run(2 * SPLIT)
    b.polling = False  # stuck in its processing; the heartbeats go on
    sim.run(1_500)
    assert len(sim.reads()["a"]) == 2  # not yet past max.poll.interval.ms
    sim.run(600 + SPLIT)
    assert sorted(sim.reads()["a"]) == ["t-0", "t-1", "t-2", "t-3"]
    assert b.core.member_id == "" and b.core.phase is Phase.UNJOINED
    assert a.core.stats.count >= 2
    b.polling = True  # poll again: the lost callback first, then a new member joins
    sim.run(3 * SPLIT)
    assert b.history[-2][0] == "lost"
    assert sorted(len(p) for p in sim.reads().values()) == [2, 2]


def test_commits_carry_the_generation_and_are_refused_while_rebalancing() -> None:
    sim = GroupSim({"t": 2})
    a = sim.add("a")
    assert a.core.commit_identity() == (-1, "", None)  # not in the group yet
    sim.run(SPLIT)
    generation, member_id, _ = a.core.commit_identity()
    assert generation >= 1 and member_id.startswith("a-")
    assert sim.coordinator.commit_error("g", generation, member_id, None) is None
    sim.add("b")
    sim.run(10)  # b's join waits for a
    assert sim.state() == "PreparingRebalance"
    a.core.heartbeat_answered(RebalanceInProgressError("rebalancing"), sim.now)
    assert a.core.next_request(sim.now) is None  # the revoke callback first
    assert a.core.commit_identity()[0] == generation  # which may still commit
    sim._callbacks("a", a)
    join = a.core.next_request(sim.now)
    assert join is not None and join.kind == "join"
    with pytest.raises(RebalanceInProgressError):
        a.core.commit_identity()
    sim._send("a", join)
    sim.run(2 * SPLIT)
    assert isinstance(
        sim.coordinator.commit_error("g", generation, member_id, None), IllegalGenerationError
    )
    assert a.core.commit_identity()[0] > generation


def test_a_commit_refused_for_its_generation_loses_the_partitions() -> None:
    sim = GroupSim({"t": 2})
    a = sim.add("a")
    sim.run(SPLIT)
    a.core.commit_fenced(IllegalGenerationError("old generation"), sim.now)
    sim.run(SPLIT)
    assert [kind for kind, _ in a.history] == ["assigned", "lost", "assigned"]
    assert sim.reads() == {"a": ["t-0", "t-1"]}


def test_a_lost_membership_refuses_commits_until_poll_gave_its_partitions_up() -> None:
    # The consumer still holds the lost partitions' positions; another member may own them now,
    # and a commit from outside the group would overwrite its commits whenever the group is
    # Empty.
    sim = GroupSim({"t": 2})
    a = sim.add("a")
    sim.run(SPLIT)
    a.core.heartbeat_answered(IllegalGenerationError("old generation"), sim.now)
    with pytest.raises(CommitFailedError, match="membership was lost"):
        a.core.commit_identity()
    assert a.core.next_request(sim.now) is None  # the lost callback first
    (event,) = a.core.take_events()
    assert event.kind == "lost"
    with pytest.raises(CommitFailedError):
        a.core.commit_identity()  # while the callback runs
    a.core.callbacks_done()
    assert a.core.commit_identity() == (-1, "", None)  # nothing of the old membership held
    sim.run(SPLIT)
    assert a.core.commit_identity()[0] >= 1


def test_the_leader_rebalances_when_partitions_are_added() -> None:
    sim = GroupSim({"t": 2})
    sim.add("a")
    sim.add("b")
    sim.run(2 * SPLIT)
    sim.set_counts({"t": 4})
    sim.run(2 * SPLIT)
    assert sorted(p for parts in sim.reads().values() for p in parts) == [
        "t-0",
        "t-1",
        "t-2",
        "t-3",
    ]


def test_the_leader_watches_the_topics_only_other_members_read() -> None:
    """Kafka's leader watches the whole group's subscription: u, which only b reads, gaining
    partitions rebalances the group though the leader a reads only t."""
    sim = GroupSim({"t": 2, "u": 2})
    sim.add("a", topics=("t",))
    sim.run(SPLIT)
    sim.add("b", topics=("u",))
    sim.run(2 * SPLIT)
    assert sim.members["a"].core.leader and sim.reads()["b"] == ["u-0", "u-1"]
    assert sim.members["a"].core.watched_topics == {"t", "u"}
    sim.set_counts({"t": 2, "u": 4})
    sim.run(2 * SPLIT)
    assert sim.reads() == {"a": ["t-0", "t-1"], "b": ["u-0", "u-1", "u-2", "u-3"]}


def test_no_common_assignor_is_fatal_for_the_newcomer() -> None:
    sim = GroupSim({"t": 2})
    sim.add("a", assignors=("range",))
    sim.run(SPLIT)
    b = sim.add("b", assignors=("roundrobin",))
    sim.run(SPLIT)
    assert isinstance(b.core.fatal, InconsistentGroupProtocolError)
    assert sim.reads()["a"] == ["t-0", "t-1"]


def test_closing_revokes_and_a_static_member_does_not_leave() -> None:
    sim = GroupSim({"t": 2})
    a = sim.add("a", instance="a-host")
    sim.run(SPLIT)
    assert [e.kind for e in a.core.leave_events()] == ["revoked"]
    assert a.core.leave(sim.now) is None  # KIP-345: the session decides


def test_unknown_assignor_names_are_refused() -> None:
    with pytest.raises(ValueError, match="stickyish"):
        MemberConfig("g", "c", 10, 10, 1, 1, ("stickyish",))


def test_the_subscription_carries_owned_partitions_and_generation() -> None:
    from replog.coordinator.consumer_protocol import subscription_from_bytes

    core = GroupMember(MemberConfig("g", "c", 10, 10, 1, 1, ("cooperative-sticky",)))
    core.subscribe(frozenset({"t"}), 0)
    core.owned = frozenset({TopicPartition("t", 1)})
    core.protocol, core.generation = "cooperative-sticky", 4
    outgoing = core.next_request(0)
    assert outgoing is not None and isinstance(outgoing.request, gm.JoinGroupRequest)
    ((name, metadata),) = outgoing.request.protocols
    decoded = subscription_from_bytes(metadata)
    assert name == "cooperative-sticky" and decoded.topics == ("t",)
    assert decoded.owned == (TopicPartition("t", 1),) and decoded.generation == 4


def test_each_assignor_gets_its_own_user_data() -> None:
    """`sticky` sends the last assignment and its generation (Kafka's StickyAssignor user
    data), `cooperative-sticky` its generation, `range` none; before any assignment `sticky`
    sends none either."""
    from replog.coordinator.consumer_protocol import (
        assignment_to_bytes,
        generation_from_user_data,
        sticky_user_data_from_bytes,
        subscription_from_bytes,
    )

    strategies = ("sticky", "cooperative-sticky", "range")
    core = GroupMember(MemberConfig("g", "c", 10, 10, 1, 1, strategies))
    core.subscribe(frozenset({"t"}), 0)
    first = core.next_request(0)
    assert first is not None and isinstance(first.request, gm.JoinGroupRequest)
    assert subscription_from_bytes(first.request.protocols[0][1]).user_data is None
    core.request_failed("join", 0)
    core.generation, core.protocol = 3, "sticky"
    core.phase = Phase.SYNCING
    core.sync_answered(
        gm.SyncGroupResponse(
            1, None, "consumer", "sticky", assignment_to_bytes([TopicPartition("t", 2)])
        ),
        0,
    )
    core.subscribe(frozenset({"t", "u"}), 0)
    outgoing = None
    for _ in range(3):  # the eager revoke's callbacks first
        core.take_events()
        core.callbacks_done()
        outgoing = core.next_request(5)  # after retry.backoff.ms
        if outgoing is not None and outgoing.kind == "join":
            break
        core.request_failed("heartbeat", 5)
    assert outgoing is not None and isinstance(outgoing.request, gm.JoinGroupRequest)
    data = {name: subscription_from_bytes(m).user_data for name, m in outgoing.request.protocols}
    assert sticky_user_data_from_bytes(data["sticky"]) == ((TopicPartition("t", 2),), 3)
    assert generation_from_user_data(data["cooperative-sticky"]) == 3
    assert data["range"] is None


def test_a_subscription_changed_while_joining_rejoins_after_the_sync() -> None:
    """The group assigns what the JoinGroup said: a member whose subscription changed while
    its JoinGroup was out rejoins once the rebalance completes (else it keeps the old
    topics)."""
    sim = GroupSim({"t": 2, "u": 2})
    sim.add("a", topics=("t", "u"))
    sim.run(SPLIT)
    send = sim._send

    def subscribe_once_joined(name: str, outgoing: object) -> None:
        request = outgoing.request  # type: ignore[attr-defined]
        send(name, outgoing)
        # Its JoinGroup with a member id (the first one only learns it, KIP-394) is parked.
        joining = isinstance(request, gm.JoinGroupRequest) and bool(request.member_id)
        if name == "b" and joining and b.core.topics == {"t"}:
            b.core.subscribe(frozenset({"t", "u"}), sim.now)  # the group assigns {t} to b

    sim._send = subscribe_once_joined  # type: ignore[method-assign]
    b = sim.add("b", topics=("t",))
    sim.run(3 * SPLIT)
    assert sim.reads() == {"a": ["t-0", "u-0"], "b": ["t-1", "u-1"]}


def test_client_rack_rides_in_the_subscription_and_the_leader_assigns_by_rack() -> None:
    """KIP-881: client.rack goes out in the subscription (v3); a range leader given the
    replicas' racks gives each member the partitions with a replica in its rack."""
    from replog.coordinator.consumer_protocol import (
        Subscription,
        assigned_partitions,
        subscription_from_bytes,
        subscription_to_bytes,
    )

    core = GroupMember(MemberConfig("g", "c", 1_000, 5_000, 100, 50, ("range",), None, "b"))
    core.poll_called(0)
    core.subscribe(frozenset({"t"}), 0)
    join = core.next_request(0)
    assert join is not None and isinstance(join.request, gm.JoinGroupRequest)
    ((_, mine),) = join.request.protocols
    assert subscription_from_bytes(mine).rack == "b"
    other = subscription_to_bytes(Subscription(("t",), rack="a"))
    core.join_answered(
        gm.JoinGroupResponse(
            1, None, "m1", 1, "consumer", "range", "m1", False,
            (gm.JoinMember("m0", None, other), gm.JoinMember("m1", None, mine)),
        ),
        0,
        {"t": 4},
        {TopicPartition("t", p): frozenset({"ab"[p % 2]}) for p in range(4)},
    )  # fmt: skip
    sync = core.next_request(0)
    assert sync is not None and isinstance(sync.request, gm.SyncGroupRequest)
    plan = {m: assigned_partitions(data) for m, data in sync.request.assignments}
    assert plan == {"m0": [("t", 0), ("t", 2)], "m1": [("t", 1), ("t", 3)]}


def test_the_leader_rebalances_when_a_subscribed_topic_is_deleted() -> None:
    """Kafka's leader compares the group's topics' partition counts with those it assigned:
    a topic deleted changes them, and the rebalance takes its partitions from every member."""
    sim = GroupSim({"t": 2, "u": 2})
    sim.add("a", topics=("t", "u"))
    sim.add("b", topics=("t", "u"))
    sim.run(2 * SPLIT)
    assert {p for parts in sim.reads().values() for p in parts} == {"t-0", "t-1", "u-0", "u-1"}
    sim.set_counts({"t": 2})
    sim.run(2 * SPLIT)
    assert sorted(p for parts in sim.reads().values() for p in parts) == ["t-0", "t-1"]


def test_a_topic_no_metadata_reports_starts_no_rebalance() -> None:
    """A member naming a topic that does not exist: the leader never rebalances for it, and
    does once when it is created."""
    sim = GroupSim({"t": 2})
    sim.add("a", topics=("t",))
    sim.add("b", topics=("t", "x"))
    sim.run(2 * SPLIT)
    generation = sim.members["a"].core.generation
    for _ in range(5):
        sim.set_counts({"t": 2})
        sim.run(SPLIT)
    assert sim.members["a"].core.generation == generation
    sim.set_counts({"t": 2, "x": 1})
    sim.run(2 * SPLIT)
    assert sim.members["a"].core.generation == generation + 1
    assert "x-0" in sim.reads()["b"]


def test_a_pattern_matching_no_topic_joins_with_none_and_an_empty_list_does_not() -> None:
    """Kafka's consumer joins for a pattern subscription whatever it matches; a subscription
    to no topic is no subscription."""
    sim = GroupSim({"t": 2})
    sim.add("a", topics=())
    sim.add("p", topics=(), by_pattern=True)
    sim.run(2 * SPLIT)
    group = sim.coordinator.groups[GROUP]
    assert set(group.members) == {sim.members["p"].core.member_id}
    assert sim.members["a"].core.member_id == gm.UNKNOWN_MEMBER_ID
    assert sim.members["p"].core.phase is Phase.STABLE
    assert sim.reads()["p"] == []
    sim.members["p"].core.subscribe(frozenset({"t"}), sim.now, by_pattern=True)  # "t" created
    sim.run(2 * SPLIT)
    assert sorted(sim.reads()["p"]) == ["t-0", "t-1"]


def reasons(sim: GroupSim, name: str) -> list[tuple[str, str | None]]:
    """What `name` sent: ("join", reason) and ("leave", reason) in order."""
    said: list[tuple[str, str | None]] = []
    for who, request in sim.sent:
        if who != name:
            continue
        if isinstance(request, gm.JoinGroupRequest):
            said.append(("join", request.reason))
        elif isinstance(request, gm.LeaveGroupRequest):
            said += [("leave", m.reason) for m in request.members]
    return said


def test_joins_and_leaves_say_why_in_the_java_consumers_words() -> None:
    sim = GroupSim({"t": 4})
    a = sim.add("a", max_poll_ms=2_000)
    sim.run(SPLIT)
    member_id = a.core.member_id
    assert reasons(sim, "a") == [
        ("join", ""),  # a first join gives none, as the Java consumer's
        ("join", f"need to re-join with the given member-id: {member_id}"),
    ]
    sim.add("b")
    sim.run(2 * SPLIT)  # a's heartbeat finds the group rebalancing
    assert reasons(sim, "a")[2:] == [("join", "group is already rebalancing")]
    a.core.subscribe(frozenset({"t", "u"}), sim.now)
    sim.run(2 * SPLIT)
    assert reasons(sim, "a")[3:] == [("join", "subscription has changed")]
    a.polling = False
    sim.run(3_000)
    assert reasons(sim, "a")[4:] == [("leave", "consumer poll timeout has expired.")]
    a.polling = True
    sim.run(2 * SPLIT)
    assert reasons(sim, "a")[5] == ("join", "consumer pro-actively leaving the group")
    b = sim.members["b"]
    closing = b.core.leave(sim.now)
    assert closing is not None and isinstance(closing.request, gm.LeaveGroupRequest)
    assert [m.reason for m in closing.request.members] == ["the consumer is being closed"]


def test_a_failed_rebalance_and_a_fenced_commit_say_what_failed() -> None:
    sim = GroupSim({"t": 2})
    a = sim.add("a")
    sim.run(SPLIT)
    a.core.commit_fenced(IllegalGenerationError("old generation"), sim.now)
    sim.run(SPLIT)
    assert reasons(sim, "a")[-1] == (
        "join",
        "encountered ILLEGAL_GENERATION from OFFSET_COMMIT response",
    )
    a.core.commit_fenced(RebalanceInProgressError("rebalancing"), sim.now)
    sim.run(SPLIT)
    assert ("join", "offset commit failed since group is already rebalancing") in reasons(sim, "a")
    # A JoinGroup answered with an error names the error as the Java consumer's exception.
    core = GroupMember(MemberConfig("g", "c", 1000, 5000, 100, 50, ("range",)))
    core.poll_called(0)
    core.subscribe(frozenset({"t"}), 0)
    join = core.next_request(0)
    assert join is not None and isinstance(join.request, gm.JoinGroupRequest)
    core.join_answered(gm.JoinGroupResponse(0, UnknownMemberIdError("gone"), "m-1"), 0)
    again = core.next_request(100)
    assert again is not None and isinstance(again.request, gm.JoinGroupRequest)
    assert again.request.reason == "rebalance failed due to UnknownMemberIdException"
    core.request_failed("join", 100, "RequestTimedOutError")
    third = core.next_request(200)
    assert third is not None and isinstance(third.request, gm.JoinGroupRequest)
    assert third.request.reason == "rebalance failed due to RequestTimedOutError"


def test_a_leave_gives_the_reason_asked_and_a_long_one_is_cut_to_255_characters() -> None:
    sim = GroupSim({"t": 2})
    a, b = sim.add("a"), sim.add("b")
    sim.run(2 * SPLIT)
    leave = a.core.leave(sim.now, LEAVE_UNSUBSCRIBED)
    assert leave is not None and isinstance(leave.request, gm.LeaveGroupRequest)
    assert [m.reason for m in leave.request.members] == [
        "the consumer unsubscribed from all topics"
    ]
    long = b.core.leave(sim.now, "x" * 300)
    assert long is not None and isinstance(long.request, gm.LeaveGroupRequest)
    assert long.request.members[0].reason == "x" * 255
