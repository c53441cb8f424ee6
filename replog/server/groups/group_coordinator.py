"""GroupCoordinator: a broker's side of consumer groups: it finds a group's coordinator and,
for the groups it coordinates, keeps their committed offsets and runs the classic group
protocol through one pure `ClassicGroupCoordinator` per partition (docs/groups.md, "The broker
shell": loading, the order of group records in the log, answers after the append, timers).

Theory of operation: a group's offsets live in one partition of the internal topic
`__consumer_offsets` (`group_partition`), and the leader of that partition is the group's
coordinator. The coordinator is a metadata publisher installed after the replica manager, so
the replica manager has acted on an image before the coordinator sees it: for each
`__consumer_offsets` partition this broker leads at a new leader epoch it starts a load, and
for each it no longer leads it drops the partition's cache at once. A load reads the
partition's log from its start to its end on a worker thread (the Log is thread-safe; the event
loop goes on serving) and replays it into a fresh `OffsetsCache` and classic groups core; until
it is done the partition answers COORDINATOR_LOAD_IN_PROGRESS. A commit appends one batch of
offset records with acks=all through the replica manager, as the broker itself (internal topics
allowed), and updates the cache only once the append is acknowledged. Removing offsets (a
deleted topic's, expired ones) takes them out of the cache at once and appends their tombstones
with acks=all in a background task that no request waits for (`_tombstone_entries`): record
batches each within the partition's `max.message.bytes`, back to back in produce entries each
within its `segment.bytes`, all in one produce request. The keys of an entry that failed stay
on the partition as pending tombstones, appended again after a backoff (1 s, doubling up to 60
s) and at each retention check, except a key committed again since (back in the cache: the
newer commit must stay); a key with a commit waiting for acks=all stays pending until that
commit is decided. Pending tombstones die with the partition's leadership: a later load that
finds their offsets in the log serves them again, except what the load-time rules below remove
(the offsets of topic-partitions absent then) and what the next expiry removes; so a topic
deleted and re-created with the same partitions before the retry succeeded gets the old
offsets.

Rules:
- FindCoordinator: INVALID_GROUP_ID for an empty group id; when `__consumer_offsets` does not
  exist, the broker asks the controller to create it (`OffsetsTopicCreator`) and answers
  COORDINATOR_NOT_AVAILABLE; when the group's partition has no leader (or the leader has no
  registered listener), COORDINATOR_NOT_AVAILABLE; else the leader's id and first listener.
  The partition count is the existing topic's, as in Kafka.
- OffsetCommit and OffsetFetch, request level: INVALID_GROUP_ID; NOT_COORDINATOR when this
  broker does not lead the group's partition (or its load failed);
  COORDINATOR_LOAD_IN_PROGRESS while it loads. Per partition: `commit_rules`, a partition
  looked up in the broker's newest metadata image (as Kafka's metadata cache: the image this
  coordinator follows comes only once the broker's replicas of it exist). A failed append
  is a request-level error as `commit_rules.append_error` maps it (nothing was committed).
- Two consumers of one group committing from outside it (generation -1, no member, so neither
  has partitions assigned): a commit from a consumer instance for
  partitions another instance committed within Kafka's default session timeout is answered
  with that other committer (`shared_commits`), and each pair is logged once at WARNING
  naming the group, the partitions and both clients (client id, instance, host).
- OffsetFetch answers from the cache: the committed offset, or -1 for a partition without
  one; with no partitions named, every partition the group committed.
- The commit timestamp is the wall clock at the commit; the batch is CreateTime, uncompressed.
- A deleted topic's offsets go (Kafka's coordinator on partition deletion): on each image
  whose topics changed, a topic name whose topic id changed or that vanished since the previous
  image has its offsets removed from every loaded partition, with tombstones, and those of
  commits still waiting for acks=all tombstoned too; a partition still loading remembers the
  names and removes them when its load ends, together with the offsets of every topic-partition
  absent from the image then (a commit is only accepted for an existing partition, so such an
  offset belongs to a deleted topic). A commit acknowledged after its topic was deleted or
  re-created (its topic id changed while it waited) is not put back into the cache.
  A commit accepted for a topic re-created in the broker's newest image (its new id not yet
  in the applied image) is kept, with its tombstone left out, when the applied image then
  drops the name's old id: only the old topic's offsets go (TxnOffsetCommit is not covered).
- OffsetDelete: `offset_deletion` decides (the group must exist, a classic group with members
  be of the consumer protocol type, subscribed topics keep their offsets); the tombstones of
  the others are appended with acks=all before the answer and then replayed into the cache at
  their log offsets (a commit appended before them and acknowledged after changes nothing).
- Offsets retention (KIP-211, groups without members only): every
  `offsets.retention.check.interval.ms` each loaded partition removes, with tombstones, the
  offsets committed `offsets.retention.minutes` or more before the wall clock
  (`offsets_cache.expired`), except those with a commit still waiting for acks=all and those
  of groups with members.
- Commits are fenced by the group's generation, member and instance id
  (`ClassicGroupCoordinator.commit_error`); a group the core does not know takes commits from
  outside any generation only (`commit_rules`).
- TxnOffsetCommit (Kafka's transactional offset commit): the same checks as a commit; then
  the transaction coordinator verifies that the group's partition is in the transaction (v5+
  adds it, transaction version 2; KIP-890, `txn_verification.client_error` for the answer;
  `transaction.partition.verification.enable` false skips it for v4-), and the verification
  must still hold when the answer comes (`txn_verification.still_verified`, Kafka's
  VerificationGuard: a marker that ended the transaction meanwhile makes the commit
  INVALID_TXN_STATE, not a transaction the coordinator does not know); the check and the
  append have no await between them. The
  offsets are appended as one transactional batch in the client producer's id and epoch with
  no sequence (the replica manager checks a coordinator's batch for its epoch only) and, once
  acknowledged, staged (`transactional_offsets`) rather than applied. The transaction's marker
  reaching the partition (`on_markers_written`, after the broker wrote it) applies them on
  COMMIT, each at its record's log offset, and drops them on ABORT. A load replays staged
  offsets and markers from the log, then the markers written while it read (the log's tail,
  read on the event loop, so no marker falls between). OffsetFetch with require_stable answers
  UNSTABLE_OFFSET_COMMIT for a partition with staged offsets.
- Order in the log: a commit waits (one turn of the event loop, never for acks) until the
  tombstones of its partition that were scheduled before it are appended, so a tombstone never
  lands after a commit accepted after the removal (the replica manager appends every entry of a
  produce request, each entry's batches together, before its first await).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
import uuid
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar
from uuid import UUID

from replog.clock import Clock, monotonic_ms, wall_clock_ms
from replog.common.topic_partition import TopicPartitionKey
from replog.coordinator import classic_group_messages as gm
from replog.coordinator import consumer_group_messages as cgm
from replog.coordinator import consumer_group_records as cgr
from replog.coordinator import messages as cm
from replog.coordinator.classic_group import GroupState
from replog.coordinator.classic_group_coordinator import ClassicGroupConfig, ClassicGroupCoordinator
from replog.coordinator.commit_rules import (
    append_error,
    commit_errors,
    group_append_error,
    group_id_problem,
)
from replog.coordinator.consumer_group_coordinator import (
    ConsumerGroupConfig,
    ConsumerGroupCoordinator,
)
from replog.coordinator.consumer_group_messages import CONSUMER_GROUP_TYPE, CONSUMER_PROTOCOL_TYPE
from replog.coordinator.group_partition import partition_for_group
from replog.coordinator.group_records import encode_group_key, encode_group_value
from replog.coordinator.offset_deletion import (
    Subscribed,
    classic_refusal,
    classic_subscribed,
    partition_answers,
)
from replog.coordinator.offsets_cache import (
    CommittedOffset,
    OffsetsCache,
    ReplayStats,
    expired,
    replay_batches,
)
from replog.coordinator.offsets_records import (
    OffsetCommitKey,
    OffsetCommitValue,
    encode_key,
    encode_value,
)
from replog.coordinator.shared_commits import SharedCommits
from replog.coordinator.transactional_offsets import PendingTransactionalOffsets
from replog.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    GroupIdNotFoundError,
    InvalidTxnStateError,
    KafkaError,
    NotCoordinatorError,
    NotEnoughReplicasAfterAppendError,
    RebalanceInProgressError,
    RequestTimedOutError,
    UnknownServerError,
    UnstableOffsetCommitError,
)
from replog.quorum.metadata.delta import MetadataDelta
from replog.quorum.metadata.image import MetadataImage
from replog.quorum.metadata.loader import LoaderManifest
from replog.quorum.metadata.records import ConfigResourceType
from replog.record.builder import BatchBuilder
from replog.replication.messages import (
    ACKS_ALL,
    ProducePartition,
    ProduceRequest,
    TxnPartitionsRequest,
)
from replog.replication.producer_state import ProducerEntry
from replog.replication.txn_verification import (
    client_error,
    operation_for_txn_offset_commit,
    skips_verification,
    still_verified,
)
from replog.server.config.group_coordinator_config import GroupCoordinatorConfig
from replog.server.coordination.internal_partitions import (
    CoordinatorReplicas,
    ShardState,
    TopicCreator,
    coordinating,
    coordinator_of,
    leadership_changes,
)
from replog.server.runtime.node_tasks import Spawner
from replog.server.transactions.txn_verifier import TxnVerifier
from replog.storage.log import Log
from replog.storage.log_config import LogConfig
from replog.topic_names import CONSUMER_OFFSETS_TOPIC

log = logging.getLogger("replog.server.groups.group_coordinator")
T = TypeVar("T")


# What the coordinator needs of the replica manager and the topic's creator.
OffsetsReplicas = CoordinatorReplicas


@dataclass(frozen=True, slots=True)
class GroupSnapshot:
    """One group as a metrics scrape sees it: state, members, committed (topic, partition,
    offset)s. A group with offsets only is Empty, as DescribeGroups shows it."""

    group_id: str
    state: str
    members: int
    committed: tuple[tuple[str, int, int], ...]


@dataclass(frozen=True, slots=True)
class GroupMetrics:
    groups: tuple[GroupSnapshot, ...]
    rebalances: int  # completed rebalances of the groups coordinated here, since the start


@dataclass(eq=False)
class _Shard:
    """One `__consumer_offsets` partition this broker leads, at one leader epoch."""

    partition: int
    topic_id: UUID
    leader_epoch: int
    state: ShardState = ShardState.LOADING
    cache: OffsetsCache = field(default_factory=OffsetsCache)
    task: asyncio.Task[None] | None = None
    failure: str = ""
    # Topics deleted (or re-created) while the partition loads: removed when the load ends.
    deleted_topics: set[str] = field(default_factory=set)
    # Keys of the commits appended and waiting for acks=all.
    in_flight: Counter[OffsetCommitKey] = field(default_factory=Counter)
    # Keys committed for a topic id the applied image does not hold yet (the topic re-created
    # in the newest image), with that id: kept when the applied image drops the name's old id.
    ahead: dict[OffsetCommitKey, UUID] = field(default_factory=dict)
    # TxnOffsetCommit offsets waiting for their transaction's marker.
    pending: PendingTransactionalOffsets = field(default_factory=PendingTransactionalOffsets)
    # Set once the latest tombstones scheduled here are appended; commits wait for it.
    tombstone_gate: asyncio.Event | None = None
    # Keys whose tombstones failed to append, to append again (`_retry_tombstones`), the timer
    # of that retry, and the backoff of the next one.
    pending_tombstones: dict[OffsetCommitKey, None] = field(default_factory=dict)
    retry_timer: asyncio.TimerHandle | None = None
    retry_backoff_ms: int = 0
    # The classic groups of the partition (replayed with the offsets), the JoinGroup and
    # SyncGroup requests waiting for their answer by request id, and the timer that calls the
    # core's `tick` at its next deadline.
    groups: ClassicGroupCoordinator = field(default_factory=ClassicGroupCoordinator)
    # The consumer-protocol (KIP-848) groups of the partition, replayed with the classic ones.
    consumer: ConsumerGroupCoordinator = field(default_factory=ConsumerGroupCoordinator)
    waiting: dict[int, asyncio.Future[Any]] = field(default_factory=dict)
    group_timer: asyncio.TimerHandle | None = None
    group_deadline_ms: int | None = None

    @property
    def name(self) -> str:
        return f"{CONSUMER_OFFSETS_TOPIC}-{self.partition}"


@dataclass
class _LoadedOffsets:
    """What a load replayed from a partition's log, up to `next_offset`."""

    cache: OffsetsCache
    groups: ClassicGroupCoordinator
    consumer: ConsumerGroupCoordinator
    chunk_bytes: int
    next_offset: int
    pending: PendingTransactionalOffsets = field(default_factory=PendingTransactionalOffsets)
    stats: ReplayStats = field(default_factory=ReplayStats)

    def replay(self, plog: Log) -> None:
        """Replay from `next_offset` to the log's end as it is now."""
        offset = self.next_offset
        end = plog.log_end_offset
        while offset < end:
            data = plog.read(offset, self.chunk_bytes, end)
            if not data:
                break
            next_offset = replay_batches(
                self.cache,
                data,
                self.stats,
                f"{plog.name} at offset {offset}",
                self.groups.replay,
                self.consumer.replay,
                self.pending,
            )
            if next_offset <= offset:
                break
            offset = next_offset
        self.next_offset = offset


