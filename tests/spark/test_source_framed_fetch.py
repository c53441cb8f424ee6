"""The Spark fetcher's framed fetch connection (`framed_fetch`).

Without a cluster, against a scripted framed listener: the greeting names a consumer (-1),
an answer written in pieces arrives whole, as a view of a buffer of its own; a refusal frame
raises its Kafka error, an answer to another request or a refusal too short for its code
`MalformedResponseError`, a closed
connection `NetworkError`, each naming the listener, and the next fetch connects afresh.
`FramedFetchUnavailable` only where the framed path is not there (an older broker's
UNIMPLEMENTED, no port named, the port refused); an endpoint query that fails for now is
raised as it is.

The fetcher's fallback, on fakes and a clock the test moves: a fallback is said and lasts
`FRAMED_RETRY_MS` or until a new leader epoch; a transient failure is a retried fetch, never
a fallback.

A task that gets no answer says why when it gives up (`ReadTimeoutError`), each new cause
said once at WARNING; an answer that is not a FetchResponse names the leader and partition.

On a cluster (whose brokers serve no framed fetch listener: followers fetch over
ReplicaFetch): `PartitionFetcher` reads over gRPC, said once; a range read across its leader
killed and restarted gets every record once; a worker keeps the session of a task that read
its whole range for its next task, and tasks that stop early or fail close theirs.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import itertools
import logging
import os
import socket
import struct
import sys
import threading
from collections.abc import Callable
from typing import Any

import grpc
import pytest
from client_cluster import ClientCluster
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import LongType, StructField, StructType

from replog import Admin
from replog.client.connections import Connections
from replog.client.loop_thread import LoopThread
from replog.client.records import TopicPartition
from replog.clock import monotonic_ms
from replog.errors import (
    BrokerNotAvailableError,
    MalformedResponseError,
    NetworkError,
)
from replog.pb import broker_pb2 as pb
from replog.pb import broker_pb2_grpc
from replog.replication import messages as m
from replog.spark import framed_fetch, partition_fetcher, range_reader
from replog.spark.errors import DataLossError, MalformedFetchAnswerError, ReadTimeoutError
from replog.spark.fetch_sessions import SessionPool
from replog.spark.framed_fetch import FramedFetchChannels, FramedFetchUnavailable
from replog.spark.options import Mode, parse_options
from replog.spark.partition_fetcher import (
    FRAMED_RETRY_MS,
    PartitionFetcher,
)
from replog.spark.planning import OffsetRange
from replog.spark.range_reader import READ_DEFAULTS
from replog.wire import replica_fetch_wire as wire
from replog.wire.framed_wire import GREETING_BYTES

SCHEMA = to_arrow_schema(StructType([StructField("offset", LongType())]), timezone="UTC")
REQUEST = m.FetchRequest((m.FetchPartition("t", 0, 7, 1024),), max_wait_ms=0)
_HEADER = struct.Struct(">II")

# A listener's answer to one request (given its sequence number): the byte pieces to write in
# turn; an empty piece closes the connection, an empty list closes it at once.
Script = Callable[[int], list[bytes]]


class _Endpoint:
    """`Connections.broker(address)`'s one call the channels make: it answers `port` (None:
    an answer naming none), or raises it."""

    def __init__(self, port: int | Exception | None) -> None:
        self.port = port
        self.asked = 0

    def broker(self, address: str) -> _Endpoint:
        return self

    async def named_replica_fetch_port(self) -> int | None:
        self.asked += 1
        if isinstance(self.port, Exception):
            raise self.port
        return self.port


def _rpc_error(code: grpc.StatusCode) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details="said so")


def _closed_port() -> int:
    """A port nothing listens on: connecting to it is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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


def test_a_refusal_too_short_for_its_error_code_is_malformed() -> None:
    async def body(channels: FramedFetchChannels, address: str, seen: list[Any]) -> None:
        with pytest.raises(
            MalformedResponseError,
            match=r"framed fetch listener at .* sent malformed bytes: replica fetch refusal of 1 "
            "bytes: too short",
        ):
            await channels.fetch(address, REQUEST, timeout_ms=5000)

    _run(lambda sequence: [_frame(sequence | wire.REFUSAL_BIT, b"x")], body)


