"""Replacing a run of segments by one cleaned segment so that a crash at any point leaves a log
holding every record that must survive (Kafka's `.cleaned` -> `.swap` -> rename protocol, for
every file of the segment).

Rules:
- The cleaner writes the new segment's batches to `<base>.log.cleaned` (`<base>`: the first
  replaced segment's base offset) and its indexes, as it writes them, to
  `<base>.index.cleaned` and `<base>.timeindex.cleaned` (`cleaned_paths`), and syncs all
  three. A crash now leaves `.cleaned` files, which opening the log removes: the old
  segments are untouched.
- The swap (`Log.replace_with_cleaned`), in four steps, for one or several cleaned segments
  at once (each replacing its own run of segments: the runs are disjoint). `mark_swap`, under
  the log's lock: rename each `.cleaned` file to `.swap`, the `.log` last: its `.log.swap`
  decides that segment's swap. Then, without the lock, the directory is synced once: the
  decisions are durable before any replaced file loses its name. `complete_swap`, under the
  lock again, each segment in turn: the replaced segments' files are renamed to `.deleted`
  (`LogSegment.retire`) and each `.swap` file to its final name, the `.log` last.
  `finish_swap`, without the lock: sync the directory once and remove the `.deleted` files.
  Under the lock that is renames only: the indexes are the cleaner's, synced with the data,
  and nothing is built, synced or removed there.
- Between the two locked steps, a truncation or a deletion reaching a replaced segment would
  make a crash's completion of a swap (below) bring back what it removed: it first cancels
  them all (`cancel_swaps`: every `.log.swap` removed first, then the index `.swap` files,
  the directory synced), and the swap is then refused.
- `complete_interrupted_swaps` (opening a log): for each `<base>.log.swap`, the segments
  whose base offset lies in [base, the swap's next offset) are the ones it replaces (any
  record of theirs past that range is in none of them, so nothing else is touched); their
  files and `<base>`'s index files go, and the swap becomes `<base>.log`. A replaced segment
  whose base lies past the swap's last record (the cleaning emptied its tail) stays: its
  records are all there, only not cleaned. The interrupted swap's index files, in whatever
  state (`.cleaned`, `.swap`, final), are removed with the other leftovers and rebuilt from
  the `.log` (Kafka's recovery does the same): an index is never trusted across a swap a
  crash cut.
- A `.log.swap` therefore exists only once the swap is decided, and its index files reach
  their final names before it does: a final `<base>.log` without a `.log.swap` has its own
  indexes.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence
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
# The files of a cleaned segment, in the order they are renamed: the `.log` last.
_SWAPPED = (".index", ".timeindex", ".log")
_READ_BYTES = 1 << 20


def cleaned_paths(directory: str, base_offset: int) -> tuple[str, str, str]:
    """The `.cleaned` files of the segment at `base_offset`: its log, offset index and time
    index."""
    stem = os.path.join(directory, f"{base_offset:020d}")
    return (
        stem + ".log" + CLEANED_SUFFIX,
        stem + ".index" + CLEANED_SUFFIX,
        stem + ".timeindex" + CLEANED_SUFFIX,
    )


def discard_cleaned(fs: FileSystem, cleaned: str) -> None:
    """Remove the `.cleaned` files of the segment whose cleaned log file is `cleaned` (a swap
    refused or abandoned)."""
    stem = _stem(cleaned)
    fs.remove_all(stem + suffix + CLEANED_SUFFIX for suffix in _SWAPPED)


def _stem(cleaned: str) -> str:
    assert cleaned.endswith(".log" + CLEANED_SUFFIX), cleaned
    return cleaned[: -len(".log" + CLEANED_SUFFIX)]


def mark_swap(fs: FileSystem, cleaned: str) -> None:
    """Rename the synced `.cleaned` files of the segment whose cleaned log file is `cleaned`
    to `.swap`, the `.log` last: the swap is decided once the directory is synced (module
    Rules)."""
    stem = _stem(cleaned)
    for suffix in _SWAPPED:
        fs.rename(stem + suffix + CLEANED_SUFFIX, stem + suffix + SWAP_SUFFIX)


def complete_swap(fs: FileSystem, cleaned: str, replaced: Iterable[LogSegment]) -> list[str]:
    """After `mark_swap` and the directory's sync: make the `.swap` files the segment
    replacing `replaced`, which are closed and their files renamed; returns those names, for
    `finish_swap` (module Rules)."""
    stem = _stem(cleaned)
    retired = [path for segment in replaced for path in segment.retire()]
    for suffix in _SWAPPED:  # the `.log` last
        fs.rename(stem + suffix + SWAP_SUFFIX, stem + suffix)
    return retired


def cancel_swaps(fs: FileSystem, cleaned: Sequence[str]) -> None:
    """Undo `mark_swap` of every segment whose cleaned log file `cleaned` names, in one
    directory, durably: the `.log.swap` files first, so that no crash completes a swap
    (module Rules)."""
    stems = [_stem(path) for path in cleaned]
    for suffix in reversed(_SWAPPED):
        for stem in stems:
            fs.remove(stem + suffix + SWAP_SUFFIX)
    if stems:
        fs.fsync_dir(os.path.dirname(cleaned[0]))


def finish_swap(fs: FileSystem, directory: str, retired: Iterable[str]) -> None:
    """After `complete_swap`, without the log's lock: make the final names durable and remove the
    replaced segments' files. A directory gone since (the log deleted meanwhile) took them
    with it."""
    try:
        fs.fsync_dir(directory)
    except FileNotFoundError:
        return
    fs.remove_all(retired)


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
