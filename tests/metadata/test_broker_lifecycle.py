"""BrokerLifecycle scenarios, one per rule of the module docstring, and a Hypothesis run of
random controller answers against the invariants (one request in flight, states in order,
`want_fence` until caught up and ready, nothing sent after SHUTTING_DOWN)."""

from __future__ import annotations

import random
from dataclasses import replace
from uuid import UUID

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replog.errors import (
    BrokerIdNotRegisteredError,
    DuplicateBrokerRegistrationError,
    InconsistentClusterIdError,
    NotControllerError,
    StaleBrokerEpochError,
    UnknownServerError,
)
from replog.quorum.metadata.broker_lifecycle import (
    BECOMING_ACTIVE_RETRIES_MAX,
    BECOMING_ACTIVE_RETRY_MS,
    CONTROLLED_SHUTDOWN_HEARTBEAT_INTERVAL_MS,
    HEARTBEAT_CATCH_UP_INTERVAL_MS,
    BrokerLifecycle,
    BrokerLifecycleConfig,
    HeartbeatRequest,
    HeartbeatResponse,
    LifecycleRequest,
    LifecycleState,
    RegistrationRequest,
    RegistrationResponse,
    StateChange,
)
from replog.quorum.metadata.records import (
    METADATA_VERSION_FEATURE,
    TRANSACTION_VERSION_FEATURE,
    Endpoint,
    FeatureRange,
)

INCARNATION = UUID(int=0xB0B)
S = LifecycleState
CONFIG = BrokerLifecycleConfig(
    broker_id=4,
    cluster_id="cluster-a",
    controller_ids=(1, 2, 3),
    listeners=(Endpoint("PLAINTEXT", "broker4", 9092),),
    rack="r1",
)


class Broker:
    """Drives one BrokerLifecycle by hand: time, answers, and what came out."""

    def __init__(self, config: BrokerLifecycleConfig = CONFIG, seed: int = 7) -> None:
        self.now = 0
        self.core = BrokerLifecycle(
            config, incarnation_id=INCARNATION, rng=random.Random(seed), now_ms=0
        )
        self.core.tick(0)
        self._changes: list[StateChange] = []
        self._pending: list[LifecycleRequest] = []

    def _drain(self) -> None:
        ready = self.core.ready()
        self._changes.extend(ready.state_changes)
        self._pending.extend(ready.requests)

    def take(self) -> list[LifecycleRequest]:
        """The requests the core asked to send since the last take."""
        self._drain()
        requests, self._pending = self._pending, []
        return requests

    def one(self) -> LifecycleRequest:
        requests = self.take()
        assert len(requests) == 1, requests
        return requests[0]

    def registration(self) -> RegistrationRequest:
        request = self.one()
        assert isinstance(request, RegistrationRequest), request
        return request

    def heartbeat(self) -> HeartbeatRequest:
        request = self.one()
        assert isinstance(request, HeartbeatRequest), request
        return request

    def wait(self, ms: int) -> None:
        self.now += ms
        self.core.tick(self.now)

    def until_next(self) -> int:
        """Tick at the core's wake time; return how long that was."""
        wake = self.core.wake_at_ms()
        assert wake is not None
        waited = wake - self.now
        self.now = wake
        self.core.tick(self.now)
        return waited

    def register_ok(self, broker_epoch: int = 100) -> HeartbeatRequest:
        request = self.registration()
        self.core.handle_registration_response(
            RegistrationResponse(request.correlation_id, broker_epoch=broker_epoch), self.now
        )
        return self.heartbeat()

    def not_controller(self, request: RegistrationRequest, controller_id: int = -1) -> None:
        """Answer `request` NOT_CONTROLLER, naming `controller_id` (-1: none)."""
        self.core.handle_registration_response(
            RegistrationResponse(
                request.correlation_id,
                error_code=NotControllerError.code,
                controller_id=controller_id,
            ),
            self.now,
        )

    def electing(self, answers: int) -> None:
        """An election runs: `answers` registrations in a row, each sent when due, are answered
        NOT_CONTROLLER naming none, and the failure count (the backoff) grows."""
        for _ in range(answers):
            requests = self.take()
            if not requests:
                self.until_next()
                requests = self.take()
            (request,) = requests
            assert isinstance(request, RegistrationRequest), request
            self.not_controller(request)

    def answer(self, request: HeartbeatRequest, **fields: object) -> None:
        response = HeartbeatResponse(request.correlation_id, **fields)  # type: ignore[arg-type]
        self.core.handle_heartbeat_response(response, self.now)

    def to_running(self) -> None:
        beat = self.register_ok()
        self.answer(beat, is_caught_up=True, is_fenced=True)
        self.core.set_ready_to_unfence(self.now)
        beat = self.heartbeat()  # at once: its want_fence changed
        assert not beat.want_fence
        self.answer(beat, is_caught_up=True, is_fenced=False)
        assert self.core.state is S.RUNNING

    @property
    def changes(self) -> list[StateChange]:
        self._drain()
        return self._changes

    @property
    def states(self) -> list[LifecycleState]:
        return [change.state for change in self.changes]