def test_a_connection_closed_mid_answer_is_a_network_error_naming_the_listener() -> None:
    async def body(channels: FramedFetchChannels, address: str, seen: list[Any]) -> None:
        with pytest.raises(
            NetworkError, match=r"framed fetch listener at .* closed the connection with 10 bytes"
        ):
            await channels.fetch(address, REQUEST, timeout_ms=5000)

    # The header promises 100 bytes; 10 come, then the listener closes the connection.
    _run(lambda sequence: [_frame(sequence, bytes(100))[:18], b""], body)


def _low_water(channels: FramedFetchChannels, address: str) -> int:
    """The receive low-water mark of the channels' connection to `address`."""
    transport = channels._open[address]._socket
    assert transport is not None
    return int(transport.get_extra_info("socket").getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT))


@pytest.mark.skipif(sys.platform != "linux", reason="the mark is set on Linux only")
def test_the_receive_low_water_mark_is_what_is_left_of_the_answer_at_most_the_cap() -> None:
    low = framed_fetch.RECEIVE_LOW_WATER
    answer = os.urandom(3 * low + 17)

    async def scenario() -> None:
        gates = [asyncio.Event() for _ in range(3)]

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                await reader.readexactly(GREETING_BYTES)
                length, sequence = _HEADER.unpack(await reader.readexactly(_HEADER.size))
                await reader.readexactly(length - 4)
                frame = _frame(sequence, answer)
                # The header and 1,000 bytes; all but the last 100; the rest.
                pieces = [frame[:1008], frame[1008:-100], frame[-100:]]
                for gate, piece in zip(gates, pieces, strict=True):
                    await gate.wait()
                    writer.write(piece)
                    await writer.drain()
                await reader.read()  # until the client closes
            finally:
                writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        address = f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
        channels = FramedFetchChannels(_Endpoint(server.sockets[0].getsockname()[1]))  # type: ignore[arg-type]

        async def mark_becomes(value: int) -> None:
            for _ in range(1000):
                if address in channels._open and _low_water(channels, address) == value:
                    return
                await asyncio.sleep(0.002)
            raise AssertionError(f"the mark is {_low_water(channels, address)}, not {value}")

        try:
            fetch = asyncio.create_task(channels.fetch(address, REQUEST, timeout_ms=5000))
            await mark_becomes(1)  # connected, no answer yet
            gates[0].set()
            await mark_becomes(low)  # 3 MiB + 17 - 1000 left: the cap
            gates[1].set()
            await mark_becomes(100)  # what is left, below the cap
            gates[2].set()
            assert bytes(await fetch) == answer
            assert _low_water(channels, address) == 1  # between answers
        finally:
            channels.close()
            server.close()

    asyncio.run(scenario())


@given(
    sizes=st.lists(
        st.sampled_from([0, 1, 5000])
        | st.integers(framed_fetch.RECEIVE_LOW_WATER - 2, framed_fetch.RECEIVE_LOW_WATER + 2)
        | st.integers(1, 3 * framed_fetch.RECEIVE_LOW_WATER),
        min_size=1,
        max_size=3,
    ),
    cuts=st.lists(st.floats(0, 1), max_size=4),
)
@settings(max_examples=20, deadline=None)
def test_answers_of_any_size_in_any_pieces_arrive_whole_and_leave_the_mark_at_one(
    sizes: list[int], cuts: list[float]
) -> None:
    answers = iter([bytes([len(sizes) % 256]) * size for size in sizes])

    def script(sequence: int) -> list[bytes]:
        frame = _frame(sequence, next(answers))
        at = sorted({0, len(frame), *(int(c * len(frame)) for c in cuts)})
        return [frame[a:b] for a, b in itertools.pairwise(at)]

    async def body(channels: FramedFetchChannels, address: str, seen: list[Any]) -> None:
        for size in sizes:
            answer = await channels.fetch(address, REQUEST, timeout_ms=5000)
            assert bytes(answer) == bytes([len(sizes) % 256]) * size
            if sys.platform == "linux":
                assert _low_water(channels, address) == 1

    _run(script, body)


