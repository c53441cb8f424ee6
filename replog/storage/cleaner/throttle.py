"""The log cleaner's I/O throttle (Kafka's `Throttler` under `log.cleaner.io.max.bytes.per.second`).

Rules:
- The cleaner threads report every batch they read (`observe`), all to one throttle: the rate
  bounds them together, as Kafka's one throttler does.
- Every `check_interval_ms` (Kafka's 300) of observing, the bytes observed since the last check
  are compared with the rate: when they came faster, the answer is how long to sleep so that
  they took as long as the rate allows; the next period starts after that sleep.
- A new rate (`set_rate`, a dynamic broker config) starts a new period: what was observed
  before, and a sleep the old rate asked for, are not held against it.
- A rate of `UNLIMITED` or more (the config's default, Java's Double.MAX_VALUE) never asks
  for a sleep (`limits`): a caller may skip reporting to it.
- Pure: times in, a sleep in milliseconds out; the caller sleeps, outside any lock.
"""

from __future__ import annotations

import sys

CHECK_INTERVAL_MS = 300
UNLIMITED = sys.float_info.max


class Throttle:
    __slots__ = ("_observed", "_period_start_ms", "check_interval_ms", "rate")

    def __init__(
        self, bytes_per_second: float, now_ms: float, check_interval_ms: int = CHECK_INTERVAL_MS
    ) -> None:
        self.check_interval_ms = check_interval_ms
        self.set_rate(bytes_per_second, now_ms)

    def set_rate(self, bytes_per_second: float, now_ms: float) -> None:
        if not bytes_per_second > 0:
            raise ValueError(f"a throttle rate of {bytes_per_second} bytes/s is not above 0")
        self.rate = bytes_per_second
        self._period_start_ms = now_ms
        self._observed = 0

    @property
    def limits(self) -> bool:
        """Whether the rate can ever ask for a sleep (module Rules)."""
        return self.rate < UNLIMITED

    def observe(self, size: int, now_ms: float) -> float:
        """Note `size` bytes read at `now_ms`; how many milliseconds to sleep now (0: none)."""
        self._observed += size
        elapsed = now_ms - self._period_start_ms
        if elapsed < self.check_interval_ms:
            return 0.0
        sleep_ms = max(0.0, self._observed * 1000.0 / self.rate - elapsed)
        self._period_start_ms = now_ms + sleep_ms
        self._observed = 0
        return sleep_ms
