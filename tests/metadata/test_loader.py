"""MetadataLoader: catch-up before the first publication, a publication at every batch end after
it, snapshot loads, typed errors naming the offset, and (Hypothesis) the same images for any
chunking of the same committed log."""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from metadata_helpers import bootstrapped, create_topic, register, topic_id
from metadata_strategies import BROKER_POOL, valid_logs

from replog.errors import MetadataLoadError, MetadataReplayError
from replog.quorum.metadata.delta import MetadataDelta
from replog.quorum.metadata.image import MetadataImage, MetadataProvenance
from replog.quorum.metadata.loader import (
    REPLAY_STEP_RECORDS,
    ManifestKind,
    MetadataLoader,
    Publication,
)
from replog.quorum.metadata.local_changes import local_changes, local_changes_between
from replog.quorum.metadata.log_batches import CommittedRecords, SnapshotRecords
from replog.quorum.metadata.records import (
    METADATA_VERSION_FEATURE,
    FeatureLevelRecord,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    RemoveTopicRecord,
)
from replog.quorum.metadata.snapshot import image_from_records, image_to_records
from replog.quorum.metadata.steps import Steps

EPOCH = 4
BOOTSTRAP = FeatureLevelRecord(METADATA_VERSION_FEATURE, 7)
ORDERS = topic_id(1)


def batch(
    base_offset: int, *records: MetadataRecord, quorum_epoch: int = EPOCH
) -> CommittedRecords:
    return CommittedRecords(base_offset, base_offset + len(records) - 1, quorum_epoch, records)


def control(offset: int, quorum_epoch: int = EPOCH) -> CommittedRecords:
    """A one-record control batch (Raft's LeaderChange): no metadata records."""
    return CommittedRecords(offset, offset, quorum_epoch, ())


def replay_all(records: list[MetadataRecord], last_offset: int) -> MetadataImage:
    delta = MetadataDelta(MetadataImage.EMPTY)
    for offset, record in enumerate(records):
        delta.replay(record, offset)
    return delta.apply(MetadataProvenance(last_offset, EPOCH))


# --- catch-up ----------------------------------------------------------------------------------


def test_nothing_is_published_until_the_high_watermark_is_reached() -> None:
    loader = MetadataLoader()
    # The log holds offsets 0..5 committed (high watermark 6); batches arrive one by one.
    assert loader.handle_commit(control(0), high_watermark=6) is None
    assert loader.handle_commit(batch(1, BOOTSTRAP), high_watermark=6) is None
    assert loader.handle_commit(batch(2, *create_topic("orders", ORDERS, (1,))), 6) is None
    assert loader.image is MetadataImage.EMPTY
    assert loader.last_applied_offset == -1
    assert loader.last_loaded_offset == 3
    assert not loader.caught_up

    published = loader.handle_commit(batch(4, register(1, 4), NoOpRecord()), high_watermark=6)

    assert published is not None and loader.caught_up
    # One publication carries everything loaded while catching up, over the empty image.
    assert published.manifest.kind is ManifestKind.LOG
    assert published.manifest.previous is MetadataImage.EMPTY
    assert published.manifest.batches == 4
    assert published.manifest.records == 5
    assert published.delta.base is MetadataImage.EMPTY
    assert published.image.provenance == MetadataProvenance(5, EPOCH)
    assert published.image.topics.by_name["orders"].partitions[0].leader == 1
    assert 1 in published.image.cluster.brokers
    assert loader.image is published.image
    assert loader.last_applied_offset == 5


def test_an_unknown_high_watermark_means_still_catching_up() -> None:
    loader = MetadataLoader()
    assert loader.handle_commit(batch(0, BOOTSTRAP), high_watermark=None) is None
    assert loader.handle_commit(control(1), high_watermark=None) is None
    published = loader.handle_commit(control(2), high_watermark=3)
    assert published is not None
    assert published.manifest.batches == 3


def test_once_caught_up_every_batch_end_publishes_even_behind_a_moving_high_watermark() -> None:
    loader = MetadataLoader()
    first = loader.handle_commit(batch(0, BOOTSTRAP), high_watermark=1)
    assert first is not None
    # The high watermark ran ahead (offsets up to 99 are committed): still one image per batch.
    second = loader.handle_commit(batch(1, *create_topic("orders", ORDERS, (1, 2))), 100)
    third = loader.handle_commit(batch(3, NoOpRecord()), high_watermark=100)
    assert second is not None and third is not None
    assert second.manifest.previous is first.image
    assert second.delta.base is first.image
    assert third.manifest.previous is second.image
    assert third.image.provenance.last_offset == 3
    assert [p.manifest.batches for p in (first, second, third)] == [1, 1, 1]


