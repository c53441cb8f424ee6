"""The file-system seam: the only module of the storage engine that opens, writes, syncs or
renames files on the operating system's disks.

Rules:
- Every durable file replog owns is reached through a `FileSystem` (a Protocol): `OsFileSystem`
  here, `memory_fs.MemoryFileSystem` in memory (it keeps what was synced apart from what was
  not, for crash tests and the simulator); tests may subclass `OsFileSystem` to inject faults
  (a full disk, a torn write) without touching any other module. Data files are `SegmentFile`s
  (a Protocol too: `OsSegmentFile` here).
- `atomic_write` is the one way small metadata files (checkpoints, markers) are replaced: write
  `<name>.tmp`, fsync it, rename it over the target, fsync the directory. A crash at any point
  leaves either the old file or the new one, never a mix.
- `write_new_file` makes a small file that does not exist yet (a new log's own files): written
  under its name, without the temporary file and rename `atomic_write` needs to keep an old
  content, and synced as `atomic_write` syncs.
- A batch of many small files (`deferred_sync`): on the calling thread, `atomic_write` and
  `fsync_dir` skip their fsyncs and note the file systems touched; leaving the block syncs each
  of those file systems once (`syncfs`, Linux; elsewhere `sync`), so creating a thousand
  replicas costs one sync instead of five thousand fsyncs. What a crash inside the block leaves
  is what it would leave without it before the last fsync: each caller states why that is safe
  (`docs/storage.md`, "Creating many replicas"). Other threads are unaffected.
- `SegmentFile` is an append-only data file with positional reads. Its `size` is tracked in
  memory, so an append never asks the kernel where the end is. An empty `OsSegmentFile` holds
  no file descriptor until its first append or truncation: a broker's idle replicas (100,000
  of them after a large CreateTopics) would otherwise hold one each, past the process's
  open-file limit (20,000 here); a file once written to keeps its descriptor until closed. An
  append may be given several buffers, written back to back with one gather write
  (`pwritev`): the log writes a stamped header prefix and the caller's batch bytes that way,
  without first copying them together.
- A log segment's `OsSegmentFile` (`tune_for_appends`) starts writeback behind its end every
  few MiB and, with a page-cache tail (`log.page.cache.tail.bytes`), drops from the page cache
  what lies more than the tail behind its end; once rolled (`finish_appends`), it drops all of
  its cache at its next sync (`write_hints`: why, and what was measured). The hints run on
  their own thread, never the appender's. Its size, contents and durability are as without.
  It reserves no blocks ahead (`write_hints` says why not).
- Errors from the operating system surface as `OSError` here (`MemoryFileSystem` raises the
  same); callers (the log) turn them into `KafkaStorageError` with the partition and file
  named, because only they know what the failure means for acknowledged data.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import os
import stat
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Protocol

from replog.storage import write_hints
from replog.storage.file_region import FileRegion, Region

Buffer = bytes | bytearray | memoryview

# The most buffers one pwritev call takes (POSIX guarantees at least 16; Linux allows 1024).
_IOV_MAX = max(16, min(os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") else 16, 1024))
# `read_bytes` reads this much per system call: most of what it reads is a small checkpoint.
_READ_CHUNK_BYTES = 64 * 1024


# Taken only to open an empty file's descriptor on its first use (`OsSegmentFile._open`), so two
# threads never both open it.
_OPENING = threading.Lock()
# `OsSegmentFile._fd` before its descriptor is opened, and after `close`.
_NOT_OPEN = -1
_CLOSED = -2


# How much a log segment appends before starting writeback of it: ~0.3 ms per call, and a few
# MiB of dirty data per active segment at most.
WRITEBACK_BEHIND_BYTES = 4 << 20


class SegmentFile(Protocol):
    """An open data file that grows by appends, is read at positions and can be cut back
    (module Rules). `size` is where the next append goes."""

    path: str
    size: int

    def tune_for_appends(self, cache_tail: int = -1) -> None: ...

    def append(self, data: Buffer | Sequence[Buffer]) -> int: ...

    def finish_appends(self) -> None: ...

    def read(self, position: int, length: int) -> bytes: ...

    def read_fully(self, position: int, length: int) -> bytes: ...

    def region(self, position: int, length: int) -> Region: ...

    def truncate(self, size: int) -> None: ...

    def fsync(self) -> None: ...

    def fdatasync(self) -> None: ...

    def holds_descriptor(self) -> bool: ...

    def close(self) -> None: ...


class OsSegmentFile:
    """A `SegmentFile` on the operating system's disk.

    Theory of operation: one file descriptor opened read-write, for an empty file only once
    something writes to it (`_open`: reading an empty file needs none); appends use
    `os.pwrite` at the tracked end, so reads (`os.pread`) and appends never share a file
    offset and need no seek.
    Tuned for appends: `_written_back` is where writeback was last started up to (-1: off),
    `_cache_tail` how many of the newest bytes stay cached (-1: all), `_uncached_to` where the
    page cache was last dropped up to, `_uncache_all_when_synced` whether the next sync drops
    all of it (set when appends are finished).
    """

    __slots__ = (
        "_cache_tail",
        "_fd",
        "_uncache_all_when_synced",
        "_uncached_to",
        "_written_back",
        "path",
        "size",
    )

    def __init__(self, path: str, *, create: bool) -> None:
        flags = os.O_RDWR | (os.O_CREAT if create else 0)
        self.path = path
        fd = os.open(path, flags, 0o644)
        self.size = os.fstat(fd).st_size
        if self.size == 0:
            os.close(fd)  # opened again by the first write (module docstring)
            fd = _NOT_OPEN
        self._fd = fd
        self._tuned_off()

    @classmethod
    def made_empty(cls, path: str) -> OsSegmentFile:
        """The file at `path`, which `FileSystem.create_empty_file` made and nothing wrote to
        since: no system call (no descriptor is held for an empty file anyway)."""
        made = cls.__new__(cls)
        made.path = path
        made.size = 0
        made._fd = _NOT_OPEN
        made._tuned_off()
        return made

    def _tuned_off(self) -> None:
        self._written_back = -1
        self._cache_tail = -1
        self._uncached_to = 0
        self._uncache_all_when_synced = False

    def _open(self) -> int:
        """The file's descriptor, opened now if it was not yet."""
        fd = self._fd
        if fd >= 0:
            return fd
        with _OPENING:
            if self._fd == _NOT_OPEN:
                self._fd = os.open(self.path, os.O_RDWR)
            elif self._fd == _CLOSED:
                raise OSError(errno.EBADF, "the segment file is closed", self.path)
            return self._fd

    def tune_for_appends(self, cache_tail: int = -1) -> None:
        """From now on, start writeback behind the appends, where the platform can; with
        `cache_tail` >= 0, also drop from the page cache what lies more than `cache_tail` bytes
        behind the end, once its writeback was started."""
        if write_hints.start_writeback is not None:
            self._written_back = self.size
            if write_hints.drop_cached is not None:
                self._cache_tail = cache_tail

    def append(self, data: Buffer | Sequence[Buffer]) -> int:
        """Write `data` (one buffer, or a list of buffers written back to back) at the end;
        return the position it starts at. Buffers hold bytes (item size 1).

        A short write (a full disk part-way) is cut back off the file before the error
        propagates, so the file never keeps half an append.
        """
        position = self.size
        # (The log's appends are lists of two, a stamped prefix and a body: tested first, as
        # an `isinstance` with three types and `sum(map(...))` cost ~0.3 µs per append.)
        parts: Sequence[Buffer]
        if type(data) is list and len(data) == 2:
            parts = data
            total = len(data[0]) + len(data[1])
        else:
            parts = (data,) if isinstance(data, (bytes, bytearray, memoryview)) else data
            total = sum(map(len, parts))
        written = 0
        fd = self._fd if self._fd >= 0 else self._open()
        try:
            # One system call for a header and its body: cheaper than joining them.
            while written < total:
                some = parts if len(parts) <= _IOV_MAX else parts[:_IOV_MAX]
                n = os.pwritev(fd, some, position + written)
                if n == 0:
                    raise OSError(f"write of {total} bytes to {self.path} made no progress")
                written += n
                if written < total:
                    parts = _unwritten(parts, n)
        except OSError:
            if written:
                self.truncate(position)
            raise
        self.size = end = position + written
        if end - self._written_back >= WRITEBACK_BEHIND_BYTES and self._written_back >= 0:
            self._start_writeback(end)
        return position

    def _start_writeback(self, end: int) -> None:
        """Start writing back what was appended since the last time, up to `end`."""
        assert write_hints.start_writeback is not None
        start = self._written_back
        self._written_back = end
        write_hints.runner.submit(
            write_hints.start_writeback, self._fd, start, end - start, self._writeback_refused
        )
        # What lies further back than the tail had its writeback started at least one range
        # ago (hints run in order), so it is clean or nearly (pages still being written are
        # left cached).
        if self._cache_tail >= 0 and end - self._cache_tail - self._uncached_to >= (
            WRITEBACK_BEHIND_BYTES
        ):
            self._drop_cache_to(end - self._cache_tail)

    def _drop_cache_to(self, end: int) -> None:
        """Drop the page cache from where it was last dropped up to `end`."""
        assert write_hints.drop_cached is not None
        start = self._uncached_to
        self._uncached_to = end
        write_hints.runner.submit(
            write_hints.drop_cached, self._fd, start, end - start, self._drop_refused
        )

    # On the hint thread, when the file system refuses a hint: stop asking. (A truncate racing
    # it may re-enable hinting once; the next refusal turns it off again: advice, never data.)
    def _writeback_refused(self) -> None:
        self._written_back = -1

    def _drop_refused(self) -> None:
        self._cache_tail = -1

    def finish_appends(self) -> None:
        """No more appends (a newer segment took over): drop the file's page cache after the
        next sync, when it is clean."""
        self._uncache_all_when_synced = self._cache_tail >= 0

    def read(self, position: int, length: int) -> bytes:
        """Up to `length` bytes from `position` (fewer only at the end of the file)."""
        if self._fd < 0 and position >= self.size:
            return self._nothing_read()
        return os.pread(self._fd, length, position)

    def read_fully(self, position: int, length: int) -> bytes:
        """Exactly `length` bytes from `position`, looping over short reads."""
        if self._fd < 0 and position >= self.size:
            return self._nothing_read()
        data = os.pread(self._fd, length, position)
        if len(data) == length or not data:
            return data  # the usual case: one read
        chunks: list[bytes] = [data]
        remaining = length - len(data)
        while remaining > 0:
            chunk = os.pread(self._fd, remaining, position + length - remaining)
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def region(self, position: int, length: int) -> Region:
        """`length` bytes from `position`, left in the file for a writer to send
        (`file_region`). The caller knows the file holds them."""
        return FileRegion(self._open(), self.path, position, length)

    def _nothing_read(self) -> bytes:
        """A read at or past the end of a file without a descriptor: empty, or an error once
        the file is closed, as a read of a closed descriptor would be."""
        if self._fd == _CLOSED:
            raise OSError(errno.EBADF, "the segment file is closed", self.path)
        return b""

    def truncate(self, size: int) -> None:
        os.ftruncate(self._open(), size)
        self.size = size
        self._written_back = min(self._written_back, size)
        self._uncached_to = min(self._uncached_to, size)
        # A log cuts back into a segment only to append to it again.
        self._uncache_all_when_synced = False

    # A file without a descriptor was empty when created or loaded and nothing was written to it
    # since: its data has nothing to sync, and its directory entry is made durable by its
    # creator's directory sync, as for any new file.
    def fsync(self) -> None:
        if self._fd == _NOT_OPEN:
            return
        os.fsync(self._fd)
        self._after_sync()

    def fdatasync(self) -> None:
        if self._fd == _NOT_OPEN:
            return
        os.fdatasync(self._fd)
        self._after_sync()

    def _after_sync(self) -> None:
        # A roll flush calls this on the log manager's thread without the log's lock; a cut
        # racing it can at worst drop or keep some cache it should not: advice, never data.
        if self._uncache_all_when_synced:
            # From the start: the pages earlier drops skipped while they were being written
            # are clean now too.
            self._uncache_all_when_synced = False
            self._uncached_to = 0
            self._drop_cache_to(self.size)

    def fileno(self) -> int:
        return self._open()

    def holds_descriptor(self) -> bool:
        return self._fd >= 0

    def close(self) -> None:
        with _OPENING:
            fd, self._fd = self._fd, _CLOSED
        if fd >= 0:
            os.close(fd)