class GroupCoordinator:
    """The group coordinator of one broker (module docstring). A MetadataPublisher."""

    name = "group-coordinator"
    # The backoff of appending failed tombstones again: doubling from the first to the last.
    tombstone_retry_backoff_ms = (1000, 60_000)

    def __init__(
        self,
        broker_id: int,
        replicas: OffsetsReplicas,
        topic_creator: TopicCreator,
        config: GroupCoordinatorConfig | None = None,
        *,
        tasks: Spawner,
        clock: Clock = monotonic_ms,
        wall_clock: Clock = wall_clock_ms,
        rng: random.Random | None = None,
        txn_verifier: Callable[[], TxnVerifier | None] = lambda: None,
        txn_verification_enabled: Callable[[], bool] = lambda: True,
        metadata_image: Callable[[], MetadataImage] | None = None,
    ) -> None:
        """`rng`: where new member ids come from (None: random UUIDs; a simulation passes
        its seeded one). `txn_verifier`: asks transaction coordinators about a TxnOffsetCommit
        (None: no verification, while the broker has no transaction coordinator);
        `txn_verification_enabled`: `transaction.partition.verification.enable` as it is
        now; `metadata_image`: the broker's newest metadata image, which a commit's partitions
        are looked up in (None: the applied image, `apply_image`'s)."""
        self._spawner = tasks  # its background tasks' owner (node_tasks)
        self._metadata_image = metadata_image
        self._txn_verifier = txn_verifier
        self._txn_verification_enabled = txn_verification_enabled
        self._new_uuid = None if rng is None else functools.partial(_uuid_from, rng)
        self.broker_id = broker_id
        self.config = config if config is not None else GroupCoordinatorConfig()
        self._replicas = replicas
        self._topic_creator = topic_creator
        self._clock = clock
        self._wall_clock = wall_clock
        self._shared_commits = SharedCommits()
        self.image = MetadataImage.EMPTY
        self._shards: dict[int, _Shard] = {}
        self._rebalances_unloaded = 0  # of the cores of partitions no longer led here
        self._stopped = False
        self._retention_task: asyncio.Task[None] | None = None
        # Each tombstone append under way, and the gate it opens once it appended.
        self._tombstone_tasks: dict[asyncio.Task[None], asyncio.Event] = {}
        # The classic groups' core calls under way (`_group_call`), and the last request id.
        self._group_tasks: set[asyncio.Task[Any]] = set()
        self._request_ids = 0

    # --- following leadership -----------------------------------------------------------------

    def on_metadata_update(
        self, delta: MetadataDelta, image: MetadataImage, manifest: LoaderManifest
    ) -> None:
        """MetadataPublisher: load the offsets partitions led here, drop the others."""
        self.apply_image(image)

    def apply_image(
        self, image: MetadataImage, removed_topic_ids: Collection[UUID] | None = None
    ) -> None:
        """Follow the `__consumer_offsets` leaderships of `image` (also for tests), and drop
        the offsets of the topics it no longer holds: among `removed_topic_ids`, the topics
        removed since the previous image (`ReplicaManager.follow_applied_images`), or, when
        None, among every topic of the previous image."""
        previous, self.image = self.image, image
        if self._stopped:
            return
        if image.configs is not previous.configs:
            # A group's own configs change in an image that may change no topic.
            group_configs = _group_configs(image)
            for shard in self._shards.values():
                shard.consumer.set_group_configs(group_configs)
        if image.topics is previous.topics:
            return
        self._follow(image)
        if self._shards:
            # Only for shards this broker leads: the walk costs every topic of the image, and
            # it comes with each image whose topics changed, an ISR change included (a
            # shard loaded later reads the image it loads under, `_run_load`).
            topics, racks = _topic_sizes(image), _replica_racks(image)
            for shard in self._shards.values():
                shard.consumer.set_topics(topics, racks)
        deleted = _topics_deleted(previous, image, removed_topic_ids)
        if deleted:
            self._remove_deleted_topics(deleted)
        self._forget_caught_up(image)

    def _follow(self, image: MetadataImage) -> None:
        dropped, loaded = leadership_changes(
            image, CONSUMER_OFFSETS_TOPIC, self.broker_id, self._shards
        )
        for shard in dropped:
            self._unload(shard)
        for partition_id, topic_id, leader_epoch in loaded:
            self._load(_Shard(partition_id, topic_id, leader_epoch))

    def metrics_snapshot(self) -> GroupMetrics:
        """The groups this broker coordinates, for a metrics scrape on another thread: copies
        made in one call each (atomic under the GIL); a scrape that races a change raises
        RuntimeError, which the scrape retries."""
        groups: list[GroupSnapshot] = []
        rebalances = self._rebalances_unloaded
        for shard in tuple(self._shards.values()):
            rebalances += shard.groups.rebalances + shard.consumer.rebalances
            if shard.state is not ShardState.ACTIVE:
                continue
            classic = dict(shard.groups.groups)
            consumer = dict(shard.consumer.groups)
            for group_id in sorted(set(classic) | set(consumer) | set(shard.cache.groups())):
                group = classic.get(group_id) or consumer.get(group_id)
                committed = tuple(
                    (topic, partition, value.offset)
                    for (topic, partition), value in shard.cache.committed(group_id).items()
                    if value is not None
                )
                groups.append(
                    GroupSnapshot(
                        group_id,
                        GroupState.EMPTY.value if group is None else group.state.value,
                        0 if group is None else len(group.members),
                        committed,
                    )
                )
        return GroupMetrics(tuple(groups), rebalances)

    def _load(self, shard: _Shard) -> None:
        self._shards[shard.partition] = shard
        log.info(
            "broker %d: loading the group offsets of %s (leader epoch %d)",
            self.broker_id,
            shard.name,
            shard.leader_epoch,
        )
        shard.task = self._spawner.spawn(
            self._run_load(shard), name=f"loading the group offsets of {shard.name}"
        )

    def _unload(self, shard: _Shard) -> None:
        del self._shards[shard.partition]
        self._rebalances_unloaded += shard.groups.rebalances + shard.consumer.rebalances
        if shard.task is not None:
            shard.task.cancel()
        if shard.retry_timer is not None:
            shard.retry_timer.cancel()
            shard.retry_timer = None
        self._unload_groups(shard)
        log.info(
            "broker %d: no longer the coordinator of the groups of %s (%d committed offsets "
            "dropped)",
            self.broker_id,
            shard.name,
            len(shard.cache),
        )

    async def _run_load(self, shard: _Shard) -> None:
        started_ms = self._clock()
        try:
            partition = self._replicas.partition(CONSUMER_OFFSETS_TOPIC, shard.partition)
            if partition is None or not partition.is_leader or partition.topic_id != shard.topic_id:
                raise NotCoordinatorError(
                    f"{shard.name}: the replica manager has no leader replica of it"
                )
            loaded = await asyncio.to_thread(
                self._read_offsets,
                partition.log,
                self.config.offsets_load_buffer_size,
                self.config.classic,
                self.config.consumer,
                self._wall_clock,
                self._new_uuid,
            )
            # The markers written while the worker thread read (nothing else is appended to a
            # loading partition), read here so that none falls between the load and
            # `on_markers_written`.
            loaded.replay(partition.log)
            loaded.cache.loaded()
        except asyncio.CancelledError:
            raise
        except Exception as error:  # a failed load answers NOT_COORDINATOR, never crashes
            if self._shards.get(shard.partition) is shard:
                shard.state = ShardState.FAILED
                shard.failure = f"{type(error).__name__}: {error}"
                log.warning(
                    "broker %d: loading the group offsets of %s failed: %s",
                    self.broker_id,
                    shard.name,
                    shard.failure,
                )
            return
        if self._shards.get(shard.partition) is not shard:
            return  # leadership moved on while the worker thread read
        cache, groups, consumer, stats = loaded.cache, loaded.groups, loaded.consumer, loaded.stats
        shard.cache = cache
        shard.groups = groups
        shard.consumer = consumer
        shard.pending = loaded.pending
        consumer.set_topics(_topic_sizes(self.image), _replica_racks(self.image))
        consumer.set_group_configs(_group_configs(self.image))
        groups.loaded(self._clock())  # every member's session starts now
        consumer.loaded(self._clock())
        self._reschedule(shard)
        deleted, shard.deleted_topics = shard.deleted_topics, set()
        # No commit waits for acks here: a loading partition accepts none.
        removed = cache.remove(
            lambda key, _entry: (
                key.topic in deleted or not self._partition_exists(key.topic, key.partition)
            )
        )
        self._tombstone(shard, removed, "of deleted topics")
        shard.state = ShardState.ACTIVE
        if stats.skipped:
            log.warning(
                "broker %d: %s: skipped %d records while loading: %s",
                self.broker_id,
                shard.name,
                stats.skipped,
                "; ".join(stats.reasons),
            )
        log.info(
            "broker %d: loaded %s: %d committed offsets of %d groups and %d member groups "
            "from %d records in %d ms",
            self.broker_id,
            shard.name,
            len(cache),
            len(cache.groups()),
            len(groups.groups) + len(consumer.groups),
            stats.records,
            self._clock() - started_ms,
        )

    @staticmethod
    def _read_offsets(
        plog: Log,
        chunk_bytes: int,
        classic: ClassicGroupConfig,
        consumer: ConsumerGroupConfig,
        wall_clock: Clock,
        new_uuid: Callable[[], str] | None,
    ) -> _LoadedOffsets:
        """Replay the log from its start to its end (on a worker thread): the committed
        offsets, both protocols' group records and the staged transactional offsets."""
        groups, consumer_groups = _group_cores(classic, consumer, wall_clock, new_uuid)
        loaded = _LoadedOffsets(
            OffsetsCache(), groups, consumer_groups, chunk_bytes, plog.log_start_offset
        )
        loaded.replay(plog)
        return loaded

    def state_of(self, partition: int) -> ShardState | None:
        """The state of an offsets partition led here (None: not led here); for tests."""
        shard = self._shards.get(partition)
        return None if shard is None else shard.state

    async def wait_loaded(self) -> None:
        """Until every load under way ended (tests)."""
        tasks = [s.task for s in self._shards.values() if s.task is not None]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    async def wait_tombstones(self) -> None:
        """Until every tombstone append under way ended (tests)."""
        while self._tombstone_tasks:
            await asyncio.gather(*self._tombstone_tasks, return_exceptions=True)

    def start(self) -> None:
        """Start the offsets retention task (on the event loop, with the data plane)."""
        if self._retention_task is None and not self._stopped:
            self._retention_task = self._spawner.spawn(
                self._run_retention(), name="the offsets retention"
            )

    async def stop(self) -> None:
        """Stop following images and the retention task; every tombstone append scheduled
        appends first (one turn of the event loop), and only its wait for acks is cancelled."""
        self._stopped = True
        task, self._retention_task = self._retention_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for shard in list(self._shards.values()):
            self._unload(shard)
        for group_task in list(self._group_tasks):
            group_task.cancel()
        while self._tombstone_tasks:
            task, gate = next(iter(self._tombstone_tasks.items()))
            await gate.wait()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            self._tombstone_tasks.pop(task, None)
        await self._topic_creator.stop()

    # --- removing offsets: deleted topics, retention -----------------------------------------

    def _remove_deleted_topics(self, deleted: Mapping[str, UUID]) -> None:
        """Remove the offsets of the names whose topic ids `deleted` removed, but not those
        committed for a newer id of the name (`_Shard.ahead`)."""
        for shard in list(self._shards.values()):
            if shard.state is ShardState.LOADING:
                shard.deleted_topics |= deleted.keys()
            elif shard.state is ShardState.ACTIVE:
                self._remove_from(shard, deleted)

    def _remove_from(self, shard: _Shard, deleted: Mapping[str, UUID]) -> None:
        def newer(key: OffsetCommitKey) -> bool:
            ahead = shard.ahead.get(key)
            return ahead is not None and ahead != deleted[key.topic]

        topics = set(deleted)
        mixed = {k.topic for k in shard.ahead if k.topic in topics}
        removed = shard.cache.remove_topics(topics - mixed)
        if mixed:
            removed += shard.cache.remove(lambda key, _: key.topic in mixed and not newer(key))
        # Tombstoned too: the keys of commits of those topics still waiting for acks=all,
        # whose records may already be in the log.
        gone = set(removed)
        waiting = sorted(
            (k for k in shard.in_flight if k.topic in topics and k not in gone and not newer(k)),
            key=lambda k: (k.group, k.topic, k.partition),
        )
        self._tombstone(shard, removed + waiting, "of deleted topics")

    def _forget_caught_up(self, image: MetadataImage) -> None:
        """Drop the `_Shard.ahead` keys whose topic id the applied `image` holds, or the newest
        image no longer holds under their name: nothing lags for them any more."""
        applied = image.topics.by_id
        newest = self._newest_image().topics.by_name
        for shard in self._shards.values():
            if shard.ahead:
                shard.ahead = {
                    key: topic_id
                    for key, topic_id in shard.ahead.items()
                    if topic_id not in applied
                    and (topic := newest.get(key.topic)) is not None
                    and topic.topic_id == topic_id
                }

    def expire_offsets(self) -> int:
        """Remove, with tombstones, every loaded partition's expired offsets (module docstring);
        how many. The retention task's tick, called by tests directly."""
        now_ms = self._wall_clock()
        shards = [s for s in self._shards.values() if s.state is ShardState.ACTIVE]
        expired_count = 0
        for shard in shards:
            expired_count += self._expire(shard, now_ms)
            self._retry_tombstones(shard)
        return expired_count

    def _expire(self, shard: _Shard, now_ms: int) -> int:
        retention_ms = self.config.offsets_retention_ms

        def expiring(key: OffsetCommitKey, entry: CommittedOffset) -> bool:
            return (
                key not in shard.in_flight
                and expired(entry, now_ms, retention_ms)
                and not self._has_members(shard, key.group)
            )

        keys = shard.cache.remove(expiring)
        self._tombstone(shard, keys, "expired")
        return len(keys)

    async def _run_retention(self) -> None:
        interval_s = self.config.offsets_retention_check_interval_ms / 1000
        while not self._stopped:
            await asyncio.sleep(interval_s)
            try:
                self.expire_offsets()
            except Exception:  # a failing check must not end retention for good
                log.exception("broker %d: expiring committed offsets failed", self.broker_id)

    def _retry_tombstones(self, shard: _Shard) -> None:
        """Append the pending tombstones of `shard` again (module docstring): not those of keys
        committed again since; those of keys with a commit waiting for acks=all stay pending."""
        if shard.retry_timer is not None:
            shard.retry_timer.cancel()
            shard.retry_timer = None
        if (
            not shard.pending_tombstones
            or self._stopped
            or self._shards.get(shard.partition) is not shard
            or shard.state is not ShardState.ACTIVE
        ):
            return
        keys: list[OffsetCommitKey] = []
        waiting: dict[OffsetCommitKey, None] = {}
        for key in shard.pending_tombstones:
            if key in shard.in_flight:
                waiting[key] = None
            elif not shard.cache.has(key):
                keys.append(key)
        shard.pending_tombstones = waiting
        self._tombstone(shard, keys, "whose tombstones failed before")
        if waiting:
            self._schedule_retry(shard)

    def _schedule_retry(self, shard: _Shard) -> None:
        """Retry the pending tombstones of `shard` after its backoff, unless a retry is already
        scheduled or the shard is gone."""
        if shard.retry_timer is not None or self._stopped:
            return
        if self._shards.get(shard.partition) is not shard:
            return
        first_ms, last_ms = self.tombstone_retry_backoff_ms
        delay_ms = max(first_ms, shard.retry_backoff_ms)
        shard.retry_backoff_ms = min(2 * delay_ms, last_ms)
        shard.retry_timer = asyncio.get_running_loop().call_later(
            delay_ms / 1000, self._retry_tombstones, shard
        )

    def _tombstone(self, shard: _Shard, keys: Sequence[OffsetCommitKey], what: str) -> None:
        """Append tombstones of `keys` in the background; until they are appended the
        partition's commits wait (module docstring, order in the log)."""
        if not keys:
            return
        log.info(
            "broker %d: %s: tombstoning %d committed offsets %s",
            self.broker_id,
            shard.name,
            len(keys),
            what,
        )
        gate = shard.tombstone_gate = asyncio.Event()
        task = self._spawner.spawn(
            self._append_tombstones(shard, keys, what, gate),
            name=f"appending tombstones to {shard.name}",
        )
        self._tombstone_tasks[task] = gate

        def done(finished: asyncio.Task[None]) -> None:
            self._tombstone_tasks.pop(finished, None)
            _open(shard, gate)  # also when cancelled before it appended

        task.add_done_callback(done)

    async def _append_tombstones(
        self, shard: _Shard, keys: Sequence[OffsetCommitKey], what: str, gate: asyncio.Event
    ) -> None:
        # The waiting commits resume after this step, and it appends before its first await.
        _open(shard, gate)
        entries: list[tuple[bytes, list[OffsetCommitKey]]] = [(b"", list(keys))]
        try:
            entries = self._tombstone_entries(shard, keys)
            results = await self._produce(
                shard, [records for records, _ in entries], self.config.offsets_commit_timeout_ms
            )
        except asyncio.CancelledError:
            raise
        except Exception as error:  # logged, never raised: no request waits for it
            results = [(-1, UnknownServerError(f"{type(error).__name__}: {error}"))] * len(entries)
        failed: list[OffsetCommitKey] = []
        failure: KafkaError | None = None
        for (_, entry_keys), (_, entry_failure) in zip(entries, results, strict=True):
            if entry_failure is not None:
                failed.extend(entry_keys)
                failure = failure or entry_failure
        if failure is None:
            shard.retry_backoff_ms = 0
            return
        shard.pending_tombstones.update(dict.fromkeys(failed))
        self._schedule_retry(shard)
        log.warning(
            "broker %d: %s: appending the tombstones of %d of %d committed offsets %s failed "
            "(pending: appended again after a backoff and at each retention check, unless "
            "committed again): %s: %s",
            self.broker_id,
            shard.name,
            len(failed),
            len(keys),
            what,
            failure.error_name,
            failure,
        )

    def _tombstone_entries(
        self, shard: _Shard, keys: Sequence[OffsetCommitKey]
    ) -> list[tuple[bytes, list[OffsetCommitKey]]]:
        """The tombstones of `keys` as produce entries within the partition's log limits."""
        partition = self._replicas.partition(CONSUMER_OFFSETS_TOPIC, shard.partition)
        config = partition.log.config if partition is not None else LogConfig()
        return _tombstone_entries(
            keys,
            self._wall_clock(),
            min(config.max_message_bytes, config.segment_bytes),
            config.segment_bytes,
        )

    # --- classic groups -----------------------------------------------------------------------

    async def join_group(self, request: gm.JoinGroupRequest) -> gm.JoinGroupResponse:
        """A JoinGroup: answered once the group's join phase ends (or at once). A join that
        starts a rebalance is logged at INFO with the member's reason, as Kafka's coordinator
        logs it."""

        def join(groups: ClassicGroupCoordinator, request_id: int, now_ms: int) -> gm.GroupResult:
            before = groups.groups.get(request.group_id)
            state, generation = (None, 0) if before is None else (before.state, before.generation)
            result = groups.join(request, request_id, now_ms)
            after = groups.groups.get(request.group_id)
            if (
                after is not None
                and after.state is GroupState.PREPARING_REBALANCE
                and state is not GroupState.PREPARING_REBALANCE
            ):
                log.info(
                    "broker %d: preparing to rebalance group '%s' with old generation %d: "
                    "member %s joins; client reason: %s",
                    self.broker_id,
                    request.group_id,
                    generation,
                    request.member_id or "(new)",
                    request.reason or "not provided",
                )
            return result

        return await self._answered_later(
            request.group_id, join, lambda error: gm.JoinGroupResponse(0, error, request.member_id)
        )

    async def sync_group(self, request: gm.SyncGroupRequest) -> gm.SyncGroupResponse:
        """A SyncGroup: answered once the leader's assignment is written (or at once)."""
        return await self._answered_later(
            request.group_id,
            lambda groups, request_id, now_ms: groups.sync(request, request_id, now_ms),
            lambda error: gm.SyncGroupResponse(0, error),
        )

    async def _answered_later(
        self,
        group_id: str,
        call: Callable[[ClassicGroupCoordinator, int, int], gm.GroupResult],
        failed: Callable[[KafkaError], T],
    ) -> T:
        """A request whose answer the core gives by request id, now or after other members
        act (JoinGroup, SyncGroup); `failed` builds the answer to an error."""
        shard, error = self._coordinating(group_id)
        if error is not None:
            return failed(error)
        assert shard is not None
        self._request_ids += 1
        request_id = self._request_ids
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        shard.waiting[request_id] = future
        try:
            await self._group_call(
                shard, lambda: (None, call(shard.groups, request_id, self._clock()))
            )
            return await future
        except KafkaError as failure:
            return failed(failure)
        finally:
            shard.waiting.pop(request_id, None)

    def heartbeat(self, request: gm.HeartbeatRequest) -> KafkaError | None:
        """A Heartbeat: None, or the error to answer (it writes nothing)."""
        shard, error = self._coordinating(request.group_id)
        if error is not None:
            return error
        assert shard is not None
        error = shard.groups.heartbeat(request, self._clock())
        self._reschedule(shard)
        return error

    async def leave_group(self, request: gm.LeaveGroupRequest) -> gm.LeaveGroupResponse:
        shard, error = self._coordinating(request.group_id)
        if error is not None:
            return gm.LeaveGroupResponse(error)
        assert shard is not None
        try:
            answer = await self._group_call(
                shard, lambda: shard.groups.leave(request, self._clock())
            )
        except KafkaError as failure:
            return gm.LeaveGroupResponse(failure)
        # Each member that left, with its reason, as Kafka's coordinator logs it.
        for who, left in zip(request.members, answer.members, strict=False):
            if answer.error is None and left.error is None:
                log.info(
                    "broker %d: member %s has left group '%s' through an explicit LeaveGroup "
                    "request; client reason: %s",
                    self.broker_id,
                    who.member_id or who.group_instance_id,
                    request.group_id,
                    who.reason or "not provided",
                )
        return answer

    def describe_groups(self, group_ids: Iterable[str]) -> list[gm.DescribedGroup]:
        """Each group's state and members; a group with committed offsets and no members is
        Empty (Kafka keeps such a group), one with neither Dead."""
        described: list[gm.DescribedGroup] = []
        for group_id in group_ids:
            shard, error = self._coordinating(group_id)
            if error is not None or shard is None:
                described.append(gm.DescribedGroup(group_id, error, ""))
                continue
            if group_id in shard.consumer.groups:
                # Not a classic group: Dead, as Kafka's DescribeGroups answers (GROUP_ID_NOT_FOUND
                # from v6); ConsumerGroupDescribe describes it.
                described.append(gm.DescribedGroup(group_id, None, GroupState.DEAD.value))
                continue
            (group,) = shard.groups.describe([group_id])
            if group.state == GroupState.DEAD.value and shard.cache.committed(group_id):
                group = replace(group, state=GroupState.EMPTY.value)
            described.append(group)
        return described

    def list_groups(
        self, states: Iterable[str] = ()
    ) -> tuple[KafkaError | None, list[gm.ListedGroup]]:
        """The groups of every partition coordinated here (those with committed offsets only
        as Empty), only those in `states` when given; COORDINATOR_LOAD_IN_PROGRESS with what is
        listed while a partition loads."""
        wanted = {state.lower() for state in states}
        listed: list[gm.ListedGroup] = []
        error: KafkaError | None = None
        for shard in self._shards.values():
            if shard.state is ShardState.LOADING:
                error = CoordinatorLoadInProgressError(
                    f"broker {self.broker_id} is still loading the groups of {shard.name}"
                )
            if shard.state is not ShardState.ACTIVE:
                continue
            listed += shard.groups.list_groups(wanted)
            listed += [
                gm.ListedGroup(group_id, CONSUMER_PROTOCOL_TYPE, state, CONSUMER_GROUP_TYPE)
                for group_id, state in shard.consumer.list_groups(wanted)
            ]
            if not wanted or GroupState.EMPTY.value.lower() in wanted:
                listed += [
                    gm.ListedGroup(group_id, "", GroupState.EMPTY.value)
                    for group_id in shard.cache.groups()
                    if group_id not in shard.groups.groups and group_id not in shard.consumer.groups
                ]
        return error, sorted(listed, key=lambda group: group.group_id)

    async def delete_groups(self, group_ids: Iterable[str]) -> list[tuple[str, KafkaError | None]]:
        """Delete Empty groups and their committed offsets (tombstones of both); a group with
        offsets only is deleted too, one with neither is GROUP_ID_NOT_FOUND."""
        answers: list[tuple[str, KafkaError | None]] = []
        for group_id in group_ids:
            shard, error = self._coordinating(group_id)
            if error is None and shard is not None:
                try:
                    error = await self._group_call(
                        shard, functools.partial(self._delete_group, shard, group_id)
                    )
                except KafkaError as failure:
                    error = failure
            answers.append((group_id, error))
        return answers

    def _delete_group(
        self, shard: _Shard, group_id: str
    ) -> tuple[KafkaError | None, gm.GroupResult]:
        has_offsets = bool(shard.cache.committed(group_id))
        if group_id in shard.consumer.groups:
            error, records = shard.consumer.delete(group_id)
            result = gm.GroupResult(records=records)
        else:
            ((_, error),), result = shard.groups.delete([group_id], self._clock())
        if isinstance(error, GroupIdNotFoundError) and has_offsets:
            error = None
        if error is None:
            offsets = shard.cache.remove(lambda key, _entry: key.group == group_id)
            self._tombstone(shard, offsets, f"of deleted group {group_id!r}")
        return error, result

    # --- consumer-protocol groups (KIP-848) -------------------------------------------------

    async def consumer_group_heartbeat(
        self, request: cgm.ConsumerGroupHeartbeatRequest
    ) -> cgm.ConsumerGroupHeartbeatResponse:
        """A ConsumerGroupHeartbeat: answered once its records are appended."""
        shard, error = self._coordinating(request.group_id)
        if error is not None:
            return cgm.ConsumerGroupHeartbeatResponse(error)
        assert shard is not None

        def call() -> tuple[cgm.ConsumerGroupHeartbeatResponse, gm.GroupResult]:
            answer, records = shard.consumer.heartbeat(request, self._clock())
            # A converted classic group's waiting requests are answered after the records.
            result = shard.consumer.take_classic_answers()
            result.records = list(records)
            return answer, result

        try:
            return await self._group_call(shard, call)
        except KafkaError as failure:
            return cgm.ConsumerGroupHeartbeatResponse(failure)

    def consumer_group_describe(self, group_ids: Iterable[str]) -> list[cgm.DescribedConsumerGroup]:
        described: list[cgm.DescribedConsumerGroup] = []
        for group_id in group_ids:
            shard, error = self._coordinating(group_id)
            if error is not None or shard is None:
                described.append(cgm.DescribedConsumerGroup(group_id, error))
            else:
                described += shard.consumer.describe([group_id])
        return described

    async def _group_call(self, shard: _Shard, call: Callable[[], tuple[T, gm.GroupResult]]) -> T:
        """Run `call` on the partition's groups core in a task of its own, and wait for it.

        Every call of the core and the append of its records happen in one step of such a
        task (the replica manager appends before its first await), and the tasks run in the
        order they were created: records land in the log in the order the core wrote them. The
        task is shielded: a request whose client went away still has its records appended and
        the other members answered."""
        task = asyncio.get_running_loop().create_task(self._run_group_call(shard, call))
        self._group_tasks.add(task)
        task.add_done_callback(_group_task_done)
        task.add_done_callback(self._group_tasks.discard)
        return await asyncio.shield(task)

    async def _run_group_call(
        self, shard: _Shard, call: Callable[[], tuple[T, gm.GroupResult]]
    ) -> T:
        if self._shards.get(shard.partition) is not shard or shard.state is not ShardState.ACTIVE:
            raise NotCoordinatorError(
                f"broker {self.broker_id} no longer coordinates the groups of {shard.name}"
            )
        answer, result = call()
        failure = await self._apply(shard, result)
        if failure is not None and isinstance(answer, cgm.ConsumerGroupHeartbeatResponse):
            # Its records are not written (and were undone): the append's error.
            return replace(answer, error=failure)
        return answer

    async def _apply(self, shard: _Shard, result: gm.GroupResult) -> KafkaError | None:
        """Append the records of `result`, then answer the requests it answers (Kafka answers
        after the append; a failed append answers them with its error); re-arm the timer. A
        request the core superseded (a newer one of the same member) is answered
        REBALANCE_IN_PROGRESS, which every client retries, so that it does not wait forever."""
        self._reschedule(shard)
        for request_id in result.superseded:
            future = shard.waiting.pop(request_id, None)
            if future is not None and not future.done():
                future.set_exception(
                    RebalanceInProgressError(
                        "a newer request of the same member replaced this one: rejoin"
                    )
                )
        failure: KafkaError | None = None
        if result.records:
            failure, in_log = await self._append_group_records(shard, result.records)
            if failure is None or in_log:
                # In the log (a timed-out batch stays there and commits, or leaves with the
                # leadership and the shard): consumer groups keep what it stored, as Kafka's
                # runtime reverts only a batch its log refused.
                shard.consumer.appended(result.records)
            if failure is None:
                shard.groups.appended(result.records)
            elif self._shards.get(shard.partition) is shard and shard.state is ShardState.ACTIVE:
                # What the records stored is undone (classic groups on any failure, as Kafka's
                # append callbacks do; consumer groups when the log refused them); the
                # requests they answer get the append's error.
                now_ms = self._clock()
                undone = shard.groups.append_failed(result.records, now_ms)
                if not in_log:
                    shard.consumer.append_failed(result.records, now_ms)
                self._answer(shard, undone, None)
                self._reschedule(shard)
        self._answer(shard, result, failure)
        return failure

    def _answer(self, shard: _Shard, result: gm.GroupResult, failure: KafkaError | None) -> None:
        answers: list[gm.JoinGroupResponse | gm.SyncGroupResponse] = [
            *result.joins,
            *result.syncs,
        ]
        for answer in answers:
            future = shard.waiting.pop(answer.request_id, None)
            if future is not None and not future.done():
                future.set_result(answer if failure is None else replace(answer, error=failure))

    async def _append_group_records(
        self, shard: _Shard, records: Sequence[gm.GroupRecord | cgr.ConsumerGroupRecord]
    ) -> tuple[KafkaError | None, bool]:
        """Append group records with acks=all: None, or the error the waiting requests get;
        and whether a failed batch is in the log all the same (the replicas did not
        acknowledge it in time: REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS_AFTER_APPEND)."""
        now_ms = self._wall_clock()
        batch = BatchBuilder()
        for record in records:
            if isinstance(record, gm.GroupRecord):
                key = encode_group_key(record.key)
                value = None if record.value is None else encode_group_value(record.value)
            else:
                key = cgr.encode_consumer_group_key(record.key)
                value = (
                    None if record.value is None else cgr.encode_consumer_group_value(record.value)
                )
            batch.append(now_ms, key, value)
        ((_, failure),) = await self._produce(
            shard, [batch.build()], self.config.offsets_commit_timeout_ms
        )
        if failure is None:
            return None, False
        groups = sorted({record.key.group for record in records})
        log.warning(
            "broker %d: %s: appending the records of groups %s failed: %s: %s",
            self.broker_id,
            shard.name,
            groups,
            failure.error_name,
            failure,
        )
        in_log = isinstance(failure, RequestTimedOutError | NotEnoughReplicasAfterAppendError)
        return group_append_error(failure, f"groups {groups} in {shard.name}"), in_log

    def _reschedule(self, shard: _Shard) -> None:
        """Arm the partition's timer for the core's next deadline."""
        deadlines = [shard.groups.next_deadline_ms(), shard.consumer.next_deadline_ms()]
        deadline = min((d for d in deadlines if d is not None), default=None)
        if deadline == shard.group_deadline_ms and shard.group_timer is not None:
            return
        if shard.group_timer is not None:
            shard.group_timer.cancel()
            shard.group_timer = None
        shard.group_deadline_ms = deadline
        if deadline is None or self._stopped or self._shards.get(shard.partition) is not shard:
            return
        delay_s = max(0, deadline - self._clock()) / 1000
        shard.group_timer = asyncio.get_running_loop().call_later(
            delay_s, self._fire_group_timer, shard
        )

    def _fire_group_timer(self, shard: _Shard) -> None:
        shard.group_timer = None
        shard.group_deadline_ms = None
        if self._shards.get(shard.partition) is not shard or shard.state is not ShardState.ACTIVE:
            return
        task = self._spawner.spawn(
            self._tick_groups(shard), name=f"the group timers of {shard.name}"
        )
        self._group_tasks.add(task)
        task.add_done_callback(self._group_tasks.discard)

    async def _tick_groups(self, shard: _Shard) -> None:
        """The core's timers of `shard`'s groups, as a group call that nobody awaits: a Kafka
        error (the partition moved on) has no one to answer; any other is a bug, which stops
        the node (`node_tasks`)."""
        with contextlib.suppress(KafkaError):
            await self._run_group_call(shard, functools.partial(self._tick_cores, shard))

    def _tick_cores(self, shard: _Shard) -> tuple[None, gm.GroupResult]:
        now_ms = self._clock()
        result = shard.groups.tick(now_ms)
        result.records += shard.consumer.tick(now_ms)
        return None, result

    def _unload_groups(self, shard: _Shard) -> None:
        """The partition is no longer led here: its timer stops, and every waiting JoinGroup
        and SyncGroup is answered NOT_COORDINATOR (the core's `unload`)."""
        if shard.group_timer is not None:
            shard.group_timer.cancel()
            shard.group_timer = None
        shard.group_deadline_ms = None
        self._answer(shard, shard.groups.unload(), None)
        shard.consumer.unload()
        for future in shard.waiting.values():
            if not future.done():
                future.set_exception(
                    NotCoordinatorError(
                        f"broker {self.broker_id} no longer coordinates the groups of {shard.name}"
                    )
                )
        shard.waiting.clear()

    def _has_members(self, shard: _Shard, group_id: str) -> bool:
        group = shard.groups.groups.get(group_id) or shard.consumer.groups.get(group_id)
        return group is not None and bool(group.members)

    # --- FindCoordinator ----------------------------------------------------------------------

    def find_coordinator(
        self, group_id: str, listener_name: str | None = None
    ) -> cm.FindCoordinatorResponse:
        """The coordinator of `group_id`: its endpoint of `listener_name` (a Kafka client's
        listener), or its first one."""
        problem = group_id_problem(group_id)
        if problem is not None:
            return cm.FindCoordinatorResponse(problem)
        image = self.image
        topic = image.topics.by_name.get(CONSUMER_OFFSETS_TOPIC)
        if topic is None or not topic.partitions:
            self._topic_creator.request()
            failure = self._topic_creator.last_failure
            cause = (
                ""
                if failure is None
                else f" (the last attempt failed: {failure.error_name}: {failure})"
            )
            return cm.FindCoordinatorResponse(
                CoordinatorNotAvailableError(
                    f"group {group_id!r}: {CONSUMER_OFFSETS_TOPIC} does not exist yet; broker "
                    f"{self.broker_id} asked the controller to create it{cause}"
                )
            )
        partition_id = partition_for_group(group_id, len(topic.partitions))
        return coordinator_of(image, topic, partition_id, listener_name, f"group {group_id!r}")

    # --- OffsetCommit -------------------------------------------------------------------------

    async def offset_commit(
        self, request: cm.OffsetCommitRequest, *, timeout_ms: int | None = None
    ) -> cm.OffsetCommitResponse:
        """Commit `request`'s offsets; `timeout_ms` bounds the wait for acks=all (at most
        `offsets.commit.timeout.ms`)."""
        group_id = request.group_id
        found = await self._committing(request)
        if isinstance(found, KafkaError):
            return cm.OffsetCommitResponse(found)
        shard, refused, accepted = found
        shared: tuple[cm.SharedCommit, ...] = ()
        if request.generation_id < 0 and not request.member_id:
            # Members of a group split its partitions: only commits from outside it can clash.
            shared = self._note_committer(request, accepted)
        if accepted:
            now_ms = self._wall_clock()
            records = _offset_records(group_id, accepted, now_ms)
            # The topic ids the commit was accepted for (each topic exists: commit_errors).
            newest = self._newest_image().topics.by_name
            topic_ids = {e.topic: newest[e.topic].topic_id for e in accepted}
            commit_timeout_ms = self.config.offsets_commit_timeout_ms
            if timeout_ms is not None:
                commit_timeout_ms = max(0, min(commit_timeout_ms, timeout_ms))
            batch = BatchBuilder()
            for key, value in records:
                batch.append(now_ms, encode_key(key), encode_value(value))
            keys = [key for key, _ in records]
            applied = self.image.topics.by_name
            for key in keys:
                topic = applied.get(key.topic)
                if topic is None or topic.topic_id != topic_ids[key.topic]:
                    shard.ahead[key] = topic_ids[key.topic]
            shard.in_flight.update(keys)
            try:
                ((base_offset, failure),) = await self._produce(
                    shard, [batch.build()], commit_timeout_ms
                )
            finally:
                shard.in_flight -= Counter(keys)  # drops the keys whose count reaches 0
            if failure is not None:
                for key in keys:  # nothing committed: nothing to keep from a removal
                    if shard.ahead.get(key) == topic_ids[key.topic]:
                        del shard.ahead[key]
                return cm.OffsetCommitResponse(
                    append_error(failure, f"group {group_id!r} in {shard.name}")
                )
            if self._shards.get(shard.partition) is shard and shard.state is ShardState.ACTIVE:
                topics = self._newest_image().topics.by_name
                for delta, (key, value) in enumerate(records):
                    topic = topics.get(key.topic)
                    if topic is not None and topic.topic_id == topic_ids[key.topic]:
                        shard.cache.replay(key, value, base_offset + delta)
        return cm.OffsetCommitResponse(None, _answers(request.entries, refused), shared)

    async def _committing(
        self, request: cm.OffsetCommitRequest | cm.TxnOffsetCommitRequest
    ) -> tuple[_Shard, dict[int, KafkaError], list[cm.CommitEntry]] | KafkaError:
        """The partition to commit the group's offsets to, once the tombstones scheduled before
        are appended (module docstring, "Order in the log"), the entries refused by index and
        those accepted; or the request-level error."""
        shard, error = self._coordinating(request.group_id)
        while shard is not None and shard.tombstone_gate is not None:
            await shard.tombstone_gate.wait()  # one turn of the event loop
            shard, error = self._coordinating(request.group_id)
        if shard is None:
            assert error is not None
            return error
        refused = self._commit_refusals(shard, request)
        return shard, refused, [e for i, e in enumerate(request.entries) if i not in refused]

    def _commit_refusals(
        self, shard: _Shard, request: cm.OffsetCommitRequest | cm.TxnOffsetCommitRequest
    ) -> dict[int, KafkaError]:
        """Index -> error of each entry of a commit refused (`commit_rules`), fenced by the
        group's generation and member, or a consumer-protocol group's member epoch."""
        group_id = request.group_id
        return commit_errors(
            group_id,
            request.generation_id,
            request.member_id,
            request.entries,
            partition_exists=self._partition_exists,
            metadata_max_bytes=self.config.offset_metadata_max_bytes,
            membership=lambda: (
                shard.consumer.commit_error(
                    group_id,
                    request.member_id,
                    request.generation_id,
                    request.api_version,
                    transactional=isinstance(request, cm.TxnOffsetCommitRequest),
                )
                if group_id in shard.consumer.groups
                else shard.groups.commit_error(
                    group_id, request.generation_id, request.member_id, request.group_instance_id
                )
            ),
        )

    # --- TxnOffsetCommit ----------------------------------------------------------------------

    async def txn_offset_commit(
        self, request: cm.TxnOffsetCommitRequest
    ) -> cm.OffsetCommitResponse:
        """Append `request`'s offsets as a transactional batch of its producer and stage them
        until the transaction's marker (module Rules)."""
        group_id = request.group_id
        found = await self._committing(request)
        if isinstance(found, KafkaError):
            return cm.OffsetCommitResponse(found)
        shard, refused, accepted = found
        if accepted:
            unverified = await self._verify_txn(request, shard)
            # From here to the append, no await: a marker landing in between would end the
            # transaction the verification vouched for (`_verify_txn`).
            if unverified is not None:
                return cm.OffsetCommitResponse(unverified)
            if self._shards.get(shard.partition) is not shard:
                return cm.OffsetCommitResponse(
                    NotCoordinatorError(
                        f"group {group_id!r}: broker {self.broker_id} is no longer the "
                        f"coordinator of {shard.name}"
                    )
                )
            now_ms = self._wall_clock()
            records = _offset_records(group_id, accepted, now_ms)
            # No sequence: the partition checks a coordinator's batch for its epoch only.
            batch = BatchBuilder(
                producer_id=request.producer_id,
                producer_epoch=request.producer_epoch,
                is_transactional=True,
            )
            for key, value in records:
                batch.append(now_ms, encode_key(key), encode_value(value))
            ((base_offset, failure),) = await self._produce(
                shard, [batch.build()], self.config.offsets_commit_timeout_ms
            )
            if failure is not None:
                return cm.OffsetCommitResponse(
                    append_error(failure, f"group {group_id!r} in {shard.name}")
                )
            if self._shards.get(shard.partition) is shard and shard.state is ShardState.ACTIVE:
                for delta, (key, value) in enumerate(records):
                    shard.pending.stage(request.producer_id, key, value, base_offset + delta)
        return cm.OffsetCommitResponse(None, _answers(request.entries, refused))

    async def _verify_txn(
        self, request: cm.TxnOffsetCommitRequest, shard: _Shard
    ) -> KafkaError | None:
        """KIP-890: the group's offsets partition must be in the producer's transaction before
        its offsets are staged; TxnOffsetCommit v5 adds it (transaction version 2), older
        versions only verify that AddOffsetsToTxn did. The error to answer, None when it is."""
        verifier = self._txn_verifier()
        if verifier is None:
            return None
        operation = operation_for_txn_offset_commit(request.api_version or 0)
        if skips_verification(self._txn_verification_enabled(), operation):
            return None
        tp = (CONSUMER_OFFSETS_TOPIC, shard.partition)
        before = self._offsets_producer(shard, request.producer_id)
        answers = await verifier.ask(
            TxnPartitionsRequest(
                request.transactional_id,
                request.producer_id,
                request.producer_epoch,
                (tp,),
                verify_only=not operation.adds,
            )
        )
        error = answers.get(tp)
        where = f"group {request.group_id!r} (transactional id {request.transactional_id!r})"
        if error is not None:
            return client_error(error, operation, produce=False, where=where)
        now = self._offsets_producer(shard, request.producer_id)
        if not still_verified(before, now, request.producer_epoch, operation):
            return InvalidTxnStateError(
                f"{where}: producer {request.producer_id}'s transaction ended in {shard.name} "
                "while the coordinator verified it; the offsets are not part of an ongoing "
                "transaction"
            )
        return None

    def _offsets_producer(self, shard: _Shard, producer_id: int) -> ProducerEntry | None:
        """The producer's entry in the producer state of `shard`'s partition (None when the
        partition or the producer is not known here)."""
        partition = self._replicas.partition(CONSUMER_OFFSETS_TOPIC, shard.partition)
        return None if partition is None else partition.producer_state.entry(producer_id)

    def on_markers_written(
        self, producer_id: int, committed: bool, partitions: Iterable[TopicPartitionKey]
    ) -> None:
        """The broker wrote a transaction's marker to `partitions` as their leader: the
        producer's staged offsets in those of `__consumer_offsets` loaded here are applied
        (COMMIT) or dropped (module Rules). A partition still loading reads the marker from
        its log."""
        for topic, partition in partitions:
            shard = self._shards.get(partition) if topic == CONSUMER_OFFSETS_TOPIC else None
            if shard is None or shard.state is not ShardState.ACTIVE:
                continue
            for staged in shard.pending.end(producer_id, committed):
                shard.cache.replay(staged.key, staged.value, staged.record_offset)

    def _note_committer(
        self, request: cm.OffsetCommitRequest, accepted: Sequence[cm.CommitEntry]
    ) -> tuple[cm.SharedCommit, ...]:
        """Other consumers committing the same partitions of the group (module Rules), each
        pair logged once at WARNING."""
        shared, new = self._shared_commits.record(
            request.group_id,
            request.committer,
            [(e.topic, e.partition) for e in accepted],
            self._wall_clock(),
        )
        for found in new:
            log.warning(
                "group %r: two consumers commit offsets for the same partitions (%s): %s and "
                "%s (last commit %d ms before); each reads every record of them, %s",
                request.group_id,
                found.partition_names(),
                request.committer.describe(),
                found.other.describe(),
                found.last_commit_age_ms,
                cm.SHARED_COMMIT_ADVICE,
            )
        return shared

    async def _produce(
        self, shard: _Shard, entries: Sequence[bytes], timeout_ms: int
    ) -> list[tuple[int, KafkaError | None]]:
        """Append `entries` (each: record batches back to back) to the partition of `shard` in
        one produce request with acks=all: per entry, (base offset, None) or (-1, error)."""
        produce = ProduceRequest(
            ACKS_ALL,
            timeout_ms,
            tuple(
                ProducePartition(CONSUMER_OFFSETS_TOPIC, shard.partition, records)
                for records in entries
            ),
        )
        try:
            # `internal_topics_allowed`: the Broker service refuses clients on internal topics,
            # the coordinator may write.
            answer = await self._replicas.produce(produce, internal_topics_allowed=True)
        except KafkaError as error:
            return [(-1, error)] * len(entries)
        if len(answer.partitions) != len(entries):
            wrong = UnknownServerError(
                f"{shard.name}: the replica manager answered {len(answer.partitions)} partitions "
                f"for {len(entries)}"
            )
            return [(-1, wrong)] * len(entries)
        return [
            (-1, result.error) if result.error is not None else (result.base_offset, None)
            for result in answer.partitions
        ]

    # --- OffsetDelete -------------------------------------------------------------------------

    async def offset_delete(self, request: cm.OffsetDeleteRequest) -> cm.OffsetDeleteResponse:
        """Delete the group's committed offsets of `request`'s partitions (`offset_deletion`
        decides which): their tombstones are appended with acks=all before the answer, so the
        deletion survives a coordinator move; the cache drops them once they are."""
        group_id = request.group_id
        shard, error = self._coordinating(group_id)
        if error is not None:
            return cm.OffsetDeleteResponse(error)
        assert shard is not None
        asked: dict[str, list[int]] = {}
        for topic, partition in request.partitions:
            asked.setdefault(topic, []).append(partition)
        if group_id in shard.consumer.groups:
            subscribed: Subscribed = shard.consumer.subscribed_topics(group_id).__contains__
        else:
            classic = shard.groups.groups.get(group_id)
            has_offsets = bool(shard.cache.committed(group_id))
            refusal = classic_refusal(group_id, classic, has_offsets)
            if refusal is not None:
                return cm.OffsetDeleteResponse(refusal)
            subscribed = classic_subscribed(classic)
        answers, deletable = partition_answers(group_id, subscribed, list(asked.items()))
        keys = [
            key
            for key in (OffsetCommitKey(group_id, t, p) for t, p in deletable)
            if shard.cache.has(key) or key in shard.in_flight
        ]
        if keys:
            failure = await self._delete_offsets(shard, keys)
            if failure is not None:
                return cm.OffsetDeleteResponse(
                    append_error(failure, f"group {group_id!r} in {shard.name}")
                )
        return cm.OffsetDeleteResponse(
            None, tuple(cm.OffsetCommitPartitionResult(t, p, e) for t, p, e in answers)
        )

    async def _delete_offsets(
        self, shard: _Shard, keys: Sequence[OffsetCommitKey]
    ) -> KafkaError | None:
        """Append tombstones of `keys` with acks=all, then replay them into the cache (each at
        its log offset: a commit appended before it and acknowledged after changes nothing);
        the first failure, if any (the keys of a failed entry stay)."""
        entries = self._tombstone_entries(shard, keys)
        log.info(
            "broker %d: %s: deleting %d committed offsets of group %r (OffsetDelete)",
            self.broker_id,
            shard.name,
            len(keys),
            keys[0].group,
        )
        results = await self._produce(
            shard, [records for records, _ in entries], self.config.offsets_commit_timeout_ms
        )
        failure: KafkaError | None = None
        loaded = self._shards.get(shard.partition) is shard and shard.state is ShardState.ACTIVE
        for (_, entry_keys), (base_offset, entry_failure) in zip(entries, results, strict=True):
            if entry_failure is not None:
                failure = failure or entry_failure
            elif loaded:
                for delta, key in enumerate(entry_keys):
                    shard.cache.replay(key, None, base_offset + delta)
        return failure

    # --- OffsetFetch --------------------------------------------------------------------------

    def offset_fetch(self, request: cm.OffsetFetchRequest) -> cm.OffsetFetchResponse:
        shard, error = self._coordinating(request.group_id)
        if error is not None:
            return cm.OffsetFetchResponse(error)
        assert shard is not None
        fenced = shard.consumer.fetch_error(
            request.group_id, request.member_id, request.member_epoch
        )
        if fenced is not None:
            return cm.OffsetFetchResponse(fenced)
        committed = shard.cache.committed(request.group_id, request.partitions)
        unstable = (
            {
                (topic, partition)
                for topic, partition in committed
                if shard.pending.pending(request.group_id, topic, partition)
            }
            if request.require_stable
            else set()
        )
        return cm.OffsetFetchResponse(
            None,
            tuple(
                cm.FetchedOffset(
                    topic,
                    partition,
                    error=UnstableOffsetCommitError(
                        f"group {request.group_id!r}, {topic}-{partition}: an open "
                        "transaction commits an offset of it"
                    ),
                )
                if (topic, partition) in unstable
                else cm.FetchedOffset(topic, partition)
                if value is None
                else cm.FetchedOffset(
                    topic, partition, value.offset, value.leader_epoch, value.metadata
                )
                for (topic, partition), value in committed.items()
            ),
        )

    # --- helpers ------------------------------------------------------------------------------

    def _coordinating(self, group_id: str) -> tuple[_Shard | None, KafkaError | None]:
        """The loaded partition keeping `group_id`, or the request-level error to answer."""
        problem = group_id_problem(group_id)
        if problem is not None:
            return None, problem
        return coordinating(
            self.image,
            CONSUMER_OFFSETS_TOPIC,
            self._shards,
            functools.partial(partition_for_group, group_id),
            f"group {group_id!r}",
            self.broker_id,
            "the offsets",
        )

    def _newest_image(self) -> MetadataImage:
        """The broker's newest image, where a commit's topics are looked up, as Kafka's
        KafkaApis looks them up in its metadata cache: the image applied here comes only once
        every replica it describes exists, later than a client may commit a new topic's
        offsets."""
        return self.image if self._metadata_image is None else self._metadata_image()

    def _partition_exists(self, topic: str, partition: int) -> bool:
        found = self._newest_image().topics.by_name.get(topic)
        return found is not None and partition in found.partitions


