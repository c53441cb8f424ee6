"""The log cleaner's key map: each key's latest offset in the dirty section, within a memory bound.

Rules (Kafka's `SkimpyOffsetMap`):
- A key is stored by its MD5 digest (16 bytes) with an 8-byte offset: 24 bytes an entry, so a
  dedupe buffer of `log.cleaner.dedupe.buffer.size` bytes has `buffer // 24` slots, in one
  anonymous memory mapping: the map's memory is at most the buffer, and only the pages its
  keys touched are resident (a zeroed 128 MiB `bytearray` took 0.44 s of the interpreter's
  lock to make, which every request on the event loop would have waited for). Two keys
  with one digest count as one (Kafka accepts that risk too).
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
import mmap
import struct

HASH_BYTES = 16  # MD5, Kafka's default `hashAlgorithm`
ENTRY_BYTES = HASH_BYTES + 8
DEFAULT_LOAD_FACTOR = 0.9
NOT_FOUND = -1
_EMPTY = bytes(HASH_BYTES)
_OFFSET = struct.Struct(">q")


class OffsetMapFullError(Exception):
    """A `put` of a new key into a map already at its `max_entries`."""


class OffsetMap:
    """Key digest -> latest offset in one preallocated buffer of `slots` 24-byte entries
    (open addressing with linear probing, as Kafka's), holding at most `max_entries` keys.

    An entry is its key's digest then its offset (big-endian int64); an all-zero digest marks
    an empty slot (a key whose MD5 is all zeros would read as absent: Kafka takes the same
    2^-128 chance). The buffer is the whole of the map's memory, whatever the keys' sizes.
    """

    __slots__ = ("_buffer", "_count", "latest_offset", "max_entries", "slots")

    def __init__(self, memory_bytes: int, load_factor: float = DEFAULT_LOAD_FACTOR) -> None:
        if memory_bytes < ENTRY_BYTES:
            raise ValueError(
                f"the dedupe buffer of {memory_bytes} bytes holds no {ENTRY_BYTES}-byte entry"
            )
        if not 0 < load_factor <= 1:
            raise ValueError(f"load factor {load_factor} is outside (0, 1]")
        self.slots = memory_bytes // ENTRY_BYTES
        # At least one slot always stays empty, so a lookup of an absent key ends.
        self.max_entries = max(1, min(int(self.slots * load_factor), self.slots - 1))
        self._buffer = _zeroed(self.slots * ENTRY_BYTES)
        self._count = 0
        self.latest_offset = NOT_FOUND  # the largest offset put (or noted) since `clear`

    def __len__(self) -> int:
        return self._count

    @property
    def is_full(self) -> bool:
        return self._count >= self.max_entries

    def _find(self, digest: bytes) -> tuple[int, bool]:
        """(the byte position of `digest`'s entry, or of the empty slot where it would go;
        whether it is there)."""
        buffer, slots = self._buffer, self.slots
        slot = int.from_bytes(digest[:8], "big") % slots
        while True:
            position = slot * ENTRY_BYTES
            stored = buffer[position : position + HASH_BYTES]
            if stored == digest:
                return position, True
            if stored == _EMPTY:
                return position, False
            slot = slot + 1 if slot + 1 < slots else 0

    def put(self, key: bytes, offset: int) -> None:
        """Record `offset` as `key`'s latest; OffsetMapFullError for a new key once full."""
        digest = hashlib.md5(key, usedforsecurity=False).digest()
        position, found = self._find(digest)
        if found:
            if offset > _OFFSET.unpack_from(self._buffer, position + HASH_BYTES)[0]:
                _OFFSET.pack_into(self._buffer, position + HASH_BYTES, offset)
        else:
            if self._count >= self.max_entries:
                raise OffsetMapFullError(f"the offset map holds its {self.max_entries} keys")
            self._buffer[position : position + HASH_BYTES] = digest
            _OFFSET.pack_into(self._buffer, position + HASH_BYTES, offset)
            self._count += 1
        if offset > self.latest_offset:  # `update_latest_offset`, inlined: once a record
            self.latest_offset = offset

    def update_latest_offset(self, offset: int) -> None:
        """Note that the map covers the log up to `offset` (a batch without keys to put)."""
        if offset > self.latest_offset:
            self.latest_offset = offset

    def get(self, key: bytes) -> int:
        """`key`'s latest offset, or NOT_FOUND (-1)."""
        position, found = self._find(hashlib.md5(key, usedforsecurity=False).digest())
        if not found:
            return NOT_FOUND
        offset: int = _OFFSET.unpack_from(self._buffer, position + HASH_BYTES)[0]
        return offset

    def clear(self) -> None:
        if self._count:  # else every slot is empty already (nothing was put since)
            size = len(self._buffer)
            self._buffer.close()
            self._buffer = _zeroed(size)
        self._count = 0
        self.latest_offset = NOT_FOUND

    @property
    def utilization(self) -> float:
        """The share of the slots in use (Kafka's `utilization`)."""
        return self._count / self.slots


def _zeroed(size: int) -> mmap.mmap:
    """`size` zero bytes the kernel provides page by page as they are written."""
    return mmap.mmap(-1, size)
