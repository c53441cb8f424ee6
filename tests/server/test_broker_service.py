"""BrokerService over a real grpc.aio server on 127.0.0.1:0, in front of a fake replica
manager that records what it was asked: every malformed input is a per-partition Kafka error
or a failed call naming what was wrong (never a crash), acks=0 aborts when a partition failed,
oversize requests are refused, Metadata comes from the image, and the broker refuses data
requests until its logs are recovered."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import grpc
import pytest
import pytest_asyncio

from quorum.metadata.image import MetadataImage
from replog.errors import (
    ClientClosedError,
    CorruptRecordError,
    InvalidRequiredAcksError,
    InvalidTopicError,
    KafkaError,
    KafkaStorageError,
    NetworkError,
    NotLeaderOrFollowerError,
    RequestTimedOutError,
    UnknownTopicOrPartitionError,
)
from replog.pb import broker_pb2 as pb
from replog.pb import broker_pb2_grpc
from replog.record import build_batch
from replog.replication import messages as m
from replog.replication.fetch_session import LeaderFetchSession
from replog.server import broker_service
from replog.server.broker_service import BrokerService, add_broker_service
from replog.server.repeat_reads import RepeatReads
from replog.server.tolerant_service import Refused
from replog.wire import broker_codec as codec
from replog.wire import redialing_channel
from replog.wire.broker_client import BrokerClient, ProduceStream
from tests.eventually import eventually
from tests.metadata.metadata_helpers import (
    bootstrapped,
    create_topic,
    register,
    replayed,
    topic_id,
)

BATCH = build_batch([(0, b"k", b"v", ())])


@dataclass
class FakeReplicaManager:
    """Answers every partition with success (or `fail` for a named one) and records calls."""

    fail: dict[tuple[str, int], KafkaError] = field(default_factory=dict)
    raise_error: BaseException | None = None
    calls: list[Any] = field(default_factory=list)
    # Produce: seconds to wait before answering a partition (as acks=all waits for the HW),
    # and how many calls the manager had had when it answered each.
    delays: dict[tuple[str, int], float] = field(default_factory=dict)
    calls_when_answered: list[int] = field(default_factory=list)
    # Fetch: what every partition's answer carries.
    records: bytes = BATCH
    high_watermark: int = 1

    def _check(self, request: Any) -> None:
        self.calls.append(request)
        if self.raise_error is not None:
            raise self.raise_error

    async def _delay(self, partitions: Iterable[m.ProducePartition | m.FetchPartition]) -> None:
        delay = max((self.delays.get((p.topic, p.partition), 0.0) for p in partitions), default=0.0)
        if delay:
            await asyncio.sleep(delay)

    async def produce(self, request: m.ProduceRequest) -> m.ProduceResponse:
        self._check(request)
        await self._delay(request.partitions)
        self.calls_when_answered.append(len(self.calls))
        results = tuple(
            m.ProducePartitionResult(
                p.topic,
                p.partition,
                self.fail.get((p.topic, p.partition)),
                base_offset=10,
                log_start_offset=0,
            )
            for p in request.partitions
        )
        if request.acks == m.ACKS_NONE:  # as the replica manager: only the failed ones
            results = tuple(r for r in results if r.error is not None)
        return m.ProduceResponse(results)

    async def fetch_or_wait(
        self, request: m.FetchRequest, repeats: RepeatReads | None = None, session: object = None
    ) -> m.FetchResponse:
        self._check(request)
        await self._delay(request.partitions)
        return m.FetchResponse(
            tuple(
                m.FetchPartitionResult(
                    p.topic,
                    p.partition,
                    self.fail.get((p.topic, p.partition)),
                    high_watermark=self.high_watermark,
                    records=self.records,
                    topic_id=p.topic_id,
                )
                for p in request.partitions
            )
        )

    def list_offsets(self, request: m.ListOffsetsRequest) -> m.ListOffsetsResponse:
        self._check(request)
        return m.ListOffsetsResponse(
            tuple(
                m.ListOffsetsPartitionResult(p.topic, p.partition, offset=7)
                for p in request.partitions
            )
        )

    def offsets_for_leader_epoch(
        self, request: m.OffsetsForLeaderEpochRequest
    ) -> m.OffsetsForLeaderEpochResponse:
        self._check(request)
        return m.OffsetsForLeaderEpochResponse(
            tuple(
                m.OffsetForLeaderPartitionResult(p.topic, p.partition, None, 3, 40)
                for p in request.partitions
            )
        )

    async def delete_records(self, request: m.DeleteRecordsRequest) -> m.DeleteRecordsResponse:
        self._check(request)
        return m.DeleteRecordsResponse(
            tuple(
                m.DeleteRecordsPartitionResult(p.topic, p.partition, None, p.offset)
                for p in request.partitions
            )
        )


@dataclass
class Harness:
    service: BrokerService
    rm: FakeReplicaManager
    client: BrokerClient
    address: str
    storage_errors: list[KafkaStorageError]
    server: grpc.aio.Server


IMAGE = replayed(
    bootstrapped(),
    register(1, 10, fenced=False),
    register(2, 11, fenced=False),
    *create_topic("orders", topic_id(5), (1, 2)),
)


@pytest_asyncio.fixture
async def harness() -> AsyncIterator[Harness]:
    rm = FakeReplicaManager()
    storage_errors: list[KafkaStorageError] = []
    service = BrokerService(
        1,
        cluster_id="c1",
        image=lambda: IMAGE,
        controller_id=lambda: 3,
        replica_manager=rm,
        request_bytes_max=4096,
        on_storage_error=storage_errors.append,
    )
    server = grpc.aio.server()
    add_broker_service(service, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    address = f"127.0.0.1:{port}"
    client = BrokerClient(address, request_timeout_ms=5000)
    try:
        yield Harness(service, rm, client, address, storage_errors, server)
    finally:
        await client.close()
        await server.stop(grace=None)


def produce(*partitions: tuple[str, int, bytes], acks: int = -1) -> m.ProduceRequest:
    return m.ProduceRequest(acks, 1000, tuple(m.ProducePartition(*p) for p in partitions))


@pytest.mark.asyncio
async def test_produce_goes_to_the_replica_manager_and_back(harness: Harness) -> None:
    response = await harness.client.produce(produce(("orders", 0, BATCH), ("orders", 1, BATCH)))
    assert [(r.topic, r.partition, r.error, r.base_offset) for r in response.partitions] == [
        ("orders", 0, None, 10),
        ("orders", 1, None, 10),
    ]
    (call,) = harness.rm.calls
    assert call.partitions[0].records == BATCH  # the bytes, untouched
    assert 0 < call.timeout_ms <= 1000


@pytest.mark.asyncio
async def test_malformed_partitions_get_their_own_errors_and_the_rest_goes_on(
    harness: Harness,
) -> None:
    response = await harness.client.produce(
        produce(
            ("bad topic!", 0, BATCH),
            ("orders", -1, BATCH),
            ("orders", 0, b"not a batch at all, just some bytes that are long enough" * 2),
            ("orders", 1, BATCH[:-3]),
            ("orders", 2, BATCH),
        )
    )
    errors = [r.error for r in response.partitions]
    assert isinstance(errors[0], InvalidTopicError) and "bad topic!" in str(errors[0])
    assert isinstance(errors[1], UnknownTopicOrPartitionError) and "orders--1" in str(errors[1])
    assert isinstance(errors[2], CorruptRecordError) and "orders-0" in str(errors[2])
    assert isinstance(errors[3], CorruptRecordError) and "orders-1" in str(errors[3])
    assert errors[4] is None
    (call,) = harness.rm.calls
    assert [(p.topic, p.partition) for p in call.partitions] == [("orders", 2)]


class CallerDeadline:
    """A gRPC call's context as the service reads it: the time the caller still waits."""

    def __init__(self, remaining_s: float | None) -> None:
        self.remaining_s = remaining_s

    def time_remaining(self) -> float | None:
        return self.remaining_s

    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise AssertionError(f"aborted: {code} {details}")


