"""GroupCoordinator over a real ReplicaManager and logs in tmp_path (and, for the failure
paths, over a fake replica manager): it follows `__consumer_offsets` leadership from metadata
images, loads a partition from its log before answering, commits with one acks=all batch in
Kafka's record format, and maps every failure to the coordinator error a client acts on; a
deleted (or re-created) topic's offsets and expired offsets leave the cache at once and get
tombstones in the log."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from replog.coordinator import messages as cm
from replog.coordinator.group_partition import partition_for_group
from replog.coordinator.offsets_records import (
    OffsetCommitKey,
    OffsetCommitValue,
    decode_key,
    decode_value,
)
from replog.errors import (
    ConfigError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    IllegalGenerationError,
    InvalidGroupIdError,
    InvalidReplicationFactorError,
    KafkaError,
    NotCoordinatorError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetMetadataTooLargeError,
    RequestTimedOutError,
    UnknownTopicOrPartitionError,
)
from replog.quorum.metadata.image import MetadataImage
from replog.quorum.metadata.records import MetadataRecord, PartitionChangeRecord, RemoveTopicRecord
from replog.record import iter_batches
from replog.replication import messages as m
from replog.server.config.group_coordinator_config import GroupCoordinatorConfig
from replog.server.data_plane.partition import Partition
from replog.server.data_plane.replica_manager import ReplicaManager, ReplicaManagerConfig
from replog.server.groups.group_coordinator import GroupCoordinator, ShardState
from replog.storage.log_config import LogConfig
from replog.storage.log_manager import LogManager
from replog.testing import LoopTasks
from replog.topic_names import CONSUMER_OFFSETS_TOPIC
from tests.metadata.metadata_helpers import (
    bootstrapped,
    create_topic,
    register,
    replayed,
    topic_id,
)

OFFSETS_TID = topic_id(50)
DATA_TID = topic_id(51)
NOW = 1_700_000_000_000
PARTITIONS = 3
# Groups in each of the 3 offsets partitions.
GROUP_IN = {
    p: next(f"g{i}" for i in range(100) if partition_for_group(f"g{i}", 3) == p) for p in range(3)
}


@dataclass
class FakeCreator:
    requests: int = 0
    last_failure: KafkaError | None = None
    stopped: bool = False

    def request(self) -> None:
        self.requests += 1

    async def stop(self) -> None:
        self.stopped = True


def image_with(*records: MetadataRecord) -> MetadataImage:
    image = replayed(bootstrapped(), *(register(b, 10 * b, fenced=False) for b in (1, 2)))
    return replayed(image, *records) if records else image


def offsets_topic(*leaders: int) -> list[MetadataRecord]:
    """`__consumer_offsets` with one single-replica partition per leader given."""
    return create_topic(CONSUMER_OFFSETS_TOPIC, OFFSETS_TID, *((leader,) for leader in leaders))


DATA = create_topic("orders", DATA_TID, (1,), (1,))
USERS = create_topic("users", topic_id(52), (1,))
ORDERS_AGAIN = create_topic("orders", topic_id(77), (1,), (1,))  # re-created: a new topic id


class Broker:
    """Broker 1's log manager, replica manager and group coordinator over `root`."""

    def __init__(
        self,
        root: Path,
        config: GroupCoordinatorConfig | None = None,
        log_config: LogConfig | None = None,
        **options: Any,
    ) -> None:
        """`options`: the GroupCoordinator's further keyword arguments (its transaction
        verification's)."""
        self.log_manager = LogManager(str(root), log_config or LogConfig())
        self.rm = ReplicaManager(ReplicaManagerConfig(1), self.log_manager, tasks=LoopTasks())
        self.creator = FakeCreator()
        self.now = NOW  # the coordinator's wall clock
        self.coordinator = GroupCoordinator(
            1,
            self.rm,
            self.creator,
            config,
            wall_clock=lambda: self.now,
            tasks=LoopTasks(),
            **options,
        )

    def publish(self, image: MetadataImage) -> None:
        self.rm.apply_image(image)  # the replica manager first, as the publishers are installed
        self.coordinator.apply_image(image)

    def close(self) -> None:
        self.log_manager.shutdown()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    node = Broker(tmp_path / "broker1")
    yield node
    node.close()


def commit(group: str, *entries: cm.CommitEntry, generation: int = -1, member: str = "") -> Any:
    return cm.OffsetCommitRequest(group, tuple(entries), generation, member)


def fetch(group: str, *partitions: tuple[str, int]) -> cm.OffsetFetchRequest:
    return cm.OffsetFetchRequest(group, tuple(partitions) if partitions else None)


def committed(response: cm.OffsetFetchResponse) -> dict[tuple[str, int], int]:
    assert response.error is None, response.error
    return {(f.topic, f.partition): f.offset for f in response.partitions}


async def loaded(broker: Broker, image: MetadataImage) -> None:
    broker.publish(image)
    await asyncio.wait_for(broker.coordinator.wait_loaded(), 5)


Record = tuple[Any, OffsetCommitValue | None]


def batch_records(batch: Any) -> list[Record]:
    """(key, value or None for a tombstone) of every record of `batch`."""
    return [
        (decode_key(r.key or b""), None if r.value is None else decode_value(r.value))
        for r in batch.records()
    ]


def records_of(data: bytes | memoryview) -> list[Record]:
    """The records of every batch of `data`."""
    return [record for batch in iter_batches(bytes(data)) for record in batch_records(batch)]


def log_batches(broker: Broker, partition: int) -> list[tuple[int, list[Record]]]:
    """(size in bytes, records) of every batch of the partition's log, segment by segment."""
    plog = broker.log_manager.get_log(CONSUMER_OFFSETS_TOPIC, partition)
    batches: list[tuple[int, list[Record]]] = []
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:
        for batch in iter_batches(plog.read(offset, 1 << 20)):
            batches.append((batch.header.size_in_bytes, batch_records(batch)))
            offset = batch.header.next_offset
    return batches


def log_records(broker: Broker, partition: int) -> list[Record]:
    return [record for _, records in log_batches(broker, partition) for record in records]


def tombstone(group: str, topic: str, partition: int) -> Record:
    return (OffsetCommitKey(group, topic, partition), None)


async def committed_after_restart(
    root: Path, image: MetadataImage, *groups: str, config: GroupCoordinatorConfig | None = None
) -> list[dict[tuple[str, int], int]]:
    """What a broker started over `root` (its wall clock at NOW) loads for `groups`."""
    broker = Broker(root, config)
    try:
        await loaded(broker, image)
        return [committed(broker.coordinator.offset_fetch(fetch(group))) for group in groups]
    finally:
        broker.close()


