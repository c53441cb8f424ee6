"""ConsumerGroupDescribe over gRPC: a described consumer-protocol group survives the protobuf
round trip field for field (optional strings stay None when unset), and a topic without its
16-byte id is refused naming the group."""

from __future__ import annotations

from uuid import UUID

import pytest

from replog.coordinator import consumer_group_messages as cgm
from replog.errors import GroupIdNotFoundError, InvalidRequestError
from replog.pb import coordinator_pb2 as pb
from replog.wire.coordinator_codec import (
    consumer_group_describe_response_from_proto,
    consumer_group_describe_response_to_proto,
)

T = UUID(int=7)


def test_a_described_group_round_trips() -> None:
    groups = [
        cgm.DescribedConsumerGroup(
            "g",
            None,
            "Reconciling",
            4,
            3,
            "range",
            (
                cgm.DescribedConsumerMember(
                    "m1", "i1", None, 3, "c", "/10.0.0.1", ("t",), None, ((T, "t", (0, 2)),), ()
                ),
                cgm.DescribedConsumerMember(
                    "m2", None, "r", 4, "c", "", (), "t.*", (), ((T, "", (1,)),)
                ),
            ),
        ),
        cgm.DescribedConsumerGroup("h", GroupIdNotFoundError("no such group")),
    ]
    wire = consumer_group_describe_response_to_proto(groups).SerializeToString()
    back = consumer_group_describe_response_from_proto(
        pb.ConsumerGroupDescribeResponse.FromString(wire)
    )
    assert back[0] == groups[0]
    assert (back[1].group_id, type(back[1].error), str(back[1].error)) == (
        "h",
        GroupIdNotFoundError,
        "no such group",
    )


def test_a_topic_without_its_id_is_refused() -> None:
    message = pb.ConsumerGroupDescribeResponse(
        groups=[
            pb.DescribedConsumerGroup(
                group_id="g",
                members=[
                    pb.DescribedConsumerMember(
                        member_id="m", assignment=[pb.DescribedTopicPartitions(topic_name="t")]
                    )
                ],
            )
        ]
    )
    with pytest.raises(InvalidRequestError, match="group 'g'"):
        consumer_group_describe_response_from_proto(message)