def _load_syncfs() -> Callable[[int], int] | None:
    """libc's `syncfs(fd)` where the platform has it (Linux), else None."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        function = libc.syncfs
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int]
    function.restype = ctypes.c_int
    return function


_SYNCFS = _load_syncfs()


class Unsynced:
    """What a `collect_unsynced` block wrote without syncing: the directories whose file
    systems must be synced, and the files to tell (`mark_synced`) once they are."""

    __slots__ = ("files", "paths")

    def __init__(self) -> None:
        self.paths: set[str] = set()
        self.files: list[SyncedLater] = []

    def __bool__(self) -> bool:
        return bool(self.paths)

    def absorb(self, other: Unsynced) -> None:
        """Add what `other` left to sync (a file noted in both is told once)."""
        self.paths |= other.paths
        known = {id(f) for f in self.files}
        self.files.extend(f for f in other.files if id(f) not in known)


class SyncedLater(Protocol):
    """A small file whose write a `collect_unsynced` block deferred: `write_pending` writes
    it (without a sync), `mark_synced` tells it the file system was synced since."""

    @property
    def directory(self) -> str: ...

    def write_pending(self) -> None: ...

    def mark_synced(self) -> None: ...

    def make_durable(self) -> None: ...


class DeferredSyncs(threading.local):
    """Per thread: what the current `collect_unsynced` block wrote (None outside one)."""

    def __init__(self) -> None:
        self.unsynced: Unsynced | None = None


class FileSystem(Protocol):
    """The operations replog's storage performs on a disk: `OsFileSystem` on the operating
    system's, `replog.storage.memory_fs.MemoryFileSystem` in memory (module Rules)."""

    def deferred_sync(self) -> contextlib.AbstractContextManager[None]: ...

    def collect_unsynced(self) -> contextlib.AbstractContextManager[Unsynced]: ...

    def sync_unsynced(self, unsynced: Unsynced, *, each_up_to: int = 0) -> None: ...

    def undeferred(self) -> contextlib.AbstractContextManager[None]: ...

    def defer_file(self, synced_later: SyncedLater, directory: str) -> bool: ...

    def fsync_file(self, path: str) -> None: ...

    def fsync_dir(self, path: str) -> None: ...

    def sync_file_systems(self, directories: Iterable[str]) -> None: ...

    def open_segment_file(self, path: str, *, create: bool = True) -> SegmentFile: ...

    def create_empty_file(self, path: str) -> None: ...

    def empty_segment_file(self, path: str) -> SegmentFile: ...

    def read_bytes(self, path: str) -> bytes | None: ...

    def write_bytes(self, path: str, data: bytes, *, fsync: bool = True) -> None: ...

    def atomic_write(self, path: str, data: bytes) -> None: ...

    def write_new_file(self, path: str, data: bytes) -> None: ...

    def exists(self, path: str) -> bool: ...

    def list_dir(self, path: str) -> list[str]: ...

    def list_subdirs(self, path: str) -> list[str]: ...

    def make_dir(self, path: str) -> None: ...

    def make_dirs(self, path: str) -> None: ...

    def remove(self, path: str) -> None: ...

    def remove_all(self, paths: Iterable[str]) -> None: ...

    def remove_tree(self, path: str) -> None: ...

    def rename(self, source: str, target: str) -> None: ...

    def file_size(self, path: str) -> int: ...

    def mtime_ms(self, path: str) -> int: ...

    def truncate_file(self, path: str, size: int) -> None: ...


