"""The log cleaner's dynamic broker configs: which values a running cleaner takes from the
dynamic levels (cleaner_config.reconfigured) and how it takes them without a restart
(LogCleaner.reconfigure): the I/O rate at once, the backoff, the threads, the key maps."""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path

import pytest
from storage_helpers import T0
from test_log_cleaner_manager import COMPACT, SMALL_BUFFER, fill, manager

from replog.errors import ConfigError
from replog.storage.cleaner.cleaner_config import CleanerConfig, reconfigured
from replog.storage.cleaner.log_cleaner import LogCleaner, PassReport
from replog.storage.cleaner.throttle import Throttle
from replog.testing import ManualClock

THREAD_PREFIX = "replog-log-cleaner"
STATIC = CleanerConfig(threads=2, dedupe_buffer_size=24 * 1000, backoff_ms=500)


def cleaner_threads() -> list[str]:
    return sorted(t.name for t in threading.enumerate() if t.name.startswith(THREAD_PREFIX))


def wait_until(condition: object, timeout_s: float = 10.0) -> bool:
    event = threading.Event()
    for _ in range(int(timeout_s / 0.02)):
        if condition():  # type: ignore[operator]
            return True
        event.wait(0.02)
    return bool(condition())  # type: ignore[operator]


def test_the_strongest_dynamic_level_wins_over_server_properties() -> None:
    cluster_default = {
        "log.cleaner.backoff.ms": "100",
        "log.cleaner.io.max.bytes.per.second": "5e6",
        "log.cleaner.threads": "3",
    }
    broker = {"log.cleaner.threads": "4", "log.cleaner.dedupe.buffer.size": "48000"}
    config, refused = reconfigured(STATIC, STATIC, [cluster_default, broker])
    assert refused == []
    assert config == CleanerConfig(
        threads=4, dedupe_buffer_size=48000, io_max_bytes_per_second=5e6, backoff_ms=100
    )
    # Without dynamic values, server.properties' again; enable stays the running one's.
    running = CleanerConfig(enable=False, threads=3)
    assert reconfigured(running, STATIC, []) == (replace(STATIC, enable=False), [])


def test_a_value_the_cleaner_cannot_take_leaves_the_level_below() -> None:
    config, refused = reconfigured(
        STATIC,
        STATIC,
        [
            {"log.cleaner.backoff.ms": "100"},
            {"log.cleaner.backoff.ms": "-1", "log.cleaner.io.max.bytes.per.second": "0"},
        ],
    )
    assert config.backoff_ms == 100  # the cluster default's, below the broker's bad one
    assert config.io_max_bytes_per_second == STATIC.io_max_bytes_per_second
    assert refused == [
        "log.cleaner.io.max.bytes.per.second=0.0: must be a number above 0; ignored, the level "
        "below stands",
        "log.cleaner.backoff.ms=-1: must be at least 0; ignored, the level below stands",
    ]


def test_values_that_disagree_keep_the_running_threads_and_buffer() -> None:
    config, refused = reconfigured(
        STATIC, STATIC, [{"log.cleaner.threads": "4", "log.cleaner.dedupe.buffer.size": "48"}]
    )
    assert (config.threads, config.dedupe_buffer_size) == (2, 24 * 1000)
    assert refused == [
        "log.cleaner.dedupe.buffer.size=48: must hold one 24-byte entry for each of the 4 "
        "cleaner threads; the cleaner keeps its threads and dedupe buffer"
    ]


@pytest.mark.parametrize(("wanted", "taken"), [("1", 1), ("4", 4), ("5", 2), ("8", 8)])
def test_the_threads_change_within_half_and_double_of_the_running_ones(
    wanted: str, taken: int
) -> None:
    running = CleanerConfig(threads=4 if wanted == "8" else 2)
    config, refused = reconfigured(running, STATIC, [{"log.cleaner.threads": wanted}])
    assert config.threads == taken
    assert bool(refused) == (int(wanted) != taken)
    # Before its threads start, any number.
    config, refused = reconfigured(
        running, STATIC, [{"log.cleaner.threads": wanted}], starting=True
    )
    assert (config.threads, refused) == (int(wanted), [])


def test_server_properties_refuses_a_zero_rate() -> None:
    with pytest.raises(ConfigError, match=r"log\.cleaner\.io\.max\.bytes\.per\.second=0\.0"):
        CleanerConfig.from_properties({"log.cleaner.io.max.bytes.per.second": "0"})


def test_a_new_rate_starts_a_new_throttle_period() -> None:
    throttle = Throttle(1000.0, now_ms=0)
    assert throttle.observe(10_000, 300) == pytest.approx(9_700.0)  # the old rate's sleep
    throttle.set_rate(1e9, now_ms=400)
    assert throttle.observe(10_000, 500) == 0.0
    assert throttle.observe(10_000, 700) == 0.0  # 20 KB in 300 ms: far under 1 GB/s


