"""One gRPC channel and stub per peer node, dialled on first use and replaced on demand.

Rules:
- A peer's channel is created on the first call to it (`stub`); a peer without an address has
  no stub (None).
- `reconnect(peer_id)` drops the peer's channel so the next call dials afresh: after
  UNAVAILABLE, gRPC's reconnect backoff would otherwise keep failing calls fast for a while
  after the peer is back. The dropped channel closes in the background (calls in flight on it
  finish or end at their deadlines: `RedialingChannel`); `close()` closes every channel.

Theory of operation: a shell's outbound side (the AlterPartition sender, the broker lifecycle
driver) owns one pool; everything runs on the event loop thread. It takes the pool's maker
(`PeerLinksFactory`, `PeerChannels` itself by default) so that the simulator can hand it links
over its own network instead (`replog.sim.controller_link`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, Protocol, TypeVar

import grpc

from replog.wire.redialing_channel import RedialingChannel

StubT = TypeVar("StubT")
StubT_co = TypeVar("StubT_co", covariant=True)


class PeerLinks(Protocol[StubT_co]):
    """What a shell asks of its pool of links to peers (`PeerChannels` is one)."""

    def stub(self, peer_id: int) -> StubT_co | None: ...

    def reconnect(self, peer_id: int) -> None: ...

    async def close(self) -> None: ...


class PeerLinksFactory(Protocol):
    """Makes a shell's pool: `PeerChannels`, or the simulator's links."""

    def __call__(
        self,
        addresses: Mapping[int, str],
        make_stub: Callable[[grpc.aio.Channel], Any],
        options: Sequence[tuple[str, Any]],
    ) -> PeerLinks[Any]: ...


class PeerChannels(Generic[StubT]):
    """Channels and stubs by peer id, for `addresses` (peer id -> "host:port")."""

    def __init__(
        self,
        addresses: Mapping[int, str],
        make_stub: Callable[[grpc.aio.Channel], StubT],
        options: Sequence[tuple[str, Any]],
    ) -> None:
        self._channels = {
            peer_id: RedialingChannel(address, make_stub, options)
            for peer_id, address in addresses.items()
        }

    def stub(self, peer_id: int) -> StubT | None:
        """The stub for `peer_id`, dialling it on first use; None if it has no address."""
        channel = self._channels.get(peer_id)
        return None if channel is None else channel.stub()

    def reconnect(self, peer_id: int) -> None:
        """Drop the channel to `peer_id`: the next call dials again at once."""
        channel = self._channels.get(peer_id)
        if channel is not None:
            channel.reconnect()

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close()
