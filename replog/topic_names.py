"""Kafka's rules for topic names, in one place for the controller, the broker and the log
manager: which names are legal, and which topics are internal.

Rules (Kafka's `Topic.validate`): a name is 1 to 249 characters from ASCII letters, digits,
'.', '_' and '-', and is neither '.' nor '..'. (249 leaves room for a partition's directory
name, `<topic>-<partition>`, within a file system's 255-byte limit.) The internal topics are
Kafka's (`Topic.isInternal`): `__consumer_offsets` (committed offsets, written by the group
coordinator) and `__transaction_state`; clients may read them but not produce to them.
`__cluster_metadata` names the Raft metadata log (its directory is `__cluster_metadata-0`, which
may share a log dir with the partitions): a legal name, but no topic may take it (Kafka's
CreateTopics answers INVALID_REQUEST), or its partition's log would be the metadata log's
directory.
Pure: no I/O.
"""

from __future__ import annotations

from replog.errors import InvalidRequestError, InvalidTopicError

MAX_TOPIC_NAME_LENGTH = 249
LEGAL_TOPIC_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
INTERNAL_TOPICS = frozenset({CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC})
CLUSTER_METADATA_TOPIC = "__cluster_metadata"


def is_internal_topic(name: str) -> bool:
    """Whether only the broker itself may write to topic `name`."""
    return name in INTERNAL_TOPICS


def topic_name_problem(name: str) -> str | None:
    """Why `name` cannot name a topic, None if it can."""
    if not name:
        return "the topic name is empty"
    if name in (".", ".."):
        return f"{name!r} is not a legal topic name"
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return (
            f"the topic name is {len(name)} characters long; at most "
            f"{MAX_TOPIC_NAME_LENGTH} are allowed"
        )
    if not set(name) <= LEGAL_TOPIC_CHARS:
        return (
            f"topic name {name!r} holds a character other than ASCII letters, digits, "
            "'.', '_' and '-'"
        )
    return None


def check_topic_name(name: str) -> None:
    """Raise InvalidTopicError naming the problem if `name` cannot name a topic."""
    problem = topic_name_problem(name)
    if problem is not None:
        raise InvalidTopicError(problem)


def check_topic_creatable(name: str) -> None:
    """`check_topic_name`, and InvalidRequestError for the metadata log's reserved name."""
    check_topic_name(name)
    if name == CLUSTER_METADATA_TOPIC:
        raise InvalidRequestError(
            f"creation of internal topic {CLUSTER_METADATA_TOPIC} is prohibited: the name is "
            "the metadata log's"
        )
