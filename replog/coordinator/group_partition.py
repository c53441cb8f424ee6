"""Which `__consumer_offsets` partition keeps a group: Kafka's exact rule, so a group's
offsets live in the same partition number as they would on a Kafka cluster.

Rule (Kafka's `partitionFor`): `abs(group_id.hashCode()) % partition_count`, where hashCode is
Java's `String.hashCode` (h = 31 * h + c over the UTF-16 code units, wrapping at 32 bits) and
abs is Kafka's `Utils.abs`, which maps Integer.MIN_VALUE to 0 instead of leaving it negative.

Worked example: "hello" hashes to 99162322, so with 50 partitions its group lives in
partition 22; "polygenelubricants" hashes to -2147483648 (Integer.MIN_VALUE), so it lives in
partition 0.
"""

from __future__ import annotations

_INT32_MIN = -(1 << 31)
_UINT32_MASK = (1 << 32) - 1


def java_string_hashcode(text: str) -> int:
    """Java's `String.hashCode` of `text`, as a signed 32-bit integer."""
    h = 0
    data = text.encode("utf-16-be")
    # Characters outside the BMP are two code units (a surrogate pair) in Java, as here.
    for index in range(0, len(data), 2):
        h = (31 * h + ((data[index] << 8) | data[index + 1])) & _UINT32_MASK
    return h - (1 << 32) if h & 0x8000_0000 else h


def kafka_abs(n: int) -> int:
    """Kafka's `Utils.abs`: |n|, except that Integer.MIN_VALUE gives 0."""
    return 0 if n == _INT32_MIN else abs(n)


def partition_for_group(group_id: str, partition_count: int) -> int:
    """The `__consumer_offsets` partition of `group_id` among `partition_count`."""
    if partition_count < 1:
        raise ValueError(f"__consumer_offsets has {partition_count} partitions; needs at least 1")
    return kafka_abs(java_string_hashcode(group_id)) % partition_count
