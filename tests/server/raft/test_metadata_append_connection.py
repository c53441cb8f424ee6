"""A metadata append listener and client over real loopback sockets, in one process, with a
fake log behind the listener: appends wait at once on one connection and are answered as they
commit, out of order, each reaching its caller; refusals arrive typed; bytes that break the
format are named and the node goes on."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, cast

import pytest
import pytest_asyncio

from replog.errors import (
    InvalidRequestError,
    MessageSizeTooLargeError,
    NetworkError,
    NotLeaderOrFollowerError,
    RequestTimedOutError,
    UnknownServerError,
)
from replog.pb import raft_pb2 as pb
from replog.server.raft import metadata_append_server
from replog.server.raft import metadata_append_wire as wire
from replog.server.raft.metadata_append_client import AppendResult, MetadataAppendClient
from replog.server.raft.metadata_append_server import MetadataAppendListener
from replog.server.raft.metadata_log_appends import MetadataLogAppends
from replog.server.raft.raft_driver import RaftDriver
from replog.wire import framed_wire


@dataclass
class FakeLog:
    """Holds each append until the test commits it; `next_offset` is the log end."""

    waiting: list[tuple[list[bytes], asyncio.Future[pb.AppendResponse]]] = field(
        default_factory=list
    )
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    next_offset: int = 0

    async def append(self, values: list[bytes]) -> pb.AppendResponse:
        if values == [b"crash"]:
            raise RuntimeError("a bug in the log")
        answer: asyncio.Future[pb.AppendResponse] = asyncio.get_running_loop().create_future()
        self.waiting.append((values, answer))
        self.arrived.set()
        return await answer

    async def wait_for(self, count: int) -> None:
        async with asyncio.timeout(5):
            while len(self.waiting) < count:
                self.arrived.clear()
                await self.arrived.wait()

    def commit(self, index: int) -> None:
        values, answer = self.waiting[index]
        base = self.next_offset
        self.next_offset += len(values)
        answer.set_result(
            pb.AppendResponse(
                leader_id=1, quorum_epoch=4, base_offset=base, last_offset=self.next_offset - 1
            )
        )


@pytest_asyncio.fixture
async def served() -> AsyncIterator[tuple[FakeLog, MetadataAppendListener]]:
    log = FakeLog()
    listener = MetadataAppendListener(log.append)
    await listener.start("127.0.0.1", 0)
    yield log, listener
    await listener.close()


async def connect(listener: MetadataAppendListener) -> MetadataAppendClient:
    assert listener.port is not None
    return await MetadataAppendClient.connect_to("127.0.0.1", listener.port)


@pytest.mark.asyncio
async def test_appends_on_one_connection_are_answered_as_they_commit(
    served: tuple[FakeLog, MetadataAppendListener],
) -> None:
    log, listener = served
    async with await connect(listener) as client:
        appends = [asyncio.ensure_future(client.append([f"v{i}".encode()])) for i in range(3)]
        await log.wait_for(3)
        assert [values for values, _ in log.waiting] == [[b"v0"], [b"v1"], [b"v2"]]
        log.commit(2)  # the last one first: answers are matched by sequence number, not order
        assert await appends[2] == AppendResult(4, 0, 0)
        assert not appends[0].done() and not appends[1].done()
        log.commit(0)
        log.commit(1)
        assert [await a for a in appends[:2]] == [AppendResult(4, 1, 1), AppendResult(4, 2, 2)]


@pytest.mark.asyncio
async def test_refusals_are_typed_and_the_connection_goes_on() -> None:
    leaderless = SimpleNamespace(node_id=2)  # never reached: refused before the log
    refusing = MetadataLogAppends(cast(RaftDriver, leaderless), raw_appends=False)

    async def follower_append(values: list[bytes]) -> None:
        raise NotLeaderOrFollowerError("node 2 is not the quorum leader; the leader is 3")

    follower = SimpleNamespace(
        node_id=2,
        append_and_wait=follower_append,
        status=lambda: SimpleNamespace(leader_id=3, quorum_epoch=5),
    )
    following = MetadataLogAppends(cast(RaftDriver, follower), raw_appends=True)
    for appends, error, text in (
        (refusing, InvalidRequestError, "raw appends need metadata.log.raw.append.enable=true"),
        (following, NotLeaderOrFollowerError, "the leader is 3"),
    ):
        listener = MetadataAppendListener(appends.append)
        await listener.start("127.0.0.1", 0)
        try:
            async with await connect(listener) as client:
                with pytest.raises(error, match=text):
                    await client.append([b"x"])
                with pytest.raises(error):  # the connection still serves
                    await client.append([b"y"])
        finally:
            await listener.close()
    # What the gRPC shell answers too: the rules are MetadataLogAppends'.
    answer = await following.append([b"x"])
    assert (answer.error_code, answer.leader_id, answer.quorum_epoch) == (6, 3, 5)
    empty = await following.append([])
    assert "at least one value" in empty.error_message


@pytest.mark.asyncio
async def test_a_frame_that_is_not_a_request_is_answered_malformed_and_the_rest_served(
    served: tuple[FakeLog, MetadataAppendListener],
) -> None:
    log, listener = served
    assert listener.port is not None
    reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
    writer.write(
        wire.FORMAT.greeting(wire.NOT_A_NODE)
        + framed_wire.frame(7, b"\xff\xff")
        + wire.request_frame(8, [b"ok"])
    )
    frames = wire.FORMAT.reader()
    async with asyncio.timeout(5):
        [(sequence, payload)] = frames.feed(await reader.read(65536))
        assert sequence == 7
        # The node's MalformedRequestError, as INVALID_REQUEST (its Kafka code) on the wire.
        with pytest.raises(InvalidRequestError, match="request 7: 2 bytes that are not an"):
            wire.result_of(wire.parse_answer(payload, "node"))
        await log.wait_for(1)
        log.commit(0)
        [(sequence, payload)] = frames.feed(await reader.read(65536))
    assert sequence == 8 and wire.parse_answer(payload, "node").base_offset == 0
    writer.close()


async def refusal_after(listener: MetadataAppendListener, data: bytes) -> pb.AppendResponse:
    """What the node answers `data` with on a connection of its own: one refusal of the whole
    connection, and then its close."""
    assert listener.port is not None
    reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
    writer.write(data)
    async with asyncio.timeout(5):
        answer = await reader.read()  # up to the node's close
    writer.close()
    [(sequence, payload)] = wire.FORMAT.reader().feed(answer)
    assert sequence == wire.CONNECTION_REFUSAL
    return wire.parse_answer(payload, "node")


@pytest.mark.asyncio
async def test_bytes_that_break_the_framing_are_named_before_the_connection_ends(
    served: tuple[FakeLog, MetadataAppendListener],
) -> None:
    _, listener = served
    refusal = await refusal_after(listener, b"GET / HTTP/1.1\r\n\r\n")
    with pytest.raises(InvalidRequestError, match="not a metadata append connection"):
        wire.result_of(refusal)
    # The client sees the same refusal as its error; a frame too long for the format too.
    client = await connect(listener)
    assert client._socket is not None
    client._socket.write(struct.pack(">II", wire.FORMAT.max_frame_bytes + 5, 1))
    with pytest.raises(InvalidRequestError, match=r"refused the connection: .*frame of"):
        await client.append([b"x"], timeout_s=5)


@pytest.mark.asyncio
async def test_a_failed_append_a_deadline_and_a_closed_connection_each_fail_typed(
    served: tuple[FakeLog, MetadataAppendListener],
) -> None:
    log, listener = served
    client = await connect(listener)
    with pytest.raises(UnknownServerError, match="a bug in the log"):
        await client.append([b"crash"])
    with pytest.raises(RequestTimedOutError, match=r"answered no append within 0\.1 s"):
        await client.append([b"slow"], timeout_s=0.1)
    log.commit(0)  # the late answer is dropped; the connection goes on
    waiting = asyncio.ensure_future(client.append([b"last"]))
    await log.wait_for(2)
    await listener.close()  # the node goes away: the waiting append fails, and every later one
    with pytest.raises(NetworkError, match="closed the connection"):
        await waiting
    with pytest.raises(NetworkError, match="closed the connection"):
        await client.append([b"after"])
    # The node's side cancelled the append that was waiting to commit.
    await asyncio.sleep(0)
    assert log.waiting[1][1].cancelled()


@pytest.mark.asyncio
async def test_a_refused_connection_names_the_setting() -> None:
    listener = MetadataAppendListener(FakeLog().append)
    port = await listener.start("127.0.0.1", 0)
    await listener.close()
    await asyncio.sleep(0)
    with pytest.raises(NetworkError, match=r"controller.quorum.append.port"):
        await MetadataAppendClient.connect_to("127.0.0.1", port)


@pytest.mark.asyncio
async def test_a_request_numbered_0_is_refused_not_answered_as_a_connection_refusal(
    served: tuple[FakeLog, MetadataAppendListener],
) -> None:
    # 0 is the number of the node's refusal of the whole connection: an answer numbered 0
    # would read as one, so the request is never served.
    log, listener = served
    request = wire.FORMAT.greeting(wire.NOT_A_NODE) + wire.request_frame(0, [b"x"])
    with pytest.raises(InvalidRequestError, match="sequence number 0"):
        wire.result_of(await refusal_after(listener, request))
    assert log.waiting == []


@pytest.mark.asyncio
async def test_an_append_too_large_for_a_frame_fails_alone(
    served: tuple[FakeLog, MetadataAppendListener],
) -> None:
    # Sent, it would make the node refuse the connection, failing every other append on it.
    log, listener = served
    async with await connect(listener) as client:
        other = asyncio.ensure_future(client.append([b"small"]))
        await log.wait_for(1)
        with pytest.raises(MessageSizeTooLargeError, match="metadata append frame"):
            await client.append([b"x" * wire.FORMAT.max_frame_bytes])
        log.commit(0)
        assert await other == AppendResult(4, 0, 0)
        after = asyncio.ensure_future(client.append([b"after"]))  # the connection goes on
        await log.wait_for(2)
        log.commit(1)
        assert await after == AppendResult(4, 1, 1)


@pytest.mark.asyncio
async def test_a_connection_with_max_waiting_appends_is_read_again_once_one_commits(
    served: tuple[FakeLog, MetadataAppendListener], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(metadata_append_server, "MAX_WAITING", 2)
    log, listener = served
    async with await connect(listener) as client:
        first = [asyncio.ensure_future(client.append([f"v{i}".encode()])) for i in range(2)]
        await log.wait_for(2)
        (inbound,) = cast(set[Any], listener.connections)
        assert not inbound._socket.is_reading()
        third = asyncio.ensure_future(client.append([b"v2"]))
        await asyncio.sleep(0.1)
        assert len(log.waiting) == 2  # not read while two wait
        log.commit(0)
        await log.wait_for(3)  # read again (and paused again: two wait)
        log.commit(1)
        log.commit(2)
        assert [await a for a in (*first, third)] == [AppendResult(4, i, i) for i in range(3)]
