"""Broker heartbeat sessions (soft state) and the broker state machine they drive.

Only the active controller keeps sessions. They are not in the metadata log and not in the
timeline: a new active controller starts every registered broker on a fresh session, as if it
had just heard from it, so that a failover never fences a healthy broker.

Rules (Kafka's `BrokerHeartbeatManager`, KIP-631):
- A session expires once `broker.session.timeout.ms` (9000) has passed since the broker's last
  contact: at `last_contact_ms + session_timeout_ms` exactly.
- A heartbeat moves a broker between FENCED, UNFENCED, CONTROLLED_SHUTDOWN and SHUTDOWN_NOW by
  `next_broker_state`, a pure function of the current state and the request:

  | current             | request                                         | next                |
  | ------------------- | ----------------------------------------------- | ------------------- |
  | FENCED              | want_shut_down                                  | SHUTDOWN_NOW        |
  | FENCED              | not want_fence, metadata offset >= registration | UNFENCED (note)     |
  | FENCED              | otherwise                                       | FENCED              |
  | UNFENCED            | want_fence and want_shut_down                   | SHUTDOWN_NOW        |
  | UNFENCED            | want_fence                                      | FENCED              |
  | UNFENCED            | want_shut_down, leads some partition            | CONTROLLED_SHUTDOWN |
  | UNFENCED            | want_shut_down, leads nothing                   | SHUTDOWN_NOW        |
  | UNFENCED            | otherwise                                       | UNFENCED            |
  | CONTROLLED_SHUTDOWN | still leads some partition                      | CONTROLLED_SHUTDOWN |
  | CONTROLLED_SHUTDOWN | leads nothing, shutdown offset <= lowest active | SHUTDOWN_NOW        |
  | CONTROLLED_SHUTDOWN | otherwise                                       | CONTROLLED_SHUTDOWN |

- Note: a fenced broker whose registration is still flagged in controlled shutdown stays
  FENCED: that incarnation began to leave, and only the registration of a new incarnation
  (which clears the flag) may come back. Otherwise it would be unfenced and elected while
  every ISR change naming it is refused as ineligible (Kafka has the same gap; replog's own
  brokers never send this).
- The lowest active offset is the lowest metadata offset any active broker (unfenced, not
  shutting down) last reported, -1 for one not heard from in this session. A broker in
  controlled shutdown is told to stop only once every active broker has applied the records
  that moved its leaderships away.
- The controlled shutdown offset (the last offset of the write that started it) is soft state
  too; a broker whose session forgot it simply enters controlled shutdown again.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class BrokerState(Enum):
    FENCED = "fenced"
    UNFENCED = "unfenced"
    CONTROLLED_SHUTDOWN = "controlled_shutdown"
    SHUTDOWN_NOW = "shutdown_now"

    @property
    def fenced(self) -> bool:
        """Whether a broker in this state is (or must become) fenced."""
        return self in (BrokerState.FENCED, BrokerState.SHUTDOWN_NOW)


@dataclass(frozen=True, slots=True)
class BrokerHeartbeatRequest:
    broker_id: int
    broker_epoch: int
    current_metadata_offset: int  # the last metadata offset the broker has applied (inclusive)
    want_fence: bool = False
    want_shut_down: bool = False


@dataclass(frozen=True, slots=True)
class BrokerHeartbeatReply:
    is_caught_up: bool
    is_fenced: bool
    in_controlled_shutdown: bool
    should_shut_down: bool


def next_broker_state(
    current: BrokerState,
    request: BrokerHeartbeatRequest,
    *,
    registration_offset: int,
    has_leaderships: bool,
    controlled_shutdown_offset: int | None,
    lowest_active_offset: int,
    flagged_in_controlled_shutdown: bool = False,
) -> BrokerState:
    """The state a heartbeat moves a broker to (the table in the module docstring)."""
    if current is BrokerState.FENCED:
        if request.want_shut_down:
            return BrokerState.SHUTDOWN_NOW
        if (
            not request.want_fence
            and not flagged_in_controlled_shutdown
            and request.current_metadata_offset >= registration_offset
        ):
            return BrokerState.UNFENCED
        return BrokerState.FENCED
    if current is BrokerState.UNFENCED:
        if request.want_fence:
            return BrokerState.SHUTDOWN_NOW if request.want_shut_down else BrokerState.FENCED
        if request.want_shut_down:
            return BrokerState.CONTROLLED_SHUTDOWN if has_leaderships else BrokerState.SHUTDOWN_NOW
        return BrokerState.UNFENCED
    if current is BrokerState.CONTROLLED_SHUTDOWN:
        if has_leaderships:
            return BrokerState.CONTROLLED_SHUTDOWN
        assert controlled_shutdown_offset is not None, "controlled shutdown began at an offset"
        if controlled_shutdown_offset <= lowest_active_offset:
            return BrokerState.SHUTDOWN_NOW
        return BrokerState.CONTROLLED_SHUTDOWN
    return current


@dataclass(slots=True)
class BrokerSession:
    """What the active controller heard from one broker in this session."""

    last_contact_ms: int
    metadata_offset: int = -1
    # The last offset of the write that put the broker in controlled shutdown; None if not.
    controlled_shutdown_offset: int | None = None


class BrokerHeartbeatTracker:
    """The sessions of every registered broker, on the active controller."""

    __slots__ = ("_sessions", "session_timeout_ms")

    def __init__(self, session_timeout_ms: int) -> None:
        if session_timeout_ms <= 0:
            raise ValueError(
                f"broker.session.timeout.ms must be positive, not {session_timeout_ms}"
            )
        self.session_timeout_ms = session_timeout_ms
        self._sessions: dict[int, BrokerSession] = {}

    def __contains__(self, broker_id: object) -> bool:
        return broker_id in self._sessions

    def session(self, broker_id: int, now_ms: int) -> BrokerSession:
        """The broker's session, started now if it has none (a broker registered by a record
        this controller only replayed counts as heard from when first asked about)."""
        session = self._sessions.get(broker_id)
        if session is None:
            session = self._sessions[broker_id] = BrokerSession(now_ms)
        return session

    def start(self, broker_id: int, now_ms: int) -> BrokerSession:
        """Begin a fresh session: activation, or a new registration."""
        session = self._sessions[broker_id] = BrokerSession(now_ms)
        return session

    def touch(self, broker_id: int, now_ms: int, metadata_offset: int | None = None) -> None:
        """The broker was heard from at `now_ms`, reporting `metadata_offset` if given."""
        session = self.session(broker_id, now_ms)
        session.last_contact_ms = max(session.last_contact_ms, now_ms)
        if metadata_offset is not None:
            session.metadata_offset = metadata_offset

    def end_controlled_shutdown(self, broker_id: int) -> None:
        """The broker is fenced: whatever controlled shutdown it was in is over."""
        session = self._sessions.get(broker_id)
        if session is not None:
            session.controlled_shutdown_offset = None

    def remove(self, broker_id: int) -> None:
        self._sessions.pop(broker_id, None)

    def expiry_ms(self, broker_id: int, now_ms: int) -> int:
        """When the broker's session expires unless it is heard from again."""
        return self.session(broker_id, now_ms).last_contact_ms + self.session_timeout_ms

    def is_live(self, broker_id: int, now_ms: int) -> bool:
        """Whether the broker has a session that has not expired at `now_ms`."""
        session = self._sessions.get(broker_id)
        return session is not None and now_ms < session.last_contact_ms + self.session_timeout_ms

    def metadata_offset(self, broker_id: int) -> int:
        """The metadata offset the broker last reported in this session; -1 if none."""
        session = self._sessions.get(broker_id)
        return -1 if session is None else session.metadata_offset
