"""The clock seam: the only module of the engine that reads the time (tests/test_architecture.py
checks it; the CLI's demos and tools time themselves).

Pure cores never call this; they receive `now_ms: int`. Shells and storage take a clock
callable (defaulting to these functions) so tests can drive time by hand.
"""

from __future__ import annotations

import os
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


SCHEDSTAT = "/proc/thread-self/schedstat"


class ThreadRunQueueClock:
    """Seconds the thread that made it has spent runnable but waiting for a core (the kernel's
    `run_delay` in its schedstat: other threads and processes on the CPUs), `None` where the
    platform has no such file. Set against a stall's wall and CPU time it says which part was
    the machine's load; what neither covers was a wait off the CPUs (the GIL, a blocking
    system call). One `pread` of an open file per reading (microseconds)."""

    def __init__(self, path: str = SCHEDSTAT) -> None:
        try:
            self._fd: int | None = os.open(path, os.O_RDONLY)
        except OSError:
            self._fd = None

    def __call__(self) -> float | None:
        if self._fd is None:
            return None
        try:
            fields = os.pread(self._fd, 128, 0).split()
            return int(fields[1]) / 1e9
        except (OSError, IndexError, ValueError):
            return None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
