"""`coordinator_wait`: how `replog consumer-groups` waits out a group coordinator that is not
ready, on a clock of the test's own: the three coordinator errors asked again with a growing,
capped backoff never past the timeout, then the last one naming the timeout; any other error at
once; a note of what it waits for after a few seconds, then not again for a while."""

from __future__ import annotations

import pytest

from replog.cli.coordinator_wait import (
    BACKOFF_MAX_MS,
    BACKOFF_MS,
    NOTE_AFTER_MS,
    NOTE_EVERY_MS,
    TIMEOUT_MS_DEFAULT,
    CoordinatorWait,
)
from replog.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    GroupIdNotFoundError,
    NetworkError,
    NotCoordinatorError,
)

WHAT = "describing group 'g'"
NOT_YET = CoordinatorNotAvailableError("__consumer_offsets does not exist yet")


def test_a_fresh_clusters_coordinator_errors_are_waited_out_with_a_growing_backoff() -> None:
    wait = CoordinatorWait(WHAT, now_ms=0)
    assert wait.timeout_ms == TIMEOUT_MS_DEFAULT == 30_000  # kafka-consumer-groups' default
    now, delays = 0, []
    for error in (
        NOT_YET,
        NOT_YET,
        CoordinatorLoadInProgressError("loading __consumer_offsets-3"),
        NotCoordinatorError("moved"),
        *[NOT_YET] * 6,
    ):
        delay = wait.failed(error, now)
        delays.append(delay)
        now += delay
    assert delays[:5] == [BACKOFF_MS, 2 * BACKOFF_MS, 4 * BACKOFF_MS, 8 * BACKOFF_MS, 1000]
    assert max(delays) == BACKOFF_MAX_MS
    assert isinstance(wait.last, CoordinatorNotAvailableError)


@pytest.mark.parametrize(
    "error", [GroupIdNotFoundError("no group 'g'"), NetworkError("127.0.0.1:1: refused")]
)
def test_any_other_error_ends_the_call_at_once(error: Exception) -> None:
    wait = CoordinatorWait(WHAT, now_ms=0)
    with pytest.raises(type(error)) as raised:
        wait.failed(error, 0)  # type: ignore[arg-type]
    assert raised.value is error


def test_past_the_timeout_the_last_error_ends_it_naming_the_timeout() -> None:
    wait = CoordinatorWait(WHAT, now_ms=1000, timeout_ms=500)
    assert wait.failed(NOT_YET, 1000) == BACKOFF_MS
    assert wait.failed(NOT_YET, 1450) == 50  # never past the timeout
    with pytest.raises(CoordinatorLoadInProgressError) as raised:
        wait.failed(CoordinatorLoadInProgressError("loading"), 1500)
    assert str(raised.value) == (
        "describing group 'g': the group coordinator was not ready within 500 ms "
        "(--timeout): loading"
    )
    assert raised.value.retriable


def test_a_long_wait_says_what_it_waits_for_then_not_again_for_a_while() -> None:
    wait = CoordinatorWait(WHAT, now_ms=0)
    assert wait.note(NOTE_AFTER_MS) is None  # nothing failed: nothing waited for
    wait.failed(NOT_YET, 10)
    assert wait.note(NOTE_AFTER_MS - 1) is None
    assert wait.note(NOTE_AFTER_MS) == (
        f"describing group 'g': waiting for the group coordinator ({NOTE_AFTER_MS / 1000:.1f} s "
        f"so far, {(30_000 - NOTE_AFTER_MS) / 1000:.1f} s left of --timeout 30000 ms): "
        "__consumer_offsets does not exist yet"
    )
    assert wait.note(NOTE_AFTER_MS + NOTE_EVERY_MS - 1) is None
    assert wait.note(NOTE_AFTER_MS + NOTE_EVERY_MS) is not None


def test_the_timeout_must_be_positive() -> None:
    with pytest.raises(ValueError, match="--timeout must be positive, not 0 ms"):
        CoordinatorWait(WHAT, now_ms=0, timeout_ms=0)
