"""The GroupCoordinator service's classic group RPCs over a real grpc.aio server in front of a
real GroupCoordinator (a ReplicaManager and logs in tmp_path), driven through
`CoordinatorClient`: two members join (the first join answered MEMBER_ID_REQUIRED with the id),
the leader's SyncGroup answers both, heartbeats, DescribeGroups and ListGroups show the Stable
group with the peer's host, a commit is fenced by generation, LeaveGroup empties the group and
DeleteGroups removes it; without a coordinator every RPC is COORDINATOR_NOT_AVAILABLE."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
import pytest_asyncio

from replog.common import OffsetAndMetadata, TopicPartition
from replog.coordinator import classic_group_messages as gm
from replog.coordinator import consumer_group_messages as cgm
from replog.errors import (
    CoordinatorNotAvailableError,
    IllegalGenerationError,
    MemberIdRequiredError,
    UnknownMemberIdError,
)
from replog.server.coordinator_service import CoordinatorService, add_coordinator_service
from replog.server.group_coordinator_config import GroupCoordinatorConfig
from replog.wire.coordinator_client import CoordinatorClient
from tests.server.test_group_coordinator import (
    DATA,
    DATA_TID,
    GROUP_IN,
    Broker,
    image_with,
    loaded,
    offsets_topic,
)

GROUP = GROUP_IN[0]
Served = tuple[CoordinatorService, CoordinatorClient]


@pytest_asyncio.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    # An initial rebalance delay: both first joins arrive before the first generation.
    broker = Broker(tmp_path / "b", GroupCoordinatorConfig(group_initial_rebalance_delay_ms=300))
    await loaded(broker, image_with(*offsets_topic(1, 1, 1), *DATA))
    service = CoordinatorService(1, broker.coordinator)
    server = grpc.aio.server()
    add_coordinator_service(service, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    client = CoordinatorClient(f"127.0.0.1:{port}", request_timeout_ms=5000)
    try:
        yield service, client
    finally:
        await client.close()
        await server.stop(grace=None)
        await broker.coordinator.stop()
        broker.close()


def join(member: str, client: str) -> gm.JoinGroupRequest:
    return gm.JoinGroupRequest(
        GROUP, member, "consumer", (("range", client.encode()),), 10_000, 10_000, client_id=client
    )


@pytest.mark.asyncio
async def test_two_members_join_sync_commit_leave_and_delete_over_grpc(served: Served) -> None:
    _, client = served
    ids = []
    for name in ("a", "b"):
        first = await client.join_group(join("", name))
        assert isinstance(first.error, MemberIdRequiredError)
        ids.append(first.member_id)
    joined = await asyncio.gather(
        *(client.join_group(join(m, c)) for m, c in zip(ids, "ab", strict=True))
    )
    assert [j.error for j in joined] == [None, None]
    leader, generation = joined[0].leader, joined[0].generation_id
    (leading,) = [j for j in joined if j.member_id == leader]
    assert sorted(m.metadata for m in leading.members) == [b"a", b"b"]
    follower = next(m for m in ids if m != leader)
    assignments = tuple((m, m.encode()) for m in ids)
    synced = await asyncio.gather(
        client.sync_group(gm.SyncGroupRequest(GROUP, follower, generation)),
        client.sync_group(gm.SyncGroupRequest(GROUP, leader, generation, assignments=assignments)),
    )
    assert [s.assignment for s in synced] == [follower.encode(), leader.encode()]
    assert await client.heartbeat(gm.HeartbeatRequest(GROUP, follower, generation)) is None

    described = await client.describe_group(GROUP)
    assert described.state == "Stable" and described.protocol_data == "range"
    hosts = {(m.client_id, m.client_host) for m in described.members}
    assert hosts == {("a", "127.0.0.1"), ("b", "127.0.0.1")}
    assert [g.group_id for g in await client.list_groups(["stable"])] == [GROUP]

    stale, _ = await client.offset_commit(
        GROUP,
        {TopicPartition("orders", 0): OffsetAndMetadata(3)},
        generation_id=generation + 1,
        member_id=leader,
    )
    assert isinstance(stale[TopicPartition("orders", 0)], IllegalGenerationError)

    left = await client.leave_group(
        gm.LeaveGroupRequest(GROUP, tuple(gm.LeaveMember(m) for m in ids))
    )
    assert left.error is None and [m.error for m in left.members] == [None, None]
    assert await client.delete_groups([GROUP]) == [(GROUP, None)]


@pytest.mark.asyncio
async def test_without_a_coordinator_group_rpcs_are_coordinator_not_available(
    served: Served,
) -> None:
    service, client = served
    service.attach(None)
    joined = await client.join_group(join("", "a"))
    assert isinstance(joined.error, CoordinatorNotAvailableError)
    with pytest.raises(CoordinatorNotAvailableError):
        await client.describe_group(GROUP)


@pytest.mark.asyncio
async def test_a_consumer_protocol_member_joins_heartbeats_and_leaves_over_grpc(
    served: Served,
) -> None:
    _, client = served
    joined = await client.consumer_group_heartbeat(
        cgm.ConsumerGroupHeartbeatRequest(
            "kip848",
            "m1",
            0,
            rebalance_timeout_ms=30_000,
            subscribed_topic_names=("orders",),
            owned=(),
            client_id="c1",
        )
    )
    assert joined.error is None and joined.member_id == "m1" and joined.member_epoch == 1
    assert joined.heartbeat_interval_ms == 5_000
    assert joined.assignment == ((DATA_TID, (0, 1)),)
    beat = await client.consumer_group_heartbeat(
        cgm.ConsumerGroupHeartbeatRequest(
            "kip848", "m1", 1, owned=joined.assignment, client_id="c1"
        )
    )
    assert beat.error is None and beat.assignment is None  # unchanged: null
    (member,) = (await client.describe_consumer_group("kip848")).members
    assert (member.client_id, member.client_host) == ("c1", "/127.0.0.1")
    left = await client.consumer_group_heartbeat(
        cgm.ConsumerGroupHeartbeatRequest("kip848", "m1", -1)
    )
    assert left.error is None and left.member_epoch == -1
    fenced = await client.consumer_group_heartbeat(
        cgm.ConsumerGroupHeartbeatRequest("kip848", "m1", 1, owned=())
    )
    assert isinstance(fenced.error, UnknownMemberIdError)