# --- Rule 1: registration ----------------------------------------------------------------------


def test_the_broker_registers_first_with_its_incarnation_and_supported_features() -> None:
    broker = Broker()
    request = broker.registration()
    assert request.controller_id == 1
    assert (request.broker_id, request.cluster_id) == (4, "cluster-a")
    assert request.incarnation_id == INCARNATION
    assert request.listeners == CONFIG.listeners
    assert request.rack == "r1"
    assert request.previous_broker_epoch == -1
    # The controller bootstraps metadata.version 12 (records.METADATA_VERSION_LATEST) and
    # transaction.version 2.
    assert request.features == (
        FeatureRange(METADATA_VERSION_FEATURE, 1, 12),
        FeatureRange(TRANSACTION_VERSION_FEATURE, 0, 2),
        FeatureRange("eligible.leader.replicas.version", 0, 1),
    )
    assert broker.core.state is S.STARTING
    assert broker.core.broker_epoch is None
    # Nothing else goes out while it is in flight; the next tick is its timeout.
    assert broker.core.wake_at_ms() == CONFIG.request_timeout_ms
    broker.wait(1000)
    assert broker.take() == []


def test_a_successful_registration_is_followed_at_once_by_a_fenced_heartbeat() -> None:
    broker = Broker()
    broker.core.update_metadata_offset(41)
    beat = broker.register_ok(broker_epoch=100)
    assert broker.core.broker_epoch == 100
    assert (beat.broker_id, beat.broker_epoch, beat.controller_id) == (4, 100, 1)
    assert beat.current_metadata_offset == 41
    assert beat.want_fence and not beat.want_shut_down


# --- Rule 2: the initial registration timeout ---------------------------------------------------


def test_no_registration_within_the_initial_timeout_shuts_the_broker_down() -> None:
    broker = Broker()
    attempts = 0
    while broker.core.state is S.STARTING:
        for request in broker.take():
            attempts += 1
            broker.core.handle_registration_response(
                RegistrationResponse(
                    request.correlation_id,
                    error_code=InconsistentClusterIdError.code,
                    error_message="cluster id cluster-a is not cluster-b",
                ),
                broker.now,
            )
        broker.until_next()
    assert broker.now == CONFIG.initial_registration_timeout_ms
    assert broker.states == [S.SHUTTING_DOWN]
    assert "initial.broker.registration.timeout.ms (60000 ms)" in broker.changes[0].reason
    assert "cluster id cluster-a is not cluster-b" in broker.changes[0].reason
    # Backoff 100, 200, ... capped at 4500: about 17 attempts in a minute, not thousands.
    assert 15 <= attempts <= 20
    assert broker.core.wake_at_ms() is None
    broker.wait(10_000)
    assert broker.take() == []


def test_the_registration_timeout_ends_with_the_first_success() -> None:
    broker = Broker(replace(CONFIG, initial_registration_timeout_ms=1000))
    beat = broker.register_ok()
    broker.answer(beat, error_code=StaleBrokerEpochError.code)
    # Re-registering for longer than the initial timeout does not stop the broker.
    for _ in range(20):
        broker.until_next()
        for request in broker.take():
            assert isinstance(request, RegistrationRequest)
            broker.core.request_failed(request.correlation_id, broker.now)
    assert broker.now > 1000
    assert broker.core.state is S.STARTING


