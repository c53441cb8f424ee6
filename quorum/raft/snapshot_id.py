"""A Raft snapshot's identity (end offset, quorum epoch) and its file name.

A snapshot holds the state machine's committed state for every offset below `end_offset`
(exclusive, like a log end offset); `quorum_epoch` is the epoch of the last offset it covers.
Two snapshots with the same id hold the same state, because committed data never changes.

Grammar of the file name (fixed widths, zero-padded)::

    name = end_offset(20 digits) "-" quorum_epoch(10 digits) ".checkpoint"

Worked example: ``SnapshotId(12345, 7).file_name()`` is
``00000000000000012345-0000000007.checkpoint``; `parse_snapshot_file_name` turns it back into
the id and returns None for any other name (``.part`` and ``.deleted`` files included), so a
directory listing can be filtered with it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

SNAPSHOT_SUFFIX: Final = ".checkpoint"
_NAME = re.compile(r"([0-9]{20})-([0-9]{10})\.checkpoint")


@dataclass(frozen=True, slots=True, order=True)
class SnapshotId:
    """Snapshot of every offset < `end_offset`; the last one was written in `quorum_epoch`."""

    end_offset: int
    quorum_epoch: int

    def __post_init__(self) -> None:
        assert self.end_offset >= 0, f"negative snapshot end offset {self.end_offset}"
        assert self.quorum_epoch >= 0, f"negative snapshot quorum epoch {self.quorum_epoch}"

    def file_name(self) -> str:
        return f"{self.end_offset:020d}-{self.quorum_epoch:010d}{SNAPSHOT_SUFFIX}"

    def __str__(self) -> str:
        return f"{self.end_offset}/{self.quorum_epoch}"


def parse_snapshot_file_name(name: str) -> SnapshotId | None:
    """The id named by a final snapshot file name, or None for any other name."""
    match = _NAME.fullmatch(name)
    if match is None:
        return None
    return SnapshotId(int(match.group(1)), int(match.group(2)))
