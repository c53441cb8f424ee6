"""The bytes a consumer group's members exchange through the coordinator when the group's
protocol type is "consumer": Kafka's ConsumerProtocolAssignment, which the coordinator relays
without reading; tools read it to show who owns which partition.

    assignment, v0 to v3:  version:int16  [topic:STRING  [partition:int32]]  user_data:BYTES?

Rules: versions 0 to 3 share this layout (v1+ only add fields to the subscription); bytes that
do not parse (or a protocol type other than "consumer") give no partitions rather than an error:
a tool shows "-" for such a member.
"""

from __future__ import annotations

import struct

CONSUMER_PROTOCOL_TYPE = "consumer"
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


def assigned_partitions(data: bytes) -> list[tuple[str, int]]:
    """The (topic, partition) pairs of a ConsumerProtocolAssignment; [] if it does not parse."""
    try:
        return _parse(data)
    except (struct.error, UnicodeDecodeError, ValueError):
        return []


def _parse(data: bytes) -> list[tuple[str, int]]:
    position = _INT16.size  # the version: every known one has this layout
    (topics,) = _INT32.unpack_from(data, position)
    position += _INT32.size
    pairs: list[tuple[str, int]] = []
    for _ in range(topics):
        (length,) = _INT16.unpack_from(data, position)
        position += _INT16.size
        if length < 0 or position + length > len(data):
            raise ValueError("bad topic name length")
        topic = data[position : position + length].decode("utf-8")
        position += length
        (count,) = _INT32.unpack_from(data, position)
        position += _INT32.size
        if count < 0:
            raise ValueError("bad partition count")
        for _ in range(count):
            (partition,) = _INT32.unpack_from(data, position)
            position += _INT32.size
            pairs.append((topic, partition))
    return pairs
