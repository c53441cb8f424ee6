"""The key and value bytes of `__consumer_offsets` records, exactly as Kafka writes them.

Kafka's schemas (the group coordinator's OffsetCommitKey / OffsetCommitValue), big-endian,
each starting with an int16 version; a STRING is an int16 byte length and UTF-8 bytes:

    key, version 1 (0 is the same layout):  version:int16  group:STRING  topic:STRING
                                            partition:int32
    value, version 3:                       version:int16  offset:int64  leader_epoch:int32
                                            metadata:STRING  commit_timestamp:int64

Worked example: group "g", topic "t", partition 0 is the key ``0001 0001 67 0001 74
00000000``; offset 5, no leader epoch, metadata "", committed at 1700000000000 ms is the value
``0003 0000000000000005 ffffffff 0000 0000018bcfe56800``.

Rules:
- replog writes key version 1 and value version 3 only (what Kafka 2.1+ writes); it reads every
  value version Kafka wrote before the flexible v4 (0: offset, metadata, timestamp; 1: with an
  expire timestamp; 2: offset, metadata, commit timestamp; 3: with the leader epoch).
- Key version 2 is a group's membership record (GroupMetadataKey); replog has no group
  membership, so `decode_key` reports it as `GroupMetadataKey` for the loader to skip.
- A null value is a tombstone: the committed offset of that key is deleted.
- Bytes that do not parse (short, a negative string length, bad UTF-8, trailing bytes, an
  unknown version) raise `CorruptRecordError` naming what is wrong. Values that cannot be
  encoded (a string longer than 32767 bytes, a number out of its range) raise `ValueError`:
  the commit rules refuse such commits before anything is encoded.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from replog.common.offsets import NO_LEADER_EPOCH as NO_LEADER_EPOCH
from replog.errors import CorruptRecordError

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
# Kafka's STRING: an int16 length, so at most this many UTF-8 bytes.
STRING_BYTES_MAX = (1 << 15) - 1

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    """Which committed offset a record is about: one partition of one topic for one group."""

    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    """The key of a group membership record (key version 2), which replog does not use."""

    group: str


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    """A committed offset: the next offset to read, the leader epoch of the last record read
    (-1: not known), the committer's metadata string and when the commit was made."""

    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int


# --- encoding ------------------------------------------------------------------------------------


def _string(value: str, field: str) -> bytes:
    data = value.encode("utf-8")
    if len(data) > STRING_BYTES_MAX:
        raise ValueError(
            f"{field} is {len(data)} UTF-8 bytes long; a Kafka string holds at most "
            f"{STRING_BYTES_MAX}"
        )
    return _INT16.pack(len(data)) + data


def _packed(packer: struct.Struct, value: int, field: str) -> bytes:
    try:
        return packer.pack(value)
    except struct.error:
        raise ValueError(f"{field} {value} does not fit in {packer.size * 8} bits") from None


def encode_key(key: OffsetCommitKey) -> bytes:
    """The record key (version 1) of a committed offset."""
    return b"".join(
        (
            _INT16.pack(OFFSET_COMMIT_KEY_VERSION),
            _string(key.group, "group id"),
            _string(key.topic, "topic"),
            _packed(_INT32, key.partition, "partition"),
        )
    )


def encode_value(value: OffsetCommitValue) -> bytes:
    """The record value (version 3) of a committed offset."""
    return b"".join(
        (
            _INT16.pack(OFFSET_COMMIT_VALUE_VERSION),
            _packed(_INT64, value.offset, "offset"),
            _packed(_INT32, value.leader_epoch, "leader epoch"),
            _string(value.metadata, "metadata"),
            _packed(_INT64, value.commit_timestamp_ms, "commit timestamp"),
        )
    )


# --- decoding ------------------------------------------------------------------------------------


class _Reader:
    """Reads Kafka's fixed-width fields from `data`, naming `what` in every error."""

    __slots__ = ("_data", "_position", "_what")

    def __init__(self, data: bytes, what: str) -> None:
        self._data = data
        self._position = 0
        self._what = what

    def _take(self, size: int, field: str) -> bytes:
        end = self._position + size
        if end > len(self._data):
            raise CorruptRecordError(
                f"{self._what}: {len(self._data)} bytes end inside {field} (byte {self._position})"
            )
        piece = self._data[self._position : end]
        self._position = end
        return piece

    def int16(self, field: str) -> int:
        value: int = _INT16.unpack(self._take(2, field))[0]
        return value

    def int32(self, field: str) -> int:
        value: int = _INT32.unpack(self._take(4, field))[0]
        return value

    def int64(self, field: str) -> int:
        value: int = _INT64.unpack(self._take(8, field))[0]
        return value

    def string(self, field: str) -> str:
        return self.text(self.int16(f"the length of {field}"), field)

    def text(self, length: int, field: str) -> str:
        """The next `length` bytes as UTF-8 text."""
        if length < 0:
            raise CorruptRecordError(f"{self._what}: {field} has length {length}")
        raw = self._take(length, field)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise CorruptRecordError(f"{self._what}: {field} is not UTF-8: {error}") from None

    def end(self) -> None:
        left = len(self._data) - self._position
        if left:
            raise CorruptRecordError(f"{self._what}: {left} bytes left after the last field")


def decode_key(data: bytes) -> OffsetCommitKey | GroupMetadataKey:
    """The key of a `__consumer_offsets` record (any key version Kafka writes but 3+)."""
    reader = _Reader(data, "__consumer_offsets record key")
    version = reader.int16("the key version")
    if version in (0, OFFSET_COMMIT_KEY_VERSION):
        key = OffsetCommitKey(
            reader.string("the group id"), reader.string("the topic"), reader.int32("partition")
        )
        reader.end()
        return key
    if version == GROUP_METADATA_KEY_VERSION:
        group = GroupMetadataKey(reader.string("the group id"))
        reader.end()
        return group
    raise CorruptRecordError(f"__consumer_offsets record key: unknown key version {version}")


def decode_value(data: bytes) -> OffsetCommitValue:
    """The value of an offset commit record, value versions 0 to 3."""
    reader = _Reader(data, "__consumer_offsets offset commit value")
    version = reader.int16("the value version")
    if not 0 <= version <= OFFSET_COMMIT_VALUE_VERSION:
        raise CorruptRecordError(
            f"__consumer_offsets offset commit value: unknown value version {version}"
        )
    offset = reader.int64("the offset")
    leader_epoch = reader.int32("the leader epoch") if version >= 3 else NO_LEADER_EPOCH
    metadata = reader.string("the metadata")
    commit_timestamp_ms = reader.int64("the commit timestamp")
    if version == 1:
        reader.int64("the expire timestamp")  # Kafka 2.1 stopped expiring per commit
    reader.end()
    return OffsetCommitValue(offset, leader_epoch, metadata, commit_timestamp_ms)
