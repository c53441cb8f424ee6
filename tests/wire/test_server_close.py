"""`close_server`: a connection the server accepted as it closed is made and told, never left
with an open socket and an untold protocol (CPython gh-109564: a bare `Server.close` between the
accept and the transport's making does that).

A client connects and the test lets the loop take 0 to 7 steps before closing, so that one of
them closes with an accept in flight (checked: the window is exercised)."""

from __future__ import annotations

import asyncio
import functools
import gc

import pytest

from replog.wire.server_close import close_server


class Told(asyncio.Protocol):
    """Counts the protocols made (one per transport) and those told of their connection."""

    def __init__(self, made: list[Told], told: list[asyncio.Transport]) -> None:
        made.append(self)
        self._told = told

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._told.append(transport)


def accepts_in_flight() -> int:
    """Connections the loop accepted whose transport is not made yet (asyncio's own task)."""
    return sum("_accept_connection2" in repr(t.get_coro()) for t in asyncio.all_tasks())


@pytest.mark.asyncio
async def test_a_connection_accepted_as_the_server_closes_is_made_and_told() -> None:
    in_flight_at_close = []
    for steps in range(8):
        made: list[Told] = []
        told: list[asyncio.Transport] = []
        loop = asyncio.get_running_loop()
        server = await loop.create_server(functools.partial(Told, made, told), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = asyncio.ensure_future(asyncio.open_connection("127.0.0.1", port))
        for _ in range(steps):
            await asyncio.sleep(0)
        in_flight_at_close.append(accepts_in_flight())
        await close_server(server)
        assert len(told) == len(made), f"after {steps} steps: {len(made)} made, {len(told)} told"
        for transport in told:
            transport.abort()
        try:
            _, writer = await client
            writer.close()
        except OSError:
            pass  # refused: the server closed before accepting it
        gc.collect()  # a socket left open would be found (and warned of) here, in this test
    assert any(in_flight_at_close), f"no close met an accept in flight: {in_flight_at_close}"
