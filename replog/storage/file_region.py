"""Records left where they lie in a segment file: a region a writer sends from the file to a
socket (`os.sendfile`), so the broker never copies them into its memory (Kafka's
`FileRecords.transferTo`).

Why: a leader serving a Spark task's 8 MiB fetch answer read it with `pread` (the page
cache copied into a new `bytes`) and wrote it with `send` (that copied into the socket's
buffers): two copies of every byte, 43% of the leader's CPU while serving (perf,
docs/benchmarks.md, "Where a row's CPU goes"). `sendfile` hands the socket the page cache's
pages instead.

Rules:
- A region holds its own duplicate of the file's descriptor, taken when it is made: the
  segment may be closed (deleted, its log closed) before the region is sent, and its
  descriptor's number reused by another file; the duplicate keeps the file itself. The
  file's bytes are read when they are sent: a region of a file cut back in between sends
  fewer bytes than its length, which the writer must treat as a broken answer (Kafka's
  `FileRecords` has the same window; a leader's log below its high watermark is never cut).
- `close` releases the descriptor; a region never closed releases it when it is collected.
- `fileno` is the duplicate (for `loop.sendfile`, which moves its file offset: reads and
  writes of segment files give positions, never use the offset).
"""

from __future__ import annotations

import os
import weakref
from typing import Protocol

from replog.errors import KafkaStorageError


class Region(Protocol):
    """`size` bytes of a data file from `position`, read when sent. A region of an operating
    system's file (`FileRegion`) also has `fileno` for `sendfile`; a writer that finds none
    sends what `read` returns."""

    path: str
    position: int
    size: int

    def __len__(self) -> int: ...

    def read(self) -> bytes: ...

    def close(self) -> None: ...


class RegionBounds:
    """Where a region lies, and the error of a file cut back before it was sent: what every
    kind of region shares."""

    __slots__ = ("path", "position", "size")

    def __init__(self, path: str, position: int, size: int) -> None:
        self.path = path
        self.position = position
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.path!r}, position={self.position}, size={self.size})"

    def cut_back(self, present: int) -> KafkaStorageError:
        return KafkaStorageError(
            f"{self.path}: {present} of {self.size} bytes at position "
            f"{self.position} left to read: the file was cut back"
        )


class FileRegion(RegionBounds):
    """`size` bytes of a file from `position`, read when sent (module rules)."""

    __slots__ = ("__weakref__", "_closer", "_fd")

    def __init__(self, fd: int, path: str, position: int, size: int) -> None:
        super().__init__(path, position, size)
        self._fd = os.dup(fd)
        self._closer = weakref.finalize(self, os.close, self._fd)

    def fileno(self) -> int:
        return self._fd

    def read(self) -> bytes:
        """The region's bytes, for a writer that cannot send from the file; raises
        `KafkaStorageError` when the file no longer holds them all."""
        data = os.pread(self._fd, self.size, self.position)
        while len(data) < self.size:  # a short read: rare, so joined without care
            more = os.pread(self._fd, self.size - len(data), self.position + len(data))
            if not more:
                raise self.cut_back(len(data))
            data += more
        return data

    def close(self) -> None:
        self._closer()
