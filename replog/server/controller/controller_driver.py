"""Runs the `QuorumController` of a controller node on the Raft driver's thread of decisions.

Theory of operation: the controller and the Raft core share one asyncio loop, the
`RaftDriver`'s, and every controller call runs on it, outside any `ready()`/`advance()` cycle,
through one of three doors:

    requests   write()/read() post a closure (RaftDriver.post); the gRPC handler awaits a future
               the closure (or, for a write, the commit) settles
    Raft       _on_apply, a Raft listener: committed batches, snapshot loads and leader changes,
               handed over after advance(), in Raft's order; a stepped one: a batch is
               decoded and, on a standby, replayed in steps, with the loop's other tasks run
               between them, and the other two doors closed until its last step (their
               closures wait in the driver's inbox, its timers are not ticked)
    time       tick()/next_wake_ms(), a loop timer: the controller's periodic work (no-op
               records, fencing, elections) and the snapshot schedule

So the controller may propose (`RaftMetadataLog.prepare_append`), resign or create a snapshot
from any of them: the Raft core takes no input between ready() and advance(), and the driver
posts none there.

Rules:
- Nothing else touches the controller. A gRPC handler, or the metrics scrape on its own thread,
  reads only plain values the loop publishes after every controller call: `controller_id`, and
  `offline_partitions` (partitions without a leader in the committed state, counted by the
  active controller only, Kafka's OfflinePartitionsCount; 0 on a standby).
- A write answers once its records commit (or fails: NOT_CONTROLLER on a standby or after a
  lost leadership, an invalid request's error). A caller that stops waiting after its timeout
  gets REQUEST_TIMED_OUT; the write may still commit, and its response is dropped (as is
  the NodeStoppingError of one the node stops before running: nothing is left for asyncio to
  report as never retrieved).
- Reads run at the controller's last stable offset, on the active controller and on standbys.
  A read changes nothing, so a bug in one fails only its caller (UNKNOWN_SERVER_ERROR).
- A failure while replaying or decoding committed records is fatal: it escapes the loop, which
  stops the node (`RaftDriver` rules). The log is committed: going on would diverge.
- Snapshots: after every commit (and on the timer) the node's `SnapshotWriter`
  (`metadata_snapshots`, shared with a broker-only node's snapshots) applies the log retention
  and, when its schedule says so, writes the controller's state at its last stable offset
  (committed state only), ending after its last committed offset (control batches carry no
  metadata), through Raft's `create_snapshot`; the same state at a clean stop
  (`state_at_stop_in_steps`: the first step a posted closure). Either way the state is taken
  in steps, the first with the controller between two whole items (after a commit, on a tick,
  in a posted closure); the steps hold that stable offset's timeline snapshot,
  `OffsetControl.hold`, and the later ones, a loop turn each, read only at it.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from replog.clock import Clock, wall_clock_ms
from replog.errors import (
    KafkaError,
    NodeStoppingError,
    RequestTimedOutError,
    UnknownServerError,
)
from replog.quorum.controller.controller import QuorumController
from replog.quorum.controller.controller_config import ControllerConfig
from replog.quorum.controller.operation import ReadOperation
from replog.quorum.controller.pending_response import PendingResponse
from replog.quorum.metadata.fence_notices import FenceNotice
from replog.quorum.metadata.records import NO_LEADER, MetadataRecord
from replog.quorum.metadata.snapshot_schedule import (
    METADATA_MAX_RETENTION_BYTES,
    METADATA_MAX_RETENTION_MS,
)
from replog.quorum.metadata.steps import Steps
from replog.quorum.raft.ready import ApplyItem, CommittedBatch, LeaderChange, LoadSnapshot
from replog.quorum.raft.snapshot_id import SnapshotId
from replog.server.raft.metadata_snapshots import SnapshotWriter, StopState
from replog.server.raft.metadata_staleness import Staleness, metadata_staleness
from replog.server.raft.raft_driver import RaftDriver
from replog.server.raft.raft_metadata_log import (
    RaftMetadataLog,
    committed_records_in_steps,
    snapshot_records_in_steps,
)

log = logging.getLogger("replog.server.controller")

R = TypeVar("R")

# How long a read may wait for the loop (it only waits behind other inputs); a write's
# caller names its own timeout.
READ_TIMEOUT_MS = 30_000

# What a request asks the controller to write: the call to make on the loop, given the time.
WriteCall = Callable[[QuorumController, int], PendingResponse[R]]


@dataclass(frozen=True, slots=True)
class ControllerAnswer(Generic[R]):
    """A request's outcome: its value or its error, and the active controller as this node
    knows it when answering (-1: unknown)."""

    controller_id: int
    value: R | None = None
    error: KafkaError | None = None

    def result(self) -> R:
        """The value; raises the error."""
        if self.error is not None:
            raise self.error
        return self.value  # type: ignore[return-value]  # set whenever there is no error


def _settle(future: asyncio.Future[PendingResponse[R]], pending: PendingResponse[R]) -> None:
    # Runs on the loop, inside a controller call; the caller may have stopped waiting.
    if not future.done():
        future.set_result(pending)


class ControllerDriver:
    """The controller of one node, driven on its Raft driver's loop (module docstring)."""

    def __init__(
        self,
        raft: RaftDriver,
        config: ControllerConfig,
        *,
        read_snapshot: Callable[[SnapshotId], bytes],
        snapshot_bytes_max: int,
        snapshot_interval_ms: int,
        retention_bytes: int = METADATA_MAX_RETENTION_BYTES,
        retention_ms: int = METADATA_MAX_RETENTION_MS,
        rng: random.Random | None = None,
        wall_clock: Clock = wall_clock_ms,
    ) -> None:
        self.node_id = config.node_id
        self._raft = raft
        self._clock = raft.clock
        self._wall_clock = wall_clock
        self._session_timeout_ms = config.broker_session_timeout_ms
        self._read_snapshot = read_snapshot
        self.metadata_log = RaftMetadataLog(raft.node, raft.clock)
        self.controller = QuorumController(
            config, self.metadata_log, rng or random.Random(), on_notice=self._log_notice
        )
        self.snapshots = SnapshotWriter(
            raft,
            snapshot_bytes_max=snapshot_bytes_max,
            snapshot_interval_ms=snapshot_interval_ms,
            retention_bytes=retention_bytes,
            retention_ms=retention_ms,
            wall_clock=wall_clock,
        )
        self._controller_id = -1
        self._offline_partitions = 0
        self._failover_reason: str | None = None
        self._steps_posted = False  # a `run_steps` input is queued on the Raft driver
        raft.add_stepped_listener(self._on_apply)
        raft.add_timer(self)

    def _log_notice(self, notice: FenceNotice) -> None:
        """A broker this controller fences or unfences, as it writes the record."""
        log.info("controller %d: %s", self.node_id, notice.describe())

    @property
    def controller_id(self) -> int:
        """The active controller as this node last knew it (-1: unknown)."""
        return self._controller_id

    @property
    def snapshots_taken(self) -> int:
        """How many Raft snapshots this controller wrote (logs, tests)."""
        return self.snapshots.snapshots_taken

    @property
    def snapshots_loaded(self) -> int:
        """How many Raft snapshots this controller loaded (logs, tests)."""
        return self.snapshots.snapshots_loaded

    @property
    def offline_partitions(self) -> int:
        """Partitions without a leader at the last stable offset, while this controller is
        active; 0 on a standby (module docstring)."""
        return self._offline_partitions

    # --- for the service: coroutines on the loop's thread ----------------------------------------

    async def write(self, call: WriteCall[R], timeout_ms: int) -> ControllerAnswer[R]:
        """Run `call` on the loop and wait (at most `timeout_ms`) for its records to commit."""
        loop = asyncio.get_running_loop()
        settled: asyncio.Future[PendingResponse[R]] = loop.create_future()
        described: list[str] = []

        def run(now_ms: int) -> None:
            pending = call(self.controller, now_ms)
            described.append(pending.description)
            pending.add_done_callback(lambda done: _settle(settled, done))
            self._publish()

        def stopping(error: NodeStoppingError) -> None:
            if not settled.done():
                settled.set_exception(error)

        self._raft.post(run, stopping)
        try:
            async with asyncio.timeout(timeout_ms / 1000):
                pending = await asyncio.shield(settled)
        except NodeStoppingError as stopping_error:  # the node stopped before it ran `call`
            return ControllerAnswer(self._controller_id, error=stopping_error)
        except TimeoutError:
            return ControllerAnswer(
                self._controller_id, error=self._timed_out(described, timeout_ms)
            )
        finally:
            # The caller stops waiting (an answer, a timeout, or its cancellation): nobody reads
            # `settled` from here on. The call still runs and may commit, but a NodeStoppingError
            # set on it at stop would be reported at garbage collection as a "Future exception
            # was never retrieved"; cancelled, it is never set.
            settled.cancel()
        error = pending.error
        if error is None:
            return ControllerAnswer(self._controller_id, value=pending.result())
        if not isinstance(error, KafkaError):
            error = UnknownServerError(f"{pending.description} failed: {error!r}")
        return ControllerAnswer(self._controller_id, error=error)

    def metadata_staleness(self, broker_ids: Iterable[int]) -> tuple[Staleness, int]:
        """How stale this node's committed metadata may be (`metadata_staleness`), with the
        wall-clock time of its last contact with the quorum's leader (-1: none)."""
        contact = self._raft.quorum_contact()
        found = metadata_staleness(contact, broker_ids, self._session_timeout_ms)
        contact_ms = self._wall_clock() - found.age_ms if found.ever_reached else -1
        return found, contact_ms

    async def read(self, query: ReadOperation[R]) -> ControllerAnswer[R]:
        """Run `query` on the controller's committed state, on the loop."""
        loop = asyncio.get_running_loop()
        answered: asyncio.Future[ControllerAnswer[R]] = loop.create_future()

        def run(now_ms: int) -> None:
            try:
                answer = ControllerAnswer(self._controller_id, value=self.controller.read(query))
            except KafkaError as error:
                answer = ControllerAnswer(self._controller_id, error=error)
            except Exception as error:  # a read changes nothing: only its caller fails
                log.exception("node %d: a controller read failed", self.node_id)
                answer = ControllerAnswer(
                    self._controller_id, error=UnknownServerError(f"read failed: {error!r}")
                )
            if not answered.done():
                answered.set_result(answer)

        def stopping(error: NodeStoppingError) -> None:
            if not answered.done():
                answered.set_result(ControllerAnswer(self._controller_id, error=error))

        self._raft.post(run, stopping)
        try:
            async with asyncio.timeout(READ_TIMEOUT_MS / 1000):
                return await asyncio.shield(answered)
        except TimeoutError:
            return ControllerAnswer(
                self._controller_id,
                error=RequestTimedOutError(
                    f"node {self.node_id} did not serve a read within {READ_TIMEOUT_MS} ms"
                ),
            )

    # --- on the loop: Raft's events ---------------------------------------------------------------

    def _on_apply(self, item: ApplyItem) -> Steps[None]:
        """The Raft driver's stepped listener: a committed batch is decoded and, on a standby,
        replayed in steps (a controlled shutdown's holds thousands of records, and a restart
        replays the whole log); the driver takes no controller input between two steps."""
        controller = self.controller
        if isinstance(item, CommittedBatch):
            records = yield from committed_records_in_steps(item, node_id=self.node_id)
            yield from controller.commit_in_steps(records)
            now_ms = self._clock()
            self.snapshots.committed(item)
            self._maybe_snapshot(now_ms)
        elif isinstance(item, LeaderChange):
            was_active = controller.is_active
            controller.handle_leader_change(item.leader_id, item.quorum_epoch, self._clock())
            if controller.is_active and not was_active:
                # A restart's timeline: brokers' registrations are answered from here on.
                log.info(
                    "node %d: active controller in quorum epoch %d, from offset %d",
                    self.node_id,
                    item.quorum_epoch,
                    controller.last_committed_offset + 1,
                )
        elif isinstance(item, LoadSnapshot):
            data = self._read_snapshot(item.snapshot_id)
            # Decoded and replayed in steps (a restart's snapshot holds a record per
            # partition); a combined node's broker then takes the same decode.
            snapshot = yield from snapshot_records_in_steps(item, data, node_id=self.node_id)
            yield from controller.load_snapshot_in_steps(snapshot)
            self.snapshots.loaded(item.snapshot_id, self._clock())
            log.info("node %d: loaded metadata snapshot %s", self.node_id, item.snapshot_id)
        self._publish()

    # --- on the loop: time (RaftDriver's LoopTimer) -----------------------------------------------

    def next_wake_ms(self, now_ms: int) -> int | None:
        deadlines = (self.controller.next_wake_ms(now_ms), self.snapshots.next_due_ms())
        known = [deadline for deadline in deadlines if deadline is not None]
        return min(known) if known else None

    def tick(self, now_ms: int) -> None:
        self.controller.tick(now_ms)
        self._maybe_snapshot(now_ms)
        self._publish()

    # --- internals --------------------------------------------------------------------------------

    def state_at_stop_in_steps(self) -> Steps[StopState | None]:
        """The controller's committed state to snapshot at a clean stop, taken in steps of
        whole topics (`SnapshotWriter.state_at_stop_in_steps`,
        `QuorumController.snapshot_records_in_steps`), on the loop; the first between two
        whole items (`snapshot_before_stop`)."""
        end_offset = self.controller.last_committed_offset + 1
        return self.snapshots.state_at_stop_in_steps(end_offset, self._snapshot_state)

    def _maybe_snapshot(self, now_ms: int) -> None:
        end_offset = self.controller.last_committed_offset + 1
        self.snapshots.maybe_write(end_offset, now_ms, self._snapshot_state)

    def _snapshot_state(self) -> tuple[Steps[Sequence[MetadataRecord]], int]:
        """The committed state to snapshot, in steps of whole topics holding its offset's
        timeline snapshot (`QuorumController.snapshot_records_in_steps`), each partition
        record made as it is encoded: the last stable offset, the state at the end of the
        last committed batch."""
        controller = self.controller
        records = controller.snapshot_records_in_steps(controller.last_stable_offset)
        return records, controller.offset_control.last_committed_quorum_epoch

    def _timed_out(self, described: list[str], timeout_ms: int) -> RequestTimedOutError:
        """REQUEST_TIMED_OUT naming what the write waited for: its turn on the loop (the call
        never ran: the loop was held, or a stepped apply kept the inbox closed), or the commit
        of the records it proposed."""
        if not described:
            return RequestTimedOutError(
                f"the request: node {self.node_id}'s controller did not get to it within "
                f"{timeout_ms} ms (it waits in the Raft loop's inbox behind the node's other "
                "work); it may still run and commit"
            )
        return RequestTimedOutError(
            f"{described[0]}: its records did not commit within {timeout_ms} ms on node "
            f"{self.node_id} (a majority of the quorum's voters must have them); they may "
            "still commit"
        )

    def _publish(self) -> None:
        """Publish what handlers may read, after every controller call."""
        controller = self.controller
        leader = controller.leader_id
        self._controller_id = -1 if leader is None else leader
        # Committed state only (a write replayed but not yet committed may still be reverted):
        # the size of the leaderless index at the last stable offset, a lookup, not a scan.
        self._offline_partitions = (
            controller.replication.partitions_led_by(NO_LEADER, controller.last_stable_offset)
            if controller.is_active
            else 0
        )
        reason = controller.last_failover_reason
        if reason is not None and reason is not self._failover_reason:
            self._failover_reason = reason
            log.warning("node %d: the controller gave up leadership: %s", self.node_id, reason)
        self._pace_steps()

    def _pace_steps(self) -> None:
        """Run the steps a stepped write left as an input posted to the Raft driver, after the
        inputs queued before it: the driver takes as many such inputs as fit its turn
        (`APPLY_TURN_S`) and gives the loop's other tasks a turn between (docs/raft.md), so the
        steps go at the loop's pace. Left to the ticks (at most one every `TIMER_RETICK_MS`,
        10 ms), steps of 250 changes would move a fencing's or unfencing's 10,000 partitions a
        quarter as fast as steps of 1,000 did."""
        if self._steps_posted or not self.controller.steps_queued:
            return
        self._steps_posted = True

        def run(now_ms: int) -> None:
            self._steps_posted = False
            self.controller.run_steps(now_ms)
            self._publish()

        self._raft.post(run)
