"""GroupCoordinator's consumer-protocol (KIP-848) groups over a real ReplicaManager and logs in
tmp_path: two members split a topic through a revocation, commits and fetches are fenced by the
member epoch, a broker that loads the partition again (a failover) has the same members, epochs
and assignments, a silent member is removed by the session timer the shell arms, an Empty
group is deleted with DeleteGroups, a classic group caught mid-rebalance is converted by a
consumer-protocol join, its waiting JoinGroup answered REBALANCE_IN_PROGRESS, and a join whose
append failed is undone only when the log refused it (a timed-out append is in the log).
"""

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
    CoordinatorNotAvailableError,
    KafkaError,
    NotEnoughReplicasError,
    RequestTimedOutError,
    StaleMemberEpochError,
)
from replog.quorum.metadata.records import ConfigRecord, ConfigResourceType
from replog.server.config.group_coordinator_config import GroupCoordinatorConfig
from replog.server.groups.group_coordinator import GroupCoordinator
from replog.testing import LoopTasks
from tests.metadata.metadata_helpers import replayed
from tests.server.groups.test_group_coordinator import (
    DATA,
    DATA_TID,
    GROUP_IN,
    Broker,
    FakeReplicas,
    fetch,
    image_with,
    loaded,
    offsets_topic,
)

GROUP = GROUP_IN[0]
FAST = GroupCoordinatorConfig(
    group_consumer_session_timeout_ms=300,
    group_consumer_min_session_timeout_ms=1,
    group_consumer_heartbeat_interval_ms=100,
    group_consumer_min_heartbeat_interval_ms=1,
)
IMAGE = image_with(*offsets_topic(1, 1, 1), *DATA)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    node = Broker(tmp_path / "broker1", FAST)
    yield node
    node.close()


def hb(
    member: str, epoch: int, owned: tuple[int, ...] | None = None
) -> cgm.ConsumerGroupHeartbeatRequest:
    joining = epoch == 0
    return cgm.ConsumerGroupHeartbeatRequest(
        GROUP,
        member,
        epoch,
        rebalance_timeout_ms=30_000 if joining else -1,
        subscribed_topic_names=("orders",) if joining else None,
        owned=() if joining else None if owned is None else ((DATA_TID, owned),),
    )


def parts(answer: cgm.ConsumerGroupHeartbeatResponse) -> tuple[int, ...] | None:
    if answer.assignment is None:
        return None
    return tuple(p for _, ps in answer.assignment for p in ps)


@pytest.mark.asyncio
async def test_two_members_split_fenced_commits_and_a_failover(
    broker: Broker, tmp_path: Path
) -> None:
    await loaded(broker, IMAGE)
    heartbeat = broker.coordinator.consumer_group_heartbeat
    a = await heartbeat(hb("a", 0))
    assert (a.error, a.member_epoch, parts(a)) == (None, 1, (0, 1))
    b = await heartbeat(hb("b", 0))
    assert (b.error, b.member_epoch, parts(b)) == (None, 2, ())
    a = await heartbeat(hb("a", 1, (0, 1)))  # told to give one partition up
    assert (a.member_epoch, len(parts(a) or ())) == (1, 1)
    kept = parts(a) or ()
    a = await heartbeat(hb("a", 1, kept))
    assert a.member_epoch == 2
    b = await heartbeat(hb("b", 2, ()))
    assert parts(b) == tuple(p for p in (0, 1) if p not in kept)

    commit = cm.OffsetCommitRequest(GROUP, (cm.CommitEntry("orders", 0, 5),), 2, "a", api_version=9)
    assert [p.error for p in (await broker.coordinator.offset_commit(commit)).partitions] == [None]
    stale = cm.OffsetCommitRequest(GROUP, (cm.CommitEntry("orders", 0, 6),), 1, "a", api_version=9)
    refused = (await broker.coordinator.offset_commit(stale)).partitions[0].error
    assert isinstance(refused, StaleMemberEpochError)
    fetched = broker.coordinator.offset_fetch(
        cm.OffsetFetchRequest(GROUP, None, member_id="b", member_epoch=1)
    )
    assert isinstance(fetched.error, StaleMemberEpochError)

    await broker.coordinator.stop()
    broker.close()
    second = Broker(tmp_path / "broker1", FAST)
    try:
        await loaded(second, IMAGE)
        (described,) = second.coordinator.consumer_group_describe([GROUP])
        assert (described.state, described.group_epoch, described.assignment_epoch) == (
            "Stable",
            2,
            2,
        )
        assert {m.member_id: m.member_epoch for m in described.members} == {"a": 2, "b": 2}
        again = await second.coordinator.consumer_group_heartbeat(hb("b", 2))
        assert (again.error, again.member_epoch) == (None, 2)
        assert [f.offset for f in second.coordinator.offset_fetch(fetch(GROUP)).partitions] == [5]
    finally:
        await second.coordinator.stop()
        second.close()


