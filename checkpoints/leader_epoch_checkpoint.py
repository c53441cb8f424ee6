"""The leader-epoch checkpoint: the whole leader-epoch cache of one partition.

Each entry says "leader epoch E began at offset S" (see `replog.storage.leader_epoch_cache`).
The file lives in the partition directory and is rewritten in full on every change.

Grammar (the common layout of `replog.checkpoints.text_format`, version 0)::

    entry        = leader_epoch " " start_offset
    leader_epoch = integer in [0, 2**31 - 1]
    start_offset = integer in [0, 2**63 - 1]
    ; both columns strictly increase from one entry to the next

Worked example, a partition led in epochs 0, 2 and 5::

    0
    3
    0 0            ->   [EpochEntry(leader_epoch=0, start_offset=0),
    2 1500               EpochEntry(leader_epoch=2, start_offset=1500),
    5 3200               EpochEntry(leader_epoch=5, start_offset=3200)]

Rules:
- Leader epochs and start offsets both strictly increase; a file that breaks this is corrupt
  and the error names the first line out of order. Rendering refuses such a list with
  ValueError, so replog never writes a file it would refuse to read.
- Parsing first tries the one layout replog writes (one regular expression over the whole
  file, single spaces, no signs); whatever that does not take goes to the general parser of
  `text_format`, which accepts the same and names what is wrong with the rest. A restart reads
  one such file per log, thousands of them, and the general parser costs several times more.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from replog.checkpoints import text_format
from replog.checkpoints.text_format import INT32_MAX, INT64_MAX

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
# The file as replog renders it: version 0, the count, then "<epoch> <offset>" lines.
_AS_RENDERED = re.compile(rb"0\n([0-9]{1,19})\n((?:[0-9]{1,19} [0-9]{1,19}\n)*)")


@dataclass(frozen=True, slots=True)
class EpochEntry:
    """Leader epoch `leader_epoch` began at offset `start_offset`."""

    leader_epoch: int
    start_offset: int


def ordering_problem(previous: EpochEntry, entry: EpochEntry) -> str | None:
    """Why `entry` cannot follow `previous` in a leader-epoch cache, or None when it can."""
    if entry.leader_epoch <= previous.leader_epoch:
        return f"leader epoch {entry.leader_epoch} does not exceed {previous.leader_epoch}"
    if entry.start_offset <= previous.start_offset:
        return f"start offset {entry.start_offset} does not exceed {previous.start_offset}"
    return None


def is_strictly_increasing(entries: Sequence[EpochEntry]) -> bool:
    """Whether leader epochs and start offsets both strictly increase along `entries`."""
    return all(ordering_problem(a, b) is None for a, b in pairwise(entries))


def parse_leader_epoch_checkpoint(data: bytes, *, source: str) -> list[EpochEntry]:
    """The entries of a leader-epoch checkpoint file; `source` names the file in errors."""
    rendered = _parse_as_rendered(data)
    return rendered if rendered is not None else _parse_lines(data, source)


def _parse_lines(data: bytes, source: str) -> list[EpochEntry]:
    """What `parse_leader_epoch_checkpoint` returns, by the general parser of `text_format`."""
    entries: list[EpochEntry] = []
    for line in text_format.parse(data, source=source, fields_per_entry=2):
        entry = EpochEntry(
            line.int_field(0, "leader epoch", INT32_MAX),
            line.int_field(1, "start offset", INT64_MAX),
        )
        if entries:
            problem = ordering_problem(entries[-1], entry)
            if problem is not None:
                raise line.error(problem)
        entries.append(entry)
    return entries


def _parse_as_rendered(data: bytes) -> list[EpochEntry] | None:
    """The entries of a file in exactly the layout `render_leader_epoch_checkpoint` writes,
    every value in range and in order; None for anything else (empty files included), which
    the general parser then judges (module Rules)."""
    matched = _AS_RENDERED.fullmatch(data)
    if matched is None:
        return None
    fields = matched[2].split()
    if int(matched[1]) * 2 != len(fields):
        return None
    entries = []
    previous_epoch = previous_start = -1
    for at in range(0, len(fields), 2):
        epoch, start = int(fields[at]), int(fields[at + 1])
        if not (previous_epoch < epoch <= INT32_MAX and previous_start < start <= INT64_MAX):
            return None
        entries.append(EpochEntry(epoch, start))
        previous_epoch, previous_start = epoch, start
    return entries


def render_leader_epoch_checkpoint(entries: Sequence[EpochEntry]) -> bytes:
    """The leader-epoch checkpoint file for `entries`; ValueError when they cannot be stored."""
    for index, entry in enumerate(entries):
        problem = (
            text_format.range_problem(entry.leader_epoch, "leader epoch", INT32_MAX)
            or text_format.range_problem(entry.start_offset, "start offset", INT64_MAX)
            or (ordering_problem(entries[index - 1], entry) if index else None)
        )
        if problem is not None:
            raise ValueError(f"cannot checkpoint leader-epoch entry {index} {entry}: {problem}")
    return text_format.render([(e.leader_epoch, e.start_offset) for e in entries])
