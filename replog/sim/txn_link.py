"""`SimBrokerCalls`: a simulated broker's calls to other brokers' Broker service (a transaction
coordinator's WriteTxnMarkers to leaders, a leader's AddPartitionsToTxn to a coordinator,
KIP-890) through the simulated network, as `GrpcMarkerChannel`'s `BrokerCalls`.

Rules:
- A call carries its request and its answer serialized (the protobuf bytes gRPC would send),
  and is served by whichever broker runs at the destination when it arrives, with no
  deadline in its context; an answer from a broker that stopped meanwhile never leaves it.
  While served it is kept in `serving` (the run's): a call to a broker that died with it
  waits for nothing that will come, and is cancelled at the run's end, not destroyed
  pending.
- A lost call raises what gRPC's would: NetworkError when the destination is down (refused),
  RequestTimedOutError when its deadline passed, and a call the service refuses as a whole
  (`Refused`: its data plane not serving) the error of its gRPC status; the channel's callers
  retry them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, MutableMapping
from typing import Any

from replog.errors import NetworkError, RequestTimedOutError
from replog.pb import broker_pb2 as pb
from replog.server.broker.broker_runtime import BrokerRuntime
from replog.server.runtime.tolerant_service import Refused
from replog.server.transactions.marker_channel import ADD_PARTITIONS_RPC, RPC, status_error
from replog.sim.network import CallLost, SimNetwork

__all__ = ["SimBrokerCalls"]

_ANSWERS: dict[str, type[Any]] = {
    RPC: pb.WriteTxnMarkersResponse,
    ADD_PARTITIONS_RPC: pb.AddPartitionsToTxnResponse,
}


class SimBrokerCalls:
    """Node `node_id`'s Broker service calls (module docstring); `brokers`: the broker running
    at a node now, None when it is down; `serving`: the run's calls being served."""

    def __init__(
        self,
        network: SimNetwork,
        node_id: int,
        brokers: Callable[[int], BrokerRuntime | None],
        serving: MutableMapping[asyncio.Task[Any], None] | None = None,
    ) -> None:
        self._network = network
        self._node_id = node_id
        self._brokers = brokers
        self._serving = {} if serving is None else serving

    def where(self, broker_id: int) -> str:
        return f"broker {broker_id}"

    async def call(self, broker_id: int, rpc: str, request: Any, timeout_s: float) -> Any:
        wire = request.SerializeToString()
        request_type = type(request)

        async def serve() -> bytes:
            broker = self._brokers(broker_id)
            if broker is None:
                raise CallLost(broker_id, unreachable=True)
            serving = asyncio.current_task()
            assert serving is not None
            self._serving[serving] = None
            try:
                method = getattr(broker.broker_service, rpc)
                answer = await method(request_type.FromString(wire), None)
            finally:
                self._serving.pop(serving, None)
            if self._brokers(broker_id) is not broker:
                raise CallLost(broker_id, unreachable=True)
            return bytes(answer.SerializeToString())

        up = self._brokers(broker_id) is not None
        try:
            answer = await self._network.call(
                self._node_id, broker_id, serve if up else None, timeout_s=timeout_s
            )
        except CallLost as lost:
            error = NetworkError if lost.unreachable else RequestTimedOutError
            raise error(f"broker {broker_id}: {rpc} from broker {self._node_id}: {lost}") from None
        except Refused as refused:
            raise status_error(refused.code)(
                f"broker {broker_id}: {rpc} failed: {refused.code.name}: {refused.details}"
            ) from None
        return _ANSWERS[rpc].FromString(answer)

    async def close(self) -> None:
        pass  # nothing to hang up: the network is always there
