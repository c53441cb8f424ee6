"""AddPartitionsToTxn between brokers (KIP-890) over the Broker gRPC service: a leader's
question crosses the codec and the channel whole (transactional id, producer, verify-only,
partitions grouped by topic) and each partition's answer comes back with its Kafka error; a
broker without a transaction coordinator answers COORDINATOR_NOT_AVAILABLE for every
partition; an answer that leaves a partition out is a malformed response."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import grpc
import pytest
import pytest_asyncio

from replog.errors import (
    CoordinatorNotAvailableError,
    MalformedResponseError,
    ProducerFencedError,
    TransactionAbortableError,
)
from replog.replication import messages as m
from replog.server.data_plane.broker_cores import BrokerCores
from replog.server.data_plane.broker_service import BrokerService, add_broker_service
from replog.server.transactions.marker_channel import GrpcMarkerChannel
from replog.wire import txn_partitions_codec as codec

Handler = Callable[[m.TxnPartitionsRequest], Awaitable[m.TxnPartitionsResponse]]
ASKED = m.TxnPartitionsRequest("tx", 7, 3, (("a", 0), ("b", 2), ("a", 1)), verify_only=True)


def test_the_codec_keeps_every_field_and_the_partition_order() -> None:
    wire = codec.request_to_proto(ASKED)
    assert [(t.topic, list(t.partitions)) for t in wire.topics] == [("a", [0, 1]), ("b", [2])]
    assert codec.request_from_proto(wire) == m.TxnPartitionsRequest(
        "tx", 7, 3, (("a", 0), ("a", 1), ("b", 2)), verify_only=True
    )
    answer = m.TxnPartitionsResponse(
        (
            m.TxnMarkerPartitionResult("a", 0, None),
            m.TxnMarkerPartitionResult("a", 1, TransactionAbortableError("not in it")),
        )
    )
    back = codec.response_from_proto(codec.response_to_proto(answer))
    assert [(r.topic, r.partition, type(r.error)) for r in back.partitions] == [
        ("a", 0, type(None)),
        ("a", 1, TransactionAbortableError),
    ]
    assert str(back.partitions[1].error) == "not in it"


@pytest_asyncio.fixture
async def serve() -> AsyncIterator[Callable[[Handler | None], Awaitable[GrpcMarkerChannel]]]:
    servers: list[grpc.aio.Server] = []
    channels: list[GrpcMarkerChannel] = []

    async def start(handler: Handler | None) -> GrpcMarkerChannel:
        server = grpc.aio.server()
        add_broker_service(BrokerService(4, BrokerCores(4), handler), server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        servers.append(server)
        channel = GrpcMarkerChannel(1, {4: f"127.0.0.1:{port}"}.get, request_timeout_ms=5000)
        channels.append(channel)
        return channel

    try:
        yield start
    finally:
        for channel in channels:
            await channel.close()
        for server in servers:
            await server.stop(grace=None)


@pytest.mark.asyncio
async def test_the_coordinators_answer_crosses_per_partition(
    serve: Callable[[Handler | None], Awaitable[GrpcMarkerChannel]],
) -> None:
    seen: list[m.TxnPartitionsRequest] = []

    async def coordinator(request: m.TxnPartitionsRequest) -> m.TxnPartitionsResponse:
        seen.append(request)
        return m.TxnPartitionsResponse(
            tuple(
                m.TxnMarkerPartitionResult(t, p, None if p == 0 else ProducerFencedError("old"))
                for t, p in request.partitions
            )
        )

    channel = await serve(coordinator)
    answer = await channel.add_partitions(4, ASKED)
    assert seen == [
        m.TxnPartitionsRequest("tx", 7, 3, (("a", 0), ("a", 1), ("b", 2)), verify_only=True)
    ]
    assert answer[("a", 0)] is None
    assert isinstance(answer[("a", 1)], ProducerFencedError)
    assert isinstance(answer[("b", 2)], ProducerFencedError)


@pytest.mark.asyncio
async def test_a_broker_without_a_coordinator_and_a_partial_answer(
    serve: Callable[[Handler | None], Awaitable[GrpcMarkerChannel]],
) -> None:
    none = await serve(None)
    answer = await none.add_partitions(4, ASKED)
    assert set(answer) == set(ASKED.partitions)
    assert all(isinstance(e, CoordinatorNotAvailableError) for e in answer.values())

    async def forgetful(request: m.TxnPartitionsRequest) -> m.TxnPartitionsResponse:
        return m.TxnPartitionsResponse((m.TxnMarkerPartitionResult("a", 0, None),))

    partial = await serve(forgetful)
    with pytest.raises(MalformedResponseError, match=r"broker 4 .* answered AddPartitionsToTxn"):
        await partial.add_partitions(4, ASKED)
