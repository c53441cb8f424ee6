"""Shared helpers of the storage tests: batches, a hand-driven clock, file-system seams that count
or fail, snapshots of a log directory, and independent models of Kafka's index rules.

Imported as a plain module (`import storage_helpers`): pytest puts this folder on `sys.path`.
"""

from __future__ import annotations

import errno
import os
import shutil
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from replog.record import build_batch, iter_frames, read_header, stamp_batch
from replog.record.header import BatchHeader
from replog.storage import Log, LogConfig
from replog.storage.fs import OsFileSystem, OsSegmentFile
from replog.storage.segment import LogSegment
from tests.leftovers import close_after_test

T0 = 1_700_000_000_000  # a realistic wall-clock start, in ms
Buffer = bytes | bytearray | memoryview


# --- batches -------------------------------------------------------------------------------------


def make_batch(
    count: int = 1, *, value_size: int = 40, timestamp: int = T0, tag: int = 0, **options: Any
) -> bytes:
    """A client batch (base offset 0, no leader epoch) of `count` distinct records.

    Record i has timestamp `timestamp + i`; `tag` makes the values of different batches differ.
    """
    records = [
        (timestamp + i, f"k{i}".encode(), f"{tag}:{i}:".encode().ljust(value_size, b"v"), ())
        for i in range(count)
    ]
    return build_batch(records, **options)


def stamped(batch: bytes, base_offset: int, leader_epoch: int) -> bytes:
    """`batch` as a leader writes it: base offset and leader epoch set, CRC untouched."""
    buf = bytearray(batch)
    stamp_batch(buf, 0, base_offset, leader_epoch)
    return bytes(buf)


def append_batches(
    log: Log,
    count: int,
    *,
    epoch: int = 0,
    records: int | Sequence[int] = 1,
    value_size: int = 40,
    timestamp: int = T0,
    timestamp_step: int = 1,
) -> list[bytes]:
    """Append `count` one-batch leader appends; return each batch exactly as it must be on disk.

    `records` is the record count of every batch, or a sequence cycled through. Batch i's first
    record has timestamp `timestamp + i * timestamp_step`.
    """
    counts = [records] if isinstance(records, int) else list(records)
    written = []
    for i in range(count):
        batch = make_batch(
            counts[i % len(counts)],
            value_size=value_size,
            timestamp=timestamp + i * timestamp_step,
            tag=log.log_end_offset,
        )
        info = log.append_as_leader(batch, epoch)
        written.append(stamped(batch, info.first_offset, epoch))
    return written


def epoch_pairs(log: Log) -> list[tuple[int, int]]:
    """The log's leader-epoch cache as (leader epoch, start offset) pairs."""
    return [(e.leader_epoch, e.start_offset) for e in log.leader_epoch_cache.entries()]


def headers_of(batches: Iterable[bytes]) -> list[BatchHeader]:
    return [read_header(batch) for batch in batches]


def next_offset_after(batches: Sequence[bytes], default: int = 0) -> int:
    return read_header(batches[-1]).next_offset if batches else default


# --- logs and their files ------------------------------------------------------------------------


def small_config(**overrides: Any) -> LogConfig:
    """Small segments and a dense index, so a few hundred batches span several segments."""
    settings: dict[str, Any] = {"segment_bytes": 4096, "index_interval_bytes": 256}
    settings.update(overrides)
    return LogConfig(**settings)


def open_log(directory: Path | str, config: LogConfig | None = None, **kwargs: Any) -> Log:
    """The log in `directory`; its files are released after the test if it leaves it open (as a
    crash would leave them: tests reopen logs they did not close on purpose)."""
    log = Log.open(str(directory), config or small_config(), **kwargs)
    close_after_test(log.close_without_flush)
    return log


def assert_indexes_as_rebuilt(log: Log) -> None:
    """Every sealed segment's indexes, as loaded from their files, are those a rebuild from its
    `.log` makes: a cleaned segment's were written by the same rules, and none is stale."""
    for segment in log.segments()[:-1]:
        segment.ensure_indexes()
        loaded = (segment.offset_index.entries(), segment.time_index.entries())
        segment.rebuild_indexes()
        rebuilt = (segment.offset_index.entries(), segment.time_index.entries())
        assert loaded == rebuilt, segment.log_path


def counting_swaps(log: Log) -> list[int]:
    """The number of groups of each cleaner's swap of `log` (`Log.replace_with_cleaned`), as
    they come."""
    swaps: list[int] = []
    replace = log.replace_with_cleaned

    def counted(groups: Any, **kwargs: Any) -> Any:
        swaps.append(len(groups))
        return replace(groups, **kwargs)

    log.replace_with_cleaned = counted  # type: ignore[method-assign]
    return swaps


def read_all(log: Log, start: int | None = None, bound: int | None = None) -> list[bytes]:
    """Every batch from `start` (default: the log start) to `bound` (default: the log end)."""
    first = log.log_start_offset if start is None else start
    return [batch for _, batch in log.read_batches(first, bound)]


