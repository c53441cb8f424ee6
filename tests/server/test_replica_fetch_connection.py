"""Replica fetch connections end to end in one process (`replica_fetch_client` against
`replica_fetch_server` on 127.0.0.1:0): answers in a session with the record bytes as sent,
refusals as typed Kafka errors that end the connection, bytes that break the format (either
way) as typed errors, answers split across segments, a second answer to one request, a leader
that closes mid-answer, a lost leader redialled, a leader that never answers, a follower that
does not read its answers, and one that does not read them when the leader stops."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import grpc
import pytest
import pytest_asyncio

from replog.errors import (
    InvalidFetchSessionEpochError,
    InvalidRequestError,
    MalformedResponseError,
    NetworkError,
    RequestTimedOutError,
)
from replog.pb import broker_pb2 as pb
from replog.record import build_batch
from replog.replication import messages as m
from replog.replication.fetch_session import LeaderFetchSession
from replog.server import replica_fetch_client, replica_fetch_server
from replog.server.repeat_reads import RepeatReads
from replog.server.replica_fetch_client import ReplicaFetchClient
from replog.server.replica_fetch_server import ReplicaFetchListener
from replog.server.tolerant_service import Refused
from replog.wire import broker_codec as codec
from replog.wire import framed_wire
from replog.wire import replica_fetch_wire as wire
from replog.wire.broker_client import BrokerClient
from tests.eventually import eventually

BATCH = build_batch([(0, b"k", b"v" * 100, ())])
REQUEST = m.FetchRequest(
    (m.FetchPartition("t", 0, fetch_offset=0),), replica_id=2, replica_epoch=7, max_wait_ms=0
)


@dataclass
class Leader:
    """A replica fetch listener whose fetches `answer` serves (default: BATCH for each
    partition asked), recording the requests."""

    listener: ReplicaFetchListener = field(init=False)
    answer: Callable[[m.FetchRequest], Awaitable[m.FetchResponse]] | None = None
    requests: list[pb.FetchRequest] = field(default_factory=list)
    sessions: list[LeaderFetchSession] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.listener = ReplicaFetchListener(1, self.serve, 1 << 20)

    async def serve(
        self, request: pb.FetchRequest, session: LeaderFetchSession, repeats: RepeatReads
    ) -> m.FetchResponse:
        self.requests.append(request)
        if not any(s is session for s in self.sessions):
            self.sessions.append(session)
        decoded = codec.fetch_request_from_proto(request)
        if self.answer is not None:
            return await self.answer(decoded)
        return m.FetchResponse(
            tuple(
                m.FetchPartitionResult(p.topic, p.partition, high_watermark=1, records=BATCH)
                for p in decoded.partitions
            )
        )

    @property
    def port(self) -> int:
        assert self.listener.port is not None
        return self.listener.port


@pytest_asyncio.fixture
async def leader() -> AsyncIterator[Leader]:
    leader = Leader()
    await leader.listener.start("127.0.0.1", 0)
    try:
        yield leader
    finally:
        leader.listener.close()


def client_of(port: int | Callable[[], int], request_timeout_ms: int = 5000) -> ReplicaFetchClient:
    """A follower's client whose `ReplicaFetchEndpoint` answers `port` (no gRPC involved)."""
    client = BrokerClient("127.0.0.1:1", request_timeout_ms=request_timeout_ms)

    async def endpoint() -> int:
        return port() if callable(port) else port

    client.replica_fetch_endpoint = endpoint  # type: ignore[method-assign]
    return ReplicaFetchClient(client, 1)


@contextlib.asynccontextmanager
async def fetching(
    port: int | Callable[[], int], **kwargs: int
) -> AsyncIterator[ReplicaFetchClient]:
    fetches = client_of(port, **kwargs)
    try:
        yield fetches
    finally:
        fetches.close()
        await fetches.client.close()


