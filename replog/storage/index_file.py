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
for entries this small, so the index lives in two `array` columns searched with `bisect`, and
the file is only written and read whole. The columns hold the file's own fields (an offset
relative to the segment's base, an int32 where the file has one), so writing and reading
them is byte shuffling that never makes a Python object per entry: a segment of small
batches holds hundreds of thousands of entries (one per `index.interval.bytes`), and a
per-entry loop over them held the log's lock and the interpreter for ~0.1 s per index at every
roll, and as long again to load one. The two columns are interleaved into entries, and back,
by strided slice copies, one per byte of an entry. Queries and appends add or subtract the
base where a field is relative.
"""

from __future__ import annotations

import struct
import sys
from abc import ABC, abstractmethod
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from itertools import islice
from operator import ge, gt, indexOf

from replog.errors import CorruptIndexError
from replog.storage.fs import FileSystem

# The file's fields by width: int32 and int64 array type codes (checked here, as `array`'s
# type codes name C types).
INT32, INT64 = "i", "q"
if array(INT32).itemsize != 4 or array(INT64).itemsize != 8:
    raise ImportError("replog's index files need 4-byte 'i' and 8-byte 'q' arrays")
_LITTLE_ENDIAN = sys.byteorder == "little"


def entries_from_columns(columns: Sequence[array[int]]) -> bytearray:
    """The big-endian fixed-size entries whose i-th holds the i-th item of each column, in
    column order. The columns must be equally long."""
    count = len(columns[0])
    size = sum(column.itemsize for column in columns)
    entries = bytearray(size * count)
    at = 0
    for column in columns:
        if len(column) != count:
            raise ValueError(f"columns of {count} and {len(column)} items")
        if _LITTLE_ENDIAN:
            column = array(column.typecode, column)  # a copy to swap: the caller keeps its own
            column.byteswap()
        raw = column.tobytes()
        width = column.itemsize
        for byte in range(width):
            entries[at + byte :: size] = raw[byte::width]
        at += width
    return entries


def columns_from_entries(raw: bytes, type_codes: Sequence[str]) -> list[array[int]]:
    """The columns of the big-endian fixed-size entries in `raw`, one array per type code, in
    entry order (the inverse of `entries_from_columns`). `raw` must hold whole entries."""
    widths = [array(code).itemsize for code in type_codes]
    size = sum(widths)
    count, partial = divmod(len(raw), size)
    if partial:
        raise ValueError(f"{len(raw)} bytes are not whole {size}-byte entries")
    columns = []
    at = 0
    for code, width in zip(type_codes, widths, strict=True):
        column_bytes = bytearray(width * count)
        for byte in range(width):
            column_bytes[byte::width] = raw[at + byte :: size]
        column = array(code)
        column.frombytes(column_bytes)
        if _LITTLE_ENDIAN:
            column.byteswap()
        columns.append(column)
        at += width
    return columns


def first_out_of_order(column: array[int], *, strict: bool) -> int | None:
    """The index of the first item not above (`strict`: not strictly above) the one before it,
    or None when the column increases throughout. One C-level pass."""
    went_back = map(ge if strict else gt, column, islice(column, 1, None))
    try:
        return indexOf(went_back, True) + 1
    except ValueError:
        return None


class IndexFile(ABC):
    """Sorted fixed-size entries of one segment index, loaded lazily from `path`.

    Subclasses say what the file holds: its layout (`entry`, big-endian, whose two field codes
    are also the columns' array type codes, `file_fields`), and what is subtracted from a key
    and a value to get its field (`_key_base`, `_value_base`: the segment's base offset where
    the field is relative, else 0).
    """

    entry: struct.Struct
    file_fields: tuple[str, str]  # derived from `entry`

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        layout = cls.entry.format
        order, codes = layout[0], list(layout[1:])
        if order != ">" or len(codes) != 2 or not set(codes) <= {INT32, INT64}:
            raise TypeError(f"{cls.__name__}: an entry is two big-endian int32/int64 fields")
        cls.file_fields = (codes[0], codes[1])

    def __init__(self, path: str, base_offset: int, entries_max: int, fs: FileSystem) -> None:
        self.path = path
        self.base_offset = base_offset
        self.entries_max = entries_max
        self._fs = fs
        self._key_base, self._value_base = self._bases(base_offset)
        self._keys = array(self.file_fields[0])  # the file's fields, not the keys themselves
        self._values = array(self.file_fields[1])
        self._flushed_entries = 0  # how many entries the file holds
        self._loaded = False

    @staticmethod
    @abstractmethod
    def _bases(base_offset: int) -> tuple[int, int]:
        """(key base, value base): what the file's fields are relative to."""

    @abstractmethod
    def _check_loaded(self, log_size: int) -> None:
        """Raise CorruptIndexError if the loaded entries (keys already found increasing) cannot
        describe a log of this size."""

    # --- loading ------------------------------------------------------------------------------

    def load(self, log_size: int) -> None:
        """Read the file (missing = empty) and check it; idempotent."""
        if self._loaded:
            return
        found = self._fs.read_bytes(self.path)
        raw = found or b""
        if len(raw) % self.entry.size:
            raise CorruptIndexError(
                f"{self.path}: length {len(raw)} is not a multiple of the "
                f"{self.entry.size}-byte entry size"
            )
        keys, values = columns_from_entries(raw, self.file_fields)
        bad = first_out_of_order(keys, strict=True)
        if bad is not None:
            base = self._key_base
            raise CorruptIndexError(
                f"{self.path}: entry {bad} key {keys[bad] + base} does not increase past "
                f"{keys[bad - 1] + base}"
            )
        self._keys, self._values = keys, values
        # A missing file matches no state: the next flush writes it (a segment holding records
        # must have it; loading rebuilds a missing one, with a warning).
        self._flushed_entries = len(keys) if found is not None else -1
        self._loaded = True
        self._check_loaded(log_size)

    def start_empty(self) -> None:
        """A new segment's index: no entries and no file yet (the next flush writes it), as
        `reset` leaves it, without replacing the columns just made."""
        self._flushed_entries = -1
        self._loaded = True

    def reset(self) -> None:
        """Forget every entry (before a rebuild); the file is cut on the next flush."""
        self._keys = array(self.file_fields[0])
        self._values = array(self.file_fields[1])
        self._flushed_entries = -1  # the file no longer matches: rewrite it whole
        self._loaded = True

    # --- queries ------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._keys)

    @property
    def is_full(self) -> bool:
        return len(self._keys) >= self.entries_max

    def _entry(self, i: int) -> tuple[int, int]:
        return self._keys[i] + self._key_base, self._values[i] + self._value_base

    def last_entry(self) -> tuple[int, int] | None:
        if not self._keys:
            return None
        return self._entry(-1)

    def floor_entry(self, key: int) -> tuple[int, int] | None:
        """The entry with the largest key <= `key`, or None."""
        i = bisect_right(self._keys, key - self._key_base) - 1
        if i < 0:
            return None
        return self._entry(i)

    def ceiling_entry(self, key: int) -> tuple[int, int] | None:
        """The entry with the smallest key >= `key`, or None."""
        i = bisect_left(self._keys, key - self._key_base)
        if i == len(self._keys):
            return None
        return self._entry(i)

    def entries(self) -> list[tuple[int, int]]:
        return [self._entry(i) for i in range(len(self._keys))]

    # --- mutation -----------------------------------------------------------------------------

    def _append_entry(self, key: int, value: int) -> None:
        keys = self._keys
        field = key - self._key_base
        assert not keys or field > keys[-1], (self.path, key, keys[-1] + self._key_base)
        if len(keys) >= self.entries_max:  # `is_full`, without a call: appends come here
            raise CorruptIndexError(f"{self.path}: index is full at {self.entries_max} entries")
        keys.append(field)
        self._values.append(value - self._value_base)

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
                    entries_from_columns((self._keys[start:], self._values[start:]))
                )
            if fsync:
                segment_file.fdatasync()
        finally:
            segment_file.close()
        self._flushed_entries = len(self._keys)

    def file_exists(self) -> bool:
        return self._fs.exists(self.path)

    def delete(self) -> None:
        self._fs.remove(self.path)


