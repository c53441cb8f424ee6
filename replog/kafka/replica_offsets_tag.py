"""Replog's tagged fields on Kafka's DescribeLogDirs partitions (v2 and up): the replica's log
start offset, log end offset and high watermark, and a compacted log's dirty ratio, which
`replog log-dirs describe` prints next to Kafka's columns so that the replicas' progress (and
what the log cleaner has left to do) can be compared.

Kafka's clients skip a tag they do not know (KIP-482), so the answer stays Kafka's.

Rules: tags far above the small tags Kafka gives its own fields. `REPLICA_OFFSETS_TAG`'s value
is three int64s, in that order; `DIRTY_RATIO_TAG`'s one float64 in [0, 1], sent only for a log
whose cleanup.policy has `compact`. A value that does not decode is ignored, as an unknown tag
would be.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import NamedTuple

REPLICA_OFFSETS_TAG = 10_001
DIRTY_RATIO_TAG = 10_002
_VALUE = struct.Struct(">qqq")
_RATIO = struct.Struct(">d")


class ReplicaOffsets(NamedTuple):
    log_start_offset: int
    log_end_offset: int
    high_watermark: int


def encode(offsets: ReplicaOffsets) -> tuple[int, bytes]:
    """The (tag, value) to add to a DescribeLogDirsPartition's `unknown_tagged_fields`."""
    return REPLICA_OFFSETS_TAG, _VALUE.pack(*offsets)


def decode(tagged: Iterable[tuple[int, bytes]]) -> ReplicaOffsets | None:
    """The offsets a partition's `unknown_tagged_fields` carry, or None."""
    for tag, value in tagged:
        if tag == REPLICA_OFFSETS_TAG and len(value) == _VALUE.size:
            return ReplicaOffsets(*_VALUE.unpack(value))
    return None


def encode_dirty_ratio(ratio: float) -> tuple[int, bytes]:
    """The (tag, value) of a compacted log's dirty ratio."""
    return DIRTY_RATIO_TAG, _RATIO.pack(ratio)


def decode_dirty_ratio(tagged: Iterable[tuple[int, bytes]]) -> float | None:
    """The dirty ratio a partition's `unknown_tagged_fields` carry, or None (not compacted, or
    a broker without the tag)."""
    for tag, value in tagged:
        if tag == DIRTY_RATIO_TAG and len(value) == _RATIO.size:
            (ratio,) = _RATIO.unpack(value)
            return float(ratio) if 0.0 <= ratio <= 1.0 else None
    return None
