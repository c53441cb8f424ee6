"""What every role of the replica manager shares: this broker's replicas, their lookups, and
the executor of their partition cores' effects.

Rules (docs/design/replication.md; Kafka's `ReplicaManager`):
- Only the replica manager's roles change the replica map; `DelayedOperations` (the
  purgatories) and `FollowerFetchSteps` (the follower side) read it.
- A request for a partition this broker does not lead is refused with the error Kafka
  answers (`_leader_partition`): UNKNOWN_TOPIC_ID for another topic id, UNKNOWN_TOPIC_OR_PARTITION
  for one the image does not know, else NOT_LEADER_OR_FOLLOWER naming the current leader; an
  answer with NOT_LEADER_OR_FOLLOWER or an epoch error carries that leader (KIP-951).
- Effects (`partition_effects`) are executed in the order the core returned them and decide
  nothing here: a moved HW is mirrored into the log and re-checks every waiter of the
  partition; `WakeWaiters` re-checks the waiters it names; `SendAlterPartition` marks the
  partition for the AlterPartition sender (and for the follower fetches, whose ISR decisions
  read the pending change); `FetchNews` has every fetch session read the partition again;
  `ScheduleWakeup` has the timers step the core again then; `Refuse` raises its error.
  Another effect here is a bug (those of a produce, a DeleteRecords, a collection are their
  callers').

Theory of operation: everything runs on the event loop thread. `_wake` tells the fetch
sessions (dirty-only rounds, `fetch_session`) and the purgatories of the partition's news.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection
from uuid import UUID

from replog.clock import Clock, monotonic_ms, wall_clock_ms
from replog.common import TopicPartitionKey
from replog.errors import (
    FencedLeaderEpochError,
    KafkaError,
    KafkaStorageError,
    NotLeaderOrFollowerError,
    UnknownLeaderEpochError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)
from replog.quorum.metadata.image import ConfigResource, ConfigsImage, MetadataImage
from replog.quorum.metadata.records import ConfigResourceType
from replog.replication.fetch_session import LeaderFetchSession
from replog.replication.leader_state import PartitionReplicationConfig, ReplicaEligibility
from replog.replication.messages import LeaderIdAndEpoch
from replog.replication.partition_core import Effects
from replog.replication.partition_effects import (
    AdvanceHighWatermark,
    FetchNews,
    Refuse,
    ScheduleWakeup,
    SendAlterPartition,
    WakeWaiters,
)
from replog.replication.replication_quota import ReplicationQuota
from replog.server.config.replica_manager_config import ReplicaManagerConfig
from replog.server.data_plane.deferred_syncs import DeferredSyncs
from replog.server.data_plane.delayed_operations import DelayedOperations
from replog.server.data_plane.follower_fetch import FollowerFetchSteps
from replog.server.data_plane.log_summaries import TurnSummary
from replog.server.data_plane.partition import Partition
from replog.server.data_plane.producer_state_loader import PreloadedTable, ProducerExpiry
from replog.server.data_plane.replica_change_queue import FOLLOWER, LEADER, ReplicaChangeQueue
from replog.server.data_plane.replica_counts import LiveReplicaCounts, led_figures
from replog.server.data_plane.weak_members import WeakMembers
from replog.server.metrics.instruments import BrokerCounters
from replog.server.runtime.node_tasks import Spawner
from replog.storage.file_maker_process import FileMakerProcess
from replog.storage.log_manager import LogManager

log = logging.getLogger("replog.server.data_plane.replica_manager")  # every role's lines

# Up to this many writes a round or a batch makes are each synced on their own (a few fsyncs of
# small files, ~1-5 ms each here); above it one `syncfs` syncs them all.
SYNC_EACH_MAX = 8


class ReplicaShell:
    """The replicas of this broker and the executor of their cores' effects (module docstring)."""

    # The purgatories: made by the assembly, whose fetch role re-reads their waiting fetches.
    _delayed: DelayedOperations

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
        self._spawner = tasks  # its background tasks' owner (node_tasks)
        self.config = config
        # Metrics per request and per batch, never per record: a hot path counts nothing more.
        self.counters = counters if counters is not None else BrokerCounters()
        # The metrics summary's replica counts, reported at every change of what they count
        # (`_count_replicas`, `_count_leader`): a scrape reads them without a walk.
        self.replica_counts = LiveReplicaCounts()
        self.broker_id = config.broker_id
        self.log_manager = log_manager
        self._clock = clock
        # Producer-id expiry compares record timestamps (CreateTime, wall-clock ms), which the
        # monotonic `clock` used for lags and timeouts cannot be compared with.
        self._wall_clock = wall_clock
        self.image: MetadataImage = MetadataImage.EMPTY
        self._partitions: dict[TopicPartitionKey, Partition] = {}
        self._replicas_deleted = 0  # in the applier's current round
        self._eligibility = ReplicaEligibility.from_cluster(self.image.cluster)
        # The replication throttles (`replication_quota`), set from the configs of each image.
        window_ms = config.replication_quota_window_size_seconds * 1000
        self.leader_quota = ReplicationQuota(config.replication_quota_window_num, window_ms)
        self.follower_quota = ReplicationQuota(config.replication_quota_window_num, window_ms)
        self._follower = FollowerFetchSteps(
            config,
            self._partitions,
            broker_epoch=broker_epoch,
            on_new_deadline=self._on_new_deadline,
            counters=self.counters,
            quota=self.follower_quota,
        )
        # Producer tables a starting broker loaded before its replicas existed, until the
        # first metadata image's replicas take them (`preload_producer_states`).
        self._preloaded: dict[TopicPartitionKey, PreloadedTable] = {}
        self._isr_dirty: set[TopicPartitionKey] = set()
        # The ReplicaFetch sessions served here, told of every partition's news (dirty-only
        # rounds, `fetch_session`); a session leaves with its call (no reference is left).
        self._fetch_sessions: WeakMembers[LeaderFetchSession] = WeakMembers()
        # `_replication_config`'s answers per topic, for the configs they were read from.
        self._replication_configs_of: ConfigsImage | None = None
        self._replication_configs: dict[str, PartitionReplicationConfig] = {}
        self._broker_resources = (
            ConfigResource(ConfigResourceType.BROKER, ""),
            ConfigResource(ConfigResourceType.BROKER, str(self.broker_id)),
        )
        # Answers about many partitions arrive one partition at a time: one line per turn.
        self._isr_log = TurnSummary(log)
        self._isr_retry_at_ms: dict[TopicPartitionKey, int] = {}
        self._next_isr_check_ms = clock() + self._isr_check_interval_ms
        self._next_producer_expiry_ms = clock() + config.producer_id_expiration_check_interval_ms
        # The periodic walks over every replica, a slice per tick (`SWEEP_SLICE`): the
        # partitions a walk has yet to visit (None: none under way), and the ISR walk's shrinks.
        self._isr_sweep: list[TopicPartitionKey] | None = None
        self._isr_shrunk: list[str] = []
        self._expiry_sweep: list[TopicPartitionKey] | None = None
        self._fetch_sources: list[int] = []
        # One wake per consumer: with a single event shared by the fetcher and the
        # AlterPartition sender, one could clear the other's wake, and an ISR change or a
        # new fetch source could wait for the 1 s idle poll. `isr_wakeup`: IsrChanges are
        # pending (the sender); `fetch_wakeup`: fetch sources changed or a back-off ended
        # (the fetchers).
        self.isr_wakeup = asyncio.Event()
        self.fetch_wakeup = asyncio.Event()
        self._timers_changed = asyncio.Event()
        # When the timer loop wakes next by itself; no time while it is not waiting.
        self._timer_due_ms: int | None = None
        self._timer_task: asyncio.Task[None] | None = None
        self._stopped = False
        # Local changes not applied yet; once `start` ran, a task applies them a round at a
        # time (docs/storage.md, "Creating many replicas"), before that `_apply` does at once.
        self._changes = ReplicaChangeQueue()
        self._applier_task: asyncio.Task[None] | None = None
        # The epoch checkpoints rounds wrote without a sync, synced off the loop while the
        # rounds go on.
        self._syncs = DeferredSyncs(
            lambda unsynced: log_manager.sync_unsynced(unsynced, each_up_to=SYNC_EACH_MAX),
            tasks=tasks,
            on_storage_error=on_storage_error,
        )
        self._applier_wake = asyncio.Event()
        self._applied = asyncio.Event()
        self._on_applied: list[Callable[[MetadataImage, Collection[UUID] | None], None]] = []
        # The topic ids the images since the followers' last call removed (from each delta),
        # or None when an image came without a delta over the previous one (`apply_image`, a
        # snapshot): then only a comparison of the whole images tells.
        self._removed_topic_ids: set[UUID] | None = set()
        self._on_storage_error = on_storage_error
        self._strays_unchecked = False
        self._roles_taken: dict[str, list[str]] = {LEADER: [], FOLLOWER: []}
        # The partitions whose leader state the applier still gives the current image's
        # eligibility and replication config (`_refresh_leaders`), taken from the end.
        self._leaders_to_refresh: list[TopicPartitionKey] = []
        self._refresh_next = True  # whether the applier's next round refreshes leaders
        # The child process that makes a large round's new logs' files (`use_file_maker`),
        # or None: the bulk threads make them.
        self._file_maker: FileMakerProcess | None = None
        self._wire_roles()

    def _wire_roles(self) -> None:
        """The hooks between the roles, which only the assembly (`ReplicaManager`) has: it
        makes `_delayed` here."""

    def _on_new_deadline(self, deadline_ms: int) -> None:
        # Only a deadline before the timer's next wake needs it sooner. Fetches park hundreds
        # of times a second with deadlines max_wait_ms away, and each wake ran a tick that
        # walks every partition (back-offs) for nothing.
        if self._timer_due_ms is None or deadline_ms < self._timer_due_ms:
            self._timers_changed.set()

    @property
    def _isr_check_interval_ms(self) -> int:
        return max(1, self.config.replica_lag_time_ms_max // 2)

    def partition(self, topic: str, partition: int) -> Partition | None:
        """The local replica of topic-partition, if this broker hosts one."""
        return self._partitions.get((topic, partition))

    def partitions(self) -> dict[TopicPartitionKey, Partition]:
        return dict(self._partitions)

    def purgatory_sizes(self) -> dict[str, int]:
        """How many requests wait in the produce and fetch purgatories (for metrics)."""
        return {"produce": len(self._delayed.produce), "fetch": len(self._delayed.fetch)}

    def _current_leader(self, topic: str, partition_id: int) -> LeaderIdAndEpoch | None:
        topic_image = self.image.topics.by_name.get(topic)
        registration = topic_image.partitions.get(partition_id) if topic_image else None
        if registration is None:
            return None
        return LeaderIdAndEpoch(registration.leader, registration.leader_epoch)

    def _leader_partition(
        self, topic: str, partition_id: int, topic_id: UUID | None = None
    ) -> Partition:
        """The partition if this broker leads it; otherwise the error Kafka answers."""
        found = self._partitions.get((topic, partition_id))
        if (
            found is not None
            and found.leader_state is not None
            and (topic_id is None or found.topic_id == topic_id)
        ):
            return found  # each round, for every partition of every session: kept lean
        where = f"{topic}-{partition_id}"
        if found is not None and topic_id is not None and found.topic_id != topic_id:
            raise UnknownTopicIdError(
                f"{where}: topic id {topic_id} is not this broker's {found.topic_id}"
            )
        topic_image = self.image.topics.by_name.get(topic)
        if topic_image is None or partition_id not in topic_image.partitions:
            raise UnknownTopicOrPartitionError(f"{where}: unknown topic-partition")
        if topic_id is not None and topic_image.topic_id != topic_id:
            raise UnknownTopicIdError(f"{where}: topic id {topic_id} is not {topic_image.topic_id}")
        registration = topic_image.partitions[partition_id]
        if registration.leader == self.broker_id and self._changes.hurry((topic, partition_id)):
            # Asked for before its log exists: create it next (replica_change_queue.py).
            self._applier_wake.set()
        raise NotLeaderOrFollowerError(
            f"{where}: broker {self.broker_id} is not the leader (leader is broker "
            f"{registration.leader} at leader epoch {registration.leader_epoch})"
        )

    def _error_leader(
        self, error: KafkaError, topic: str, partition_id: int
    ) -> LeaderIdAndEpoch | None:
        """The current leader to put in an answer with `error` (KIP-951), else None."""
        if isinstance(
            error, NotLeaderOrFollowerError | FencedLeaderEpochError | UnknownLeaderEpochError
        ):
            return self._current_leader(topic, partition_id)
        return None

    def _producer_expiry(self) -> ProducerExpiry:
        return ProducerExpiry(self._wall_clock(), self.config.producer_id_expiration_ms)

    def _count_replicas(self) -> None:
        self.replica_counts.set_partitions(len(self._partitions))

    def _count_leader(self, partition: Partition) -> None:
        """After a change of what `led_figures` reads of `partition` (metadata, an ISR or
        config change): the metrics summary's counts follow."""
        self.replica_counts.set_figures(partition.key, led_figures(partition))

    def _on_high_watermark_moved(self, partition: Partition) -> None:
        partition.mirror_high_watermark()
        self._wake(partition.key)

    def _execute(self, partition: Partition, effects: Effects) -> bool:
        """Do what `partition`'s core decided (`partition_effects`), in order: the effects
        every event may have (a produce's own answer is its caller's). Whether the HW moved."""
        key = partition.key
        moved = False
        for effect in effects:
            kind = type(effect)
            if kind is AdvanceHighWatermark:
                self._on_high_watermark_moved(partition)
                moved = True
            elif kind is WakeWaiters:
                assert isinstance(effect, WakeWaiters)
                self._wake(key, produce=effect.produce, fetch=effect.fetch, delete=effect.delete)
            elif kind is SendAlterPartition:
                self._mark_isr_dirty(key)
            elif kind is FetchNews:
                self._fetch_news(key)
            elif kind is ScheduleWakeup:
                assert isinstance(effect, ScheduleWakeup)
                self._isr_retry_at_ms[key] = effect.at_ms
                self._timers_changed.set()
            elif kind is Refuse:
                assert isinstance(effect, Refuse)
                raise effect.error
            else:
                raise AssertionError(f"{partition.name}: effect {effect!r} out of place")
        return moved

    def _wake(
        self,
        key: TopicPartitionKey,
        *,
        produce: bool = True,
        fetch: bool = True,
        delete: bool = True,
    ) -> None:
        if fetch:
            self._fetch_news(key)
        self._delayed.wake(key, produce=produce, fetch=fetch, delete=delete)

    def _fetch_news(self, key: TopicPartitionKey) -> None:
        """`key`'s answer or its fetches' ISR decisions may differ now: every session reads it
        at its next round (`fetch_session` Rules, dirty-only rounds)."""
        for session in self._fetch_sessions:
            session.mark(key)

    def _mark_isr_dirty(self, key: TopicPartitionKey) -> None:
        self._isr_dirty.add(key)
        self.isr_wakeup.set()
        # The ISR or its pending change moved: a follower's next fetch may expand it.
        self._fetch_news(key)
