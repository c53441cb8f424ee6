"""A broker answer that is not one gives the caller a typed error naming the broker's address,
the RPC and what was wrong, never an AttributeError, a silent retry or a made-up result.

Against `fake_broker` (a real gRPC server answering any bytes): per Broker RPC, bytes that do
not parse as its response message, and parsed messages with impossible contents (a partition
not asked for, one left out or named twice, a negative offset or producer id beside no error,
a topic id that is not 16 bytes, an error code nobody knows); first through `BrokerClient`,
and that a partition's error beside offsets of none is an answer. The public clients, which
speak Kafka's protocol, are checked the same way in test_malformed_kafka_answers.py; here, a
consumer raises a malformed answer from one leader while another keeps delivering.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import fake_broker
import grpc
import pytest
import pytest_asyncio
from fake_broker import GARBAGE, FakeBroker

from replog import TopicPartition
from replog.errors import (
    MalformedResponseError,
    NotLeaderOrFollowerError,
    UnknownServerError,
)
from replog.pb import broker_pb2 as bpb
from replog.pb import common_pb2
from replog.replication import messages as m
from replog.wire.broker_client import BrokerClient

# --- BrokerClient ---------------------------------------------------------------------------------

Call = Callable[[BrokerClient], Awaitable[Any]]

PRODUCE = m.ProduceRequest(acks=1, timeout_ms=100, partitions=(m.ProducePartition("t", 0, b"x"),))


async def produce_on_a_stream(client: BrokerClient) -> m.ProduceResponse:
    stream = client.produce_stream()
    try:
        return await stream.produce(PRODUCE)
    finally:
        stream.close()


CALLS: dict[str, Call] = {
    "Produce": lambda c: c.produce(PRODUCE),
    "ProduceStream": produce_on_a_stream,
    "Fetch": lambda c: c.fetch(m.FetchRequest((m.FetchPartition("t", 0, 0, 1000),), max_wait_ms=0)),
    "ListOffsets": lambda c: c.list_offsets(
        m.ListOffsetsRequest((m.ListOffsetsPartition("t", 0, -1),))
    ),
    "OffsetsForLeaderEpoch": lambda c: c.offsets_for_leader_epoch(
        m.OffsetsForLeaderEpochRequest((m.OffsetForLeaderPartition("t", 0, 1),))
    ),
    "DeleteRecords": lambda c: c.delete_records(
        m.DeleteRecordsRequest((m.DeleteRecordsPartition("t", 0, 1),), timeout_ms=100)
    ),
    "Metadata": lambda c: c.metadata(["t"]),
    "InitProducerId": lambda c: c.init_producer_id(),
}

# Per RPC: its response's topic and partition entry types, and an offset field that is never
# below `lowest` (-1 is "not said") beside no error.
ENTRIES: dict[str, tuple[Any, Any, Any, str, int]] = {
    "Produce": (
        bpb.ProduceResponse,
        bpb.ProduceTopicResponse,
        bpb.ProducePartitionResponse,
        "base_offset",
        -1,
    ),
    "ProduceStream": (
        bpb.ProduceResponse,
        bpb.ProduceTopicResponse,
        bpb.ProducePartitionResponse,
        "base_offset",
        -1,
    ),
    "Fetch": (
        bpb.FetchResponse,
        bpb.FetchTopicResponse,
        bpb.FetchPartitionResponse,
        "high_watermark",
        -1,
    ),
    "ListOffsets": (
        bpb.ListOffsetsResponse,
        bpb.ListOffsetsTopicResponse,
        bpb.ListOffsetsPartitionResponse,
        "offset",
        -1,
    ),
    "OffsetsForLeaderEpoch": (
        bpb.OffsetsForLeaderEpochResponse,
        bpb.OffsetForLeaderTopicResponse,
        bpb.OffsetForLeaderPartitionResponse,
        "end_offset",
        -1,
    ),
    "DeleteRecords": (
        bpb.DeleteRecordsResponse,
        bpb.DeleteRecordsTopicResponse,
        bpb.DeleteRecordsPartitionResponse,
        "low_watermark",
        -1,
    ),
}
PARTITIONED = list(ENTRIES)
UNKNOWN_CODE = common_pb2.ErrorStatus(code=999, error_name="BRAND_NEW_ERROR", message="")


def answer_with(rpc: str, *partitions: int, topic_id: bytes = b"", **fields: Any) -> Any:
    """A well-formed `rpc` answer for topic "t" with one entry per partition; every other
    offset field a sane 0 unless given."""
    response, topic_type, partition_type, offset_field, _ = ENTRIES[rpc]
    topic: dict[str, Any] = {"topic": "t"}
    if rpc == "Fetch":
        topic["topic_id"] = topic_id
        fields.setdefault("log_start_offset", 0)
    fields.setdefault(offset_field, 0)
    entries = [partition_type(partition=p, **fields) for p in partitions]
    return response(topics=[topic_type(partitions=entries, **topic)])


def impossible(rpc: str, kind: str) -> tuple[Any, str]:
    """An answer to a request for t-0 that cannot be, and what the error must say."""
    _, _, _, offset_field, lowest = ENTRIES[rpc]
    if kind == "not asked for":
        return answer_with(rpc, 0, 7), "a partition it did not ask for: t-7"
    if kind == "left out":
        return ENTRIES[rpc][0](), "no result for t-0"
    if kind == "twice":
        return answer_with(rpc, 0, 0), "partition t-0 twice"
    if kind == "negative offset":
        below = lowest - 4
        fields: dict[str, Any] = {offset_field: below}
        return answer_with(rpc, 0, **fields), f"{offset_field} {below} for t-0"
    raise AssertionError(kind)


KINDS = ["not asked for", "left out", "twice", "negative offset"]


@pytest.fixture
def broker() -> Iterator[FakeBroker]:
    with fake_broker.running() as fake:
        yield fake


@pytest_asyncio.fixture
async def client(broker: FakeBroker) -> AsyncIterator[BrokerClient]:
    async with BrokerClient(broker.address, request_timeout_ms=10_000) as c:
        yield c


def check_names(exc: BaseException, broker: FakeBroker, rpc: str, what: str) -> None:
    text = str(exc)
    assert broker.address in text, text
    assert rpc in text, text
    assert what in text, text


@pytest.mark.asyncio
@pytest.mark.parametrize("rpc", list(CALLS))
async def test_bytes_that_do_not_parse_are_a_malformed_response(
    broker: FakeBroker, client: BrokerClient, rpc: str
) -> None:
    broker.answer(rpc, GARBAGE)
    with pytest.raises(MalformedResponseError) as caught:
        await CALLS[rpc](client)
    check_names(caught.value, broker, rpc, "do not parse")
    assert isinstance(caught.value, UnknownServerError)  # UNKNOWN_SERVER_ERROR's code
    assert not caught.value.retriable


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("rpc", PARTITIONED)
async def test_impossible_contents_are_a_malformed_response(
    broker: FakeBroker, client: BrokerClient, rpc: str, kind: str
) -> None:
    answer, what = impossible(rpc, kind)
    broker.answer(rpc, answer)
    with pytest.raises(MalformedResponseError) as caught:
        await CALLS[rpc](client)
    check_names(caught.value, broker, rpc, what)


@pytest.mark.asyncio
async def test_a_fetch_answer_with_a_short_topic_id_is_a_malformed_response(
    broker: FakeBroker, client: BrokerClient
) -> None:
    broker.answer("Fetch", answer_with("Fetch", 0, topic_id=b"\x01" * 5))
    with pytest.raises(MalformedResponseError) as caught:
        await CALLS["Fetch"](client)
    check_names(caught.value, broker, "Fetch", "topic_id must be 16 bytes")


@pytest.mark.asyncio
async def test_a_producer_id_below_zero_beside_no_error_is_a_malformed_response(
    broker: FakeBroker, client: BrokerClient
) -> None:
    broker.answer("InitProducerId", bpb.InitProducerIdResponse(producer_id=-1, producer_epoch=0))
    with pytest.raises(MalformedResponseError) as caught:
        await client.init_producer_id()
    check_names(caught.value, broker, "InitProducerId", "producer id -1")


@pytest.mark.asyncio
@pytest.mark.parametrize("rpc", PARTITIONED)
async def test_an_unknown_error_code_is_an_unknown_server_error_naming_it(
    broker: FakeBroker, client: BrokerClient, rpc: str
) -> None:
    broker.answer(rpc, answer_with(rpc, 0, error=UNKNOWN_CODE))
    response = await CALLS[rpc](client)
    (result,) = response.partitions
    assert type(result.error) is UnknownServerError
    check_names(result.error, broker, rpc, "t-0: unknown error code 999 (BRAND_NEW_ERROR)")


@pytest.mark.asyncio
async def test_an_unknown_error_code_of_init_producer_id_is_raised_naming_it(
    broker: FakeBroker, client: BrokerClient
) -> None:
    broker.answer("InitProducerId", bpb.InitProducerIdResponse(error=UNKNOWN_CODE))
    with pytest.raises(UnknownServerError) as caught:
        await client.init_producer_id()
    check_names(caught.value, broker, "InitProducerId", "unknown error code 999")


@pytest.mark.asyncio
async def test_an_acks_0_produce_answers_only_failures(
    broker: FakeBroker, client: BrokerClient
) -> None:
    broker.answer("Produce", bpb.ProduceResponse())
    request = m.ProduceRequest(acks=0, timeout_ms=0, partitions=(m.ProducePartition("t", 0, b"x"),))
    assert (await client.produce(request)).partitions == ()


@pytest.mark.asyncio
async def test_a_failed_call_still_raises_the_grpc_error(
    broker: FakeBroker, client: BrokerClient
) -> None:
    # No scripted answer: the fake fails the call (UNIMPLEMENTED), as a real failure would.
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await CALLS["Fetch"](client)
    assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED


# --- answers that are legitimate stay so ---------------------------------------------------------

NOT_LEADER = common_pb2.ErrorStatus(
    code=NotLeaderOrFollowerError.code, error_name=NotLeaderOrFollowerError.error_name
)


@pytest.mark.asyncio
@pytest.mark.parametrize("rpc", PARTITIONED)
async def test_a_partition_error_beside_offsets_of_none_is_an_answer(
    broker: FakeBroker, client: BrokerClient, rpc: str
) -> None:
    """A broker answers a failed partition with every offset -1 (none), as the checks allow."""
    _, _, _, offset_field, _ = ENTRIES[rpc]
    fields: dict[str, Any] = {offset_field: -1}
    if rpc == "Fetch":
        fields["log_start_offset"] = -1
    broker.answer(rpc, answer_with(rpc, 0, error=NOT_LEADER, **fields))
    response = await CALLS[rpc](client)
    (result,) = response.partitions
    assert type(result.error) is NotLeaderOrFollowerError


def test_a_malformed_fetch_answer_is_raised_while_another_leader_keeps_delivering(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A broker-level error must not wait for a poll that hands out nothing: with a partition
    # on another leader always delivering, it was never raised and its partition never read.
    from consumer_fakes import FakeCluster, FakeFetchStream, consumer_settings

    from replog.client.consumer import Consumer

    fake = FakeCluster()
    fake.install(monkeypatch)
    fake.create("t", partitions=2)  # t-0 on node 0, t-1 on node 1
    fake.append("t", 0, [b"x"])
    fake.append("t", 1, [b"%d" % i for i in range(100)])
    answer = FakeFetchStream.fetch

    async def garbage_from_node0(self: Any, request: Any, *, resend: Any = ()) -> Any:
        if any(p.partition == 0 for p in request.partitions):
            raise MalformedResponseError("garbage from node0")
        return await answer(self, request, resend=resend)

    monkeypatch.setattr(FakeFetchStream, "fetch", garbage_from_node0)

    async def run() -> None:
        async with Consumer(**consumer_settings(fake)) as c:
            c.assign([TopicPartition("t", 0), TopicPartition("t", 1)])
            await c.start()
            for _ in range(50):
                await c.poll(100, max_records=1)
                await asyncio.sleep(0.002)

    with pytest.raises(MalformedResponseError, match="garbage from node0"):
        asyncio.run(run())
