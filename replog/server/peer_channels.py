"""One gRPC channel and stub per peer node, dialled on first use and replaced on demand.

Rules:
- A peer's channel is created on the first call to it (`stub`); a peer without an address has
  no stub (None).
- `reconnect(peer_id)` drops the peer's channel so the next call dials afresh: after
  UNAVAILABLE, gRPC's reconnect backoff would otherwise keep failing calls fast for a while
  after the peer is back. The dropped channel closes in the background (calls in flight on it
  are cancelled); `close()` closes every channel and stops the background closes.

Theory of operation: a shell's outbound side (the AlterPartition sender, the broker lifecycle
driver) owns one pool; everything runs on the event loop thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, TypeVar

import grpc

StubT = TypeVar("StubT")


class PeerChannels(Generic[StubT]):
    """Channels and stubs by peer id, for `addresses` (peer id -> "host:port")."""

    def __init__(
        self,
        addresses: Mapping[int, str],
        make_stub: Callable[[grpc.aio.Channel], StubT],
        options: Sequence[tuple[str, Any]],
    ) -> None:
        self._addresses = dict(addresses)
        self._make_stub = make_stub
        self._options = list(options)
        self._channels: dict[int, grpc.aio.Channel] = {}
        self._stubs: dict[int, StubT] = {}
        self._closing: set[asyncio.Task[None]] = set()

    def stub(self, peer_id: int) -> StubT | None:
        """The stub for `peer_id`, dialling it on first use; None if it has no address."""
        stub = self._stubs.get(peer_id)
        if stub is None:
            address = self._addresses.get(peer_id)
            if address is None:
                return None
            channel = grpc.aio.insecure_channel(address, options=self._options)
            self._channels[peer_id] = channel
            stub = self._stubs[peer_id] = self._make_stub(channel)
        return stub

    def reconnect(self, peer_id: int) -> None:
        """Drop the channel to `peer_id`: the next call dials again at once."""
        self._stubs.pop(peer_id, None)
        channel = self._channels.pop(peer_id, None)
        if channel is not None:
            task = asyncio.get_running_loop().create_task(channel.close(grace=None))
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close()
        self._channels.clear()
        self._stubs.clear()
        for closing in list(self._closing):
            closing.cancel()
