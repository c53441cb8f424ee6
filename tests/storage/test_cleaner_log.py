"""A cleaning pass over a real `Log` (replog/storage/cleaner/log_cleaning.py) and the swap protocol
(replog/storage/segment_swap.py): what survives, offsets never renumbered, passes bounded by the
key map, a crash at every step of a pass, interrupted swaps at open, a pass abandoned when the
log changes under it, and the cleaner checkpoint's format."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from storage_helpers import (
    NO_SYNC_FS,
    T0,
    SimulatedCrash,
    assert_indexes_as_rebuilt,
    counting_swaps,
    open_log,
)

from replog.errors import InvalidRecordError, OffsetsOutOfOrderError, UnexpectedAppendOffsetError
from replog.record import RecordBatch, build_batch
from replog.record.builder import BatchOptions
from replog.record.record_spans import Span
from replog.storage import Log, LogConfig
from replog.storage.cleaner import log_cleaning
from replog.storage.cleaner.batch_filter import ProducerLastBatch
from replog.storage.cleaner.cleanable import CompactedLogSummary, filthiest, log_to_clean
from replog.storage.cleaner.cleaner_checkpoint import CleanerCheckpoint
from replog.storage.cleaner.log_cleaning import CleaningPass, clean_log
from replog.storage.cleaner.log_summary import summarize_log
from replog.storage.cleaner.offset_map import OffsetMap
from replog.storage.fs import Buffer, FileSystem, OsFileSystem, OsSegmentFile
from replog.storage.segment import LogSegment
from replog.storage.segment_swap import finish_swap

CONFIG = LogConfig(segment_bytes=700, index_interval_bytes=100, cleanup_policy="compact")
HOUR = 3_600_000
Entry = tuple[int, bytes | None, bytes | None]  # offset, key, value


def append(log: Log, key: bytes, value: bytes | None, **options: Any) -> int:
    opts: BatchOptions = options  # type: ignore[assignment]
    info = log.append_as_leader(build_batch([(T0 + log.log_end_offset, key, value, ())], **opts), 0)
    return info.first_offset


def fill(log: Log, count: int, keys: int = 6) -> list[Entry]:
    """`count` one-record batches over `keys` keys, every fifth a tombstone."""
    entries: list[Entry] = []
    for i in range(count):
        key = f"k{i % keys}".encode()
        value = None if i % 5 == 4 else f"v{i}".encode()
        entries.append((append(log, key, value), key, value))
    log.high_watermark = log.log_end_offset
    return entries


def read_entries(log: Log) -> list[Entry]:
    out = []
    for _, batch in log.read_batches(log.log_start_offset):
        for record in RecordBatch.parse(batch, sparse=True).records():
            out.append((record.offset, record.key, record.value))
    return out


def latest_by_key(entries: Sequence[Entry]) -> dict[bytes | None, Entry]:
    return {entry[1]: entry for entry in entries}


def clean(log: Log, first_dirty: int = 0, *, entries: int = 10_000, **kwargs: Any) -> CleaningPass:
    kwargs.setdefault("now_ms", T0)
    kwargs.setdefault("delete_retention_ms", HOUR)
    return clean_log(
        log,
        OffsetMap(24 * entries),
        first_dirty=first_dirty,
        first_uncleanable=min(log.active_segment.base_offset, log.high_watermark),
        **kwargs,
    )


# --- a pass ------------------------------------------------------------------------------------


def test_a_pass_keeps_the_latest_record_of_every_key_at_its_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", CONFIG)
    appended = fill(log, 120)
    end_before, size_before = log.log_end_offset, log.size_in_bytes
    active_base = log.active_segment.base_offset
    result = clean(log)
    assert not result.abandoned and result.end_offset == active_base
    assert log.log_end_offset == end_before
    assert log.size_in_bytes < size_before / 3
    kept = read_entries(log)
    below = [e for e in kept if e[0] < active_base]
    assert below == sorted(latest_by_key([e for e in appended if e[0] < active_base]).values())
    assert [e for e in kept if e[0] >= active_base] == [e for e in appended if e[0] >= active_base]
    # Every offset still reads: one in a gap reads the next batch kept.
    for offset in range(0, end_before):
        assert log.read(offset, 100_000)
    assert not [
        n for n in os.listdir(log.directory) if n.endswith((".cleaned", ".swap", ".deleted"))
    ]
    assert_indexes_as_rebuilt(log)


@pytest.mark.parametrize("batch_bytes", [log_cleaning.SWAP_BATCH_BYTES, 1], ids=["one", "each"])
def test_a_cleaned_segment_comes_with_its_indexes_and_the_swap_only_renames(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch_bytes: int
) -> None:
    """The pass writes and syncs each cleaned segment's `.index` and `.timeindex` beside its
    `.log`; under the log's lock the swap renames files, and removes, rebuilds and syncs
    nothing (segment_swap's Rules): its two directory syncs run without the lock. The
    groups go in one swap while they hold less than `SWAP_BATCH_BYTES`; past it (here at
    every group that holds a byte), a swap each."""
    monkeypatch.setattr(log_cleaning, "SWAP_BATCH_BYTES", batch_bytes)
    fs = RecordingFileSystem()
    config = LogConfig(segment_bytes=2000, index_interval_bytes=100, cleanup_policy="compact")
    log = open_log(tmp_path / "t-0", config, fs=fs)
    fill(log, 200, keys=60)
    fs.lock = log._lock

    def no_rebuild(self: LogSegment) -> None:
        raise AssertionError(f"{self.log_path}: indexes rebuilt during a pass")

    monkeypatch.setattr(LogSegment, "rebuild_indexes", no_rebuild)
    swaps = counting_swaps(log)
    fs.recording = True
    result = clean(log)
    fs.recording = False
    assert result.groups_swapped >= 2 and sum(swaps) == result.groups_swapped
    # Every group in one swap; or a swap each time the groups hold a byte (an emptied group
    # goes with the next).
    assert len(swaps) == 1 if batch_bytes > log.size_in_bytes else len(swaps) >= 2, swaps
    under_lock = [(op, path) for op, path, locked in fs.ops if locked]
    assert under_lock, "the swap held the lock for nothing"
    assert {op for op, _ in under_lock} == {"rename"}, under_lock
    assert sum(op == "fsync dir" for op, _, _ in fs.ops) == 2 * len(swaps)
    for suffix in (".index", ".timeindex", ".log"):
        cleaned = [
            (i, op, locked)
            for i, (op, p, locked) in enumerate(fs.ops)
            if p.endswith(suffix + ".cleaned")
        ]
        synced = [i for i, op, locked in cleaned if op == "sync" and not locked]
        renamed = [i for i, op, locked in cleaned if op == "rename" and locked]
        # Each group's file was synced by the pass, outside the lock, before its swap.
        assert len(synced) == len(renamed) == result.groups_swapped, suffix
        assert all(s < r for s, r in zip(synced, renamed, strict=True)), suffix
    removed = [p for op, p, locked in fs.ops if op == "remove" and p.endswith(".deleted")]
    assert removed and not [1 for op, _, locked in fs.ops if op == "remove" and locked]
    monkeypatch.undo()
    assert_indexes_as_rebuilt(log)


@pytest.mark.parametrize("clean_close", [True, False], ids=["clean", "crash"])
def test_a_cleaned_log_reopens_with_its_records_and_offsets(
    tmp_path: Path, clean_close: bool
) -> None:
    log = open_log(tmp_path / "t-0", CONFIG)
    fill(log, 120)
    clean(log)
    kept, end = read_entries(log), log.log_end_offset
    if clean_close:
        log.close()
    else:
        log.close_without_flush()
    # From offset 0: recovery validates every cleaned segment, gaps and emptied batches too.
    reopened = open_log(tmp_path / "t-0", CONFIG, recovery_point=0)
    assert (read_entries(reopened), reopened.log_end_offset) == (kept, end)


def build_kept_log(directory: Path, fs: FileSystem) -> tuple[Log, list[Entry]]:
    """Segments of keys written once, which a pass leaves as they are; the first of them loses
    its fifth batch (its key written again), so it is rewritten past four unchanged batches;
    then segments of keys written over and over, tombstones among them."""
    log = open_log(directory, CONFIG, fs=fs)
    appended = []
    for i in range(30):
        key, value = f"u{i}".encode(), f"v{i}".encode()
        appended.append((append(log, key, value), key, value))
    appended.append((append(log, b"u4", b"again"), b"u4", b"again"))
    appended += fill(log, 14)
    return log, appended


def test_a_segment_the_pass_leaves_as_it_is_is_not_rewritten(tmp_path: Path) -> None:
    """A group of one segment whose every batch stays as it is keeps its files (no
    `.cleaned` segment, no swap); one that changes past its first batches is rewritten,
    those batches copied as they were, its indexes as a rebuild makes them."""
    log, appended = build_kept_log(tmp_path / "t-0", OsFileSystem())
    active_base = log.active_segment.base_offset
    latest = latest_by_key([e for e in appended if e[0] < active_base])
    sealed = log.segments()[:-1]
    bounds = [s.base_offset for s in sealed] + [active_base]
    unchanged = {
        segment.base_offset
        for segment, end in zip(sealed, bounds[1:], strict=True)
        if all(
            latest[key] == (offset, key, value) and value is not None
            for offset, key, value in appended
            if segment.base_offset <= offset < end
        )
    }
    files_before = {s.base_offset: os.stat(s.log_path).st_ino for s in sealed}
    swaps = counting_swaps(log)

    result = clean(log)

    assert len(unchanged) >= 2 and 0 not in unchanged  # the first segment changes
    assert result.groups_kept == len(unchanged)
    assert result.groups_swapped == len(sealed) - len(unchanged) == sum(swaps)
    files_after = {s.base_offset: os.stat(s.log_path).st_ino for s in log.segments()[:-1]}
    for base in files_before:
        assert (files_after[base] == files_before[base]) == (base in unchanged), base
    kept = read_entries(log)
    assert [e for e in kept if e[0] < active_base] == sorted(latest.values())
    assert [e for e in kept if e[0] >= active_base] == [e for e in appended if e[0] >= active_base]
    assert not [
        n for n in os.listdir(log.directory) if n.endswith((".cleaned", ".swap", ".deleted"))
    ]
    assert_indexes_as_rebuilt(log)


def test_recovery_of_a_log_not_compacted_still_cuts_at_a_gap(tmp_path: Path) -> None:
    """Gaps are allowed only where the policy has compact: elsewhere a gap is damage."""
    log = open_log(tmp_path / "t-0", CONFIG)
    fill(log, 120)
    clean(log)
    kept = read_entries(log)
    log.close_without_flush()
    delete_only = LogConfig(segment_bytes=700, index_interval_bytes=100)
    reopened = open_log(tmp_path / "t-0", delete_only, recovery_point=0)
    assert len(read_entries(reopened)) < len(kept)


def test_tombstones_go_in_the_first_pass_past_their_horizon(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", CONFIG)
    fill(log, 120)
    first = clean(log)
    tombstones = [e for e in read_entries(log) if e[2] is None and e[0] < first.end_offset]
    assert tombstones
    clean(log, now_ms=T0 + HOUR - 1)
    assert [e for e in read_entries(log) if e[2] is None and e[0] < first.end_offset] == tombstones
    clean(log, now_ms=T0 + HOUR)
    assert not [e for e in read_entries(log) if e[2] is None and e[0] < first.end_offset]


def test_a_small_map_cleans_in_several_passes_to_the_same_result(tmp_path: Path) -> None:
    big = open_log(tmp_path / "big-0", CONFIG)
    small = open_log(tmp_path / "small-0", CONFIG)
    fill(big, 150, keys=30)
    fill(small, 150, keys=30)
    clean(big)
    dirty, passes = 0, 0
    while True:
        result = clean(small, dirty, entries=12)  # 10 keys a pass
        assert result.map_entries <= 10
        passes += 1
        if result.end_offset == dirty:
            break
        dirty = result.end_offset
    assert passes > 3
    assert read_entries(small) == read_entries(big)


def test_the_last_batch_of_each_producer_stays(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", CONFIG)
    fill(log, 30)
    last = append(log, b"k0", b"p", producer_id=3, producer_epoch=0, base_sequence=0)
    fill(log, 60)
    state = {3: ProducerLastBatch(last_data_offset=last, producer_epoch=0)}
    clean(log, last_batches=state)
    headers = [h for h in log.batch_headers(0) if h.producer_id == 3]
    assert [(h.base_offset, h.records_count, h.base_sequence) for h in headers] == [(last, 0, 0)]


def test_a_truncation_during_a_pass_abandons_it(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", CONFIG)
    fill(log, 120)
    before = read_entries(log)
    truncate_at = log.segments()[3].base_offset

    class TruncatingMap(OffsetMap):
        truncated = False

        def put_records(self, base_offset: int, spans: Sequence[Span], start: int) -> bool:
            took = super().put_records(base_offset, spans, start)
            if self.latest_offset >= 20 and not self.truncated:
                self.truncated = True
                log.truncate_to(truncate_at)
            return took

    log.high_watermark = 0
    result = clean_log(
        log,
        TruncatingMap(24 * 100),
        first_dirty=0,
        first_uncleanable=log.segments()[-1].base_offset,
        now_ms=T0,
        delete_retention_ms=HOUR,
    )
    assert result.abandoned and result.groups_swapped == 0
    assert read_entries(log) == [e for e in before if e[0] < truncate_at]
    assert not [n for n in os.listdir(log.directory) if n.endswith((".cleaned", ".swap"))]


@pytest.mark.parametrize("checks", [110, 130, 200])
def test_a_pass_asked_to_stop_stops_between_batches(tmp_path: Path, checks: int) -> None:
    """The map takes ~100 batches' checks; the first group's rewrite stops part-way, or a
    later group's: the groups written before it, not swapped yet, are removed."""
    log = open_log(tmp_path / "t-0", CONFIG)
    fill(log, 120)
    before = read_entries(log)
    asked = iter(range(1000))
    result = clean(log, should_stop=lambda: next(asked) >= checks)
    assert result.abandoned and result.groups_swapped == 0
    assert read_entries(log) == before
    assert not [n for n in os.listdir(log.directory) if n.endswith((".cleaned", ".swap"))]


def replicate(leader: Log, follower: Log) -> None:
    """Fetch from the follower's log end until it reaches the leader's, as replication does."""
    while follower.log_end_offset < leader.log_end_offset:
        follower.append_as_follower(leader.read(follower.log_end_offset, 300), leader_epoch=0)


def test_a_follower_copies_a_cleaned_leader_gaps_and_all(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader-0", CONFIG)
    fill(leader, 120)
    clean(leader)
    follower = open_log(tmp_path / "follower-0", CONFIG)
    replicate(leader, follower)
    assert read_entries(follower) == read_entries(leader)
    assert follower.log_end_offset == leader.log_end_offset
    follower.close_without_flush()
    reopened = open_log(tmp_path / "follower-0", CONFIG, recovery_point=0)
    assert read_entries(reopened) == read_entries(leader)


def test_a_follower_of_a_log_not_compacted_refuses_gaps(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader-0", CONFIG)
    fill(leader, 120)
    clean(leader)
    delete_only = LogConfig(segment_bytes=700, index_interval_bytes=100)
    follower = open_log(tmp_path / "follower-0", delete_only)
    with pytest.raises((UnexpectedAppendOffsetError, OffsetsOutOfOrderError, InvalidRecordError)):
        replicate(leader, follower)


def summary_of(log: Log, min_lag_ms: int = 0) -> CompactedLogSummary:
    return summarize_log(
        log,
        min_cleanable_dirty_ratio=0.5,
        min_compaction_lag_ms=min_lag_ms,
        max_compaction_lag_ms=2**62,
    )


def test_a_log_is_chosen_while_dirty_and_not_once_cleaned(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", CONFIG)
    fill(log, 120)  # record i has timestamp T0 + i
    summary = summary_of(log)
    active_base = log.active_segment.base_offset
    assert [s.base_offset for s in summary.segments] == [s.base_offset for s in log.segments()]
    dirty = log_to_clean(summary, None, T0 + 1000)
    assert (dirty.first_dirty, dirty.first_uncleanable) == (0, active_base)
    assert dirty.dirty_ratio == 1.0 and filthiest([dirty]) is dirty
    # min.compaction.lag.ms: the segments holding records newer than now - lag stay dirty.
    lagged = summary_of(log, min_lag_ms=100)
    newest_cleanable = next(s for s in lagged.segments if s.largest_timestamp > T0 + 150 - 100)
    assert log_to_clean(lagged, None, T0 + 150).first_uncleanable == newest_cleanable.base_offset
    result = clean(log)
    cleaned = log_to_clean(summary_of(log), result.end_offset, T0)
    assert cleaned.cleanable_bytes == 0
    assert filthiest([cleaned]) is None


# --- crashes -------------------------------------------------------------------------------------


class CrashingSegmentFile(OsSegmentFile):
    def __init__(self, path: str, *, create: bool, fs: CrashingFileSystem) -> None:
        super().__init__(path, create=create)
        self.fs = fs

    def append(self, data: Buffer | Sequence[Buffer]) -> int:
        if self.fs.step(f"append to {self.path}"):
            joined = data if isinstance(data, bytes | bytearray | memoryview) else b"".join(data)
            os.pwrite(self.fileno(), bytes(joined[: len(joined) // 2]), self.size)  # torn
            raise SimulatedCrash(self.path)
        return super().append(data)

    # A process crash: the page cache survives, so syncs need not reach the disk (faster).
    def fsync(self) -> None:
        self.fs.crash_if(f"fsync {self.path}")

    def fdatasync(self) -> None:
        self.fs.crash_if(f"fdatasync {self.path}")


class RecordingSegmentFile(OsSegmentFile):
    def __init__(self, path: str, *, create: bool, fs: RecordingFileSystem) -> None:
        super().__init__(path, create=create)
        self.fs = fs

    def fsync(self) -> None:
        self.fs.record("sync", self.path)
        super().fsync()

    def fdatasync(self) -> None:
        self.fs.record("sync", self.path)
        super().fdatasync()


class RecordingFileSystem(OsFileSystem):
    """Records, while `recording`, each change and sync with whether `lock` was held."""

    def __init__(self) -> None:
        self.ops: list[tuple[str, str, bool]] = []
        self.recording = False
        self.lock: Any = None

    def record(self, op: str, path: str) -> None:
        if self.recording:
            self.ops.append((op, path, bool(self.lock is not None and self.lock._is_owned())))

    def open_segment_file(self, path: str, *, create: bool = True) -> OsSegmentFile:
        return RecordingSegmentFile(path, create=create, fs=self)

    def rename(self, source: str, target: str) -> None:
        self.record("rename", source)
        super().rename(source, target)

    def remove(self, path: str) -> None:
        self.record("remove", path)
        super().remove(path)

    def fsync_dir(self, path: str) -> None:
        self.record("fsync dir", path)
        super().fsync_dir(path)


class CrashingFileSystem(OsFileSystem):
    """Counts every change it makes once armed and dies (raises) at change number `crash_at`
    (a torn write, for an append). Process crashes: nothing is synced to the disk."""

    def __init__(self, crash_at: int = 0, crash_on: str | None = None) -> None:
        self.crash_at = crash_at
        self.crash_on = crash_on  # or at the first change so described
        self.steps: list[str] = []
        self.armed = False
        self.crashed = False

    def step(self, what: str) -> bool:
        if not self.armed:
            return False
        if self.crashed:  # a dead process changes nothing more (no clean-up on the way out)
            raise SimulatedCrash(f"{what}, after the crash")
        self.steps.append(what)
        if self.crash_on is not None:
            self.crashed = what == self.crash_on
        else:
            self.crashed = len(self.steps) == self.crash_at
        return self.crashed

    def crash_if(self, what: str) -> None:
        if self.step(what):
            raise SimulatedCrash(what)

    def open_segment_file(self, path: str, *, create: bool = True) -> OsSegmentFile:
        return CrashingSegmentFile(path, create=create, fs=self)

    def rename(self, source: str, target: str) -> None:
        self.crash_if(f"rename {source}")
        super().rename(source, target)

    def remove(self, path: str) -> None:
        self.crash_if(f"remove {path}")
        super().remove(path)

    def fsync_dir(self, path: str) -> None:
        self.crash_if(f"fsync dir {path}")

    def atomic_write(self, path: str, data: bytes) -> None:
        self.crash_if(f"replace {path}")
        NO_SYNC_FS.atomic_write(path, data)

    def write_bytes(self, path: str, data: bytes, *, fsync: bool = True) -> None:
        self.crash_if(f"write {path}")
        super().write_bytes(path, data, fsync=fsync)


def build_crash_log(directory: Path, fs: FileSystem) -> tuple[Log, list[Entry]]:
    log = open_log(directory, CONFIG, fs=fs)
    appended = fill(log, 20)
    appended.append((append(log, b"k1", b"p", producer_id=4, producer_epoch=0, base_sequence=0),
                     b"k1", b"p"))  # fmt: skip
    appended += fill(log, 14)
    return log, appended


@pytest.mark.parametrize("build", [build_crash_log, build_kept_log], ids=["every", "kept"])
def test_a_crash_at_every_step_of_a_pass_loses_nothing(
    tmp_path: Path, build: Callable[[Path, FileSystem], tuple[Log, list[Entry]]]
) -> None:
    """A crash at each change of a pass, the index files' writes and renames included, then an
    open that recovers every segment and one that trusts the sealed segments' indexes (the
    recovery point at the log end, as a flushed log has it): both keep what must survive, and
    the trusted indexes are those of their segments. Over a log whose every segment the pass
    rewrites, and one where it leaves some as they are and copies the unchanged start of
    another."""
    reference, appended = build(tmp_path / "ref-0", OsFileSystem())
    first_uncleanable = reference.active_segment.base_offset
    clean(reference)
    cleaned = read_entries(reference)
    crash_at, completed = 1, False
    crashed_on: list[str] = []

    while not completed:
        directory = tmp_path / f"c{crash_at}-0"
        fs = CrashingFileSystem(crash_at)
        log, _ = build(directory, fs)
        end = log.log_end_offset
        fs.armed = True
        try:
            clean(log)
            completed = True
        except SimulatedCrash:
            pass
        fs.armed = False
        log.close_without_flush()
        if not completed:
            crashed_on.append(fs.steps[-1])
        trusting = tmp_path / f"t{crash_at}-0"
        shutil.copytree(directory, trusting)
        for where, recovery_point in ((directory, 0), (trusting, end)):
            reopened = open_log(where, CONFIG, recovery_point=recovery_point)
            kept = read_entries(reopened)
            assert reopened.log_end_offset == end, fs.steps[-1]
            assert set(kept) <= set(appended), fs.steps[-1]  # offsets and contents unchanged
            # Every key's latest record, and everything from the first uncleanable offset on.
            assert set(latest_by_key(appended).values()) <= set(kept), fs.steps[-1]
            assert [e for e in kept if e[0] >= first_uncleanable] == [
                e for e in appended if e[0] >= first_uncleanable
            ]
            # What survives of a superseded key is never newer than what was cleaned away.
            assert set(cleaned) <= set(kept), fs.steps[-1]
            leftovers = (".cleaned", ".swap", ".deleted")
            assert not [n for n in os.listdir(where) if n.endswith(leftovers)], fs.steps[-1]
            assert_indexes_as_rebuilt(reopened)
            # A pass after the crash completes the work.
            reopened.high_watermark = reopened.log_end_offset
            clean(reopened)
            assert read_entries(reopened) == cleaned, fs.steps[-1]
            reopened.close()
        crash_at += 1
    assert crash_at > 20  # the pass had that many steps, each one crashed at once
    # Among them, each index file's write and every rename of the swap.
    for suffix in (".index", ".timeindex", ".log"):
        assert any(
            step.startswith("append to") and step.endswith(f"{suffix}.cleaned")
            for step in crashed_on
        ), suffix
        for renamed in (f"{suffix}.cleaned", f"{suffix}.swap", suffix):
            assert any(
                step.startswith("rename") and step.endswith(renamed) for step in crashed_on
            ), renamed


# The changes of a swap after it is decided (the `.log.swap` made), in order.
_AFTER_THE_DECISION = [
    "fsync dir {dir}",
    "rename {dir}/{base}.log",
    "rename {dir}/{base}.index",
    "rename {dir}/{base}.timeindex",
    "rename {dir}/{base}.index.swap",
    "rename {dir}/{base}.timeindex.swap",
    "rename {dir}/{base}.log.swap",
]


@pytest.mark.parametrize("step", _AFTER_THE_DECISION)
def test_an_interrupted_swap_is_completed_at_open(tmp_path: Path, step: str) -> None:
    """A crash at each change of the first swap once its `.log.swap` exists, the replaced
    segments and the new indexes in whatever state that step left them: opening finishes the
    swap, and the new segment's indexes are those of its `.log`."""
    reference, appended = build_crash_log(tmp_path / "ref-0", OsFileSystem())
    clean(reference)
    directory = tmp_path / "t-0"
    fs = CrashingFileSystem(crash_on=step.format(dir=directory, base=f"{0:020d}"))
    log, _ = build_crash_log(directory, fs)
    end = log.log_end_offset
    fs.armed = True
    with pytest.raises(SimulatedCrash):
        clean(log)
    fs.armed = False
    log.close_without_flush()
    assert f"{0:020d}.log.swap" in set(os.listdir(directory))
    reopened = open_log(directory, CONFIG, recovery_point=end)
    boundary = reopened.segments()[1].base_offset
    first_swapped = [e for e in read_entries(reopened) if e[0] < boundary]
    assert first_swapped == [e for e in read_entries(reference) if e[0] < boundary]
    assert set(latest_by_key(appended).values()) <= set(read_entries(reopened))
    assert not [n for n in os.listdir(directory) if n.endswith((".cleaned", ".swap", ".deleted"))]
    assert_indexes_as_rebuilt(reopened)


class SyncHookFileSystem(OsFileSystem):
    """Runs `hook` (once) when a directory sync starts: the swap's decision sync, which runs
    without the log's lock."""

    def __init__(self) -> None:
        self.hook: Any = None

    def fsync_dir(self, path: str) -> None:
        hook, self.hook = self.hook, None
        if hook is not None:
            hook()
        super().fsync_dir(path)


@pytest.mark.parametrize("crash", [False, True], ids=["then-on", "then-crash"])
@pytest.mark.parametrize("change", ["truncation", "deletion"])
def test_a_change_while_a_swap_syncs_its_decision_cancels_it(
    tmp_path: Path, change: str, crash: bool
) -> None:
    """A truncation, or a deletion of the segments a swap replaces, while the swap syncs its
    `.log.swap` without the lock: the change cancels the swap first, so neither the pass nor
    a crash right after the change (whose reopening completes any swap it finds) brings back
    what the change removed."""
    fs = SyncHookFileSystem()
    directory = tmp_path / "t-0"
    log, appended = build_crash_log(directory, fs)
    end = log.log_end_offset
    first, second = (s.base_offset for s in log.segments()[:2])
    target = first + 3  # inside the first group's first segment

    def truncate() -> None:
        log.truncate_to(target)

    def delete() -> None:
        log.increment_log_start_offset(second)
        assert log.delete_old_segments() >= 1

    def change_then_maybe_crash() -> None:
        truncate() if change == "truncation" else delete()
        if crash:
            raise SimulatedCrash(change)

    fs.hook = change_then_maybe_crash
    if crash:
        with pytest.raises(SimulatedCrash):
            clean(log)
    else:
        result = clean(log)
        assert result.abandoned and result.groups_swapped == 0
    assert not list(directory.glob("*.swap"))
    log.close_without_flush()
    reopened = open_log(directory, CONFIG, recovery_point=0)
    kept = read_entries(reopened)
    if change == "truncation":
        assert reopened.log_end_offset <= target < end
        assert kept == [e for e in appended if e[0] < reopened.log_end_offset]
    else:
        assert reopened.segments()[0].base_offset >= second  # the deleted segment stays gone
        assert reopened.log_end_offset == end
        assert [e for e in kept if e[0] >= second] == [e for e in appended if e[0] >= second]
    assert not [n for n in os.listdir(directory) if n.endswith((".cleaned", ".swap", ".deleted"))]
    assert_indexes_as_rebuilt(reopened)


def test_finishing_a_swap_whose_log_directory_went_is_not_an_error(tmp_path: Path) -> None:
    """The log deleted between the swap and its clean-up: nothing is left to sync or remove."""
    gone = tmp_path / "t-0"
    finish_swap(OsFileSystem(), str(gone), [str(gone / f"{0:020d}.log.deleted")])
    assert not gone.exists()


def test_a_leftover_cleaned_file_is_removed_at_open(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", CONFIG)
    appended = fill(log, 60)
    log.close()
    (tmp_path / "t-0" / f"{0:020d}.log.cleaned").write_bytes(b"partial")
    reopened = open_log(tmp_path / "t-0", CONFIG, recovery_point=0)
    assert read_entries(reopened) == appended
    assert not list((tmp_path / "t-0").glob("*.cleaned"))


# --- the checkpoint ------------------------------------------------------------------------------


def test_the_cleaner_checkpoint_is_kafkas_offset_checkpoint(tmp_path: Path) -> None:
    checkpoint = CleanerCheckpoint(str(tmp_path))
    assert checkpoint.read() == {}
    checkpoint.update(("orders", 0), 120)
    checkpoint.update(("__consumer_offsets", 7), 5)
    checkpoint.update(("orders", 0), 130)
    text = (tmp_path / "cleaner-offset-checkpoint").read_text()
    lines = text.splitlines()
    assert lines[:2] == ["0", "2"]
    assert sorted(lines[2:]) == ["__consumer_offsets 7 5", "orders 0 130"]
    checkpoint.remove(("orders", 0))
    assert CleanerCheckpoint(str(tmp_path)).read() == {("__consumer_offsets", 7): 5}