# --- FindCoordinator ----------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_find_coordinator_names_the_leader_of_the_groups_partition(broker: Broker) -> None:
    broker.coordinator.apply_image(image_with(*offsets_topic(1, 2, 1)))
    for partition, leader in ((0, 1), (1, 2), (2, 1)):
        answer = broker.coordinator.find_coordinator(GROUP_IN[partition])
        assert answer == cm.FindCoordinatorResponse(None, leader, f"broker{leader}", 9092)


@pytest.mark.asyncio
async def test_find_coordinator_asks_for_the_topic_when_it_is_missing(broker: Broker) -> None:
    broker.coordinator.apply_image(image_with())
    answer = broker.coordinator.find_coordinator("g")
    assert isinstance(answer.error, CoordinatorNotAvailableError)
    assert "__consumer_offsets does not exist yet" in str(answer.error)
    assert broker.creator.requests == 1
    broker.creator.last_failure = InvalidReplicationFactorError("3 replicas but 1 broker")
    answer = broker.coordinator.find_coordinator("g")
    assert "INVALID_REPLICATION_FACTOR: 3 replicas but 1 broker" in str(answer.error)
    assert broker.creator.requests == 2


@pytest.mark.asyncio
async def test_find_coordinator_without_a_leader_or_group(broker: Broker) -> None:
    image = image_with(*offsets_topic(1, 1, 1))
    image = replayed(image, PartitionChangeRecord(OFFSETS_TID, 2, leader=-1))
    broker.coordinator.apply_image(image)
    answer = broker.coordinator.find_coordinator(GROUP_IN[2])
    assert isinstance(answer.error, CoordinatorNotAvailableError)
    assert "__consumer_offsets-2 has no leader" in str(answer.error)
    assert isinstance(broker.coordinator.find_coordinator("").error, InvalidGroupIdError)
    assert broker.creator.requests == 0


# --- load, commit, fetch ------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_led_partition_loads_before_it_answers(broker: Broker) -> None:
    broker.publish(image_with(*offsets_topic(1, 2, 1), *DATA))
    group = GROUP_IN[0]
    assert broker.coordinator.state_of(0) is ShardState.LOADING
    assert broker.coordinator.state_of(1) is None  # led by broker 2
    answer = broker.coordinator.offset_fetch(fetch(group))
    assert isinstance(answer.error, CoordinatorLoadInProgressError)
    assert "still loading the offsets of __consumer_offsets-0" in str(answer.error)
    response = await broker.coordinator.offset_commit(commit(group, cm.CommitEntry("orders", 0, 1)))
    assert isinstance(response.error, CoordinatorLoadInProgressError)
    await asyncio.wait_for(broker.coordinator.wait_loaded(), 5)
    assert broker.coordinator.state_of(0) is ShardState.ACTIVE
    assert committed(broker.coordinator.offset_fetch(fetch(group))) == {}


@pytest.mark.asyncio
async def test_commit_then_fetch_and_the_records_are_kafkas(broker: Broker) -> None:
    await loaded(broker, image_with(*offsets_topic(1, 1, 1), *DATA))
    group = GROUP_IN[1]
    response = await broker.coordinator.offset_commit(
        commit(group, cm.CommitEntry("orders", 0, 42, 3, "meta"), cm.CommitEntry("orders", 1, 7))
    )
    assert response == cm.OffsetCommitResponse(
        None,
        (
            cm.OffsetCommitPartitionResult("orders", 0),
            cm.OffsetCommitPartitionResult("orders", 1),
        ),
    )
    answer = broker.coordinator.offset_fetch(fetch(group, ("orders", 0), ("orders", 5)))
    assert answer.partitions == (
        cm.FetchedOffset("orders", 0, 42, 3, "meta"),
        cm.FetchedOffset("orders", 5),  # nothing committed: -1
    )
    assert committed(broker.coordinator.offset_fetch(fetch(group))) == {
        ("orders", 0): 42,
        ("orders", 1): 7,
    }
    # One batch in __consumer_offsets-1, CreateTime now, Kafka's key and value layouts.
    plog = broker.log_manager.get_log(CONSUMER_OFFSETS_TOPIC, 1)
    (batch,) = list(iter_batches(plog.read(0, 1 << 20)))
    records = list(batch.records())
    assert [r.timestamp for r in records] == [NOW, NOW]
    assert [(decode_key(r.key or b""), decode_value(r.value or b"")) for r in records] == [
        (OffsetCommitKey(group, "orders", 0), OffsetCommitValue(42, 3, "meta", NOW)),
        (OffsetCommitKey(group, "orders", 1), OffsetCommitValue(7, -1, "", NOW)),
    ]


@pytest.mark.asyncio
async def test_refused_partitions_do_not_stop_the_others(broker: Broker) -> None:
    await loaded(broker, image_with(*offsets_topic(1, 1, 1), *DATA))
    group = GROUP_IN[2]
    response = await broker.coordinator.offset_commit(
        commit(
            group,
            cm.CommitEntry("orders", 0, 1, metadata="x" * 4097),
            cm.CommitEntry("nope", 0, 1),
            cm.CommitEntry("orders", 1, 9),
        )
    )
    assert response.error is None
    errors = [r.error for r in response.partitions]
    assert isinstance(errors[0], OffsetMetadataTooLargeError)
    assert isinstance(errors[1], UnknownTopicOrPartitionError)
    assert errors[2] is None
    assert committed(broker.coordinator.offset_fetch(fetch(group))) == {("orders", 1): 9}
    # A generation: every partition refused, nothing appended.
    end = broker.log_manager.get_log(CONSUMER_OFFSETS_TOPIC, 2).log_end_offset
    response = await broker.coordinator.offset_commit(
        commit(group, cm.CommitEntry("orders", 0, 5), generation=3)
    )
    assert isinstance(response.partitions[0].error, IllegalGenerationError)
    assert broker.log_manager.get_log(CONSUMER_OFFSETS_TOPIC, 2).log_end_offset == end
    for bad in (
        commit("", cm.CommitEntry("orders", 0, 5)),
        fetch(""),
    ):
        answer: Any = (
            await broker.coordinator.offset_commit(bad)
            if isinstance(bad, cm.OffsetCommitRequest)
            else broker.coordinator.offset_fetch(bad)
        )
        assert isinstance(answer.error, InvalidGroupIdError)


