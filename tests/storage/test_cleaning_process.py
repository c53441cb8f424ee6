"""Cleaning passes in a child process (replog/storage/cleaner/cleaning_process.py): the bytes a
pass in a thread writes, a stop ending the child's pass between two batches with nothing
swapped, a child that dies
(a typed error naming the log; the broker's cleaner abandons the pass, keeps the log cleanable
and starts another child), a failure in the child, the shutdown closing the children, and the
pass's priority: idle, unless its log is past max.compaction.lag.ms, which is then cleaned on
a saturated core; an idle pass promoted in place where the kernel allows, and on a saturated
core a log cleaned once its idle wait is out, whether its child is promoted or restarted."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from storage_helpers import T0, assert_indexes_as_rebuilt, counting_swaps, open_log

from replog.clock import monotonic_s, wall_clock_ms
from replog.errors import CleaningProcessError, CleaningProcessGoneError
from replog.record import RecordBatch, build_batch
from replog.storage import Log, LogConfig
from replog.storage.cleaner.cleanable import LogToClean, log_to_clean
from replog.storage.cleaner.cleaner_config import CleanerConfig
from replog.storage.cleaner.cleaning_process import (
    CLEANER_NICE,
    REPORT_BYTES,
    CleaningProcess,
    clean_logs_in_processes,
)
from replog.storage.cleaner.log_cleaner import PassReport
from replog.storage.cleaner.log_cleaning import LogPass, clean_log, prepare_pass
from replog.storage.cleaner.log_summary import summarize_with_config
from replog.storage.cleaner.offset_map import OffsetMap
from replog.storage.cleaner.pass_priority import IDLE, URGENT, pass_priority, promotion_bytes
from replog.storage.log_manager import LogManager, LogManagerConfig
from replog.testing import ManualClock

HOUR = 3_600_000
CONFIG = LogConfig(
    segment_bytes=64 * 1024,
    index_interval_bytes=4096,
    cleanup_policy="compact",
    min_cleanable_dirty_ratio=0.1,
    delete_retention_ms=HOUR,
)
MAP_BYTES = 24 * 20_000


@pytest.fixture
def child() -> Iterator[CleaningProcess]:
    # At the cleaner's nice value: an idle child would wait for a free core on a busy machine.
    process = CleaningProcess.start(URGENT)
    yield process
    process.close()


def fill(log: Log, batches: int, keys: int = 500) -> None:
    """`batches` batches of 20 records of 100-byte values over `keys` keys, every seventh
    record a tombstone."""
    for b in range(batches):
        records = []
        for r in range(20):
            i = b * 20 + r
            value = None if i % 7 == 6 else f"{i:0100d}".encode()
            records.append((T0 + i, f"k{i % keys}".encode(), value, ()))
        log.append_as_leader(build_batch(records), 0)
    log.high_watermark = log.log_end_offset


def planned(log: Log) -> LogPass:
    return prepare_pass(
        log,
        first_dirty=0,
        first_uncleanable=min(log.active_segment.base_offset, log.high_watermark),
        now_ms=T0,
        delete_retention_ms=HOUR,
    )


def segment_files(log: Log) -> list[tuple[int, bytes, bytes, bytes]]:
    """Each sealed segment's `.log`, `.index` and `.timeindex` bytes."""
    files = []
    for s in log.segments()[:-1]:
        paths = (s.log_path, s.offset_index.path, s.time_index.path)
        log_bytes, index_bytes, time_index_bytes = (Path(path).read_bytes() for path in paths)
        files.append((s.base_offset, log_bytes, index_bytes, time_index_bytes))
    return files


def latest(log: Log) -> dict[bytes | None, tuple[int, bytes | None]]:
    out = {}
    for _, batch in log.read_batches(log.log_start_offset):
        for record in RecordBatch.parse(batch, sparse=True).records():
            out[record.key] = (record.offset, record.value)
    return out


