"""The log cleaner's key map: each key's latest offset in the dirty section, within a memory bound.

Rules (Kafka's `SkimpyOffsetMap`):
- A key is stored by its MD5 digest (16 bytes) with an 8-byte offset: 24 bytes an entry, so a
  dedupe buffer of `log.cleaner.dedupe.buffer.size` bytes has `buffer // 24` slots. Two keys
  with one digest count as one (Kafka accepts that risk too: 2^-64 per pair at worst).
- A pass fills the map to at most `load_factor` (`log.cleaner.io.buffer.load.factor`, 0.9) of
  its slots (`max_entries`); a log whose dirty keys do not fit is cleaned in several passes,
  each up to the offset the map reached (`latest_offset`).
- `put` keeps the larger offset of a key (a dirty section is read in offset order, so that is
  the later one); `get` answers -1 for a key not in the map. The map counts as full at
  `max_entries` keys whether the next key is new or not (Kafka's check is on the size).
- Pure: no I/O, no clock. The map is cleared and reused between passes.
"""

from __future__ import annotations

import hashlib

HASH_BYTES = 16  # MD5, Kafka's default `hashAlgorithm`
ENTRY_BYTES = HASH_BYTES + 8
DEFAULT_LOAD_FACTOR = 0.9
NOT_FOUND = -1


class OffsetMapFullError(Exception):
    """A `put` of a new key into a map already at its `max_entries`."""


class OffsetMap:
    """Key digest -> latest offset, holding at most `max_entries` keys."""

    __slots__ = ("_entries", "latest_offset", "max_entries", "slots")

    def __init__(self, memory_bytes: int, load_factor: float = DEFAULT_LOAD_FACTOR) -> None:
        if memory_bytes < ENTRY_BYTES:
            raise ValueError(
                f"the dedupe buffer of {memory_bytes} bytes holds no {ENTRY_BYTES}-byte entry"
            )
        if not 0 < load_factor <= 1:
            raise ValueError(f"load factor {load_factor} is outside (0, 1]")
        self.slots = memory_bytes // ENTRY_BYTES
        self.max_entries = max(1, int(self.slots * load_factor))
        self._entries: dict[bytes, int] = {}
        self.latest_offset = NOT_FOUND  # the largest offset put (or noted) since `clear`

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def is_full(self) -> bool:
        return len(self._entries) >= self.max_entries

    def put(self, key: bytes, offset: int) -> None:
        """Record `offset` as `key`'s latest; OffsetMapFullError for a new key once full."""
        digest = hashlib.md5(key, usedforsecurity=False).digest()
        entries = self._entries
        known = entries.get(digest)
        if known is None:
            if len(entries) >= self.max_entries:
                raise OffsetMapFullError(f"the offset map holds its {self.max_entries} keys")
            entries[digest] = offset
        elif offset > known:
            entries[digest] = offset
        self.update_latest_offset(offset)

    def update_latest_offset(self, offset: int) -> None:
        """Note that the map covers the log up to `offset` (a batch without keys to put)."""
        if offset > self.latest_offset:
            self.latest_offset = offset

    def get(self, key: bytes) -> int:
        """`key`'s latest offset, or NOT_FOUND (-1)."""
        return self._entries.get(hashlib.md5(key, usedforsecurity=False).digest(), NOT_FOUND)

    def clear(self) -> None:
        self._entries.clear()
        self.latest_offset = NOT_FOUND

    @property
    def utilization(self) -> float:
        """The share of the slots in use (Kafka's `utilization`)."""
        return len(self._entries) / self.slots
