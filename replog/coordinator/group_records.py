"""The group membership records of `__consumer_offsets`, exactly as Kafka writes them.

Kafka's schemas (GroupMetadataKey / GroupMetadataValue), big-endian, each starting with an
int16 version; STRING is an int16 length and UTF-8 bytes (length -1: null, where nullable),
BYTES an int32 length and the bytes, an array an int32 count and its elements:

    key, version 2:    version:int16  group:STRING
    value, v0 to v3:   version:int16  protocol_type:STRING  generation:int32
                       protocol:STRING?  leader:STRING?  current_state_timestamp:int64 (v2+)
                       members:[member_id:STRING  group_instance_id:STRING? (v3+)
                                client_id:STRING  client_host:STRING
                                rebalance_timeout:int32 (v1+)  session_timeout:int32
                                subscription:BYTES  assignment:BYTES]

Rules:
- replog writes value version 3 (what Kafka writes since 2.3) and reads versions 0 to 3; a
  value older than v1 has no rebalance timeout (-1: the session timeout stands in, as in Kafka)
  and one older than v2 no state timestamp (-1).
- A null value (a tombstone) deletes the group.
- Bytes that do not parse raise `CorruptRecordError` naming what is wrong; values that cannot be
  encoded raise `ValueError` (as `offsets_records`).
"""

from __future__ import annotations

from dataclasses import dataclass

from replog.coordinator.offsets_records import (
    _INT16,
    _INT32,
    _INT64,
    GROUP_METADATA_KEY_VERSION,
    GroupMetadataKey,
    _packed,
    _Reader,
    _string,
)
from replog.errors import CorruptRecordError

GROUP_METADATA_VALUE_VERSION = 3
NO_TIMESTAMP = -1
NO_REBALANCE_TIMEOUT = -1
_NULL = _INT16.pack(-1)


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    """One member of a group generation: who it is, its timeouts, the subscription bytes of the
    group's protocol and the assignment the leader gave it."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    """A group's generation as stored: no members when the group is Empty."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp_ms: int
    members: tuple[MemberMetadata, ...]


def encode_group_key(key: GroupMetadataKey) -> bytes:
    """The record key (version 2) of a group's membership record."""
    return _INT16.pack(GROUP_METADATA_KEY_VERSION) + _string(key.group, "group id")


def _nullable(value: str | None, field: str) -> bytes:
    return _NULL if value is None else _string(value, field)


def _bytes(value: bytes, field: str) -> bytes:
    return _packed(_INT32, len(value), f"the length of {field}") + value


def encode_group_value(value: GroupMetadataValue) -> bytes:
    """The record value (version 3) of a group's membership record."""
    parts = [
        _INT16.pack(GROUP_METADATA_VALUE_VERSION),
        _string(value.protocol_type, "protocol type"),
        _packed(_INT32, value.generation, "generation"),
        _nullable(value.protocol, "protocol"),
        _nullable(value.leader, "leader"),
        _packed(_INT64, value.current_state_timestamp_ms, "state timestamp"),
        _INT32.pack(len(value.members)),
    ]
    for member in value.members:
        parts += [
            _string(member.member_id, "member id"),
            _nullable(member.group_instance_id, "group instance id"),
            _string(member.client_id, "client id"),
            _string(member.client_host, "client host"),
            _packed(_INT32, member.rebalance_timeout_ms, "rebalance timeout"),
            _packed(_INT32, member.session_timeout_ms, "session timeout"),
            _bytes(member.subscription, "subscription"),
            _bytes(member.assignment, "assignment"),
        ]
    return b"".join(parts)


class _GroupReader(_Reader):
    """`_Reader` with the nullable strings and byte arrays of the group value."""

    __slots__ = ()

    def nullable_string(self, field: str) -> str | None:
        length: int = _INT16.unpack(self._take(2, f"the length of {field}"))[0]
        if length == -1:
            return None
        if length < -1:
            raise CorruptRecordError(f"{self._what}: {field} has length {length}")
        self._position -= 2
        return self.string(field)

    def bytes(self, field: str) -> bytes:
        length = self.int32(f"the length of {field}")
        if length < 0:
            raise CorruptRecordError(f"{self._what}: {field} has length {length}")
        return self._take(length, field)


def decode_group_value(data: bytes) -> GroupMetadataValue:
    """The value of a group membership record, value versions 0 to 3."""
    reader = _GroupReader(data, "__consumer_offsets group metadata value")
    version = reader.int16("the value version")
    if not 0 <= version <= GROUP_METADATA_VALUE_VERSION:
        raise CorruptRecordError(
            f"__consumer_offsets group metadata value: unknown value version {version}"
        )
    protocol_type = reader.string("the protocol type")
    generation = reader.int32("the generation")
    protocol = reader.nullable_string("the protocol")
    leader = reader.nullable_string("the leader")
    timestamp = reader.int64("the state timestamp") if version >= 2 else NO_TIMESTAMP
    count = reader.int32("the member count")
    if count < 0:
        raise CorruptRecordError(f"__consumer_offsets group metadata value: member count {count}")
    members = []
    for index in range(count):
        where = f"member {index}'s"
        member_id = reader.string(f"{where} id")
        instance = reader.nullable_string(f"{where} instance id") if version >= 3 else None
        client_id = reader.string(f"{where} client id")
        client_host = reader.string(f"{where} client host")
        rebalance = (
            reader.int32(f"{where} rebalance timeout") if version >= 1 else NO_REBALANCE_TIMEOUT
        )
        session = reader.int32(f"{where} session timeout")
        members.append(
            MemberMetadata(
                member_id,
                instance,
                client_id,
                client_host,
                session if rebalance == NO_REBALANCE_TIMEOUT else rebalance,
                session,
                reader.bytes(f"{where} subscription"),
                reader.bytes(f"{where} assignment"),
            )
        )
    reader.end()
    return GroupMetadataValue(
        protocol_type, generation, protocol, leader, timestamp, tuple(members)
    )