# --- Rule 3: one request in flight --------------------------------------------------------------


def test_a_request_without_an_answer_times_out_and_a_late_answer_is_ignored() -> None:
    broker = Broker()
    first = broker.registration()
    broker.wait(CONFIG.request_timeout_ms)
    assert broker.core.last_error == "BrokerRegistration to controller 1: no answer within 2000 ms"
    # It counts as failed: the next voter, after the first backoff (100 ms +- 2 %).
    waited = broker.until_next()
    assert 98 <= waited <= 102
    second = broker.registration()
    assert second.controller_id == 2
    broker.core.handle_registration_response(
        RegistrationResponse(first.correlation_id, broker_epoch=5), broker.now
    )
    assert broker.core.broker_epoch is None
    assert broker.take() == []


def test_answers_to_other_requests_are_ignored() -> None:
    broker = Broker()
    beat = broker.register_ok()
    # A registration answer with the heartbeat's id, and a heartbeat answer with another id.
    broker.core.handle_registration_response(
        RegistrationResponse(beat.correlation_id, broker_epoch=7), broker.now
    )
    broker.answer(replace(beat, correlation_id=beat.correlation_id + 5), is_caught_up=True)
    assert broker.core.broker_epoch == 100
    assert broker.core.state is S.STARTING
    broker.answer(beat, is_caught_up=True)
    assert broker.core.state is S.RECOVERY
    # The same answer again changes nothing.
    broker.answer(beat, is_caught_up=True, is_fenced=False)
    assert broker.core.state is S.RECOVERY


# --- Rules 4-6: heartbeats, catch-up, unfencing --------------------------------------------------


def test_heartbeats_come_10_ms_apart_until_caught_up_then_recovery() -> None:
    broker = Broker()
    beat = broker.register_ok()
    for offset in (10, 20, 30):
        broker.answer(beat, is_caught_up=False, is_fenced=True)
        broker.core.update_metadata_offset(offset)
        assert broker.until_next() == HEARTBEAT_CATCH_UP_INTERVAL_MS
        beat = broker.heartbeat()
        assert beat.current_metadata_offset == offset
        assert beat.want_fence
    broker.answer(beat, is_caught_up=True, is_fenced=True)
    assert broker.states == [S.RECOVERY]
    assert "offset 30" in broker.changes[0].reason
    # One more quick heartbeat, then the normal interval while waiting to be ready.
    assert broker.until_next() == HEARTBEAT_CATCH_UP_INTERVAL_MS
    beat = broker.heartbeat()
    assert beat.want_fence
    broker.answer(beat, is_caught_up=True, is_fenced=True)
    assert broker.until_next() == CONFIG.heartbeat_interval_ms
    assert broker.heartbeat().want_fence


def test_ready_to_unfence_before_the_catch_up_still_asks_to_be_fenced() -> None:
    broker = Broker()
    beat = broker.register_ok()
    broker.core.set_ready_to_unfence(broker.now)
    broker.answer(beat, is_caught_up=False)
    broker.until_next()
    beat = broker.heartbeat()
    assert beat.want_fence
    broker.answer(beat, is_caught_up=True)
    broker.until_next()
    assert not broker.heartbeat().want_fence


def test_being_ready_sends_an_unfence_heartbeat_at_once() -> None:
    broker = Broker()
    beat = broker.register_ok()
    broker.answer(beat, is_caught_up=True)
    broker.until_next()
    broker.answer(broker.heartbeat(), is_caught_up=True)
    broker.wait(500)  # 1500 ms before the next regular heartbeat
    broker.core.set_ready_to_unfence(broker.now)
    beat = broker.heartbeat()
    assert not beat.want_fence
    broker.answer(beat, is_caught_up=True, is_fenced=False)
    assert broker.states == [S.RECOVERY, S.RUNNING]
    assert broker.until_next() == CONFIG.heartbeat_interval_ms
    assert not broker.heartbeat().want_fence


def test_being_ready_while_a_heartbeat_is_in_flight_sends_the_next_right_after_it() -> None:
    broker = Broker()
    beat = broker.register_ok()
    broker.answer(beat, is_caught_up=True)
    broker.until_next()
    in_flight = broker.heartbeat()
    assert in_flight.want_fence
    broker.core.set_ready_to_unfence(broker.now)
    assert broker.take() == []
    broker.answer(in_flight, is_caught_up=True, is_fenced=True)
    beat = broker.heartbeat()  # no interval: at once
    assert not beat.want_fence


