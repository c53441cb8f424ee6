"""A broker's request cores (`BrokerCores`) behind a real Kafka listener on 127.0.0.1:0, and
a `KafkaBrokerClient` of it: how tests drive the cores as replog's clients do."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from replog.quorum.metadata.image import MetadataImage
from replog.server.data_plane.broker_cores import BrokerCores, ProducerIds
from replog.server.kafka.kafka_apis import KafkaApis
from replog.server.kafka.kafka_listener import KafkaListener
from replog.wire.kafka_broker_client import KafkaBrokerClient
from tests.kafka_broker_clients import kafka_broker_client


@asynccontextmanager
async def kafka_client_of(
    service: BrokerCores,
    *,
    image: Callable[[], MetadataImage] = lambda: MetadataImage.EMPTY,
    producer_ids: ProducerIds | None = None,
    request_timeout_ms: int = 5000,
) -> AsyncIterator[KafkaBrokerClient]:
    """`service` behind a Kafka listener, and a client of it (both closed at the end)."""
    apis = KafkaApis(
        service.broker_id,
        cluster_id="c1",
        image=image,
        broker_service=service,
        producer_ids=producer_ids,
    )
    listener = KafkaListener("PLAINTEXT", "127.0.0.1", 0)
    await listener.start(apis)
    try:
        async with kafka_broker_client(
            f"127.0.0.1:{listener.port}", request_timeout_ms=request_timeout_ms
        ) as client:
            yield client
    finally:
        await listener.stop()
