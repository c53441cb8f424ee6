"""Scenarios of the consumer's KIP-848 membership core (`ConsumerProtocolMember`) against the
real consumer-group coordinator core, on a simulated clock (`consumer_member_sim`): joining,
splitting, revoking before assigning, acknowledging at once, fencing, leaving (-1, static -2),
sessions, max.poll.interval.ms, commits, retries and fatal errors. `ConsumerGroupSim.check`
holds after every step: no partition is read by two live members."""

from __future__ import annotations

from uuid import UUID

import pytest
from consumer_member_sim import GROUP, ConsumerGroupSim, topic_id

from replog.coordinator import consumer_group_messages as cgm
from replog.coordinator.consumer_group_coordinator import ConsumerGroupConfig
from replog.coordinator.consumer_protocol_member import (
    ConsumerMemberConfig,
    ConsumerProtocolMember,
)
from replog.coordinator.group_member import Phase
from replog.errors import (
    CommitFailedError,
    FencedMemberEpochError,
    NotCoordinatorError,
    RebalanceInProgressError,
    StaleMemberEpochError,
    UnknownMemberIdError,
    UnreleasedInstanceIdError,
    UnsupportedAssignorError,
    UnsupportedVersionError,
)

SETTLE = 1_000  # simulated time for a rebalance at a 100 ms heartbeat interval


def _parts(*numbers: int, topic: str = "t") -> list[str]:
    return [f"{topic}-{n}" for n in numbers]


def test_one_member_gets_every_partition_and_heartbeats_at_the_brokers_interval() -> None:
    sim = ConsumerGroupSim({"t": 3}, heartbeat_ms=100, session_ms=1_000)
    a = sim.add("a")
    sim.run(SETTLE)
    assert sim.reads() == {"a": _parts(0, 1, 2)}
    assert a.history == [("assigned", ("t-0", "t-1", "t-2"))]
    assert a.core.phase is Phase.STABLE and a.core.member_epoch >= 1
    assert a.core.heartbeat_interval_ms == 100
    join = a.sent[0]
    assert join.member_epoch == 0 and join.member_id == "id-a"
    assert join.subscribed_topic_names == ("t",) and join.rebalance_timeout_ms == 5_000
    assert join.owned == ()
    later = a.sent[-1]
    assert later.subscribed_topic_names is None and later.rebalance_timeout_ms == -1
    assert later.owned == ((topic_id("t"), (0, 1, 2)),)
    sent = len(a.sent)
    sim.run(5_000)  # five sessions: the heartbeats keep the member
    assert sim.group_members() == ["id-a"]
    assert 45 <= len(a.sent) - sent <= 51


def test_three_members_split_the_partitions_evenly_and_disjointly() -> None:
    sim = ConsumerGroupSim({"t": 7})
    for name in "abc":
        sim.add(name)
    sim.run(3 * SETTLE)
    reads = sim.reads()
    assert sorted(len(parts) for parts in reads.values()) == [2, 2, 3], reads
    assert sorted(p for parts in reads.values() for p in parts) == sorted(_parts(*range(7)))


def test_a_partition_is_revoked_before_another_member_gets_it_and_acknowledged_at_once() -> None:
    sim = ConsumerGroupSim({"t": 4}, heartbeat_ms=1_000, session_ms=10_000)
    a = sim.add("a")
    sim.run(SETTLE)
    b = sim.add("b")
    sim.run(3_000)
    assert sim.reads() == {"a": _parts(0, 1), "b": _parts(2, 3)}
    assert a.history == [
        ("assigned", ("t-0", "t-1", "t-2", "t-3")),
        ("revoked", ("t-2", "t-3")),
        ("assigned", ()),
    ]
    assert b.history == [("assigned", ()), ("assigned", ("t-2", "t-3"))]
    # a acknowledged its revocation in a heartbeat of its own, right after its callbacks,
    # not a heartbeat interval later.
    shrunk = [r for r in a.sent if r.owned == ((topic_id("t"), (0, 1)),)]
    previous = a.sent[a.sent.index(shrunk[0]) - 1]
    assert previous.owned == ((topic_id("t"), (0, 1, 2, 3)),)