def split_batches(data: bytes) -> list[bytes]:
    """The batches of a concatenation, by framing only."""
    return [data[position : position + size] for position, size in iter_frames(data)]


def files_with_suffix(directory: Path | str, suffix: str) -> list[Path]:
    return sorted(p for p in Path(directory).iterdir() if p.name.endswith(suffix))


def dir_contents(directory: Path | str) -> dict[str, bytes]:
    """Every file of a directory by name, for byte-identical comparisons."""
    return {p.name: p.read_bytes() for p in sorted(Path(directory).iterdir()) if p.is_file()}


def restore_dir(snapshot: dict[str, bytes], directory: Path) -> Path:
    """Make `directory` hold exactly the files of `snapshot`, rewriting only what differs
    (unlinking is slow on some file systems, and crash tests restore hundreds of times)."""
    directory.mkdir(parents=True, exist_ok=True)
    for path in directory.iterdir():
        if path.is_dir():
            shutil.rmtree(path)
        elif path.name not in snapshot:
            path.unlink()
    for name, data in snapshot.items():
        path = directory / name
        if not path.exists() or path.read_bytes() != data:
            path.write_bytes(data)
    return directory


def flip_byte(path: Path, position: int, mask: int = 0x01) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= mask
    path.write_bytes(bytes(data))


def index_file_entries(path: Path, layout: str) -> list[tuple[int, int]]:
    """The raw entries of an index file (`>ii` offset index, `>qi` time index)."""
    raw = path.read_bytes()
    entry = struct.Struct(layout)
    assert len(raw) % entry.size == 0, (path, len(raw))
    return [(a, b) for a, b in entry.iter_unpack(raw)]


# --- models of Kafka's index rules (docs/design/storage.md#offset-index, #time-index) -------------


@dataclass(frozen=True)
class ExpectedIndexes:
    offset_entries: list[tuple[int, int]]  # (absolute offset, position)
    time_entries: list[tuple[int, int]]  # (timestamp, absolute offset)
    max_timestamp: int
    offset_of_max_timestamp: int


def expected_indexes(segment_batches: Sequence[bytes], interval: int) -> ExpectedIndexes:
    """The index entries Kafka writes for a segment's batches, in order, however many batches
    each append brought (Kafka's `LogSegment.append` applies the rule per batch).

    The counter of bytes since the last entry is compared with the interval (strictly greater)
    before the batch's own bytes count, so the first batch never gets an entry; an entry is
    (the batch's last offset, byte position where it starts). A time entry is written at the
    same moments when the segment's max timestamp grew past the last time entry.
    """
    offset_entries: list[tuple[int, int]] = []
    time_entries: list[tuple[int, int]] = []
    since_last = 0
    position = 0
    max_ts, max_ts_offset = -1, -1
    for batch in segment_batches:
        header = read_header(batch)
        if header.max_timestamp > max_ts:
            max_ts, max_ts_offset = header.max_timestamp, header.last_offset
        if since_last > interval:
            offset_entries.append((header.last_offset, position))
            if not time_entries or max_ts > time_entries[-1][0]:
                time_entries.append((max_ts, max_ts_offset))
            since_last = 0
        since_last += len(batch)
        position += len(batch)
    return ExpectedIndexes(offset_entries, time_entries, max_ts, max_ts_offset)


def with_final_time_entry(expected: ExpectedIndexes) -> list[tuple[int, int]]:
    """The time entries plus the final one a segment gets when it stops being active."""
    entries = list(expected.time_entries)
    if expected.max_timestamp >= 0 and (not entries or expected.max_timestamp > entries[-1][0]):
        entries.append((expected.max_timestamp, expected.offset_of_max_timestamp))
    return entries


def batches_by_segment(log: Log, batches: Sequence[bytes]) -> dict[int, list[bytes]]:
    """`batches` (in offset order) grouped by the base offset of the segment holding them."""
    bases = [segment.base_offset for segment in log.segments()]
    grouped: dict[int, list[bytes]] = {base: [] for base in bases}
    for batch in batches:
        base_offset = read_header(batch).base_offset
        owner = max(base for base in bases if base <= base_offset)
        grouped[owner].append(batch)
    return grouped


def assert_every_offset_reads_its_batch(log: Log, batches: Sequence[bytes]) -> None:
    """Every offset of the log reads back the batch holding it first (index lookup + scan)."""
    for batch in batches:
        header = read_header(batch)
        for offset in (header.base_offset, header.last_offset):
            data = log.read(offset, 1)
            assert split_batches(data)[0] == batch, (offset, header)


def loaded_index_entries(
    segment: LogSegment,
) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    segment.ensure_indexes()
    return segment.offset_index.entries(), segment.time_index.entries()


def record_recoveries(monkeypatch: Any) -> list[tuple[str, int]]:
    """Make `LogSegment.recover` record (partition dir name, segment base offset) per call."""
    calls: list[tuple[str, int]] = []
    original = LogSegment.recover

    def recording(self: LogSegment, *args: Any, **kwargs: Any) -> Any:
        calls.append((Path(self.log_path).parent.name, self.base_offset))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(LogSegment, "recover", recording)
    return calls


