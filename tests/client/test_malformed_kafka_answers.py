"""A broker answer that is not one gives the public clients (Producer, Consumer, Admin) a typed
error naming the broker's address, the API and what was wrong, never an AttributeError, a
silent retry or a made-up result; and they treat that broker as Kafka's client treats a
connection it had to close: the connection is dropped and the metadata marked stale.

Against `FakeKafkaBroker` (a real Kafka listener answering any bytes): a body that does not
decode, and decoded answers with impossible contents (a partition not asked for or left out, a
negative offset beside no error, an error code nobody knows). A malformed InitProducerId
answer is fatal to the idempotent producer, as any InitProducerId error Kafka does not retry.
Answers that look odd but are legitimate (no records, only a control batch, a first batch
beyond the byte limit) must pass the same checks. Last, a consumer raises a malformed answer
from one leader while another keeps delivering.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from replog import Admin, Consumer, Producer, TopicPartition
from replog.errors import (
    CorruptRecordError,
    KafkaTimeoutError,
    MalformedResponseError,
    ReplogError,
    UnknownServerError,
)
from replog.kafka.messages.delete_records_response import (
    DeleteRecordsPartitionResult,
    DeleteRecordsResponse,
    DeleteRecordsTopicResult,
)
from replog.kafka.messages.fetch_response import (
    FetchableTopicResponse,
    FetchResponse,
    PartitionData,
)
from replog.kafka.messages.init_producer_id_response import InitProducerIdResponse
from replog.kafka.messages.list_offsets_response import (
    ListOffsetsPartitionResponse,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from replog.kafka.messages.produce_response import (
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)
from replog.record.builder import build_batch
from replog.testing import FakeKafkaBroker, running_fake_kafka_broker
from replog.wire.kafka_broker_client import KafkaBrokerClient
from tests.eventually import wait_until

GARBAGE = b"\xff\xff\xff\xff\xff"  # no response body of any API decodes from these
T0 = TopicPartition("t", 0)
UNKNOWN_CODE = 999
# Small bounds: a malformed answer wrongly retried ends as a KafkaTimeoutError within
# seconds, not a wait of the default two minutes.
PRODUCER: dict[str, Any] = {
    "delivery_timeout_ms": 3000,
    "request_timeout_ms": 2000,
    "max_block_ms": 3000,
}


def produced(*partitions: int, base_offset: int = 0) -> ProduceResponse:
    return ProduceResponse(
        responses=[
            TopicProduceResponse(
                name="t",
                partition_responses=[
                    PartitionProduceResponse(index=p, base_offset=base_offset) for p in partitions
                ],
            )
        ]
    )


def fetched(
    partition: int = 0,
    *,
    error: int = 0,
    high_watermark: int = 0,
    records: bytes | None = None,
) -> FetchResponse:
    return FetchResponse(
        responses=[
            FetchableTopicResponse(
                topic="t",
                partitions=[
                    PartitionData(
                        partition_index=partition,
                        error_code=error,
                        high_watermark=high_watermark,
                        last_stable_offset=high_watermark,
                        log_start_offset=0,
                        records=records,
                    )
                ],
            )
        ]
    )


def check_names(exc: BaseException, broker: FakeKafkaBroker, api: str, what: str) -> None:
    text = str(exc)
    assert broker.address in text, text
    assert api in text, text
    assert what in text, text


def record_redials(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The addresses whose connections a client drops from now on, in order."""
    redialled: list[str] = []
    reconnect = KafkaBrokerClient.reconnect

    def recording(client: KafkaBrokerClient) -> None:
        redialled.append(client.address)
        reconnect(client)

    monkeypatch.setattr(KafkaBrokerClient, "reconnect", recording)
    return redialled


@pytest.fixture
def broker() -> Iterator[FakeKafkaBroker]:
    with running_fake_kafka_broker() as fake:
        yield fake


@pytest.fixture
def cluster(broker: FakeKafkaBroker) -> FakeKafkaBroker:
    """The fake as a one-broker cluster leading t-0 (Metadata answered properly)."""
    broker.answer("Metadata", broker.metadata("t"))
    broker.answer("InitProducerId", InitProducerIdResponse(producer_id=1, producer_epoch=0))
    return broker


@pytest.fixture
def cluster_broker() -> Iterator[FakeKafkaBroker]:
    """A second fake, answering as a one-broker cluster leading t-0."""
    with running_fake_kafka_broker() as fake:
        fake.answer("Metadata", fake.metadata("t"))
        yield fake


@pytest.mark.parametrize("idempotence", [False, True])
@pytest.mark.parametrize(
    ("kind", "what"),
    [
        ("garbage", "does not decode"),
        ("left out", "no result for t-0"),
        ("not asked for", "a partition it did not ask for: t-3"),
    ],
)
def test_producer_fails_the_batch_with_the_malformed_answer(
    cluster: FakeKafkaBroker, kind: str, what: str, idempotence: bool
) -> None:
    answers: dict[str, Any] = {
        "garbage": GARBAGE,
        "left out": ProduceResponse(),
        "not asked for": produced(0, 3),
    }
    cluster.answer("Produce", answers[kind])
    with Producer(
        bootstrap_servers=cluster.address, enable_idempotence=idempotence, **PRODUCER
    ) as p:
        future = p.send("t", b"v", partition=0)
        with pytest.raises(MalformedResponseError) as caught:
            future.get(timeout=30)
    check_names(caught.value, cluster, "Produce", what)


