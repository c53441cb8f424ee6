"""A broker's real `GrpcMarkerChannel` over the simulated network (`txn_link.SimBrokerCalls`)
to another broker's real `BrokerService`: markers and AddPartitionsToTxn reach it and their
answers come back through the protobuf bytes; a broker that is down, a lost call and a
service refusing the whole call are the typed errors the marker sender and the leaders'
verification handle over gRPC."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import Any

import grpc
import pytest

from replog.coordinator.transaction_markers import TxnMarker
from replog.errors import (
    ConcurrentTransactionsError,
    NetworkError,
    NotLeaderOrFollowerError,
    RequestTimedOutError,
)
from replog.replication import messages as m
from replog.server.data_plane.broker_service import BrokerService
from replog.server.runtime.tolerant_service import Refused
from replog.server.transactions.marker_channel import GrpcMarkerChannel
from replog.sim.network import NetworkFaults, SimNetwork
from replog.sim.txn_link import SimBrokerCalls
from replog.sim.virtual_loop import VirtualLoop

COORDINATOR, LEADER = 1, 2
MARKER = TxnMarker("t", 7, 3, True, 5, 0, (("orders", 0), ("orders", 1)))


class Cores:
    """A leader's WriteTxnMarkers core: orders-1 is led elsewhere; or refusing every call."""

    def __init__(self, refuse: bool = False) -> None:
        self.refuse = refuse
        self.written: list[m.TxnMarker] = []

    async def write_txn_markers(
        self, request: m.WriteTxnMarkersRequest
    ) -> m.WriteTxnMarkersResponse:
        if self.refuse:
            raise Refused(grpc.StatusCode.UNAVAILABLE, "the data plane is not serving")
        self.written += request.markers
        return m.WriteTxnMarkersResponse(
            tuple(
                m.TxnMarkerResult(
                    marker.producer_id,
                    tuple(
                        m.TxnMarkerPartitionResult(
                            topic,
                            index,
                            NotLeaderOrFollowerError("led elsewhere") if index else None,
                        )
                        for topic, index in marker.partitions
                    ),
                )
                for marker in request.markers
            )
        )


async def concurrent(request: m.TxnPartitionsRequest) -> m.TxnPartitionsResponse:
    error = ConcurrentTransactionsError(f"{request.transactional_id} is completing")
    return m.TxnPartitionsResponse(
        tuple(m.TxnMarkerPartitionResult(t, p, error) for t, p in request.partitions)
    )


Scenario = Callable[[GrpcMarkerChannel], Awaitable[None]]


def run(scenario: Scenario, leader: Any, faults: NetworkFaults | None = None) -> None:
    """`scenario` with broker 1's channel to broker 2, which runs `leader` (None: down)."""
    loop = VirtualLoop()
    network = SimNetwork(loop, random.Random(3), faults)
    brokers = {} if leader is None else {LEADER: leader}
    channel = GrpcMarkerChannel(
        COORDINATOR,
        {}.get,
        request_timeout_ms=300,
        calls=SimBrokerCalls(network, COORDINATOR, brokers.get),  # type: ignore[arg-type]
    )

    async def main() -> None:
        try:
            await scenario(channel)
        finally:
            await channel.close()

    try:
        loop.run_until_complete(asyncio.wait_for(main(), timeout=60))
    finally:
        loop.close()


def broker(cores: Cores) -> SimpleNamespace:
    return SimpleNamespace(broker_service=BrokerService(LEADER, cores, concurrent))  # type: ignore[arg-type]


def test_markers_and_adds_reach_the_broker_service_and_answers_come_back() -> None:
    cores = Cores()

    async def scenario(channel: GrpcMarkerChannel) -> None:
        (answer,) = await channel.send(LEADER, [MARKER])
        assert answer[("orders", 0)] is None
        assert isinstance(answer[("orders", 1)], NotLeaderOrFollowerError)
        (written,) = cores.written
        assert (written.producer_id, written.producer_epoch, written.committed) == (7, 3, True)
        assert written.coordinator_epoch == 5 and written.partitions == MARKER.partitions
        added = await channel.add_partitions(
            LEADER, m.TxnPartitionsRequest("t", 7, 3, (("orders", 0),), verify_only=False)
        )
        assert isinstance(added[("orders", 0)], ConcurrentTransactionsError)

    run(scenario, broker(cores))


@pytest.mark.parametrize(
    ("leader", "faults", "error"),
    [
        (None, None, NetworkError),  # down: the connection is refused
        (broker(Cores()), NetworkFaults(drop_rate=1.0), RequestTimedOutError),  # lost
        (broker(Cores(refuse=True)), None, NetworkError),  # UNAVAILABLE, as gRPC says it
    ],
    ids=["down", "lost", "refused"],
)
def test_a_failed_call_is_the_typed_error_grpc_would_give(
    leader: Any, faults: NetworkFaults | None, error: type[Exception]
) -> None:
    async def scenario(channel: GrpcMarkerChannel) -> None:
        with pytest.raises(error, match=f"broker {LEADER}"):
            await channel.send(LEADER, [MARKER])

    run(scenario, leader, faults)
