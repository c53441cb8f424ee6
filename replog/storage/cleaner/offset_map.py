"""The log cleaner's key map: each key's latest offset in the dirty section, within a memory bound.

Rules (Kafka's `SkimpyOffsetMap`):
- A key is stored by its MD5 digest (16 bytes) with an 8-byte offset: 24 bytes an entry, so a
  dedupe buffer of `log.cleaner.dedupe.buffer.size` bytes has `buffer // 24` slots, in one
  anonymous memory mapping: the map's memory is at most the buffer, and only the pages its
  keys touched are resident (a zeroed 128 MiB `bytearray` took 0.44 s of the interpreter's
  lock to make, which every request on the event loop would have waited for). Two keys
  with one digest count as one (Kafka accepts that risk too).
- Until a pass's keys would take more than a quarter of the buffer in a dict (`KEY_ENTRY_BYTES`
  an entry beside the key's own bytes, an estimate above CPython's), they are kept in a dict
  of key -> offset instead, the buffer untouched; past that they move into the buffer, which
  serves the rest of the pass. A dict answers a lookup without hashing the key with MD5 or
  probing the buffer in Python (measured: 0.05 against 0.9 us a lookup, and no page of the
  buffer to fault in each pass), the same answers but for the digest collision above.
- A pass fills the map to at most `load_factor` (`log.cleaner.io.buffer.load.factor`, 0.9) of
  its slots (`max_entries`); a log whose dirty keys do not fit is cleaned in several passes,
  each up to the offset the map reached (`latest_offset`).
- `put` keeps the larger offset of a key (a dirty section is read in offset order, so that is
  the later one); `get` answers -1 for a key not in the map. The map counts as full at
  `max_entries` keys whether the next key is new or not (Kafka's check is on the size).
- `put_records` puts a batch's records and `lookup` gives the filter's loop the dict's own
  `get`: the same answers as `put` and `get` a record, without a Python call a record
  (measured: a pass over a log all dirty about a fifth less CPU, bench/cleaner_pass.py's
  shapes about 5% less).
- Superseded ranges: given ascending offsets (`watch`: a pass's segments' base offsets), the
  map notes for each range [bases[i], bases[i+1]) whether it held an offset the map answers no
  longer, a put of its key at another offset having taken its place (`superseded`). A range
  not superseded had each key put from it still answered with the offset put: the cleaner
  copies such a segment's batches without looking at their records again. A note costs only a
  put that finds its key (a bisection); a digest collision counts as a key found.
- Pure: no I/O, no clock. The map is cleared and reused between passes.
"""

from __future__ import annotations

import hashlib
import mmap
import struct
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Sequence

from replog.record.record_spans import Span

HASH_BYTES = 16  # MD5, Kafka's default `hashAlgorithm`
ENTRY_BYTES = HASH_BYTES + 8
DEFAULT_LOAD_FACTOR = 0.9
NOT_FOUND = -1
# A dict entry's memory beside its key's bytes: the key's object header (33), the offset's int
# (32) and the dict's table and index (up to about 50), rounded up.
KEY_ENTRY_BYTES = 128
_EMPTY = bytes(HASH_BYTES)
_OFFSET = struct.Struct(">q")
_md5 = hashlib.md5


class OffsetMapFullError(Exception):
    """A `put` of a new key into a map already at its `max_entries`."""


