"""The value types a client hands to and gets from users, shaped like kafka-python's.

- `TopicPartition(topic, partition)`: one partition (`replog.common`'s, re-exported).
- `RecordMetadata`: where a produced record landed (`send`'s result).
- `ConsumerRecord`: one record `poll` returned, with its partition and offset.
- `OffsetAndMetadata`: a committed position: the offset of the *next* record to read (Kafka's
  convention), an optional metadata string and the leader epoch of the last record read
  (`replog.common`'s, re-exported).
- `OffsetAndTimestamp`: an `offsets_for_times` answer.
- `ConsumerGroupMetadata`: a consumer's group membership, what a transactional producer's
  `send_offsets_to_transaction` commits offsets as (Kafka's `consumer.groupMetadata()`).

All are immutable named tuples, so they compare, hash and unpack like kafka-python's.
"""

from __future__ import annotations

from typing import NamedTuple

from replog.common import OffsetAndMetadata, TopicPartition

__all__ = [
    "ConsumerGroupMetadata",
    "ConsumerRecord",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "RecordMetadata",
    "TopicPartition",
]

TIMESTAMP_TYPE_CREATE_TIME = 0
TIMESTAMP_TYPE_LOG_APPEND_TIME = 1


class RecordMetadata(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int  # CreateTime given or stamped by the producer, or the broker's LogAppendTime
    serialized_key_size: int = -1  # -1: no key
    serialized_value_size: int = -1  # -1: null value

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


class ConsumerRecord(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int  # TIMESTAMP_TYPE_CREATE_TIME or TIMESTAMP_TYPE_LOG_APPEND_TIME
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    leader_epoch: int = -1


class OffsetAndTimestamp(NamedTuple):
    offset: int
    timestamp: int
    leader_epoch: int = -1


class ConsumerGroupMetadata(NamedTuple):
    """A group member's identity for transactional offset commits: the group id, and the
    generation, member id and static instance id the coordinator checks (-1, "" and None
    for a producer that commits as no member: the coordinator then checks only the group)."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None