def test_the_first_unfenced_answer_makes_the_broker_running() -> None:
    broker = Broker()
    broker.to_running()
    assert broker.states == [S.RECOVERY, S.RUNNING]
    assert not broker.core.is_fenced


def test_a_running_broker_fenced_by_the_controller_stays_running_and_asks_again() -> None:
    broker = Broker()
    broker.to_running()
    broker.until_next()
    beat = broker.heartbeat()
    broker.answer(beat, is_caught_up=True, is_fenced=True)
    assert broker.core.state is S.RUNNING and broker.core.is_fenced
    broker.until_next()
    beat = broker.heartbeat()
    assert not beat.want_fence
    broker.answer(beat, is_caught_up=True, is_fenced=False)
    assert not broker.core.is_fenced


# --- Rule 7: controlled shutdown ---------------------------------------------------------------


def test_controlled_shutdown_heartbeats_until_the_controller_lets_go() -> None:
    broker = Broker()
    broker.to_running()
    broker.wait(300)
    broker.core.begin_controlled_shutdown(broker.now)
    beat = broker.heartbeat()  # at once
    assert beat.want_shut_down and not beat.want_fence
    assert broker.core.state is S.PENDING_CONTROLLED_SHUTDOWN
    broker.answer(beat, is_caught_up=True, is_fenced=False, should_shut_down=False)
    # Pending, the broker asks again every 50 ms, not every heartbeat interval (Rule 7).
    for _ in range(3):
        assert broker.until_next() == CONTROLLED_SHUTDOWN_HEARTBEAT_INTERVAL_MS
        beat = broker.heartbeat()
        assert beat.want_shut_down
        broker.answer(beat, is_caught_up=True, is_fenced=False, should_shut_down=False)
    assert broker.until_next() == CONTROLLED_SHUTDOWN_HEARTBEAT_INTERVAL_MS
    beat = broker.heartbeat()
    broker.answer(beat, is_caught_up=True, is_fenced=True, should_shut_down=True)
    assert broker.states[-2:] == [S.PENDING_CONTROLLED_SHUTDOWN, S.SHUTTING_DOWN]
    assert broker.core.wake_at_ms() is None
    broker.wait(60_000)
    assert broker.take() == []


def test_controlled_shutdown_while_starting_asks_to_stay_fenced_and_shut_down() -> None:
    broker = Broker()
    beat = broker.register_ok()
    broker.core.begin_controlled_shutdown(broker.now)
    assert broker.take() == []  # the heartbeat in flight goes first
    broker.answer(beat, is_caught_up=False)
    beat = broker.heartbeat()
    assert beat.want_fence and beat.want_shut_down
    broker.answer(beat, is_fenced=True, should_shut_down=True)
    assert broker.states == [S.PENDING_CONTROLLED_SHUTDOWN, S.SHUTTING_DOWN]


def test_controlled_shutdown_before_registering_stops_at_once() -> None:
    broker = Broker()
    request = broker.registration()
    broker.core.begin_controlled_shutdown(broker.now)
    assert broker.states == [S.SHUTTING_DOWN]
    assert "not registered" in broker.changes[0].reason
    broker.core.handle_registration_response(
        RegistrationResponse(request.correlation_id, broker_epoch=3), broker.now
    )
    assert broker.take() == []
    assert broker.core.broker_epoch is None


def test_a_hard_shutdown_stops_sending() -> None:
    broker = Broker()
    broker.to_running()
    broker.core.begin_shutdown("SIGKILL drill")
    assert broker.changes[-1] == StateChange(S.RUNNING, S.SHUTTING_DOWN, "SIGKILL drill")
    broker.wait(10_000)
    assert broker.take() == []


# --- Rule 7a: a controlled shutdown nobody can grant ----------------------------------------


