"""LogManager: partition directories over several log dirs, Kafka's checkpoint files and clean-
shutdown marker, restoring offsets, crash recovery from the checkpointed recovery point, the
background tasks' periods (docs/design/storage.md#clean-shutdown, #log-recovery, #checkpoint-files,
#retention, #crash-scenarios, S9)."""

from __future__ import annotations

import logging
import os
import threading
import time as time_module
from collections.abc import Callable
from pathlib import Path

import pytest
from storage_helpers import (
    T0,
    SimulatedCrash,
    append_batches,
    make_batch,
    read_all,
    record_recoveries,
    small_config,
)

from replog.checkpoints import (
    CLEAN_SHUTDOWN_MARKER,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    EpochEntry,
)
from replog.errors import (
    InvalidTopicError,
    KafkaStorageError,
    MessageSizeTooLargeError,
    OffsetOutOfRangeError,
    UnknownTopicOrPartitionError,
)
from replog.storage import LogManager, LogManagerConfig
from replog.storage.fs import OsFileSystem
from replog.storage.log import Log
from replog.storage.log_dir_names import (
    parse_topic_partition,
    renamed_dir_name,
    renamed_topic_partition,
)
from replog.storage.log_manager import LOADED_REPORT_EVERY, LogLoadingAborted
from replog.testing import ManualClock
from tests.leftovers import close_after_test

LOG_CONFIG = small_config(segment_bytes=1024, retention_ms=-1)
OFFSET_CHECKPOINTS = (
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
)


class RecordingFileSystem(OsFileSystem):
    """Records the names of the per-dir offset checkpoints it replaces."""

    def __init__(self) -> None:
        self.replaced: list[str] = []

    def atomic_write(self, path: str, data: bytes) -> None:
        if os.path.basename(path) in OFFSET_CHECKPOINTS:
            self.replaced.append(os.path.basename(path))
        super().atomic_write(path, data)

    def take(self) -> set[str]:
        names, self.replaced = set(self.replaced), []
        return names


def manager(dirs: list[Path], **kwargs: object) -> LogManager:
    kwargs.setdefault("clock", ManualClock(T0))
    made = LogManager([str(d) for d in dirs], LogManagerConfig(log=LOG_CONFIG), **kwargs)  # type: ignore[arg-type]
    close_after_test(made.close_after_failure)
    return made