@pytest.mark.asyncio
async def test_a_broker_that_does_not_lead_the_partition_is_not_the_coordinator(
    broker: Broker,
) -> None:
    await loaded(broker, image_with(*offsets_topic(1, 2, 1), *DATA))
    answer = broker.coordinator.offset_fetch(fetch(GROUP_IN[1]))
    assert isinstance(answer.error, NotCoordinatorError)
    assert "__consumer_offsets-1 is led by broker 2" in str(answer.error)
    broker.coordinator.apply_image(image_with(*DATA))
    answer = broker.coordinator.offset_fetch(fetch(GROUP_IN[0]))
    assert isinstance(answer.error, NotCoordinatorError)
    assert "does not exist yet" in str(answer.error)


@pytest.mark.asyncio
async def test_leadership_lost_and_regained_reloads_from_the_log(broker: Broker) -> None:
    image = image_with(*offsets_topic(1, 1, 1), *DATA)
    await loaded(broker, image)
    group = GROUP_IN[0]
    await broker.coordinator.offset_commit(commit(group, cm.CommitEntry("orders", 0, 10)))
    await broker.coordinator.offset_commit(commit(group, cm.CommitEntry("orders", 0, 11)))
    await broker.coordinator.offset_commit(commit(group, cm.CommitEntry("orders", 1, 3)))
    moved = replayed(
        image, PartitionChangeRecord(OFFSETS_TID, 0, leader=2, isr=(2,), replicas=(1, 2))
    )
    broker.publish(moved)
    assert broker.coordinator.state_of(0) is None
    assert isinstance(broker.coordinator.offset_fetch(fetch(group)).error, NotCoordinatorError)
    back = replayed(moved, PartitionChangeRecord(OFFSETS_TID, 0, leader=1, isr=(1, 2)))
    await loaded(broker, back)
    assert committed(broker.coordinator.offset_fetch(fetch(group))) == {
        ("orders", 0): 11,
        ("orders", 1): 3,
    }


@pytest.mark.asyncio
async def test_a_restarted_broker_loads_what_was_committed(tmp_path: Path) -> None:
    image = image_with(*offsets_topic(1, 1, 1), *DATA)
    first = Broker(tmp_path / "b")
    try:
        await loaded(first, image)
        for offset in range(5):
            for group in GROUP_IN.values():
                response = await first.coordinator.offset_commit(
                    commit(group, cm.CommitEntry("orders", offset % 2, offset))
                )
                assert response.error is None
        await first.coordinator.stop()
        assert first.creator.stopped
    finally:
        first.close()
    # A small load buffer: the load reads the log in many chunks.
    second = Broker(tmp_path / "b", GroupCoordinatorConfig(offsets_load_buffer_size=100))
    try:
        await loaded(second, image)
        for group in GROUP_IN.values():
            assert committed(second.coordinator.offset_fetch(fetch(group))) == {
                ("orders", 0): 4,
                ("orders", 1): 3,
            }
    finally:
        second.close()


# --- failures, with a fake replica manager ------------------------------------------------------


@dataclass
class FakeReplicas:
    """A replica manager whose one `__consumer_offsets` partition is a real log, and whose
    produce answers what the test says, when the test says."""

    real: ReplicaManager
    answer: KafkaError | None = None
    raise_error: KafkaError | None = None
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    produced: list[tuple[m.ProduceRequest, bool]] = field(default_factory=list)
    missing: bool = False

    def partition(self, topic: str, partition: int) -> Partition | None:
        return None if self.missing else self.real.partition(topic, partition)

    async def produce(
        self, request: m.ProduceRequest, *, internal_topics_allowed: bool = False
    ) -> m.ProduceResponse:
        self.produced.append((request, internal_topics_allowed))
        base_offset = 99 + len(self.produced)  # 100 for the first, then one per request
        await self.gate.wait()
        if self.raise_error is not None:
            raise self.raise_error
        return m.ProduceResponse(
            tuple(
                m.ProducePartitionResult(p.topic, p.partition, self.answer, base_offset)
                for p in request.partitions
            )
        )


async def until_produced(fake: FakeReplicas, count: int) -> None:
    """Until `count` produce requests reached `fake` (at most 5 s)."""
    async with asyncio.timeout(5):
        while len(fake.produced) < count:
            await asyncio.sleep(0)


@pytest.fixture
def faked(broker: Broker) -> Iterator[tuple[Broker, FakeReplicas]]:
    fake = FakeReplicas(broker.rm)
    broker.coordinator = GroupCoordinator(
        1,
        fake,
        broker.creator,
        GroupCoordinatorConfig(offsets_commit_timeout_ms=1234),
        wall_clock=lambda: broker.now,
        tasks=LoopTasks(),
    )
    yield broker, fake


@pytest.mark.asyncio
async def test_the_cache_changes_only_once_the_append_is_acknowledged(
    faked: tuple[Broker, FakeReplicas],
) -> None:
    broker, fake = faked
    await loaded(broker, image_with(*offsets_topic(1, 1, 1), *DATA))
    group = GROUP_IN[0]
    task = asyncio.create_task(
        broker.coordinator.offset_commit(
            commit(group, cm.CommitEntry("orders", 0, 8)), timeout_ms=99
        )
    )
    while not fake.produced:
        await asyncio.sleep(0)
    request, internal = fake.produced[0]
    assert internal  # the coordinator's own append to an internal topic
    assert (request.acks, request.timeout_ms) == (m.ACKS_ALL, 99)  # min(caller, 1234)
    assert [(p.topic, p.partition) for p in request.partitions] == [(CONSUMER_OFFSETS_TOPIC, 0)]
    assert committed(broker.coordinator.offset_fetch(fetch(group))) == {}
    fake.gate.set()
    assert (await asyncio.wait_for(task, 5)).error is None
    assert committed(broker.coordinator.offset_fetch(fetch(group))) == {("orders", 0): 8}


@pytest.mark.parametrize(
    ("failure", "raised", "expected"),
    [
        (NotLeaderOrFollowerError("lost it"), False, NotCoordinatorError),
        (NotEnoughReplicasError("isr 1 < 2"), False, CoordinatorNotAvailableError),
        (RequestTimedOutError("no acks"), False, RequestTimedOutError),
        (NotLeaderOrFollowerError("raised"), True, NotCoordinatorError),
    ],
)
@pytest.mark.asyncio
async def test_a_failed_append_is_the_request_level_error_kafka_answers(
    faked: tuple[Broker, FakeReplicas], failure: KafkaError, raised: bool, expected: type
) -> None:
    broker, fake = faked
    await loaded(broker, image_with(*offsets_topic(1, 1, 1), *DATA))
    fake.gate.set()
    if raised:
        fake.raise_error = failure
    else:
        fake.answer = failure
    group = GROUP_IN[0]
    response = await broker.coordinator.offset_commit(commit(group, cm.CommitEntry("orders", 0, 8)))
    assert type(response.error) is expected
    assert str(failure) in str(response.error) and group in str(response.error)
    assert fake.produced[0][0].timeout_ms == 1234  # offsets.commit.timeout.ms
    assert committed(broker.coordinator.offset_fetch(fetch(group))) == {}