def test_nothing_to_hand_over_ends_a_pending_controlled_shutdown_only() -> None:
    broker = Broker()
    broker.to_running()
    broker.core.nothing_to_hand_over()  # not shutting down: no effect
    assert broker.core.state is S.RUNNING
    broker.core.begin_controlled_shutdown(broker.now)
    beat = broker.heartbeat()
    broker.core.nothing_to_hand_over()
    assert broker.states[-2:] == [S.PENDING_CONTROLLED_SHUTDOWN, S.SHUTTING_DOWN]
    assert "leads no partition and no other broker is active" in broker.changes[-1].reason
    broker.answer(beat, is_caught_up=True, is_fenced=False, should_shut_down=False)  # too late
    assert broker.core.state is S.SHUTTING_DOWN
    assert broker.take() == []


def test_a_controlled_shutdown_no_controller_answers_ends_after_the_session_timeout() -> None:
    broker = Broker()
    broker.to_running()
    broker.wait(5000)  # the last answer was 5 s before the shutdown: it still gets 9 s
    began = broker.now
    broker.core.begin_controlled_shutdown(broker.now)
    while broker.core.state is S.PENDING_CONTROLLED_SHUTDOWN:
        requests = broker.take()
        for request in requests:
            broker.core.request_failed(request.correlation_id, broker.now, "unreachable")
        if not requests:
            broker.until_next()
    assert broker.now == began + CONFIG.session_timeout_ms
    reason = broker.changes[-1].reason
    assert "no controller answered for broker.session.timeout.ms (9000 ms)" in reason
    assert "unreachable" in reason  # the last error names what went wrong
    assert broker.core.wake_at_ms() is None


def test_answered_heartbeats_keep_a_controlled_shutdown_waiting_for_the_grant() -> None:
    broker = Broker()
    broker.to_running()
    broker.core.begin_controlled_shutdown(broker.now)
    began = broker.now
    while broker.now < began + 3 * CONFIG.session_timeout_ms:
        beat = broker.heartbeat()
        broker.answer(beat, is_caught_up=True, is_fenced=False, should_shut_down=False)
        answered_at = broker.now
        broker.until_next()
    assert broker.core.state is S.PENDING_CONTROLLED_SHUTDOWN
    # Then the controllers go silent: the session timeout counts from the last answer.
    while broker.core.state is S.PENDING_CONTROLLED_SHUTDOWN:
        for request in broker.take():
            broker.core.request_failed(request.correlation_id, broker.now)
        broker.until_next()
    assert broker.now == answered_at + CONFIG.session_timeout_ms


# --- Rule 8: backoff ---------------------------------------------------------------------------


def test_failures_back_off_exponentially_up_to_half_the_session_timeout_and_reset() -> None:
    broker = Broker()
    waits = []
    for _ in range(9):
        request = broker.registration()
        broker.core.handle_registration_response(
            RegistrationResponse(
                request.correlation_id, error_code=DuplicateBrokerRegistrationError.code
            ),
            broker.now,
        )
        waits.append(broker.until_next())
    for got, expected in zip(
        waits, [100, 200, 400, 800, 1600, 3200, 4500, 4500, 4500], strict=True
    ):
        assert abs(got - expected) <= expected * 2 // 100, waits
    # Any other error retries the same controller.
    assert broker.registration().controller_id == 1
    broker.core.handle_registration_response(
        RegistrationResponse(broker.core._next_correlation_id - 1, broker_epoch=9), broker.now
    )
    beat = broker.heartbeat()
    broker.answer(beat, error_code=UnknownServerError.code, error_message="boom")
    assert "error -1: boom" in broker.core.last_error
    assert 98 <= broker.until_next() <= 102  # the success reset the count


# --- Rule 9: NOT_CONTROLLER and failed calls ----------------------------------------------------


def test_not_controller_follows_the_named_controller_at_once() -> None:
    broker = Broker()
    request = broker.registration()
    broker.core.handle_registration_response(
        RegistrationResponse(
            request.correlation_id, error_code=NotControllerError.code, controller_id=3
        ),
        broker.now,
    )
    request = broker.registration()
    assert request.controller_id == 3
    broker.core.handle_registration_response(
        RegistrationResponse(request.correlation_id, broker_epoch=50), broker.now
    )
    beat = broker.heartbeat()
    assert beat.controller_id == 3
    # The leader moved to 2: heartbeats follow.
    broker.answer(beat, error_code=NotControllerError.code, controller_id=2)
    assert broker.heartbeat().controller_id == 2


