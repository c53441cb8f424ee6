"""The clock seam: the only module of the engine that reads the time (tests/test_architecture.py
checks it; the CLI's demos and tools time themselves).

Pure cores never call this; they receive `now_ms: int`. Shells and storage take a clock
callable (defaulting to these functions) so tests can drive time by hand.
"""

from __future__ import annotations

import time
from collections.abc import Callable

Clock = Callable[[], int]


def wall_clock_ms() -> int:
    """Milliseconds since the Unix epoch: record timestamps, retention, segment age."""
    return time.time_ns() // 1_000_000


def monotonic_ms() -> int:
    """Milliseconds on a clock that never goes back: timeouts, intervals, task periods."""
    return time.monotonic_ns() // 1_000_000


def monotonic_s() -> float:
    """Seconds (float, sub-millisecond) on a monotonic clock: latencies reported as metrics."""
    return time.perf_counter()


def thread_cpu_s() -> float:
    """Seconds the calling thread has run on a CPU: set against wall time, whether a slow
    stretch was work or waiting for a core (a loop stall on a loaded machine)."""
    return time.thread_time()
