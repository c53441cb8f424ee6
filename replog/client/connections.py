"""A client's connections to brokers, and what a failed gRPC call means in Kafka's errors.

`Connections` belongs to one Producer, Consumer or Admin and lives on its event loop. The data
path speaks Kafka's protocol to the brokers' Kafka listeners: one `KafkaBrokerClient` per
address over the client's `KafkaConnections` (a connection per broker and lane, dialled on
first use, each within `socket.connection.setup.timeout.ms`), and for a producer one
`ProduceStream` per broker address, the one connection its requests to that broker are
pipelined on (in order, as a Kafka producer's). Group coordinator calls go through a
`KafkaCoordinatorClient` per address, on the same connections.

`rpc_error` turns a `grpc.aio.AioRpcError` of a coordinator call into the `replog.errors` class
a Kafka client would see for the same failure, so that no bare gRPC error leaves the client API:
- UNAVAILABLE, CANCELLED, ABORTED -> NetworkError (retriable; the connection is gone)
- INTERNAL with gRPC's own "Internal error from Core" -> NetworkError too: an operation on
  the call failed inside gRPC, so whatever status the broker sent is lost and the outcome is
  unknown, as after a lost connection. The broker's own INTERNAL names the broker and the
  failure.
- DEADLINE_EXCEEDED -> RequestTimedOutError (retriable)
- INVALID_ARGUMENT -> InvalidRequestError
- RESOURCE_EXHAUSTED -> RecordBatchTooLargeError
- UNIMPLEMENTED -> UnsupportedVersionError (the node does not serve that service)
- anything else -> UnknownServerError
The message always names the broker (its id when known) and its address, the operation, and
the server's own details.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import grpc

from replog.errors import (
    ClientClosedError,
    InvalidRequestError,
    KafkaError,
    NetworkError,
    RecordBatchTooLargeError,
    ReplogError,
    RequestTimedOutError,
    UnknownServerError,
    UnsupportedVersionError,
)
from replog.wire.kafka_broker_client import KafkaBrokerClient, ProduceStream
from replog.wire.kafka_connection import KafkaConnections
from replog.wire.redialing_channel import GRPC_CORE_INTERNAL

if TYPE_CHECKING:
    from replog.wire.kafka_coordinator_client import KafkaCoordinatorClient

CLIENT_ID_HEADER = "x-client-id"


def client_id_metadata(client_id: str) -> tuple[tuple[str, str], ...]:
    """The gRPC metadata that names `client_id`; none for an id gRPC cannot carry (metadata
    values must be printable ASCII: another client id is simply not sent)."""
    printable = client_id.isascii() and client_id.isprintable()
    return ((CLIENT_ID_HEADER, client_id),) if client_id and printable else ()


SETUP_TIMEOUT_MS_DEFAULT = 10_000  # socket.connection.setup.timeout.ms


class Connections:
    """The broker and coordinator clients of one client, one per address (module docstring)."""

    def __init__(
        self,
        *,
        request_timeout_ms: int,
        client_id: str,
        setup_timeout_ms: int = SETUP_TIMEOUT_MS_DEFAULT,
    ) -> None:
        self.request_timeout_ms = request_timeout_ms
        self.client_id = client_id
        self.kafka = KafkaConnections(client_id=client_id, setup_timeout_ms=setup_timeout_ms)
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


def rpc_error(
    exc: grpc.aio.AioRpcError, *, address: str, what: str, node_id: int | None = None
) -> ReplogError:
    """The `replog.errors` exception a failed call stands for (module docstring)."""
    who = f"broker {node_id} at {address}" if node_id is not None else f"broker at {address}"
    code = exc.code()
    details = exc.details() or code.name
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED):
        return NetworkError(f"{who} unreachable during {what}: {details}")
    if code == grpc.StatusCode.INTERNAL and details == GRPC_CORE_INTERNAL:
        return NetworkError(
            f"{who}: the {what} call broke inside gRPC before a status from the broker "
            f"arrived (INTERNAL: {details}); the outcome is unknown"
        )
    if code == grpc.StatusCode.ABORTED:
        return NetworkError(f"{who} aborted {what}: {details}")
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return RequestTimedOutError(f"{who} did not answer {what} in time: {details}")
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        return InvalidRequestError(f"{who} refused {what} as invalid: {details}")
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        return RecordBatchTooLargeError(f"{who} refused {what} as too large: {details}")
    if code == grpc.StatusCode.UNIMPLEMENTED:
        return UnsupportedVersionError(f"{who} does not support {what}: {details}")
    return UnknownServerError(f"{who} failed {what}: {code.name}: {details}")
