"""GroupCoordinator's OffsetDelete over a real ReplicaManager and logs in tmp_path: the deleted
offsets' tombstones are in the log before the answer (a broker loading the partition again
does not serve them), partitions of topics the group's members read are kept
(GROUP_SUBSCRIBED_TO_TOPIC), a group that does not exist is GROUP_ID_NOT_FOUND, and a commit
appended before the deletion and acknowledged after it does not bring the offset back."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from replog.coordinator import classic_group_messages as gm
from replog.coordinator import consumer_group_messages as cgm
from replog.coordinator import messages as cm
from replog.coordinator.consumer_protocol import Subscription, subscription_to_bytes
from replog.errors import (
    GroupIdNotFoundError,
    GroupSubscribedToTopicError,
    NonEmptyGroupError,
)
from replog.server.groups.group_coordinator import GroupCoordinator
from replog.testing import LoopTasks
from tests.server.groups.test_group_coordinator import (
    DATA,
    GROUP_IN,
    USERS,
    Broker,
    FakeReplicas,
    commit,
    committed,
    fetch,
    image_with,
    loaded,
    log_records,
    offsets_topic,
    tombstone,
    until_produced,
)
from tests.server.groups.test_group_coordinator_groups import FAST

GROUP = GROUP_IN[0]
IMAGE = image_with(*offsets_topic(1, 1, 1), *DATA, *USERS)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    node = Broker(tmp_path / "broker1", FAST)
    yield node
    node.close()


def delete(group: str, *partitions: tuple[str, int]) -> cm.OffsetDeleteRequest:
    return cm.OffsetDeleteRequest(group, partitions)


def answers(response: cm.OffsetDeleteResponse) -> list[tuple[str, int, str | None]]:
    assert response.error is None, response.error
    return [
        (r.topic, r.partition, None if r.error is None else r.error.error_name)
        for r in response.partitions
    ]


async def commit_all(broker: Broker, group: str) -> None:
    entries = (
        cm.CommitEntry("orders", 0, 5),
        cm.CommitEntry("orders", 1, 6),
        cm.CommitEntry("users", 0, 7),
    )
    response = await broker.coordinator.offset_commit(commit(group, *entries))
    assert response.error is None and [p.error for p in response.partitions] == [None] * 3


@pytest.mark.asyncio
async def test_deleted_offsets_are_tombstoned_before_the_answer_and_stay_deleted(
    broker: Broker, tmp_path: Path
) -> None:
    await loaded(broker, IMAGE)
    await commit_all(broker, GROUP)  # a group of offsets only (no member ever joined)
    response = await broker.coordinator.offset_delete(
        delete(GROUP, ("orders", 0), ("orders", 1), ("orders", 7))
    )
    # Every partition asked for is answered; one without an offset just has none to delete.
    assert answers(response) == [("orders", 0, None), ("orders", 1, None), ("orders", 7, None)]
    assert committed(broker.coordinator.offset_fetch(fetch(GROUP))) == {("users", 0): 7}
    assert log_records(broker, 0)[-2:] == [
        tombstone(GROUP, "orders", 0),
        tombstone(GROUP, "orders", 1),
    ]
    await broker.coordinator.stop()
    broker.close()
    again = Broker(tmp_path / "broker1", FAST)
    try:
        await loaded(again, IMAGE)
        assert committed(again.coordinator.offset_fetch(fetch(GROUP))) == {("users", 0): 7}
    finally:
        await again.coordinator.stop()
        again.close()


@pytest.mark.asyncio
async def test_a_group_that_does_not_exist_is_group_id_not_found(broker: Broker) -> None:
    await loaded(broker, IMAGE)
    response = await broker.coordinator.offset_delete(delete(GROUP, ("orders", 0)))
    assert isinstance(response.error, GroupIdNotFoundError) and GROUP in str(response.error)
    assert response.partitions == ()


def consumer_join(member: str, topics: tuple[str, ...], protocol_type: str) -> gm.JoinGroupRequest:
    subscription = subscription_to_bytes(Subscription(topics))
    return gm.JoinGroupRequest(
        GROUP, member, protocol_type, (("range", subscription),), 10_000, 30_000, client_id="c"
    )


async def stable_member(broker: Broker, topics: tuple[str, ...], protocol_type: str) -> str:
    """A classic group of one member subscribed to `topics`, Stable."""
    first = await broker.coordinator.join_group(consumer_join("", topics, protocol_type))
    member = first.member_id
    answer = await broker.coordinator.join_group(consumer_join(member, topics, protocol_type))
    assert answer.error is None, answer.error
    synced = await broker.coordinator.sync_group(
        gm.SyncGroupRequest(GROUP, member, answer.generation_id, assignments=((member, b""),))
    )
    assert synced.error is None
    return member


@pytest.mark.asyncio
async def test_a_classic_consumer_group_keeps_the_offsets_of_the_topics_it_reads(
    broker: Broker,
) -> None:
    await loaded(broker, IMAGE)
    await commit_all(broker, GROUP)
    await stable_member(broker, ("orders",), "consumer")
    response = await broker.coordinator.offset_delete(delete(GROUP, ("orders", 0), ("users", 0)))
    assert answers(response) == [
        ("orders", 0, GroupSubscribedToTopicError.error_name),
        ("users", 0, None),
    ]
    assert committed(broker.coordinator.offset_fetch(fetch(GROUP))) == {
        ("orders", 0): 5,
        ("orders", 1): 6,
    }


@pytest.mark.asyncio
async def test_a_classic_group_of_another_protocol_with_members_is_refused(
    broker: Broker,
) -> None:
    await loaded(broker, IMAGE)
    await commit_all(broker, GROUP)
    await stable_member(broker, ("orders",), "connect")
    response = await broker.coordinator.offset_delete(delete(GROUP, ("users", 0)))
    assert isinstance(response.error, NonEmptyGroupError)
    assert "'connect'" in str(response.error)
    assert len(committed(broker.coordinator.offset_fetch(fetch(GROUP)))) == 3


@pytest.mark.asyncio
async def test_a_commit_acknowledged_after_the_deletion_does_not_come_back(
    broker: Broker,
) -> None:
    fake = FakeReplicas(broker.rm)  # its appends wait for `fake.gate`
    broker.coordinator = GroupCoordinator(
        1, fake, broker.creator, FAST, wall_clock=lambda: broker.now, tasks=LoopTasks()
    )
    await loaded(broker, IMAGE)
    fake.gate.set()
    await commit_all(broker, GROUP)
    fake.gate.clear()
    late = asyncio.create_task(
        broker.coordinator.offset_commit(commit(GROUP, cm.CommitEntry("orders", 0, 9)))
    )
    await until_produced(fake, 2)  # the commit is appended, waiting for acks=all
    deletion = asyncio.create_task(broker.coordinator.offset_delete(delete(GROUP, ("orders", 0))))
    await until_produced(fake, 3)
    fake.gate.set()
    assert answers(await asyncio.wait_for(deletion, 5)) == [("orders", 0, None)]
    assert (await asyncio.wait_for(late, 5)).error is None
    assert committed(broker.coordinator.offset_fetch(fetch(GROUP, ("orders", 0)))) == {
        ("orders", 0): -1
    }


@pytest.mark.asyncio
async def test_a_consumer_protocol_group_keeps_the_offsets_of_the_topics_it_reads(
    broker: Broker,
) -> None:
    await loaded(broker, IMAGE)
    await commit_all(broker, GROUP)
    joined = await broker.coordinator.consumer_group_heartbeat(
        cgm.ConsumerGroupHeartbeatRequest(
            GROUP, "m1", 0, rebalance_timeout_ms=30_000, subscribed_topic_regex="ord.*", owned=()
        )
    )
    assert joined.error is None
    # A consumer-protocol group with members is not refused: its subscriptions are known.
    response = await broker.coordinator.offset_delete(delete(GROUP, ("orders", 1), ("users", 0)))
    assert answers(response) == [
        ("orders", 1, GroupSubscribedToTopicError.error_name),
        ("users", 0, None),
    ]
    assert committed(broker.coordinator.offset_fetch(fetch(GROUP))) == {
        ("orders", 0): 5,
        ("orders", 1): 6,
    }
