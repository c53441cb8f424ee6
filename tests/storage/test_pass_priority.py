"""The priority of a cleaning pass (replog/storage/cleaner/pass_priority.py): idle until its log
is past max.compaction.lag.ms, has been cleanable for the idle wait, or has grown to three
times its clean size (twice what qualifies it, for a strict minimum ratio); an idle pass is
promoted when the earlier of the first two comes, or once its log reaches the size of the
third; the since-when of each log."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from storage_helpers import T0

from replog.storage.cleaner.cleanable import (
    CompactedLogSummary,
    LogToClean,
    SegmentSummary,
    log_to_clean,
)
from replog.storage.cleaner.pass_priority import (
    IDLE,
    URGENT,
    CleanableSince,
    grown_too_far,
    pass_priority,
    promotion_bytes,
    promotion_ms,
    urgent_dirty_ratio,
)

HOUR = 3_600_000
MINUTE = 60_000
NO_LAG = 2**63 - 1


def summary(
    sizes: list[int], *, ratio: float = 0.5, max_lag: int = NO_LAG, stamp: int = T0
) -> CompactedLogSummary:
    """Segments of `sizes` bytes at offsets 0, 100, ... (the last one active)."""
    segments = [SegmentSummary(i * 100, size, stamp, stamp) for i, size in enumerate(sizes)]
    end = (len(sizes) - 1) * 100 + 50
    return CompactedLogSummary("t-0", segments, 0, end, end, ratio, 0, max_lag)


def candidate(clean: int, dirty: int, *, ratio: float = 0.5, now: int = T0) -> LogToClean:
    """A log with `clean` clean bytes before offset 100 (none: cleaned never) and `dirty`
    cleanable bytes."""
    if clean:
        return log_to_clean(summary([clean, dirty, 10], ratio=ratio), 100, now)
    return log_to_clean(summary([dirty, 10], ratio=ratio), None, now)


def test_a_pass_runs_idle_until_its_log_is_past_the_max_compaction_lag() -> None:
    log = summary([1000, 1000, 1000, 10], ratio=0.01, max_lag=HOUR)
    on_time = log_to_clean(log, 200, T0 + HOUR)
    overdue = log_to_clean(log, 200, T0 + HOUR + 1)
    assert on_time.qualifies and overdue.qualifies
    assert pass_priority(on_time, T0 + HOUR, T0 + HOUR, MINUTE) == IDLE
    assert pass_priority(overdue, T0 + HOUR + 1, T0 + HOUR + 1, MINUTE) == URGENT
    assert promotion_ms(on_time, T0 + HOUR, 10 * MINUTE) == T0 + HOUR + 1  # the lag's first


def test_a_log_cleanable_for_the_idle_wait_gets_an_urgent_pass() -> None:
    log = candidate(1000, 1500)
    assert log.qualifies and not grown_too_far(log)
    assert pass_priority(log, T0, T0 + MINUTE - 1, MINUTE) == IDLE
    assert pass_priority(log, T0, T0 + MINUTE, MINUTE) == URGENT
    assert promotion_ms(log, T0, MINUTE) == T0 + MINUTE
    assert pass_priority(log, T0, T0, 0) == URGENT  # no wait: every pass urgent


def test_a_log_grown_to_three_times_its_clean_size_is_urgent_at_once() -> None:
    assert pass_priority(candidate(1000, 1999), T0, T0, MINUTE) == IDLE
    assert pass_priority(candidate(1000, 2000), T0, T0, MINUTE) == URGENT
    # A strict minimum: twice the dirty bytes that qualify (0.9 qualifies at 9x the clean).
    assert urgent_dirty_ratio(0.9) == 2 * 0.9 / 1.9
    assert pass_priority(candidate(100, 1799, ratio=0.9), T0, T0, MINUTE) == IDLE
    assert pass_priority(candidate(100, 1801, ratio=0.9), T0, T0, MINUTE) == URGENT
    # A lax one asks for prompt cleaning, not for more urgency: still 2x the clean bytes.
    assert urgent_dirty_ratio(0.01) == 2 / 3
    assert pass_priority(candidate(1000, 1000, ratio=0.01), T0, T0, MINUTE) == IDLE


def test_an_idle_pass_is_promoted_once_its_log_reaches_three_times_its_clean_size() -> None:
    assert promotion_bytes(candidate(1000, 1500)) == 3000
    assert promotion_bytes(candidate(100, 1000, ratio=0.9)) == 1900  # 100 / (1 - 18/19)
    assert promotion_bytes(candidate(0, 1000)) is None  # never cleaned: the wait bounds it
    # A choice over the log at that size makes the pass urgent.
    grown = candidate(1000, 3000 - 1000)
    assert grown.total_bytes == 3000 and grown_too_far(grown)


def test_a_never_cleaned_log_waits_out_the_idle_wait() -> None:
    first = candidate(0, 10**9)
    assert first.dirty_ratio == 1.0 and not grown_too_far(first)
    assert pass_priority(first, T0, T0, MINUTE) == IDLE
    assert pass_priority(first, T0, T0 + MINUTE, MINUTE) == URGENT


def test_the_since_of_a_log_runs_from_the_first_round_that_saw_it_qualify() -> None:
    since: CleanableSince[str] = CleanableSince()
    since.observe([("a", True), ("b", False)], T0)
    since.observe([("a", True), ("b", True)], T0 + 5)
    assert (since.since("a", T0 + 9), since.since("b", T0 + 9)) == (T0, T0 + 5)
    since.observe([("b", True)], T0 + 7)  # `a` not measured (its pass runs): kept
    assert since.since("a", T0 + 9) == T0
    since.cleaned("a")
    since.observe([("b", False)], T0 + 8)
    assert (since.since("a", T0 + 9), since.since("b", T0 + 9)) == (T0 + 9, T0 + 9)


ratios = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


@given(ratios)
def test_the_urgent_ratio_is_twice_the_qualifying_dirt_and_at_least_twice_the_clean(
    m: float,
) -> None:
    urgent = urgent_dirty_ratio(m)
    assert max(m, 2 / 3) <= urgent <= 1.0
    # As dirty bytes per clean byte, r / (1 - r), multiplied out: >= 2, >= 2 m / (1 - m).
    assert urgent >= 2 * (1 - urgent) - 1e-9
    assert urgent * (1 - m) >= 2 * m * (1 - urgent) - 1e-9


@given(
    sizes=st.lists(st.integers(1, 10_000), min_size=2, max_size=6),
    checkpoint=st.sampled_from([None, 100, 200]),
    ratio=ratios,
    max_lag=st.sampled_from([NO_LAG, HOUR, 0]),
    since_ago=st.integers(0, 2 * HOUR),
    wait=st.integers(0, 2 * HOUR),
    later=st.lists(st.integers(0, HOUR), min_size=1, max_size=5),
)
def test_once_urgent_a_log_stays_urgent_and_none_waits_past_its_promotion(
    sizes: list[int],
    checkpoint: int | None,
    ratio: float,
    max_lag: int,
    since_ago: int,
    wait: int,
    later: list[int],
) -> None:
    log = summary(sizes, ratio=ratio, max_lag=max_lag)
    since = T0 - since_ago
    now = T0
    was = IDLE
    for step in [0, *later]:
        now += step
        chosen = log_to_clean(log, checkpoint, now)
        priority = pass_priority(chosen, since, now, wait)
        assert not (was == URGENT and priority == IDLE)  # time only promotes
        if now >= promotion_ms(chosen, since, wait):
            assert priority == URGENT  # no log starves past its promotion
        idle_reasons = (chosen.needs_compaction_now, grown_too_far(chosen), now >= since + wait)
        assert (priority == URGENT) == any(idle_reasons)
        was = priority