def test_not_controller_without_a_leader_tries_the_next_voter_then_backs_off() -> None:
    broker = Broker()
    asked = []
    for _ in range(3):
        request = broker.registration()
        asked.append(request.controller_id)
        broker.core.handle_registration_response(
            RegistrationResponse(request.correlation_id, error_code=NotControllerError.code),
            broker.now,
        )
    assert asked == [1, 2, 3]
    assert broker.now == 0
    # A fourth NOT_CONTROLLER in a row: the voters are electing; wait instead of spinning.
    request = broker.registration()
    assert request.controller_id == 1
    broker.core.handle_registration_response(
        RegistrationResponse(request.correlation_id, error_code=NotControllerError.code),
        broker.now,
    )
    assert broker.take() == []
    assert 98 <= broker.until_next() <= 102
    assert broker.registration().controller_id == 2


def test_a_hint_during_a_backoff_sends_to_the_named_controller_at_once() -> None:
    broker = Broker()
    for _ in range(4):  # every voter says NOT_CONTROLLER: an election runs
        request = broker.registration()
        broker.core.handle_registration_response(
            RegistrationResponse(request.correlation_id, error_code=NotControllerError.code),
            broker.now,
        )
    assert broker.take() == []
    broker.now += 10
    broker.core.controller_hint(3, broker.now)  # the election ended: node 3 leads
    request = broker.registration()
    assert request.controller_id == 3
    # The failure count stands: a hint that came early backs off on, one step further.
    broker.core.request_failed(request.correlation_id, broker.now, "DEADLINE_EXCEEDED")
    assert broker.take() == []
    assert 196 <= broker.until_next() <= 204


def test_a_controller_naming_itself_is_asked_again_soon_whatever_the_backoff() -> None:
    broker = Broker()
    broker.electing(12)  # every voter says NOT_CONTROLLER: the backoff grows
    assert broker.take() == []
    wake = broker.core.wake_at_ms()
    assert wake is not None and wake - broker.now >= 1000
    broker.now += 1
    broker.core.controller_hint(2, broker.now)  # node 2 won; its controller is not active yet
    for _ in range(3):
        request = broker.registration()
        assert request.controller_id == 2
        broker.not_controller(request, controller_id=2)
        assert broker.take() == []
        assert broker.until_next() == BECOMING_ACTIVE_RETRY_MS  # not the grown backoff
    request = broker.registration()
    assert request.controller_id == 2
    broker.core.handle_registration_response(
        RegistrationResponse(request.correlation_id, broker_epoch=40), broker.now
    )
    assert broker.heartbeat().controller_id == 2


def test_the_raft_leader_not_knowing_it_yet_is_asked_again_soon() -> None:
    broker = Broker()
    broker.electing(8)
    broker.now += 1
    broker.core.controller_hint(3, broker.now)  # this node's Raft heard node 3 won
    request = broker.registration()
    assert request.controller_id == 3
    broker.not_controller(request)  # node 3's own Raft has not heard it yet: it names none
    assert broker.take() == []
    assert broker.until_next() == BECOMING_ACTIVE_RETRY_MS
    assert broker.registration().controller_id == 3


def test_a_controller_that_never_becomes_active_is_left_for_the_next_voter() -> None:
    broker = Broker()
    for _ in range(BECOMING_ACTIVE_RETRIES_MAX):
        request = broker.registration()
        assert request.controller_id == 1
        broker.not_controller(request, controller_id=1)
        assert broker.take() == []
        assert broker.until_next() == BECOMING_ACTIVE_RETRY_MS
    broker.not_controller(broker.registration(), controller_id=1)
    assert broker.registration().controller_id == 2  # Rule 9 again: the next voter, at once


def test_a_hint_naming_another_controller_resends_the_request_in_flight_there() -> None:
    broker = Broker()
    first = broker.registration()
    assert first.controller_id == 1
    broker.now += 10
    broker.core.controller_hint(2, broker.now)
    second = broker.registration()
    assert second.controller_id == 2 and second.correlation_id != first.correlation_id
    # The first one's late answer is stale: the second one's decides.
    broker.core.handle_registration_response(
        RegistrationResponse(first.correlation_id, broker_epoch=7), broker.now
    )
    assert broker.core.broker_epoch is None
    broker.core.handle_registration_response(
        RegistrationResponse(second.correlation_id, broker_epoch=9), broker.now
    )
    assert broker.core.broker_epoch == 9
    # A hint naming the controller already asked changes nothing.
    beat = broker.heartbeat()
    broker.core.controller_hint(2, broker.now)
    assert broker.take() == []
    broker.answer(beat, is_caught_up=False)


