"""The consumer-protocol (KIP-848) group records of `__consumer_offsets`, exactly as Kafka 4.0
writes them.

Each key is an int16 version naming the record type, then non-flexible STRINGs (int16 length);
each value is an int16 value version (0) and a flexible body: compact strings and arrays
(unsigned varint length + 1, 0 for null), 16-byte uuids, and a tagged-field section (unsigned
varint count, then tag, size, bytes) after every struct:

    3 ConsumerGroupMetadata {group}            -> {epoch:int32}
    4 ConsumerGroupPartitionMetadata {group}   -> {topics:[topic_id:uuid name:string
                                                   partitions:int32 racks:[...]]}
    5 ConsumerGroupMemberMetadata {group, member} -> {instance_id:string? rack_id:string?
                                                   client_id client_host
                                                   subscribed_topic_names:[string]
                                                   subscribed_topic_regex:string?
                                                   rebalance_timeout_ms:int32
                                                   server_assignor:string?
                                                   tag 0: classic member metadata}
    6 ConsumerGroupTargetAssignmentMetadata {group} -> {assignment_epoch:int32}
    7 ConsumerGroupTargetAssignmentMember {group, member} -> {[topic_id:uuid partitions:[int32]]}
    8 ConsumerGroupCurrentMemberAssignment {group, member} -> {member_epoch previous_member_epoch
                                                   state:int8 assigned:[...]
                                                   pending_revocation:[...]}

Rules:
- A null value is a tombstone: the member, its target assignment, its current assignment or
  the group is gone.
- replog writes no rack information (racks: empty). A member that joined with the classic
  protocol (an upgraded group's members) carries its classic member metadata in tag 0 of its
  member record: its session timeout and its JoinGroup protocols (name, metadata bytes); other
  unknown tagged fields are skipped when read, as Kafka does.
- Bytes that do not parse raise `CorruptRecordError` naming what is wrong.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, replace
from uuid import UUID

from replog.coordinator.offsets_records import _INT16, _Reader, _string
from replog.errors import CorruptRecordError
from replog.record.varint import encode_unsigned

CONSUMER_GROUP_METADATA = 3
CONSUMER_GROUP_PARTITION_METADATA = 4
CONSUMER_GROUP_MEMBER_METADATA = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = 8
CONSUMER_GROUP_KEY_VERSIONS = range(CONSUMER_GROUP_METADATA, 9)
VALUE_VERSION = 0
_NAMES = {
    3: "ConsumerGroupMetadata",
    4: "ConsumerGroupPartitionMetadata",
    5: "ConsumerGroupMemberMetadata",
    6: "ConsumerGroupTargetAssignmentMetadata",
    7: "ConsumerGroupTargetAssignmentMember",
    8: "ConsumerGroupCurrentMemberAssignment",
}
_MEMBER_KEYS = frozenset({5, 7, 8})
_I32 = struct.Struct(">i")
_I8 = struct.Struct(">b")

# topic id -> sorted partitions
TopicPartitions = tuple[tuple[UUID, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class ConsumerGroupKey:
    """The key of a consumer-group record: its type (the key version), group and member
    ("" for the group-level types 3, 4 and 6)."""

    record_type: int
    group: str
    member: str = ""


@dataclass(frozen=True, slots=True)
class GroupEpochValue:  # ConsumerGroupMetadataValue
    epoch: int


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    topic_id: UUID
    name: str
    partitions: int


@dataclass(frozen=True, slots=True)
class PartitionMetadataValue:  # ConsumerGroupPartitionMetadataValue
    topics: tuple[TopicMetadata, ...]


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:  # ConsumerGroupMemberMetadataValue.ClassicMemberMetadata (tag 0)
    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]  # (name, metadata) as its JoinGroup listed them


@dataclass(frozen=True, slots=True)
class MemberMetadataValue:  # ConsumerGroupMemberMetadataValue
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    classic: ClassicMemberMetadata | None = None


@dataclass(frozen=True, slots=True)
class TargetAssignmentEpochValue:  # ConsumerGroupTargetAssignmentMetadataValue
    assignment_epoch: int


@dataclass(frozen=True, slots=True)
class TargetAssignmentMemberValue:  # ConsumerGroupTargetAssignmentMemberValue
    partitions: TopicPartitions


@dataclass(frozen=True, slots=True)
class CurrentAssignmentValue:  # ConsumerGroupCurrentMemberAssignmentValue
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: TopicPartitions
    pending_revocation: TopicPartitions


ConsumerGroupValue = (
    GroupEpochValue
    | PartitionMetadataValue
    | MemberMetadataValue
    | TargetAssignmentEpochValue
    | TargetAssignmentMemberValue
    | CurrentAssignmentValue
)
_VALUE_TYPES: dict[type, int] = {
    GroupEpochValue: 3,
    PartitionMetadataValue: 4,
    MemberMetadataValue: 5,
    TargetAssignmentEpochValue: 6,
    TargetAssignmentMemberValue: 7,
    CurrentAssignmentValue: 8,
}


@dataclass(frozen=True, slots=True)
class ConsumerGroupRecord:
    """A consumer-group record to append (value None: tombstone)."""

    key: ConsumerGroupKey
    value: ConsumerGroupValue | None

    def __post_init__(self) -> None:
        if self.value is not None and _VALUE_TYPES[type(self.value)] != self.key.record_type:
            raise ValueError(
                f"a {type(self.value).__name__} under a key of type {self.key.record_type}"
            )


# --- encoding -----------------------------------------------------------------------------------


def encode_consumer_group_key(key: ConsumerGroupKey) -> bytes:
    parts = [_INT16.pack(key.record_type), _string(key.group, "group id")]
    if key.record_type in _MEMBER_KEYS:
        parts.append(_string(key.member, "member id"))
    return b"".join(parts)


def _cstr(value: str | None) -> bytes:
    if value is None:
        return b"\x00"
    data = value.encode("utf-8")
    return encode_unsigned(len(data) + 1) + data


def _carray(items: list[bytes]) -> bytes:
    return encode_unsigned(len(items) + 1) + b"".join(items)


_NO_TAGS = b"\x00"
_CLASSIC_MEMBER_TAG = 0


def _cbytes(data: bytes) -> bytes:
    return encode_unsigned(len(data) + 1) + data


def _classic_tags(classic: ClassicMemberMetadata | None) -> bytes:
    """The member record's tagged fields: tag 0 when the member uses the classic protocol."""
    if classic is None:
        return _NO_TAGS
    field = (
        _I32.pack(classic.session_timeout_ms)
        + _carray([_cstr(name) + _cbytes(data) + _NO_TAGS for name, data in classic.protocols])
        + _NO_TAGS
    )
    return (
        encode_unsigned(1)
        + encode_unsigned(_CLASSIC_MEMBER_TAG)
        + encode_unsigned(len(field))
        + field
    )


