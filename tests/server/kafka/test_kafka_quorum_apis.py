"""DescribeQuorum on a Kafka listener (`kafka_quorum_apis`), from a leader's gRPC answer:

- the one partition `__cluster_metadata`-0 with the leader, its epoch and high watermark; the
  voters, the leader first, and the observers, with their offsets and wall-clock times as the
  leader gave them, directory ids zero;
- v2 lists each voter's listeners: its Kafka controller listener where known, else its gRPC
  address under the gRPC listener's name; v0 and v1 have no nodes;
- another topic or partition is UNKNOWN_TOPIC_OR_PARTITION, naming the metadata partition;
- no leader answering is NOT_LEADER_OR_FOLLOWER (retriable) with what was tried.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from replog.errors import ReplogError
from replog.kafka.connection import KafkaRequest
from replog.kafka.messages.describe_quorum_request import (
    DescribeQuorumRequest,
    PartitionData,
    TopicData,
)
from replog.kafka.messages.request_header import RequestHeader
from replog.kafka.protocol.codec import ZERO_UUID
from replog.pb import common_pb2
from replog.pb import raft_pb2 as pb
from replog.quorum.metadata.records import Endpoint
from replog.server.kafka.kafka_quorum_apis import KafkaQuorumApis


def leader_answer() -> pb.DescribeQuorumResponse:
    return pb.DescribeQuorumResponse(
        quorum_epoch=4,
        leader_id=2,
        high_watermark=120,
        voters=[
            pb.ReplicaState(
                replica_id=1, log_end_offset=118, last_fetch_ms=1000, last_caught_up_ms=990
            ),
            pb.ReplicaState(
                replica_id=2, log_end_offset=121, last_fetch_ms=1005, last_caught_up_ms=1005
            ),
            pb.ReplicaState(
                replica_id=3, log_end_offset=-1, last_fetch_ms=-1, last_caught_up_ms=-1
            ),
        ],
        observers=[
            pb.ReplicaState(
                replica_id=7, log_end_offset=121, last_fetch_ms=1001, last_caught_up_ms=1001
            )
        ],
        nodes=[common_pb2.NodeEndpoint(node_id=i, host=f"h{i}", port=19090 + i) for i in (1, 2, 3)],
    )


def quorum_apis(
    answer: pb.DescribeQuorumResponse | Exception,
    controllers: Mapping[int, Endpoint] | None = None,
) -> KafkaQuorumApis:
    async def describe() -> pb.DescribeQuorumResponse:
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def listeners() -> Mapping[int, Endpoint]:
        return controllers or {}

    return KafkaQuorumApis(
        describe, controller_listeners=listeners, grpc_listener_name="CONTROLLER"
    )


def asked(topic: str = "__cluster_metadata", partition: int = 0) -> DescribeQuorumRequest:
    return DescribeQuorumRequest(
        topics=[TopicData(topic_name=topic, partitions=[PartitionData(partition_index=partition)])]
    )


async def handled(apis: KafkaQuorumApis, body: DescribeQuorumRequest, version: int) -> Any:
    header = RequestHeader(request_api_key=55, request_api_version=version, correlation_id=1)
    response = await apis.handle(KafkaRequest(0, header, body, 0), "PLAINTEXT")
    response.encode(version)  # every field fits the version asked
    return response


@pytest.mark.asyncio
async def test_the_leaders_answer_in_kafkas_form() -> None:
    apis = quorum_apis(leader_answer(), {2: Endpoint("CONTROLLER_KAFKA", "k2", 9192)})
    response = await handled(apis, asked(), 2)
    assert response.error_code == 0
    (topic,) = response.topics
    assert topic.topic_name == "__cluster_metadata"
    (partition,) = topic.partitions
    assert (partition.partition_index, partition.error_code) == (0, 0)
    assert (partition.leader_id, partition.leader_epoch, partition.high_watermark) == (2, 4, 120)
    assert [
        (r.replica_id, r.log_end_offset, r.last_fetch_timestamp, r.last_caught_up_timestamp)
        for r in partition.current_voters
    ] == [(2, 121, 1005, 1005), (1, 118, 1000, 990), (3, -1, -1, -1)]
    assert [(r.replica_id, r.log_end_offset) for r in partition.observers] == [(7, 121)]
    assert {r.replica_directory_id for r in partition.current_voters} == {ZERO_UUID}
    assert [
        (n.node_id, [(x.name, x.host, x.port) for x in n.listeners]) for n in response.nodes
    ] == [
        (1, [("CONTROLLER", "h1", 19091)]),
        (2, [("CONTROLLER_KAFKA", "k2", 9192)]),
        (3, [("CONTROLLER", "h3", 19093)]),
    ]
    for version in (0, 1):
        older = await handled(apis, asked(), version)
        assert older.nodes == [] and older.topics == response.topics


@pytest.mark.asyncio
async def test_another_partition_is_unknown() -> None:
    for body in (asked("orders"), asked(partition=1)):
        response = await handled(quorum_apis(leader_answer()), body, 2)
        (topic,) = response.topics
        (partition,) = topic.partitions
        assert partition.error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
        assert "__cluster_metadata-0" in partition.error_message


@pytest.mark.asyncio
async def test_no_leader_answering_is_retriable_and_says_why() -> None:
    failure = ReplogError("no quorum node reachable at h1:19091: connection refused")
    response = await handled(quorum_apis(failure), asked(), 2)
    assert response.error_code == 6  # NOT_LEADER_OR_FOLLOWER
    assert "h1:19091: connection refused" in response.error_message
