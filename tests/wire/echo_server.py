"""A gRPC server with one method, `test.Slow/Echo`, for the tests of channels and loops."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import grpc

SERVICE = "test.Slow"


def unary_stub(channel: grpc.aio.Channel) -> Callable[..., Any]:
    return channel.unary_unary(f"/{SERVICE}/Echo")


async def start_echo_server(
    echo: Callable[[bytes, grpc.aio.ServicerContext], Awaitable[bytes]],
) -> tuple[grpc.aio.Server, str]:
    """A started server on loopback whose Echo is `echo`, and its address."""
    server = grpc.aio.server()
    handler = grpc.unary_unary_rpc_method_handler(echo)
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(SERVICE, {"Echo": handler}),)
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, f"127.0.0.1:{port}"