@pytest.mark.asyncio
async def test_a_failed_load_answers_not_coordinator(faked: tuple[Broker, FakeReplicas]) -> None:
    broker, fake = faked
    fake.missing = True
    await loaded(broker, image_with(*offsets_topic(1, 1, 1), *DATA))
    assert broker.coordinator.state_of(0) is ShardState.FAILED
    answer = broker.coordinator.offset_fetch(fetch(GROUP_IN[0]))
    assert isinstance(answer.error, NotCoordinatorError)
    assert "could not load the offsets of __consumer_offsets-0" in str(answer.error)


def test_config_from_properties_maps_kafkas_names_and_checks_bounds() -> None:
    config = GroupCoordinatorConfig.from_properties(
        {
            "offsets.topic.num.partitions": "7",
            "offsets.topic.replication.factor": "1",
            "offset.metadata.max.bytes": "10",
            "offsets.commit.timeout.ms": "250",
            "offsets.load.buffer.size": "4096",
            "offsets.retention.minutes": "3",
            "offsets.retention.check.interval.ms": "1000",
            "offsets.topic.segment.bytes": "1048576",
            "unrelated.key": "x",
        }
    )
    assert config == GroupCoordinatorConfig(
        7, 1, 10, 250, 4096, 3, 1000, offsets_topic_segment_bytes=1048576
    )
    assert config.offsets_retention_ms == 180_000
    assert GroupCoordinatorConfig.from_properties({}) == GroupCoordinatorConfig(
        50, 3, 4096, 5000, 5 * 1024 * 1024, 10080, 600_000, offsets_topic_segment_bytes=104857600
    )
    for key in (
        "offsets.retention.minutes",
        "offsets.retention.check.interval.ms",
        "offsets.topic.segment.bytes",
    ):
        with pytest.raises(ConfigError, match=re.escape(f"{key}=0: must be at least 1")):
            GroupCoordinatorConfig.from_properties({key: "0"})
    with pytest.raises(
        ConfigError, match=re.escape("offsets.topic.replication.factor=0: must be at least 1")
    ):
        GroupCoordinatorConfig.from_properties({"offsets.topic.replication.factor": "0"})
    with pytest.raises(
        ConfigError, match=re.escape("offsets.topic.num.partitions='many': must be an integer")
    ):
        GroupCoordinatorConfig.from_properties({"offsets.topic.num.partitions": "many"})


# --- a deleted topic's offsets ------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_load_keeps_no_mark_of_the_tombstones_it_replayed(tmp_path: Path) -> None:
    # A replayed tombstone's mark only orders it against an older commit applied later, which
    # no record applied after a load can be: marks kept after the load held memory per key
    # (every expired or deleted-topic offset) until the key committed again.
    image = image_with(*offsets_topic(1, 1, 1), *DATA, *USERS)
    group = GROUP_IN[0]
    broker = Broker(tmp_path / "b")
    try:
        await loaded(broker, image)
        entries = (cm.CommitEntry("orders", 0, 10), cm.CommitEntry("users", 0, 7))
        assert (await broker.coordinator.offset_commit(commit(group, *entries))).error is None
        image = replayed(image, RemoveTopicRecord(DATA_TID))
        broker.publish(image)
        await asyncio.wait_for(broker.coordinator.wait_tombstones(), 5)
        assert log_records(broker, 0)[-1] == tombstone(group, "orders", 0)
        await broker.coordinator.stop()
    finally:
        broker.close()
    broker = Broker(tmp_path / "b")
    try:
        await loaded(broker, image)
        assert committed(broker.coordinator.offset_fetch(fetch(group))) == {("users", 0): 7}
        assert broker.coordinator._shards[0].cache._deleted == {}
    finally:
        broker.close()


@pytest.mark.asyncio
async def test_a_deleted_topics_offsets_go_at_once_and_get_tombstones(tmp_path: Path) -> None:
    image = image_with(*offsets_topic(1, 1, 1), *DATA, *USERS)
    groups = (GROUP_IN[0], GROUP_IN[1])
    broker = Broker(tmp_path / "b")
    try:
        await loaded(broker, image)
        for group in groups:
            response = await broker.coordinator.offset_commit(
                commit(
                    group,
                    cm.CommitEntry("orders", 0, 1000),
                    cm.CommitEntry("orders", 1, 5),
                    cm.CommitEntry("users", 0, 7),
                )
            )
            assert response.error is None
        image = replayed(image, RemoveTopicRecord(DATA_TID))
        broker.publish(image)
        for group in groups:  # at once: before any tombstone is acknowledged
            assert committed(broker.coordinator.offset_fetch(fetch(group))) == {("users", 0): 7}
        await asyncio.wait_for(broker.coordinator.wait_tombstones(), 5)
        for partition, group in enumerate(groups):
            assert log_records(broker, partition)[-2:] == [
                tombstone(group, "orders", 0),
                tombstone(group, "orders", 1),
            ]
        # Re-created: a consumer of the group starts without a committed offset.
        image = replayed(image, *ORDERS_AGAIN)
        broker.publish(image)
        answer = broker.coordinator.offset_fetch(fetch(groups[0], ("orders", 0)))
        assert committed(answer) == {("orders", 0): -1}
        await broker.coordinator.stop()
    finally:
        broker.close()
    # The tombstones hold when the partition loads again (the topic exists again, so only they
    # keep the old offsets out).
    assert await committed_after_restart(tmp_path / "b", image, *groups) == [
        {("users", 0): 7},
        {("users", 0): 7},
    ]