class OffsetIndex(IndexFile):
    """`.index`: (offset relative to the segment base int32, byte position in `.log` int32).

    Key = absolute offset, value = byte position. An entry (k, p) promises that every batch
    holding an offset >= k starts at a byte position >= p.
    """

    entry = struct.Struct(">ii")

    @staticmethod
    def _bases(base_offset: int) -> tuple[int, int]:
        return base_offset, 0

    def _check_loaded(self, log_size: int) -> None:
        positions = self._values
        bad = first_out_of_order(positions, strict=True)
        if bad is not None:
            raise CorruptIndexError(f"{self.path}: position of entry {bad} does not increase")
        # Both columns increase, so the first entry holds their smallest fields.
        if positions and (self._keys[0] < 0 or positions[0] < 0):
            raise CorruptIndexError(
                f"{self.path}: negative entry (relative offset {self._keys[0]}, "
                f"position {positions[0]})"
            )
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
        return self._entry(i)

    # append(offset, position): the shared entry append itself, one call less per append.
    append = IndexFile._append_entry

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= `offset`."""
        self._truncate_entries(bisect_right(self._keys, offset - 1 - self.base_offset))


class TimeIndex(IndexFile):
    """`.timeindex`: (timestamp int64, offset relative to the segment base int32).

    Key = timestamp, value = absolute offset. An entry (t, o) means: the largest timestamp seen
    up to and including the batch whose last offset is o is t. Timestamps strictly increase, so
    an entry is added only when the segment's max timestamp grew. One slot is kept for the final
    entry written when the segment stops being active, so it counts as full one entry early.
    """

    entry = struct.Struct(">qi")

    @staticmethod
    def _bases(base_offset: int) -> tuple[int, int]:
        return 0, base_offset

    def _check_loaded(self, log_size: int) -> None:
        relative_offsets = self._values
        bad = first_out_of_order(relative_offsets, strict=False)
        if bad is not None:
            raise CorruptIndexError(f"{self.path}: offset of entry {bad} goes backwards")
        if relative_offsets and relative_offsets[0] < 0:  # the smallest, as they never fall
            raise CorruptIndexError(f"{self.path}: negative relative offset {relative_offsets[0]}")

    @property
    def is_full(self) -> bool:
        return len(self._keys) >= self.entries_max - 1

    def maybe_append(self, timestamp: int, offset: int, *, final: bool = False) -> None:
        """Add (timestamp, offset) if the timestamp grew; `final` may use the reserved slot.

        An empty index starts at Kafka's NO_TIMESTAMP (-1): batches without timestamps add no
        entry (one of (-1, -1) failed the next load's check, and the index was rebuilt)."""
        keys = self._keys
        if timestamp < 0 or (keys and timestamp <= keys[-1]):
            return
        if final:
            if len(keys) >= self.entries_max:
                return
        elif len(keys) >= self.entries_max - 1:  # `is_full`, without a call
            raise CorruptIndexError(f"{self.path}: time index is full")
        keys.append(timestamp)
        self._values.append(offset - self.base_offset)

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the largest entry with timestamp <= `timestamp`,
        else (-1, base offset)."""
        entry = self.floor_entry(timestamp)
        return entry if entry is not None else (-1, self.base_offset)

    def last_entry_below(self, offset: int) -> tuple[int, int] | None:
        """(timestamp, offset) of the last entry whose offset is < `offset`, or None: the
        largest timestamp of the batches up to it (offsets never fall, so one bisect)."""
        i = bisect_left(self._values, offset - self.base_offset) - 1
        if i < 0:
            return None
        return self._entry(i)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= `offset`."""
        relative = offset - self.base_offset
        keep = len(self._values)
        while keep > 0 and self._values[keep - 1] >= relative:
            keep -= 1
        self._truncate_entries(keep)
