"""A `KafkaBrokerClient` with connections of its own, for tests that ask one broker's Kafka
listener directly (as replog's clients do, without a Producer or Consumer around it)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from replog.wire.kafka_broker_client import KafkaBrokerClient
from replog.wire.kafka_connection import KafkaConnections


@asynccontextmanager
async def kafka_broker_client(
    address: str, *, request_timeout_ms: int = 5000, setup_timeout_ms: int = 2000
) -> AsyncIterator[KafkaBrokerClient]:
    """A client of the Kafka listener at `address`; its connections close at the end."""
    connections = KafkaConnections(client_id="test", setup_timeout_ms=setup_timeout_ms)
    try:
        yield KafkaBrokerClient(address, connections, request_timeout_ms=request_timeout_ms)
    finally:
        await connections.close()
