"""What `replog verify-log` and `replog dump-log` check in a partition's files, read-only.

- A `.log` segment: every batch frames (a sane `batch_length`, wholly present), is magic 2,
  passes its CRC-32C and has records_count == last_offset_delta + 1 (`validate_batch`); the
  first batch's base offset is the segment's base (its file name) and each next batch starts
  right after the one before (a gap or an overlap is damage). In a compacted log (`compacted`)
  the log cleaner leaves sparse batches (0 <= records_count <= last_offset_delta + 1) and
  gaps (from the segment's base, between batches, between segments); an overlap is still
  damage. Bytes that do not frame end the walk of that segment: nothing after them can be
  framed.
- A `.index` (offset index): whole 8-byte entries; offsets (relative to the segment base, so
  never negative) strictly ascending; positions strictly ascending and inside the `.log`; given
  the segment's batches, each position is where a batch holding the entry's offset starts
  (Kafka's entry), or where a multi-batch append whose last offset it is starts (the form replog
  wrote per append: its batch starts at or below its offset, and a batch before the next
  entry's position holds that offset).
- A `.timeindex`: whole 12-byte entries; timestamps never decreasing; offsets never
  decreasing, not below the segment base and, given the segment's batches, below its end.
- Across segments: each segment starts where the one before it ends (at or after it, in a
  compacted log).

Each problem names the file, the byte position in it and the offset where known, and what is
wrong. An index is reported at its first bad entry only: the entries after it are read
against a value already wrong.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from replog.errors import CorruptRecordError, InvalidRecordError
from replog.record.header import (
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    read_frame,
    validate_batch,
)

OFFSET_ENTRY = struct.Struct(">ii")  # offset relative to the segment base, byte position
TIME_ENTRY = struct.Struct(">qi")  # timestamp, offset relative to the segment base


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong in a file: where (byte position, offset) when known, and what."""

    file: str
    position: int | None
    offset: int | None
    what: str

    def line(self) -> str:
        where = self.file
        if self.position is not None:
            where += f" at byte {self.position}"
        if self.offset is not None:
            where += f" (offset {self.offset})"
        return f"{where}: {self.what}"

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "position": self.position,
            "offset": self.offset,
            "problem": self.what,
        }


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """One index entry as read: its byte position in the file, its two fields (offsets made
    absolute), and what is wrong with it (None: nothing). `partial`: the bytes left at the end,
    too few for an entry (its fields are then 0)."""

    position: int
    first: int
    second: int
    problem: str | None
    partial: bool = False


@dataclass(slots=True)
class SegmentBatches:
    """What a walk of a `.log` found: where each framed batch starts, with its base and last
    offset; where the segment ends (None: not known, a batch failed its CRC or did not frame)."""

    base_offset: int
    starts: dict[int, tuple[int, int]] = field(default_factory=dict)
    next_offset: int | None = None
    problems: list[Problem] = field(default_factory=list)


def base_offset_of(path: str) -> int | None:
    """The base offset a segment file's name says (`00000000000000000042.log`), else None."""
    stem = os.path.basename(path).split(".", 1)[0]
    return int(stem) if stem.isdigit() else None


def offset_index_entries(
    raw: bytes, base_offset: int, log_size: int | None
) -> Iterator[IndexEntry]:
    """Every entry of an offset index, checked against those before it and, when given, the
    size of its `.log`; a partial entry at the end comes last, as a problem."""
    previous: tuple[int, int] | None = None
    for at, relative, position in _entries(OFFSET_ENTRY, raw):
        offset = base_offset + relative
        problem = None
        if relative < 0:
            problem = f"offset {offset} is below the segment's base offset {base_offset}"
        elif previous is not None and offset <= previous[0]:
            problem = f"offset {offset} does not ascend past the previous entry's {previous[0]}"
        elif position < 0:
            problem = f"position {position} is negative"
        elif previous is not None and position <= previous[1]:
            problem = f"position {position} does not ascend past the previous entry's {previous[1]}"
        elif log_size is not None and position >= log_size:
            problem = f"position {position} is beyond the .log's {log_size} bytes"
        yield IndexEntry(at, offset, position, problem)
        previous = (offset, position)
    yield from _partial_tail(OFFSET_ENTRY, raw)


def time_index_entries(
    raw: bytes, base_offset: int, next_offset: int | None
) -> Iterator[IndexEntry]:
    """Every entry of a time index, checked against those before it and, when given, the
    segment's end offset; a partial entry at the end comes last, as a problem."""
    previous: tuple[int, int] | None = None
    for at, timestamp, relative in _entries(TIME_ENTRY, raw):
        offset = base_offset + relative
        problem = None
        if previous is not None and timestamp < previous[0]:
            problem = f"timestamp {timestamp} is below the previous entry's {previous[0]}"
        elif relative < 0:
            problem = f"offset {offset} is below the segment's base offset {base_offset}"
        elif previous is not None and offset < previous[1]:
            problem = f"offset {offset} is below the previous entry's {previous[1]}"
        elif next_offset is not None and offset >= next_offset:
            problem = (
                f"offset {offset} is beyond the segment, which ends at offset {next_offset - 1}"
            )
        yield IndexEntry(at, timestamp, offset, problem)
        previous = (timestamp, offset)
    yield from _partial_tail(TIME_ENTRY, raw)


