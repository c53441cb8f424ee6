"""Snapshots and retention of a node's metadata log, taken on the Raft driver's loop.

Every node snapshots its own committed metadata state (docs/design/kraft.md#snapshots: Kafka's
SnapshotGenerator runs on brokers and controllers alike), so that a restart loads the latest
snapshot instead of replaying the whole log, and the log's start can move up to it. Two callers
share one `SnapshotWriter`, the schedule and the retention of one node:

    ControllerDriver        a node with the controller role: the controller's state at its
                            last stable offset
    BrokerMetadataSnapshots a node without a controller (process.roles=broker): the image its
                            broker's metadata loader published last

Rules:
- Called only on the Raft driver's loop, outside `ready()`/`advance()`: from a Raft listener
  (run after `advance`) or a loop timer. `create_snapshot` and `delete_log_prefix` only queue
  log operations, which the next Ready writes.
- In steps, scheduled or at a stop: the state is taken a step a loop turn (the first between
  two whole items, the rest reading only at its offset), encoded 250 records a loop turn, and
  stored on the loop, only if no snapshot at or past its end came meanwhile. Whole, 100,000
  partitions' state and encoding held the loop for over a second of CPU. A scheduled one's
  later steps run in a task of the node (`RaftDriver.tasks`), one at a time: a snapshot due
  while one is being written waits for it to end.
- When (`SnapshotSchedule`): once `metadata.log.max.record.bytes.between.snapshots` bytes of
  committed data batches arrived since the last snapshot, or once
  `metadata.log.max.snapshot.interval.ms` passed with some arrived; loading a snapshot counts
  as taking one. And at a clean stop, once any arrived (`snapshot_before_stop`): the node's
  broker has stopped, the snapshot is on disk before its Raft driver stops, and the next start
  loads it and replays only what committed after it.
- Crashes: a snapshot file is written as `.part`, fsynced, renamed and its directory fsynced
  (`RaftStorage`), so a crash while writing one leaves at most a `.part` file, which the next
  open removes, saying so; the log still holds every record the snapshot would have held
  (nothing moves the log start to a snapshot not yet frozen), so that start replays them.
- What: committed state only, at a batch boundary, ending after its last offset. The
  controller's state at its last stable offset is that; so is an image the loader published
  (it publishes only committed batches, at batch ends). An image not published yet is never
  written: before the loader's first publication nothing is snapshotted.
- Retention (KIP-630), checked before each decision, by size and by age; negative: no limit.
  Size (`metadata.max.retention.bytes`): once the metadata log holds more than that, its start
  moves up to the newest snapshot. Age (`metadata.max.retention.ms`), Kafka's pairwise rule:
  walking the snapshots oldest first, while one was taken longer ago than that, the start moves
  up to the next one (so the newest snapshot always stays, and one old snapshot alone removes
  nothing). Either way the target must be a snapshot this node applied (one it wrote, or one
  it loaded); older snapshots go with the prefix; a fetcher behind the new start downloads the
  snapshot instead. A snapshot's age is from the time its writer took it (the timestamp of its
  records), which a downloaded copy keeps.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Protocol

from replog.clock import Clock, wall_clock_ms
from replog.errors import KafkaStorageError
from replog.quorum.metadata.image import MetadataImage
from replog.quorum.metadata.record_batches import encode_snapshot_in_steps
from replog.quorum.metadata.records import MetadataRecord
from replog.quorum.metadata.snapshot import image_records_in_steps
from replog.quorum.metadata.snapshot_schedule import (
    METADATA_MAX_RETENTION_BYTES,
    METADATA_MAX_RETENTION_MS,
    SnapshotSchedule,
)
from replog.quorum.metadata.steps import Steps, take_step
from replog.quorum.raft.ready import ApplyItem, CommittedBatch, LoadSnapshot
from replog.quorum.raft.snapshot_id import SnapshotId
from replog.server.config.node_config import NodeConfig
from replog.server.raft.raft_driver import RaftDriver
from replog.server.runtime.loop_turns import yield_turn
from replog.timeline import UnknownSnapshotError

log = logging.getLogger("replog.server.metadata")


class Published(Protocol):
    """Whatever holds the last published image (the broker's `BrokerMetadataListener`)."""

    @property
    def image(self) -> MetadataImage: ...


# The state to write, asked for only once a snapshot is due: its records, taken in steps, and
# the quorum epoch of its last offset.
SteppedSnapshotState = Callable[[], tuple[Steps[Sequence[MetadataRecord]], int]]


@dataclass(frozen=True, slots=True)
class StopState:
    """The committed state a snapshot writes (a clean stop's or the schedule's), taken in steps
    on the loop, the first between two whole items; encoded in steps, then stored
    (`store_at_stop`)."""

    writer: SnapshotWriter
    end_offset: int
    records: Sequence[MetadataRecord]
    quorum_epoch: int
    timestamp_ms: int


class SnapshotWriter:
    """One node's snapshot schedule and log retention (module docstring)."""

    def __init__(
        self,
        raft: RaftDriver,
        *,
        snapshot_bytes_max: int,
        snapshot_interval_ms: int,
        retention_bytes: int = METADATA_MAX_RETENTION_BYTES,
        retention_ms: int = METADATA_MAX_RETENTION_MS,
        wall_clock: Clock = wall_clock_ms,
    ) -> None:
        self._raft = raft
        self._wall_clock = wall_clock
        self.schedule = SnapshotSchedule(
            raft.clock(),
            max_bytes_between=snapshot_bytes_max,
            max_interval_ms=snapshot_interval_ms,
        )
        self.retention_bytes = retention_bytes
        self.retention_ms = retention_ms
        self._taken_ms: dict[SnapshotId, int] = {}  # snapshot -> when it was taken (age rule)
        # How many snapshots this node wrote and loaded (logs, tests).
        self.snapshots_taken = 0
        self.snapshots_loaded = 0
        # The task writing a scheduled snapshot's later steps (`maybe_write`) until it is
        # stored or given up, and the data committed meanwhile, which counts towards the next.
        self._writing: asyncio.Task[None] | None = None
        self._bytes_while_writing = 0

    def committed(self, batch: CommittedBatch) -> None:
        """A batch committed (control batches carry no metadata and never count)."""
        self.schedule.committed(len(batch.batch), is_control=batch.is_control)
        if self._writing is not None and not batch.is_control:
            self._bytes_while_writing += len(batch.batch)

    def loaded(self, snapshot_id: SnapshotId, now_ms: int) -> None:
        """The state machine loaded a snapshot: as good as one taken."""
        self.schedule.taken(snapshot_id.end_offset, now_ms)
        self.snapshots_loaded += 1

    def next_due_ms(self) -> int | None:
        """When a snapshot may be due by time (None: not by time alone; never while one is
        being written), or at once when the batches committed while the last one was written
        made one due by size: no commit may come to ask."""
        if self._writing is not None:
            return None
        if self.schedule.bytes_since >= self.schedule.max_bytes_between:
            return 0
        return self.schedule.next_due_ms()

    @property
    def writing(self) -> bool:
        """A scheduled snapshot is being written (`maybe_write`)."""
        return self._writing is not None

    def maybe_write(self, end_offset: int, now_ms: int, state: SteppedSnapshotState) -> bool:
        """Apply the retention, then, if a snapshot is due and none is being written, begin
        writing the committed state ending at `end_offset` (exclusive, a batch boundary this
        node applied; the caller is between two whole items): `state`'s first step now, the
        others, the encoding and the store in a task of the node (module Rules). Whether one
        began."""
        self.apply_retention(now_ms)
        if self._writing is not None or not self.schedule.due(end_offset, now_ms):
            return False
        taking = self._state_in_steps(end_offset, state)
        taken: list[StopState] = []
        take_step(taking, taken)
        self._bytes_while_writing = 0
        self._writing = self._raft.tasks.spawn(
            self._write_in_steps(taking, taken), name="a scheduled metadata snapshot"
        )
        return True

    async def _write_in_steps(self, taking: Steps[StopState], taken: list[StopState]) -> None:
        """The rest of `maybe_write`'s snapshot: its state's steps a loop turn each, its
        encoding 250 records a turn, then stored on the Raft driver's loop, unless one at or past
        its end came meanwhile. A snapshot load between two steps drops the state (nothing is
        written: the schedule is still due, and the next commit begins again)."""
        try:
            while not taken:
                await yield_turn()
                take_step(taking, taken)
            state = taken[0]
            data = await encoded_in_steps(state)

            def store(now_ms: int) -> None:
                # Ended here, on the Raft driver's loop: its timers are checked next.
                self._writing = None
                if self._store_new(state, data, now_ms, "") is not None:
                    self.schedule.committed(self._bytes_while_writing, is_control=False)

            await self._raft.run_persisted(store)
        except (KafkaStorageError, UnknownSnapshotError) as error:
            log.warning(
                "node %d: the scheduled metadata snapshot was not written (%s)",
                self._raft.node_id,
                error,
            )
        finally:
            taking.close()
            self._writing = None

    def state_at_stop_in_steps(
        self, end_offset: int, state: SteppedSnapshotState
    ) -> Steps[StopState | None]:
        """At a clean stop: the committed state ending at `end_offset`, if any data committed
        since the newest snapshot (`SnapshotSchedule.due_at_stop`), its records taken in
        `state`'s steps; `snapshot_before_stop` runs each on the loop, encodes the records in
        steps and stores them with `store_at_stop`."""
        if not self.schedule.due_at_stop(end_offset):
            return None
        return (yield from self._state_in_steps(end_offset, state))

    def _state_in_steps(self, end_offset: int, state: SteppedSnapshotState) -> Steps[StopState]:
        taking, quorum_epoch = state()
        timestamp_ms = self._wall_clock()
        records = yield from taking
        return StopState(self, end_offset, records, quorum_epoch, timestamp_ms)

    def store_at_stop(self, state: StopState, data: bytes, now_ms: int) -> SnapshotId | None:
        """Write `state`, encoded as `data`, unless a snapshot at or past its end was written
        or loaded while it was encoded (the loop ran other items meanwhile)."""
        return self._store_new(state, data, now_ms, " at a clean stop")

    def _store_new(
        self, state: StopState, data: bytes, now_ms: int, when: str
    ) -> SnapshotId | None:
        if not self.schedule.due_at_stop(state.end_offset):
            return None
        return self._store(state.end_offset, data, now_ms, len(state.records), when)

    def _store(
        self, end_offset: int, data: bytes, now_ms: int, records: int, when: str
    ) -> SnapshotId:
        snapshot_id = self._raft.node.create_snapshot(end_offset, data, now_ms)
        self.schedule.taken(end_offset, now_ms)
        self.snapshots_taken += 1
        log.info(
            "node %d: metadata snapshot %s%s: %d records, %d bytes",
            self._raft.node_id,
            snapshot_id,
            when,
            records,
            len(data),
        )
        return snapshot_id

    def apply_retention(self, now_ms: int) -> None:
        """Move the log start up to the snapshot the retention size or age asks for; only a
        snapshot this node applied qualifies (module docstring)."""
        snapshots = self._raft.storage.snapshot_ids()
        if not snapshots:
            return
        storage_log = self._raft.storage.log
        target: SnapshotId | None
        if 0 <= self.retention_bytes < storage_log.size_in_bytes:
            target, reason = snapshots[-1], f"the log outgrew {self.retention_bytes} bytes"
        else:
            target = self._expired_by_age(snapshots)
            reason = f"the snapshots before it are older than {self.retention_ms} ms"
        if target is None or target.end_offset <= storage_log.log_start_offset:
            return
        if target.end_offset > self._raft.node.status().applied_offset:
            return
        self._raft.node.delete_log_prefix(target, now_ms)
        log.info(
            "node %d: metadata log start moves to snapshot %s (%s)",
            self._raft.node_id,
            target,
            reason,
        )

    def _expired_by_age(self, snapshots: Sequence[SnapshotId]) -> SnapshotId | None:
        """The snapshot after the last of the oldest ones taken longer ago than the retention
        age (module docstring), or None."""
        if self.retention_ms < 0 or len(snapshots) < 2:
            return None
        taken = self._taken_ms
        for gone in taken.keys() - set(snapshots):
            del taken[gone]
        oldest_kept = self._wall_clock() - self.retention_ms
        target = None
        for older, newer in pairwise(snapshots):
            if older not in taken:
                found = self._raft.storage.snapshot_timestamp_ms(older)
                if found is None:
                    break
                taken[older] = found
            if taken[older] >= oldest_kept:
                break
            target = newer
        return target


class BrokerMetadataSnapshots:
    """Snapshots the published metadata image of a node without a controller: a Raft listener
    behind the broker's own (so it sees what the broker published for the same item) and a
    loop timer for the interval rule."""

    def __init__(
        self, raft: RaftDriver, image: Callable[[], MetadataImage], writer: SnapshotWriter
    ) -> None:
        self._clock = raft.clock
        self._image = image
        self.writer = writer
        raft.add_listener(self._on_apply)
        raft.add_timer(self)

    @classmethod
    def for_node(
        cls, config: NodeConfig, raft: RaftDriver, published: Published
    ) -> BrokerMetadataSnapshots:
        """The snapshots of `config`'s node, of what `published` (its broker's metadata
        listener) published last. Call after the broker's listener was added to `raft`."""
        writer = SnapshotWriter(
            raft,
            snapshot_bytes_max=config.snapshot_bytes_max,
            snapshot_interval_ms=config.snapshot_interval_ms,
            retention_bytes=config.retention_bytes,
            retention_ms=config.retention_ms,
        )
        return cls(raft, lambda: published.image, writer)

    def _on_apply(self, item: ApplyItem) -> None:
        if isinstance(item, CommittedBatch):
            self.writer.committed(item)
            self._maybe_snapshot(self._clock())
        elif isinstance(item, LoadSnapshot):
            self.writer.loaded(item.snapshot_id, self._clock())

    # --- RaftDriver's LoopTimer ------------------------------------------------------------------

    def next_wake_ms(self, now_ms: int) -> int | None:
        # Until the loader publishes past the newest snapshot there is nothing to write: wait
        # for a commit rather than wake the loop every few milliseconds for nothing.
        if not self._has_news():
            return None
        return self.writer.next_due_ms()

    def tick(self, now_ms: int) -> None:
        self._maybe_snapshot(now_ms)

    # --- internals -------------------------------------------------------------------------------

    def _has_news(self) -> bool:
        end_offset = self._image().provenance.last_offset + 1
        return end_offset > self.writer.schedule.last_end_offset

    def state_at_stop_in_steps(self) -> Steps[StopState | None]:
        """The published image to snapshot at a clean stop
        (`SnapshotWriter.state_at_stop_in_steps`)."""
        image = self._image()
        return self.writer.state_at_stop_in_steps(
            image.provenance.last_offset + 1, lambda: _image_state(image)
        )

    def _maybe_snapshot(self, now_ms: int) -> None:
        image = self._image()
        # Before the first publication the image is the empty one, ending at offset 0: never
        # due (a snapshot must end past 0), though the retention still applies.
        self.writer.maybe_write(
            image.provenance.last_offset + 1, now_ms, lambda: _image_state(image)
        )


def _image_state(image: MetadataImage) -> tuple[Steps[Sequence[MetadataRecord]], int]:
    """An image's records in steps of whole topics, each partition's made as it is encoded
    (an image is immutable: the steps may run any time)."""
    return image_records_in_steps(image), image.provenance.last_quorum_epoch


async def encoded_in_steps(state: StopState) -> bytes:
    """`state`'s records encoded as a snapshot, `SNAPSHOT_RECORDS_PER_STEP` a loop turn."""
    steps = encode_snapshot_in_steps(
        state.records, quorum_epoch=state.quorum_epoch, timestamp_ms=state.timestamp_ms
    )
    encoded: list[bytes] = []
    while not take_step(steps, encoded):
        await yield_turn()
    return encoded[0]


class StopSnapshots(Protocol):
    """What writes a node's snapshot at a clean stop (`ControllerDriver`,
    `BrokerMetadataSnapshots`), its steps each run on the Raft driver's loop."""

    def state_at_stop_in_steps(self) -> Steps[StopState | None]: ...


async def snapshot_before_stop(
    raft: RaftDriver, taker: StopSnapshots, timeout_s: float
) -> SnapshotId | None:
    """Have `taker` snapshot the node's committed state, and wait until the file is on disk;
    None when nothing was due, or when that took over `timeout_s` (the stop goes on: a snapshot
    written later, or never, leaves the log as it was). The state is taken in steps (100,000
    partitions in one turn held the loop 155-172 ms of CPU), the first on `raft`'s loop between
    two whole items, the others a loop turn each, between the loop's other work: they read only
    at the first step's offset, whose timeline snapshot they hold, which nothing the controller
    is in the middle of changes (a snapshot load drops it: UnknownSnapshotError, no snapshot).
    Its encoding, 250 records a turn (the whole of it held the loop 90 ms of a loaded
    machine's CPU at 10,000 partitions), runs the same way; the snapshot is stored on the loop
    again, unless one at or past its end came meanwhile. Steps left half way are closed (the
    controller's hold goes with them)."""
    taken: list[SnapshotId | None] = []
    taking: Steps[StopState | None] | None = None
    outcome: list[StopState | None] = []
    given_up = False

    def begin(now_ms: int) -> None:
        # Posted, it may run after the wait for it timed out: then it takes nothing.
        nonlocal taking
        if not given_up:
            taking = taker.state_at_stop_in_steps()
            take_step(taking, outcome)

    try:
        async with asyncio.timeout(timeout_s):
            await raft.run_persisted(begin)
            while taking is not None and not outcome:
                await yield_turn()
                take_step(taking, outcome)
            state = outcome[0] if outcome else None
            if state is None:
                return None
            data = await encoded_in_steps(state)
            await raft.run_persisted(
                lambda now_ms: taken.append(state.writer.store_at_stop(state, data, now_ms))
            )
    except (TimeoutError, KafkaStorageError, UnknownSnapshotError) as error:
        log.warning(
            "node %d: no metadata snapshot at the stop (%s); the next start replays the log "
            "since the last one",
            raft.node_id,
            str(error) or f"not on disk within {timeout_s:g} s",
        )
        return None
    finally:
        given_up = True
        if taking is not None:
            taking.close()
    return taken[0] if taken else None