def _at_epoch(epoch: int, partition: int = 0) -> m.FetchRequest:
    return m.FetchRequest(
        (m.FetchPartition("t", partition, 7, 1024, current_leader_epoch=epoch),), max_wait_ms=0
    )


def test_a_kept_connection_is_used_again_unless_its_leader_epoch_changed_or_it_was_closed() -> None:
    # A worker keeps its connections for its next task (`fetch_sessions`): the same connection
    # serves fetches at the same leader epoch, and other partitions of the same leader.
    answers = iter([lambda s: [_frame(s, b"a")]] * 4 + [lambda s: [_frame(s, b"b"), b""]] * 3)

    async def body(channels: FramedFetchChannels, address: str, seen: list[Any]) -> None:
        endpoint: Any = channels._connections  # the test's _Endpoint
        for request in (_at_epoch(1), _at_epoch(1), _at_epoch(5, partition=1)):
            assert bytes(await channels.fetch(address, request, timeout_ms=5000)) == b"a"
        assert [kind for kind, _ in seen].count("greeting") == 1 and endpoint.asked == 1
        # A new leader epoch for a partition it fetched: the leader at this address changed
        # (maybe restarted, its port with it): the port is asked again, a new connection made.
        assert bytes(await channels.fetch(address, _at_epoch(2), timeout_ms=5000)) == b"a"
        assert [kind for kind, _ in seen].count("greeting") == 2 and endpoint.asked == 2
        # The listener closes the connection after its answer, while it is idle: the next
        # fetch connects afresh instead of failing on it.
        assert bytes(await channels.fetch(address, _at_epoch(2), timeout_ms=5000)) == b"b"
        await asyncio.sleep(0.1)
        assert bytes(await channels.fetch(address, _at_epoch(2), timeout_ms=5000)) == b"b"
        assert [kind for kind, _ in seen].count("greeting") == 3 and endpoint.asked == 3

    _run(lambda sequence: next(answers)(sequence), body)


# How a leader's framed path is truly unavailable: (what the endpoint query answers, what
# the FramedFetchUnavailable says).
UNAVAILABLE = {
    "an older broker": (_rpc_error(grpc.StatusCode.UNIMPLEMENTED), "UNIMPLEMENTED: an older"),
    "no port named": (None, "named no framed fetch port"),
    "port refused": (_closed_port, "cannot connect to the framed fetch listener"),
}


def _endpoint_answer(answer: Any) -> Any:
    return answer() if callable(answer) else answer


@pytest.mark.parametrize("case", UNAVAILABLE)
def test_a_leader_without_a_framed_path_is_unavailable(case: str) -> None:
    answer, said = UNAVAILABLE[case]

    async def scenario() -> None:
        channels = FramedFetchChannels(_Endpoint(_endpoint_answer(answer)))  # type: ignore[arg-type]
        with pytest.raises(FramedFetchUnavailable, match=said):
            await channels.fetch("127.0.0.1:1", REQUEST, timeout_ms=5000)

    asyncio.run(scenario())


