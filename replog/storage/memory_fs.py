"""An in-memory `FileSystem` that keeps what was synced apart from what was not, so a simulated
crash loses exactly what a power loss may (LevelDB's fault-injection env, "drop unsynced data").

Rules:
- A file's durable content is its content at its last fsync/fdatasync; a directory's durable
  entries are its entries at its last fsync. `sync_file_systems` (what a `deferred_sync` block
  ends with, `syncfs`) makes every file and directory of the file system durable at once.
- Creating, renaming and removing a file or directory change only its parent's entries: until
  the parent is synced, a crash undoes them (a rename reverts to the old name, a removed file
  comes back, a new one is gone, with whatever of its data was synced).
- `crash()` keeps only what is durable: the tree of durable entries from the root, each file
  with its durable content, and returns it as a new `MemoryFileSystem` for the restarted
  process. The crashed instance and every file opened through it fail from then on (EIO,
  EBADF): a dead process's leftover objects cannot touch the disk its successor uses. Given
  a seeded `random.Random`, a file whose unsynced change was appends only keeps a random
  prefix of them (a torn tail) instead of none.
- `durable_files(directory)` reads what a crash now would keep of a directory's files, torn
  tails aside, without crashing (a simulator's durability check).
- `kill()` is a process crash without a power loss: the successor it returns finds every
  write, synced or not, and the crashed instance is dead as after `crash()`.
- Each directory reverts on its own: a file renamed from one directory to another where only
  one of them was synced ends up under both names or under neither. replog renames files only
  within their directory, and directories only within their parent.
- Faults: `capacity` bounds the bytes all files hold (a write past it writes what fits and fails
  with ENOSPC, as a full disk does; truncation and removal give space back); `fail_next` makes
  the next operations of a kind on paths matching a glob fail with an errno, changing nothing
  but a failed sync's pages; `on_operation(op, path)` is called before every operation, for a
  simulator to charge time or raise. Nothing here sleeps.
- A failed sync of a file (or of the file system: every file) loses its unsynced bytes' way to
  the disk, as Linux marks the pages a writeback could not write clean: they stay readable
  until a crash, no later sync writes them, and a crash leaves there what the disk held (zeros
  past its old end, with what later syncs wrote after them). A rewrite of those bytes makes
  them unsynced again. Directories' entries are not affected.
- Errors are the operating system's: OSError subclasses carrying errno and path, as
  `OsFileSystem` raises them, so callers handle both alike.
- One lock per file system: a log's threads share it as they would share a disk. Each instance
  is a disk of its own, with its own `deferred_sync` state.
- Data files are `MemorySegmentFile`s; their regions (`MemoryRegion`) read the file when sent
  and have no descriptor, so a writer sends what `read` returns.
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import os
import posixpath
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from random import Random

from replog.clock import Clock, wall_clock_ms
from replog.errors import KafkaStorageError
from replog.storage.file_region import RegionBounds
from replog.storage.fs import Buffer, DeferredSyncs, SegmentFile, SyncDeferral

# The kinds of operation `fail_next` and `on_operation` name.
OPERATIONS = frozenset(
    [
        "open",
        "read",
        "write",
        "truncate",
        "sync",
        "create",
        "mkdir",
        "rename",
        "remove",
        "list",
        "stat",
    ]
)


def _error(code: int, path: str) -> OSError:
    # OSError picks the subclass by errno (FileNotFoundError for ENOENT, ...), as os.* does.
    return OSError(code, os.strerror(code), path)


class _File:
    """A file's bytes: `data` now, `durable` on the disk. `durable[:dirty_from]` equals
    `data[:dirty_from]` but where a failed sync lost bytes (module Rules), so a sync copies only
    what changed since the last one."""

    __slots__ = ("data", "dirty_from", "durable", "links", "mtime_ms")

    def __init__(self, now_ms: int) -> None:
        self.data = bytearray()
        self.durable = bytearray()
        self.dirty_from = 0
        self.links = 0  # directory entries naming it: space is given back at the last unlink
        self.mtime_ms = now_ms

    def sync(self) -> None:
        start = self.dirty_from
        del self.durable[start:]
        # A failed sync's bytes never reached the disk: past its old end they read as zeros.
        self.durable += bytes(start - len(self.durable))
        self.durable += self.data[start:]
        self.dirty_from = len(self.data)

    def writeback_failed(self) -> None:
        """The unsynced bytes will not reach the disk (module Rules): they count as written."""
        self.dirty_from = len(self.data)

    def changed_from(self, position: int) -> None:
        self.dirty_from = min(self.dirty_from, position)

    def lose_unsynced(self, rng: Random | None) -> None:
        kept = self.durable
        start = self.dirty_from
        if rng is not None and start == len(kept) and len(self.data) > start:
            # Only appends since the sync: the disk may have written some of them, in order.
            kept = kept + self.data[start : start + rng.randint(0, len(self.data) - start)]
        self.data = bytearray(kept)
        self.durable = bytearray(kept)
        self.dirty_from = len(kept)


class _Dir:
    """A directory's entries now and as of its last sync."""

    __slots__ = ("durable", "entries")

    def __init__(self) -> None:
        self.entries: dict[str, _File | _Dir] = {}
        self.durable: dict[str, _File | _Dir] = {}


