"""Stateful property: `MemoryFileSystem` against a model of what survives a crash
(replog/storage/memory_fs.py, Rules). The model knows files by identity and keeps whole byte
strings: each file's content now and on the disk, and one directory's entries now and at its
last sync. A sync writes a file's bytes from the first one changed since the last sync or failed
sync (a failed sync's bytes never reach the disk: zeros past its old end).
A crash keeps the directory's synced entries, each file with its synced content;
with a seeded random source, a file whose content still begins with its synced content may also
keep a prefix of the rest (a torn tail of appends). A process crash without a power loss
(`kill`) keeps everything."""

from __future__ import annotations

import errno
import random
from dataclasses import dataclass

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from replog.storage.fs import SegmentFile
from replog.storage.memory_fs import MemoryFileSystem

D = "/data/d"
NAMES = st.sampled_from(["a", "b", "c", "a.tmp"])
CHUNKS = st.binary(min_size=0, max_size=24)


@dataclass
class ModelFile:
    content: bytes = b""
    synced: bytes = b""  # what the disk holds
    dirty_from: int = 0  # the first byte changed since the last sync or failed sync

    def changed_from(self, position: int) -> None:
        self.dirty_from = min(self.dirty_from, position)

    def sync(self) -> None:
        start = self.dirty_from
        kept = self.synced[:start]
        self.synced = kept + bytes(start - len(kept)) + self.content[start:]
        self.dirty_from = len(self.content)


class MemoryFsMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.fs = MemoryFileSystem(clock=lambda: 0)
        self.fs.make_dirs(D)
        self.fs.fsync_dir("/")
        self.fs.fsync_dir("/data")
        self.entries: dict[str, ModelFile] = {}
        self.synced_entries: dict[str, ModelFile] = {}
        self.handles: dict[int, tuple[SegmentFile, ModelFile]] = {}  # by model identity
        self.capacity: int | None = None

    def path(self, name: str) -> str:
        return f"{D}/{name}"

    def used(self) -> int:
        return sum(len(f.content) for f in {id(f): f for f in self.entries.values()}.values())

    def handle(self, name: str) -> tuple[SegmentFile, ModelFile]:
        """The open file of what `name` names, opened (and created) now unless one is open on
        that file: one handle per file, as its tracked size is the handle's own (a real
        one's too). A handle on a file renamed or removed since still writes to that file."""
        if name not in self.entries:
            self.entries[name] = ModelFile()
        model = self.entries[name]
        found = self.handles.get(id(model))
        if found is None:
            found = (self.fs.open_segment_file(self.path(name)), model)
            self.handles[id(model)] = found
        return found

    # --- operations ------------------------------------------------------------------------

    @rule(name=NAMES, data=CHUNKS)
    def append(self, name: str, data: bytes) -> None:
        file, model = self.handle(name)
        linked = any(f is model for f in self.entries.values())
        fits = self.capacity is None or not linked or self.used() + len(data) <= self.capacity
        if fits:
            assert file.append(data) == len(model.content)
            model.changed_from(len(model.content))
            model.content += data
        else:
            with pytest.raises(OSError) as failed:
                file.append(data)
            assert failed.value.errno == errno.ENOSPC  # and nothing of it stays

    @rule(name=NAMES, cut=st.integers(0, 40))
    def truncate(self, name: str, cut: int) -> None:
        file, model = self.handle(name)
        size = max(0, len(model.content) - cut)
        file.truncate(size)
        model.changed_from(size)
        model.content = model.content[:size]

    @rule(name=NAMES)
    def fsync(self, name: str) -> None:
        file, model = self.handle(name)
        file.fsync()
        model.sync()

    @rule(name=NAMES, data=CHUNKS, whole=st.booleans())
    def write_whole(self, name: str, data: bytes, whole: bool) -> None:
        """`write_bytes` (synced or not) or `atomic_write`."""
        if self.capacity is not None:
            return  # space is the append rule's subject
        if name in self.entries:  # rewritten by path: a handle's tracked size would be stale
            open_file = self.handles.pop(id(self.entries[name]), None)
            if open_file is not None:
                open_file[0].close()
        if whole:
            self.fs.atomic_write(self.path(name), data)
            tmp = ModelFile(data, data, len(data))
            self.entries[name] = tmp
            self.entries.pop(name + ".tmp", None)
            self.synced_entries = dict(self.entries)
            return
        sync = len(data) % 2 == 0
        self.fs.write_bytes(self.path(name), data, fsync=sync)
        model = self.entries.setdefault(name, ModelFile())
        model.content = data
        model.changed_from(0)
        if sync:
            model.sync()

    @rule(source=NAMES, to=NAMES)
    def rename(self, source: str, to: str) -> None:
        if source not in self.entries:
            with pytest.raises(FileNotFoundError):
                self.fs.rename(self.path(source), self.path(to))
            return
        self.fs.rename(self.path(source), self.path(to))
        if source != to:
            self.entries[to] = self.entries.pop(source)

    @rule(name=NAMES)
    def remove(self, name: str) -> None:
        self.fs.remove(self.path(name))
        self.entries.pop(name, None)

    @rule()
    def fsync_dir(self) -> None:
        self.fs.fsync_dir(D)
        self.synced_entries = dict(self.entries)

    @rule()
    def sync_everything(self) -> None:
        with self.fs.deferred_sync():
            self.fs.fsync_dir(D)  # deferred: the block's end syncs the whole file system
        self.synced_entries = dict(self.entries)
        for model in {id(m): m for m in self.entries.values()}.values():
            model.sync()

    @rule(name=NAMES, op=st.sampled_from(["write", "sync"]))
    def fail_once(self, name: str, op: str) -> None:
        """An EIO on the next write of the file changes nothing; on its next sync, its
        unsynced bytes stay readable but will not reach the disk."""
        self.fs.fail_next(op, f"*/{name}")
        file, model = self.handle(name)
        if file.path != self.path(name):  # renamed since it was opened: faults match its path
            file.close()
            del self.handles[id(model)]
            file, model = self.handle(name)
        with pytest.raises(OSError) as failed:
            file.append(b"x") if op == "write" else file.fsync()
        assert failed.value.errno == errno.EIO
        assert file.read(0, 1 << 20) == model.content
        if op == "sync":
            model.dirty_from = len(model.content)

    @precondition(lambda self: self.capacity is None)
    @rule(free=st.integers(0, 60))
    def fill(self, free: int) -> None:
        self.fs.fill_after(free)
        self.capacity = self.used() + free

    @rule(seed=st.none() | st.integers(0, 2**32))
    def crash(self, seed: int | None) -> None:
        before = {name: (model.content, model.synced) for name, model in self.entries.items()}
        self.fs = self.fs.crash(None if seed is None else random.Random(seed))
        self.handles.clear()
        self.entries = dict(self.synced_entries)
        survivors = {id(m): m for m in self.entries.values()}.values()
        for model in survivors:
            kept = self.fs.read_bytes(self.path(self.name_of(model)))
            assert kept is not None
            disk = len(model.synced)
            if seed is not None and model.dirty_from >= disk and len(model.content) >= disk:
                # Nothing the disk holds changed since the sync (a failed sync's bytes are
                # zeros there, not what the file shows): some of what was appended since may
                # have reached the disk.
                assert kept.startswith(model.synced), before
                assert model.content[disk:].startswith(kept[disk:]), before
            else:
                assert kept == model.synced, before
            model.content = model.synced = kept
            model.dirty_from = len(kept)
        if self.capacity is not None:
            self.capacity = max(self.capacity, self.used())
            self.fs.capacity = self.capacity

    @rule()
    def kill(self) -> None:
        """A process crash: the next process finds everything, synced or not."""
        self.fs = self.fs.kill()
        self.handles.clear()

    def name_of(self, model: ModelFile) -> str:
        return next(name for name, m in self.entries.items() if m is model)

    # --- what must hold after every step -----------------------------------------------------

    @invariant()
    def the_tree_matches(self) -> None:
        assert self.fs.list_dir(D) == sorted(self.entries)
        for name, model in self.entries.items():
            assert self.fs.read_bytes(self.path(name)) == model.content, name
            assert self.fs.file_size(self.path(name)) == len(model.content)
        assert self.fs.used_bytes == self.used()
        if self.capacity is not None:
            assert self.fs.used_bytes <= self.capacity


MemoryFsMachine.TestCase.settings = settings(
    max_examples=300, stateful_step_count=40, deadline=None
)
test_memory_fs_matches_its_crash_model = MemoryFsMachine.TestCase
