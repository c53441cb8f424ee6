"""KafkaConnection and KafkaConnections against real peers: the ApiVersions handshake and the
versions agreed, responses matched in order, a request unanswered in time closing the
connection, and every address that is not a Kafka listener named within 2 s (a gRPC server,
an HTTP server, a peer that closes), a refused or unreachable one naming the address."""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import socket
import threading
import time
from collections.abc import Iterator

import grpc
import pytest

from replog.errors import (
    ClientClosedError,
    NetworkError,
    NotAKafkaListenerError,
    RequestTimedOutError,
    UnsupportedVersionError,
)
from replog.kafka.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from replog.kafka.messages.init_producer_id_request import InitProducerIdRequest
from replog.kafka.messages.init_producer_id_response import InitProducerIdResponse
from replog.kafka.messages.metadata_request import MetadataRequest
from replog.kafka.messages.metadata_response import MetadataResponse
from replog.testing import FakeKafkaBroker, running_fake_kafka_broker
from replog.wire.kafka_connection import KafkaConnection, KafkaConnections


@pytest.fixture
def broker() -> Iterator[FakeKafkaBroker]:
    with running_fake_kafka_broker() as fake:
        yield fake


def free_address() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


async def open_(address: str, setup_timeout_ms: int = 5000) -> KafkaConnection:
    return await KafkaConnection.open(address, client_id="t", setup_timeout_ms=setup_timeout_ms)


@pytest.mark.asyncio
async def test_the_handshake_agrees_each_apis_version(broker: FakeKafkaBroker) -> None:
    broker.answer(
        "ApiVersions",
        ApiVersionsResponse(
            api_keys=[
                ApiVersion(api_key=18, min_version=0, max_version=3),
                ApiVersion(api_key=3, min_version=1, max_version=7),
            ]
        ),
    )
    broker.answer("Metadata", MetadataResponse())
    connection = await open_(broker.address)
    try:
        assert connection.version(3) == 7
        assert connection.version(3, max_version=4) == 4
        with pytest.raises(UnsupportedVersionError, match="does not serve InitProducerId"):
            connection.version(22)
        with pytest.raises(UnsupportedVersionError, match="serves Metadata v1-7"):
            connection.version(3, min_version=9)
        _, version = await connection.call(MetadataRequest(), timeout_ms=2000)
        assert version == 7 and broker.requests[-1][2] == 7
    finally:
        connection.close()


@pytest.mark.asyncio
async def test_pipelined_requests_get_their_own_answers_in_order(broker: FakeKafkaBroker) -> None:
    broker.answer("InitProducerId", *(InitProducerIdResponse(producer_id=i) for i in range(5)))
    connection = await open_(broker.address)
    try:
        calls = [connection.call(InitProducerIdRequest(), timeout_ms=2000) for _ in range(5)]
        answers = await asyncio.gather(*calls)
        assert [a.producer_id for a, _ in answers] == [0, 1, 2, 3, 4]  # type: ignore[attr-defined]
        assert broker.connections == 1
    finally:
        connection.close()


@pytest.mark.asyncio
async def test_a_request_unanswered_in_time_closes_the_connection(broker: FakeKafkaBroker) -> None:
    def slow(request: object, version: int) -> MetadataResponse:
        time.sleep(1.0)
        return MetadataResponse()

    broker.answer("Metadata", slow)
    connection = await open_(broker.address)
    behind = asyncio.ensure_future(connection.call(MetadataRequest(), timeout_ms=5000))
    started = time.monotonic()
    with pytest.raises(RequestTimedOutError, match="did not answer Metadata within 200 ms"):
        await connection.call(MetadataRequest(), timeout_ms=200)
    assert time.monotonic() - started < 1.0
    assert connection.is_closed
    with pytest.raises(RequestTimedOutError):  # the answers behind it are in doubt
        await behind


@pytest.mark.asyncio
async def test_a_lost_connection_fails_what_waits_with_a_network_error(
    broker: FakeKafkaBroker,
) -> None:
    connection = await open_(broker.address)  # Metadata not scripted: the fake hangs up
    with pytest.raises(NetworkError, match=f"the connection to {broker.address} was lost"):
        await connection.call(MetadataRequest(), timeout_ms=2000)
    with pytest.raises(NetworkError):
        await connection.call(MetadataRequest(), timeout_ms=2000)