@dataclass
class _Fault:
    op: str
    pattern: str
    code: int
    times: int


class MemoryFileSystem(SyncDeferral):
    """A `FileSystem` held in memory, losing what was not synced at `crash` (module Rules)."""

    def __init__(self, *, clock: Clock = wall_clock_ms) -> None:
        self._deferred = DeferredSyncs()
        self._clock = clock
        self._lock = threading.RLock()
        self._root = _Dir()
        self._dead = False  # crashed: its successor holds the disk
        self._used = 0
        self._faults: list[_Fault] = []
        self.capacity: int | None = None
        self.on_operation: Callable[[str, str], None] | None = None

    # --- faults ---------------------------------------------------------------------------

    def fail_next(self, op: str, pattern: str = "*", code: int = errno.EIO, times: int = 1) -> None:
        """Make the next `times` operations of kind `op` (`OPERATIONS`) on a path matching the
        glob `pattern` fail with `code`, changing nothing."""
        if op not in OPERATIONS:
            raise ValueError(f"unknown operation {op!r}: one of {sorted(OPERATIONS)}")
        if times < 1:
            raise ValueError(f"times must be at least 1, not {times}")
        with self._locked():
            self._faults.append(_Fault(op, pattern, code, times))

    def fill_after(self, free_bytes: int) -> None:
        """Let the files grow by `free_bytes` more in all, then fail writes with ENOSPC."""
        if free_bytes < 0:
            raise ValueError(f"free bytes must not be negative, not {free_bytes}")
        with self._locked():
            self.capacity = self._used + free_bytes

    @property
    def used_bytes(self) -> int:
        """The bytes the files named in the tree hold."""
        return self._used

    def _begin(self, op: str, path: str) -> None:
        """Tell the hook, then fail if a fault is due."""
        hook = self.on_operation
        if hook is not None:
            hook(op, path)
        if not self._faults:
            return
        with self._locked():
            for fault in self._faults:
                if fault.op == op and fnmatch.fnmatchcase(path, fault.pattern):
                    fault.times -= 1
                    if not fault.times:
                        self._faults.remove(fault)
                    raise _error(fault.code, path)

    def _begin_sync(self, path: str, files: Callable[[], Iterable[_File]]) -> None:
        """`_begin` for a sync of `path`; when it fails, `files` (what it would have synced)
        lose their unsynced bytes (module Rules)."""
        try:
            self._begin("sync", path)
        except OSError:
            with self._locked():
                for file in files():
                    file.writeback_failed()
            raise

    def _files_at(self, path: str) -> list[_File]:
        node = self._lookup(path)
        return [node] if isinstance(node, _File) else []

    def _every_file(self) -> Iterator[_File]:
        stack: list[_File | _Dir] = [self._root]
        while stack:
            node = stack.pop()
            if isinstance(node, _Dir):
                stack.extend(node.entries.values())
            else:
                yield node

    # --- crashes --------------------------------------------------------------------------

    def crash(self, rng: Random | None = None) -> MemoryFileSystem:
        """Keep only what was synced (module Rules), with `rng` torn tails of appends; the
        disk as the restarted process finds it, with this instance's faults, capacity and
        hook. This instance is dead from now on."""
        with self._locked():
            self._dead = True
            files: dict[int, _File] = {}
            seen: set[int] = set()

            def restore(directory: _Dir) -> None:
                seen.add(id(directory))
                entries: dict[str, _File | _Dir] = {}
                for name, node in sorted(directory.durable.items()):  # sorted: rng order
                    if isinstance(node, _Dir):
                        if id(node) in seen:  # synced at different times into a cycle
                            continue
                        restore(node)
                    else:
                        if id(node) not in files:
                            files[id(node)] = node
                            node.lose_unsynced(rng)
                            node.links = 0
                        node.links += 1
                    entries[name] = node
                directory.entries = entries
                directory.durable = dict(entries)

            restore(self._root)
            return self._successor(sum(len(f.data) for f in files.values()))

    def durable_files(self, path: str) -> dict[str, bytes]:
        """The files directly in directory `path` that a crash now would keep, by name, each
        with what it would keep of them, torn tails aside: reached through synced directory
        entries only, with their synced bytes. Empty if the directory would not be kept."""
        with self._locked():
            node: _File | _Dir | None = self._root
            for name in self._names(path):
                node = node.durable.get(name) if isinstance(node, _Dir) else None
            if not isinstance(node, _Dir):
                return {}
            return {
                name: bytes(entry.durable)
                for name, entry in node.durable.items()
                if isinstance(entry, _File)
            }

    def kill(self) -> MemoryFileSystem:
        """The process dies (kill -9) but the machine does not: its successor finds every
        write, synced or not (the page cache survives), and a later `crash` still loses what
        was never synced. This instance is dead from now on, as after `crash`."""
        with self._locked():
            self._dead = True
            return self._successor(self._used)

    def _successor(self, used: int) -> MemoryFileSystem:
        """The instance the restarted process uses: this one's disk, faults, capacity, hook."""
        successor = MemoryFileSystem(clock=self._clock)
        successor._root = self._root
        successor._used = used
        successor._faults = self._faults
        successor.capacity = self.capacity
        successor.on_operation = self.on_operation
        return successor

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """The lock, refused once this instance crashed."""
        with self._lock:
            if self._dead:
                raise OSError(errno.EIO, "the file system crashed: its process is gone")
            yield

    # --- the tree -------------------------------------------------------------------------

    @staticmethod
    def _names(path: str) -> list[str]:
        # Relative paths start at the root: the memory file system has no working directory.
        full = posixpath.normpath(posixpath.join("/", os.fspath(path)))
        return [name for name in full.split("/") if name]

    def _lookup(self, path: str) -> _File | _Dir | None:
        node: _File | _Dir = self._root
        for name in self._names(path):
            if not isinstance(node, _Dir):
                return None
            found = node.entries.get(name)
            if found is None:
                return None
            node = found
        return node

    def _parent(self, path: str) -> tuple[_Dir, str]:
        """The directory holding `path`'s entry, and the entry's name."""
        names = self._names(path)
        if not names:
            raise _error(errno.EBUSY, path)  # the root itself
        parent = self._lookup("/" + "/".join(names[:-1]))
        if parent is None:
            raise _error(errno.ENOENT, path)
        if not isinstance(parent, _Dir):
            raise _error(errno.ENOTDIR, path)
        return parent, names[-1]

    def _file(self, path: str) -> _File:
        node = self._lookup(path)
        if node is None:
            raise _error(errno.ENOENT, path)
        if isinstance(node, _Dir):
            raise _error(errno.EISDIR, path)
        return node

    def _dir(self, path: str) -> _Dir:
        node = self._lookup(path)
        if node is None:
            raise _error(errno.ENOENT, path)
        if not isinstance(node, _Dir):
            raise _error(errno.ENOTDIR, path)
        return node

    def _create(self, path: str, *, exclusive: bool) -> _File:
        """The file at `path`, made empty in its directory if missing."""
        parent, name = self._parent(path)
        node = parent.entries.get(name)
        if node is not None:
            if exclusive:
                raise _error(errno.EEXIST, path)
            if isinstance(node, _Dir):
                raise _error(errno.EISDIR, path)
            return node
        made = _File(self._clock())
        made.links = 1
        parent.entries[name] = made
        return made

    def _unlink(self, node: _File | _Dir) -> None:
        """Give back the space of what an entry no longer names."""
        if isinstance(node, _Dir):
            for child in node.entries.values():
                self._unlink(child)
            return
        node.links -= 1
        if node.links == 0:
            self._used -= len(node.data)

    def _write_at(self, file: _File, path: str, position: int, data: Buffer) -> None:
        """Write `data` at `position`; past the capacity, write what fits and raise ENOSPC."""
        old = len(file.data)
        length = len(data)
        counted = file.links > 0  # an unlinked file's space is already given back
        full = False
        if counted and self.capacity is not None:
            room = self.capacity - self._used
            if position + length - old > room:
                length = max(0, min(length, old + room - position))
                full = True
        if length:
            if position > old:  # a hole reads as zeros
                file.changed_from(old)
                file.data.extend(bytes(position - old))
            file.changed_from(position)
            file.data[position : position + length] = memoryview(data)[:length]
            file.mtime_ms = self._clock()
            if counted:
                self._used += len(file.data) - old
        if full:
            raise _error(errno.ENOSPC, path)

    def _truncate(self, file: _File, size: int) -> None:
        old = len(file.data)
        if size < old:
            del file.data[size:]
        else:
            file.data.extend(bytes(size - old))
        file.changed_from(min(size, old))
        file.mtime_ms = self._clock()
        if file.links > 0:
            self._used += size - old

    def _sync_node(self, node: _File | _Dir) -> None:
        if isinstance(node, _Dir):
            node.durable = dict(node.entries)
        else:
            node.sync()

    # --- FileSystem -----------------------------------------------------------------------

    def fsync_file(self, path: str) -> None:
        self._begin_sync(path, lambda: self._files_at(path))
        with self._locked():
            node = self._lookup(path)
            if node is None:
                raise _error(errno.ENOENT, path)
            self._sync_node(node)

    def sync_file_systems(self, directories: Iterable[str]) -> None:
        """Sync the whole file system: it is one disk, as `syncfs` syncs one."""
        for directory in directories:
            self._begin_sync(directory, self._every_file)
        with self._locked():
            stack: list[_File | _Dir] = [self._root]
            while stack:
                node = stack.pop()
                self._sync_node(node)
                if isinstance(node, _Dir):
                    stack.extend(node.entries.values())

    def open_segment_file(self, path: str, *, create: bool = True) -> SegmentFile:
        self._begin("open", path)
        with self._locked():
            file = self._create(path, exclusive=False) if create else self._file(path)
            return MemorySegmentFile(self, file, path)

    def create_empty_file(self, path: str) -> None:
        self._begin("create", path)
        with self._locked():
            self._create(path, exclusive=True)

    def empty_segment_file(self, path: str) -> SegmentFile:
        return self.open_segment_file(path, create=False)

    def read_bytes(self, path: str) -> bytes | None:
        self._begin("read", path)
        with self._locked():
            node = self._lookup(path)
            if node is None:
                return None
            if isinstance(node, _Dir):
                raise _error(errno.EISDIR, path)
            return bytes(node.data)

    def _write_whole(self, path: str, data: bytes, *, exclusive: bool, sync: bool) -> None:
        """Create (or empty) `path` and write `data`, then sync it if `sync`; a new file whose
        write or sync fails is removed again (`write_new_file`)."""
        self._begin("create" if exclusive else "write", path)
        if exclusive:
            self._begin("write", path)
        with self._locked():
            file = self._create(path, exclusive=exclusive)
            try:
                self._truncate(file, 0)
                self._write_at(file, path, 0, data)
                if sync:
                    self._begin_sync(path, lambda: (file,))
                    file.sync()
            except BaseException:
                if exclusive:
                    parent, name = self._parent(path)
                    self._unlink(parent.entries.pop(name))
                raise

    def write_bytes(self, path: str, data: bytes, *, fsync: bool = True) -> None:
        """Create or replace a file in place (not atomic: use `atomic_write` for metadata)."""
        self._write_whole(path, data, exclusive=False, sync=fsync)

    def atomic_write(self, path: str, data: bytes) -> None:
        """`OsFileSystem.atomic_write`: `<path>.tmp`, its sync, a rename, the directory's sync
        (the syncs deferred inside a `deferred_sync` block)."""
        directory = posixpath.dirname(path) or "."
        deferred = self._defer(directory)
        tmp = path + ".tmp"
        self._write_whole(tmp, data, exclusive=False, sync=not deferred)
        self.rename(tmp, path)
        self.fsync_dir(directory)

    def write_new_file(self, path: str, data: bytes) -> None:
        """`OsFileSystem.write_new_file`: created exclusively, written, synced with its
        directory (or by the `deferred_sync` block); removed again if the write fails."""
        directory = posixpath.dirname(path) or "."
        deferred = self._defer(directory)
        self._write_whole(path, data, exclusive=True, sync=not deferred)
        if not deferred:
            self.fsync_dir(directory)

    def exists(self, path: str) -> bool:
        self._begin("stat", path)
        with self._locked():
            return self._lookup(path) is not None

    def list_dir(self, path: str) -> list[str]:
        self._begin("list", path)
        with self._locked():
            return sorted(self._dir(path).entries)

    def list_subdirs(self, path: str) -> list[str]:
        self._begin("list", path)
        with self._locked():
            entries = self._dir(path).entries
            return sorted(name for name, node in entries.items() if isinstance(node, _Dir))

    def make_dir(self, path: str) -> None:
        """Create one directory; FileExistsError if it exists."""
        self._begin("mkdir", path)
        with self._locked():
            parent, name = self._parent(path)
            if name in parent.entries:
                raise _error(errno.EEXIST, path)
            parent.entries[name] = _Dir()

    def make_dirs(self, path: str) -> None:
        self._begin("mkdir", path)
        with self._locked():
            node: _File | _Dir = self._root
            for name in self._names(path):
                if not isinstance(node, _Dir):
                    raise _error(errno.ENOTDIR, path)
                child = node.entries.get(name)
                if child is None:
                    child = node.entries[name] = _Dir()
                node = child
            if not isinstance(node, _Dir):
                raise _error(errno.EEXIST, path)

    def remove(self, path: str) -> None:
        self._begin("remove", path)
        with self._locked():
            node = self._lookup(path)
            if node is None:
                return
            if isinstance(node, _Dir):
                raise _error(errno.EISDIR, path)
            parent, name = self._parent(path)
            self._unlink(parent.entries.pop(name))

    def remove_tree(self, path: str) -> None:
        """Delete a directory and everything in it: each directory loses its entries, as
        unlinking them one by one does, and its parent loses it."""
        self._begin("remove", path)
        with self._locked():
            directory = self._dir(path)
            parent, name = self._parent(path)
            self._unlink(directory)
            stack = [directory]
            while stack:
                emptied = stack.pop()
                stack.extend(n for n in emptied.entries.values() if isinstance(n, _Dir))
                emptied.entries = {}
            del parent.entries[name]

    def rename(self, source: str, target: str) -> None:
        """`os.replace`: a file over a file, a directory over an empty directory."""
        self._begin("rename", source)
        with self._locked():
            source_parent, source_name = self._parent(source)
            node = source_parent.entries.get(source_name)
            if node is None:
                raise _error(errno.ENOENT, source)
            target_parent, target_name = self._parent(target)
            replaced = target_parent.entries.get(target_name)
            if replaced is node:
                return
            if isinstance(node, _Dir):
                if self._names(target)[: len(self._names(source))] == self._names(source):
                    raise _error(errno.EINVAL, target)  # into itself
                if replaced is not None and not isinstance(replaced, _Dir):
                    raise _error(errno.ENOTDIR, target)
                if isinstance(replaced, _Dir) and replaced.entries:
                    raise _error(errno.ENOTEMPTY, target)
            elif isinstance(replaced, _Dir):
                raise _error(errno.EISDIR, target)
            if replaced is not None:
                self._unlink(replaced)
            del source_parent.entries[source_name]
            target_parent.entries[target_name] = node

    def file_size(self, path: str) -> int:
        self._begin("stat", path)
        with self._locked():
            return len(self._file(path).data)

    def mtime_ms(self, path: str) -> int:
        self._begin("stat", path)
        with self._locked():
            return self._file(path).mtime_ms

    def truncate_file(self, path: str, size: int) -> None:
        self._begin("truncate", path)
        with self._locked():
            self._truncate(self._file(path), size)


