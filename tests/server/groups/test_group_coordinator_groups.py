"""GroupCoordinator's classic groups over a real ReplicaManager and logs in tmp_path: members
join (MEMBER_ID_REQUIRED first), the leader's SyncGroup answers every member once the group
record is appended, commits are fenced by generation and member, a broker that loads the
partition again (a failover) serves the same generation and members, a silent member is removed
by the session timer the shell arms, DeleteGroups removes an Empty group with its offsets, the
reason a member gives for a join that starts a rebalance and for leaving is logged at INFO with
its member id (KIP-800), and a failed append of a group record answers the waiting request with
the error commits get (and what the record stored is undone: a failed assignment makes the
group rebalance).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from replog.coordinator import classic_group_messages as gm
from replog.coordinator import messages as cm
from replog.coordinator.group_records import GroupMetadataValue, decode_group_value
from replog.coordinator.offsets_records import GroupMetadataKey, OffsetCommitKey, decode_key
from replog.errors import (
    IllegalGenerationError,
    MemberIdRequiredError,
    NonEmptyGroupError,
    NotCoordinatorError,
    NotLeaderOrFollowerError,
    UnknownMemberIdError,
)
from replog.record import iter_batches
from replog.server.config.group_coordinator_config import GroupCoordinatorConfig
from replog.server.groups.group_coordinator import GroupCoordinator
from replog.testing import LoopTasks
from replog.topic_names import CONSUMER_OFFSETS_TOPIC
from tests.eventually import eventually
from tests.server.groups.test_group_coordinator import (
    DATA,
    GROUP_IN,
    Broker,
    FakeReplicas,
    fetch,
    image_with,
    loaded,
    offsets_topic,
)

GROUP = GROUP_IN[0]
FAST = GroupCoordinatorConfig(group_initial_rebalance_delay_ms=100, group_min_session_timeout_ms=10)
IMAGE = image_with(*offsets_topic(1, 1, 1), *DATA)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    node = Broker(tmp_path / "broker1", FAST)
    yield node
    node.close()


def join(member: str = "", client: str = "c", session_ms: int = 10_000) -> gm.JoinGroupRequest:
    return gm.JoinGroupRequest(
        GROUP,
        member,
        "consumer",
        (("range", b"sub-" + client.encode()),),
        session_ms,
        30_000,
        client_id=client,
    )


async def joined(broker: Broker, client: str, session_ms: int = 10_000) -> str:
    """A new member's id: its first join answers MEMBER_ID_REQUIRED with it."""
    first = await broker.coordinator.join_group(join(client=client, session_ms=session_ms))
    assert isinstance(first.error, MemberIdRequiredError)
    return first.member_id


async def stable_pair(broker: Broker) -> tuple[str, str, int]:
    """Two members in a Stable group: (leader, follower, generation)."""
    a = await joined(broker, "a")
    b = await joined(broker, "b")
    answers = await asyncio.gather(
        broker.coordinator.join_group(join(a, "a")), broker.coordinator.join_group(join(b, "b"))
    )
    assert [x.error for x in answers] == [None, None]
    leader = answers[0].leader
    generation = answers[0].generation_id
    follower = b if leader == a else a
    assignments = ((a, b"to-a"), (b, b"to-b"))
    synced = await asyncio.gather(
        broker.coordinator.sync_group(gm.SyncGroupRequest(GROUP, follower, generation)),
        broker.coordinator.sync_group(
            gm.SyncGroupRequest(GROUP, leader, generation, assignments=assignments)
        ),
    )
    got = {member: s.assignment for member, s in zip((follower, leader), synced, strict=True)}
    assert got == {a: b"to-a", b: b"to-b"}
    return leader, follower, generation


def group_records(broker: Broker) -> list[tuple[str, GroupMetadataValue | None]]:
    plog = broker.log_manager.get_log(CONSUMER_OFFSETS_TOPIC, 0)
    found: list[tuple[str, GroupMetadataValue | None]] = []
    for batch in iter_batches(plog.read(plog.log_start_offset, 1 << 20)):
        for record in batch.records():
            key = decode_key(record.key or b"")
            if isinstance(key, GroupMetadataKey):
                value = None if record.value is None else decode_group_value(record.value)
                found.append((key.group, value))
    return found


def commit(member: str, generation: int, offset: int) -> cm.OffsetCommitRequest:
    return cm.OffsetCommitRequest(GROUP, (cm.CommitEntry("orders", 0, offset),), generation, member)


