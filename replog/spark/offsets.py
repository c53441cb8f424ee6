"""Streaming offsets: `{"topic": {"partition": next_offset}}` with one fixed key order, pure.

Spark stores the dict a stream reader returns as `json.dumps(offset)` (no `sort_keys`) and
compares offsets as those strings, so the same positions must always produce the same string:
topics sorted by name, partitions by number, partition keys as strings, values as ints. An
order that changes between calls makes Spark see "new data" forever (empty micro-batches and
a `processAllAvailable()` that never returns).

Rules:
- `to_offset_dict` is the only way offsets leave the source; `from_offset_dict` the only way
  they come back (from Spark's checkpoint or from its calls), checked, naming what is wrong.
- The value is the *next* offset to read, as in Spark's Kafka source and a consumer's commit.
"""

from __future__ import annotations

from collections.abc import Mapping

from replog.common import TopicPartitionKey
from replog.spark.errors import SourceOptionError
from replog.spark.options import Positions


def to_offset_dict(positions: Mapping[TopicPartitionKey, int]) -> dict[str, dict[str, int]]:
    """Spark's offset dict, in the fixed order (module docstring)."""
    result: dict[str, dict[str, int]] = {}
    for topic, partition in sorted(positions):
        result.setdefault(topic, {})[str(partition)] = int(positions[(topic, partition)])
    return result


def from_offset_dict(offset: object, what: str = "offset") -> Positions:
    """Positions from an offset dict Spark hands back; raises naming the bad entry."""
    if not isinstance(offset, Mapping):
        raise SourceOptionError(f"{what} {offset!r} is not a {{topic: {{partition: offset}}}} map")
    positions: Positions = {}
    for topic, partitions in offset.items():
        if not isinstance(topic, str) or not isinstance(partitions, Mapping):
            raise SourceOptionError(f"{what}: entry {topic!r}: {partitions!r} is not a topic map")
        for key, value in partitions.items():
            try:
                partition = int(key)
            except (TypeError, ValueError):
                partition = -1
            if partition < 0:
                raise SourceOptionError(f"{what}: {key!r} of topic {topic!r} is not a partition")
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise SourceOptionError(
                    f"{what}: {topic}-{partition} has {value!r}, not an offset >= 0"
                )
            positions[(topic, partition)] = value
    return positions


def describe(positions: Mapping[TopicPartitionKey, int]) -> str:
    """`t-0@12, t-1@4`, for messages and logs."""
    return ", ".join(f"{t}-{p}@{positions[(t, p)]}" for t, p in sorted(positions))
