"""Properties over random valid metadata logs (docs/design/kraft.md#test-plan item 5):

- replaying a log in one delta or in chunks of deltas (one image per chunk) gives equal images;
- a snapshot of an image (its records) replays into an equal image, through the codec too;
- a broker that applies each chunk's local changes reaches the partitions the final image
  assigns it, and so does one that jumps from the first image to the last.
"""

from __future__ import annotations

from itertools import pairwise
from uuid import UUID

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from metadata_strategies import BROKER_POOL, valid_logs

from replog.quorum.metadata.delta import MetadataDelta
from replog.quorum.metadata.image import MetadataImage, MetadataProvenance, TopicsImage
from replog.quorum.metadata.local_changes import LocalChanges, local_changes, local_changes_between
from replog.quorum.metadata.partition_registration import PartitionRegistration
from replog.quorum.metadata.record_codec import decode_record, encode_record
from replog.quorum.metadata.records import (
    METADATA_VERSION_FEATURE,
    FeatureLevelRecord,
    MetadataRecord,
)
from replog.quorum.metadata.snapshot import (
    delta_from_records,
    image_from_records,
    image_record_count,
    image_records_in_steps,
    image_to_records,
)

log_settings = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

# A broker's view of its replicas: (topic id, partition id) -> the registration it acts on.
BrokerState = dict[tuple[UUID, int], PartitionRegistration]


def quorum_epoch_at(offset: int) -> int:
    return 1 + offset // 10  # any non-decreasing function will do


def provenance(offset: int) -> MetadataProvenance:
    return MetadataProvenance(offset, quorum_epoch_at(offset))


def replay_all(log: list[MetadataRecord]) -> MetadataImage:
    delta = MetadataDelta(MetadataImage.EMPTY)
    for offset, record in enumerate(log):
        delta.replay(record, offset)
    return delta.apply(provenance(len(log) - 1))


def chunk_bounds(draw: st.DataObject, length: int) -> list[int]:
    """Sorted cut points 0 < c < length; chunk i is log[bounds[i]:bounds[i + 1]]."""
    cuts = draw.draw(st.sets(st.integers(1, max(1, length - 1)), max_size=8))
    return [0, *sorted(c for c in cuts if c < length), length]


def desired(image: MetadataImage, broker_id: int) -> BrokerState:
    return {
        (topic.topic_id, partition_id): registration
        for topic in image.topics.by_id.values()
        for partition_id, registration in topic.partitions.items()
        if broker_id in registration.replicas
    }


def act(state: BrokerState, found: LocalChanges, broker_id: int) -> None:
    """What a replica manager does with local changes, reduced to its bookkeeping."""
    for p in found.deletes:
        assert broker_id not in p.registration.replicas or p.registration is p.previous
        state.pop((p.topic_id, p.partition_id))
    for p in found.leaders:
        assert p.registration.leader == broker_id
        state[(p.topic_id, p.partition_id)] = p.registration
    for p in found.followers:
        assert p.registration.leader != broker_id and broker_id in p.registration.replicas
        state[(p.topic_id, p.partition_id)] = p.registration


@log_settings
@given(log=valid_logs(), data=st.data())
def test_chunks_of_deltas_give_the_image_of_one_delta(
    log: list[MetadataRecord], data: st.DataObject
) -> None:
    whole = replay_all(log)
    bounds = chunk_bounds(data, len(log))
    image = MetadataImage.EMPTY
    for start, end in pairwise(bounds):
        delta = MetadataDelta(image)
        for offset in range(start, end):
            delta.replay(log[offset], offset)
        image = delta.apply(provenance(end - 1))
    assert image == whole


@log_settings
@given(log=valid_logs(), data=st.data())
def test_the_leader_counts_deltas_keep_are_the_image_s_counted_afresh(
    log: list[MetadataRecord], data: st.DataObject
) -> None:
    """`TopicsImage.leaders`, kept by each delta from its base's, is what a walk over the
    image's partitions counts."""
    image = MetadataImage.EMPTY
    for start, end in pairwise(chunk_bounds(data, len(log))):
        delta = MetadataDelta(image)
        for offset in range(start, end):
            delta.replay(log[offset], offset)
        image = delta.apply(provenance(end - 1))
        assert image.topics.known_leaders is not None  # kept, not counted
        counted = TopicsImage(image.topics.by_id, image.topics.by_name).leaders
        assert dict(image.topics.leaders) == dict(counted)