def test_a_control_batch_moves_the_provenance_and_publishes_an_empty_delta() -> None:
    loader = MetadataLoader()
    first = loader.handle_commit(batch(0, BOOTSTRAP), high_watermark=1)
    assert first is not None
    published = loader.handle_commit(control(1, quorum_epoch=EPOCH + 1), high_watermark=2)
    assert published is not None
    assert published.image.provenance == MetadataProvenance(1, EPOCH + 1)
    assert published.manifest.records == 0
    # Nothing but the provenance changed: every section is shared with the previous image.
    assert published.image.features is first.image.features
    assert published.image.topics is first.image.topics
    assert published.local_changes(1).is_empty()


def test_a_control_batch_counts_toward_the_catch_up() -> None:
    loader = MetadataLoader()
    assert loader.handle_commit(batch(0, BOOTSTRAP), high_watermark=2) is None
    # The newest committed batch is a leader change: reaching it is catching up.
    assert loader.handle_commit(control(1), high_watermark=2) is not None


# --- errors ------------------------------------------------------------------------------------


def test_a_gap_raises_naming_the_offsets_and_the_loader_stays_failed() -> None:
    loader = MetadataLoader()
    loader.handle_commit(batch(0, BOOTSTRAP), high_watermark=1)
    with pytest.raises(MetadataLoadError, match=r"batch 2\.\.2 .* expected a batch at offset 1"):
        loader.handle_commit(control(2), high_watermark=3)
    with pytest.raises(MetadataLoadError, match="stopped at offset 2") as failed:
        loader.handle_commit(control(1), high_watermark=3)
    assert failed.value.offset == 2


def test_a_first_batch_after_offset_zero_without_a_snapshot_is_a_gap() -> None:
    with pytest.raises(MetadataLoadError, match="expected a batch at offset 0") as failed:
        MetadataLoader().handle_commit(batch(5, BOOTSTRAP), high_watermark=6)
    assert failed.value.offset == 5


def test_a_record_that_cannot_replay_raises_naming_its_offset() -> None:
    loader = MetadataLoader()
    loader.handle_commit(batch(0, BOOTSTRAP), high_watermark=1)
    bad = PartitionChangeRecord(topic_id(9), 0, leader=1)
    with pytest.raises(MetadataLoadError, match="offset 3") as failed:
        loader.handle_commit(batch(1, NoOpRecord(), NoOpRecord(), bad), high_watermark=4)
    assert failed.value.offset == 3
    assert isinstance(failed.value, MetadataReplayError)  # callers treating replay as fatal
    assert isinstance(failed.value.__cause__, MetadataReplayError)
    # Nothing after the failure is ever published, and the last good image stays.
    assert loader.last_applied_offset == 0
    with pytest.raises(MetadataLoadError):
        loader.handle_commit(batch(4, NoOpRecord()), high_watermark=5)


def test_a_snapshot_behind_the_loaded_offset_is_refused() -> None:
    loader = MetadataLoader()
    loader.handle_commit(batch(0, BOOTSTRAP, NoOpRecord(), NoOpRecord()), high_watermark=3)
    with pytest.raises(MetadataLoadError, match="back from offset 2") as failed:
        loader.handle_load_snapshot(SnapshotRecords(1, EPOCH, (BOOTSTRAP,)), high_watermark=3)
    assert failed.value.offset == 1


def test_a_bad_snapshot_record_raises_naming_the_snapshot_offset() -> None:
    with pytest.raises(MetadataLoadError, match="snapshot record at offset 9"):
        MetadataLoader().handle_load_snapshot(
            SnapshotRecords(9, EPOCH, (BOOTSTRAP, RemoveTopicRecord(ORDERS))), high_watermark=10
        )


# --- snapshots ---------------------------------------------------------------------------------


def snapshot_of(image: MetadataImage) -> SnapshotRecords:
    provenance = image.provenance
    return SnapshotRecords(
        provenance.last_offset, provenance.last_quorum_epoch, tuple(image_to_records(image))
    )