class _OlderBroker(broker_pb2_grpc.BrokerServicer):
    """A gRPC Broker service without ReplicaFetchEndpoint (UNIMPLEMENTED, the servicer's
    default), or (`port` given) one whose answer names `port`."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port

    async def ReplicaFetchEndpoint(self, request: Any, context: Any) -> Any:
        if self.port is None:
            return super().ReplicaFetchEndpoint(request, context)
        return pb.ReplicaFetchEndpointResponse(port=self.port)


@pytest.mark.parametrize(
    ("port", "said"), [(None, "UNIMPLEMENTED: an older broker"), (0, "named no framed fetch port")]
)
def test_a_real_grpc_broker_without_the_endpoint_or_a_port_is_unavailable(
    port: int | None, said: str
) -> None:
    async def scenario() -> None:
        server = grpc.aio.server()
        broker_pb2_grpc.add_BrokerServicer_to_server(_OlderBroker(port), server)
        address = f"127.0.0.1:{server.add_insecure_port('127.0.0.1:0')}"
        await server.start()
        connections = Connections(request_timeout_ms=5000, client_id="test")
        channels = FramedFetchChannels(connections)
        try:
            with pytest.raises(FramedFetchUnavailable, match=said):
                await channels.fetch(address, REQUEST, timeout_ms=5000)
        finally:
            channels.close()
            await connections.close()
            await server.stop(None)

    asyncio.run(scenario())


# Endpoint query failures of a leader that is there but cannot answer now.
TRANSIENT_ENDPOINT = {
    "grpc unavailable": _rpc_error(grpc.StatusCode.UNAVAILABLE),
    "grpc deadline": _rpc_error(grpc.StatusCode.DEADLINE_EXCEEDED),
    "not listening yet": BrokerNotAvailableError("its replica fetch listener is not listening"),
}


@pytest.mark.parametrize("case", TRANSIENT_ENDPOINT)
def test_an_endpoint_query_that_fails_for_now_is_raised_not_unavailable(case: str) -> None:
    error = TRANSIENT_ENDPOINT[case]

    async def scenario() -> None:
        channels = FramedFetchChannels(_Endpoint(error))  # type: ignore[arg-type]
        with pytest.raises(type(error)) as raised:
            await channels.fetch("127.0.0.1:1", REQUEST, timeout_ms=5000)
        assert raised.value is error

    asyncio.run(scenario())


# --- the fetcher's fallback to gRPC -----------------------------------------------------------

TP = TopicPartition("t", 0)
FAST = {
    **READ_DEFAULTS,
    "bootstrap.servers": "127.0.0.1:1",  # never dialled: the fetches go to the fakes
    "fetch.max.wait.ms": "0",
    "request.timeout.ms": "500",
}


def _answer(records: bytes) -> bytes:
    message = pb.FetchResponse()
    partition = message.topics.add(topic=TP.topic).partitions.add(partition=TP.partition)
    partition.high_watermark = 10
    partition.records = records
    return bytes(message.SerializeToString())


class _Grpc:
    """`RawFetchChannels` answering every fetch over "gRPC" with records b"grpc"."""

    def __init__(self) -> None:
        self.fetches = 0

    async def fetch(self, address: str, request: m.FetchRequest, *, timeout_ms: int) -> bytes:
        self.fetches += 1
        return _answer(b"grpc")

    async def close(self) -> None:
        pass


class _Fetcher:
    """A PartitionFetcher whose leader is a scripted framed listener (answering records
    b"framed" unless scripted otherwise) behind `endpoint`, and whose gRPC is `_Grpc`, on a
    clock the test moves."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, scripts: tuple[Script, ...] = ()) -> None:
        self.now = 1_000_000
        monkeypatch.setattr(partition_fetcher, "monotonic_ms", lambda: self.now)
        self.fetcher = PartitionFetcher(TP, FAST)
        scripted = iter(scripts)

        def script(sequence: int) -> list[bytes]:
            return next(scripted, lambda s: [_frame(s, _answer(b"framed"))])(sequence)

        self.server, self.port = self.fetcher._loop.run(
            _listener(script, []), timeout_s=10, what="listen"
        )
        self.address = f"127.0.0.1:{self.port}"
        self.endpoint = _Endpoint(self.port)
        self.grpc = _Grpc()
        self.fetcher._framed = FramedFetchChannels(self.endpoint)  # type: ignore[arg-type]
        self.fetcher._raw = self.grpc  # type: ignore[assignment]

    def ask(self, epoch: int = 1) -> bytes | None:
        request = m.FetchRequest(
            (m.FetchPartition(TP.topic, TP.partition, 0, 1024, current_leader_epoch=epoch),),
            max_wait_ms=0,
        )
        answer = self.fetcher._loop.run(
            self.fetcher._ask(1, self.address, request), timeout_s=10, what="ask"
        )
        return None if answer is None else bytes(answer.records)

    def close(self) -> None:
        self.fetcher._loop.run(self._stop(), timeout_s=10, what="stop")
        self.fetcher.close()

    async def _stop(self) -> None:
        self.server.close()


@pytest.fixture
def leader(monkeypatch: pytest.MonkeyPatch) -> Any:
    made: list[_Fetcher] = []

    def make(scripts: tuple[Script, ...] = ()) -> _Fetcher:
        made.append(_Fetcher(monkeypatch, scripts))
        return made[-1]

    yield make
    for fetcher in made:
        fetcher.close()


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