@pytest.mark.asyncio
async def test_a_topic_re_created_in_one_image_and_a_commit_right_after(tmp_path: Path) -> None:
    """The topic id changed between two images; a commit of the new topic accepted before the
    tombstones' task ran still lands after them in the log."""
    image = image_with(*offsets_topic(1, 1, 1), *DATA)
    group = GROUP_IN[0]
    broker = Broker(tmp_path / "b")
    try:
        await loaded(broker, image)
        await broker.coordinator.offset_commit(commit(group, cm.CommitEntry("orders", 0, 1000)))
        image = replayed(image, RemoveTopicRecord(DATA_TID), *ORDERS_AGAIN)
        broker.publish(image)
        assert committed(broker.coordinator.offset_fetch(fetch(group))) == {}
        # Awaited in this very step: it reaches the coordinator before the tombstones' task.
        response = await broker.coordinator.offset_commit(
            commit(group, cm.CommitEntry("orders", 0, 3))
        )
        assert response.error is None
        await asyncio.wait_for(broker.coordinator.wait_tombstones(), 5)
        assert log_records(broker, 0)[-2:] == [
            tombstone(group, "orders", 0),
            (OffsetCommitKey(group, "orders", 0), OffsetCommitValue(3, -1, "", NOW)),
        ]
        assert committed(broker.coordinator.offset_fetch(fetch(group))) == {("orders", 0): 3}
        await broker.coordinator.stop()
    finally:
        broker.close()
    assert await committed_after_restart(tmp_path / "b", image, group) == [{("orders", 0): 3}]


async def committed_and_stopped(root: Path, image: MetadataImage, group: str) -> None:
    """Commit orders-0 = 1000 and users-0 = 7 for `group` on a broker over `root`, then stop."""
    first = Broker(root)
    try:
        await loaded(first, image)
        response = await first.coordinator.offset_commit(
            commit(group, cm.CommitEntry("orders", 0, 1000), cm.CommitEntry("users", 0, 7))
        )
        assert response.error is None
        await first.coordinator.stop()
    finally:
        first.close()


@pytest.mark.parametrize("when", ["re-created while it loads", "deleted before it loads"])
@pytest.mark.asyncio
async def test_a_load_removes_a_deleted_topics_offsets(tmp_path: Path, when: str) -> None:
    """Re-created while the partition loads: the name is remembered until the load ends.
    Deleted while no broker led the partition (here: while the broker was down): the
    topic-partition is absent from the image when the load ends."""
    image = image_with(*offsets_topic(1, 1, 1), *DATA, *USERS)
    group = GROUP_IN[0]
    await committed_and_stopped(tmp_path / "b", image, group)
    second = Broker(tmp_path / "b")
    try:
        if when == "re-created while it loads":
            second.publish(image)
            assert second.coordinator.state_of(0) is ShardState.LOADING
            second.publish(replayed(image, RemoveTopicRecord(DATA_TID), *ORDERS_AGAIN))
        else:
            second.publish(replayed(image, RemoveTopicRecord(DATA_TID)))
        await asyncio.wait_for(second.coordinator.wait_loaded(), 5)
        assert committed(second.coordinator.offset_fetch(fetch(group))) == {("users", 0): 7}
        await asyncio.wait_for(second.coordinator.wait_tombstones(), 5)
        assert log_records(second, 0)[-1] == tombstone(group, "orders", 0)
    finally:
        second.close()


@pytest.mark.asyncio
async def test_a_commit_acknowledged_after_its_topic_was_re_created_stays_out(
    faked: tuple[Broker, FakeReplicas],
) -> None:
    broker, fake = faked
    image = image_with(*offsets_topic(1, 1, 1), *DATA)
    await loaded(broker, image)
    group = GROUP_IN[0]
    task = asyncio.create_task(
        broker.coordinator.offset_commit(commit(group, cm.CommitEntry("orders", 0, 8)))
    )
    await until_produced(fake, 1)
    broker.publish(replayed(image, RemoveTopicRecord(DATA_TID), *ORDERS_AGAIN))
    await until_produced(fake, 2)
    # Nothing of it was in the cache, yet the waiting commit's key gets its tombstone.
    (partition,) = fake.produced[1][0].partitions
    assert records_of(partition.records) == [tombstone(group, "orders", 0)]
    fake.gate.set()
    assert (await asyncio.wait_for(task, 5)).error is None
    answer = broker.coordinator.offset_fetch(fetch(group, ("orders", 0)))
    assert committed(answer) == {("orders", 0): -1}
    await broker.coordinator.stop()


@pytest.mark.asyncio
async def test_a_failed_tombstone_append_is_logged_and_stop_cancels_a_waiting_one(
    faked: tuple[Broker, FakeReplicas], caplog: pytest.LogCaptureFixture
) -> None:
    broker, fake = faked
    image = image_with(*offsets_topic(1, 1, 1), *DATA, *USERS)
    await loaded(broker, image)
    group = GROUP_IN[0]
    fake.gate.set()
    response = await broker.coordinator.offset_commit(
        commit(group, cm.CommitEntry("orders", 0, 1), cm.CommitEntry("users", 0, 2))
    )
    assert response.error is None
    fake.answer = NotEnoughReplicasError("isr 1 < 2")
    with caplog.at_level(logging.WARNING, "replog.server.groups.group_coordinator"):
        image = replayed(image, RemoveTopicRecord(DATA_TID))
        broker.publish(image)
        await asyncio.wait_for(broker.coordinator.wait_tombstones(), 5)
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "__consumer_offsets-0" in warning and "1 committed offsets" in warning
    assert "NOT_ENOUGH_REPLICAS: isr 1 < 2" in warning
    assert committed(broker.coordinator.offset_fetch(fetch(group))) == {("users", 0): 2}
    # A tombstone append waiting for acks=all when the coordinator stops.
    fake.gate.clear()
    broker.publish(replayed(image, RemoveTopicRecord(topic_id(52))))
    await until_produced(fake, 3)
    await asyncio.wait_for(broker.coordinator.stop(), 5)
    await asyncio.wait_for(broker.coordinator.wait_tombstones(), 5)


# --- offsets retention --------------------------------------------------------------------------

MINUTE_MS = 60_000


@pytest.mark.asyncio
async def test_offsets_expire_retention_minutes_after_their_commit(tmp_path: Path) -> None:
    config = GroupCoordinatorConfig(offsets_retention_minutes=10)
    image = image_with(*offsets_topic(1, 1, 1), *DATA, *USERS)
    group, other = GROUP_IN[0], GROUP_IN[1]
    broker = Broker(tmp_path / "b", config)
    try:
        await loaded(broker, image)
        await broker.coordinator.offset_commit(commit(group, cm.CommitEntry("orders", 0, 1)))
        broker.now = NOW + MINUTE_MS
        await broker.coordinator.offset_commit(commit(group, cm.CommitEntry("orders", 1, 2)))
        await broker.coordinator.offset_commit(commit(other, cm.CommitEntry("users", 0, 3)))
        broker.now = NOW + 10 * MINUTE_MS - 1
        assert broker.coordinator.expire_offsets() == 0
        broker.now = NOW + 10 * MINUTE_MS
        assert broker.coordinator.expire_offsets() == 1
        assert committed(broker.coordinator.offset_fetch(fetch(group))) == {("orders", 1): 2}
        await asyncio.wait_for(broker.coordinator.wait_tombstones(), 5)
        assert log_records(broker, 0)[-1] == tombstone(group, "orders", 0)
        broker.now = NOW + 11 * MINUTE_MS
        assert broker.coordinator.expire_offsets() == 2
        assert committed(broker.coordinator.offset_fetch(fetch(group))) == {}
        assert committed(broker.coordinator.offset_fetch(fetch(other))) == {}
        await broker.coordinator.stop()
    finally:
        broker.close()
    # The restarted broker's clock is back at NOW: only the tombstones keep the offsets out.
    reloaded = await committed_after_restart(tmp_path / "b", image, group, other, config=config)
    assert reloaded == [{}, {}]