@pytest.mark.asyncio
async def test_members_sync_commit_fenced_and_survive_a_failover(
    broker: Broker, tmp_path: Path
) -> None:
    await loaded(broker, IMAGE)
    leader, follower, generation = await stable_pair(broker)
    stable = group_records(broker)[-1][1]
    assert stable is not None and stable.generation == generation
    assert {m.member_id for m in stable.members} == {leader, follower}

    ok = await broker.coordinator.offset_commit(commit(follower, generation, 7))
    assert [p.error for p in ok.partitions] == [None]
    old = await broker.coordinator.offset_commit(commit(follower, generation - 1, 8))
    assert isinstance(old.partitions[0].error, IllegalGenerationError)
    stranger = await broker.coordinator.offset_commit(commit("nobody", generation, 8))
    assert isinstance(stranger.partitions[0].error, UnknownMemberIdError)
    simple = await broker.coordinator.offset_commit(commit("", -1, 9))
    assert isinstance(simple.partitions[0].error, UnknownMemberIdError)

    await broker.coordinator.stop()
    broker.close()
    second = Broker(tmp_path / "broker1", FAST)
    try:
        await loaded(second, IMAGE)
        (described,) = second.coordinator.describe_groups([GROUP])
        assert described.state == "Stable"
        assert {m.member_id for m in described.members} == {leader, follower}
        heartbeat = gm.HeartbeatRequest(GROUP, follower, generation)
        assert second.coordinator.heartbeat(heartbeat) is None
        again = await second.coordinator.offset_commit(commit(leader, generation, 11))
        assert [p.error for p in again.partitions] == [None]
        fetched = second.coordinator.offset_fetch(fetch(GROUP))
        assert [(f.topic, f.partition, f.offset) for f in fetched.partitions] == [("orders", 0, 11)]
    finally:
        await second.coordinator.stop()
        second.close()


@pytest.mark.asyncio
async def test_a_silent_member_is_removed_by_its_session_timer(broker: Broker) -> None:
    await loaded(broker, IMAGE)
    member = await joined(broker, "a", session_ms=200)
    answer = await broker.coordinator.join_group(join(member, "a", session_ms=200))
    assert answer.error is None and answer.leader == member
    synced = await broker.coordinator.sync_group(
        gm.SyncGroupRequest(GROUP, member, answer.generation_id, assignments=((member, b"x"),))
    )
    assert synced.error is None and synced.assignment == b"x"
    async with asyncio.timeout(5):
        while broker.coordinator.describe_groups([GROUP])[0].state != "Empty":
            await asyncio.sleep(0.02)
    # The Empty generation is written: a broker loading the partition sees no member.
    empty = group_records(broker)[-1][1]
    assert empty is not None and empty.members == ()
    await broker.coordinator.stop()


@pytest.mark.asyncio
async def test_delete_groups_removes_an_empty_group_and_its_offsets(broker: Broker) -> None:
    await loaded(broker, IMAGE)
    leader, follower, generation = await stable_pair(broker)
    await broker.coordinator.offset_commit(commit(leader, generation, 5))
    ((_, busy),) = await broker.coordinator.delete_groups([GROUP])
    assert isinstance(busy, NonEmptyGroupError)
    left = await broker.coordinator.leave_group(
        gm.LeaveGroupRequest(GROUP, (gm.LeaveMember(leader), gm.LeaveMember(follower)))
    )
    assert left.error is None and [m.error for m in left.members] == [None, None]
    assert broker.coordinator.list_groups()[1] == [gm.ListedGroup(GROUP, "consumer", "Empty")]
    assert await broker.coordinator.delete_groups([GROUP]) == [(GROUP, None)]
    await broker.coordinator.wait_tombstones()
    assert broker.coordinator.offset_fetch(fetch(GROUP)).partitions == ()
    assert group_records(broker)[-1] == (GROUP, None)
    plog = broker.log_manager.get_log(CONSUMER_OFFSETS_TOPIC, 0)
    keys = [
        decode_key(r.key or b"")
        for b in iter_batches(plog.read(plog.log_start_offset, 1 << 20))
        for r in b.records()
        if r.value is None
    ]
    assert OffsetCommitKey(GROUP, "orders", 0) in keys
    assert broker.coordinator.describe_groups([GROUP])[0].state == "Dead"
    await broker.coordinator.stop()