def test_a_hint_without_a_backoff_moves_no_request_forward() -> None:
    broker = Broker()
    broker.to_running()
    broker.core.controller_hint(2, broker.now)
    assert broker.take() == []  # the next heartbeat goes at its interval, to the hint
    assert broker.until_next() == CONFIG.heartbeat_interval_ms
    assert broker.heartbeat().controller_id == 2


def test_a_failed_call_moves_to_the_next_voter_after_the_backoff() -> None:
    broker = Broker()
    beat = broker.register_ok()
    broker.core.request_failed(beat.correlation_id, broker.now, "UNAVAILABLE")
    assert broker.core.last_error == "BrokerHeartbeat to controller 1: UNAVAILABLE"
    assert broker.take() == []
    broker.until_next()
    beat = broker.heartbeat()
    assert beat.controller_id == 2
    # A failure report for a request no longer in flight changes nothing.
    broker.core.request_failed(beat.correlation_id - 1, broker.now)
    assert broker.core.controller_id == 2


def test_nothing_goes_out_before_the_first_tick_so_a_hint_shapes_the_first_request() -> None:
    core = BrokerLifecycle(CONFIG, incarnation_id=INCARNATION, rng=random.Random(1), now_ms=5)
    assert not core.has_ready()
    assert core.wake_at_ms() == 5
    core.controller_hint(2)
    core.tick(5)
    (request,) = core.ready().requests
    assert isinstance(request, RegistrationRequest) and request.controller_id == 2


def test_the_raft_leader_hint_redirects_the_next_request() -> None:
    broker = Broker()
    beat = broker.register_ok()
    broker.core.controller_hint(3)
    broker.core.controller_hint(None)
    broker.core.controller_hint(99)  # not a voter: no address to send to
    broker.answer(beat, is_caught_up=False)
    broker.until_next()
    assert broker.heartbeat().controller_id == 3


# --- Rule 10: a lost registration ---------------------------------------------------------------


@pytest.mark.parametrize("code", [StaleBrokerEpochError.code, BrokerIdNotRegisteredError.code])
def test_a_stale_or_unknown_registration_registers_again(code: int) -> None:
    broker = Broker()
    broker.to_running()
    broker.core.update_metadata_offset(500)
    broker.until_next()
    broker.answer(broker.heartbeat(), error_code=code, error_message="broker epoch 100 is stale")
    assert broker.core.broker_epoch is None and broker.core.is_fenced
    broker.until_next()
    request = broker.registration()
    assert request.incarnation_id == INCARNATION  # the same process: the same incarnation
    broker.core.handle_registration_response(
        RegistrationResponse(request.correlation_id, broker_epoch=600), broker.now
    )
    beat = broker.heartbeat()
    assert beat.broker_epoch == 600
    assert not beat.want_fence  # caught up and ready long ago: unfence once past offset 600
    broker.answer(beat, is_caught_up=False, is_fenced=True)
    assert broker.until_next() == HEARTBEAT_CATCH_UP_INTERVAL_MS
    broker.core.update_metadata_offset(600)
    broker.answer(broker.heartbeat(), is_caught_up=True, is_fenced=False)
    assert broker.core.state is S.RUNNING and not broker.core.is_fenced
    assert broker.states == [S.RECOVERY, S.RUNNING]


def test_a_lost_registration_during_controlled_shutdown_ends_it() -> None:
    broker = Broker()
    broker.to_running()
    broker.core.begin_controlled_shutdown(broker.now)
    broker.answer(broker.heartbeat(), error_code=StaleBrokerEpochError.code)
    assert broker.states[-1] is S.SHUTTING_DOWN
    assert "no longer knows broker epoch 100" in broker.changes[-1].reason


# --- invariants under random answers -----------------------------------------------------------