@pytest.mark.asyncio
async def test_an_offset_with_a_commit_waiting_for_acks_does_not_expire(
    faked: tuple[Broker, FakeReplicas],
) -> None:
    broker, fake = faked
    await loaded(broker, image_with(*offsets_topic(1, 1, 1), *DATA))
    group = GROUP_IN[0]
    fake.gate.set()
    await broker.coordinator.offset_commit(commit(group, cm.CommitEntry("orders", 0, 1)))
    fake.gate.clear()
    broker.now = NOW + 7 * 24 * 60 * MINUTE_MS  # offsets.retention.minutes' default
    task = asyncio.create_task(
        broker.coordinator.offset_commit(commit(group, cm.CommitEntry("orders", 0, 2)))
    )
    await until_produced(fake, 2)
    assert broker.coordinator.expire_offsets() == 0
    assert len(fake.produced) == 2  # no tombstone
    fake.gate.set()
    assert (await asyncio.wait_for(task, 5)).error is None
    assert committed(broker.coordinator.offset_fetch(fetch(group))) == {("orders", 0): 2}
    assert broker.coordinator.expire_offsets() == 0  # committed now


@pytest.mark.asyncio
async def test_the_retention_task_runs_every_check_interval_until_stop(tmp_path: Path) -> None:
    config = GroupCoordinatorConfig(
        offsets_retention_minutes=1, offsets_retention_check_interval_ms=1
    )
    broker = Broker(tmp_path / "b", config)
    try:
        await loaded(broker, image_with(*offsets_topic(1, 1, 1), *DATA))
        group = GROUP_IN[0]
        await broker.coordinator.offset_commit(commit(group, cm.CommitEntry("orders", 0, 1)))
        broker.coordinator.start()
        await asyncio.sleep(0.02)
        assert committed(broker.coordinator.offset_fetch(fetch(group))) == {("orders", 0): 1}
        broker.now = NOW + MINUTE_MS
        async with asyncio.timeout(5):
            while committed(broker.coordinator.offset_fetch(fetch(group))):
                await asyncio.sleep(0.001)
        await asyncio.wait_for(broker.coordinator.stop(), 5)  # cancels the task
    finally:
        broker.close()


# --- large removals, failed tombstones ----------------------------------------------------------

# max.message.bytes 2 KiB: a removal's tombstones need many batches; segment.bytes 8 KiB: and
# several produce entries (a log refuses an append larger than a segment).
SMALL_LOG = LogConfig(max_message_bytes=2048, segment_bytes=8192)
MANY = 100
MANY_ORDERS = create_topic("orders", DATA_TID, *([(1,)] * MANY))
MANY_ORDERS_AGAIN = create_topic("orders", topic_id(77), *([(1,)] * MANY))
# A long group id in partition 0 too: ~330-byte tombstones.
LONG_GROUP = next(
    f"{'x' * 300}{i}" for i in range(100) if partition_for_group(f"{'x' * 300}{i}", 3) == 0
)


async def many_committed(broker: Broker, image: MetadataImage) -> tuple[str, str]:
    """Load `image` and commit orders-0..99 and users-0 for two groups of partition 0."""
    await loaded(broker, image)
    groups = (GROUP_IN[0], LONG_GROUP)
    for group in groups:
        for first in range(0, MANY, 4):  # commits within max.message.bytes
            entries = (cm.CommitEntry("orders", p, 1000 + p) for p in range(first, first + 4))
            assert (await broker.coordinator.offset_commit(commit(group, *entries))).error is None
        response = await broker.coordinator.offset_commit(
            commit(group, cm.CommitEntry("users", 0, 7))
        )
        assert response.error is None
    return groups


@pytest.mark.asyncio
async def test_a_removal_larger_than_max_message_bytes_appends_every_tombstone_first(
    tmp_path: Path,
) -> None:
    """Its tombstones go in batches within max.message.bytes, in several produce entries; a
    commit of the re-created topic issued meanwhile lands after all of them."""
    image = image_with(*offsets_topic(1, 1, 1), *MANY_ORDERS, *USERS)
    broker = Broker(tmp_path / "b", log_config=SMALL_LOG)
    try:
        groups = await many_committed(broker, image)
        image = replayed(image, RemoveTopicRecord(DATA_TID), *MANY_ORDERS_AGAIN)
        broker.publish(image)
        # Awaited in this very step: it reaches the coordinator before the tombstones' task.
        response = await broker.coordinator.offset_commit(
            commit(groups[1], cm.CommitEntry("orders", 5, 3))
        )
        assert response.error is None
        await asyncio.wait_for(broker.coordinator.wait_tombstones(), 5)
        batches = log_batches(broker, 0)
        new_commit = (OffsetCommitKey(groups[1], "orders", 5), OffsetCommitValue(3, -1, "", NOW))
        assert batches[-1][1] == [new_commit]
        tombstones = [b for b in batches if all(value is None for _, value in b[1])]
        assert len(tombstones) > 4 and all(size <= 2048 for size, _ in tombstones)
        assert sum(size for size, _ in tombstones) > 8192  # several produce entries
        assert [record for _, batch in batches[-1 - len(tombstones) : -1] for record in batch] == [
            tombstone(group, "orders", p) for group in groups for p in range(MANY)
        ]
        await broker.coordinator.stop()
    finally:
        broker.close()
    # The topic exists again: only the tombstones keep the old offsets out.
    assert await committed_after_restart(tmp_path / "b", image, *groups) == [
        {("users", 0): 7},
        {("orders", 5): 3, ("users", 0): 7},
    ]


def produced_tombstones(fake: FakeReplicas, index: int) -> list[Record]:
    """The records of the `index`th produce request (every entry)."""
    request = fake.produced[index][0]
    return [record for entry in request.partitions for record in records_of(entry.records)]


