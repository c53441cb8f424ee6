"""Whether any high watermark, recovery point or log start offset of a set of logs moved since
a reader last looked: lets a log manager's periodic checkpoints skip their walk over every log
while nothing moved (a broker creating thousands of new, empty logs, or an idle one).

Rules:
- A `Log` sets the flag of what it moved, at every change of its high watermark (a truncation
  and a log start offset's increment among them), recovery point or log start offset; the same
  value again is no move. Setting is one attribute store: appends and fetches pay nothing more.
- A reader takes a flag (`taken`): cleared before it reads the offsets it stands for, and set
  again if the read or the write that follows fails. A move during the read sets it again for
  the next reader, so no move is ever missed, at worst read twice.
- A new flag says moved: the first reader reads everything.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

Kind = Literal["high_watermarks", "log_start_offsets", "recovery_points"]


class OffsetMoves:
    """What moved since the last reader cleared it (module Rules)."""

    __slots__ = ("high_watermarks", "log_start_offsets", "recovery_points")

    def __init__(self) -> None:
        self.moved_all()

    def moved_all(self) -> None:
        self.high_watermarks = self.recovery_points = self.log_start_offsets = True

    @contextmanager
    def taken(self, kind: Kind) -> Iterator[bool]:
        """Whether `kind` moved since the last reader took it, cleared for the block, which
        reads and writes the offsets if so; up again if the block fails (module Rules)."""
        moved: bool = getattr(self, kind)
        setattr(self, kind, False)
        try:
            yield moved
        except BaseException:
            if moved:
                setattr(self, kind, True)
            raise
