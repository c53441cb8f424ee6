"""Errors raised by the timeline package.

Rules:
- Every error is a `TimelineError`, and also the builtin exception a caller would expect for
  the same mistake on a plain container (`LookupError`, `ValueError`, `TypeError`), so generic
  handlers keep working.
- Every message names the snapshot offset it is about and, where it helps, the snapshots that
  do exist.
- The package imports nothing from the rest of replog, so these classes stand alone.
"""

from __future__ import annotations

from collections.abc import Sequence


def _describe(snapshot_offsets: Sequence[int]) -> str:
    if not snapshot_offsets:
        return "there are no snapshots"
    return "snapshots exist at offsets " + ", ".join(str(o) for o in snapshot_offsets)


class TimelineError(Exception):
    """Base class of every error raised by the timeline package."""


class UnknownSnapshotError(TimelineError, LookupError):
    """A read, revert or delete named a snapshot offset the registry does not hold."""

    def __init__(self, snapshot_offset: int, snapshot_offsets: Sequence[int]) -> None:
        self.snapshot_offset = snapshot_offset
        self.snapshot_offsets = tuple(snapshot_offsets)
        super().__init__(
            f"no snapshot at offset {snapshot_offset}; {_describe(self.snapshot_offsets)}"
        )


class SnapshotOrderError(TimelineError, ValueError):
    """A new snapshot's offset was lower than the newest snapshot's: offsets must increase."""

    def __init__(self, snapshot_offset: int, latest_offset: int) -> None:
        self.snapshot_offset = snapshot_offset
        self.latest_offset = latest_offset
        super().__init__(
            f"cannot create a snapshot at offset {snapshot_offset}: the newest snapshot is at "
            f"offset {latest_offset}, and snapshot offsets must not decrease"
        )


class NoneNotAllowedError(TimelineError, TypeError):
    """None was offered as a key, element or value; None means "absent" inside the package."""

    def __init__(self, structure: str, what: str) -> None:
        self.structure = structure
        self.what = what
        super().__init__(f"{structure} does not accept None as {what}")