class SyncDeferral(ABC):
    """The `deferred_sync` machinery every `FileSystem` shares, over its own `fsync_file` and
    `sync_file_systems`. `_deferred` is per thread; an implementation whose instances are
    separate disks (in memory) gives each instance its own, while every `OsFileSystem` shares
    one, as they share the one operating system's disks."""

    _deferred = DeferredSyncs()

    @abstractmethod
    def fsync_file(self, path: str) -> None:
        """Make a file's data, or a directory's entries, durable (never deferred)."""

    @abstractmethod
    def sync_file_systems(self, directories: Iterable[str]) -> None:
        """Make everything written on the file systems of `directories` durable."""

    @abstractmethod
    def remove(self, path: str) -> None:
        """Remove a file; nothing when it does not exist."""

    @contextlib.contextmanager
    def deferred_sync(self) -> Iterator[None]:
        """Within the block, this thread's `atomic_write` and `fsync_dir` do not fsync; at its
        end every file system they touched is synced once (module docstring). Nested blocks
        sync at the outermost end. An exception inside the block skips the sync."""
        with self.collect_unsynced() as unsynced:
            yield
        self.sync_unsynced(unsynced)

    @contextlib.contextmanager
    def collect_unsynced(self) -> Iterator[Unsynced]:
        """Like `deferred_sync`, but the caller syncs what it yields, when and on whichever
        thread it likes (`sync_unsynced`). Nested in another block, it yields an empty
        collection and the outer block collects."""
        if self._deferred.unsynced is not None:
            yield Unsynced()
            return
        unsynced = Unsynced()
        self._deferred.unsynced = unsynced
        try:
            yield unsynced
        finally:
            self._deferred.unsynced = None

    def sync_unsynced(self, unsynced: Unsynced, *, each_up_to: int = 0) -> None:
        """Write what a `collect_unsynced` block left to write, sync everything it touched,
        then tell its files. When the block's only writes were those files and there are at
        most `each_up_to` of them, each is written and synced on its own (`make_durable`):
        a file-system sync writes back everything else dirty on it too."""
        files = unsynced.files
        only_files = unsynced.paths <= {f.directory for f in files}
        if files and only_files and len(files) <= each_up_to:
            for synced in files:
                synced.make_durable()
            return
        for deferred in files:
            deferred.write_pending()
        if unsynced.paths:
            self.sync_file_systems(unsynced.paths)
        for synced in files:
            synced.mark_synced()

    @contextlib.contextmanager
    def undeferred(self) -> Iterator[None]:
        """Within a `deferred_sync` block, a part whose writes must be durable when it ends."""
        unsynced, self._deferred.unsynced = self._deferred.unsynced, None
        try:
            yield
        finally:
            self._deferred.unsynced = unsynced

    def _defer(self, directory: str) -> bool:
        """Whether this thread is inside a `deferred_sync` block (noting `directory` if so)."""
        unsynced = self._deferred.unsynced
        if unsynced is None:
            return False
        unsynced.paths.add(directory)
        return True

    def defer_file(self, synced_later: SyncedLater, directory: str) -> bool:
        """In a `deferred_sync` block: note `synced_later` to be told when its write (in
        `directory`) is synced, and return True; outside one, return False."""
        if not self._defer(directory):
            return False
        unsynced = self._deferred.unsynced
        assert unsynced is not None
        unsynced.files.append(synced_later)
        return True

    def fsync_dir(self, path: str) -> None:
        if not self._defer(path):
            self.fsync_file(path)

    def remove_all(self, paths: Iterable[str]) -> None:
        for path in paths:
            self.remove(path)


