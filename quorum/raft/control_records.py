"""The LeaderChange control batch a new leader appends at its epoch start offset.

Raft lets a leader commit entries of earlier epochs only together with one of its own epoch
(commit a no-op in your own term). The LeaderChange batch is that entry: once it commits, every
earlier entry in the leader's log is committed too, and the new leader exposes a high watermark.
It also records who leads and who voted, for operators reading the log.

Grammar (a control batch, `is_control` set, with one record)::

    key   = version:int16 type:int16            ; version 0, type 2 (LEADER_CHANGE)
    value = version:int16 leader_id:int32
            voter_count:int32 voter_id:int32{voter_count}
            granting_count:int32 granting_id:int32{granting_count}
    (all big-endian)

Worked example: leader 1 of voters {1, 2, 3}, elected by 1 and 2, has the value
``0000 00000001 00000003 00000001 00000002 00000003 00000002 00000001 00000002``.

The key follows Kafka's control-record key (version, type) and type 2 is Kafka's LEADER_CHANGE;
the value is replog's own fixed-width encoding, not Kafka's flexible-version message.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

from replog.record import BatchBuilder

CONTROL_KEY_VERSION = 0
LEADER_CHANGE_TYPE = 2
LEADER_CHANGE_VERSION = 0

_KEY = struct.Struct(">hh")
_HEAD = struct.Struct(">hi")
_COUNT = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class LeaderChangeRecord:
    leader_id: int
    voters: tuple[int, ...]
    granting_voters: tuple[int, ...]


def _encode_ids(ids: Iterable[int]) -> bytes:
    ordered = sorted(ids)
    return _COUNT.pack(len(ordered)) + struct.pack(f">{len(ordered)}i", *ordered)


def encode_leader_change(record: LeaderChangeRecord) -> tuple[bytes, bytes]:
    """(key, value) of a LeaderChange control record."""
    key = _KEY.pack(CONTROL_KEY_VERSION, LEADER_CHANGE_TYPE)
    value = (
        _HEAD.pack(LEADER_CHANGE_VERSION, record.leader_id)
        + _encode_ids(record.voters)
        + _encode_ids(record.granting_voters)
    )
    return key, value


def decode_leader_change(key: bytes, value: bytes) -> LeaderChangeRecord:
    """The record encoded by `encode_leader_change`; ValueError for anything else."""
    try:
        version, record_type = _KEY.unpack(key)
        if (version, record_type) != (CONTROL_KEY_VERSION, LEADER_CHANGE_TYPE):
            raise ValueError(f"control key {(version, record_type)} is not LeaderChange")
        value_version, leader_id = _HEAD.unpack_from(value, 0)
        if value_version != LEADER_CHANGE_VERSION:
            raise ValueError(f"LeaderChange version {value_version} is not supported")
        position = _HEAD.size
        lists: list[tuple[int, ...]] = []
        for _ in range(2):
            (count,) = _COUNT.unpack_from(value, position)
            position += _COUNT.size
            lists.append(struct.unpack_from(f">{count}i", value, position))
            position += 4 * count
    except struct.error as e:
        raise ValueError(f"truncated LeaderChange record: {e}") from None
    if position != len(value):
        raise ValueError(f"LeaderChange record has {len(value) - position} trailing bytes")
    return LeaderChangeRecord(leader_id, lists[0], lists[1])


def leader_change_batch(
    record: LeaderChangeRecord, *, base_offset: int, quorum_epoch: int, timestamp_ms: int
) -> bytes:
    """The control batch holding `record`, stamped with its offset and epoch."""
    key, value = encode_leader_change(record)
    builder = BatchBuilder(
        is_control=True, base_offset=base_offset, partition_leader_epoch=quorum_epoch
    )
    builder.append(timestamp_ms, key, value)
    return builder.build()