async def failed_removal(broker: Broker, fake: FakeReplicas) -> MetadataImage:
    """orders-0, orders-1 and users-0 committed for GROUP_IN[0]; orders deleted, and the
    tombstones' append failed (the second produce request)."""
    image = image_with(*offsets_topic(1, 1, 1), *DATA, *USERS)
    await loaded(broker, image)
    group = GROUP_IN[0]
    fake.gate.set()
    response = await broker.coordinator.offset_commit(
        commit(
            group,
            cm.CommitEntry("orders", 0, 1),
            cm.CommitEntry("orders", 1, 2),
            cm.CommitEntry("users", 0, 3),
        )
    )
    assert response.error is None
    fake.answer = NotEnoughReplicasError("isr 1 < 2")
    image = replayed(image, RemoveTopicRecord(DATA_TID))
    broker.publish(image)
    await asyncio.wait_for(broker.coordinator.wait_tombstones(), 5)
    assert len(fake.produced) == 2
    assert produced_tombstones(fake, 1) == [
        tombstone(group, "orders", 0),
        tombstone(group, "orders", 1),
    ]
    fake.answer = None
    return image


@pytest.mark.asyncio
async def test_a_failed_tombstone_append_is_retried_on_the_next_tick(
    faked: tuple[Broker, FakeReplicas],
) -> None:
    broker, fake = faked
    await failed_removal(broker, fake)
    group = GROUP_IN[0]
    assert broker.coordinator.expire_offsets() == 0  # nothing expired, the tombstones retried
    await asyncio.wait_for(broker.coordinator.wait_tombstones(), 5)
    assert produced_tombstones(fake, 2) == [
        tombstone(group, "orders", 0),
        tombstone(group, "orders", 1),
    ]
    broker.coordinator.expire_offsets()  # appended: nothing left to retry
    await asyncio.wait_for(broker.coordinator.wait_tombstones(), 5)
    assert len(fake.produced) == 3
    await broker.coordinator.stop()


@pytest.mark.asyncio
async def test_a_failed_tombstone_append_is_retried_after_a_backoff_until_unloaded(
    faked: tuple[Broker, FakeReplicas],
) -> None:
    broker, fake = faked
    broker.coordinator.tombstone_retry_backoff_ms = (5, 10)
    image = await failed_removal(broker, fake)
    fake.answer = NotEnoughReplicasError("isr 1 < 2")
    await until_produced(fake, 4)  # retried twice, without a tick
    assert produced_tombstones(fake, 3) == produced_tombstones(fake, 1)
    # Leadership moves: the pending tombstones die with the partition.
    broker.publish(
        replayed(image, PartitionChangeRecord(OFFSETS_TID, 0, leader=2, isr=(2,), replicas=(1, 2)))
    )
    await asyncio.wait_for(broker.coordinator.wait_tombstones(), 5)
    count = len(fake.produced)
    await asyncio.sleep(0.05)
    assert len(fake.produced) == count
    await broker.coordinator.stop()


@pytest.mark.asyncio
async def test_a_key_committed_again_before_the_retry_gets_no_tombstone(
    faked: tuple[Broker, FakeReplicas],
) -> None:
    broker, fake = faked
    image = await failed_removal(broker, fake)
    group = GROUP_IN[0]
    broker.publish(replayed(image, *ORDERS_AGAIN))
    response = await broker.coordinator.offset_commit(commit(group, cm.CommitEntry("orders", 0, 5)))
    assert response.error is None  # the third produce request
    # A commit of orders-1 waits for acks=all at the tick: its key stays pending.
    fake.gate.clear()
    task = asyncio.create_task(
        broker.coordinator.offset_commit(commit(group, cm.CommitEntry("orders", 1, 6)))
    )
    await until_produced(fake, 4)
    broker.coordinator.expire_offsets()
    await asyncio.sleep(0)
    assert len(fake.produced) == 4  # orders-0 is committed again, orders-1 waits
    fake.answer = RequestTimedOutError("no acks")  # orders-1's commit fails after all
    fake.gate.set()
    assert (await asyncio.wait_for(task, 5)).error is not None
    fake.answer = None
    broker.coordinator.expire_offsets()
    await asyncio.wait_for(broker.coordinator.wait_tombstones(), 5)
    assert produced_tombstones(fake, 4) == [tombstone(group, "orders", 1)]
    assert committed(broker.coordinator.offset_fetch(fetch(group))) == {
        ("orders", 0): 5,
        ("users", 0): 3,
    }
    await broker.coordinator.stop()


@pytest.mark.asyncio
async def test_a_large_removal_is_one_produce_request_that_a_commit_waits_for(
    tmp_path: Path,
) -> None:
    """Its entries go in one request (the replica manager appends them all before its first
    await); a commit issued in the same step is the next request, even while the tombstones
    wait for acks=all."""
    broker = Broker(tmp_path / "b", log_config=SMALL_LOG)
    fake = FakeReplicas(broker.rm)
    broker.coordinator = GroupCoordinator(
        1, fake, broker.creator, wall_clock=lambda: broker.now, tasks=LoopTasks()
    )
    try:
        image = image_with(*offsets_topic(1, 1, 1), *MANY_ORDERS)
        await loaded(broker, image)
        fake.gate.set()
        for group in (GROUP_IN[0], LONG_GROUP):
            entries = (cm.CommitEntry("orders", p, p) for p in range(MANY))
            assert (await broker.coordinator.offset_commit(commit(group, *entries))).error is None
        fake.gate.clear()
        broker.publish(replayed(image, RemoveTopicRecord(DATA_TID), *MANY_ORDERS_AGAIN))
        task = asyncio.create_task(
            broker.coordinator.offset_commit(commit(GROUP_IN[0], cm.CommitEntry("orders", 0, 3)))
        )
        await until_produced(fake, 4)
        removal, new_commit = fake.produced[2][0], fake.produced[3][0]
        assert len(removal.partitions) > 1  # several entries, each within segment.bytes
        assert len(produced_tombstones(fake, 2)) == 2 * MANY
        assert records_of(new_commit.partitions[0].records) == [
            (OffsetCommitKey(GROUP_IN[0], "orders", 0), OffsetCommitValue(3, -1, "", NOW))
        ]
        fake.gate.set()
        assert (await asyncio.wait_for(task, 5)).error is None
        await broker.coordinator.stop()
    finally:
        broker.close()