def test_a_snapshot_load_publishes_a_delta_from_the_empty_image() -> None:
    loader = MetadataLoader()
    log: list[MetadataRecord] = [
        BOOTSTRAP,
        register(1, 1),
        *create_topic("orders", ORDERS, (1, 2), (2, 1)),
    ]
    before = loader.handle_commit(batch(0, *log), high_watermark=len(log))
    assert before is not None
    # Later the topic is removed and another created, and the node only sees a snapshot of that.
    later = replay_all(
        [*log, RemoveTopicRecord(ORDERS), *create_topic("audit", topic_id(2), (2,))], 40
    )

    published = loader.handle_load_snapshot(snapshot_of(later), high_watermark=41)

    assert published is not None
    assert published.manifest.kind is ManifestKind.SNAPSHOT
    assert published.manifest.previous is before.image
    assert published.delta.base is MetadataImage.EMPTY
    assert published.image == later
    # The delta alone knows nothing of "orders"; the publication's local changes do.
    changes = published.local_changes(1)
    assert [(p.topic_name, p.partition_id) for p in changes.deletes] == [
        ("orders", 0),
        ("orders", 1),
    ]
    assert changes == local_changes_between(before.image, later, 1)
    # Batches continue right after the snapshot.
    nxt = loader.handle_commit(control(41), high_watermark=42)
    assert nxt is not None and nxt.manifest.kind is ManifestKind.LOG
    assert nxt.delta.base is published.image


def test_a_snapshot_loaded_while_catching_up_starts_the_first_publication() -> None:
    records: list[MetadataRecord] = [BOOTSTRAP, *create_topic("orders", ORDERS, (1,))]
    snap = image_from_records(records, MetadataProvenance(9, EPOCH))
    loader = MetadataLoader()
    # A restarted node: its snapshot ends at 9, the log is committed up to 11.
    assert loader.handle_load_snapshot(snapshot_of(snap), high_watermark=12) is None
    assert loader.handle_commit(batch(10, register(1, 10)), high_watermark=12) is None
    published = loader.handle_commit(control(11), high_watermark=12)
    assert published is not None
    assert published.manifest.kind is ManifestKind.SNAPSHOT
    assert published.manifest.batches == 2
    assert published.manifest.records == len(records) + 1
    assert published.image.provenance == MetadataProvenance(11, EPOCH)
    assert published.image.topics.by_name["orders"] == snap.topics.by_name["orders"]
    assert 1 in published.image.cluster.brokers


def test_a_publisher_installed_late_gets_the_whole_image_first() -> None:
    loader = MetadataLoader()
    assert loader.publication_for_new_publisher() is None
    log = [BOOTSTRAP, register(2, 1), *create_topic("orders", ORDERS, (2,))]
    loader.handle_commit(batch(0, *log), high_watermark=len(log))
    first = loader.publication_for_new_publisher()
    assert first is not None
    assert first.manifest.kind is ManifestKind.SNAPSHOT
    assert first.manifest.previous is MetadataImage.EMPTY
    assert first.image is loader.image
    assert first.delta.apply(loader.image.provenance) == loader.image
    assert [p.topic_name for p in first.local_changes(2).leaders] == ["orders"]


def test_a_log_publication_s_local_changes_are_the_delta_s() -> None:
    loader = MetadataLoader()
    base = bootstrapped()
    assert loader.handle_commit(batch(0, BOOTSTRAP), high_watermark=1) is not None
    published = loader.handle_commit(
        batch(1, register(1, 1), *create_topic("orders", ORDERS, (1, 2))), high_watermark=4
    )
    assert published is not None
    assert published.manifest.previous.features == base.features
    assert published.local_changes(2) == local_changes(published.delta, 2)
    assert [p.topic_name for p in published.local_changes(2).followers] == ["orders"]


# --- any chunking of the same committed log ----------------------------------------------------


@dataclass
class Fed:
    """What a loader was fed and what it published."""

    publications: list[tuple[int, Publication]]  # (index of the input, publication)
    high_watermarks: list[int]
    last_offsets: list[int]