def manager_in_processes(
    tmp_path: Path, config: LogConfig, cleaner: CleanerConfig | None = None, *, wall: bool = False
) -> tuple[LogManager, Log]:
    """A log manager whose cleaner runs its passes in children (on the wall clock, or a
    manual one at T0), and its log `t-0`."""
    clean_logs_in_processes()
    try:
        manager_config = LogManagerConfig(
            log=config, cleaner=cleaner or CleanerConfig(dedupe_buffer_size=MAP_BYTES)
        )
        clock = wall_clock_ms if wall else ManualClock(T0)
        lm = LogManager(str(tmp_path / "d0"), manager_config, clock=clock)
    finally:
        clean_logs_in_processes(False)
    return lm, lm.get_or_create_log("t", 0, config)


def never() -> bool:
    return False


def ignore(size: int) -> None:
    pass


def test_a_pass_in_the_child_writes_the_bytes_a_pass_in_a_thread_writes(
    tmp_path: Path, child: CleaningProcess
) -> None:
    in_thread, in_child = open_log(tmp_path / "a-0", CONFIG), open_log(tmp_path / "b-0", CONFIG)
    for log in (in_thread, in_child):
        fill(log, 300)
    before = latest(in_child)
    expected = clean_log(
        in_thread,
        OffsetMap(MAP_BYTES),
        first_dirty=0,
        first_uncleanable=min(in_thread.active_segment.base_offset, in_thread.high_watermark),
        now_ms=T0,
        delete_retention_ms=HOUR,
    )
    result = child.run(planned(in_child), MAP_BYTES, should_stop=never, on_read=ignore)
    assert result == expected and result.groups_swapped > 0 and not result.abandoned
    # The same segments, indexes included: written by the pass, as a rebuild would make them.
    assert segment_files(in_child) == segment_files(in_thread)
    assert latest(in_child) == before  # every key's latest record, at its offset
    assert_indexes_as_rebuilt(in_child)
    assert in_child.size_in_bytes < 0.5 * 300 * 20 * 100


def test_a_stop_ends_the_childs_pass_between_two_batches_and_nothing_is_swapped(
    tmp_path: Path, child: CleaningProcess
) -> None:
    """The stop comes while the child works (not as the answer to a report): the interrupt
    wakes the parent once it answered the first report, and the child sees the stop at its
    next look at its stdin, before its next report."""
    log = open_log(tmp_path / "t-0", CONFIG)
    fill(log, 600)  # about 5 reports' worth of sealed segments
    files = segment_files(log)
    reported: list[int] = []
    asked_since_report: list[int] = []

    def on_read(size: int) -> None:
        reported.append(size)
        child.interrupt()

    def stop_once_the_report_is_answered() -> bool:
        if reported:
            asked_since_report.append(1)
        return len(asked_since_report) >= 2  # the first is asked before the answer

    result = child.run(
        planned(log), MAP_BYTES, should_stop=stop_once_the_report_is_answered, on_read=on_read
    )
    assert result.abandoned and result.groups_swapped == 0 and result.corrupt is None
    # The first report, then perhaps the bytes read before the child saw the stop (`done`),
    # as the two processes' timing goes.
    assert reported[0] >= REPORT_BYTES and all(size < REPORT_BYTES for size in reported[1:])
    assert len(reported) <= 2
    assert segment_files(log) == files
    assert not [name for name in os.listdir(log.directory) if name.endswith(".cleaned")]
    before = latest(log)
    result = child.run(planned(log), MAP_BYTES, should_stop=never, on_read=ignore)  # it serves on
    assert not result.abandoned and result.groups_swapped > 0
    assert latest(log) == before


def test_an_idle_childs_pass_that_must_stop_ends_at_once_its_child_killed(
    tmp_path: Path,
) -> None:
    """Whoever stops the pass (a truncation, on the event loop) does not wait for an idle
    child to get a core: it is killed, the pass abandoned with nothing swapped, and the next
    pass, in another child, cleans the log."""
    log = open_log(tmp_path / "t-0", CONFIG)
    fill(log, 600)
    files = segment_files(log)
    idle = CleaningProcess.start(IDLE)
    try:
        result = idle.run(planned(log), MAP_BYTES, should_stop=lambda: True, on_read=ignore)
        assert result.abandoned and result.groups_swapped == 0 and result.end_offset == 0
        assert idle.gone and idle._process.wait(30) == -signal.SIGKILL
    finally:
        idle.close()
    assert segment_files(log) == files
    before = latest(log)
    again = CleaningProcess.start(URGENT)
    try:
        result = again.run(planned(log), MAP_BYTES, should_stop=never, on_read=ignore)
    finally:
        again.close()
    assert not result.abandoned and result.groups_swapped > 0
    assert latest(log) == before
    assert not [name for name in os.listdir(log.directory) if name.endswith(".cleaned")]


