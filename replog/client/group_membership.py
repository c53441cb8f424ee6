"""The consumer's side of a consumer group: the I/O shell of either membership core, the
classic protocol's `GroupMember` (`replog/coordinator/group_member.py`) or the consumer
protocol's `ConsumerProtocolMember` (`consumer_protocol_member.py`, KIP-848), where the rules
are; `group.protocol` chooses.

A subscribed consumer with a `group.id` joins the group through the Kafka listener of the
group's coordinator (found as `GroupOffsets` finds it; `KafkaCoordinatorClient`). One
background task (in the consumer's `TaskOwner`) sends what the core asks for, one request at a
time: with the classic protocol JoinGroup, SyncGroup, Heartbeat every `heartbeat.interval.ms`,
LeaveGroup when `max.poll.interval.ms` passes without a poll; with the consumer protocol
ConsumerGroupHeartbeat at the coordinator's interval (and at once to acknowledge a reconciled
assignment), a leaving one (epoch -1 or -2) instead of LeaveGroup. The consumer's `poll` calls
`poll_started` (liveness) and `run_callbacks`, which runs the listener's callbacks in poll
(Kafka's place for them) and changes the consumer's assignment around them: partitions leave
the assignment after `on_partitions_revoked`/`on_partitions_lost` ran (so the callback can
still commit their positions) and join it before `on_partitions_assigned` runs (so it can
seek).

Rules:
- A listener is any object with `on_partitions_revoked(partitions)` and
  `on_partitions_assigned(partitions)`, and optionally `on_partitions_lost(partitions)`
  (without it, lost partitions go to `on_partitions_revoked`, as Kafka's default does). Each
  gets a set of TopicPartition; a method may be a coroutine function (asyncio). An exception
  from a callback is raised from that poll once the assignment change is applied.
- JoinGroup and SyncGroup may wait for the other members: their timeout is the rebalance
  timeout (`max.poll.interval.ms`) plus `request.timeout.ms`.
- A lost or refused connection, an unanswered request or a coordinator answer
  (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS) forgets the
  coordinator; the core retries after `retry.backoff.ms`. A classic member's heartbeat is
  unanswered after `session.timeout.ms` when `request.timeout.ms` is longer. An error that
  retrying cannot mend (an invalid group id, an address that is not a Kafka listener) is
  raised from `poll`.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any
from uuid import UUID

from replog.client.group_offsets import GroupOffsets
from replog.client.records import TopicPartition
from replog.clock import Clock
from replog.coordinator import classic_group_messages as gm
from replog.coordinator import consumer_group_messages as cgm
from replog.coordinator.assignors import Racks
from replog.coordinator.consumer_protocol_member import ConsumerProtocolMember
from replog.coordinator.group_member import (
    ASSIGNED,
    LEAVE_CLOSING,
    LOST,
    REVOKED,
    GroupMember,
    Outgoing,
    RebalanceEvent,
)
from replog.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    NotCoordinatorError,
    ReplogError,
)

log = logging.getLogger("replog.client.consumer")

# Runs one listener callback with its partitions; the blocking consumer runs it in the thread
# that waits in poll.
ListenerRunner = Callable[[Callable[[set[TopicPartition]], Any], set[TopicPartition]], Any]
# What the consumer does around a callback: (kind, partitions) before or after it runs.
AssignmentChange = Callable[[str, frozenset[TopicPartition]], Awaitable[None]]


async def call_listener(
    callback: Callable[[set[TopicPartition]], Any], partitions: set[TopicPartition]
) -> None:
    """Call `callback(partitions)`, awaiting it when it is a coroutine."""
    result = callback(partitions)
    if inspect.isawaitable(result):
        await result


def check_listener(listener: object) -> None:
    """A TypeError naming what a listener lacks."""
    for name in ("on_partitions_revoked", "on_partitions_assigned"):
        if not callable(getattr(listener, name, None)):
            raise TypeError(
                f"subscribe(): listener {listener!r} has no method {name}(partitions) "
                "(ConsumerRebalanceListener's shape)"
            )


MemberCore = GroupMember | ConsumerProtocolMember


class GroupMembership:
    """The shell of one consumer's membership (module docstring)."""

    def __init__(
        self,
        core: MemberCore,
        offsets: GroupOffsets,
        *,
        request_timeout_ms: int,
        clock: Clock,
        on_change: Callable[[], None],
        partition_layout: Callable[[frozenset[str], int], Awaitable[tuple[dict[str, int], Racks]]],
    ) -> None:
        """`partition_layout(topics, deadline_ms)`: the partition counts of the topics the
        metadata knows (a leader assigns every member's topics, not only its own) and their
        partitions' replica racks (rack-aware assignors)."""
        self.core: MemberCore = core
        self._offsets = offsets
        self._request_timeout_ms = request_timeout_ms
        self._clock = clock
        self._on_change = on_change  # wakes the consumer's poll: callbacks to run
        self._partition_layout = partition_layout
        self._kick = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.listener: object | None = None

    @property
    def group_id(self) -> str:
        return self.core.config.group_id

    def start(self, spawn: Callable[[Any], asyncio.Task[None]]) -> None:
        if self._task is None or self._task.done():
            self._task = spawn(self._run())

    def kick(self) -> None:
        self._kick.set()

    # --- from the consumer --------------------------------------------------------------------

    def subscribe(
        self, topics: frozenset[str], listener: object | None, pattern: str | None = None
    ) -> None:
        """Subscribe to `topics`; with a pattern subscription `topics` are its matches, and the
        consumer protocol sends the `pattern` for the coordinator to match (the classic
        protocol's assignors see only topic names)."""
        self.listener = listener
        if isinstance(self.core, ConsumerProtocolMember):
            self.core.subscribe(topics, self._clock(), pattern)
        else:
            self.core.subscribe(topics, self._clock(), by_pattern=pattern is not None)
        self.kick()

    def watched_topics(self, subscribed: frozenset[str]) -> frozenset[str]:
        """The topics whose partitions to report (`topics_known`): the subscribed ones, and a
        classic leader's whole group's."""
        if isinstance(self.core, GroupMember):
            return subscribed | self.core.watched_topics
        return subscribed

    def topics_known(self, counts: dict[str, int], topic_ids: dict[str, UUID]) -> None:
        """The subscribed topics as the metadata knows them: partition counts (a classic
        leader assigns them) and topic ids (a consumer-protocol assignment names topics by
        id)."""
        if isinstance(self.core, GroupMember):
            self.core.set_partition_counts(counts, self._clock())
        else:
            self.core.set_topic_ids(topic_ids, self._clock())
        self.kick()

    def poll_started(self) -> None:
        """Liveness and errors: raises the core's fatal error (module docstring of the core)."""
        self.core.poll_called(self._clock())
        self.kick()
        if self.core.fatal is not None:
            raise self.core.fatal

    async def run_callbacks(self, change: AssignmentChange, runner: ListenerRunner) -> None:
        """Run the pending callbacks around the assignment changes (module docstring)."""
        events = self.core.take_events()
        if not events:
            return
        try:
            await self._run_events(events, change, runner)
        finally:
            self.core.callbacks_done()
            self.kick()

    async def _run_events(
        self, events: list[RebalanceEvent], change: AssignmentChange, runner: ListenerRunner
    ) -> None:
        failure: BaseException | None = None
        for event in events:
            log.info(
                "group '%s': partitions %s: %s",
                self.group_id,
                event.kind,
                ", ".join(f"{tp.topic}-{tp.partition}" for tp in sorted(event.partitions))
                or "none",
            )
            if event.kind == ASSIGNED:
                await change(event.kind, event.partitions)
            callback = self._callback(event.kind)
            if callback is not None:
                try:
                    await runner(callback, set(event.partitions))
                except Exception as exc:
                    log.exception("group '%s': the rebalance listener failed", self.group_id)
                    failure = failure or exc
            if event.kind != ASSIGNED:
                await change(event.kind, event.partitions)
        if failure is not None:
            raise failure

    def _callback(self, kind: str) -> Callable[[set[TopicPartition]], Any] | None:
        listener = self.listener
        if listener is None:
            return None
        name = {REVOKED: "on_partitions_revoked", ASSIGNED: "on_partitions_assigned"}.get(kind)
        if kind == LOST:
            name = (
                "on_partitions_lost"
                if callable(getattr(listener, "on_partitions_lost", None))
                else "on_partitions_revoked"
            )
        callback: Callable[[set[TopicPartition]], Any] = getattr(listener, name or "")
        return callback

    async def leave(
        self,
        change: AssignmentChange,
        runner: ListenerRunner,
        deadline_ms: int,
        reason: str = LEAVE_CLOSING,
    ) -> None:
        """Revoke what is owned (callbacks), then LeaveGroup within `deadline_ms`, giving
        `reason`; errors are logged: a consumer closes or unsubscribes anyway."""
        await self._stop_task()
        try:
            await self._run_events(self.core.leave_events(), change, runner)
        finally:
            outgoing = self.core.leave(self._clock(), reason)
            self.core.callbacks_done()
            if outgoing is not None:
                try:
                    await self._send(outgoing, deadline_ms)
                except (ReplogError, TimeoutError) as exc:
                    log.warning("group '%s': LeaveGroup failed: %s", self.group_id, exc)

    async def _stop_task(self) -> None:
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def close(self) -> None:
        await self._stop_task()

    # --- the background task ------------------------------------------------------------------

    async def _run(self) -> None:
        core = self.core
        while True:
            now = self._clock()
            outgoing = core.next_request(now)
            if core.callbacks_pending or core.fatal is not None:
                self._on_change()
            if outgoing is None:
                deadline = core.next_deadline_ms()
                wait_ms = None if deadline is None else max(1, deadline - self._clock())
                self._kick.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(None if wait_ms is None else wait_ms / 1000):
                        await self._kick.wait()
                continue
            kind = outgoing.kind
            waits = kind in ("join", "sync")
            timeout_ms = self._request_timeout_ms + (
                core.config.rebalance_timeout_ms if waits else 0
            )
            if kind == "heartbeat" and isinstance(core, GroupMember):
                # Unanswered for a session, the member is out of the group wherever its
                # coordinator now is (or the coordinator is stopped): look it up again rather
                # than read on for the rest of a longer request timeout, as Kafka's heartbeat
                # thread marks the coordinator unknown once a session passes unanswered.
                timeout_ms = min(timeout_ms, core.config.session_timeout_ms)
            try:
                answer = await self._send(outgoing, self._clock() + timeout_ms)
            except (ReplogError, TimeoutError) as exc:
                if isinstance(exc, ReplogError) and not exc.retriable:
                    core.fatal = exc  # poll raises it (an invalid group id, ...)
                    self._on_change()
                    continue
                self._offsets.forget_coordinator()
                log.debug("group '%s': %s failed: %s", self.group_id, kind, exc)
                if isinstance(core, GroupMember):
                    core.request_failed(kind, self._clock(), type(exc).__name__)
                else:
                    core.request_failed(kind, self._clock())
                continue
            now = self._clock()
            if isinstance(answer, cgm.ConsumerGroupHeartbeatResponse):
                assert isinstance(core, ConsumerProtocolMember)
                self._forget_on_coordinator_error(answer.error)
                core.heartbeat_answered(answer, now)
            elif isinstance(answer, gm.JoinGroupResponse):
                assert isinstance(core, GroupMember)
                self._forget_on_coordinator_error(answer.error)
                topics = core.assigns_topics(answer)
                counts, racks = None, None
                if topics is not None:
                    deadline = now + self._request_timeout_ms
                    counts, racks = await self._partition_layout(topics, deadline)
                core.join_answered(answer, self._clock(), counts, racks)
            elif isinstance(answer, gm.SyncGroupResponse):
                assert isinstance(core, GroupMember)
                self._forget_on_coordinator_error(answer.error)
                core.sync_answered(answer, now)
            elif kind == "heartbeat" and isinstance(core, GroupMember):
                error = answer if isinstance(answer, ReplogError) else None
                self._forget_on_coordinator_error(error)
                core.heartbeat_answered(error, now)  # type: ignore[arg-type]
            else:
                core.request_failed(kind, now)

    def _forget_on_coordinator_error(self, error: object) -> None:
        if isinstance(error, NotCoordinatorError | CoordinatorNotAvailableError):
            self._offsets.forget_coordinator()
        if isinstance(error, CoordinatorLoadInProgressError | NotCoordinatorError):
            log.debug("group '%s': %s", self.group_id, error)

    async def _send(self, outgoing: Outgoing, deadline_ms: int) -> object:
        """Send one request to the coordinator (found first) by `deadline_ms`."""
        client = await self._offsets.coordinator_client(deadline_ms)
        timeout_ms = max(1, deadline_ms - self._clock())
        request = outgoing.request
        if isinstance(request, cgm.ConsumerGroupHeartbeatRequest):
            return await client.consumer_group_heartbeat(request, timeout_ms=timeout_ms)
        if isinstance(request, gm.JoinGroupRequest):
            return await client.join_group(request, timeout_ms=timeout_ms)
        if isinstance(request, gm.SyncGroupRequest):
            return await client.sync_group(request, timeout_ms=timeout_ms)
        if isinstance(request, gm.HeartbeatRequest):
            return await client.heartbeat(request, timeout_ms=timeout_ms)
        return await client.leave_group(request, timeout_ms=timeout_ms)
