"""The producer's default partitioner: Kafka's murmur2 for keyed records, sticky for null keys.

- Keyed records go to ``to_positive(murmur2(key)) % partition_count``: the same partition
  Kafka's Java client and kafka-python's `DefaultPartitioner` choose, so producers in any of
  the three languages agree on where a key lives. `murmur2` returns Kafka's signed 32-bit
  result (Java int arithmetic: every product wraps at 2**32, shifts are unsigned), and
  `to_positive` clears the sign bit rather than taking abs (abs(MIN_VALUE) overflows in Java).
- Null keys (and every key when `ignore_keys` is set, Kafka's ``partitioner.ignore.keys``) go
  to one "sticky" partition per topic until the accumulator completes a batch for it and calls
  `on_new_batch` (KIP-480): batches fill up instead of many partitions each getting a tiny
  one. A new sticky partition is random and differs from the previous one when the topic has
  more than one candidate; candidates are the partitions with a leader when `available` is
  given and not empty, else all partitions.

Worked example: ``murmur2(b"21")`` is -973932308, ``to_positive`` of that is 1173551340, so
key ``b"21"`` lands in partition 1173551340 % 3 = 0 of a 3-partition topic.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Sequence

from replog.errors import InvalidPartitionsError

__all__ = ["DefaultPartitioner", "murmur2", "to_positive"]

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's 32-bit murmur2 of `data` as a signed int (Java's `Utils.murmur2`)."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    words = length >> 2
    for k in struct.unpack_from(f"<{words}I", data):
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = length & 3
    if tail:
        rest = words << 2
        if tail == 3:
            h ^= data[rest + 2] << 16
        if tail >= 2:
            h ^= data[rest + 1] << 8
        h ^= data[rest]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(n: int) -> int:
    """`n` with the sign bit of its 32-bit form cleared (Kafka's `Utils.toPositive`)."""
    return n & 0x7FFFFFFF


class DefaultPartitioner:
    """murmur2 for keys, a sticky partition per topic for null keys (see the module docstring).

    No lock of its own: every state change is one dict assignment, so concurrent callers (a
    blocking producer's user threads) can at worst see two sticky choices for a topic race,
    which only spreads a few records over two partitions.
    """

    def __init__(self, *, ignore_keys: bool = False, rng: random.Random | None = None) -> None:
        self.ignore_keys = ignore_keys
        self._rng = rng or random.Random()
        self._sticky: dict[str, int] = {}

    def partition(
        self,
        topic: str,
        key_bytes: bytes | None,
        partition_count: int,
        *,
        available: Sequence[int] | None = None,
    ) -> int:
        if partition_count < 1:
            raise InvalidPartitionsError(f"topic {topic!r} has {partition_count} partitions")
        if key_bytes is not None and not self.ignore_keys:
            return to_positive(murmur2(key_bytes)) % partition_count
        sticky = self._sticky.get(topic)
        if sticky is None or sticky >= partition_count:
            sticky = self._choose(None, partition_count, available)
            self._sticky[topic] = sticky
        return sticky

    def on_new_batch(
        self,
        topic: str,
        prev_partition: int,
        partition_count: int,
        *,
        available: Sequence[int] | None = None,
    ) -> None:
        """A batch for `prev_partition` was completed: move the topic's sticky partition on.

        Only when `prev_partition` is still the sticky one, so a batch of a partition chosen
        by key (or an old sticky one) does not move it again.
        """
        if partition_count < 1:
            return
        current = self._sticky.get(topic)
        if current is None or current == prev_partition:
            self._sticky[topic] = self._choose(current, partition_count, available)

    def _choose(
        self, old: int | None, partition_count: int, available: Sequence[int] | None
    ) -> int:
        candidates = [p for p in available or () if 0 <= p < partition_count]
        if not candidates:
            candidates = list(range(partition_count))
        if old is not None and len(candidates) > 1:
            candidates = [p for p in candidates if p != old]
        return candidates[self._rng.randrange(len(candidates))]
