"""KafkaBrokerClient against a scripted Kafka listener: produce requests pipelined in call
order on one connection with the accumulator's bytes as they are, KIP-227 fetch sessions (the
broker's session id and the epochs carried, a session error starting afresh), the calls'
answers in `replication.messages` types and their errors."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from replog.errors import (
    CoordinatorLoadInProgressError,
    MalformedResponseError,
    UnknownTopicOrPartitionError,
)
from replog.kafka.messages.describe_configs_response import (
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
)
from replog.kafka.messages.fetch_request import FetchRequest
from replog.kafka.messages.fetch_response import (
    FetchableTopicResponse,
    FetchResponse,
    PartitionData,
)
from replog.kafka.messages.init_producer_id_response import InitProducerIdResponse
from replog.kafka.messages.produce_request import ProduceRequest
from replog.kafka.messages.produce_response import (
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)
from replog.record.builder import build_batch
from replog.replication import messages as m
from replog.testing import FakeKafkaBroker, running_fake_kafka_broker
from replog.wire.kafka_broker_client import FETCH_SESSION_ID_NOT_FOUND, KafkaBrokerClient
from replog.wire.kafka_connection import KafkaConnections


@pytest.fixture
def broker() -> Iterator[FakeKafkaBroker]:
    with running_fake_kafka_broker() as fake:
        yield fake


def client_of(broker: FakeKafkaBroker) -> tuple[KafkaBrokerClient, KafkaConnections]:
    pool = KafkaConnections(client_id="t", setup_timeout_ms=2000)
    return KafkaBrokerClient(broker.address, pool, request_timeout_ms=2000), pool


def produced(request: Any, version: int) -> ProduceResponse:
    """Each partition asked for appended at an offset equal to its records' length."""
    return ProduceResponse(
        responses=[
            TopicProduceResponse(
                name=topic.name,
                partition_responses=[
                    PartitionProduceResponse(index=p.index, base_offset=len(p.records))
                    for p in topic.partition_data
                ],
            )
            for topic in request.topic_data
        ]
    )


def sent(broker: FakeKafkaBroker, api: str) -> list[Any]:
    return [request for name, request, _ in broker.requests if name == api]


@pytest.mark.asyncio
async def test_produce_requests_go_in_call_order_on_one_connection_bytes_untouched(
    broker: FakeKafkaBroker,
) -> None:
    broker.answer("Produce", produced)
    client, pool = client_of(broker)
    batches = [build_batch([(0, None, b"v" * (i + 1), [])]) for i in range(8)]
    stream = client.produce_stream()
    try:
        answers = await asyncio.gather(
            *(
                stream.produce(m.ProduceRequest(-1, 1000, (m.ProducePartition("t", i % 2, b),)))
                for i, b in enumerate(batches)
            )
        )
    finally:
        await pool.close()
    requests = sent(broker, "Produce")
    assert [bytes(r.topic_data[0].partition_data[0].records) for r in requests] == batches
    assert all(isinstance(r, ProduceRequest) and r.acks == -1 for r in requests)
    assert broker.connections == 1
    assert [a.partitions[0].base_offset for a in answers] == [len(b) for b in batches]
    assert answers[1].partitions[0] == m.ProducePartitionResult("t", 1, None, len(batches[1]))


@pytest.mark.asyncio
async def test_a_produce_partition_error_is_the_result_not_a_failure(
    broker: FakeKafkaBroker,
) -> None:
    broker.answer(
        "Produce",
        ProduceResponse(
            responses=[
                TopicProduceResponse(
                    name="t",
                    partition_responses=[
                        PartitionProduceResponse(
                            index=0, error_code=3, base_offset=-1, error_message="no t-0 here"
                        )
                    ],
                )
            ]
        ),
    )
    client, pool = client_of(broker)
    try:
        answer = await client.produce(
            m.ProduceRequest(-1, 1000, (m.ProducePartition("t", 0, b"x"),))
        )
    finally:
        await pool.close()
    (result,) = answer.partitions
    assert isinstance(result.error, UnknownTopicOrPartitionError)
    assert str(result.error) == "no t-0 here"


def fetch_answer(session_id: int, *partitions: int, error: int = 0) -> FetchResponse:
    return FetchResponse(
        error_code=error,
        session_id=session_id,
        responses=[
            FetchableTopicResponse(
                topic="t",
                partitions=[
                    PartitionData(partition_index=p, high_watermark=5, log_start_offset=0)
                    for p in partitions
                ],
            )
        ]
        if partitions
        else [],
    )


def fetch_of(*offsets: int) -> m.FetchRequest:
    return m.FetchRequest(
        tuple(m.FetchPartition("t", p, offset) for p, offset in enumerate(offsets)), max_wait_ms=0
    )


