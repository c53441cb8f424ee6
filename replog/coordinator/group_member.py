"""One consumer's membership in a classic-protocol group, as a pure state machine (Kafka's
`ConsumerCoordinator` and `AbstractCoordinator`, less their I/O).

The consumer's shell (`replog/client/group_membership.py`) asks `next_request(now_ms)` what to
send, sends it, and hands the answer back (`join_answered`, `sync_answered`,
`heartbeat_answered`, or `request_failed` for a transport or coordinator error). At most one
request is in flight. Listener callbacks are events the shell runs from the consumer's `poll`
(`take_events`, then `callbacks_done`); no JoinGroup is sent while callbacks are pending, so a
commit in `on_partitions_revoked` lands before the group moves on.

Phases: UNJOINED (no request in flight for the group; a rejoin may be due), JOINING (a JoinGroup
in flight), SYNCING (joined: a SyncGroup to send or in flight), STABLE (the generation's
assignment is in hand; heartbeats every `heartbeat.interval.ms`).

Rules:
- A rejoin is due after `subscribe` changes the topics, a heartbeat or sync answers
  REBALANCE_IN_PROGRESS, the leader sees its topics' partition counts change, a cooperative
  assignment revokes partitions, the membership is lost, or a SyncGroup completes a
  rebalance joined with other topics than those now subscribed (Kafka's consumer compares its
  joined subscription too). A pattern subscription is a member even while the pattern
  matches no topic (it joins with none, as Kafka's consumer does); an explicit subscription
  to no topic is none. Before the JoinGroup, once per
  rebalance: lost membership gives `lost(owned)`; an eager protocol (range, roundrobin) gives
  `revoked(owned)`; a cooperative one revokes only partitions of topics no longer subscribed.
- After SyncGroup: eager gives `assigned(assignment)`; cooperative gives `revoked(owned - new)`
  and then `assigned(new - owned)`, and a rejoin when something was revoked (KIP-429: the
  next rebalance gives those partitions to their new owner). `assigned` comes every time, even
  empty, as Kafka's does.
- MEMBER_ID_REQUIRED: join again at once with the member id given. UNKNOWN_MEMBER_ID (and a
  static member's FENCED_INSTANCE_ID on a commit) forgets the member id; ILLEGAL_GENERATION
  the generation; both lose the owned partitions. Coordinator and transport errors retry after
  `retry.backoff.ms`. FENCED_INSTANCE_ID, INCONSISTENT_GROUP_PROTOCOL, GROUP_MAX_SIZE_REACHED,
  INVALID_SESSION_TIMEOUT, INVALID_GROUP_ID and any other error are fatal: `fatal` is set and the
  shell raises it from poll.
- `max.poll.interval.ms` (the rebalance timeout): when poll was not called for that long, the
  member leaves the group (a LeaveGroup; its generation and member id are forgotten) and does
  not rejoin until poll is called again; its partitions are then `lost`.
- Commits use `commit_identity`: the generation and member id when STABLE, no generation when
  never in the group; while joining or syncing a commit is refused (RebalanceInProgressError),
  and after the membership was lost, until poll gave its partitions up, too (CommitFailedError),
  as Kafka's commitSync does.
- Closing (`leave`): `leave_events` revokes (or loses) what is owned; a dynamic member then
  sends LeaveGroup; a static member (`group.instance.id`) does not (KIP-345: its session
  decides, so a restart within it causes no rebalance).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from replog.common import TopicPartition
from replog.coordinator import classic_group_messages as gm
from replog.coordinator.assignors import ASSIGNORS, COOPERATIVE, Member, Racks
from replog.coordinator.consumer_group_messages import ConsumerGroupHeartbeatRequest
from replog.coordinator.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    Subscription,
    assigned_partitions,
    assignment_to_bytes,
    subscription_from_bytes,
    subscription_to_bytes,
)
from replog.coordinator.sticky_assignors import subscription_user_data
from replog.errors import (
    CommitFailedError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    IllegalGenerationError,
    KafkaError,
    MemberIdRequiredError,
    NotCoordinatorError,
    RebalanceInProgressError,
    ReplogError,
    UnknownMemberIdError,
)

REVOKED = "revoked"
ASSIGNED = "assigned"
LOST = "lost"

# The reasons a member gives the coordinator (KIP-800), in the Java consumer's words: a
# JoinGroup's why it (re)joins, a LeaveGroup's why it leaves. The coordinator logs them.
LEAVE_CLOSING = "the consumer is being closed"
LEAVE_UNSUBSCRIBED = "the consumer unsubscribed from all topics"
LEAVE_POLL_TIMEOUT = "consumer poll timeout has expired."
REASON_MAX_CHARS = 255  # Kafka's JoinGroupRequest.maybeTruncateReason

# Answers that mean "ask again later, maybe elsewhere": the shell looks the coordinator up again.
_RETRY = (
    NotCoordinatorError,
    CoordinatorNotAvailableError,
    CoordinatorLoadInProgressError,
)


class Phase(enum.Enum):
    UNJOINED = "unjoined"
    JOINING = "joining"
    SYNCING = "syncing"
    STABLE = "stable"


@dataclass(frozen=True, slots=True)
class MemberConfig:
    group_id: str
    client_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int  # max.poll.interval.ms
    heartbeat_interval_ms: int
    retry_backoff_ms: int
    assignors: tuple[str, ...]
    group_instance_id: str | None = None
    rack: str | None = None  # client.rack, in the subscription (v3) for rack-aware assignors

    def __post_init__(self) -> None:
        unknown = [name for name in self.assignors if name not in ASSIGNORS]
        if unknown or not self.assignors:
            raise ValueError(
                f"partition.assignment.strategy: unknown assignor(s) {unknown or '(none)'}; "
                f"replog has {sorted(ASSIGNORS)}"
            )


@dataclass(frozen=True, slots=True)
class RebalanceEvent:
    """One listener callback to run: `kind` (revoked, assigned, lost) with its partitions."""

    kind: str
    partitions: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class Outgoing:
    """A request to send: `kind` (join, sync, heartbeat, leave) and its message (the consumer
    protocol's core sends ConsumerGroupHeartbeat as heartbeat and leave)."""

    kind: str
    request: (
        gm.JoinGroupRequest
        | gm.SyncGroupRequest
        | gm.HeartbeatRequest
        | gm.LeaveGroupRequest
        | ConsumerGroupHeartbeatRequest
    )


@dataclass(slots=True)
class RebalanceStats:
    """Completed rebalances and the time they took (from the rejoin's cause to the assignment)."""

    count: int = 0
    total_ms: int = 0
    last_ms: int = 0
    first_assignment_ms: int | None = None  # time from the first join to the first assignment
    started_ms: int | None = None  # the rebalance under way began then
    first_join_ms: int | None = None

    def begin(self, now_ms: int) -> None:
        """A rebalance is due (a later cause while one is under way changes nothing)."""
        if self.started_ms is None:
            self.started_ms = now_ms
        if self.first_join_ms is None:
            self.first_join_ms = now_ms

    def end(self, now_ms: int) -> None:
        """The rebalance under way (if any; else one of no time) got its assignment."""
        started = self.started_ms if self.started_ms is not None else now_ms
        self.started_ms = None
        self.count += 1
        self.last_ms = now_ms - started
        self.total_ms += self.last_ms
        if self.first_assignment_ms is None and self.first_join_ms is not None:
            self.first_assignment_ms = now_ms - self.first_join_ms


@dataclass(kw_only=True)
class MemberEvents:
    """What both membership cores (this one and `consumer_protocol_member`) keep for the
    consumer's poll: its liveness and the listener callbacks it has to run."""

    _events: list[RebalanceEvent] = field(default_factory=list)
    _callbacks_pending: bool = False
    _poll_expired: bool = False
    _last_poll_ms: int = 0
    _lost: bool = False  # the membership was lost: what is owned is to be `lost`
    _losing: bool = False  # a `lost` callback is queued or running

    def refuse_commit_while_lost(self, group_id: str) -> None:
        """CommitFailedError while the partitions of a lost membership are not yet given up:
        the consumer still holds their positions, and another member may own them now. A
        commit from outside the group would overwrite that member's commits whenever the
        group is Empty; Kafka's consumer refuses it in the same way."""
        if self._lost or self._losing:
            raise CommitFailedError(
                f"group '{group_id}': this consumer's membership was lost and its partitions "
                "may belong to another member now; poll to run on_partitions_lost and rejoin"
            )

    def poll_called(self, now_ms: int) -> None:
        self._last_poll_ms = now_ms
        self._poll_expired = False

    def take_events(self) -> list[RebalanceEvent]:
        """The callbacks to run now; `callbacks_done` must follow once they ran."""
        events, self._events = self._events, []
        return events

    @property
    def callbacks_pending(self) -> bool:
        return self._callbacks_pending

    def _emit(self, kind: str, partitions: frozenset[TopicPartition]) -> None:
        self._events.append(RebalanceEvent(kind, partitions))
        self._callbacks_pending = True
        if kind == LOST:
            self._losing = True

    def _callbacks_ended(self) -> None:
        """`callbacks_done`'s common part: pending while events remain."""
        self._callbacks_pending = bool(self._events)
        if not self._callbacks_pending:
            self._losing = False


@dataclass
class GroupMember(MemberEvents):
    """The member's state (module docstring); every method is given the time as `now_ms`."""

    config: MemberConfig
    topics: frozenset[str] = frozenset()
    by_pattern: bool = False  # the topics are a pattern's matches (Rules: joins with none)
    member_id: str = gm.UNKNOWN_MEMBER_ID
    generation: int = gm.NO_GENERATION
    protocol: str | None = None
    leader: bool = False
    owned: frozenset[TopicPartition] = frozenset()
    phase: Phase = Phase.UNJOINED
    fatal: ReplogError | None = None
    stats: RebalanceStats = field(default_factory=RebalanceStats)
    rejoin_reason: str | None = None
    _counts: dict[str, int] = field(default_factory=dict)
    _assigned_counts: dict[str, int] = field(default_factory=dict)
    _group_topics: frozenset[str] = frozenset()  # every member's topics, while leading
    _gone: frozenset[str] = frozenset()  # reported by the metadata since the assignment, then not
    _last_assignment: frozenset[TopicPartition] | None = None  # `sticky`'s user data
    _joined_topics: frozenset[str] = frozenset()  # the subscription the last JoinGroup sent
    _in_flight: str | None = None
    _sync: gm.SyncGroupRequest | None = None
    _prepared: bool = False
    _next_heartbeat_ms: int = 0
    _retry_at_ms: int = 0

    # --- what the consumer tells it ------------------------------------------------------------

    def subscribe(self, topics: frozenset[str], now_ms: int, *, by_pattern: bool = False) -> None:
        if topics == self.topics and by_pattern == self.by_pattern:
            return
        self.topics = topics
        self.by_pattern = by_pattern
        if self._subscribed:
            # A first join gives no reason, as the Java consumer's gives none.
            self._request_rejoin("subscription has changed" if self._in_group() else "", now_ms)

    @property
    def _subscribed(self) -> bool:
        return bool(self.topics) or self.by_pattern

    @property
    def watched_topics(self) -> frozenset[str]:
        """The topics whose partition counts the consumer reports (`set_partition_counts`):
        its own, and while it leads every member's (Kafka's leader watches the group's
        subscription, so a topic only another member reads gaining partitions rebalances)."""
        return self.topics | self._group_topics

    def set_partition_counts(self, counts: Mapping[str, int], now_ms: int) -> None:
        """The watched topics' partition counts, from metadata (the leader assigns them)."""
        known = {t: n for t, n in counts.items() if t in self.watched_topics}
        self._gone |= self._counts.keys() - known.keys()
        self._counts = known
        if self.leader and self.phase is Phase.STABLE and self._counts_changed():
            self._request_rejoin("cached metadata has changed", now_ms)

    def _counts_changed(self) -> bool:
        """Whether the metadata reports a watched topic with another count than it was assigned
        with (or one that appeared), or no longer reports an assigned topic it reported since
        (deleted: Kafka's leader rebalances then). A topic it never reported, as one that does
        not exist, starts no rebalance, so one missing from every answer cannot loop."""
        if any(self._assigned_counts.get(t) != n for t, n in self._counts.items()):
            return True
        return any(t in self._assigned_counts for t in self._gone - self._counts.keys())

    def callbacks_done(self) -> None:
        self._callbacks_ended()

    def commit_identity(self) -> tuple[int, str, str | None]:
        """(generation, member id, instance id) to commit with (module docstring)."""
        instance = self.config.group_instance_id
        if self.phase is Phase.STABLE:
            return self.generation, self.member_id, instance
        if self.phase is Phase.UNJOINED and self.generation < 0:
            self.refuse_commit_while_lost(self.config.group_id)
            return gm.NO_GENERATION, gm.UNKNOWN_MEMBER_ID, None
        raise RebalanceInProgressError(
            f"group '{self.config.group_id}' is rebalancing: commit after the next poll "
            "completes the rebalance"
        )

    def commit_fenced(self, error: KafkaError, now_ms: int) -> None:
        """A commit refused for its generation or member: the membership is gone."""
        if isinstance(error, RebalanceInProgressError):
            self._request_rejoin("offset commit failed since group is already rebalancing", now_ms)
        else:
            self._reset(
                error, now_ms, f"encountered {error.error_name} from OFFSET_COMMIT response"
            )

    # --- what to send -------------------------------------------------------------------------

    def next_request(self, now_ms: int) -> Outgoing | None:
        """The next request to send now, or None (then wait until `next_deadline_ms`)."""
        if self.fatal is not None or self._in_flight is not None:
            return None
        if self._poll_overdue(now_ms):
            return self._leave_for_poll_timeout(now_ms)
        if self.phase is Phase.SYNCING and self._sync is not None:
            self._in_flight = "sync"
            return Outgoing("sync", self._sync)
        if self._may_join(now_ms):
            if not self._prepared:
                self._prepared = True
                self._prepare_events()
            if not self._callbacks_pending:
                self.phase = Phase.JOINING
                self._in_flight = "join"
                return Outgoing("join", self._join_request())
        if self.phase is Phase.STABLE and now_ms >= self._next_heartbeat_ms:
            self._in_flight = "heartbeat"
            return Outgoing(
                "heartbeat",
                gm.HeartbeatRequest(
                    self.config.group_id,
                    self.member_id,
                    self.generation,
                    self.config.group_instance_id,
                ),
            )
        return None

    def next_deadline_ms(self) -> int | None:
        """When `next_request` may next have something to send with no other input."""
        if self.fatal is not None or self._in_flight is not None:
            return None
        deadlines = []
        if self._in_group():
            deadlines.append(self._last_poll_ms + self.config.rebalance_timeout_ms + 1)
        if self.phase is Phase.STABLE:
            deadlines.append(self._next_heartbeat_ms)
        if self.rejoin_reason is not None:
            deadlines.append(self._retry_at_ms)
        return min(deadlines) if deadlines else None

    def _in_group(self) -> bool:
        return bool(self.member_id) or self.generation >= 0

    def _poll_overdue(self, now_ms: int) -> bool:
        return (
            not self._poll_expired
            and self._in_group()
            and now_ms - self._last_poll_ms > self.config.rebalance_timeout_ms
        )

    def _may_join(self, now_ms: int) -> bool:
        return (
            self.rejoin_reason is not None
            and self._subscribed
            and self.phase in (Phase.UNJOINED, Phase.STABLE)
            and not self._poll_expired
            and now_ms >= self._retry_at_ms
        )

    def _join_request(self) -> gm.JoinGroupRequest:
        cooperative = self.protocol in COOPERATIVE
        self._joined_topics = self.topics
        topics = tuple(sorted(self.topics))
        owned = tuple(sorted(self.owned))
        generation = self.generation if cooperative or self.owned else gm.NO_GENERATION
        # One subscription per assignor: `sticky` and `cooperative-sticky` add user data.
        protocols = tuple(
            (
                name,
                subscription_to_bytes(
                    Subscription(
                        topics,
                        owned,
                        generation,
                        subscription_user_data(name, self._last_assignment, self.generation),
                        self.config.rack,
                    )
                ),
            )
            for name in self.config.assignors
        )
        return gm.JoinGroupRequest(
            self.config.group_id,
            self.member_id,
            CONSUMER_PROTOCOL_TYPE,
            protocols,
            self.config.session_timeout_ms,
            self.config.rebalance_timeout_ms,
            self.config.group_instance_id,
            self.config.client_id,
            reason=(self.rejoin_reason or "")[:REASON_MAX_CHARS],
        )

    def _prepare_events(self) -> None:
        """The callbacks before a JoinGroup (module docstring), once per rebalance."""
        if self._lost and self.owned:
            self._emit(LOST, self.owned)
            self.owned = frozenset()
        elif self.protocol not in COOPERATIVE and self.owned:
            self._emit(REVOKED, self.owned)
            self.owned = frozenset()
        else:
            gone = frozenset(tp for tp in self.owned if tp.topic not in self.topics)
            if gone:
                self._emit(REVOKED, gone)
                self.owned -= gone
        self._lost = False

    # --- answers ------------------------------------------------------------------------------

    def join_answered(
        self,
        answer: gm.JoinGroupResponse,
        now_ms: int,
        counts: Mapping[str, int] | None = None,
        racks: Racks | None = None,
    ) -> None:
        """`counts`: the partition counts of every topic the members subscribe to
        (`assigns_topics`), which a leader assigns; default: those of its own topics.
        `racks`: their partitions' replica racks (rack-aware assignors)."""
        self._in_flight = None
        error = answer.error
        if error is None:
            self.member_id = answer.member_id
            self.generation = answer.generation_id
            self.protocol = answer.protocol_name
            self.leader = answer.leader == answer.member_id
            if not self.leader:
                self._group_topics = frozenset()
            assignments: tuple[tuple[str, bytes], ...] = ()
            if self.leader and not answer.skip_assignment:
                try:
                    assignments = self._assign(
                        answer, self._counts if counts is None else counts, racks
                    )
                except ValueError as exc:
                    self.fatal = KafkaError(f"group '{self.config.group_id}': {exc}")
                    return
            self._sync = gm.SyncGroupRequest(
                self.config.group_id,
                self.member_id,
                self.generation,
                self.config.group_instance_id,
                CONSUMER_PROTOCOL_TYPE,
                self.protocol,
                assignments,
            )
            self.phase = Phase.SYNCING
            return
        self.phase = Phase.UNJOINED
        if isinstance(error, MemberIdRequiredError):
            self.member_id = answer.member_id
            self._request_rejoin(
                f"need to re-join with the given member-id: {self.member_id}", now_ms
            )
        elif self._error_answer(error, _rebalance_failed(error), now_ms):
            self._retry_at_ms = now_ms + self.config.retry_backoff_ms

    @staticmethod
    def assigns_topics(answer: gm.JoinGroupResponse) -> frozenset[str] | None:
        """The topics a JoinGroup answer asks this member to assign (it leads and must), or
        None; the shell looks their partition counts up before `join_answered`."""
        if answer.error is not None or answer.leader != answer.member_id or answer.skip_assignment:
            return None
        topics: set[str] = set()
        for m in answer.members:
            try:
                topics.update(subscription_from_bytes(m.metadata).topics)
            except ValueError:
                continue  # join_answered reports it
        return frozenset(topics)

    def _error_answer(self, error: KafkaError, reason: str, now_ms: int) -> bool:
        """What join, sync and heartbeat answers share (module docstring): rebalancing asks
        for a rejoin, a lost membership resets, others are fatal (`reason`: the rejoin's);
        True: a coordinator error, to retry after a backoff."""
        if isinstance(error, RebalanceInProgressError):
            self._request_rejoin(reason, now_ms)
        elif isinstance(error, UnknownMemberIdError | IllegalGenerationError):
            self._reset(error, now_ms, reason)
        elif isinstance(error, _RETRY):
            return True
        else:
            self.fatal = error
        return False

    def _assign(
        self, answer: gm.JoinGroupResponse, counts: Mapping[str, int], racks: Racks | None
    ) -> tuple[tuple[str, bytes], ...]:
        members = [
            Member(m.member_id, m.group_instance_id, subscription_from_bytes(m.metadata))
            for m in answer.members
        ]
        assignor = ASSIGNORS.get(answer.protocol_name or "")
        if assignor is None:
            raise ValueError(f"the group chose assignor {answer.protocol_name!r}, unknown here")
        self._group_topics = frozenset(t for m in members for t in m.subscription.topics)
        self._assigned_counts = dict(counts)
        self._gone = frozenset()
        plan = assignor(members, counts, racks)
        return tuple((member_id, assignment_to_bytes(parts)) for member_id, parts in plan.items())

    def sync_answered(self, answer: gm.SyncGroupResponse, now_ms: int) -> None:
        self._in_flight = None
        self._sync = None
        error = answer.error
        if error is not None:
            self.phase = Phase.UNJOINED
            if self._error_answer(error, _rebalance_failed(error), now_ms):
                self._request_rejoin(_rebalance_failed(error), now_ms)
                self._retry_at_ms = now_ms + self.config.retry_backoff_ms
            return
        assigned = frozenset(
            TopicPartition(t, p) for t, p in assigned_partitions(answer.assignment)
        )
        self.phase = Phase.STABLE
        self._last_assignment = assigned
        self._next_heartbeat_ms = now_ms + self.config.heartbeat_interval_ms
        self._prepared = False
        self.rejoin_reason = None
        self.stats.end(now_ms)
        if self.protocol in COOPERATIVE:
            revoked = self.owned - assigned
            if revoked:
                self._emit(REVOKED, revoked)
            self._emit(ASSIGNED, assigned - self.owned)
            self.owned = assigned
            if revoked:
                self._request_rejoin("need to revoke partitions and re-join", now_ms)
        else:
            self.owned = assigned
            self._emit(ASSIGNED, assigned)
        if self.leader and self._counts_changed():
            self._request_rejoin("cached metadata has changed", now_ms)
        if self._subscribed and self.topics != self._joined_topics:
            # Subscribed while the join was under way: the group assigned the old topics.
            self._request_rejoin("subscription has changed", now_ms)

    def heartbeat_answered(self, error: KafkaError | None, now_ms: int) -> None:
        self._in_flight = None
        if self.phase is not Phase.STABLE:
            return  # a rebalance began meanwhile (cannot happen with one request in flight)
        self._next_heartbeat_ms = now_ms + self.config.heartbeat_interval_ms
        if error is None:
            return
        reason = (
            "group is already rebalancing"
            if isinstance(error, RebalanceInProgressError)
            else f"encountered {error.error_name} from HEARTBEAT response"
        )
        if self._error_answer(error, reason, now_ms):
            self._next_heartbeat_ms = now_ms + self.config.retry_backoff_ms

    def request_failed(self, kind: str, now_ms: int, cause: str = "DisconnectException") -> None:
        """The request of `kind` got no answer (transport, timeout, coordinator moved);
        `cause` names the failure (an exception's class)."""
        self._in_flight = None
        if kind in ("join", "sync"):
            self.phase = Phase.UNJOINED
            self._sync = None
            self._request_rejoin(f"rebalance failed due to {cause}", now_ms)
            self._retry_at_ms = now_ms + self.config.retry_backoff_ms
        elif kind == "heartbeat":
            self._next_heartbeat_ms = now_ms + self.config.retry_backoff_ms

    # --- leaving ------------------------------------------------------------------------------

    def leave_events(self) -> list[RebalanceEvent]:
        """The callbacks before leaving (close, unsubscribe): what is owned, revoked or lost."""
        if self.owned:
            self._emit(LOST if self._lost else REVOKED, self.owned)
            self.owned = frozenset()
        return self.take_events()

    def leave(self, now_ms: int, reason: str = LEAVE_CLOSING) -> Outgoing | None:
        """Leave the group (module docstring), saying why (`reason`); the member starts afresh
        if it joins again."""
        request = None
        if self.member_id and self.config.group_instance_id is None and self.fatal is None:
            member = gm.LeaveMember(self.member_id, reason=reason[:REASON_MAX_CHARS])
            request = Outgoing("leave", gm.LeaveGroupRequest(self.config.group_id, (member,)))
        self._forget()
        self.topics = frozenset()
        self.by_pattern = False
        self.rejoin_reason = None
        return request

    def _leave_for_poll_timeout(self, now_ms: int) -> Outgoing | None:
        request = (
            Outgoing(
                "leave",
                gm.LeaveGroupRequest(
                    self.config.group_id,
                    (
                        gm.LeaveMember(
                            self.member_id, self.config.group_instance_id, LEAVE_POLL_TIMEOUT
                        ),
                    ),
                ),
            )
            if self.member_id
            else None
        )
        self._forget()
        self._lost = True
        self._poll_expired = True
        self._request_rejoin("consumer pro-actively leaving the group", now_ms)
        return request

    # --- helpers ------------------------------------------------------------------------------

    def _forget(self, *, keep_member_id: bool = False) -> None:
        """No generation (and no member id unless kept): the next join starts afresh."""
        if not keep_member_id:
            self.member_id = gm.UNKNOWN_MEMBER_ID
        self.generation = gm.NO_GENERATION
        self.leader = False
        self.phase = Phase.UNJOINED
        self._sync = None
        self._prepared = False

    def _reset(self, error: KafkaError, now_ms: int, reason: str) -> None:
        """The membership is gone (module docstring): owned partitions are lost."""
        self._forget(keep_member_id=not isinstance(error, UnknownMemberIdError))
        self._lost = True
        self._request_rejoin(reason, now_ms)

    def _request_rejoin(self, reason: str, now_ms: int) -> None:
        """A rejoin is due; the next JoinGroup gives the latest `reason`, as Kafka's does."""
        self.rejoin_reason = reason
        self.stats.begin(now_ms)


def _rebalance_failed(error: KafkaError) -> str:
    """The Java consumer's reason after a failed JoinGroup or SyncGroup: the failure's
    exception class (REBALANCE_IN_PROGRESS: RebalanceInProgressException)."""
    name = "".join(word.capitalize() for word in error.error_name.split("_"))
    return f"rebalance failed due to {name}Exception"
