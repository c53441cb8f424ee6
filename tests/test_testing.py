"""`replog.testing`, the test doubles shipped for users' tests and the project's own: the
manual clock, the fake Kafka broker, and a real local cluster for the
length of a `with` block."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from pathlib import Path

import grpc
import pytest

from replog import Consumer, NewTopic, Producer, TopicPartition
from replog.admin.controller_client import ControllerClient
from replog.cli.local_cluster import METRICS_PORT_OFFSET
from replog.errors import MalformedResponseError, NetworkError
from replog.kafka.messages.init_producer_id_request import InitProducerIdRequest
from replog.kafka.messages.init_producer_id_response import InitProducerIdResponse
from replog.kafka.messages.metadata_request import MetadataRequest
from replog.testing import (
    LOCAL_KAFKA_PORT_OFFSETS,
    FakeKafkaBroker,
    ManualClock,
    local_cluster,
    running_fake_kafka_broker,
)
from replog.testing import (
    METRICS_PORT_OFFSET as TESTING_METRICS_OFFSET,
)
from replog.wire.kafka_connection import KafkaConnection


def test_a_manual_clock_moves_only_when_told_or_by_its_tick() -> None:
    clock = ManualClock(1_000)
    assert clock() == clock() == 1_000
    assert clock.advance(250) == 1_250 and clock() == 1_250
    with pytest.raises(ValueError, match="does not go back"):
        clock.advance(-1)
    ticking = ManualClock(0, tick_ms=7)
    assert [ticking(), ticking()] == [7, 14]


def test_the_fake_kafka_broker_answers_what_the_test_scripts() -> None:
    async def exchange(address: str) -> None:
        connection = await KafkaConnection.open(address, client_id="t", setup_timeout_ms=2000)
        answer, _ = await connection.call(InitProducerIdRequest(), timeout_ms=2000)
        assert isinstance(answer, InitProducerIdResponse) and answer.producer_id == 42
        with pytest.raises(MalformedResponseError):
            await connection.call(InitProducerIdRequest(), timeout_ms=2000)
        again = await KafkaConnection.open(address, client_id="t", setup_timeout_ms=2000)
        with pytest.raises(NetworkError):  # nothing scripted: the connection closes
            await again.call(MetadataRequest(), timeout_ms=2000)

    with running_fake_kafka_broker() as broker:
        broker.answer("InitProducerId", InitProducerIdResponse(producer_id=42), b"\xff")
        asyncio.run(exchange(broker.address))
        assert broker.calls["InitProducerId"] == 2
        assert broker.calls["Metadata"] == 1
        assert [api for api, _, _ in broker.requests].count("ApiVersions") == 2


class SlowToServe(FakeKafkaBroker):
    """A fake whose connections' handlers start late, as on a busy machine."""

    def __init__(self) -> None:
        self.accepted = threading.Event()
        super().__init__()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted.set()
        await asyncio.sleep(0.3)  # not serving yet when `stop` comes
        await super()._serve(reader, writer)


def test_the_fake_kafka_broker_stops_a_connection_whose_handler_has_not_run() -> None:
    """Its transport is closed before the fake's loop is: never left open (a ResourceWarning
    whenever it is collected, in whatever test runs then)."""
    broker = SlowToServe()
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as client:
        assert broker.accepted.wait(10)
        broker.stop()
        with contextlib.suppress(ConnectionResetError):  # the fake aborts its connections
            assert client.recv(1) == b""


def test_a_local_cluster_serves_clients_for_the_block_and_stops_after_it(tmp_path: Path) -> None:
    assert TESTING_METRICS_OFFSET == METRICS_PORT_OFFSET  # the layout `replog cluster` writes
    with local_cluster(tmp_path / "cluster") as servers:
        host, port = servers.rsplit(":", 1)
        controller = f"{host}:{int(port) - LOCAL_KAFKA_PORT_OFFSETS[0]}"
        with ControllerClient([controller]) as admin:
            admin.create_topics([NewTopic("events", 1, 1)])
        with Producer(bootstrap_servers=servers) as producer:
            producer.send("events", b"hello").get(timeout=30)
        with Consumer(bootstrap_servers=servers, auto_offset_reset="earliest") as consumer:
            consumer.assign([TopicPartition("events", 0)])
            records = consumer.poll(10_000).get(TopicPartition("events", 0), [])
            assert [r.value for r in records] == [b"hello"]
    with grpc.insecure_channel(controller) as channel, pytest.raises(grpc.FutureTimeoutError):
        grpc.channel_ready_future(channel).result(timeout=1)  # stopped with the block