@log_settings
@given(log=valid_logs())
def test_a_snapshot_replays_into_an_equal_image(log: list[MetadataRecord]) -> None:
    image = replay_all(log)
    records = image_to_records(image)
    assert records[0] == FeatureLevelRecord(
        METADATA_VERSION_FEATURE, image.features.metadata_version or 0
    )
    assert image_from_records(records, image.provenance) == image
    through_bytes = [decode_record(encode_record(r)) for r in records]
    assert image_from_records(through_bytes, image.provenance) == image
    # Equal images write equal records: a snapshot is a function of the image.
    assert image_to_records(image_from_records(records, image.provenance)) == records


@log_settings
@given(log=valid_logs(), parts_of=st.integers(min_value=1, max_value=4))
def test_an_images_records_taken_in_steps_are_its_records(
    log: list[MetadataRecord], parts_of: int
) -> None:
    # A step ends at the topic that takes it to `parts_of` partitions or more: as many steps
    # as such topics, each partition's record made only when read.
    image = replay_all(log)
    steps = image_records_in_steps(image, parts_of=parts_of)
    taken = 0
    while True:
        try:
            next(steps)
            taken += 1
        except StopIteration as done:
            records = done.value
            break
    assert list(records) == image_to_records(image)
    sizes = [len(image.topics.by_name[name].partitions) for name in sorted(image.topics.by_name)]
    ends = 0
    partitions = 0
    for size in sizes:
        partitions += size
        if partitions >= parts_of:
            ends, partitions = ends + 1, 0
    assert taken == ends


def observed(delta: MetadataDelta) -> tuple[object, ...]:
    """Everything a publisher reads of a delta, in its iteration order."""
    topics = [
        (t.name, t.topic_id, t.is_new, list(t.partition_changes.items()))
        for t in delta.topic_deltas.values()
    ]
    return (
        list(delta.feature_changes.items()),
        list(delta.broker_changes.items()),
        topics,
        delta.deleted_topic_ids,
        sorted(delta.changed_config_resources),
    )


@log_settings
@given(log=valid_logs())
def test_a_delta_of_an_image_is_the_delta_its_records_replay_into(
    log: list[MetadataRecord],
) -> None:
    image = replay_all(log)
    records = image_to_records(image)
    replayed = delta_from_records(records, image.provenance.last_offset)
    built = MetadataDelta.of_image(image)
    assert observed(built) == observed(replayed)
    assert built.apply(image.provenance) == image
    assert image_record_count(image) == len(records)


@log_settings
@given(log=valid_logs(), data=st.data(), broker_id=st.sampled_from(BROKER_POOL))
def test_local_changes_take_a_broker_to_the_partitions_the_image_assigns_it(
    log: list[MetadataRecord], data: st.DataObject, broker_id: int
) -> None:
    bounds = chunk_bounds(data, len(log))
    images = [MetadataImage.EMPTY]
    stepwise: BrokerState = {}
    for start, end in pairwise(bounds):
        delta = MetadataDelta(images[-1])
        for offset in range(start, end):
            delta.replay(log[offset], offset)
        images.append(delta.apply(provenance(end - 1)))
        found = local_changes(delta, broker_id)
        assert local_changes_between(delta.base, images[-1], broker_id) == found
        act(stepwise, found, broker_id)
        assert stepwise == desired(images[-1], broker_id)
    # A broker that skipped every image between the first and the last gets there too.
    first = images[1] if len(images) > 2 else MetadataImage.EMPTY
    jumped = desired(first, broker_id)
    act(jumped, local_changes_between(first, images[-1], broker_id), broker_id)
    assert jumped == desired(images[-1], broker_id)
