"""The Kafka listener's group handlers translate, version by version, between Kafka's messages
and the coordinator's: FindCoordinator one key (v0-3) or a batch (v4+) for the client's
listener, LeaveGroup one member (v0-2) or a batch (v3+), DescribeGroups' missing group (Dead
before v6, GROUP_ID_NOT_FOUND from v6), ListGroups' type filter, OffsetCommit v10's topic ids,
ConsumerGroupHeartbeat and ConsumerGroupDescribe field for field (topic names from the image),
OffsetCommit's committer (header client id, peer host, replog's instance tag) and the other
committers answered in replog's tag, and COORDINATOR_NOT_AVAILABLE before the broker has a
coordinator."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

import pytest

from replog.coordinator import classic_group_messages as gm
from replog.coordinator import consumer_group_messages as cgm
from replog.coordinator import messages as cm
from replog.errors import (
    CoordinatorNotAvailableError,
    GroupIdNotFoundError,
    GroupSubscribedToTopicError,
    KafkaError,
    UnknownMemberIdError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)
from replog.kafka.connection import KafkaRequest
from replog.kafka.messages.consumer_group_describe_request import ConsumerGroupDescribeRequest
from replog.kafka.messages.consumer_group_heartbeat_request import ConsumerGroupHeartbeatRequest
from replog.kafka.messages.describe_groups_request import DescribeGroupsRequest
from replog.kafka.messages.find_coordinator_request import FindCoordinatorRequest
from replog.kafka.messages.join_group_request import JoinGroupRequest, JoinGroupRequestProtocol
from replog.kafka.messages.leave_group_request import LeaveGroupRequest, MemberIdentity
from replog.kafka.messages.list_groups_request import ListGroupsRequest
from replog.kafka.messages.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from replog.kafka.messages.offset_delete_request import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from replog.kafka.messages.request_header import RequestHeader
from replog.kafka.protocol.codec import Message
from replog.kafka.protocol.framing import encode_response
from replog.server.kafka.kafka_group_apis import KafkaGroupApis
from replog.wire import shared_commit_tags
from tests.metadata.metadata_helpers import bootstrapped, create_topic, replayed, topic_id

ORDERS_ID = topic_id(7)
UNKNOWN = UnknownTopicOrPartitionError.code


class FakeCoordinator:
    def __init__(self) -> None:
        self.left: list[gm.LeaveGroupRequest] = []
        self.committed: list[cm.OffsetCommitRequest] = []
        self.listeners: list[str | None] = []
        self.joined: list[gm.JoinGroupRequest] = []
        self.heartbeats: list[cgm.ConsumerGroupHeartbeatRequest] = []
        self.deleted: list[cm.OffsetDeleteRequest] = []

    def find_coordinator(
        self, group_id: str, listener_name: str | None = None
    ) -> cm.FindCoordinatorResponse:
        self.listeners.append(listener_name)
        return cm.FindCoordinatorResponse(None, 3, f"host-of-{group_id}", 9093)

    async def leave_group(self, request: gm.LeaveGroupRequest) -> gm.LeaveGroupResponse:
        self.left.append(request)
        return gm.LeaveGroupResponse(
            None,
            tuple(
                gm.LeaveMemberResponse(m.member_id, m.group_instance_id, UnknownMemberIdError("x"))
                for m in request.members
            ),
        )

    def describe_groups(self, group_ids: Iterable[str]) -> list[gm.DescribedGroup]:
        return [
            gm.DescribedGroup(g, None, "Dead")
            if g == "gone"
            else gm.DescribedGroup(
                g,
                None,
                "Stable",
                "consumer",
                "range",
                (gm.DescribedMember("m1", None, "c1", "10.0.0.7", b"s", b"a"),),
            )
            for g in group_ids
        ]

    async def join_group(self, request: gm.JoinGroupRequest) -> gm.JoinGroupResponse:
        self.joined.append(request)
        return gm.JoinGroupResponse(0, None, "m1", 1, "consumer", "range", "m1")

    def list_groups(
        self, states: Iterable[str] = ()
    ) -> tuple[KafkaError | None, list[gm.ListedGroup]]:
        return None, [
            gm.ListedGroup("g", "consumer", "Stable"),
            gm.ListedGroup("k", "consumer", "Reconciling", "consumer"),
        ]

    async def consumer_group_heartbeat(
        self, request: cgm.ConsumerGroupHeartbeatRequest
    ) -> cgm.ConsumerGroupHeartbeatResponse:
        self.heartbeats.append(request)
        return cgm.ConsumerGroupHeartbeatResponse(
            None, request.member_id, 3, 5000, ((ORDERS_ID, (0, 2)),)
        )

    def consumer_group_describe(self, group_ids: Iterable[str]) -> list[cgm.DescribedConsumerGroup]:
        member = cgm.DescribedConsumerMember(
            "m",
            None,
            None,
            3,
            "cl",
            "/10.0.0.9",
            ("orders",),
            None,
            ((ORDERS_ID, "orders", (0,)),),
            (),
        )
        return [
            cgm.DescribedConsumerGroup(g, None, "Stable", 3, 3, "uniform", (member,))
            for g in group_ids
        ]

    async def offset_delete(self, request: cm.OffsetDeleteRequest) -> cm.OffsetDeleteResponse:
        self.deleted.append(request)
        if request.group_id == "missing":
            return cm.OffsetDeleteResponse(GroupIdNotFoundError("group 'missing' does not exist"))
        return cm.OffsetDeleteResponse(
            None,
            tuple(
                cm.OffsetCommitPartitionResult(
                    t, p, GroupSubscribedToTopicError("read") if request.group_id == "sub" else None
                )
                for t, p in request.partitions
            ),
        )

    async def offset_commit(
        self, request: cm.OffsetCommitRequest, *, timeout_ms: int | None = None
    ) -> cm.OffsetCommitResponse:
        self.committed.append(request)
        return cm.OffsetCommitResponse(
            None,
            tuple(cm.OffsetCommitPartitionResult(e.topic, e.partition) for e in request.entries),
            self.shared,
        )

    shared: tuple[cm.SharedCommit, ...] = ()


def handled(
    coordinator: Any, api_key: int, version: int, body: Message, peer: str = "10.0.0.9:5000"
) -> Any:
    image = replayed(bootstrapped(), *create_topic("orders", ORDERS_ID, (1,)))
    apis = KafkaGroupApis(1, lambda: coordinator, lambda: image)
    header = RequestHeader(request_api_key=api_key, request_api_version=version, client_id="cl")
    return asyncio.run(apis.handle(KafkaRequest(0, header, body, 0, peer), "CLIENTS"))


@pytest.mark.parametrize(("peer", "host"), [("10.0.0.9:5000", "10.0.0.9"), ("[::1]:5000", "::1")])
def test_join_group_takes_the_client_id_and_host_and_describe_writes_kafkas_host(
    peer: str, host: str
) -> None:
    fake = FakeCoordinator()
    protocols = [JoinGroupRequestProtocol(name="range", metadata=b"s")]
    request = JoinGroupRequest(
        group_id="g", session_timeout_ms=10_000, protocol_type="consumer", protocols=protocols
    )
    answer = handled(fake, 11, 5, request, peer)
    assert (answer.error_code, answer.member_id, answer.protocol_name) == (0, "m1", "range")
    ((joined),) = fake.joined
    assert (joined.client_id, joined.client_host, joined.api_version) == ("cl", host, 5)
    assert joined.protocols == (("range", b"s"),)
    (group,) = handled(fake, 15, 5, DescribeGroupsRequest(groups=["g"])).groups
    assert [(m.client_id, m.client_host) for m in group.members] == [("c1", "/10.0.0.7")]


@pytest.mark.parametrize(("version", "reason"), [(7, None), (8, "group is already rebalancing")])
def test_join_group_hands_the_members_reason_on_from_v8(version: int, reason: str | None) -> None:
    fake = FakeCoordinator()
    request = JoinGroupRequest(
        group_id="g",
        session_timeout_ms=10_000,
        member_id="m1",
        protocol_type="consumer",
        protocols=[JoinGroupRequestProtocol(name="range", metadata=b"s")],
        reason="group is already rebalancing",
    )
    wire = JoinGroupRequest.decode(request.encode(version), version)  # v7 has no reason field
    handled(fake, 11, version, wire)
    assert [j.reason for j in fake.joined] == [reason]


def test_leave_group_hands_each_members_reason_on_from_v5() -> None:
    fake = FakeCoordinator()
    request = LeaveGroupRequest(
        group_id="g",
        members=[
            MemberIdentity(member_id="m1", reason="the consumer is being closed"),
            MemberIdentity(member_id="m2"),
        ],
    )
    for version in (4, 5):
        handled(fake, 13, version, LeaveGroupRequest.decode(request.encode(version), version))
    assert [[m.reason for m in r.members] for r in fake.left] == [
        [None, None],
        ["the consumer is being closed", None],
    ]


def test_find_coordinator_one_key_or_a_batch_for_the_clients_listener() -> None:
    fake = FakeCoordinator()
    one = handled(fake, 10, 2, FindCoordinatorRequest(key="g1", key_type=0))
    assert (one.error_code, one.node_id, one.host, one.port) == (0, 3, "host-of-g1", 9093)
    batch = handled(fake, 10, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=["a", "b"]))
    assert [(c.key, c.host, c.error_code) for c in batch.coordinators] == [
        ("a", "host-of-a", 0),
        ("b", "host-of-b", 0),
    ]
    assert fake.listeners == ["CLIENTS"] * 3
    # No transaction coordinator running (its own tests: test_transaction_coordinator.py).
    txn = handled(fake, 10, 2, FindCoordinatorRequest(key="t", key_type=1))
    assert txn.error_code == CoordinatorNotAvailableError.code


def test_leave_group_one_member_before_v3_a_batch_after() -> None:
    fake = FakeCoordinator()
    old = handled(fake, 13, 1, LeaveGroupRequest(group_id="g", member_id="m1"))
    assert old.error_code == UnknownMemberIdError.code
    new = handled(
        fake,
        13,
        4,
        LeaveGroupRequest(
            group_id="g",
            members=[
                MemberIdentity(member_id="m2"),
                MemberIdentity(member_id="", group_instance_id="i"),
            ],
        ),
    )
    assert new.error_code == 0
    assert [(m.member_id, m.group_instance_id) for m in new.members] == [("m2", None), ("", "i")]
    assert [r.members for r in fake.left] == [
        (gm.LeaveMember("m1"),),
        (gm.LeaveMember("m2"), gm.LeaveMember("", "i")),
    ]


@pytest.mark.parametrize(("version", "code"), [(5, 0), (6, GroupIdNotFoundError.code)])
def test_describe_groups_names_a_missing_group_by_version(version: int, code: int) -> None:
    answer = handled(FakeCoordinator(), 15, version, DescribeGroupsRequest(groups=["gone"]))
    (group,) = answer.groups
    assert (group.group_id, group.group_state, group.error_code) == ("gone", "Dead", code)


def test_list_groups_names_and_filters_the_group_type() -> None:
    fake = FakeCoordinator()
    every = handled(fake, 16, 5, ListGroupsRequest())
    assert [(g.group_id, g.group_type) for g in every.groups] == [
        ("g", "classic"),
        ("k", "consumer"),
    ]
    consumer = handled(fake, 16, 5, ListGroupsRequest(types_filter=["consumer"])).groups
    assert [g.group_id for g in consumer] == ["k"]
    classic = handled(fake, 16, 5, ListGroupsRequest(types_filter=["Classic"])).groups
    assert [g.group_id for g in classic] == ["g"]


def test_consumer_group_heartbeat_and_describe_field_for_field() -> None:
    fake = FakeCoordinator()
    request = ConsumerGroupHeartbeatRequest(
        group_id="k",
        member_id="m",
        member_epoch=0,
        rebalance_timeout_ms=300_000,
        subscribed_topic_names=["orders"],
        server_assignor="range",
        topic_partitions=[],
    )
    answer = handled(fake, 68, 1, request)
    (seen,) = fake.heartbeats
    assert (seen.member_id, seen.member_epoch, seen.rebalance_timeout_ms) == ("m", 0, 300_000)
    assert (seen.subscribed_topic_names, seen.server_assignor, seen.owned) == (
        ("orders",),
        "range",
        (),
    )
    assert (seen.client_id, seen.client_host, seen.api_version) == ("cl", "/10.0.0.9", 1)
    assert (answer.error_code, answer.member_id, answer.member_epoch) == (0, "m", 3)
    assert answer.heartbeat_interval_ms == 5000
    assert [(t.topic_id, t.partitions) for t in answer.assignment.topic_partitions] == [
        (ORDERS_ID, [0, 2])
    ]
    (group,) = handled(fake, 69, 0, ConsumerGroupDescribeRequest(group_ids=["k"])).groups
    assert (group.group_state, group.group_epoch, group.assignor_name) == ("Stable", 3, "uniform")
    (member,) = group.members
    assert [(t.topic_name, t.partitions) for t in member.assignment.topic_partitions] == [
        ("orders", [0])
    ]


@pytest.mark.parametrize(("version", "member_type"), [(0, -1), (1, 1)])
def test_consumer_group_describe_v1_names_the_member_type(version: int, member_type: int) -> None:
    fake = FakeCoordinator()
    answer = handled(fake, 69, version, ConsumerGroupDescribeRequest(group_ids=["k"]))
    wire = answer.encode(version)  # v0 has no member type: it decodes as Kafka's default, -1
    decoded = type(answer).decode(memoryview(wire), version)
    ((member,),) = [g.members for g in decoded.groups]
    assert member.member_type == member_type


def test_offset_commit_v10_names_topics_by_id() -> None:
    fake = FakeCoordinator()
    unknown = topic_id(99)
    answer = handled(
        fake,
        8,
        10,
        OffsetCommitRequest(
            group_id="g",
            generation_id_or_member_epoch=4,
            member_id="m",
            topics=[
                OffsetCommitRequestTopic(
                    topic_id=ORDERS_ID,
                    partitions=[
                        OffsetCommitRequestPartition(partition_index=0, committed_offset=5)
                    ],
                ),
                OffsetCommitRequestTopic(
                    topic_id=unknown,
                    partitions=[
                        OffsetCommitRequestPartition(partition_index=1, committed_offset=6)
                    ],
                ),
            ],
        ),
    )
    (request,) = fake.committed
    assert [(e.topic, e.partition, e.offset) for e in request.entries] == [("orders", 0, 5)]
    assert (request.generation_id, request.member_id) == (4, "m")
    assert [(t.topic_id, [p.error_code for p in t.partitions]) for t in answer.topics] == [
        (ORDERS_ID, [0]),
        (unknown, [UnknownTopicIdError.code]),
    ]


def test_offset_commit_names_the_committer_and_answers_other_committers_in_replogs_tags() -> None:
    fake = FakeCoordinator()
    fake.shared = (cm.SharedCommit(cm.Committer("other", "i-2", "10.0.0.3"), (("orders", 0),), 9),)
    request = OffsetCommitRequest(
        group_id="g",
        topics=[
            OffsetCommitRequestTopic(
                name="orders",
                partitions=[OffsetCommitRequestPartition(partition_index=0, committed_offset=5)],
            )
        ],
    )
    request.unknown_tagged_fields = shared_commit_tags.committer_tags(cm.Committer("", "i-1"))
    answer = handled(fake, 8, 9, request, peer="10.0.0.9:5000")
    (committed,) = fake.committed
    assert committed.committer == cm.Committer("cl", "i-1", "10.0.0.9")
    assert shared_commit_tags.shared_from_tags(answer.unknown_tagged_fields, "b") == fake.shared


def test_every_group_api_is_coordinator_not_available_without_a_coordinator() -> None:
    found = handled(None, 10, 3, FindCoordinatorRequest(key="g", key_type=0))
    assert found.error_code == CoordinatorNotAvailableError.code
    left = handled(None, 13, 0, LeaveGroupRequest(group_id="g", member_id="m"))
    assert left.error_code == CoordinatorNotAvailableError.code
    beat = handled(None, 68, 1, ConsumerGroupHeartbeatRequest(group_id="g", member_id="m"))
    assert beat.error_code == CoordinatorNotAvailableError.code
    (described,) = handled(None, 69, 0, ConsumerGroupDescribeRequest(group_ids=["g"])).groups
    assert described.error_code == CoordinatorNotAvailableError.code
    # DescribeGroups carries a message from v6 on; before, the code alone (else unwritable).
    for version, message in ((5, False), (6, True)):
        answer = handled(None, 15, version, DescribeGroupsRequest(groups=["g"]))
        (group,) = answer.groups
        assert group.error_code == CoordinatorNotAvailableError.code
        assert (group.error_message is not None) is message
        assert encode_response(15, version, 1, answer)


def test_offset_delete_answers_unknown_partitions_itself_and_the_rest_by_the_coordinator() -> None:
    fake = FakeCoordinator()
    asked = [
        OffsetDeleteRequestTopic(
            name="orders",
            partitions=[OffsetDeleteRequestPartition(partition_index=i) for i in (0, 9)],
        ),
        OffsetDeleteRequestTopic(
            name="nope", partitions=[OffsetDeleteRequestPartition(partition_index=0)]
        ),
    ]
    answer = handled(fake, 47, 0, OffsetDeleteRequest(group_id="g", topics=asked))
    assert answer.error_code == 0
    assert shown(answer) == [("orders", [(0, 0), (9, UNKNOWN)]), ("nope", [(0, UNKNOWN)])]
    assert fake.deleted == [cm.OffsetDeleteRequest("g", (("orders", 0),))]
    kept = handled(fake, 47, 0, OffsetDeleteRequest(group_id="sub", topics=asked))
    assert shown(kept)[0] == ("orders", [(0, GroupSubscribedToTopicError.code), (9, UNKNOWN)])
    refused = handled(fake, 47, 0, OffsetDeleteRequest(group_id="missing", topics=asked))
    assert (refused.error_code, refused.topics) == (GroupIdNotFoundError.code, [])


def shown(answer: Any) -> list[tuple[str, list[tuple[int, int]]]]:
    return [
        (t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in answer.topics
    ]