class OsFileSystem(SyncDeferral):
    """The `FileSystem` of the operating system's disks. Subclass to inject faults."""

    def fsync_file(self, path: str) -> None:
        """fsync a file or a directory by its path (never deferred)."""
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def sync_file_systems(self, directories: Iterable[str]) -> None:
        """Make everything written under each of `directories` durable: one `syncfs` per file
        system (several directories on one file system share it), else one `sync`."""
        seen: set[int] = set()
        # Sorted, a directory comes before its subdirectories. A subdirectory of one already
        # found is on its file system (a partition's directory, which the broker made, is never
        # a mount point): a creation batch names its log dir and each new partition's
        # directory, and a stat of each of those was a tenth of the Python its bulk thread ran.
        found: set[str] = set()
        for directory in sorted(directories):
            if os.path.dirname(directory) in found:
                continue
            found.add(directory)
            # A directory renamed since its writes (a deleted partition's) is synced through
            # the nearest parent still there: the same file system.
            device = _device_of(directory)
            if device is None:
                directory = os.path.abspath(directory)
                while device is None and os.path.dirname(directory) != directory:
                    directory = os.path.dirname(directory)
                    device = _device_of(directory)
                if device is None:
                    device = os.stat(directory).st_dev  # the root: its own error
            if device in seen:
                continue
            seen.add(device)
            if _SYNCFS is None:
                os.sync()
                return
            fd = os.open(directory, os.O_RDONLY)
            try:
                if _SYNCFS(fd) != 0:
                    error = ctypes.get_errno()
                    raise OSError(error, f"syncfs of {directory}: {os.strerror(error)}")
            finally:
                os.close(fd)

    def open_segment_file(self, path: str, *, create: bool = True) -> SegmentFile:
        return OsSegmentFile(path, create=create)

    def create_empty_file(self, path: str) -> None:
        """Create `path`, empty; FileExistsError if it exists. Not synced: as a new
        directory's entry, the caller's sync of its directory makes it durable."""
        os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644))

    def empty_segment_file(self, path: str) -> SegmentFile:
        """The segment file `create_empty_file` made at `path`, without a system call (a new
        replica's log is built on the event loop from what a worker thread made). A subclass
        that makes segment files of its own (tests' fault injection) gets one from
        `open_segment_file`, which opens the file."""
        if type(self).open_segment_file is not OsFileSystem.open_segment_file:
            return self.open_segment_file(path, create=False)
        return OsSegmentFile.made_empty(path)

    def read_bytes(self, path: str) -> bytes | None:
        """The whole file, or None when it does not exist."""
        # Plain descriptor reads, not a buffered file object: a restart reads a few small
        # files per log for thousands of logs, and `open()` costs twice the system calls' time.
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            chunks = []
            while chunk := os.read(fd, _READ_CHUNK_BYTES):
                chunks.append(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)

    def write_bytes(self, path: str, data: bytes, *, fsync: bool = True) -> None:
        """Create or replace a file in place (not atomic: use `atomic_write` for metadata)."""
        with open(path, "wb") as f:
            f.write(data)
            f.flush()
            if fsync:
                os.fsync(f.fileno())

    def atomic_write(self, path: str, data: bytes) -> None:
        """Replace `path` with `data` so that a crash leaves the old or the new content."""
        tmp = path + ".tmp"
        directory = os.path.dirname(path) or "."
        deferred = self._defer(directory)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        _write_all(fd, data, sync=not deferred)
        os.replace(tmp, path)
        self.fsync_dir(directory)

    def write_new_file(self, path: str, data: bytes) -> None:
        """Create `path`, which must not exist (FileExistsError), holding `data`; durable as
        `atomic_write`'s (its fsync and its directory's, or the `deferred_sync` block's sync).
        No temporary file and no rename: there is no old content a crash could mix with the
        new, so one leaves the file missing, empty or whole (`data` goes in one write; a file
        system that can leave unsynced data torn after a power loss can do that to an
        `atomic_write` in a deferred block too, which renames before anything is synced). A
        write that fails after creating the file (a short write, then ENOSPC) removes it: what
        `atomic_write` leaves in its temporary file must not stay under the file's name."""
        directory = os.path.dirname(path) or "."
        deferred = self._defer(directory)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            _write_all(fd, data, sync=not deferred)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(path)
            raise
        if not deferred:
            self.fsync_dir(directory)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def list_dir(self, path: str) -> list[str]:
        return sorted(os.listdir(path))

    def list_subdirs(self, path: str) -> list[str]:
        """The names of `path`'s directories (symbolic links to one included), sorted: one
        listing, without a stat per entry where the file system reports entry types."""
        with os.scandir(path) as entries:
            return sorted(entry.name for entry in entries if entry.is_dir())

    def make_dir(self, path: str) -> None:
        """Create one directory; FileExistsError if it exists."""
        os.mkdir(path)

    def make_dirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def remove(self, path: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)

    def remove_tree(self, path: str) -> None:
        """Delete a directory and everything in it (used for deleted partitions)."""
        for name in os.listdir(path):
            child = os.path.join(path, name)
            if os.path.isdir(child):
                self.remove_tree(child)
            else:
                os.remove(child)
        os.rmdir(path)

    def rename(self, source: str, target: str) -> None:
        os.replace(source, target)

    def file_size(self, path: str) -> int:
        return os.stat(path).st_size

    def mtime_ms(self, path: str) -> int:
        return os.stat(path).st_mtime_ns // 1_000_000

    def truncate_file(self, path: str, size: int) -> None:
        os.truncate(path, size)


