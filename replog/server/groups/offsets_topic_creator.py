"""Creating `__consumer_offsets` when a group's coordinator is first looked for, through the
broker's `InternalTopicCreator` (one creation at a time, a backoff after a failure).

Rules:
- The topic is created as Kafka creates it (`GroupCoordinator.groupMetadataTopicConfigs`):
  `offsets.topic.num.partitions` partitions, `offsets.topic.replication.factor` replicas,
  `cleanup.policy=compact` (only the latest record of each key matters, so the log cleaner
  may drop the rest), `segment.bytes` from `offsets.topic.segment.bytes` (100 MiB: a
  segment is cleanable only once rolled, so a smaller one than the broker's 1 GiB lets the
  cleaner reach commits sooner) and `compression.type=producer`.
"""

from __future__ import annotations

from replog.clock import Clock, monotonic_ms
from replog.server.controller.controller_calls import ControllerCalls
from replog.server.coordination import internal_topic_creator
from replog.server.coordination.internal_topic_creator import (
    RETRY_BACKOFF_MS_DEFAULT,
    CreateTopic,
    InternalTopicCreator,
)
from replog.server.runtime.node_tasks import Spawner
from replog.topic_names import CONSUMER_OFFSETS_TOPIC


def offsets_topic_configs(segment_bytes: int) -> dict[str, str]:
    """The topic configs `__consumer_offsets` is created with (module Rules)."""
    return {
        "cleanup.policy": "compact",
        "segment.bytes": str(segment_bytes),
        "compression.type": "producer",
    }


def create_via_controller(
    calls: ControllerCalls,
    broker_id: int,
    *,
    num_partitions: int,
    replication_factor: int,
    segment_bytes: int,
    timeout_ms: int,
) -> CreateTopic:
    """CreateTopics of `__consumer_offsets` to the active controller."""
    return internal_topic_creator.create_via_controller(
        calls,
        broker_id,
        topic=CONSUMER_OFFSETS_TOPIC,
        num_partitions=num_partitions,
        replication_factor=lambda: replication_factor,
        configs=lambda _replicas: offsets_topic_configs(segment_bytes),
        timeout_ms=timeout_ms,
    )


class OffsetsTopicCreator(InternalTopicCreator):
    """At most one creation of `__consumer_offsets` at a time."""

    def __init__(
        self,
        broker_id: int,
        create: CreateTopic,
        *,
        tasks: Spawner,
        clock: Clock = monotonic_ms,
        retry_backoff_ms: int = RETRY_BACKOFF_MS_DEFAULT,
    ) -> None:
        super().__init__(
            broker_id,
            CONSUMER_OFFSETS_TOPIC,
            create,
            tasks=tasks,
            clock=clock,
            retry_backoff_ms=retry_backoff_ms,
        )