@pytest.mark.asyncio
async def test_an_acks_all_produce_waits_no_longer_than_its_callers_deadline(
    harness: Harness,
) -> None:
    # The core takes the request's own timeout (the Kafka listener's call); the gRPC method
    # cuts it to end a margin before the caller's deadline.
    long_wait = replace(produce(("orders", 0, BATCH)), timeout_ms=30_000)
    await harness.service.Produce(long_wait, CallerDeadline(0.5))
    await harness.service.Produce(long_wait, CallerDeadline(None))
    await harness.service.produce(long_wait)
    assert [call.timeout_ms for call in harness.rm.calls] == [480, 30_000, 30_000]


@pytest.mark.asyncio
async def test_invalid_acks_fail_every_partition_without_reaching_the_manager(
    harness: Harness,
) -> None:
    response = await harness.client.produce(produce(("orders", 0, BATCH), acks=2))
    (result,) = response.partitions
    assert isinstance(result.error, InvalidRequiredAcksError)
    assert "orders-0: acks=2" in str(result.error)
    assert harness.rm.calls == []


@pytest.mark.asyncio
async def test_acks_zero_answers_empty_or_aborts_naming_the_failed_partition(
    harness: Harness,
) -> None:
    ok = await harness.client.produce(produce(("orders", 0, BATCH), acks=0))
    assert ok.partitions == ()
    harness.rm.fail[("orders", 1)] = NotLeaderOrFollowerError("orders-1: broker 1 is not leader")
    with pytest.raises(grpc.aio.AioRpcError) as failure:
        await harness.client.produce(produce(("orders", 0, BATCH), ("orders", 1, BATCH), acks=0))
    assert failure.value.code() == grpc.StatusCode.ABORTED
    assert "orders-1" in (failure.value.details() or "")
    assert "NOT_LEADER_OR_FOLLOWER" in (failure.value.details() or "")
    with pytest.raises(grpc.aio.AioRpcError) as garbage:
        await harness.client.produce(produce(("orders", 0, b"garbage" * 10), acks=0))
    assert garbage.value.code() == grpc.StatusCode.ABORTED


@pytest.mark.asyncio
async def test_an_oversize_request_is_refused_naming_size_and_limit(harness: Harness) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as failure:
        await harness.client.produce(produce(("orders", 0, BATCH * 200)))
    assert failure.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "socket.request.max.bytes (4096)" in (failure.value.details() or "")
    assert harness.rm.calls == []


