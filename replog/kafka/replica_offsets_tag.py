"""Replog's tagged field on Kafka's DescribeLogDirs partitions (v2 and up): the replica's log
start offset, log end offset and high watermark, which `replog log-dirs describe` prints next to
Kafka's columns so that the replicas' progress can be compared.

Kafka's clients skip a tag they do not know (KIP-482), so the answer stays Kafka's.

Rules: tag `REPLICA_OFFSETS_TAG` (far above the small tags Kafka gives its own fields); its
value is three int64s, in that order. A value that does not decode is ignored, as an unknown
tag would be.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import NamedTuple

REPLICA_OFFSETS_TAG = 10_001
_VALUE = struct.Struct(">qqq")


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
