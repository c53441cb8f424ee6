"""LogConfig and LogManagerConfig against Kafka's rules and against the controller.

- Every value the controller accepts for a topic key a log reads, the log accepts too, and the
  other way round (`quorum/controller/config_definitions.py`): a topic config the controller
  wrote and the brokers refused left them on their defaults for it.
- Kafka's readings: `cleanup.policy` items trimmed and an empty list valid (neither policy),
  any negative `retention.bytes` unlimited, any negative broker retention time -1, integers
  without `_`, `log.flush.interval.ms` falling back to `log.flush.scheduler.interval.ms`.
- Errors name the key as written; a topic keeps each valid key when another is refused.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from storage_helpers import (
    T0,
    append_batches,
    open_log,
    small_config,
)

from replog.errors import ConfigError
from replog.quorum.controller.config_definitions import TOPIC_CONFIGS
from replog.storage.log_config import BY_DOTTED_NAME, LONG_MAX, LogConfig
from replog.storage.log_manager import LogManagerConfig
from replog.testing import ManualClock

# The topic keys a log reads: the controller validates them, the brokers apply them.
LOG_TOPIC_KEYS = sorted(name for name in TOPIC_CONFIGS if name in BY_DOTTED_NAME)
SAMPLE_VALUES = [
    *("", " ", "abc", "1.5", "1_000_000", "1e3", "+5", " 5 ", "\u0665", "0x10"),
    *("-9223372036854775809", "-9223372036854775808", "-2", "-1", "0", "1"),
    *("47", "48", "63", "64", "2147483647", "2147483648"),
    *("9223372036854775807", "9223372036854775808"),
    *("delete", "compact", "compact, delete", " delete ,compact", "delete,", "compact,,delete"),
    *("0.5", ".25", "1.0", "1.00001", "-0.0", "5e-1", "0.5d", "NaN", "Infinity", "0x1p-1"),
    *("Delete", "forever", "CreateTime", " LogAppendTime ", "createtime"),
]


def controller_accepts(key: str, value: str) -> bool:
    try:
        TOPIC_CONFIGS[key].parse(value)
    except ValueError:
        return False
    return True


def log_accepts(key: str, value: str) -> bool:
    try:
        LogConfig.from_properties({key: value})
    except ConfigError:
        return False
    return True


def test_the_table_covers_every_log_setting_of_a_topic() -> None:
    assert LOG_TOPIC_KEYS == [
        "cleanup.policy",
        "delete.retention.ms",
        "flush.messages",
        "flush.ms",
        "index.interval.bytes",
        "max.compaction.lag.ms",
        "max.message.bytes",
        "message.timestamp.type",
        "min.cleanable.dirty.ratio",
        "min.compaction.lag.ms",
        "retention.bytes",
        "retention.ms",
        "segment.bytes",
        "segment.index.bytes",
        "segment.ms",
    ]


def legacy_spelling(value: str) -> bool:
    """An integer Python reads and Kafka does not (`1_000_000`, other scripts' digits): the
    controller accepted such values until it was made to refuse them, so the brokers still
    read a stored one (a topic config must never fall back to the default for it)."""
    try:
        int(value.strip())
    except ValueError:
        return False
    return True


def stored_accepted(key: str, value: str) -> bool:
    """Whether a broker applies `value` stored in a topic's configs."""
    return not LogConfig().with_each_valid({key: value})[1]


def agree(key: str, value: str) -> None:
    # server.properties and the controller read exactly the same values; a broker reading a
    # stored topic config also reads the legacy spellings the controller once accepted.
    assert log_accepts(key, value) == controller_accepts(key, value)
    if controller_accepts(key, value):
        assert stored_accepted(key, value)
    elif stored_accepted(key, value):
        assert legacy_spelling(value)


@pytest.mark.parametrize("key", LOG_TOPIC_KEYS)
@pytest.mark.parametrize("value", SAMPLE_VALUES)
def test_the_log_accepts_what_the_controller_accepts(key: str, value: str) -> None:
    agree(key, value)


def test_a_stored_legacy_spelling_keeps_its_value() -> None:
    # The controller refuses it now; a broker must not drop a stored one to its default. In
    # server.properties it is refused as Kafka refuses it.
    assert not controller_accepts("retention.ms", "2_592_000_000")
    stored, refused = LogConfig().with_each_valid({"retention.ms": "2_592_000_000"})
    assert (stored.retention_ms, refused) == (2_592_000_000, [])
    with pytest.raises(
        ConfigError, match=re.escape("retention.ms='2_592_000_000': must be an integer")
    ):
        LogConfig.from_properties({"retention.ms": "2_592_000_000"})


@given(
    key=st.sampled_from(LOG_TOPIC_KEYS),
    value=st.one_of(
        st.integers(min_value=-(2**65), max_value=2**65).map(str),
        st.lists(st.sampled_from(["delete", "compact", " delete", "compact ", "", "x"])).map(
            ",".join
        ),
        st.text(alphabet="0123456789-+_ ,", max_size=8),
    ),
)
def test_the_log_and_the_controller_agree_on_any_value(key: str, value: str) -> None:
    agree(key, value)


@pytest.mark.parametrize(
    ("policy", "stored", "deletes"),
    [
        ("delete", "delete", True),
        ("compact, delete", "compact,delete", True),
        (" delete ,compact", "delete,compact", True),
        ("compact", "compact", False),
        ("", "", False),  # Kafka's empty list: neither delete nor compact
    ],
)
def test_cleanup_policy_is_a_trimmed_list_and_may_be_empty(
    policy: str, stored: str, deletes: bool
) -> None:
    config = LogConfig.from_properties({"cleanup.policy": policy})
    assert (config.cleanup_policy, config.deletes_by_retention) == (stored, deletes)
    assert LogConfig(cleanup_policy=policy).deletes_by_retention == deletes


def test_an_empty_cleanup_policy_deletes_nothing_by_retention(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    config = small_config(segment_bytes=1024, retention_ms=0, retention_bytes=0)
    empty = LogConfig.from_properties({"cleanup.policy": ""}, config)
    log = open_log(tmp_path / "t-0", empty, clock=clock)
    append_batches(log, 40, timestamp_step=1000)
    log.high_watermark = log.log_end_offset
    clock.advance(10**9)  # every segment past retention.ms=0, every byte past retention.bytes=0
    assert log.segment_count > 1
    assert log.delete_old_segments() == 0
    log.increment_log_start_offset(log.segments()[1].base_offset)
    assert log.delete_old_segments() == 1  # below the log start offset: gone, as in Kafka


@pytest.mark.parametrize("value", ["-1", "-2", "-9223372036854775808"])
def test_any_negative_retention_bytes_is_no_limit(value: str) -> None:
    for key in ("retention.bytes", "log.retention.bytes"):
        assert LogConfig.from_properties({key: value}).retention_bytes == int(value)


@pytest.mark.parametrize(
    ("key", "value", "retention_ms"),
    [
        ("log.retention.hours", "-1", -1),
        ("log.retention.hours", "-5", -1),
        ("log.retention.minutes", "-1", -1),
        ("log.retention.ms", "-7", -1),
        ("log.retention.hours", "2", 7_200_000),
        ("log.retention.minutes", "0", 0),
    ],
)
def test_a_negative_broker_retention_time_keeps_forever(
    key: str, value: str, retention_ms: int
) -> None:
    # Kafka's broker reads any negative retention time as -1; the topic's own must be >= -1.
    assert LogConfig.from_properties({key: value}).retention_ms == retention_ms
    with pytest.raises(ConfigError, match=re.escape("retention.ms='-2': must be an integer >= -1")):
        LogConfig.from_properties({"retention.ms": "-2"})


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("log.segment.bytes", "10", "log.segment.bytes='10': must be an integer >= 64"),
        ("segment.bytes", "1_000_000", "segment.bytes='1_000_000': must be an integer"),
        ("log.retention.hours", "abc", "log.retention.hours='abc': must be an integer"),
        ("log.roll.hours", "0", "log.roll.hours='0': must be an integer >= 1"),
        ("message.max.bytes", "2147483648", "message.max.bytes='2147483648': must be at most"),
        ("log.cleanup.policy", "delete,forever", "log.cleanup.policy='delete,forever': accepted"),
    ],
)
def test_errors_name_the_key_as_written(key: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        LogConfig.from_properties({key: value})


def test_with_each_valid_keeps_the_good_keys_and_reports_the_bad_one() -> None:
    base = LogConfig()
    config, refused = base.with_each_valid(
        {"retention.ms": "-1", "segment.bytes": "10", "max.message.bytes": "100", "other": "x"}
    )
    assert (config.retention_ms, config.max_message_bytes) == (-1, 100)
    assert config.segment_bytes == base.segment_bytes
    assert [str(error) for error in refused] == ["segment.bytes='10': must be an integer >= 64"]


# --- LogManagerConfig ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("properties", "flush_ms"),
    [
        ({}, LONG_MAX),
        ({"log.flush.scheduler.interval.ms": "2000"}, 2000),
        ({"log.flush.scheduler.interval.ms": "2000", "log.flush.interval.ms": "500"}, 500),
        ({"log.flush.scheduler.interval.ms": "2000", "flush.ms": "700"}, 700),
        ({"log.flush.interval.ms": "300"}, 300),
    ],
)
def test_an_unset_flush_interval_is_the_flush_schedulers(
    properties: dict[str, str], flush_ms: int
) -> None:
    # Kafka: logFlushIntervalMs is log.flush.interval.ms if set, else the scheduler's period.
    assert LogManagerConfig.from_properties(properties).log.flush_interval_ms == flush_ms


