"""The GroupCoordinator service's classic group RPCs over a real grpc.aio server in front of a
real GroupCoordinator (a ReplicaManager and logs in tmp_path): two members join (the first
join answered MEMBER_ID_REQUIRED with the id), the leader's SyncGroup answers both, heartbeats,
DescribeGroups and ListGroups show the Stable group with the peer's host, a commit is fenced by
generation, LeaveGroup empties the group and DeleteGroups removes it; without a coordinator
every RPC is COORDINATOR_NOT_AVAILABLE."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
import pytest_asyncio

from replog.errors import (
    CoordinatorNotAvailableError,
    IllegalGenerationError,
    MemberIdRequiredError,
)
from replog.pb import coordinator_pb2 as pb
from replog.pb import coordinator_pb2_grpc
from replog.server.coordinator_service import CoordinatorService, add_coordinator_service
from replog.server.group_coordinator_config import GroupCoordinatorConfig
from replog.wire import coordinator_codec as codec
from replog.wire.broker_codec import error_from_proto
from tests.server.test_group_coordinator import (
    DATA,
    GROUP_IN,
    Broker,
    image_with,
    loaded,
    offsets_topic,
)

GROUP = GROUP_IN[0]


@pytest_asyncio.fixture
async def served(
    tmp_path: Path,
) -> AsyncIterator[tuple[CoordinatorService, Broker, coordinator_pb2_grpc.GroupCoordinatorStub]]:
    broker = Broker(tmp_path / "b", GroupCoordinatorConfig(group_initial_rebalance_delay_ms=300))
    await loaded(broker, image_with(*offsets_topic(1, 1, 1), *DATA))
    service = CoordinatorService(1, broker.coordinator)
    server = grpc.aio.server()
    add_coordinator_service(service, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    stub = coordinator_pb2_grpc.GroupCoordinatorStub(channel)  # type: ignore[no-untyped-call]
    try:
        yield service, broker, stub
    finally:
        await channel.close()
        await server.stop(grace=None)
        await broker.coordinator.stop()
        broker.close()


def join(member: str, client: str) -> pb.JoinGroupRequest:
    return pb.JoinGroupRequest(
        group_id=GROUP,
        member_id=member,
        protocol_type="consumer",
        protocols=[pb.JoinGroupProtocol(name="range", metadata=client.encode())],
        session_timeout_ms=10_000,
        rebalance_timeout_ms=10_000,
        client_id=client,
    )


@pytest.mark.asyncio
async def test_two_members_join_sync_commit_leave_and_delete_over_grpc(
    served: tuple[CoordinatorService, Broker, coordinator_pb2_grpc.GroupCoordinatorStub],
) -> None:
    _, _, stub = served
    ids = []
    for client in ("a", "b"):
        first = codec.join_group_response_from_proto(
            await stub.JoinGroup(join("", client), timeout=5)
        )
        assert isinstance(first.error, MemberIdRequiredError)
        ids.append(first.member_id)
    joined = [
        codec.join_group_response_from_proto(answer)
        for answer in await asyncio.gather(
            *(stub.JoinGroup(join(m, c), timeout=5) for m, c in zip(ids, "ab", strict=True))
        )
    ]
    assert [j.error for j in joined] == [None, None]
    leader = joined[0].leader
    generation = joined[0].generation_id
    (leading,) = [j for j in joined if j.member_id == leader]
    assert sorted(m.metadata for m in leading.members) == [b"a", b"b"]
    follower = next(m for m in ids if m != leader)
    synced = await asyncio.gather(
        stub.SyncGroup(
            pb.SyncGroupRequest(group_id=GROUP, member_id=follower, generation_id=generation),
            timeout=5,
        ),
        stub.SyncGroup(
            pb.SyncGroupRequest(
                group_id=GROUP,
                member_id=leader,
                generation_id=generation,
                assignments=[
                    pb.SyncGroupAssignment(member_id=m, assignment=m.encode()) for m in ids
                ],
            ),
            timeout=5,
        ),
    )
    assert [s.assignment for s in synced] == [follower.encode(), leader.encode()]
    beat = await stub.Heartbeat(
        pb.HeartbeatRequest(group_id=GROUP, member_id=follower, generation_id=generation)
    )
    assert error_from_proto(beat) is None

    (described,) = codec.describe_groups_response_from_proto(
        await stub.DescribeGroups(pb.DescribeGroupsRequest(group_ids=[GROUP]))
    )
    assert described.state == "Stable" and described.protocol_data == "range"
    assert {(m.client_id, m.client_host) for m in described.members} == {
        ("a", "127.0.0.1"),
        ("b", "127.0.0.1"),
    }
    error, listed = codec.list_groups_response_from_proto(
        await stub.ListGroups(pb.ListGroupsRequest(states=["stable"]))
    )
    assert error is None and [g.group_id for g in listed] == [GROUP]

    stale = await stub.OffsetCommit(
        pb.OffsetCommitRequest(
            group_id=GROUP,
            generation_id=generation + 1,
            member_id=leader,
            topics=[
                pb.OffsetCommitTopic(
                    name="orders",
                    partitions=[pb.OffsetCommitPartition(partition=0, committed_offset=3)],
                )
            ],
        )
    )
    (result,) = codec.offset_commit_response_from_proto(stale).partitions
    assert isinstance(result.error, IllegalGenerationError)

    left = codec.leave_group_response_from_proto(
        await stub.LeaveGroup(
            pb.LeaveGroupRequest(
                group_id=GROUP, members=[pb.LeaveGroupMember(member_id=m) for m in ids]
            )
        )
    )
    assert left.error is None and [m.error for m in left.members] == [None, None]
    deleted = codec.delete_groups_response_from_proto(
        await stub.DeleteGroups(pb.DeleteGroupsRequest(group_ids=[GROUP]))
    )
    assert deleted == [(GROUP, None)]


@pytest.mark.asyncio
async def test_without_a_coordinator_group_rpcs_are_coordinator_not_available(
    served: tuple[CoordinatorService, Broker, coordinator_pb2_grpc.GroupCoordinatorStub],
) -> None:
    service, _, stub = served
    service.attach(None)
    joined = codec.join_group_response_from_proto(await stub.JoinGroup(join("", "a"), timeout=5))
    assert isinstance(joined.error, CoordinatorNotAvailableError)
    (described,) = codec.describe_groups_response_from_proto(
        await stub.DescribeGroups(pb.DescribeGroupsRequest(group_ids=[GROUP]))
    )
    assert isinstance(described.error, CoordinatorNotAvailableError)
