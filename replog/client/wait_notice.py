"""Long waits say what they wait for: the client's notices for a wait past a few seconds.

Rules:
- A wait that has lasted `FIRST_NOTICE_MS` (5 s: an election or a reconnect takes less) logs a
  WARNING saying what it waits for, why (the latest cause), and until when it keeps trying;
  then one every `NOTICE_EVERY_MS` (10 s) while it lasts: a user at a terminal sees the wait
  is alive and why, and a two-minute retry makes a dozen lines, not a flood.
- The text is the waiter's own, made at the moment of the notice (`describe(waited_ms)`;
  None says nothing this time), so it names the cause as it is then.
- "Until" is the wall-clock time (`HH:MM:SS`, local) at which a monotonic deadline falls.
- `WaitNotice` is for a wait on the running loop that may block in one await (a metadata pass
  to a hung broker lasts request.timeout.ms): its notices come from loop timers. A loop that
  wakes anyway (the producer's sender) checks `FIRST_NOTICE_MS`/`NOTICE_EVERY_MS` itself.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from types import TracebackType

from replog.clock import wall_clock_ms

FIRST_NOTICE_MS = 5_000
NOTICE_EVERY_MS = 10_000


def wall_time_of(deadline_ms: int, now_ms: int) -> str:
    """The local wall-clock time (`HH:MM:SS`) at which monotonic `deadline_ms` falls, `now_ms`
    being the same clock's now."""
    wall_ms = wall_clock_ms() + deadline_ms - now_ms
    return time.strftime("%H:%M:%S", time.localtime(wall_ms / 1000))


def waited_text(waited_ms: int) -> str:
    """`12 s` (whole seconds: the notices come seconds apart)."""
    return f"{waited_ms // 1000} s"


class WaitNotice:
    """While entered, logs `describe(waited_ms)` at WARNING after `FIRST_NOTICE_MS`, then
    every `NOTICE_EVERY_MS` (module docstring). Enter and exit on the running loop."""

    def __init__(self, describe: Callable[[int], str | None], logger: logging.Logger) -> None:
        self._describe = describe
        self._log = logger
        self._loop: asyncio.AbstractEventLoop | None = None
        self._started = 0.0
        self._handle: asyncio.TimerHandle | None = None

    def __enter__(self) -> WaitNotice:
        self._loop = asyncio.get_running_loop()
        self._started = self._loop.time()
        self._handle = self._loop.call_later(FIRST_NOTICE_MS / 1000, self._notice)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _notice(self) -> None:
        loop = self._loop
        assert loop is not None
        self._handle = loop.call_later(NOTICE_EVERY_MS / 1000, self._notice)
        try:
            text = self._describe(int((loop.time() - self._started) * 1000))
        except Exception:  # a notice's bug must not break the wait it describes
            self._log.exception("describing a wait failed")
            return
        if text:
            self._log.warning("%s", text)
