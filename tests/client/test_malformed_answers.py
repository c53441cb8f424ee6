"""A broker answer that is not one gives the caller a typed error naming the broker's address,
the RPC and what was wrong, never an AttributeError, a silent retry or a made-up result.

Against `fake_broker` (a real gRPC server answering any bytes): per Broker RPC, bytes that do
not parse as its response message, and parsed messages with impossible contents (a partition
not asked for, one left out or named twice, a negative offset or producer id beside no error,
a topic id that is not 16 bytes, an error code nobody knows); first through `BrokerClient`,
then through the public clients (Producer, Consumer, Admin) that use it, which also drop that
broker's channel and mark their metadata stale, as Kafka's client does after a connection it
had to close (a malformed InitProducerId answer is fatal to the idempotent producer, as any
InitProducerId error Kafka does not retry). Last, answers that look odd but are legitimate
(a partition's error beside offsets of none, no records, only a control batch, a first batch
beyond the byte limit) must pass the same checks.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import fake_broker
import grpc
import pytest
import pytest_asyncio
from fake_broker import GARBAGE, FakeBroker, record_redials

from replog import Admin, Consumer, Producer, TopicPartition
from replog.errors import (
    CorruptRecordError,
    KafkaTimeoutError,
    MalformedResponseError,
    NotLeaderOrFollowerError,
    ReplogError,
    UnknownServerError,
)
from replog.pb import broker_pb2 as bpb
from replog.pb import common_pb2
from replog.pb import controller_pb2 as cpb
from replog.record.builder import build_batch
from replog.replication import messages as m
from replog.wire.broker_client import BrokerClient
from tests.eventually import wait_until

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


# --- the clients ----------------------------------------------------------------------------------

T0 = TopicPartition("t", 0)
# Small bounds: a malformed answer wrongly retried ends as a KafkaTimeoutError within
# seconds, not a wait of the default two minutes.
PRODUCER: dict[str, Any] = {
    "delivery_timeout_ms": 3000,
    "request_timeout_ms": 2000,
    "max_block_ms": 3000,
}


@pytest.fixture
def cluster(broker: FakeBroker) -> FakeBroker:
    """The fake as a one-broker cluster leading t-0 (Metadata answered properly)."""
    broker.answer("Metadata", broker.metadata("t"))
    broker.answer("InitProducerId", bpb.InitProducerIdResponse(producer_id=1, producer_epoch=0))
    return broker


@pytest.fixture
def cluster_broker() -> Iterator[FakeBroker]:
    """A second fake, answering as a one-broker cluster leading t-0."""
    with fake_broker.running() as fake:
        fake.answer("Metadata", fake.metadata("t"))
        yield fake


@pytest.mark.parametrize("idempotence", [False, True])
@pytest.mark.parametrize("kind", ["garbage", "left out", "not asked for"])
def test_producer_fails_the_batch_with_the_malformed_answer(
    cluster: FakeBroker, kind: str, idempotence: bool
) -> None:
    answers = {
        "garbage": GARBAGE,
        "left out": bpb.ProduceResponse(),
        "not asked for": answer_with("Produce", 0, 3),
    }
    cluster.answer("ProduceStream", answers[kind])
    with Producer(
        bootstrap_servers=cluster.address, enable_idempotence=idempotence, **PRODUCER
    ) as p:
        future = p.send("t", b"v", partition=0)
        with pytest.raises(MalformedResponseError) as caught:
            future.get(timeout=30)
    check_names(caught.value, cluster, "Produce", "t-0")


def test_producer_fails_at_once_on_a_malformed_init_producer_id_answer(
    cluster: FakeBroker,
) -> None:
    """Fatal, as Kafka's TransactionManager makes an unexpected InitProducerId error: the
    send fails with the typed error long before delivery.timeout.ms (10 minutes here)."""
    cluster.answer("InitProducerId", GARBAGE)
    settings = {**PRODUCER, "delivery_timeout_ms": 600_000}
    p = Producer(bootstrap_servers=cluster.address, **settings)
    try:
        future = p.send("t", b"v", partition=0)
        with pytest.raises(MalformedResponseError) as caught:
            future.get(timeout=30)
    finally:
        p.close(timeout=0)
    check_names(caught.value, cluster, "InitProducerId", "do not parse")


def test_producer_send_names_a_malformed_metadata_answer(broker: FakeBroker) -> None:
    """A bootstrap address that is not a replog broker fails like an unreachable one: the
    metadata wait ends at max.block.ms, naming what that address answered."""
    broker.answer("Metadata", GARBAGE)
    with (
        Producer(bootstrap_servers=broker.address, enable_idempotence=False, **PRODUCER) as p,
        pytest.raises(KafkaTimeoutError) as caught,
    ):
        p.send("t", b"v")
    check_names(caught.value, broker, "Metadata", "do not parse")


def test_a_bootstrap_address_that_answers_garbage_is_passed_over(
    broker: FakeBroker, cluster_broker: FakeBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kafka's client tries the next bootstrap server when one fails; a peer that is not a
    replog broker is such a failure, not the end of the client."""
    broker.answer("Metadata", GARBAGE)
    cluster_broker.answer("ProduceStream", answer_with("Produce", 0))
    servers = f"{broker.address},{cluster_broker.address}"
    redialled = record_redials(monkeypatch)
    with Producer(bootstrap_servers=servers, enable_idempotence=False, **PRODUCER) as p:
        metadata = p.send("t", b"v", partition=0).get(timeout=30)
    assert (metadata.topic, metadata.partition, metadata.offset) == ("t", 0, 0)
    assert broker.address in redialled  # its channel dropped, as Kafka closes the connection


