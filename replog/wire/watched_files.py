"""Something loaded from files and loaded again when they change: the TLS material of the
node's listeners and links, rotated without a restart.

Rules:
- A file has changed when its modification time, size, inode, device or change time has (a
  replacement of the same size with its modification time kept is another inode, or at least
  another change time); `current()` looks (one `stat` per file), so the caller decides when:
  at each new connection, never on a timer.
- A load that fails (a file missing or half written, a key that does not match its
  certificate) keeps what was loaded before and logs one WARNING naming the cause; the same
  files are not tried again until they change again. The first load's failure is the
  caller's (it raises).
- Thread-safe: gRPC asks from its own threads.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")
Stamp = tuple[tuple[int, ...], ...]

log = logging.getLogger("replog.server.tls")


def stamp(paths: Sequence[str]) -> Stamp:
    """What tells each file's change (module rules; OSError: one is missing)."""
    stamps = []
    for path in paths:
        stat = os.stat(path)
        stamps.append((stat.st_mtime_ns, stat.st_size, stat.st_ino, stat.st_dev, stat.st_ctime_ns))
    return tuple(stamps)


class WatchedFiles(Generic[T]):
    """`load()`'s result, loaded again when one of `paths` changes (module rules); `what`
    names it in log lines ("the Kafka listener SSL's TLS material")."""

    def __init__(self, paths: Sequence[str], load: Callable[[], T], what: str) -> None:
        self._paths = tuple(paths)
        self._load = load
        self._what = what
        self._lock = threading.Lock()
        self._stamp = stamp(self._paths)
        self._value = load()
        self._refused: Stamp | None = None
        self.loads = 1  # how many loads succeeded (the first included)

    def current(self) -> T:
        with self._lock:
            failure: Exception | None = None
            try:
                now = stamp(self._paths)
            except OSError as exc:
                now, failure = _MISSING, exc
            if now == self._stamp or now == self._refused:
                return self._value
            if failure is None:
                try:
                    value = self._load()
                except Exception as exc:  # whatever the loader says is the cause logged
                    failure = exc
                else:
                    self._value, self._stamp, self._refused = value, now, None
                    self.loads += 1
                    log.info("%s: loaded again from %s", self._what, ", ".join(self._paths))
                    return value
            log.warning("%s: keeping the material in use: %s", self._what, failure)
            self._refused = now
            return self._value


_MISSING: Stamp = ((-1,),)  # the stamp of files one of which is missing