def test_a_commit_in_the_revoke_callback_carries_an_epoch_the_coordinator_accepts() -> None:
    sim = ConsumerGroupSim({"t": 4})
    a = sim.add("a")
    sim.run(SETTLE)
    a.polling = False  # its callbacks wait, as a poll that has not come yet
    a.core.poll_called(sim.now)
    sim.add("b")
    for _ in range(100):
        sim.run(10)
        if a.core.callbacks_pending:
            break
    assert a.core.callbacks_pending
    epoch, member_id, _ = a.core.commit_identity()
    assert sim.coordinator.commit_error(GROUP, member_id, epoch, None) is None
    # While the callback runs, heartbeats still list the partitions being revoked.
    sim.run(300)
    assert sim.reads()["b"] == []
    a.polling = True
    sim.run(SETTLE)
    assert sim.reads() == {"a": _parts(0, 1), "b": _parts(2, 3)}


def test_a_killed_members_partitions_move_after_its_session() -> None:
    sim = ConsumerGroupSim({"t": 4}, session_ms=1_000)
    a = sim.add("a")
    b = sim.add("b")
    sim.run(2 * SETTLE)
    assert len(sim.reads()["b"]) == 2
    b.alive = False
    sim.run(900)
    assert len(a.reads) == 2  # the session has not ended yet
    sim.run(600)
    assert sim.reads() == {"a": _parts(0, 1, 2, 3)}


def test_a_fenced_member_loses_its_partitions_and_rejoins_at_epoch_0() -> None:
    sim = ConsumerGroupSim({"t": 4}, session_ms=1_000)
    sim.add("a")
    b = sim.add("b")
    sim.run(2 * SETTLE)
    owned = tuple(sorted(f"{tp.topic}-{tp.partition}" for tp in b.reads))
    b.alive = False
    sim.run(1_500)  # removed by the coordinator
    b.alive = True
    sim.run(3 * SETTLE)
    assert ("lost", owned) in b.history
    lost_at = b.history.index(("lost", owned))
    assert b.history[lost_at + 1 :][-1][0] == "assigned"
    rejoin = [r for r in b.sent if r.member_epoch == 0]
    assert len(rejoin) == 2 and rejoin[-1].member_id == "id-b"  # the same member id
    assert sorted(len(p) for p in sim.reads().values()) == [2, 2]


def test_leaving_sends_epoch_minus_1_and_the_others_take_over_at_once() -> None:
    sim = ConsumerGroupSim({"t": 4}, heartbeat_ms=100)
    a = sim.add("a")
    b = sim.add("b")
    sim.run(2 * SETTLE)
    events = b.core.leave_events()
    assert [e.kind for e in events] == ["revoked"]
    outgoing = b.core.leave(sim.now)
    assert outgoing is not None and outgoing.kind == "leave"
    assert outgoing.request.member_epoch == -1  # type: ignore[union-attr]
    sim.coordinator.heartbeat(outgoing.request, sim.now)  # type: ignore[arg-type]
    del sim.members["b"]
    sim.run(300)
    assert sim.reads() == {"a": _parts(0, 1, 2, 3)}
    assert a.core.phase is Phase.STABLE


def test_a_static_member_leaves_with_minus_2_and_gets_its_partitions_back() -> None:
    sim = ConsumerGroupSim({"t": 4}, session_ms=5_000)
    sim.add("a")
    s = sim.add("s", instance="static-1")
    sim.run(2 * SETTLE)
    kept = sorted(s.reads)
    s.core.leave_events()
    outgoing = s.core.leave(sim.now)
    assert outgoing is not None
    assert outgoing.request.member_epoch == -2  # type: ignore[union-attr]
    sim.coordinator.heartbeat(outgoing.request, sim.now)  # type: ignore[arg-type]
    del sim.members["s"]
    sim.run(1_000)
    assert len(sim.reads()["a"]) == 2  # the static member's partitions wait for it
    again = sim.add("s2", instance="static-1", member_id="id-s-restarted")
    sim.run(SETTLE)
    assert sorted(again.reads) == kept


def test_a_second_member_with_a_held_instance_id_is_fatal() -> None:
    sim = ConsumerGroupSim({"t": 2})
    sim.add("a", instance="same")
    sim.run(SETTLE)
    b = sim.add("b", instance="same")
    sim.run(SETTLE)
    assert isinstance(b.core.fatal, UnreleasedInstanceIdError)
    assert b.core.next_request(sim.now) is None


