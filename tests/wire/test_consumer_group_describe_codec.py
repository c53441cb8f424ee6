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
                    "m2", None, "r", 4, "c", "", (), "t.*", (), ((T, "", (1,)),), cgm.CLASSIC_MEMBER
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


def test_member_types_survive_and_an_older_broker_means_its_protocols_own() -> None:
    """A member's type (KIP-1099) crosses the wire; an answer without one (a broker before
    the field) is a consumer-protocol member in ConsumerGroupDescribe, a classic one in
    DescribeGroups."""
    from replog.coordinator import classic_group_messages as gm
    from replog.wire.coordinator_codec import (
        describe_groups_response_from_proto,
        describe_groups_response_to_proto,
    )

    classic = [gm.DescribedGroup("g", None, "Stable", "consumer", "range", (
        gm.DescribedMember("m", None, "c", "h", b"", b""),
    ))]  # fmt: skip
    message = pb.DescribeGroupsResponse.FromString(
        describe_groups_response_to_proto(classic).SerializeToString()
    )
    assert message.groups[0].members[0].member_type == "classic"
    (back,) = describe_groups_response_from_proto(message)
    assert back.members[0].member_type == cgm.CLASSIC_MEMBER
    old = pb.ConsumerGroupDescribeResponse(
        groups=[pb.DescribedConsumerGroup(group_id="g", members=[pb.DescribedConsumerMember()])]
    )
    (group,) = consumer_group_describe_response_from_proto(old)
    assert group.members[0].member_type == cgm.CONSUMER_MEMBER
    old_classic = pb.DescribeGroupsResponse(
        groups=[pb.DescribedGroup(group_id="g", members=[pb.DescribedMember(member_id="m")])]
    )
    (described,) = describe_groups_response_from_proto(old_classic)
    assert described.members[0].member_type == cgm.CLASSIC_MEMBER
