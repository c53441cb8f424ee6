"""The replication throttle's core (`replication_quota`): Kafka's `ReplicationQuotaManagerTest`
scenarios, its throttled-replicas parsing and validation, and properties of the rate."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replog.quorum.controller.config_definitions import BROKER_CONFIGS, TOPIC_CONFIGS
from replog.replication.replication_quota import (
    ALL_PARTITIONS,
    UNBOUNDED,
    ReplicationQuota,
    SampledRate,
    effective_rate,
    throttled_partitions,
)


def test_the_rate_exceeds_the_bound_then_falls_back_below_it_as_time_passes() -> None:
    # Kafka's shouldExceedQuotaThenReturnBackBelowBoundAsTimePasses, step by step.
    quota = ReplicationQuota(window_num=10, window_ms=1000)
    quota.bound = 100
    now = 0
    assert not quota.is_exceeded(now)  # the window starts at this first look
    now += 1500
    quota.record(1, now)
    assert not quota.is_exceeded(now)
    quota.record(149, now)  # 150 B in 1.5 s
    assert not quota.is_exceeded(now)
    quota.record(1, now)  # 151 B in 1.5 s
    assert quota.rate(now) == 151 / 1.5
    assert quota.is_exceeded(now)
    now += 500  # 151 B in 2 s
    assert not quota.is_exceeded(now)
    assert quota.rate(now) == pytest.approx(151 / 2, abs=0.1)
    now += 500
    quota.record(99, now)  # 250 B in 2.5 s: at the bound, not over it
    assert quota.rate(now) == 250 / 2.5
    assert not quota.is_exceeded(now)
    quota.record(1, now)
    assert quota.is_exceeded(now)
    assert quota.rate(now) == 251 / 2.5
    now += 2000
    assert not quota.is_exceeded(now)
    assert quota.rate(now) == 251 / 4.5


def test_only_the_named_partitions_are_throttled_and_star_names_all() -> None:
    quota = ReplicationQuota()
    quota.set_throttled("topic1", frozenset({1, 2, 3}))
    assert [quota.is_throttled("topic1", p) for p in range(5)] == [False, True, True, True, False]
    quota.set_throttled("MyTopic", ALL_PARTITIONS)
    assert quota.is_throttled("MyTopic", 0) and quota.is_throttled("MyTopic", 77)
    assert not quota.is_throttled("MyOtherTopic", 0)
    quota.set_throttled("MyTopic", frozenset())  # cleared
    assert not quota.is_throttled("MyTopic", 0)
    assert set(quota.throttled) == {"topic1"}


def test_a_leader_throttles_only_out_of_sync_replicas_of_named_partitions_over_the_bound() -> None:
    quota = ReplicationQuota()
    quota.set_throttled("t", frozenset({0}))
    quota.bound = 0
    quota.record(1, 0)
    assert quota.throttles_leader_read("t", 0, in_sync=False, now_ms=0)
    assert not quota.throttles_leader_read("t", 0, in_sync=True, now_ms=0)  # an ISR member
    assert not quota.throttles_leader_read("t", 1, in_sync=False, now_ms=0)  # not named
    quota.bound = UNBOUNDED
    assert not quota.throttles_leader_read("t", 0, in_sync=False, now_ms=0)  # within the bound


def test_no_bound_is_never_exceeded_and_a_bound_of_zero_stops_at_the_first_byte() -> None:
    quota = ReplicationQuota()
    quota.record(10**15, 0)
    assert quota.bound == UNBOUNDED and not quota.is_exceeded(0)
    quota.bound = 0
    assert quota.is_exceeded(0)
    fresh = ReplicationQuota()
    fresh.bound = 0
    assert not fresh.is_exceeded(0)  # nothing sent yet: 0 B/s is within 0


def test_a_sample_without_events_for_the_whole_window_restarts() -> None:
    rate = SampledRate(window_num=11, window_ms=1000)
    rate.record(11_000, 0)
    assert rate.measure(0) == 11_000  # one window at least
    assert rate.measure(10_999) == pytest.approx(11_000 / 10.999)
    assert rate.measure(11_000) == 0  # 11 windows since its last event: forgotten


def test_throttled_replicas_are_this_brokers_pairs() -> None:
    value = "0:101, 1:102 ,2:101,3:103"
    assert throttled_partitions(value, 101) == {0, 2}
    assert throttled_partitions(value, 102) == {1}
    assert throttled_partitions(value, 104) == frozenset()
    assert throttled_partitions(" * ", 5) is ALL_PARTITIONS
    assert throttled_partitions("", 5) == frozenset()


@pytest.mark.parametrize("value", ["0:1,x", "*,0:1", "0-1", "0:1:2", "a:b", "**"])
def test_a_malformed_throttled_replicas_value_is_refused_in_kafkas_words(value: str) -> None:
    expected = "must be the literal '\\*' or a list of replicas in the following format"
    with pytest.raises(ValueError, match=expected):
        throttled_partitions(value, 1)
    for name in (
        "leader.replication.throttled.replicas",
        "follower.replication.throttled.replicas",
    ):
        with pytest.raises(ValueError, match=expected):
            TOPIC_CONFIGS[name].parse(value)


def test_the_four_throttle_keys_and_the_window_are_configs_with_kafkas_defaults() -> None:
    for name in (
        "leader.replication.throttled.replicas",
        "follower.replication.throttled.replicas",
    ):
        assert TOPIC_CONFIGS[name].default == ""
        assert TOPIC_CONFIGS[name].parse("0:1, 1:2") == ("0:1", "1:2")
        assert TOPIC_CONFIGS[name].parse("*") == ("*",)
    for name in ("leader.replication.throttled.rate", "follower.replication.throttled.rate"):
        definition = BROKER_CONFIGS[name]
        assert definition.default == str(UNBOUNDED) and definition.dynamic
        with pytest.raises(ValueError, match="at least 0"):
            definition.parse("-1")
    assert BROKER_CONFIGS["replication.quota.window.num"].default == "11"
    assert BROKER_CONFIGS["replication.quota.window.size.seconds"].default == "1"
    assert not BROKER_CONFIGS["replication.quota.window.num"].dynamic


def test_the_rate_comes_from_the_strongest_level_that_sets_a_valid_value() -> None:
    key = "leader.replication.throttled.rate"
    assert effective_rate([{}, {}], key) == (UNBOUNDED, [])
    assert effective_rate([{}, {key: "500"}, {key: "7"}], key) == (500, [])
    assert effective_rate([{key: "lots"}, {key: "-3"}, {key: "7"}], key) == (7, ["lots", "-3"])


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 3000), st.integers(0, 10**6)),
        min_size=1,
        max_size=60,
    ),
    st.integers(1, 12),
    st.integers(1, 3000),
)
def test_the_rate_is_the_kept_bytes_over_at_least_one_window(
    steps: list[tuple[int, int]], window_num: int, window_ms: int
) -> None:
    # Whatever the pattern: never negative, never more than every byte recorded over one
    # window, and every byte of the last window is counted.
    rate = SampledRate(window_num, window_ms)
    now = 0
    recorded = []
    for gap, size in steps:
        now += gap
        rate.record(size, now)
        recorded.append((now, size))
    measured = rate.measure(now)
    total = sum(size for _, size in recorded)
    assert 0 <= measured <= total / (window_ms / 1000) + 1e-6
    recent = sum(size for at, size in recorded if now - at < window_ms)
    elapsed = max(now - min(at for at, _ in recorded), window_ms)
    assert measured >= recent / (max(elapsed, (window_num + 1) * window_ms) / 1000) - 1e-6


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 1500), st.integers(0, 5000), st.sampled_from([0, 100, 1000])),
        min_size=1,
        max_size=40,
    )
)
def test_the_verdict_is_the_rate_against_the_bound_at_every_step(
    steps: list[tuple[int, int, int]],
) -> None:
    # Asked again at the same time, after a record or a new bound, it still says what the
    # rate says (it keeps its last answer only while nothing it depends on moved).
    quota = ReplicationQuota(window_num=3, window_ms=1000)
    now = 0
    for gap, size, bound in steps:
        now += gap
        assert quota.is_exceeded(now) == (
            quota.bound != UNBOUNDED and quota.rate(now) > quota.bound
        )
        quota.bound = bound
        assert quota.is_exceeded(now) == (quota.rate(now) > bound)
        quota.record(size, now)
        assert quota.is_exceeded(now) == (quota.rate(now) > bound)