def recovered_bases(calls: list[tuple[str, int]]) -> list[int]:
    return [base for _, base in calls]


# --- file-system seams ---------------------------------------------------------------------------


class CountingSegmentFile(OsSegmentFile):
    """A segment or index file that reports every byte read to its file system."""

    def __init__(self, path: str, *, create: bool, counter: CountingFileSystem) -> None:
        super().__init__(path, create=create)
        self.counter = counter

    def read(self, position: int, length: int) -> bytes:
        data = super().read(position, length)
        self.counter.count(self.path, len(data))
        return data

    def read_fully(self, position: int, length: int) -> bytes:
        data = super().read_fully(position, length)
        self.counter.count(self.path, len(data))
        return data


class CountingFileSystem(OsFileSystem):
    """Counts the bytes read through the seam, per file name suffix."""

    def __init__(self) -> None:
        self.bytes_read = 0
        self.bytes_read_by_suffix: dict[str, int] = {}

    def count(self, path: str, n: int) -> None:
        self.bytes_read += n
        suffix = os.path.splitext(path)[1] or os.path.basename(path)
        self.bytes_read_by_suffix[suffix] = self.bytes_read_by_suffix.get(suffix, 0) + n

    def open_segment_file(self, path: str, *, create: bool = True) -> OsSegmentFile:
        return CountingSegmentFile(path, create=create, counter=self)

    def read_bytes(self, path: str) -> bytes | None:
        data = super().read_bytes(path)
        self.count(path, len(data or b""))
        return data


class SimulatedCrash(Exception):
    """Stands for the process dying where it is raised."""


class DiskFullError(OSError):
    def __init__(self, path: str) -> None:
        super().__init__(errno.ENOSPC, os.strerror(errno.ENOSPC), path)


class FullDiskSegmentFile(OsSegmentFile):
    """A `.log` file on a disk with `disk.free` bytes left.

    An append that does not fit writes the part that fits (as the kernel does before it
    returns ENOSPC), then fails. With `disk.clean_up`, the partial bytes are cut off again
    (what the real `OsSegmentFile.append` promises); without, they stay behind in the file (the
    cleanup itself failed), and only the caller can undo them.
    """

    def __init__(self, path: str, *, create: bool, disk: FullDiskFileSystem) -> None:
        super().__init__(path, create=create)
        self.disk = disk

    def append(self, data: Buffer | Sequence[Buffer]) -> int:
        if not isinstance(data, bytes | bytearray | memoryview):  # a gather write
            data = b"".join(data)
        free = self.disk.free
        if free is None or len(data) <= free:
            if free is not None:
                self.disk.free = free - len(data)
            return super().append(data)
        self.disk.failures += 1
        os.pwrite(self.fileno(), bytes(memoryview(data)[:free]), self.size)
        self.disk.free = 0
        if self.disk.clean_up:
            os.ftruncate(self.fileno(), self.size)
        raise DiskFullError(self.path)


class FullDiskFileSystem(OsFileSystem):
    """`.log` appends fail with ENOSPC once `free` bytes are used; `free=None` is unlimited."""

    def __init__(self, *, clean_up: bool = True) -> None:
        self.free: int | None = None
        self.clean_up = clean_up
        self.failures = 0

    def open_segment_file(self, path: str, *, create: bool = True) -> OsSegmentFile:
        if path.endswith(".log"):
            return FullDiskSegmentFile(path, create=create, disk=self)
        return super().open_segment_file(path, create=create)


class NoSyncSegmentFile(OsSegmentFile):
    def fsync(self) -> None:
        pass

    def fdatasync(self) -> None:
        pass


class NoSyncFileSystem(OsFileSystem):
    """The local disk without fsync: same bytes, same process-crash behaviour, much faster.

    For tests of logic that a power loss does not change (the page cache survives a process
    crash); tests of the flush policy itself use the real seam.
    """

    def open_segment_file(self, path: str, *, create: bool = True) -> OsSegmentFile:
        return NoSyncSegmentFile(path, create=create)

    def atomic_write(self, path: str, data: bytes) -> None:
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)

    def write_bytes(self, path: str, data: bytes, *, fsync: bool = True) -> None:
        super().write_bytes(path, data, fsync=False)

    def fsync_dir(self, path: str) -> None:
        pass


NO_SYNC_FS = NoSyncFileSystem()


class HintRecorder:
    """Stands in for one of `replog.storage.write_hints`' hints: records each (offset, length)
    and, where /proc shows it, the file's name; answers `answer` (0, or an errno)."""

    def __init__(self, answer: int = 0) -> None:
        self.calls: list[tuple[int, int]] = []
        self.files: set[str] = set()
        self.answer = answer

    def __call__(self, fd: int, offset: int, length: int) -> int:
        self.calls.append((offset, length))
        if os.path.isdir("/proc/self/fd"):
            self.files.add(os.path.basename(os.readlink(f"/proc/self/fd/{fd}")))
        return self.answer