@pytest.mark.asyncio
async def test_a_partition_named_twice_is_an_invalid_argument(harness: Harness) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as failure:
        await harness.client.produce(produce(("orders", 0, BATCH), ("orders", 0, BATCH)))
    assert failure.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "orders-0 more than once" in (failure.value.details() or "")


@pytest.mark.asyncio
async def test_fetch_garbage_is_an_invalid_argument_naming_the_field(harness: Harness) -> None:
    channel = grpc.aio.insecure_channel(harness.address)
    stub = broker_pb2_grpc.BrokerStub(channel)  # type: ignore[no-untyped-call]
    try:
        await _send_garbage(stub)
    finally:
        await channel.close()


async def _send_garbage(stub: Any) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as bad_id:
        await stub.Fetch(
            pb.FetchRequest(topics=[pb.FetchTopic(topic="orders", topic_id=b"xyz")]), timeout=5
        )
    assert bad_id.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "topic_id" in (bad_id.value.details() or "")
    with pytest.raises(grpc.aio.AioRpcError) as bad_isolation:
        await stub.Fetch(pb.FetchRequest(isolation_level=5), timeout=5)
    assert bad_isolation.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "isolation_level 5" in (bad_isolation.value.details() or "")
    with pytest.raises(grpc.aio.AioRpcError) as list_isolation:
        await stub.ListOffsets(pb.ListOffsetsRequest(isolation_level=9), timeout=5)
    assert list_isolation.value.code() == grpc.StatusCode.INVALID_ARGUMENT


@pytest.mark.asyncio
async def test_fetch_with_a_bad_partition_answers_at_once_with_the_rest(
    harness: Harness,
) -> None:
    request = m.FetchRequest(
        (
            m.FetchPartition("orders", 0, 0, topic_id=topic_id(5)),
            m.FetchPartition("orders", -2, 0),
        ),
        max_wait_ms=500,
    )
    response = await harness.client.fetch(request)
    good, bad = response.partitions
    assert good.error is None and good.records == BATCH and good.topic_id == topic_id(5)
    assert isinstance(bad.error, UnknownTopicOrPartitionError)
    (call,) = harness.rm.calls
    assert call.max_wait_ms == 0


@pytest.mark.asyncio
async def test_the_other_calls_go_through(harness: Harness) -> None:
    offsets = await harness.client.list_offsets(
        m.ListOffsetsRequest((m.ListOffsetsPartition("orders", 0, m.LATEST_TIMESTAMP),))
    )
    assert offsets.partitions[0].offset == 7
    epochs = await harness.client.offsets_for_leader_epoch(
        m.OffsetsForLeaderEpochRequest((m.OffsetForLeaderPartition("orders", 0, 3),))
    )
    assert epochs.partitions[0].end_offset == 40
    deleted = await harness.client.delete_records(
        m.DeleteRecordsRequest((m.DeleteRecordsPartition("orders", 0, 5),), timeout_ms=100)
    )
    assert deleted.partitions[0].low_watermark == 5
    bad = await harness.client.delete_records(
        m.DeleteRecordsRequest((m.DeleteRecordsPartition("..", 0, 5),))
    )
    assert isinstance(bad.partitions[0].error, InvalidTopicError)


@pytest.mark.asyncio
async def test_metadata_comes_from_the_image(harness: Harness) -> None:
    response = await harness.client.metadata()
    assert response.cluster_id == "c1" and response.controller_id == 3
    assert [b.broker_id for b in response.brokers] == [1, 2]
    assert [t.name for t in response.topics] == ["orders"]
    assert response.topics[0].partitions[0].leader_id == 1


@pytest.mark.asyncio
async def test_a_storage_error_is_reported_and_fails_the_call(harness: Harness) -> None:
    harness.rm.raise_error = KafkaStorageError("log dir /x: disk on fire")
    with pytest.raises(grpc.aio.AioRpcError) as failure:
        await harness.client.produce(produce(("orders", 0, BATCH)))
    assert failure.value.code() == grpc.StatusCode.UNAVAILABLE
    assert [str(e) for e in harness.storage_errors] == ["log dir /x: disk on fire"]


@pytest.mark.asyncio
async def test_a_kafka_error_raised_by_the_manager_becomes_every_partitions_error(
    harness: Harness,
) -> None:
    harness.rm.raise_error = NotLeaderOrFollowerError("nope")
    response = await harness.client.produce(produce(("orders", 0, BATCH), ("orders", 1, BATCH)))
    assert all(isinstance(r.error, NotLeaderOrFollowerError) for r in response.partitions)


@pytest.mark.asyncio
async def test_an_unexpected_error_is_internal_and_the_server_goes_on(harness: Harness) -> None:
    harness.rm.raise_error = RuntimeError("bug")
    with pytest.raises(grpc.aio.AioRpcError) as failure:
        await harness.client.produce(produce(("orders", 0, BATCH)))
    assert failure.value.code() == grpc.StatusCode.INTERNAL
    assert "RuntimeError: bug" in (failure.value.details() or "")
    harness.rm.raise_error = None
    again = await harness.client.produce(produce(("orders", 0, BATCH)))
    assert again.partitions[0].error is None


