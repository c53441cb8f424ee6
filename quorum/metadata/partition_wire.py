"""The bytes of the records written once per partition, put together and read by hand: a
creation's `PartitionRecord`s and a broker event's `PartitionChangeRecord`s, as
`MetadataRecord` values (`record_codec`).

Why: building a protobuf message per record, copying it into the `MetadataRecord` wrapper and
serializing it cost 4-5 µs a record, and parsing one back into a record 6-9 µs (each repeated
field read from a parsed message is an object of its own); every node decodes every record of
a creation, and the active controller encodes them. Written and read straight from bytes,
these few fields cost about a third of that.

Rules:
- Writing (`*_bytes`) returns exactly the bytes `pb.MetadataRecord(<field>=...)
  .SerializeToString()` writes: fields in number order, proto3 zeros and empty lists left
  out, repeated integers packed, a negative int32 as ten bytes, an `optional` field or a
  `BrokerIdList` present whenever set. The record must be a valid one (`record_codec` checks
  it first).
- Reading (`read_*`) takes only that canonical form, with values `record_codec` accepts, and
  returns None for anything else (fields out of order or repeated, unknown fields, unpacked
  lists, a value out of range, bytes left over): the caller then decodes with protobuf, so a
  record read here is always the one protobuf and `record_codec`'s checks would give.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any
from uuid import UUID

from replog.quorum.metadata.records import (
    LEADER_UNCHANGED,
    NO_LEADER,
    RECOVERY_STATE_OF,
    RECOVERY_STATE_UNCHANGED,
    PartitionChangeRecord,
    PartitionRecord,
)
from replog.record.varint import encode_unsigned

_ONE_BYTE = tuple(bytes((n,)) for n in range(128))
_UINT64 = (1 << 64) - 1
_MINUS_ONE = b"\xff" * 9 + b"\x01"  # -1 (no leader) as an int32 varint: ten bytes

# The MetadataRecord oneof's tags (field number << 3 | length-delimited).
PARTITION_TAG = 0x22  # field 4
PARTITION_CHANGE_TAG = 0x32  # field 6
_PARTITION = bytes((PARTITION_TAG,))
_PARTITION_CHANGE = bytes((PARTITION_CHANGE_TAG,))
_TOPIC_ID = b"\x0a\x10"  # field 1, 16 bytes: both records start with it


def _varint(value: int) -> bytes:
    """An int32 or a length as protobuf writes it (a negative one as its 64-bit pattern)."""
    if 0 <= value < 128:
        return _ONE_BYTE[value]
    if value == NO_LEADER:  # every change of a whole cluster's stop: ten bytes, made once
        return _MINUS_ONE
    return encode_unsigned(value & _UINT64)


def _ids(values: Sequence[int]) -> bytes:
    """The packed varints of non-negative broker ids."""
    return bytes(values) if max(values) < 128 else b"".join(map(_varint, values))


def _packed(tag: bytes, values: Sequence[int]) -> bytes:
    if not values:
        return b""
    body = _ids(values)
    return tag + _varint(len(body)) + body


def _id_list(tag: bytes, values: Sequence[int] | None) -> bytes:
    """A `BrokerIdList` field: absent for None, present (if empty) for a tuple."""
    if values is None:
        return b""
    inner = _packed(b"\x0a", values)
    return tag + _varint(len(inner)) + inner


def _int32(tag: bytes, value: int) -> bytes:
    return tag + _varint(value) if value else b""


def partition_record_bytes(record: PartitionRecord) -> bytes:
    body = b"".join(
        (
            _TOPIC_ID,
            record.topic_id.bytes,
            _int32(b"\x10", record.partition_id),
            _packed(b"\x1a", record.replicas),
            _packed(b"\x22", record.isr),
            _int32(b"\x28", record.leader),
            _int32(b"\x30", record.leader_epoch),
            _int32(b"\x38", record.partition_epoch),
            _packed(b"\x42", record.removing_replicas),
            _packed(b"\x4a", record.adding_replicas),
            _int32(b"\x50", record.leader_recovery_state),
            _packed(b"\x5a", record.elr),
            _packed(b"\x62", record.last_known_elr),
        )
    )
    return _PARTITION + _varint(len(body)) + body


def partition_change_record_bytes(record: PartitionChangeRecord) -> bytes:
    leader = record.leader
    recovery = record.leader_recovery_state
    body = b"".join(
        (
            _TOPIC_ID,
            record.topic_id.bytes,
            _int32(b"\x10", record.partition_id),
            _id_list(b"\x1a", record.isr),
            b"" if leader == LEADER_UNCHANGED else b"\x20" + _varint(leader),
            _id_list(b"\x2a", record.replicas),
            _id_list(b"\x32", record.removing_replicas),
            _id_list(b"\x3a", record.adding_replicas),
            b"" if recovery == RECOVERY_STATE_UNCHANGED else b"\x40" + _varint(recovery),
            _id_list(b"\x4a", record.elr),
            _id_list(b"\x52", record.last_known_elr),
        )
    )
    return _PARTITION_CHANGE + _varint(len(body)) + body


# -- reading -------------------------------------------------------------------------------------

# What a field holds, by field number (`_read_fields`).
_NONE, _INT32, _IDS, _ID_LIST, _ID = range(5)
_PARTITION_FIELDS = (
    _NONE, _ID, _INT32, _IDS, _IDS, _INT32, _INT32, _INT32, _IDS, _IDS, _INT32, _IDS, _IDS,
)  # fmt: skip
_PARTITION_CHANGE_FIELDS = (
    _NONE, _ID, _INT32, _ID_LIST, _INT32, _ID_LIST, _ID_LIST, _ID_LIST, _INT32, _ID_LIST,
    _ID_LIST,
)  # fmt: skip
_INT32_MAX = (1 << 31) - 1
_NEGATIVE_INT32_LOW = (1 << 64) - (1 << 31)  # the 64-bit pattern of int32's lowest value


def read_partition_record(data: bytes, topic_id: Callable[[bytes], UUID]) -> PartitionRecord | None:
    """The record `data` holds if it is a PartitionRecord in canonical form (module Rules),
    else None; `topic_id` makes the id from its 16 bytes."""
    if data[0] != PARTITION_TAG:
        return None
    values = _read_fields(data, _PARTITION_FIELDS)
    if values is None or values[1] is None:
        return None
    _, raw_id, partition_id, replicas, isr, leader, leader_epoch, partition_epoch = values[:8]
    recovery = RECOVERY_STATE_OF.get(values[10] or 0)
    if (
        recovery is None
        or (leader is not None and leader < NO_LEADER)
        or (leader_epoch is not None and leader_epoch < 0)
        or (partition_epoch is not None and partition_epoch < 0)
        or (partition_id is not None and partition_id < 0)
    ):
        return None
    return PartitionRecord(
        topic_id(raw_id),
        partition_id or 0,
        replicas or (),
        isr or (),
        leader or 0,
        leader_epoch or 0,
        partition_epoch or 0,
        values[8] or (),
        values[9] or (),
        recovery,
        values[11] or (),
        values[12] or (),
    )


def read_partition_change_record(
    data: bytes, topic_id: Callable[[bytes], UUID]
) -> PartitionChangeRecord | None:
    """As `read_partition_record`, for a PartitionChangeRecord."""
    if data[0] != PARTITION_CHANGE_TAG:
        return None
    values = _read_fields(data, _PARTITION_CHANGE_FIELDS)
    if values is None or values[1] is None:
        return None
    _, raw_id, partition_id, isr, leader, replicas, removing, adding, recovery = values[:9]
    if (
        (leader is not None and leader < NO_LEADER)
        or (partition_id is not None and partition_id < 0)
        or (recovery is not None and recovery not in RECOVERY_STATE_OF)
    ):
        return None
    return PartitionChangeRecord(
        topic_id(raw_id),
        partition_id or 0,
        isr,
        LEADER_UNCHANGED if leader is None else leader,
        replicas,
        removing,
        adding,
        RECOVERY_STATE_UNCHANGED if recovery is None else recovery,
        values[9],
        values[10],
    )


def _read_fields(data: bytes, kinds: tuple[int, ...]) -> list[Any] | None:
    """The fields of the one message `data` holds (a oneof tag, its length, its body), by
    field number (None: absent); None unless the body is canonical (module Rules)."""
    end = len(data)
    size = _varint_at(data, 1, end)
    if size is None or size[0] < 0 or size[0] + size[1] != end:
        return None
    position = size[1]
    count = len(kinds)
    values: list[Any] = [None] * count
    last = 0
    while position < end:
        tag = data[position]
        field = tag >> 3
        if tag >= 0x80 or field <= last or field >= count or position + 1 >= end:
            return None
        last = field
        kind = kinds[field]
        # Most values and lengths are one byte: read in line, the rest by `_varint_at`.
        value = data[position + 1]
        if value < 0x80:
            position += 2
        else:
            read = _varint_at(data, position + 1, end)
            if read is None:
                return None
            value, position = read
        if kind == _INT32:
            if tag & 7 != 0:
                return None
            values[field] = value
            continue
        stop = position + value
        if tag & 7 != 2 or kind == _NONE or value < 0 or stop > end:
            return None
        if kind == _ID:
            if value != 16:
                return None
            values[field] = data[position:stop]
        elif kind == _IDS:
            values[field] = _ids_at(data, position, stop)
        elif value == 0:  # an empty BrokerIdList: present, no ids
            values[field] = ()
        else:  # a BrokerIdList holding its one packed field, and nothing else
            if data[position] != 0x0A:
                return None
            inner = _varint_at(data, position + 1, stop)
            if inner is None or inner[0] < 0 or inner[0] + inner[1] != stop:
                return None
            values[field] = _ids_at(data, inner[1], stop)
        if values[field] is None:
            return None
        position = stop
    return values


def _ids_at(data: bytes, start: int, stop: int) -> tuple[int, ...] | None:
    """The packed broker ids in data[start:stop]; None if one is not a non-negative int32."""
    chunk = data[start:stop]
    if chunk.isascii():  # every id one byte
        return tuple(chunk)
    ids = []
    position = start
    while position < stop:
        read = _varint_at(data, position, stop)
        if read is None or read[0] < 0:
            return None
        value, position = read
        ids.append(value)
    return tuple(ids)


def _varint_at(data: bytes, position: int, end: int) -> tuple[int, int] | None:
    """(the int32 or length at `position`, the position after it); None for a varint that
    runs past `end`, is longer than ten bytes, or holds no int32."""
    if position >= end:
        return None
    byte = data[position]
    if byte < 0x80:
        return byte, position + 1
    if data.startswith(_MINUS_ONE, position):  # no leader: ten bytes, read at once
        return -1, position + 10
    value = shift = 0
    while True:
        if position >= end or shift > 63:
            return None
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            break
    if value <= _INT32_MAX:
        return value, position
    if _NEGATIVE_INT32_LOW <= value <= _UINT64:
        return value - (1 << 64), position
    return None
