"""Kernel hints that keep a log segment's appends from stalling: writeback started behind the
end, and page cache dropped further behind.

Why: on ext4 (measured on this project's 2-core VM, kernel 6.18, three files appended at 80 MB/s
each: bench/append_stalls.py, figures in docs/benchmarks.md) a plain `pwrite` append waited
up to 55-141 ms whenever the kernel wrote the file back, and a file left dirty in page cache
accumulates until the kernel's background threshold (10% of memory, 2.3 GB here) and is then
written in one burst, or until a roll's `fdatasync` writes a whole segment at once (~0.5 s for
1 GiB), with appends to every file stalling meanwhile. A broker appends on its event loop, so
each such stall stalls every request it serves.

Rules:
- Both hints are advice. Neither changes a file's size, contents or durability: the recovery
  point still moves only after an fsync. A hint that fails is ignored (the append or fsync that
  follows reports a real problem itself); a file system that cannot take one (`EOPNOTSUPP`,
  `ENOSYS`, `EINVAL`) is reported as unsupported so the caller stops asking.
- `start_writeback` is `sync_file_range(SYNC_FILE_RANGE_WRITE)`: it starts writing a range and
  returns without waiting for the disk (RocksDB's `bytes_per_sync` and PostgreSQL's
  `backend_flush_after` do the same). Dirty data then stays a few MiB per file instead of
  gigabytes, and a roll's `fdatasync` finds almost nothing left to write.
- `drop_cached` is `posix_fadvise(POSIX_FADV_DONTNEED)`: the kernel frees the range's clean
  page-cache pages (pages still dirty or being written are left alone; the data on disk is
  never touched). Why a log wants that: on this project's VM, which hands free memory back to
  its host, a 1 MiB write into page cache the guest has not used lately takes ~2.3 ms against
  ~0.13 ms into pages it just freed (bench/page_cache_tail.py: 6 GiB appended at 510 MB/s
  with raw `pwrite`, 2,106 MB/s with a 64 MiB tail). A log left alone fills gigabytes of such
  page cache with data that followers and consumers at the tail read once, within
  milliseconds. Dropping it a tail behind the appends hands the same pages to the next ones.
- Where the C library has neither call (macOS), each is None and nothing is hinted.
- Hints run on one thread of their own (`HintThread`), in the order given, never on the thread
  that appends. `sync_file_range` returns without waiting for the disk only while the block
  device takes requests: with three replicas writing 100 MB/s each to one disk its queue fills,
  and the call then waits for room. On a broker's event loop that was a 15-62 ms stall, in all
  three nodes at once, every few seconds (stack samples in paced produce trials at 130k
  records/s; docs/benchmarks.md, "Produce path"). Each hint holds its own duplicate of the file
  descriptor, so a file closed (or deleted) before its hints ran is never confused with another
  file that reuses the number. A hint queued behind `PENDING_MAX` others is dropped: advice
  lost, nothing else.

No block reservation. Reserving blocks ahead of the end (`fallocate(FALLOC_FL_KEEP_SIZE)`, 1-16
MiB at a time) makes single appends in bench/append_stalls.py steadier
(p99.9 1.1 against 3.0 ms), but in a broker each `fallocate` takes the file's inode lock and
then waits for the ext4 journal, which every node's metadata-log fsync commits twice a second:
stack samples caught it blocking a node's event loop for 107-299 ms, and in 10 s paced trials
at 90k records/s (4 with, 4 without, interleaved) the end-to-end p99 was 16.4-26.1 ms with it
and 11.2-16.1 ms without (docs/benchmarks.md, "Produce path").
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import errno
import logging
import os
import threading
from collections.abc import Callable
from typing import Any, Protocol

log = logging.getLogger("replog.storage")

# sync_file_range(2): start writeback of dirty pages in the range, do not wait.
_SYNC_FILE_RANGE_WRITE = 0x02

# A hint's errno that means "this file (system) never will": stop asking.
UNSUPPORTED = frozenset({errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL})

Hint = Callable[[int, int, int], int]


def _load_sync_file_range() -> Any:
    """The C library's `sync_file_range` (setting errno), or None where it has none."""
    try:
        function = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


_sync_file_range = _load_sync_file_range()