class OffsetMap:
    """Key -> latest offset, holding at most `max_entries` keys: in a dict while they are few,
    else by digest in one preallocated buffer of `slots` 24-byte entries (open addressing with
    linear probing, as Kafka's).

    A buffer entry is its key's digest then its offset (big-endian int64); an all-zero digest
    marks an empty slot (a key whose MD5 is all zeros would read as absent: Kafka takes the
    same 2^-128 chance). The buffer bounds the map's memory, whatever the keys' sizes.
    """

    __slots__ = (
        "_buffer",
        "_count",
        "_keys",
        "_keys_budget",
        "_keys_bytes",
        "_range_bases",
        "_ranges_superseded",
        "_size",
        "latest_offset",
        "max_entries",
        "slots",
    )

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
        self._size = self.slots * ENTRY_BYTES
        self._buffer = _zeroed(self._size)
        self._count = 0
        self._keys: dict[bytes, int] | None = {}  # None once the keys are in the buffer
        self._keys_bytes = 0
        self._keys_budget = memory_bytes // 4
        self._range_bases: Sequence[int] = ()  # `watch`'s, until `clear`
        self._ranges_superseded = bytearray()
        self.latest_offset = NOT_FOUND  # the largest offset put (or noted) since `clear`

    def __len__(self) -> int:
        return self._count

    @property
    def is_full(self) -> bool:
        return self._count >= self.max_entries

    def put(self, key: bytes, offset: int) -> None:
        """Record `offset` as `key`'s latest; OffsetMapFullError for a new key once full."""
        keys = self._keys
        if keys is not None:
            known = keys.get(key)
            if known is not None:
                if offset > known:
                    keys[key] = offset
                if offset != known:
                    self._superseded(known if offset > known else offset)
            else:
                if self._count >= self.max_entries:
                    raise OffsetMapFullError(f"the offset map holds its {self.max_entries} keys")
                self._keys_bytes += len(key) + KEY_ENTRY_BYTES
                if self._keys_bytes <= self._keys_budget:
                    keys[key] = offset
                    self._count += 1
                else:
                    self._into_buffer(keys)
                    self._put_digest(_md5(key, usedforsecurity=False).digest(), offset)
        else:
            self._put_digest(_md5(key, usedforsecurity=False).digest(), offset)
        if offset > self.latest_offset:  # `update_latest_offset`, inlined: once a record
            self.latest_offset = offset

    def put_records(self, base_offset: int, spans: Sequence[Span], start: int) -> bool:
        """`put` of each keyed record of the batch at `base_offset` (`spans`, its records in
        order) whose offset is at least `start`, while the map is not full before it: False
        at the first such record it found the map full for (that record and the rest not
        put). One loop a batch, the dict's form inline: this runs for every record of a dirty
        section (module Rules)."""
        keys = self._keys
        records: Iterator[Span] = iter(spans)
        if keys is None:
            return self._put_records_by_digest(base_offset, records, start)
        count, max_entries = self._count, self.max_entries
        keys_bytes, budget = self._keys_bytes, self._keys_budget
        latest = self.latest_offset
        known_offset = keys.get
        for span in records:
            key = span[2]
            if key is None or (offset := base_offset + span[0]) < start:
                continue
            if count >= max_entries:
                self._count, self._keys_bytes, self.latest_offset = count, keys_bytes, latest
                return False
            known = known_offset(key)
            if known is None:
                keys_bytes += len(key) + KEY_ENTRY_BYTES
                if keys_bytes > budget:  # as `put`: from this key on, the buffer holds them
                    self._count, self._keys_bytes = count, keys_bytes
                    self.latest_offset = max(latest, offset)
                    self._into_buffer(keys)
                    self._put_digest(_md5(key, usedforsecurity=False).digest(), offset)
                    return self._put_records_by_digest(base_offset, records, start)
                keys[key] = offset
                count += 1
            elif offset != known:
                if offset > known:
                    keys[key] = offset
                self._superseded(known if offset > known else offset)
            if offset > latest:
                latest = offset
        self._count, self._keys_bytes, self.latest_offset = count, keys_bytes, latest
        return True

    def _put_records_by_digest(self, base_offset: int, spans: Iterable[Span], start: int) -> bool:
        """`put_records` once the buffer holds the keys."""
        for span in spans:
            key = span[2]
            if key is None or (offset := base_offset + span[0]) < start:
                continue
            if self._count >= self.max_entries:
                return False
            self._put_digest(_md5(key, usedforsecurity=False).digest(), offset)
            if offset > self.latest_offset:
                self.latest_offset = offset
        return True

    def _into_buffer(self, keys: dict[bytes, int]) -> None:
        """Move the dict's keys into the buffer, which holds every key from now on."""
        self._keys = None
        self._count = 0
        for key, offset in keys.items():
            self._put_digest(_md5(key, usedforsecurity=False).digest(), offset)

    def _put_digest(self, digest: bytes, offset: int) -> None:
        buffer = self._buffer
        position = int.from_bytes(digest[:8], "big") % self.slots * ENTRY_BYTES
        while True:  # `get`'s probe
            stored = buffer[position : position + HASH_BYTES]
            if stored == digest:
                known = _OFFSET.unpack_from(buffer, position + HASH_BYTES)[0]
                if offset > known:
                    _OFFSET.pack_into(buffer, position + HASH_BYTES, offset)
                if offset != known:
                    self._superseded(known if offset > known else offset)
                return
            if stored == _EMPTY:
                if self._count >= self.max_entries:
                    raise OffsetMapFullError(f"the offset map holds its {self.max_entries} keys")
                buffer[position : position + HASH_BYTES] = digest
                _OFFSET.pack_into(buffer, position + HASH_BYTES, offset)
                self._count += 1
                return
            position += ENTRY_BYTES
            if position == self._size:
                position = 0

    def watch(self, bases: Sequence[int]) -> None:
        """Note, until `clear`, which of the ranges starting at `bases` (ascending) a put
        superseded an offset of (module Rules)."""
        self._range_bases = bases
        self._ranges_superseded = bytearray(len(bases))

    def superseded(self, index: int) -> bool:
        """Whether an offset put from the range starting at `bases[index]` (`watch`) is not
        its key's answer any more."""
        return bool(self._ranges_superseded[index])

    def _superseded(self, offset: int) -> None:
        """The record put at `offset` is not its key's answer any more."""
        index = bisect_right(self._range_bases, offset) - 1
        if index >= 0:
            self._ranges_superseded[index] = 1

    def update_latest_offset(self, offset: int) -> None:
        """Note that the map covers the log up to `offset` (a batch without keys to put)."""
        if offset > self.latest_offset:
            self.latest_offset = offset

    def get(self, key: bytes) -> int:
        """`key`'s latest offset, or NOT_FOUND (-1)."""
        keys = self._keys
        if keys is not None:
            return keys.get(key, NOT_FOUND)
        digest = _md5(key, usedforsecurity=False).digest()
        buffer = self._buffer
        position = int.from_bytes(digest[:8], "big") % self.slots * ENTRY_BYTES
        while True:  # linear probing from the digest's slot to its entry or an empty one
            stored = buffer[position : position + HASH_BYTES]
            if stored == digest:
                offset: int = _OFFSET.unpack_from(buffer, position + HASH_BYTES)[0]
                return offset
            if stored == _EMPTY:
                return NOT_FOUND
            position += ENTRY_BYTES
            if position == self._size:
                position = 0

    def lookup(self) -> Callable[[bytes, int], int]:
        """`get` for a loop over many keys, called with the answer for an absent key
        (`NOT_FOUND`): while the keys are in the dict, the dict's own `get`, no call of
        Python's a key; else a probe of the buffer. Valid until the next `put` or `clear`."""
        keys = self._keys
        if keys is not None:
            return keys.get
        return self._get_or

    def _get_or(self, key: bytes, absent: int) -> int:
        offset = self.get(key)
        return absent if offset == NOT_FOUND else offset

    def clear(self) -> None:
        if self._keys is None:  # else the buffer is still all zeros
            self._buffer.close()
            self._buffer = _zeroed(self._size)
        self._keys = {}
        self._keys_bytes = 0
        self._count = 0
        self._range_bases = ()
        self._ranges_superseded = bytearray()
        self.latest_offset = NOT_FOUND

    @property
    def utilization(self) -> float:
        """The share of the slots in use (Kafka's `utilization`)."""
        return self._count / self.slots


def _zeroed(size: int) -> mmap.mmap:
    """`size` zero bytes the kernel provides page by page as they are written."""
    return mmap.mmap(-1, size)
