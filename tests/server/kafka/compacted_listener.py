"""A broker node leading t-0 of a compacted topic (`cleanup.policy=compact`) behind its own
Kafka listener on 127.0.0.1 (a free port), the Metadata answers naming that listener: for tests
of what clients see of compacted topics through the real listener."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from uuid import UUID

from replog.quorum.metadata.image import MetadataImage
from replog.quorum.metadata.records import (
    ConfigRecord,
    ConfigResourceType,
    Endpoint,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from replog.server.data_plane.broker_cores import BrokerCores
from replog.server.kafka.kafka_apis import KafkaApis
from replog.server.kafka.kafka_listener import KafkaListener
from replog.testing import ManualClock
from tests.metadata.metadata_helpers import bootstrapped, replayed
from tests.server.data_plane.test_replica_manager import TID, Node


class _ProducerIds:
    """Producer ids for InitProducerId, each new (the controller's blocks, in a test)."""

    def __init__(self) -> None:
        self._next = itertools.count(1000)

    def generate_producer_id(self) -> int:
        return next(self._next)


@asynccontextmanager
async def compacted_listener(tmp_path: Path, clock: ManualClock) -> AsyncIterator[tuple[Node, str]]:
    """(the node, the listener's address); the listener stops after the block."""
    node = Node(tmp_path, 1, clock)
    images: list[MetadataImage] = []
    apis = KafkaApis(
        1,
        cluster_id="c1",
        image=lambda: images[-1],
        broker_service=BrokerCores(1, replica_manager=node.rm),
        producer_ids=_ProducerIds(),
    )
    listener = KafkaListener("PLAINTEXT", "127.0.0.1", 0)
    await listener.start(apis)
    try:
        endpoint = Endpoint("PLAINTEXT", "127.0.0.1", listener.port)
        images.append(
            replayed(
                bootstrapped(),
                RegisterBrokerRecord(1, UUID(int=1001), 10, endpoints=(endpoint,), fenced=False),
                TopicRecord("t", TID),
                PartitionRecord(TID, 0, (1,), (1,), 1),
                ConfigRecord(ConfigResourceType.TOPIC, "t", "cleanup.policy", "compact"),
            )
        )
        node.rm.apply_image(images[-1])
        yield node, f"127.0.0.1:{listener.port}"
    finally:
        await listener.stop()