def _offset_records(
    group_id: str, accepted: Iterable[cm.CommitEntry], now_ms: int
) -> list[tuple[OffsetCommitKey, OffsetCommitValue]]:
    """The offset commit records of `accepted`, committed at `now_ms`."""
    return [
        (
            OffsetCommitKey(group_id, e.topic, e.partition),
            OffsetCommitValue(e.offset, e.leader_epoch, e.metadata, now_ms),
        )
        for e in accepted
    ]


def _answers(
    entries: Sequence[cm.CommitEntry], refused: Mapping[int, KafkaError]
) -> tuple[cm.OffsetCommitPartitionResult, ...]:
    """Each entry's answer: its refusal, or none (committed)."""
    return tuple(
        cm.OffsetCommitPartitionResult(e.topic, e.partition, refused.get(i))
        for i, e in enumerate(entries)
    )


def _topics_deleted(
    previous: MetadataImage, image: MetadataImage, candidates: Collection[UUID] | None
) -> dict[str, UUID]:
    """The topic names of `previous` that `image` lacks or holds with another topic id: those
    whose topic id is gone, with that id. Only `candidates` are looked at, when given (the ids
    the deltas removed): this runs on every image whose topics changed, ISR changes included,
    and a set difference of 10,000 topic ids hashes each `UUID` in Python (3 ms each time
    here)."""
    before, after = previous.topics.by_id, image.topics.by_id
    if candidates is None:
        candidates = before.keys()
    return {
        topic.name: topic_id
        for topic_id in candidates
        if topic_id not in after and (topic := before.get(topic_id)) is not None
    }


