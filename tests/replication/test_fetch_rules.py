"""The leader's read decisions (docs/design/replication.md#offsetsforleaderepoch,
#truncate-on-fetch, #read-bounds, #answer-now-or-wait): every rule, with error messages."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from replog.errors import FencedLeaderEpochError, OffsetOutOfRangeError, UnknownLeaderEpochError
from replog.replication.fetch_rules import (
    WOKEN_COMPLETE,
    WOKEN_READ,
    WOKEN_WAIT,
    answer_immediately,
    check_current_leader_epoch,
    check_fetch_offset,
    diverging_epoch,
    fetch_upper_bound,
    woken_fetch_verdict,
)
from replog.replication.messages import EpochEndOffsetResult, IsolationLevel

WHERE = "orders-3"

# --- current leader epoch fencing -----------------------------------------------------------


def test_an_unchecked_epoch_passes_whatever_the_local_epoch() -> None:
    for local in (0, 5, 100):
        for absent in (-1, -2, -(2**31)):  # Kafka reads any negative epoch as none sent
            check_current_leader_epoch(WHERE, absent, local)


def test_the_current_epoch_passes() -> None:
    check_current_leader_epoch(WHERE, 5, 5)


def test_an_older_request_epoch_is_fenced() -> None:
    with pytest.raises(FencedLeaderEpochError, match=r"orders-3: request leader epoch 4 .* 5"):
        check_current_leader_epoch(WHERE, 4, 5)


def test_a_newer_request_epoch_is_unknown() -> None:
    with pytest.raises(UnknownLeaderEpochError, match=r"orders-3: request leader epoch 6 .* 5"):
        check_current_leader_epoch(WHERE, 6, 5)


@given(st.integers(-3, 50), st.integers(0, 50))
def test_fencing_against_a_three_way_model(request_epoch: int, local_epoch: int) -> None:
    expected: type[Exception] | None
    if request_epoch < 0 or request_epoch == local_epoch:
        expected = None
    elif request_epoch < local_epoch:
        expected = FencedLeaderEpochError
    else:
        expected = UnknownLeaderEpochError
    try:
        check_current_leader_epoch(WHERE, request_epoch, local_epoch)
        raised: type[Exception] | None = None
    except (FencedLeaderEpochError, UnknownLeaderEpochError) as error:
        raised = type(error)
    assert raised is expected


# --- diverging epoch, leader side (docs/design/replication.md#truncate-on-fetch) ------------------


def check(
    fetch_offset: int, last_fetched_epoch: int, answer: tuple[int, int], log_start_offset: int = 0
) -> EpochEndOffsetResult | None:
    return diverging_epoch(
        WHERE,
        fetch_offset=fetch_offset,
        last_fetched_epoch=last_fetched_epoch,
        leader_end_offset_for_last_epoch=answer,
        log_start_offset=log_start_offset,
    )


def test_no_last_fetched_epoch_skips_the_check() -> None:
    # Even an unknown epoch and a fetch offset below the log start: the normal range check
    # handles those for fetchers that send no epoch.
    assert check(3, -1, (-1, -1), log_start_offset=10) is None
    assert check(3, -2, (-2, 0), log_start_offset=0) is None  # any negative epoch is none sent


@pytest.mark.parametrize("answer", [(-1, -1), (-1, 7), (3, -1)])
def test_an_epoch_the_leader_cannot_place_is_out_of_range(answer: tuple[int, int]) -> None:
    with pytest.raises(OffsetOutOfRangeError, match=r"orders-3: .*epoch 4 \(fetch offset 9\)"):
        check(9, 4, answer)


def test_a_fetch_below_the_log_start_is_out_of_range_even_without_divergence() -> None:
    with pytest.raises(OffsetOutOfRangeError, match=r"orders-3: fetch offset 4 .* start offset 6"):
        check(4, 2, (2, 20), log_start_offset=6)


def test_a_fetch_below_the_log_start_is_out_of_range_when_divergent_too() -> None:
    with pytest.raises(OffsetOutOfRangeError, match="fetch offset 4"):
        check(4, 3, (2, 3), log_start_offset=6)


def test_the_leader_ends_the_epoch_earlier_is_divergent() -> None:
    assert check(9, 4, (4, 7)) == EpochEndOffsetResult(4, 7)


def test_the_leader_has_only_an_older_epoch_is_divergent() -> None:
    # Even when that older epoch ends at or past the fetch offset.
    assert check(9, 4, (3, 12)) == EpochEndOffsetResult(3, 12)


@pytest.mark.parametrize("end_offset", [9, 15])
def test_same_epoch_ending_at_or_after_the_fetch_offset_reads_normally(end_offset: int) -> None:
    assert check(9, 4, (4, end_offset)) is None


def test_the_fetch_offset_at_the_log_start_is_fine() -> None:
    assert check(6, 2, (2, 20), log_start_offset=6) is None


# --- read bounds and offset range -----------------------------------------------------------


@pytest.mark.parametrize(
    ("is_follower", "isolation_level", "expected"),
    [
        (True, IsolationLevel.READ_UNCOMMITTED, 30),
        (True, IsolationLevel.READ_COMMITTED, 30),
        (False, IsolationLevel.READ_UNCOMMITTED, 20),
        (False, IsolationLevel.READ_COMMITTED, 10),
    ],
)
def test_fetch_upper_bound(
    is_follower: bool, isolation_level: IsolationLevel, expected: int
) -> None:
    bound = fetch_upper_bound(
        is_follower=is_follower,
        isolation_level=isolation_level,
        log_end_offset=30,
        high_watermark=20,
        last_stable_offset=10,
    )
    assert bound == expected


@pytest.mark.parametrize("fetch_offset", [5, 6, 12, 20])
def test_fetch_offsets_inside_the_log_pass(fetch_offset: int) -> None:
    check_fetch_offset(WHERE, fetch_offset=fetch_offset, log_start_offset=5, log_end_offset=20)


@pytest.mark.parametrize("fetch_offset", [-1, 4, 21, 1000])
def test_fetch_offsets_outside_the_log_are_out_of_range(fetch_offset: int) -> None:
    with pytest.raises(
        OffsetOutOfRangeError, match=rf"orders-3: fetch offset {fetch_offset} .*\[5, 20\]"
    ):
        check_fetch_offset(WHERE, fetch_offset=fetch_offset, log_start_offset=5, log_end_offset=20)


# --- answer now or park (docs/design/replication.md#answer-now-or-wait) --------------------------

PARKED = {
    "max_wait_ms": 500,
    "partition_count": 2,
    "bytes_read": 0,
    "min_bytes": 1,
    "any_error": False,
    "any_diverging": False,
}


def test_a_fetch_with_nothing_to_say_is_parked() -> None:
    assert answer_immediately(**PARKED) is False


@pytest.mark.parametrize(
    "change",
    [
        {"max_wait_ms": 0},
        {"max_wait_ms": -1},
        {"partition_count": 0},
        {"bytes_read": 1},
        {"bytes_read": 5000, "min_bytes": 4096},
        {"any_error": True},
        {"any_diverging": True},
    ],
)
def test_each_reason_answers_at_once(change: dict[str, int | bool]) -> None:
    assert answer_immediately(**{**PARKED, **change}) is True


def test_fewer_bytes_than_min_bytes_still_waits() -> None:
    assert answer_immediately(**{**PARKED, "bytes_read": 4095, "min_bytes": 4096}) is False


def _verdict(**overrides: int) -> str:
    facts: dict[str, int] = {
        "request_leader_epoch": 5,
        "leader_epoch": 5,
        "fetch_offset": 10,
        "last_fetched_epoch": -1,
        "log_end_offset": 12,
        "high_watermark": 10,
        "log_start_offset": 0,
    }
    facts.update(overrides)
    is_follower = bool(facts.pop("is_follower", 1))
    end = (facts.pop("end_epoch", 5), facts.pop("end_offset", 12))
    return woken_fetch_verdict(is_follower=is_follower, end_offset_for=lambda _: end, **facts)


def test_a_woken_fetch_with_data_below_its_bound_reads_again() -> None:
    assert _verdict() == WOKEN_READ  # a follower reads up to the LEO, 12
    assert _verdict(is_follower=0) == WOKEN_WAIT  # a consumer up to the HW, 10


def test_a_woken_fetch_completes_on_a_fenced_epoch_an_offset_out_of_bounds_or_divergence() -> None:
    assert _verdict(request_leader_epoch=4) == WOKEN_COMPLETE
    assert _verdict(request_leader_epoch=-1) == WOKEN_READ  # none sent: not checked
    assert _verdict(fetch_offset=13) == WOKEN_COMPLETE
    assert _verdict(log_start_offset=11) == WOKEN_COMPLETE
    assert _verdict(last_fetched_epoch=5, end_epoch=4) == WOKEN_COMPLETE
    assert _verdict(last_fetched_epoch=5, end_offset=9) == WOKEN_COMPLETE
    assert _verdict(last_fetched_epoch=5) == WOKEN_READ