@pytest.mark.parametrize("case", UNAVAILABLE)
def test_a_fallback_to_grpc_is_said_and_the_framed_path_tried_again_after_a_delay(
    case: str, leader: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="replog.spark")
    f = leader()
    f.endpoint.port = _endpoint_answer(UNAVAILABLE[case][0])
    assert f.ask() == b"grpc"
    [said] = _warnings(caplog)
    assert UNAVAILABLE[case][1] in said and said.endswith("; reading from it over gRPC")
    f.endpoint.port = f.port  # the framed path is back (a broker upgraded, a port opened)
    f.now += FRAMED_RETRY_MS - 1
    asked = f.endpoint.asked
    assert f.ask() == b"grpc"  # within the delay: gRPC, the endpoint not asked again
    assert f.endpoint.asked == asked and f.grpc.fetches == 2 and len(_warnings(caplog)) == 1
    f.now += 1
    assert f.ask() == b"framed" and f.grpc.fetches == 2
    assert not f.fetcher._grpc_only


def test_a_new_leader_epoch_tries_the_framed_path_again(leader: Any) -> None:
    f = leader()
    f.endpoint.port = _rpc_error(grpc.StatusCode.UNIMPLEMENTED)
    assert f.ask(epoch=1) == b"grpc"
    f.endpoint.port = f.port
    assert f.ask(epoch=1) == b"grpc"
    assert f.ask(epoch=2) == b"framed" and f.grpc.fetches == 2


# A leader there but failing for now, at the endpoint query or on the connection: (what the
# endpoint answers, the listener's script of the first fetch).
TRANSIENT = {
    **{case: (error, None) for case, error in TRANSIENT_ENDPOINT.items()},
    # The header promises 100 bytes; 10 come, then the listener closes the connection.
    "reset mid-answer": (None, lambda s: [_frame(s, bytes(100))[:18], b""]),
    "timeout": (None, lambda s: [_frame(s, bytes(100))[:18]]),  # then silence
}


# What each transient failure is said as.
TRANSIENT_SAID = {
    "grpc unavailable": "unreachable during Fetch: said so",
    "grpc deadline": "did not answer Fetch in time: said so",
    "not listening yet": "its replica fetch listener is not listening",
    "reset mid-answer": "closed the connection with 10 bytes of an answer read",
    "timeout": "sent no fetch answer on its framed fetch connection within 500 ms",
}


@pytest.mark.parametrize("case", TRANSIENT)
def test_a_transient_failure_is_a_retried_fetch_not_a_fallback(
    case: str, leader: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="replog.spark")
    error, script = TRANSIENT[case]
    f = leader(() if script is None else (script, script))
    distrusted: list[str] = []
    monkeypatch.setattr(f.fetcher._metadata, "distrust", distrusted.append)
    if error is not None:
        f.endpoint.port = error
    assert f.ask() is None  # a failed fetch: the caller asks again (new metadata, backoff)
    assert f.ask() is None
    assert not f.fetcher._grpc_only and f.grpc.fetches == 0
    # Said once, naming the leader and why; kept for the task's timeout; the next metadata is
    # asked of another broker first (it may be a leader cut off from the cluster).
    said = f"fetch of t-0 from broker 1 at {f.address} failed: "
    assert _warnings(caplog) == [f.fetcher.last_failure + "; asking again"]
    assert f.fetcher.last_failure.startswith(said)
    assert TRANSIENT_SAID[case] in f.fetcher.last_failure
    assert distrusted == [f.address, f.address]
    f.endpoint.port = f.port
    assert f.ask() == b"framed" and f.grpc.fetches == 0
    assert f.fetcher.last_failure is None


def test_an_answer_that_is_not_a_fetch_response_names_the_leader_and_partition(
    leader: Any,
) -> None:
    f = leader((lambda s: [_frame(s, b"\x0a\x05ab")],))  # topics: 5 bytes said, 2 there
    with pytest.raises(
        MalformedFetchAnswerError,
        match=rf"broker 1 at {f.address} answered the fetch of t-0 at offset 0 with bytes "
        r"that are not a FetchResponse: FetchResponse: field 1 \(topics\) at byte 0 says 5",
    ):
        f.ask()