@pytest.mark.asyncio
async def test_a_failed_group_record_append_answers_the_join_with_its_error(
    tmp_path: Path,
) -> None:
    broker = Broker(tmp_path / "b", FAST)
    fake = FakeReplicas(broker.rm, answer=NotLeaderOrFollowerError("moved"))
    fake.gate.set()
    broker.coordinator = GroupCoordinator(1, fake, broker.creator, FAST, tasks=LoopTasks())
    try:
        await loaded(broker, IMAGE)
        answer = await broker.coordinator.join_group(join(client="a"))  # creates the group
        assert isinstance(answer.error, NotCoordinatorError), answer
        assert GROUP in str(answer.error) and "moved" in str(answer.error)
        (request, internal), *_ = fake.produced
        assert internal and request.partitions[0].topic == CONSUMER_OFFSETS_TOPIC
    finally:
        await broker.coordinator.stop()
        broker.close()


@pytest.mark.asyncio
async def test_a_failed_assignment_append_is_undone_and_the_group_rebalances(
    tmp_path: Path,
) -> None:
    broker = Broker(tmp_path / "b", FAST)
    fake = FakeReplicas(broker.rm)
    fake.gate.set()
    broker.coordinator = GroupCoordinator(1, fake, broker.creator, FAST, tasks=LoopTasks())
    try:
        await loaded(broker, IMAGE)
        a = await joined(broker, "a")
        answer = await broker.coordinator.join_group(join(a, "a"))
        assert answer.error is None
        fake.answer = NotLeaderOrFollowerError("moved")
        synced = await broker.coordinator.sync_group(
            gm.SyncGroupRequest(GROUP, a, answer.generation_id, assignments=((a, b"to-a"),))
        )
        assert isinstance(synced.error, NotCoordinatorError), synced
        # The assignment was never written: the group rebalances instead of serving it.
        (described,) = broker.coordinator.describe_groups([GROUP])
        assert described.state == "PreparingRebalance", described
        beat = broker.coordinator.heartbeat(gm.HeartbeatRequest(GROUP, a, answer.generation_id))
        assert beat is not None and beat.error_name == "REBALANCE_IN_PROGRESS"
    finally:
        await broker.coordinator.stop()
        broker.close()


@pytest.mark.asyncio
async def test_group_records_are_stamped_with_the_wall_clock(broker: Broker) -> None:
    # Kafka's currentStateTimestamp is wall-clock milliseconds; the coordinator's timers keep
    # the monotonic clock.
    await loaded(broker, IMAGE)
    broker.now += 12_345
    await stable_pair(broker)
    stamps = {value.current_state_timestamp_ms for _, value in group_records(broker) if value}
    assert stamps == {broker.now}


@pytest.mark.asyncio
async def test_the_members_reasons_are_logged_with_their_member_ids(
    broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "replog.server.groups.group_coordinator")
    await loaded(broker, IMAGE)
    leader, follower, generation = await stable_pair(broker)
    caplog.clear()
    # The follower rejoins (a new subscription): the group rebalances, for the reason it gave.
    rejoin = dataclasses.replace(
        join(follower, "b"),
        protocols=(("range", b"sub-b-more"),),
        reason="subscription has changed",
    )
    rejoined = asyncio.ensure_future(broker.coordinator.join_group(rejoin))
    await eventually(lambda: logged(caplog, "preparing to rebalance"), "the rebalance's line")
    assert logged(caplog, "preparing to rebalance") == [
        f"broker 1: preparing to rebalance group '{GROUP}' with old generation {generation}: "
        f"member {follower} joins; client reason: subscription has changed"
    ]
    caplog.clear()
    left = await broker.coordinator.leave_group(
        gm.LeaveGroupRequest(
            GROUP,
            (
                gm.LeaveMember(leader, reason="the consumer is being closed"),
                gm.LeaveMember(follower),
                gm.LeaveMember("nobody", reason="not a member"),
            ),
        )
    )
    assert [m.error is None for m in left.members] == [True, True, False]
    assert logged(caplog, "has left") == [
        f"broker 1: member {leader} has left group '{GROUP}' through an explicit LeaveGroup "
        "request; client reason: the consumer is being closed",
        f"broker 1: member {follower} has left group '{GROUP}' through an explicit LeaveGroup "
        "request; client reason: not provided",
    ]
    assert all(r.levelno == logging.INFO for r in caplog.records if "reason" in r.getMessage())
    await asyncio.wait_for(rejoined, 10)
    await broker.coordinator.stop()


def logged(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if text in r.getMessage()]
