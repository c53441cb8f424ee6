"""Reading a compacted topic: a log cleaned by the storage layer's pass (sparse batches, an empty
producer batch, gaps between offsets; `tests/compacted_log.py`) served by a fake leader through a
Kafka listener, read by replog's consumer (blocking and asyncio) and by Kafka's own clients.

Kafka's consumer moves its position to a batch's next offset (its last offset delta + 1), not
past its records: every record the log holds is read once, in order, the position ends at the
log end offset, an answer of only an empty batch still moves it, and no offset is fetched twice
(a consumer that counted records would ask again inside a batch it already read, forever).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replog import Consumer, TopicPartition
from replog.aio import Consumer as AsyncConsumer
from replog.client.fetched_records import _fast_records, decode_fetched, fetched_answer
from replog.errors import CoordinatorNotAvailableError, InvalidRecordError
from replog.kafka.messages.fetch_request import FetchRequest
from replog.kafka.messages.find_coordinator_response import Coordinator, FindCoordinatorResponse
from replog.record import RecordBatch, build_batch
from replog.record.header import compute_crc, read_header, validate_batch
from replog.testing import FakeKafkaBroker, running_fake_kafka_broker
from tests.compacted_log import (
    CleanedLog,
    Entry,
    cleaned_log,
    confluent_entries,
    kafka_python_entries,
    leader_fetch,
    sparse_batch,
)

T0 = TopicPartition("t", 0)


@pytest.fixture
def log(tmp_path: Path) -> CleanedLog:
    found = cleaned_log(tmp_path / "t-0")
    # What the tests rely on: sparse batches, an empty one first, gaps between batches.
    assert read_header(found.batches[0]).records_count == 0
    assert len(found.sparse) >= 3
    assert read_header(found.batches[0]).base_offset > 0
    return found


def no_coordinator(request: Any, version: int) -> FindCoordinatorResponse:
    """FindCoordinator answered COORDINATOR_NOT_AVAILABLE: confluent-kafka's consumer (its
    group.id is required) looks its coordinator up every second even when it only assigns,
    and a request the fake has no answer for closes the connection, the one a fetch may be
    waiting on too."""
    code = CoordinatorNotAvailableError.code
    if version < 4:
        return FindCoordinatorResponse(error_code=code, node_id=-1, port=-1)
    return FindCoordinatorResponse(
        coordinators=[
            Coordinator(key=key, node_id=-1, port=-1, error_code=code)
            for key in request.coordinator_keys
        ]
    )


@pytest.fixture
def leader() -> Iterator[FakeKafkaBroker]:
    with running_fake_kafka_broker() as fake:
        fake.answer("Metadata", fake.metadata("t"))
        fake.answer("FindCoordinator", no_coordinator)
        yield fake


def fetch_offsets(broker: FakeKafkaBroker) -> list[int]:
    return [
        p.fetch_offset
        for api, request, _ in list(broker.requests)
        if api == "Fetch" and isinstance(request, FetchRequest)
        for t in request.topics
        for p in t.partitions
    ]


def entries(records: list[Any]) -> list[Entry]:
    return [(r.offset, r.key, r.value) for r in records]


def next_offsets(log: CleanedLog, batches_per_answer: int) -> list[int]:
    """The offsets a consumer reading `log` from 0 asks for, answer after answer."""
    asked, position = [0], 0
    while position < log.end_offset:
        served = log.answer_from(position, batches_per_answer)
        headers = [read_header(served[at:]) for at in _frames(served)]
        position = headers[-1].next_offset
        asked.append(position)
    return asked


def _frames(data: bytes) -> list[int]:
    at, found = 0, []
    while at < len(data):
        found.append(at)
        at += read_header(data, at).size_in_bytes
    return found


@pytest.mark.parametrize("batches_per_answer", [1, 2, 100])
def test_the_consumer_reads_a_cleaned_log_once_in_order_to_its_end(
    log: CleanedLog, leader: FakeKafkaBroker, batches_per_answer: int
) -> None:
    leader.answer("Fetch", leader_fetch(log, batches=batches_per_answer))
    consumer = Consumer(bootstrap_servers=leader.address, request_timeout_ms=2000)
    try:
        consumer.assign([T0])
        consumer.seek(T0, 0)
        records: list[Any] = []
        for _ in range(40):
            records += consumer.poll(timeout_ms=100).get(T0, [])
            if consumer.position(T0) == log.end_offset and len(records) >= len(log.entries):
                break
        assert entries(records) == log.entries
        assert consumer.position(T0) == log.end_offset
    finally:
        consumer.close()
    # Each answer's last batch's next offset, then the log end again and again (nothing new).
    # Whether the consumer asked at the log end before it closed depends on its prefetch's timing.
    asked = fetch_offsets(leader)
    inside = next_offsets(log, batches_per_answer)[:-1]
    assert asked[: len(inside)] == inside
    assert set(asked[len(inside) :]) <= {log.end_offset}


def test_the_asyncio_consumer_reads_a_cleaned_log(log: CleanedLog, leader: FakeKafkaBroker) -> None:
    leader.answer("Fetch", leader_fetch(log, batches=1))

    async def read() -> tuple[list[Any], int]:
        async with AsyncConsumer(bootstrap_servers=leader.address, request_timeout_ms=2000) as c:
            c.assign([T0])
            c.seek(T0, 0)
            records: list[Any] = []
            for _ in range(40):
                records += (await c.poll(timeout_ms=100)).get(T0, [])
                if await c.position(T0) == log.end_offset and len(records) >= len(log.entries):
                    break
            return records, await c.position(T0)

    records, position = asyncio.run(read())
    assert entries(records) == log.entries
    assert position == log.end_offset


def test_an_answer_of_only_an_empty_batch_moves_the_position_past_it(log: CleanedLog) -> None:
    empty = log.batches[0]
    header = read_header(empty)
    completed = fetched_answer(T0, empty, position=0, high_watermark=log.end_offset)
    assert completed.take(10) == []
    assert completed.position == header.next_offset > header.base_offset


@pytest.mark.parametrize("position", [0, 13, 31, 33])
def test_a_fetch_from_inside_a_gap_or_a_sparse_batch_returns_what_follows(
    log: CleanedLog, position: int
) -> None:
    data = b"".join(log.batches)
    completed = decode_fetched(T0, data, position=position, high_watermark=log.end_offset)
    assert entries(completed.records) == [e for e in log.entries if e[0] >= position]
    assert completed.next_offset == log.end_offset


def test_the_high_watermark_cuts_a_sparse_batch_at_its_kept_records(log: CleanedLog) -> None:
    sparse = next(b for b in log.sparse if read_header(b).records_count > 0)
    header = read_header(sparse)
    kept = [e for e in log.entries if header.base_offset <= e[0] <= header.last_offset]
    bound = kept[1][0]  # between the batch's first and second kept records
    completed = decode_fetched(T0, sparse, position=0, high_watermark=bound)
    assert entries(completed.records) == kept[:1]
    assert completed.next_offset == bound


def test_a_batch_spanning_no_offset_is_refused_even_when_sparse() -> None:
    """records_count 0 with last_offset_delta -1 would never move a reader's position."""
    batch = bytearray(build_batch([(0, b"k", b"v", ())]))
    batch[23:27] = (-1).to_bytes(4, "big", signed=True)  # last_offset_delta
    batch[57:61] = (0).to_bytes(4, "big", signed=True)  # records_count
    batch[17:21] = compute_crc(batch, 0, len(batch)).to_bytes(4, "big")
    with pytest.raises(InvalidRecordError, match="records_count 0"):
        validate_batch(batch, sparse=True)


