"""RedialingChannel: a dead peer fails fast and is redialled; replacing a channel does not
cancel the calls still in flight on it; an answer that does not parse is a typed error, and
not also a traceback in gRPC's log."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
import pytest_asyncio
from echo_server import start_echo_server, unary_stub

from replog.errors import MalformedResponseError
from replog.pb import controller_pb2, controller_pb2_grpc
from replog.wire.redialing_channel import RedialingChannel


@dataclass
class SlowServer:
    address: str
    release: asyncio.Event  # set: Echo answers
    arrived: asyncio.Event  # set once a call reached Echo


@pytest_asyncio.fixture
async def slow_server() -> AsyncIterator[SlowServer]:
    """A server whose Echo answers only once `release` is set."""
    slow = SlowServer("", asyncio.Event(), asyncio.Event())

    async def echo(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        slow.arrived.set()
        await slow.release.wait()
        return request

    server, slow.address = await start_echo_server(echo)
    try:
        yield slow
    finally:
        await server.stop(None)


@pytest.mark.asyncio
async def test_an_unreachable_peer_fails_fast_and_the_next_call_dials_a_new_channel() -> None:
    channel = RedialingChannel("127.0.0.1:1", unary_stub, [])
    try:
        first = channel.stub()
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await channel.call(lambda stub: stub, b"x", timeout_s=5)
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
        assert channel.stub() is not first
    finally:
        await channel.close()


@pytest.mark.asyncio
async def test_a_call_in_flight_survives_the_channel_being_replaced(
    slow_server: SlowServer,
) -> None:
    address, release = slow_server.address, slow_server.release
    channel = RedialingChannel(address, unary_stub, [])
    try:
        call = asyncio.ensure_future(channel.call(lambda stub: stub, b"ping", timeout_s=10))
        await asyncio.wait_for(slow_server.arrived.wait(), 5)  # it waits there now
        channel.reconnect()
        await asyncio.sleep(0.1)
        assert not call.done()
        release.set()
        assert await asyncio.wait_for(call, 5) == b"ping"
    finally:
        await channel.close()


@pytest.mark.asyncio
async def test_close_closes_a_replaced_channel_at_once_with_its_calls(
    slow_server: SlowServer,
) -> None:
    channel = RedialingChannel(slow_server.address, unary_stub, [])
    call = asyncio.ensure_future(channel.call(lambda stub: stub, b"ping", timeout_s=60))
    await asyncio.wait_for(slow_server.arrived.wait(), 5)
    channel.reconnect()  # the call keeps its channel, closing in the background
    await channel.close()
    # Ended with the channel (gRPC's aio call raises CancelledError for a call cancelled under
    # it), not left to run for its 60 s.
    done, _ = await asyncio.wait({call}, timeout=5)
    assert done == {call} and call.cancelled()


CONTROLLER = controller_pb2.DESCRIPTOR.services_by_name["Controller"]


async def describe_cluster(address: str) -> Any:
    """One DescribeCluster call of the Controller service (a node's internal peers' client)."""
    channel = RedialingChannel(
        address, controller_pb2_grpc.ControllerStub, [], peer="controller", service=CONTROLLER
    )
    try:
        return await channel.call_rpc(
            "DescribeCluster", controller_pb2.DescribeClusterRequest(), 5.0
        )
    finally:
        await channel.close()


@pytest_asyncio.fixture
async def garbage_server() -> AsyncIterator[str]:
    """A server whose every method of Controller answers bytes no message parses from."""

    async def garbage(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return b"\xff\xff\xff"

    server = grpc.aio.server()
    methods = CONTROLLER.methods_by_name
    server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(
                CONTROLLER.full_name,
                {name: grpc.unary_unary_rpc_method_handler(garbage) for name in methods},
            ),
        )
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await server.stop(None)


@pytest.mark.asyncio
async def test_an_unparseable_answer_is_a_malformed_response_naming_peer_and_rpc(
    garbage_server: str,
) -> None:
    with pytest.raises(MalformedResponseError) as caught:
        await describe_cluster(garbage_server)
    assert str(caught.value) == (
        f"controller at {garbage_server} answered DescribeCluster with bytes that do not parse "
        "as a replog.pb.DescribeClusterResponse message (not a replog controller, "
        "or an incompatible version)"
    )


def failing_with(details: str) -> Callable[..., Awaitable[None]]:
    """A stub method whose call fails INTERNAL with `details`."""

    async def failing(*_: object, **__: object) -> None:
        raise grpc.aio.AioRpcError(
            grpc.StatusCode.INTERNAL, grpc.aio.Metadata(), grpc.aio.Metadata(), details=details
        )

    return failing


@pytest.mark.asyncio
async def test_an_internal_deserializing_status_is_a_malformed_response() -> None:
    """The form gRPC's blocking stubs give an unparseable answer: the call fails INTERNAL."""
    channel: RedialingChannel[Any] = RedialingChannel("127.0.0.1:1", lambda c: None, [])
    try:
        with pytest.raises(MalformedResponseError) as caught:
            await channel.call(
                lambda stub: failing_with("Exception deserializing response!"), b"", 1.0, rpc="Echo"
            )
    finally:
        await channel.close()
    assert str(caught.value).startswith("peer at 127.0.0.1:1 answered Echo with bytes that do not")


@pytest.mark.asyncio
async def test_another_internal_status_stays_the_grpc_error() -> None:
    channel: RedialingChannel[Any] = RedialingChannel("127.0.0.1:1", lambda c: None, [])
    try:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await channel.call(lambda stub: failing_with("stream reset"), b"", 1.0, rpc="Echo")
    finally:
        await channel.close()
    assert caught.value.code() == grpc.StatusCode.INTERNAL


@pytest.mark.asyncio
async def test_an_unparseable_answer_is_not_logged_by_grpc_as_well(
    garbage_server: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The typed error says it all: gRPC's own ERROR with a traceback for each such answer
    ("Exception deserializing message!") was noise in every client's log."""
    with pytest.raises(MalformedResponseError):
        await describe_cluster(garbage_server)
    assert [r.getMessage() for r in caplog.records if r.name.startswith("grpc")] == []
