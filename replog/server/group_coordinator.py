"""GroupCoordinator: a broker's side of consumer groups: it finds a group's coordinator and,
for the groups it coordinates, keeps their committed offsets (Kafka's group coordinator, for
groups without membership).

Theory of operation: a group's offsets live in one partition of the internal topic
`__consumer_offsets` (`group_partition`), and the leader of that partition is the group's
coordinator. The coordinator is a metadata publisher installed after the replica manager, so
the replica manager has acted on an image before the coordinator sees it: for each
`__consumer_offsets` partition this broker leads at a new leader epoch it starts a load, and
for each it no longer leads it drops the partition's cache at once. A load reads the
partition's log from its start to its end on a worker thread (the Log is thread-safe; the event
loop goes on serving) and replays it into a fresh `OffsetsCache`; until it is done the
partition answers COORDINATOR_LOAD_IN_PROGRESS. A commit appends one batch of offset records
with acks=all through the replica manager, as the broker itself (internal topics allowed), and
updates the cache only once the append is acknowledged.

Rules:
- FindCoordinator: INVALID_GROUP_ID for an empty group id; when `__consumer_offsets` does not
  exist, the broker asks the controller to create it (`OffsetsTopicCreator`) and answers
  COORDINATOR_NOT_AVAILABLE; when the group's partition has no leader (or the leader has no
  registered listener), COORDINATOR_NOT_AVAILABLE; else the leader's id and first listener.
  The partition count is the existing topic's, as in Kafka.
- OffsetCommit and OffsetFetch, request level: INVALID_GROUP_ID; NOT_COORDINATOR when this
  broker does not lead the group's partition (or its load failed);
  COORDINATOR_LOAD_IN_PROGRESS while it loads. Per partition: `commit_rules`. A failed append
  is a request-level error as `commit_rules.append_error` maps it (nothing was committed).
- OffsetFetch answers from the cache: the committed offset, or -1 for a partition without
  one; with no partitions named, every partition the group committed.
- The commit timestamp is the wall clock at the commit; the batch is CreateTime, uncompressed.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from dataclasses import dataclass, field
from typing import Protocol
from uuid import UUID

from quorum.metadata.delta import MetadataDelta
from quorum.metadata.image import MetadataImage, TopicImage
from quorum.metadata.loader import LoaderManifest
from replog.clock import Clock, monotonic_ms, wall_clock_ms
from replog.coordinator import messages as cm
from replog.coordinator.commit_rules import append_error, commit_errors, group_id_problem
from replog.coordinator.group_partition import partition_for_group
from replog.coordinator.offsets_cache import OffsetsCache, ReplayStats, replay_batches
from replog.coordinator.offsets_records import (
    OffsetCommitKey,
    OffsetCommitValue,
    encode_key,
    encode_value,
)
from replog.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    KafkaError,
    NotCoordinatorError,
    UnknownServerError,
)
from replog.record.builder import BatchBuilder
from replog.replication.messages import (
    ACKS_ALL,
    ProducePartition,
    ProduceRequest,
    ProduceResponse,
)
from replog.server.group_coordinator_config import GroupCoordinatorConfig
from replog.server.partition import Partition
from replog.storage.log import Log
from replog.topic_names import CONSUMER_OFFSETS_TOPIC

log = logging.getLogger("replog.server.group_coordinator")


class OffsetsReplicas(Protocol):
    """What the coordinator needs of the replica manager (`replica_manager.ReplicaManager`)."""

    def partition(self, topic: str, partition: int) -> Partition | None: ...

    async def produce(
        self, request: ProduceRequest, *, internal_topics_allowed: bool = False
    ) -> ProduceResponse: ...


class TopicCreator(Protocol):
    """What the coordinator needs of `offsets_topic_creator.OffsetsTopicCreator`."""

    @property
    def last_failure(self) -> KafkaError | None: ...
    def request(self) -> None: ...
    async def stop(self) -> None: ...


class ShardState(enum.Enum):
    LOADING = "loading"
    ACTIVE = "active"
    FAILED = "failed"


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

    @property
    def name(self) -> str:
        return f"{CONSUMER_OFFSETS_TOPIC}-{self.partition}"


class GroupCoordinator:
    """The group coordinator of one broker (module docstring). A MetadataPublisher."""

    name = "group-coordinator"

    def __init__(
        self,
        broker_id: int,
        replicas: OffsetsReplicas,
        topic_creator: TopicCreator,
        config: GroupCoordinatorConfig | None = None,
        *,
        clock: Clock = monotonic_ms,
        wall_clock: Clock = wall_clock_ms,
    ) -> None:
        self.broker_id = broker_id
        self.config = config if config is not None else GroupCoordinatorConfig()
        self._replicas = replicas
        self._topic_creator = topic_creator
        self._clock = clock
        self._wall_clock = wall_clock
        self.image = MetadataImage.EMPTY
        self._shards: dict[int, _Shard] = {}
        self._stopped = False

    # --- following leadership -----------------------------------------------------------------

    def on_metadata_update(
        self, delta: MetadataDelta, image: MetadataImage, manifest: LoaderManifest
    ) -> None:
        """MetadataPublisher: load the offsets partitions led here, drop the others."""
        self.apply_image(image)

    def apply_image(self, image: MetadataImage) -> None:
        """Follow the `__consumer_offsets` leaderships of `image` (also for tests)."""
        previous, self.image = self.image, image
        if image.topics is previous.topics or self._stopped:
            return
        self._follow(image)

    def _follow(self, image: MetadataImage) -> None:
        topic = image.topics.by_name.get(CONSUMER_OFFSETS_TOPIC)
        led: dict[int, tuple[UUID, int]] = {}
        if topic is not None:
            for partition_id, registration in topic.partitions.items():
                if registration.leader == self.broker_id:
                    led[partition_id] = (topic.topic_id, registration.leader_epoch)
        for partition_id, shard in list(self._shards.items()):
            if led.get(partition_id) != (shard.topic_id, shard.leader_epoch):
                self._unload(shard)
        for partition_id, (topic_id, leader_epoch) in sorted(led.items()):
            if partition_id not in self._shards:
                self._load(_Shard(partition_id, topic_id, leader_epoch))

    def _load(self, shard: _Shard) -> None:
        self._shards[shard.partition] = shard
        log.info(
            "broker %d: loading the group offsets of %s (leader epoch %d)",
            self.broker_id,
            shard.name,
            shard.leader_epoch,
        )
        shard.task = asyncio.get_running_loop().create_task(self._run_load(shard))

    def _unload(self, shard: _Shard) -> None:
        del self._shards[shard.partition]
        if shard.task is not None:
            shard.task.cancel()
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
            cache, stats = await asyncio.to_thread(
                self._read_offsets, partition.log, self.config.offsets_load_buffer_size
            )
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
        shard.cache = cache
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
            "broker %d: loaded %s: %d committed offsets of %d groups from %d records in %d ms",
            self.broker_id,
            shard.name,
            len(cache),
            len(cache.groups()),
            stats.records,
            self._clock() - started_ms,
        )

    @staticmethod
    def _read_offsets(plog: Log, chunk_bytes: int) -> tuple[OffsetsCache, ReplayStats]:
        """Replay the log from its start to its end (on a worker thread)."""
        cache = OffsetsCache()
        stats = ReplayStats()
        offset = plog.log_start_offset
        end = plog.log_end_offset
        while offset < end:
            data = plog.read(offset, chunk_bytes, end)
            if not data:
                break
            next_offset = replay_batches(cache, data, stats, f"{plog.name} at offset {offset}")
            if next_offset <= offset:
                break
            offset = next_offset
        return cache, stats

    def state_of(self, partition: int) -> ShardState | None:
        """The state of an offsets partition led here (None: not led here); for tests."""
        shard = self._shards.get(partition)
        return None if shard is None else shard.state

    async def wait_loaded(self) -> None:
        """Until every load under way ended (tests)."""
        tasks = [s.task for s in self._shards.values() if s.task is not None]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    async def stop(self) -> None:
        self._stopped = True
        for shard in list(self._shards.values()):
            self._unload(shard)
        await self._topic_creator.stop()

    # --- FindCoordinator ----------------------------------------------------------------------

    def find_coordinator(self, group_id: str) -> cm.FindCoordinatorResponse:
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
        leader = _leader_of(topic, partition_id)
        if leader < 0:
            return cm.FindCoordinatorResponse(
                CoordinatorNotAvailableError(
                    f"group {group_id!r}: {CONSUMER_OFFSETS_TOPIC}-{partition_id} has no leader"
                )
            )
        broker = image.cluster.brokers.get(leader)
        if broker is None or not broker.endpoints:
            return cm.FindCoordinatorResponse(
                CoordinatorNotAvailableError(
                    f"group {group_id!r}: the coordinator, broker {leader}, has no registered "
                    "listener"
                )
            )
        endpoint = broker.endpoints[0]
        return cm.FindCoordinatorResponse(None, leader, endpoint.host, endpoint.port)

    # --- OffsetCommit -------------------------------------------------------------------------

    async def offset_commit(
        self, request: cm.OffsetCommitRequest, *, timeout_ms: int | None = None
    ) -> cm.OffsetCommitResponse:
        """Commit `request`'s offsets; `timeout_ms` bounds the wait for acks=all (at most
        `offsets.commit.timeout.ms`)."""
        group_id = request.group_id
        shard, error = self._coordinating(group_id)
        if error is not None:
            return cm.OffsetCommitResponse(error)
        assert shard is not None
        refused = commit_errors(
            group_id,
            request.generation_id,
            request.member_id,
            request.entries,
            partition_exists=self._partition_exists,
            metadata_max_bytes=self.config.offset_metadata_max_bytes,
        )
        accepted = [e for i, e in enumerate(request.entries) if i not in refused]
        if accepted:
            now_ms = self._wall_clock()
            records = [
                (
                    OffsetCommitKey(group_id, e.topic, e.partition),
                    OffsetCommitValue(e.offset, e.leader_epoch, e.metadata, now_ms),
                )
                for e in accepted
            ]
            commit_timeout_ms = self.config.offsets_commit_timeout_ms
            if timeout_ms is not None:
                commit_timeout_ms = max(0, min(commit_timeout_ms, timeout_ms))
            base_offset, failure = await self._append(shard, records, now_ms, commit_timeout_ms)
            if failure is not None:
                return cm.OffsetCommitResponse(
                    append_error(failure, f"group {group_id!r} in {shard.name}")
                )
            if self._shards.get(shard.partition) is shard and shard.state is ShardState.ACTIVE:
                for delta, (key, value) in enumerate(records):
                    shard.cache.replay(key, value, base_offset + delta)
        return cm.OffsetCommitResponse(
            None,
            tuple(
                cm.OffsetCommitPartitionResult(e.topic, e.partition, refused.get(i))
                for i, e in enumerate(request.entries)
            ),
        )

    async def _append(
        self,
        shard: _Shard,
        records: list[tuple[OffsetCommitKey, OffsetCommitValue]],
        now_ms: int,
        timeout_ms: int,
    ) -> tuple[int, KafkaError | None]:
        """Append one batch of `records` with acks=all: (base offset, None) or (-1, error)."""
        builder = BatchBuilder()
        for key, value in records:
            builder.append(now_ms, encode_key(key), encode_value(value))
        produce = ProduceRequest(
            ACKS_ALL,
            timeout_ms,
            (ProducePartition(CONSUMER_OFFSETS_TOPIC, shard.partition, builder.build()),),
        )
        try:
            # `internal_topics_allowed`: the Broker service refuses clients on internal topics,
            # the coordinator may write.
            answer = await self._replicas.produce(produce, internal_topics_allowed=True)
        except KafkaError as error:
            return -1, error
        if len(answer.partitions) != 1:
            return -1, UnknownServerError(
                f"{shard.name}: the replica manager answered {len(answer.partitions)} partitions "
                "for one"
            )
        result = answer.partitions[0]
        if result.error is not None:
            return -1, result.error
        return result.base_offset, None

    # --- OffsetFetch --------------------------------------------------------------------------

    def offset_fetch(self, request: cm.OffsetFetchRequest) -> cm.OffsetFetchResponse:
        shard, error = self._coordinating(request.group_id)
        if error is not None:
            return cm.OffsetFetchResponse(error)
        assert shard is not None
        committed = shard.cache.committed(request.group_id, request.partitions)
        return cm.OffsetFetchResponse(
            None,
            tuple(
                cm.FetchedOffset(topic, partition)
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
        topic = self.image.topics.by_name.get(CONSUMER_OFFSETS_TOPIC)
        if topic is None or not topic.partitions:
            return None, NotCoordinatorError(
                f"group {group_id!r}: broker {self.broker_id} is not its coordinator: "
                f"{CONSUMER_OFFSETS_TOPIC} does not exist yet"
            )
        partition_id = partition_for_group(group_id, len(topic.partitions))
        shard = self._shards.get(partition_id)
        if shard is None:
            return None, NotCoordinatorError(
                f"group {group_id!r}: broker {self.broker_id} is not its coordinator: "
                f"{CONSUMER_OFFSETS_TOPIC}-{partition_id} is led by broker "
                f"{_leader_of(topic, partition_id)}"
            )
        if shard.state is ShardState.LOADING:
            return None, CoordinatorLoadInProgressError(
                f"group {group_id!r}: broker {self.broker_id} is still loading the offsets of "
                f"{shard.name}"
            )
        if shard.state is ShardState.FAILED:
            return None, NotCoordinatorError(
                f"group {group_id!r}: broker {self.broker_id} could not load the offsets of "
                f"{shard.name}: {shard.failure}"
            )
        return shard, None

    def _partition_exists(self, topic: str, partition: int) -> bool:
        found = self.image.topics.by_name.get(topic)
        return found is not None and partition in found.partitions


def _leader_of(topic: TopicImage, partition_id: int) -> int:
    registration = topic.partitions.get(partition_id)
    return -1 if registration is None else registration.leader
