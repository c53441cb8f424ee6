"""`sim_controller_links`: a broker's links to the controllers over the simulated network, in
place of gRPC channels (`replog.server.runtime.peer_channels`): the broker's shells (lifecycle
driver, AlterPartition sender, controller calls) and the controllers' `ControllerService` are the
real ones.

Rules:
- A stub's method is the servicer's method of the same name on the destination node, called
  over `SimNetwork.call` with a copy of the request (serialized and parsed, as on the wire, so
  neither side shares the other's message objects) and the caller's deadline.
- A call the network loses fails as a gRPC call fails: `grpc.aio.AioRpcError` with UNAVAILABLE
  (the node is down) or DEADLINE_EXCEEDED (no answer in time), which the shells already handle.
- Which servicer a node has is read at each call (`services`, kept by the simulation): a node
  that is down has none, a restarted one its new one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import grpc
from google.protobuf.message import Message as ProtoMessage

from replog.server.controller.controller_service import ControllerService
from replog.server.runtime.peer_channels import PeerLinks, PeerLinksFactory
from replog.sim.network import CallLost, SimNetwork
from replog.sim.rpc_errors import lost_call_error

__all__ = ["sim_controller_links"]

DEFAULT_TIMEOUT_S = 30.0  # a call without a deadline (the shells always give one)


class _CallContext:
    """The little of gRPC's servicer context the servicers read: the time left."""

    def __init__(self, deadline_s: float, now_s: Callable[[], float]) -> None:
        self._deadline_s = deadline_s
        self._now_s = now_s

    def time_remaining(self) -> float:
        return max(0.0, self._deadline_s - self._now_s())


def _copy(message: ProtoMessage) -> ProtoMessage:
    return type(message).FromString(message.SerializeToString())


class _SimStub:
    """A controller's stub: each attribute is one of its calls (module Rules)."""

    def __init__(
        self,
        network: SimNetwork,
        source: int,
        destination: int,
        services: Mapping[int, ControllerService],
    ) -> None:
        self._network = network
        self._source = source
        self._destination = destination
        self._services = services

    def __getattr__(self, method: str) -> Callable[..., Any]:
        network, destination = self._network, self._destination

        async def call(
            request: ProtoMessage, timeout: float | None = None, metadata: object = None
        ) -> ProtoMessage:
            timeout_s = DEFAULT_TIMEOUT_S if timeout is None else timeout
            now_s = network.now_s
            context = _CallContext(now_s() + timeout_s, now_s)
            sent = _copy(request)
            service = self._services.get(destination)

            async def serve() -> ProtoMessage:
                assert service is not None
                answer: ProtoMessage = await getattr(service, method)(sent, context)
                return _copy(answer)

            try:
                return await network.call(
                    self._source,
                    destination,
                    None if service is None else serve,
                    timeout_s=timeout_s,
                )
            except CallLost as lost:
                raise lost_call_error(lost) from None

        return call


class _SimControllerLinks:
    def __init__(
        self,
        network: SimNetwork,
        source: int,
        services: Mapping[int, ControllerService],
        addresses: Mapping[int, str],
    ) -> None:
        self._stubs = {peer: _SimStub(network, source, peer, services) for peer in addresses}

    def stub(self, peer_id: int) -> _SimStub | None:
        return self._stubs.get(peer_id)

    def reconnect(self, peer_id: int) -> None:
        pass  # nothing to dial: the network is always there

    async def close(self) -> None:
        pass


def sim_controller_links(
    network: SimNetwork, source: int, services: Mapping[int, ControllerService]
) -> PeerLinksFactory:
    """A `controller_links` maker for node `source`'s broker shells (module docstring)."""

    def make(
        addresses: Mapping[int, str],
        make_stub: Callable[[grpc.aio.Channel], Any],
        options: Sequence[tuple[str, Any]],
    ) -> PeerLinks[Any]:
        return _SimControllerLinks(network, source, services, addresses)

    return make
