"""Shared machinery of the sparse segment indexes: sorted (key, value) entries kept in memory,
mirrored to a file of fixed-size big-endian entries.

Rules:
- Keys strictly increase. Entries are appended only at the end; truncation cuts from the end.
- The file holds exactly `entries * entry_size` bytes once flushed (Kafka's trimmed state), so
  Kafka reads replog's index files and the other way round.
- Appended entries are buffered in memory and written on `flush` / `close`. That is safe
  because an index is never trusted without its log being trusted: a crash makes the log
  recover every segment at or after the recovery point, and recovery rebuilds their indexes;
  segments below the recovery point were flushed, indexes included.
- Loading checks the file (length a multiple of the entry size, keys strictly increasing,
  values within bounds). A failed check raises `CorruptIndexError` naming the file; the segment
  then rebuilds the index from its log.

Theory of operation: Kafka memory-maps a preallocated file. Python gains nothing from mmap
for entries this small, so the index lives in two `array('q')` columns (8 bytes per number, no
per-entry objects) searched with `bisect`, and the file is only written and read whole.
"""

from __future__ import annotations

import struct
from abc import ABC, abstractmethod
from array import array
from bisect import bisect_left, bisect_right

from replog.errors import CorruptIndexError
from replog.storage.fs import FileSystem


class IndexFile(ABC):
    """Sorted fixed-size entries of one segment index, loaded lazily from `path`."""

    entry: struct.Struct  # set by subclasses: the on-disk layout of one entry

    def __init__(self, path: str, base_offset: int, entries_max: int, fs: FileSystem) -> None:
        self.path = path
        self.base_offset = base_offset
        self.entries_max = entries_max
        self._fs = fs
        self._keys = array("q")
        self._values = array("q")
        self._flushed_entries = 0  # how many entries the file holds
        self._loaded = False

    # --- subclass hooks: translate between in-memory (key, value) and file fields ------------

    @abstractmethod
    def _to_file(self, key: int, value: int) -> bytes:
        """The file bytes of one entry."""

    @abstractmethod
    def _from_file(self, first: int, second: int) -> tuple[int, int]:
        """(key, value) from the two unpacked file fields; raises CorruptIndexError."""

    @abstractmethod
    def _check_loaded(self, log_size: int) -> None:
        """Raise CorruptIndexError if the loaded entries cannot describe a log of this size."""

    # --- loading ------------------------------------------------------------------------------

    def load(self, log_size: int) -> None:
        """Read the file (missing = empty) and check it; idempotent."""
        if self._loaded:
            return
        raw = self._fs.read_bytes(self.path) or b""
        if len(raw) % self.entry.size:
            raise CorruptIndexError(
                f"{self.path}: length {len(raw)} is not a multiple of the "
                f"{self.entry.size}-byte entry size"
            )
        keys = array("q")
        values = array("q")
        previous = None
        for position, (first, second) in enumerate(self.entry.iter_unpack(raw)):
            key, value = self._from_file(first, second)
            if previous is not None and key <= previous:
                raise CorruptIndexError(
                    f"{self.path}: entry {position} key {key} does not increase past {previous}"
                )
            previous = key
            keys.append(key)
            values.append(value)
        self._keys, self._values = keys, values
        self._flushed_entries = len(keys)
        self._loaded = True
        self._check_loaded(log_size)

    def reset(self) -> None:
        """Forget every entry (before a rebuild); the file is cut on the next flush."""
        self._keys = array("q")
        self._values = array("q")
        self._flushed_entries = -1  # the file no longer matches: rewrite it whole
        self._loaded = True

    # --- queries ------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._keys)

    @property
    def is_full(self) -> bool:
        return len(self._keys) >= self.entries_max

    def last_entry(self) -> tuple[int, int] | None:
        if not self._keys:
            return None
        return self._keys[-1], self._values[-1]

    def floor_entry(self, key: int) -> tuple[int, int] | None:
        """The entry with the largest key <= `key`, or None."""
        i = bisect_right(self._keys, key) - 1
        if i < 0:
            return None
        return self._keys[i], self._values[i]

    def ceiling_entry(self, key: int) -> tuple[int, int] | None:
        """The entry with the smallest key >= `key`, or None."""
        i = bisect_left(self._keys, key)
        if i == len(self._keys):
            return None
        return self._keys[i], self._values[i]

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._keys, self._values, strict=True))

    # --- mutation -----------------------------------------------------------------------------

    def _append_entry(self, key: int, value: int) -> None:
        keys = self._keys
        assert not keys or key > keys[-1], (self.path, key, keys[-1])
        if len(keys) >= self.entries_max:  # `is_full`, without a call: appends come here
            raise CorruptIndexError(f"{self.path}: index is full at {self.entries_max} entries")
        keys.append(key)
        self._values.append(value)

    def _truncate_entries(self, count: int) -> None:
        if count >= len(self._keys):
            return
        del self._keys[count:]
        del self._values[count:]
        if self._flushed_entries > count:
            self._flushed_entries = -1  # rewrite on flush

    def flush(self, *, fsync: bool) -> None:
        """Write pending entries; with `fsync`, make them durable."""
        if self._flushed_entries == len(self._keys) and not fsync:
            return
        segment_file = self._fs.open_segment_file(self.path, create=True)
        try:
            if (
                self._flushed_entries < 0
                or segment_file.size != self._flushed_entries * self.entry.size
            ):
                segment_file.truncate(0)
                start = 0
            else:
                start = self._flushed_entries
            if start < len(self._keys):
                segment_file.append(
                    b"".join(
                        self._to_file(k, v)
                        for k, v in zip(self._keys[start:], self._values[start:], strict=True)
                    )
                )
            if fsync:
                segment_file.fdatasync()
        finally:
            segment_file.close()
        self._flushed_entries = len(self._keys)

    def delete(self) -> None:
        self._fs.remove(self.path)