def committed_batches(
    log: list[MetadataRecord], data: st.DataObject
) -> tuple[list[CommittedRecords], list[MetadataRecord | None]]:
    """`log` cut into batches, with control batches in between; also the log by offset
    (None at control offsets)."""
    by_offset: list[MetadataRecord | None] = []
    batches: list[CommittedRecords] = []
    position = 0
    quorum_epoch = 1
    while position < len(log):
        if data.draw(st.integers(0, 4)) == 0:
            quorum_epoch += 1  # a new leader writes its LeaderChange first
            batches.append(control(len(by_offset), quorum_epoch))
            by_offset.append(None)
        size = data.draw(st.integers(1, 6))
        records = log[position : position + size]
        batches.append(batch(len(by_offset), *records, quorum_epoch=quorum_epoch))
        by_offset.extend(records)
        position += size
    return batches, by_offset


def image_at(by_offset: list[MetadataRecord | None], last_offset: int, epoch: int) -> MetadataImage:
    delta = MetadataDelta(MetadataImage.EMPTY)
    for offset, record in enumerate(by_offset[: last_offset + 1]):
        if record is not None:
            delta.replay(record, offset)
    return delta.apply(MetadataProvenance(last_offset, epoch))


log_settings = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@log_settings
@given(log=valid_logs(), data=st.data())
def test_any_chunking_publishes_the_same_images(
    log: list[MetadataRecord], data: st.DataObject
) -> None:
    batches, by_offset = committed_batches(log, data)
    end = batches[-1].last_offset + 1
    loader = MetadataLoader()
    caught_up_at: int | None = None
    previous = MetadataImage.EMPTY
    for index, committed in enumerate(batches):
        # The node knows some high watermark at or beyond what it was handed so far.
        high_watermark = data.draw(st.integers(committed.last_offset + 1, end), label="hw")
        published = loader.handle_commit(committed, high_watermark)
        if caught_up_at is None and committed.last_offset >= high_watermark - 1:
            caught_up_at = index
        # Catch-up rule: nothing before reaching the high watermark, every batch end after it.
        assert (published is not None) == (caught_up_at is not None)
        if published is None:
            continue
        assert published.manifest.previous is previous
        assert published.delta.base is previous
        assert published.image == image_at(by_offset, committed.last_offset, committed.quorum_epoch)
        previous = published.image
    # The last batch always reaches the high watermark, so the final image is the whole log's.
    assert loader.image == image_at(by_offset, end - 1, batches[-1].quorum_epoch)


@log_settings
@given(log=valid_logs(), data=st.data(), broker_id=st.sampled_from(BROKER_POOL))
def test_a_snapshot_anywhere_leads_to_the_same_image_and_partitions(
    log: list[MetadataRecord], data: st.DataObject, broker_id: int
) -> None:
    batches, by_offset = committed_batches(log, data)
    end = batches[-1].last_offset + 1
    cut = data.draw(st.integers(0, len(batches) - 1), label="snapshot after batch")
    straight = MetadataLoader()
    for committed in batches:
        straight.handle_commit(committed, end)
    # A second node sees the first batches, then only a snapshot, then the rest.
    seen = data.draw(st.integers(0, cut), label="batches seen before the snapshot")
    jumper = MetadataLoader()
    held: dict[tuple[UUID, int], int] = {}  # the partitions it acts on: leader epoch

    def act(publication: Publication | None) -> None:
        if publication is None:
            return
        changes = publication.local_changes(broker_id)
        for p in changes.deletes:
            held.pop((p.topic_id, p.partition_id))
        for p in changes.leaders + changes.followers:
            held[(p.topic_id, p.partition_id)] = p.registration.leader_epoch

    for committed in batches[:seen]:
        act(jumper.handle_commit(committed, committed.last_offset + 1))
    snap_last = batches[cut].last_offset
    snap_image = image_at(by_offset, snap_last, batches[cut].quorum_epoch)
    act(jumper.handle_load_snapshot(snapshot_of(snap_image), snap_last + 1))
    for committed in batches[cut + 1 :]:
        act(jumper.handle_commit(committed, end))
    assert jumper.image == straight.image
    assert held == {
        (topic.topic_id, partition_id): registration.leader_epoch
        for topic in straight.image.topics.by_id.values()
        for partition_id, registration in topic.partitions.items()
        if broker_id in registration.replicas
    }


# --- a committed batch in steps --------------------------------------------------------------


