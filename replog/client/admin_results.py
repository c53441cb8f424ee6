"""What the Admin client takes and returns beyond `replog.admin.controller_results`.

`controller_results` already has the types of the controller's answers (CreatedTopic,
ClusterDescription, ResourceConfigs, ...); the Admin reuses them. This module adds what a
client needs on top:
- `TopicDescription` / `PartitionDescription`: a topic's partitions with the two flags Kafka's
  tools compute, `offline` (no live leader) and `under_replicated` (fewer in-sync replicas than
  replicas).
- `OffsetSpec`: the special "timestamps" of `list_offsets` (earliest, latest, max timestamp).
The internal topics `list_topics` leaves out unless asked are `replog.topic_names`'
`INTERNAL_TOPICS`, as the brokers know them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from uuid import UUID

from replog.admin.cluster_metadata import PartitionInfo, TopicInfo
from replog.replication import messages as m
from replog.topic_names import INTERNAL_TOPICS


class OffsetSpec(IntEnum):
    """`list_offsets` special timestamps, with Kafka's wire values."""

    LATEST = m.LATEST_TIMESTAMP  # the high watermark: the next offset a consumer will see
    EARLIEST = m.EARLIEST_TIMESTAMP  # the log start offset
    MAX_TIMESTAMP = m.MAX_TIMESTAMP  # the record with the largest timestamp


@dataclass(frozen=True, slots=True)
class PartitionDescription:
    partition: int
    leader: int | None  # None: no leader now
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]  # replicas on brokers that are fenced or gone
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]

    @property
    def offline(self) -> bool:
        """No live leader: the partition can be neither written nor read."""
        return self.leader is None

    @property
    def under_replicated(self) -> bool:
        """Fewer in-sync replicas than the replication factor, which during a reassignment
        leaves out the replicas being added (as Kafka's tools and metric count it)."""
        return len(self.isr) < len(self.replicas) - len(self.adding_replicas)

    @classmethod
    def of(cls, info: PartitionInfo) -> PartitionDescription:
        return cls(
            info.partition,
            info.leader,
            info.leader_epoch,
            info.replicas,
            info.isr,
            info.offline_replicas,
            info.adding_replicas,
            info.removing_replicas,
        )


@dataclass(frozen=True, slots=True)
class TopicDescription:
    name: str
    topic_id: UUID | None
    internal: bool
    partitions: tuple[PartitionDescription, ...]  # by partition index

    @property
    def replication_factor(self) -> int:
        """Partition 0's target replica count, as kafka-topics.sh shows it (0: no partitions);
        replicas being added by a reassignment do not count."""
        if not self.partitions:
            return 0
        first = self.partitions[0]
        return len(first.replicas) - len(first.adding_replicas)

    @classmethod
    def of(cls, info: TopicInfo) -> TopicDescription:
        return cls(
            info.name,
            info.topic_id,
            info.name in INTERNAL_TOPICS,
            tuple(PartitionDescription.of(p) for p in info.partitions),
        )
