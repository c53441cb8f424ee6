"""The real `Log` on a `MemoryFileSystem` that loses what was not synced at each crash
(replog/storage/memory_fs.py): appends, flushes, rolls, truncations, leader changes, clean
reopens and crashes, with and without torn tails, against a model that knows which batches
were flushed. After a crash and reopen: every batch flushed (and not cut since) is there at its
offset; everything else the log holds is a whole batch once written at that offset (a cut
that was not synced may come back, as in Kafka, whose truncation does not sync either);
offsets are dense; the leader-epoch cache is what the batches imply.
A process crash without a power loss (`kill`) loses nothing appended (docs/storage.md,
"Recovery" and "The file-system seam"; docs/design/storage.md#crash-scenarios)."""

from __future__ import annotations

import contextlib
import random

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from storage_helpers import T0, append_batches, read_all, small_config

from replog.record import RecordBatch, build_batch, read_header
from replog.storage import Log
from replog.storage.memory_fs import MemoryFileSystem
from replog.testing import ManualClock
from tests.compacted_log import clean_whole_log

CONFIG = small_config(segment_bytes=700, index_interval_bytes=90, retention_ms=-1)
DIRECTORY = "/var/replog/t-0"


def epochs_of(batches: list[bytes]) -> list[tuple[int, int]]:
    """(leader epoch, start offset) at each change of epoch along `batches`."""
    pairs: list[tuple[int, int]] = []
    for batch in batches:
        header = read_header(batch)
        if not pairs or pairs[-1][0] != header.partition_leader_epoch:
            pairs.append((header.partition_leader_epoch, header.base_offset))
    return pairs


def epochs_in(log: Log) -> list[tuple[int, int]]:
    """The log's leader-epoch cache as (leader epoch, start offset) pairs."""
    return [(e.leader_epoch, e.start_offset) for e in log.leader_epoch_cache.entries()]


class LogOnMemoryMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = ManualClock(T0)
        self.fs = MemoryFileSystem(clock=self.clock)
        self.log = self.open()
        self.batches: list[bytes] = []  # what the log holds, in offset order
        self.durable = 0  # how many of the first batches were flushed and not cut since
        self.ever: set[bytes] = set()  # every batch once written, as stamped
        self.epoch = 0

    def open(self) -> Log:
        return Log.open(DIRECTORY, CONFIG, fs=self.fs, clock=self.clock)

    def teardown(self) -> None:
        self.log.close_without_flush()

    @rule(count=st.integers(1, 4), records=st.integers(1, 3))
    def append(self, count: int, records: int) -> None:
        written = append_batches(
            self.log, count, epoch=self.epoch, records=records, timestamp=self.clock()
        )
        self.batches += written
        self.ever.update(written)
        self.clock.advance(1)

    @rule()
    def new_leader_epoch(self) -> None:
        self.epoch += 1

    @rule()
    def flush(self) -> None:
        self.log.flush()
        self.durable = len(self.batches)

    @rule()
    def roll(self) -> None:
        self.log.roll()

    @precondition(lambda self: self.batches)
    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        keep = data.draw(st.integers(0, len(self.batches) - 1))
        self.log.truncate_to(read_header(self.batches[keep]).base_offset)
        del self.batches[keep:]
        self.durable = min(self.durable, keep)

    @rule()
    def close_and_reopen(self) -> None:
        self.log.close()
        self.log = self.open()
        assert read_all(self.log) == self.batches
        self.durable = len(self.batches)

    @rule()
    def kill_and_reopen(self) -> None:
        """A process crash: the page cache survives, so every append does."""
        self.fs = self.fs.kill()
        self.log.close_without_flush()
        self.log = self.open()
        assert read_all(self.log) == self.batches

    @rule(seed=st.none() | st.integers(0, 2**32))
    def crash_and_reopen(self, seed: int | None) -> None:
        self.fs = self.fs.crash(None if seed is None else random.Random(seed))
        self.log.close_without_flush()  # its files died with the crash: this drops them
        self.log = self.open()
        recovered = read_all(self.log)
        assert recovered[: self.durable] == self.batches[: self.durable], "lost flushed batches"
        assert set(recovered) <= self.ever, "a batch nobody wrote"
        offset = 0
        for batch in recovered:
            header = read_header(batch)
            assert header.base_offset == offset
            offset = header.next_offset
        assert self.log.log_end_offset == offset
        assert epochs_in(self.log) == epochs_of(recovered)
        # What a crash left is on the disk as it is: all of it survives another crash.
        self.batches = recovered
        self.durable = len(recovered)

    @invariant()
    def the_log_holds_the_model(self) -> None:
        assert self.log.log_end_offset == (
            read_header(self.batches[-1]).next_offset if self.batches else self.log.log_end_offset
        )
        assert read_all(self.log) == self.batches


