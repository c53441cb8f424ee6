"""The bytes a consumer group's members exchange through the coordinator when the group's
protocol type is "consumer": Kafka's ConsumerProtocolSubscription (each member's JoinGroup
metadata) and ConsumerProtocolAssignment (the leader's SyncGroup assignments), which the
coordinator relays without reading; the members' assignors and the tools read them.

    subscription v0:  version:int16  [topic:STRING]  user_data:BYTES?
                 v1:  + owned_partitions:[topic:STRING [partition:int32]]
                 v2:  + generation_id:int32
                 v3:  + rack_id:STRING?
    assignment, v0 to v3:  version:int16  [topic:STRING  [partition:int32]]  user_data:BYTES?

and the user data two assignors put in a subscription (Kafka's, so a leader of either kind
reads the other's):

    sticky (StickyAssignorUserData) v1:  [topic:STRING [partition:int32]]  generation:int32
                                    v0:  without the generation
    cooperative-sticky:                  generation:int32

Rules: replog writes subscription v3 (Kafka 3.x+ clients do, so mixed groups read each other)
and assignment v3. Reading takes any version: a field the version lacks gets its default
(no owned partitions, generation -1, no rack); fields after the last known one are ignored, as
Kafka's readers do. `assigned_partitions` (tools) gives [] for bytes that do not parse, so a
tool shows "-" for such a member; `subscription_from_bytes` (an assignor) raises ValueError
naming what was wrong, since a leader cannot assign from a subscription it cannot read (and
`assignment_from_bytes` likewise, for a group converted between the protocols). User data that
does not parse counts as none (no previous assignment, generation -1), as Kafka's assignors
ignore it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

from replog.common import TopicPartition

CONSUMER_PROTOCOL_TYPE = "consumer"
SUBSCRIPTION_VERSION = 3
ASSIGNMENT_VERSION = 3
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class Subscription:
    """One member's JoinGroup metadata: what it reads and, for cooperative assignors, owns."""

    topics: tuple[str, ...]
    owned: tuple[TopicPartition, ...] = ()
    generation: int = -1
    user_data: bytes | None = None
    rack: str | None = None


def assigned_partitions(data: bytes) -> list[tuple[str, int]]:
    """The (topic, partition) pairs of a ConsumerProtocolAssignment; [] if it does not parse."""
    try:
        return _parse(data)
    except (struct.error, UnicodeDecodeError, ValueError):
        return []


def _parse(data: bytes) -> list[tuple[str, int]]:
    reader = _Reader(data, _INT16.size)  # the version: every known one has this layout
    return reader.partitions()


def assignment_from_bytes(data: bytes) -> list[tuple[str, int]]:
    """The (topic, partition) pairs of a ConsumerProtocolAssignment; ValueError naming what
    did not parse (a group conversion cannot carry an assignment it cannot read)."""
    return assignment_with_user_data(data)[0]


def assignment_with_user_data(data: bytes) -> tuple[list[tuple[str, int]], bytes | None]:
    """`assignment_from_bytes` and the assignment's user data (None when absent or null)."""
    try:
        reader = _Reader(data, _INT16.size)
        partitions = reader.partitions()
        user_data = None if reader.position >= len(data) else reader.nullable_bytes()
    except (struct.error, UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"a consumer assignment that does not parse ({exc})") from None
    return partitions, user_data


def subscription_to_bytes(subscription: Subscription) -> bytes:
    """ConsumerProtocolSubscription v3 (module docstring)."""
    out = bytearray(_INT16.pack(SUBSCRIPTION_VERSION))
    out += _INT32.pack(len(subscription.topics))
    for topic in subscription.topics:
        out += _string(topic)
    out += _bytes(subscription.user_data)
    out += _partitions(subscription.owned)
    out += _INT32.pack(subscription.generation)
    out += _INT16.pack(-1) if subscription.rack is None else _string(subscription.rack)
    return bytes(out)


def subscription_from_bytes(data: bytes) -> Subscription:
    """A ConsumerProtocolSubscription of any version; ValueError naming what did not parse."""
    try:
        reader = _Reader(data, 0)
        version = reader.int16()
        if version < 0:
            raise ValueError(f"version {version}")
        topics = tuple(reader.string() for _ in range(reader.count()))
        user_data = reader.nullable_bytes()
        owned: list[tuple[str, int]] = reader.partitions() if version >= 1 else []
        generation = reader.int32() if version >= 2 else -1
        rack = reader.nullable_string() if version >= 3 else None
    except (struct.error, UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"a consumer subscription that does not parse ({exc})") from None
    return Subscription(
        topics, tuple(TopicPartition(t, p) for t, p in owned), generation, user_data, rack
    )


