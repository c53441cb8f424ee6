"""Connections: one client per address over the client's Kafka connections, closed together;
rpc_error turns every gRPC failure of a coordinator call into the typed error a Kafka client
would see, naming the broker, its address and the cause."""

from __future__ import annotations

import grpc
import pytest

from replog.client.connections import Connections, rpc_error
from replog.errors import (
    ClientClosedError,
    InvalidRequestError,
    NetworkError,
    RecordBatchTooLargeError,
    ReplogError,
    RequestTimedOutError,
    UnknownServerError,
    UnsupportedVersionError,
)
from replog.wire.kafka_broker_client import KafkaBrokerClient


def failure(code: grpc.StatusCode, details: str) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details=details)


@pytest.mark.parametrize(
    ("code", "error", "retriable"),
    [
        (grpc.StatusCode.UNAVAILABLE, NetworkError, True),
        (grpc.StatusCode.CANCELLED, NetworkError, True),
        (grpc.StatusCode.ABORTED, NetworkError, True),
        (grpc.StatusCode.DEADLINE_EXCEEDED, RequestTimedOutError, True),
        (grpc.StatusCode.INVALID_ARGUMENT, InvalidRequestError, False),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, RecordBatchTooLargeError, False),
        (grpc.StatusCode.UNIMPLEMENTED, UnsupportedVersionError, False),
        (grpc.StatusCode.INTERNAL, UnknownServerError, False),
        (grpc.StatusCode.PERMISSION_DENIED, UnknownServerError, False),
    ],
)
def test_rpc_error_maps_each_status_and_names_broker_address_and_details(
    code: grpc.StatusCode, error: type[ReplogError], retriable: bool
) -> None:
    mapped = rpc_error(
        failure(code, "the server's words"), address="127.0.0.1:19093", what="Produce", node_id=2
    )
    assert type(mapped) is error
    assert mapped.retriable is retriable
    text = str(mapped)
    assert "broker 2 at 127.0.0.1:19093" in text
    assert "Produce" in text
    assert "the server's words" in text


def test_grpcs_own_internal_error_is_a_lost_connection_not_the_brokers() -> None:
    # A stream cut under a write ends with gRPC's INTERNAL, not the broker's status: the
    # outcome is unknown and a retry is right, as after UNAVAILABLE.
    mapped = rpc_error(
        failure(grpc.StatusCode.INTERNAL, "Internal error from Core"),
        address="127.0.0.1:19093",
        what="Produce to history-1",
        node_id=3,
    )
    assert type(mapped) is NetworkError and mapped.retriable
    assert str(mapped) == (
        "broker 3 at 127.0.0.1:19093: the Produce to history-1 call broke inside gRPC before a "
        "status from the broker arrived (INTERNAL: Internal error from Core); the outcome is "
        "unknown"
    )


def test_rpc_error_without_a_node_id_still_names_the_address() -> None:
    mapped = rpc_error(
        failure(grpc.StatusCode.UNAVAILABLE, "Connection refused"),
        address="127.0.0.1:9092",
        what="Metadata",
    )
    assert str(mapped) == "broker at 127.0.0.1:9092 unreachable during Metadata: Connection refused"


@pytest.mark.asyncio
async def test_one_client_per_address_and_close_releases_them() -> None:
    connections = Connections(request_timeout_ms=1234, client_id="app-1")
    first = connections.broker("127.0.0.1:1")
    assert connections.broker("127.0.0.1:1") is first
    other = connections.broker("127.0.0.1:2")
    assert other is not first
    assert first.request_timeout_ms == 1234
    coordinator = connections.coordinator("127.0.0.1:1")
    assert connections.coordinator("127.0.0.1:1") is coordinator
    assert connections.coordinator("127.0.0.1:2") is not coordinator
    await connections.close()
    with pytest.raises(ClientClosedError):
        connections.broker("127.0.0.1:1")
    with pytest.raises(ClientClosedError):
        connections.coordinator("127.0.0.1:1")
    await connections.close()  # idempotent


@pytest.mark.asyncio
async def test_the_client_id_and_setup_timeout_are_the_kafka_connections() -> None:
    connections = Connections(request_timeout_ms=1000, client_id="café\n", setup_timeout_ms=777)
    client = connections.broker("127.0.0.1:1")
    assert client.connections is connections.kafka
    assert connections.kafka.client_id == "café\n"  # Kafka's header carries any string
    assert connections.kafka.setup_timeout_ms == 777
    await connections.close()


@pytest.mark.asyncio
async def test_redial_drops_only_a_known_channel_and_is_quiet_once_closed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    dropped: list[str] = []
    monkeypatch.setattr(
        KafkaBrokerClient, "reconnect", lambda client: dropped.append(client.address)
    )
    connections = Connections(request_timeout_ms=1234, client_id="app-1")
    known = connections.broker("127.0.0.1:1")
    connections.redial("127.0.0.1:1")
    connections.redial("127.0.0.1:2")  # never dialled: nothing to drop, nothing created
    assert dropped == ["127.0.0.1:1"]
    assert connections.broker("127.0.0.1:1") is known  # the same client dials afresh
    await connections.close()
    connections.redial("127.0.0.1:1")  # a late bad answer while closing: no ClientClosedError
    assert dropped == ["127.0.0.1:1"]
