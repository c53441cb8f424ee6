"""Closing an asyncio server without losing a connection it accepted as it closed.

`asyncio.Server.close` races the loop's accept (CPython gh-109564, open upstream): the
loop accepts a connection in one step and makes its transport in a task's step after it, and
a transport made once the server is closed fails to attach to it (an assertion inside its
constructor). That connection's socket then stays open, its protocol never told, until the
garbage collector finds it and warns. So `close_server` stops accepting first, lets each
connection already accepted be made, and only then closes the server: when it returns, every
connection the server accepted has had its protocol's `connection_made`, and the caller's own
bookkeeping sees it to close.
"""

from __future__ import annotations

import asyncio


async def close_server(server: asyncio.Server) -> None:
    """Close `server` once the connections it accepted are made (module docstring)."""
    loop = asyncio.get_running_loop()
    for sock in server.sockets:
        loop.remove_reader(sock.fileno())  # no accept from now on
    # An accept queued its connection's task before this coroutine's next step is queued (the
    # loop runs its callbacks in order): one step later each transport exists, attached.
    await asyncio.sleep(0)
    server.close()
    # Each transport's constructor queued its protocol's `connection_made`: one step later
    # every protocol has been told.
    await asyncio.sleep(0)