class MemorySegmentFile:
    """A `SegmentFile` of a `MemoryFileSystem`: a handle on the file's bytes, dead once closed
    or once its file system crashed."""

    __slots__ = ("_closed", "_file", "_fs", "path", "size")

    def __init__(self, fs: MemoryFileSystem, file: _File, path: str) -> None:
        self._fs = fs
        self._file = file
        self._closed = False
        self.path = path
        self.size = len(file.data)

    def _alive(self) -> _File:
        if self._closed:
            raise _error(errno.EBADF, self.path)
        if self._fs._dead:
            raise OSError(errno.EBADF, "opened before its file system crashed", self.path)
        return self._file

    # There is no page cache in memory: the hints have nothing to act on.
    def tune_for_appends(self, cache_tail: int = -1) -> None:
        pass

    def finish_appends(self) -> None:
        pass

    def append(self, data: Buffer | Sequence[Buffer]) -> int:
        """Write `data` (one buffer or several back to back) at the end; return where it
        starts. A write that fails part-way is cut back off, as `OsSegmentFile` does."""
        fs = self._fs
        fs._begin("write", self.path)
        joined = data if isinstance(data, bytes | bytearray | memoryview) else b"".join(data)
        with fs._lock:
            file = self._alive()
            position = self.size
            before = len(file.data)
            try:
                fs._write_at(file, self.path, position, joined)
            except OSError:
                if len(file.data) != before:
                    fs._truncate(file, before)
                raise
            self.size = position + len(joined)
            return position

    def read(self, position: int, length: int) -> bytes:
        """Up to `length` bytes from `position` (fewer only at the end of the file)."""
        self._fs._begin("read", self.path)
        with self._fs._lock:
            return bytes(self._alive().data[position : position + length])

    def read_fully(self, position: int, length: int) -> bytes:
        # Memory never reads short: `read` is already as full as the file.
        return self.read(position, length)

    def region(self, position: int, length: int) -> MemoryRegion:
        with self._fs._lock:
            return MemoryRegion(self._alive(), self.path, position, length)

    def truncate(self, size: int) -> None:
        fs = self._fs
        fs._begin("truncate", self.path)
        with fs._lock:
            fs._truncate(self._alive(), size)
            self.size = size

    def fsync(self) -> None:
        fs = self._fs
        fs._begin_sync(self.path, lambda: (self._alive(),))
        with fs._lock:
            self._alive().sync()

    def fdatasync(self) -> None:
        self.fsync()

    def holds_descriptor(self) -> bool:
        return False

    def close(self) -> None:
        self._closed = True


class MemoryRegion(RegionBounds):
    """`size` bytes of a memory file from `position`, read when sent (`file_region.Region`)."""

    __slots__ = ("_file",)

    def __init__(self, file: _File, path: str, position: int, size: int) -> None:
        super().__init__(path, position, size)
        self._file: _File | None = file

    def read(self) -> bytes:
        """The region's bytes; `KafkaStorageError` when the file no longer holds them all."""
        if self._file is None:
            raise KafkaStorageError(f"{self.path}: the region at {self.position} was closed")
        data = bytes(self._file.data[self.position : self.position + self.size])
        if len(data) < self.size:
            raise self.cut_back(len(data))
        return data

    def close(self) -> None:
        self._file = None
