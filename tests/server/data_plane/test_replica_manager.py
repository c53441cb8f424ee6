"""ReplicaManager against real logs in tmp_path, a hand-driven clock and metadata images.

Two managers are wired by hand (follower.build_follower_fetch -> leader.fetch ->
follower.process_follower_fetch), so every replication step is deterministic.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from replog.checkpoints.partition_metadata import render_partition_metadata
from replog.errors import (
    ConfigError,
    CorruptRecordError,
    FencedLeaderEpochError,
    InvalidRecordError,
    InvalidRequestError,
    InvalidRequiredAcksError,
    KafkaError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetNotAvailableError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceNumberError,
    PolicyViolationError,
    RequestTimedOutError,
    UnknownLeaderEpochError,
    UnknownServerError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)
from replog.quorum.metadata.image import MetadataImage, MetadataProvenance
from replog.quorum.metadata.loader import LoaderManifest, ManifestKind
from replog.quorum.metadata.records import (
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    ConfigResourceType,
    FenceChange,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from replog.record import build_batch, iter_frames, read_header
from replog.replication.messages import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_PENDING_UPLOAD_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    EpochEndOffsetResult,
    FetchPartition,
    FetchPartitionResult,
    FetchRequest,
    FetchResponse,
    LeaderIdAndEpoch,
    ListOffsetsPartition,
    ListOffsetsRequest,
    OffsetForLeaderPartition,
    OffsetsForLeaderEpochRequest,
    ProducePartition,
    ProduceRequest,
    ProduceResponse,
)
from replog.server.data_plane import follower_fetch, replica_manager
from replog.server.data_plane.partition import Partition
from replog.server.data_plane.replica_manager import ReplicaManager, ReplicaManagerConfig
from replog.storage.log_config import LogConfig
from replog.storage.log_manager import LogManager
from replog.testing import LoopTasks, ManualClock
from tests.leftovers import close_after_test
from tests.metadata.metadata_helpers import (
    bootstrapped,
    create_topic,
    delta_of,
    register,
    replayed,
    topic_id,
)

TID = topic_id(1)
# How long a task is given to finish once what it waits for happened: a guard against a
# hang, not a claim about speed (a loaded machine runs the task late).
DONE_S = 10
SOLO_TID = topic_id(2)
T0 = 1_700_000_000_000


class Node:
    """One broker's data plane: a LogManager over tmp_path and its ReplicaManager."""

    def __init__(
        self,
        root: Path,
        broker_id: int,
        clock: ManualClock,
        *,
        wall_clock: ManualClock | None = None,
        **config: Any,
    ) -> None:
        self.broker_id = broker_id
        self.clock = clock
        self.log_manager = LogManager(
            str(root / f"broker{broker_id}"), LogConfig(), task_clock=clock
        )
        close_after_test(self.log_manager.close_after_failure)
        self.rm = ReplicaManager(
            ReplicaManagerConfig(broker_id, **config),
            self.log_manager,
            clock=clock,
            wall_clock=wall_clock if wall_clock is not None else ManualClock(T0),
            broker_epoch=lambda: 10 * broker_id,
            tasks=LoopTasks(),
        )

    def log(self, topic: str = "t", partition: int = 0) -> Any:
        return self.log_manager.get_log(topic, partition)

    def leader(self, topic: str = "t", partition: int = 0) -> Any:
        found = self.rm.partition(topic, partition)
        assert found is not None and found.leader_state is not None
        return found.leader_state


def cluster_image(*records: MetadataRecord, brokers: tuple[int, ...] = (1, 2, 3)) -> MetadataImage:
    image = replayed(bootstrapped(), *(register(b, 10 * b, fenced=False) for b in brokers))
    return replayed(image, *records) if records else image


def batch(count: int = 1, *, tag: int = 0, timestamp: int = T0, **options: Any) -> bytes:
    return build_batch(
        [(timestamp + i, b"k", f"value-{tag}-{i}".encode(), ()) for i in range(count)], **options
    )


def produce_request(
    records: bytes, *, acks: int = 1, timeout_ms: int = 1000, topic: str = "t", partition: int = 0
) -> ProduceRequest:
    return ProduceRequest(acks, timeout_ms, (ProducePartition(topic, partition, records),))


async def produce(node: Node, records: bytes, **kwargs: Any) -> Any:
    # Bounded, so a produce that wrongly waits fails the test instead of hanging it.
    response = await asyncio.wait_for(node.rm.produce(produce_request(records, **kwargs)), 5)
    assert len(response.partitions) == 1
    return response.partitions[0]


async def consumer_fetch(
    node: Node, offset: int, *, max_wait_ms: int = 0, topic: str = "t", **kwargs: Any
) -> FetchPartitionResult:
    response = await asyncio.wait_for(
        node.rm.fetch(
            FetchRequest((FetchPartition(topic, 0, offset, **kwargs),), max_wait_ms=max_wait_ms)
        ),
        5,
    )
    return response.partitions[0]


async def replicate(follower: Node, leader: Node) -> tuple[FetchRequest, FetchResponse]:
    """One fetch round trip from `follower` to `leader`, answered at once."""
    now_ms = follower.clock()
    request = follower.rm.build_follower_fetch(leader.broker_id, now_ms)
    assert request is not None, "nothing to fetch"
    response = await asyncio.wait_for(leader.rm.fetch(replace(request, max_wait_ms=0)), 5)
    follower.rm.process_follower_fetch(leader.broker_id, request, response, now_ms)
    return request, response


def batch_offsets(records: bytes) -> list[tuple[int, int]]:
    """(base offset, last offset) of each batch in a fetched buffer."""
    headers = [read_header(records, position) for position, _ in iter_frames(records)]
    return [(h.base_offset, h.last_offset) for h in headers]


def whole_log(node: Node, topic: str = "t") -> bytes:
    plog = node.log(topic)
    return bytes(plog.read(plog.log_start_offset, 1 << 30))


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


def nodes_with(
    tmp_path: Path, clock: ManualClock, *assignments: tuple[int, ...], **config: Any
) -> tuple[Node, ...]:
    """Brokers 1..N holding topic "t" with one partition per replica assignment (the first
    replica leads), each with the image applied."""
    image = cluster_image(*create_topic("t", TID, *assignments))
    nodes = tuple(
        Node(tmp_path, broker_id, clock, **config)
        for broker_id in range(1, max(max(a) for a in assignments) + 1)
    )
    for node in nodes:
        node.rm.apply_image(image)
    return nodes


def two_nodes(
    tmp_path: Path, clock: ManualClock, **config: Any
) -> tuple[Node, Node, MetadataImage]:
    leader, follower = nodes_with(tmp_path, clock, (1, 2), **config)
    return leader, follower, leader.rm.image


def solo_node(tmp_path: Path, clock: ManualClock, **config: Any) -> Node:
    (node,) = nodes_with(tmp_path, clock, (1,), **config)
    return node


async def settle() -> None:
    """Let every ready task run up to its next real wait."""
    for _ in range(10):
        await asyncio.sleep(0)


def pending(task: asyncio.Task[Any]) -> bool:
    return not task.done()


# --- config -----------------------------------------------------------------------------------


def test_config_from_properties_maps_kafka_names() -> None:
    config = ReplicaManagerConfig.from_properties(
        3,
        {
            "replica.lag.time.max.ms": "10000",
            "replica.fetch.wait.max.ms": "100",
            "min.insync.replicas": "2",
            "replica.fetch.backoff.ms": "50",
            "producer.id.expiration.ms": "3600000",
            "producer.id.expiration.check.interval.ms": "60000",
            "unrelated.key": "x",
        },
    )
    assert config.producer_id_expiration_ms == 3_600_000
    assert config.producer_id_expiration_check_interval_ms == 60_000
    defaults = ReplicaManagerConfig(1)
    assert defaults.producer_id_expiration_ms == 86_400_000  # Kafka's defaults
    assert defaults.producer_id_expiration_check_interval_ms == 600_000
    assert config.broker_id == 3
    assert config.replica_lag_time_ms_max == 10000
    assert config.replica_fetch_wait_ms_max == 100
    assert config.default_min_insync_replicas == 2
    assert config.replica_fetch_backoff_ms == 50
    with pytest.raises(ConfigError, match=r"replica\.fetch\.max\.bytes"):
        ReplicaManagerConfig.from_properties(1, {"replica.fetch.max.bytes": "lots"})
    with pytest.raises(ConfigError, match="must not exceed"):
        ReplicaManagerConfig(1, replica_lag_time_ms_max=100, replica_fetch_wait_ms_max=500)
    with pytest.raises(ConfigError, match=r"min\.insync\.replicas"):
        ReplicaManagerConfig(1, default_min_insync_replicas=0)


# --- metadata -> roles -------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_image_makes_leader_and_follower_with_fetch_sources(
    tmp_path: Path, clock: ManualClock
) -> None:
    leader, follower, _ = two_nodes(tmp_path, clock)
    assert leader.leader().leader_epoch == 0
    assert leader.rm.fetch_sources() == []
    assert follower.rm.fetch_sources() == [1]
    assert follower.rm.fetch_wakeup.is_set()
    assert not follower.rm.isr_wakeup.is_set()
    state = follower.rm.partition("t", 0)
    assert state is not None and state.follower is not None
    assert (state.follower.leader_id, state.follower.leader_epoch) == (1, 0)
    # The leader recorded its epoch before any append
    # (docs/design/replication.md#leader-epoch-cache).
    assert leader.log().leader_epoch_cache.latest_epoch == 0
    request = follower.rm.build_follower_fetch(1, clock())
    assert request is not None
    assert request.replica_id == 2 and request.replica_epoch == 20
    assert request.max_wait_ms == 500 and request.min_bytes == 1
    assert request.max_bytes == 10485760
    (entry,) = request.partitions
    assert (entry.topic, entry.partition, entry.fetch_offset) == ("t", 0, 0)
    assert entry.current_leader_epoch == 0 and entry.topic_id == TID
    assert entry.partition_max_bytes == 1048576
    assert follower.rm.build_follower_fetch(3, clock()) is None


@pytest.mark.asyncio
async def test_topic_deletion_removes_the_replica_and_its_log(
    tmp_path: Path, clock: ManualClock
) -> None:
    leader, follower, image = two_nodes(tmp_path, clock)
    await produce(leader, batch())
    gone = replayed(image, RemoveTopicRecord(TID))
    for node in (leader, follower):
        node.rm.apply_image(gone)
        assert node.rm.partition("t", 0) is None
        assert node.log_manager.all_logs() == {}
    assert follower.rm.fetch_sources() == []
    result = await produce(leader, batch())
    assert isinstance(result.error, UnknownTopicOrPartitionError)


# --- logs of deleted topics: partition.metadata and stray logs ----------------------------------


async def restarted_with_three_records(tmp_path: Path, clock: ManualClock) -> Node:
    """Broker 1, sole replica of "t" (TID), after 3 records and a clean restart: a new manager
    over the same log dir, no image applied yet."""
    node = solo_node(tmp_path, clock)
    await produce(node, batch(3))
    node.log_manager.shutdown()
    return Node(tmp_path, node.broker_id, clock)


def set_aside(node: Node) -> list[Path]:
    """The stray logs set aside in the node's log dir (`<topic>-<partition>.<id>-stray`)."""
    return sorted(Path(node.log_manager.log_dirs[0]).glob("*-stray"))


def batch_bytes(directory: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(directory.glob("*.log")))