def test_group_consumer_session_and_interval_are_within_kafkas_bounds() -> None:
    """Kafka's defaults (session 45-60 s, interval 5-15 s) refuse a 3 s session unless the
    bound is lowered too; the interval must stay below the session."""
    with pytest.raises(ConfigError, match=r"group\.consumer\.session\.timeout\.ms is 3000"):
        GroupCoordinatorConfig.from_properties({"group.consumer.session.timeout.ms": "3000"})
    with pytest.raises(ConfigError, match=r"must be less than group\.consumer\.session"):
        GroupCoordinatorConfig.from_properties(
            {
                "group.consumer.min.session.timeout.ms": "1000",
                "group.consumer.session.timeout.ms": "5000",
            }
        )
    lowered = GroupCoordinatorConfig.from_properties(
        {
            "group.consumer.min.session.timeout.ms": "1000",
            "group.consumer.session.timeout.ms": "6000",
            "group.consumer.max.heartbeat.interval.ms": "20000",
        }
    ).consumer
    assert (lowered.session_timeout_ms, lowered.max_heartbeat_interval_ms) == (6000, 20000)


def test_group_consumer_assignors_takes_kafkas_names_and_class_names() -> None:
    config = GroupCoordinatorConfig.from_properties(
        {
            "group.consumer.assignors": "range, org.apache.kafka.coordinator.group.assignor."
            "UniformAssignor",
            "group.consumer.heartbeat.interval.ms": "500",
            "group.consumer.min.heartbeat.interval.ms": "500",
            "group.consumer.session.timeout.ms": "3000",
            "group.consumer.min.session.timeout.ms": "3000",
        }
    )
    consumer = config.consumer
    assert consumer.assignors == ("range", "uniform")  # the first: the groups' default
    assert (consumer.heartbeat_interval_ms, consumer.session_timeout_ms) == (500, 3000)
    assert GroupCoordinatorConfig.from_properties({}).consumer.assignors == ("uniform", "range")
    for bad in ("sticky", "", "range,range"):
        with pytest.raises(ConfigError, match=r"group\.consumer\.assignors is"):
            GroupCoordinatorConfig.from_properties({"group.consumer.assignors": bad})


@pytest.mark.asyncio
async def test_topic_changes_walk_the_image_only_for_led_offsets_partitions(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The consumer groups' topic sizes walk every topic of the image: a broker leading no
    `__consumer_offsets` partition has no group to give them to and walks nothing, though
    each image whose topics changed (an ISR change's too) came with that walk, thousands of
    them while 100,000 partitions were created (docs/benchmarks.md, "Where a creation's CPU
    goes")."""
    from replog.server.groups import group_coordinator

    walks: list[int] = []
    real = group_coordinator._topic_sizes

    def counted(image: MetadataImage) -> dict[str, Any]:
        walks.append(len(image.topics.by_name))
        return real(image)

    monkeypatch.setattr(group_coordinator, "_topic_sizes", counted)
    image = image_with(*offsets_topic(2, 2, 2), *DATA)  # broker 2 leads every offsets partition
    broker.publish(image)
    image = replayed(image, PartitionChangeRecord(DATA_TID, 0, isr=(1,)))
    broker.publish(image)
    assert walks == []
    # Once it leads one, the shard gets the topics at its load and at each change after it.
    image = replayed(
        image, *USERS, PartitionChangeRecord(OFFSETS_TID, 0, leader=1, isr=(1,), replicas=(1,))
    )
    await loaded(broker, image)
    assert walks == [3, 3]  # the image's (a shard is loading) and the load's
    broker.publish(replayed(image, PartitionChangeRecord(DATA_TID, 1, isr=(1,))))
    assert walks == [3, 3, 3]


@pytest.mark.asyncio
async def test_a_commit_finds_its_topic_in_the_newest_image_before_its_replicas_exist(
    tmp_path: Path,
) -> None:
    """A topic just created is in the broker's newest metadata image before the image the
    coordinator follows (which waits for every replica to exist): a commit of its offsets is
    taken then, as Kafka's metadata cache takes it; without the newest image it is
    UNKNOWN_TOPIC_OR_PARTITION."""
    fresh = create_topic("fresh", topic_id(53), (1,))
    newest = image_with(*offsets_topic(1, 1, 1), *DATA, *USERS, *fresh)
    for given, expected in ((lambda: newest, None), (None, "UNKNOWN_TOPIC_OR_PARTITION")):
        node = Broker(tmp_path / f"broker-{expected}", metadata_image=given)
        try:
            await loaded(node, image_with(*offsets_topic(1, 1, 1), *DATA, *USERS))
            answer = await node.coordinator.offset_commit(
                commit(GROUP_IN[0], cm.CommitEntry("fresh", 0, 4))
            )
            assert answer.error is None
            ((_, _, error),) = [(p.topic, p.partition, p.error) for p in answer.partitions]
            assert (error and error.error_name) == expected
            if expected is None:  # taken, and read back while the followed image lacks it
                assert committed(
                    node.coordinator.offset_fetch(fetch(GROUP_IN[0], ("fresh", 0)))
                ) == {("fresh", 0): 4}
        finally:
            await node.coordinator.stop()
            node.close()


@pytest.mark.asyncio
async def test_a_commit_of_a_re_created_topic_outlives_the_lagging_removal_of_the_old_id(
    tmp_path: Path,
) -> None:
    """The broker's newest image holds "orders" re-created (a new id) while the image the
    coordinator follows still holds the old one: a commit of the new topic is taken, and when
    the followed image drops the old id, only the old topic's offsets go (orders-1 here)."""
    group = GROUP_IN[0]
    old = image_with(*offsets_topic(1, 1, 1), *DATA)
    newest = replayed(old, RemoveTopicRecord(DATA_TID), *ORDERS_AGAIN)
    current = [old]
    node = Broker(tmp_path / "b", metadata_image=lambda: current[0])
    try:
        await loaded(node, old)
        entries = (cm.CommitEntry("orders", 0, 1000), cm.CommitEntry("orders", 1, 5))
        assert (await node.coordinator.offset_commit(commit(group, *entries))).error is None
        current[0] = newest
        answer = await node.coordinator.offset_commit(commit(group, cm.CommitEntry("orders", 0, 3)))
        assert [p.error for p in answer.partitions] == [None]
        node.publish(newest)
        await asyncio.wait_for(node.coordinator.wait_tombstones(), 5)
        assert committed(node.coordinator.offset_fetch(fetch(group))) == {("orders", 0): 3}
        assert log_records(node, 0)[-1] == tombstone(group, "orders", 1)
        await node.coordinator.stop()
    finally:
        node.close()
    assert await committed_after_restart(tmp_path / "b", newest, group) == [{("orders", 0): 3}]
