"""A client's connections to brokers, over Kafka's protocol.

`Connections` belongs to one Producer, Consumer or Admin and lives on its event loop. The data
path speaks Kafka's protocol to the brokers' Kafka listeners: one `KafkaBrokerClient` per
address over the client's `KafkaConnections` (a connection per broker and lane, dialled on
first use, each within `socket.connection.setup.timeout.ms`), and for a producer one
`ProduceStream` per broker address, the one connection its requests to that broker are
pipelined on (in order, as a Kafka producer's). Every connection is TLS when the client's
`security.protocol` is SSL or SASL_SSL (its context: `tls_connection`), and authenticates when it
is SASL_PLAINTEXT or SASL_SSL (`sasl_authentication`). Group coordinator calls go through a
`KafkaCoordinatorClient` per address, on the same connections.
"""

from __future__ import annotations

import ssl
from typing import TYPE_CHECKING

from replog.errors import (
    ClientClosedError,
    KafkaError,
)
from replog.wire.kafka_broker_client import KafkaBrokerClient, ProduceStream
from replog.wire.kafka_connection import KafkaConnections
from replog.wire.sasl_authentication import SaslCredentials

if TYPE_CHECKING:
    from replog.wire.kafka_coordinator_client import KafkaCoordinatorClient

SETUP_TIMEOUT_MS_DEFAULT = 10_000  # socket.connection.setup.timeout.ms


class Connections:
    """The broker and coordinator clients of one client, one per address (module docstring)."""

    def __init__(
        self,
        *,
        request_timeout_ms: int,
        client_id: str,
        setup_timeout_ms: int = SETUP_TIMEOUT_MS_DEFAULT,
        tls: ssl.SSLContext | None = None,
        sasl: SaslCredentials | None = None,
    ) -> None:
        self.request_timeout_ms = request_timeout_ms
        self.client_id = client_id
        self.kafka = KafkaConnections(
            client_id=client_id, setup_timeout_ms=setup_timeout_ms, tls=tls, sasl=sasl
        )
        self._brokers: dict[str, KafkaBrokerClient] = {}
        self._produce_streams: dict[str, ProduceStream] = {}
        self._coordinators: dict[str, KafkaCoordinatorClient] = {}
        self._closed = False

    def broker(self, address: str) -> KafkaBrokerClient:
        """The client of the broker whose Kafka listener is at `address` (cached)."""
        self._check_open()
        client = self._brokers.get(address)
        if client is None:
            client = self._brokers[address] = KafkaBrokerClient(
                address, self.kafka, request_timeout_ms=self.request_timeout_ms
            )
        return client

    def produce_stream(self, address: str) -> ProduceStream:
        """The `ProduceStream` to the broker at `address` (cached; it dials again itself after
        its connection failed)."""
        stream = self._produce_streams.get(address)
        if stream is None:
            stream = self._produce_streams[address] = self.broker(address).produce_stream()
        return stream

    def redial(self, address: str) -> None:
        """Close the connections to the broker at `address`, so the next call dials afresh
        (what Kafka's client does with a connection whose bytes were no answer); nothing to
        close once the client is closed."""
        client = None if self._closed else self._brokers.get(address)
        if client is not None:
            client.reconnect()

    def coordinator(self, address: str) -> KafkaCoordinatorClient:
        """The group coordinator client of the Kafka listener at `address` (cached)."""
        self._check_open()
        client = self._coordinators.get(address)
        if client is None:
            # Imported here: the consumer is the only user, and producers need not load it.
            from replog.wire.kafka_coordinator_client import KafkaCoordinatorClient

            client = self._coordinators[address] = KafkaCoordinatorClient(
                address, request_timeout_ms=self.request_timeout_ms, connections=self.kafka
            )
        return client

    async def topic_configs(
        self, address: str, topics: list[str], keys: list[str], *, timeout_ms: int
    ) -> dict[str, dict[str, str | None] | KafkaError]:
        """The configs `keys` of each of `topics` (or the topic's error), asked of the broker
        at `address` (DescribeConfigs). Raises `replog.errors` for a failed call."""
        return await self.broker(address).topic_configs(topics, keys, timeout_ms=timeout_ms)

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError("the client is closed: its connections are released")

    async def close(self) -> None:
        """Close every connection; later `broker`/`coordinator` calls raise
        ClientClosedError."""
        self._closed = True
        streams, self._produce_streams = self._produce_streams, {}
        for stream in streams.values():
            stream.close()
        self._brokers = {}
        coordinators, self._coordinators = self._coordinators, {}
        await self.kafka.close()
        for coordinator in coordinators.values():
            await coordinator.close()