def _entries(entry: struct.Struct, raw: bytes) -> Iterator[tuple[int, int, int]]:
    usable = len(raw) - len(raw) % entry.size
    for index, (first, second) in enumerate(entry.iter_unpack(raw[:usable])):
        yield index * entry.size, first, second


def _partial_tail(entry: struct.Struct, raw: bytes) -> Iterator[IndexEntry]:
    tail = len(raw) % entry.size
    if tail:
        at = len(raw) - tail
        what = (
            f"{tail} trailing bytes: the length {len(raw)} is not a multiple of {entry.size}, "
            "the entry size"
        )
        yield IndexEntry(at, 0, 0, what, partial=True)


def first_index_problem(path: str, entries: Iterator[IndexEntry]) -> Problem | None:
    """The first bad entry of an index as a `Problem`, None if every entry is good."""
    for entry in entries:
        if entry.problem is not None:
            return Problem(path, entry.position, None, entry.problem)
    return None


def walk_segment(path: str, base_offset: int, *, compacted: bool = False) -> SegmentBatches:
    """Read a `.log` segment batch by batch (module docstring; `compacted`: a log the cleaner
    may have rewritten)."""
    found = SegmentBatches(base_offset, next_offset=base_offset)
    size = os.path.getsize(path)
    position = 0
    expected: int | None = base_offset
    with open(path, "rb") as f:
        while position < size:
            remaining = size - position
            f.seek(position)
            frame = f.read(LOG_OVERHEAD)
            if remaining < LOG_OVERHEAD:
                found.problems.append(
                    Problem(path, position, None, f"{remaining} trailing bytes (a partial batch)")
                )
                break
            batch_base, batch_size = read_frame(frame)
            if batch_size - LOG_OVERHEAD < MIN_BATCH_LENGTH:
                found.problems.append(
                    Problem(
                        path,
                        position,
                        batch_base,
                        f"batch_length {batch_size - LOG_OVERHEAD} is below {MIN_BATCH_LENGTH}: "
                        "nothing after this byte can be framed",
                    )
                )
                break
            if batch_size > remaining:
                found.problems.append(
                    Problem(
                        path,
                        position,
                        batch_base,
                        f"partial batch: {batch_size} bytes declared, {remaining} present",
                    )
                )
                break
            data = frame + f.read(batch_size - LOG_OVERHEAD)
            where = f"{path} at byte {position}"
            try:
                header = validate_batch(data, where=where, sparse=compacted)
            except (CorruptRecordError, InvalidRecordError) as exc:
                what = str(exc).removeprefix(f"{where}: ")
                found.problems.append(Problem(path, position, batch_base, what))
                expected = None  # its offsets cannot be trusted: the next batch is not judged
                position += batch_size
                continue
            if (
                expected is not None
                and header.base_offset != expected
                and not (compacted and header.base_offset > expected)
            ):
                kind = "a gap" if header.base_offset > expected else "an overlap"
                found.problems.append(
                    Problem(
                        path,
                        position,
                        header.base_offset,
                        f"base offset {header.base_offset}, expected {expected} ({kind})",
                    )
                )
            found.starts[position] = (header.base_offset, header.last_offset)
            expected = header.last_offset + 1
            position += batch_size
    found.next_offset = expected if not found.problems else None
    return found


def index_problems(
    index_path: str, entries: Iterator[IndexEntry], batches: SegmentBatches, *, offset_index: bool
) -> list[Problem]:
    """The first bad entry of an index, else (for an offset index, given a clean walk of its
    segment) the first entry that points where no batch starts, or at a batch that cannot
    lead a lookup to its offset (`offset_entry_problem`)."""
    checked = list(entries)
    problem = first_index_problem(index_path, iter(checked))
    if problem is not None:
        return [problem]
    if not offset_index or batches.problems:
        return []
    positions = list(batches.starts)  # in file order
    order = {position: index for index, position in enumerate(positions)}
    for number, entry in enumerate(checked):
        upto = checked[number + 1].second if number + 1 < len(checked) else None
        what = offset_entry_problem(entry.first, entry.second, upto, batches, positions, order)
        if what is not None:
            return [Problem(index_path, entry.position, entry.first, what)]
    return []


def offset_entry_problem(
    offset: int,
    position: int,
    upto: int | None,
    batches: SegmentBatches,
    positions: list[int],
    order: dict[int, int],
) -> str | None:
    """What is wrong with the offset-index entry (`offset`, `position`), None if nothing.

    Kafka's entry points at the batch holding its offset. replog also wrote entries per
    append, naming a multi-batch append's last offset at its first byte: a lookup from there
    still finds every offset, so such an entry is good when its batch starts at or below its
    offset and the offset is held by a batch before `upto`, the next entry's byte (None: the
    end of the `.log`).
    """
    batch = batches.starts.get(position)
    if batch is None:
        return f"points at byte {position} of the .log, where no batch starts"
    if not batch[0] <= offset:
        return (
            f"points at byte {position} of the .log, whose batch holds offsets "
            f"{batch[0]} to {batch[1]}"
        )
    for later in positions[order[position] :]:
        if upto is not None and later >= upto:
            break
        base, last = batches.starts[later]
        if base <= offset <= last:
            return None
    until = "the end of the .log" if upto is None else f"byte {upto} (the next entry's)"
    return (
        f"points at byte {position} of the .log, but no batch from there to {until} holds its "
        "offset"
    )
