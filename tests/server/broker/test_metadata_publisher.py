"""BrokerMetadataListener (the broker role's Raft listener) and the broker role's config: Raft
items in, publications out; faults isolated per publisher; fatal errors escape."""

from __future__ import annotations

import logging
import uuid
from typing import Any

import pytest

from replog.errors import CorruptRecordError, KafkaStorageError, MetadataLoadError
from replog.quorum.metadata.delta import MetadataDelta
from replog.quorum.metadata.image import MetadataImage, MetadataProvenance
from replog.quorum.metadata.loader import LoaderManifest, ManifestKind, Publication
from replog.quorum.metadata.local_changes import LocalChanges
from replog.quorum.metadata.record_batches import encode_snapshot
from replog.quorum.metadata.record_codec import encode_record
from replog.quorum.metadata.records import (
    METADATA_VERSION_FEATURE,
    Endpoint,
    FeatureLevelRecord,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from replog.quorum.metadata.snapshot import image_from_records, image_to_records
from replog.quorum.metadata.steps import REPLAY_STEP_RECORDS, Steps
from replog.quorum.raft.control_records import LeaderChangeRecord, leader_change_batch
from replog.quorum.raft.ready import CommittedBatch, LeaderChange, LoadSnapshot
from replog.quorum.raft.snapshot_id import SnapshotId
from replog.record import build_batch
from replog.server.broker.broker_runtime import BrokerRuntime, broker_config_from_node
from replog.server.broker.metadata_publisher import BrokerMetadataListener
from replog.server.config.node_config import NodeConfig
from replog.server.raft.raft_metadata_log import committed_records_in_steps
from replog.testing import LoopTasks

BROKER = 2
ORDERS = uuid.UUID(int=1)
BOOTSTRAP = FeatureLevelRecord(METADATA_VERSION_FEATURE, 7)


def committed(base_offset: int, *records: MetadataRecord, quorum_epoch: int = 1) -> CommittedBatch:
    batch = build_batch(
        [(0, None, encode_record(r), ()) for r in records],
        base_offset=base_offset,
        partition_leader_epoch=quorum_epoch,
    )
    return CommittedBatch(base_offset, base_offset + len(records) - 1, quorum_epoch, False, batch)


def leader_change(offset: int, leader_id: int, quorum_epoch: int = 1) -> CommittedBatch:
    batch = leader_change_batch(
        LeaderChangeRecord(leader_id, (leader_id,), (leader_id,)),
        base_offset=offset,
        quorum_epoch=quorum_epoch,
        timestamp_ms=0,
    )
    return CommittedBatch(offset, offset, quorum_epoch, True, batch)


class Recorder:
    def __init__(self, name: str = "recorder") -> None:
        self.name = name
        self.seen: list[tuple[MetadataDelta, MetadataImage, LoaderManifest]] = []

    def on_metadata_update(
        self, delta: MetadataDelta, image: MetadataImage, manifest: LoaderManifest
    ) -> None:
        self.seen.append((delta, image, manifest))


class LocalChangesRecorder:
    """What each publication asks of broker BROKER (as its replica manager classifies it)."""

    name = "local-changes"

    def __init__(self) -> None:
        self.changes: list[tuple[MetadataProvenance, LocalChanges]] = []

    def on_metadata_update(
        self, delta: MetadataDelta, image: MetadataImage, manifest: LoaderManifest
    ) -> None:
        changes = Publication(delta, image, manifest).local_changes(BROKER)
        self.changes.append((manifest.provenance, changes))


class Failing:
    name = "failing"

    def on_metadata_update(self, *args: Any) -> None:
        raise RuntimeError("publisher bug")


def listener(high_watermark: int | None, snapshots: dict[SnapshotId, bytes] | None = None) -> Any:
    hw = {"value": high_watermark}
    leaders: list[int | None] = []
    made = BrokerMetadataListener(
        BROKER,
        read_snapshot=lambda snapshot_id: (snapshots or {})[snapshot_id],
        high_watermark=lambda: hw["value"],
        on_leader_change=leaders.append,
    )
    return made, hw, leaders


def topic_records() -> list[MetadataRecord]:
    return [
        RegisterBrokerRecord(BROKER, uuid.UUID(int=9), 1),
        TopicRecord("orders", ORDERS),
        PartitionRecord(ORDERS, 0, (BROKER, 3), (BROKER, 3), BROKER),
        PartitionRecord(ORDERS, 1, (3, BROKER), (3, BROKER), 3),
    ]


def test_committed_batches_are_decoded_loaded_and_published_after_the_catch_up() -> None:
    feed, _, leaders = listener(high_watermark=7)
    first, second = Recorder("first"), Recorder("second")
    feed.install(first)
    feed.install(second)
    feed(leader_change(0, leader_id=1))
    feed(LeaderChange(1, 1))
    assert leaders == [1]
    feed(committed(1, BOOTSTRAP, *topic_records()))
    assert first.seen == [] and feed.image is MetadataImage.EMPTY  # offset 5 < 7 - 1
    feed(committed(6, NoOpRecord()))
    assert len(first.seen) == len(second.seen) == 1
    _, image, manifest = first.seen[0]
    assert image is feed.image and second.seen[0][1] is image
    assert manifest.provenance == MetadataProvenance(6, 1)
    assert manifest.batches == 3  # the leader change counts as a batch
    assert image.topics.by_name["orders"].partitions[1].leader == 3
    assert feed.last_applied_offset == 6


def test_a_failing_publisher_does_not_stop_the_others(caplog: pytest.LogCaptureFixture) -> None:
    feed, _, _ = listener(high_watermark=1)
    recorder = Recorder()
    feed.install(Failing())
    feed.install(recorder)
    with caplog.at_level(logging.ERROR, logger="replog.server.metadata"):
        feed(committed(0, BOOTSTRAP))
        feed(committed(1, NoOpRecord()))
    assert len(recorder.seen) == 2
    assert feed.publisher_faults == 2
    assert "metadata publisher failing failed on the image at offset 1" in caplog.text


def test_a_publisher_installed_late_gets_the_whole_image_first() -> None:
    feed, _, _ = listener(high_watermark=1)
    feed(committed(0, BOOTSTRAP, *topic_records()))
    local = LocalChangesRecorder()
    feed.install(local)
    ((provenance, changes),) = local.changes
    assert provenance.last_offset == 4
    assert [p.partition_id for p in changes.leaders] == [0]
    assert [p.partition_id for p in changes.followers] == [1]


def test_a_snapshot_load_reads_the_file_and_reports_the_partitions_that_went_away() -> None:
    before = [BOOTSTRAP, *topic_records()]
    after_image = image_from_records(
        [BOOTSTRAP, RegisterBrokerRecord(BROKER, uuid.UUID(int=9), 1)], MetadataProvenance(19, 2)
    )
    snapshot_id = SnapshotId(20, 2)
    data = encode_snapshot(image_to_records(after_image), quorum_epoch=2, timestamp_ms=0)
    feed, hw, _ = listener(high_watermark=5, snapshots={snapshot_id: data})
    local = LocalChangesRecorder()
    recorder = Recorder()
    feed.install(local)
    feed.install(recorder)
    feed(committed(0, *before))
    hw["value"] = 20
    feed(LoadSnapshot(snapshot_id))
    _, image, manifest = recorder.seen[-1]
    assert manifest.kind is ManifestKind.SNAPSHOT
    assert image == after_image
    _, changes = local.changes[-1]
    assert [(p.topic_name, p.partition_id) for p in changes.deletes] == [
        ("orders", 0),
        ("orders", 1),
    ]


def test_a_large_snapshot_is_decoded_in_steps_and_loaded_whole_at_its_end() -> None:
    # A broker-only node has no controller to decode a restart's snapshot for it: its own
    # loader decodes it a slice a time, publishing nothing before the whole snapshot is in.
    partitions = REPLAY_STEP_RECORDS * 3
    records = [
        BOOTSTRAP,
        TopicRecord("orders", ORDERS),
        *[PartitionRecord(ORDERS, p, (3, BROKER), (3, BROKER), 3) for p in range(partitions)],
    ]
    snapshot_id = SnapshotId(len(records), 2)
    data = encode_snapshot(records, quorum_epoch=2, timestamp_ms=0)
    feed, _, _ = listener(high_watermark=len(records), snapshots={snapshot_id: data})
    recorder = Recorder()
    feed.install(recorder)
    steps = 0
    for _ in feed.apply_in_steps(LoadSnapshot(snapshot_id)):
        steps += 1
        assert not recorder.seen  # nothing half-loaded shows
    assert steps >= 3
    assert len(recorder.seen) == 1
    assert len(feed.image.topics.by_name["orders"].partitions) == partitions


def test_undecodable_or_out_of_order_metadata_escapes_to_stop_the_node() -> None:
    feed, _, _ = listener(high_watermark=10)
    garbage = build_batch([(0, None, b"\xff\xff not a record", ())], base_offset=0)
    with pytest.raises(CorruptRecordError, match="offset 0"):
        feed(CommittedBatch(0, 0, 1, False, garbage))
    feed, _, _ = listener(high_watermark=10)
    with pytest.raises(MetadataLoadError, match="expected a batch at offset 0"):
        feed(committed(3, BOOTSTRAP))


# --- the broker role's configuration -------------------------------------------------------------


def node(**extra: str) -> NodeConfig:
    properties = {
        "process.roles": "broker,controller",
        "node.id": "2",
        "cluster.id": "c1",
        "controller.quorum.voters": "1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095",
        "listeners": "CONTROLLER://127.0.0.1:9094",
        "log.dirs": "/tmp/replog-test-unused",
        **{key.replace("_", "."): value for key, value in extra.items()},
    }
    return NodeConfig.from_properties(properties)


def test_the_broker_config_comes_from_kafkas_names() -> None:
    config, addresses = broker_config_from_node(node())
    assert (config.broker_id, config.cluster_id) == (2, "c1")
    assert config.controller_ids == (1, 2, 3)
    assert addresses == {1: "127.0.0.1:9093", 2: "127.0.0.1:9094", 3: "127.0.0.1:9095"}
    assert config.listeners == (Endpoint("CONTROLLER", "127.0.0.1", 9094, "PLAINTEXT"),)
    assert config.rack is None
    assert (config.heartbeat_interval_ms, config.session_timeout_ms) == (2000, 9000)
    assert config.initial_registration_timeout_ms == 60_000
    assert config.request_timeout_ms == 2000

    config, _ = broker_config_from_node(
        node(
            broker_rack="rack-a",
            advertised_listeners="PLAINTEXT://broker2.example:9092,SSL://broker2.example:9093",
            broker_heartbeat_interval_ms="500",
            broker_session_timeout_ms="4000",
            initial_broker_registration_timeout_ms="1000",
        )
    )
    assert config.rack == "rack-a"
    assert config.listeners == (
        Endpoint("PLAINTEXT", "broker2.example", 9092, "PLAINTEXT"),
        Endpoint("SSL", "broker2.example", 9093, "SSL"),
    )
    assert (config.heartbeat_interval_ms, config.session_timeout_ms) == (500, 4000)
    assert config.initial_registration_timeout_ms == 1000


def test_the_broker_runtime_listens_to_the_raft_driver() -> None:
    class FakeDriver:
        clock = staticmethod(lambda: 0)
        listeners: list[Any] = []

        class storage:  # stands in for RaftStorage
            @staticmethod
            def read_whole_snapshot(snapshot_id: SnapshotId) -> bytes:
                raise AssertionError("no snapshot here")

        def learned_high_watermark(self) -> int | None:
            return 1

        def add_stepped_listener(self, listener: Any) -> None:
            self.listeners.append(listener)

    driver = FakeDriver()
    runtime = BrokerRuntime.for_node(node(), driver, tasks=LoopTasks())  # type: ignore[arg-type]
    (feed,) = driver.listeners
    for _ in feed(committed(0, BOOTSTRAP)):
        pass
    assert runtime.image.features.metadata_version == 7


@pytest.mark.parametrize(
    "failure",
    [
        OSError(28, "No space left on device"),
        KafkaStorageError("t-0: write failed: No space left on device"),
    ],
    ids=["os-error", "storage-error"],
)
def test_a_storage_error_applying_an_image_stops_the_broker_without_a_traceback(
    caplog: pytest.LogCaptureFixture, failure: Exception
) -> None:
    # A leader-epoch checkpoint's ENOSPC is a storage failure, not a publisher fault to log
    # with a traceback while the broker goes on.
    from replog.server.broker.broker_runtime import _StorageGuard

    class FailingManager:
        name = "replica-manager"

        def update_in_steps(self, *_: object) -> Steps[None]:
            yield
            raise failure

    feed, _, _ = listener(high_watermark=1)
    stopped: list[KafkaStorageError] = []
    feed.install(_StorageGuard(FailingManager(), stopped.append))  # type: ignore[arg-type]
    with caplog.at_level(logging.ERROR, logger="replog.server.metadata"):
        feed(committed(0, BOOTSTRAP))
    assert len(stopped) == 1 and isinstance(stopped[0], KafkaStorageError)
    assert "no space left" in str(stopped[0]).lower()
    assert feed.publisher_faults == 0 and "Traceback" not in caplog.text


def test_a_large_batch_is_replayed_in_steps_and_published_whole_at_its_end() -> None:
    feed, _, _ = listener(high_watermark=1)
    recorder = Recorder()
    feed.install(recorder)
    partitions = REPLAY_STEP_RECORDS * 3
    created = [
        BOOTSTRAP,
        RegisterBrokerRecord(BROKER, uuid.UUID(int=9), 1),
        TopicRecord("orders", ORDERS),
        *[PartitionRecord(ORDERS, p, (3, BROKER), (3, BROKER), 3) for p in range(partitions)],
    ]
    feed(committed(0, *created))
    assert len(recorder.seen) == 1
    image = feed.image
    moves = [
        PartitionChangeRecord(ORDERS, p, isr=(BROKER,), leader=BROKER) for p in range(partitions)
    ]
    steps = 0
    for _ in feed.apply_in_steps(committed(len(created), *moves)):
        steps += 1
        assert feed.image is image and len(recorder.seen) == 1  # nothing half-applied shows
    # Between three slices decoded, between three replayed, and before the publication.
    assert steps == 5
    assert len(recorder.seen) == 2 and recorder.seen[1][1] is feed.image
    assert feed.last_applied_offset == len(created) + partitions - 1
    led = feed.image.topics.by_name["orders"].partitions
    assert all(led[p].leader == BROKER for p in range(partitions))


def test_a_batch_is_decoded_in_steps_once_for_both_listeners_of_a_combined_node() -> None:
    records = [NoOpRecord()] * (REPLAY_STEP_RECORDS * 2 + 1)
    batch = committed(0, *records)
    steps = committed_records_in_steps(batch, node_id=BROKER)
    first = None
    taken = 0
    while first is None:
        try:
            next(steps)
            taken += 1
        except StopIteration as done:
            first = done.value
    assert taken == 2 and first.records == tuple(records)
    # The second listener of the same node gets the same decode at once.
    again = committed_records_in_steps(batch, node_id=BROKER)
    with pytest.raises(StopIteration) as done:
        next(again)
    assert done.value.value is first


class SteppedRecorder(Recorder):
    """A publisher working on each publication in `steps` steps, seen only at the last."""

    def __init__(self, name: str, steps: int, fail: bool = False) -> None:
        super().__init__(name)
        self.steps = steps
        self.fail = fail
        self.taken = 0

    def update_in_steps(self, publication: Publication) -> Steps[None]:
        for _ in range(self.steps):
            self.taken += 1
            yield
        if self.fail:
            raise RuntimeError("publisher bug")
        self.seen.append((publication.delta, publication.image, publication.manifest))


def test_a_stepped_publisher_gets_the_publication_in_steps_before_the_publishers_after_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    feed, _, _ = listener(high_watermark=1)
    before, stepped, failing, after = (
        Recorder("before"),
        SteppedRecorder("stepped", 3),
        SteppedRecorder("failing", 1, fail=True),
        Recorder("after"),
    )
    for publisher in (before, stepped, failing, after):
        feed.install(publisher)
    steps = feed.apply_in_steps(committed(0, BOOTSTRAP, *topic_records()))
    for taken in range(1, 4):
        next(steps)
        assert stepped.taken == taken
        assert (len(before.seen), len(stepped.seen), len(after.seen)) == (1, 0, 0)
    # Installed between two steps: the image once, as its catch-up, and not again.
    late = Recorder("late")
    feed.install(late)
    assert [seen[2].kind for seen in late.seen] == [ManifestKind.SNAPSHOT]
    next(steps)  # the failing publisher's step: the stepped one is done
    assert (len(stepped.seen), len(after.seen)) == (1, 0)
    with caplog.at_level(logging.ERROR), pytest.raises(StopIteration):
        next(steps)
    assert len(after.seen) == 1 and after.seen[0][1] is feed.image
    assert len(late.seen) == 1 and late.seen[0][1] is feed.image
    assert feed.publisher_faults == 1 and "publisher failing failed" in caplog.text
    # At once (`__call__`, a plain listener) the stepped publisher runs all its steps.
    feed(committed(5, NoOpRecord()))
    assert stepped.taken == 6 and len(stepped.seen) == 2 and len(after.seen) == 2


def test_a_stepped_publisher_installed_late_catches_up_in_steps_and_then_hears_in_order() -> None:
    """The replica manager is installed after the first image (a restart: every replica it
    holds): its catch-up runs in its steps, and a publication made between two of them
    reaches it only after the catch-up, as the change from the image it caught up to."""
    feed, _, _ = listener(high_watermark=1)
    before = Recorder("before")
    feed.install(before)
    feed(committed(0, BOOTSTRAP, *topic_records()))
    first = feed.image
    stepped = SteppedRecorder("stepped", 3)
    steps = feed.install_in_steps(stepped)
    next(steps)
    assert stepped.taken == 1 and stepped.seen == []  # not at once: in its steps
    # A publication between two catch-up steps goes to the publishers already installed.
    feed(committed(5, PartitionChangeRecord(ORDERS, 1, leader=BROKER)))
    assert len(before.seen) == 2 and stepped.seen == []
    for _ in steps:
        pass
    images = [seen[1] for seen in stepped.seen]
    assert images == [first, feed.image]  # never the newer image before the older one
    second = stepped.seen[1][2]
    assert second.previous is first  # what changed since the image it had
    changes = Publication(*stepped.seen[1]).local_changes(BROKER)
    assert [(p.topic_name, p.partition_id) for p in changes.leaders] == [("orders", 1)]
    # Installed now: it hears the next publication once, like any publisher.
    feed(committed(6, NoOpRecord()))
    assert len(stepped.seen) == 3 and stepped.seen[2][1] is feed.image
