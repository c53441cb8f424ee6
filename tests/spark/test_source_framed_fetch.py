"""The Spark fetcher's framed fetch connection (`framed_fetch`).

Without a cluster, against a scripted framed listener: the greeting names a consumer (-1),
an answer written in pieces arrives whole, as a view of a buffer of its own; a refusal frame
raises its Kafka error, an answer to another request `MalformedResponseError`, a closed
connection `NetworkError`, each naming the listener, and the next fetch connects afresh; a
broker that names no port is `FramedFetchUnavailable`.

On a cluster: `PartitionFetcher` reads over the framed connection and gets exactly the records
the gRPC Fetch answers; a leader without a framed port is read over gRPC.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Callable
from typing import Any

import pytest
from client_cluster import ClientCluster

from replog.client.records import TopicPartition
from replog.clock import monotonic_ms
from replog.errors import BrokerNotAvailableError, MalformedResponseError, NetworkError
from replog.pb import broker_pb2 as pb
from replog.replication import messages as m
from replog.spark.framed_fetch import FramedFetchChannels, FramedFetchUnavailable
from replog.spark.partition_fetcher import PartitionFetcher
from replog.spark.range_reader import READ_DEFAULTS
from replog.wire import replica_fetch_wire as wire
from replog.wire.framed_wire import GREETING_BYTES

REQUEST = m.FetchRequest((m.FetchPartition("t", 0, 7, 1024),), max_wait_ms=0)
_HEADER = struct.Struct(">II")

# A listener's answer to one request (given its sequence number): the byte pieces to write in
# turn; an empty piece closes the connection, an empty list closes it at once.
Script = Callable[[int], list[bytes]]


class _Endpoint:
    """`Connections.broker(address)`'s one call the channels make."""

    def __init__(self, port: int | None) -> None:
        self.port = port

    def broker(self, address: str) -> _Endpoint:
        return self

    async def replica_fetch_endpoint(self) -> int:
        if self.port is None:
            raise BrokerNotAvailableError("its replica fetch listener is not listening yet")
        return self.port