@pytest.mark.asyncio
async def test_data_requests_wait_for_the_replica_manager_metadata_does_not() -> None:
    service = BrokerService(1, cluster_id="c1", image=lambda: MetadataImage.EMPTY)
    server = grpc.aio.server()
    add_broker_service(service, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    client = BrokerClient(f"127.0.0.1:{port}", request_timeout_ms=5000)
    try:
        with pytest.raises(grpc.aio.AioRpcError) as failure:
            await client.produce(produce(("orders", 0, BATCH)))
        assert failure.value.code() == grpc.StatusCode.UNAVAILABLE
        assert "not recovered" in (failure.value.details() or "")
        assert (await client.metadata()).topics == []
        stream = client.fetch_stream()
        fetch = m.FetchRequest((m.FetchPartition("orders", 0, 0),))
        with pytest.raises(grpc.aio.AioRpcError) as streamed:
            await stream.fetch(fetch)
        assert streamed.value.code() == grpc.StatusCode.UNAVAILABLE
        assert "not recovered" in (streamed.value.details() or "")
        service.attach(FakeReplicaManager())
        response = await client.produce(produce(("orders", 0, BATCH)))
        assert response.partitions[0].error is None
        assert (await stream.fetch(fetch)).partitions[0].records == BATCH
        stream.close()
    finally:
        await client.close()
        await server.stop(grace=None)


@pytest.mark.asyncio
async def test_the_client_fails_fast_on_a_dead_broker() -> None:
    client = BrokerClient("127.0.0.1:1", request_timeout_ms=5000)
    try:
        with pytest.raises(grpc.aio.AioRpcError) as failure:
            await client.metadata()
        assert failure.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        await client.close()


@pytest.mark.asyncio
@pytest.mark.parametrize("method", ["Produce", "Fetch", "ListOffsets", "DeleteRecords", "Metadata"])
async def test_bytes_that_are_no_message_are_an_invalid_argument(
    harness: Harness, method: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with grpc.aio.insecure_channel(harness.address) as channel:
        call = channel.unary_unary(f"/replog.pb.broker.Broker/{method}")
        with pytest.raises(grpc.aio.AioRpcError) as failure:
            await call(b"\xff" * 64, timeout=5)
    assert failure.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "not a" in (failure.value.details() or "")
    assert "Traceback" not in caplog.text
    assert harness.rm.calls == []


@pytest.mark.asyncio
async def test_a_storage_error_answered_per_partition_is_reported_too(harness: Harness) -> None:
    harness.rm.fail[("orders", 0)] = KafkaStorageError("orders-0: log dir /x: EIO")
    response = await harness.client.produce(produce(("orders", 0, BATCH)))
    assert isinstance(response.partitions[0].error, KafkaStorageError)
    assert [str(e) for e in harness.storage_errors] == ["orders-0: log dir /x: EIO"]


# --- FetchStream: Fetch requests one after another on one call --------------------------------


async def stream_refusal(harness: Harness, rpc: str, message: bytes) -> grpc.aio.AioRpcError:
    """The error that ends a new call of the stream `rpc` whose first message is `message`."""
    async with grpc.aio.insecure_channel(harness.address) as channel:
        call = channel.stream_stream(f"/replog.pb.broker.Broker/{rpc}")()
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            # A service that ends the call at once may do so before the write is sent: then
            # the write raises the refusal, else the read does.
            await call.write(message)
            await call.read()
    return refused.value


@pytest.mark.asyncio
async def test_a_fetch_stream_answers_each_request_in_turn_as_fetch_does(harness: Harness) -> None:
    stream = harness.client.fetch_stream()
    try:
        for offset in (0, 5, 9):
            request = m.FetchRequest(
                (
                    m.FetchPartition("orders", 0, offset, topic_id=topic_id(5)),
                    m.FetchPartition("orders", -2, 0),
                ),
                replica_id=2,
                max_wait_ms=500,
            )
            good, bad = (await stream.fetch(request)).partitions
            assert good.error is None and good.records == BATCH
            assert isinstance(bad.error, UnknownTopicOrPartitionError)
        # Every answer came from the manager, each with its own request (and, as for Fetch, no
        # wait for a request with a bad partition).
        assert [c.partitions[0].fetch_offset for c in harness.rm.calls] == [0, 5, 9]
        assert {c.max_wait_ms for c in harness.rm.calls} == {0}
    finally:
        stream.close()


@pytest.mark.asyncio
async def test_an_open_fetch_stream_ends_with_unavailable_when_the_broker_stops_serving(
    harness: Harness,
) -> None:
    # A broker stopping on a storage error has followers' and consumers' FetchStream calls
    # open; the server's stop would cancel them after its grace period, which gRPC logs as
    # unhandled CancelledError tracebacks. As for ProduceStream, stopping to serve
    # (attach(None), before the server stops) ends the call itself.
    stream = harness.client.fetch_stream()
    try:
        request = m.FetchRequest((m.FetchPartition("orders", 0, 0, topic_id=topic_id(5)),))
        assert (await stream.fetch(request)).partitions[0].error is None
        call = stream._call
        assert call is not None
        harness.service.attach(None)
        assert await asyncio.wait_for(call.code(), 5) == grpc.StatusCode.UNAVAILABLE
        assert await call.details() == "broker 1: the broker is stopping"
    finally:
        stream.close()


@pytest.mark.asyncio
async def test_a_stream_opened_after_the_broker_stopped_serving_ends_at_once(
    harness: Harness,
) -> None:
    # Streams opened after attach(None) are told too: otherwise a later one could sit idle
    # until the server's stop cancelled it, with the traceback that comes with that.
    harness.service.attach(None)
    for rpc in ("FetchStream", "ProduceStream"):
        refused = await stream_refusal(harness, rpc, b"")
        assert refused.code() == grpc.StatusCode.UNAVAILABLE
        assert refused.details() == "broker 1: the broker is stopping"


@pytest.mark.asyncio
async def test_a_fetch_session_sends_changes_and_answers_news_only(harness: Harness) -> None:
    stream = harness.client.fetch_stream(sessions=True)
    rm = harness.rm
    orders = topic_id(5)

    def fetch(*offsets: int) -> m.FetchRequest:
        entries = (m.FetchPartition("orders", p, o, topic_id=orders) for p, o in enumerate(offsets))
        return m.FetchRequest(tuple(entries), replica_id=2, max_wait_ms=0)

    try:
        full = await stream.fetch(fetch(0, 0, 0))
        assert [r.partition for r in full.partitions] == [0, 1, 2]
        assert rm.calls[-1].session_epoch == 0
        rm.records = b""  # nothing new: the next answer is empty, the manager still reads all
        quiet = await stream.fetch(fetch(0, 0, 0))
        assert quiet.partitions == ()
        assert [p.partition for p in rm.calls[-1].partitions] == [0, 1, 2]
        assert rm.calls[-1].session_epoch == 1
        # Partition 1 moved on and partition 2 backs off (left out): the leader follows, and
        # answers the entry sent in full (its fetcher may know nothing of it).
        moved = await stream.fetch(fetch(0, 4))
        assert [r.partition for r in moved.partitions] == [1]
        assert [(p.partition, p.fetch_offset) for p in rm.calls[-1].partitions] == [(0, 0), (1, 4)]
        rm.high_watermark = 2
        news = await stream.fetch(fetch(0, 4))
        assert [(r.partition, r.high_watermark) for r in news.partitions] == [(0, 2), (1, 2)]
        # A failed fetch ends the call and the session: the next one is full again.
        rm.raise_error = KafkaStorageError("log dir /x: EIO")
        with pytest.raises(grpc.aio.AioRpcError):
            await stream.fetch(fetch(0, 4))
        rm.raise_error = None
        again = await stream.fetch(fetch(0, 4))
        assert [r.partition for r in again.partitions] == [0, 1]
        assert rm.calls[-1].session_epoch == 0
    finally:
        stream.close()


@pytest.mark.asyncio
async def test_a_session_opened_with_more_partitions_than_a_round_reads_gets_them_over_rounds(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A follower restarting against a leader of more partitions than a bounded round reads
    # (500): the leader answers the first, full request with the first round's partitions only.
    # That answer is the session's, not a malformed one: were it refused, every new call would
    # get the same first round, and the follower would never fetch the rest.
    monkeypatch.setattr(
        broker_service, "LeaderFetchSession", partial(LeaderFetchSession, round_partitions=2)
    )
    harness.rm.records = b""  # caught up: no answer moves a partition in the session's order
    stream = harness.client.fetch_stream(sessions=True)
    entries = tuple(m.FetchPartition("orders", p, 0, topic_id=topic_id(5)) for p in range(5))
    request = m.FetchRequest(entries, replica_id=2, max_wait_ms=0)
    try:
        answered = []
        for _ in range(3):
            answered.append([r.partition for r in (await stream.fetch(request)).partitions])
        assert answered == [[0, 1], [2, 3], [4]]
        assert [c.session_epoch for c in harness.rm.calls] == [0, 1, 2]  # one session
    finally:
        stream.close()


@pytest.mark.asyncio
async def test_fetch_session_epochs_out_of_turn_or_on_a_unary_fetch_are_refused(
    harness: Harness,
) -> None:
    out_of_turn = await stream_refusal(
        harness, "FetchStream", pb.FetchRequest(replica_id=2, session_epoch=3).SerializeToString()
    )
    assert out_of_turn.code() == grpc.StatusCode.FAILED_PRECONDITION
    expected = "INVALID_FETCH_SESSION_EPOCH: fetch session epoch 3 on this FetchStream call"
    assert f"{expected}, which expects 0" in (out_of_turn.details() or "")
    with pytest.raises(grpc.aio.AioRpcError) as unary:
        await harness.client._call("Fetch", pb.FetchRequest(replica_id=2, session_epoch=0), 1000)
    assert unary.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "fetch sessions live on a FetchStream call" in (unary.value.details() or "")
    assert harness.rm.calls == []


@pytest.mark.asyncio
async def test_a_refused_request_ends_the_stream_with_fetchs_status_and_the_next_fetch_reopens(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    bad_isolation = await stream_refusal(
        harness, "FetchStream", pb.FetchRequest(isolation_level=5).SerializeToString()
    )
    assert bad_isolation.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "isolation_level 5" in (bad_isolation.details() or "")
    undecodable = await stream_refusal(harness, "FetchStream", b"\xff" * 64)
    assert undecodable.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "FetchStream: the 64 request bytes are not a" in (undecodable.details() or "")
    assert "Traceback" not in caplog.text
    assert harness.rm.calls == []
    # The client's stream: a failed fetch ends its call; the next one opens another.
    stream = harness.client.fetch_stream()
    try:
        harness.rm.raise_error = KafkaStorageError("log dir /x: EIO")
        with pytest.raises(grpc.aio.AioRpcError) as storage:
            await stream.fetch(m.FetchRequest((m.FetchPartition("orders", 0, 0),)))
        assert storage.value.code() == grpc.StatusCode.UNAVAILABLE
        harness.rm.raise_error = None
        answer = await stream.fetch(m.FetchRequest((m.FetchPartition("orders", 0, 0),)))
        assert answer.partitions[0].records == BATCH
    finally:
        stream.close()


@pytest.mark.asyncio
async def test_a_fetch_stream_answer_late_past_its_wait_and_the_request_timeout_fails_and_reopens(
    harness: Harness,
) -> None:
    client = BrokerClient(harness.address, request_timeout_ms=100)
    stream = client.fetch_stream()
    request = m.FetchRequest((m.FetchPartition("orders", 0, 0),), max_wait_ms=50)
    try:
        harness.rm.delays = {("orders", 0): 5.0}
        began = time.monotonic()
        with pytest.raises(RequestTimedOutError) as late:
            await stream.fetch(request)
        assert 0.14 <= time.monotonic() - began < 2  # max_wait_ms + request_timeout_ms
        assert f"broker at {harness.address} sent no FetchStream answer within 150 ms" in str(
            late.value
        )
        # The late call was cancelled; the next fetch opens another and is answered.
        harness.rm.delays = {}
        assert (await stream.fetch(request)).partitions[0].records == BATCH
    finally:
        stream.close()
        await client.close()


@pytest.mark.asyncio
async def test_a_fetch_stream_moves_to_the_new_channel_when_the_client_dropped_the_old_one(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Another call's UNAVAILABLE drops the client's channel; the dropped one closes after a
    # grace period (none here) and takes any call still open on it along.
    monkeypatch.setattr(redialing_channel, "REPLACED_CHANNEL_GRACE_S", 0)
    stream = harness.client.fetch_stream()
    request = m.FetchRequest((m.FetchPartition("orders", 0, 0),), replica_id=2)
    try:
        assert (await stream.fetch(request)).partitions[0].records == BATCH
        harness.client.reconnect()
        await asyncio.sleep(0.2)  # the old channel's close has run
        assert (await stream.fetch(request)).partitions[0].records == BATCH
        assert len(harness.rm.calls) == 2
    finally:
        stream.close()


@pytest.mark.asyncio
async def test_a_stream_cut_while_idle_fails_with_the_calls_status_and_redials(
    harness: Harness,
) -> None:
    # The broker goes away between two fetches: the next fetch is the call's UNAVAILABLE, as a
    # unary Fetch would be (a consumer backs off and retries it), not "the end of the stream",
    # and the client drops the channel.
    stream = harness.client.fetch_stream()
    request = m.FetchRequest((m.FetchPartition("orders", 0, 0),))
    try:
        assert (await stream.fetch(request)).partitions[0].records == BATCH
        await harness.server.stop(grace=None)
        # Idle: the call ends with the connection, before the next fetch writes on it (a write
        # that races the end inside gRPC is INTERNAL instead, as test_replica_fetcher shows).
        deadline = time.monotonic() + 5
        while not stream._call.done() and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        with pytest.raises(grpc.aio.AioRpcError) as cut:
            await stream.fetch(request)
        assert cut.value.code() == grpc.StatusCode.UNAVAILABLE
        assert harness.client._channel.generation == 1
    finally:
        stream.close()


# --- ProduceStream: Produce requests pipelined on one call ------------------------------------


def one(partition: int, *, acks: int = -1, records: bytes = BATCH) -> m.ProduceRequest:
    return produce(("orders", partition, records), acks=acks)


@pytest_asyncio.fixture
async def stream(harness: Harness) -> AsyncIterator[ProduceStream]:
    """A ProduceStream to the harness's broker, closed after the test."""
    opened = harness.client.produce_stream()
    yield opened
    opened.close()


@pytest.mark.asyncio
async def test_a_produce_stream_appends_in_the_order_sent_and_answers_in_that_order(
    harness: Harness,
    stream: ProduceStream,
) -> None:
    # The first request waits longest: pipelined, every request reaches the manager before the
    # first is answered, in the order sent; each answer still goes to its own request.
    harness.rm.delays = {("orders", p): 0.05 * (5 - p) for p in range(6)}
    answers = await asyncio.gather(*(stream.produce(one(p)) for p in range(6)))
    assert [a.partitions[0].partition for a in answers] == list(range(6))
    assert [a.partitions[0].base_offset for a in answers] == [10] * 6
    assert [c.partitions[0].partition for c in harness.rm.calls] == list(range(6))
    assert harness.rm.calls_when_answered[0] == 6
    assert all(0 < c.timeout_ms <= 1000 for c in harness.rm.calls)
    # The call stays open for the next requests.
    call = stream._call
    assert (await stream.produce(one(1))).partitions[0].error is None
    assert stream._call is call and stream.in_flight == 0


@pytest.mark.asyncio
async def test_a_refused_produce_ends_the_stream_after_the_answers_before_it(
    harness: Harness, stream: ProduceStream, caplog: pytest.LogCaptureFixture
) -> None:
    # Partition 0 is answered; the request naming a partition twice ends the call with
    # Produce's status, and the one sent after it fails with it unappended.
    harness.rm.delays = {("orders", 0): 0.1}
    twice = produce(("orders", 1, BATCH), ("orders", 1, BATCH))
    first, refused, after = await asyncio.gather(
        stream.produce(one(0)),
        stream.produce(twice),
        stream.produce(one(2)),
        return_exceptions=True,
    )
    assert isinstance(first, m.ProduceResponse) and first.partitions[0].error is None
    assert isinstance(refused, grpc.aio.AioRpcError)
    assert refused.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "names orders-1 more than once" in (refused.details() or "")
    # Not appended, so not refused: retriable, as after a lost connection.
    assert isinstance(after, NetworkError), after
    assert "ended (INVALID_ARGUMENT) on an earlier request" in str(after)
    assert [c.partitions[0].partition for c in harness.rm.calls] == [0]
    # The next request opens a new call.
    assert (await stream.produce(one(2))).partitions[0].error is None
    stream.close()
    assert "Traceback" not in caplog.text


@pytest.mark.asyncio
async def test_produce_stream_garbage_oversize_and_failed_acks_zero_end_the_call(
    harness: Harness, stream: ProduceStream, caplog: pytest.LogCaptureFixture
) -> None:
    undecodable = await stream_refusal(harness, "ProduceStream", b"\xff" * 64)
    assert undecodable.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "ProduceStream: the 64 request bytes are not a" in (undecodable.details() or "")
    with pytest.raises(grpc.aio.AioRpcError) as oversize:
        await stream.produce(one(0, records=BATCH * 100))
    assert oversize.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "larger than socket.request.max.bytes (4096)" in (oversize.value.details() or "")
    # acks=0: an empty answer per request, and a failed partition aborts the call.
    assert (await stream.produce(one(0, acks=0))).partitions == ()
    with pytest.raises(grpc.aio.AioRpcError) as aborted:
        await stream.produce(one(-1, acks=0))
    assert aborted.value.code() == grpc.StatusCode.ABORTED
    assert "orders--1" in (aborted.value.details() or "")
    stream.close()
    assert "Traceback" not in caplog.text
    assert len(harness.rm.calls) == 1


@pytest.mark.asyncio
async def test_a_produce_stream_request_without_an_answer_in_time_fails_all_in_flight(
    harness: Harness,
) -> None:
    client = BrokerClient(harness.address, request_timeout_ms=100)
    harness.rm.delays = {("orders", 0): 5.0}
    stream = client.produce_stream()
    quick = produce(("orders", 0, BATCH))
    quick = m.ProduceRequest(quick.acks, 0, quick.partitions)
    try:
        began = time.monotonic()
        outcomes = await asyncio.gather(
            stream.produce(quick), stream.produce(one(1)), return_exceptions=True
        )
        assert time.monotonic() - began < 2
        assert all(isinstance(o, RequestTimedOutError) for o in outcomes), outcomes
        assert "sent no ProduceStream answer within 100 ms" in str(outcomes[0])
        assert stream.in_flight == 0
        harness.rm.delays = {}
        assert (await stream.produce(one(1))).partitions[0].error is None
    finally:
        stream.close()
        await client.close()


async def reached_the_broker(harness: Harness, calls: int) -> None:
    """Until the broker's replica manager got its `calls`-th request (in flight there now)."""
    await eventually(lambda: len(harness.rm.calls) >= calls, f"request {calls} at the broker")


@pytest.mark.asyncio
async def test_a_produce_stream_leaves_a_dropped_channel_and_close_fails_what_is_in_flight(
    harness: Harness, stream: ProduceStream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(redialing_channel, "REPLACED_CHANNEL_GRACE_S", 0)
    harness.rm.delays = {("orders", 0): 5.0}
    waiting = asyncio.ensure_future(stream.produce(one(0)))
    await reached_the_broker(harness, 1)
    # Another call found the broker unavailable: the requests in flight on the old call
    # fail (they could be appended after the new call's), the next goes on a new call.
    harness.client.reconnect()
    assert (await stream.produce(one(1))).partitions[0].error is None
    with pytest.raises(NetworkError, match="was replaced"):
        await waiting
    closing = asyncio.ensure_future(stream.produce(one(0)))
    await reached_the_broker(harness, 3)
    stream.close()
    with pytest.raises(ClientClosedError, match="closed with 1 requests in flight"):
        await closing


@pytest.mark.asyncio
async def test_a_produce_stream_whose_channel_closes_under_it_fails_at_once(
    harness: Harness,
    stream: ProduceStream,
) -> None:
    # The channel closing cancels the call under the stream: the request in flight fails
    # with NetworkError at once, not at its timeout.
    harness.rm.delays = {("orders", 0): 5.0}
    waiting = asyncio.ensure_future(stream.produce(one(0)))
    await reached_the_broker(harness, 1)
    await harness.client.close()
    with pytest.raises(NetworkError, match="ended"):
        await asyncio.wait_for(waiting, 2)


@pytest.mark.asyncio
async def test_a_produce_stream_serves_its_depth_at_once_and_the_rest_in_turn(
    harness: Harness,
    stream: ProduceStream,
) -> None:
    # More requests in flight than the broker serves at once: the first PRODUCE_STREAM_DEPTH
    # reach the manager before the first is answered, the rest wait in flow control, and
    # every one is appended and answered in the order sent.
    depth = broker_service.PRODUCE_STREAM_DEPTH
    harness.rm.delays = {("orders", 0): 0.2}
    requests = [one(0)] + [one(1 + i % 5) for i in range(depth + 7)]
    answers = await asyncio.gather(*(stream.produce(r) for r in requests))
    sent = [r.partitions[0].partition for r in requests]
    assert [a.partitions[0].partition for a in answers] == sent
    assert [c.partitions[0].partition for c in harness.rm.calls] == sent
    # The first request, answered last of the first `depth`, saw exactly `depth` calls.
    assert harness.rm.calls_when_answered[depth - 1] == depth
    assert stream.in_flight == 0


@pytest.mark.asyncio
async def test_a_caller_that_stops_waiting_leaves_the_later_answers_matched(
    harness: Harness,
    stream: ProduceStream,
) -> None:
    harness.rm.delays = {("orders", 0): 0.2}
    first = asyncio.ensure_future(stream.produce(one(0)))
    abandoned = asyncio.ensure_future(stream.produce(one(1)))
    third = asyncio.ensure_future(stream.produce(one(2)))
    await asyncio.sleep(0.05)
    abandoned.cancel()
    # Sent all the same; its answer is read and dropped, so the third still gets its own.
    assert (await first).partitions[0].partition == 0
    assert (await third).partitions[0].partition == 2
    assert abandoned.cancelled()
    assert [c.partitions[0].partition for c in harness.rm.calls] == [0, 1, 2]
    assert stream.in_flight == 0
    assert (await stream.produce(one(3))).partitions[0].partition == 3


@pytest.mark.asyncio
async def test_a_produce_that_cannot_be_encoded_leaves_nothing_in_flight(
    harness: Harness,
    stream: ProduceStream,
) -> None:
    with pytest.raises(ValueError):
        await stream.produce(m.ProduceRequest(-1, 2**31, one(0).partitions))
    assert stream.in_flight == 0
    answers = await asyncio.gather(stream.produce(one(0)), stream.produce(one(1)))
    assert [a.partitions[0].partition for a in answers] == [0, 1]


@pytest.mark.asyncio
async def test_an_open_produce_stream_ends_with_unavailable_when_the_broker_stops_serving(
    harness: Harness, stream: ProduceStream
) -> None:
    # A producer keeps its stream open, and the server's stop would cancel the handler after
    # its grace period, which gRPC logs as an unhandled CancelledError traceback on every
    # graceful stop. Stopping to serve (attach(None), before the server stops) ends the call
    # itself, after the answers queued before.
    assert (await stream.produce(one(1))).partitions[0].error is None
    call = stream._call
    assert call is not None
    harness.service.attach(None)
    await asyncio.wait_for(call.wait_for_connection(), 5)
    assert await asyncio.wait_for(call.code(), 5) == grpc.StatusCode.UNAVAILABLE
    assert await call.details() == "broker 1: the broker is stopping"


@pytest.mark.asyncio
async def test_a_fetch_of_thousands_of_partitions_is_decoded_in_slices_between_other_tasks() -> (
    None
):
    """A follower's session opening at a restart carries every partition it follows: the
    service decodes it a slice at a time, letting the loop's other tasks run in between, and
    gets the request the whole decode gives."""
    service = BrokerService(1, cluster_id="c1", image=lambda: MetadataImage.EMPTY)
    count = broker_service.FETCH_DECODE_STEP_PARTITIONS * 3 + 7
    request = m.FetchRequest(
        # Grouped by topic, as the wire groups them.
        tuple(
            m.FetchPartition(f"t{p // 100}", p, p * 10, topic_id=topic_id(p // 100))
            for p in range(count)
        ),
        replica_id=2,
        session_epoch=0,
    )
    wire = codec.fetch_request_to_proto(request)
    turns = 0

    async def probe() -> None:
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    other = asyncio.create_task(probe())
    await asyncio.sleep(0)
    before = turns
    try:
        decoded = await service._decode_fetch(wire)
    finally:
        other.cancel()
    assert decoded == codec.fetch_request_from_proto(wire) == request
    assert turns - before >= 3  # the probe ran between the slices
    bad = codec.fetch_request_to_proto(m.FetchRequest((m.FetchPartition("t", 0, 0),)))
    bad.topics[0].topic_id = b"short"
    with pytest.raises(Refused):
        await service._decode_fetch(bad)