def test_kafka_python_reads_the_cleaned_log(log: CleanedLog, leader: FakeKafkaBroker) -> None:
    leader.answer("Fetch", leader_fetch(log, batches=1))
    found, position = kafka_python_entries(leader.address, log.end_offset, len(log.entries))
    assert (found, position) == (log.entries, log.end_offset)


def test_confluent_kafka_reads_the_cleaned_log(log: CleanedLog, leader: FakeKafkaBroker) -> None:
    leader.answer("Fetch", leader_fetch(log, batches=1))
    found, position = confluent_entries(leader.address, log.end_offset, len(log.entries))
    asked = [api for api, _, _ in list(leader.requests)]
    assert (found, position) == (log.entries, log.end_offset), f"the leader was asked {asked}"


# --- sparse batches decode as the strict decoder decodes them --------------------------------


def strict(batch: bytes, position: int, bound: int) -> list[Entry]:
    return [
        (r.offset, r.key, r.value)
        for r in RecordBatch.parse(batch, sparse=True).records()
        if position <= r.offset < bound
    ]


@settings(max_examples=200, deadline=None)
@given(
    data=st.lists(
        st.tuples(st.one_of(st.none(), st.binary(max_size=300)), st.booleans()),
        min_size=1,
        max_size=150,
    ).filter(lambda rows: any(keep for _, keep in rows)),
    cut=st.tuples(st.integers(0, 160), st.integers(0, 160)),
)
def test_sparse_batches_decode_fast_as_the_strict_decoder_decodes_them(
    data: list[tuple[bytes | None, bool]], cut: tuple[int, int]
) -> None:
    values, kept = [v for v, _ in data], [k for _, k in data]
    batch = sparse_batch(values, kept)
    header = read_header(batch)
    position, bound = min(cut), max(cut)
    fast = _fast_records(T0, header, batch, 61, len(batch), 0, position, bound)
    # The fast path's shapes: varints of one or two bytes (a kept tombstone's batch gets a
    # delete horizon as its base timestamp, and timestamp deltas past that).
    if all(v is not None and len(v) < 120 for v in values):
        assert fast is not None
    if fast is not None:
        assert entries(fast) == strict(batch, position, bound)
    completed = decode_fetched(T0, batch, position=position, high_watermark=bound)
    assert entries(completed.records) == strict(batch, position, bound)


@pytest.mark.parametrize(
    ("changed", "why"),
    [
        ([0, 2, 2], "offset delta 2, expected 3 to 3"),
        ([1, 1, 3], "offset delta 1, expected 2"),
        ([0, 3, 3], "offset delta 3, expected 4 to 3"),
    ],
)
def test_a_sparse_batch_whose_deltas_do_not_increase_is_left_to_the_strict_decoder(
    changed: list[int], why: str
) -> None:
    batch = bytearray(sparse_batch([b"a", b"b", b"c", b"d"], [True, False, True, True]))
    # Records at deltas 0, 2, 3, changed to `changed` (each record: its length, attributes,
    # timestamp delta, then the offset delta's byte).
    at, deltas = 61, []
    while at < len(batch):
        length = batch[at] >> 1
        deltas.append(at + 3)
        at += 1 + length
    assert [batch[d] >> 1 for d in deltas] == [0, 2, 3]
    for at, delta in zip(deltas, changed, strict=True):
        batch[at] = delta << 1
    batch[17:21] = compute_crc(batch, 0, len(batch)).to_bytes(4, "big")
    damaged = bytes(batch)
    assert _fast_records(T0, read_header(damaged), damaged, 61, len(damaged), 0, 0, 10) is None
    completed = decode_fetched(T0, damaged, position=0, high_watermark=10)
    assert completed.records == []  # a damaged batch yields none of its records
    assert isinstance(completed.error, InvalidRecordError)
    assert why in str(completed.error)