def test_an_unthrottled_pass_turns_to_the_parent_for_its_one_swap_only(
    tmp_path: Path, child: CleaningProcess
) -> None:
    """Unthrottled, the child reports no reads and swaps every group at once: the parent
    hears from it for that swap and the pass's end, those messages carrying the bytes read;
    the same pass throttled reports every `REPORT_BYTES`."""
    turns = {}
    for throttled in (False, True):
        log = open_log(tmp_path / f"{throttled}-0", CONFIG)
        fill(log, 300)
        before = latest(log)
        swaps = counting_swaps(log)
        reported: list[int] = []
        result = child.run(
            planned(log),
            MAP_BYTES,
            should_stop=never,
            on_read=reported.append,
            throttled=lambda: throttled,  # noqa: B023 (called within the iteration)
        )
        assert not result.abandoned and result.groups_swapped > 1
        assert swaps == [result.groups_swapped]
        assert latest(log) == before
        assert sum(reported) >= result.stats.bytes_read
        assert not [n for n in os.listdir(log.directory) if n.endswith(".deleted")]
        turns[throttled] = len(reported)
    assert turns[False] <= 2 < turns[True]


def test_a_throttle_set_during_a_pass_makes_the_child_report_from_then_on(
    tmp_path: Path, child: CleaningProcess
) -> None:
    log = open_log(tmp_path / "t-0", CONFIG)
    fill(log, 1200)
    before = latest(log)
    asked: list[int] = []
    reported: list[int] = []
    ended = threading.Event()

    def throttled() -> bool:
        asked.append(1)
        return len(asked) > 1  # unthrottled as the pass starts, throttled from its next look

    def wake() -> None:
        while not ended.wait(0.01):
            child.interrupt()

    waker = threading.Thread(target=wake)
    waker.start()
    try:
        result = child.run(
            planned(log), MAP_BYTES, should_stop=never, on_read=reported.append, throttled=throttled
        )
    finally:
        ended.set()
        waker.join()
    assert not result.abandoned and latest(log) == before
    assert len(reported) > 2 and reported[0] >= REPORT_BYTES


def test_a_child_that_dies_mid_pass_is_a_typed_error_naming_the_log(
    tmp_path: Path, child: CleaningProcess
) -> None:
    log = open_log(tmp_path / "t-0", CONFIG)
    fill(log, 600)
    files = segment_files(log)

    def kill(size: int) -> None:
        os.kill(child.pid, signal.SIGKILL)

    with pytest.raises(CleaningProcessGoneError, match=r"t-0: .* is gone \(killed by signal 9\)"):
        child.run(planned(log), MAP_BYTES, should_stop=never, on_read=kill)
    assert child.gone
    with pytest.raises(CleaningProcessGoneError):
        child.run(planned(log), MAP_BYTES, should_stop=never, on_read=ignore)
    assert segment_files(log) == files


def test_a_failure_in_the_child_is_a_typed_error_and_the_child_serves_on(
    tmp_path: Path, child: CleaningProcess
) -> None:
    log = open_log(tmp_path / "t-0", CONFIG)
    fill(log, 100)
    prepared = planned(log)
    nowhere = dataclasses.replace(
        prepared, plan=dataclasses.replace(prepared.plan, directory=str(tmp_path / "missing"))
    )
    with pytest.raises(CleaningProcessError, match=r"t-0: .* failed the pass: FileNotFoundError"):
        child.run(nowhere, MAP_BYTES, should_stop=never, on_read=ignore)
    assert not child.gone
    result = child.run(planned(log), MAP_BYTES, should_stop=never, on_read=ignore)
    assert result.groups_swapped > 0


