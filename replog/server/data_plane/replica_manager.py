"""The broker's data plane: every partition replica on this broker, driven by metadata, serving
Produce, Fetch, ListOffsets, OffsetsForLeaderEpoch and DeleteRecords, and replicating as a
follower through synchronous steps an async fetcher drives.

Rules (docs/design/replication.md; Kafka's `ReplicaManager`):
- Declarative: on every metadata image the manager computes this broker's local changes (deletes
  first, then leaders, then followers) and brings each replica to the state the image describes.
  Once started, it applies them in rounds (`APPLY_ROUND_CHANGES` a round, fewer once the round's
  loop time is up, then the event loop runs others), each partition's changes in order
  (`ReplicaChangeQueue`), and a replica that needs its log opened or created gets it from a worker
  thread, in one batch per round with one file-system sync, and is installed on the loop in turns
  bounded in time (`APPLY_TURN_BUDGET_MS`; docs/storage.md, "Creating many replicas"). A new log's
  files are all the thread makes (system calls, little Python between them: a thread at a lower
  priority preempted while holding the GIL keeps the loop waiting); its objects are built on the
  loop as it is installed, from the plain data the thread returns (`LogManager.make_new_log`,
  `add_new_log`). With a file maker process (`use_file_maker`: a `replog node`'s brokers), a
  round of more than `SYNC_EACH_MAX` creations has the child make its new logs' files instead,
  awaited on the loop without a thread (`_open_logs_by_file_maker`; the bulk threads for good
  once the child is gone). The new leaders' epoch checkpoints a round wrote are written and
  synced off the loop by `DeferredSyncs`, which the rounds do not wait for. Before `start`
  (tests, tools), `apply_image` applies everything at once. Every image also refreshes ISR
  eligibility (registered, unfenced, not shutting down) and each leader's `min.insync.replicas`
  (topic config, else this broker's dynamic config, else the dynamic cluster default, else
  server.properties: Kafka's precedence), once started in rounds of `APPLY_ROUND_CHANGES` leaders
  too (fewer once a round's time is up); a leader not reached yet acts on the previous image
  meanwhile (docs/replication.md, "Images in rounds").
  Each replica's log settings follow the same precedence, key by key: a value this broker
  refuses is skipped with a warning, and the level below gives that key (`_log_config`). So do
  the log cleaner's (`log.cleaner.threads`, `.dedupe.buffer.size`, `.io.max.bytes.per.second`,
  `.backoff.ms`), which the running cleaner takes when a broker level changes
  (`_refresh_cleaner`, `cleaner_config.reconfigured`).
- Logs of deleted topics (Kafka's KIP-516 topic ids and stray logs): a replica's log records
  its topic id in `partition.metadata` before the replica appends anything. A log whose file
  names another topic id belongs to a deleted topic of the same name: it is set aside as a
  stray log and an empty one replaces it when the new topic's replica takes it; a log without
  the file is taken as it is (an empty log made just before a crash, or one a replog without
  the file wrote). The first image also sets aside every log on disk that no replica took (its
  topic deleted, its partition gone, or this broker no longer a replica: all while the broker
  was down or starting), with a warning naming it. Setting aside is Kafka's: the directory is
  renamed `<topic>-<partition>.<id>-stray` (`LogManager.set_aside_stray_log`), never served
  or opened again, and left for an operator to remove, so that a wrong verdict (a bug, a
  metadata log restored from elsewhere) costs disk, not data. A log without the file is a
  stray in Kafka (it has written the file since 2.8); replog takes it, so that logs written
  before replog had the file keep their data. Without the id check, a topic deleted while a
  broker started would stay on its disk, and a topic created later under the same name would
  take that log: its first committed records would be the deleted topic's.
  The file costs a new replica one small atomic write (about 0.45 ms here, as much again as
  creating the log); a log that has one costs a read of it at start-up.
- Produce: acks must be 0, 1 or -1 (INVALID_REQUIRED_ACKS). Per partition: an internal topic
  (`__consumer_offsets`, `topic_names.INTERNAL_TOPICS`) -> INVALID_TOPIC_EXCEPTION naming it,
  unless the caller passes `internal_topics_allowed=True` (Kafka's `internalTopicsAllowed`:
  only the broker's own group coordinator does; a client's produce never); unknown ->
  UNKNOWN_TOPIC_OR_PARTITION; not the leader -> NOT_LEADER_OR_FOLLOWER with the current leader;
  acks=-1 with a committed ISR below the effective min ISR -> NOT_ENOUGH_REPLICAS before any
  append; an idempotent retry of one of a producer's last 5 batches is answered with the
  original offsets and not appended; storage errors (size, CRC, magic, base offset) pass
  through. acks=-1 then waits until the leader core says done (HW past the append) or the
  request's timeout (REQUEST_TIMED_OUT); acks=1 answers after the local append; acks=0 answers
  only the partitions that failed (empty when all succeeded): the Kafka listener sends no
  response, or on a failure closes the connection, as Kafka's broker does (`kafka_apis`).
- WriteTxnMarkers (a transaction coordinator's end of a transaction): per partition, only the
  leader; the marker is checked against the producer state (`check_marker`), appended as one
  control batch through the produce path with acks=all (internal topics too) and answered
  once the HW passes it, or REQUEST_TIMED_OUT.
- Fetch: only the leader serves. Followers read up to the LEO, consumers up to the HW (never a
  batch at or above it), read_committed ones up to the last stable offset, with the aborted
  transactions of what they read (`Log.collect_aborted_transactions`); the HW in the answer
  is captured before a follower's fetch updates its progress, and a fetch that reports a
  diverging epoch updates nothing (docs/design/replication.md#truncate-on-fetch,
  #follower-progress). The byte
  budget is `max_bytes` over partitions, `partition_max_bytes` each, and the first batch is
  returned whole until the first partition with data
  (docs/design/replication.md#answer-now-or-wait). A fetch that cannot be answered at
  once waits in the fetch purgatory until a wake (leader append, HW move, leadership change)
  finds enough data or a docs/design/replication.md#delayed-fetch-completion condition, or
  `max_wait_ms` passes; either way it re-reads.
- ListOffsets (read_committed: bounded by the LSO), OffsetsForLeaderEpoch and DeleteRecords'
  log-start move: `leader_offsets`.
  DeleteRecords' checks (policy, offset range, the purgatory bound) and its wait for the low
  watermark are the partition core's; it answers once the low watermark reaches the offset,
  or REQUEST_TIMED_OUT.
  DeleteRecords on an internal topic is INVALID_TOPIC_EXCEPTION unless
  `internal_topics_allowed=True` (Kafka's `allowInternalTopicDeletion`).
- Follower: `follower_fetch` (truncation on a diverging epoch, OFFSET_OUT_OF_RANGE as in
  docs/design/replication.md#follower-out-of-range,
  back-off for `replica.fetch.backoff.ms`).
- Waiting requests: `delayed_operations`. Every waiting operation is bounded
  (`purgatory_pending_max` per purgatory); every error names the topic-partition and carries
  its Kafka class.

Theory of operation: everything here runs on the event loop thread and is synchronous except the
`await` of a delayed operation's future and the applier's worker-thread batches (which touch
only logs no replica uses yet, and epoch files under their own lock). The pure cores decide:
each replica's `PartitionCore` (acks gating, produce purgatory admission, duplicates, HW
advance, ISR shrink and expansion, AlterPartition retries, which waiters to re-check), stepped
with what happened and answered with effects that `_execute` and the produce path carry out;
fetch_rules, follower_truncation and purgatory besides. This shell owns the replicas, reads and
writes logs, and wakes delayed operations on the keys the effects name. It
is the facade of the data plane: `DelayedOperations` (the purgatories) and `FollowerFetchSteps`
(the follower side) read its partition map, which only this class changes. Timers (ISR shrink
every `replica.lag.time.max.ms / 2`, producer-id expiry every
`producer.id.expiration.check.interval.ms` against the wall clock, purgatory expiry, follower
back-offs, AlterPartition retries) run in `tick(now_ms)`, which `start()` schedules from
`next_tick_ms()` and tests call by hand with a fake clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from replog.clock import Clock, monotonic_ms, wall_clock_ms
from replog.common import TopicPartitionKey
from replog.errors import KafkaStorageError, NotLeaderOrFollowerError, UnknownTopicOrPartitionError
from replog.replication.fetch_session import FetchChanges
from replog.replication.messages import FetchRequest, FetchResponse
from replog.replication.producer_state import ProducerEntry
from replog.server.config.replica_manager_config import ReplicaManagerConfig
from replog.server.data_plane.delayed_operations import DelayedOperations
from replog.server.data_plane.fetch_serving import FetchServing
from replog.server.data_plane.isr_changes import IsrChanges
from replog.server.data_plane.offset_requests import OffsetRequests
from replog.server.data_plane.produce_path import ProducePath
from replog.server.data_plane.producer_state_loader import preload_producer_tables
from replog.server.data_plane.replica_applier import ReplicaApplier
from replog.server.data_plane.replica_timers import SWEEP_SLICE, ReplicaTimers
from replog.server.metrics.instruments import BrokerCounters
from replog.server.runtime.loop_turns import yield_turn
from replog.server.runtime.node_tasks import Spawner
from replog.storage.cleaner.batch_filter import ProducerLastBatch
from replog.storage.log_manager import LogManager

__all__ = ["ReplicaManager", "ReplicaManagerConfig"]

log = logging.getLogger("replog.server.data_plane.replica_manager")


# Producer snapshots (a small file each) a stop writes in one loop turn.
STOP_SNAPSHOT_WRITES_PER_TURN = 20


class ReplicaManager(
    ReplicaApplier,
    ProducePath,
    FetchServing,
    OffsetRequests,
    IsrChanges,
    ReplicaTimers,
):
    """Every partition replica of this broker (module docstring). A MetadataPublisher."""

    name = "replica-manager"

    def __init__(
        self,
        config: ReplicaManagerConfig,
        log_manager: LogManager,
        *,
        tasks: Spawner,
        clock: Clock = monotonic_ms,
        wall_clock: Clock = wall_clock_ms,
        broker_epoch: Callable[[], int] = lambda: -1,
        counters: BrokerCounters | None = None,
        on_storage_error: Callable[[KafkaStorageError], None] | None = None,
    ) -> None:
        super().__init__(
            config,
            log_manager,
            tasks=tasks,
            clock=clock,
            wall_clock=wall_clock,
            broker_epoch=broker_epoch,
            counters=counters,
            on_storage_error=on_storage_error,
        )
        # The roles' hooks: the purgatories re-read fetches, the cleaner asks the replicas.
        self._delayed = DelayedOperations(
            broker_id=self.broker_id,
            pending_max=config.purgatory_pending_max,
            partitions=self._partitions,
            current_leader=self._current_leader,
            read_fetch=lambda request, now_ms, reread: self._read_fetch(
                request, now_ms, initial=False, reread=reread
            ),
            clock=clock,
            on_new_deadline=self._on_new_deadline,
        )
        log_manager.cleaner.producer_last_batches = self._producer_last_batches
        log_manager.cleaner.first_unstable_offset = self._first_unstable_offset

    def _producer_last_batches(self, key: TopicPartitionKey) -> dict[int, ProducerLastBatch] | None:
        """Each producer's last data batch in the replica's log, for the cleaner's thread;
        None while the replica's producer table is not loaded (the log waits to be
        cleaned). Reads one copy of the table (`entries`), which the event loop replaces
        entries of, never mutates."""
        partition = self._partitions.get(key)
        if partition is None or not partition.producer_state_loaded:
            return None
        return {
            producer_id: ProducerLastBatch(
                entry.batches[-1].last_offset if entry.batches else None, entry.producer_epoch
            )
            for producer_id, entry in partition.producer_state.entries().items()
        }

    def _first_unstable_offset(self, key: TopicPartitionKey) -> int | None:
        """The first offset of the replica's lowest open transaction, for the cleaner's thread
        (None: none open, or the table not loaded, when the cleaner waits anyway). Reads one
        copy of the table, as `_producer_last_batches` does."""
        partition = self._partitions.get(key)
        if partition is None or not partition.producer_state_loaded:
            return None
        entries = partition.producer_state.entries().values()
        return min((e.current_txn_first_offset for e in entries if e.in_transaction), default=None)

    def preload_producer_states(self) -> None:
        """Load every log's producer table now. A starting broker calls this in a worker
        thread before it installs the metadata image, as Kafka loads producer state with its
        logs: after a crash a table is its last snapshot plus the headers written since (up
        to a segment), and the replicas the image creates then take their roles without
        reading them on the event loop."""
        self._preloaded = preload_producer_tables(
            self.log_manager.all_logs(), self._producer_expiry()
        )

    def describe_producers(self, topic: str, partition_id: int) -> tuple[ProducerEntry, ...]:
        """The producers a replica of the partition on this broker knows of (Kafka's
        DescribeProducers: a follower's table is the leader's as of its log end), by producer
        id; UNKNOWN_TOPIC_OR_PARTITION, or NOT_LEADER_OR_FOLLOWER if this broker hosts no
        replica of it."""
        partition = self._partitions.get((topic, partition_id))
        if partition is None:
            where = f"{topic}-{partition_id}"
            topic_image = self.image.topics.by_name.get(topic)
            if topic_image is None or partition_id not in topic_image.partitions:
                raise UnknownTopicOrPartitionError(f"{where}: unknown topic-partition")
            replicas = topic_image.partitions[partition_id].replicas
            raise NotLeaderOrFollowerError(
                f"{where}: broker {self.broker_id} hosts no replica of it (replicas: "
                f"{', '.join(map(str, replicas))})"
            )
        partition.ensure_producer_state()
        entries = partition.producer_state.entries()
        return tuple(entries[producer_id] for producer_id in sorted(entries))

    def fetch_sources(self) -> list[int]:
        """The leader broker ids this broker fetches from."""
        return list(self._fetch_sources)

    def build_follower_fetch(self, source_broker_id: int, now_ms: int) -> FetchRequest | None:
        """The next Fetch to send to `source_broker_id`; None when nothing is due."""
        return self._follower.build(source_broker_id, now_ms)

    def follower_fetch_changes(self, source_broker_id: int) -> FetchChanges | None:
        """What the last request built for `source_broker_id` changed since the one built
        before it: its fetch session encodes only that (`follower_fetch`, dirty-only)."""
        return self._follower.changes(source_broker_id)

    def process_follower_fetch(
        self,
        source_broker_id: int,
        request: FetchRequest,
        response: FetchResponse,
        now_ms: int,
    ) -> None:
        """Apply a leader's Fetch answer (docs/design/replication.md#follower-truncation,
        #truncate-on-fetch, #follower-out-of-range, #high-watermark "Follower HW")."""
        fetched = sum(len(result.records) for result in response.partitions)
        if fetched:
            self.counters.replication_bytes_in.inc(fetched)
        self._follower.process(source_broker_id, request, response, now_ms)

    def follower_fetch_failed(
        self, source_broker_id: int, request: FetchRequest, now_ms: int
    ) -> None:
        """The fetch itself failed (peer down, timeout): back off every partition it asked."""
        self._follower.fetch_failed(source_broker_id, request, now_ms)

    async def start(self) -> None:
        """Run `tick` on the event loop whenever it is due, and apply metadata changes from
        now on in rounds, off the loop where they touch files."""
        if self._timer_task is None:
            self._stopped = False
            self._timer_task = self._spawner.spawn(
                self._run_timers(), name="the replica manager's timers"
            )
            self._applier_task = self._spawner.spawn(
                self._run_applier(), name="the replica manager's metadata applier"
            )

    async def stop(self) -> None:
        """Stop the timers, answer every waiting request (NOT_LEADER_OR_FOLLOWER), and write
        the replicas' producer snapshots, a slice a loop turn."""
        self._stopped = True
        task, self._timer_task = self._timer_task, None
        if task is not None:
            self._timers_changed.set()  # the loop sees `_stopped` and returns
            await task
        applier, self._applier_task = self._applier_task, None
        if applier is not None:
            applier.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await applier
        maker, self._file_maker = self._file_maker, None
        if maker is not None:
            await asyncio.to_thread(maker.close)
        # One sync for every epoch checkpoint still waiting, rather than one each at the
        # logs' close.
        await self._syncs.drain()
        await self._syncs.stop()
        self._delayed.answer_all_shutting_down()
        await self._write_producer_snapshots_at_stop()

    async def _write_producer_snapshots_at_stop(self) -> None:
        """Each replica's producer snapshot at the LEO
        (`Partition.write_producer_snapshot_at_stop`), `SWEEP_SLICE` replicas a loop turn: the
        check alone, over 100,000 replicas in one turn, held the loop 158-168 ms of CPU, while
        the node's Raft driver (its controller's stop snapshot among others) still runs on it.
        A turn also ends after `STOP_SNAPSHOT_WRITES_PER_TURN` written snapshots (a file
        each)."""
        rest = list(self._partitions.values())
        rest.reverse()  # taken off the end, in the map's order
        while rest:
            written = 0
            for _ in range(min(SWEEP_SLICE, len(rest))):
                if rest.pop().write_producer_snapshot_at_stop():
                    written += 1
                    if written >= STOP_SNAPSHOT_WRITES_PER_TURN:
                        break
            if rest:
                await yield_turn()
