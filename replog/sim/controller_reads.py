"""Controller reads show committed state only (`ReadChecker`), checked by the runner between two
iterations of the loop; a break is `InvariantViolation`.

Rule: a read (`QuorumController.read`, what every describe a controller answers runs) of every
topic and every broker registration, made of each running controller, returns exactly the
topics (ids and partitions: leader, epochs, replicas, ISR) and registrations of the replay of
the committed metadata log at that controller's last committed offset, never a write it has
not seen committed (the active controller's uncommitted writes included). A controller whose
committed offset is beyond the replay so far is read at a later check.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from uuid import UUID

from replog.quorum.controller.controller import QuorumController
from replog.quorum.controller.operation import ReadContext
from replog.quorum.metadata.broker_registration import BrokerRegistration
from replog.quorum.metadata.image import MetadataImage
from replog.quorum.metadata.partition_registration import PartitionRegistration
from replog.sim.committed_images import CommittedImages
from replog.sim.invariants import InvariantViolation

__all__ = ["ReadChecker"]

Topics = dict[str, tuple[UUID | None, tuple[PartitionRegistration, ...]]]
Answer = tuple[Topics, Mapping[int, BrokerRegistration]]


class ReadChecker:
    def __init__(self) -> None:
        self.reads_checked = 0

    def check(
        self, controllers: Iterable[tuple[int, QuorumController]], images: CommittedImages
    ) -> None:
        """The rule (module docstring) for each (node id, controller) of `controllers`."""
        for node_id, controller in controllers:
            end = controller.last_committed_offset + 1
            expected = images.by_end.get(end) if end <= images.end else None
            if expected is None:
                continue  # not replayed yet, or not a batch end (`check_controllers` says so)
            topics, brokers = controller.read(_describe_everything)
            self.reads_checked += 1
            if topics != _image_topics(expected) or dict(brokers) != dict(expected.cluster.brokers):
                raise InvariantViolation(
                    f"controller {node_id} answered a read at its committed offset {end - 1} "
                    "with state the committed metadata log does not hold there"
                )


def _describe_everything(ctx: ReadContext) -> Answer:
    described = ctx.replication.describe_topics(ctx.offset)
    topics: Topics = {d.name: (d.topic_id, d.partitions) for d in described}
    return topics, ctx.cluster.registrations(ctx.offset)


def _image_topics(image: MetadataImage) -> Topics:
    """The topics of `image` in the shape of `_describe_everything`'s answer."""
    return {
        name: (topic.topic_id, tuple(topic.partitions[p] for p in range(len(topic.partitions))))
        for name, topic in sorted(image.topics.by_name.items())
    }