class OffsetIndex(IndexFile):
    """`.index`: (offset relative to the segment base int32, byte position in `.log` int32).

    Key = absolute offset, value = byte position. An entry (k, p) promises that every batch
    holding an offset >= k starts at a byte position >= p.
    """

    entry = struct.Struct(">ii")

    def _to_file(self, key: int, value: int) -> bytes:
        return self.entry.pack(key - self.base_offset, value)

    def _from_file(self, first: int, second: int) -> tuple[int, int]:
        if first < 0 or second < 0:
            raise CorruptIndexError(
                f"{self.path}: negative entry (relative offset {first}, position {second})"
            )
        return self.base_offset + first, second

    def _check_loaded(self, log_size: int) -> None:
        positions = self._values
        for i in range(1, len(positions)):
            if positions[i] <= positions[i - 1]:
                raise CorruptIndexError(f"{self.path}: position of entry {i} does not increase")
        if positions and positions[-1] >= log_size:
            raise CorruptIndexError(
                f"{self.path}: last position {positions[-1]} is beyond the log's {log_size} bytes"
            )

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the largest entry <= `offset`, else (base offset, 0)."""
        entry = self.floor_entry(offset)
        return entry if entry is not None else (self.base_offset, 0)

    def floor_entry_by_position(self, position: int) -> tuple[int, int] | None:
        """(offset, position) of the entry with the largest position <= `position`, or None.

        Every indexed position is where a batch starts, so this finds a batch start near any
        byte without reading the log.
        """
        i = bisect_right(self._values, position) - 1
        if i < 0:
            return None
        return self._keys[i], self._values[i]

    # append(offset, position): the shared entry append itself, one call less per append.
    append = IndexFile._append_entry

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= `offset`."""
        self._truncate_entries(bisect_right(self._keys, offset - 1))


class TimeIndex(IndexFile):
    """`.timeindex`: (timestamp int64, offset relative to the segment base int32).

    Key = timestamp, value = absolute offset. An entry (t, o) means: the largest timestamp seen
    up to and including the batch whose last offset is o is t. Timestamps strictly increase, so
    an entry is added only when the segment's max timestamp grew. One slot is kept for the final
    entry written when the segment stops being active, so it counts as full one entry early.
    """

    entry = struct.Struct(">qi")

    def _to_file(self, key: int, value: int) -> bytes:
        return self.entry.pack(key, value - self.base_offset)

    def _from_file(self, first: int, second: int) -> tuple[int, int]:
        if second < 0:
            raise CorruptIndexError(f"{self.path}: negative relative offset {second}")
        return first, self.base_offset + second

    def _check_loaded(self, log_size: int) -> None:
        offsets = self._values
        for i in range(1, len(offsets)):
            if offsets[i] < offsets[i - 1]:
                raise CorruptIndexError(f"{self.path}: offset of entry {i} goes backwards")

    @property
    def is_full(self) -> bool:
        return len(self._keys) >= self.entries_max - 1

    def maybe_append(self, timestamp: int, offset: int, *, final: bool = False) -> None:
        """Add (timestamp, offset) if the timestamp grew; `final` may use the reserved slot."""
        keys = self._keys
        if keys and timestamp <= keys[-1]:
            return
        if final:
            if len(keys) >= self.entries_max:
                return
        elif len(keys) >= self.entries_max - 1:  # `is_full`, without a call
            raise CorruptIndexError(f"{self.path}: time index is full")
        keys.append(timestamp)
        self._values.append(offset)

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the largest entry with timestamp <= `timestamp`,
        else (-1, base offset)."""
        entry = self.floor_entry(timestamp)
        return entry if entry is not None else (-1, self.base_offset)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= `offset`."""
        keep = len(self._values)
        while keep > 0 and self._values[keep - 1] >= offset:
            keep -= 1
        self._truncate_entries(keep)