def leadership_moves(partitions: int) -> tuple[list[MetadataRecord], list[MetadataRecord]]:
    """A topic of `partitions` partitions on brokers 1-3, then one change per partition that
    moves its leadership off broker 1 (a controlled shutdown's batch)."""
    created = create_topic("orders", ORDERS, *[(1, 2, 3)] * partitions)
    moves: list[MetadataRecord] = [
        PartitionChangeRecord(ORDERS, p, isr=(2, 3), leader=2) for p in range(partitions)
    ]
    return [BOOTSTRAP, *created], moves


def stepped_showing_nothing(
    loader: MetadataLoader, steps: Steps[Publication | None]
) -> tuple[int, Publication | None]:
    """Run `steps` of `loader` to their end, checking that between two of them the loader
    reports only what it had published before; how many steps it took, and the publication."""
    before, offset = loader.image, loader.last_applied_offset
    taken = 0
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return taken, done.value
        taken += 1
        assert loader.image is before
        assert loader.last_loaded_offset == loader.last_applied_offset == offset


@pytest.mark.parametrize("size", [1, REPLAY_STEP_RECORDS, REPLAY_STEP_RECORDS + 1, 1000])
def test_a_batch_loaded_in_steps_shows_nothing_until_its_end(size: int) -> None:
    setup, moves = leadership_moves(size)
    loader, stepwise = MetadataLoader(), MetadataLoader()
    for each in (loader, stepwise):
        each.handle_commit(batch(0, *setup), len(setup))
    steps = stepwise.commit_in_steps(batch(len(setup), *moves), len(setup) + size)
    taken, published = stepped_showing_nothing(stepwise, steps)
    # A step per REPLAY_STEP_RECORDS records, and one of its own for the publication.
    assert taken == (0 if size <= REPLAY_STEP_RECORDS else -(-size // REPLAY_STEP_RECORDS))
    expected = loader.handle_commit(batch(len(setup), *moves), len(setup) + size)
    assert published is not None and expected is not None
    assert published.image == expected.image and stepwise.image is published.image
    assert {p.leader for p in published.image.topics.by_id[ORDERS].partitions.values()} == {2}
    assert published.manifest.records == size and published.manifest.batches == 1


def test_an_input_while_a_batch_is_half_loaded_fails_the_loader() -> None:
    setup, moves = leadership_moves(REPLAY_STEP_RECORDS * 2)
    loader = MetadataLoader()
    loader.handle_commit(batch(0, *setup), len(setup))
    steps = loader.commit_in_steps(batch(len(setup), *moves), None)
    next(steps)  # the first slice replayed, the rest abandoned
    with pytest.raises(MetadataLoadError, match="half loaded"):
        loader.handle_commit(control(len(setup) + len(moves)), None)
    with pytest.raises(MetadataLoadError):
        loader.handle_commit(control(len(setup)), None)


def test_a_snapshot_loaded_in_steps_shows_nothing_until_its_end() -> None:
    """A restart's snapshot holds a record per partition: it is loaded a slice at a time,
    the loader reporting its earlier state until the last step, and publishes what a whole
    load publishes; an input between two slices fails the loader."""
    size = REPLAY_STEP_RECORDS * 3 + 7
    setup, moves = leadership_moves(size)
    snapshot = snapshot_of(replay_all([*setup, *moves], len(setup) + size - 1))
    high_watermark = snapshot.last_contained_offset + 1
    whole, stepwise = MetadataLoader(), MetadataLoader()
    for each in (whole, stepwise):
        each.handle_commit(batch(0, BOOTSTRAP), 1)
    steps = stepwise.load_snapshot_in_steps(snapshot, high_watermark)
    taken, published = stepped_showing_nothing(stepwise, steps)
    # A step per REPLAY_STEP_RECORDS records, and one of its own for the publication.
    assert taken == -(-len(snapshot.records) // REPLAY_STEP_RECORDS)
    expected = whole.handle_load_snapshot(snapshot, high_watermark)
    assert published is not None and expected is not None
    assert published.image == expected.image == snapshot_image(snapshot)
    assert published.manifest == expected.manifest

    abandoned = MetadataLoader()
    next(abandoned.load_snapshot_in_steps(snapshot, high_watermark))
    with pytest.raises(MetadataLoadError, match="half loaded"):
        abandoned.handle_commit(control(high_watermark), None)


def snapshot_image(snapshot: SnapshotRecords) -> MetadataImage:
    return image_from_records(
        list(snapshot.records),
        MetadataProvenance(snapshot.last_contained_offset, snapshot.quorum_epoch),
    )