def _tombstone_batches(
    keys: Iterable[OffsetCommitKey], timestamp_ms: int, max_batch_bytes: int
) -> Iterator[tuple[bytes, list[OffsetCommitKey]]]:
    """The tombstones of `keys` in record batches of at most `max_batch_bytes` each, by their
    exact encoded size (a tombstone larger than that alone is a batch of its own, refused by
    the log), with the keys of each."""
    batch = BatchBuilder()
    batch_keys: list[OffsetCommitKey] = []
    for key in keys:
        encoded = encode_key(key)
        if batch.try_append(timestamp_ms, encoded, None, size_limit=max_batch_bytes) < 0:
            yield batch.build(), batch_keys
            batch, batch_keys = BatchBuilder(), []
            batch.append(timestamp_ms, encoded, None)
        batch_keys.append(key)
    if batch_keys:
        yield batch.build(), batch_keys


def _tombstone_entries(
    keys: Iterable[OffsetCommitKey],
    timestamp_ms: int,
    max_batch_bytes: int,
    max_entry_bytes: int,
) -> list[tuple[bytes, list[OffsetCommitKey]]]:
    """The tombstones of `keys` as produce entries, each the batches of `_tombstone_batches`
    back to back, at most `max_entry_bytes` (segment.bytes: a log refuses a larger append) or
    one batch, with the keys of each. Every batch of an entry is checked against
    max.message.bytes, and the entry appended whole or not at all."""
    entries: list[tuple[list[bytes], list[OffsetCommitKey]]] = []
    entry_bytes = 0
    for batch, batch_keys in _tombstone_batches(keys, timestamp_ms, max_batch_bytes):
        if not entries or entry_bytes + len(batch) > max_entry_bytes:
            entries.append(([], []))
            entry_bytes = 0
        entries[-1][0].append(batch)
        entries[-1][1].extend(batch_keys)
        entry_bytes += len(batch)
    return [(b"".join(batches), entry_keys) for batches, entry_keys in entries]