def test_the_cleaner_abandons_a_pass_whose_child_died_and_cleans_with_another(
    tmp_path: Path,
) -> None:
    # A throttle that never sleeps: the child reports its reads, the first one kills it.
    throttle = CleanerConfig(dedupe_buffer_size=MAP_BYTES, io_max_bytes_per_second=1e12)
    lm, log = manager_in_processes(tmp_path, CONFIG, throttle)
    fill(log, 600)
    cleaner = lm.cleaner
    throttled = cleaner._throttled
    killed: list[int] = []

    def kill_the_child(tp: tuple[str, int], size: int, *, hand_over: bool) -> None:
        process = cleaner._processes.get(0)
        assert process is not None
        killed.append(process.pid)
        os.kill(process.pid, signal.SIGKILL)

    cleaner._throttled = kill_the_child  # type: ignore[method-assign]
    report = cleaner.clean_once(now_ms=T0)
    assert report is not None and report.result.abandoned and killed
    assert not cleaner.is_uncleanable(lm.log_dirs[0], ("t", 0))
    assert cleaner.checkpoint_offset(lm.log_dirs[0], ("t", 0)) is None
    cleaner._throttled = throttled  # type: ignore[method-assign]
    before = latest(log)
    report = cleaner.clean_once(now_ms=T0)
    assert report is not None and not report.result.abandoned
    process = cleaner._processes.get(0)
    assert process is not None and process.pid != killed[0]
    assert cleaner.checkpoint_offset(lm.log_dirs[0], ("t", 0)) == report.result.end_offset
    assert latest(log) == before
    lm.shutdown()
    # The shutdown closed it: gone, by its exit at EOF (`test_a_child_exits_at_eof`) or, on a
    # machine too busy to give it a core within the close's wait, killed after it.
    assert process._process.poll() in (0, -signal.SIGKILL)


def test_a_child_exits_at_eof() -> None:
    process = CleaningProcess.start(URGENT)
    try:
        assert process._process.stdin is not None
        process._process.stdin.close()
        assert process._process.wait() == 0  # no deadline: a busy machine only delays it
    finally:
        process.close()


@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="Linux's SCHED_IDLE")
@pytest.mark.parametrize(
    ("priority", "policy", "nice"), [(IDLE, "SCHED_IDLE", None), (URGENT, "SCHED_OTHER", 10)]
)
def test_a_child_runs_at_its_priority(priority: str, policy: str, nice: int | None) -> None:
    process = CleaningProcess.start(priority)
    try:
        # The child sets it once its imports are done.
        deadline = monotonic_s() + 30
        while (
            os.sched_getscheduler(process.pid),
            nice is None or os.getpriority(os.PRIO_PROCESS, process.pid),
        ) != (getattr(os, policy), nice is None or nice):
            assert monotonic_s() < deadline, f"the child never ran at {policy}, nice {nice}"
            time.sleep(0.01)
        assert nice in (None, CLEANER_NICE)
    finally:
        process.close()
    # It exits at EOF (`test_a_child_exits_at_eof`); a child below the loop's priority on a busy
    # machine, idle or at nice 10, may not get a core to read it within the close's wait, and
    # is then killed: gone either way.
    assert process._process.poll() in (0, -signal.SIGKILL)


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="Linux's CPU affinity")
def test_a_log_past_its_max_compaction_lag_is_cleaned_on_a_saturated_core(
    tmp_path: Path,
) -> None:
    """Its pass runs in a child at the cleaner's nice value and ends while two processes at
    the loop's priority keep the only core the test may use busy (in 6-41 s on the shared
    2-core machine, as its other work went): a `SCHED_IDLE` child would get about 0.15% of
    that core, minutes for this pass. A thread keeps one child: the idle one it had is raised
    where the kernel allows, else killed and replaced."""
    lagged = dataclasses.replace(CONFIG, max_compaction_lag_ms=HOUR)
    lm, log = manager_in_processes(tmp_path, lagged)
    fill(log, 600)
    before = latest(log)
    cleaner = lm.cleaner
    affinity = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(affinity)})  # the spinner, the children, the pass's thread
    idle = cleaner._processes[0] = CleaningProcess.start(IDLE)
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        reports: list[PassReport | None] = []
        passing = threading.Thread(
            target=lambda: reports.append(cleaner.clean_once(now_ms=T0 + 2 * HOUR)), daemon=True
        )
        passing.start()
        passing.join(90)
        assert not passing.is_alive(), "the overdue pass did not end within 90 s"
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
        os.sched_setaffinity(0, affinity)
        if passing.is_alive():
            lm.shutdown()
    (overdue,) = reports
    assert overdue is not None and overdue.priority == URGENT and not overdue.promoted
    assert not overdue.result.abandoned and overdue.result.groups_swapped > 0
    urgent = cleaner._processes[0]
    assert urgent.priority == URGENT
    if may_raise_a_priority():
        assert urgent is idle and os.sched_getscheduler(idle.pid) == os.SCHED_OTHER
    else:
        assert urgent.pid != idle.pid and idle._process.wait(30) == -signal.SIGKILL
    assert latest(log) == before
    lm.shutdown()


