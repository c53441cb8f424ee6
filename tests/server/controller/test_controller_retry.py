"""`controller_retry`: a request to the active controller through an election, on a clock of
the test's own.

Scenarios: an election longer than `controller.quorum.request.timeout.ms` (the old controller
unreachable, the others NOT_CONTROLLER naming none, then one elected) keeps going round the
voters with a growing, capped backoff and is answered; a NOT_CONTROLLER naming the active
controller goes there at once; the request gives up at its own timeout naming the last
failure, and an attempt cut short by that timeout leaves the earlier failure named; a wait past
a few seconds says what it waits for, then not again for a while; a forwarded client request
takes its own timeout, or Kafka's request.timeout.ms without one.
"""

from __future__ import annotations

import pytest

from replog.errors import NetworkError, NotControllerError, RequestTimedOutError
from replog.server.controller.controller_retry import (
    FORWARD_TIMEOUT_MS_DEFAULT,
    NOTE_AFTER_MS,
    NOTE_EVERY_MS,
    ActiveController,
    ControllerRetry,
    forward_timeout_ms,
)

WHAT = "AlterPartitionReassignments from a Kafka client of broker 4"


def retry(
    timeout_ms: int, hint: list[int | None] | None = None, now_ms: int = 0
) -> ControllerRetry:
    leader = [None] if hint is None else hint
    return ControllerRetry(
        WHAT,
        ActiveController([1, 2, 3], lambda: leader[0]),
        now_ms=now_ms,
        timeout_ms=timeout_ms,
        retry_backoff_ms=50,
        retry_backoff_max_ms=1000,
    )


def unreachable(node: int) -> NetworkError:
    return NetworkError(f"controller {node} at 127.0.0.1:{node}: UNAVAILABLE: refused")


def not_controller(node: int) -> NotControllerError:
    return NotControllerError(f"controller {node}: node {node} is not the controller")


def test_an_election_longer_than_the_quorum_request_timeout_goes_round_until_one_answers() -> None:
    """Controller 1 (active) killed; 2 and 3 know no leader for 8 s (four times the 2 s
    `controller.quorum.request.timeout.ms`), then 3 is elected: the request is still sent."""
    raft_leader: list[int | None] = [1]
    plan = retry(timeout_ms=30_000, hint=raft_leader)
    now = 0
    asked: list[int] = []
    delays: list[int] = []
    while True:
        attempt = plan.next(now)
        now += attempt.delay_ms
        delays.append(attempt.delay_ms)
        asked.append(attempt.controller_id)
        assert attempt.timeout_ms == 30_000 - now
        if attempt.controller_id == 3 and now >= 8000:
            break  # elected: it answers
        now += 5  # the attempt's own time
        if attempt.controller_id == 1:
            plan.failed(1, unreachable(1))
            raft_leader[0] = None  # the broker's Raft client saw the leader go
        else:
            plan.redirected(attempt.controller_id, not_controller(attempt.controller_id), None)
    assert asked[:3] == [1, 2, 3]  # round the voters
    assert set(asked) == {1, 2, 3} and now >= 8000
    assert delays[1] == 50  # after the refused connection
    assert delays[2] == 0  # a redirect goes on at once ...
    assert max(delays) == 1000  # ... until every voter redirected; the backoff grows, capped
    assert sorted(delays[-3:]) == [1000, 1000, 1000]


def test_not_controller_naming_the_active_one_goes_there_at_once() -> None:
    plan = retry(timeout_ms=2000)
    first = plan.next(0)
    assert (first.controller_id, first.delay_ms) == (1, 0)  # no hint: the first voter
    plan.redirected(1, not_controller(1), 3)
    second = plan.next(10)
    assert (second.controller_id, second.delay_ms, second.timeout_ms) == (3, 0, 1990)


def test_the_request_gives_up_at_its_timeout_naming_the_last_failure() -> None:
    plan = retry(timeout_ms=2000, now_ms=100)
    attempt = plan.next(100)
    plan.failed(attempt.controller_id, unreachable(1))
    attempt = plan.next(2050)
    assert (attempt.delay_ms, attempt.timeout_ms) == (50, 0)  # the backoff ends at the timeout
    with pytest.raises(RequestTimedOutError) as gave_up:
        plan.next(2100)
    assert gave_up.value.retriable
    message = str(gave_up.value)
    assert WHAT in message and "within 2000 ms" in message
    assert "last failure: controller 1 at 127.0.0.1:1: UNAVAILABLE" in message


def test_a_backoff_never_sleeps_past_the_timeout() -> None:
    plan = retry(timeout_ms=1000)
    now = 0
    for _ in range(8):
        attempt = plan.next(now)
        assert attempt.delay_ms + attempt.timeout_ms == 1000 - now
        now += attempt.delay_ms + 1
        plan.failed(attempt.controller_id, unreachable(attempt.controller_id))
        if now >= 1000:
            break
    with pytest.raises(RequestTimedOutError):
        plan.next(now)


def test_an_attempt_cut_short_by_the_timeout_leaves_the_earlier_failure_named() -> None:
    plan = retry(timeout_ms=200)
    plan.next(0)
    plan.redirected(1, not_controller(1), None)
    attempt = plan.next(5)
    plan.failed(
        attempt.controller_id, NetworkError("controller 2: DEADLINE_EXCEEDED"), timed_out=True
    )
    with pytest.raises(RequestTimedOutError, match=r"last failure: controller 1: node 1 is not"):
        plan.next(200)
    # With nothing before it, the timed-out attempt is what is named.
    alone = retry(timeout_ms=200)
    alone.next(0)
    alone.failed(1, NetworkError("controller 1: DEADLINE_EXCEEDED"), timed_out=True)
    with pytest.raises(RequestTimedOutError, match="DEADLINE_EXCEEDED"):
        alone.next(200)


def test_a_long_wait_says_what_it_waits_for_then_not_again_for_a_while() -> None:
    plan = retry(timeout_ms=30_000, now_ms=1000)
    assert plan.note(1000, 1) is None
    assert plan.until_note_ms(1000) == NOTE_AFTER_MS
    plan.failed(1, unreachable(1))
    assert plan.note(1000 + NOTE_AFTER_MS - 1, 2) is None
    note = plan.note(1000 + NOTE_AFTER_MS, 2)
    assert note is not None
    assert note.startswith(
        f"{WHAT}: waiting for an active controller to answer, asking controller 2"
    )
    assert "5.0 s so far, 25.0 s left of 30000 ms" in note
    assert note.endswith("last failure: controller 1 at 127.0.0.1:1: UNAVAILABLE: refused")
    assert plan.note(1000 + NOTE_AFTER_MS + NOTE_EVERY_MS - 1, 2) is None
    assert plan.until_note_ms(1000 + NOTE_AFTER_MS) == NOTE_EVERY_MS
    assert plan.note(1000 + NOTE_AFTER_MS + NOTE_EVERY_MS, 3) is not None


def test_a_forwarded_request_takes_its_own_timeout_else_request_timeout_ms() -> None:
    assert forward_timeout_ms(60_000) == 60_000
    assert forward_timeout_ms(1) == 1
    assert FORWARD_TIMEOUT_MS_DEFAULT == 30_000  # Kafka's request.timeout.ms default
    for none in (None, 0, -1):
        assert forward_timeout_ms(none) == FORWARD_TIMEOUT_MS_DEFAULT


def test_a_request_needs_a_positive_timeout() -> None:
    with pytest.raises(ValueError, match="timeout_ms must be positive, not 0"):
        retry(timeout_ms=0)