@pytest.mark.asyncio
async def test_a_topic_deleted_while_a_broker_was_down_is_set_aside_not_served(
    tmp_path: Path, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    # A topic deleted while a broker started must not stay on its disk: a topic created later
    # under the same name would take that log, serving the deleted topic's records as its
    # own.
    again = await restarted_with_three_records(tmp_path, clock)
    written = batch_bytes(Path(again.log("t").directory))
    assert written
    with caplog.at_level(logging.WARNING, logger="replog.server"):
        again.rm.apply_image(cluster_image())  # the topic is gone at the first image
    assert again.log_manager.all_logs() == {}
    [aside] = set_aside(again)
    assert batch_bytes(aside) == written  # kept for an operator, as Kafka's `-stray` rename
    assert (
        f"t-0: stray log (its topic no longer exists; log end offset 3): set aside as {aside}"
        in caplog.text
    )
    again.rm.apply_image(cluster_image(*create_topic("t", topic_id(9), (1,))))
    assert again.log("t").log_end_offset == 0  # the new topic starts empty


@pytest.mark.asyncio
async def test_a_log_of_an_earlier_topic_of_the_same_name_is_replaced_not_taken(
    tmp_path: Path, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    again = await restarted_with_three_records(tmp_path, clock)
    assert again.log("t").topic_id() == TID
    # Deleted and created again while the broker was down: the first image has the new id.
    with caplog.at_level(logging.WARNING, logger="replog.server"):
        again.rm.apply_image(cluster_image(*create_topic("t", topic_id(9), (1,))))
    log_ = again.log("t")
    assert log_.log_end_offset == 0 and log_.topic_id() == topic_id(9)
    [aside] = set_aside(again)
    assert f"belongs to topic id {TID}, a deleted topic of the same name" in caplog.text
    assert f"set aside as {aside} (log end offset 3)" in caplog.text
    assert (aside / "partition.metadata").read_bytes() == render_partition_metadata(TID)
    assert (await produce(again, batch(2))).error is None
    assert again.log("t").log_end_offset == 2


@pytest.mark.asyncio
async def test_a_log_without_partition_metadata_is_taken_and_gets_the_file(
    tmp_path: Path, clock: ManualClock
) -> None:
    # A log that a replog without the file wrote (or an empty one made just before a crash).
    again = await restarted_with_three_records(tmp_path, clock)
    directory = Path(again.log("t").directory)
    (directory / "partition.metadata").unlink()
    again.rm.apply_image(cluster_image(*create_topic("t", TID, (1,))))
    assert again.log("t").log_end_offset == 3
    assert (directory / "partition.metadata").read_bytes().startswith(b"version: 0\ntopic_id: ")
    assert again.log("t").topic_id() == TID


@pytest.mark.asyncio
async def test_a_partition_moved_away_while_the_broker_was_down_is_set_aside_at_the_first_image(
    tmp_path: Path, clock: ManualClock
) -> None:
    again = await restarted_with_three_records(tmp_path, clock)
    again.rm.apply_image(cluster_image(*create_topic("t", TID, (2, 3))))
    assert again.log_manager.all_logs() == {}
    assert again.rm.partition("t", 0) is None
    assert len(set_aside(again)) == 1


def test_partitions_added_or_removed_after_a_fetch_join_or_leave_the_next_one(
    tmp_path: Path, clock: ManualClock
) -> None:
    # The fetch order catches up with the replica set only when told it changed: a follower
    # that missed the news would never fetch a new partition, or keep asking for a gone one.
    leader, follower, image = two_nodes(tmp_path, clock)

    def asked() -> list[tuple[str, int]]:
        request = follower.rm.build_follower_fetch(1, clock())
        return [] if request is None else [(e.topic, e.partition) for e in request.partitions]

    assert asked() == [("t", 0)]
    assert asked() == [("t", 0)]  # nothing changed: the same order
    more = replayed(image, *create_topic("u", SOLO_TID, (1, 2)))
    for node in (leader, follower):
        node.rm.apply_image(more)
    assert asked() == [("t", 0), ("u", 0)]  # a new partition joins at the back
    fewer = replayed(more, RemoveTopicRecord(TID))
    for node in (leader, follower):
        node.rm.apply_image(fewer)
    assert asked() == [("u", 0)]


# --- produce ----------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_produce_acks_1_appends_and_answers_at_once(
    tmp_path: Path, clock: ManualClock
) -> None:
    leader, _, _ = two_nodes(tmp_path, clock)
    first = await produce(leader, batch(3))
    second = await produce(leader, batch(2, tag=1))
    assert first.error is None and first.base_offset == 0 and first.log_start_offset == 0
    assert second.error is None and second.base_offset == 3
    assert leader.log().log_end_offset == 5
    # The follower has not fetched: the HW stays at 0 (it is in the ISR with unknown LEO).
    assert leader.leader().high_watermark == 0


@pytest.mark.asyncio
async def test_produce_acks_0_answers_only_failures(tmp_path: Path, clock: ManualClock) -> None:
    leader, follower, _ = two_nodes(tmp_path, clock)
    response = await leader.rm.produce(produce_request(batch(), acks=0))
    assert response == ProduceResponse(())
    assert leader.log().log_end_offset == 1
    failed = await follower.rm.produce(produce_request(batch(), acks=0))
    (result,) = failed.partitions
    assert isinstance(result.error, NotLeaderOrFollowerError)


@pytest.mark.asyncio
async def test_produce_acks_all_completes_when_follower_fetch_moves_hw(
    tmp_path: Path, clock: ManualClock
) -> None:
    leader, follower, _ = two_nodes(tmp_path, clock)
    task = asyncio.create_task(leader.rm.produce(produce_request(batch(2), acks=-1)))
    await settle()
    assert pending(task)
    await replicate(follower, leader)  # fetch offset 0: gets the batch; leader learns LEO 0
    await settle()
    assert pending(task)
    assert follower.log().log_end_offset == 2
    await replicate(follower, leader)  # fetch offset 2: HW -> 2
    response = await asyncio.wait_for(task, DONE_S)
    (result,) = response.partitions
    assert result.error is None and result.base_offset == 0
    assert leader.leader().high_watermark == 2
    assert leader.log().high_watermark == 2  # mirrored into the log for the checkpoint


@pytest.mark.asyncio
async def test_produce_acks_all_times_out(tmp_path: Path, clock: ManualClock) -> None:
    leader, _, _ = two_nodes(tmp_path, clock)
    task = asyncio.create_task(
        leader.rm.produce(produce_request(batch(), acks=-1, timeout_ms=3000))
    )
    await settle()
    assert leader.rm.next_tick_ms() == clock() + 3000
    leader.rm.tick(clock.advance(2999))
    await settle()
    assert pending(task)
    leader.rm.tick(clock.advance(1))
    (result,) = (await asyncio.wait_for(task, DONE_S)).partitions
    assert isinstance(result.error, RequestTimedOutError)
    assert result.error.error_name == "REQUEST_TIMED_OUT"
    assert "t-0" in str(result.error)
    assert result.base_offset == 0  # the data was appended; only the acks timed out


@pytest.mark.asyncio
async def test_produce_acks_all_needs_min_isr_before_append(
    tmp_path: Path, clock: ManualClock
) -> None:
    image = cluster_image(
        TopicRecord("t", TID),
        PartitionRecord(TID, 0, (1, 2), (1,), 1),
        ConfigRecord(ConfigResourceType.TOPIC, "t", "min.insync.replicas", "2"),
    )
    leader = Node(tmp_path, 1, clock)
    leader.rm.apply_image(image)
    assert leader.leader().config.min_insync_replicas == 2
    result = await produce(leader, batch(), acks=-1)
    assert isinstance(result.error, NotEnoughReplicasError)
    assert result.error.error_name == "NOT_ENOUGH_REPLICAS"
    assert leader.log().log_end_offset == 0  # nothing appended
    assert (await produce(leader, batch(), acks=1)).error is None
    # Lowering the topic's min ISR in metadata lets acks=all through.
    relaxed = replayed(
        image, ConfigRecord(ConfigResourceType.TOPIC, "t", "min.insync.replicas", None)
    )
    leader.rm.apply_image(relaxed)
    assert leader.leader().config.min_insync_replicas == 1
    done = await produce(leader, batch(), acks=-1)
    assert done.error is None and done.base_offset == 1


@pytest.mark.asyncio
async def test_min_insync_replicas_follows_kafkas_config_precedence(
    tmp_path: Path, clock: ManualClock
) -> None:
    # The dynamic broker configs (this broker's, then the cluster default) sit between the
    # topic's config and server.properties, as in Kafka.
    def config(resource_name: str, value: str | None, *, topic: bool = False) -> ConfigRecord:
        kind = ConfigResourceType.TOPIC if topic else ConfigResourceType.BROKER
        return ConfigRecord(kind, resource_name, "min.insync.replicas", value)

    image = cluster_image(*create_topic("t", TID, (1, 2, 3)))
    leader = Node(tmp_path, 1, clock, default_min_insync_replicas=1)
    leader.rm.apply_image(image)
    assert leader.leader().config.min_insync_replicas == 1  # server.properties
    image = replayed(image, config("", "2"))
    leader.rm.apply_image(image)
    assert leader.leader().config.min_insync_replicas == 2  # the dynamic cluster default
    image = replayed(image, config("1", "3"), config("2", "1"))
    leader.rm.apply_image(image)
    assert leader.leader().config.min_insync_replicas == 3  # broker 1's own; not broker 2's
    image = replayed(image, config("t", "2", topic=True))
    leader.rm.apply_image(image)
    assert leader.leader().config.min_insync_replicas == 2  # the topic's config wins
    image = replayed(image, config("t", None, topic=True), config("1", None))
    leader.rm.apply_image(image)
    assert leader.leader().config.min_insync_replicas == 2  # back to the cluster default
    # It decides acks=all: the ISR shrinks to 1 member, below the cluster default of 2.
    leader.rm.tick(clock.advance(30_001))  # the followers never fetched
    (shrink,) = leader.rm.pending_isr_changes()
    leader.rm.on_isr_change_result(shrink, None, (1,), 0, shrink.partition_epoch + 1)
    result = await produce(leader, batch(), acks=-1)
    assert isinstance(result.error, NotEnoughReplicasError)


@pytest.mark.asyncio
async def test_topic_config_changes_reach_the_existing_logs(
    tmp_path: Path, clock: ManualClock
) -> None:
    # A topic's log settings reach an existing log when they change, on the leader and on the
    # follower, not only when the replica is created.
    leader, follower, image = two_nodes(tmp_path, clock)
    other = replayed(image, *create_topic("u", SOLO_TID, (1, 2)))
    for node in (leader, follower):
        node.rm.apply_image(other)
    assert leader.log().config.max_message_bytes == LogConfig().max_message_bytes
    assert (await produce(leader, batch(1, tag=1))).error is None
    changed = replayed(
        other,
        ConfigRecord(ConfigResourceType.TOPIC, "t", "max.message.bytes", "64"),
        ConfigRecord(ConfigResourceType.TOPIC, "t", "segment.bytes", "1048576"),
    )
    for node in (leader, follower):
        node.rm.apply_image(changed)
        assert node.log().config.max_message_bytes == 64
        assert node.log().config.segment_bytes == 1048576
        assert node.log("u").config == LogConfig()  # another topic keeps its settings
    too_large = await produce(leader, batch(1, tag=2))
    assert too_large.error is not None and too_large.error.error_name == "MESSAGE_TOO_LARGE"
    # Deleting the key brings back the broker default.
    restored = replayed(
        changed, ConfigRecord(ConfigResourceType.TOPIC, "t", "max.message.bytes", None)
    )
    leader.rm.apply_image(restored)
    assert leader.log().config.max_message_bytes == LogConfig().max_message_bytes
    assert leader.log().config.segment_bytes == 1048576
    assert (await produce(leader, batch(1, tag=3))).error is None


@pytest.mark.asyncio
async def test_a_refused_topic_setting_costs_only_its_own_key(
    tmp_path: Path, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    # One value the broker refuses must not put the whole topic on the broker defaults, or
    # `retention.ms=-1` next to it is lost (data deleted after 7 days).
    node = Node(tmp_path, 1, clock)
    topic = ConfigResourceType.TOPIC
    image = cluster_image(
        *create_topic("t", TID, (1,)),
        ConfigRecord(topic, "t", "retention.ms", "-1"),
        ConfigRecord(topic, "t", "max.message.bytes", "100"),
        ConfigRecord(topic, "t", "segment.bytes", "10"),  # below what a log can use
    )
    node.rm.apply_image(image)
    config = node.log().config
    assert (config.retention_ms, config.max_message_bytes) == (-1, 100)
    assert config.segment_bytes == LogConfig().segment_bytes  # the broker default
    assert "t: ignoring a log setting of topic 't'" in caplog.text
    assert "segment.bytes='10': must be an integer >= 64" in caplog.text


@pytest.mark.asyncio
async def test_dynamic_broker_log_configs_reach_the_logs_below_the_topics_own(
    tmp_path: Path, clock: ManualClock
) -> None:
    # A dynamic `message.max.bytes` (or any `log.*` key) on the cluster default or on this
    # broker reaches the logs, not only DescribeConfigs. Kafka's precedence: the topic's
    # config, this broker's, the cluster default, server.properties.
    def config(resource: str, key: str, value: str | None, *, topic: bool = False) -> ConfigRecord:
        kind = ConfigResourceType.TOPIC if topic else ConfigResourceType.BROKER
        return ConfigRecord(kind, resource, key, value)

    node = Node(tmp_path, 1, clock)
    image = cluster_image(*create_topic("t", TID, (1,)))
    node.rm.apply_image(image)
    assert node.log().config == LogConfig()
    image = replayed(
        image, config("", "message.max.bytes", "100"), config("", "log.retention.ms", "-1")
    )
    node.rm.apply_image(image)
    assert (node.log().config.max_message_bytes, node.log().config.retention_ms) == (100, -1)
    too_large = await produce(node, batch(5))
    assert too_large.error is not None and too_large.error.error_name == "MESSAGE_TOO_LARGE"
    image = replayed(
        image, config("1", "message.max.bytes", "200"), config("2", "message.max.bytes", "50")
    )
    node.rm.apply_image(image)
    assert node.log().config.max_message_bytes == 200  # this broker's own, not broker 2's
    image = replayed(image, config("t", "max.message.bytes", "300", topic=True))
    node.rm.apply_image(image)
    assert node.log().config.max_message_bytes == 300  # the topic's wins
    image = replayed(
        image,
        config("t", "max.message.bytes", None, topic=True),
        config("1", "message.max.bytes", None),
        config("", "message.max.bytes", None),
    )
    node.rm.apply_image(image)
    assert node.log().config.max_message_bytes == LogConfig().max_message_bytes
    assert node.log().config.retention_ms == -1  # still the cluster default's


@pytest.mark.asyncio
async def test_produce_errors_per_partition(tmp_path: Path, clock: ManualClock) -> None:
    leader, follower, _ = two_nodes(tmp_path, clock)
    bad_acks = await leader.rm.produce(produce_request(batch(), acks=2))
    assert isinstance(bad_acks.partitions[0].error, InvalidRequiredAcksError)
    assert bad_acks.partitions[0].error.error_name == "INVALID_REQUIRED_ACKS"
    unknown = await produce(leader, batch(), topic="nope")
    assert isinstance(unknown.error, UnknownTopicOrPartitionError)
    assert "nope-0" in str(unknown.error)
    missing_partition = await produce(leader, batch(), partition=5)
    assert isinstance(missing_partition.error, UnknownTopicOrPartitionError)
    not_leader = await produce(follower, batch())
    assert isinstance(not_leader.error, NotLeaderOrFollowerError)
    assert not_leader.current_leader == LeaderIdAndEpoch(1, 0)
    # Storage validation passes through with its own Kafka class.
    corrupt = bytearray(batch())
    corrupt[-1] ^= 0xFF
    crc = await produce(leader, bytes(corrupt))
    assert isinstance(crc.error, CorruptRecordError)
    assert crc.error.error_name == "CORRUPT_MESSAGE"
    offset_set = await produce(leader, batch(base_offset=7))
    assert isinstance(offset_set.error, InvalidRecordError)
    assert leader.log().log_end_offset == 0
    # One request, several partitions: each gets its own answer.
    mixed = await leader.rm.produce(
        ProduceRequest(
            1, 1000, (ProducePartition("t", 0, batch()), ProducePartition("t", 9, batch()))
        )
    )
    assert mixed.partitions[0].error is None
    assert isinstance(mixed.partitions[1].error, UnknownTopicOrPartitionError)


@pytest.mark.asyncio
async def test_idempotent_retry_is_answered_with_original_offsets(
    tmp_path: Path, clock: ManualClock
) -> None:
    node = solo_node(tmp_path, clock)

    def idempotent(sequence: int, count: int = 2, tag: int = 0) -> bytes:
        return batch(count, tag=tag, producer_id=7, producer_epoch=0, base_sequence=sequence)

    assert (await produce(node, batch())).base_offset == 0  # not idempotent
    first = await produce(node, idempotent(0))
    second = await produce(node, idempotent(2, tag=1))
    assert (first.base_offset, second.base_offset) == (1, 3)
    retry = await produce(node, idempotent(0), acks=-1)
    assert retry.error is None and retry.base_offset == 1
    assert node.log().log_end_offset == 5  # not appended again
    gap = await produce(node, idempotent(9))
    assert isinstance(gap.error, OutOfOrderSequenceNumberError)
    assert "t-0" in str(gap.error)
    # A corrupt batch is reported as corruption, not as a sequence error.
    corrupt = bytearray(idempotent(9))
    corrupt[-1] ^= 0xFF
    assert isinstance((await produce(node, bytes(corrupt))).error, CorruptRecordError)
    # Producer state survives a leader epoch change: it is rebuilt from the log headers.
    image = node.rm.image
    node.rm.apply_image(replayed(image, PartitionChangeRecord(TID, 0, leader=1)))
    assert node.leader().leader_epoch == 1
    again = await produce(node, idempotent(2, tag=1))
    assert again.base_offset == 3
    assert node.log().log_end_offset == 5


@pytest.mark.asyncio
async def test_waiting_produce_fails_when_leadership_moves(
    tmp_path: Path, clock: ManualClock
) -> None:
    leader, _, image = two_nodes(tmp_path, clock)
    task = asyncio.create_task(leader.rm.produce(produce_request(batch(), acks=-1)))
    await settle()
    leader.rm.apply_image(replayed(image, PartitionChangeRecord(TID, 0, leader=2, isr=(2,))))
    (result,) = (await asyncio.wait_for(task, DONE_S)).partitions
    assert isinstance(result.error, NotLeaderOrFollowerError)
    assert result.current_leader == LeaderIdAndEpoch(2, 1)


# --- fetch ------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_consumer_fetch_never_returns_data_at_or_above_hw(
    tmp_path: Path, clock: ManualClock
) -> None:
    leader, follower, _ = two_nodes(tmp_path, clock)
    await produce(leader, batch(2))
    await produce(leader, batch(3, tag=1))
    empty = await consumer_fetch(leader, 0)
    assert empty.error is None and empty.records == b"" and empty.high_watermark == 0
    await replicate(follower, leader)
    await produce(leader, batch(1, tag=2))  # offset 5, not replicated yet
    await replicate(follower, leader)  # leader learns LEO 5: HW 5
    assert leader.leader().high_watermark == 5
    assert leader.log().log_end_offset == 6
    result = await consumer_fetch(leader, 0)
    assert batch_offsets(result.records) == [(0, 1), (2, 4)]
    assert result.high_watermark == 5 and result.last_stable_offset == 5
    at_hw = await consumer_fetch(leader, 5)
    assert at_hw.error is None and at_hw.records == b""
    # A follower reads up to the LEO.
    follower_read = await leader.rm.fetch(
        FetchRequest((FetchPartition("t", 0, 5),), replica_id=3, max_wait_ms=0)
    )
    assert isinstance(follower_read.partitions[0].error, NotLeaderOrFollowerError)  # not a replica
    assert (await consumer_fetch(follower, 0)).error is not None  # followers do not serve


@pytest.mark.asyncio
async def test_fetch_byte_budget_over_partitions(tmp_path: Path, clock: ManualClock) -> None:
    (node,) = nodes_with(tmp_path, clock, (1,), (1,))
    for partition in (0, 1):
        for tag in range(3):
            await produce(node, batch(1, tag=tag), partition=partition)
    one_batch = len(batch(1))
    response = await node.rm.fetch(
        FetchRequest(
            (FetchPartition("t", 0, 0, partition_max_bytes=1), FetchPartition("t", 1, 0)),
            max_wait_ms=0,
            max_bytes=one_batch * 2,
        )
    )
    first, second = response.partitions
    # min_one_message gives the first partition one whole batch despite partition_max_bytes=1;
    # the second gets what is left of max_bytes, and no more batches than fit.
    assert batch_offsets(first.records) == [(0, 0)]
    assert batch_offsets(second.records) == [(0, 0)]
    zero = await node.rm.fetch(
        FetchRequest(
            (FetchPartition("t", 0, 0), FetchPartition("t", 1, 0)),
            max_wait_ms=0,
            max_bytes=one_batch,
        )
    )
    assert len(zero.partitions[0].records) == one_batch
    assert zero.partitions[1].records == b""  # the budget is spent after the first partition


@pytest.mark.asyncio
async def test_fetch_waits_in_purgatory_until_an_append(tmp_path: Path, clock: ManualClock) -> None:
    node = solo_node(tmp_path, clock)
    task = asyncio.create_task(consumer_fetch(node, 0, max_wait_ms=5000))
    await settle()
    assert pending(task)
    await produce(node, batch(2))
    result = await asyncio.wait_for(task, DONE_S)
    assert result.error is None and batch_offsets(result.records) == [(0, 1)]


@pytest.mark.asyncio
async def test_fetch_returns_empty_after_max_wait(tmp_path: Path, clock: ManualClock) -> None:
    node = solo_node(tmp_path, clock)
    task = asyncio.create_task(consumer_fetch(node, 0, max_wait_ms=500))
    await settle()
    node.rm.tick(clock.advance(499))
    await settle()
    assert pending(task)
    node.rm.tick(clock.advance(1))
    result = await asyncio.wait_for(task, DONE_S)
    assert result.error is None and result.records == b"" and result.high_watermark == 0


@pytest.mark.asyncio
async def test_parked_follower_fetch_is_woken_by_a_leader_append(
    tmp_path: Path, clock: ManualClock
) -> None:
    leader, follower, _ = two_nodes(tmp_path, clock)
    request = follower.rm.build_follower_fetch(1, clock())
    assert request is not None
    task = asyncio.create_task(leader.rm.fetch(request))
    await settle()
    assert pending(task)
    await produce(leader, batch(3))
    response = await asyncio.wait_for(task, DONE_S)
    assert batch_offsets(response.partitions[0].records) == [(0, 2)]
    follower.rm.process_follower_fetch(1, request, response, clock())
    assert follower.log().log_end_offset == 3


@pytest.mark.asyncio
async def test_fetch_errors(tmp_path: Path, clock: ManualClock) -> None:
    leader, _, _ = two_nodes(tmp_path, clock)
    await produce(leader, batch(2))
    past_end = await consumer_fetch(leader, 10)
    assert isinstance(past_end.error, OffsetOutOfRangeError)
    assert past_end.log_end_offset == -1  # consumers are not told the LEO
    assert past_end.log_start_offset == 0
    as_follower = await leader.rm.fetch(
        FetchRequest((FetchPartition("t", 0, 10),), replica_id=2, max_wait_ms=0)
    )
    assert isinstance(as_follower.partitions[0].error, OffsetOutOfRangeError)
    assert as_follower.partitions[0].log_end_offset == 2
    older = await consumer_fetch(leader, 0, current_leader_epoch=0)
    assert older.error is None
    newer = await consumer_fetch(leader, 0, current_leader_epoch=4)
    assert isinstance(newer.error, UnknownLeaderEpochError)
    assert newer.current_leader == LeaderIdAndEpoch(1, 0)
    wrong_id = await consumer_fetch(leader, 0, topic_id=topic_id(99))
    assert isinstance(wrong_id.error, UnknownTopicIdError)
    unknown = await consumer_fetch(leader, 0, topic="nope")
    assert isinstance(unknown.error, UnknownTopicOrPartitionError)
    # An error answers at once even with a long max wait.
    assert isinstance((await consumer_fetch(leader, 10, max_wait_ms=60000)).error, KafkaError)


@pytest.mark.asyncio
async def test_fenced_leader_epoch_on_fetch(tmp_path: Path, clock: ManualClock) -> None:
    node = solo_node(tmp_path, clock)
    node.rm.apply_image(replayed(node.rm.image, PartitionChangeRecord(TID, 0, leader=1)))
    stale = await consumer_fetch(node, 0, current_leader_epoch=0)
    assert isinstance(stale.error, FencedLeaderEpochError)
    assert stale.error.error_name == "FENCED_LEADER_EPOCH"
    assert stale.current_leader == LeaderIdAndEpoch(1, 1)


# --- divergence and truncation ----------------------------------------------------------------


@pytest.mark.asyncio
async def test_diverging_epoch_then_follower_truncation(tmp_path: Path, clock: ManualClock) -> None:
    a, b, image = two_nodes(tmp_path, clock)
    await produce(a, batch(1, tag=0))
    await produce(a, batch(1, tag=1))
    await replicate(b, a)
    await replicate(b, a)
    assert b.log().log_end_offset == 2
    await produce(a, batch(1, tag=2))  # offset 2, epoch 0: never replicated
    # B becomes leader in epoch 1 with ISR {B}; A follows.
    moved = replayed(image, PartitionChangeRecord(TID, 0, leader=2, isr=(2,)))
    for node in (a, b):
        node.rm.apply_image(moved)
    assert b.log().leader_epoch_cache.latest_epoch == 1
    assert (await produce(b, batch(1, tag=3))).base_offset == 2  # offset 2, epoch 1
    assert a.rm.fetch_sources() == [2]
    assert b.rm.fetch_sources() == []  # the follower that became leader fetches from no one

    request = a.rm.build_follower_fetch(2, clock())
    assert request is not None
    (entry,) = request.partitions
    assert (entry.fetch_offset, entry.last_fetched_epoch, entry.current_leader_epoch) == (3, 0, 1)
    response = await b.rm.fetch(replace(request, max_wait_ms=0))
    (result,) = response.partitions
    assert result.error is None and result.records == b""
    assert result.diverging_epoch == EpochEndOffsetResult(0, 2)
    progress = b.leader().progress(1)
    # not recorded (docs/design/replication.md#truncate-on-fetch)
    assert progress is not None and progress.log_end_offset == -1

    a.rm.process_follower_fetch(2, request, response, clock())
    assert a.log().log_end_offset == 2  # truncated at the divergence, not to its HW
    await replicate(a, b)
    assert a.log().log_end_offset == 3
    assert whole_log(a) == whole_log(b)
    assert a.log().leader_epoch_cache.entries() == b.log().leader_epoch_cache.entries()
    state = a.rm.partition("t", 0)
    assert state is not None and state.follower is not None
    assert state.follower.last_fetched_epoch == 1
    # Caught up into epoch 1: the leader proposes adding A back.
    await replicate(a, b)
    (change,) = b.rm.pending_isr_changes()
    assert change.is_expansion and change.new_isr == (2, 1)


@pytest.mark.asyncio
async def test_multi_round_truncation_through_fetches(tmp_path: Path, clock: ManualClock) -> None:
    """Follower epochs {0, 2}, leader epochs {0, 1, 3}: two DivergingEpoch rounds
    (docs/design/replication.md#iterative-truncation-example)."""
    a, b, image = two_nodes(tmp_path, clock)
    await produce(a, batch(1, tag=0))  # 0@e0 on A
    await replicate(b, a)
    await replicate(b, a)
    # Epoch 1: B leads and writes 1@e1; A does not fetch it.
    e1 = replayed(image, PartitionChangeRecord(TID, 0, leader=2, isr=(2,)))
    for node in (a, b):
        node.rm.apply_image(e1)
    await produce(b, batch(1, tag=1))
    # Epoch 2: A leads (unclean, as a harness-controller may force) and writes 1@e2, 2@e2.
    e2 = replayed(e1, PartitionChangeRecord(TID, 0, leader=1, isr=(1,)))
    for node in (a, b):
        node.rm.apply_image(e2)
    await produce(a, batch(1, tag=2))
    await produce(a, batch(1, tag=3))
    # Epoch 3: B leads again and writes 2@e3.
    e3 = replayed(e2, PartitionChangeRecord(TID, 0, leader=2, isr=(2,)))
    for node in (a, b):
        node.rm.apply_image(e3)
    await produce(b, batch(1, tag=4))
    assert [e.leader_epoch for e in a.log().leader_epoch_cache.entries()] == [0, 2]
    rounds = 0
    while whole_log(a) != whole_log(b):
        rounds += 1
        assert rounds < 10
        await replicate(a, b)
    assert a.log().log_end_offset == b.log().log_end_offset == 3
    assert a.log().leader_epoch_cache.entries() == b.log().leader_epoch_cache.entries()
    assert rounds >= 2


@pytest.mark.asyncio
async def test_follower_offset_out_of_range_handling(tmp_path: Path, clock: ManualClock) -> None:
    leader, follower, _ = two_nodes(tmp_path, clock)
    for tag in range(3):
        await produce(leader, batch(1, tag=tag))
    await replicate(follower, leader)
    assert follower.log().log_end_offset == 3

    def out_of_range(log_end_offset: int, log_start_offset: int) -> FetchResponse:
        return FetchResponse(
            (
                FetchPartitionResult(
                    "t",
                    0,
                    OffsetOutOfRangeError("t-0: test"),
                    high_watermark=0,
                    log_start_offset=log_start_offset,
                    log_end_offset=log_end_offset,
                ),
            )
        )

    # The leader's LEO is below ours (unclean election): truncate to it.
    request = follower.rm.build_follower_fetch(1, clock())
    assert request is not None
    follower.rm.process_follower_fetch(1, request, out_of_range(1, 0), clock())
    assert follower.log().log_end_offset == 1
    # The leader's log starts past our LEO: restart the log there.
    request = follower.rm.build_follower_fetch(1, clock())
    assert request is not None and request.partitions[0].fetch_offset == 1
    follower.rm.process_follower_fetch(1, request, out_of_range(20, 10), clock())
    assert follower.log().log_start_offset == follower.log().log_end_offset == 10
    request = follower.rm.build_follower_fetch(1, clock())
    assert request is not None and request.partitions[0].fetch_offset == 10
    assert request.partitions[0].last_fetched_epoch == -1
    # Neither: back off instead of spinning.
    follower.rm.process_follower_fetch(1, request, out_of_range(20, 5), clock())
    assert follower.rm.build_follower_fetch(1, clock()) is None


@pytest.mark.asyncio
async def test_follower_errors_back_off_and_retry(tmp_path: Path, clock: ManualClock) -> None:
    leader, follower, _ = two_nodes(tmp_path, clock, replica_fetch_backoff_ms=200)
    request = follower.rm.build_follower_fetch(1, clock())
    assert request is not None
    fenced = FetchResponse(
        (FetchPartitionResult("t", 0, FencedLeaderEpochError("t-0: leader epoch 0 < 1")),)
    )
    follower.rm.process_follower_fetch(1, request, fenced, clock())
    assert follower.rm.build_follower_fetch(1, clock()) is None
    assert follower.rm.next_tick_ms() == clock() + 200
    follower.rm.fetch_wakeup.clear()
    follower.rm.tick(clock.advance(200))
    assert follower.rm.fetch_wakeup.is_set()
    request = follower.rm.build_follower_fetch(1, clock())
    assert request is not None
    follower.rm.follower_fetch_failed(1, request, clock())  # the leader is unreachable
    assert follower.rm.build_follower_fetch(1, clock()) is None
    clock.advance(200)
    assert follower.rm.build_follower_fetch(1, clock()) is not None
    # A stale answer (the fetch offset moved meanwhile) is ignored.
    await produce(leader, batch(2))
    stale_request = follower.rm.build_follower_fetch(1, clock())
    assert stale_request is not None
    await replicate(follower, leader)
    response = await leader.rm.fetch(replace(stale_request, max_wait_ms=0))
    follower.rm.process_follower_fetch(1, stale_request, response, clock())
    assert follower.log().log_end_offset == 2
    other = FetchResponse((FetchPartitionResult("t", 0, UnknownServerError("t-0: boom")),))
    request = follower.rm.build_follower_fetch(1, clock())
    assert request is not None
    follower.rm.process_follower_fetch(1, request, other, clock())
    assert follower.rm.build_follower_fetch(1, clock()) is None


@pytest.mark.asyncio
async def test_a_back_off_ends_at_its_latest_deadline_or_with_a_new_role(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Back-off deadlines are kept soonest first; one restarted or ended by a new role
    leaves a stale deadline behind, which neither ends the new back-off early nor wakes the
    timer."""
    _, follower, image = two_nodes(tmp_path, clock, replica_fetch_backoff_ms=200)
    rm = follower.rm
    boom = FetchResponse((FetchPartitionResult("t", 0, UnknownServerError("t-0: boom")),))
    request = rm.build_follower_fetch(1, clock())
    assert request is not None
    rm.follower_fetch_failed(1, request, clock())  # backs off until 200
    assert rm.build_follower_fetch(1, clock.advance(200)) is not None  # ended on time
    rm.process_follower_fetch(1, request, boom, clock())  # backs off until 400
    first_end = clock() + 200
    clock.advance(100)
    again = rm.build_follower_fetch(1, clock.advance(100))
    assert again is not None
    rm.process_follower_fetch(1, again, boom, clock())  # restarted: until 600
    assert rm.next_tick_ms() == first_end + 200
    assert rm.build_follower_fetch(1, clock.advance(100)) is None  # past 400: still backing off
    assert rm.build_follower_fetch(1, clock.advance(100)) is not None
    request = rm.build_follower_fetch(1, clock())
    assert request is not None
    rm.process_follower_fetch(1, request, boom, clock())
    assert rm.build_follower_fetch(1, clock()) is None
    # A new leader epoch gives a new follower state, with no back-off.
    rm.apply_image(replayed(image, PartitionChangeRecord(TID, 0, leader=1, isr=(1, 2))))
    assert rm.build_follower_fetch(1, clock()) is not None
    assert rm.next_tick_ms() != clock() + 200


@pytest.mark.asyncio
async def test_back_offs_due_together_end_a_bounded_number_at_a_time(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(follower_fetch, "BACKOFF_ENDS_PER_CALL", 2)
    _, follower = nodes_with(tmp_path, clock, (1, 2), (1, 2), (1, 2), replica_fetch_backoff_ms=200)
    rm = follower.rm
    request = rm.build_follower_fetch(1, clock())
    assert request is not None and len(request.partitions) == 3
    rm.follower_fetch_failed(1, request, clock())  # all three back off until 200
    clock.advance(200)
    rm.tick(clock())  # ends two, and the timer is due again at once for the third
    assert rm.next_tick_ms() <= clock()
    request = rm.build_follower_fetch(1, clock())  # the build ends the third
    assert request is not None and len(request.partitions) == 3


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "spoil",
    [
        pytest.param(lambda data, last: data.__setitem__(len(data) - 1, data[-1] ^ 4), id="crc"),
        # The last batch's leader epoch (bytes 12-15, outside the CRC) gains bit 16.
        pytest.param(
            lambda data, last: data.__setitem__(last + 13, data[last + 13] ^ 1), id="epoch"
        ),
    ],
)
async def test_a_follower_stores_no_answer_spoilt_on_the_wire_and_fetches_it_again(
    tmp_path: Path, clock: ManualClock, spoil: Any
) -> None:
    leader, follower, _ = two_nodes(tmp_path, clock, replica_fetch_backoff_ms=200)
    await produce(leader, batch(2, tag=1))
    await produce(leader, batch(3, tag=2))
    request = follower.rm.build_follower_fetch(1, clock())
    assert request is not None
    answer = await leader.rm.fetch(replace(request, max_wait_ms=0))
    (result,) = answer.partitions
    records = bytearray(result.records)
    spoil(records, [position for position, _ in iter_frames(bytes(records))][-1])
    spoilt = FetchResponse((replace(result, records=bytes(records)),))
    follower.rm.process_follower_fetch(1, request, spoilt, clock())
    assert follower.log().log_end_offset == 0  # nothing of the answer stored
    assert follower.rm.build_follower_fetch(1, clock()) is None  # backing off
    clock.advance(200)
    await replicate(follower, leader)
    assert whole_log(follower) == whole_log(leader)
    assert follower.log().leader_epoch_cache.entries() == leader.log().leader_epoch_cache.entries()


@pytest.mark.asyncio
async def test_a_leader_serving_a_corrupt_batch_counts_each_refusal_and_logs_one_error(
    tmp_path: Path, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    """Before: a WARNING per retry, forever, and nothing an alert could watch."""
    leader, follower, _ = two_nodes(tmp_path, clock, replica_fetch_backoff_ms=200)
    await produce(leader, batch(2, tag=1))
    await produce(leader, batch(3, tag=2))

    def refused() -> float | None:
        return follower.rm.counters.registry.get_sample_value(
            "replog_follower_corrupt_fetch_total", {"topic": "t", "partition": "0"}
        )

    for _ in range(3):  # the leader serves the same damaged bytes on every retry
        request = follower.rm.build_follower_fetch(1, clock())
        assert request is not None
        (result,) = (await leader.rm.fetch(replace(request, max_wait_ms=0))).partitions
        records = bytearray(result.records)
        records[-1] ^= 4  # the second batch (offsets 2-4) fails its CRC
        with caplog.at_level(logging.DEBUG, logger="replog.server.data_plane.replica_manager"):
            follower.rm.process_follower_fetch(
                1, request, FetchResponse((replace(result, records=bytes(records)),)), clock()
            )
        clock.advance(200)
    assert refused() == 3
    errors = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.levelname for r in errors] == ["ERROR"]
    message = errors[0].getMessage()
    assert message.startswith("t-0: the leader, broker 1, sent a corrupt batch at offset 2 (")
    assert "CRC-32C mismatch" in message and "replog_follower_corrupt_fetch_total" in message
    # The leader itself answering CORRUPT_MESSAGE counts too, at the fetch offset: a new ERROR.
    caplog.clear()
    request = follower.rm.build_follower_fetch(1, clock())
    assert request is not None
    answered = FetchResponse((FetchPartitionResult("t", 0, CorruptRecordError("t-0: bad")),))
    follower.rm.process_follower_fetch(1, request, answered, clock())
    assert refused() == 4
    (again,) = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert "sent a corrupt batch at offset 0 (t-0: bad)" in again.getMessage()


@pytest.mark.asyncio
async def test_follower_high_watermark_and_log_start_follow_the_leader(
    tmp_path: Path, clock: ManualClock
) -> None:
    leader, follower, _ = two_nodes(tmp_path, clock)
    for tag in range(4):
        await produce(leader, batch(1, tag=tag))
    await replicate(follower, leader)
    assert follower.log().high_watermark == 0  # the HW in the answer was captured before
    await replicate(follower, leader)
    assert leader.leader().high_watermark == 4
    assert follower.log().high_watermark == 0
    await replicate(follower, leader)
    assert follower.log().high_watermark == 4
    await leader.rm.delete_records(
        DeleteRecordsRequest((DeleteRecordsPartition("t", 0, 3),), timeout_ms=0)
    )
    await replicate(follower, leader)
    assert follower.log().log_start_offset == 3


@pytest.mark.asyncio
async def test_describe_producers_is_answered_by_every_replica(
    tmp_path: Path, clock: ManualClock
) -> None:
    # Kafka answers DescribeProducers from any replica (`kafka-transactions describe-producers
    # --broker-id <follower>`): a follower records the idempotent batches it replicates.
    leader, follower, other = nodes_with(tmp_path, clock, (1, 2), (3,))
    await produce(leader, batch(2, producer_id=7, producer_epoch=1, base_sequence=0))
    await produce(leader, batch(3, tag=1, producer_id=7, producer_epoch=1, base_sequence=2))
    await produce(leader, batch(1, tag=2, producer_id=9, producer_epoch=0, base_sequence=0))
    await replicate(follower, leader)
    led = leader.rm.describe_producers("t", 0)
    assert [(p.producer_id, p.producer_epoch, p.last_sequence) for p in led] == [
        (7, 1, 4),
        (9, 0, 0),
    ]
    assert follower.rm.describe_producers("t", 0) == led
    with pytest.raises(NotLeaderOrFollowerError, match=r"broker 3 hosts no replica of it"):
        other.rm.describe_producers("t", 0)
    with pytest.raises(UnknownTopicOrPartitionError):
        follower.rm.describe_producers("t", 5)


@pytest.mark.asyncio
async def test_idle_producer_ids_expire_against_the_wall_clock(
    tmp_path: Path, clock: ManualClock
) -> None:
    # `remove_expired` runs on a timer, or the producer table of a led partition grows without
    # bound. The table holds batch timestamps (wall-clock ms), so the
    # check reads the wall clock, every producer.id.expiration.check.interval.ms of the timers.
    wall = ManualClock(T0)
    node = Node(
        tmp_path,
        1,
        clock,
        wall_clock=wall,
        producer_id_expiration_ms=60_000,
        producer_id_expiration_check_interval_ms=10_000,
    )
    node.rm.apply_image(cluster_image(*create_topic("t", TID, (1,))))
    await produce(node, batch(producer_id=7, producer_epoch=0, base_sequence=0))
    later = batch(timestamp=T0 + 30_000, producer_id=8, producer_epoch=0, base_sequence=0)
    await produce(node, later)
    partition = node.rm.partition("t", 0)
    assert partition is not None
    table = partition.producer_state
    assert table.entry(7) is not None and table.entry(8) is not None
    assert node.rm.next_tick_ms() == clock() + 10_000
    wall.now_ms = T0 + 60_000  # producer 7 has been idle for producer.id.expiration.ms
    node.rm.tick(clock.advance(9_999))  # the check is not due yet
    assert table.entry(7) is not None
    node.rm.tick(clock.advance(1))
    assert table.entry(7) is None and table.entry(8) is not None
    assert node.rm.next_tick_ms() <= clock() + 10_000
    wall.now_ms = T0 + 90_000
    node.rm.tick(clock.advance(10_000))
    assert table.entry(8) is None


# --- ISR --------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_isr_shrinks_after_the_lag_and_expands_when_caught_up(
    tmp_path: Path, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    leader, follower, _ = two_nodes(tmp_path, clock)
    await produce(leader, batch())
    leader.rm.tick(clock.advance(15000))
    assert leader.rm.pending_isr_changes() == []  # still within replica.lag.time.max.ms
    assert leader.rm.next_tick_ms() == clock() + 15000
    leader.rm.isr_wakeup.clear()
    with caplog.at_level(logging.INFO, logger="replog.server.data_plane.replica_manager"):
        leader.rm.tick(clock.advance(15001))
    # One line per check, whatever the number of partitions shrunk.
    (line,) = [r.getMessage() for r in caplog.records if "shrinking the ISR" in r.getMessage()]
    assert line.startswith("broker 1: shrinking the ISR of 1 partitions")
    assert leader.rm.isr_wakeup.is_set()
    (shrink,) = leader.rm.pending_isr_changes()
    assert shrink.new_isr == (1,) and not shrink.is_expansion
    assert leader.rm.pending_isr_changes() == []  # handed out once
    assert leader.leader().maximal_isr == (1, 2)  # a pending shrink keeps the old ISR
    leader.rm.on_isr_change_result(shrink, None, (1,), 0, shrink.partition_epoch + 1)
    assert leader.leader().isr == (1,)
    assert leader.leader().high_watermark == 1  # no follower holds it back now
    await replicate(follower, leader)  # fetch at 0: not caught up to the HW 1
    assert leader.rm.pending_isr_changes() == []
    await replicate(follower, leader)  # fetch at 1
    (expand,) = leader.rm.pending_isr_changes()
    assert expand.is_expansion and expand.new_isr == (1, 2)
    assert expand.broker_epochs == (10, 20)
    assert leader.leader().maximal_isr == (1, 2)


@pytest.mark.asyncio
async def test_failed_isr_change_is_retried_after_a_back_off(
    tmp_path: Path, clock: ManualClock
) -> None:
    leader, _, _ = two_nodes(tmp_path, clock, replica_fetch_backoff_ms=100)
    leader.rm.tick(clock.advance(30001))
    (shrink,) = leader.rm.pending_isr_changes()
    leader.rm.on_isr_change_result(shrink, RequestTimedOutError("controller"), (), -1, -1)
    assert leader.rm.pending_isr_changes() == []
    leader.rm.tick(clock.advance(100))
    assert leader.rm.pending_isr_changes() == [shrink]


@pytest.mark.asyncio
async def test_isr_committed_through_metadata_clears_the_pending_change(
    tmp_path: Path, clock: ManualClock
) -> None:
    leader, _, image = two_nodes(tmp_path, clock)
    leader.rm.tick(clock.advance(30001))
    (shrink,) = leader.rm.pending_isr_changes()
    leader.rm.apply_image(replayed(image, PartitionChangeRecord(TID, 0, isr=(1,))))
    assert leader.leader().pending_isr_change is None
    assert leader.leader().isr == (1,)
    # A late answer to the settled change changes nothing.
    leader.rm.on_isr_change_result(shrink, None, (1,), 0, 1)
    assert leader.leader().isr == (1,)


# --- list offsets, offsets for leader epoch ---------------------------------------------------


@pytest.mark.asyncio
async def test_list_offsets(tmp_path: Path, clock: ManualClock) -> None:
    node = solo_node(tmp_path, clock)
    await produce(node, batch(1, timestamp=T0))
    await produce(node, batch(2, timestamp=T0 + 100, tag=1))  # offsets 1-2: T0+100, T0+101
    await produce(node, batch(1, timestamp=T0 + 50, tag=2))  # offset 3

    def ask(timestamp: int, **kwargs: Any) -> Any:
        response = node.rm.list_offsets(
            ListOffsetsRequest((ListOffsetsPartition("t", 0, timestamp, **kwargs),))
        )
        return response.partitions[0]

    earliest = ask(EARLIEST_TIMESTAMP)
    assert (earliest.offset, earliest.leader_epoch, earliest.error) == (0, 0, None)
    latest = ask(LATEST_TIMESTAMP)
    assert (latest.offset, latest.leader_epoch) == (4, 0)
    newest = ask(MAX_TIMESTAMP)
    assert (newest.offset, newest.timestamp) == (2, T0 + 101)
    by_time = ask(T0 + 60)
    assert (by_time.offset, by_time.timestamp) == (1, T0 + 100)
    none = ask(T0 + 1000)
    assert (none.offset, none.timestamp, none.error) == (-1, -1, None)
    assert isinstance(ask(LATEST_TIMESTAMP, current_leader_epoch=3).error, UnknownLeaderEpochError)
    assert isinstance(ask(-7).error, KafkaError)
    assert isinstance(
        node.rm.list_offsets(ListOffsetsRequest((ListOffsetsPartition("x", 0, -1),)))
        .partitions[0]
        .error,
        UnknownTopicOrPartitionError,
    )


@pytest.mark.asyncio
async def test_list_offsets_of_tiered_storage_are_answered_as_kafka_without_it(
    tmp_path: Path, clock: ManualClock
) -> None:
    """-4 (earliest local, KIP-405) is the log start offset, the whole log being local; -5
    (latest tiered, KIP-1005) and -6 (earliest pending upload, KIP-1023) are no offset, no
    epoch and no error: Kafka's `UnifiedLog.fetchOffsetByTimestamp` with remote storage off."""
    node = solo_node(tmp_path, clock)
    for tag in range(4):
        await produce(node, batch(1, tag=tag))

    def ask(timestamp: int, replica_id: int = -1) -> Any:
        request = ListOffsetsRequest((ListOffsetsPartition("t", 0, timestamp),), replica_id)
        return node.rm.list_offsets(request).partitions[0]

    for replica_id in (-1, 1):
        local = ask(EARLIEST_LOCAL_TIMESTAMP, replica_id)
        assert (local.error, local.offset, local.leader_epoch, local.timestamp) == (None, 0, 0, -1)
        for timestamp in (LATEST_TIERED_TIMESTAMP, EARLIEST_PENDING_UPLOAD_TIMESTAMP):
            none = ask(timestamp, replica_id)
            assert (none.error, none.offset, none.leader_epoch, none.timestamp) == (
                None,
                -1,
                -1,
                -1,
            )
    deleted = await node.rm.delete_records(
        DeleteRecordsRequest((DeleteRecordsPartition("t", 0, 2),))
    )
    assert deleted.partitions[0].error is None
    assert ask(EARLIEST_LOCAL_TIMESTAMP).offset == ask(EARLIEST_TIMESTAMP).offset == 2
    assert isinstance(ask(-7).error, InvalidRequestError)


@pytest.mark.asyncio
async def test_list_offsets_latest_is_hw_for_consumers_and_leo_for_replicas(
    tmp_path: Path, clock: ManualClock
) -> None:
    leader, follower, _ = two_nodes(tmp_path, clock)
    await produce(leader, batch(3))
    request = ListOffsetsRequest((ListOffsetsPartition("t", 0, LATEST_TIMESTAMP),))
    assert leader.rm.list_offsets(request).partitions[0].offset == 0
    as_replica = replace(request, replica_id=2)
    assert leader.rm.list_offsets(as_replica).partitions[0].offset == 3
    assert (
        leader.rm.list_offsets(ListOffsetsRequest((ListOffsetsPartition("t", 0, MAX_TIMESTAMP),)))
        .partitions[0]
        .offset
        == -1
    )  # nothing below the HW yet
    not_leader = follower.rm.list_offsets(request).partitions[0]
    assert isinstance(not_leader.error, NotLeaderOrFollowerError)


@pytest.mark.asyncio
async def test_a_new_leader_whose_hw_lags_its_epoch_answers_offset_not_available(
    tmp_path: Path, clock: ManualClock
) -> None:
    leader, follower, image = two_nodes(tmp_path, clock)
    produced = asyncio.create_task(produce(leader, batch(3, timestamp=T0), acks=-1))
    await asyncio.sleep(0)
    await replicate(follower, leader)
    await replicate(follower, leader)
    assert (await produced).error is None  # acknowledged: offsets 0-2 committed
    # The old leader dies before the follower learns the HW; the follower is elected.
    follower.rm.apply_image(replayed(image, PartitionChangeRecord(TID, 0, leader=2)))
    state = follower.leader()
    assert (state.leader_epoch_start_offset, state.high_watermark) == (3, 0)

    def ask(timestamp: int, replica_id: int = -1) -> Any:
        request = ListOffsetsRequest((ListOffsetsPartition("t", 0, timestamp),), replica_id)
        return follower.rm.list_offsets(request).partitions[0]

    # "latest" would be 0, and "nothing at or after T0" false: retry, as Kafka answers.
    for timestamp in (LATEST_TIMESTAMP, T0, MAX_TIMESTAMP):
        answer = ask(timestamp)
        assert isinstance(answer.error, OffsetNotAvailableError), timestamp
        assert "high watermark 0 of leader epoch 1" in str(answer.error)
    assert ask(EARLIEST_TIMESTAMP).offset == 0  # the log start needs no HW
    assert ask(LATEST_TIMESTAMP, replica_id=1).offset == 3  # a replica's bound is the LEO


@pytest.mark.asyncio
async def test_offsets_for_leader_epoch(tmp_path: Path, clock: ManualClock) -> None:
    leader, follower, image = two_nodes(tmp_path, clock)
    await produce(leader, batch(2))
    bumped = replayed(image, PartitionChangeRecord(TID, 0, leader=1))
    leader.rm.apply_image(bumped)
    follower.rm.apply_image(bumped)
    await produce(leader, batch(1))

    def ask(leader_epoch: int, current: int = -1, node: Node = leader) -> Any:
        request = OffsetsForLeaderEpochRequest(
            (OffsetForLeaderPartition("t", 0, leader_epoch, current),)
        )
        return node.rm.offsets_for_leader_epoch(request).partitions[0]

    first = ask(0)
    assert (first.leader_epoch, first.end_offset, first.error) == (0, 2, None)
    latest = ask(1, current=1)
    assert (latest.leader_epoch, latest.end_offset) == (1, 3)
    unknown = ask(5)
    assert (unknown.leader_epoch, unknown.end_offset, unknown.error) == (-1, -1, None)
    assert isinstance(ask(0, current=0).error, FencedLeaderEpochError)
    assert isinstance(ask(0, current=2).error, UnknownLeaderEpochError)
    assert isinstance(ask(0, node=follower).error, NotLeaderOrFollowerError)


# --- delete records ---------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_delete_records_single_replica(tmp_path: Path, clock: ManualClock) -> None:
    node = solo_node(tmp_path, clock)
    for tag in range(4):
        await produce(node, batch(1, tag=tag))

    async def delete(offset: int) -> Any:
        response = await node.rm.delete_records(
            DeleteRecordsRequest((DeleteRecordsPartition("t", 0, offset),))
        )
        return response.partitions[0]

    done = await delete(2)
    assert (done.error, done.low_watermark) == (None, 2)
    assert node.log().log_start_offset == 2
    past = await delete(9)
    assert isinstance(past.error, OffsetOutOfRangeError) and "t-0" in str(past.error)
    all_of_it = await delete(-1)
    assert all_of_it.low_watermark == 4
    assert (await consumer_fetch(node, 0)).error is not None  # below the log start now
    unknown = await node.rm.delete_records(
        DeleteRecordsRequest((DeleteRecordsPartition("nope", 0, 1),))
    )
    assert isinstance(unknown.partitions[0].error, UnknownTopicOrPartitionError)


@pytest.mark.asyncio
async def test_delete_records_waits_for_the_followers_log_start(
    tmp_path: Path, clock: ManualClock
) -> None:
    leader, follower, _ = two_nodes(tmp_path, clock)
    for tag in range(3):
        await produce(leader, batch(1, tag=tag))
    await replicate(follower, leader)
    await replicate(follower, leader)
    assert leader.leader().high_watermark == 3
    task = asyncio.create_task(
        leader.rm.delete_records(DeleteRecordsRequest((DeleteRecordsPartition("t", 0, 2),)))
    )
    await settle()
    assert pending(task)
    assert leader.log().log_start_offset == 2
    await replicate(follower, leader)  # the follower learns log start 2
    await settle()
    assert pending(task)
    await replicate(follower, leader)  # and reports it
    (result,) = (await asyncio.wait_for(task, DONE_S)).partitions
    assert (result.error, result.low_watermark) == (None, 2)


@pytest.mark.asyncio
async def test_delete_records_times_out(tmp_path: Path, clock: ManualClock) -> None:
    leader, follower, _ = two_nodes(tmp_path, clock)
    await produce(leader, batch(2))
    await replicate(follower, leader)
    await replicate(follower, leader)
    task = asyncio.create_task(
        leader.rm.delete_records(
            DeleteRecordsRequest((DeleteRecordsPartition("t", 0, 1),), timeout_ms=100)
        )
    )
    await settle()
    leader.rm.tick(clock.advance(100))
    (result,) = (await asyncio.wait_for(task, DONE_S)).partitions
    assert isinstance(result.error, RequestTimedOutError)
    assert result.low_watermark == 0


# --- lifecycle --------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_stop_answers_every_waiter(tmp_path: Path, clock: ManualClock) -> None:
    leader, _, _ = two_nodes(tmp_path, clock)
    await leader.rm.start()
    produce_task = asyncio.create_task(leader.rm.produce(produce_request(batch(), acks=-1)))
    fetch_task = asyncio.create_task(consumer_fetch(leader, 0, max_wait_ms=60000))
    await settle()
    assert pending(produce_task) and pending(fetch_task)
    await leader.rm.stop()
    (produced,) = (await asyncio.wait_for(produce_task, DONE_S)).partitions
    fetched = await asyncio.wait_for(fetch_task, DONE_S)
    assert isinstance(produced.error, NotLeaderOrFollowerError)
    assert isinstance(fetched.error, NotLeaderOrFollowerError)


@pytest.mark.asyncio
async def test_the_timer_wakes_for_an_earlier_deadline_only(tmp_path: Path) -> None:
    """Fetches park hundreds of times a second: one whose deadline is after the timer's next
    wake must not wake it (each tick walks every partition), an earlier one must."""

    def monotonic_ms() -> int:
        return int(time.monotonic() * 1000)

    node = solo_node(tmp_path, monotonic_ms)  # type: ignore[arg-type]
    ticks = [0]
    tick = node.rm.tick

    def counted(now_ms: int) -> None:
        ticks[0] += 1
        tick(now_ms)

    node.rm.tick = counted  # type: ignore[method-assign]
    await node.rm.start()
    try:
        late = [asyncio.create_task(consumer_fetch(node, 0, max_wait_ms=4000))]
        await settle()
        ticks_before = ticks[0]
        late += [asyncio.create_task(consumer_fetch(node, 0, max_wait_ms=4000)) for _ in range(20)]
        await settle()
        assert ticks[0] == ticks_before  # none of them moved the timer's next wake
        soon = await consumer_fetch(node, 0, max_wait_ms=50)  # its deadline comes first
        assert soon.error is None and soon.records == b""
        assert ticks[0] > ticks_before and all(pending(task) for task in late)
    finally:
        await node.rm.stop()


@pytest.mark.asyncio
async def test_a_started_manager_gives_its_leaders_a_new_registration_in_bounded_rounds(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A broker fenced changes the eligibility of every partition this broker leads: a started
    manager walks them a round at a time, the loop's other tasks running between rounds,
    and in the end every leader has the new image's eligibility."""
    monkeypatch.setattr(replica_manager, "APPLY_ROUND_CHANGES", 4)
    (node, _) = nodes_with(tmp_path, clock, *[(1, 2)] * 11)
    await node.rm.start()
    try:
        fenced = replayed(
            node.rm.image, BrokerRegistrationChangeRecord(2, 20, fenced=FenceChange.FENCE)
        )
        leaders = [node.leader("t", p) for p in range(11)]
        assert all(leader.eligibility.is_eligible(2) for leader in leaders)
        node.rm.apply_image(fenced)
        seen: list[int] = []
        for _ in range(40):
            seen.append(sum(not leader.eligibility.is_eligible(2) for leader in leaders))
            await asyncio.sleep(0)
        assert seen[0] == 0 and seen[-1] == 11, seen
        steps = [b - a for a, b in itertools.pairwise(seen) if b != a]
        assert max(steps) <= 4 and len(steps) >= 3, seen
    finally:
        await node.rm.stop()


@pytest.mark.asyncio
async def test_a_started_manager_deletes_replicas_in_rounds_bounded_in_time(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A deletion renames its log's directory on the loop: on a busy file system each took
    4-20 ms, and a round of 250 held a loop for seconds. A round stops once a deletion used up
    `APPLY_ROUND_BUDGET_MS`, the loop's other tasks running between rounds, and in the end
    every replica and log is gone."""
    (node, _) = nodes_with(tmp_path, clock, *[(1, 2)] * 11)
    await node.rm.start()
    try:
        delete_log = node.log_manager.delete_log

        def slow_delete_log(topic: str, partition: int) -> None:
            clock.advance(30)  # a busy file system's rename
            delete_log(topic, partition)

        monkeypatch.setattr(node.log_manager, "delete_log", slow_delete_log)
        node.rm.apply_image(replayed(node.rm.image, RemoveTopicRecord(TID)))
        seen: list[int] = []
        for _ in range(40):
            seen.append(sum(node.rm.partition("t", p) is not None for p in range(11)))
            await asyncio.sleep(0)
        assert seen[0] == 11 and seen[-1] == 0, seen
        steps = [a - b for a, b in itertools.pairwise(seen) if b != a]
        assert max(steps) <= 2 and len(steps) >= 6, seen
        assert node.log_manager.all_logs() == {}
    finally:
        await node.rm.stop()


@pytest.mark.asyncio
async def test_purgatory_is_bounded(tmp_path: Path, clock: ManualClock) -> None:
    leader, _, _ = two_nodes(tmp_path, clock, purgatory_pending_max=1)
    first = asyncio.create_task(leader.rm.produce(produce_request(batch(), acks=-1)))
    await settle()
    second = await produce(leader, batch(), acks=-1)
    assert second.error is not None and second.error.error_name == "UNKNOWN_SERVER_ERROR"
    assert "full" in str(second.error) or "waiting" in str(second.error)
    leader.rm.tick(clock.advance(1000))
    await asyncio.wait_for(first, DONE_S)


@pytest.mark.asyncio
async def test_delete_records_with_a_full_purgatory_deletes_nothing(
    tmp_path: Path, clock: ManualClock
) -> None:
    # A full purgatory refuses before the log start moves: refused after it, the records would
    # be gone and the caller told the deletion failed.
    leader, follower, _ = two_nodes(tmp_path, clock, purgatory_pending_max=1)
    for tag in range(4):
        await produce(leader, batch(1, tag=tag))
    await replicate(follower, leader)
    await replicate(follower, leader)
    assert leader.leader().high_watermark == 4
    first = asyncio.create_task(
        leader.rm.delete_records(DeleteRecordsRequest((DeleteRecordsPartition("t", 0, 1),)))
    )
    await settle()
    assert pending(first)  # waits for the follower's log start: the purgatory is full
    second = await asyncio.wait_for(
        leader.rm.delete_records(DeleteRecordsRequest((DeleteRecordsPartition("t", 0, 3),))), 5
    )
    (result,) = second.partitions
    assert result.error is not None and result.error.error_name == "UNKNOWN_SERVER_ERROR"
    assert "t-0" in str(result.error) and "waiting" in str(result.error)
    assert leader.log().log_start_offset == 1  # offsets 1 and 2 are still there
    # A deletion the low watermark already covers never waits, so a full purgatory is no bar.
    again = await asyncio.wait_for(
        leader.rm.delete_records(DeleteRecordsRequest((DeleteRecordsPartition("t", 0, 0),))), 5
    )
    assert again.partitions[0].error is None
    await replicate(follower, leader)
    await replicate(follower, leader)
    (done,) = (await asyncio.wait_for(first, DONE_S)).partitions
    assert (done.error, done.low_watermark) == (None, 1)


@pytest.mark.asyncio
async def test_cancelled_waiter_leaves_the_purgatory(tmp_path: Path, clock: ManualClock) -> None:
    node = solo_node(tmp_path, clock)
    task = asyncio.create_task(consumer_fetch(node, 0, max_wait_ms=5000))
    await settle()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # Only the ISR check is left to do: the fetch's deadline went with it.
    assert node.rm.next_tick_ms() == clock() + 15000


@pytest.mark.asyncio
async def test_metadata_publisher_entry_point(
    tmp_path: Path, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    base = cluster_image()
    node = Node(tmp_path, 1, clock)
    node.rm.apply_image(base)
    records = create_topic("t", TID, (1, 2))
    delta = delta_of(base, *records)
    provenance = MetadataProvenance(base.provenance.last_offset + len(records), 3)
    image = delta.apply(provenance)
    manifest = LoaderManifest(ManifestKind.LOG, provenance, base, 1, len(records))
    with caplog.at_level(logging.INFO, logger="replog.server.data_plane.replica_manager"):
        node.rm.on_metadata_update(delta, image, manifest)
    # One line per publication says what it asks of this broker.
    said = f"broker 1 at metadata offset {provenance.last_offset}: lead 1 (t-0), follow -, "
    assert said + "delete -" in caplog.text
    assert node.rm.name == "replica-manager"
    assert node.rm.image is image
    assert node.leader().replicas == (1, 2)
    # A snapshot publication compares images: the same state, nothing redone.
    leader_state = node.leader()
    snapshot = LoaderManifest(ManifestKind.SNAPSHOT, provenance, image, 0, len(records))
    node.rm.on_metadata_update(delta_of(MetadataImage.EMPTY), image, snapshot)
    assert node.leader() is leader_state


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("policy", "in_the_log", "deletes"),
    [
        ("compact", "compact", False),
        # Kafka's empty list (neither policy) and its trimmed items are valid; a broker that
        # refused them would run the topic on the broker's `delete`.
        ("", "", False),
        ("compact, delete", "compact,delete", True),
    ],
)
async def test_delete_records_needs_the_delete_policy(
    tmp_path: Path, clock: ManualClock, policy: str, in_the_log: str, deletes: bool
) -> None:
    node = Node(tmp_path, 1, clock)
    node.rm.apply_image(
        cluster_image(
            *create_topic("t", TID, (1,)),
            ConfigRecord(ConfigResourceType.TOPIC, "t", "cleanup.policy", policy),
        )
    )
    assert node.log().config.cleanup_policy == in_the_log  # the topic config reached the log
    await produce(node, batch())
    response = await node.rm.delete_records(
        DeleteRecordsRequest((DeleteRecordsPartition("t", 0, 1),))
    )
    if deletes:
        assert response.partitions[0].error is None
        assert node.log().log_start_offset == 1
    else:
        assert isinstance(response.partitions[0].error, PolicyViolationError)
        assert node.log().log_start_offset == 0


@pytest.mark.asyncio
async def test_parked_consumer_fetch_past_the_hw_completes_on_a_wake(
    tmp_path: Path, clock: ManualClock
) -> None:
    leader, _, _ = two_nodes(tmp_path, clock)
    await produce(leader, batch(3))  # LEO 3, HW 0: the follower has not fetched
    task = asyncio.create_task(consumer_fetch(leader, 2, max_wait_ms=60000))
    await settle()
    # HW <= offset <= LEO: empty, so it waits (docs/design/replication.md#read-bounds)
    assert pending(task)
    await produce(leader, batch(1, tag=1))
    # docs/design/replication.md#delayed-fetch-completion F: past the bound, answered now
    result = await asyncio.wait_for(task, DONE_S)
    assert result.error is None and result.records == b"" and result.high_watermark == 0


def count_partition_reads(node: Node) -> list[int]:
    """Spy on the manager's per-partition reads: the partition of each read, in order."""
    reads: list[int] = []
    read_partition = node.rm._read_partition

    def spy(request: FetchRequest, entry: FetchPartition, *args: Any, **kwargs: Any) -> Any:
        reads.append(entry.partition)
        return read_partition(request, entry, *args, **kwargs)

    node.rm._read_partition = spy  # type: ignore[method-assign]
    return reads


async def answered_by_partition(task: asyncio.Task[FetchResponse]) -> dict[int, Any]:
    return {r.partition: r for r in (await asyncio.wait_for(task, DONE_S)).partitions}


def fetch_both(offsets: tuple[int, int], **options: Any) -> FetchRequest:
    entries = tuple(FetchPartition("t", p, offset) for p, offset in enumerate(offsets))
    return FetchRequest(entries, **{"max_wait_ms": 60000, **options})


@pytest.mark.asyncio
async def test_a_woken_fetch_reads_again_only_the_partitions_that_woke_it(
    tmp_path: Path, clock: ManualClock
) -> None:
    """The others answer what they read when it parked: nothing changed for them."""
    (node,) = nodes_with(tmp_path, clock, (1,), (1,))
    reads = count_partition_reads(node)
    task = asyncio.create_task(node.rm.fetch(fetch_both((0, 0))))
    await settle()
    assert pending(task) and reads == [0, 1]
    parked_p0 = (await node.rm.fetch(fetch_both((0, 0), max_wait_ms=0))).partitions[0]
    del reads[:]
    await produce(node, batch(2), partition=1)  # RF 1: the HW moves with the append
    p0, p1 = (await asyncio.wait_for(task, DONE_S)).partitions
    assert reads == [1]  # the wake on partition 1 read partition 1 only
    assert batch_offsets(p1.records) == [(0, 1)] and p1.high_watermark == 2
    assert p0 is parked_p0 and p0.records == b"" and p0.high_watermark == 0


@pytest.mark.asyncio
async def test_a_woken_fetch_reads_again_every_partition_woken_since_it_parked(
    tmp_path: Path, clock: ManualClock
) -> None:
    """A wake that finds nothing to read still leaves its partition's answer stale: another
    follower moving the HW gives a caught-up follower's parked fetch no records, but the HW
    must be in the answer when another partition completes that fetch."""
    leader, second, third = nodes_with(tmp_path, clock, (1, 2, 3), (1, 2, 3))
    await produce(leader, batch(2))
    await replicate(second, leader)
    await replicate(third, leader)
    request = second.rm.build_follower_fetch(1, clock())
    assert request is not None
    task = asyncio.create_task(leader.rm.fetch(request))  # caught up: it parks
    await settle()
    assert pending(task) and leader.leader().high_watermark == 0
    await replicate(third, leader)  # the HW moves to 2: a wake with nothing to read
    await settle()
    assert pending(task) and leader.leader().high_watermark == 2
    reads = count_partition_reads(leader)
    await produce(leader, batch(1, tag=1), partition=1)
    by_partition = await answered_by_partition(task)
    assert sorted(reads) == [0, 1]
    assert by_partition[0].records == b"" and by_partition[0].high_watermark == 2
    assert batch_offsets(by_partition[1].records) == [(0, 0)]


@pytest.mark.asyncio
async def test_a_woken_fetch_naming_a_partition_twice_reads_both_entries(
    tmp_path: Path, clock: ManualClock
) -> None:
    """The broker service refuses such requests; the manager still answers them whole."""
    node = solo_node(tmp_path, clock)
    twice = FetchRequest((FetchPartition("t", 0, 0), FetchPartition("t", 0, 0)), max_wait_ms=60000)
    task = asyncio.create_task(node.rm.fetch(twice))
    await settle()
    assert pending(task)
    await produce(node, batch(2))
    first, second = (await asyncio.wait_for(task, DONE_S)).partitions
    assert batch_offsets(first.records) == batch_offsets(second.records) == [(0, 1)]


@pytest.mark.asyncio
async def test_a_parked_follower_fetch_answers_the_hw_its_own_read_moved(
    tmp_path: Path, clock: ManualClock
) -> None:
    """A follower's fetch moves the HW after reading it
    (docs/design/replication.md#follower-progress); if that fetch parks and another partition
    completes it, the answer carries the moved HW, as a full re-read's would: no wake told the
    parked fetch about that move."""
    leader, follower = nodes_with(tmp_path, clock, (1, 2), (1, 2))
    await produce(leader, batch(2))
    await replicate(follower, leader)  # the follower has partition 0's offsets 0-1
    request = follower.rm.build_follower_fetch(1, clock())
    assert request is not None
    task = asyncio.create_task(leader.rm.fetch(request))  # its read moves the HW to 2, parks
    await settle()
    assert pending(task) and leader.leader().high_watermark == 2
    await produce(leader, batch(1, tag=1), partition=1)
    by_partition = await answered_by_partition(task)
    assert by_partition[0].records == b"" and by_partition[0].high_watermark == 2
    assert batch_offsets(by_partition[1].records) == [(0, 0)]


@pytest.mark.asyncio
async def test_delete_records_moves_the_log_start_in_a_parked_fetchs_answer(
    tmp_path: Path, clock: ManualClock
) -> None:
    (node,) = nodes_with(tmp_path, clock, (1,), (1,))
    await produce(node, batch(3))
    task = asyncio.create_task(node.rm.fetch(fetch_both((3, 0))))
    await settle()
    deleted = await node.rm.delete_records(
        DeleteRecordsRequest((DeleteRecordsPartition("t", 0, 2),))
    )
    assert deleted.partitions[0].error is None
    await settle()
    assert pending(task)  # offset 3 is still in range: nothing to answer yet
    await produce(node, batch(1), partition=1)
    p0, p1 = (await asyncio.wait_for(task, DONE_S)).partitions
    assert p0.log_start_offset == 2 and p0.high_watermark == 3 and p0.records == b""
    assert batch_offsets(p1.records) == [(0, 0)]


@pytest.mark.asyncio
async def test_a_fetch_that_parked_with_records_below_min_bytes_reads_everything_again(
    tmp_path: Path, clock: ManualClock
) -> None:
    (node,) = nodes_with(tmp_path, clock, (1,), (1,))
    await produce(node, batch(1))
    one_batch = len(batch(1))
    task = asyncio.create_task(node.rm.fetch(fetch_both((0, 0), min_bytes=2 * one_batch)))
    await settle()
    assert pending(task)  # one batch read, two wanted
    reads = count_partition_reads(node)
    await produce(node, batch(1, tag=1), partition=1)
    p0, p1 = (await asyncio.wait_for(task, DONE_S)).partitions
    assert reads == [0, 1]
    assert batch_offsets(p0.records) == [(0, 0)] and batch_offsets(p1.records) == [(0, 0)]


@pytest.mark.asyncio
async def test_a_higher_hw_answers_the_waiting_fetch_before_the_produce(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Kafka's `checkAndCompleteAll` order: fetches, then produces. A consumer waiting for the
    records an acks=all produce appended gets them before the producer gets its answer."""
    leader, follower, _ = two_nodes(tmp_path, clock)
    answered: list[str] = []
    # Both straight on the manager, so neither task has more layers to unwind than the other.
    fetch = asyncio.create_task(
        leader.rm.fetch(FetchRequest((FetchPartition("t", 0, 0),), max_wait_ms=60000))
    )
    fetch.add_done_callback(lambda _: answered.append("fetch"))
    await settle()
    producing = asyncio.create_task(leader.rm.produce(produce_request(batch(2), acks=-1)))
    producing.add_done_callback(lambda _: answered.append("produce"))
    await settle()
    await replicate(follower, leader)  # the follower gets the batch
    await settle()
    assert answered == []  # HW 0: nothing committed yet
    await replicate(follower, leader)  # its next fetch moves the HW to 2
    await asyncio.wait_for(asyncio.gather(fetch, producing), DONE_S)
    assert answered == ["fetch", "produce"]
    assert batch_offsets(fetch.result().partitions[0].records) == [(0, 1)]


@pytest.mark.asyncio
async def test_a_leader_answers_an_idle_partition_with_one_result_while_its_offsets_stand(
    tmp_path: Path, clock: ManualClock
) -> None:
    image = cluster_image(*create_topic("t", TID, (1, 2)))
    leader = Node(tmp_path, 1, clock)
    leader.rm.apply_image(image)
    await produce(leader, batch(2))

    async def consume(offset: int) -> FetchPartitionResult:
        request = FetchRequest((FetchPartition("t", 0, offset),), max_wait_ms=0)
        return (await leader.rm.fetch(request)).partitions[0]

    first, again = await consume(0), await consume(0)  # HW 0: nothing to read yet
    assert first is again and first.records == b"" and first.high_watermark == 0
    follower = Node(tmp_path, 2, clock)
    follower.rm.apply_image(image)
    await replicate(follower, leader)
    await replicate(follower, leader)  # the HW moves to 2
    data = await consume(0)
    assert data.high_watermark == 2 and batch_offsets(data.records) == [(0, 1)]
    caught_up = await consume(2)
    assert caught_up is not first and caught_up.high_watermark == 2 and caught_up.records == b""
    assert await consume(2) is caught_up


@pytest.mark.asyncio
async def test_a_follower_reuses_an_unchanged_partitions_request_entry(
    tmp_path: Path, clock: ManualClock
) -> None:
    """The fetch session tells unchanged entries by identity first; a moved one is new."""
    leader, follower = nodes_with(tmp_path, clock, (1, 2), (1, 2))
    first = follower.rm.build_follower_fetch(1, clock())
    again = follower.rm.build_follower_fetch(1, clock())
    assert first is not None and again is not None
    assert all(a is b for a, b in zip(first.partitions, again.partitions, strict=True))
    await produce(leader, batch(2), partition=1)
    await replicate(follower, leader)
    moved = follower.rm.build_follower_fetch(1, clock())
    assert moved is not None
    by_partition = {e.partition: e for e in moved.partitions}
    assert by_partition[0] is first.partitions[0]
    assert by_partition[1] is not first.partitions[1] and by_partition[1].fetch_offset == 2


@pytest.mark.asyncio
async def test_follower_fetches_rotate_so_every_partition_gets_the_byte_budget(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Kafka's `updateAndMoveToEnd`: with an answer budget of one batch and three partitions
    that all have data, a fixed order gave every answer to t-0 until it caught up."""
    one_batch = len(batch(1))
    config = {"replica_fetch_response_max_bytes": one_batch + one_batch // 2}
    leader, follower = nodes_with(tmp_path, clock, (1, 2), (1, 2), (1, 2), **config)
    for partition in (0, 1, 2):
        for tag in range(3):
            await produce(leader, batch(1, tag=tag), partition=partition)
    asked_first = []
    for _ in range(3):
        request, response = await replicate(follower, leader)
        asked_first.append(request.partitions[0].partition)
        assert [bool(r.records) for r in response.partitions] == [True, False, False]
    assert asked_first == [0, 1, 2]
    assert [follower.log("t", p).log_end_offset for p in (0, 1, 2)] == [1, 1, 1]
    for _ in range(6):
        await replicate(follower, leader)
    assert [follower.log("t", p).log_end_offset for p in (0, 1, 2)] == [3, 3, 3]
    # Only an answer with records moves a partition back; empty answers keep the order.
    await produce(leader, batch(1), partition=0)
    await replicate(follower, leader)
    for _ in range(2):
        request, response = await replicate(follower, leader)
        assert [e.partition for e in request.partitions] == [1, 2, 0]
        assert not any(r.records for r in response.partitions)


def test_leadership_errors_of_one_answer_are_logged_in_one_line(
    tmp_path: Path, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A leader that moved away answers NOT_LEADER_OR_FOLLOWER for every partition it led: one
    INFO line for the answer, naming how many, not one per partition."""
    _, follower, _ = two_nodes(tmp_path, clock)
    request = follower.rm.build_follower_fetch(1, clock())
    assert request is not None
    response = FetchResponse(
        tuple(
            FetchPartitionResult(e.topic, e.partition, NotLeaderOrFollowerError("moved"))
            for e in request.partitions
        )
    )
    with caplog.at_level(logging.INFO, logger="replog.server.data_plane.replica_manager"):
        follower.rm.process_follower_fetch(1, request, response, clock())
        follower.rm.process_follower_fetch(1, request, response, clock())
    lines = [r.getMessage() for r in caplog.records if "waiting for new metadata" in r.getMessage()]
    assert (
        lines
        == [
            "broker 1 answered NOT_LEADER_OR_FOLLOWER for 1 partition(s): t-0; "
            "waiting for new metadata"
        ]
        * 2
    )


@pytest.mark.asyncio
async def test_images_arriving_faster_than_a_refresh_never_starve_a_leader(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new image while the leaders' refresh is under way restarts it, yet every leader is
    reached within about one walk of them all: the leaders an earlier image did not reach yet
    go first, or a steady stream of registration (or config) changes would leave the same
    leaders on the first image's eligibility for ever."""
    monkeypatch.setattr(replica_manager, "APPLY_ROUND_CHANGES", 4)
    (node, _) = nodes_with(tmp_path, clock, *[(1, 2)] * 12)
    await node.rm.start()
    try:
        leaders = [node.leader("t", p) for p in range(12)]
        first = leaders[0].eligibility
        image = node.rm.image
        for epoch in range(20):
            # A registration change every other round: a whole walk takes three.
            fence = FenceChange.FENCE if epoch % 2 == 0 else FenceChange.UNFENCE
            image = replayed(image, BrokerRegistrationChangeRecord(2, 20, fenced=fence))
            node.rm.apply_image(image)
            await asyncio.sleep(0)
            await asyncio.sleep(0)
        never_reached = [p for p, leader in enumerate(leaders) if leader.eligibility is first]
        assert never_reached == []
    finally:
        await node.rm.stop()


@pytest.mark.asyncio
async def test_a_leadership_a_follower_asks_for_before_its_log_exists_is_created_next(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A broker far behind in creating its replicas answers NOT_LEADER_OR_FOLLOWER to a
    follower that already fetches one of them, and creates that one next, not after the
    backlog (replica_change_queue.py): a follower retries a second later, not 13 times."""
    monkeypatch.setattr(replica_manager, "APPLY_ROUND_CHANGES", 4)
    (node, _) = nodes_with(tmp_path, clock, (1, 2))
    await node.rm.start()
    try:
        backlog = replayed(node.rm.image, *create_topic("u", topic_id(3), *[(1, 2)] * 200))
        node.rm.apply_image(backlog)
        asked = FetchRequest(
            (FetchPartition("u", 190, 0, current_leader_epoch=0),),
            replica_id=2,
            replica_epoch=20,
            max_wait_ms=0,
        )

        def created() -> int:
            return sum(node.rm.partition("u", p) is not None for p in range(200))

        answer = await asyncio.wait_for(node.rm.fetch(asked), 5)
        assert answer.partitions[0].error is not None
        assert answer.partitions[0].error.error_name == "NOT_LEADER_OR_FOLLOWER"
        when_asked = created()
        assert when_asked < 150, when_asked  # the backlog is still long (rounds of 4)
        created_with_it = None
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if node.rm.partition("u", 190) is not None:
                created_with_it = created()
                break
            # Every loop turn, not a sleep: rounds of 4 small logs take a few ms, and a 10 ms
            # sleep let later rounds land before the count.
            await asyncio.sleep(0)
        # In the round under way or the next one (4 each), not after the whole backlog.
        assert created_with_it is not None
        assert created_with_it - when_asked <= 8, (when_asked, created_with_it)
    finally:
        await node.rm.stop()


@pytest.mark.asyncio
async def test_the_isr_check_walks_the_replicas_a_slice_per_tick(
    tmp_path: Path,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A broker with 100,000 replicas checked every ISR in one tick (50-65 ms of a held
    loop): a tick now walks `SWEEP_SLICE` of them, asks to run again at once until the walk
    is done, and the walk's shrinks are logged in one line at its end."""
    monkeypatch.setattr(replica_manager, "SWEEP_SLICE", 2, raising=False)
    leader, *_ = nodes_with(tmp_path, clock, *[(1, 2)] * 5)
    clock.advance(30_001)  # no follower fetched: every ISR shrinks at its check
    with caplog.at_level(logging.INFO, logger="replog.server.data_plane.replica_manager"):
        walked = []
        for _ in range(3):
            leader.rm.tick(clock())
            walked.append(len(leader.rm.pending_isr_changes()))  # taken: this tick's
            if len(walked) < 3:
                assert leader.rm.next_tick_ms() == clock()  # the next slice at once
    assert walked == [2, 2, 1]
    assert leader.rm.next_tick_ms() == clock() + 15_000
    (line,) = [r.getMessage() for r in caplog.records if "shrinking the ISR" in r.getMessage()]
    assert line.startswith("broker 1: shrinking the ISR of 5 partitions")


async def _turns_of_stop_snapshots(node: Node, monkeypatch: pytest.MonkeyPatch) -> list[list[int]]:
    """Stop `node`'s replica manager while a task counts loop turns: the partitions whose
    producer snapshot the stop checked, grouped by the turn it checked them in."""
    turns = 0
    checked: dict[int, list[int]] = {}
    original = Partition.write_producer_snapshot_at_stop

    def recorded(partition: Partition) -> bool:
        checked.setdefault(turns, []).append(partition.partition)
        return original(partition)

    async def count_turns() -> None:
        nonlocal turns
        while True:
            await asyncio.sleep(0)
            turns += 1

    monkeypatch.setattr(Partition, "write_producer_snapshot_at_stop", recorded)
    counter = asyncio.ensure_future(count_turns())
    try:
        await node.rm.stop()
    finally:
        counter.cancel()
    return list(checked.values())


@pytest.mark.asyncio
async def test_a_stop_checks_the_producer_snapshots_a_slice_a_turn(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stop checked every replica's producer snapshot in one loop turn (158-168 ms of CPU
    at 100,000 replicas, the node's Raft driver waiting behind it): now `SWEEP_SLICE` a
    turn, every replica once."""
    monkeypatch.setattr(replica_manager, "SWEEP_SLICE", 2, raising=False)
    (node,) = nodes_with(tmp_path, clock, *[(1,)] * 5)
    assert await _turns_of_stop_snapshots(node, monkeypatch) == [[0, 1], [2, 3], [4]]


@pytest.mark.asyncio
async def test_a_stop_writes_a_bounded_number_of_producer_snapshots_a_turn(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each written snapshot is a file: a turn ends after `STOP_SNAPSHOT_WRITES_PER_TURN` of
    them, and every replica with something to replay still gets its snapshot at the LEO."""
    monkeypatch.setattr(replica_manager, "STOP_SNAPSHOT_WRITES_PER_TURN", 2, raising=False)
    (node,) = nodes_with(tmp_path, clock, *[(1,)] * 5)
    for partition in (0, 1, 3, 4):  # partition 2 stays empty: nothing to write
        await produce(node, batch(2), partition=partition)
    # Two written end a turn; partition 2's check writes nothing.
    assert await _turns_of_stop_snapshots(node, monkeypatch) == [[0, 1], [2, 3, 4]]
    for partition in range(5):
        found = node.rm.partition("t", partition)
        assert found is not None
        assert found.producer_snapshots.offsets() == ([] if partition == 2 else [2])