def test_a_task_that_gets_no_answer_says_what_it_waited_for(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="replog.spark")
    serving = LoopThread("a leader that never answers")
    # Four bytes of a header, then silence: every fetch times out.
    server, port = serving.run(
        _listener(lambda s: [_frame(s, b"")[:4]], []), timeout_s=10, what="listen"
    )
    address = f"127.0.0.1:{port}"
    fetcher = PartitionFetcher(TP, {**FAST, "request.timeout.ms": "200"})

    async def leader(deadline_ms: int) -> tuple[int, str, int]:
        return 1, address, 1

    monkeypatch.setattr(fetcher, "_leader", leader)
    fetcher._framed = FramedFetchChannels(_Endpoint(port))  # type: ignore[arg-type]
    monkeypatch.setattr(range_reader, "PartitionFetcher", lambda tp, settings, sessions: fetcher)
    options = parse_options(
        {
            "bootstrap.servers": "127.0.0.1:1",
            "subscribe": "t",
            "pollTimeoutMs": "1000",
            "kafka.request.timeout.ms": "200",
            "kafka.fetch.max.wait.ms": "0",
        },
        Mode.BATCH,
    )
    try:
        with pytest.raises(ReadTimeoutError) as raised:
            list(range_reader.read_range(OffsetRange("t", 0, 0, 10), options, SCHEMA))
    finally:
        serving.run(_closed(server), timeout_s=10, what="stop")
        serving.close()
    assert str(raised.value).startswith(
        "reading t-0 offsets [0, 10) made no progress within pollTimeoutMs=1000: reached "
        f"offset 0; the latest fetch attempt: fetch of t-0 from broker 1 at {address} failed: "
    )
    assert "sent no fetch answer on its framed fetch connection within 200 ms" in str(raised.value)
    # Several attempts, said once.
    assert len(_warnings(caplog)) == 1


async def _closed(server: asyncio.Server) -> None:
    server.close()


def _first_answer(fetcher: PartitionFetcher) -> Any:
    deadline = monotonic_ms() + 20_000
    answer = fetcher.wait(fetcher.submit(0, deadline), deadline)
    assert answer is not None
    return answer


