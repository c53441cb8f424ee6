"""Drives one `RaftNode` in an asyncio process: the only code that touches the core.

Theory of operation: one task (`run`) owns the core. Everything else (gRPC handlers, the
transport, proposals, shutdown) posts a closure to its inbox; the task applies inputs one at a
time, then drains `Ready`s:

    ready = node.ready()
    flushed = storage.apply(ready)     # quorum-state, log operations, fsync (in a worker thread)
    transport.send(each message)       # only now: persist before send
    node.advance(ready, flushed_end_offset=flushed)
    deliver ready.to_apply             # committed batches, snapshot loads, leader changes

and sleeps until the next input, `node.wake_at_ms()` (read after `advance`, so it has any
deadline `advance` moved) or the next deadline of a timer. While the worker thread persists,
inputs wait in the inbox, as the `Ready` contract requires.

The state machine on top of Raft (the quorum controller) lives on this same thread of
decisions: its inputs are closures `post`ed to the same inbox, its timers are `add_timer`ed to
the same loop, and it hears Raft through `add_listener`. So it may call the core (propose,
resign, create a snapshot) from any of those, and never between `ready()` and `advance()`.

Rules:
- A proposal's future completes only when a committed batch at its base offset carries its
  quorum epoch; a committed batch there with another epoch means it was lost (NOT_LEADER).
- A disk failure stops the node: nothing it could not persist may be acknowledged.
- An exception escaping a posted closure, a listener or a timer stops the node too (fail-stop):
  it means the state machine is broken, or its log is corrupt; going on could act on it.
- Committed items go to the listeners in log order, all of them before the state machine's
  next input; when that takes longer than `APPLY_TURN_S`, the loop's other tasks (request
  handlers, the broker's heartbeats and fetches) get a turn between two items, including the
  I/O and timers that fell due during the turn (`loop_turns.yield_turn`: so nothing waits for
  more than one turn of applying). Inputs they post for the state machine (proposals, posted
  closures) wait until every committed item handed out is applied, so the state machine still
  sees each of them before its next input. Inputs are taken in order, as many as arrived
  while the loop persisted or applied (one Ready persists them all), but once `APPLY_TURN_S`
  has passed the rest wait for the next turn: a restart queues a heartbeat per broker, each
  unfencing writing up to a thousand elections, beside AlterPartition batches of hundreds of
  partitions, and one turn took them all.
- The core keeps running while the listeners apply: at the end of each such turn, the inputs
  that only the core takes (a peer's message, a request that failed) are stepped, its due
  timers ticked, and its Readys persisted and sent, their committed items queued behind those
  being applied. A restart's replay of the whole metadata log (tens of thousands of records,
  seconds on a loaded machine) would otherwise leave a leader answering no Fetch and a
  follower sending none for longer than `controller.quorum.fetch.timeout.ms`: its peers (or
  its own check-quorum) would take the leader for lost and elect again, and again at the next
  replay. Kafka runs Raft on its own thread, which no listener holds.
  A stepped listener (`add_stepped_listener`) returns its work on one item as steps, and the
  other tasks may get a turn between two of its steps too: one committed batch can hold
  thousands of records (a broker's controlled shutdown moves all its leaderships in one).
  Such a listener must keep what a half-done item changed to itself until its last step.
- A timer is ticked at most every `TIMER_RETICK_MS`, so one that stays due (work it could not
  do now) retries soon without spinning the loop (Kafka delays immediate re-runs by 10 ms).
- A timer never acts ahead of an input that arrived before its deadline: with a backlog
  (inputs left for later turns) a due timer waits until every input queued at or before its
  deadline has run, then is checked again, so a broker's session does not expire while the
  heartbeat that extends it is still queued. Each input carries its arrival time (the
  driver's clock). Inputs that arrive later do not hold it back again: once deferred, a timer
  waits only for inputs queued before the moment it was first found due.
- At `stop`, inputs not yet run never run: their callers fail at once with
  `NodeStoppingError` (REQUEST_TIMED_OUT on the wire, as Kafka's controller fails what its
  event queue drops at shutdown), given through `post`'s `on_stop`, instead of waiting for
  their own timeouts; so does a `post` after the loop ended. Once `stop` is asked, the loop
  starts no further input.
- How current this node's committed state is (`quorum_contact`): the last time it heard from
  the quorum's leader, or led with a majority (a leader that loses its majority resigns within
  the check-quorum timeout), and when it last heard from each other node; a state machine
  says from it how stale what it serves may be (`metadata_staleness`).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

from sortedcontainers import SortedDict

from replog.clock import Clock, monotonic_ms, monotonic_s, wall_clock_ms
from replog.errors import (
    KafkaStorageError,
    NodeStoppingError,
    NotLeaderOrFollowerError,
    RequestTimedOutError,
)
from replog.quorum.raft.config import RaftConfig
from replog.quorum.raft.messages import Message
from replog.quorum.raft.node import NodeStatus, ProposeResult, RaftNode
from replog.quorum.raft.ready import (
    AppendBatches,
    ApplyItem,
    CommittedBatch,
    LeaderChange,
    LoadSnapshot,
    LogOp,
)
from replog.server.raft.metadata_staleness import QuorumContact
from replog.server.raft.raft_storage import RaftStorage
from replog.server.raft.raft_transport import RaftTransport, RequestFailed, is_quorum_node_id
from replog.server.runtime.loop_turns import yield_turn
from replog.server.runtime.node_tasks import Spawner
from replog.server.runtime.wakeup import Wakeup

log = logging.getLogger("replog.server.raft")

Listener = Callable[[ApplyItem], None]
# A listener whose work on one item is a series of steps (module Rules).
SteppedListener = Callable[[ApplyItem], Iterator[None]]
# An input for the loop: called with the current time (ms, the driver's clock).
Event = Callable[[int], None]
TIMER_RETICK_MS = 10
# How long handing committed batches to the listeners may hold the event loop before the other
# tasks get a turn (module Rules): a restart replays the whole metadata log in one Ready. 10 ms:
# creating 10,000 partitions, the turns were the loops' largest callbacks (20-23 ms of CPU at
# 20 ms), and with three nodes on two cores a turn's wall time is a multiple of its CPU, which a
# due timer or a peer's Fetch waits for, with what the next iteration runs ahead of it.
APPLY_TURN_S = 0.01
# Leader appends awaiting commit, kept for the commit-latency metric; more would mean the
# quorum is stuck, and the oldest then say nothing the newest do not.
_COMMIT_LATENCY_PENDING_MAX = 10_000


class RaftLink(Protocol):
    """The driver's link to the other quorum nodes: `RaftTransport` (gRPC and framed TCP), or
    the simulator's network. It hands their messages, and its failed requests, to the
    callbacks it was made with."""

    def send(self, message: Message) -> None:
        """Send one message of the core (module Rules: only after its Ready is persisted)."""
        ...

    async def close(self) -> None: ...


class TransportFactory(Protocol):
    def __call__(
        self,
        node_id: int,
        config: RaftConfig,
        deliver: Callable[[Message], None],
        report_failure: Callable[[RequestFailed], None],
        *,
        tasks: Spawner,
    ) -> RaftLink: ...


class LoopTimer(Protocol):
    """Periodic work of a state machine, run on the driver's loop."""

    def next_wake_ms(self, now_ms: int) -> int | None:
        """When `tick` next has work (None: not before some other input)."""
        ...

    def tick(self, now_ms: int) -> None:
        """Do the work due at `now_ms`."""
        ...


