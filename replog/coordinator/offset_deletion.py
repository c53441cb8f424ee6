"""OffsetDelete's decisions: whether a group's offsets may be deleted, and which partitions asked
for are answered GROUP_SUBSCRIBED_TO_TOPIC instead (Kafka's
`OffsetMetadataManager.deleteOffsets` with its groups' `validateOffsetDelete` and
`isSubscribedToTopic`).

Rules:
- The group must exist: a classic group other than Dead, a consumer-protocol group, or
  committed offsets alone (Kafka replays those into an Empty group without a protocol type);
  otherwise GROUP_ID_NOT_FOUND.
- A classic group with members (Stable, PreparingRebalance, CompletingRebalance) must have the
  consumer protocol type ("consumer"), else NON_EMPTY_GROUP: the coordinator cannot tell
  which topics another protocol's members read. A consumer-protocol group is never refused.
- Each partition asked for of a topic the group is subscribed to is GROUP_SUBSCRIBED_TO_TOPIC;
  every other one is answered without error, and gets a tombstone if the group has an offset
  for it (the shell's part).
- Subscribed topics: of a classic group, the topics of its members' subscriptions in the
  group's protocol (read as Kafka reads them: the version, then the v0 topic list); a group
  without members has none; a group of another protocol type none; a consumer group whose
  protocol is not chosen yet, or whose subscriptions do not parse, all of them (Kafka's "when
  it does not know"). Kafka takes these at each new generation; here they are the members' at
  the request, which differs only for a member that joined a rebalance still running (its
  topics count already). Of a consumer-protocol group: the topics its members subscribe to, by
  name or regex (the core's `subscribed_topics`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from replog.coordinator.classic_group import ClassicGroup, GroupState
from replog.coordinator.consumer_protocol import CONSUMER_PROTOCOL_TYPE, subscription_topics
from replog.errors import (
    GroupIdNotFoundError,
    GroupSubscribedToTopicError,
    KafkaError,
    NonEmptyGroupError,
)

# A predicate over topic names: whether the group is subscribed to the topic.
Subscribed = Callable[[str], bool]

_WITH_MEMBERS = (GroupState.STABLE, GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE)


def classic_subscribed(group: ClassicGroup | None) -> Subscribed:
    """Whether `group` (classic, allowed by `classic_refusal`; None: committed offsets only)
    reads a topic (module Rules)."""
    if group is None or group.protocol_type != CONSUMER_PROTOCOL_TYPE or not group.members:
        return lambda _topic: False
    protocol = group.protocol_name
    if protocol is None:
        return lambda _topic: True
    topics: set[str] = set()
    try:
        for member in group.members.values():
            topics.update(subscription_topics(member.metadata(protocol)))
    except (KeyError, ValueError):
        return lambda _topic: True
    return topics.__contains__


def classic_refusal(
    group_id: str, group: ClassicGroup | None, has_offsets: bool
) -> KafkaError | None:
    """The group-level error of an OffsetDelete of a group the classic core holds as `group`
    (None: neither core holds it), `has_offsets` whether it has committed offsets."""
    if group is None or group.state is GroupState.DEAD:
        if group is None and has_offsets:
            return None
        return GroupIdNotFoundError(f"group {group_id!r} does not exist")
    if group.state in _WITH_MEMBERS and group.protocol_type != CONSUMER_PROTOCOL_TYPE:
        return NonEmptyGroupError(
            f"group {group_id!r} is {group.state.value} with {len(group.members)} members of "
            f"protocol type {group.protocol_type!r}: only a group of protocol type "
            f"{CONSUMER_PROTOCOL_TYPE!r} or an Empty one may delete offsets"
        )
    return None


def partition_answers(
    group_id: str, subscribed: Subscribed, asked: Sequence[tuple[str, Sequence[int]]]
) -> tuple[list[tuple[str, int, KafkaError | None]], list[tuple[str, int]]]:
    """Each partition asked for with its answer, and the partitions whose offsets go (those not
    refused), in the order asked."""
    answers: list[tuple[str, int, KafkaError | None]] = []
    deletable: list[tuple[str, int]] = []
    for topic, partitions in asked:
        refused = subscribed(topic)
        for partition in partitions:
            if refused:
                error: KafkaError | None = GroupSubscribedToTopicError(
                    f"group {group_id!r} is subscribed to topic {topic!r}: its members read "
                    f"{topic}-{partition}, whose offset stays"
                )
            else:
                error = None
                deletable.append((topic, partition))
            answers.append((topic, partition, error))
    return answers, deletable
