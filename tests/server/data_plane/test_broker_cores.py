"""The broker's request cores (`BrokerCores.produce`, `fetch`, `list_offsets`,
`offsets_for_leader_epoch`, `delete_records`), called as the Kafka listener's handlers call
them, in front of a fake replica manager that records what it was asked: every malformed entry
is a per-partition Kafka error and the rest goes on, a request malformed as a whole is
`Refused` naming what was wrong, acks=0 is refused when a partition failed, storage errors stop
the broker, fetch sessions answer news only, and the broker refuses data requests until its
logs are recovered and once it stops serving them."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import grpc
import pytest

from replog.errors import (
    CorruptRecordError,
    InvalidRequiredAcksError,
    InvalidTopicError,
    KafkaError,
    KafkaStorageError,
    NotLeaderOrFollowerError,
    UnknownTopicOrPartitionError,
)
from replog.record import build_batch
from replog.replication import messages as m
from replog.replication.fetch_session import FetcherSession, LeaderFetchSession
from replog.server.data_plane import broker_cores
from replog.server.data_plane.broker_cores import BrokerCores
from replog.server.data_plane.repeat_reads import RepeatReads
from replog.server.runtime.tolerant_service import Refused
from replog.wire import broker_codec as codec
from tests.metadata.metadata_helpers import topic_id

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
    service: BrokerCores
    rm: FakeReplicaManager
    storage_errors: list[KafkaStorageError]

    async def fetch(
        self,
        request: m.FetchRequest,
        session: LeaderFetchSession | None = None,
        repeats: RepeatReads | None = None,
    ) -> m.FetchResponse:
        answer = self.service.fetch(request, session=session, repeats=repeats)
        return answer if isinstance(answer, m.FetchResponse) else await answer


@pytest.fixture
def harness() -> Harness:
    rm = FakeReplicaManager()
    storage_errors: list[KafkaStorageError] = []
    service = BrokerCores(1, replica_manager=rm, on_storage_error=storage_errors.append)
    return Harness(service, rm, storage_errors)


def produce(*partitions: tuple[str, int, bytes], acks: int = -1) -> m.ProduceRequest:
    return m.ProduceRequest(acks, 1000, tuple(m.ProducePartition(*p) for p in partitions))


async def produced(harness: Harness, request: m.ProduceRequest) -> m.ProduceResponse:
    answer = await harness.service.produce(request)
    assert answer is not None
    return answer


@pytest.mark.asyncio
async def test_produce_goes_to_the_replica_manager_and_back(harness: Harness) -> None:
    response = await produced(harness, produce(("orders", 0, BATCH), ("orders", 1, BATCH)))
    assert [(r.topic, r.partition, r.error, r.base_offset) for r in response.partitions] == [
        ("orders", 0, None, 10),
        ("orders", 1, None, 10),
    ]
    (call,) = harness.rm.calls
    assert call.partitions[0].records is BATCH  # the bytes, untouched
    assert call.timeout_ms == 1000


@pytest.mark.asyncio
async def test_malformed_partitions_get_their_own_errors_and_the_rest_goes_on(
    harness: Harness,
) -> None:
    response = await produced(
        harness,
        produce(
            ("bad topic!", 0, BATCH),
            ("orders", -1, BATCH),
            ("orders", 0, b"not a batch at all, just some bytes that are long enough" * 2),
            ("orders", 1, BATCH[:-3]),
            ("orders", 2, BATCH),
        ),
    )
    errors = [r.error for r in response.partitions]
    assert isinstance(errors[0], InvalidTopicError) and "bad topic!" in str(errors[0])
    assert isinstance(errors[1], UnknownTopicOrPartitionError) and "orders--1" in str(errors[1])
    assert isinstance(errors[2], CorruptRecordError) and "orders-0" in str(errors[2])
    assert isinstance(errors[3], CorruptRecordError) and "orders-1" in str(errors[3])
    assert errors[4] is None
    (call,) = harness.rm.calls
    assert [(p.topic, p.partition) for p in call.partitions] == [("orders", 2)]


@pytest.mark.asyncio
async def test_invalid_acks_fail_every_partition_without_reaching_the_manager(
    harness: Harness,
) -> None:
    response = await produced(harness, produce(("orders", 0, BATCH), acks=2))
    (result,) = response.partitions
    assert isinstance(result.error, InvalidRequiredAcksError)
    assert "orders-0: acks=2" in str(result.error)
    assert harness.rm.calls == []


@pytest.mark.asyncio
async def test_acks_zero_answers_nothing_or_is_refused_naming_the_failed_partition(
    harness: Harness,
) -> None:
    assert await harness.service.produce(produce(("orders", 0, BATCH), acks=0)) is None
    harness.rm.fail[("orders", 1)] = NotLeaderOrFollowerError("orders-1: broker 1 is not leader")
    with pytest.raises(Refused) as failure:
        await harness.service.produce(produce(("orders", 0, BATCH), ("orders", 1, BATCH), acks=0))
    assert failure.value.code == grpc.StatusCode.ABORTED
    assert "orders-1" in failure.value.details
    assert "NOT_LEADER_OR_FOLLOWER" in failure.value.details
    with pytest.raises(Refused) as garbage:
        await harness.service.produce(produce(("orders", 0, b"garbage" * 10), acks=0))
    assert garbage.value.code == grpc.StatusCode.ABORTED


@pytest.mark.asyncio
async def test_a_partition_named_twice_is_refused(harness: Harness) -> None:
    with pytest.raises(Refused) as failure:
        await harness.service.produce(produce(("orders", 0, BATCH), ("orders", 0, BATCH)))
    assert failure.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "orders-0 more than once" in failure.value.details
    assert harness.rm.calls == []


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
    response = await harness.fetch(request)
    good, bad = response.partitions
    assert good.error is None and good.records == BATCH and good.topic_id == topic_id(5)
    assert isinstance(bad.error, UnknownTopicOrPartitionError)
    (call,) = harness.rm.calls
    assert call.max_wait_ms == 0


@pytest.mark.asyncio
async def test_the_other_calls_go_through(harness: Harness) -> None:
    offsets = harness.service.list_offsets(
        m.ListOffsetsRequest((m.ListOffsetsPartition("orders", 0, m.LATEST_TIMESTAMP),))
    )
    assert offsets.partitions[0].offset == 7
    epochs = harness.service.offsets_for_leader_epoch(
        m.OffsetsForLeaderEpochRequest((m.OffsetForLeaderPartition("orders", 0, 3),))
    )
    assert epochs.partitions[0].end_offset == 40
    deleted = await harness.service.delete_records(
        m.DeleteRecordsRequest((m.DeleteRecordsPartition("orders", 0, 5),), timeout_ms=100)
    )
    assert deleted.partitions[0].low_watermark == 5
    bad = await harness.service.delete_records(
        m.DeleteRecordsRequest((m.DeleteRecordsPartition("..", 0, 5),))
    )
    assert isinstance(bad.partitions[0].error, InvalidTopicError)


@pytest.mark.asyncio
async def test_a_storage_error_is_reported_and_refuses_the_request(harness: Harness) -> None:
    harness.rm.raise_error = KafkaStorageError("log dir /x: disk on fire")
    with pytest.raises(Refused) as failure:
        await harness.service.produce(produce(("orders", 0, BATCH)))
    assert failure.value.code == grpc.StatusCode.UNAVAILABLE
    assert [str(e) for e in harness.storage_errors] == ["log dir /x: disk on fire"]


@pytest.mark.asyncio
async def test_a_kafka_error_raised_by_the_manager_becomes_every_partitions_error(
    harness: Harness,
) -> None:
    harness.rm.raise_error = NotLeaderOrFollowerError("nope")
    response = await produced(harness, produce(("orders", 0, BATCH), ("orders", 1, BATCH)))
    assert all(isinstance(r.error, NotLeaderOrFollowerError) for r in response.partitions)


@pytest.mark.asyncio
async def test_data_requests_wait_for_the_replica_manager_and_end_when_it_stops() -> None:
    service = BrokerCores(1)
    fetch = m.FetchRequest((m.FetchPartition("orders", 0, 0),))
    for request in (
        service.produce(produce(("orders", 0, BATCH))),
        service.delete_records(m.DeleteRecordsRequest((m.DeleteRecordsPartition("o", 0, 5),))),
    ):
        with pytest.raises(Refused) as failure:
            await request
        assert failure.value.code == grpc.StatusCode.UNAVAILABLE
        assert "not recovered" in failure.value.details
    with pytest.raises(Refused, match="not recovered"):
        service.fetch(fetch)
    with pytest.raises(Refused, match="not recovered"):
        service.list_offsets(m.ListOffsetsRequest((m.ListOffsetsPartition("o", 0, -1),)))
    service.attach(FakeReplicaManager())
    response = await service.produce(produce(("orders", 0, BATCH)))
    assert response is not None and response.partitions[0].error is None
    answer = service.fetch(fetch)
    answer = answer if isinstance(answer, m.FetchResponse) else await answer
    assert answer.partitions[0].records == BATCH
    service.attach(None)
    with pytest.raises(Refused, match="shutting down"):
        service.fetch(fetch)


@pytest.mark.asyncio
async def test_a_storage_error_answered_per_partition_is_reported_too(harness: Harness) -> None:
    harness.rm.fail[("orders", 0)] = KafkaStorageError("orders-0: log dir /x: EIO")
    response = await produced(harness, produce(("orders", 0, BATCH)))
    assert isinstance(response.partitions[0].error, KafkaStorageError)
    assert [str(e) for e in harness.storage_errors] == ["orders-0: log dir /x: EIO"]


# --- fetch sessions: a follower's ReplicaFetch stream holds one -------------------------------


@pytest.mark.asyncio
async def test_a_fetch_session_answers_news_only(harness: Harness) -> None:
    session = LeaderFetchSession()
    repeats = RepeatReads()
    fetcher = FetcherSession()  # what the follower sends: only what changed
    rm = harness.rm
    orders = topic_id(5)

    async def fetch(*offsets: int) -> m.FetchResponse:
        entries = (m.FetchPartition("orders", p, o, topic_id=orders) for p, o in enumerate(offsets))
        request = m.FetchRequest(tuple(entries), replica_id=2, max_wait_ms=0)
        return await harness.fetch(fetcher.to_send(request), session, repeats)

    full = await fetch(0, 0, 0)
    assert [r.partition for r in full.partitions] == [0, 1, 2]
    assert rm.calls[-1].session_epoch == 0
    rm.records = b""  # nothing new: the next answer is empty, the manager still reads all
    quiet = await fetch(0, 0, 0)
    assert quiet.partitions == ()
    assert [p.partition for p in rm.calls[-1].partitions] == [0, 1, 2]
    assert rm.calls[-1].session_epoch == 1
    # Partition 1 moved on and partition 2 backs off (left out): the leader follows, and
    # answers the entry sent in full (its fetcher may know nothing of it).
    moved = await fetch(0, 4)
    assert [r.partition for r in moved.partitions] == [1]
    assert [(p.partition, p.fetch_offset) for p in rm.calls[-1].partitions] == [(0, 0), (1, 4)]
    rm.high_watermark = 2
    news = await fetch(0, 4)
    assert [(r.partition, r.high_watermark) for r in news.partitions] == [(0, 2), (1, 2)]


@pytest.mark.asyncio
async def test_a_session_opened_with_more_partitions_than_a_round_reads_gets_them_over_rounds(
    harness: Harness,
) -> None:
    # A follower restarting against a leader of more partitions than a bounded round reads
    # (500): the leader answers the first, full request with the first round's partitions only.
    # That answer is the session's, not a malformed one: were it refused, every new call would
    # get the same first round, and the follower would never fetch the rest.
    session = LeaderFetchSession(round_partitions=2)
    repeats = RepeatReads()
    fetcher = FetcherSession()
    harness.rm.records = b""  # caught up: no answer moves a partition in the session's order
    entries = tuple(m.FetchPartition("orders", p, 0, topic_id=topic_id(5)) for p in range(5))
    answered = []
    request = m.FetchRequest(entries, replica_id=2, max_wait_ms=0)
    for _ in range(3):
        sent = fetcher.to_send(request)
        answered.append(
            [r.partition for r in (await harness.fetch(sent, session, repeats)).partitions]
        )
    assert answered == [[0, 1], [2, 3], [4]]
    assert [c.session_epoch for c in harness.rm.calls] == [0, 1, 2]  # one session


@pytest.mark.asyncio
async def test_fetch_session_epochs_out_of_turn_or_without_a_session_are_refused(
    harness: Harness,
) -> None:
    request = m.FetchRequest((), replica_id=2, session_epoch=3)
    with pytest.raises(Refused) as out_of_turn:
        await harness.fetch(request, LeaderFetchSession())
    assert out_of_turn.value.code == grpc.StatusCode.FAILED_PRECONDITION
    assert "INVALID_FETCH_SESSION_EPOCH: fetch session epoch 3" in out_of_turn.value.details
    with pytest.raises(Refused) as sessionless:
        await harness.fetch(replace(request, session_epoch=0))
    assert sessionless.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert harness.rm.calls == []


@pytest.mark.asyncio
async def test_a_replica_fetch_of_thousands_of_partitions_is_decoded_in_slices_between_tasks() -> (
    None
):
    """A follower's session opening at a restart carries every partition it follows: the
    service decodes it a slice at a time, letting the loop's other tasks run in between, and
    gets the request the whole decode gives."""
    service = BrokerCores(1)
    count = broker_cores.FETCH_DECODE_STEP_PARTITIONS * 3 + 7
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