def may_raise_a_priority() -> bool:
    """Whether this process may take a child out of `SCHED_IDLE` to `CLEANER_NICE`: with
    `CAP_SYS_NICE` (bit 23 of the effective set) or an `RLIMIT_NICE` reaching it."""
    with open("/proc/self/status") as status:
        caps = next(int(line.split()[1], 16) for line in status if line.startswith("CapEff"))
    return bool(caps >> 23 & 1) or resource.getrlimit(resource.RLIMIT_NICE)[0] >= 20 - CLEANER_NICE


@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="Linux's SCHED_IDLE")
def test_an_idle_childs_pass_is_promoted_in_place_where_the_kernel_allows(
    tmp_path: Path,
) -> None:
    """Asked at the pass's first poll: promoted, the child keeps its pass and becomes an urgent
    child; refused, it is killed and the pass abandoned, nothing swapped."""
    log = open_log(tmp_path / "t-0", CONFIG)
    fill(log, 600)
    before = latest(log)
    files = segment_files(log)
    idle = CleaningProcess.start(IDLE)
    try:
        assert os.sched_getscheduler(idle.pid) == os.SCHED_IDLE  # set by the parent, at once
        result = idle.run(
            planned(log), MAP_BYTES, should_stop=never, on_read=ignore, should_promote=lambda: True
        )
        if may_raise_a_priority():
            assert idle.priority == URGENT and not idle.gone
            assert os.sched_getscheduler(idle.pid) == os.SCHED_OTHER
            assert os.getpriority(os.PRIO_PROCESS, idle.pid) == CLEANER_NICE
            assert not result.abandoned and result.groups_swapped > 0
            assert latest(log) == before
            assert idle.set_priority(IDLE) and idle.priority == IDLE  # lowering: always
            assert os.sched_getscheduler(idle.pid) == os.SCHED_IDLE
        else:
            assert idle.priority == IDLE and idle.gone
            assert result.abandoned and segment_files(log) == files
    finally:
        idle.close()


WAIT_MS = 2000


@contextlib.contextmanager
def one_core() -> Iterator[None]:
    """This process, and the children it starts inside, on one core only."""
    affinity = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(affinity)})
    try:
        yield
    finally:
        os.sched_setaffinity(0, affinity)


