"""What `replog cluster start` says while it waits: each phase of a start as it passes, and,
while the next one takes longer than `SILENT_S`, what it waits for (again every `REPEAT_S`).

Rules: the phases come in order (`PHASES`); the caller reports how many have passed at each
poll. A phase lost again (a leader that loses its quorum before the brokers are up) is said
again when it passes again. Pure: the caller gives the time and the lines, and `say` prints.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

# The quorum elects a leader that commits its epoch; every node answers; every broker is
# registered and unfenced.
PHASES = ("leader", "answers", "brokers")
SILENT_S = 5.0
REPEAT_S = 10.0


class StartProgress:
    """Says each phase as it passes and, past `silent_s` in one, what it waits for."""

    def __init__(
        self,
        say: Callable[[str], None],
        now: float,
        silent_s: float = SILENT_S,
        repeat_s: float = REPEAT_S,
    ) -> None:
        self._say = say
        self._silent_s = silent_s
        self._repeat_s = repeat_s
        self.passed = 0
        self._since = now
        self._next_notice = now + silent_s

    def at(self, passed: int, lines: Sequence[str | None], waiting: str, now: float) -> None:
        """`passed` phases have passed at `now`; `lines[i]` says that phase i passed (None:
        nothing to say), `waiting` what the next phase waits for."""
        if passed != self.passed:
            for line in lines[self.passed : passed]:
                if line is not None:
                    self._say(line)
            self.passed = passed
            self._since = now
            self._next_notice = now + self._silent_s
        if waiting and now >= self._next_notice:
            self._say(f"waiting for {waiting} ({now - self._since:.0f} s so far)")
            self._next_notice = now + self._repeat_s