def _topic_partitions(assignment: TopicPartitions) -> bytes:
    return _carray(
        [
            topic_id.bytes + _carray([_I32.pack(p) for p in partitions]) + _NO_TAGS
            for topic_id, partitions in assignment
        ]
    )


def encode_consumer_group_value(value: ConsumerGroupValue) -> bytes:
    body: bytes
    if isinstance(value, GroupEpochValue):
        body = _I32.pack(value.epoch)
    elif isinstance(value, TargetAssignmentEpochValue):
        body = _I32.pack(value.assignment_epoch)
    elif isinstance(value, PartitionMetadataValue):
        body = _carray(
            [
                t.topic_id.bytes + _cstr(t.name) + _I32.pack(t.partitions) + _carray([]) + _NO_TAGS
                for t in value.topics
            ]
        )
    elif isinstance(value, MemberMetadataValue):
        body = b"".join(
            (
                _cstr(value.instance_id),
                _cstr(value.rack_id),
                _cstr(value.client_id),
                _cstr(value.client_host),
                _carray([_cstr(name) for name in value.subscribed_topic_names]),
                _cstr(value.subscribed_topic_regex),
                _I32.pack(value.rebalance_timeout_ms),
                _cstr(value.server_assignor),
            )
        )
        return _INT16.pack(VALUE_VERSION) + body + _classic_tags(value.classic)
    elif isinstance(value, TargetAssignmentMemberValue):
        body = _topic_partitions(value.partitions)
    else:
        body = b"".join(
            (
                _I32.pack(value.member_epoch),
                _I32.pack(value.previous_member_epoch),
                _I8.pack(value.state),
                _topic_partitions(value.assigned),
                _topic_partitions(value.pending_revocation),
            )
        )
    return _INT16.pack(VALUE_VERSION) + body + _NO_TAGS


# --- decoding -----------------------------------------------------------------------------------