def clean_on_a_busy_core(
    lm: LogManager, meanwhile: Callable[[], None] = lambda: None
) -> list[PassReport]:
    """The cleaner's passes, on a thread, until one ends not abandoned (within 90 s, else the
    manager is shut down and the test fails), while two processes at the loop's priority spin
    on this process's cores and `meanwhile` runs here."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    reports: list[PassReport] = []

    def clean_until_a_pass_ends() -> None:
        while not reports or reports[-1].result.abandoned:
            report = lm.cleaner.clean_once()
            assert report is not None
            reports.append(report)

    passing = threading.Thread(target=clean_until_a_pass_ends, daemon=True)
    try:
        passing.start()
        meanwhile()
        passing.join(90)
        assert not passing.is_alive(), f"the log was not cleaned within 90 s: {reports}"
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
        if passing.is_alive():
            lm.shutdown()
    return reports


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="Linux's CPU affinity")
@pytest.mark.parametrize("renice", ["allowed", "refused"])
def test_a_log_cleanable_past_the_idle_wait_is_cleaned_on_a_saturated_core(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, renice: str
) -> None:
    """Kafka's default max.compaction.lag.ms (none) and two processes at the loop's priority
    keeping busy the only core the test may use: the pass starts idle (a `SCHED_IDLE` child
    gets about 0.15% of that core: minutes for this pass), is promoted once the log has been
    cleanable for the idle wait (2 s), in place or, where the kernel refuses, by a restart in
    an urgent child, and cleans the log: its checkpoint entry moves to the end of the pass and
    each key keeps its latest record, in fewer bytes."""
    if renice == "refused":
        monkeypatch.setattr(CleaningProcess, "promote", lambda self: False)
    elif not may_raise_a_priority():
        pytest.skip("this process may not take a child out of SCHED_IDLE")
    cleaner_config = CleanerConfig(dedupe_buffer_size=MAP_BYTES, idle_max_wait_ms=WAIT_MS)
    lm, log = manager_in_processes(tmp_path, CONFIG, cleaner_config, wall=True)
    fill(log, 600)
    before, size = latest(log), log.size_in_bytes
    cleaner, tp, log_dir = lm.cleaner, ("t", 0), lm.log_dirs[0]
    with one_core():  # the spinners, the children, the pass's thread
        reports = clean_on_a_busy_core(lm)
    assert reports[0].candidate.first_dirty == 0 and reports[0].promoted
    if renice == "allowed":
        assert [(r.priority, r.result.abandoned) for r in reports] == [(URGENT, False)]
    else:  # killed at its promotion, then at once an urgent pass in another child
        assert [(r.priority, r.result.abandoned) for r in reports] == [
            (IDLE, True),
            (URGENT, False),
        ]
    assert cleaner.checkpoint_offset(log_dir, tp) == reports[-1].result.end_offset > 0
    assert latest(log) == before and log.size_in_bytes < size / 2
    lm.shutdown()


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="Linux's CPU affinity")
def test_an_idle_pass_is_promoted_once_its_log_grows_to_three_times_its_clean_size(
    tmp_path: Path,
) -> None:
    """A cleaned log made dirty enough to qualify, not enough to be urgent: its pass starts
    idle on a core two processes at the loop's priority keep busy (the test, its cleaner's
    child and the spinners on one core), with an idle wait of an hour; records appended
    meanwhile take the log to its promotion size, and the pass is promoted (in place, or by a
    restart where the kernel refuses) and ends."""
    lax = dataclasses.replace(CONFIG, min_cleanable_dirty_ratio=0.5)
    urgent_always = CleanerConfig(dedupe_buffer_size=MAP_BYTES, idle_max_wait_ms=0)
    lm, log = manager_in_processes(tmp_path, lax, urgent_always, wall=True)
    cleaner, tp, log_dir = lm.cleaner, ("t", 0), lm.log_dirs[0]

    def measured() -> LogToClean:
        offset = cleaner.checkpoint_offset(log_dir, tp)
        return log_to_clean(summarize_with_config(log), offset, wall_clock_ms())

    def grow_to_its_promotion_size() -> None:
        assert grown is not None
        while log.size_in_bytes < grown:
            fill(log, 5)

    with one_core():  # before the child starts: it inherits it
        fill(log, 300)
        first = cleaner.clean_once()
        assert first is not None and first.priority == URGENT and not first.result.abandoned
        cleaner.reconfigure(dataclasses.replace(urgent_always, idle_max_wait_ms=HOUR))
        while not (candidate := measured()).qualifies:
            fill(log, 5)
        assert pass_priority(candidate, wall_clock_ms(), wall_clock_ms(), HOUR) == IDLE
        grown = promotion_bytes(candidate)
        assert grown is not None and log.size_in_bytes < grown
        reports = clean_on_a_busy_core(lm, grow_to_its_promotion_size)
    assert reports[0].promoted and reports[-1].priority == URGENT
    assert not reports[-1].result.abandoned
    assert cleaner.checkpoint_offset(log_dir, tp) == reports[-1].result.end_offset
    lm.shutdown()
