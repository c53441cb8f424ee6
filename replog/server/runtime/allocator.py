"""Keep the C allocator from handing large buffers back to the kernel between requests.

Why: every produce, replicated fetch and follower append moves whole batches of up to a few
MiB through Python `bytes` and gRPC buffers. glibc serves blocks that large with `mmap` (and
trims its heap on `free`), so each request faults in, zeroes and unmaps fresh pages: on the
benchmark machine that system time cost a 3-node cluster about a third of its produce
throughput and tripled its latency (docs/benchmarks-history.md, "Produce path"). Raising the mmap
threshold to its maximum and the trim threshold well above a broker's working set lets freed
buffers be reused from the heap instead.

Rules: only glibc has `mallopt`; anywhere else (musl, macOS) this does nothing and says so.
It is a process-wide setting, so only process entry points (`replog node`) call it, never the
library on an embedding application's behalf; an embedding application may call it itself.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger("replog.server")

# glibc's mallopt parameter numbers (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# The largest mmap threshold glibc accepts on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX).
MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024
TRIM_THRESHOLD_BYTES = 512 * 1024 * 1024


def keep_large_buffers() -> bool:
    """Tune glibc's allocator for large, short-lived buffers; False where that is impossible."""
    name = ctypes.util.find_library("c")
    if name is None:
        log.info("allocator tuning skipped: no C library found")
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        log.info("allocator tuning skipped: %s has no mallopt (not glibc)", name)
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    # mallopt returns 1 on success; setting either threshold also stops glibc's own dynamic
    # adjustment of both, which is what keeps them where they are put.
    ok = mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1
    ok = mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES) == 1 and ok
    if not ok:
        log.warning("allocator tuning: mallopt refused a threshold; large buffers stay mmapped")
    return bool(ok)
