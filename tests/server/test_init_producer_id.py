"""InitProducerId through BrokerService on a real grpc.aio server (127.0.0.1:0) and
BrokerClient, in front of a fake producer-id manager: a new id with epoch 0; Kafka's request
checks (transactional id: UNSUPPORTED_VERSION naming transactions; one of id/epoch -1:
INVALID_REQUEST); the manager's COORDINATOR_LOAD_IN_PROGRESS reaching the client as its class;
a broker without a manager answering the same; garbage bytes an INVALID_ARGUMENT; the codec
round trip."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import grpc
import pytest
import pytest_asyncio

from quorum.metadata.image import MetadataImage
from replog.errors import (
    CoordinatorLoadInProgressError,
    InvalidRequestError,
    KafkaError,
    UnsupportedVersionError,
)
from replog.pb import broker_pb2 as pb
from replog.pb import broker_pb2_grpc
from replog.replication import messages as m
from replog.server.broker_service import BrokerService, add_broker_service
from replog.wire import broker_codec as codec
from replog.wire.broker_client import BrokerClient


@dataclass
class FakeProducerIds:
    next_id: int = 4000
    refuse: KafkaError | None = None
    handed: list[int] = field(default_factory=list)

    def generate_producer_id(self) -> int:
        if self.refuse is not None:
            raise self.refuse
        producer_id = self.next_id
        self.next_id += 1
        self.handed.append(producer_id)
        return producer_id


@dataclass
class Harness:
    ids: FakeProducerIds
    client: BrokerClient
    stub: broker_pb2_grpc.BrokerStub
    address: str


async def serve(service: BrokerService) -> tuple[grpc.aio.Server, str]:
    server = grpc.aio.server()
    add_broker_service(service, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, f"127.0.0.1:{port}"


@pytest_asyncio.fixture
async def harness() -> AsyncIterator[Harness]:
    ids = FakeProducerIds()
    service = BrokerService(3, cluster_id="c1", image=lambda: MetadataImage.EMPTY, producer_ids=ids)
    server, address = await serve(service)
    client = BrokerClient(address, request_timeout_ms=5000)
    channel = grpc.aio.insecure_channel(address)
    stub = broker_pb2_grpc.BrokerStub(channel)  # type: ignore[no-untyped-call]
    try:
        yield Harness(ids, client, stub, address)
    finally:
        await channel.close()
        await client.close()
        await server.stop(grace=None)


@pytest.mark.asyncio
async def test_a_new_producer_id_has_epoch_zero(harness: Harness) -> None:
    assert await harness.client.init_producer_id() == (4000, 0)
    assert await harness.client.init_producer_id(timeout_ms=2000) == (4001, 0)
    assert harness.ids.handed == [4000, 4001]


@pytest.mark.asyncio
async def test_an_idempotent_producer_with_an_old_id_gets_a_new_one(harness: Harness) -> None:
    # Kafka: without a transactional id, the old id and epoch are not checked.
    answer = await harness.stub.InitProducerId(
        pb.InitProducerIdRequest(producer_id=17, producer_epoch=3), timeout=5
    )
    assert not answer.HasField("error")
    assert (answer.producer_id, answer.producer_epoch) == (4000, 0)


@pytest.mark.asyncio
async def test_a_transactional_id_is_unsupported_naming_transactions(harness: Harness) -> None:
    for transactional_id in ("payments-tx", ""):
        answer = await harness.stub.InitProducerId(
            pb.InitProducerIdRequest(
                transactional_id=transactional_id, producer_id=-1, producer_epoch=-1
            ),
            timeout=5,
        )
        error = codec.init_producer_id_response_from_proto(answer).error
        assert isinstance(error, UnsupportedVersionError)
        assert "transactions are not supported" in str(error)
        assert repr(transactional_id) in str(error) and "broker 3" in str(error)
        assert (answer.producer_id, answer.producer_epoch) == (-1, -1)
    assert harness.ids.handed == []


@pytest.mark.asyncio
@pytest.mark.parametrize(("producer_id", "epoch"), [(-1, 0), (5, -1)])
async def test_only_one_of_id_and_epoch_is_an_invalid_request(
    harness: Harness, producer_id: int, epoch: int
) -> None:
    answer = await harness.stub.InitProducerId(
        pb.InitProducerIdRequest(producer_id=producer_id, producer_epoch=epoch), timeout=5
    )
    error = codec.init_producer_id_response_from_proto(answer).error
    assert isinstance(error, InvalidRequestError)
    assert f"producer_id {producer_id} and producer_epoch {epoch}" in str(error)
    assert harness.ids.handed == []


@pytest.mark.asyncio
async def test_no_id_yet_reaches_the_client_as_a_retriable_error(harness: Harness) -> None:
    harness.ids.refuse = CoordinatorLoadInProgressError("broker 3 has no producer ids yet")
    with pytest.raises(CoordinatorLoadInProgressError, match="no producer ids yet") as refused:
        await harness.client.init_producer_id()
    assert refused.value.retriable
    harness.ids.refuse = None
    assert await harness.client.init_producer_id() == (4000, 0)


@pytest.mark.asyncio
async def test_a_broker_without_a_manager_answers_load_in_progress() -> None:
    server, address = await serve(
        BrokerService(3, cluster_id="c1", image=lambda: MetadataImage.EMPTY)
    )
    client = BrokerClient(address, request_timeout_ms=5000)
    try:
        with pytest.raises(CoordinatorLoadInProgressError, match="broker 3"):
            await client.init_producer_id()
    finally:
        await client.close()
        await server.stop(grace=None)


@pytest.mark.asyncio
async def test_garbage_bytes_are_an_invalid_argument(harness: Harness) -> None:
    async with grpc.aio.insecure_channel(harness.address) as channel:
        call = channel.unary_unary("/replog.pb.broker.Broker/InitProducerId")
        with pytest.raises(grpc.aio.AioRpcError) as failure:
            await call(b"\xff" * 64, timeout=5)
    assert failure.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "InitProducerIdRequest" in (failure.value.details() or "")
    assert harness.ids.handed == []


@pytest.mark.asyncio
async def test_a_dead_broker_fails_the_call_as_grpc_does() -> None:
    client = BrokerClient("127.0.0.1:1", request_timeout_ms=2000)
    try:
        with pytest.raises(grpc.aio.AioRpcError) as failure:
            await client.init_producer_id()
        assert failure.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        await client.close()


@pytest.mark.parametrize(
    "request_",
    [
        m.InitProducerIdRequest(),
        m.InitProducerIdRequest(transactional_id="", transaction_timeout_ms=60_000),
        m.InitProducerIdRequest(producer_id=12, producer_epoch=4),
    ],
)
def test_the_request_codec_round_trips(request_: m.InitProducerIdRequest) -> None:
    message = codec.init_producer_id_request_to_proto(request_)
    again = pb.InitProducerIdRequest.FromString(message.SerializeToString())
    assert codec.init_producer_id_request_from_proto(again) == request_


def test_the_response_codec_round_trips() -> None:
    ok = m.InitProducerIdResponse(producer_id=9, producer_epoch=0)
    assert (
        codec.init_producer_id_response_from_proto(codec.init_producer_id_response_to_proto(ok))
        == ok
    )
    refused = codec.init_producer_id_response_from_proto(
        codec.init_producer_id_response_to_proto(
            m.InitProducerIdResponse(CoordinatorLoadInProgressError("wait"))
        )
    )
    assert isinstance(refused.error, CoordinatorLoadInProgressError)
    assert str(refused.error) == "wait" and refused.producer_id == -1
