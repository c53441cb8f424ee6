"""A follower's real `ReplicaFetchStream` against a leader's real `ReplicaFetchService` over the
simulated network (`replica_fetch_link`): answers arrive; a leader that is down, one that
restarted under the call, one that stops serving, and a refusal are the typed errors the
fetcher handles over gRPC; a lost message is no answer, which the stream's own timeout ends;
after a failure the next fetch opens a new call to the leader's current servicer."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable

import pytest

from replog.errors import InvalidRequestError, NetworkError, RequestTimedOutError
from replog.pb import broker_pb2 as pb
from replog.replication import messages as m
from replog.replication.fetch_session import LeaderFetchSession
from replog.server.data_plane.repeat_reads import RepeatReads
from replog.server.data_plane.replica_fetch_service import ReplicaFetchService
from replog.server.data_plane.replica_fetcher import FetchStream
from replog.sim.network import SimNetwork
from replog.sim.replica_fetch_link import sim_fetch_streams
from replog.sim.virtual_loop import VirtualLoop

LEADER, FOLLOWER = 1, 2
REQUEST_TIMEOUT_MS = 300


def fetch(replica: int = FOLLOWER, max_wait_ms: int = 0) -> m.FetchRequest:
    return m.FetchRequest(
        (m.FetchPartition("orders", 0, 0),), replica_id=replica, max_wait_ms=max_wait_ms
    )


class Leader:
    """A leader's servicer whose core answers every fetch with no news, counting them."""

    def __init__(self) -> None:
        self.served: list[int] = []
        self.service = ReplicaFetchService(LEADER, self._serve, 1 << 20)

    async def _serve(
        self, request: pb.FetchRequest, session: LeaderFetchSession, repeats: RepeatReads | None
    ) -> m.FetchResponse:
        self.served.append(request.replica_id)
        return m.FetchResponse(())


Services = dict[int, ReplicaFetchService]
Scenario = Callable[[VirtualLoop, SimNetwork, FetchStream, Services], Awaitable[None]]


def run(scenario: Scenario, leader: Leader | None) -> None:
    """`scenario` with follower 2's stream to broker 1, whose servicer is `leader`'s (None:
    broker 1 is down); the stream is closed after it."""
    loop = VirtualLoop()
    network = SimNetwork(loop, random.Random(7))
    services: Services = {} if leader is None else {LEADER: leader.service}
    stream = sim_fetch_streams(network, FOLLOWER, services)(
        "sim:9101", LEADER, request_timeout_ms=REQUEST_TIMEOUT_MS
    )

    async def main() -> None:
        try:
            await scenario(loop, network, stream, services)
        finally:
            await stream.aclose()

    try:
        loop.run_until_complete(asyncio.wait_for(main(), timeout=60))
    finally:
        loop.close()


def test_fetches_reach_the_leaders_servicer_and_answers_come_back() -> None:
    leader = Leader()

    async def scenario(
        loop: VirtualLoop, network: SimNetwork, stream: FetchStream, services: Services
    ) -> None:
        for _ in range(3):
            assert (await stream.fetch(fetch())).partitions == ()
        assert leader.served == [FOLLOWER] * 3
        assert 0 < loop.now_ms() < 100  # three round trips of 1-5 ms each way

    run(scenario, leader)


def test_a_leader_that_is_down_is_a_network_error() -> None:
    async def scenario(
        loop: VirtualLoop, network: SimNetwork, stream: FetchStream, services: Services
    ) -> None:
        with pytest.raises(NetworkError, match="UNAVAILABLE: node 1 is down"):
            await stream.fetch(fetch())

    run(scenario, None)


def test_a_lost_message_is_no_answer_until_the_streams_timeout() -> None:
    leader = Leader()

    async def scenario(
        loop: VirtualLoop, network: SimNetwork, stream: FetchStream, services: Services
    ) -> None:
        network.partition([[LEADER], [FOLLOWER]])
        began_ms = loop.now_ms()
        with pytest.raises(RequestTimedOutError, match="within 500 ms"):
            await stream.fetch(fetch(max_wait_ms=200))
        assert loop.now_ms() - began_ms == REQUEST_TIMEOUT_MS + 200
        stream.failed()
        network.heal()
        assert (await stream.fetch(fetch())).partitions == ()
        assert leader.served == [FOLLOWER]

    run(scenario, leader)


def test_a_restarted_leader_ends_the_call_and_the_next_one_reaches_its_new_servicer() -> None:
    first, second = Leader(), Leader()

    async def scenario(
        loop: VirtualLoop, network: SimNetwork, stream: FetchStream, services: Services
    ) -> None:
        await stream.fetch(fetch())
        services[LEADER] = second.service
        with pytest.raises(NetworkError, match="restarted under the call"):
            await stream.fetch(fetch())
        stream.failed()
        await stream.fetch(fetch())
        assert (first.served, second.served) == ([FOLLOWER], [FOLLOWER])

    run(scenario, first)


def test_a_leader_that_stops_serving_and_a_refusal_are_typed_errors() -> None:
    leader = Leader()

    async def scenario(
        loop: VirtualLoop, network: SimNetwork, stream: FetchStream, services: Services
    ) -> None:
        with pytest.raises(InvalidRequestError, match="follower replicas only"):
            await stream.fetch(fetch(replica=-1))
        stream.failed()
        leader.service.stop()
        with pytest.raises(NetworkError, match="the broker is stopping"):
            await stream.fetch(fetch())
        assert leader.served == []

    run(scenario, leader)
