"""A metadata image as the records of a snapshot, and back.

Every node snapshots its own committed image (docs/design/kraft.md#snapshots); a snapshot's
state-machine part is the image written as ordinary metadata records, which a node replays into the
empty image to load it.

Rules:
- Order: the `metadata.version` FeatureLevelRecord first (new logs and snapshots begin with it),
  then the other features, brokers, each topic followed by its partitions, configs, the
  producer-id block, ACLs (by id) and SCRAM credentials (by user and mechanism). Within each
  group by id or name, so equal images give equal records.
- A broker is written as one RegisterBrokerRecord carrying its current fenced and
  controlled-shutdown flags; a partition as one PartitionRecord with its current epochs; the
  producer-id block as a ProducerIdsRecord naming no broker (-1, -1), as Kafka writes it.
- Loading replays every record at the snapshot's last offset (a snapshot keeps no per-record
  offsets), into the empty image.
- `image_from_records(image_to_records(image), image.provenance) == image` for every image.
"""

from __future__ import annotations

from collections.abc import Iterable

from replog.quorum.metadata.deferred_records import DeferredItem, DeferredRecords, PartitionRecordOf
from replog.quorum.metadata.delta import MetadataDelta
from replog.quorum.metadata.image import MetadataImage, MetadataProvenance
from replog.quorum.metadata.records import (
    METADATA_VERSION_FEATURE,
    ConfigRecord,
    FeatureLevelRecord,
    MetadataRecord,
    ProducerIdsRecord,
    TopicRecord,
)
from replog.quorum.metadata.steps import Steps, run_to_end

# Partitions (in whole topics) one step of `image_records_in_steps` takes: a reference each,
# a few milliseconds of CPU.
IMAGE_STEP_PARTITIONS = 2_000


def image_to_records(image: MetadataImage) -> list[MetadataRecord]:
    """The records that rebuild `image` from the empty image."""
    return list(run_to_end(image_records_in_steps(image, parts_of=0)))


def image_records_in_steps(
    image: MetadataImage, parts_of: int = IMAGE_STEP_PARTITIONS
) -> Steps[DeferredRecords]:
    """`image_to_records(image)` in steps of whole topics, about `parts_of` partitions a step
    (0: one step), each PartitionRecord made only when read (`deferred_records`): a node's
    scheduled snapshot of 100,000 partitions, made in one loop turn, held it for hundreds of
    milliseconds. An image is immutable, so the steps may run any time."""
    items: list[DeferredItem] = []
    levels = image.features.levels
    if METADATA_VERSION_FEATURE in levels:
        items.append(FeatureLevelRecord(METADATA_VERSION_FEATURE, levels[METADATA_VERSION_FEATURE]))
    items.extend(
        FeatureLevelRecord(name, level)
        for name, level in sorted(levels.items())
        if name != METADATA_VERSION_FEATURE
    )
    items.extend(image.cluster.brokers[b].to_record() for b in sorted(image.cluster.brokers))
    partitions = 0
    for name in sorted(image.topics.by_name):
        topic = image.topics.by_name[name]
        topic_id = topic.topic_id
        items.append(TopicRecord(topic.name, topic_id))
        items.extend(
            PartitionRecordOf(topic_id, p, topic.partitions[p]) for p in sorted(topic.partitions)
        )
        partitions += len(topic.partitions)
        if parts_of and partitions >= parts_of:
            partitions = 0
            yield
    for resource in sorted(image.configs.resources):
        for key, value in sorted(image.configs.resources[resource].items()):
            items.append(ConfigRecord(resource.resource_type, resource.resource_name, key, value))
    if image.next_producer_id != -1:
        items.append(ProducerIdsRecord(-1, -1, image.next_producer_id))
    items.extend(image.acls.acls[acl_id] for acl_id in sorted(image.acls.acls))
    credentials = image.scram.credentials
    items.extend(credentials[key] for key in sorted(credentials))
    return DeferredRecords(items)


def image_record_count(image: MetadataImage) -> int:
    """`len(image_to_records(image))`, without making the records."""
    return (
        len(image.features.levels)
        + len(image.cluster.brokers)
        + sum(1 + len(topic.partitions) for topic in image.topics.by_id.values())
        + sum(len(keys) for keys in image.configs.resources.values())
        + (image.next_producer_id != -1)
        + len(image.acls.acls)
        + len(image.scram.credentials)
    )


def delta_from_records(records: Iterable[MetadataRecord], last_offset: int) -> MetadataDelta:
    """A snapshot's records replayed over the empty image; a snapshot keeps no per-record
    offsets, so every record stands at the snapshot's last one."""
    delta = MetadataDelta(MetadataImage.EMPTY)
    for record in records:
        delta.replay(record, last_offset)
    return delta


def image_from_records(
    records: Iterable[MetadataRecord], provenance: MetadataProvenance
) -> MetadataImage:
    """The image a snapshot of `records` ending at `provenance` describes."""
    return delta_from_records(records, provenance.last_offset).apply(provenance)