@pytest.mark.asyncio
async def test_a_fetch_session_carries_the_brokers_id_and_starts_afresh_after_an_error(
    broker: FakeKafkaBroker,
) -> None:
    broker.answer(
        "Fetch",
        fetch_answer(77, 0, 1),
        fetch_answer(77),
        fetch_answer(0, error=FETCH_SESSION_ID_NOT_FOUND),
        fetch_answer(78, 0, 1),
    )
    client, pool = client_of(broker)
    stream = client.fetch_stream(sessions=True)
    try:
        first = await stream.fetch(fetch_of(0, 0))
        second = await stream.fetch(fetch_of(3, 0))  # only t-0 moved
        third = await stream.fetch(fetch_of(4, 0))
        await stream.fetch(fetch_of(4, 0))
    finally:
        await pool.close()
    assert [(r.topic, r.partition, r.high_watermark) for r in first.partitions] == [
        ("t", 0, 5),
        ("t", 1, 5),
    ]
    assert second.partitions == () and third.partitions == ()
    requests = sent(broker, "Fetch")
    assert all(isinstance(r, FetchRequest) for r in requests)
    assert [(r.session_id, r.session_epoch) for r in requests] == [(0, 0), (77, 1), (77, 2), (0, 0)]
    assert [[p.partition for t in r.topics for p in t.partitions] for r in requests] == [
        [0, 1],
        [0],
        [0],
        [0, 1],  # the session was gone: a full request again
    ]
    assert requests[1].topics[0].partitions[0].fetch_offset == 3


@pytest.mark.asyncio
async def test_init_producer_id_raises_the_answers_error(broker: FakeKafkaBroker) -> None:
    broker.answer(
        "InitProducerId",
        InitProducerIdResponse(error_code=CoordinatorLoadInProgressError.code),
        InitProducerIdResponse(producer_id=9, producer_epoch=0),
    )
    client, pool = client_of(broker)
    try:
        with pytest.raises(CoordinatorLoadInProgressError):
            await client.init_producer_id()
        assert await client.init_producer_id() == (9, 0)
    finally:
        await pool.close()


@pytest.mark.asyncio
async def test_topic_configs_are_described_per_topic(broker: FakeKafkaBroker) -> None:
    broker.answer(
        "DescribeConfigs",
        DescribeConfigsResponse(
            results=[
                DescribeConfigsResult(
                    resource_type=2,
                    resource_name="t",
                    configs=[DescribeConfigsResourceResult(name="max.message.bytes", value="99")],
                ),
                DescribeConfigsResult(resource_type=2, resource_name="gone", error_code=3),
            ]
        ),
    )
    client, pool = client_of(broker)
    try:
        configs = await client.topic_configs(["t", "gone"], ["max.message.bytes"])
    finally:
        await pool.close()
    assert configs["t"] == {"max.message.bytes": "99"}
    assert isinstance(configs["gone"], UnknownTopicOrPartitionError)
    (request,) = sent(broker, "DescribeConfigs")
    assert [(r.resource_type, r.resource_name) for r in request.resources] == [
        (2, "t"),
        (2, "gone"),
    ]


# --- answers that cannot be --------------------------------------------------------------------

# Per API: the offset fields of a result that are never below -1 beside no error.
OFFSETS = {
    "Produce": (m.ProducePartitionResult, ("base_offset",)),
    "Fetch": (m.FetchPartitionResult, ("high_watermark", "log_start_offset")),
    "ListOffsets": (m.ListOffsetsPartitionResult, ("offset",)),
    "OffsetForLeaderEpoch": (m.OffsetForLeaderPartitionResult, ("end_offset",)),
    "DeleteRecords": (m.DeleteRecordsPartitionResult, ("low_watermark",)),
}


def result(api: str, partition: int, error: Any = None, offset: int = 0) -> Any:
    kind, fields = OFFSETS[api]
    return kind("t", partition, error, **dict.fromkeys(fields, offset))


@pytest.mark.parametrize("api", list(OFFSETS))
@pytest.mark.parametrize(
    ("kind", "says"),
    [
        ("not asked for", "a partition it did not ask for: t-7"),
        ("left out", "no result for t-0"),
        ("twice", "partition t-0 twice"),
        ("negative offset", "-5 for t-0 beside no error"),
    ],
)
def test_an_answer_that_cannot_be_is_a_malformed_response_naming_broker_and_api(
    api: str, kind: str, says: str
) -> None:
    client = KafkaBrokerClient("b1:9092", KafkaConnections(client_id="t", setup_timeout_ms=1000))
    answers = {
        "not asked for": [result(api, 0), result(api, 7)],
        "left out": [],
        "twice": [result(api, 0), result(api, 0)],
        "negative offset": [result(api, 0, offset=-5)],
    }[kind]
    with pytest.raises(MalformedResponseError) as malformed:
        client.check_results(api, [("t", 0)], answers, OFFSETS[api][1])
    assert f"broker at b1:9092 answered {api} with" in str(malformed.value)
    assert says in str(malformed.value)


@pytest.mark.parametrize("api", list(OFFSETS))
def test_a_partition_error_beside_offsets_of_none_is_an_answer(api: str) -> None:
    """A broker answers a failed partition with every offset -1 (none), as the checks allow."""
    client = KafkaBrokerClient("b1:9092", KafkaConnections(client_id="t", setup_timeout_ms=1000))
    failed = result(api, 0, UnknownTopicOrPartitionError("t-0"), offset=-1)
    client.check_results(api, [("t", 0)], [failed], OFFSETS[api][1])