LogOnMemoryMachine.TestCase.settings = settings(
    max_examples=150, stateful_step_count=30, deadline=None
)
test_the_log_survives_crashes_on_a_memory_file_system = LogOnMemoryMachine.TestCase


def test_a_new_standalone_logs_directory_survives_a_crash_once_flushed() -> None:
    """Opening a log makes its directory (and missing parents) and syncs each parent, so a
    crash after the first flush keeps the log."""
    clock = ManualClock(T0)
    fs = MemoryFileSystem(clock=clock)
    log = Log.open("/fresh/dir/t-0", CONFIG, fs=fs, clock=clock)
    written = append_batches(log, 5)
    log.flush()
    fs = fs.crash()
    log.close_without_flush()
    reopened = Log.open("/fresh/dir/t-0", CONFIG, fs=fs, clock=clock)
    assert read_all(reopened) == written
    reopened.close()


def test_a_crash_keeps_what_flushes_and_rolls_synced_and_loses_the_active_tail() -> None:
    """A roll syncs the segment it closes; the active segment's appends since the last flush
    are lost, and recovery ends the log where the synced data ends."""
    clock = ManualClock(T0)
    fs = MemoryFileSystem(clock=clock)
    log = Log.open(DIRECTORY, CONFIG, fs=fs, clock=clock)
    written = append_batches(log, 30)
    log.flush()
    written += append_batches(log, 30, epoch=1)
    active_base = log.active_segment.base_offset
    assert active_base > read_header(written[29]).base_offset  # rolled past the flush
    fs = fs.crash()
    log.close_without_flush()
    reopened = Log.open(DIRECTORY, CONFIG, fs=fs, clock=clock)
    assert read_all(reopened) == [b for b in written if read_header(b).base_offset < active_base]
    assert reopened.log_end_offset == active_base
    assert epochs_in(reopened) == [(0, 0), (1, 30)]
    reopened.close()


class TornTail(random.Random):
    """A crash that keeps all but the last two bytes of every file's unsynced appends."""

    def randint(self, a: int, b: int) -> int:
        return max(a, b - 2)


def test_a_torn_tail_that_comes_back_after_recovery_cut_it_is_cut_again() -> None:
    """Recovery's cut of a torn tail is not synced, the emptied epoch checkpoint is: after a
    second crash the log holds the torn bytes and no epochs, and opens by cutting them again."""
    clock = ManualClock(T0)
    fs = MemoryFileSystem(clock=clock)
    log = Log.open(DIRECTORY, CONFIG, fs=fs, clock=clock)
    append_batches(log, 1)
    fs = fs.crash(TornTail())
    log.close_without_flush()
    log = Log.open(DIRECTORY, CONFIG, fs=fs, clock=clock)
    assert log.log_end_offset == 0 and not log.leader_epoch_cache.entries()
    fs = fs.crash()
    log.close_without_flush()
    reopened = Log.open(DIRECTORY, CONFIG, fs=fs, clock=clock)
    assert reopened.log_end_offset == 0 and read_all(reopened) == []
    reopened.close()


def test_batches_a_crash_brings_back_from_an_unsynced_cut_get_their_own_epochs() -> None:
    """A cut to 0 and an append at a new epoch, neither synced, while the epoch checkpoint
    (synced at each change) says the new epoch starts at 0: after a crash the old batch is
    back, and the cache says its epoch, not the checkpoint's."""
    clock = ManualClock(T0)
    fs = MemoryFileSystem(clock=clock)
    log = Log.open(DIRECTORY, CONFIG, fs=fs, clock=clock)
    old = append_batches(log, 1, epoch=0)
    log.close()
    log = Log.open(DIRECTORY, CONFIG, fs=fs, clock=clock)
    log.truncate_to(0)
    append_batches(log, 1, epoch=1)
    fs = fs.crash()
    log.close_without_flush()
    reopened = Log.open(DIRECTORY, CONFIG, fs=fs, clock=clock)
    assert read_all(reopened) == old
    assert epochs_in(reopened) == [(0, 0)]
    reopened.close()


