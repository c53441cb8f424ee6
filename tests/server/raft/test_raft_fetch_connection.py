"""A Fetch connection and a Fetch listener over real loopback sockets: answers reach the request
they answer, and every way a connection can end reports each outstanding request once, with the
right "unreachable" flag for the core's rules."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, cast

import pytest
import pytest_asyncio

from replog.pb import raft_pb2 as pb
from replog.quorum.raft.config import RaftConfig, VoterAddress
from replog.quorum.raft.messages import (
    ErrorCode,
    FetchRequest,
    FetchResponse,
    Message,
    RaftResponse,
)
from replog.server.raft import raft_fetch_wire as wire
from replog.server.raft.raft_fetch_client import EndpointUnknown, FetchConnection
from replog.server.raft.raft_fetch_server import FetchListener, Reply
from replog.server.raft.raft_transport import RaftTransport
from replog.testing import LoopTasks
from replog.wire import framed_wire
from tests.ipv6_loopback import needs_ipv6


@dataclass
class Peer:
    """The serving side: what arrived, and the means to answer it."""

    listener: FetchListener
    accepted: list[tuple[int, pb.FetchRequest, Reply]] = field(default_factory=list)
    forgotten: list[int] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def port(self) -> int:
        assert self.listener.port is not None
        return self.listener.port

    def answer(self, index: int, high_watermark: int) -> None:
        _, request, reply = self.accepted[index]
        reply(
            pb.FetchResponse(
                quorum_epoch=request.quorum_epoch,
                leader_id=1,
                fetch_offset=request.fetch_offset,
                last_fetched_epoch=request.last_fetched_epoch,
                high_watermark=high_watermark,
                records=b"batch",
            ).SerializeToString()
        )

    async def wait_for(self, count: int) -> None:
        while len(self.accepted) < count:
            self.arrived.clear()
            await asyncio.wait_for(self.arrived.wait(), 5)


@dataclass
class Fetcher:
    """The fetching side: answers and failures as the transport would hand them on."""

    answers: list[FetchResponse] = field(default_factory=list)
    failures: list[tuple[int, bool]] = field(default_factory=list)
    finished: list[bool] = field(default_factory=list)
    event: asyncio.Event = field(default_factory=asyncio.Event)

    def connect(
        self, port: int, *, timeout_ms: int = 2000, lookup_error: Exception | None = None
    ) -> FetchConnection:
        async def lookup() -> tuple[str, int]:
            if lookup_error is not None:
                raise lookup_error
            return "127.0.0.1", port

        def deliver(request: FetchRequest, response: RaftResponse) -> None:
            assert isinstance(response, FetchResponse)
            self.answers.append(response)
            self.event.set()

        def fail(request: FetchRequest, unreachable: bool) -> None:
            self.failures.append((request.correlation_id, unreachable))
            self.event.set()

        def finished(connection: FetchConnection, unreachable: bool) -> None:
            self.finished.append(unreachable)

        return FetchConnection(1, 2, lookup, timeout_ms, deliver, fail, finished, tasks=LoopTasks())

    async def wait(self, answers: int = 0, failures: int = 0) -> None:
        while len(self.answers) < answers or len(self.failures) < failures:
            self.event.clear()
            await asyncio.wait_for(self.event.wait(), 5)


def fetch(correlation_id: int, fetch_offset: int = 5, max_wait_ms: int = 0) -> FetchRequest:
    return FetchRequest(
        correlation_id=correlation_id,
        replica_id=2,
        quorum_epoch=3,
        fetch_offset=fetch_offset,
        last_fetched_epoch=2,
        high_watermark=4,
        max_wait_ms=max_wait_ms,
        max_bytes=1 << 20,
    )


@pytest_asyncio.fixture
async def peer() -> AsyncIterator[Peer]:
    holder: list[Peer] = []

    def accept(caller_id: int, request: pb.FetchRequest, reply: Reply) -> int:
        holder[0].accepted.append((caller_id, request, reply))
        holder[0].arrived.set()
        return len(holder[0].accepted)

    def forget(handle: int) -> None:
        holder[0].forgotten.append(handle)

    listener = FetchListener(accept, forget)
    holder.append(Peer(listener))
    await listener.start("127.0.0.1", 0)
    yield holder[0]
    await listener.close()


@pytest.mark.asyncio
async def test_an_answer_reaches_the_request_it_answers(peer: Peer) -> None:
    fetcher = Fetcher()
    connection = fetcher.connect(peer.port)
    connection.send(fetch(41, fetch_offset=5))  # queued while the connection opens
    await peer.wait_for(1)
    caller_id, request, _ = peer.accepted[0]
    assert caller_id == 2  # from the greeting
    assert (request.fetch_offset, request.quorum_epoch, request.high_watermark) == (5, 3, 4)
    peer.answer(0, high_watermark=5)
    await fetcher.wait(answers=1)
    answer = fetcher.answers[0]
    assert answer.correlation_id == 41  # the core's own id, which never crossed the wire
    assert (answer.error, answer.high_watermark, answer.records) == (ErrorCode.NONE, 5, b"batch")
    assert not connection.finished and fetcher.failures == []
    connection.close()


@pytest.mark.asyncio
async def test_answers_in_another_order_still_reach_their_requests(peer: Peer) -> None:
    fetcher = Fetcher()
    connection = fetcher.connect(peer.port)
    connection.send(fetch(1, fetch_offset=10))
    connection.send(fetch(2, fetch_offset=20))
    await peer.wait_for(2)
    peer.answer(1, high_watermark=20)
    peer.answer(0, high_watermark=10)
    await fetcher.wait(answers=2)
    assert [(a.correlation_id, a.fetch_offset) for a in fetcher.answers] == [(2, 20), (1, 10)]
    connection.close()


@pytest.mark.asyncio
async def test_a_request_past_its_deadline_fails_plainly_and_ends_the_connection(
    peer: Peer,
) -> None:
    fetcher = Fetcher()
    connection = fetcher.connect(peer.port, timeout_ms=50)
    connection.send(fetch(7, max_wait_ms=20))  # never answered
    await fetcher.wait(failures=1)
    assert fetcher.failures == [(7, False)]  # a deadline is not "unreachable"
    assert fetcher.finished == [False] and connection.finished


@pytest.mark.asyncio
async def test_a_peer_going_away_fails_what_is_outstanding_as_unreachable(peer: Peer) -> None:
    fetcher = Fetcher()
    connection = fetcher.connect(peer.port)
    connection.send(fetch(1))
    connection.send(fetch(2))
    await peer.wait_for(2)
    peer.answer(0, high_watermark=5)
    await fetcher.wait(answers=1)
    await peer.listener.close()  # the node shuts down: its connections close
    await fetcher.wait(failures=1)
    assert fetcher.failures == [(2, True)]
    assert fetcher.finished == [True] and connection.finished
    assert peer.forgotten == [2]  # the unanswered request is dropped on the serving side


@pytest.mark.asyncio
async def test_a_refused_connection_and_an_unknown_endpoint_are_reported(peer: Peer) -> None:
    closed = FetchListener(lambda *args: 0, lambda handle: None)
    port = await closed.start("127.0.0.1", 0)
    await closed.close()
    refused = Fetcher()
    refused.connect(port).send(fetch(1))
    await refused.wait(failures=1)
    assert refused.failures == [(1, True)]

    timed_out = Fetcher()
    error = EndpointUnknown("node 1 did not say: DEADLINE_EXCEEDED", unreachable=False)
    timed_out.connect(0, lookup_error=error).send(fetch(2))
    await timed_out.wait(failures=1)
    assert timed_out.failures == [(2, False)]


@pytest.mark.asyncio
async def test_an_unforeseen_lookup_error_fails_the_requests_before_their_deadline(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fetcher = Fetcher()
    with caplog.at_level(logging.WARNING, logger="replog.server.raft"):
        # A deadline far beyond `wait`'s: only the failure to open can report the request.
        connection = fetcher.connect(0, timeout_ms=600_000, lookup_error=RuntimeError("a bug"))
        connection.send(fetch(3))
        await fetcher.wait(failures=1)
    assert fetcher.failures == [(3, False)] and fetcher.finished == [False]
    assert "could not open: RuntimeError('a bug')" in caplog.text


@pytest.mark.asyncio
async def test_a_closed_transport_opens_no_fetch_connection() -> None:
    voters = (VoterAddress(1, "127.0.0.1", 1), VoterAddress(2, "127.0.0.1", 2))
    transport = RaftTransport(
        1, RaftConfig(voters=voters), lambda m: None, lambda f: None, tasks=LoopTasks()
    )
    await transport.close()
    tasks = len(asyncio.all_tasks())
    transport.send(Message(1, 2, fetch(1)))  # the core's last Ready, after the node closed it
    assert len(asyncio.all_tasks()) == tasks  # no connection began opening, nothing leaks


@pytest.mark.asyncio
async def test_an_answer_to_nothing_ends_the_connection(
    peer: Peer, caplog: pytest.LogCaptureFixture
) -> None:
    fetcher = Fetcher()
    connection = fetcher.connect(peer.port)
    connection.send(fetch(1))
    connection.send(fetch(2))
    await peer.wait_for(2)
    with caplog.at_level(logging.WARNING, logger="replog.server.raft"):
        peer.answer(0, high_watermark=5)
        peer.answer(0, high_watermark=5)  # the same sequence number again
        await fetcher.wait(answers=1, failures=1)
    assert fetcher.failures == [(2, False)]
    assert connection.finished
    assert "an answer to request 1, never sent" in caplog.text


@pytest.mark.asyncio
async def test_garbage_ends_only_its_own_connection(
    peer: Peer, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="replog.server.raft"):
        reader, writer = await asyncio.open_connection("127.0.0.1", peer.port)
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert await asyncio.wait_for(reader.read(), 5) == b""  # closed by the listener
        writer.close()
    assert "not a Raft Fetch connection" in caplog.text
    fetcher = Fetcher()
    connection = fetcher.connect(peer.port)
    connection.send(fetch(9))
    await peer.wait_for(1)
    peer.answer(0, high_watermark=6)
    await fetcher.wait(answers=1)
    assert fetcher.answers[0].correlation_id == 9
    connection.close()


@pytest.mark.asyncio
async def test_a_peer_that_does_not_read_its_answers_is_not_read_from(peer: Peer) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", peer.port)
    request = pb.FetchRequest(fetch_offset=1).SerializeToString()
    writer.write(wire.greeting(2) + wire.frame(1, request))
    await peer.wait_for(1)
    _, _, reply = peer.accepted[0]
    # Far more than the socket buffers hold: the rest waits in this node's write buffer.
    big = pb.FetchResponse(records=b"x" * (16 << 20)).SerializeToString()
    reply(big)
    (inbound,) = cast(set[Any], peer.listener.connections)
    assert inbound._socket is not None and not inbound._socket.is_reading()
    writer.write(wire.frame(2, request))  # read only once the answer has left
    answer = await asyncio.wait_for(reader.readexactly(8 + len(big)), 5)
    assert answer == wire.frame(1, big)
    await peer.wait_for(2)
    writer.close()


@pytest.mark.skipif(
    not hasattr(socket, "TCP_USER_TIMEOUT"), reason="the keepalive timers are Linux socket options"
)
@pytest.mark.asyncio
async def test_both_ends_probe_an_idle_connection_with_tcp_keepalive(peer: Peer) -> None:
    """A peer whose machine died sends no FIN: keepalive (idle) and the user timeout (bytes in
    flight) are what end its connection (and the listener's parked fetch for it)."""
    fetcher = Fetcher()
    connection = fetcher.connect(peer.port)
    connection.send(fetch(1))
    await peer.wait_for(1)
    inbound: Any = next(iter(peer.listener.connections))
    assert connection._socket is not None and inbound._socket is not None
    for transport in (connection._socket, inbound._socket):
        sock = transport.get_extra_info("socket")
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE) == wire.KEEPALIVE_IDLE_S
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL) == (
            wire.KEEPALIVE_INTERVAL_S
        )
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT) == wire.KEEPALIVE_PROBES
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT) == 25_000
    connection.close()


