"""BrokerLifecycle: one broker's side of registration, heartbeats, unfencing and controlled
shutdown (Kafka's BrokerLifecycleManager, KIP-631; docs/design/kraft.md#broker-lifecycle), as a
state machine with no I/O.

Inputs: `tick(now_ms)`, `handle_registration_response`, `handle_heartbeat_response`,
`request_failed`, `update_metadata_offset`, `set_ready_to_unfence`, `begin_controlled_shutdown`,
`nothing_to_hand_over`, `begin_shutdown` and `controller_hint`. Outputs come out of `ready()`
as a `LifecycleReady`: the requests to send now (each addressed to a controller by node id),
the state changes since the last `ready()`, and when to tick next. Nothing here needs
persisting, so there is no `advance`: `ready()` hands the outputs over and forgets them; the
shell sends every request it got.

States: STARTING -> RECOVERY -> RUNNING -> PENDING_CONTROLLED_SHUTDOWN -> SHUTTING_DOWN, in
that order; a broker may enter controlled shutdown from any earlier state, and reach
SHUTTING_DOWN from any state (registration timeout, lost registration, hard stop).

Rules:
1. Registration first, at the first tick (inputs before it, such as a controller hint, shape
   it). The broker registers with a fresh incarnation id (injected: the shell draws a random
   UUID per process start), its listeners, rack and supported features (`metadata.version`
   from the oldest to the newest level this code replays). The controller's answer carries the
   broker epoch that every later request names.
2. If no registration has succeeded within `initial.broker.registration.timeout.ms` (60000) of
   the start, the broker gives up: SHUTTING_DOWN. Later re-registrations have no such limit.
3. One request in flight at a time. It ends with its response (matched by correlation id; a
   stale or duplicate one is ignored), with `request_failed`, or after `request_timeout_ms`
   without an answer, which counts as failed.
4. Heartbeats, each carrying the last metadata offset the broker has published, `want_fence`
   and `want_shut_down`: right after a registration; every 10 ms while the controller says the
   broker has not caught up to its registration record; every `broker.heartbeat.interval.ms`
   (2000) otherwise; and at once (after the one in flight) when `want_fence` or
   `want_shut_down` is about to change.
5. `want_fence` holds until the broker has caught up (a response said `is_caught_up`) and the
   shell said it is ready to unfence (first image published, logs recovered).
6. STARTING -> RECOVERY on the first response with `is_caught_up`; RECOVERY -> RUNNING on the
   first response with `is_fenced` false. A RUNNING broker that the controller fenced (a missed
   session) stays RUNNING and keeps asking to be unfenced.
7. Controlled shutdown: PENDING_CONTROLLED_SHUTDOWN, heartbeats with `want_shut_down`, until a
   response says `should_shut_down`: SHUTTING_DOWN. Meanwhile they go 50 ms apart, not
   `broker.heartbeat.interval.ms`: Kafka sends only the first follow-up after 50 ms, then waits
   the interval, but the controller answers a pending broker from soft state (no record
   written), and the interval would add up to 2 s to every stop; worse, when every node of a
   combined cluster stops at once, the controllers leave within a second of granting their own
   brokers, and a broker still waiting 2 s for its next heartbeat finds no quorum left. A
   broker that never registered, or whose registration the controller no longer knows, has
   nothing to hand over and stops at once.
7a. A pending controlled shutdown also ends without the grant (SHUTTING_DOWN) when
   - the shell says the broker's published image leaves nothing to hand over
     (`nothing_to_hand_over`: it leads no partition and no other broker is active): the whole
     cluster is stopping, the grant could move nothing to nobody, and it needs a metadata
     quorum whose other voters may already be gone (the last node of a combined cluster
     stopped at once would otherwise wait for a controller that never comes); or
   - no heartbeat has been answered for `broker.session.timeout.ms`, counted from the later of
     the last answer and the start of the controlled shutdown: an active controller fences a
     broker silent that long anyway (moving its leaderships as the handover would), and when
     there is none, waiting longer finds none either. Kafka waits up to 5 minutes here.
8. Failures back off exponentially: 100 ms doubling per consecutive failure up to half of
   `broker.session.timeout.ms`, with +-2 % jitter from the injected random source; a success
   resets the count. Any error answer other than those below retries the same request after
   the backoff.
9. NOT_CONTROLLER: switch to the controller the answer names (else the next voter in
   `controller.quorum.voters` order) and resend at once, at most once per voter in a row; after
   that, back off. A failed call (unreachable, timed out): next voter, after the backoff. A
   hint naming the active controller (the node's Raft leader) while a request waits out a
   backoff, or while one is in flight to another controller (whose answer is then ignored),
   sends it there at once, as Kafka's broker sends its queued request once a controller is
   known: at a restart the voters elect several times while every broker registers, and a
   request to the previous leader plus the backoff cost seconds. The failure count stands, so
   a hint that was early backs off on. A NOT_CONTROLLER naming the controller that answered,
   or naming none from the controller the node's Raft named leader (the hint reached this
   broker before that node's own controller learned it), comes from a controller becoming
   active: it is asked again every `BECOMING_ACTIVE_RETRY_MS`, up to
   `BECOMING_ACTIVE_RETRIES_MAX` times in a row, without counting a failure. At a start the
   voters' early failures grow the backoff to seconds, which the broker would otherwise wait
   out with an active controller in reach.
10. STALE_BROKER_EPOCH or BROKER_ID_NOT_REGISTERED in a heartbeat: the controller no longer
    holds this registration (another incarnation replaced it, or it was removed): register
    again with the same incarnation id, after the backoff. The broker is fenced meanwhile.

Theory of operation: `_next_send_ms` is when the next request goes out if none is in flight;
`_urgent` makes the next one go out right after the one in flight is answered. `_poll` runs after
every input: time out the request in flight, enforce the registration deadline, send when due.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING
from uuid import UUID

from replog.errors import BrokerIdNotRegisteredError, NotControllerError, StaleBrokerEpochError
from replog.quorum.metadata.records import (
    ELR_VERSION_FEATURE,
    ELR_VERSION_LATEST,
    METADATA_VERSION_FEATURE,
    METADATA_VERSION_LATEST,
    METADATA_VERSION_MINIMUM,
    TRANSACTION_VERSION_FEATURE,
    TRANSACTION_VERSION_LATEST,
    Endpoint,
    FeatureRange,
)

if TYPE_CHECKING:  # a type only: the Raft package's import is not a broker state's price
    from replog.quorum.raft.timers import RandomSource

ERROR_NONE = 0
# Kafka's BrokerLifecycleManager: heartbeats this far apart while catching up, and resends after
# a failure from this delay, doubling, up to half of the session timeout, with 2 % jitter.
HEARTBEAT_CATCH_UP_INTERVAL_MS = 10
# Heartbeats this far apart while a controlled shutdown is pending (Rule 7).
CONTROLLED_SHUTDOWN_HEARTBEAT_INTERVAL_MS = 50
RESEND_BACKOFF_MS_BASE = 100
RESEND_BACKOFF_JITTER_PERCENT = 2
# A controller that names itself in NOT_CONTROLLER leads the quorum but is not active yet: it
# is asked again this often, this many times in a row, before the backoff of Rule 8 applies.
BECOMING_ACTIVE_RETRY_MS = 50
BECOMING_ACTIVE_RETRIES_MAX = 100

SUPPORTED_FEATURES: tuple[FeatureRange, ...] = (
    FeatureRange(METADATA_VERSION_FEATURE, METADATA_VERSION_MINIMUM, METADATA_VERSION_LATEST),
    FeatureRange(TRANSACTION_VERSION_FEATURE, 0, TRANSACTION_VERSION_LATEST),
    FeatureRange(ELR_VERSION_FEATURE, 0, ELR_VERSION_LATEST),
)


class LifecycleState(Enum):
    STARTING = "starting"
    RECOVERY = "recovery"
    RUNNING = "running"
    PENDING_CONTROLLED_SHUTDOWN = "pending_controlled_shutdown"
    SHUTTING_DOWN = "shutting_down"


# Each state as Kafka's BrokerState metric counts it (kafka.server:type=KafkaServer,
# name=BrokerState), which `replog_broker_state` reports: 0 is NOT_RUNNING, a broker whose
# lifecycle has not begun.
BROKER_STATE_METRIC = {
    LifecycleState.STARTING: 1,
    LifecycleState.RECOVERY: 2,
    LifecycleState.RUNNING: 3,
    LifecycleState.PENDING_CONTROLLED_SHUTDOWN: 6,
    LifecycleState.SHUTTING_DOWN: 7,
}


@dataclass(frozen=True, slots=True)
class BrokerLifecycleConfig:
    """One broker's lifecycle settings (Kafka's names in the comments, units last)."""

    broker_id: int  # node.id
    cluster_id: str
    controller_ids: tuple[int, ...]  # the ids of controller.quorum.voters, in its order
    listeners: tuple[Endpoint, ...] = ()  # advertised.listeners
    rack: str | None = None  # broker.rack
    features: tuple[FeatureRange, ...] = SUPPORTED_FEATURES
    heartbeat_interval_ms: int = 2000  # broker.heartbeat.interval.ms
    initial_registration_timeout_ms: int = 60_000  # initial.broker.registration.timeout.ms
    session_timeout_ms: int = 9000  # broker.session.timeout.ms (caps the resend backoff)
    request_timeout_ms: int = 2000  # controller.quorum.request.timeout.ms
    previous_broker_epoch: int = -1  # KIP-966: the epoch of a clean previous run; -1 unknown

    def __post_init__(self) -> None:
        if self.broker_id < 0:
            raise ValueError(f"node.id must be >= 0, not {self.broker_id}")
        if not self.controller_ids or len(set(self.controller_ids)) != len(self.controller_ids):
            raise ValueError(
                f"controller.quorum.voters must name distinct controllers: {self.controller_ids}"
            )
        for name in (
            "heartbeat_interval_ms",
            "initial_registration_timeout_ms",
            "session_timeout_ms",
            "request_timeout_ms",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, not {getattr(self, name)}")

    @property
    def resend_backoff_ms_max(self) -> int:
        return max(RESEND_BACKOFF_MS_BASE, self.session_timeout_ms // 2)


# --- requests out, responses in ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RegistrationRequest:
    correlation_id: int
    controller_id: int  # where to send it
    broker_id: int
    cluster_id: str
    incarnation_id: UUID
    listeners: tuple[Endpoint, ...]
    features: tuple[FeatureRange, ...]
    rack: str | None
    previous_broker_epoch: int


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    correlation_id: int
    controller_id: int  # where to send it
    broker_id: int
    broker_epoch: int
    current_metadata_offset: int  # the last offset the broker has published (-1: none)
    want_fence: bool
    want_shut_down: bool


LifecycleRequest = RegistrationRequest | HeartbeatRequest


@dataclass(frozen=True, slots=True)
class RegistrationResponse:
    correlation_id: int
    error_code: int = ERROR_NONE
    error_message: str = ""
    controller_id: int = -1  # the active controller the answering node knows (-1: unknown)
    broker_epoch: int = -1


@dataclass(frozen=True, slots=True)
class HeartbeatResponse:
    correlation_id: int
    error_code: int = ERROR_NONE
    error_message: str = ""
    controller_id: int = -1
    is_caught_up: bool = False
    is_fenced: bool = True
    should_shut_down: bool = False


# --- outputs -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StateChange:
    previous: LifecycleState
    state: LifecycleState
    reason: str


@dataclass(frozen=True, slots=True)
class LifecycleReady:
    """Send `requests` now; `state_changes` happened since the last ready(); tick at
    `wake_at_ms` (None: only an input can make anything happen)."""

    requests: tuple[LifecycleRequest, ...]
    state_changes: tuple[StateChange, ...]
    wake_at_ms: int | None


@dataclass(frozen=True, slots=True)
class _InFlight:
    request: LifecycleRequest
    deadline_ms: int


class BrokerLifecycle:
    """One broker's lifecycle state machine (module docstring); thread-unsafe, no I/O."""

    def __init__(
        self,
        config: BrokerLifecycleConfig,
        *,
        incarnation_id: UUID,
        rng: RandomSource,
        now_ms: int,
    ) -> None:
        self.config = config
        self.incarnation_id = incarnation_id
        self._rng = rng
        self._state = LifecycleState.STARTING
        self._controller_id = config.controller_ids[0]
        self._broker_epoch: int | None = None
        self._registered_once = False
        self._registration_deadline_ms = now_ms + config.initial_registration_timeout_ms
        self._is_fenced = True
        self._caught_up = False
        self._ready_to_unfence = False
        self._metadata_offset = -1
        self._in_flight: _InFlight | None = None
        self._next_send_ms = now_ms
        self._urgent = False
        self._failed_attempts = 0
        self._redirects_in_a_row = 0
        self._becoming_active_in_a_row = 0
        self._raft_leader = -1  # the active controller as the node's Raft last named it
        # Rule 7a: when a controller last answered (or the controlled shutdown began, if later).
        self._last_answer_ms = now_ms
        self._next_correlation_id = 1
        self._last_error = "none"
        self._requests: list[LifecycleRequest] = []
        self._changes: list[StateChange] = []
        # Nothing goes out before the first tick: inputs that arrive meanwhile (a controller
        # hint from the Raft leader, the loader's offset) shape the first request.

    # --- what it knows -----------------------------------------------------------------------

    @property
    def state(self) -> LifecycleState:
        return self._state

    @property
    def broker_epoch(self) -> int | None:
        """The broker epoch of the current registration; None while (re-)registering."""
        return self._broker_epoch

    @property
    def is_fenced(self) -> bool:
        """Whether the last heartbeat answer said fenced (True before the first one)."""
        return self._is_fenced

    @property
    def controller_id(self) -> int:
        """The controller the next request goes to."""
        return self._controller_id

    @property
    def metadata_offset(self) -> int:
        return self._metadata_offset

    @property
    def last_error(self) -> str:
        """The last error answer or failure, for logs and the registration-timeout reason."""
        return self._last_error

    # --- inputs ------------------------------------------------------------------------------

    def tick(self, now_ms: int) -> None:
        self._poll(now_ms)

    def update_metadata_offset(self, offset: int) -> None:
        """The broker published the image up to `offset`; heartbeats report it from now on."""
        self._metadata_offset = max(self._metadata_offset, offset)

    def set_ready_to_unfence(self, now_ms: int) -> None:
        """The broker has published its first image and recovered its logs (Rule 5)."""
        if not self._ready_to_unfence:
            self._ready_to_unfence = True
            if self._caught_up and self._broker_epoch is not None:
                self._hurry(now_ms)  # the next heartbeat stops asking to be fenced
        self._poll(now_ms)

    def controller_hint(self, controller_id: int | None, now_ms: int | None = None) -> None:
        """The node learned who the active controller is (its Raft leader): use it next, and
        at once (given `now_ms`) if a request waits out a backoff or is in flight to another
        controller (Rule 9)."""
        if controller_id is None or controller_id not in self.config.controller_ids:
            return
        self._controller_id = controller_id
        self._raft_leader = controller_id
        if now_ms is None or self._state is LifecycleState.SHUTTING_DOWN:
            return
        in_flight = self._in_flight
        if in_flight is not None and in_flight.request.controller_id != controller_id:
            # Asked of a controller that is not (or no longer) the active one: its answer, if
            # any, is ignored from now on (a stale correlation id), and the request goes again.
            self._in_flight = None
            self._next_send_ms = min(self._next_send_ms, now_ms)
        elif in_flight is None and (self._failed_attempts > 0 or self._redirects_in_a_row > 0):
            self._next_send_ms = min(self._next_send_ms, now_ms)
        self._poll(now_ms)

    def begin_controlled_shutdown(self, now_ms: int) -> None:
        """Hand leaderships over, then stop (Rule 7)."""
        if self._state in (
            LifecycleState.PENDING_CONTROLLED_SHUTDOWN,
            LifecycleState.SHUTTING_DOWN,
        ):
            return
        if self._broker_epoch is None:
            self._transition(
                LifecycleState.SHUTTING_DOWN,
                "controlled shutdown while not registered: nothing to hand over",
            )
            return
        self._transition(LifecycleState.PENDING_CONTROLLED_SHUTDOWN, "controlled shutdown begins")
        self._last_answer_ms = max(self._last_answer_ms, now_ms)
        self._hurry(now_ms)
        self._poll(now_ms)

    def nothing_to_hand_over(self) -> None:
        """The published image shows this broker leads no partition and no other broker is
        active: a pending controlled shutdown ends without the grant (Rule 7a). Before one
        begins this changes nothing (the shell asks again once it has begun)."""
        if self._state is LifecycleState.PENDING_CONTROLLED_SHUTDOWN:
            self._transition(
                LifecycleState.SHUTTING_DOWN,
                "nothing to hand over: this broker leads no partition and no other broker is "
                "active",
            )

    def begin_shutdown(self, reason: str = "shutdown without handing over") -> None:
        """Stop at once: no more requests."""
        if self._state is not LifecycleState.SHUTTING_DOWN:
            self._transition(LifecycleState.SHUTTING_DOWN, reason)

    def handle_registration_response(self, response: RegistrationResponse, now_ms: int) -> None:
        request = self._take_in_flight(response.correlation_id, RegistrationRequest)
        if request is None:
            return
        if response.error_code == ERROR_NONE:
            self._broker_epoch = response.broker_epoch
            self._registered_once = True
            self._is_fenced = True  # every new registration starts fenced
            self._succeeded()
            self._next_send_ms = now_ms  # the first heartbeat at once
        else:
            self._note_error(request, response.error_code, response.error_message)
            if response.error_code == NotControllerError.code:
                self._redirect(request.controller_id, response.controller_id, now_ms)
            else:
                self._retry_after_backoff(now_ms)
        self._poll(now_ms)

    def handle_heartbeat_response(self, response: HeartbeatResponse, now_ms: int) -> None:
        request = self._take_in_flight(response.correlation_id, HeartbeatRequest)
        if request is None:
            return
        code = response.error_code
        if code == ERROR_NONE:
            self._succeeded()
            self._on_heartbeat_answer(response, now_ms)
        else:
            self._note_error(request, code, response.error_message)
            if code == NotControllerError.code:
                self._redirect(request.controller_id, response.controller_id, now_ms)
            elif code in (StaleBrokerEpochError.code, BrokerIdNotRegisteredError.code):
                self._registration_lost(now_ms)
            else:
                self._retry_after_backoff(now_ms)
        self._poll(now_ms)

    def request_failed(self, correlation_id: int, now_ms: int, reason: str = "failed") -> None:
        """The request got no answer: unreachable controller, transport error, timeout."""
        in_flight = self._in_flight
        if in_flight is None or in_flight.request.correlation_id != correlation_id:
            return
        self._in_flight = None
        self._on_failure(in_flight.request, reason, now_ms)
        self._poll(now_ms)

    # --- outputs -----------------------------------------------------------------------------

    def has_ready(self) -> bool:
        return bool(self._requests or self._changes)

    def ready(self) -> LifecycleReady:
        ready = LifecycleReady(tuple(self._requests), tuple(self._changes), self.wake_at_ms())
        self._requests.clear()
        self._changes.clear()
        return ready

    def wake_at_ms(self) -> int | None:
        if self._state is LifecycleState.SHUTTING_DOWN:
            return None
        deadlines = [
            self._in_flight.deadline_ms if self._in_flight is not None else self._next_send_ms
        ]
        if not self._registered_once:
            deadlines.append(self._registration_deadline_ms)
        if self._state is LifecycleState.PENDING_CONTROLLED_SHUTDOWN:
            deadlines.append(self._silence_deadline_ms())
        return min(deadlines)

    # --- decisions ---------------------------------------------------------------------------

    def _poll(self, now_ms: int) -> None:
        if self._state is LifecycleState.SHUTTING_DOWN:
            return
        in_flight = self._in_flight
        if in_flight is not None and now_ms >= in_flight.deadline_ms:
            self._in_flight = None
            self._on_failure(
                in_flight.request,
                f"no answer within {self.config.request_timeout_ms} ms",
                now_ms,
            )
        if not self._registered_once and now_ms >= self._registration_deadline_ms:
            self._transition(
                LifecycleState.SHUTTING_DOWN,
                f"broker {self.config.broker_id} did not register within "
                f"initial.broker.registration.timeout.ms "
                f"({self.config.initial_registration_timeout_ms} ms); last error: "
                f"{self._last_error}",
            )
            return
        if (
            self._state is LifecycleState.PENDING_CONTROLLED_SHUTDOWN
            and now_ms >= self._silence_deadline_ms()
        ):
            self._transition(
                LifecycleState.SHUTTING_DOWN,
                f"no controller answered for broker.session.timeout.ms "
                f"({self.config.session_timeout_ms} ms) of the controlled shutdown; last error: "
                f"{self._last_error}",
            )
            return
        if self._in_flight is None and now_ms >= self._next_send_ms:
            self._send(now_ms)

    def _silence_deadline_ms(self) -> int:
        return self._last_answer_ms + self.config.session_timeout_ms

    def _send(self, now_ms: int) -> None:
        correlation_id = self._next_correlation_id
        self._next_correlation_id += 1
        config = self.config
        request: LifecycleRequest
        if self._broker_epoch is None:
            request = RegistrationRequest(
                correlation_id,
                self._controller_id,
                config.broker_id,
                config.cluster_id,
                self.incarnation_id,
                config.listeners,
                config.features,
                config.rack,
                config.previous_broker_epoch,
            )
        else:
            request = HeartbeatRequest(
                correlation_id,
                self._controller_id,
                config.broker_id,
                self._broker_epoch,
                self._metadata_offset,
                # Rule 5: never ask to be unfenced before catching up and being ready.
                want_fence=not (self._caught_up and self._ready_to_unfence),
                want_shut_down=self._state is LifecycleState.PENDING_CONTROLLED_SHUTDOWN,
            )
        self._in_flight = _InFlight(request, now_ms + config.request_timeout_ms)
        self._urgent = False
        self._requests.append(request)

    def _on_heartbeat_answer(self, response: HeartbeatResponse, now_ms: int) -> None:
        self._is_fenced = response.is_fenced
        self._last_answer_ms = now_ms
        state = self._state
        if state is LifecycleState.STARTING and response.is_caught_up:
            self._caught_up = True
            self._transition(
                LifecycleState.RECOVERY,
                f"caught up with the metadata log at offset {self._metadata_offset}",
            )
        elif state is LifecycleState.RECOVERY and not response.is_fenced:
            self._transition(LifecycleState.RUNNING, "unfenced by the controller")
        elif state is LifecycleState.PENDING_CONTROLLED_SHUTDOWN and response.should_shut_down:
            self._transition(
                LifecycleState.SHUTTING_DOWN, "the controller completed the controlled shutdown"
            )
            return
        if self._urgent:
            self._next_send_ms = now_ms
        elif state is LifecycleState.STARTING or not response.is_caught_up:
            # Catching up: heartbeat often, so that unfencing follows the catch-up closely.
            self._next_send_ms = now_ms + HEARTBEAT_CATCH_UP_INTERVAL_MS
        elif state is LifecycleState.PENDING_CONTROLLED_SHUTDOWN:
            self._next_send_ms = now_ms + CONTROLLED_SHUTDOWN_HEARTBEAT_INTERVAL_MS
        else:
            self._next_send_ms = now_ms + self.config.heartbeat_interval_ms

    def _redirect(self, asked_id: int, named_id: int, now_ms: int) -> None:
        """NOT_CONTROLLER from `asked_id`, naming `named_id` (-1: unknown) (Rule 9)."""
        becoming_active = named_id == asked_id or (named_id == -1 and asked_id == self._raft_leader)
        if becoming_active and self._becoming_active_in_a_row < BECOMING_ACTIVE_RETRIES_MAX:
            self._becoming_active_in_a_row += 1
            self._controller_id = asked_id
            self._next_send_ms = now_ms + BECOMING_ACTIVE_RETRY_MS
            return
        self._redirects_in_a_row += 1
        if named_id in self.config.controller_ids and named_id != asked_id:
            self._controller_id = named_id
        else:
            self._controller_id = self._voter_after(asked_id)
        if self._redirects_in_a_row <= len(self.config.controller_ids):
            self._next_send_ms = now_ms
        else:
            # The voters disagree about the leader (an election is running): do not spin.
            self._retry_after_backoff(now_ms)

    def _registration_lost(self, now_ms: int) -> None:
        """The controller no longer holds our registration (Rule 10)."""
        if self._state is LifecycleState.PENDING_CONTROLLED_SHUTDOWN:
            self._transition(
                LifecycleState.SHUTTING_DOWN,
                f"the controller no longer knows broker epoch {self._broker_epoch}: nothing "
                "left to hand over",
            )
            return
        self._broker_epoch = None
        self._is_fenced = True
        self._retry_after_backoff(now_ms)

    def _on_failure(self, request: LifecycleRequest, reason: str, now_ms: int) -> None:
        self._last_error = f"{_kind(request)} to controller {request.controller_id}: {reason}"
        self._controller_id = self._voter_after(request.controller_id)
        self._retry_after_backoff(now_ms)

    def _note_error(self, request: LifecycleRequest, code: int, message: str) -> None:
        self._last_error = (
            f"{_kind(request)} to controller {request.controller_id}: error {code}"
            f"{': ' + message if message else ''}"
        )

    def _retry_after_backoff(self, now_ms: int) -> None:
        self._next_send_ms = now_ms + self._backoff_ms(self._failed_attempts)
        self._failed_attempts += 1

    def _backoff_ms(self, attempts: int) -> int:
        delay = min(RESEND_BACKOFF_MS_BASE << min(attempts, 30), self.config.resend_backoff_ms_max)
        jitter = delay * RESEND_BACKOFF_JITTER_PERCENT // 100
        return max(0, delay + self._rng.randrange(-jitter, jitter + 1))

    def _succeeded(self) -> None:
        self._failed_attempts = 0
        self._redirects_in_a_row = 0
        self._becoming_active_in_a_row = 0

    def _hurry(self, now_ms: int) -> None:
        """Send the next heartbeat as soon as nothing is in flight: its flags change."""
        if self._in_flight is None:
            self._next_send_ms = min(self._next_send_ms, now_ms)
        else:
            self._urgent = True

    def _take_in_flight(
        self, correlation_id: int, kind: type[LifecycleRequest]
    ) -> LifecycleRequest | None:
        in_flight = self._in_flight
        if (
            in_flight is None
            or in_flight.request.correlation_id != correlation_id
            or not isinstance(in_flight.request, kind)
        ):
            return None  # stale, duplicate, or answered after we gave up on it
        self._in_flight = None
        return in_flight.request

    def _voter_after(self, controller_id: int) -> int:
        ids = self.config.controller_ids
        position = ids.index(controller_id) if controller_id in ids else -1
        return ids[(position + 1) % len(ids)]

    def _transition(self, state: LifecycleState, reason: str) -> None:
        assert state is not self._state, (state, reason)
        self._changes.append(StateChange(self._state, state, reason))
        self._state = state
        if state is LifecycleState.SHUTTING_DOWN:
            self._in_flight = None  # an answer now changes nothing


def _kind(request: LifecycleRequest) -> str:
    return "BrokerRegistration" if isinstance(request, RegistrationRequest) else "BrokerHeartbeat"