@dataclass(frozen=True, slots=True)
class _CoreInput:
    """An input that only the core takes (a peer's message, a failed request): the loop steps
    it even while the listeners apply committed items (module Rules)."""

    event: Event

    def __call__(self, now_ms: int) -> None:
        self.event(now_ms)


@dataclass(frozen=True, slots=True)
class _Queued:
    """An input in the inbox: when it arrived (the driver's clock), and how to tell its caller
    that the node stopped before running it (None: nobody waits for it)."""

    at_ms: int
    event: Event
    on_stop: Callable[[NodeStoppingError], None] | None = None


@dataclass(slots=True)
class _Waiter:
    result: ProposeResult
    future: asyncio.Future[ProposeResult]


# Appends up to this size run on the event loop (tens of microseconds); larger ones, and every
# fsync unless `fsync_on_loop`, go to a worker thread so that the loop keeps serving requests.
_INLINE_APPEND_BYTES_MAX = 64 * 1024


def _small(ops: tuple[LogOp, ...]) -> bool:
    """Whether `ops` are appends only, of at most `_INLINE_APPEND_BYTES_MAX` bytes in all."""
    size = 0
    for op in ops:
        if not isinstance(op, AppendBatches):
            return False
        size += len(op.batches)
    return size <= _INLINE_APPEND_BYTES_MAX