ERROR_CODES = [
    0,
    0,
    0,
    NotControllerError.code,
    StaleBrokerEpochError.code,
    DuplicateBrokerRegistrationError.code,
    UnknownServerError.code,
]
ORDER = [S.STARTING, S.RECOVERY, S.RUNNING, S.PENDING_CONTROLLED_SHUTDOWN, S.SHUTTING_DOWN]

step = st.one_of(
    st.tuples(st.just("answer"), st.sampled_from(ERROR_CODES), st.booleans(), st.booleans()),
    st.tuples(st.just("fail"), st.just(0), st.just(False), st.just(False)),
    st.tuples(st.just("wait"), st.integers(0, 5000), st.just(False), st.just(False)),
    st.tuples(st.just("ready"), st.just(0), st.just(False), st.just(False)),
    st.tuples(st.just("shutdown"), st.just(0), st.just(False), st.just(False)),
    st.tuples(st.just("offset"), st.integers(0, 1000), st.just(False), st.just(False)),
    st.tuples(st.just("nothing"), st.just(0), st.just(False), st.just(False)),
)


@settings(max_examples=150, deadline=None)
@given(steps=st.lists(step, max_size=60), seed=st.integers(0, 2**32))
def test_invariants_hold_under_any_controller_answers(
    steps: list[tuple[str, int, bool, bool]], seed: int
) -> None:
    broker = Broker(seed=seed)
    in_flight: LifecycleRequest | None = None
    sent_at = 0
    caught_up = ready = False
    reached = [S.STARTING]

    def collect() -> None:
        nonlocal in_flight, sent_at
        out = broker.core.ready()
        for change in out.state_changes:
            assert change.previous is reached[-1]
            assert ORDER.index(change.state) > ORDER.index(change.previous), change
            reached.append(change.state)
        if reached[-1] is S.SHUTTING_DOWN:
            in_flight = None
        if out.requests:
            assert reached[-1] is not S.SHUTTING_DOWN
            assert len(out.requests) == 1
            assert in_flight is None, "two requests in flight"
            in_flight, sent_at = out.requests[0], broker.now
            if isinstance(in_flight, HeartbeatRequest):
                assert in_flight.broker_epoch == broker.core.broker_epoch
                assert in_flight.want_fence or (caught_up and ready)
                assert in_flight.want_shut_down == (reached[-1] is S.PENDING_CONTROLLED_SHUTDOWN)
        wake = broker.core.wake_at_ms()
        assert (wake is None) == (reached[-1] is S.SHUTTING_DOWN)
        assert wake is None or wake > broker.now

    collect()
    for kind, value, flag_a, flag_b in steps:
        if kind == "answer" and in_flight is not None:
            request, in_flight = in_flight, None
            if isinstance(request, RegistrationRequest):
                broker.core.handle_registration_response(
                    RegistrationResponse(
                        request.correlation_id, error_code=value, broker_epoch=broker.now
                    ),
                    broker.now,
                )
            else:
                before = reached[-1]
                broker.core.handle_heartbeat_response(
                    HeartbeatResponse(
                        request.correlation_id,
                        error_code=value,
                        is_caught_up=flag_a,
                        is_fenced=flag_b,
                        should_shut_down=flag_a and flag_b,
                    ),
                    broker.now,
                )
                caught_up = caught_up or (value == 0 and flag_a and before is S.STARTING)
        elif kind == "fail" and in_flight is not None:
            broker.core.request_failed(in_flight.correlation_id, broker.now)
            in_flight = None
        elif kind == "wait":
            broker.wait(value)
            if broker.now >= sent_at + CONFIG.request_timeout_ms:
                in_flight = None  # it timed out inside the core
        elif kind == "ready":
            ready = True
            broker.core.set_ready_to_unfence(broker.now)
        elif kind == "shutdown":
            broker.core.begin_controlled_shutdown(broker.now)
        elif kind == "offset":
            broker.core.update_metadata_offset(value)
        elif kind == "nothing":
            before = broker.core.state
            broker.core.nothing_to_hand_over()
            # Rule 7a: it ends a pending controlled shutdown and nothing else.
            expected = S.SHUTTING_DOWN if before is S.PENDING_CONTROLLED_SHUTDOWN else before
            assert broker.core.state is expected
        collect()
