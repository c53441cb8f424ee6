"""ConsumerGroupHeartbeat over gRPC: requests and answers survive the protobuf round trip field
for field, with Kafka's null ("unchanged") kept apart from an empty list, and a topic without
its 16-byte id is refused."""

from __future__ import annotations

from uuid import UUID

import pytest

from replog.coordinator import consumer_group_messages as cgm
from replog.errors import FencedMemberEpochError, InvalidRequestError
from replog.pb import coordinator_pb2 as pb
from replog.wire import coordinator_codec as codec

T = UUID(int=7)


@pytest.mark.parametrize(
    "request_",
    [
        cgm.ConsumerGroupHeartbeatRequest(
            "g",
            "m",
            0,
            instance_id="i",
            rebalance_timeout_ms=300_000,
            subscribed_topic_names=("a", "b"),
            server_assignor="range",
            owned=(),
            client_id="c",
            client_host="/10.0.0.1",
        ),
        cgm.ConsumerGroupHeartbeatRequest("g", "m", 4, owned=((T, (0, 3)),), client_id="c"),
        cgm.ConsumerGroupHeartbeatRequest("g", "m", -1, subscribed_topic_names=()),
    ],
)
def test_requests_round_trip_with_null_apart_from_empty(
    request_: cgm.ConsumerGroupHeartbeatRequest,
) -> None:
    message = codec.consumer_group_heartbeat_request_to_proto(request_)
    wire = pb.ConsumerGroupHeartbeatRequest.FromString(message.SerializeToString())
    back = codec.consumer_group_heartbeat_request_from_proto(wire, request_.client_host)
    assert back == request_


@pytest.mark.parametrize(
    "answer",
    [
        cgm.ConsumerGroupHeartbeatResponse(None, "m", 3, 5_000, ((T, (1,)),)),
        cgm.ConsumerGroupHeartbeatResponse(None, "m", 3, 5_000, ()),
        cgm.ConsumerGroupHeartbeatResponse(None, "m", 3, 5_000, None),
    ],
)
def test_answers_round_trip(answer: cgm.ConsumerGroupHeartbeatResponse) -> None:
    message = codec.consumer_group_heartbeat_response_to_proto(answer)
    wire = pb.ConsumerGroupHeartbeatResponse.FromString(message.SerializeToString())
    assert codec.consumer_group_heartbeat_response_from_proto(wire) == answer


def test_an_error_answer_decodes_to_its_class_and_a_topic_needs_its_id() -> None:
    fenced = codec.consumer_group_heartbeat_response_to_proto(
        cgm.ConsumerGroupHeartbeatResponse(FencedMemberEpochError("old epoch"))
    )
    back = codec.consumer_group_heartbeat_response_from_proto(fenced)
    assert isinstance(back.error, FencedMemberEpochError) and back.member_id is None
    bad = pb.ConsumerGroupHeartbeatRequest(
        group_id="g",
        owned=pb.HeartbeatPartitions(topics=[pb.HeartbeatTopicPartitions(partitions=[0])]),
    )
    with pytest.raises(InvalidRequestError, match="group 'g'"):
        codec.consumer_group_heartbeat_request_from_proto(bad, "")