@pytest.mark.parametrize(
    ("key", "value", "minimum"),
    [
        ("log.retention.check.interval.ms", "-1", 1),
        ("log.retention.check.interval.ms", "0", 1),
        ("log.initial.task.delay.ms", "-7", 0),
        ("log.flush.offset.checkpoint.interval.ms", "0", 1),
        ("log.flush.start.offset.checkpoint.interval.ms", "-1", 1),
        ("log.flush.scheduler.interval.ms", "0", 1),
        ("replica.high.watermark.checkpoint.interval.ms", "-5", 1),
    ],
)
def test_log_manager_settings_have_lower_bounds(key: str, value: str, minimum: int) -> None:
    with pytest.raises(ConfigError, match=re.escape(f"{key}={value}: must be at least {minimum}")):
        LogManagerConfig.from_properties({key: value})


def test_a_broker_refuses_a_default_min_compaction_lag_above_the_max() -> None:
    with pytest.raises(ConfigError, match=re.escape("min.compaction.lag.ms (2) > log.cleaner.")):
        LogManagerConfig.from_properties(
            {"log.cleaner.min.compaction.lag.ms": "2", "log.cleaner.max.compaction.lag.ms": "1"}
        )
    config = LogManagerConfig.from_properties({"log.cleaner.min.compaction.lag.ms": "2"})
    assert config.log.min_compaction_lag_ms == 2


def test_log_manager_settings_at_their_bounds_are_accepted() -> None:
    config = LogManagerConfig.from_properties(
        {"log.initial.task.delay.ms": "0", "log.retention.check.interval.ms": "1"}
    )
    assert (config.initial_task_delay_ms, config.retention_check_interval_ms) == (0, 1)
