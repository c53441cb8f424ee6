"""One RPC awaited so that a call cut off by a connection reset is a network error, not a
cancellation of the caller.

Why: a call whose gRPC channel is closed under it ends with `asyncio.CancelledError` although
nobody cancelled its caller. `RedialingChannel` no longer does that when it replaces a
channel (it closes the old one with a grace period), but a channel can still be closed under
a call (a client's connections closed while a fetch is in flight); left alone, that error
would end the consumer's fetch task, or reach a user as if the client had been closed.
`guarded` tells the two apart with `Task.cancelling()`: a caller that was really cancelled
has a pending cancellation request, one whose call was cut off has none.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from replog.errors import NetworkError

T = TypeVar("T")


def _cut_off(address: str, what: str, node_id: int | None) -> NetworkError:
    who = f"broker {node_id} at {address}" if node_id is not None else f"broker at {address}"
    return NetworkError(f"{what} to {who} was cut off: the connection was reset")


async def guarded(call: Awaitable[T], *, address: str, what: str, node_id: int | None = None) -> T:
    """`await call`, with a cancellation that is not the caller's own raised as NetworkError."""
    try:
        return await call
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is None or current.cancelling():
            raise
        raise _cut_off(address, what, node_id) from None
