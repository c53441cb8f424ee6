"""Where a large leader batch's CRC-32C is computed while its bytes are written
(`Log._append_large_batch`): one worker thread for logs on the operating system's disk, the
caller's own thread for any other.

Rules: the pool is one per process, started at the first large append, and its thread only
computes checksums (it touches no log state and takes no lock); `crc32c` releases the GIL, so
on a second core the check is hidden behind the write. An in-memory disk (a simulation) never
starts a thread.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import TypeVar

from replog.storage.fs import FileSystem, OsFileSystem

# Batches at least this large have their CRC-32C checked on a worker thread while they are
# written (`Log._append_large_batch`); below it the hand-off costs more than it hides.
OVERLAPPED_CRC_BYTES_MIN = 256 * 1024
T = TypeVar("T")
_crc_pool: ThreadPoolExecutor | None = None


class _Inline(Executor):
    """Runs each call at once, on the caller's thread."""

    def submit(self, fn: Callable[..., T], /, *args: object, **kwargs: object) -> Future[T]:
        done: Future[T] = Future()
        try:
            done.set_result(fn(*args, **kwargs))
        except Exception as exc:
            done.set_exception(exc)
        return done


_INLINE = _Inline()


def crc_worker(fs: FileSystem) -> Executor:
    """The CRC pool for a log on the operating system's disk; inline on any other: an
    in-memory disk has no write to hide the CRC behind, and a simulation runs no threads."""
    global _crc_pool
    if type(fs) is not OsFileSystem:
        return _INLINE
    if _crc_pool is None:
        _crc_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="replog-crc")
    return _crc_pool
