"""Bootstrap addresses that refuse connections (issue #52 item 3): the refusal is known at the
first attempt, so it is logged at WARNING at once (once, not per retry), and a call that
waits for the cluster fails once the refusals have lasted
`socket.connection.setup.timeout.max.ms`, with a typed error naming the addresses and
"connection refused", instead of waiting out max.block.ms (60 s). An address that answers, but
not as a Kafka listener (a node's gRPC port), is named within 2 s; the new
`socket.connection.setup.timeout.ms` is read as Kafka's."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest

from replog import Consumer, Producer
from replog.aio import Producer as AsyncProducer
from replog.client.config import consumer_config, producer_config
from replog.errors import ConfigError, NoBrokersAvailableError, NotAKafkaListenerError
from tests.local_ports import free_port

TIMEOUT_MS = 1000


def refusals(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.levelno == logging.WARNING and "connection refused" in r.getMessage()
    ]


def test_send_fails_once_every_bootstrap_address_refused_for_the_timeout(
    caplog: pytest.LogCaptureFixture,
) -> None:
    dead = [f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"]
    caplog.set_level(logging.DEBUG, logger="replog.client")
    with Producer(
        bootstrap_servers=",".join(dead),
        socket_connection_setup_timeout_max_ms=TIMEOUT_MS,
        max_block_ms=60_000,
    ) as producer:
        started = time.monotonic()
        with pytest.raises(NoBrokersAvailableError) as raised:
            producer.send("t", b"v")
        took, ended_wall = time.monotonic() - started, time.time()
    assert TIMEOUT_MS / 1000 <= took < TIMEOUT_MS / 1000 + 2.5
    message = str(raised.value)
    assert all(address in message for address in dead)
    assert "connection refused" in message
    assert "socket.connection.setup.timeout.max.ms=1000" in message
    warned = refusals(caplog)
    assert sorted(address for r in warned for address in dead if address in r.getMessage()) == (
        sorted(dead)
    )  # one warning per address, however many retries
    # Said at the first refusal, which the failure follows by the timeout (however late a
    # loaded machine made that first attempt), not when the call gave up.
    assert all(ended_wall - r.created > TIMEOUT_MS / 1000 / 2 for r in warned)


@pytest.mark.asyncio
async def test_the_asyncio_send_fails_the_same_way() -> None:
    dead = f"127.0.0.1:{free_port()}"
    async with AsyncProducer(
        bootstrap_servers=dead, socket_connection_setup_timeout_max_ms=TIMEOUT_MS
    ) as producer:
        started = time.monotonic()
        with pytest.raises(NoBrokersAvailableError, match=f"{dead}: connection refused"):
            await producer.send("t", b"v")
        assert time.monotonic() - started < TIMEOUT_MS / 1000 + 2.5
        # A later send knows the refusal by now: it fails after one more attempt.
        started = time.monotonic()
        with pytest.raises(NoBrokersAvailableError):
            await producer.send("t", b"w")
        assert time.monotonic() - started < 1


def test_the_setting_has_kafkas_name_and_default() -> None:
    assert producer_config().socket_connection_setup_timeout_max_ms == 30_000
    given = consumer_config({"socket.connection.setup.timeout.max.ms": "500"})
    assert given.socket_connection_setup_timeout_max_ms == 500
    with pytest.raises(ConfigError, match=r"socket\.connection\.setup\.timeout\.max\.ms=-1"):
        producer_config({"socket.connection.setup.timeout.max.ms": -1})
    with Consumer(bootstrap_servers=f"127.0.0.1:{free_port()}") as consumer:
        assert consumer.config.socket_connection_setup_timeout_max_ms == 30_000


@pytest.fixture
def grpc_address() -> Iterator[str]:
    """A gRPC server's address (as a replog node's internal listener is)."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.stop(None).wait()


def test_a_producer_pointed_at_a_grpc_port_says_so_within_two_seconds(grpc_address: str) -> None:
    started = time.monotonic()
    with (
        Producer(bootstrap_servers=grpc_address) as producer,
        pytest.raises(NotAKafkaListenerError) as raised,
    ):
        producer.send("t", b"v").get(timeout=30)
    assert time.monotonic() - started < 2.0
    assert f"{grpc_address} answered HTTP/2" in str(raised.value)


def test_a_consumer_pointed_at_a_grpc_port_says_so_within_two_seconds(grpc_address: str) -> None:
    started = time.monotonic()
    with (
        Consumer(bootstrap_servers=grpc_address) as consumer,
        pytest.raises(NotAKafkaListenerError) as raised,
    ):
        consumer.partitions_for_topic("t")
    assert time.monotonic() - started < 2.0
    assert f"{grpc_address} answered HTTP/2" in str(raised.value)


def test_the_connection_setup_timeout_is_kafkas_config() -> None:
    assert producer_config().socket_connection_setup_timeout_ms == 10_000
    given = consumer_config({"socket.connection.setup.timeout.ms": "700"})
    assert given.socket_connection_setup_timeout_ms == 700
    with pytest.raises(ConfigError):
        producer_config({"socket.connection.setup.timeout.ms": 0})
    with Producer(bootstrap_servers="127.0.0.1:1", socket_connection_setup_timeout_ms=700) as p:
        assert p._aio._metadata.connections.kafka.setup_timeout_ms == 700
