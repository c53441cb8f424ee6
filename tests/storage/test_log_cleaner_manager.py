"""The broker's log cleaner (replog/storage/cleaner/log_cleaner.py) over a real LogManager, run
synchronously with an injected clock: the choice of the dirtiest log, the checkpoint file in
Kafka's format, policy changes, tombstones after delete.retention.ms, truncation during a pass,
a corrupt log marked uncleanable, the stats, the I/O throttle, and the threads. Each test runs
twice: passes on the cleaner's threads, and in its child processes (`cleaning_process`)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from storage_helpers import T0, flip_byte

from replog.coordinator.offsets_cache import OffsetsCache, ReplayStats, replay_batches
from replog.coordinator.offsets_records import (
    OffsetCommitKey,
    OffsetCommitValue,
    encode_key,
    encode_value,
)
from replog.errors import InvalidRecordError
from replog.record import RecordBatch, build_batch, iter_batches
from replog.record.control_record import EndTxnMarker, encode_marker
from replog.storage import Log, LogConfig
from replog.storage.aborted_transactions import AbortedTransaction
from replog.storage.cleaner.cleaner_config import CleanerConfig
from replog.storage.cleaner.cleaning_process import clean_logs_in_processes, cleaning_in_processes
from replog.storage.cleaner.log_cleaner import LogCleaner, PassReport
from replog.storage.cleaner.log_summary import dirty_ratio
from replog.storage.cleaner.throttle import Throttle
from replog.storage.log_manager import LogManager, LogManagerConfig
from replog.testing import ManualClock
from tests.eventually import wait_until

HOUR = 3_600_000
# How long a test waits on the cleaner's threads or processes: generous, as a loaded machine
# (this worker at nice 10 beside busy cores) starts them late, not wrongly.
CLEANED_WITHIN_S = 120.0
COMPACT = LogConfig(
    segment_bytes=700,
    index_interval_bytes=100,
    cleanup_policy="compact",
    min_cleanable_dirty_ratio=0.1,
    delete_retention_ms=HOUR,
)
SMALL_BUFFER = CleanerConfig(dedupe_buffer_size=24 * 10_000, backoff_ms=10)


@pytest.fixture(autouse=True, params=["threads", "processes"])
def passes_run_in(request: pytest.FixtureRequest) -> Iterator[str]:
    clean_logs_in_processes(request.param == "processes")
    yield request.param
    clean_logs_in_processes(False)


def manager(tmp_path: Path, clock: ManualClock, **cleaner: Any) -> LogManager:
    settings = {"dedupe_buffer_size": 24 * 10_000, **cleaner}
    config = LogManagerConfig(log=COMPACT, cleaner=CleanerConfig(**settings))
    return LogManager(str(tmp_path / "d0"), config, clock=clock)


def put(log: Log, key: bytes, value: bytes | None) -> int:
    info = log.append_as_leader(build_batch([(T0 + log.log_end_offset, key, value, ())]), 0)
    log.high_watermark = log.log_end_offset
    return info.first_offset


def fill(log: Log, count: int, keys: int) -> dict[bytes, tuple[int, bytes | None]]:
    latest: dict[bytes, tuple[int, bytes | None]] = {}
    for i in range(count):
        key = f"k{i % keys}".encode()
        value = f"v{i}".encode()
        latest[key] = (put(log, key, value), value)
    return latest


def entries(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    out = []
    for _, batch in log.read_batches(log.log_start_offset):
        for record in RecordBatch.parse(batch, sparse=True).records():
            out.append((record.offset, record.key, record.value))
    return out


def checkpoint_text(lm: LogManager) -> str:
    return (Path(lm.log_dirs[0]) / "cleaner-offset-checkpoint").read_text()


def test_the_dirtiest_log_is_cleaned_first_and_the_checkpoint_is_kafkas(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    lm = manager(tmp_path, clock)
    busy = lm.get_or_create_log("busy", 0, COMPACT)
    calm = lm.get_or_create_log("calm", 0, COMPACT)
    fill(busy, 150, keys=3)
    fill(calm, 40, keys=30)
    assert dirty_ratio(busy, None, T0) == dirty_ratio(calm, None, T0) == 1.0  # all dirty
    report = lm.cleaner.clean_once(now_ms=T0)
    assert report is not None and report.partition == ("busy", 0)
    active = busy.active_segment.base_offset
    assert report.result.end_offset == active
    assert checkpoint_text(lm) == f"0\n1\nbusy 0 {active}\n"
    report = lm.cleaner.clean_once(now_ms=T0)
    assert report is not None and report.partition == ("calm", 0)
    # Both clean now: nothing qualifies, and the ratio says so.
    assert lm.cleaner.clean_once(now_ms=T0) is None
    assert dirty_ratio(busy, lm.cleaner.checkpoint_offset(lm.log_dirs[0], ("busy", 0)), T0) == 0
    lines = checkpoint_text(lm).splitlines()
    assert lines[:2] == ["0", "2"] and sorted(lines[2:]) == [
        f"busy 0 {active}",
        f"calm 0 {calm.active_segment.base_offset}",
    ]
    lm.shutdown()


def test_a_cleaned_log_keeps_the_latest_value_of_each_key_at_its_offset(tmp_path: Path) -> None:
    lm = manager(tmp_path, ManualClock(T0))
    log = lm.get_or_create_log("t", 0, COMPACT)
    appended = []
    for i in range(200):
        key, value = f"k{i % 5}".encode(), f"v{i}".encode()
        appended.append((put(log, key, value), key, value))
    end = log.log_end_offset
    lm.cleaner.clean_once(now_ms=T0)
    active = log.active_segment.base_offset
    latest_below = {k: (o, k, v) for o, k, v in appended if o < active}
    kept = [(o, k, v) for o, k, v in entries(log) if o < active]
    assert kept == sorted(latest_below.values())
    assert [e for e in entries(log) if e[0] >= active] == [e for e in appended if e[0] >= active]
    assert log.log_end_offset == end
    lm.shutdown()


def transactional(log: Log, producer_id: int, key: bytes, value: bytes) -> int:
    batch = build_batch(
        [(T0, key, value, ())],
        producer_id=producer_id,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
    )
    return log.append_as_leader(batch, 0).first_offset


def test_a_pass_removes_the_data_of_aborted_transactions_the_txnindex_names(
    tmp_path: Path,
) -> None:
    lm = manager(tmp_path, ManualClock(T0))
    log = lm.get_or_create_log("t", 0, COMPACT)
    first = transactional(log, 7, b"only-key", b"aborted")
    key, value = encode_marker(EndTxnMarker(aborted=True, coordinator_epoch=0))
    marker = build_batch(
        [(T0, key, value, ())],
        producer_id=7,
        producer_epoch=0,
        is_transactional=True,
        is_control=True,
    )
    at = log.append_as_leader(marker, 0, allow_control=True).first_offset
    log.append_aborted_transactions([AbortedTransaction(7, first, at, at + 1)])
    fill(log, 60, keys=3)  # the transaction's segment is sealed and below the HW
    assert lm.cleaner.clean_once(now_ms=T0) is not None
    values = [v for _, _, v in entries(log)]
    # The latest (and only) value of its key, yet aborted: gone; its marker stays.
    assert b"aborted" not in values and value in values
    # And so does its entry, now in the cleaned segment's .txnindex.
    assert log.collect_aborted_transactions(first, log.high_watermark) == [
        AbortedTransaction(7, first, at, at + 1)
    ]
    lm.shutdown()


def test_nothing_at_or_past_an_open_transaction_is_cleaned(tmp_path: Path) -> None:
    lm = manager(tmp_path, ManualClock(T0))
    log = lm.get_or_create_log("t", 0, COMPACT)
    fill(log, 20, keys=2)
    open_at = transactional(log, 7, b"k0", b"open")
    fill(log, 40, keys=2)
    lm.cleaner.first_unstable_offset = lambda tp: open_at
    report = lm.cleaner.clean_once(now_ms=T0)
    assert report is not None and report.result.end_offset <= open_at
    # Everything from the open transaction's segment on is as appended.
    assert b"open" in [v for _, _, v in entries(log)]
    assert next(e for e in entries(log) if e[0] >= open_at)[0] == open_at
    lm.shutdown()


def test_a_policy_change_starts_and_stops_cleaning(tmp_path: Path) -> None:
    lm = manager(tmp_path, ManualClock(T0))
    delete = LogConfig(segment_bytes=700, min_cleanable_dirty_ratio=0.1)
    log = lm.get_or_create_log("t", 0, delete)
    fill(log, 100, keys=3)
    assert lm.cleaner.clean_once(now_ms=T0) is None  # delete only: never cleaned
    lm.get_or_create_log("t", 0, COMPACT)  # the topic's config changes
    assert lm.cleaner.clean_once(now_ms=T0) is not None
    fill(log, 100, keys=3)
    lm.get_or_create_log("t", 0, delete)
    assert lm.cleaner.clean_once(now_ms=T0) is None
    lm.shutdown()


def test_tombstones_go_once_delete_retention_ms_passed_after_the_pass_that_kept_them(
    tmp_path: Path,
) -> None:
    lm = manager(tmp_path, ManualClock(T0))
    log = lm.get_or_create_log("t", 0, COMPACT)
    put(log, b"gone", b"value")
    tombstone = put(log, b"gone", None)

    def dirty_more_and_clean(now_ms: int) -> None:
        fill(log, 60, keys=3)  # new dirty segments, so the log qualifies again
        assert lm.cleaner.clean_once(now_ms=now_ms) is not None

    def kept() -> list[tuple[int, bytes | None, bytes | None]]:
        return [e for e in entries(log) if e[1] == b"gone"]

    dirty_more_and_clean(T0)
    assert kept() == [(tombstone, b"gone", None)]  # kept, with a horizon of T0 + 1 h
    dirty_more_and_clean(T0 + HOUR - 1)
    assert kept() == [(tombstone, b"gone", None)]
    dirty_more_and_clean(T0 + HOUR)
    assert kept() == []
    lm.shutdown()


def test_truncation_stops_a_running_pass_which_moves_no_checkpoint(tmp_path: Path) -> None:
    """The pass waits on a throttle that would hold it for hours: the truncation's abort ends
    the wait, the pass stops at that batch, and the truncation goes on."""
    clock = ManualClock(T0)
    lm = manager(tmp_path, clock)
    log = lm.get_or_create_log("t", 0, COMPACT)
    fill(log, 200, keys=4)
    lm.cleaner = LogCleaner(
        CleanerConfig(dedupe_buffer_size=24 * 10_000, io_max_bytes_per_second=0.001),
        lm.log_dirs,
        lm._cleaner_logs,
        clock=clock,
        timer=ManualClock(0, tick_ms=1000),  # every batch read takes a second
        use_processes=cleaning_in_processes(),
    )
    reports: list[PassReport | None] = []
    cleaning = threading.Thread(
        target=lambda: reports.append(lm.cleaner.clean_once(now_ms=T0)), daemon=True
    )
    cleaning.start()
    wait_until(  # the pass has started (it then waits on the throttle)
        lambda: lm.cleaner.is_cleaning(("t", 0)),
        "a pass cleaning t-0",
        timeout_s=CLEANED_WITHIN_S,
    )
    target = log.segments()[1].base_offset + 1
    truncating = threading.Thread(target=lm.truncate_to, args=("t", 0, target), daemon=True)
    truncating.start()
    truncating.join(CLEANED_WITHIN_S)
    cleaning.join(CLEANED_WITHIN_S)
    assert not truncating.is_alive() and not cleaning.is_alive()
    assert log.log_end_offset <= target
    (report,) = reports
    assert report is not None and report.result.abandoned and report.result.corrupt is None
    assert lm.cleaner.checkpoint_offset(lm.log_dirs[0], ("t", 0)) is None  # never moved
    assert not lm.cleaner.is_cleaning(("t", 0))  # resumed: no state left
    # The next pass cleans the truncated log, whose keys are all still there.
    before = {k for _, k, _ in entries(log)}
    fill(log, 60, keys=4)
    lm.cleaner.shutdown()  # its child, if any
    lm.cleaner = LogCleaner(
        SMALL_BUFFER,
        lm.log_dirs,
        lm._cleaner_logs,
        clock=clock,
        use_processes=cleaning_in_processes(),
    )
    assert lm.cleaner.clean_once(now_ms=T0) is not None
    assert {k for _, k, _ in entries(log)} == before
    lm.shutdown()


def test_a_truncation_lowers_the_checkpoint_to_the_new_log_end(tmp_path: Path) -> None:
    lm = manager(tmp_path, ManualClock(T0))
    log = lm.get_or_create_log("t", 0, COMPACT)
    fill(log, 200, keys=4)
    lm.cleaner.clean_once(now_ms=T0)
    reached = lm.cleaner.checkpoint_offset(lm.log_dirs[0], ("t", 0))
    assert reached is not None and reached > 10
    lm.truncate_to("t", 0, 10)
    assert lm.cleaner.checkpoint_offset(lm.log_dirs[0], ("t", 0)) == log.log_end_offset <= 10
    lm.run_due_tasks()
    assert checkpoint_text(lm) == f"0\n1\nt 0 {log.log_end_offset}\n"
    lm.shutdown()


def test_a_corrupt_log_is_marked_uncleanable_and_left_alone(tmp_path: Path) -> None:
    lm = manager(tmp_path, ManualClock(T0))
    log = lm.get_or_create_log("t", 0, COMPACT)
    other = lm.get_or_create_log("u", 0, COMPACT)
    fill(log, 200, keys=4)
    fill(other, 100, keys=4)
    flip_byte(Path(log.segments()[0].log_path), 70)  # inside the first batch's records
    reports = [lm.cleaner.clean_once(now_ms=T0) for _ in range(3)]
    assert lm.cleaner.is_uncleanable(lm.log_dirs[0], ("t", 0))
    assert lm.cleaner.stats(T0).uncleanable_partitions == {lm.log_dirs[0]: 1}
    assert [r.partition for r in reports if r is not None].count(("t", 0)) == 1
    assert any(r is not None and r.partition == ("u", 0) for r in reports)
    lm.delete_log("t", 0)  # a removed log is forgotten
    assert lm.cleaner.stats(T0).uncleanable_partitions == {lm.log_dirs[0]: 0}
    lm.shutdown()


def test_the_stats_the_metrics_read(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    lm = manager(tmp_path, clock)
    log = lm.get_or_create_log("t", 0, COMPACT)
    fill(log, 200, keys=2)
    clock.advance(5_000)
    assert lm.cleaner.stats().time_since_last_run_ms == 5_000
    report = lm.cleaner.clean_once()
    assert report is not None
    stats = lm.cleaner.stats()
    assert stats.max_dirty_percent == 100.0
    assert stats.time_since_last_run_ms == 0
    written, read = report.result.stats.bytes_written, report.result.stats.bytes_read
    assert stats.recopy_percent == pytest.approx(100 * written / read)
    assert 0 < stats.recopy_percent < 20
    assert stats.max_buffer_utilization_percent == pytest.approx(100 * 2 / 10_000)
    assert lm.cleaner.clean_once() is None
    assert lm.cleaner.stats().max_dirty_percent == 0.0
    lm.shutdown()


def test_retention_skips_a_log_a_pass_is_cleaning(tmp_path: Path) -> None:
    lm = manager(tmp_path, ManualClock(T0))
    cleaner = lm.cleaner
    assert cleaner.pause_if_idle(("t", 0))
    assert not cleaner.pause_if_idle(("t", 0))  # paused: left alone
    cleaner.resume(("t", 0))
    assert cleaner.pause_if_idle(("t", 0))
    cleaner.resume(("t", 0))
    with pytest.raises(ValueError, match="t-0: cleaning is not paused"):
        cleaner.resume(("t", 0))
    lm.shutdown()


def test_the_throttle_sleeps_what_a_faster_read_saved() -> None:
    throttle = Throttle(1000.0, now_ms=0)
    assert throttle.observe(500, 100) == 0.0  # before the first check interval
    assert throttle.observe(500, 300) == pytest.approx(700.0)  # 1000 bytes take 1 s
    assert throttle.observe(100, 1100) == 0.0
    assert throttle.observe(100, 1400) == 0.0  # 200 bytes in 400 ms: under the rate
    with pytest.raises(ValueError, match="not above 0"):
        Throttle(0.0, now_ms=0)


def test_the_threads_clean_and_stop_at_shutdown(tmp_path: Path) -> None:
    lm = manager(tmp_path, ManualClock(T0), backoff_ms=10)
    log = lm.get_or_create_log("t", 0, COMPACT)
    fill(log, 200, keys=3)
    lm.start(poll_interval_ms=10)
    try:
        wait_until(
            lambda: lm.cleaner.checkpoint_offset(lm.log_dirs[0], ("t", 0)) is not None,
            "the cleaner's threads clean t-0 and checkpoint it",
            timeout_s=CLEANED_WITHIN_S,
        )
    finally:
        lm.shutdown()  # whatever happened: no cleaner thread outlives the test
    assert not [t for t in threading.enumerate() if t.name.startswith("replog-log-cleaner")]
    assert checkpoint_text(lm).startswith("0\n1\nt 0 ")


def test_disabled_the_cleaner_runs_no_thread(tmp_path: Path) -> None:
    lm = manager(tmp_path, ManualClock(T0), enable=False)
    lm.start(poll_interval_ms=10)
    assert not [t for t in threading.enumerate() if t.name.startswith("replog-log-cleaner")]
    lm.shutdown()


def test_a_cleaned_log_still_answers_reads_by_time_and_whole_batch_replays(
    tmp_path: Path,
) -> None:
    """ListOffsets by timestamp and the group coordinator's replay decode records: a cleaned
    batch holds fewer records than its offset range, which they must accept."""
    lm = manager(tmp_path, ManualClock(T0))
    log = lm.get_or_create_log("t", 0, COMPACT)
    for i in range(60):  # two records a batch: one superseded later, one kept
        start = log.log_end_offset
        records = [
            (T0 + start, f"k{i % 3}".encode(), b"v", ()),
            (T0 + start + 1, b"u%d" % i, b"v", ()),
        ]
        log.append_as_leader(build_batch(records), 0)
    log.high_watermark = log.log_end_offset
    lm.cleaner.clean_once(now_ms=T0)
    kept = entries(log)
    assert 60 <= len(kept) < 70
    # Timestamps are T0 + offset: the first record at or after offset 10's time is the first
    # kept at or after offset 10.
    first = next(o for o, _, _ in kept if o >= 10)
    assert log.offsets_for_times(T0 + 10) == (first, T0 + first)
    data = b"".join(batch for _, batch in log.read_batches(0))
    replayed = [r.offset for b in iter_batches(data, sparse=True) for r in b.records()]
    assert replayed == [o for o, _, _ in kept]
    with pytest.raises(InvalidRecordError, match="records_count"):
        list(iter_batches(data))  # a reader that does not expect gaps refuses them
    lm.shutdown()


def test_a_cleaned_offsets_topic_replays_to_the_same_committed_offsets(tmp_path: Path) -> None:
    """`__consumer_offsets` is compacted: a coordinator replaying it after a pass must find
    every group's latest commit (and no deleted one), as before the pass."""
    lm = manager(tmp_path, ManualClock(T0))
    log = lm.get_or_create_log("__consumer_offsets", 0, COMPACT)
    for i in range(150):  # two commits a batch, so that passes leave batches with gaps
        start = log.log_end_offset
        records = []
        for j in range(2):
            key = OffsetCommitKey(f"g{(i + j) % 5}", "orders", (i * 2 + j) % 3)
            value = OffsetCommitValue(i * 10 + j, 0, "", T0)
            records.append((T0 + start + j, encode_key(key), encode_value(value), ()))
        log.append_as_leader(build_batch(records), 0)
    gone = OffsetCommitKey("g0", "orders", 1)  # offsets deleted: a tombstone
    log.append_as_leader(build_batch([(T0, encode_key(gone), None, ())]), 0)
    for i in range(40):  # later commits elsewhere, so the tombstone's segment is cleaned
        other = encode_key(OffsetCommitKey("other", "orders", i % 2))
        commit = encode_value(OffsetCommitValue(i, 0, "", T0))
        log.append_as_leader(build_batch([(T0, other, commit, ())]), 0)
    log.high_watermark = log.log_end_offset

    def replayed() -> dict[str, dict[tuple[str, int], OffsetCommitValue | None]]:
        cache = OffsetsCache()
        data = b"".join(batch for _, batch in log.read_batches(0))
        replay_batches(cache, data, ReplayStats(), "test")
        return {group: cache.committed(group) for group in cache.groups()}

    before = replayed()
    assert ("orders", 1) not in before["g0"]
    assert lm.cleaner.clean_once(now_ms=T0) is not None
    assert len(entries(log)) < 100
    assert replayed() == before
    lm.shutdown()