def test_a_higher_rate_ends_a_pass_s_wait_on_the_throttle(tmp_path: Path) -> None:
    """The pass waits on a throttle that would hold it for hours; a new rate ends the wait and
    the pass cleans the log to its end."""
    clock = ManualClock(T0)
    lm = manager(tmp_path, clock)
    log = lm.get_or_create_log("t", 0, COMPACT)
    fill(log, 200, keys=4)
    slow = CleanerConfig(dedupe_buffer_size=24 * 10_000, io_max_bytes_per_second=0.001)
    lm.cleaner = LogCleaner(
        slow, lm.log_dirs, lm._cleaner_logs, clock=clock, timer=ManualClock(0, tick_ms=1000)
    )
    reports: list[PassReport | None] = []
    cleaning = threading.Thread(
        target=lambda: reports.append(lm.cleaner.clean_once(now_ms=T0)), daemon=True
    )
    cleaning.start()
    assert wait_until(lambda: lm.cleaner.is_cleaning(("t", 0)))
    cleaning.join(0.3)
    assert cleaning.is_alive()  # waiting on the throttle
    lm.cleaner.reconfigure(CleanerConfig(dedupe_buffer_size=24 * 10_000))
    cleaning.join(10)
    assert not cleaning.is_alive()
    (report,) = reports
    assert report is not None and not report.result.abandoned
    assert lm.cleaner.checkpoint_offset(lm.log_dirs[0], ("t", 0)) == report.result.end_offset
    lm.shutdown()


def test_a_shorter_backoff_wakes_a_sleeping_thread(tmp_path: Path) -> None:
    lm = manager(tmp_path, ManualClock(T0), backoff_ms=3_600_000)
    lm.start(poll_interval_ms=10)
    assert wait_until(cleaner_threads)
    threading.Event().wait(0.2)  # the thread found nothing and sleeps for an hour
    log = lm.get_or_create_log("t", 0, COMPACT)
    fill(log, 200, keys=3)
    threading.Event().wait(0.3)
    assert lm.cleaner.checkpoint_offset(lm.log_dirs[0], ("t", 0)) is None  # still asleep
    lm.cleaner.reconfigure(CleanerConfig(dedupe_buffer_size=24 * 10_000, backoff_ms=10))
    assert wait_until(lambda: lm.cleaner.checkpoint_offset(lm.log_dirs[0], ("t", 0)) is not None)
    lm.shutdown()
    assert cleaner_threads() == []


def test_threads_start_and_end_on_a_running_cleaner(tmp_path: Path) -> None:
    lm = manager(tmp_path, ManualClock(T0), backoff_ms=10)
    lm.start(poll_interval_ms=10)
    assert wait_until(lambda: cleaner_threads() == [f"{THREAD_PREFIX}-0"])
    two = CleanerConfig(threads=2, dedupe_buffer_size=24 * 10_000, backoff_ms=10)
    lm.cleaner.reconfigure(two)
    assert cleaner_threads() == [f"{THREAD_PREFIX}-0", f"{THREAD_PREFIX}-1"]
    log = lm.get_or_create_log("t", 0, COMPACT)
    fill(log, 200, keys=3)
    assert wait_until(lambda: lm.cleaner.checkpoint_offset(lm.log_dirs[0], ("t", 0)) is not None)
    lm.cleaner.reconfigure(SMALL_BUFFER)  # one thread again
    assert wait_until(lambda: cleaner_threads() == [f"{THREAD_PREFIX}-0"])
    assert len(lm.cleaner.stats().uncleanable_partitions) == 1
    lm.shutdown()
    assert cleaner_threads() == []


def test_a_thread_s_key_map_takes_the_new_buffer_at_its_next_pass(tmp_path: Path) -> None:
    lm = manager(tmp_path, ManualClock(T0))
    first = lm.get_or_create_log("t", 0, COMPACT)
    fill(first, 200, keys=2)
    assert lm.cleaner.clean_once(now_ms=T0) is not None
    assert lm.cleaner.stats().max_buffer_utilization_percent == pytest.approx(100 * 2 / 10_000)
    lm.cleaner.reconfigure(CleanerConfig(dedupe_buffer_size=24 * 100))
    second = lm.get_or_create_log("u", 0, COMPACT)
    fill(second, 200, keys=2)
    report = lm.cleaner.clean_once(now_ms=T0)
    assert report is not None and report.partition == ("u", 0)
    # 100 slots now: two keys fill 2 % of them.
    assert report.result.map_utilization == pytest.approx(2 / 100)
    lm.shutdown()