@pytest.mark.asyncio
async def test_a_wildcard_listeners_connection_sends_without_nagle_delay() -> None:
    """asyncio leaves Nagle's algorithm on for a socket accepted from the wildcard listener's
    own dual-stack socket; `keep_alive` turns it off."""
    accepted: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    class Accepting(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            framed_wire.keep_alive(transport)
            accepted.set_result(transport.get_extra_info("socket"))

    server = await framed_wire.listen("0.0.0.0", 0, Accepting)
    try:
        port = server.sockets[0].getsockname()[1]
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        sock = await asyncio.wait_for(accepted, 5)
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
        writer.close()
    finally:
        server.close()


class _RefusingSocket:
    """A socket whose kernel (or sandbox) refuses every option."""

    def setsockopt(self, *args: object) -> None:
        raise OSError(92, "Protocol not available")


class _TransportOf:
    def __init__(self, sock: object) -> None:
        self._sock = sock

    def get_extra_info(self, name: str) -> object:
        return self._sock if name == "socket" else None


def test_a_socket_that_refuses_the_keepalive_options_still_connects() -> None:
    # Raised from connection_made, the error would leave the connection untracked by its owner.
    wire.keep_alive(_TransportOf(_RefusingSocket()))  # type: ignore[arg-type]
    wire.keep_alive(_TransportOf(None))  # type: ignore[arg-type]


@needs_ipv6
@pytest.mark.asyncio
async def test_a_wildcard_listener_takes_fetches_over_ipv4_and_ipv6_on_one_port() -> None:
    """`listeners=CONTROLLER://:9093` binds every interface: asyncio alone would bind 0.0.0.0
    IPv4 only, and voters written as [::1] never reached each other."""
    listener = FetchListener(lambda *args: 0, lambda handle: None)
    port = await listener.start("0.0.0.0", 0)
    try:
        for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
            with socket.socket(family, socket.SOCK_STREAM) as probe:
                probe.settimeout(5)
                probe.connect((host, port))  # refused before the dual-stack bind, for ::1
    finally:
        await listener.close()


@pytest.mark.asyncio
@pytest.mark.parametrize("host", ["", "::"])
async def test_a_wildcard_listener_without_dual_stack_takes_ipv4_on_one_socket(
    host: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A machine without IPv6: asyncio would bind "::" not at all and "" as two sockets."""
    monkeypatch.setattr(socket, "has_dualstack_ipv6", lambda: False)
    listener = FetchListener(lambda *args: 0, lambda handle: None)
    port = await listener.start(host, 0)
    try:
        assert listener._server is not None and len(listener._server.sockets) == 1
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.settimeout(5)
            probe.connect(("127.0.0.1", port))
    finally:
        await listener.close()