def _group_task_done(task: asyncio.Task[Any]) -> None:
    """Retrieve a group task's failure: its caller may have gone away (shielded), and a
    failure that is not a Kafka error (which the caller answers) is logged."""
    if task.cancelled():
        return
    error = task.exception()
    if error is not None and not isinstance(error, KafkaError):
        log.error("a classic group coordinator call failed", exc_info=error)


def _open(shard: _Shard, gate: asyncio.Event) -> None:
    """Let the commits waiting for `gate` go on (`GroupCoordinator._tombstone`)."""
    gate.set()
    if shard.tombstone_gate is gate:
        shard.tombstone_gate = None


def _topic_sizes(image: MetadataImage) -> dict[str, tuple[UUID, int]]:
    """Every topic of `image`: name -> (topic id, partition count)."""
    return {
        name: (topic.topic_id, len(topic.partitions))
        for name, topic in image.topics.by_name.items()
    }


def _replica_racks(image: MetadataImage) -> dict[tuple[UUID, int], frozenset[str]]:
    """Each partition's replicas' racks (`broker.rack`), for rack-aware server assignors;
    empty when no broker names a rack."""
    racks = {b.broker_id: b.rack for b in image.cluster.brokers.values() if b.rack}
    if not racks:
        return {}
    return {
        (topic.topic_id, partition_id): frozenset(racks[r] for r in p.replicas if r in racks)
        for topic in image.topics.by_id.values()
        for partition_id, p in topic.partitions.items()
    }


