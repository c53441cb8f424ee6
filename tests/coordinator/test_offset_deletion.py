"""OffsetDelete's decisions (Kafka's deleteOffsets with ClassicGroup's validateOffsetDelete and
isSubscribedToTopic): which groups may delete offsets, and which topics they are subscribed to."""

from __future__ import annotations

import pytest

from replog.coordinator.classic_group import ClassicGroup, ClassicMember, GroupState
from replog.coordinator.consumer_protocol import (
    Subscription,
    subscription_to_bytes,
    subscription_topics,
)
from replog.coordinator.offset_deletion import (
    classic_refusal,
    classic_subscribed,
    partition_answers,
)
from replog.errors import GroupIdNotFoundError, GroupSubscribedToTopicError, NonEmptyGroupError


def group(
    state: GroupState, protocol_type: str = "consumer", *subscriptions: bytes
) -> ClassicGroup:
    found = ClassicGroup("g", state=state, protocol_type=protocol_type)
    for index, subscription in enumerate(subscriptions):
        found.add(
            ClassicMember(
                f"m{index}", None, "c", "/h", 1000, 1000, protocol_type, (("range", subscription),)
            ),
            None,
        )
    if subscriptions:
        found.protocol_name = "range"
    return found


def reads(*topics: str) -> bytes:
    return subscription_to_bytes(Subscription(topics))


def test_the_group_must_exist_and_another_protocol_must_be_empty() -> None:
    assert isinstance(classic_refusal("g", None, False), GroupIdNotFoundError)
    assert classic_refusal("g", None, True) is None  # committed offsets alone
    assert isinstance(classic_refusal("g", group(GroupState.DEAD), True), GroupIdNotFoundError)
    assert classic_refusal("g", group(GroupState.EMPTY, "connect"), False) is None
    for state in (
        GroupState.STABLE,
        GroupState.PREPARING_REBALANCE,
        GroupState.COMPLETING_REBALANCE,
    ):
        refused = classic_refusal("g", group(state, "connect", b"x"), False)
        assert isinstance(refused, NonEmptyGroupError) and "'connect'" in str(refused)
        assert classic_refusal("g", group(state, "consumer", reads("t")), False) is None


def test_a_classic_group_is_subscribed_to_its_members_topics_or_all_when_it_cannot_tell() -> None:
    stable = classic_subscribed(group(GroupState.STABLE, "consumer", reads("a"), reads("b", "c")))
    assert [stable(t) for t in ("a", "b", "c", "d")] == [True, True, True, False]
    assert not classic_subscribed(None)("a")  # offsets only
    assert not classic_subscribed(group(GroupState.EMPTY))("a")
    assert not classic_subscribed(group(GroupState.STABLE, "connect", reads("a")))("a")
    unparsable = group(GroupState.STABLE, "consumer", b"\x00")
    assert classic_subscribed(unparsable)("anything")
    undecided = group(GroupState.PREPARING_REBALANCE, "consumer", reads("a"))
    undecided.protocol_name = None
    assert classic_subscribed(undecided)("anything")


def test_subscribed_partitions_are_refused_the_others_deleted_in_the_order_asked() -> None:
    answers, deletable = partition_answers("g", {"a"}.__contains__, [("b", [1, 0]), ("a", [2])])
    assert [(t, p, type(e)) for t, p, e in answers] == [
        ("b", 1, type(None)),
        ("b", 0, type(None)),
        ("a", 2, GroupSubscribedToTopicError),
    ]
    assert "group 'g' is subscribed to topic 'a'" in str(answers[2][2])
    assert deletable == [("b", 1), ("b", 0)]


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_subscription_topics_reads_the_v0_prefix_of_every_version(version: int) -> None:
    data = bytearray(reads("x", "y"))
    data[0:2] = version.to_bytes(2, "big")
    assert subscription_topics(bytes(data)) == ("x", "y")
    with pytest.raises(ValueError, match="does not parse"):
        subscription_topics(b"\x00\x00\x00\x00\x00\x05")