def test_a_member_that_stops_polling_leaves_and_loses_its_partitions_at_its_next_poll() -> None:
    sim = ConsumerGroupSim({"t": 4})
    a = sim.add("a", max_poll_ms=2_000)
    b = sim.add("b", max_poll_ms=2_000)
    sim.run(2 * SETTLE)
    owned = tuple(sorted(f"{tp.topic}-{tp.partition}" for tp in b.reads))
    b.polling = False
    sim.run(2_500)
    assert b.sent[-1].member_epoch == -1 and b.core.phase is Phase.UNJOINED
    assert sim.group_members() == ["id-a"]
    assert len(a.reads) == 4
    b.polling = True
    sim.run(2 * SETTLE)
    assert ("lost", owned) in b.history
    assert sorted(len(p) for p in sim.reads().values()) == [2, 2]


def test_a_subscription_change_is_sent_at_once_and_its_partitions_revoked() -> None:
    sim = ConsumerGroupSim({"t": 2, "u": 2}, heartbeat_ms=5_000, session_ms=45_000)
    a = sim.add("a", topics=("t", "u"))
    sim.run(SETTLE)
    assert len(a.reads) == 4
    a.core.subscribe(frozenset({"u"}), sim.now)
    sim.run(20)
    assert a.sent[-1].subscribed_topic_names is None  # the acknowledgement after the change
    assert a.sent[-2].subscribed_topic_names == ("u",)
    assert sim.reads() == {"a": _parts(0, 1, topic="u")}


def test_an_assignment_waits_for_topic_ids_the_metadata_does_not_know_yet() -> None:
    sim = ConsumerGroupSim({"t": 2})
    a = sim.add("a")
    a.core._names.clear()  # the consumer's metadata knows no topic id yet
    a.core._topic_ids.clear()
    sim.run(SETTLE)
    assert a.reads == set() and a.core.phase is Phase.STABLE
    a.core.set_topic_ids({"t": topic_id("t")}, sim.now)
    sim.run(50)
    assert sim.reads() == {"a": _parts(0, 1)}


def _core(**kwargs: object) -> ConsumerProtocolMember:
    config = ConsumerMemberConfig(GROUP, "c", "id-c", 5_000, 50, **kwargs)  # type: ignore[arg-type]
    core = ConsumerProtocolMember(config)
    core.poll_called(0)
    core.subscribe(frozenset({"t"}), 0)
    return core


def test_commits_while_joining_are_refused_and_a_stale_epoch_heartbeats_at_once() -> None:
    core = _core()
    assert core.commit_identity() == (-1, "", None)
    join = core.next_request(0)
    assert join is not None and join.request.member_epoch == 0  # type: ignore[union-attr]
    with pytest.raises(RebalanceInProgressError):
        core.commit_identity()
    core.heartbeat_answered(cgm.ConsumerGroupHeartbeatResponse(None, "id-c", 3, 5_000), 0)
    assert core.commit_identity() == (3, "id-c", None)
    assert core.next_request(10) is None
    core.commit_fenced(StaleMemberEpochError("moved on"), 10)
    beat = core.next_request(10)
    assert beat is not None and beat.request.member_epoch == 3  # type: ignore[union-attr]


def test_a_fenced_member_refuses_commits_until_poll_gave_its_partitions_up() -> None:
    core = _core()
    core.next_request(0)
    tid = UUID(int=7)
    core.set_topic_ids({"t": tid}, 0)
    core.heartbeat_answered(
        cgm.ConsumerGroupHeartbeatResponse(None, "id-c", 1, 1_000, ((tid, (0,)),)), 0
    )
    core.take_events()
    core.callbacks_done()
    assert core.commit_identity() == (1, "id-c", None)
    core.heartbeat_answered(cgm.ConsumerGroupHeartbeatResponse(FencedMemberEpochError("old")), 5)
    with pytest.raises(CommitFailedError, match="membership was lost"):
        core.commit_identity()
    assert core.next_request(10) is None  # the lost callback first
    (event,) = core.take_events()
    assert event.kind == "lost"
    with pytest.raises(CommitFailedError):
        core.commit_identity()
    core.callbacks_done()
    assert core.commit_identity() == (-1, "", None)