class _Compact(_Reader):
    """`_Reader` with the flexible value types (module docstring)."""

    __slots__ = ()

    def uvarint(self, field: str) -> int:
        value = shift = 0
        while True:
            byte = self._take(1, field)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise CorruptRecordError(f"{self._what}: {field} is a varint over 5 bytes")

    def int8(self, field: str) -> int:
        value: int = _I8.unpack(self._take(1, field))[0]
        return value

    def uuid(self, field: str) -> UUID:
        return UUID(bytes=self._take(16, field))

    def nullable_string(self, field: str) -> str | None:
        length = self.uvarint(f"the length of {field}") - 1
        if length < 0:
            return None
        try:
            return self._take(length, field).decode("utf-8")
        except UnicodeDecodeError as error:
            raise CorruptRecordError(f"{self._what}: {field} is not UTF-8: {error}") from None

    def compact_string(self, field: str) -> str:
        value = self.nullable_string(field)
        if value is None:
            raise CorruptRecordError(f"{self._what}: {field} is null")
        return value

    def count(self, field: str) -> int:
        count = self.uvarint(f"the length of {field}") - 1
        if count < 0:
            raise CorruptRecordError(f"{self._what}: {field} is null")
        return count

    def tags(self, field: str) -> dict[int, bytes]:
        """A tagged-field section: each tag's bytes (callers ignore the tags they do not
        know, as Kafka does)."""
        tagged: dict[int, bytes] = {}
        for _ in range(self.uvarint(f"the tag count of {field}")):
            tag = self.uvarint(f"a tag of {field}")
            size = self.uvarint(f"a tag size of {field}")
            tagged[tag] = self._take(size, f"a tagged field of {field}")
        return tagged

    def compact_bytes(self, field: str) -> bytes:
        return self._take(self.count(field), field)

    def topic_partitions(self, field: str) -> TopicPartitions:
        topics = []
        for _ in range(self.count(field)):
            topic_id = self.uuid(f"a topic id of {field}")
            partitions = tuple(
                sorted(self.int32(f"a partition of {field}") for _ in range(self.count(field)))
            )
            self.tags(field)
            topics.append((topic_id, partitions))
        return tuple(topics)


def decode_consumer_group_key(version: int, data: bytes) -> ConsumerGroupKey:
    """The key of a consumer-group record whose int16 key version (3 to 8) was read; `data` is
    the whole key."""
    reader = _Compact(data, f"__consumer_offsets {_NAMES[version]} key")
    reader.int16("the key version")
    group = reader.string("the group id")
    member = reader.string("the member id") if version in _MEMBER_KEYS else ""
    reader.end()
    return ConsumerGroupKey(version, group, member)


def decode_consumer_group_value(record_type: int, data: bytes) -> ConsumerGroupValue:
    """The value of a consumer-group record of `record_type` (its key version)."""
    r = _Compact(data, f"__consumer_offsets {_NAMES[record_type]} value")
    version = r.int16("the value version")
    if version != VALUE_VERSION:
        raise CorruptRecordError(f"{r._what}: unknown value version {version}")
    value: ConsumerGroupValue
    if record_type == CONSUMER_GROUP_METADATA:
        value = GroupEpochValue(r.int32("the epoch"))
    elif record_type == CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA:
        value = TargetAssignmentEpochValue(r.int32("the assignment epoch"))
    elif record_type == CONSUMER_GROUP_PARTITION_METADATA:
        topics = []
        for _ in range(r.count("the topics")):
            topic_id = r.uuid("a topic id")
            name = r.compact_string("a topic name")
            partitions = r.int32("a partition count")
            for _ in range(r.count("the partition racks")):
                r.int32("a partition")
                for _ in range(r.count("the racks")):
                    r.compact_string("a rack")
                r.tags("the partition racks")
            r.tags("a topic")
            topics.append(TopicMetadata(topic_id, name, partitions))
        value = PartitionMetadataValue(tuple(topics))
    elif record_type == CONSUMER_GROUP_MEMBER_METADATA:
        value = MemberMetadataValue(
            r.nullable_string("the instance id"),
            r.nullable_string("the rack id"),
            r.compact_string("the client id"),
            r.compact_string("the client host"),
            tuple(r.compact_string("a topic name") for _ in range(r.count("the topic names"))),
            r.nullable_string("the topic regex"),
            r.int32("the rebalance timeout"),
            r.nullable_string("the server assignor"),
        )
    elif record_type == CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER:
        value = TargetAssignmentMemberValue(r.topic_partitions("the target partitions"))
    else:
        value = CurrentAssignmentValue(
            r.int32("the member epoch"),
            r.int32("the previous member epoch"),
            r.int8("the member state"),
            r.topic_partitions("the assigned partitions"),
            r.topic_partitions("the partitions pending revocation"),
        )
    tagged = r.tags("the value")
    r.end()
    if isinstance(value, MemberMetadataValue) and _CLASSIC_MEMBER_TAG in tagged:
        value = replace(value, classic=_classic_member(tagged[_CLASSIC_MEMBER_TAG], r._what))
    return value


def _classic_member(data: bytes, what: str) -> ClassicMemberMetadata:
    r = _Compact(data, f"{what}: the classic member metadata")
    session_timeout_ms = r.int32("the session timeout")
    protocols = []
    for _ in range(r.count("the protocols")):
        name = r.compact_string("a protocol name")
        metadata = r.compact_bytes("a protocol's metadata")
        r.tags("a protocol")
        protocols.append((name, metadata))
    r.tags("the classic member metadata")
    r.end()
    return ClassicMemberMetadata(session_timeout_ms, tuple(protocols))