def test_producer_fails_at_once_on_a_malformed_init_producer_id_answer(
    cluster: FakeKafkaBroker,
) -> None:
    """Fatal, as Kafka's TransactionManager makes an unexpected InitProducerId error: the
    send fails with the typed error long before delivery.timeout.ms (10 minutes here)."""
    cluster.answer("InitProducerId", GARBAGE)
    settings = {**PRODUCER, "delivery_timeout_ms": 600_000}
    p = Producer(bootstrap_servers=cluster.address, **settings)
    try:
        # The send itself raises it once the producer knows (the answer may come first).
        with pytest.raises(MalformedResponseError) as caught:
            p.send("t", b"v", partition=0).get(timeout=30)
    finally:
        p.close(timeout=0)
    check_names(caught.value, cluster, "InitProducerId", "does not decode")


def test_producer_send_names_a_malformed_metadata_answer(broker: FakeKafkaBroker) -> None:
    """A bootstrap address that answers no Metadata fails like an unreachable one: the
    metadata wait ends at max.block.ms, naming what that address answered."""
    broker.answer("Metadata", GARBAGE)
    with (
        Producer(bootstrap_servers=broker.address, enable_idempotence=False, **PRODUCER) as p,
        pytest.raises(KafkaTimeoutError) as caught,
    ):
        p.send("t", b"v")
    check_names(caught.value, broker, "Metadata", "does not decode")