# --- after a malformed answer: the broker is treated like a failed connection -------------------
# Kafka's NetworkClient closes a connection whose bytes are no response (Selector: "Unexpected
# error from ...; closing connection"), and every disconnect requests a metadata update
# (DefaultMetadataUpdater.handleServerDisconnect: "The disconnect may be the result of stale
# metadata, so request an update").


def test_a_malformed_produce_answer_drops_the_channel_and_refreshes_metadata(
    cluster: FakeBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    redialled = record_redials(monkeypatch)
    cluster.answer("ProduceStream", GARBAGE, answer_with("Produce", 0))
    with Producer(bootstrap_servers=cluster.address, enable_idempotence=False, **PRODUCER) as p:
        assert p.partitions_for("t")  # the first metadata, before the bad answer
        asked = cluster.calls["Metadata"]  # read first: the refresh may come at once
        with pytest.raises(MalformedResponseError):
            p.send("t", b"v", partition=0).get(timeout=30)
        assert redialled == [cluster.address]
        assert p.send("t", b"w", partition=0).get(timeout=30).offset == 0
        wait_until(lambda: cluster.calls["Metadata"] > asked, "a metadata refresh")


def test_a_malformed_fetch_answer_drops_the_channel_and_refreshes_metadata(
    cluster: FakeBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    redialled = record_redials(monkeypatch)
    cluster.answer("FetchStream", GARBAGE)
    consumer = Consumer(bootstrap_servers=cluster.address, request_timeout_ms=2000)
    try:
        consumer.assign([T0])
        consumer.seek(T0, 0)
        with pytest.raises(MalformedResponseError):  # polls until it comes
            for _ in range(5):
                consumer.poll(timeout_ms=1000)
        assert cluster.address in redialled
        asked = cluster.calls["Metadata"]

        def refreshed() -> bool:  # polls drive the consumer; a poll may return at once
            with contextlib.suppress(MalformedResponseError):
                consumer.poll(timeout_ms=100)
            return cluster.calls["Metadata"] > asked

        wait_until(refreshed, "a metadata refresh after the bad answers")
    finally:
        consumer.close()


def test_consumer_fetches_on_one_stream_until_an_answer_fails(cluster: FakeBroker) -> None:
    """A leader's fetches share one FetchStream call; after a bad answer the call is gone and
    the next fetch opens another."""
    empty = answer_with("Fetch", 0, high_watermark=0)
    cluster.answer("FetchStream", empty, empty, empty, GARBAGE, empty)
    consumer = Consumer(bootstrap_servers=cluster.address, request_timeout_ms=2000)
    try:
        consumer.assign([T0])
        consumer.seek(T0, 0)
        failed = False

        def fetched_after_the_failure() -> bool:
            nonlocal failed
            try:
                consumer.poll(timeout_ms=100)
            except MalformedResponseError:
                failed = True
            return failed and cluster.calls["FetchStream"] >= 6

        wait_until(fetched_after_the_failure, "fetches after the bad answer")
        assert cluster.streams["FetchStream"] == 2
    finally:
        consumer.close()


def poll_t0_until_error(cluster: FakeBroker, polls: int = 5) -> ReplogError:
    """What a consumer of t-0 from offset 0 raises within `polls` polls."""
    consumer = Consumer(bootstrap_servers=cluster.address, request_timeout_ms=2000)
    try:
        consumer.assign([T0])
        consumer.seek(T0, 0)
        for _ in range(polls):
            try:
                consumer.poll(timeout_ms=1000)
            except ReplogError as exc:
                return exc
    finally:
        consumer.close()
    raise AssertionError(f"{polls} polls raised nothing")


@pytest.mark.parametrize("kind", ["garbage", "not asked for", "negative offset"])
def test_consumer_poll_raises_a_malformed_fetch_answer(cluster: FakeBroker, kind: str) -> None:
    answers = {
        "garbage": (GARBAGE, "do not parse"),
        "not asked for": impossible("Fetch", "not asked for"),
        "negative offset": impossible("Fetch", "negative offset"),
    }
    answer, what = answers[kind]
    cluster.answer("FetchStream", answer)
    error = poll_t0_until_error(cluster)
    assert isinstance(error, MalformedResponseError), repr(error)
    check_names(error, cluster, "FetchStream", what)


def test_consumer_poll_raises_an_unknown_fetch_error_code(cluster: FakeBroker) -> None:
    cluster.answer("FetchStream", answer_with("Fetch", 0, error=UNKNOWN_CODE))
    error = poll_t0_until_error(cluster)
    assert type(error) is UnknownServerError
    check_names(error, cluster, "FetchStream", "unknown error code 999")


def test_consumer_position_names_a_malformed_list_offsets_answer(cluster: FakeBroker) -> None:
    cluster.answer("ListOffsets", GARBAGE)
    consumer = Consumer(
        bootstrap_servers=cluster.address, request_timeout_ms=2000, default_api_timeout_ms=3000
    )
    try:
        consumer.assign([T0])
        with pytest.raises(MalformedResponseError) as caught:
            consumer.poll(timeout_ms=2000)
    finally:
        consumer.close()
    check_names(caught.value, cluster, "ListOffsets", "do not parse")


@pytest.mark.parametrize(
    ("rpc", "kind"),
    [
        ("ListOffsets", "garbage"),
        ("ListOffsets", "left out"),
        ("DeleteRecords", "garbage"),
        ("DeleteRecords", "negative offset"),
    ],
)
def test_admin_names_a_malformed_answer(cluster: FakeBroker, rpc: str, kind: str) -> None:
    if kind == "garbage":
        answer, what = GARBAGE, "do not parse"
    else:
        answer, what = impossible(rpc, kind)
    cluster.answer(rpc, answer)
    with (
        Admin(
            bootstrap_servers=cluster.address, request_timeout_ms=2000, default_api_timeout_ms=3000
        ) as admin,
        pytest.raises(MalformedResponseError) as caught,
    ):
        if rpc == "ListOffsets":
            admin.list_offsets({T0: -1}, timeout_ms=3000)
        else:
            admin.delete_records({T0: 1}, timeout_ms=3000)
    check_names(caught.value, cluster, rpc, what)


def test_the_fake_answers_a_metadata_request_like_a_broker(broker: FakeBroker) -> None:
    """The cluster fixture's Metadata answer is what the clients expect (guards the fake)."""
    answer = broker.metadata("t", partitions=2)
    assert isinstance(answer, cpb.MetadataResponse)
    assert [p.leader_id for p in answer.topics[0].partitions] == [0, 0]


@pytest.mark.parametrize("kind", ["zeros", "a cut batch"])
def test_consumer_poll_raises_records_that_are_not_batches(cluster: FakeBroker, kind: str) -> None:
    """Record bytes without a whole batch at the position (a broker answers the first batch
    whole, KIP-74): fetching again would get them again."""
    whole = build_batch([(0, None, b"v" * 100, [])])
    records = b"\x00" * 70 if kind == "zeros" else whole[: len(whole) // 2]
    cluster.answer("FetchStream", answer_with("Fetch", 0, high_watermark=10, records=records))
    error = poll_t0_until_error(cluster)
    assert isinstance(error, CorruptRecordError), repr(error)
    check_names(error, cluster, "fetch of t-0 at offset 0", "hold no whole record batch")


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


def poll_t0(cluster: FakeBroker, polls: int = 3, **config: Any) -> tuple[list[Any], int]:
    """The records a consumer of t-0 from offset 0 gets in `polls` polls, and its position."""
    consumer = Consumer(bootstrap_servers=cluster.address, request_timeout_ms=2000, **config)
    try:
        consumer.assign([T0])
        consumer.seek(T0, 0)
        records: list[Any] = []
        for _ in range(polls):
            records += consumer.poll(timeout_ms=300).get(T0, [])
        return records, consumer.position(T0)
    finally:
        consumer.close()


def test_consumer_takes_an_answer_without_records(cluster: FakeBroker) -> None:
    cluster.answer("FetchStream", answer_with("Fetch", 0, high_watermark=0))
    assert poll_t0(cluster) == ([], 0)


def test_consumer_passes_over_a_control_batch(cluster: FakeBroker) -> None:
    """A control batch holds no records for the consumer, but it is a whole batch: the position
    moves past it, no CorruptRecordError."""
    control = build_batch([(0, b"\x00\x00\x00\x00", b"", [])], is_control=True)
    cluster.answer(
        "FetchStream",
        answer_with("Fetch", 0, high_watermark=1, records=control),
        answer_with("Fetch", 0, high_watermark=1),  # at offset 1: nothing more
    )
    assert poll_t0(cluster) == ([], 1)


def test_consumer_takes_a_first_batch_beyond_its_byte_limit(cluster: FakeBroker) -> None:
    """KIP-74: the broker answers the first batch whole even when it is larger than
    max.partition.fetch.bytes."""
    batch = build_batch([(0, None, b"v" * 4096, [])])
    cluster.answer(
        "FetchStream",
        answer_with("Fetch", 0, high_watermark=1, records=batch),
        answer_with("Fetch", 0, high_watermark=1),
    )
    records, position = poll_t0(cluster, max_partition_fetch_bytes=1024)
    assert [(r.offset, r.value) for r in records] == [(0, b"v" * 4096)]
    assert position == 1


def test_a_malformed_fetch_answer_is_raised_while_another_leader_keeps_delivering(
    cluster: FakeBroker, monkeypatch: pytest.MonkeyPatch
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
