"""What a long wait of the harness says while it waits: a run that creates thousands of
partitions waits minutes for them, and a silent harness looks hung.

Rules: a wait that ends within `SAY_AFTER_S` prints nothing; a longer one prints what it waits
for and where it stands then, and again every `SAY_EVERY_S` (one line each, flushed, as the
runs' own lines are).
"""

from __future__ import annotations

import time
from collections.abc import Callable

SAY_AFTER_S = 5.0
SAY_EVERY_S = 30.0


class WaitNotice:
    """`update(progress)` from a wait's loop: prints "<what> (<progress>, N s so far)" once
    the wait has lasted `after_s`, then every `every_s`."""

    def __init__(
        self,
        what: str,
        *,
        after_s: float = SAY_AFTER_S,
        every_s: float = SAY_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
        say: Callable[[str], None] | None = None,
    ) -> None:
        self.what = what
        self._clock = clock
        self._say = say or (lambda line: print(line, flush=True))
        self._every_s = every_s
        self._began = clock()
        self._next_s = after_s

    def update(self, progress: str) -> None:
        elapsed = self._clock() - self._began
        if elapsed >= self._next_s:
            self._say(f"{self.what} ({progress}, {elapsed:.0f} s so far)")
            self._next_s = elapsed + self._every_s