def _start_writeback(fd: int, offset: int, length: int) -> int:
    """Start writing back [offset, offset + length) of `fd`; 0, or the errno."""
    if _sync_file_range(fd, offset, length, _SYNC_FILE_RANGE_WRITE) == 0:
        return 0
    return ctypes.get_errno()


def _drop_cached(fd: int, offset: int, length: int) -> int:
    """Drop the clean page cache of [offset, offset + length) of `fd`; 0, or the errno."""
    try:
        os.posix_fadvise(fd, offset, length, os.POSIX_FADV_DONTNEED)
    except OSError as exc:
        return exc.errno or errno.EIO
    return 0


# Each `hint(fd, offset, length) -> errno` (0 on success), or None where the call is missing.
start_writeback: Hint | None = _start_writeback if _sync_file_range is not None else None
drop_cached: Hint | None = _drop_cached if hasattr(os, "posix_fadvise") else None


# What a file does when a hint says its file system never takes that hint (stop asking).
Refused = Callable[[], None]


class HintRunner(Protocol):
    def submit(self, hint: Hint, fd: int, offset: int, length: int, refused: Refused) -> None:
        """Have `hint(fd, offset, length)` run; call `refused()` if it answers an errno of
        `UNSUPPORTED`."""


class HintThread:
    """Runs hints in the order submitted on one daemon thread, started on the first hint.

    Theory of operation: `submit` duplicates the descriptor (the hint works on the duplicate
    and closes it), queues the hint and wakes the thread; the thread runs one hint at a time
    with no lock held, so `submit` never waits for a hint, only for the queue's lock. `refused`
    runs on the hint thread: the file it belongs to only sets a flag there.
    """

    PENDING_MAX = 256

    def __init__(self) -> None:
        self._start_afresh()
        self.dropped = 0  # hints not run because the queue was full or the dup failed
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._forget_thread)

    def _start_afresh(self) -> None:
        """No thread, an empty queue, a new lock (a forked child's may be held)."""
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._pending: collections.deque[tuple[Hint, int, int, int, Refused]] = collections.deque()
        self._running = 0  # hints taken off the queue and not finished (0 or 1)
        self._thread: threading.Thread | None = None

    def submit(self, hint: Hint, fd: int, offset: int, length: int, refused: Refused) -> None:
        try:
            own = os.dup(fd)
        except OSError:  # out of descriptors: advice can wait for the next range
            with self._lock:  # submitted from the loop and from executor threads
                self.dropped += 1
            return
        with self._lock:
            if len(self._pending) >= self.PENDING_MAX:
                self.dropped += 1
                os.close(own)
                return
            self._pending.append((hint, own, offset, length, refused))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="replog-write-hints", daemon=True
                )
                self._thread.start()
            self._changed.notify_all()

    def wait_idle(self, timeout_s: float = 10.0) -> bool:
        """Wait until every hint submitted so far has run; False if `timeout_s` passed first."""
        with self._lock:
            return self._changed.wait_for(
                lambda: not self._pending and not self._running, timeout_s
            )

    def _run(self) -> None:
        while True:
            with self._lock:
                self._running = 0
                self._changed.notify_all()
                while not self._pending:
                    self._changed.wait()
                hint, fd, offset, length, refused = self._pending.popleft()
                self._running = 1
            try:
                if hint(fd, offset, length) in UNSUPPORTED:
                    refused()
            except Exception:  # a hint is advice: log it and keep serving the others
                log.exception("write hint %s(%d, %d) failed", hint, offset, length)
            finally:
                os.close(fd)

    def _forget_thread(self) -> None:
        """In a forked child: the thread is gone and the lock may be held; close the child's
        copies of the queued descriptors (the parent still runs its hints) and start afresh."""
        for _, fd, _, _, _ in self._pending:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._start_afresh()


class InlineHints:
    """Runs each hint at once on the submitting thread (tests that record the hints)."""

    def submit(self, hint: Hint, fd: int, offset: int, length: int, refused: Refused) -> None:
        if hint(fd, offset, length) in UNSUPPORTED:
            refused()


# The process's hint runner: every tuned `SegmentFile` submits to it.
runner: HintRunner = HintThread()