def test_a_fetch_region_of_a_memory_log_reads_what_read_returns() -> None:
    """`read_or_region` on a memory file system answers a region without a descriptor: the
    fetch path sends what its `read` returns (file_region.Region)."""
    clock = ManualClock(T0)
    log = Log.open(DIRECTORY, CONFIG, fs=MemoryFileSystem(clock=clock), clock=clock)
    append_batches(log, 3)
    whole = log.read(0, 1 << 20)
    region = log.read_or_region(0, 1 << 20, region_min_bytes=1)
    assert not isinstance(region, bytes) and not hasattr(region, "fileno")
    assert len(region) == len(whole) and region.read() == whole
    region.close()
    log.close()


class PowerLoss(BaseException):
    """The machine stops where it is raised: nothing after it reaches the disk."""


def test_a_power_loss_at_any_point_of_a_cleaning_pass_keeps_what_the_pass_keeps() -> None:
    """A compacted log, flushed, cleaned with the power lost at each file operation of the
    pass in turn: the restarted log holds every record an uninterrupted pass keeps, at its
    offset, and nothing that was not written there, whichever swaps happened."""
    config = small_config(segment_bytes=700, index_interval_bytes=100, cleanup_policy="compact")
    Record = tuple[int, bytes | None, bytes | None]

    def compacted_log(fs: MemoryFileSystem, clock: ManualClock) -> Log:
        log = Log.open(DIRECTORY, config, fs=fs, clock=clock)
        for i in range(60):
            key, value = f"k{i % 7}".encode(), f"v{i}".encode()
            log.append_as_leader(build_batch([(T0 + i, key, value, ())]), 0)
        log.high_watermark = log.log_end_offset
        log.flush()
        return log

    def records(log: Log) -> set[Record]:
        return {
            (record.offset, record.key, record.value)
            for _, batch in log.read_batches(log.log_start_offset)
            for record in RecordBatch.parse(batch, sparse=True).records()
        }

    clock = ManualClock(T0)
    counting = MemoryFileSystem(clock=clock)
    log = compacted_log(counting, clock)
    written = records(log)
    operations: list[str] = []
    counting.on_operation = lambda op, path: operations.append(op)
    clean_whole_log(log)
    kept = records(log)
    assert kept < written and operations.count("rename") >= 2  # a .cleaned file, a swap
    for stop_at in range(len(operations) + 1):
        fs = MemoryFileSystem(clock=clock)
        log = compacted_log(fs, clock)
        end = log.log_end_offset
        seen: list[str] = []

        def hook(op: str, path: str, seen: list[str] = seen, stop_at: int = stop_at) -> None:
            if len(seen) >= stop_at:
                raise PowerLoss(f"at {op} {path}")
            seen.append(op)

        fs.on_operation = hook
        with contextlib.suppress(PowerLoss):
            clean_whole_log(log)
        fs.on_operation = None
        restarted = fs.crash()
        log.close_without_flush()
        reopened = Log.open(DIRECTORY, config, fs=restarted, clock=clock)
        assert reopened.log_end_offset == end, stop_at
        assert kept <= records(reopened) <= written, stop_at
        reopened.close()


def test_an_unclean_open_whose_epochs_agree_with_the_batches_rewrites_no_epoch_file() -> None:
    """Recovery compares the cache with the batches it read and rewrites the leader-epoch
    checkpoint only when they differ: an unclean start of many logs writes none of them."""
    clock = ManualClock(T0)
    fs = MemoryFileSystem(clock=clock)
    log = Log.open(DIRECTORY, CONFIG, fs=fs, clock=clock)
    append_batches(log, 3, epoch=0)
    log.flush()
    append_batches(log, 2, epoch=1)
    log.flush()  # the state file keeps the first flush's recovery point: same segment
    assert log.segment_count == 1
    fs = fs.crash()
    log.close_without_flush()
    writes: list[str] = []
    fs.on_operation = lambda op, path: writes.append(path) if op in ("write", "rename") else None
    reopened = Log.open(DIRECTORY, CONFIG, fs=fs, clock=clock)
    assert epochs_in(reopened) == [(0, 0), (1, 3)]
    assert not [path for path in writes if "leader-epoch-checkpoint" in path]
    reopened.close()
