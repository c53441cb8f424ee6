"""Replacing a run of segments by one cleaned segment so that a crash at any point leaves a log
holding every record that must survive (Kafka's `.cleaned` -> `.swap` -> rename protocol).

Rules:
- The cleaner writes the new segment's batches to `<base>.log.cleaned` (`<base>`: the first
  replaced segment's base offset) and syncs it. A crash now leaves a `.cleaned` file, which
  opening the log removes: the old segments are untouched.
- `swap_in`: rename `.cleaned` to `.log.swap` and sync the directory: from here on the swap
  is decided. Then delete the replaced segments' files (`.log`, `.index`, `.timeindex`) and
  rename `.log.swap` to `<base>.log`, syncing the directory. Its indexes are rebuilt by the
  caller.
- `complete_interrupted_swaps` (opening a log): for each `<base>.log.swap`, the segments
  whose base offset lies in [base, the swap's next offset) are the ones it replaces (any
  record of theirs past that range is in none of them, so nothing else is touched); their
  files and `<base>`'s index files go, and the swap becomes `<base>.log`. A replaced segment
  whose base lies past the swap's last record (the cleaning emptied its tail) stays: its
  records are all there, only not cleaned.
- Only the `.log` file is swapped: indexes are rebuilt from it, so no index file needs a
  protocol of its own.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

from replog.record.header import LOG_OVERHEAD, MIN_BATCH_LENGTH, RECORD_BATCH_OVERHEAD, read_header
from replog.storage.fs import FileSystem

if TYPE_CHECKING:
    from replog.storage.segment import LogSegment

log = logging.getLogger("replog.storage")

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
_LOG_SWAP = ".log" + SWAP_SUFFIX
_SEGMENT_SUFFIXES = (".log", ".index", ".timeindex", ".txnindex")
_READ_BYTES = 1 << 20


def cleaned_path(directory: str, base_offset: int) -> str:
    return os.path.join(directory, f"{base_offset:020d}.log{CLEANED_SUFFIX}")


def swap_in(fs: FileSystem, cleaned: str, replaced: Iterable[LogSegment]) -> str:
    """Make the synced `cleaned` file the segment replacing `replaced` (module Rules); returns
    its `.log` path. The replaced segments are closed and their files removed."""
    directory = os.path.dirname(cleaned)
    assert cleaned.endswith(".log" + CLEANED_SUFFIX), cleaned
    final = cleaned[: -len(CLEANED_SUFFIX)]
    swap = final + SWAP_SUFFIX
    fs.rename(cleaned, swap)
    fs.fsync_dir(directory)
    for segment in replaced:
        segment.delete()
    fs.rename(swap, final)
    fs.fsync_dir(directory)
    return final


def complete_interrupted_swaps(directory: str, names: list[str], fs: FileSystem) -> list[str]:
    """Finish every swap a crash interrupted in `directory`, whose listing is `names`; returns
    the listing after (module Rules)."""
    swaps = sorted(name for name in names if name.endswith(_LOG_SWAP))
    if not swaps:
        return names
    remaining = set(names)
    for swap_name in swaps:
        stem = swap_name[: -len(_LOG_SWAP)]
        if len(stem) != 20 or not stem.isdigit():
            continue
        base = int(stem)
        swap = os.path.join(directory, swap_name)
        end = _next_offset(fs, swap, base)
        for name in sorted(remaining):
            other_stem, dot, suffix = name.partition(".")
            if (
                not dot
                or "." + suffix not in _SEGMENT_SUFFIXES
                or len(other_stem) != 20
                or not other_stem.isdigit()
            ):
                continue
            other = int(other_stem)
            if other == base or base < other < end:
                log.info("%s: completing the swap of %s: removing %s", directory, swap_name, name)
                fs.remove(os.path.join(directory, name))
                remaining.discard(name)
        fs.rename(swap, os.path.join(directory, stem + ".log"))
        remaining.discard(swap_name)
        remaining.add(stem + ".log")
    fs.fsync_dir(directory)
    return sorted(remaining)


def _next_offset(fs: FileSystem, path: str, base: int) -> int:
    """The offset after the last whole batch of the segment file at `path` (`base` if none)."""
    file = fs.open_segment_file(path, create=False)
    try:
        position, end, next_offset = 0, file.size, base
        while end - position >= RECORD_BATCH_OVERHEAD:
            window = file.read(position, min(_READ_BYTES, end - position))
            relative = 0
            while len(window) - relative >= RECORD_BATCH_OVERHEAD:
                header = read_header(window, relative)
                size = header.batch_length + LOG_OVERHEAD
                if header.batch_length < MIN_BATCH_LENGTH or position + relative + size > end:
                    return next_offset
                next_offset = header.next_offset
                relative += size
            if relative == 0:
                return next_offset
            position += relative
        return next_offset
    finally:
        file.close()