LOCAL_FS = OsFileSystem()


def make_dirs_durably(fs: FileSystem, directory: str) -> None:
    """Make `directory` and its missing parents, each new one's entry synced in its parent:
    a crash must not lose a directory whose own files were synced. One `make_dir` when the
    directory exists (a restart), no stat."""
    path = os.path.normpath(directory)
    try:
        fs.make_dir(path)
    except FileExistsError:
        return
    except FileNotFoundError:
        parent = os.path.dirname(path)
        if parent in ("", path):
            raise
        make_dirs_durably(fs, parent)
        fs.make_dir(path)
    fs.fsync_dir(os.path.dirname(path) or ".")


def _write_all(fd: int, data: bytes, *, sync: bool) -> None:
    """Write all of `data` to `fd`, fsync it if `sync`, and close it."""
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def _device_of(directory: str) -> int | None:
    """The device of `directory`, or None when it is not (or no longer) a directory."""
    try:
        found = os.stat(directory)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return found.st_dev if stat.S_ISDIR(found.st_mode) else None


def _unwritten(parts: Sequence[Buffer], written: int) -> list[Buffer]:
    """What is left of `parts` once their first `written` bytes went out."""
    for i, part in enumerate(parts):
        if written < len(part):
            return [memoryview(part)[written:], *parts[i + 1 :]]
        written -= len(part)
    return []