@pytest.fixture
def recovered(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """(partition dir name, segment base) of every segment recovery ran on."""
    return record_recoveries(monkeypatch)


def test_logs_live_in_topic_partition_dirs_spread_over_the_log_dirs(tmp_path: Path) -> None:
    dirs = [tmp_path / "d0", tmp_path / "d1", tmp_path / "d2"]
    lm = manager(dirs)
    for partition in range(4):
        lm.get_or_create_log("orders", partition)
    lm.get_or_create_log("my-topic.v2_x", 0)
    lm.get_or_create_log("payments", 0)
    children = {d.name: sorted(p.name for p in d.iterdir() if p.is_dir()) for d in dirs}
    assert sorted(name for names in children.values() for name in names) == sorted(
        ["orders-0", "orders-1", "orders-2", "orders-3", "my-topic.v2_x-0", "payments-0"]
    )
    assert sorted(len(names) for names in children.values()) == [2, 2, 2]
    assert lm.get_or_create_log("orders", 2) is lm.get_log("orders", 2)
    assert lm.get_log("my-topic.v2_x", 0).topic_partition == ("my-topic.v2_x", 0)
    with pytest.raises(UnknownTopicOrPartitionError, match="orders-9"):
        lm.get_log("orders", 9)
    lm.shutdown()


@pytest.mark.parametrize(
    "topic", ["", ".", "..", "a/b", "a b", "t" * 250, "caf\u00e9", "x:y", "__cluster_metadata"]
)
def test_invalid_topic_names_are_refused(tmp_path: Path, topic: str) -> None:
    lm = manager([tmp_path / "d0"])
    with pytest.raises(InvalidTopicError):
        lm.get_or_create_log(topic, 0)
    assert list((tmp_path / "d0").iterdir()) == []
    lm.get_or_create_log("t" * 249, 0)  # the longest legal name


def fill(lm: LogManager) -> None:
    """orders-0: 30 batches, HW 25, log start 3; orders-1: 4 batches, HW 4; payments-0: empty."""
    orders0 = lm.get_or_create_log("orders", 0)
    append_batches(orders0, 30)
    orders0.high_watermark = 25
    orders0.increment_log_start_offset(3)
    orders1 = lm.get_or_create_log("orders", 1)
    append_batches(orders1, 4)
    orders1.high_watermark = 4
    lm.get_or_create_log("payments", 0)


def test_shutdown_writes_kafkas_checkpoint_files_and_the_marker(tmp_path: Path) -> None:
    d0 = tmp_path / "d0"
    lm = manager([d0])
    fill(lm)
    lm.shutdown(broker_epoch=4242)
    assert (
        d0 / RECOVERY_POINT_CHECKPOINT
    ).read_text() == "0\n3\norders 0 30\norders 1 4\npayments 0 0\n"
    assert (
        d0 / REPLICATION_OFFSET_CHECKPOINT
    ).read_text() == "0\n3\norders 0 25\norders 1 4\npayments 0 0\n"
    # Only logs whose start lies inside their first segment are listed.
    assert (d0 / LOG_START_OFFSET_CHECKPOINT).read_text() == "0\n1\norders 0 3\n"
    assert (d0 / CLEAN_SHUTDOWN_MARKER).read_bytes() == b'{"version":0,"brokerEpoch":4242}'
    assert not list(d0.glob("*.tmp"))


def test_periodic_checkpoints_read_no_log_until_an_offset_moves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d0 = tmp_path / "d0"
    lm = manager([d0])
    fill(lm)
    for topic, partition in (("orders", 0), ("orders", 1)):
        lm.get_log(topic, partition).flush()
    lm.checkpoint_high_watermarks()
    lm.checkpoint_recovery_points()
    lm.checkpoint_log_start_offsets()
    reads: list[str] = []
    high_watermarks_in, write_recovery_points = lm._high_watermarks_in, lm._write_recovery_points
    write_log_start_offsets = lm._write_log_start_offsets
    monkeypatch.setattr(
        lm, "_write_log_start_offsets", lambda d: reads.append("lso") or write_log_start_offsets(d)
    )
    monkeypatch.setattr(
        lm, "_high_watermarks_in", lambda d: reads.append("hw") or high_watermarks_in(d)
    )
    monkeypatch.setattr(
        lm,
        "_write_recovery_points",
        lambda d, **kw: reads.append("rp") or write_recovery_points(d, **kw),
    )
    for partition in range(10):  # new logs at 0 move nothing a checkpoint needs
        lm.get_or_create_log("events", partition)
    orders1 = lm.get_log("orders", 1)
    orders1.high_watermark = 4  # the same value again: no move
    orders1.flush()  # nothing new to flush: no move
    lm.checkpoint_high_watermarks()
    lm.checkpoint_recovery_points()
    lm.checkpoint_log_start_offsets()
    assert reads == []
    append_batches(orders1, 2)
    orders1.high_watermark = 6
    lm.checkpoint_high_watermarks()
    assert reads == ["hw"]
    assert "orders 1 6\n" in (d0 / REPLICATION_OFFSET_CHECKPOINT).read_text()
    orders1.flush()
    lm.checkpoint_recovery_points()
    assert reads == ["hw", "rp"]
    assert "orders 1 6\n" in (d0 / RECOVERY_POINT_CHECKPOINT).read_text()
    # A truncation lowers both: its own recovery-point write at once, then both passes read.
    lm.get_log("orders", 0).truncate_to(20)
    lm.checkpoint_high_watermarks()
    lm.checkpoint_recovery_points()
    assert reads == ["hw", "rp", "rp", "hw", "rp"]
    assert "orders 0 20\n" in (d0 / REPLICATION_OFFSET_CHECKPOINT).read_text()
    lm.checkpoint_log_start_offsets()  # the truncation moved no log start: read all the same
    assert reads[-1] == "lso"
    lm.get_log("orders", 0).increment_log_start_offset(5)
    lm.checkpoint_log_start_offsets()
    assert reads[-2:] == ["lso", "lso"]
    assert "orders 0 5\n" in (d0 / LOG_START_OFFSET_CHECKPOINT).read_text()


def test_a_retention_pass_goes_in_steps_and_passes_over_logs_closed_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from replog.storage import log_manager

    monkeypatch.setattr(log_manager, "RETENTION_SLICE", 2)
    clock = ManualClock(T0)
    config = LogManagerConfig(log=small_config(segment_bytes=1024, retention_ms=1000))
    lm = LogManager(str(tmp_path / "d0"), config, clock=clock)
    close_after_test(lm.close_after_failure)
    logs = [lm.get_or_create_log("orders", partition) for partition in range(5)]
    for lg in logs:
        append_batches(lg, 20, timestamp=T0)
        lg.high_watermark = lg.log_end_offset
    clock.advance(10_000)
    rests: list[float] = []
    lock_free: list[bool] = []

    def try_the_lock() -> None:
        taken = lm._lock.acquire(False)
        lock_free.append(taken)
        if taken:
            lm._lock.release()

    def rest(seconds: float) -> None:  # the third log goes while the pass rests
        rests.append(seconds)
        other = threading.Thread(target=try_the_lock)
        other.start()
        other.join()
        if len(rests) == 1:
            lm.delete_log("orders", 2)

    monkeypatch.setattr(log_manager.time, "sleep", rest)
    lm.run_due_tasks(now_ms=10**15)  # the task thread's pass, every task due
    assert rests == [log_manager.SLICE_REST_S] * 2  # 5 logs in steps of 2
    assert lock_free == [True, True]  # the manager's lock let go while it rests
    for partition in (0, 1, 3, 4):
        assert lm.get_log("orders", partition).log_start_offset == 20


def test_reopening_restores_the_offsets_and_consumes_the_marker(
    tmp_path: Path, recovered: list[tuple[str, int]]
) -> None:
    d0 = tmp_path / "d0"
    lm = manager([d0])
    fill(lm)
    before = read_all(lm.get_log("orders", 0))
    lm.shutdown(broker_epoch=7)

    again = manager([d0])
    assert not (d0 / CLEAN_SHUTDOWN_MARKER).exists()  # deleted at startup, before loading
    assert again.previous_broker_epoch() == 7
    assert recovered == []  # clean: nothing rescanned
    orders0 = again.get_log("orders", 0)
    assert (orders0.log_start_offset, orders0.high_watermark, orders0.log_end_offset) == (3, 25, 30)
    assert orders0.recovery_point == 30
    assert read_all(orders0) == before
    with pytest.raises(OffsetOutOfRangeError):
        orders0.read(2, 100)
    assert again.get_log("orders", 1).high_watermark == 4
    assert again.get_log("payments", 0).log_end_offset == 0


def test_restored_offsets_are_clamped_to_the_log(tmp_path: Path) -> None:
    d0 = tmp_path / "d0"
    lm = manager([d0])
    fill(lm)
    lm.shutdown()
    (d0 / REPLICATION_OFFSET_CHECKPOINT).write_text("0\n2\norders 0 9999\norders 1 0\n")
    (d0 / LOG_START_OFFSET_CHECKPOINT).write_text("0\n1\norders 1 2\n")
    again = manager([d0])
    orders0, orders1 = again.get_log("orders", 0), again.get_log("orders", 1)
    assert orders0.high_watermark == 30  # clamped to the log end
    # No entry: not the first segment's base (0) but where the log start was, 3, which the
    # leader-epoch checkpoint's first entry witnesses (written when it moved).
    assert orders0.log_start_offset == 3
    assert (orders1.log_start_offset, orders1.high_watermark) == (2, 2)  # HW raised to the start


def crash(lm: LogManager) -> None:
    """Stop without a shutdown: no flush, no checkpoints, no marker."""
    for lg in lm.all_logs().values():
        lg.close_without_flush()


def test_a_crash_recovers_each_log_from_its_checkpointed_recovery_point(
    tmp_path: Path, recovered: list[tuple[str, int]]
) -> None:
    d0 = tmp_path / "d0"
    lm = manager([d0])
    orders0 = lm.get_or_create_log("orders", 0)
    batches = append_batches(orders0, 20)
    lm.flush_rolled_segments()  # the background thread's job: rolls sync asynchronously
    lm.checkpoint_recovery_points()
    checkpointed = orders0.recovery_point
    assert 0 < checkpointed < orders0.log_end_offset
    batches += append_batches(orders0, 25)  # rolls, so recovery points move on in memory only
    lm.flush_rolled_segments()
    assert orders0.recovery_point > checkpointed
    crash(lm)

    again = manager([d0])
    bases = [s.base_offset for s in again.get_log("orders", 0).segments()]
    floor = max(b for b in bases if b <= checkpointed)
    assert recovered == [("orders-0", b) for b in bases if b >= floor]
    assert len(recovered) >= 2
    assert read_all(again.get_log("orders", 0)) == batches
    assert again.previous_broker_epoch() == -1


def test_loading_after_a_clean_stop_lists_each_log_once_and_stats_no_index(
    tmp_path: Path,
) -> None:
    """A restart opens every log of the broker: each is one directory listing (which also
    says which index files exist), not one listing per step and a stat per file; the log dir
    itself is listed once, without a stat per entry."""
    d0 = tmp_path / "d0"
    lm = manager([d0])
    for partition in range(3):
        append_batches(lm.get_or_create_log("orders", partition), 2)
    lm.shutdown()

    class Counting(OsFileSystem):
        def __init__(self) -> None:
            super().__init__()
            self.listed: list[str] = []
            self.asked: list[str] = []

        def list_dir(self, path: str) -> list[str]:
            self.listed.append(os.path.basename(path))
            return super().list_dir(path)

        def list_subdirs(self, path: str) -> list[str]:
            self.listed.append(os.path.basename(path))
            return super().list_subdirs(path)

        def exists(self, path: str) -> bool:
            self.asked.append(path)
            return super().exists(path)

    fs = Counting()
    again = manager([d0], fs=fs)
    assert sorted(fs.listed) == ["d0", "orders-0", "orders-1", "orders-2"]
    assert fs.asked == []
    assert [len(read_all(again.get_log("orders", p))) for p in range(3)] == [2, 2, 2]


def test_loading_reports_the_logs_it_opened_in_rounds(tmp_path: Path) -> None:
    dirs = [tmp_path / "d0", tmp_path / "d1"]
    lm = manager(dirs)
    for partition in range(LOADED_REPORT_EVERY + 30):
        lm.get_or_create_log("orders", partition)
    lm.shutdown()
    reports: list[int] = []
    again = manager(dirs, on_logs_loaded=reports.append)
    # One report per round of opened logs across the dirs, and one for the rest at the end.
    assert reports == [LOADED_REPORT_EVERY, 30]
    assert len(again.all_logs()) == sum(reports)
    again.shutdown()
    empty: list[int] = []
    manager([tmp_path / "d2"], on_logs_loaded=empty.append).shutdown()
    assert empty == []


def test_an_abort_ends_the_loading_before_its_next_log_and_counts_as_unclean(
    tmp_path: Path,
) -> None:
    lm = manager([tmp_path / "d0"])
    for partition in range(LOADED_REPORT_EVERY + 30):
        lm.get_or_create_log("orders", partition)
    lm.shutdown()
    abort = threading.Event()
    # Set once the first round of logs is open: the load stops there, not after the rest.
    with pytest.raises(LogLoadingAborted, match=f"after {LOADED_REPORT_EVERY} logs"):
        manager([tmp_path / "d0"], on_logs_loaded=lambda _: abort.set(), abort=abort)
    again = manager([tmp_path / "d0"])
    assert again.previous_broker_epoch() == -1  # no clean-shutdown marker was written
    assert len(again.all_logs()) == LOADED_REPORT_EVERY + 30
    again.shutdown()


def test_a_crash_while_loading_counts_as_unclean_next_time(
    tmp_path: Path, recovered: list[tuple[str, int]]
) -> None:
    d0 = tmp_path / "d0"
    lm = manager([d0])
    append_batches(lm.get_or_create_log("orders", 0), 12)
    lm.shutdown()

    class DiesWhileLoading(OsFileSystem):
        def list_dir(self, path: str) -> list[str]:
            if os.path.basename(path) == "orders-0":
                raise SimulatedCrash(path)
            return super().list_dir(path)

    with pytest.raises(SimulatedCrash):
        manager([d0], fs=DiesWhileLoading())
    assert not (d0 / CLEAN_SHUTDOWN_MARKER).exists()
    manager([d0])
    assert recovered and recovered[0][0] == "orders-0"


@pytest.mark.parametrize(
    ("name", "content", "line"),
    [
        (RECOVERY_POINT_CHECKPOINT, "0\n2\norders 0 5\n", 2),  # count says 2, one entry
        (RECOVERY_POINT_CHECKPOINT, "0\n1\norders 0 five\n", 3),
        (REPLICATION_OFFSET_CHECKPOINT, "1\n0\n", 1),
        (REPLICATION_OFFSET_CHECKPOINT, "0\n1\norders 0 12", 3),  # torn: no final newline
    ],
)
def test_a_malformed_checkpoint_is_reported_and_falls_back_safely(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    recovered: list[tuple[str, int]],
    name: str,
    content: str,
    line: int,
) -> None:
    d0 = tmp_path / "d0"
    lm = manager([d0])
    orders0 = lm.get_or_create_log("orders", 0)
    batches = append_batches(orders0, 30)
    orders0.high_watermark = 20
    lm.checkpoint_recovery_points()
    lm.checkpoint_high_watermarks()
    crash(lm)
    (d0 / name).write_text(content)

    with caplog.at_level(logging.WARNING, logger="replog.storage"):
        again = manager([d0])
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(str(d0 / name) in m and f"line {line}" in m for m in messages), messages
    reopened = again.get_log("orders", 0)
    assert read_all(reopened) == batches
    if name == RECOVERY_POINT_CHECKPOINT:  # no recovery point: recover the whole log
        assert [base for _, base in recovered] == [s.base_offset for s in reopened.segments()]
        assert reopened.high_watermark == 20
    else:  # no high watermark: it restarts at the log start
        assert reopened.high_watermark == 0


def test_a_malformed_marker_means_an_unclean_shutdown(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, recovered: list[tuple[str, int]]
) -> None:
    d0 = tmp_path / "d0"
    lm = manager([d0])
    append_batches(lm.get_or_create_log("orders", 0), 5)
    lm.shutdown(broker_epoch=3)
    (d0 / CLEAN_SHUTDOWN_MARKER).write_bytes(b"")  # what old Kafka releases wrote
    again = manager([d0])
    assert recovered == [("orders-0", 0)]
    assert again.previous_broker_epoch() == -1
    assert any(CLEAN_SHUTDOWN_MARKER in r.getMessage() for r in caplog.records)


def test_the_background_tasks_run_with_kafkas_periods(tmp_path: Path) -> None:
    fs = RecordingFileSystem()
    clock = ManualClock(T0)
    tasks = ManualClock(1_000)
    d0 = tmp_path / "d0"
    lm = LogManager(str(d0), LogManagerConfig(log=LOG_CONFIG), fs=fs, clock=clock, task_clock=tasks)
    fs.take()
    orders0 = lm.get_or_create_log("orders", 0)
    fs.take()
    hw, rp, lso = (
        REPLICATION_OFFSET_CHECKPOINT,
        RECOVERY_POINT_CHECKPOINT,
        LOG_START_OFFSET_CHECKPOINT,
    )

    # The high-watermark checkpoint starts at once (ReplicaManager schedules it with delay 0);
    # the log manager's tasks wait log.initial.task.delay.ms (30000). A file is written when
    # its task is due and its offsets changed since its last write.
    append_batches(orders0, 30)
    fs.take()
    hw_at = iter(range(1, 31))
    orders0.high_watermark = next(hw_at)
    assert lm.run_due_tasks(1_000) == 6_000
    assert fs.take() == {hw}
    orders0.high_watermark = next(hw_at)
    assert lm.run_due_tasks(5_999) == 6_000
    assert fs.take() == set()
    assert lm.run_due_tasks(6_000) == 11_000
    assert fs.take() == {hw}
    assert lm.run_due_tasks(11_000) == 16_000
    assert fs.take() == set()  # due, but nothing changed: not written again
    for now in range(16_000, 31_000, 5_000):
        orders0.high_watermark = next(hw_at)
        lm.run_due_tasks(now)
        assert fs.take() == {hw}
    orders0.high_watermark = 30
    assert lm.run_due_tasks(31_000) == 36_000
    assert fs.take() == {hw, lso, rp}
    assert (d0 / hw).read_text() == "0\n1\norders 0 30\n"
    for now in range(36_000, 91_000, 5_000):
        lm.run_due_tasks(now)
        assert fs.take() == set()
    orders0.flush()
    orders0.high_watermark = 20
    lm.run_due_tasks(91_000)  # 60000 after the first run
    assert fs.take() == {hw, rp}  # the log start offsets did not change
    assert (d0 / rp).read_text() == f"0\n1\norders 0 {orders0.recovery_point}\n"
    lm.shutdown()


def test_unchanged_checkpoints_are_not_written_again_and_failed_writes_are(
    tmp_path: Path,
) -> None:
    class FailingOnce(RecordingFileSystem):
        fail_next = False

        def atomic_write(self, path: str, data: bytes) -> None:
            if self.fail_next:
                self.fail_next = False
                raise OSError(28, "No space left on device")
            super().atomic_write(path, data)

    fs = FailingOnce()
    lm = LogManager(str(tmp_path / "d0"), LogManagerConfig(log=LOG_CONFIG), fs=fs)
    orders = lm.get_or_create_log("orders", 0)
    append_batches(orders, 3)
    lm.checkpoint_high_watermarks()
    fs.take()
    lm.checkpoint_high_watermarks()
    assert fs.take() == set()
    orders.high_watermark = 2
    fs.fail_next = True
    with pytest.raises(KafkaStorageError, match="No space"):
        lm.checkpoint_high_watermarks()
    lm.checkpoint_high_watermarks()  # the same offsets as the failed write: written now
    assert fs.take() == {REPLICATION_OFFSET_CHECKPOINT}
    hw_file = tmp_path / "d0" / REPLICATION_OFFSET_CHECKPOINT
    assert hw_file.read_text() == "0\n1\norders 0 2\n"
    orders.high_watermark = 3  # a changed entry
    lm.checkpoint_high_watermarks()
    assert fs.take() == {REPLICATION_OFFSET_CHECKPOINT}
    lm.shutdown()


def test_new_entries_at_zero_wait_for_the_next_change_and_the_shutdown_writes_them(
    tmp_path: Path,
) -> None:
    """A periodic checkpoint that would only add new logs' entries at 0 (what a missing
    entry means to the load) is not written; the next one with a change writes them all, as
    does the shutdown."""
    fs = RecordingFileSystem()
    d0 = tmp_path / "d0"
    lm = LogManager(str(d0), LogManagerConfig(log=LOG_CONFIG), fs=fs)
    orders = lm.get_or_create_log("orders", 0)
    append_batches(orders, 3)
    orders.high_watermark = 2
    lm.checkpoint_high_watermarks()
    lm.checkpoint_recovery_points()
    assert fs.take() == {REPLICATION_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT}
    for partition in (1, 2):  # a creation: new logs, every offset 0
        lm.get_or_create_log("orders", partition)
    lm.checkpoint_high_watermarks()
    lm.checkpoint_recovery_points()
    assert fs.take() == set()
    assert (d0 / REPLICATION_OFFSET_CHECKPOINT).read_text() == "0\n1\norders 0 2\n"
    lm.get_log("orders", 2).high_watermark = 0  # unchanged: still nothing to say
    append_batches(lm.get_log("orders", 1), 1)
    lm.get_log("orders", 1).high_watermark = 1  # a new entry that is not 0
    lm.checkpoint_high_watermarks()
    assert fs.take() == {REPLICATION_OFFSET_CHECKPOINT}
    hw = "0\n3\norders 0 2\norders 1 1\norders 2 0\n"
    assert (d0 / REPLICATION_OFFSET_CHECKPOINT).read_text() == hw
    lm.get_or_create_log("orders", 3)
    lm.shutdown()
    assert (d0 / REPLICATION_OFFSET_CHECKPOINT).read_text() == hw.replace(
        "0\n3\n", "0\n4\n"
    ) + "orders 3 0\n"
    assert (d0 / RECOVERY_POINT_CHECKPOINT).read_text().startswith("0\n4\n")
    reloaded = LogManager(str(d0), LogManagerConfig(log=LOG_CONFIG))
    assert {p: reloaded.get_log("orders", p).high_watermark for p in range(4)} == {
        0: 2,
        1: 1,
        2: 0,
        3: 0,
    }
    reloaded.shutdown()


def test_retention_runs_every_retention_check_interval(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    lm = LogManager(
        str(tmp_path / "d0"),
        LogManagerConfig(log=small_config(segment_bytes=1024, retention_bytes=0)),
        clock=clock,
        task_clock=ManualClock(0),
    )
    orders0 = lm.get_or_create_log("orders", 0)
    append_batches(orders0, 30)
    orders0.high_watermark = 30
    segments = orders0.segment_count
    lm.run_due_tasks(29_999)
    assert orders0.segment_count == segments
    lm.run_due_tasks(30_000)
    assert orders0.segment_count == 1 and orders0.log_start_offset == 30
    append_batches(orders0, 30)
    orders0.high_watermark = 60
    lm.run_due_tasks(329_999)
    assert orders0.segment_count > 1
    lm.run_due_tasks(330_000)
    assert orders0.segment_count == 1 and orders0.log_start_offset == 60


def test_a_truncation_rewrites_the_recovery_point_checkpoint_at_once(tmp_path: Path) -> None:
    d0 = tmp_path / "d0"
    lm = manager([d0])
    orders0 = lm.get_or_create_log("orders", 0)
    append_batches(orders0, 30)
    orders0.flush()
    lm.checkpoint_recovery_points()
    assert (d0 / RECOVERY_POINT_CHECKPOINT).read_text() == "0\n1\norders 0 30\n"
    assert lm.truncate_to("orders", 0, 12) is True
    assert (d0 / RECOVERY_POINT_CHECKPOINT).read_text() == "0\n1\norders 0 12\n"
    orders0.truncate_fully_and_start_at(100)  # directly on the log: the manager hears of it
    assert (d0 / RECOVERY_POINT_CHECKPOINT).read_text() == "0\n1\norders 0 100\n"
    orders0.append_as_leader(make_batch(), 0)
    crash(lm)
    again = manager([d0])
    assert again.get_log("orders", 0).log_end_offset == 101
    assert again.get_log("orders", 0).log_start_offset == 100


def test_a_truncation_during_a_retention_pass_does_not_deadlock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The manager's thread holds its lock while a retention pass takes each log's lock in
    # turn; a follower truncation holds its log's lock while it records the lowered recovery
    # point. Neither may wait for the other's lock.
    d0 = tmp_path / "d0"
    lm = manager([d0])
    first, second = lm.get_or_create_log("a", 0), lm.get_or_create_log("b", 0)
    for lg in (first, second):
        append_batches(lg, 3)
        lg.flush()  # recovery points 3
    in_pass = threading.Event()
    original = Log.delete_old_segments

    def slow_on_the_first_log(self: Log, now_ms: int | None = None) -> int:
        if self is first:
            in_pass.set()
            time_module.sleep(0.3)  # the pass is busy with an earlier log, manager lock held
        return original(self, now_ms)

    monkeypatch.setattr(Log, "delete_old_segments", slow_on_the_first_log)
    retention = threading.Thread(target=lm.run_retention, daemon=True)
    truncation = threading.Thread(target=lambda: second.truncate_to(1), daemon=True)
    retention.start()
    assert in_pass.wait(5)
    truncation.start()
    retention.join(5)
    truncation.join(5)
    assert not retention.is_alive() and not truncation.is_alive(), "deadlocked"
    assert (d0 / RECOVERY_POINT_CHECKPOINT).read_text().splitlines()[2:] == ["a 0 3", "b 0 1"]
    lm.shutdown()


def write_all_checkpoints(lm: LogManager) -> None:
    lm.checkpoint_recovery_points()
    lm.checkpoint_high_watermarks()
    lm.checkpoint_log_start_offsets()


def test_delete_log_removes_the_directory_and_its_checkpoint_entries(tmp_path: Path) -> None:
    d0 = tmp_path / "d0"
    fs = RecordingFileSystem()
    lm = manager([d0], fs=fs)
    fill(lm)
    write_all_checkpoints(lm)
    fs.take()
    lm.delete_log("orders", 0)
    assert not (d0 / "orders-0").exists()
    with pytest.raises(UnknownTopicOrPartitionError):
        lm.get_log("orders", 0)
    with pytest.raises(UnknownTopicOrPartitionError):
        lm.delete_log("orders", 0)
    # The six fsyncs of the rewrite are left to the background tasks, off the caller's thread.
    assert fs.take() == set()
    lm.run_due_tasks()
    assert fs.take() == set(OFFSET_CHECKPOINTS)
    for name in OFFSET_CHECKPOINTS:
        assert "orders 0 " not in (d0 / name).read_text()
    lm.shutdown()
    assert sorted(manager([d0]).all_logs()) == [("orders", 1), ("payments", 0)]


def test_loading_finishes_deletions_and_ignores_foreign_dirs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    d0 = tmp_path / "d0"
    lm = manager([d0])
    append_batches(lm.get_or_create_log("orders", 0), 3)
    lm.shutdown()
    (d0 / "orders-7.abc123-delete").mkdir()
    (d0 / "orders-7.abc123-delete" / "junk").write_bytes(b"x")
    (d0 / "lost+found").mkdir()
    again = manager([d0])
    assert sorted(again.all_logs()) == [("orders", 0)]
    assert not (d0 / "orders-7.abc123-delete").exists()
    assert (d0 / "lost+found").exists()
    assert any("lost+found" in r.getMessage() for r in caplog.records)


def test_loading_leaves_the_metadata_log_alone_but_not_topics_named_like_it(
    tmp_path: Path,
) -> None:
    d0 = tmp_path / "d0"
    lm = manager([d0])
    append_batches(lm.get_or_create_log("__cluster_metadata_x", 0), 3)
    lm.shutdown()
    (d0 / "__cluster_metadata-0").mkdir()  # the Raft storage's, when it shares the log dir
    (d0 / "__cluster_metadata-0" / "quorum-state").write_bytes(b"{}")
    again = manager([d0])
    assert sorted(again.all_logs()) == [("__cluster_metadata_x", 0)]
    assert again.get_log("__cluster_metadata_x", 0).log_end_offset == 3
    assert (d0 / "__cluster_metadata-0" / "quorum-state").read_bytes() == b"{}"


def test_a_partition_in_two_log_dirs_is_refused(tmp_path: Path) -> None:
    d0, d1 = tmp_path / "d0", tmp_path / "d1"
    lm = manager([d0])
    append_batches(lm.get_or_create_log("orders", 0), 3)
    lm.shutdown()
    (d1 / "orders-0").mkdir(parents=True)
    with pytest.raises(KafkaStorageError, match="orders-0"):
        manager([d0, d1])


def test_a_follower_restart_at_a_straddling_batch_rewrites_the_recovery_points(
    tmp_path: Path,
) -> None:
    """Kafka's Partition restarts such a follower through LogManager.truncateFullyAndStartAt,
    which checkpoints the recovery points at once, as every truncation does."""
    d0 = tmp_path / "d0"
    lm = manager([d0])
    follower = lm.get_or_create_log("orders", 0)
    follower.truncate_fully_and_start_at(15)
    assert (d0 / RECOVERY_POINT_CHECKPOINT).read_text() == "0\n1\norders 0 15\n"
    follower.append_as_follower(make_batch(10, base_offset=10, partition_leader_epoch=2))
    assert (follower.log_start_offset, follower.log_end_offset) == (10, 20)
    assert (d0 / RECOVERY_POINT_CHECKPOINT).read_text() == "0\n1\norders 0 10\n"


def test_a_recovered_log_takes_its_topic_config_when_the_broker_names_it(tmp_path: Path) -> None:
    """A log opened at start-up gets the broker defaults (the checkpoints know no topic
    configs); the broker's first `get_or_create_log` with the topic's config must apply it, or
    a restarted broker would forget e.g. the topic's segment size and message size limit."""
    lm = manager([tmp_path])
    append_batches(lm.get_or_create_log("orders", 0, small_config()), 3)
    lm.shutdown()
    reopened = manager([tmp_path])
    recovered = reopened.get_log("orders", 0)
    assert recovered.config != small_config(max_message_bytes=300)
    topic_config = small_config(max_message_bytes=300)
    assert reopened.get_or_create_log("orders", 0, topic_config) is recovered
    assert recovered.config == topic_config
    assert all(segment.config == topic_config for segment in recovered.segments())
    with pytest.raises(MessageSizeTooLargeError, match="orders-0"):
        append_batches(recovered, 1, value_size=400)
    assert recovered.update_config(topic_config) is False  # the same config changes nothing
    reopened.shutdown()


# --- deleting a partition: renamed at once, files removed by the background tasks -----------


def deleted_dirs(log_dir: Path) -> list[str]:
    return sorted(p.name for p in log_dir.iterdir() if p.name.endswith("-delete"))


def test_a_deleted_partition_is_renamed_at_once_and_its_files_removed_in_the_background(
    tmp_path: Path,
) -> None:
    d0 = tmp_path / "d0"
    lm = manager([d0])
    fill(lm)
    lm.delete_log("orders", 0)
    assert not (d0 / "orders-0").exists()
    [renamed] = deleted_dirs(d0)
    assert renamed.startswith("orders-0.") and len(renamed) == len("orders-0.") + 32 + 7
    assert any((d0 / renamed).iterdir())  # the files wait for the background tasks
    # A partition of the same name can be created and deleted again meanwhile.
    append_batches(lm.get_or_create_log("orders", 0), 2)
    lm.delete_log("orders", 0)
    assert len(deleted_dirs(d0)) == 2
    lm.run_due_tasks()
    assert deleted_dirs(d0) == []
    assert lm.remove_deleted_logs() == 0
    assert sorted(lm.all_logs()) == [("orders", 1), ("payments", 0)]
    lm.shutdown()


def test_a_partition_created_before_the_rewrite_does_not_inherit_the_deleted_ones_offsets(
    tmp_path: Path,
) -> None:
    """A crash right after a deletion and a re-creation, before any background task ran."""
    d0 = tmp_path / "d0"
    lm = manager([d0])
    fill(lm)  # orders-0: log start 3, HW 25
    write_all_checkpoints(lm)
    lm.delete_log("orders", 0)
    append_batches(lm.get_or_create_log("orders", 0), 2)
    for name in OFFSET_CHECKPOINTS:
        assert "orders 0 " not in (d0 / name).read_text()
    crash(lm)
    again = manager([d0])
    reborn = again.get_log("orders", 0)
    assert (reborn.log_start_offset, reborn.log_end_offset) == (0, 2)
    assert reborn.high_watermark <= 2
    again.shutdown()


@pytest.mark.parametrize("rename_aside", ["delete_log", "set_aside_stray_log"])
def test_a_crash_before_the_rewrite_does_not_hand_the_old_offsets_to_a_later_partition(
    tmp_path: Path, rename_aside: str
) -> None:
    """The rename is durable but the checkpoints still name the partition when the process
    dies; the next start must not keep those entries for a partition of the same name created
    later (after a second crash its log start offset would be the old one, 3 here, past its
    end, and loading would delete all its segments)."""
    d0 = tmp_path / "d0"
    lm = manager([d0])
    fill(lm)  # orders-0: log start 3, HW 25
    write_all_checkpoints(lm)
    getattr(lm, rename_aside)("orders", 0)
    crash(lm)  # no background task ran: the checkpoints still have "orders 0 ..."
    assert "orders 0 3" in (d0 / LOG_START_OFFSET_CHECKPOINT).read_text()
    again = manager([d0])
    append_batches(again.get_or_create_log("orders", 0), 2)
    crash(again)
    last = manager([d0])
    reborn = last.get_log("orders", 0)
    assert (reborn.log_start_offset, reborn.log_end_offset) == (0, 2)
    last.shutdown()


def test_deletions_pending_at_shutdown_are_finished_by_the_next_start(tmp_path: Path) -> None:
    d0 = tmp_path / "d0"
    lm = manager([d0])
    fill(lm)
    lm.delete_log("orders", 1)
    lm.shutdown()
    assert len(deleted_dirs(d0)) == 1
    again = manager([d0])
    assert deleted_dirs(d0) == []
    assert sorted(again.all_logs()) == [("orders", 0), ("payments", 0)]


# --- stray logs: renamed aside, kept, never opened again ---------------------------------------


def stray_dirs(log_dir: Path) -> list[str]:
    return sorted(p.name for p in log_dir.iterdir() if p.name.endswith("-stray"))


def test_a_stray_log_is_set_aside_with_its_files_and_never_loaded_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    d0 = tmp_path / "d0"
    lm = manager([d0])
    fill(lm)
    write_all_checkpoints(lm)
    files = sorted(p.name for p in (d0 / "orders-0").iterdir())
    aside = lm.set_aside_stray_log("orders", 0)
    [renamed] = stray_dirs(d0)
    assert aside == str(d0 / renamed) and renamed.startswith("orders-0.")
    assert sorted(p.name for p in (d0 / renamed).iterdir()) == files  # nothing deleted
    assert not (d0 / "orders-0").exists()
    with pytest.raises(UnknownTopicOrPartitionError):
        lm.get_log("orders", 0)
    with pytest.raises(UnknownTopicOrPartitionError):
        lm.set_aside_stray_log("orders", 0)
    # Its checkpoint entries go as a deletion's; its files stay, whatever the tasks run.
    lm.run_due_tasks()
    for name in OFFSET_CHECKPOINTS:
        assert "orders 0 " not in (d0 / name).read_text()
    assert stray_dirs(d0) == [renamed] and deleted_dirs(d0) == []
    lm.shutdown()
    with caplog.at_level(logging.WARNING, logger="replog.storage"):
        again = manager([d0])
    assert sorted(again.all_logs()) == [("orders", 1), ("payments", 0)]
    assert stray_dirs(d0) == [renamed]
    assert f"stray log {renamed} kept aside, not served" in caplog.text
    # A partition of the same name starts empty beside it.
    assert again.get_or_create_log("orders", 0).log_end_offset == 0
    again.shutdown()


class TreeRemovals(OsFileSystem):
    """Signals each directory tree it removed."""

    def __init__(self) -> None:
        self.removed = threading.Event()

    def remove_tree(self, path: str) -> None:
        super().remove_tree(path)
        self.removed.set()


def test_the_background_thread_removes_a_deleted_partition_at_once(tmp_path: Path) -> None:
    d0 = tmp_path / "d0"
    fs = TreeRemovals()
    lm = LogManager(str(d0), LogManagerConfig(log=LOG_CONFIG), fs=fs, clock=ManualClock(T0))
    append_batches(lm.get_or_create_log("orders", 0), 3)
    lm.start(poll_interval_ms=600_000)  # only the deletion's wake-up runs the tasks in time
    try:
        lm.delete_log("orders", 0)
        assert fs.removed.wait(30), "the background thread never removed the partition"
        assert deleted_dirs(d0) == []
    finally:
        lm.shutdown()


def counted_passes(lm: LogManager) -> list[threading.Event]:
    """One event per `run_due_tasks` pass of `lm`'s task thread, set as the pass ends; the
    list starts with the events of the first 20 passes."""
    passes = [threading.Event() for _ in range(20)]
    ran = iter(passes)
    run_due_tasks = lm.run_due_tasks

    def counting(now_ms: int | None = None) -> int:
        try:
            return run_due_tasks(now_ms)
        finally:
            next(ran).set()

    lm.run_due_tasks = counting  # type: ignore[method-assign]
    return passes


@pytest.mark.parametrize("interval_ms", [60_000, 200])
def test_the_background_thread_sleeps_until_a_task_is_due(tmp_path: Path, interval_ms: int) -> None:
    # At 60 s every task is far off after the first pass: nothing may wake the thread before.
    config = LogManagerConfig(log=LOG_CONFIG, high_watermark_checkpoint_interval_ms=interval_ms)
    lm = LogManager(str(tmp_path / "d0"), config, clock=ManualClock(T0))
    passes = counted_passes(lm)
    lm.start()
    try:
        assert passes[0].wait(30), "the background thread never made its first pass"
        if interval_ms < 500:
            assert passes[2].wait(30), "the background thread slept through a due task"
        else:
            assert not passes[1].wait(0.5), "the background thread woke with no task due"
    finally:
        lm.shutdown()


@pytest.mark.parametrize("suffix", ["-delete", "-stray"])
def test_a_renamed_partition_name_fits_a_file_name_however_long_the_topic(suffix: str) -> None:
    topic = "t" * 249  # the longest topic name
    name = renamed_dir_name(f"/data/{topic}-7", suffix)
    assert len(name.encode()) == 255
    assert name.endswith(suffix) and "-7." in name
    assert parse_topic_partition(name) is None  # loading never takes it for a partition
    assert renamed_dir_name("/data/orders-7", suffix) != renamed_dir_name("/data/orders-7", suffix)


def test_a_renamed_partition_directory_names_its_topic_and_partition() -> None:
    for suffix in ("-delete", "-stray"):
        renamed = renamed_dir_name("/data/my.topic-7", suffix)
        assert renamed_topic_partition(renamed) == ("my.topic", 7)
    assert renamed_topic_partition("/data/my.topic-7") is None  # a live partition's
    assert renamed_topic_partition("/data/lost+found") is None
    with pytest.raises(ValueError, match="-future"):
        renamed_dir_name("/data/my.topic-7", "-future")


class FailingRename(OsFileSystem):
    def rename(self, source: str, target: str) -> None:
        raise PermissionError(13, "Permission denied", source)


@pytest.mark.parametrize("suffix", ["-delete", "-stray"])
def test_a_failed_rename_aside_is_a_storage_error_naming_the_partition(
    tmp_path: Path, suffix: str
) -> None:
    """The node stops on a KafkaStorageError; a bare OSError would be logged and swallowed by
    the metadata listener, leaving the partition neither served nor deleted (or set aside)."""
    d0 = tmp_path / "d0"
    lm = manager([d0], fs=FailingRename())
    append_batches(lm.get_or_create_log("orders", 0), 1)
    rename_aside = lm.delete_log if suffix == "-delete" else lm.set_aside_stray_log
    with pytest.raises(KafkaStorageError, match=rf"orders-0: renaming .*orders-0 to .*{suffix}"):
        rename_aside("orders", 0)
    assert (d0 / "orders-0").is_dir() and deleted_dirs(d0) == stray_dirs(d0) == []


@pytest.mark.parametrize(
    "failure",
    [
        OSError(28, "No space left on device"),
        KafkaStorageError("orders-0: flush failed: [Errno 28] No space left on device"),
    ],
    ids=["os-error", "storage-error"],
)
def test_a_background_task_failing_on_the_disk_ends_the_tasks_and_is_reported_once(
    tmp_path: Path, failure: Exception
) -> None:
    # A rolled segment's index flush failing with ENOSPC is reported once, not logged with a
    # traceback every 100 ms while the broker serves on.
    lm = LogManager(str(tmp_path / "d0"), LogManagerConfig(log=LOG_CONFIG), clock=ManualClock(T0))
    passes = 0

    def failing() -> int:
        nonlocal passes
        passes += 1
        raise failure

    lm.flush_rolled_segments = failing  # type: ignore[method-assign]
    reported: list[KafkaStorageError] = []
    lm.start(poll_interval_ms=5, on_storage_error=reported.append)
    try:
        thread = lm._thread
        assert thread is not None
        thread.join(10)
        assert not thread.is_alive(), "the background tasks went on after the disk failed"
        assert passes == 1 and len(reported) == 1
        assert isinstance(reported[0], KafkaStorageError)
        assert "No space left on device" in str(reported[0])
    finally:
        lm.shutdown()


def test_a_background_task_failing_otherwise_is_logged_and_the_tasks_go_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    lm = LogManager(str(tmp_path / "d0"), LogManagerConfig(log=LOG_CONFIG), clock=ManualClock(T0))
    passes = threading.Semaphore(0)

    def buggy() -> int:
        passes.release()
        raise ValueError("a bug in one task")

    lm.flush_rolled_segments = buggy  # type: ignore[method-assign]
    reported: list[KafkaStorageError] = []
    with caplog.at_level(logging.ERROR, logger="replog.storage"):
        lm.start(poll_interval_ms=5, on_storage_error=reported.append)
        try:
            for _ in range(3):
                assert passes.acquire(timeout=10), "the tasks stopped after a bug in one"
        finally:
            lm.shutdown()
    assert reported == []
    assert "log manager background task failed" in caplog.text


class SyncRecordingFileSystem(OsFileSystem):
    """Counts fsyncs of files and directories by path, file replacements, and file-system
    syncs."""

    def __init__(self) -> None:
        self.fsynced: list[str] = []
        self.replaced: list[str] = []
        self.file_system_syncs = 0

    def atomic_write(self, path: str, data: bytes) -> None:
        self.replaced.append(path)
        if self._deferred.unsynced is None:
            self.fsynced.append(path)
        super().atomic_write(path, data)

    def fsync_file(self, path: str) -> None:
        self.fsynced.append(path)
        super().fsync_file(path)

    def sync_file_systems(self, directories: object) -> None:
        self.file_system_syncs += 1
        super().sync_file_systems(directories)  # type: ignore[arg-type]


def idle_leaders(directory: Path, partitions: int) -> None:
    """Logs whose leader took epoch 3 at their (empty) end, closed cleanly."""
    first = manager([directory])
    for partition in range(partitions):
        created = first.get_or_create_log("t", partition)
        created.leader_epoch_cache.assign(3, created.log_end_offset)
    first.shutdown()


def test_a_clean_load_keeps_idle_leaders_epochs_and_rewrites_none(tmp_path: Path) -> None:
    """An entry at the log end is the state the log closed in (docs/storage.md, "Leader epochs
    at a clean open"): a clean load keeps it and replaces no epoch file."""
    idle_leaders(tmp_path, 6)
    fs = SyncRecordingFileSystem()
    second = manager([tmp_path], fs=fs)
    try:
        epochs = [second.get_log("t", p).leader_epoch_cache.entries() for p in range(6)]
        assert epochs == [(EpochEntry(3, 0),)] * 6
        assert [p for p in fs.replaced if "leader-epoch" in p] == []
    finally:
        second.shutdown()


def test_loading_syncs_what_it_rewrites_once_for_the_whole_dir(tmp_path: Path) -> None:
    """After a crash a leader's epoch entry at an empty log's end is cut when the log loads
    (Kafka's truncate-from-end), which rewrites the file: one file-system sync for every log of
    the dir, not two fsyncs per log (a restart of 10,000 logs spent most of a minute on them)."""
    idle_leaders(tmp_path, 6)
    (tmp_path / CLEAN_SHUTDOWN_MARKER).unlink()  # a crash of the idle broker
    fs = SyncRecordingFileSystem()
    second = manager([tmp_path], fs=fs)
    try:
        epochs = [second.get_log("t", p).leader_epoch_cache.entries() for p in range(6)]
        assert epochs == [()] * 6  # cut back to the (empty) logs' ends
        assert [p for p in fs.fsynced if "leader-epoch" in p] == []
        assert fs.file_system_syncs == 1
    finally:
        second.shutdown()


def test_a_new_idle_log_closes_without_creating_index_files(tmp_path: Path) -> None:
    """Closing a new log that never took a record writes no empty `.index`/`.timeindex` (two
    file creations per idle replica at every broker stop); it loads as before and indexes its
    first records."""
    first = manager([tmp_path])
    first.get_or_create_log("t", 0)
    first.shutdown()
    names = sorted(os.listdir(tmp_path / "t-0"))
    assert not [n for n in names if n.endswith((".index", ".timeindex"))], names
    second = manager([tmp_path])
    try:
        reopened = second.get_log("t", 0)
        reopened.append_as_leader(make_batch(3), leader_epoch=0)
        reopened.flush()
    finally:
        second.shutdown()
    names = sorted(os.listdir(tmp_path / "t-0"))
    assert "00000000000000000000.index" in names and "00000000000000000000.timeindex" in names


class HeldHighWatermarkWrite(OsFileSystem):
    """Holds the first high-watermark checkpoint write until `go` is set, saying when it
    started (`writing`)."""

    def __init__(self) -> None:
        self.writing = threading.Event()
        self.go = threading.Event()
        self.held = False

    def atomic_write(self, path: str, data: bytes) -> None:
        if os.path.basename(path) == REPLICATION_OFFSET_CHECKPOINT and not self.held:
            self.held = True
            self.writing.set()
            assert self.go.wait(10), "the test never let the write go"
        super().atomic_write(path, data)


def test_a_periodic_high_watermark_write_holds_no_log_creation_back(tmp_path: Path) -> None:
    # Rendering and writing the file (megabytes at 100,000 logs) is outside the manager's lock:
    # a log is created while the write waits.
    fs = HeldHighWatermarkWrite()
    lm = LogManager(str(tmp_path / "d0"), LogManagerConfig(log=LOG_CONFIG), fs=fs)
    lm.get_or_create_log("orders", 0).high_watermark = 0
    writer = threading.Thread(target=lm.checkpoint_high_watermarks)
    writer.start()
    assert fs.writing.wait(10)
    creating = threading.Thread(target=lm.get_or_create_log, args=("orders", 1))
    creating.start()
    creating.join(5)  # under the manager's lock, it would wait for `go`
    created = not creating.is_alive()
    fs.go.set()
    writer.join()
    creating.join()
    assert created
    lm.shutdown()  # writes every entry (a periodic write leaves new ones at 0 waiting)
    hw_file = tmp_path / "d0" / REPLICATION_OFFSET_CHECKPOINT
    assert hw_file.read_text() == "0\n2\norders 0 0\norders 1 0\n"


def test_a_stale_rewrite_lands_after_a_periodic_write_of_offsets_read_before_a_deletion(
    tmp_path: Path,
) -> None:
    # The periodic write read `orders-0` before it was deleted; the deletion's stale rewrite
    # (at the next creation in that dir) waits for that write and then drops the entry, so a
    # new `orders-0` never inherits the deleted one's high watermark.
    fs = HeldHighWatermarkWrite()
    lm = LogManager(str(tmp_path / "d0"), LogManagerConfig(log=LOG_CONFIG), fs=fs)
    old = lm.get_or_create_log("orders", 0)
    append_batches(old, 3)
    old.high_watermark = 3
    writer = threading.Thread(target=lm.checkpoint_high_watermarks)
    writer.start()
    assert fs.writing.wait(10)
    lm.delete_log("orders", 0)
    creating = threading.Thread(target=lm.get_or_create_log, args=("other", 0))
    creating.start()  # rewrites the stale checkpoints first: waits for the write under way
    creating.join(0.2)
    assert creating.is_alive()
    fs.go.set()
    writer.join()
    creating.join()
    hw_file = tmp_path / "d0" / REPLICATION_OFFSET_CHECKPOINT
    assert hw_file.read_text() == "0\n0\n"  # rewritten before `other-0` was made
    lm.shutdown()
    assert hw_file.read_text() == "0\n1\nother 0 0\n"


def test_a_new_logs_files_made_apart_are_built_into_the_log_get_or_create_would_make(
    tmp_path: Path,
) -> None:
    """`make_new_log` (a worker thread: files only) then `add_new_log` (the event loop: objects
    only): the logs spread over the log dirs as `get_or_create_log`'s, counting the ones made
    and not added yet, and the log is the one `get_or_create_log` returns from then on."""
    dirs = [tmp_path / "d0", tmp_path / "d1", tmp_path / "d2"]
    lm = manager(dirs)
    made = [lm.make_new_log("orders", p, LOG_CONFIG) for p in range(3)]
    assert sorted(Path(m.log_dir).name for m in made if m is not None) == ["d0", "d1", "d2"]
    assert lm.all_logs() == {}
    plogs = [lm.add_new_log(m) for m in made if m is not None]
    assert [lm.get_or_create_log("orders", p) for p in range(3)] == plogs
    assert lm.make_new_log("orders", 0, LOG_CONFIG) is None  # open already
    plog = plogs[0]
    assert plog.log_end_offset == 0 and plog.topic_id() is None
    assert not plog.active_segment.log_file.holds_descriptor()
    append_batches(plog, 3)
    assert plog.log_end_offset == 3
    lm.shutdown()
    again = manager(dirs)
    assert again.get_log("orders", 0).log_end_offset == 3


def _append_and_read(lm: LogManager, plog: Log) -> None:
    append_batches(plog, 30)  # past `index_interval_bytes`: index entries made
    assert len(read_all(plog)) == 30
    assert plog.offsets_for_times(T0) is not None


def _roll(lm: LogManager, plog: Log) -> None:
    plog.roll()
    append_batches(plog, 3)


def _truncate(lm: LogManager, plog: Log) -> None:
    plog.truncate_to(0)
    plog.truncate_fully_and_start_at(5)
    append_batches(plog, 3)


def _flush(lm: LogManager, plog: Log) -> None:
    append_batches(plog, 3)
    plog.flush()


def _delete(lm: LogManager, plog: Log) -> None:
    lm.delete_log("orders", 0)


@pytest.mark.parametrize(
    "use",
    [None, _append_and_read, _roll, _truncate, _flush, _delete],
    ids=lambda use: getattr(use, "__name__", "nothing"),
)
def test_a_new_logs_indexes_made_on_first_use_serve_every_path(
    tmp_path: Path, use: Callable[[LogManager, Log], None] | None
) -> None:
    """`add_new_log`'s segment makes its (empty) indexes only when first used: whatever uses
    them first (or nothing, up to the close) finds them, and the log reopens as it was left."""
    dirs = [tmp_path / "d0"]
    lm = manager(dirs)
    made = lm.make_new_log("orders", 0, LOG_CONFIG)
    assert made is not None
    plog = lm.add_new_log(made)
    segment = plog.active_segment
    assert "offset_index" not in vars(segment) and "time_index" not in vars(segment)
    assert getattr(segment, "no_such_attribute", None) is None
    if use is not None:
        use(lm, plog)
    end = None if use is _delete else plog.log_end_offset
    batches = None if use is _delete else read_all(plog)
    lm.shutdown()
    again = manager(dirs)
    if end is None:
        assert again.all_logs() == {}
    else:
        reopened = again.get_log("orders", 0)
        assert reopened.log_end_offset == end and read_all(reopened) == batches
    again.shutdown()


@pytest.mark.parametrize(
    ("directory", "expected"),
    [
        ("/data/orders-3", ("orders", 3)),
        ("/data/orders-3/", ("orders", 3)),
        ("/data/orders-3/.", ("orders", 3)),
        ("/data/orders-3/x/..", ("orders", 3)),
        ("orders-eu-12", ("orders-eu", 12)),
        ("/data/orders-3.abc-delete", None),
        ("/", None),
    ],
)
def test_a_directory_names_its_topic_partition_by_its_last_component(
    directory: str, expected: tuple[str, int] | None
) -> None:
    """The name's last component once normalised: a plain path's taken as it is."""
    assert parse_topic_partition(directory) == expected
