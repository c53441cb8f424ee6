"""The asyncio `Consumer` (`from replog.aio import Consumer`): read records, track and commit
positions.

Usage::

    async with Consumer("events", bootstrap_servers="127.0.0.1:9092", group_id="billing",
                        auto_offset_reset="earliest") as consumer:
        async for record in consumer:
            handle(record)

Shape (kafka-python / aiokafka names): `assign`, `subscribe`, `poll` returning
``{TopicPartition: [ConsumerRecord]}``, `async for`, the seek family, `position`,
`offsets_for_times`, `beginning_offsets`, `end_offsets`, `committed`, `commit`,
`commit_async`, `pause`/`resume`, `wakeup`, `close`. Methods that talk to brokers are
coroutines and take `timeout_ms` (default `default.api.timeout.ms`); the others only change
local state. `start()` is optional: the first poll starts the consumer.

Rules:
- `subscribe(topics, listener=None)` with a `group.id` joins the group (`group_membership`;
  `group.protocol` classic, the default, or consumer for KIP-848): the group's assignor
  splits the topics' partitions among its members, the listener's `on_partitions_revoked` /
  `on_partitions_assigned` / `on_partitions_lost` run inside `poll`, heartbeats go out in the
  background, and a consumer that does not poll within `max.poll.interval.ms` leaves the group
  (it rejoins at its next poll). Commits then carry the generation (the member epoch): one the
  group has moved past is refused with `CommitFailedError`.
- `subscribe(pattern=...)` subscribes to the topics whose whole name the pattern matches
  (internal ones excepted; `subscription.py`), matched again at every metadata answer, the
  cluster's whole topic list asked every `metadata.max.age.ms` (Kafka's consumer does the
  same); with `group.protocol=consumer` the coordinator is sent the pattern and matches it
  itself (KIP-848's SubscribedTopicRegex), and an assigned topic the consumer cannot name yet
  makes it ask for the topic list at once.
- `subscribe(topics)` without a `group.id` reads every partition of the topics (no
  membership: generation -1, member ""); `assign()` never joins a group. Partitions added to a
  topic later are picked up when the metadata refreshes (in a group: by the next rebalance).
  A metadata answer that calls a subscribed topic unknown (a broker behind on metadata, or
  the topic deleted) takes its partitions out of the assignment, but their positions are
  kept: when the topic comes back under the same topic id, reading goes on where it was
  (neither the committed offset nor `auto.offset.reset`, which would skip or repeat records).
- A partition's first position is the group's committed offset if `group.id` is set and one
  exists, else `auto.offset.reset` (earliest, latest = the high watermark, or none:
  `NoOffsetForPartitionError`). Only a partition whose committed offset was asked and found
  missing gets `auto.offset.reset`: one assigned while that answer was on its way (a
  consumer-protocol assignment grows a partition at a time), or revoked and assigned again
  meanwhile, is asked in turn (Kafka's consumer never resets a partition it did not ask
  about). Seeks (`seek_to_beginning`/`seek_to_end` included) apply at the
  next `poll` or `position`, as Kafka's do.
- `poll(timeout_ms)` returns as soon as records are buffered, or after `timeout_ms` with an
  empty dict. Retriable trouble (no broker reachable, no leader, the coordinator loading)
  never raises from poll: it is logged once per change and retried while the poll waits, so a
  poll on a dead cluster returns empty within its timeout. Errors the user must act on
  (OFFSET_OUT_OF_RANGE with reset none, a CRC mismatch, `NoOffsetForPartitionError`, a
  deserializer's exception as RecordDeserializationError naming the record) are raised.
- Committed offsets are the next offset to read. `enable.auto.commit` commits, from `poll`
  every `auto.commit.interval.ms` and from `close()`, the positions after what `poll` (and
  iteration) handed out -- never records the application did not get (at-least-once).
  Iteration holds back not-yet-yielded records: commits cover only records already yielded.
- `wakeup()` makes a poll that is waiting (or the next one) return at once with what it has
  (usually nothing) and ends an `async for` loop. `close()` wakes a waiting poll too.
- After `close()` every method raises `ClientClosedError`.
- The fetches, the group membership (heartbeats), auto-commits and the step that learns
  metadata and positions run in the consumer's TaskGroup (`task_owner`): one that dies on an
  unexpected error (a bug) fails the consumer, logged once: a waiting poll and every later
  call raise IllegalStateError naming the cause. `commit_async`'s task is the caller's (its
  future), awaited and then cancelled by `close`.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
import threading
import uuid
from collections import deque
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, overload
from uuid import UUID

from replog.client.cluster_metadata import ClusterMetadata
from replog.client.config import ConsumerConfig, consumer_config
from replog.client.event_loop_binding import EventLoopBinding
from replog.client.fetcher import Fetcher, FetchSettings, isolation_level
from replog.client.group_membership import (
    GroupMembership,
    ListenerRunner,
    MemberCore,
    call_listener,
    check_listener,
)
from replog.client.group_offsets import AutoCommitter, GroupOffsets
from replog.client.offset_lookup import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, OffsetLookup
from replog.client.records import (
    ConsumerGroupMetadata,
    ConsumerRecord,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    TopicPartition,
)
from replog.client.subscription import (
    EARLIEST,
    LATEST,
    NONE,
    Mode,
    SubscriptionState,
    topic_pattern,
)
from replog.client.task_owner import TaskOwner
from replog.clock import Clock, monotonic_ms
from replog.coordinator import messages as cm
from replog.coordinator.consumer_protocol_member import (
    ConsumerMemberConfig,
    ConsumerProtocolMember,
)
from replog.coordinator.group_member import (
    ASSIGNED,
    LEAVE_UNSUBSCRIBED,
    LOST,
    GroupMember,
    MemberConfig,
    Phase,
)
from replog.errors import (
    ClientClosedError,
    CommitFailedError,
    FencedInstanceIdError,
    IllegalGenerationError,
    IllegalStateError,
    InvalidGroupIdError,
    NetworkError,
    NoOffsetForPartitionError,
    RebalanceInProgressError,
    ReplogError,
    StaleMemberEpochError,
    UnknownMemberIdError,
    UnknownTopicOrPartitionError,
)

log = logging.getLogger("replog.client.consumer")

CommitCallback = Callable[[dict[TopicPartition, OffsetAndMetadata], Exception | None], object]
ITERATION_POLL_MS = 1000  # an iterator without consumer_timeout_ms polls in slices of this


class IterationBuffer:
    """Records `poll` returned to an iterator but not yielded yet (thread-safe: the blocking
    consumer pops from the user's thread, commits read it on the loop thread)."""

    def __init__(self) -> None:
        self._records: deque[ConsumerRecord] = deque()
        self._lock = threading.Lock()

    def fill(self, polled: Mapping[TopicPartition, list[ConsumerRecord]]) -> None:
        with self._lock:
            for records in polled.values():
                self._records.extend(records)

    def pop(self) -> ConsumerRecord | None:
        with self._lock:
            return self._records.popleft() if self._records else None

    def first_offsets(self) -> dict[TopicPartition, tuple[int, int]]:
        """(offset, leader epoch) of the first record not yet yielded, per partition."""
        found: dict[TopicPartition, tuple[int, int]] = {}
        with self._lock:
            for record in self._records:
                tp = TopicPartition(record.topic, record.partition)
                if tp not in found:
                    found[tp] = (record.offset, record.leader_epoch)
        return found

    def drop(self, partitions: Iterable[TopicPartition] | None) -> dict[TopicPartition, int]:
        """Forget the records of `partitions` (None: all); the first dropped offset of each."""
        wanted = None if partitions is None else set(partitions)
        first: dict[TopicPartition, int] = {}
        with self._lock:
            kept: deque[ConsumerRecord] = deque()
            for record in self._records:
                tp = TopicPartition(record.topic, record.partition)
                if wanted is None or tp in wanted:
                    first.setdefault(tp, record.offset)
                else:
                    kept.append(record)
            self._records = kept
        return first


class Consumer:
    """The asyncio consumer (module docstring)."""

    def __init__(
        self,
        *topics: str,
        config: Mapping[str, object] | ConsumerConfig | None = None,
        clock: Clock = monotonic_ms,
        **kwargs: object,
    ) -> None:
        """`clock`: the client's millisecond clock (deadlines, backoffs, ages); a test may pass
        `replog.testing.ManualClock`."""
        self._clock = clock
        if topics and isinstance(topics[0], Mapping):
            # Consumer({...}) as confluent-kafka and replog's Producer take a config: the dict
            # would be read as a topic name ("unhashable type: 'dict'").
            if config is not None:
                raise TypeError("Consumer: a config dict given twice (positionally and config=)")
            config, topics = topics[0], topics[1:]
        self.config = cfg = consumer_config(config, **kwargs)
        self._subscriptions = SubscriptionState()
        self._metadata = ClusterMetadata.for_client(cfg, clock)
        self._connections = self._metadata.connections
        self._metadata.add_listener(self._apply_subscription)
        self._tasks = TaskOwner("the consumer's background tasks", self._failed, log)
        self._fetcher = Fetcher(
            self._subscriptions,
            self._metadata,
            self._connections,
            FetchSettings.of(cfg),
            tasks=self._tasks,
            clock=clock,
        )
        self._lookup = OffsetLookup(
            self._metadata,
            self._connections,
            request_timeout_ms=cfg.request_timeout_ms,
            retry_backoff_ms=cfg.retry_backoff_ms,
            retry_backoff_max_ms=cfg.retry_backoff_max_ms,
            isolation_level=isolation_level(cfg.isolation_level),
            clock=clock,
        )
        self._group: GroupOffsets | None = None
        self._auto_commit: AutoCommitter | None = None
        self._membership: GroupMembership | None = None
        # How a rebalance callback is run: here, on the loop; the blocking consumer runs it in
        # the thread that waits in poll.
        self.listener_runner: ListenerRunner = call_listener
        if cfg.group_id is not None:
            self._group = GroupOffsets(
                cfg.group_id,
                coordinator_for=self._connections.coordinator,
                brokers=self._broker_addresses,
                request_timeout_ms=cfg.request_timeout_ms,
                retry_backoff_ms=cfg.retry_backoff_ms,
                retry_backoff_max_ms=cfg.retry_backoff_max_ms,
                committer=cm.Committer(cfg.client_id, uuid.uuid4().hex),
                clock=clock,
            )
            self._membership = GroupMembership(
                _member_core(cfg, cfg.group_id),
                self._group,
                request_timeout_ms=cfg.request_timeout_ms,
                clock=clock,
                on_change=self._fetcher.notify,
                partition_layout=self._partition_layout,
            )
            self._group.identity = self._membership.core.commit_identity
            if cfg.enable_auto_commit:
                self._auto_commit = AutoCommitter(
                    self._group,
                    self._tasks,
                    interval_ms=cfg.auto_commit_interval_ms,
                    request_timeout_ms=cfg.request_timeout_ms,
                    clock=clock,
                )
        self._iteration = IterationBuffer()
        # Positions of subscribed partitions that an answer took out of the metadata (module
        # docstring: a lagging broker's "unknown topic"), with the topic id they belonged to.
        self._departed: dict[TopicPartition, _Departed] = {}
        # Each subscribed topic's id as of the last `_apply_subscription`: a partition that
        # departs belongs to the topic as it was, not as the answer that removed it says.
        self._topic_ids: dict[str, bytes | None] = {}
        self._prepare_task: asyncio.Task[ReplogError | None] | None = None
        self._next_metadata_ms = 0
        self._next_pattern_refresh_ms = 0  # a pattern subscription's next look at every topic
        self._last_pattern_refresh_ms = -(1 << 62)  # and its last one
        self._next_prepare_ms = 0  # after a failed prepare: not before this
        self._warned: dict[str, str] = {}
        self._async_commits: set[asyncio.Task[None]] = set()
        self._woken = False
        self._closing = False
        self._closing_callbacks = False  # close runs the listener, which may use the consumer
        self._closed = False
        self._home = EventLoopBinding("asyncio Consumer", "replog.Consumer")
        if topics:
            self.subscribe(topics)

    def _broker_addresses(self) -> list[str]:
        return [*self._metadata.brokers().values(), *self.config.bootstrap_servers]

    def _check_open(self, what: str, *, on_loop: bool = False) -> None:
        """ClientClosedError once closed; the event loop check (`event_loop_binding`), which
        binds the loop for a coroutine or a call that starts work on the loop (`on_loop`)."""
        if self._closed or (self._closing and not self._closing_callbacks):
            raise ClientClosedError(f"{what}: the consumer is closed")
        self._check_failed(what)
        self._home.check(bind=on_loop)

    def _check_failed(self, what: str) -> None:
        failed = self._tasks.error(what)
        if failed is not None:
            raise failed

    def _failed(self, cause: BaseException) -> None:
        """A background task died (module docstring): wake the waiting poll, which raises it."""
        self._fetcher.notify()

    def _timeout(self, timeout_ms: int | None, what: str) -> int:
        """The caller's timeout, checked, or `default.api.timeout.ms`."""
        if timeout_ms is None:
            timeout_ms = self.config.default_api_timeout_ms
        if not isinstance(timeout_ms, int) or isinstance(timeout_ms, bool) or timeout_ms < 0:
            raise ValueError(f"{what}: timeout_ms must be an int >= 0, got {timeout_ms!r}")
        return timeout_ms

    def _deadline(self, timeout_ms: int | None, what: str) -> int:
        return self._clock() + self._timeout(timeout_ms, what)

    async def start(self) -> None:
        """Optional: learn the cluster's metadata now rather than at the first poll."""
        self._check_open("start", on_loop=True)
        deadline = self._deadline(None, "start")
        await self._metadata.refresh(self._subscriptions.topics(), deadline_ms=deadline)

    # --- assignment and subscription ----------------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Read exactly these partitions (no group membership); replaces the assignment."""
        self._check_open("assign")
        if isinstance(partitions, TopicPartition):
            raise TypeError("assign() takes a list of TopicPartition, not one TopicPartition")
        if isinstance(partitions, str | bytes | Mapping) or not isinstance(partitions, Iterable):
            # A misuse review: assign("t3") was iterated and reported "got 't'".
            raise TypeError(
                f"assign() takes a list of TopicPartition, not {type(partitions).__name__} "
                f"({partitions!r})"
            )
        self._before_assignment_change()
        self._subscriptions.assign(partitions)
        self._after_assignment_change()

    def assignment(self) -> set[TopicPartition]:
        return set(self._subscriptions.assignment())

    def group_metadata(self) -> ConsumerGroupMetadata:
        """This consumer's group membership now, for a transactional producer's
        `send_offsets_to_transaction` (Kafka's groupMetadata()): the group id, and while a
        subscribed member, its generation, member id and group instance id."""
        group_id = self.config.group_id
        if group_id is None:
            raise InvalidGroupIdError("group_metadata(): this consumer has no group.id")
        membership = self._membership
        if membership is None or not membership.core.member_id:
            return ConsumerGroupMetadata(group_id, group_instance_id=self.config.group_instance_id)
        core = membership.core
        # KIP-848's member epoch stands where the classic protocol's generation does.
        generation = (
            core.member_epoch if isinstance(core, ConsumerProtocolMember) else core.generation
        )
        return ConsumerGroupMetadata(
            group_id, generation, core.member_id, self.config.group_instance_id
        )

    def subscribe(
        self,
        topics: Iterable[str] = (),
        listener: object | None = None,
        *,
        pattern: str | re.Pattern[str] | None = None,
    ) -> None:
        """Read `topics`, or the topics whose whole name `pattern` matches (module docstring):
        with a group.id, the partitions the group assigns this member (the `listener` hears of
        each change); without, every partition. Replaces an earlier subscription."""
        self._check_open("subscribe")
        if listener is not None:
            check_listener(listener)
            if self._membership is None:
                raise InvalidGroupIdError(
                    "subscribe(): a rebalance listener needs a group.id: this consumer has none"
                )
        if isinstance(topics, str):
            names = [topics]
        elif isinstance(topics, Iterable) and not isinstance(topics, Mapping):
            names = list(topics)
        else:
            raise TypeError(f"subscribe: expected topic names, got {type(topics).__name__}")
        for name in names:
            if not isinstance(name, str):
                raise TypeError(
                    f"subscribe: a topic name must be a str, not {type(name).__name__} ({name!r})"
                )
        compiled = None
        sent = self.config.group_protocol == "consumer"  # the coordinator matches the pattern
        if pattern is not None:
            if names:
                raise ValueError(
                    f"subscribe(): topics ({names!r}) or a pattern ({pattern!r}), not both"
                )
            compiled = topic_pattern(pattern, sent=sent)
        self._before_assignment_change()
        if compiled is None:
            self._subscriptions.subscribe(names)
        else:
            # The coordinator's match takes internal topics: the consumer names what it assigns.
            self._subscriptions.subscribe_pattern(compiled, internal=sent)
            self._subscriptions.match(self._metadata.topics)
            self._next_pattern_refresh_ms = 0  # the cluster's topics, at the next poll
        if self._membership is not None:
            self._membership.subscribe(
                self._subscriptions.subscription,
                listener,
                None if compiled is None else compiled.pattern,
            )
        self._apply_subscription()
        # The earlier topics' partitions left the assignment before `_apply_subscription`
        # looked: their records held for iteration and their buffered fetches go here.
        self._after_assignment_change()
        self._next_metadata_ms = 0

    def unsubscribe(self) -> None:
        """Stop reading; a group member leaves its group (its listener's
        `on_partitions_revoked` runs on the consumer's loop, after this returns)."""
        self._check_open("unsubscribe")
        self._before_assignment_change()
        membership = self._membership
        if membership is not None and self._group_managed():
            if self._tasks.started and membership.core.member_id:

                async def leave() -> None:
                    deadline = self._clock() + self.config.request_timeout_ms
                    await membership.leave(
                        self._unowned, call_listener, deadline, LEAVE_UNSUBSCRIBED
                    )

                self._tasks.spawn(leave(), name="leave group")
            else:  # not in the group yet: only forget the subscription
                membership.core.leave(self._clock())
        self._subscriptions.unsubscribe()
        self._after_assignment_change()

    async def _unowned(self, kind: str, partitions: frozenset[TopicPartition]) -> None:
        """After unsubscribe: nothing is assigned any more, nothing to change."""

    async def _partition_layout(
        self, topics: frozenset[str], deadline_ms: int
    ) -> tuple[dict[str, int], dict[TopicPartition, frozenset[str]]]:
        """The partition counts of `topics` and their partitions' replica racks (a group
        leader's assignment); a topic the cluster does not have, or that the metadata cannot
        tell by the deadline, is left out."""
        counts: dict[str, int] = {}
        racks: dict[TopicPartition, frozenset[str]] = {}
        for topic in sorted(topics):
            try:
                states = await self._metadata.partitions_for(topic, deadline_ms=deadline_ms)
            except ReplogError as exc:
                log.warning("group leader: no partitions of topic %r to assign: %s", topic, exc)
                continue
            counts[topic] = len(states)
            for state in states:
                racks[TopicPartition(topic, state.partition)] = self._metadata.replica_racks(state)
        return counts, racks

    def _group_managed(self) -> bool:
        """Whether the group decides the assignment (a subscription with a group.id)."""
        return self._membership is not None and self._subscriptions.mode is Mode.SUBSCRIBED

    async def _group_change(self, kind: str, partitions: frozenset[TopicPartition]) -> None:
        """Apply a rebalance to the assignment (`group_membership`): assigned partitions are
        added before their callback runs, revoked and lost ones removed after theirs; the
        positions of revoked partitions are auto-committed first (Kafka's onJoinPrepare)."""
        current = self._subscriptions.assignment()
        if kind == ASSIGNED:
            self._subscriptions.set_subscribed_partitions(current | partitions)
            self._next_prepare_ms = 0
            return
        gone = [tp for tp in partitions if tp in current]
        if kind != LOST and self._auto_commit is not None:
            consumed = self._consumed()
            changed = self._auto_commit.changed({tp: consumed[tp] for tp in gone if tp in consumed})
            if changed:
                try:
                    await self._auto_commit.commit_now(
                        changed, deadline_ms=self._clock() + self.config.request_timeout_ms
                    )
                except ReplogError as exc:
                    log.warning("commit before the rebalance failed: %s", exc)
        if self._auto_commit is not None:
            self._auto_commit.forget(gone)
        self._subscriptions.set_subscribed_partitions(current - partitions)
        self._iteration.drop(gone)
        self._fetcher.discard()

    def subscription(self) -> set[str] | None:
        """The subscribed topics, or None when not subscribed (kafka-python's convention)."""
        if self._subscriptions.mode is not Mode.SUBSCRIBED:
            return None
        return set(self._subscriptions.subscription)

    def _before_assignment_change(self) -> None:
        """Auto-commit what was consumed before partitions go away (Kafka does the same)."""
        if self._auto_commit is None or self._closed:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        changed = self._auto_commit.changed(self._consumed())
        if changed:
            self._commit_in_background(changed, None)

    def _after_assignment_change(self) -> None:
        self._next_prepare_ms = 0
        subscribed = self._subscriptions.subscription
        self._departed = {tp: v for tp, v in self._departed.items() if tp.topic in subscribed}
        assigned = self._subscriptions.assignment()
        self._iteration.drop([tp for tp in self._iteration.first_offsets() if tp not in assigned])
        self._fetcher.discard()

    def _apply_subscription(self) -> None:
        """Follow the subscribed topics' partitions as the metadata knows them (in a group: tell
        the membership, whose leader assigns them)."""
        if self._subscriptions.mode is not Mode.SUBSCRIBED:
            return
        pattern = self._subscriptions.pattern
        if self._subscriptions.match(self._metadata.topics) and self._membership is not None:
            assert pattern is not None
            self._membership.subscribe(
                self._subscriptions.subscription, self._membership.listener, pattern.pattern
            )
        if self._membership is not None:
            counts = {}
            topic_ids = {}
            subscribed = frozenset(self._subscriptions.subscription)
            for topic in sorted(self._membership.watched_topics(subscribed)):
                known = self._metadata.cached_partitions(topic)
                if known is not None:
                    counts[topic] = len(known)
                if topic not in subscribed:
                    continue
                topic_id = self._metadata.topic_id(topic)
                if topic_id is not None:
                    topic_ids[topic] = UUID(bytes=topic_id)
            self._membership.topics_known(counts, topic_ids)
            return
        partitions = [
            TopicPartition(topic, p.partition)
            for topic in self._subscriptions.subscription
            for p in self._metadata.cached_partitions(topic) or ()
        ]
        before = self._subscriptions.assignment()
        states = {tp: self._subscriptions.state(tp, "subscribe") for tp in before}
        previous_ids = self._topic_ids
        self._topic_ids = ids = {
            t: self._metadata.topic_id(t) for t in self._subscriptions.subscription
        }
        # A topic deleted and created again (a new id) starts afresh: its departed positions
        # belong to the old one.
        self._departed = {
            tp: d for tp, d in self._departed.items() if d.topic_id == ids.get(tp.topic)
        }
        if self._subscriptions.set_subscribed_partitions(partitions):
            after = self._subscriptions.assignment()
            left, joined = before - after, after - before
            log.info(
                "subscription now reads %d partitions (%d added, %d removed)",
                len(after),
                len(joined),
                len(left),
            )
            if self._auto_commit is not None:
                self._auto_commit.forget(list(left))
            held = self._iteration.drop(left)  # records handed out by poll, not yet yielded
            for tp in left:
                state = states[tp]
                position = held.get(tp, state.position)
                if position is not None or state.reset is not None or state.paused:
                    self._departed[tp] = _Departed(
                        previous_ids.get(tp.topic), position, state.reset, state.paused
                    )
            for tp in joined:
                departed = self._departed.pop(tp, None)
                # Back after an answer that left its topic out: where it was (a seek to the
                # beginning or end still pending included), unless the topic is another one
                # now (deleted and created again: a new id; `_departed` was cut to the current
                # ids above).
                if departed is not None:
                    if departed.reset is not None:
                        self._subscriptions.request_reset(tp, departed.reset)
                    elif departed.position is not None:
                        self._subscriptions.seek(tp, departed.position)
                    if departed.paused:
                        self._subscriptions.pause(tp)

    # --- positions ----------------------------------------------------------------------------

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Read `partition` from `offset` at the next poll."""
        self._check_open("seek")
        tp = _partition(partition, "seek")
        self._subscriptions.seek(tp, offset)
        self._iteration.drop([tp])

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        """Read from the log start (all assigned partitions when none are named)."""
        self._seek_to(EARLIEST, partitions)

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        """Read only what is written from now on (all assigned when none are named)."""
        self._seek_to(LATEST, partitions)

    def _seek_to(self, strategy: str, partitions: tuple[TopicPartition, ...]) -> None:
        which = "beginning" if strategy == EARLIEST else "end"
        self._check_open(f"seek_to_{which}")
        chosen = [_partition(tp, f"seek_to_{which}") for tp in partitions] or sorted(
            self._subscriptions.assignment()
        )
        for tp in chosen:
            self._subscriptions.state(tp, f"seek to {strategy}")
        for tp in chosen:
            self._subscriptions.request_reset(tp, strategy)
        self._iteration.drop(chosen)
        self._next_prepare_ms = 0

    async def position(self, partition: TopicPartition, timeout_ms: int | None = None) -> int:
        """The offset of the next record poll returns for `partition` (looked up if needed)."""
        self._check_open("position", on_loop=True)
        tp = _partition(partition, "position")
        state = self._subscriptions.state(tp, "position")
        deadline = self._deadline(timeout_ms, "position")
        while state.position is None or state.reset is not None:
            await self._update_positions(deadline)
            state = self._subscriptions.state(tp, "position")
        first = self._iteration.first_offsets().get(tp)
        return first[0] if first is not None else state.position

    def highwater(self, partition: TopicPartition) -> int | None:
        """The high watermark the last fetch of `partition` reported (None: not fetched yet)."""
        state = self._subscriptions.state(_partition(partition, "highwater"), "highwater")
        return state.high_watermark if state.high_watermark >= 0 else None

    def pause(self, *partitions: TopicPartition) -> None:
        """Stop fetching these partitions; their positions and buffered records are kept."""
        self._check_open("pause")
        chosen = [_partition(tp, "pause") for tp in partitions]
        for tp in chosen:
            self._subscriptions.pause(tp)
        # Records an iterator holds back go back to the fetcher's side: rewind to the first.
        for tp, offset in self._iteration.drop(chosen).items():
            self._subscriptions.seek(tp, offset)

    def resume(self, *partitions: TopicPartition) -> None:
        self._check_open("resume")
        for tp in partitions:
            self._subscriptions.resume(_partition(tp, "resume"))

    def paused(self) -> set[TopicPartition]:
        return set(self._subscriptions.paused())

    # --- offsets by time / beginning / end ----------------------------------------------------

    async def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int], timeout_ms: int | None = None
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """Per partition the first offset whose timestamp is >= the given one (None: none)."""
        self._check_open("offsets_for_times", on_loop=True)
        wanted: dict[TopicPartition, int] = {}
        for tp, timestamp in timestamps.items():
            if not isinstance(timestamp, int) or isinstance(timestamp, bool) or timestamp < 0:
                raise ValueError(
                    f"offsets_for_times(): timestamp for {tp[0]}-{tp[1]} must be an int >= 0 "
                    f"(ms since the epoch), got {timestamp!r}"
                )
            wanted[_partition(tp, "offsets_for_times")] = timestamp
        budget_ms = self._timeout(timeout_ms, "offsets_for_times")
        answers = await self._lookup.list_offsets(
            wanted,
            deadline_ms=self._clock() + budget_ms,
            what="offsets_for_times",
            timeout_ms=budget_ms,
        )
        found: dict[TopicPartition, OffsetAndTimestamp | None] = {}
        for tp in wanted:
            answer = answers[tp]
            found[tp] = (
                OffsetAndTimestamp(answer.offset, answer.timestamp, answer.leader_epoch)
                if answer.offset >= 0
                else None
            )
        return found

    async def partitions_for_topic(self, topic: str, timeout_ms: int | None = None) -> set[int]:
        """The partition numbers of `topic` (kafka-python's name); UnknownTopicOrPartitionError
        if it does not exist."""
        what = "partitions_for_topic"
        self._check_open(what, on_loop=True)
        budget_ms = self._timeout(timeout_ms, what)
        states = await self._metadata.partitions_for(topic, deadline_ms=self._clock() + budget_ms)
        return {state.partition for state in states}

    async def topics(self, timeout_ms: int | None = None) -> set[str]:
        """Every topic of the cluster, internal ones included (kafka-python's `topics()`)."""
        what = "topics"
        self._check_open(what, on_loop=True)
        budget_ms = self._timeout(timeout_ms, what)
        await self._metadata.refresh(deadline_ms=self._clock() + budget_ms, every_topic=True)
        return set(self._metadata.topics)

    async def beginning_offsets(
        self, partitions: Iterable[TopicPartition], timeout_ms: int | None = None
    ) -> dict[TopicPartition, int]:
        """Each partition's log start offset."""
        return await self._edge_offsets(partitions, EARLIEST_TIMESTAMP, timeout_ms, "beginning")

    async def end_offsets(
        self, partitions: Iterable[TopicPartition], timeout_ms: int | None = None
    ) -> dict[TopicPartition, int]:
        """Each partition's high watermark (the offset the next committed record gets)."""
        return await self._edge_offsets(partitions, LATEST_TIMESTAMP, timeout_ms, "end")

    async def _edge_offsets(
        self,
        partitions: Iterable[TopicPartition],
        timestamp: int,
        timeout_ms: int | None,
        which: str,
    ) -> dict[TopicPartition, int]:
        what = f"{which}_offsets"
        self._check_open(what, on_loop=True)
        wanted = {_partition(tp, what): timestamp for tp in partitions}
        budget_ms = self._timeout(timeout_ms, what)
        answers = await self._lookup.list_offsets(
            wanted, deadline_ms=self._clock() + budget_ms, what=what, timeout_ms=budget_ms
        )
        return {tp: answers[tp].offset for tp in wanted}

    # --- committed offsets ----------------------------------------------------------------------

    def _require_group(self, what: str) -> GroupOffsets:
        if self._group is None:
            raise InvalidGroupIdError(f"{what} needs a group.id: this consumer has none")
        return self._group

    @overload
    async def committed(
        self,
        partition: TopicPartition,
        timeout_ms: int | None = None,
        *,
        metadata: Literal[False] = False,
    ) -> int | None: ...

    @overload
    async def committed(
        self, partition: TopicPartition, timeout_ms: int | None = None, *, metadata: Literal[True]
    ) -> OffsetAndMetadata | None: ...

    async def committed(
        self, partition: TopicPartition, timeout_ms: int | None = None, *, metadata: bool = False
    ) -> int | OffsetAndMetadata | None:
        """The group's committed offset of `partition` (the next offset to read), or None.

        With ``metadata=True`` the whole `OffsetAndMetadata` (kafka-python's flag)."""
        self._check_open("committed", on_loop=True)
        group = self._require_group("committed()")
        tp = _partition(partition, "committed")
        timeout = self._timeout(timeout_ms, "committed")
        deadline = self._clock() + timeout
        found = (await group.fetch([tp], deadline_ms=deadline, timeout_ms=timeout))[tp]
        if found is None:
            return None
        return found if metadata else found.offset

    def _consumed(self) -> dict[TopicPartition, OffsetAndMetadata]:
        """What the application got: positions, held back to records not yet yielded."""
        consumed = self._subscriptions.consumed()
        for tp, (offset, epoch) in self._iteration.first_offsets().items():
            if tp in consumed:
                consumed[tp] = OffsetAndMetadata(offset, "", epoch)
        return consumed

    def _offsets_to_commit(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        if offsets is None:
            return self._consumed()
        chosen: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, value in offsets.items():
            entry = OffsetAndMetadata(value) if isinstance(value, int) else value
            if not isinstance(entry, OffsetAndMetadata) or not isinstance(entry.offset, int):
                raise TypeError(
                    f"commit(): offset for {tp[0]}-{tp[1]} must be an int or "
                    f"OffsetAndMetadata, got {value!r}"
                )
            if isinstance(entry.offset, bool) or entry.offset < 0:
                raise ValueError(
                    f"commit(): offset for {tp[0]}-{tp[1]} must be >= 0, got {entry.offset}"
                )
            # An int metadata would fail in protobuf's encoder: say what is wrong here.
            if not isinstance(entry.metadata, str):
                raise TypeError(
                    f"commit(): metadata for {tp[0]}-{tp[1]} must be a str, got "
                    f"{type(entry.metadata).__name__} ({entry.metadata!r})"
                )
            if not isinstance(entry.leader_epoch, int) or isinstance(entry.leader_epoch, bool):
                raise TypeError(
                    f"commit(): leader_epoch for {tp[0]}-{tp[1]} must be an int, got "
                    f"{entry.leader_epoch!r}"
                )
            chosen[_partition(tp, "commit")] = entry
        return chosen

    async def commit(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
        timeout_ms: int | None = None,
    ) -> None:
        """Commit `offsets` (default: the positions after what poll returned) and wait. The
        default covers only partitions with a position: with none yet (right after subscribe,
        before a poll found the group's offsets) it commits nothing and returns at once, as
        Kafka's commitSync does."""
        self._check_open("commit", on_loop=True)
        group = self._require_group("commit()")
        chosen = self._offsets_to_commit(offsets)
        await self._commit_within(group, chosen, self._timeout(timeout_ms, "commit"))

    def _commit_within(
        self,
        group: GroupOffsets,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        timeout_ms: int,
    ) -> Coroutine[Any, Any, None]:
        """A commit of `offsets` within `timeout_ms` from now; through the auto-committer when
        there is one, so that it remembers them. A timeout error names `timeout_ms`."""
        deadline = self._clock() + timeout_ms
        if self._auto_commit is not None:
            work = self._auto_commit.commit_now(
                offsets, deadline_ms=deadline, timeout_ms=timeout_ms
            )
        else:
            work = group.commit(offsets, deadline_ms=deadline, timeout_ms=timeout_ms)
        return self._fenced(work)

    async def _fenced(self, work: Coroutine[Any, Any, None]) -> None:
        """A commit's answer that the group moved on: the membership learns it (it rejoins),
        and the caller gets CommitFailedError (REBALANCE_IN_PROGRESS stays itself)."""
        try:
            await work
        except (
            IllegalGenerationError,
            UnknownMemberIdError,
            FencedInstanceIdError,
            StaleMemberEpochError,
        ) as exc:
            if self._membership is not None:
                self._membership.core.commit_fenced(exc, self._clock())
                self._membership.kick()
            raise CommitFailedError(
                f"commit in group '{self.config.group_id}' refused: {exc} (the group rebalanced "
                "and its partitions may belong to another member now; poll to rejoin)"
            ) from exc
        except RebalanceInProgressError as exc:
            if self._membership is not None:
                self._membership.core.commit_fenced(exc, self._clock())
                self._membership.kick()
            raise

    def commit_async(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
        callback: CommitCallback | None = None,
    ) -> asyncio.Future[None]:
        """Start a commit; `callback(offsets, exception_or_None)` runs when it is done."""
        self._check_open("commit_async", on_loop=True)
        self._require_group("commit_async()")
        return self._commit_in_background(self._offsets_to_commit(offsets), callback)

    def _commit_in_background(
        self, offsets: dict[TopicPartition, OffsetAndMetadata], callback: CommitCallback | None
    ) -> asyncio.Future[None]:
        group = self._group
        assert group is not None
        work = self._commit_within(group, offsets, self.config.default_api_timeout_ms)
        task = asyncio.get_running_loop().create_task(work)
        self._async_commits.add(task)

        def done(finished: asyncio.Task[None]) -> None:
            self._async_commits.discard(finished)
            error = None if finished.cancelled() else finished.exception()
            if callback is not None:
                try:
                    callback(offsets, error if isinstance(error, Exception) else None)
                except Exception:
                    log.exception("a commit callback failed")
            elif error is not None:
                log.warning("asynchronous commit in group '%s' failed: %s", group.group_id, error)

        task.add_done_callback(done)
        return task

    # --- poll ---------------------------------------------------------------------------------

    async def poll(
        self, timeout_ms: int = 0, max_records: int | None = None
    ) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Records from the assigned partitions: at once if some are buffered, else the first
        that arrive within `timeout_ms`; an empty dict after that (module docstring)."""
        records, _ = await self._poll(timeout_ms, max_records)
        return records

    async def _poll(
        self, timeout_ms: int, max_records: int | None
    ) -> tuple[dict[TopicPartition, list[ConsumerRecord]], bool]:
        """poll, and whether it returned because of wakeup/close."""
        self._check_open("poll", on_loop=True)
        if not isinstance(timeout_ms, int | float) or timeout_ms < 0:
            raise ValueError(f"poll(): timeout_ms must be a number >= 0, got {timeout_ms!r}")
        if max_records is None:
            max_records = self.config.max_poll_records
        elif not isinstance(max_records, int) or isinstance(max_records, bool) or max_records < 1:
            raise ValueError(f"poll(): max_records must be an int >= 1, got {max_records!r}")
        if self._subscriptions.mode is Mode.NONE:
            raise IllegalStateError(
                "poll(): the consumer neither subscribed to topics nor was assigned partitions"
            )
        await self._tasks.open()
        deadline = self._clock() + int(min(timeout_ms, 2**62))
        membership = self._membership if self._group_managed() else None
        if membership is not None:
            membership.start(self._tasks.spawn)
            membership.poll_started()
        rebalancing = membership is not None and membership.core.phase is not Phase.STABLE
        if self._auto_commit is not None and not rebalancing:
            self._auto_commit.maybe_commit(self._consumed())
        fetcher = self._fetcher
        while True:
            fetcher.clear_arrivals()
            if self._woken or self._closing or self._closed:
                self._woken = False
                return {}, True
            self._check_failed("poll")
            if membership is not None:
                membership.poll_started()
                await membership.run_callbacks(self._group_change, self.listener_runner)
            preparing = self._prepare()
            records = fetcher.drain(max_records)
            if records:
                fetcher.send_fetches()  # prefetch while the application works
                return records, False
            fetcher.send_fetches()
            remaining = deadline - self._clock()
            if remaining <= 0:
                return {}, False
            if preparing is None and not fetcher.in_flight:
                # Nothing will arrive by itself: look again after a backoff.
                remaining = min(remaining, self.config.retry_backoff_ms)
            await fetcher.wait(remaining)  # an arrival, or the end of `preparing`

    def wakeup(self) -> None:
        """Make a waiting poll (or the next one) return at once; ends an `async for`."""
        self._woken = True
        self._fetcher.notify()

    # --- metadata and positions before fetching -------------------------------------------------

    def _prepare(self) -> asyncio.Task[ReplogError | None] | None:
        """The background step that learns metadata and positions, if one is needed/running.

        It runs as a task that outlives a short poll (poll(0) in a loop still progresses);
        retriable failures are logged and retried later, others are raised here."""
        task = self._prepare_task
        if task is not None:
            if not task.done():
                return task
            self._prepare_task = None
            error = None if task.cancelled() else task.result()
            if error is not None:
                if not error.retriable:
                    raise error
                self._warn("prepare", f"waiting for the cluster: {error}")
                # Not again at once: some failures are immediate (a partition that does not
                # exist), and the poll loop must not spin on them.
                self._next_prepare_ms = self._clock() + self.config.retry_backoff_max_ms
            else:
                self._warned.pop("prepare", None)
        now = self._clock()
        if now < self._next_prepare_ms:
            return None
        needs_positions = not self._subscriptions.has_all_positions()
        if not needs_positions and not self._needs_metadata():
            return None
        if not needs_positions and now < self._next_metadata_ms:
            return None
        self._prepare_task = self._tasks.spawn(self._prepare_outcome(), name="prepare")
        return self._prepare_task

    def _needs_metadata(self) -> bool:
        if self._metadata.needs_refresh() or self._pattern_refresh_due():
            return True
        return any(
            self._metadata.cached_partitions(topic) is None
            for topic in self._subscriptions.topics()
        )

    async def _prepare_outcome(self) -> ReplogError | None:
        """`_prepare_once` in the consumer's TaskGroup: its ReplogError is the poll's to
        raise or retry (`_prepare`), anything else (a bug) fails the consumer."""
        try:
            await self._prepare_once()
        except ReplogError as exc:
            return exc
        finally:
            self._fetcher.notify()  # a poll waiting for it looks again
        return None

    def _pattern_refresh_due(self) -> bool:
        """Whether a pattern subscription wants the cluster's whole topic list: every
        `metadata.max.age.ms` (Kafka's consumer asks that often), and when the coordinator
        assigned topics the consumer cannot name yet (it saw a new matching topic first), at
        most every `retry.backoff.max.ms` (an id that never resolves costs one list a second,
        not one per poll)."""
        if self._subscriptions.pattern is None:
            return False
        now = self._clock()
        core = None if self._membership is None else self._membership.core
        unnamed = isinstance(core, ConsumerProtocolMember) and core.waits_for_topic_ids
        if unnamed and now >= self._last_pattern_refresh_ms + self.config.retry_backoff_max_ms:
            return True
        return now >= self._next_pattern_refresh_ms

    async def _prepare_once(self) -> None:
        deadline = self._clock() + self.config.request_timeout_ms
        if self._pattern_refresh_due():
            # Its answer re-matches the pattern (`_apply_subscription`, a metadata listener).
            await self._metadata.refresh(deadline_ms=deadline, every_topic=True)
            self._last_pattern_refresh_ms = self._clock()
            self._next_pattern_refresh_ms = (
                self._last_pattern_refresh_ms + self.config.metadata_max_age_ms
            )
        missing_topics = False
        for topic in sorted(self._subscriptions.topics()):
            try:
                await self._metadata.partitions_for(topic, deadline_ms=deadline)
            except UnknownTopicOrPartitionError as exc:
                missing_topics = True
                self._warn(f"topic:{topic}", str(exc))
            except ClientClosedError as exc:
                # A shared metadata refresh cut off by a connection reset (see call_guard); a
                # real close cancels this task instead.
                raise NetworkError(f"metadata refresh for topic {topic!r}: {exc}") from None
            else:
                self._warned.pop(f"topic:{topic}", None)
        self._apply_subscription()
        backoff = self.config.retry_backoff_max_ms if missing_topics else 0
        self._next_metadata_ms = self._clock() + max(backoff, self.config.retry_backoff_ms)
        await self._update_positions(deadline)

    async def _update_positions(self, deadline_ms: int) -> None:
        """Committed offsets or `auto.offset.reset` for partitions without a position, then
        the offset lookups of pending resets."""
        subscriptions = self._subscriptions
        missing = subscriptions.missing_positions()
        if missing and self._group is not None:
            asked = {tp: subscriptions.state(tp, "position") for tp in missing}
            committed = await self._group.fetch(missing, deadline_ms=deadline_ms)
            # Only the partitions asked about, as they were asked: one assigned during the
            # fetch (or revoked and assigned again) has a committed offset of its own, which
            # the next prepare asks; auto.offset.reset would read it again from the start.
            missing = []
            for tp, waiting in asked.items():
                if not subscriptions.awaits_position(tp, waiting):
                    continue
                found = committed.get(tp)
                if found is None:
                    missing.append(tp)
                else:
                    waiting.position = found.offset
                    waiting.last_epoch = found.leader_epoch
        if missing:
            policy = self.config.auto_offset_reset
            if policy == NONE:
                group = f"group '{self.config.group_id}'" if self._group else "no group.id"
                names = ", ".join(f"{tp.topic}-{tp.partition}" for tp in sorted(missing))
                raise NoOffsetForPartitionError(
                    f"no committed offset for {names} ({group}) and auto.offset.reset is none: "
                    "seek() to a position first"
                )
            for tp in missing:
                subscriptions.request_reset(tp, policy)
        resets = subscriptions.pending_resets()
        if not resets:
            return
        answers = await self._lookup.list_offsets(
            {
                tp: EARLIEST_TIMESTAMP if s == EARLIEST else LATEST_TIMESTAMP
                for tp, s in resets.items()
            },
            deadline_ms=deadline_ms,
            what="offset reset",
        )
        for tp, answer in answers.items():
            state = subscriptions.get(tp)
            if state is not None and state.reset == resets[tp]:
                state.position = answer.offset
                state.reset = None
                log.info(
                    "%s-%d: position reset to offset %d (%s)",
                    tp.topic,
                    tp.partition,
                    answer.offset,
                    resets[tp],
                )

    def _warn(self, key: str, text: str) -> None:
        if self._warned.get(key) != text:
            self._warned[key] = text
            log.warning("%s", text)

    # --- iteration ------------------------------------------------------------------------------

    def __aiter__(self) -> Consumer:
        return self

    async def __anext__(self) -> ConsumerRecord:
        record = await self.next_record()
        if record is None:
            raise StopAsyncIteration
        return record

    async def next_record(self) -> ConsumerRecord | None:
        """The next record for an iterator; None at `consumer_timeout_ms` without records or
        after wakeup/close."""
        record = self._iteration.pop()
        if record is not None:
            return record
        limit = self.config.consumer_timeout_ms
        deadline = None if math.isinf(limit) else self._clock() + int(limit)
        while True:
            slice_ms = ITERATION_POLL_MS
            if deadline is not None:
                slice_ms = min(slice_ms, max(0, deadline - self._clock()))
            if self._closed or self._closing:
                return None
            polled, woken = await self._poll(slice_ms, None)
            if woken:
                return None
            self._iteration.fill(polled)
            record = self._iteration.pop()
            if record is not None:
                return record
            if deadline is not None and self._clock() >= deadline:
                return None

    @property
    def iteration_buffer(self) -> IterationBuffer:
        return self._iteration

    # --- closing --------------------------------------------------------------------------------

    async def close(self, autocommit: bool = True, timeout_ms: int | None = None) -> None:
        """Commit what was consumed (with auto-commit on and `autocommit`), release everything.

        Idempotent. A commit failure is logged, not raised: the consumer closes anyway."""
        if self._closed or self._closing:
            return
        if self._home.ended_for_close():
            self._closed = True  # nothing of it can run any more (event_loop_binding)
            return
        self._closing = True
        self.wakeup()
        deadline = self._deadline(timeout_ms, "close")
        try:
            if self._auto_commit is not None:
                await self._auto_commit.close(deadline)
                if autocommit:
                    changed = self._auto_commit.changed(self._consumed())
                    try:
                        await self._auto_commit.commit_now(changed, deadline_ms=deadline)
                    except ReplogError as exc:
                        log.warning("commit on close failed: %s", exc)
            pending = list(self._async_commits)
            if pending:
                remaining = max(0, deadline - self._clock()) / 1000
                await asyncio.wait(pending, timeout=remaining)
            if self._membership is not None and self._group_managed():
                self._closing_callbacks = True
                try:
                    await self._membership.leave(self._group_change, self.listener_runner, deadline)
                finally:
                    self._closing_callbacks = False
        finally:
            self._closed = True
            await self._release()

    async def _release(self) -> None:
        task, self._prepare_task = self._prepare_task, None
        pending: list[asyncio.Task[Any]] = [*self._async_commits]
        if task is not None:
            pending.append(task)
        for waiting in pending:
            waiting.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        if self._membership is not None:
            await self._membership.close()
        await self._fetcher.close()
        await self._tasks.close()
        await self._metadata.close()  # and the connections it made

    async def __aenter__(self) -> Consumer:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


def _member_core(cfg: ConsumerConfig, group_id: str) -> MemberCore:
    """The membership core of `group.protocol`: classic, or KIP-848's consumer protocol (the
    member makes its own member id, KIP-1082)."""
    if cfg.group_protocol == "consumer":
        return ConsumerProtocolMember(
            ConsumerMemberConfig(
                group_id,
                cfg.client_id,
                str(uuid.uuid4()),
                rebalance_timeout_ms=cfg.max_poll_interval_ms,
                retry_backoff_ms=cfg.retry_backoff_ms,
                server_assignor=cfg.group_remote_assignor,
                group_instance_id=cfg.group_instance_id,
                rack_id=cfg.client_rack,
            )
        )
    return GroupMember(
        MemberConfig(
            group_id,
            cfg.client_id,
            session_timeout_ms=cfg.session_timeout_ms,
            rebalance_timeout_ms=cfg.max_poll_interval_ms,
            heartbeat_interval_ms=cfg.heartbeat_interval_ms,
            retry_backoff_ms=cfg.retry_backoff_ms,
            assignors=cfg.partition_assignment_strategy,
            group_instance_id=cfg.group_instance_id,
            rack=cfg.client_rack,
        )
    )


@dataclass(frozen=True, slots=True)
class _Departed:
    """A subscribed partition an answer took out of the metadata, kept for its return."""

    topic_id: bytes | None  # the topic it belonged to
    position: int | None
    reset: str | None  # a seek to the beginning or end still pending
    paused: bool


def _partition(value: object, what: str) -> TopicPartition:
    """`value` as a TopicPartition, or a TypeError naming the call and what it got."""
    if (
        isinstance(value, tuple)
        and len(value) == 2
        and isinstance(value[0], str)
        and isinstance(value[1], int)
        and not isinstance(value[1], bool)
    ):
        return value if isinstance(value, TopicPartition) else TopicPartition(value[0], value[1])
    raise TypeError(f"{what}(): expected a TopicPartition(topic, partition), got {value!r}")
