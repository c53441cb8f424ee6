"""Asynchronous roll flush (log and log_manager docstrings; docs/design/storage.md#log-recovery,
#crash-scenarios, S8 item 4):
under a LogManager a roll does not fsync on the appending thread; `flush_rolled_segments` syncs
the old segments without the log's lock and only then moves the recovery point. A crash before
it rescans the old segment; a truncation or retention meanwhile leaves a consistent log."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from storage_helpers import (
    T0,
    append_batches,
    open_log,
    read_all,
    record_recoveries,
    small_config,
)

from replog.errors import KafkaStorageError
from replog.storage import LogManager, LogManagerConfig
from replog.storage.fs import OsFileSystem, OsSegmentFile
from replog.storage.log import Log
from replog.testing import ManualClock

CONFIG = small_config(segment_bytes=1024, retention_ms=-1)


class GatedSegmentFile(OsSegmentFile):
    def __init__(self, path: str, *, create: bool, fs: GatedFileSystem) -> None:
        super().__init__(path, create=create)
        self.fs = fs

    def fsync(self) -> None:
        self.fs.synced(self.path)
        super().fsync()

    def fdatasync(self) -> None:
        self.fs.synced(self.path)
        super().fdatasync()


class GatedFileSystem(OsFileSystem):
    """Records every fsync (path, thread); when `gate` is set up, the first .log fsync
    signals `entered` and waits (at most 5 s) for the gate to open; `fail` makes .log fsyncs
    raise."""

    def __init__(self) -> None:
        self.syncs: list[tuple[str, str]] = []
        self.gate: threading.Event | None = None
        self.entered = threading.Event()
        self.fail = False

    def synced(self, path: str) -> None:
        self.syncs.append((path, threading.current_thread().name))
        if path.endswith(".log"):
            if self.fail:
                raise OSError(5, "injected fsync failure", path)
            gate, self.gate = self.gate, None
            if gate is not None:
                self.entered.set()
                gate.wait(5)

    def open_segment_file(self, path: str, *, create: bool = True) -> OsSegmentFile:
        return GatedSegmentFile(path, create=create, fs=self)

    def fsync_dir(self, path: str) -> None:
        self.synced(path + "/")
        super().fsync_dir(path)

    def synced_names(self) -> set[str]:
        return {Path(path).name for path, _ in self.syncs}


def async_log(directory: Path, fs: OsFileSystem) -> Log:
    log = open_log(directory, CONFIG, fs=fs, clock=ManualClock(T0))
    log.enable_async_roll_flush()
    return log


def rolled(directory: Path, fs: GatedFileSystem) -> tuple[Log, list[bytes], int]:
    """An async log with 5 batches in segment 0, then rolled at 5."""
    log = async_log(directory, fs)
    batches = append_batches(log, 5)
    fs.syncs.clear()
    new_base = log.roll().base_offset
    assert new_base == 5
    return log, batches, new_base


def flush_in_thread(log: Log) -> tuple[threading.Thread, list[object]]:
    result: list[object] = []

    def run() -> None:
        try:
            result.append(log.flush_rolled_segments())
        except Exception as exc:  # reported to the test
            result.append(exc)

    thread = threading.Thread(target=run, name="flusher")
    thread.start()
    return thread, result


def test_a_roll_does_not_fsync_and_the_flush_moves_the_recovery_point(tmp_path: Path) -> None:
    fs = GatedFileSystem()
    log, _, new_base = rolled(tmp_path / "t-0", fs)
    assert fs.syncs == []  # nothing synced on the appending thread
    assert log.recovery_point == 0
    assert log.has_pending_roll_flush
    append_batches(log, 2)
    assert fs.syncs == []

    assert log.flush_rolled_segments() is True
    assert log.recovery_point == new_base
    assert not log.has_pending_roll_flush
    base0 = f"{0:020d}"
    assert {f"{base0}.log", f"{base0}.index", f"{base0}.timeindex", "t-0"} <= {
        name.rstrip("/") for name in fs.synced_names()
    }
    assert not any(name.startswith(f"{new_base:020d}") for name in fs.synced_names())
    assert log.flush_rolled_segments() is False  # nothing left


def test_a_standalone_log_still_syncs_on_roll(tmp_path: Path) -> None:
    fs = GatedFileSystem()
    log = open_log(tmp_path / "t-0", CONFIG, fs=fs, clock=ManualClock(T0))
    append_batches(log, 5)
    log.roll()
    assert log.recovery_point == 5
    assert any(path.endswith(".log") for path, _ in fs.syncs)
    assert not log.has_pending_roll_flush


def test_a_crash_before_the_flush_rescans_both_segments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "t-0"
    fs = GatedFileSystem()
    log, batches, new_base = rolled(directory, fs)
    batches += append_batches(log, 3)
    recovery_point = log.recovery_point
    assert recovery_point == 0
    log.close_without_flush()

    recoveries = record_recoveries(monkeypatch)
    again = open_log(
        directory,
        CONFIG,
        clock=ManualClock(T0),
        recovery_point=recovery_point,
        log_start_offset=0,
        high_watermark=0,
        had_clean_shutdown=False,
    )
    assert [base for _, base in recoveries] == [0, new_base]
    assert read_all(again) == batches
    assert again.log_end_offset == 8


def test_a_truncation_before_the_flush_leaves_a_consistent_recovery_point(
    tmp_path: Path,
) -> None:
    fs = GatedFileSystem()
    log, _, _ = rolled(tmp_path / "t-0", fs)
    append_batches(log, 2)
    log.truncate_to(3)  # removes the new segment and cuts the old one
    assert log.log_end_offset == 3
    log.flush_rolled_segments()
    assert log.recovery_point <= log.log_end_offset
    assert not log.has_pending_roll_flush
    append_batches(log, 2)
    log.flush()
    assert log.recovery_point == log.log_end_offset == 5


def test_a_truncation_during_the_fsync_does_not_move_the_recovery_point(tmp_path: Path) -> None:
    fs = GatedFileSystem()
    log, _, _ = rolled(tmp_path / "t-0", fs)
    append_batches(log, 2)
    gate = fs.gate = threading.Event()
    thread, result = flush_in_thread(log)
    assert fs.entered.wait(5)
    log.truncate_to(2)
    gate.set()
    thread.join(5)
    assert result == [False]
    assert log.recovery_point <= log.log_end_offset == 2
    assert not log.has_pending_roll_flush


def test_retention_deleting_the_segment_being_synced_is_not_an_error(tmp_path: Path) -> None:
    fs = GatedFileSystem()
    log, batches, new_base = rolled(tmp_path / "t-0", fs)
    batches += append_batches(log, 2)
    log.update_high_watermark(log.log_end_offset)
    gate = fs.gate = threading.Event()
    thread, result = flush_in_thread(log)
    assert fs.entered.wait(5)
    log.increment_log_start_offset(new_base)
    assert log.delete_old_segments() == 1  # the segment the flusher is syncing
    gate.set()
    thread.join(5)
    assert result == [False]  # its file was closed under the fsync: gone, not a failure
    assert log.log_start_offset <= log.recovery_point <= log.log_end_offset
    assert read_all(log) == batches[new_base:]
    log.flush()
    assert log.recovery_point == log.log_end_offset


def test_an_fsync_failure_of_a_live_segment_is_a_storage_error(tmp_path: Path) -> None:
    fs = GatedFileSystem()
    log, _, _ = rolled(tmp_path / "t-0", fs)
    fs.fail = True
    with pytest.raises(KafkaStorageError):
        log.flush_rolled_segments()
    assert log.recovery_point == 0
    fs.fail = False
    assert log.flush_rolled_segments() is True
    assert log.recovery_point == 5


def test_appends_go_on_during_a_slow_fsync(tmp_path: Path) -> None:
    fs = GatedFileSystem()
    log, batches, new_base = rolled(tmp_path / "t-0", fs)
    gate = fs.gate = threading.Event()
    thread, result = flush_in_thread(log)
    try:
        assert fs.entered.wait(5)
        started = time.monotonic()
        batches += append_batches(log, 3)  # the main thread: must not wait for the fsync
        assert read_all(log) == batches
        assert time.monotonic() - started < 2  # the gate would hold a locked append 5 s
        assert log.recovery_point == 0  # not before the fsync returned
    finally:
        gate.set()
        thread.join(5)
    assert result == [True]
    assert log.recovery_point == new_base
    assert log.log_end_offset == 8


def test_the_log_manager_thread_syncs_rolled_segments_promptly(tmp_path: Path) -> None:
    fs = GatedFileSystem()
    lm = LogManager(str(tmp_path / "d0"), LogManagerConfig(log=CONFIG), fs=fs)
    try:
        lm.start(poll_interval_ms=60_000)  # only a roll's wake-up can make it prompt
        lg = lm.get_or_create_log("orders", 0)
        append_batches(lg, 5)
        fs.syncs.clear()
        lg.roll()
        assert not any(thread == "MainThread" for _, thread in fs.syncs)
        deadline = time.monotonic() + 5
        while lg.recovery_point < 5 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert lg.recovery_point == 5
        assert any(
            path.endswith(".log") and thread == "replog-log-manager" for path, thread in fs.syncs
        )
    finally:
        lm.shutdown()


def test_run_due_tasks_and_shutdown_sync_what_rolls_left(tmp_path: Path) -> None:
    lm = LogManager(str(tmp_path / "d0"), LogManagerConfig(log=CONFIG))
    lg = lm.get_or_create_log("orders", 0)
    append_batches(lg, 5)
    lg.roll()
    assert lg.recovery_point == 0
    lm.run_due_tasks(0)  # nothing else is due yet
    assert lg.recovery_point == 5
    append_batches(lg, 5)
    lg.roll()
    assert lg.has_pending_roll_flush
    lm.shutdown()
    again = LogManager(str(tmp_path / "d0"), LogManagerConfig(log=CONFIG))
    assert again.get_log("orders", 0).recovery_point == 10
    again.shutdown()


def test_a_flush_pass_visits_the_logs_that_rolled_and_retries_a_raced_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A broker's idle logs cost a pass nothing (it used to scan them all every 100 ms); a log
    whose flush a truncation raced is visited again at the next pass."""
    lm = LogManager(str(tmp_path / "d0"), LogManagerConfig(log=CONFIG))
    for i in range(20):
        lm.get_or_create_log("idle", i)
    busy, raced = lm.get_or_create_log("busy", 0), lm.get_or_create_log("raced", 0)
    for lg in (busy, raced):
        append_batches(lg, 5)
        lg.roll()
    visited: list[str] = []
    pending = Log.has_pending_roll_flush.fget
    assert pending is not None
    monkeypatch.setattr(
        Log, "has_pending_roll_flush", property(lambda lg: visited.append(lg.name) or pending(lg))
    )
    flush = Log.flush_rolled_segments
    monkeypatch.setattr(
        Log, "flush_rolled_segments", lambda lg: False if lg is raced else flush(lg)
    )
    assert lm.flush_rolled_segments() == 1
    assert set(visited) == {"busy-0", "raced-0"}
    assert busy.recovery_point == 5 and raced.recovery_point == 0
    visited.clear()
    monkeypatch.setattr(Log, "flush_rolled_segments", flush)
    assert lm.flush_rolled_segments() == 1
    assert set(visited) == {"raced-0"} and raced.recovery_point == 5
    visited.clear()
    assert lm.flush_rolled_segments() == 0 and visited == []
    lm.shutdown()