def test_a_bootstrap_address_that_answers_garbage_is_passed_over(
    broker: FakeKafkaBroker, cluster_broker: FakeKafkaBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kafka's client tries the next bootstrap server when one fails; a peer whose answer is
    no answer is such a failure, not the end of the client."""
    broker.answer("Metadata", GARBAGE)
    cluster_broker.answer("Produce", produced(0))
    servers = f"{broker.address},{cluster_broker.address}"
    redialled = record_redials(monkeypatch)
    with Producer(bootstrap_servers=servers, enable_idempotence=False, **PRODUCER) as p:
        metadata = p.send("t", b"v", partition=0).get(timeout=30)
    assert (metadata.topic, metadata.partition, metadata.offset) == ("t", 0, 0)
    assert broker.address in redialled  # its connection dropped, as Kafka closes it


# --- after a malformed answer: the broker is treated like a failed connection -------------------
# Kafka's NetworkClient closes a connection whose bytes are no response (Selector: "Unexpected
# error from ...; closing connection"), and every disconnect requests a metadata update
# (DefaultMetadataUpdater.handleServerDisconnect).


def test_a_malformed_produce_answer_drops_the_connection_and_refreshes_metadata(
    cluster: FakeKafkaBroker,
) -> None:
    cluster.answer("Produce", GARBAGE, produced(0))
    with Producer(bootstrap_servers=cluster.address, enable_idempotence=False, **PRODUCER) as p:
        assert p.partitions_for("t")  # the first metadata, before the bad answer
        asked = cluster.calls["Metadata"]  # read first: the refresh may come at once
        opened = cluster.connections
        with pytest.raises(MalformedResponseError):
            p.send("t", b"v", partition=0).get(timeout=30)
        assert p.send("t", b"w", partition=0).get(timeout=30).offset == 0
        assert cluster.connections > opened  # the produce connection was dialled again
        wait_until(lambda: cluster.calls["Metadata"] > asked, "a metadata refresh")


def test_a_malformed_fetch_answer_drops_the_connection_and_refreshes_metadata(
    cluster: FakeKafkaBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    redialled = record_redials(monkeypatch)
    cluster.answer("Fetch", GARBAGE)
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


def test_consumer_fetches_on_one_connection_until_an_answer_fails(
    cluster: FakeKafkaBroker,
) -> None:
    """A leader's fetches share one connection; after a bad answer it is closed and the next
    fetch dials another."""
    empty = fetched(high_watermark=0)
    cluster.answer("Fetch", empty, empty, empty, GARBAGE, empty)
    consumer = Consumer(bootstrap_servers=cluster.address, request_timeout_ms=2000)
    try:
        consumer.assign([T0])
        consumer.seek(T0, 0)
        failed = False
        opened = cluster.connections

        def fetched_after_the_failure() -> bool:
            nonlocal failed
            try:
                consumer.poll(timeout_ms=100)
            except MalformedResponseError:
                failed = True
            return failed and cluster.calls["Fetch"] >= 6

        wait_until(fetched_after_the_failure, "fetches after the bad answer")
        assert cluster.connections >= opened + 1
    finally:
        consumer.close()


def poll_t0_until_error(cluster: FakeKafkaBroker, polls: int = 5) -> ReplogError:
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


@pytest.mark.parametrize(
    ("answer", "what"),
    [
        (GARBAGE, "does not decode"),
        (fetched(3), "a partition it did not ask for: t-3"),
        (fetched(0, high_watermark=-5), "high_watermark -5 for t-0"),
    ],
    ids=["garbage", "not asked for", "negative offset"],
)
def test_consumer_poll_raises_a_malformed_fetch_answer(
    cluster: FakeKafkaBroker, answer: Any, what: str
) -> None:
    cluster.answer("Fetch", answer)
    error = poll_t0_until_error(cluster)
    assert isinstance(error, MalformedResponseError), repr(error)
    check_names(error, cluster, "Fetch", what)


def test_consumer_poll_raises_an_unknown_fetch_error_code(cluster: FakeKafkaBroker) -> None:
    cluster.answer("Fetch", fetched(0, error=UNKNOWN_CODE))
    error = poll_t0_until_error(cluster)
    assert type(error) is UnknownServerError
    assert "999" in str(error)


def test_consumer_position_names_a_malformed_list_offsets_answer(
    cluster: FakeKafkaBroker,
) -> None:
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
    check_names(caught.value, cluster, "ListOffsets", "does not decode")


NEGATIVE_LIST_OFFSETS = ListOffsetsResponse(
    topics=[
        ListOffsetsTopicResponse(
            name="t", partitions=[ListOffsetsPartitionResponse(partition_index=0, offset=-5)]
        )
    ]
)
NEGATIVE_DELETE_RECORDS = DeleteRecordsResponse(
    topics=[
        DeleteRecordsTopicResult(
            name="t", partitions=[DeleteRecordsPartitionResult(partition_index=0, low_watermark=-5)]
        )
    ]
)


@pytest.mark.parametrize(
    ("api", "answer", "what"),
    [
        ("ListOffsets", GARBAGE, "does not decode"),
        ("ListOffsets", ListOffsetsResponse(), "no result for t-0"),
        ("ListOffsets", NEGATIVE_LIST_OFFSETS, "offset -5 for t-0"),
        ("DeleteRecords", GARBAGE, "does not decode"),
        ("DeleteRecords", NEGATIVE_DELETE_RECORDS, "low_watermark -5 for t-0"),
    ],
)
def test_admin_names_a_malformed_answer(
    cluster: FakeKafkaBroker, api: str, answer: Any, what: str
) -> None:
    cluster.answer(api, answer)
    with (
        Admin(
            bootstrap_servers=cluster.address, request_timeout_ms=2000, default_api_timeout_ms=3000
        ) as admin,
        pytest.raises(MalformedResponseError) as caught,
    ):
        if api == "ListOffsets":
            admin.list_offsets({T0: -1}, timeout_ms=3000)
        else:
            admin.delete_records({T0: 1}, timeout_ms=3000)
    check_names(caught.value, cluster, api, what)


@pytest.mark.parametrize("kind", ["zeros", "a cut batch"])
def test_consumer_poll_raises_records_that_are_not_batches(
    cluster: FakeKafkaBroker, kind: str
) -> None:
    """Record bytes without a whole batch at the position (a broker answers the first batch
    whole, KIP-74): fetching again would get them again."""
    whole = build_batch([(0, None, b"v" * 100, [])])
    records = b"\x00" * 70 if kind == "zeros" else whole[: len(whole) // 2]
    cluster.answer("Fetch", fetched(0, high_watermark=10, records=records))
    error = poll_t0_until_error(cluster)
    assert isinstance(error, CorruptRecordError), repr(error)
    assert "fetch of t-0 at offset 0" in str(error)
    assert "hold no whole record batch" in str(error)


# --- answers that are legitimate stay so ---------------------------------------------------------


def poll_t0(cluster: FakeKafkaBroker, polls: int = 3, **config: Any) -> tuple[list[Any], int]:
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


def test_consumer_takes_an_answer_without_records(cluster: FakeKafkaBroker) -> None:
    cluster.answer("Fetch", fetched(0, high_watermark=0))
    assert poll_t0(cluster) == ([], 0)


def test_consumer_passes_over_a_control_batch(cluster: FakeKafkaBroker) -> None:
    """A control batch holds no records for the consumer, but it is a whole batch: the position
    moves past it, no CorruptRecordError."""
    control = build_batch([(0, b"\x00\x00\x00\x00", b"", [])], is_control=True)
    cluster.answer(
        "Fetch",
        fetched(0, high_watermark=1, records=control),
        fetched(0, high_watermark=1),  # at offset 1: nothing more
    )
    assert poll_t0(cluster) == ([], 1)


def test_consumer_takes_a_first_batch_beyond_its_byte_limit(cluster: FakeKafkaBroker) -> None:
    """KIP-74: the broker answers the first batch whole even when it is larger than
    max.partition.fetch.bytes."""
    batch = build_batch([(0, None, b"v" * 4096, [])])
    cluster.answer(
        "Fetch", fetched(0, high_watermark=1, records=batch), fetched(0, high_watermark=1)
    )
    records, position = poll_t0(cluster, max_partition_fetch_bytes=1024)
    assert [(r.offset, r.value) for r in records] == [(0, b"v" * 4096)]
    assert position == 1


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