def subscription_topics(data: bytes) -> tuple[str, ...]:
    """The topics of a ConsumerProtocolSubscription of any version, read as its v0 prefix (the
    version, then the topics), as Kafka's coordinator reads them; ValueError if they do not
    parse."""
    try:
        reader = _Reader(data, 0)
        if reader.int16() < 0:
            raise ValueError("a negative version")
        return tuple(reader.string() for _ in range(reader.count()))
    except (struct.error, UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"a consumer subscription that does not parse ({exc})") from None


def assignment_to_bytes(
    partitions: Iterable[TopicPartition], user_data: bytes | None = None
) -> bytes:
    """ConsumerProtocolAssignment v3 of `partitions`."""
    return _INT16.pack(ASSIGNMENT_VERSION) + _partitions(partitions) + _bytes(user_data)


def sticky_user_data_to_bytes(partitions: Iterable[TopicPartition], generation: int) -> bytes:
    """The `sticky` assignor's user data v1: the member's last assignment and its generation."""
    return _partitions(partitions) + _INT32.pack(generation)


def sticky_user_data_from_bytes(data: bytes | None) -> tuple[tuple[TopicPartition, ...], int]:
    """(last assignment, generation) of `sticky` user data v1 or v0 (generation -1); ((), -1)
    for none or bytes that do not parse. Kafka's Java client writes the fields alone;
    kafka-python 3 writes an int16 version before them, read here too (second, since Java's
    bytes never parse that way: their first int32 is the topic count)."""
    if not data:
        return (), -1
    for start in (0, _INT16.size):
        try:
            reader = _Reader(data, start)
            pairs = reader.partitions()
            remaining = len(data) - reader.position
            generation = reader.int32() if remaining >= _INT32.size else -1
        except (struct.error, UnicodeDecodeError, ValueError):
            continue
        if reader.position == len(data):
            return tuple(sorted(TopicPartition(t, p) for t, p in pairs)), generation
    return (), -1


def generation_user_data(generation: int) -> bytes:
    """The `cooperative-sticky` assignor's user data: the member's generation (for leaders that
    read subscriptions older than v2, which lack the field)."""
    return _INT32.pack(generation)


def generation_from_user_data(data: bytes | None) -> int:
    """The generation of `cooperative-sticky` user data; -1 for none or other bytes."""
    if data is None or len(data) != _INT32.size:
        return -1
    return int(_INT32.unpack(data)[0])


def _string(text: str) -> bytes:
    encoded = text.encode("utf-8")
    return _INT16.pack(len(encoded)) + encoded


def _bytes(data: bytes | None) -> bytes:
    return _INT32.pack(-1) if data is None else _INT32.pack(len(data)) + data


def _partitions(partitions: Iterable[TopicPartition]) -> bytes:
    """[topic [partition]] grouped by topic, topics and partitions in order."""
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    out = bytearray(_INT32.pack(len(by_topic)))
    for topic, numbers in by_topic.items():
        out += _string(topic) + _INT32.pack(len(numbers))
        for number in numbers:
            out += _INT32.pack(number)
    return bytes(out)


class _Reader:
    """Reads Kafka's classic (non-flexible) types from `data`; struct.error past its end."""

    def __init__(self, data: bytes, position: int) -> None:
        self.data = data
        self.position = position

    def int16(self) -> int:
        (value,) = _INT16.unpack_from(self.data, self.position)
        self.position += _INT16.size
        return int(value)

    def int32(self) -> int:
        (value,) = _INT32.unpack_from(self.data, self.position)
        self.position += _INT32.size
        return int(value)

    def count(self) -> int:
        count = self.int32()
        if count < 0:
            raise ValueError(f"a negative array length {count}")
        return count

    def take(self, length: int) -> bytes:
        if self.position + length > len(self.data):
            raise ValueError("a length past the end")
        chunk = self.data[self.position : self.position + length]
        self.position += length
        return chunk

    def string(self) -> str:
        length = self.int16()
        if length < 0:
            raise ValueError("a null topic name")
        return self.take(length).decode("utf-8")

    def nullable_string(self) -> str | None:
        length = self.int16()
        return None if length < 0 else self.take(length).decode("utf-8")

    def nullable_bytes(self) -> bytes | None:
        length = self.int32()
        return None if length < 0 else self.take(length)

    def partitions(self) -> list[tuple[str, int]]:
        pairs: list[tuple[str, int]] = []
        for _ in range(self.count()):
            topic = self.string()
            for _ in range(self.count()):
                pairs.append((topic, self.int32()))
        return pairs
