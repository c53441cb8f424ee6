"""What a request to a partition is refused for before its replica is looked up.

Rules (Kafka's `ReplicaManager.appendRecords` and `KafkaApis`):
- A Produce's acks must be 0, 1 or -1: anything else is INVALID_REQUIRED_ACKS for every
  partition of the request, before any other check.
- A client may not write to an internal topic (`topic_names.INTERNAL_TOPICS`): a Produce or a
  DeleteRecords naming one is INVALID_TOPIC_EXCEPTION, checked before the partition is looked
  up, unless the broker itself writes (its group coordinator: `internal_topics_allowed`).
"""

from __future__ import annotations

from replog.errors import InvalidRequiredAcksError, InvalidTopicError
from replog.replication.messages import ACKS_ALL, ACKS_LEADER, ACKS_NONE
from replog.topic_names import is_internal_topic

VALID_ACKS = (ACKS_NONE, ACKS_LEADER, ACKS_ALL)


def invalid_acks_error(topic: str, partition: int, acks: int) -> InvalidRequiredAcksError | None:
    """INVALID_REQUIRED_ACKS for `acks` outside 0, 1 and -1; None when valid."""
    if acks in VALID_ACKS:
        return None
    return InvalidRequiredAcksError(f"{topic}-{partition}: acks={acks}; only 0, 1 and -1 are valid")


def internal_topic_error(topic: str, partition: int, what: str) -> InvalidTopicError | None:
    """INVALID_TOPIC_EXCEPTION for a client's `what` ("append to", "delete records of") on an
    internal topic (Kafka's message); None for any other topic."""
    if not is_internal_topic(topic):
        return None
    return InvalidTopicError(
        f"{topic}-{partition}: cannot {what} internal topic {topic!r} (only the broker writes it)"
    )


def refuse_internal(topic: str, partition: int, what: str) -> None:
    """Raise `internal_topic_error`'s INVALID_TOPIC_EXCEPTION for an internal topic."""
    error = internal_topic_error(topic, partition, what)
    if error is not None:
        raise error