async def _listener(script: Script, seen: list[Any]) -> tuple[asyncio.Server, int]:
    """A framed listener that records each connection's greeting and requests and answers
    each request as `script` says (each piece written, then a pause)."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(("greeting", struct.unpack(">4sBi", await reader.readexactly(GREETING_BYTES))))
        try:
            while True:
                length, sequence = _HEADER.unpack(await reader.readexactly(_HEADER.size))
                body = await reader.readexactly(length - 4)
                seen.append(("request", pb.FetchRequest.FromString(body)))
                pieces = script(sequence)
                if not pieces:
                    writer.close()
                    return
                for piece in pieces:
                    if not piece:
                        writer.close()
                        return
                    writer.write(piece)
                    await writer.drain()
                    await asyncio.sleep(0.01)
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()
        except asyncio.CancelledError:  # the test ended first: asyncio.run cancels this task
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def _frame(sequence: int, payload: bytes) -> bytes:
    return _HEADER.pack(len(payload) + 4, sequence) + payload


def _run(script: Script, body: Callable[[FramedFetchChannels, str, list[Any]], Any]) -> Any:
    async def scenario() -> Any:
        seen: list[Any] = []
        server, port = await _listener(script, seen)
        channels = FramedFetchChannels(_Endpoint(port))  # type: ignore[arg-type]
        try:
            return await body(channels, f"127.0.0.1:{port}", seen)
        finally:
            channels.close()
            server.close()

    return asyncio.run(scenario())


def test_an_answer_in_pieces_arrives_whole_in_its_own_buffer_as_a_consumer() -> None:
    answer = bytes(range(256)) * 1000

    def script(sequence: int) -> list[bytes]:
        frame = _frame(sequence, answer)
        return [frame[:3], frame[3:11], frame[11:70_000], frame[70_000:]]

    async def body(channels: FramedFetchChannels, address: str, seen: list[Any]) -> None:
        first = await channels.fetch(address, REQUEST, timeout_ms=5000)
        second = await channels.fetch(address, REQUEST, timeout_ms=5000)
        assert bytes(first) == answer and bytes(second) == answer
        assert first.obj is not second.obj  # the first answer's buffer is not reused
        # One connection, greeted as a consumer; the requests are a consumer's.
        assert seen[0] == ("greeting", (b"RLRP", 1, -1))
        requests = [r for kind, r in seen if kind == "request"]
        assert len(seen) == 3 and len(requests) == 2
        assert requests[0].replica_id == -1
        assert requests[0].topics[0].partitions[0].fetch_offset == 7

    _run(script, body)


def test_an_empty_answer_is_delivered() -> None:
    async def body(channels: FramedFetchChannels, address: str, seen: list[Any]) -> None:
        assert bytes(await channels.fetch(address, REQUEST, timeout_ms=5000)) == b""

    _run(lambda sequence: [_frame(sequence, b"")], body)


def test_a_refusal_raises_its_error_and_the_next_fetch_connects_afresh() -> None:
    answers = iter(
        [
            lambda s: [wire.refusal(s, BrokerNotAvailableError("not serving data requests"))],
            lambda s: [_frame(s, b"ok")],
        ]
    )

    async def body(channels: FramedFetchChannels, address: str, seen: list[Any]) -> None:
        with pytest.raises(BrokerNotAvailableError, match="refused the fetch: not serving"):
            await channels.fetch(address, REQUEST, timeout_ms=5000)
        assert bytes(await channels.fetch(address, REQUEST, timeout_ms=5000)) == b"ok"
        assert [kind for kind, _ in seen].count("greeting") == 2

    _run(lambda sequence: next(answers)(sequence), body)


def test_an_answer_to_another_request_is_malformed() -> None:
    async def body(channels: FramedFetchChannels, address: str, seen: list[Any]) -> None:
        with pytest.raises(MalformedResponseError, match="answered request 99, never sent"):
            await channels.fetch(address, REQUEST, timeout_ms=5000)

    _run(lambda sequence: [_frame(99, b"x")], body)


def test_a_connection_closed_mid_answer_is_a_network_error_naming_the_listener() -> None:
    async def body(channels: FramedFetchChannels, address: str, seen: list[Any]) -> None:
        with pytest.raises(
            NetworkError, match=r"framed fetch listener at .* closed the connection with 10 bytes"
        ):
            await channels.fetch(address, REQUEST, timeout_ms=5000)

    # The header promises 100 bytes; 10 come, then the listener closes the connection.
    _run(lambda sequence: [_frame(sequence, bytes(100))[:18], b""], body)


def test_a_broker_naming_no_port_is_unavailable() -> None:
    async def scenario() -> None:
        channels = FramedFetchChannels(_Endpoint(None))  # type: ignore[arg-type]
        with pytest.raises(FramedFetchUnavailable, match="did not name its framed fetch port"):
            await channels.fetch("127.0.0.1:1", REQUEST, timeout_ms=5000)

    asyncio.run(scenario())


def _first_answer(fetcher: PartitionFetcher) -> Any:
    deadline = monotonic_ms() + 20_000
    answer = fetcher.wait(fetcher.submit(0, deadline), deadline)
    assert answer is not None
    return answer


def test_the_fetcher_reads_over_the_framed_connection_what_grpc_answers(
    replog_cluster: ClientCluster,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    topic = "framed-fetch"
    replog_cluster.create_topic(topic, 1, 3)
    with replog_cluster.producer(acks="all") as producer:
        for i in range(500):
            producer.send(topic, b"v%d" % i, b"k%d" % (i % 7), partition=0)
        producer.flush()
    settings = {**READ_DEFAULTS, "bootstrap.servers": replog_cluster.bootstrap}
    tp = TopicPartition(topic, 0)
    with PartitionFetcher(tp, settings) as fetcher:
        framed = _first_answer(fetcher)
        assert fetcher._framed._open and not fetcher._grpc_only  # it went the framed way

    # The same fetch with the framed port unavailable: over gRPC, the same records.
    async def no_port(self: Any, address: str) -> Any:
        raise FramedFetchUnavailable("no port here")

    monkeypatch.setattr(FramedFetchChannels, "_connect", no_port)
    with (
        caplog.at_level(logging.WARNING, logger="replog.spark"),
        PartitionFetcher(tp, settings) as fetcher,
    ):
        over_grpc = _first_answer(fetcher)
        assert fetcher._grpc_only and not fetcher._framed._open
    # The fallback is said, naming why: it costs the read CPU per record.
    assert [r.getMessage() for r in caplog.records] == ["no port here; reading from it over gRPC"]
    assert framed.high_watermark == over_grpc.high_watermark == 500
    assert bytes(framed.records) == bytes(over_grpc.records) and len(framed.records) > 500
