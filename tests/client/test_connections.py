"""Connections: one client per address over the client's Kafka connections, closed together."""

from __future__ import annotations

import pytest

from replog.client.connections import Connections
from replog.errors import (
    ClientClosedError,
)
from replog.wire.kafka_broker_client import KafkaBrokerClient


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
