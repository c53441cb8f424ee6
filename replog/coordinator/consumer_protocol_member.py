"""One consumer's membership in a consumer-protocol (KIP-848) group, as a pure state machine
(Kafka's `ConsumerMembershipManager` and `HeartbeatRequestManager`, less their I/O).

The same contract as the classic `GroupMember` (`group_member.py`), so the consumer's shell
(`replog/client/group_membership.py`) drives either: `next_request(now_ms)` says what to send
(a ConsumerGroupHeartbeat, as kind "heartbeat", or a leaving one, as kind "leave"), the
answer comes back through `heartbeat_answered` (or `request_failed`), and listener callbacks
are events the consumer runs from `poll` (`take_events`, then `callbacks_done`). At most one
request is in flight.

Phases (the classic `Phase` names): UNJOINED (not a member: a join is due when subscribed),
JOINING (the join, member epoch 0, is in flight), STABLE (a member at `member_epoch` > 0,
reconciling or not: this protocol never stops the group).

Rules:
- The member id is the member's own (KIP-1082: a UUID the shell makes once per consumer) and
  is kept through rejoins. A join sends every field (rebalance timeout = `max.poll.interval.ms`,
  topic names, `group.remote.assignor`, instance id, an empty owned list); later heartbeats send
  the owned partitions every time and the other fields only after a change or a failed
  request (null: unchanged).
- A pattern subscription sends the pattern as the heartbeat's regex (`SubscribedTopicRegex`,
  an empty topic list beside it): the coordinator matches it against the cluster's topics
  itself, and `topics` (the consumer's own matches) only names the assigned topic ids. A later
  subscription by names sends an empty regex with them, which clears the regex.
- The coordinator's answer gives the heartbeat interval (the next heartbeat is due that long
  after the answer) and, when it changed, the partitions the member may own now, by topic id.
  Reconciliation, one at a time: owned partitions the assignment no longer lists are
  `revoked` (the consumer commits them first, with auto-commit), then the new ones are
  `assigned` (every reconciliation, even empty, and the first assignment after a join even
  when it is empty, as the classic protocol's, unless it only waits for topic ids); only once the
  callbacks ran does the member own the new set, and it heartbeats at once to acknowledge it
  (Kafka's client does the same). Until then heartbeats still list the partitions being
  revoked, so the coordinator never gives them to another member while a revoke callback (and
  its commit) runs. Topic ids the consumer's metadata cannot name yet wait until it can
  (`set_topic_ids`).
- FENCED_MEMBER_EPOCH and UNKNOWN_MEMBER_ID: the owned partitions are `lost`, then the member
  rejoins at epoch 0. NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS
  and a failed request retry after `retry.backoff.ms` with every field. Any other error
  (UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED, UNSUPPORTED_ASSIGNOR,
  GROUP_ID_NOT_FOUND for a classic group's id, INVALID_REQUEST, ...) is fatal: `fatal` is set
  and the shell raises it from poll.
- `max.poll.interval.ms`: when poll was not called for that long, the member leaves (epoch -1,
  a static member -2) and does not rejoin until poll is called again; its partitions are then
  `lost`.
- Commits use `commit_identity`: the member epoch and member id in the group; no epoch when
  not a member; refused (RebalanceInProgressError) while the join is in flight, and
  (CommitFailedError) after a fencing until poll gave the lost partitions up. A commit
  refused with STALE_MEMBER_EPOCH heartbeats at once (the coordinator moved the member on);
  UNKNOWN_MEMBER_ID or FENCED_INSTANCE_ID on a commit is a fencing, as in a heartbeat.
- Leaving (`leave`): `leave_events` revokes (or loses) what is owned; then a member sends a
  heartbeat with epoch -1, a static member (`group.instance.id`) -2, which keeps its
  partitions for it until it rejoins or its session ends (KIP-848's static membership).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from uuid import UUID

from replog.common import TopicPartition
from replog.coordinator import consumer_group_messages as cgm
from replog.coordinator.consumer_member import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    Partitions,
    by_topic,
    flatten,
)
from replog.coordinator.group_member import (
    ASSIGNED,
    LEAVE_CLOSING,
    LOST,
    REVOKED,
    MemberEvents,
    Outgoing,
    Phase,
    RebalanceEvent,
    RebalanceStats,
)
from replog.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    FencedMemberEpochError,
    KafkaError,
    NotCoordinatorError,
    RebalanceInProgressError,
    ReplogError,
    StaleMemberEpochError,
    UnknownMemberIdError,
)

_RETRY = (NotCoordinatorError, CoordinatorNotAvailableError, CoordinatorLoadInProgressError)
_FENCED = (FencedMemberEpochError, UnknownMemberIdError)


@dataclass(frozen=True, slots=True)
class ConsumerMemberConfig:
    group_id: str
    client_id: str
    member_id: str  # the member's own id (KIP-1082), kept for the consumer's life
    rebalance_timeout_ms: int  # max.poll.interval.ms
    retry_backoff_ms: int
    server_assignor: str | None = None  # group.remote.assignor; None: the group's default
    group_instance_id: str | None = None
    rack_id: str | None = None  # client.rack: the member's rack, sent with every field


@dataclass
class ConsumerProtocolMember(MemberEvents):
    """The member's state (module docstring); every method is given the time as `now_ms`."""

    config: ConsumerMemberConfig
    topics: frozenset[str] = frozenset()
    pattern: str | None = None  # a regex subscription (module docstring)
    member_epoch: int = 0
    phase: Phase = Phase.UNJOINED
    owned: frozenset[TopicPartition] = frozenset()
    fatal: ReplogError | None = None
    stats: RebalanceStats = field(default_factory=RebalanceStats)
    rejoin_reason: str | None = None
    heartbeat_interval_ms: int = 0  # the coordinator's, from its last answer
    _owned_ids: Partitions = frozenset()
    _target: Partitions | None = None  # the coordinator's last assignment
    _reconciling: tuple[Partitions, frozenset[TopicPartition]] | None = None  # ids, names
    _topic_ids: dict[str, UUID] = field(default_factory=dict)
    _names: dict[UUID, str] = field(default_factory=dict)
    _prepared: bool = False
    _in_flight: str | None = None
    _full: bool = True  # the next heartbeat sends every field
    _subscription_changed: bool = False
    _regex_sent: bool = False  # a regex went out: a subscription by names must clear it
    _ack_due: bool = False
    _reconciled_at_ms: int = 0
    _reconciled_since_join: bool = False  # the first assignment after a join is always run
    _next_heartbeat_ms: int = 0
    _retry_at_ms: int = 0

    @property
    def member_id(self) -> str:
        return self.config.member_id

    # --- what the consumer tells it ------------------------------------------------------------

    def subscribe(self, topics: frozenset[str], now_ms: int, pattern: str | None = None) -> None:
        """Subscribe to `topics`, or to `pattern` (then `topics` are the consumer's matches,
        which change nothing the coordinator is told)."""
        if topics == self.topics and pattern == self.pattern:
            return
        pattern_changed = pattern != self.pattern
        self.topics, self.pattern = topics, pattern
        if pattern is None and not topics:
            return
        if pattern is not None and not pattern_changed:
            self._maybe_reconcile(now_ms)  # newly matched topics may name assigned ids
            return
        if self.phase is Phase.UNJOINED:
            self._request_rejoin("the consumer subscribed", now_ms)
        else:
            self._subscription_changed = True
            self._next_heartbeat_ms = now_ms

    @property
    def waits_for_topic_ids(self) -> bool:
        """Whether the coordinator assigned topics the consumer's metadata cannot name yet
        (a pattern's new topic the coordinator saw first): the consumer refreshes it."""
        target = self._target
        return target is not None and any(t not in self._names for t, _ in target)

    def set_topic_ids(self, topic_ids: Mapping[str, UUID], now_ms: int) -> None:
        """The topic ids the consumer's metadata knows (an assignment names topics by id)."""
        self._topic_ids.update(topic_ids)
        self._names.update((topic_id, name) for name, topic_id in topic_ids.items())
        self._maybe_reconcile(now_ms)

    def callbacks_done(self) -> None:
        self._callbacks_ended()
        if self._callbacks_pending or self._reconciling is None:
            return
        ids, names = self._reconciling
        self._reconciling = None
        self._owned_ids = ids
        self.owned = names
        if self.phase is Phase.STABLE:
            self._ack_due = True  # acknowledge at once (module docstring)
            if ids == self._target and self.stats.started_ms is not None:
                self.stats.end(self._reconciled_at_ms)

    def commit_identity(self) -> tuple[int, str, str | None]:
        """(member epoch, member id, instance id) to commit with (module docstring)."""
        if self.phase is Phase.STABLE:
            return self.member_epoch, self.member_id, self.config.group_instance_id
        if self.phase is Phase.UNJOINED:
            self.refuse_commit_while_lost(self.config.group_id)
            return -1, "", None
        raise RebalanceInProgressError(
            f"group '{self.config.group_id}': the member is joining: commit after the next "
            "poll completes the join"
        )

    def commit_fenced(self, error: KafkaError, now_ms: int) -> None:
        """A commit refused for the member's epoch or identity (module docstring)."""
        if isinstance(error, StaleMemberEpochError):
            self._next_heartbeat_ms = now_ms
        elif isinstance(error, (*_FENCED, FencedInstanceIdError)) and self.phase is Phase.STABLE:
            self._fenced(error, now_ms)

    # --- what to send -------------------------------------------------------------------------

    def next_request(self, now_ms: int) -> Outgoing | None:
        """The next request to send now, or None (then wait until `next_deadline_ms`)."""
        if self.fatal is not None or self._in_flight is not None:
            return None
        if self._poll_overdue(now_ms):
            return self._leave_for_poll_timeout(now_ms)
        if self._may_join(now_ms):
            if self._callbacks_pending:
                return None  # a reconciliation's callbacks still run: they decide what is owned
            if not self._prepared:
                self._prepared = True
                self._lost, lost = False, self._lost
                if self.owned:
                    self._emit(LOST if lost else REVOKED, self.owned)
                    self._drop_owned()
                    return None
            self.phase = Phase.JOINING
            self.member_epoch = 0
            self._in_flight = "heartbeat"
            self._full = self._subscription_changed = False
            return Outgoing("heartbeat", self._heartbeat(full=True))
        if self.phase is Phase.STABLE:
            self._maybe_reconcile(now_ms)
        if self.phase is Phase.STABLE and (self._ack_due or now_ms >= self._next_heartbeat_ms):
            self._ack_due = False
            self._in_flight = "heartbeat"
            full, self._full = self._full, False
            changed, self._subscription_changed = self._subscription_changed, False
            return Outgoing("heartbeat", self._heartbeat(full=full, topics=changed))
        return None

    def next_deadline_ms(self) -> int | None:
        """When `next_request` may next have something to send with no other input."""
        if self.fatal is not None or self._in_flight is not None:
            return None
        deadlines = []
        if self._in_group():
            deadlines.append(self._last_poll_ms + self.config.rebalance_timeout_ms + 1)
        if self.phase is Phase.STABLE:
            deadlines.append(0 if self._ack_due else self._next_heartbeat_ms)
        if self.rejoin_reason is not None:
            deadlines.append(self._retry_at_ms)
        return min(deadlines) if deadlines else None

    def _in_group(self) -> bool:
        return self.phase is not Phase.UNJOINED

    def _poll_overdue(self, now_ms: int) -> bool:
        return (
            not self._poll_expired
            and self._in_group()
            and now_ms - self._last_poll_ms > self.config.rebalance_timeout_ms
        )

    def _may_join(self, now_ms: int) -> bool:
        return (
            self.phase is Phase.UNJOINED
            and self.rejoin_reason is not None
            and (bool(self.topics) or self.pattern is not None)
            and not self._poll_expired
            and now_ms >= self._retry_at_ms
        )

    def _heartbeat(self, *, full: bool, topics: bool = False) -> cgm.ConsumerGroupHeartbeatRequest:
        config = self.config
        joining = self.phase is Phase.JOINING
        names: tuple[str, ...] | None = None
        regex: str | None = None
        if full or topics:
            if self.pattern is not None:
                names, regex = (), self.pattern
                self._regex_sent = True
            else:
                names = tuple(sorted(self.topics))
                regex = "" if self._regex_sent else None
        return cgm.ConsumerGroupHeartbeatRequest(
            config.group_id,
            config.member_id,
            0 if joining else self.member_epoch,
            instance_id=config.group_instance_id,
            rack_id=config.rack_id if full else None,
            rebalance_timeout_ms=config.rebalance_timeout_ms if full else -1,
            subscribed_topic_names=names,
            subscribed_topic_regex=regex,
            server_assignor=config.server_assignor if full else None,
            owned=() if joining else by_topic(self._owned_ids),
            client_id=config.client_id,
        )

    def _leave_request(self) -> Outgoing:
        static = self.config.group_instance_id is not None
        return Outgoing(
            "leave",
            cgm.ConsumerGroupHeartbeatRequest(
                self.config.group_id,
                self.config.member_id,
                LEAVE_GROUP_STATIC_MEMBER_EPOCH if static else LEAVE_GROUP_MEMBER_EPOCH,
                instance_id=self.config.group_instance_id,
                client_id=self.config.client_id,
            ),
        )

    # --- answers ------------------------------------------------------------------------------

    def heartbeat_answered(self, answer: cgm.ConsumerGroupHeartbeatResponse, now_ms: int) -> None:
        self._in_flight = None
        if self.phase is Phase.UNJOINED:
            return  # the member left meanwhile
        error = answer.error
        if error is None:
            if self.phase is Phase.JOINING:
                self.phase = Phase.STABLE
                self.rejoin_reason = None
                self._prepared = False
            self.member_epoch = answer.member_epoch
            self.heartbeat_interval_ms = answer.heartbeat_interval_ms
            # A subscription changed while this heartbeat was in flight goes out at once.
            self._next_heartbeat_ms = now_ms + (
                0 if self._subscription_changed else answer.heartbeat_interval_ms
            )
            if answer.assignment is not None:
                self._target = flatten(answer.assignment)
                self._maybe_reconcile(now_ms)
            return
        if isinstance(error, _FENCED):
            self._fenced(error, now_ms)
        elif isinstance(error, _RETRY):
            self._failed(now_ms)
        else:
            self.fatal = error

    def request_failed(self, kind: str, now_ms: int) -> None:
        """The request of `kind` got no answer (transport, timeout, coordinator moved)."""
        self._in_flight = None
        if kind == "heartbeat":
            self._failed(now_ms)

    def _failed(self, now_ms: int) -> None:
        self._full = True
        if self.phase is Phase.JOINING:
            self.phase = Phase.UNJOINED
            self._retry_at_ms = now_ms + self.config.retry_backoff_ms
        else:
            self._next_heartbeat_ms = now_ms + self.config.retry_backoff_ms

    def _maybe_reconcile(self, now_ms: int) -> None:
        """Start the next reconciliation towards the coordinator's assignment, if one is due
        and none is running (module docstring)."""
        target = self._target
        if self.phase is not Phase.STABLE or target is None or self._reconciling is not None:
            return
        named = frozenset(tp for tp in target if tp[0] in self._names)
        if named == self._owned_ids and (self._reconciled_since_join or named != target):
            if named == target and self.stats.started_ms is not None:
                self.stats.end(now_ms)
            return
        if self.stats.started_ms is None:
            self.stats.started_ms = now_ms
        revoked = self._owned_ids - named
        added = named - self._owned_ids
        if revoked:
            self._emit(REVOKED, self._named(revoked))
        self._emit(ASSIGNED, self._named(added))
        self._reconciling = (named, self._named(named))
        self._reconciled_at_ms = now_ms
        self._reconciled_since_join = True

    # --- leaving ------------------------------------------------------------------------------

    def leave_events(self) -> list[RebalanceEvent]:
        """The callbacks before leaving (close, unsubscribe): what is owned, revoked or lost."""
        if self.owned:
            self._emit(LOST if self._lost else REVOKED, self.owned)
            self._drop_owned()
        return self.take_events()

    def leave(self, now_ms: int, reason: str = LEAVE_CLOSING) -> Outgoing | None:
        """Leave the group (module docstring); the member starts afresh if it joins again.
        `reason` is not sent: a leaving ConsumerGroupHeartbeat has no field for it."""
        request = None
        if self.phase is not Phase.UNJOINED and self.fatal is None:
            request = self._leave_request()
        self._forget()
        self.topics = frozenset()
        self.pattern = None
        self.rejoin_reason = None
        return request

    def _leave_for_poll_timeout(self, now_ms: int) -> Outgoing | None:
        request = self._leave_request() if self.phase is Phase.STABLE else None
        self._forget()
        self._lost = True
        self._poll_expired = True
        self._request_rejoin("poll was not called within max.poll.interval.ms", now_ms)
        return request

    # --- helpers ------------------------------------------------------------------------------

    def _fenced(self, error: KafkaError, now_ms: int) -> None:
        """The membership is gone: owned partitions are lost, the member rejoins at epoch 0."""
        self._forget()
        self._lost = True
        self._request_rejoin(f"{error.error_name}: the membership was lost", now_ms)

    def _forget(self) -> None:
        """Not a member: epoch 0, no assignment to reconcile (owned stays until its callback)."""
        self.phase = Phase.UNJOINED
        self.member_epoch = 0
        self._target = None
        self._reconciled_since_join = False
        self._full = True
        self._ack_due = False
        self._prepared = False
        self._subscription_changed = False
        if self._reconciling is not None and self._events:
            # Its callbacks have not started: they never will, what is owned stays owned (and
            # the rejoin loses it). Callbacks already running finish the reconciliation first.
            self._reconciling = None
            self._events.clear()
            self._callbacks_pending = False

    def _drop_owned(self) -> None:
        self.owned = frozenset()
        self._owned_ids = frozenset()

    def _named(self, partitions: Partitions) -> frozenset[TopicPartition]:
        return frozenset(TopicPartition(self._names[t], p) for t, p in partitions)

    def _request_rejoin(self, reason: str, now_ms: int) -> None:
        if self.rejoin_reason is None:
            self.rejoin_reason = reason
        self.stats.begin(now_ms)