@pytest.mark.asyncio
async def test_a_silent_member_is_removed_and_the_empty_group_deleted(broker: Broker) -> None:
    await loaded(broker, IMAGE)
    answer = await broker.coordinator.consumer_group_heartbeat(hb("a", 0))
    assert answer.error is None
    listed = broker.coordinator.list_groups()[1]
    assert [(g.group_id, g.group_type, g.state) for g in listed] == [(GROUP, "consumer", "Stable")]
    async with asyncio.timeout(5):
        while broker.coordinator.consumer_group_describe([GROUP])[0].state != "Empty":
            await asyncio.sleep(0.02)
    assert await broker.coordinator.delete_groups([GROUP]) == [(GROUP, None)]
    (gone,) = broker.coordinator.consumer_group_describe([GROUP])
    assert gone.error is not None and gone.error.error_name == "GROUP_ID_NOT_FOUND"
    await broker.coordinator.stop()


@pytest.mark.asyncio
async def test_a_rebalancing_classic_group_is_converted_and_its_waiting_join_answered(
    broker: Broker,
) -> None:
    await loaded(broker, IMAGE)
    metadata = subscription_to_bytes(Subscription(("orders",)))
    # JoinGroup v3 joins at once and waits out group.initial.rebalance.delay.ms (3 s).
    waiting = asyncio.ensure_future(
        broker.coordinator.join_group(
            gm.JoinGroupRequest(
                GROUP, "", "consumer", (("range", metadata),), 10_000, 30_000, api_version=3
            )
        )
    )
    await asyncio.sleep(0.05)
    assert not waiting.done()
    joined = await broker.coordinator.consumer_group_heartbeat(hb("k", 0))
    assert joined.error is None, joined
    answer = await asyncio.wait_for(waiting, 2)
    assert answer.error is not None and answer.error.error_name == "REBALANCE_IN_PROGRESS"
    (described,) = broker.coordinator.consumer_group_describe([GROUP])
    kinds = sorted(m.member_type for m in described.members)
    assert kinds == ["classic", "consumer"], described


@pytest.mark.parametrize(
    ("error", "kept"),
    [(RequestTimedOutError("slow followers"), True), (NotEnoughReplicasError("isr"), False)],
)
@pytest.mark.asyncio
async def test_a_failed_join_is_undone_only_when_the_log_refused_it(
    broker: Broker, error: KafkaError, kept: bool
) -> None:
    fake = FakeReplicas(broker.rm, answer=error)
    fake.gate.set()
    broker.coordinator = GroupCoordinator(1, fake, broker.creator, FAST, tasks=LoopTasks())
    await loaded(broker, IMAGE)
    answer = await broker.coordinator.consumer_group_heartbeat(hb("k", 0))
    # Kafka's answer to both: its clients look the coordinator up again and retry.
    assert isinstance(answer.error, CoordinatorNotAvailableError), answer
    # A timed-out batch stays in the log (and commits once the followers catch up): the
    # member stays, as a replay of the log would have it; a refused batch is gone.
    (described,) = broker.coordinator.consumer_group_describe([GROUP])
    assert [m.member_id for m in described.members] == (["k"] if kept else []), described
    await broker.coordinator.stop()


@pytest.mark.asyncio
async def test_a_groups_own_configs_from_the_metadata_log_set_its_interval(broker: Broker) -> None:
    """KIP-848's GROUP config resource: the broker reads it from its metadata image (so any
    broker taking the partition over has it) and answers the group's members with it. A
    change arrives as a delta with only a ConfigRecord: the topics image is the previous one."""
    key = "consumer.heartbeat.interval.ms"
    own = ConfigRecord(ConfigResourceType.GROUP, GROUP, key, "250")
    await loaded(broker, image_with(*offsets_topic(1, 1, 1), *DATA, own))
    answer = await broker.coordinator.consumer_group_heartbeat(hb("a", 0))
    assert (answer.error, answer.heartbeat_interval_ms) == (None, 250)
    changed = replayed(
        broker.coordinator.image, ConfigRecord(ConfigResourceType.GROUP, GROUP, key, "400")
    )
    assert changed.topics is broker.coordinator.image.topics
    broker.publish(changed)
    answer = await broker.coordinator.consumer_group_heartbeat(hb("a", answer.member_epoch))
    assert answer.heartbeat_interval_ms == 400
    gone = ConfigRecord(ConfigResourceType.GROUP, GROUP, key, None)
    broker.publish(replayed(broker.coordinator.image, gone))
    answer = await broker.coordinator.consumer_group_heartbeat(hb("a", answer.member_epoch))
    assert answer.heartbeat_interval_ms == 100  # the broker's again
    await broker.coordinator.stop()
