"""A blocking client's loop that has closed drops what gRPC still hands it (`ClientLoop`).

gRPC's asyncio layer shares one completion queue among the process's loops: any live loop it
wakes passes each completion to its call's loop with `call_soon_threadsafe`. The completions
of calls cancelled as a client closed (a closed channel's, or one the garbage collector
closed later) could come after that client's loop had closed, and the live loop then failed
with "RuntimeError: Event loop is closed" (the tracebacks `replog demo` printed on some
runs). The race is forced here: a loop is closed with calls outstanding, and their channel
is destroyed afterwards, so that every completion comes after the close."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import grpc

from replog.client.loop_thread import ClientLoop, LoopThread
from tests.wire.echo_server import start_echo_server, unary_stub


async def never_answering_slow(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    """Echo: "slow" is never answered, anything else at once."""
    if request == b"slow":
        await asyncio.sleep(3600)
    return request


async def call_and_leave(address: str, left: list[object]) -> None:
    """Calls that wait on the server, left outstanding: they and their channel go to `left`."""
    channel = grpc.aio.insecure_channel(address)
    calls = [unary_stub(channel)(b"slow") for _ in range(3)]
    left.extend([channel, *calls])
    await asyncio.sleep(0.05)  # the calls wait on the server now


def test_completions_for_a_closed_client_loop_leave_the_live_loops_alone() -> None:
    server_thread, live = LoopThread("test-server"), LoopThread("test-live")
    errors: list[Any] = []
    try:
        server, address = server_thread.run(
            start_echo_server(never_answering_slow), timeout_s=10, what="serve"
        )
        for loop in (live.loop, server_thread.loop):
            loop.set_exception_handler(lambda _loop, context: errors.append(context["message"]))

        async def ping() -> None:
            async with grpc.aio.insecure_channel(address) as channel:
                for _ in range(3):
                    assert await unary_stub(channel)(b"ping") == b"ping"

        for _ in range(3):
            closed = ClientLoop()
            closed.set_exception_handler(lambda _loop, _context: None)  # its pending tasks
            left: list[object] = []
            closed.run_until_complete(call_and_leave(address, left))
            closed.close()  # the calls still outstanding in gRPC
            left.clear()
            gc.collect()  # the channel is destroyed: its calls complete, for the closed loop
            live.run(ping(), timeout_s=10, what="ping")  # a live loop is woken for them
        server_thread.run(server.stop(None), timeout_s=10, what="stop")
    finally:
        live.close()
        server_thread.close()
    assert errors == []