def test_a_replog_broker_without_a_framed_path_is_read_over_grpc(
    replog_cluster: ClientCluster,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """replog's brokers serve no framed fetch listener (followers fetch over ReplicaFetch):
    their ReplicaFetchEndpoint is UNIMPLEMENTED, so the fetcher reads over gRPC, says so
    once, and gets every record."""
    topic = "framed-fetch"
    replog_cluster.create_topic(topic, 1, 3)
    with replog_cluster.producer(acks="all") as producer:
        for i in range(500):
            producer.send(topic, b"v%d" % i, b"k%d" % (i % 7), partition=0)
        producer.flush()
    settings = {**READ_DEFAULTS, "bootstrap.servers": replog_cluster.bootstrap}
    tp = TopicPartition(topic, 0)
    with (
        caplog.at_level(logging.WARNING, logger="replog.spark"),
        PartitionFetcher(tp, settings) as fetcher,
    ):
        over_grpc = _first_answer(fetcher)
        assert fetcher._grpc_only and not fetcher._framed._open
    (said,) = [r.getMessage() for r in caplog.records]
    assert "ReplicaFetchEndpoint is UNIMPLEMENTED" in said and said.endswith("over gRPC")
    assert over_grpc.high_watermark == 500 and len(over_grpc.records) > 500


def test_a_range_read_across_a_leader_killed_and_restarted_gets_every_record_once(
    replog_cluster: ClientCluster,
) -> None:
    """A task reading while its leader is killed mid-range (its connection lost, maybe
    mid-answer) and restarted at the same address: the fetcher asks
    the new leader, then (once the old one is back) whoever leads, and the range comes out
    exactly, no record dropped or repeated."""
    topic = "framed-failover"
    replog_cluster.create_topic(topic, 1, 3)
    count = 3000
    with replog_cluster.producer(acks="all", linger_ms=0, batch_size=2000) as producer:
        for i in range(count):
            producer.send(topic, b"v%05d" % i + b"." * 100, partition=0)
        producer.flush()
    options = parse_options(
        {
            "bootstrap.servers": replog_cluster.bootstrap,
            "subscribe": topic,
            "pollTimeoutMs": "60000",
            "kafka.max.partition.fetch.bytes": "20000",  # many fetches: about 150 records each
        },
        Mode.BATCH,
    )
    with Admin(bootstrap_servers=replog_cluster.bootstrap) as admin:
        leader = admin.describe_topics([topic])[topic].partitions[0].leader
    offsets: list[int] = []
    try:
        for i, got in enumerate(
            range_reader.read_range(OffsetRange(topic, 0, 0, count), options, SCHEMA)
        ):
            offsets += got.column("offset").to_pylist()
            if i == 2:
                replog_cluster.loopback.kill(leader)
            elif i == 6:
                replog_cluster.loopback.restart(leader)
    finally:
        if leader not in replog_cluster.loopback.running():
            replog_cluster.loopback.restart(leader)
        replog_cluster.wait_healthy([topic], timeout_s=60)
    assert offsets == list(range(count))


def _sockets() -> set[str]:
    """This process's open sockets ("socket:[inode]")."""
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # an fd closed meanwhile
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith("socket:"):
                found.add(target)
    return found


def test_a_worker_keeps_one_session_for_its_next_task_and_stopped_or_failed_tasks_close_theirs(
    replog_cluster: ClientCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker running task after task (PySpark reuses its Python workers) keeps the session of
    a task that read its whole range (metadata and gRPC connections, a loop thread) and the
    next task uses it; a task abandoned by Spark
    after a batch, or failed (data loss here), closes its own. Closing the pool (the worker's
    exit) leaves no connection or thread."""
    topic = "framed-task-ends"
    replog_cluster.create_topic(topic, 1, 3)
    with replog_cluster.producer(acks="all", linger_ms=0, batch_size=2000) as producer:
        for i in range(600):
            producer.send(topic, b"v%05d" % i + b"." * 100, partition=0)
        producer.flush()
    with Admin(bootstrap_servers=replog_cluster.bootstrap) as admin:
        admin.delete_records({TopicPartition(topic, 0): 100})
    options = parse_options(
        {
            "bootstrap.servers": replog_cluster.bootstrap,
            "subscribe": topic,
            "kafka.max.partition.fetch.bytes": "20000",
        },
        Mode.BATCH,
    )
    pool: SessionPool = SessionPool()
    monkeypatch.setattr(range_reader, "worker_sessions", lambda: pool)

    others = set(threading.enumerate())  # sessions other tests left in the worker's own pool

    def fetch_threads() -> list[str]:
        return [
            t.name
            for t in threading.enumerate()
            if t.name == "replog-spark-fetch" and t not in others
        ]

    def kept_sessions() -> list[Any]:
        return [s for _, s, _ in pool._idle]

    before = _sockets()
    whole = range_reader.read_range(OffsetRange(topic, 0, 100, 600), options, SCHEMA)
    assert sum(b.num_rows for b in whole) == 500
    assert pool.kept() == 1 and len(fetch_threads()) == 1
    (session,) = kept_sessions()
    for _ in range(3):
        whole = range_reader.read_range(OffsetRange(topic, 0, 100, 600), options, SCHEMA)
        assert sum(b.num_rows for b in whole) == 500
        assert kept_sessions() == [session] and len(fetch_threads()) == 1
        stopped = range_reader.read_range(OffsetRange(topic, 0, 100, 600), options, SCHEMA)
        assert next(stopped).num_rows > 0 and pool.kept() == 0  # it took the kept session
        del stopped  # Spark drops the iterator: the generator is closed, its session too
        assert pool.kept() == 0 and fetch_threads() == []
        with pytest.raises(DataLossError, match=r"offsets \[0, 100\)"):
            list(range_reader.read_range(OffsetRange(topic, 0, 0, 600), options, SCHEMA))
        assert pool.kept() == 0 and fetch_threads() == []
        whole = range_reader.read_range(OffsetRange(topic, 0, 100, 600), options, SCHEMA)
        assert sum(b.num_rows for b in whole) == 500
        (session,) = kept_sessions()
    pool.close()
    gc.collect()
    assert fetch_threads() == []
    assert _sockets() <= before