async def serving_raw(
    answer: Callable[[int], bytes],
) -> tuple[asyncio.Server, int]:
    """A listener that breaks the format: after the greeting and a request, it writes
    `answer(the request's sequence number)` and closes the connection."""

    async def run(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            await reader.readexactly(framed_wire.GREETING_BYTES)
            length, sequence = struct.unpack(">II", await reader.readexactly(8))
            await reader.readexactly(length - 4)
            writer.write(answer(sequence))
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(run, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


@pytest.mark.asyncio
async def test_fetches_share_one_connection_and_session_with_record_bytes_as_sent(
    leader: Leader,
) -> None:
    async with fetching(leader.port) as fetches:
        first = await fetches.fetch(REQUEST)
        second = await fetches.fetch(
            m.FetchRequest(
                (m.FetchPartition("t", 0, fetch_offset=1),), replica_id=2, replica_epoch=7
            )
        )
    assert [p.records for p in first.partitions] == [BATCH]
    assert [p.records for p in second.partitions] == [BATCH]
    assert len(leader.sessions) == 1
    # The first request in full, the next one incremental in the same session.
    assert [r.session_epoch for r in leader.requests] == [0, 1]


@pytest.mark.asyncio
async def test_a_first_answer_may_leave_partitions_out_as_a_bounded_round_does(
    leader: Leader,
) -> None:
    # A session's first answer is a bounded round too (`fetch_session`): a partition it leaves
    # out has nothing new yet, not a malformed answer.
    async def first_only(request: m.FetchRequest) -> m.FetchResponse:
        p = request.partitions[0]
        return m.FetchResponse(
            (m.FetchPartitionResult(p.topic, p.partition, high_watermark=1, records=BATCH),)
        )

    leader.answer = first_only
    two = m.FetchRequest(
        (m.FetchPartition("t", 0, fetch_offset=0), m.FetchPartition("t", 1, fetch_offset=0)),
        replica_id=2,
        replica_epoch=7,
        max_wait_ms=0,
    )
    async with fetching(leader.port) as fetches:
        answer = await fetches.fetch(two)
    assert [(p.partition, p.records) for p in answer.partitions] == [(0, BATCH)]
    assert [r.session_epoch for r in leader.requests] == [0]


@pytest.mark.asyncio
async def test_a_session_takes_a_bounded_number_of_new_partitions_per_request(
    leader: Leader, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A follower opening a session at tens of thousands of partitions encoded them all in one
    # loop turn, and its leader decoded and took them in one (`fetch_session` Rules): each
    # request now adds at most SESSION_ADDS_PER_REQUEST, the others wait, and a request that
    # leaves any waiting asks for an answer at once.
    monkeypatch.setattr(replica_fetch_client, "SESSION_ADDS_PER_REQUEST", 2)
    five = m.FetchRequest(
        tuple(m.FetchPartition("t", p, fetch_offset=0) for p in range(5)),
        replica_id=2,
        replica_epoch=7,
        max_wait_ms=500,
    )
    async with fetching(leader.port) as fetches:
        answers = [await fetches.fetch(five) for _ in range(3)]
    sent = [
        ([p.partition for t in r.topics for p in t.partitions], r.session_epoch, r.max_wait_ms)
        for r in leader.requests
    ]
    assert sent == [([0, 1], 0, 0), ([2, 3], 1, 0), ([4], 2, 500)]
    assert [[p.partition for p in a.partitions] for a in answers] == [[0, 1], [2, 3], [4]]


@pytest.mark.asyncio
async def test_a_refusal_is_its_kafka_error_and_the_next_fetch_opens_a_new_session(
    leader: Leader,
) -> None:
    refuse = True

    async def answer(request: m.FetchRequest) -> m.FetchResponse:
        if refuse:
            raise Refused(grpc.StatusCode.FAILED_PRECONDITION, "fetch session epoch 3, expects 1")
        return m.FetchResponse((m.FetchPartitionResult("t", 0, high_watermark=0),))

    leader.answer = answer
    async with fetching(leader.port) as fetches:
        with pytest.raises(InvalidFetchSessionEpochError) as refused:
            await fetches.fetch(REQUEST)
        assert str(refused.value) == (
            f"broker 1's replica fetch listener at 127.0.0.1:{leader.port} refused the fetch: "
            "FAILED_PRECONDITION: fetch session epoch 3, expects 1"
        )
        refuse = False
        await fetches.fetch(REQUEST)
    assert len(leader.sessions) == 2
    assert [r.session_epoch for r in leader.requests] == [0, 0]


@pytest.mark.asyncio
async def test_a_request_that_is_not_a_fetch_request_is_refused_as_invalid_request(
    leader: Leader,
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", leader.port)
    try:
        writer.write(wire.FORMAT.greeting(2) + framed_wire.frame(5, b"\xff" * 16))
        length, sequence = struct.unpack(">II", await reader.readexactly(8))
        payload = await reader.readexactly(length - 4)
        assert sequence == 5 | wire.REFUSAL_BIT
        error = wire.parse_refusal(payload, "broker 1")
        assert isinstance(error, InvalidRequestError)
        assert "the 16 request bytes are not a FetchRequest message" in str(error)
        assert await reader.read() == b""  # the connection ends after a refusal
    finally:
        writer.close()
    assert leader.requests == []


@pytest.mark.asyncio
async def test_a_fetch_naming_another_replica_than_the_greeting_is_refused(leader: Leader) -> None:
    request = codec.fetch_request_to_proto(REQUEST)  # replica 2
    reader, writer = await asyncio.open_connection("127.0.0.1", leader.port)
    try:
        writer.write(wire.FORMAT.greeting(3) + framed_wire.frame(1, request.SerializeToString()))
        length, sequence = struct.unpack(">II", await reader.readexactly(8))
        error = wire.parse_refusal(await reader.readexactly(length - 4), "broker 1")
        assert sequence == 1 | wire.REFUSAL_BIT
        assert isinstance(error, InvalidRequestError)
        assert "the fetch names replica 2, the connection's greeting broker 3" in str(error)
        assert await reader.read() == b""
    finally:
        writer.close()
    assert leader.requests == []


@pytest.mark.asyncio
async def test_a_connection_that_breaks_the_format_is_closed_and_the_others_go_on(
    leader: Leader, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "replog.server.fetcher")
    async with fetching(leader.port) as fetches:
        await fetches.fetch(REQUEST)
        for garbage in (
            b"GET / HTTP/1.1\r\n\r\n",  # not a replica fetch connection
            wire.FORMAT.greeting(2) + struct.pack(">II", 3, 1),  # a frame too short
            # 4 GiB announced: refused from its header, nothing of it buffered
            wire.FORMAT.greeting(2) + struct.pack(">II", 0xFFFF_FFFF, 1),
            b"RLRF\x01\x00\x00\x00\x02",  # a Raft fetch connection, at the wrong port
        ):
            reader, writer = await asyncio.open_connection("127.0.0.1", leader.port)
            writer.write(garbage)
            assert await reader.read() == b""
            writer.close()
        await fetches.fetch(REQUEST)  # the follower's own connection went on
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "not a replica fetch connection: it began with b'GET '" in warnings[0]
    assert "replica fetch frame of 3 bytes: must be 4 to" in warnings[1]
    assert "replica fetch frame of 4294967295 bytes: must be 4 to 1048580 bytes" in warnings[2]
    assert "expected b'RLRP'" in warnings[3]
    assert len(leader.sessions) == 1


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        # A frame of 3 bytes: no room for its sequence number.
        (lambda sequence: struct.pack(">II", 3, sequence), "replica fetch frame of 3 bytes"),
        # An answer larger than the format allows: refused from its header.
        (
            lambda sequence: struct.pack(">II", 0xFFFF_FFFF, sequence),
            "replica fetch frame of 4294967295 bytes: must be 4 to",
        ),
        (lambda sequence: framed_wire.frame(99, b""), "answered request 99, never sent"),
        (
            lambda sequence: framed_wire.frame(sequence | wire.REFUSAL_BIT, b"\x00"),
            "refusal of 1 bytes: too short for its error code",
        ),
    ],
)
@pytest.mark.asyncio
async def test_an_answer_that_breaks_the_format_is_a_malformed_response(
    answer: Callable[[int], bytes], problem: str
) -> None:
    server, port = await serving_raw(answer)
    try:
        async with fetching(port) as fetches:
            with pytest.raises(MalformedResponseError, match=problem) as malformed:
                await fetches.fetch(REQUEST)
    finally:
        server.close()
    assert str(malformed.value).startswith(f"broker 1's replica fetch listener at 127.0.0.1:{port}")


@pytest.mark.asyncio
async def test_a_leader_closing_mid_answer_is_a_network_error_saying_how_far_it_got() -> None:
    # 10 bytes of the 100 the header promises, then the end.
    server, port = await serving_raw(lambda sequence: struct.pack(">II", 104, sequence) + b"x" * 10)
    try:
        async with fetching(port) as fetches:
            with pytest.raises(NetworkError) as lost:
                await fetches.fetch(REQUEST)
    finally:
        server.close()
    assert str(lost.value) == (
        f"broker 1's replica fetch listener at 127.0.0.1:{port} closed the connection with "
        "18 bytes of an answer read"
    )


@pytest.mark.asyncio
async def test_a_leader_that_went_away_is_redialled_once_it_is_back(leader: Leader) -> None:
    port = leader.port
    async with fetching(lambda: port) as fetches:
        await fetches.fetch(REQUEST)
        leader.listener.close()
        await asyncio.sleep(0.05)  # the follower sees its idle connection closed
        # It dials again at once (nothing was sent on the lost connection), and says what it
        # waits for.
        with pytest.raises(NetworkError) as refused:
            await fetches.fetch(REQUEST)
        assert str(refused.value).startswith(
            f"cannot connect to broker 1's replica fetch listener at 127.0.0.1:{port} "
            "(replica.fetch.port): "
        )
        await leader.listener.start("127.0.0.1", port)
        answer = await fetches.fetch(REQUEST)
    assert [p.records for p in answer.partitions] == [BATCH]
    assert len(leader.sessions) == 2  # a new connection, a new session
    assert leader.requests[-1].session_epoch == 0


@pytest.mark.asyncio
async def test_a_leader_that_never_answers_times_out_and_the_connection_is_dropped(
    leader: Leader,
) -> None:
    async def never(request: m.FetchRequest) -> m.FetchResponse:
        await asyncio.sleep(3600)
        raise AssertionError

    leader.answer = never
    async with fetching(leader.port, request_timeout_ms=100) as fetches:
        with pytest.raises(
            RequestTimedOutError,
            match=re.escape("broker 1 at 127.0.0.1:1 sent no replica fetch answer within 100 ms"),
        ):
            await fetches.fetch(REQUEST)
        leader.answer = None
        await fetches.fetch(REQUEST)
    assert len(leader.sessions) == 2


async def unread_answers(
    leader: Leader, requests: int
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A follower's connection that sends `requests` fetches at once, each answered with a
    4 MiB batch, and reads nothing."""
    big = build_batch([(0, None, b"x" * (4 << 20), ())])

    async def large(request: m.FetchRequest) -> m.FetchResponse:
        return m.FetchResponse((m.FetchPartitionResult("t", 0, high_watermark=1, records=big),))

    leader.answer = large
    request = codec.fetch_request_to_proto(REQUEST).SerializeToString()
    reader, writer = await asyncio.open_connection("127.0.0.1", leader.port)
    writer.write(wire.FORMAT.greeting(2))
    for sequence in range(1, requests + 1):
        writer.write(framed_wire.frame(sequence, request))
    return reader, writer


@pytest.mark.asyncio
async def test_a_follower_that_does_not_read_its_answers_is_not_read_from(leader: Leader) -> None:
    big_bytes = 4 << 20
    reader, writer = await unread_answers(leader, 39)
    try:
        await eventually(lambda: leader.requests, "the first request read")
        await asyncio.sleep(0.5)
        # Answers pile up unread: the leader stops reading once they fill its write buffer.
        assert len(leader.requests) < 39
        read = len(leader.requests)
        await reader.readexactly(3 * big_bytes)  # answers read: it reads requests again
        await eventually(lambda: len(leader.requests) > read, "requests read again")
    finally:
        writer.close()


async def serving_frames(
    answer: Callable[[int], bytes], *, bytewise: bool
) -> tuple[asyncio.Server, int, list[asyncio.StreamWriter]]:
    """A listener that answers every request of a connection with `answer(its sequence
    number)` (`bytewise`: a byte per write); the list holds the connections it accepted."""
    accepted: list[asyncio.StreamWriter] = []

    async def run(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            await reader.readexactly(framed_wire.GREETING_BYTES)
            while True:
                length, sequence = struct.unpack(">II", await reader.readexactly(8))
                await reader.readexactly(length - 4)
                data = answer(sequence)
                for start in range(0, len(data), 1 if bytewise else len(data)):
                    writer.write(data[start : start + 1 if bytewise else len(data)])
                    await writer.drain()

    server = await asyncio.start_server(run, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1], accepted


async def stop_serving(server: asyncio.Server, accepted: list[asyncio.StreamWriter]) -> None:
    server.close()
    for writer in accepted:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


def _answer_bytes() -> bytes:
    response = m.FetchResponse((m.FetchPartitionResult("t", 0, high_watermark=1, records=BATCH),))
    return bytes(codec.fetch_response_to_wire(response))


@pytest.mark.asyncio
async def test_answers_arriving_a_byte_at_a_time_are_put_together() -> None:
    server, port, accepted = await serving_frames(
        lambda s: framed_wire.frame(s, _answer_bytes()), bytewise=True
    )
    try:
        async with fetching(port) as fetches:
            answers = [await fetches.fetch(REQUEST) for _ in range(2)]
    finally:
        await stop_serving(server, accepted)
    assert [[p.records for p in a.partitions] for a in answers] == [[BATCH], [BATCH]]
    assert len(accepted) == 1


@pytest.mark.asyncio
async def test_a_second_answer_to_one_request_ends_the_connection_and_its_session() -> None:
    # Both answers in one write: they arrive in one read, before the fetch has taken the first.
    def twice(sequence: int) -> bytes:
        return framed_wire.frame(sequence, _answer_bytes()) * 2

    server, port, accepted = await serving_frames(twice, bytewise=False)
    try:
        async with fetching(port) as fetches:
            first = await fetches.fetch(REQUEST)
            connection = fetches._connection
            assert connection is not None
            await eventually(lambda: connection.failed, "the duplicate arrived: failed")
            second = await fetches.fetch(REQUEST)  # on a new connection, a new session
    finally:
        await stop_serving(server, accepted)
    assert [p.records for p in first.partitions] == [BATCH]
    assert [p.records for p in second.partitions] == [BATCH]
    assert len(accepted) == 2


@pytest.mark.asyncio
async def test_a_stopping_leader_ends_a_connection_whose_follower_reads_nothing(
    leader: Leader,
) -> None:
    _, writer = await unread_answers(leader, 4)
    try:
        await eventually(lambda: leader.listener._connections, "the connection accepted")
        await asyncio.sleep(0.3)  # its answers fill the buffers
        connections = list(leader.listener._connections)
        assert len(connections) == 1
        serving = connections[0]._serving
        assert serving is not None
        leader.listener.close()
        # Gone, its answers unread, and nothing of it left running.
        await eventually(
            lambda: not leader.listener._connections and serving.done(), "the connection ended"
        )
    finally:
        writer.close()


@pytest.mark.asyncio
async def test_a_consumers_connection_gets_the_larger_send_buffer(leader: Leader) -> None:
    with socket.socket() as scratch:  # what the kernel makes of the request here
        scratch.setsockopt(
            socket.SOL_SOCKET, socket.SO_SNDBUF, replica_fetch_server.CONSUMER_SEND_BUFFER_BYTES
        )
        larger = scratch.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
    buffers = {}
    writers = []
    try:
        for caller in (m.CONSUMER_REPLICA_ID, 2):
            _, writer = await asyncio.open_connection("127.0.0.1", leader.port)
            writers.append(writer)
            writer.write(wire.FORMAT.greeting(caller))
            await writer.drain()
            for _ in range(100):  # until the leader read the greeting
                served = [c for c in leader.listener._connections if c._reader.caller_id == caller]
                if served:
                    break
                await asyncio.sleep(0.01)
            (connection,) = served
            sock = connection._socket.get_extra_info("socket")  # type: ignore[union-attr]
            buffers[caller] = sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
    finally:
        for writer in writers:
            writer.close()
    assert buffers[m.CONSUMER_REPLICA_ID] == larger
    if larger > 4 * 1024 * 1024:  # above what the kernel grows a buffer to by default
        assert buffers[2] < larger  # a follower's: the kernel's default
