"""`KafkaCoordinatorClient` against the Kafka listener of a real node (`replog node`):

- FindCoordinator names the node by its Kafka listener;
- commits and fetches round-trip offsets, metadata and leader epochs (a partition never
  committed is None, `partitions=None` fetches everything committed); a commit to a topic that
  does not exist answers that partition's error, a commit with a stale generation is fenced;
- the classic protocol: a first join is asked for a member id (MEMBER_ID_REQUIRED), the leader
  syncs an assignment, heartbeats, and the group is listed, described (client host without
  Kafka's "/") and left; a group that does not exist is described as Dead; deleting a group
  with members is refused, without members it is deleted;
- the consumer protocol (KIP-848): a member joins with its own id and gets the topic's
  partitions by topic id, is described with its assignment, commits with its member epoch
  (a wrong epoch is STALE_MEMBER_EPOCH), and leaves;
- two consumers committing the same partitions of a group from outside its membership: the
  second commit's answer names the first committer (replog's OffsetCommit tags);
- pointed at the node's gRPC listener it fails at once naming it; at a closed port with a
  NetworkError naming the address.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio

from replog.admin.controller_client import ControllerClient
from replog.admin.controller_results import NewTopic
from replog.common import OffsetAndMetadata, TopicPartition
from replog.coordinator import classic_group_messages as gm
from replog.coordinator import consumer_group_messages as cgm
from replog.coordinator import messages as cm
from replog.errors import (
    IllegalGenerationError,
    MemberIdRequiredError,
    NetworkError,
    NonEmptyGroupError,
    NotAKafkaListenerError,
    StaleMemberEpochError,
    UnknownTopicOrPartitionError,
)
from replog.wire.kafka_coordinator_client import KafkaCoordinatorClient
from tests.kafka.kafka_node import RunningNode, running_node
from tests.local_ports import free_port

TOPIC = "orders"
PARTITIONS = 3


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningNode]:
    properties = [
        "offsets.topic.num.partitions=3",
        "offsets.topic.replication.factor=1",
        "group.initial.rebalance.delay.ms=0",
        "group.consumer.heartbeat.interval.ms=500",
        "group.consumer.min.heartbeat.interval.ms=1",
    ]
    root = tmp_path_factory.mktemp("coordinator-client-node")
    with running_node(root, "coordinator-client-test", properties) as running:
        with ControllerClient(f"127.0.0.1:{running.grpc_port}", default_timeout_s=60) as admin:
            for created in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)]):
                assert created.error is None, created
        yield running


@pytest_asyncio.fixture
async def client(node: RunningNode) -> AsyncIterator[KafkaCoordinatorClient]:
    async with KafkaCoordinatorClient(
        node.kafka_address, request_timeout_ms=20_000, client_id="coordinator-test"
    ) as one:
        yield one


async def coordinator_of(
    node: RunningNode, group: str, client_id: str = "coordinator-test"
) -> KafkaCoordinatorClient:
    """A client of `group`'s coordinator, found through the node's listener (the coordinator
    may still be loading its partition of __consumer_offsets: retried)."""
    async with KafkaCoordinatorClient(node.kafka_address) as finder:
        for _ in range(100):
            try:
                _, address = await finder.find_coordinator(group)
                break
            except Exception as exc:  # COORDINATOR_NOT_AVAILABLE while the topic is created
                if not getattr(exc, "retriable", False):
                    raise
                await asyncio.sleep(0.2)
    return KafkaCoordinatorClient(address, request_timeout_ms=20_000, client_id=client_id)


def tp(partition: int) -> TopicPartition:
    return TopicPartition(TOPIC, partition)


@pytest.mark.asyncio
async def test_find_coordinator_names_the_node_by_its_kafka_listener(node: RunningNode) -> None:
    coordinator = await coordinator_of(node, "finders")
    async with coordinator:
        assert coordinator.address == node.kafka_address


@pytest.mark.asyncio
async def test_commit_and_fetch_round_trip(node: RunningNode) -> None:
    async with await coordinator_of(node, "committers") as client:
        errors, shared = await client.offset_commit(
            "committers",
            {tp(0): OffsetAndMetadata(7, "seven", 0), tp(2): OffsetAndMetadata(3)},
        )
        assert errors == {tp(0): None, tp(2): None}
        assert shared == ()
        assert await client.offset_fetch("committers", [tp(0), tp(1), tp(2)]) == {
            tp(0): OffsetAndMetadata(7, "seven", 0),
            tp(1): None,
            tp(2): OffsetAndMetadata(3, "", -1),
        }
        assert await client.offset_fetch("committers", None) == {
            tp(0): OffsetAndMetadata(7, "seven", 0),
            tp(2): OffsetAndMetadata(3, "", -1),
        }
        errors, _ = await client.offset_commit(
            "committers",
            {TopicPartition("missing", 0): OffsetAndMetadata(1), tp(1): OffsetAndMetadata(4)},
        )
        assert isinstance(errors[TopicPartition("missing", 0)], UnknownTopicOrPartitionError)
        assert "coordinator at" in str(errors[TopicPartition("missing", 0)])
        assert errors[tp(1)] is None


@pytest.mark.asyncio
async def test_the_classic_protocol_join_sync_heartbeat_describe_leave(node: RunningNode) -> None:
    group = "classic-readers"
    async with await coordinator_of(node, group, client_id="classic-member") as client:

        def join(member_id: str) -> gm.JoinGroupRequest:
            return gm.JoinGroupRequest(
                group_id=group,
                member_id=member_id,
                protocol_type="consumer",
                protocols=(("range", b"subscription"),),
                session_timeout_ms=10_000,
                rebalance_timeout_ms=10_000,
            )

        first = await client.join_group(join(""), timeout_ms=30_000)
        assert isinstance(first.error, MemberIdRequiredError)
        assert first.member_id
        joined = await client.join_group(join(first.member_id), timeout_ms=30_000)
        assert joined.error is None
        assert joined.leader == first.member_id == joined.member_id
        assert joined.protocol_name == "range"
        assert [m.member_id for m in joined.members] == [first.member_id]
        assert joined.members[0].metadata == b"subscription"

        synced = await client.sync_group(
            gm.SyncGroupRequest(
                group,
                first.member_id,
                joined.generation_id,
                protocol_type="consumer",
                protocol_name="range",
                assignments=((first.member_id, b"all of it"),),
            ),
            timeout_ms=30_000,
        )
        assert synced.error is None
        assert synced.assignment == b"all of it"
        assert (
            await client.heartbeat(
                gm.HeartbeatRequest(group, first.member_id, joined.generation_id)
            )
            is None
        )
        stale = await client.heartbeat(
            gm.HeartbeatRequest(group, first.member_id, joined.generation_id + 5)
        )
        assert isinstance(stale, IllegalGenerationError)

        # A commit of the member's generation is accepted, one of another is fenced.
        errors, _ = await client.offset_commit(
            group,
            {tp(0): OffsetAndMetadata(1)},
            generation_id=joined.generation_id,
            member_id=first.member_id,
        )
        assert errors == {tp(0): None}
        errors, _ = await client.offset_commit(
            group,
            {tp(0): OffsetAndMetadata(2)},
            generation_id=joined.generation_id + 1,
            member_id=first.member_id,
        )
        assert isinstance(errors[tp(0)], IllegalGenerationError)

        listed = {g.group_id: g for g in await client.list_groups()}
        assert listed[group].state == "Stable"
        assert listed[group].protocol_type == "consumer"
        described = await client.describe_group(group)
        assert described.state == "Stable"
        assert described.protocol_data == "range"
        (member,) = described.members
        assert member.member_id == first.member_id
        assert member.client_id == "classic-member"
        assert member.client_host == "127.0.0.1"
        assert member.assignment == b"all of it"

        (refused,) = await client.delete_groups([group])
        assert isinstance(refused[1], NonEmptyGroupError)
        left = await client.leave_group(
            gm.LeaveGroupRequest(group, (gm.LeaveMember(first.member_id),))
        )
        assert left.error is None
        assert [(m.member_id, m.error) for m in left.members] == [(first.member_id, None)]
        assert (await client.describe_group(group)).state == "Empty"
        assert await client.delete_groups([group]) == [(group, None)]
        assert (await client.describe_group(group)).state == "Dead"


@pytest.mark.asyncio
async def test_the_consumer_protocol_heartbeat_assigns_by_topic_id(node: RunningNode) -> None:
    group = "consumer-readers"
    member_id = str(uuid.uuid4())
    async with await coordinator_of(node, group, client_id="new-member") as client:
        answer = await client.consumer_group_heartbeat(
            cgm.ConsumerGroupHeartbeatRequest(
                group_id=group,
                member_id=member_id,
                member_epoch=0,
                rebalance_timeout_ms=10_000,
                subscribed_topic_names=(TOPIC,),
                owned=(),
            )
        )
        assert answer.error is None
        assert answer.member_id == member_id
        assert answer.member_epoch >= 1
        assert answer.heartbeat_interval_ms == 500
        assert answer.assignment is not None
        ((topic_id, partitions),) = answer.assignment
        assert partitions == tuple(range(PARTITIONS))

        described = await client.describe_consumer_group(group)
        assert described.state in ("Stable", "Reconciling", "Assigning")
        (member,) = described.members
        assert member.member_id == member_id
        assert member.client_id == "new-member"
        assert member.subscribed_topic_names == (TOPIC,)
        assert member.target_assignment == ((topic_id, TOPIC, tuple(range(PARTITIONS))),)
        assert member.member_type == cgm.CONSUMER_MEMBER
        listed = {g.group_id: g for g in await client.list_groups()}
        assert listed[group].group_type == "consumer"
        # A member commits with its epoch (OffsetCommit v9+ carries it); another is fenced.
        errors, _ = await client.offset_commit(
            group,
            {tp(0): OffsetAndMetadata(4)},
            generation_id=answer.member_epoch,
            member_id=member_id,
        )
        assert errors == {tp(0): None}
        errors, _ = await client.offset_commit(
            group,
            {tp(0): OffsetAndMetadata(5)},
            generation_id=answer.member_epoch + 1,
            member_id=member_id,
        )
        assert isinstance(errors[tp(0)], StaleMemberEpochError)
        assert await client.offset_fetch(group, [tp(0)]) == {tp(0): OffsetAndMetadata(4)}

        left = await client.consumer_group_heartbeat(
            cgm.ConsumerGroupHeartbeatRequest(group, member_id, -1)
        )
        assert left.error is None
        assert left.member_epoch == -1


@pytest.mark.asyncio
async def test_a_commit_names_the_other_consumer_committing_the_same_partitions(
    node: RunningNode,
) -> None:
    group = "two-assigners"
    first = cm.Committer("first-app", "instance-1")
    second = cm.Committer("second-app", "instance-2")
    one = await coordinator_of(node, group, client_id="first-app")
    other = KafkaCoordinatorClient(one.address, client_id="second-app")
    async with one, other:
        _, shared = await one.offset_commit(
            group, {tp(0): OffsetAndMetadata(1), tp(1): OffsetAndMetadata(1)}, committer=first
        )
        assert shared == ()
        _, shared = await other.offset_commit(
            group, {tp(1): OffsetAndMetadata(2)}, committer=second
        )
    (found,) = shared
    assert found.other.client_id == "first-app"
    assert found.other.instance_id == "instance-1"
    assert found.other.host == "127.0.0.1"
    assert found.partitions == ((TOPIC, 1),)
    assert found.last_commit_age_ms >= 0


@pytest.mark.asyncio
async def test_the_grpc_listener_and_a_closed_port_are_named(node: RunningNode) -> None:
    grpc_address = f"127.0.0.1:{node.grpc_port}"
    async with KafkaCoordinatorClient(grpc_address, request_timeout_ms=5_000) as client:
        with pytest.raises(NotAKafkaListenerError, match=rf"{grpc_address} answered HTTP/2"):
            await asyncio.wait_for(client.find_coordinator("g"), 2)
    closed = f"127.0.0.1:{free_port()}"
    async with KafkaCoordinatorClient(closed, request_timeout_ms=5_000) as client:
        with pytest.raises(NetworkError, match=rf"cannot connect to {closed}"):
            await client.offset_fetch("g", [tp(0)])