def _retrieve_outcome(future: asyncio.Future[ProposeResult]) -> None:
    if not future.cancelled():
        future.exception()


class RaftDriver:
    """Owns a `RaftNode`, its storage and transport; see the module docstring."""

    def __init__(
        self,
        node_id: int,
        config: RaftConfig,
        storage: RaftStorage,
        *,
        tasks: Spawner,
        clock: Clock = monotonic_ms,
        wall_clock: Clock = wall_clock_ms,
        rng: random.Random | None = None,
        listener: Listener | None = None,
        transport: TransportFactory | None = None,
        turn_clock: Callable[[], float] = monotonic_s,
    ) -> None:
        """`transport`: makes the link to the other quorum nodes (`RaftTransport`, gRPC and
        framed TCP, unless given: the simulator's network); `turn_clock`: the seconds the
        apply turns and the commit latencies are timed by (the simulator's virtual clock)."""
        self.node_id = node_id
        self.config = config
        self.storage = storage
        # The node's background tasks, for the state machine's work that outlasts a loop turn
        # (a scheduled metadata snapshot's steps).
        self.tasks = tasks
        self._clock = clock
        # Every listener as a stepped one: a plain listener's work is one step.
        self._listeners: list[SteppedListener] = []
        if listener is not None:
            self.add_listener(listener)
        self._timers: list[LoopTimer] = []
        self._timers_ticked_ms: int | None = None
        # What the timers said at the last look that ticked none (`_tick_due_timers`), and
        # when: the loop's wait reads it instead of asking every timer again (the controller's
        # deadlines walk its brokers' sessions), unless anything ran since.
        self._timer_deadlines: tuple[int, list[int | None]] | None = None
        self._turn_clock = turn_clock
        self.transport: RaftLink = (transport or RaftTransport)(
            node_id, config, self._post_message, self._post_request_failed, tasks=tasks
        )
        self.node = RaftNode(
            node_id=node_id,
            config=config,
            log=storage,
            election_state=storage.read_election_state(),
            rng=rng or random.Random(),
            now_ms=clock(),
            # Metadata batches carry wall-clock time, so that `dump-log` of the metadata log
            # shows dates, not milliseconds since boot.
            record_time_offset_ms=wall_clock() - clock(),
        )
        # Inputs in arrival order; `_wakeup` is set when one arrives (the loop clears it before
        # it waits on an empty inbox).
        self._inbox: deque[_Queued] = deque()
        self._wakeup = Wakeup()
        # Committed items handed out by the core and not yet given to every listener, in log
        # order; and the state machine's inputs taken from the inbox while they were applied,
        # which wait for them (module Rules).
        self._to_apply: deque[ApplyItem] = deque()
        self._held: deque[_Queued] = deque()
        # Since when each due timer (by its index in `_timers`) has waited for inputs queued
        # before its deadline (module Rules): inputs that arrive later do not hold it back
        # again. Kept per timer: another timer's wait says nothing of this one's deadline.
        self._timers_deferred_ms: dict[int, int] = {}
        # When the driver's current turn of the loop ends (`_new_turn`), and whether
        # `_take_queued` left inputs for the next one (module Rules).
        self._turn_ends = 0.0
        self._left_over = False
        self.apply_turn_s = APPLY_TURN_S
        self._waiters: SortedDict = SortedDict()  # base offset -> list[_Waiter]
        # `run_persisted` callers, and whether their event ran: those settle once the Readys
        # after it are drained; all of them if the loop ends (`_ended` says why).
        self._persisted_waiters: dict[asyncio.Future[None], bool] = {}
        self._ended: KafkaStorageError | None = None
        self._high_watermark = 0
        self._stopped = False
        self._failed: BaseException | None = None
        # Metrics (issue #9): called with the seconds from a leader's append of a batch to its
        # commit; None: nobody measures. Pending: (end offset, append time) per leader append.
        self.on_commit_latency: Callable[[float], None] | None = None
        self._appended_at: deque[tuple[int, float]] = deque(maxlen=_COMMIT_LATENCY_PENDING_MAX)
        # Whether a small append's fsync may block the loop (the node sets it where nothing
        # else shares the loop: no broker). A follower's commit path waits on that fsync; the
        # worker-thread hand-off around it costs about as much as the fsync itself (issue #4:
        # one-proposer p50 2.3 -> 2.0 ms). A broker's loop must not stall on the disk: under a
        # heavy produce load one fsync can take tens of milliseconds.
        self.fsync_on_loop = False
        # `quorum_contact` (module Rules), on the driver's clock.
        self._started_ms = clock()
        self._leader_contact_ms: int | None = None
        self._heard_ms: dict[int, int] = {}

    # --- wiring a state machine -----------------------------------------------------------------

    @property
    def clock(self) -> Clock:
        """The clock every input's `now_ms` comes from."""
        return self._clock

    @property
    def stopped(self) -> bool:
        """`stop` was called: the loop steps the core no more (no election, no leading)."""
        return self._stopped

    def add_listener(self, listener: Listener) -> None:
        """Hand every `ApplyItem` to `listener` too, after `advance` (before `run`)."""

        def one_step(item: ApplyItem) -> Iterator[None]:
            listener(item)  # no step boundary: the loop may get a turn after the item only
            yield from ()

        self._listeners.append(one_step)

    def add_stepped_listener(self, listener: SteppedListener) -> None:
        """Hand every `ApplyItem` to `listener` too, which returns its work on the item as
        steps; the driver runs them all before the next listener hears of the item, letting
        the loop's other tasks run between two of them (module Rules)."""
        self._listeners.append(listener)

    def add_timer(self, timer: LoopTimer) -> None:
        """Wake the loop for `timer` and tick it there (before `run`)."""
        self._timers.append(timer)

    # --- inputs -------------------------------------------------------------------------------

    def post(
        self, event: Event, on_stop: Callable[[NodeStoppingError], None] | None = None
    ) -> None:
        """Run `event(now_ms)` on the loop, between Ready cycles, after the inputs before it;
        if the node stops first, `event` never runs and `on_stop` is called at once with a
        NodeStoppingError (module Rules)."""
        if self._ended is not None:
            if on_stop is not None:
                on_stop(self._stopping_error())
            return
        self._inbox.append(_Queued(self._clock(), event, on_stop))
        self._wakeup.set()

    def _stopping_error(self) -> NodeStoppingError:
        return NodeStoppingError(
            f"node {self.node_id} is stopping: the request was not run (nothing of it was "
            "written); ask another node of the quorum"
        )

    def _post_message(self, message: Message) -> None:
        def step(now: int) -> None:
            self.node.step(message, now)
            source = message.source_id
            if is_quorum_node_id(source):
                self._heard_ms[source] = now
                if source == self.node.leader_id:
                    self._leader_contact_ms = now

        self._inbox.append(_Queued(self._clock(), _CoreInput(step)))
        self._wakeup.set()

    def quorum_contact(self) -> QuorumContact:
        """When this node last heard from the quorum's leader (now, if it leads) and from each
        other node, on the driver's clock (module Rules)."""
        now = self._clock()
        if self.node.leader_id == self.node_id:
            self._leader_contact_ms = now
        return QuorumContact(
            node_id=self.node_id,
            now_ms=now,
            started_ms=self._started_ms,
            role=self.node.role,
            fetch_timeout_ms=self.config.fetch_timeout_ms,
            leader_contact_ms=self._leader_contact_ms,
            heard_ms=dict(self._heard_ms),
        )

    def _post_request_failed(self, failed: RequestFailed) -> None:
        def report(now: int) -> None:
            self.node.request_failed(
                failed.destination_id,
                failed.correlation_id,
                unreachable=failed.unreachable,
                now_ms=now,
            )

        self._inbox.append(_Queued(self._clock(), _CoreInput(report)))
        self._wakeup.set()

    async def append_and_wait(
        self, values: list[bytes], timeout_ms: int | None = None
    ) -> ProposeResult:
        """Propose `values` as one batch (leader only) and wait until they are committed."""
        if self._failed is not None:
            raise KafkaStorageError(f"node {self.node_id} stopped after a disk failure")
        # One future from the proposal to its commit (issue #4, 64 proposers: a second one for
        # "proposed" woke every caller twice per record).
        future: asyncio.Future[ProposeResult] = asyncio.get_running_loop().create_future()
        # Set by the loop once proposed (the caller may time out before: nothing was appended).
        proposed: ProposeResult | None = None

        def propose(now: int) -> None:
            nonlocal proposed
            if future.done():
                # The caller was cancelled while this waited in the inbox (its client gave up,
                # during a freeze, say). Completing its future would raise InvalidStateError and
                # kill the loop, stopping the node; a proposal nobody waits for is not appended
                # at all.
                return
            try:
                proposed = self.node.propose(values, now)
            except Exception as exc:  # a typed error for the caller, not for the loop
                future.set_exception(exc)
                return
            # A caller that gave up (timeout, client gone) leaves the future unawaited;
            # retrieving its outcome here keeps asyncio from
            # logging "Future exception was never retrieved" when it is later failed.
            future.add_done_callback(_retrieve_outcome)
            self._waiters.setdefault(proposed.base_offset, []).append(_Waiter(proposed, future))

        def stopping(error: NodeStoppingError) -> None:
            if not future.done():
                future.set_exception(error)

        self.post(propose, stopping)
        timeout = (timeout_ms or self.config.request_timeout_ms * 15) / 1000
        try:
            # asyncio.timeout, not wait_for: no task per proposal. On expiry the future is
            # cancelled, which `propose` and _complete_waiters skip: the caller has given up.
            async with asyncio.timeout(timeout):
                return await future
        except TimeoutError:
            where = "" if proposed is None else f" at offset {proposed.base_offset}"
            raise RequestTimedOutError(
                f"proposal{where} was not committed within {timeout:.1f} s"
            ) from None

    async def run_persisted(self, event: Event) -> None:
        """Run `event` on the loop, like `post`, and return once the Readys after it are
        persisted: whatever it asked the core to write (a snapshot, say) is on disk. Raises
        `KafkaStorageError` if the loop ends first."""
        if self._ended is not None:
            raise self._ended
        persisted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiters = self._persisted_waiters
        waiters[persisted] = False

        def run(now: int) -> None:
            event(now)
            if persisted in waiters:
                waiters[persisted] = True  # settled after the next drain of Readys

        self.post(run)
        try:
            await persisted
        finally:
            waiters.pop(persisted, None)

    def resign(self) -> None:
        def resign(now: int) -> None:
            self.node.resign(now)

        self.post(resign)

    def status(self) -> NodeStatus:
        return self.node.status()

    def learned_high_watermark(self) -> int | None:
        """The high watermark once learned in this run, from the leader (or as the leader);
        None before: after a restart the core knows only its latest snapshot's end, which a
        state machine must not take for the quorum's current high watermark."""
        return self.node.learned_high_watermark()

    def read_committed(self, start_offset: int, max_bytes: int) -> tuple[bytes, int, int]:
        """Committed batches from `start_offset`: (bytes, high watermark, log start offset)."""
        high_watermark = self._high_watermark
        data = self.storage.log.read(
            start_offset, max_bytes, upper_bound_offset=high_watermark, min_one_message=True
        )
        return data, high_watermark, self.storage.log.log_start_offset

    # --- the loop -----------------------------------------------------------------------------

    async def run(self) -> None:
        """Process inputs and timers until `stop`; raises if the disk failed."""
        try:
            while not self._stopped:
                await self._drain_ready()
                if self._persisted_waiters:
                    self._settle_persisted(None)
                if self._stopped:
                    # `stop`'s wake-up may have been taken while committed items were applied
                    # (held, then run by `_take_queued`): the inbox may stay empty from now on.
                    break
                now = self._clock()
                if self.node.leader_id == self.node_id:
                    self._leader_contact_ms = now  # leading: the quorum is reached (Rules)
                # Checked after every input too: a busy node may never time out waiting.
                if self._tick_due_timers(now) and self.node.has_ready():
                    continue
                if self._left_over:
                    # The last turn ran out of time with inputs left (`_take_queued`): the
                    # loop's other tasks get a turn before the rest.
                    await yield_turn()
                    if self._stopped:
                        break  # `stop` ran meanwhile: the rest fail at once (`_fail_unrun`)
                    self._new_turn()
                    self._take_queued()
                    continue
                wake_at = self._wake_at_ms(now)
                timeout = None if wake_at is None else max(0, wake_at - now) / 1000
                inbox = self._inbox
                if not inbox:  # else the next input runs at once, in the same turn
                    self._wakeup.clear()
                    # Not wait_for: no task per input on this hot path (`Wakeup`).
                    if not await self._wakeup.wait(timeout):
                        self.node.tick(self._clock())
                        continue
                    if self._stopped:
                        break  # woken by `stop`: what is queued fails at once (`_fail_unrun`)
                    self._new_turn()
                if inbox:
                    inbox.popleft().event(self._clock())
                self._take_queued()
        except KafkaStorageError as exc:
            self._failed = exc
            log.critical("node %d: disk failure, stopping: %s", self.node_id, exc)
            self._fail_waiters(exc)
            raise
        finally:
            self._ended = (
                self._failed
                if isinstance(self._failed, KafkaStorageError)
                else KafkaStorageError(f"node {self.node_id}: the Raft driver stopped")
            )
            self._settle_persisted(self._ended)
            self._fail_unrun()

    def _fail_unrun(self) -> None:
        """The loop ended: tell the callers of the inputs it never ran, at once (module
        Rules), rather than leave them to their own timeouts."""
        unrun = [*self._held, *self._inbox]
        self._held.clear()
        self._inbox.clear()
        for queued in unrun:
            if queued.on_stop is not None:
                queued.on_stop(self._stopping_error())

    def _settle_persisted(self, ended: KafkaStorageError | None) -> None:
        """Settle the `run_persisted` callers whose event ran (None: the Readys are drained),
        or all of them with `ended`."""
        for waiter, ran in list(self._persisted_waiters.items()):
            if waiter.done():
                continue
            if ended is not None:
                waiter.set_exception(ended)
            elif ran:
                waiter.set_result(None)

    def _wake_at_ms(self, now_ms: int) -> int | None:
        deadlines = [self.node.wake_at_ms()]
        if self._timers:
            asked = self._timer_deadlines
            timers = (
                asked[1]
                if asked is not None and asked[0] == now_ms
                else [timer.next_wake_ms(now_ms) for timer in self._timers]
            )
            due = [deadline for deadline in timers if deadline is not None]
            if due:
                earliest = min(due)
                if self._timers_ticked_ms is not None:
                    earliest = max(earliest, self._timers_ticked_ms + TIMER_RETICK_MS)
                deadlines.append(earliest)
        known = [deadline for deadline in deadlines if deadline is not None]
        return min(known) if known else None

    def _tick_due_timers(self, now_ms: int) -> bool:
        """Tick every timer that is due and that no input queued before its deadline may
        move (module Rules); whether any was ticked."""
        self._timer_deadlines = None
        if self._timers_ticked_ms is not None and now_ms < self._timers_ticked_ms + TIMER_RETICK_MS:
            return False
        ticked = False
        oldest = self._oldest_queued_ms()
        waiting = self._timers_deferred_ms
        deadlines: list[int | None] = []
        for index, timer in enumerate(self._timers):
            deadline = timer.next_wake_ms(now_ms)
            deadlines.append(deadline)
            if deadline is None or deadline > now_ms:
                waiting.pop(index, None)
                continue
            if oldest is not None and oldest <= min(deadline, waiting.get(index, deadline)):
                # The inputs before it run first; then it is checked again.
                waiting.setdefault(index, now_ms)
                continue
            waiting.pop(index, None)
            timer.tick(now_ms)
            ticked = True
        if ticked:
            self._timers_ticked_ms = now_ms
        else:
            self._timer_deadlines = (now_ms, deadlines)
        return ticked

    def _oldest_queued_ms(self) -> int | None:
        """When the oldest input not yet run arrived (held ones came first); None: none."""
        if self._held:
            return self._held[0].at_ms
        if self._inbox:
            return self._inbox[0].at_ms
        return None

    async def _drain_ready(self) -> None:
        while self.node.has_ready():
            await self._persist_and_send()
            # After advance: a listener (the controller) may propose or resign at once, and the
            # core takes no input between ready() and advance().
            await self._apply_queued()
            self._take_queued()

    async def _persist_and_send(self) -> None:
        """Persist the core's next Ready, send its messages, `advance`, and queue its committed
        items for the listeners."""
        ready = self.node.ready()
        if self.on_commit_latency is not None:
            self._note_leader_appends(ready.log_ops)
        # Persist before send; a leader's Ready may send while its own fsync runs.
        early_send = ready.flush_log and not ready.flush_before_send
        if ready.election_state is None and not ready.log_ops and not ready.flush_log:
            # Nothing to persist: skip the worker-thread round trip (most Readys).
            flushed = self.storage.log.recovery_point
        elif early_send and ready.election_state is None and _small(ready.log_ops):
            # A leader's small append without fsync only copies into the page cache: doing
            # it here saves a thread round trip before its Fetch answers can leave.
            flushed = self.storage.apply(ready, flush=False)
        elif self.fsync_on_loop and ready.election_state is None and _small(ready.log_ops):
            # A follower's small append and its fsync, before it acknowledges them (never
            # an early send here: that case took the branch above).
            flushed = self.storage.apply(ready, flush=True)
        else:
            flushed = await asyncio.to_thread(self.storage.apply, ready, flush=not early_send)
            self._new_turn()
        for message in ready.messages:
            self.transport.send(message)
        if early_send:
            flushed = await asyncio.to_thread(self.storage.flush)
            self._new_turn()
        self._high_watermark = ready.high_watermark
        if self._appended_at:
            self._observe_commits(ready.high_watermark)
        self.node.advance(ready, flushed_end_offset=flushed)
        self._to_apply.extend(ready.to_apply)

    def _note_leader_appends(self, ops: tuple[LogOp, ...]) -> None:
        for op in ops:
            if isinstance(op, AppendBatches) and op.as_leader:
                self._appended_at.append((op.end_offset, self._turn_clock()))

    def _observe_commits(self, high_watermark: int) -> None:
        """Report every leader append the high watermark now covers (one per Ready batch)."""
        observe = self.on_commit_latency
        pending = self._appended_at
        now = self._turn_clock()
        while pending and pending[0][0] <= high_watermark:
            _, appended_at = pending.popleft()
            if observe is not None:
                observe(now - appended_at)

    async def _apply_queued(self) -> None:
        """Hand the queued committed items to the listeners in order, letting the loop's other
        tasks run, and the core serve its peers, whenever `APPLY_TURN_S` of it has passed
        (module Rules)."""
        queued = self._to_apply
        while queued:
            item = queued.popleft()
            self._before_listeners(item)
            for listener in self._listeners:
                for _ in listener(item):
                    await self._end_turn_if_over()
            await self._end_turn_if_over()

    def _new_turn(self) -> None:
        """The loop gave the driver a new turn (it waited, or let others run): it ends
        `APPLY_TURN_S` from now."""
        self._turn_ends = self._turn_clock() + self.apply_turn_s

    async def _end_turn_if_over(self) -> None:
        """Let the loop's other tasks run, then the core serve its peers, if the turn is
        over."""
        if self._turn_clock() < self._turn_ends:
            return
        await yield_turn()
        self._new_turn()
        await self._serve_core()

    async def _serve_core(self) -> None:
        """Between two turns of applying committed items: step the core's own inputs (holding
        the state machine's for later), tick its due timers, and persist and send its Readys,
        whose committed items join the queue (module Rules)."""
        inbox = self._inbox
        while inbox:
            queued = inbox.popleft()
            if isinstance(queued.event, _CoreInput):
                queued.event(self._clock())
            else:
                self._held.append(queued)
        now = self._clock()
        wake_at = self.node.wake_at_ms()
        if wake_at is not None and wake_at <= now:
            self.node.tick(now)
        while self.node.has_ready():
            await self._persist_and_send()

    def _take_queued(self) -> None:
        """Apply the inputs already queued (those held while committed items were applied
        first, then those that arrived while persisting), so the next Ready persists them all
        with one fsync; but once the turn is over, leave the rest for the next one
        (`_left_over`: module Rules), and once `stop` was asked, run none (they fail)."""
        held = self._held
        inbox = self._inbox
        while (held or inbox) and self._turn_clock() < self._turn_ends and not self._stopped:
            queued = held.popleft() if held else inbox.popleft()
            queued.event(self._clock())
        self._left_over = bool(held or inbox)

    def _before_listeners(self, item: ApplyItem) -> None:
        if isinstance(item, CommittedBatch):
            self._complete_waiters(item)
        elif isinstance(item, LeaderChange):
            # Appends of an earlier leadership may be truncated away: they never commit.
            self._appended_at.clear()
            log.info(
                "node %d: %s in quorum epoch %d",
                self.node_id,
                "no leader" if item.leader_id is None else f"leader is node {item.leader_id}",
                item.quorum_epoch,
            )
        elif isinstance(item, LoadSnapshot):
            # Proposals below a loaded snapshot have an unknown fate on this node.
            self._fail_waiters_below(item.snapshot_id.end_offset)

    def _complete_waiters(self, batch: CommittedBatch) -> None:
        for base in list(self._waiters.irange(maximum=batch.last_offset)):
            for waiter in self._waiters.pop(base):
                if waiter.future.done():
                    continue
                result = waiter.result
                if base >= batch.base_offset and batch.quorum_epoch == result.quorum_epoch:
                    waiter.future.set_result(result)
                else:
                    waiter.future.set_exception(
                        NotLeaderOrFollowerError(
                            f"proposal at offset {base} in quorum epoch "
                            f"{result.quorum_epoch} was replaced by a batch of quorum "
                            f"epoch {batch.quorum_epoch}"
                        )
                    )

    def _fail_waiters_below(self, end_offset: int) -> None:
        for base in list(self._waiters.irange(maximum=end_offset - 1)):
            for waiter in self._waiters.pop(base):
                if not waiter.future.done():
                    waiter.future.set_exception(
                        NotLeaderOrFollowerError(f"proposal at offset {base}: fate unknown")
                    )

    def _fail_waiters(self, exc: BaseException) -> None:
        for waiters in self._waiters.values():
            for waiter in waiters:
                if not waiter.future.done():
                    waiter.future.set_exception(exc)
        self._waiters.clear()

    async def stop(self, graceful: bool = True, resign_wait_ms: int = 300) -> None:
        """Resign if leading (EndQuorumEpoch), give it time to leave, then stop the loop."""
        if graceful and self._failed is None:
            self.resign()
            await asyncio.sleep(resign_wait_ms / 1000)
        self._stopped = True
        self.post(lambda now: None)  # wake the loop
