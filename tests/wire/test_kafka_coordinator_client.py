"""`KafkaCoordinatorClient` and the consumer's `GroupOffsets` against scripted Kafka listeners
(`kafka_group_fake`): the request each version carries and how answers are read.

- FindCoordinator v0-3 asks by `key` and reads the top-level answer, v4+ asks a batch of one
  and reads its entry; an error is raised naming the broker, the group and the broker's
  message;
- OffsetFetch v1-7 asks by `group_id` (request-level error in `error_code`), v8+ a group in
  `groups`; a partition's error is raised, -1 is "nothing committed";
- a commit whose every partition carries the same coordinator error raises it (OffsetCommit
  v2-7 have no request-level error), other per-partition errors are returned;
- LeaveGroup v0-2 names its one member in `member_id`;
- a connection the broker drops is a NetworkError, an unanswered request a
  RequestTimedOutError; the next call dials again;
- a commit is answered while a JoinGroup waits for the rebalance (membership calls go on a
  connection of their own);
- `GroupOffsets` forgets a coordinator whose connection drops and finds the group's new one
  through the bootstrap broker.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kafka_group_fake import Drop, ScriptedKafka

from replog.client.connections import Connections
from replog.client.group_offsets import GroupOffsets
from replog.clock import monotonic_ms
from replog.common import OffsetAndMetadata, TopicPartition
from replog.coordinator import classic_group_messages as gm
from replog.errors import (
    CoordinatorNotAvailableError,
    NetworkError,
    NotCoordinatorError,
    OffsetMetadataTooLargeError,
    RequestTimedOutError,
    UnknownMemberIdError,
    UnknownTopicOrPartitionError,
)
from replog.kafka.messages.find_coordinator_response import Coordinator, FindCoordinatorResponse
from replog.kafka.messages.join_group_response import JoinGroupResponse
from replog.kafka.messages.leave_group_response import LeaveGroupResponse
from replog.kafka.messages.offset_commit_response import (
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from replog.kafka.messages.offset_fetch_response import (
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
)
from replog.wire.kafka_coordinator_client import KafkaCoordinatorClient

FIND_COORDINATOR, OFFSET_COMMIT, OFFSET_FETCH, JOIN_GROUP, LEAVE_GROUP = 10, 8, 9, 11, 13
A0, A1 = TopicPartition("a", 0), TopicPartition("a", 1)


def found_at(address: str) -> Any:
    host, port = address.rsplit(":", 1)

    def answer(request: Any, version: int) -> FindCoordinatorResponse:
        return FindCoordinatorResponse(
            coordinators=[Coordinator(key=request.coordinator_keys[0], host=host, port=int(port))]
        )

    return answer


@pytest.mark.asyncio
async def test_find_coordinator_by_key_before_v4_and_by_batch_from_v4() -> None:
    def old(request: Any, version: int) -> FindCoordinatorResponse:
        assert (request.key, request.coordinator_keys) == ("g", [])
        return FindCoordinatorResponse(node_id=2, host="b2.example", port=9093)

    async with (
        ScriptedKafka({FIND_COORDINATOR: old}, {FIND_COORDINATOR: (0, 3)}) as broker,
        KafkaCoordinatorClient(broker.address) as client,
    ):
        assert await client.find_coordinator("g") == (2, "b2.example:9093")
        assert [version for _, version, _ in broker.seen] == [3]

    def batch(request: Any, version: int) -> FindCoordinatorResponse:
        assert (request.key, request.coordinator_keys) == ("", ["g"])
        return FindCoordinatorResponse(
            coordinators=[Coordinator(key="g", node_id=3, host="::1", port=9094)]
        )

    async with (
        ScriptedKafka({FIND_COORDINATOR: batch}) as broker,
        KafkaCoordinatorClient(broker.address) as client,
    ):
        assert await client.find_coordinator("g") == (3, "[::1]:9094")
        assert [version for _, version, _ in broker.seen] == [6]


@pytest.mark.asyncio
async def test_a_find_coordinator_error_names_the_broker_the_group_and_its_message() -> None:
    def refused(request: Any, version: int) -> FindCoordinatorResponse:
        return FindCoordinatorResponse(
            coordinators=[
                Coordinator(
                    key="g",
                    error_code=CoordinatorNotAvailableError.code,
                    error_message="__consumer_offsets has no leader",
                )
            ]
        )

    async with (
        ScriptedKafka({FIND_COORDINATOR: refused}) as broker,
        KafkaCoordinatorClient(broker.address) as client,
    ):
        with pytest.raises(CoordinatorNotAvailableError) as raised:
            await client.find_coordinator("g")
    assert str(raised.value) == (
        f"COORDINATOR_NOT_AVAILABLE from the broker at {broker.address} for FindCoordinator of "
        "group 'g': __consumer_offsets has no leader"
    )


@pytest.mark.asyncio
async def test_offset_fetch_asks_by_group_id_before_v8_and_by_groups_from_v8() -> None:
    def old(request: Any, version: int) -> OffsetFetchResponse:
        assert request.group_id == "g" and request.groups == []
        assert [(t.name, t.partition_indexes) for t in request.topics] == [("a", [0, 1])]
        return OffsetFetchResponse(
            topics=[
                OffsetFetchResponseTopic(
                    name="a",
                    partitions=[
                        OffsetFetchResponsePartition(
                            partition_index=0, committed_offset=5, metadata="m"
                        ),
                        OffsetFetchResponsePartition(partition_index=1, committed_offset=-1),
                    ],
                )
            ]
        )

    async with (
        ScriptedKafka({OFFSET_FETCH: old}, {OFFSET_FETCH: (1, 7)}) as broker,
        KafkaCoordinatorClient(broker.address) as client,
    ):
        assert await client.offset_fetch("g", [A0, A1]) == {
            A0: OffsetAndMetadata(5, "m", -1),
            A1: None,
        }

    def grouped(request: Any, version: int) -> OffsetFetchResponse:
        assert request.group_id == "" and not request.topics
        (group,) = request.groups
        assert group.group_id == "g" and group.topics is None  # every committed partition
        return OffsetFetchResponse(
            groups=[
                OffsetFetchResponseGroup(
                    group_id="g",
                    topics=[
                        OffsetFetchResponseTopics(
                            name="a",
                            partitions=[
                                OffsetFetchResponsePartitions(
                                    partition_index=1,
                                    committed_offset=9,
                                    committed_leader_epoch=4,
                                )
                            ],
                        )
                    ],
                )
            ]
        )

    async with (
        ScriptedKafka({OFFSET_FETCH: grouped}) as broker,
        KafkaCoordinatorClient(broker.address) as client,
    ):
        assert await client.offset_fetch("g", None) == {A1: OffsetAndMetadata(9, "", 4)}
        assert [version for _, version, _ in broker.seen] == [9]


@pytest.mark.asyncio
async def test_offset_fetch_raises_the_request_level_error_and_a_partitions_error() -> None:
    answers = [
        OffsetFetchResponse(
            groups=[OffsetFetchResponseGroup(group_id="g", error_code=NotCoordinatorError.code)]
        ),
        OffsetFetchResponse(
            groups=[
                OffsetFetchResponseGroup(
                    group_id="g",
                    topics=[
                        OffsetFetchResponseTopics(
                            name="a",
                            partitions=[
                                OffsetFetchResponsePartitions(
                                    partition_index=0,
                                    error_code=UnknownTopicOrPartitionError.code,
                                )
                            ],
                        )
                    ],
                )
            ]
        ),
    ]
    async with (
        ScriptedKafka({OFFSET_FETCH: lambda r, v: answers.pop(0)}) as broker,
        KafkaCoordinatorClient(broker.address) as client,
    ):
        with pytest.raises(NotCoordinatorError, match=rf"coordinator at {broker.address}"):
            await client.offset_fetch("g", [A0])
        with pytest.raises(UnknownTopicOrPartitionError, match=r"group 'g', partition a-0"):
            await client.offset_fetch("g", [A0])


def commit_answer(*codes: int) -> Any:
    return lambda request, version: OffsetCommitResponse(
        topics=[
            OffsetCommitResponseTopic(
                name="a",
                partitions=[
                    OffsetCommitResponsePartition(partition_index=p, error_code=code)
                    for p, code in enumerate(codes)
                ],
            )
        ]
    )


@pytest.mark.asyncio
async def test_a_coordinator_error_on_every_partition_of_a_commit_is_raised() -> None:
    offsets = {A0: OffsetAndMetadata(1), A1: OffsetAndMetadata(2)}
    code = NotCoordinatorError.code
    async with (
        ScriptedKafka({OFFSET_COMMIT: commit_answer(code, code)}) as broker,
        KafkaCoordinatorClient(broker.address) as client,
    ):
        with pytest.raises(NotCoordinatorError):
            await client.offset_commit("g", offsets)
    too_large = OffsetMetadataTooLargeError.code
    async with (
        ScriptedKafka({OFFSET_COMMIT: commit_answer(0, too_large)}) as broker,
        KafkaCoordinatorClient(broker.address) as client,
    ):
        errors, shared = await client.offset_commit("g", offsets)
    assert errors[A0] is None and isinstance(errors[A1], OffsetMetadataTooLargeError)
    assert shared == ()
    # An error that is about the group itself, but not the coordinator's, stays per partition.
    denied = UnknownMemberIdError.code
    async with (
        ScriptedKafka({OFFSET_COMMIT: commit_answer(denied, denied)}) as broker,
        KafkaCoordinatorClient(broker.address) as client,
    ):
        errors, _ = await client.offset_commit("g", offsets)
    assert all(isinstance(e, UnknownMemberIdError) for e in errors.values())


@pytest.mark.asyncio
async def test_leave_group_names_its_one_member_before_v3() -> None:
    def old(request: Any, version: int) -> LeaveGroupResponse:
        assert (request.member_id, request.members) == ("m-1", [])
        return LeaveGroupResponse()

    async with (
        ScriptedKafka({LEAVE_GROUP: old}, {LEAVE_GROUP: (0, 2)}) as broker,
        KafkaCoordinatorClient(broker.address) as client,
    ):
        left = await client.leave_group(gm.LeaveGroupRequest("g", (gm.LeaveMember("m-1"),)))
    assert left == gm.LeaveGroupResponse(None, (gm.LeaveMemberResponse("m-1", None, None),))


@pytest.mark.parametrize(("join_versions", "leave_versions"), [((0, 9), (0, 5)), ((0, 7), (0, 4))])
@pytest.mark.asyncio
async def test_join_and_leave_carry_the_members_reason_where_the_version_has_it(
    join_versions: tuple[int, int], leave_versions: tuple[int, int]
) -> None:
    """JoinGroup v8+ and LeaveGroup v5+ (KIP-800); older versions have no field for it."""

    def joined(request: Any, version: int) -> JoinGroupResponse:
        return JoinGroupResponse(member_id=request.member_id, generation_id=1)

    def left(request: Any, version: int) -> LeaveGroupResponse:
        return LeaveGroupResponse(members=[])

    async with (
        ScriptedKafka(
            {JOIN_GROUP: joined, LEAVE_GROUP: left},
            {JOIN_GROUP: join_versions, LEAVE_GROUP: leave_versions},
        ) as broker,
        KafkaCoordinatorClient(broker.address) as client,
    ):
        await client.join_group(
            gm.JoinGroupRequest(
                "g", "m-1", "consumer", (("range", b""),), 10_000, reason="subscription has changed"
            ),
            timeout_ms=5_000,
        )
        await client.leave_group(
            gm.LeaveGroupRequest(
                "g", (gm.LeaveMember("m-1", reason="the consumer is being closed"),)
            ),
            timeout_ms=5_000,
        )
    (_, join_version, join), (_, leave_version, leave) = broker.seen
    assert (join_version, leave_version) == (join_versions[1], leave_versions[1])
    new = join_version >= 8
    assert join.reason == ("subscription has changed" if new else None)
    assert [m.reason for m in leave.members] == (
        ["the consumer is being closed"] if new else [None]
    )


@pytest.mark.asyncio
async def test_a_dropped_connection_and_an_unanswered_request_then_a_new_connection() -> None:
    hold = asyncio.Event()
    answers: list[Any] = [Drop(), hold, None]

    async def script(request: Any, version: int) -> OffsetFetchResponse:
        step = answers.pop(0)
        if isinstance(step, Drop):
            raise step
        if isinstance(step, asyncio.Event):
            await step.wait()
        return OffsetFetchResponse(groups=[OffsetFetchResponseGroup(group_id="g")])

    def fetch(request: Any, version: int) -> Any:
        if answers and isinstance(answers[0], Drop):
            raise answers.pop(0)
        return script(request, version)

    async with (
        ScriptedKafka({OFFSET_FETCH: fetch}) as broker,
        KafkaCoordinatorClient(broker.address) as client,
    ):
        with pytest.raises(NetworkError, match=rf"connection to {broker.address} was lost"):
            await client.offset_fetch("g", [A0])
        with pytest.raises(RequestTimedOutError, match=r"did not answer OffsetFetch"):
            await client.offset_fetch("g", [A0], timeout_ms=200)
        hold.set()
        assert await client.offset_fetch("g", [A0]) == {A0: None}


@pytest.mark.asyncio
async def test_group_offsets_forgets_a_coordinator_whose_connection_drops() -> None:
    def dropped(request: Any, version: int) -> Any:
        raise Drop()

    async with (
        ScriptedKafka({OFFSET_COMMIT: dropped}) as old,
        ScriptedKafka({OFFSET_COMMIT: commit_answer(0)}) as new,
    ):
        coordinators = [old.address, new.address]

        def find(request: Any, version: int) -> FindCoordinatorResponse:
            answer: FindCoordinatorResponse = found_at(coordinators.pop(0))(request, version)
            return answer

        async with ScriptedKafka({FIND_COORDINATOR: find}) as bootstrap:
            connections = Connections(request_timeout_ms=2_000, client_id="test")
            try:
                group = GroupOffsets(
                    "g",
                    coordinator_for=connections.coordinator,
                    brokers=lambda: [bootstrap.address],
                    request_timeout_ms=2_000,
                    retry_backoff_ms=5,
                    retry_backoff_max_ms=20,
                )
                await group.commit({A0: OffsetAndMetadata(3)}, deadline_ms=monotonic_ms() + 10_000)
                assert group.coordinator is not None
                assert group.coordinator[1] == new.address
            finally:
                await connections.close()
    assert [key for key, _, _ in old.seen] == [OFFSET_COMMIT]
    assert [key for key, _, _ in new.seen] == [OFFSET_COMMIT]


@pytest.mark.asyncio
async def test_a_commit_is_answered_while_a_join_group_is_parked() -> None:
    """The membership calls have a connection of their own: a broker answers one connection's
    requests in order, so a commit behind a JoinGroup parked until the rebalance ends would
    wait for it."""
    rebalanced = asyncio.Event()

    async def parked(request: Any, version: int) -> JoinGroupResponse:
        await rebalanced.wait()
        return JoinGroupResponse(member_id=request.member_id, generation_id=1)

    async with (
        ScriptedKafka({JOIN_GROUP: parked, OFFSET_COMMIT: commit_answer(0)}) as broker,
        KafkaCoordinatorClient(broker.address) as client,
    ):
        join = asyncio.create_task(
            client.join_group(
                gm.JoinGroupRequest("g", "m-1", "consumer", (("range", b""),), 10_000),
                timeout_ms=10_000,
            )
        )
        while not broker.seen:  # the JoinGroup is sent, and waits
            await asyncio.sleep(0.01)
        errors, _ = await client.offset_commit("g", {A0: OffsetAndMetadata(1)}, timeout_ms=2_000)
        assert errors == {A0: None}
        assert not join.done()
        rebalanced.set()
        assert (await join).generation_id == 1