def _group_configs(image: MetadataImage) -> dict[str, Mapping[str, str]]:
    """Every group's own configs (GROUP config resources of the metadata log)."""
    return {
        resource.resource_name: keys
        for resource, keys in image.configs.resources.items()
        if resource.resource_type is ConfigResourceType.GROUP
    }


def _uuid_from(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _group_cores(
    classic: ClassicGroupConfig,
    consumer: ConsumerGroupConfig,
    wall_clock: Clock,
    new_uuid: Callable[[], str] | None = None,
) -> tuple[ClassicGroupCoordinator, ConsumerGroupCoordinator]:
    """The two protocols' cores of one partition: a consumer group's classic members are
    answered by the consumer core; an Empty group of one protocol gives way to the other.
    Their timers run on the monotonic clock each call passes; `wall_clock` stamps the group
    records' state timestamps, as Kafka's do; `new_uuid` makes member ids (None: the cores'
    random UUIDs)."""
    if new_uuid is None:
        groups = ClassicGroupCoordinator(classic, wall_clock=wall_clock)
        consumer_groups = ConsumerGroupCoordinator(consumer, classic=groups)
    else:
        groups = ClassicGroupCoordinator(classic, new_uuid, wall_clock=wall_clock)
        consumer_groups = ConsumerGroupCoordinator(consumer, new_uuid, classic=groups)
    groups.other_protocol = consumer_groups.yield_to_classic
    groups.consumer_groups = consumer_groups
    return groups, consumer_groups
