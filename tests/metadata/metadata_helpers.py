"""Small builders for the metadata tests: replay records at the next offsets, create topics."""

from __future__ import annotations

from uuid import UUID

from replog.quorum.metadata.delta import MetadataDelta
from replog.quorum.metadata.image import MetadataImage, MetadataProvenance
from replog.quorum.metadata.records import (
    METADATA_VERSION_FEATURE,
    Endpoint,
    FeatureLevelRecord,
    MetadataRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)

QUORUM_EPOCH = 3


def delta_of(image: MetadataImage, *records: MetadataRecord) -> MetadataDelta:
    """A delta over `image` holding `records` at the offsets right after the image's last."""
    delta = MetadataDelta(image)
    for offset, record in enumerate(records, start=image.provenance.last_offset + 1):
        delta.replay(record, offset)
    return delta


def replayed(image: MetadataImage, *records: MetadataRecord) -> MetadataImage:
    """The image after `records`, replayed at the offsets right after the image's last."""
    last_offset = image.provenance.last_offset + len(records)
    return delta_of(image, *records).apply(MetadataProvenance(last_offset, QUORUM_EPOCH))


def topic_id(n: int) -> UUID:
    return UUID(int=n)


def create_topic(
    name: str, tid: UUID, *assignments: tuple[int, ...], leader_epoch: int = 0
) -> list[MetadataRecord]:
    """TopicRecord and one PartitionRecord per replica assignment (ISR = replicas, leader =
    first replica), as the controller writes a topic creation."""
    records: list[MetadataRecord] = [TopicRecord(name, tid)]
    for partition_id, replicas in enumerate(assignments):
        records.append(
            PartitionRecord(
                tid, partition_id, replicas, replicas, replicas[0], leader_epoch=leader_epoch
            )
        )
    return records


def register(broker_id: int, broker_epoch: int, *, fenced: bool = True) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id,
        UUID(int=1000 + broker_id),
        broker_epoch,
        endpoints=(Endpoint("PLAINTEXT", f"broker{broker_id}", 9092),),
        fenced=fenced,
    )


def bootstrapped() -> MetadataImage:
    """The image after a new log's first record, metadata.version 7 at offset 0."""
    return replayed(MetadataImage.EMPTY, FeatureLevelRecord(METADATA_VERSION_FEATURE, 7))
