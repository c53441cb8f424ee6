"""The group handlers behind a real Kafka listener on 127.0.0.1:0, driven through
`KafkaCoordinatorClient` as replog's consumer drives them.

In front of a real GroupCoordinator (a ReplicaManager and logs in tmp_path): two members join
(the first join answered MEMBER_ID_REQUIRED with the id), the leader's SyncGroup answers both,
heartbeats, DescribeGroups and ListGroups show the Stable group with the peer's host, a commit
is fenced by generation, LeaveGroup empties the group and DeleteGroups removes it; a KIP-848
member joins, heartbeats and leaves. In front of a fake coordinator: commits answer per
partition and raise request-level errors, fetches name partitions or all, and a broker without
a running coordinator answers COORDINATOR_NOT_AVAILABLE to every call.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from replog.common import OffsetAndMetadata, TopicPartition
from replog.coordinator import classic_group_messages as gm
from replog.coordinator import consumer_group_messages as cgm
from replog.coordinator import messages as cm
from replog.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    IllegalGenerationError,
    InvalidGroupIdError,
    MemberIdRequiredError,
    NotCoordinatorError,
    OffsetMetadataTooLargeError,
    UnknownMemberIdError,
)
from replog.quorum.metadata.image import MetadataImage
from replog.server.config.group_coordinator_config import GroupCoordinatorConfig
from replog.server.kafka.kafka_apis import KafkaApis
from replog.server.kafka.kafka_group_apis import KafkaGroupApis
from replog.server.kafka.kafka_listener import KafkaListener
from replog.wire.kafka_coordinator_client import KafkaCoordinatorClient
from tests.server.groups.test_group_coordinator import (
    DATA,
    DATA_TID,
    GROUP_IN,
    Broker,
    image_with,
    loaded,
    offsets_topic,
)

GROUP = GROUP_IN[0]
T = TopicPartition


@dataclass
class Current:
    """The coordinator the broker has now (None: not running, as before its data plane)."""

    coordinator: Any


class Clients:
    """One `KafkaCoordinatorClient` per client id (Kafka's client id is the connection's)."""

    def __init__(self, address: str) -> None:
        self.address = address
        self._by_id: dict[str, KafkaCoordinatorClient] = {}

    def __call__(self, client_id: str = "replog") -> KafkaCoordinatorClient:
        if client_id not in self._by_id:
            self._by_id[client_id] = KafkaCoordinatorClient(
                self.address, request_timeout_ms=5000, client_id=client_id
            )
        return self._by_id[client_id]

    async def close(self) -> None:
        for client in self._by_id.values():
            await client.close()


Served = tuple[Current, Clients]


@asynccontextmanager
async def listening(current: Current, image: MetadataImage) -> AsyncIterator[str]:
    """A Kafka listener of broker 1 serving the group APIs; yields its address."""
    apis = KafkaApis(
        1,
        cluster_id="c",
        image=lambda: image,
        extensions=[KafkaGroupApis(1, lambda: current.coordinator, lambda: image)],
    )
    listener = KafkaListener("PLAINTEXT", "127.0.0.1", 0)
    await listener.start(apis)
    try:
        yield f"127.0.0.1:{listener.port}"
    finally:
        await listener.stop()


@pytest_asyncio.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    # An initial rebalance delay: both first joins arrive before the first generation.
    broker = Broker(tmp_path / "b", GroupCoordinatorConfig(group_initial_rebalance_delay_ms=300))
    image = image_with(*offsets_topic(1, 1, 1), *DATA)
    await loaded(broker, image)
    current = Current(broker.coordinator)
    async with listening(current, image) as address:
        clients = Clients(address)
        try:
            yield current, clients
        finally:
            await clients.close()
            await broker.coordinator.stop()
            broker.close()


def join(member: str, client: str) -> gm.JoinGroupRequest:
    return gm.JoinGroupRequest(
        GROUP, member, "consumer", (("range", client.encode()),), 10_000, 10_000, client_id=client
    )


@pytest.mark.asyncio
async def test_two_members_join_sync_commit_leave_and_delete_over_a_kafka_listener(
    served: Served,
) -> None:
    _, clients = served
    client = clients()
    ids = []
    for name in ("a", "b"):
        first = await clients(name).join_group(join("", name))
        assert isinstance(first.error, MemberIdRequiredError)
        ids.append(first.member_id)
    joined = await asyncio.gather(
        *(clients(c).join_group(join(m, c)) for m, c in zip(ids, "ab", strict=True))
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
async def test_without_a_coordinator_group_calls_are_coordinator_not_available(
    served: Served,
) -> None:
    current, clients = served
    client = clients()
    current.coordinator = None
    joined = await client.join_group(join("", "a"))
    assert isinstance(joined.error, CoordinatorNotAvailableError)
    with pytest.raises(CoordinatorNotAvailableError):
        await client.describe_group(GROUP)


@pytest.mark.asyncio
async def test_a_consumer_protocol_member_joins_heartbeats_and_leaves_over_a_kafka_listener(
    served: Served,
) -> None:
    _, clients = served
    client = clients("c1")
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


@dataclass
class FakeCoordinator:
    find: cm.FindCoordinatorResponse = field(
        default_factory=lambda: cm.FindCoordinatorResponse(None, 2, "10.0.0.2", 9093)
    )
    commit_error: Any = None
    fetch_answer: cm.OffsetFetchResponse = field(default_factory=cm.OffsetFetchResponse)
    raise_error: Exception | None = None
    calls: list[Any] = field(default_factory=list)

    def find_coordinator(self, group_id: str) -> cm.FindCoordinatorResponse:
        self.calls.append(group_id)
        if self.raise_error is not None:
            raise self.raise_error
        return self.find

    async def offset_commit(
        self, request: cm.OffsetCommitRequest, *, timeout_ms: int | None = None
    ) -> cm.OffsetCommitResponse:
        self.calls.append((request, timeout_ms))
        if self.commit_error is not None:
            return cm.OffsetCommitResponse(self.commit_error)
        return cm.OffsetCommitResponse(
            None,
            tuple(
                cm.OffsetCommitPartitionResult(
                    e.topic,
                    e.partition,
                    OffsetMetadataTooLargeError(f"{e.topic}-{e.partition}: too long")
                    if len(e.metadata) > 3
                    else None,
                )
                for e in request.entries
            ),
        )

    def offset_fetch(self, request: cm.OffsetFetchRequest) -> cm.OffsetFetchResponse:
        self.calls.append(request)
        return self.fetch_answer


@dataclass
class Harness:
    current: Current
    coordinator: FakeCoordinator
    client: KafkaCoordinatorClient


@pytest_asyncio.fixture
async def harness() -> AsyncIterator[Harness]:
    coordinator = FakeCoordinator()
    current = Current(coordinator)
    async with listening(current, image_with()) as address:
        client = KafkaCoordinatorClient(address, request_timeout_ms=5000, client_id="app")
        try:
            yield Harness(current, coordinator, client)
        finally:
            await client.close()


@pytest.mark.asyncio
async def test_commit_returns_per_partition_errors_and_raises_request_level_ones(
    harness: Harness,
) -> None:
    offsets = {
        T("orders", 0): OffsetAndMetadata(10, "ok", 4),
        T("orders", 1): OffsetAndMetadata(11, "too long"),
        T("users", 0): OffsetAndMetadata(12),
    }
    results, shared = await harness.client.offset_commit(
        "g", offsets, committer=cm.Committer("app", "i-1"), timeout_ms=3000
    )
    assert shared == ()
    assert results[T("orders", 0)] is None and results[T("users", 0)] is None
    error = results[T("orders", 1)]
    assert isinstance(error, OffsetMetadataTooLargeError) and "orders-1" in str(error)
    (request, timeout_ms) = harness.coordinator.calls[0]
    assert replace(request, api_version=None) == cm.OffsetCommitRequest(
        "g",
        (
            cm.CommitEntry("orders", 0, 10, 4, "ok"),
            cm.CommitEntry("orders", 1, 11, -1, "too long"),
            cm.CommitEntry("users", 0, 12, -1, ""),
        ),
        -1,
        "",
        cm.Committer("app", "i-1", "127.0.0.1"),  # the host as the listener saw the peer
    )
    assert timeout_ms is None  # Kafka's OffsetCommit has none: offsets.commit.timeout.ms
    for error_class in (
        NotCoordinatorError,
        CoordinatorLoadInProgressError,
        CoordinatorNotAvailableError,
        InvalidGroupIdError,
    ):
        harness.coordinator.commit_error = error_class("group 'g': why")
        # Kafka's answer puts the code on every partition, without a message.
        with pytest.raises(error_class, match="for group 'g'"):
            await harness.client.offset_commit("g", offsets)


@pytest.mark.asyncio
async def test_fetch_named_and_all_partitions(harness: Harness) -> None:
    harness.coordinator.fetch_answer = cm.OffsetFetchResponse(
        None,
        (
            cm.FetchedOffset("orders", 0, 10, 4, "m"),
            cm.FetchedOffset("orders", 1),
        ),
    )
    answer = await harness.client.offset_fetch("g", [T("orders", 1), T("orders", 0)])
    assert list(answer.items()) == [
        (T("orders", 1), None),
        (T("orders", 0), OffsetAndMetadata(10, "m", 4)),
    ]
    assert harness.coordinator.calls[-1] == cm.OffsetFetchRequest(
        "g", (("orders", 1), ("orders", 0))
    )
    await harness.client.offset_fetch("g", None)
    assert harness.coordinator.calls[-1] == cm.OffsetFetchRequest("g", None)
    harness.coordinator.fetch_answer = cm.OffsetFetchResponse(
        CoordinatorLoadInProgressError("still loading")
    )
    # OffsetFetch carries a code and no message: the client names the code and the group.
    with pytest.raises(CoordinatorLoadInProgressError, match="for group 'g'"):
        await harness.client.offset_fetch("g", None)


@pytest.mark.asyncio
async def test_without_a_coordinator_every_call_is_coordinator_not_available(
    harness: Harness,
) -> None:
    harness.current.coordinator = None
    with pytest.raises(CoordinatorNotAvailableError, match="broker 1 does not coordinate"):
        await harness.client.find_coordinator("g")
    with pytest.raises(CoordinatorNotAvailableError):
        await harness.client.offset_commit("g", {T("t", 0): OffsetAndMetadata(1)})
    with pytest.raises(CoordinatorNotAvailableError):
        await harness.client.offset_fetch("g", None)
    assert harness.coordinator.calls == []