@pytest.mark.asyncio
async def test_a_grpc_listener_is_named_within_two_seconds() -> None:
    server = grpc.aio.server()
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        started = time.monotonic()
        with pytest.raises(NotAKafkaListenerError) as raised:
            await open_(f"127.0.0.1:{port}", setup_timeout_ms=10_000)
        assert time.monotonic() - started < 2.0
        assert f"127.0.0.1:{port} answered HTTP/2" in str(raised.value)
        assert "gRPC listener" in str(raised.value)
    finally:
        await server.stop(None)


@pytest.mark.asyncio
async def test_an_http_server_is_named_within_two_seconds() -> None:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        address = f"127.0.0.1:{server.server_address[1]}"
        started = time.monotonic()
        with pytest.raises(NotAKafkaListenerError) as raised:
            await open_(address, setup_timeout_ms=10_000)
        assert time.monotonic() - started < 2.0
        assert f"{address} answered HTTP/1" in str(raised.value)
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.asyncio
async def test_a_peer_that_closes_having_sent_nothing_is_a_retriable_network_error() -> None:
    # A broker starting or stopping, or a proxy in front of a dead one, closes so: the client
    # retries it, where a peer that sends bytes that are not Kafka's is named and given up.
    listener = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    try:
        with pytest.raises(NetworkError) as raised:
            await open_(f"127.0.0.1:{port}")
        assert raised.value.retriable
        assert "closed the connection before answering ApiVersions" in str(raised.value)
    finally:
        listener.close()


@pytest.mark.asyncio
async def test_a_peer_that_sends_other_bytes_and_closes_is_no_kafka_listener() -> None:
    async def greet(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"SSH-2.0-OpenSSH\r\n")
        await writer.drain()
        writer.close()

    listener = await asyncio.start_server(greet, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    try:
        with pytest.raises(NotAKafkaListenerError) as raised:
            await open_(f"127.0.0.1:{port}")
        # "SSH-" read as a frame size: refused, never a buffer of that size.
        assert "bytes that are not Kafka's" in str(raised.value)
        assert "announced a 1397966893-byte frame before ApiVersions" in str(raised.value)
    finally:
        listener.close()


@pytest.mark.asyncio
async def test_a_refused_address_is_named() -> None:
    address = free_address()
    with pytest.raises(NetworkError) as raised:
        await open_(address)
    assert str(raised.value) == f"cannot connect to {address}: connection refused"


@pytest.mark.asyncio
async def test_an_address_that_never_accepts_fails_within_the_setup_timeout() -> None:
    # A listener whose accept queue is full: Linux drops further SYNs, so a connect hangs as
    # toward a dead host.
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        address = f"127.0.0.1:{listener.getsockname()[1]}"
        fillers = []
        try:
            for _ in range(4):
                filler = socket.socket()
                filler.setblocking(False)
                fillers.append(filler)
                with contextlib.suppress(BlockingIOError):
                    filler.connect(listener.getsockname())
            started = time.monotonic()
            with pytest.raises(NetworkError) as raised:
                await open_(address, setup_timeout_ms=500)
            elapsed = time.monotonic() - started
        finally:
            for filler in fillers:
                filler.close()
    assert elapsed < 1.5
    text = str(raised.value)
    assert address in text and "within" in text and "socket.connection.setup.timeout.ms" in text


@pytest.mark.asyncio
async def test_the_pool_keeps_one_connection_per_address_and_lane(broker: FakeKafkaBroker) -> None:
    pool = KafkaConnections(client_id="t", setup_timeout_ms=2000)
    first, same = await asyncio.gather(pool.get(broker.address), pool.get(broker.address))
    assert first is same and broker.connections == 1
    other = await pool.get(broker.address, "fetch")
    assert other is not first and broker.connections == 2
    pool.drop(broker.address)
    assert first.is_closed and pool.cached(broker.address) is None
    assert pool.cached(broker.address, "fetch") is other
    await pool.close()
    assert other.is_closed
    with pytest.raises(ClientClosedError):
        await pool.get(broker.address)