def test_coordinator_errors_retry_after_the_backoff_with_every_field() -> None:
    core = _core(server_assignor="range")
    core.next_request(0)
    core.heartbeat_answered(cgm.ConsumerGroupHeartbeatResponse(None, "id-c", 1, 1_000), 0)
    beat = core.next_request(1_000)
    assert beat is not None and beat.request.server_assignor is None  # type: ignore[union-attr]
    core.heartbeat_answered(cgm.ConsumerGroupHeartbeatResponse(NotCoordinatorError("moved")), 1_000)
    assert core.fatal is None and core.next_request(1_040) is None
    retry = core.next_request(1_050)
    assert retry is not None
    request = retry.request
    assert isinstance(request, cgm.ConsumerGroupHeartbeatRequest)
    assert request.member_epoch == 1 and request.server_assignor == "range"
    assert request.subscribed_topic_names == ("t",) and request.rebalance_timeout_ms == 5_000


def test_an_unknown_topic_id_in_the_answer_is_named_once_known() -> None:
    core = _core()
    core.next_request(0)
    other = UUID(int=99)
    core.heartbeat_answered(
        cgm.ConsumerGroupHeartbeatResponse(None, "id-c", 1, 1_000, ((other, (0,)),)), 0
    )
    assert core.take_events() == [] and not core.callbacks_pending  # nothing to name yet
    core.set_topic_ids({"t": other}, 5)
    (event,) = core.take_events()
    assert event.kind == "assigned" and {(tp.topic, tp.partition) for tp in event.partitions} == {
        ("t", 0)
    }
    core.callbacks_done()
    ack = core.next_request(6)
    assert ack is not None and ack.request.owned == ((other, (0,)),)  # type: ignore[union-attr]


def test_the_brokers_assignors_decide_the_default_and_refuse_others() -> None:
    sim = ConsumerGroupSim({"t": 4})
    sim.coordinator.config = ConsumerGroupConfig(
        session_timeout_ms=1_000,
        heartbeat_interval_ms=100,
        assignors=("range",),
        min_session_timeout_ms=1,
        min_heartbeat_interval_ms=1,
    )
    a = sim.add("a")
    b = sim.add("b", assignor="uniform")  # not one of the broker's group.consumer.assignors
    sim.run(SETTLE)
    assert isinstance(b.core.fatal, UnsupportedAssignorError)
    assert sim.coordinator.preferred_assignor(sim.coordinator.groups[GROUP]) == "range"
    assert len(a.reads) == 4


def test_client_rack_goes_out_with_every_field_and_a_pattern_as_the_regex() -> None:
    core = ConsumerProtocolMember(ConsumerMemberConfig("g", "c", "m", 5_000, 50, rack_id="r1"))
    core.poll_called(0)
    core.subscribe(frozenset(), 0, pattern="t.*")  # nothing matched yet: it joins all the same
    join = core.next_request(0)
    assert join is not None
    request = join.request
    assert (request.rack_id, request.subscribed_topic_regex) == ("r1", "t.*")
    assert request.subscribed_topic_names == ()


def test_a_txn_offset_commit_of_a_member_is_not_held_to_offset_commit_v9() -> None:
    """Kafka's `validateOffsetCommit`: OffsetCommit below v9 is refused to a member of the new
    protocol, a TxnOffsetCommit (whose versions carry no such fields) is not; naming no member
    at all it commits as a producer outside the group."""
    sim = ConsumerGroupSim({"t": 2})
    a = sim.add("a")
    sim.run(SETTLE)
    epoch, member_id, _ = a.core.commit_identity()
    commit = sim.coordinator.commit_error
    assert isinstance(commit(GROUP, member_id, epoch, 8), UnsupportedVersionError)
    assert commit(GROUP, member_id, epoch, 3, transactional=True) is None
    assert commit(GROUP, "", -1, 3, transactional=True) is None
    assert isinstance(commit(GROUP, "", -1, 3), UnknownMemberIdError)
    assert isinstance(
        commit(GROUP, member_id, epoch - 1, 3, transactional=True), StaleMemberEpochError
    )
