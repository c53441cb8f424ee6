"""The task's Python worker keeps the memory it frees for its next fetch answer (glibc only).

Why: a task handles one fetch answer (up to `max.partition.fetch.bytes`, 8 MiB here) at a
time, and with it the decoded columns and a dozen numpy arrays of half a MiB. With glibc's
defaults each of those blocks is its own `mmap` (or the heap's top is trimmed after it is
freed), so every answer comes in fresh pages: the kernel zeroes and maps them one page
fault at a time, about a fifth of a worker's CPU in a read (2M records of 100 B from a
3-node cluster: 0.40-0.43 us of worker CPU per row with the defaults, 0.32-0.34 us with
this, same machine, alternating runs; docs/benchmarks.md). Here the worker's allocator takes
blocks below `MMAP_THRESHOLD` from its heap and keeps up to `TRIM_THRESHOLD` of freed heap
instead of giving it back, so the next answer reuses the pages of the last one.

Rules:
- Applied once per process, by the first task that reads (`keep_freed_memory`); Spark reuses
  a Python worker for later tasks, which keep the setting.
- Only where the C library is glibc (its `mallopt` and constants); elsewhere nothing is done.
- The cost: a worker keeps up to `TRIM_THRESHOLD` of freed memory (it needed it at its peak
  anyway), instead of returning it to the system between answers.
- Setting the thresholds by hand turns off glibc's own adjustment of them; a failed call is
  ignored (the read works the same, only slower).
"""

from __future__ import annotations

import ctypes
import platform

M_TRIM_THRESHOLD = -1  # glibc's <malloc.h>
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 * 1024 * 1024  # glibc's largest: blocks below it come from the heap
TRIM_THRESHOLD = 128 * 1024 * 1024  # freed heap kept for reuse, at most

_applied: bool | None = None  # None: not tried yet in this process


def keep_freed_memory() -> bool:
    """Set this process's allocator as the module docstring says, once; whether it is set."""
    global _applied
    if _applied is None:
        _applied = _set_thresholds()
    return _applied


def _set_thresholds() -> bool:
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    # mallopt answers 1 on success, 0 on failure.
    return bool(
        mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
