"""RedialingChannel: a dead peer fails fast and is redialled; replacing a channel does not
cancel the calls still in flight on it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
import pytest
import pytest_asyncio

from replog.server.redialing_channel import RedialingChannel

SERVICE = "test.Slow"


def unary_stub(channel: grpc.aio.Channel) -> Callable[..., Any]:
    return channel.unary_unary(f"/{SERVICE}/Echo")


@pytest_asyncio.fixture
async def slow_server() -> AsyncIterator[tuple[str, asyncio.Event]]:
    """A server whose Echo answers only once the returned event is set."""
    release = asyncio.Event()

    async def echo(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        await release.wait()
        return request

    server = grpc.aio.server()
    handler = grpc.unary_unary_rpc_method_handler(echo)
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(SERVICE, {"Echo": handler}),)
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield f"127.0.0.1:{port}", release
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
    slow_server: tuple[str, asyncio.Event],
) -> None:
    address, release = slow_server
    channel = RedialingChannel(address, unary_stub, [])
    try:
        call = asyncio.ensure_future(channel.call(lambda stub: stub, b"ping", timeout_s=10))
        await asyncio.sleep(0.2)  # the call reached the server and waits there
        channel.reconnect()
        await asyncio.sleep(0.1)
        assert not call.done()
        release.set()
        assert await asyncio.wait_for(call, 5) == b"ping"
    finally:
        await channel.close()
