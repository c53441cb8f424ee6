"""GrpcMarkerChannel against real Broker services over gRPC: a leader writes the marker and
answers per partition (an unknown partition and a follower's refusal keep their Kafka errors),
a broker with no address or none listening is a typed failure of the whole call, and a
TxnMarkerSender over the channel completes once the leader's ISR has the marker."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import pytest_asyncio

from replog.coordinator.transaction_markers import TxnMarker
from replog.coordinator.transaction_metadata import TxnMetadata, TxnState
from replog.errors import NetworkError, NotLeaderOrFollowerError, UnknownTopicOrPartitionError
from replog.server.data_plane.broker_cores import BrokerCores
from replog.server.data_plane.broker_service import BrokerService, add_broker_service
from replog.server.transactions.marker_channel import GrpcMarkerChannel
from replog.server.transactions.marker_sender import TxnMarkerSender
from replog.testing import ManualClock
from tests.local_ports import free_port
from tests.server.data_plane.test_partition_txn_markers import txn
from tests.server.data_plane.test_replica_manager import (
    DONE_S,
    Node,
    produce,
    replicate,
    settle,
    two_nodes,
)


async def serving(node: Node) -> tuple[Any, str]:
    server = grpc.aio.server()
    add_broker_service(
        BrokerService(node.broker_id, BrokerCores(node.broker_id, replica_manager=node.rm)),
        server,
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, f"127.0.0.1:{port}"


@pytest_asyncio.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[tuple[Node, Node, GrpcMarkerChannel]]:
    """Broker 1 leading t-0 with producer 7's transaction open, broker 2 following it, each
    serving its Broker service, and a channel to them."""
    leader, follower, _ = two_nodes(tmp_path, ManualClock())
    await produce(leader, txn(7, 0))
    servers = []
    addresses: dict[int, str] = {}
    for node in (leader, follower):
        server, addresses[node.broker_id] = await serving(node)
        servers.append(server)
    channel = GrpcMarkerChannel(9, addresses.get, request_timeout_ms=5000)
    try:
        yield leader, follower, channel
    finally:
        await channel.close()
        for server in servers:
            await server.stop(grace=None)


def commit(*partitions: tuple[str, int]) -> TxnMarker:
    return TxnMarker("tx", 7, 0, True, 3, 0, partitions)


async def replicated(task: asyncio.Future[Any], follower: Node, leader: Node) -> Any:
    """`task`'s answer once the follower fetched the marker (acks=all)."""
    for _ in range(50):
        if task.done():
            return task.result()
        await asyncio.sleep(0.02)
        if follower.rm.build_follower_fetch(leader.broker_id, follower.clock()) is not None:
            await replicate(follower, leader)
    return await asyncio.wait_for(task, DONE_S)


@pytest.mark.asyncio
async def test_the_leader_answers_each_partition_with_its_kafka_error(
    cluster: tuple[Node, Node, GrpcMarkerChannel],
) -> None:
    leader, follower, channel = cluster
    task = asyncio.ensure_future(channel.send(1, [commit(("t", 0), ("gone", 3))]))
    await settle()
    (answer,) = await replicated(task, follower, leader)
    assert answer[("t", 0)] is None
    assert isinstance(answer[("gone", 3)], UnknownTopicOrPartitionError)
    (refused,) = await channel.send(2, [commit(("t", 0))])  # broker 2 follows t-0
    assert isinstance(refused[("t", 0)], NotLeaderOrFollowerError)
    with pytest.raises(NetworkError, match="broker 3 has no registered address"):
        await channel.send(3, [commit(("t", 0))])


@pytest.mark.asyncio
async def test_a_broker_not_listening_is_a_network_error_naming_it() -> None:
    port = free_port()
    channel = GrpcMarkerChannel(9, {4: f"127.0.0.1:{port}"}.get, request_timeout_ms=1000)
    try:
        with pytest.raises(NetworkError, match=f"broker 4 at 127.0.0.1:{port}: .*UNAVAILABLE"):
            await channel.send(4, [commit(("t", 0))])
    finally:
        await channel.close()


@pytest.mark.asyncio
async def test_the_sender_completes_through_the_channel(
    cluster: tuple[Node, Node, GrpcMarkerChannel],
) -> None:
    leader, follower, channel = cluster
    meta = TxnMetadata(
        "tx",
        7,
        producer_epoch=0,
        state=TxnState.PREPARE_COMMIT,
        partitions=frozenset({("t", 0)}),
        start_ms=1,
    )
    sender = TxnMarkerSender(9, channel, {("t", 0): 1}.get)
    (open_txn,) = leader.rm.describe_producers("t", 0)
    assert open_txn.in_transaction
    task = asyncio.ensure_future(sender.write(meta, 3, lambda: True))
    assert await replicated(task, follower, leader) is True
    (closed,) = leader.rm.describe_producers("t", 0)
    assert not closed.in_transaction and closed.coordinator_epoch == 3
