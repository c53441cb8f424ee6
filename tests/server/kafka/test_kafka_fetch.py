"""The Kafka listener's Fetch and OffsetForLeaderEpoch against a real replica manager (logs in
tmp_path, a hand-driven clock), through the Broker service's cores with no protobuf between:

- a fetch whose records are there is answered at once (the answer itself, no awaitable), its
  records the very bytes object the log's read returned, at every served version;
- errors answer at once whatever the max wait: an offset out of range, an unknown topic,
  partition or topic id, an illegal topic name, a partition this broker does not lead, a
  fenced or unknown leader epoch; a diverging epoch is answered (v12+);
- consumers read up to the high watermark for both isolation levels (no transactions: the last
  stable offset is the high watermark, READ_COMMITTED has no aborted transactions, an
  unknown isolation level refuses the request);
- the byte budget: a first batch larger than `partition_max_bytes` is whole (KIP-74), a batch
  that would pass the budget is left for the next fetch, `max_bytes` spans partitions, and
  partitions are read in the request's (then the session's) order even across topics;
- a fetch with nothing to read waits in the purgatory and an append answers it, its deadline
  answers it empty;
- through the listener, a fetch answered at once is written with no task, and behind an
  earlier request of its connection still waiting it is answered after that one, in order;
  through a plain listener, records of `REGION_MIN_BYTES` or more leave the segment file
  through `sendfile`, smaller ones do not;
- a waiting fetch leaves the purgatory when its connection is lost (reset, or closed once
  `close_wait_ms` passed after the client's EOF);
- OffsetForLeaderEpoch is answered at once, its epochs checked as the gRPC method checks them.
"""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import uuid
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import pytest

from replog.errors import (
    FencedLeaderEpochError,
    InvalidRequestError,
    InvalidTopicError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    RequestRefusedError,
    UnknownLeaderEpochError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)
from replog.kafka.connection import Answer, KafkaRequest
from replog.kafka.messages import fetch_response as kf
from replog.kafka.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from replog.kafka.messages.offset_for_leader_epoch_request import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from replog.kafka.messages.offset_for_leader_epoch_response import OffsetForLeaderEpochResponse
from replog.kafka.messages.request_header import RequestHeader
from replog.kafka.protocol.codec import ZERO_UUID
from replog.kafka.protocol.framing import decode_response, encode_request
from replog.quorum.metadata.records import PartitionChangeRecord
from replog.record import build_batch
from replog.server.data_plane.broker_cores import BrokerCores
from replog.server.kafka.kafka_apis import REGION_MIN_BYTES, KafkaApis
from replog.server.kafka.kafka_listener import KafkaListener, KafkaListenerConfig
from replog.storage.file_region import FileRegion
from replog.testing import ManualClock
from tests.eventually import eventually
from tests.metadata.metadata_helpers import create_topic, replayed
from tests.server.data_plane.test_replica_manager import (
    SOLO_TID,
    T0,
    TID,
    Node,
    batch,
    cluster_image,
    produce,
    replicate,
    settle,
    whole_log,
)

EPOCH = 4  # the leader epoch of every partition here


def served(tmp_path: Path, clock: ManualClock, *assignments: tuple[int, ...]) -> list[Node]:
    """Brokers 1..N holding topic "t" (leader epoch `EPOCH`), one partition per assignment."""
    image = cluster_image(*create_topic("t", TID, *assignments, leader_epoch=EPOCH))
    nodes = [
        Node(tmp_path, broker_id, clock)
        for broker_id in range(1, max(max(a) for a in assignments) + 1)
    ]
    for node in nodes:
        node.rm.apply_image(image)
    return nodes


def handlers(node: Node) -> KafkaApis:
    service = BrokerCores(node.broker_id, replica_manager=node.rm)
    return KafkaApis(
        node.broker_id, cluster_id="c1", image=lambda: node.rm.image, broker_service=service
    )


def request(
    *partitions: FetchPartition,
    topic: str = "t",
    version: int = 12,
    max_wait_ms: int = 0,
    **options: Any,
) -> FetchRequest:
    by_id = version >= 13
    options.setdefault("min_bytes", 1)  # (a client's; the message's default is 0)
    return FetchRequest(
        max_wait_ms=max_wait_ms,
        topics=[
            FetchTopic(
                topic="" if by_id else topic,
                topic_id=TID if by_id else ZERO_UUID,
                partitions=list(partitions),
            )
        ],
        **options,
    )


def at(offset: int, partition: int = 0, **options: Any) -> FetchPartition:
    options.setdefault("partition_max_bytes", 1 << 20)
    return FetchPartition(partition=partition, fetch_offset=offset, **options)


def now(answer: Answer) -> kf.FetchResponse:
    assert isinstance(answer, kf.FetchResponse), f"not answered at once: {answer!r}"
    return answer


def partitions(answer: kf.FetchResponse) -> list[kf.PartitionData]:
    return [p for topic in answer.responses for p in topic.partitions]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.mark.asyncio
@pytest.mark.parametrize("version", [4, 11, 12, 13, 16, 18])
async def test_records_there_are_answered_at_once_as_the_bytes_the_log_read(
    tmp_path: Path, clock: ManualClock, version: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    (node,) = served(tmp_path, clock, (1,))
    await produce(node, batch(2))
    await produce(node, batch(3, tag=1))
    log = node.log()
    reads: list[bytes | FileRegion] = []
    read = log.read_or_region  # the broker's read (bytes here: no region asked for)

    def reading(*args: Any, **kwargs: Any) -> bytes | FileRegion:
        reads.append(read(*args, **kwargs))
        return reads[-1]

    monkeypatch.setattr(log, "read_or_region", reading)
    answer = now(handlers(node).fetch(request(at(0), version=version, max_wait_ms=5000), version))
    (fetched,) = partitions(answer)
    assert fetched.records is reads[-1]  # the log's bytes object itself: no copy, no decode
    assert bytes(fetched.records) == whole_log(node)
    assert (fetched.error_code, fetched.high_watermark, fetched.last_stable_offset) == (0, 5, 5)
    assert fetched.log_start_offset == 0 and fetched.aborted_transactions is None
    encoded = answer.encode(version)
    assert whole_log(node) in encoded
    assert answer.responses[0].topic == ("" if version >= 13 else "t")
    assert answer.responses[0].topic_id == (TID if version >= 13 else ZERO_UUID)


@pytest.mark.asyncio
async def test_errors_are_answered_at_once_whatever_the_max_wait(
    tmp_path: Path, clock: ManualClock
) -> None:
    leader, _ = served(tmp_path, clock, (1, 2), (2, 1))
    await produce(leader, batch(2), acks=1)
    apis = handlers(leader)

    def error_of(answer: Answer) -> int:
        (fetched,) = partitions(now(answer))
        assert fetched.records in (None, b"")
        return fetched.error_code

    def fetched(*entries: FetchPartition, **options: Any) -> int:
        return error_of(apis.fetch(request(*entries, max_wait_ms=60_000, **options), 12))

    assert fetched(at(10)) == OffsetOutOfRangeError.code
    assert fetched(at(-5)) == OffsetOutOfRangeError.code
    assert fetched(at(0), topic="nope") == UnknownTopicOrPartitionError.code
    assert fetched(at(0, partition=7)) == UnknownTopicOrPartitionError.code
    assert fetched(at(0), topic="bad name!") == InvalidTopicError.code
    assert fetched(at(0, partition=1)) == NotLeaderOrFollowerError.code  # broker 2 leads it
    assert fetched(at(0, current_leader_epoch=EPOCH - 1)) == FencedLeaderEpochError.code
    assert fetched(at(0, current_leader_epoch=EPOCH + 1)) == UnknownLeaderEpochError.code
    unknown_id = FetchRequest(
        max_wait_ms=60_000, topics=[FetchTopic(topic_id=uuid.UUID(int=99), partitions=[at(0)])]
    )
    assert error_of(apis.fetch(unknown_id, 13)) == UnknownTopicIdError.code
    # A partition with nothing to read (the HW is 0) beside an error: still at once.
    mixed = apis.fetch(request(at(0), at(0, partition=1), max_wait_ms=60_000), 12)
    assert [p.error_code for p in partitions(now(mixed))] == [0, NotLeaderOrFollowerError.code]


@pytest.mark.asyncio
async def test_a_diverging_epoch_is_answered_at_once(tmp_path: Path, clock: ManualClock) -> None:
    (node,) = served(tmp_path, clock, (1,))
    await produce(node, batch(2))
    node.rm.apply_image(replayed(node.rm.image, PartitionChangeRecord(TID, 0, leader=1)))
    await produce(node, batch(2, tag=1))  # epoch EPOCH ends at 2, EPOCH + 1 holds 2-3
    # A fetcher that believes epoch EPOCH reached offset 3 has diverged at 2.
    entry = at(3, current_leader_epoch=EPOCH + 1, last_fetched_epoch=EPOCH)
    (fetched,) = partitions(now(handlers(node).fetch(request(entry, max_wait_ms=5000), 12)))
    assert (fetched.diverging_epoch.epoch, fetched.diverging_epoch.end_offset) == (EPOCH, 2)
    assert fetched.error_code == 0 and bytes(fetched.records or b"") == b""


@pytest.mark.asyncio
async def test_consumers_read_up_to_the_high_watermark_at_both_isolation_levels(
    tmp_path: Path, clock: ManualClock
) -> None:
    leader, follower = served(tmp_path, clock, (1, 2))
    await produce(leader, batch(3), acks=1)  # the leader's log ends at 3, its HW is 0
    apis = handlers(leader)
    uncommitted, committed = (
        partitions(now(apis.fetch(request(at(0), isolation_level=level), 12)))[0]
        for level in (0, 1)
    )
    for fetched in (uncommitted, committed):
        assert fetched.records in (None, b"")
        assert (fetched.high_watermark, fetched.last_stable_offset) == (0, 0)
    assert (uncommitted.aborted_transactions, committed.aborted_transactions) == (None, [])
    await replicate(follower, leader)
    await replicate(follower, leader)  # the follower's next fetch offset moves the HW
    (read,) = partitions(now(apis.fetch(request(at(0), isolation_level=1), 12)))
    assert bytes(read.records or b"") == whole_log(leader)
    assert (read.high_watermark, read.last_stable_offset, read.aborted_transactions) == (3, 3, [])
    with pytest.raises(InvalidRequestError, match="isolation_level 2"):
        apis.fetch(request(at(0), isolation_level=2), 12)


@pytest.mark.asyncio
async def test_the_byte_budget_keeps_batches_whole(tmp_path: Path, clock: ManualClock) -> None:
    (node,) = served(tmp_path, clock, (1,), (1,))
    await produce(node, batch(4))
    await produce(node, batch(4, tag=1))
    await produce(node, batch(2, tag=2), partition=1)
    stored = whole_log(node)  # the batches as the log holds them (offsets assigned)
    first, second = stored[: len(batch(4))], stored[len(batch(4)) :]
    apis = handlers(node)

    def records(*entries: FetchPartition, max_bytes: int = 1 << 20) -> list[bytes]:
        answer = now(apis.fetch(request(*entries, max_bytes=max_bytes), 12))
        return [bytes(p.records or b"") for p in partitions(answer)]

    # A first batch larger than the budget comes whole (KIP-74); a second that would pass the
    # budget waits for the next fetch.
    assert records(at(0, partition_max_bytes=10)) == [first]
    assert records(at(0, partition_max_bytes=len(first) + len(second) - 1)) == [first]
    assert records(at(0, partition_max_bytes=len(first) + len(second))) == [first + second]
    # max_bytes spans the request: the first partition takes it, the second gets nothing.
    both = records(at(0, partition_max_bytes=1 << 20), at(0, partition=1), max_bytes=len(first))
    assert both == [first, b""]


@pytest.mark.asyncio
async def test_a_fetch_with_nothing_to_read_waits_until_an_append_or_its_deadline(
    tmp_path: Path, clock: ManualClock
) -> None:
    (node,) = served(tmp_path, clock, (1,))
    apis = handlers(node)
    waiting = later(apis.fetch(request(at(0), max_wait_ms=5000), 12))
    await settle()
    assert not waiting.done()
    await produce(node, batch(2))
    async with asyncio.timeout(5):
        (woken,) = partitions(await waiting)
    assert bytes(woken.records or b"") == whole_log(node) and woken.high_watermark == 2
    expiring = later(apis.fetch(request(at(2), max_wait_ms=500), 12))
    await settle()
    node.rm.tick(clock.advance(499))
    await settle()
    assert not expiring.done()
    node.rm.tick(clock.advance(1))
    async with asyncio.timeout(5):
        (expired,) = partitions(await expiring)
    assert (expired.error_code, bytes(expired.records or b""), expired.high_watermark) == (
        0,
        b"",
        2,
    )


def later(answer: Answer) -> asyncio.Future[Any]:
    """A fetch's answer that waits (an awaitable), as a task."""
    assert isinstance(answer, Awaitable), f"answered at once: {answer!r}"
    return asyncio.ensure_future(answer)


class Recording:
    """The handlers, recording each Fetch's correlation id and whether its handler was asked
    in a task."""

    def __init__(self, apis: KafkaApis) -> None:
        self._apis = apis
        self.served = apis.served
        self.in_task: dict[int, bool] = {}

    def handle(self, request: KafkaRequest, listener_name: str) -> Answer:
        self.in_task[request.correlation_id] = asyncio.current_task() is not None
        return self._apis.handle(request, listener_name)


def fetch_frame(correlation_id: int, body: FetchRequest) -> bytes:
    header = RequestHeader(request_api_key=1, request_api_version=12, correlation_id=correlation_id)
    return encode_request(header, body)


async def read_fetch_answer(reader: asyncio.StreamReader) -> tuple[int, kf.FetchResponse]:
    async with asyncio.timeout(5):
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        header, body = decode_response(await reader.readexactly(size), 1, 12)
    assert isinstance(body, kf.FetchResponse)
    return header.correlation_id, body


@pytest.mark.asyncio
async def test_through_the_listener_a_fetch_answered_at_once_keeps_its_place_in_order(
    tmp_path: Path, clock: ManualClock
) -> None:
    (node,) = served(tmp_path, clock, (1,))
    await produce(node, batch(2))
    recording = Recording(handlers(node))
    listener = KafkaListener("PLAINTEXT", "127.0.0.1", 0)
    await listener.start(recording)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
        writer.write(fetch_frame(1, request(at(0))))
        correlation, answer = await read_fetch_answer(reader)
        assert correlation == 1 and bytes(partitions(answer)[0].records or b"") == whole_log(node)
        assert recording.in_task == {1: False}  # answered with no task
        # A fetch waiting at the log's end, then one with records there: the second is
        # answered after the first, which an append answers.
        writer.write(
            fetch_frame(2, request(at(2), max_wait_ms=60_000)) + fetch_frame(3, request(at(0)))
        )
        await eventually(lambda: 3 in recording.in_task, "the third fetch asked")
        # The second waits (in its task); the third was asked after it, in a task, and read.
        assert recording.in_task == {1: False, 2: False, 3: True}
        before = whole_log(node)
        await produce(node, batch(1, tag=5))
        second, waited = await read_fetch_answer(reader)
        third, at_once = await read_fetch_answer(reader)
        assert (second, third) == (2, 3)
        assert bytes(partitions(waited)[0].records or b"") == whole_log(node)[len(before) :]
        assert bytes(partitions(at_once)[0].records or b"") == before
        writer.close()
    finally:
        await listener.stop()


@pytest.mark.asyncio
async def test_through_a_plain_listener_large_records_are_sent_from_the_segment_file(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    (node,) = served(tmp_path, clock, (1,))
    await produce(node, batch(2))
    await produce(node, build_batch([(T0, b"k", bytes(REGION_MIN_BYTES), ())]))
    sent: list[int] = []
    real = os.sendfile

    def counting(out_fd: int, in_fd: int, offset: int | None, count: int) -> int:
        sent.append(count)
        return real(out_fd, in_fd, offset, count)

    monkeypatch.setattr(os, "sendfile", counting)  # asyncio's sendfile calls it by name
    listener = KafkaListener("PLAINTEXT", "127.0.0.1", 0)
    await listener.start(handlers(node))
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
        # The first batch alone (a budget below it: KIP-74's one batch), then the whole log.
        writer.write(fetch_frame(1, request(at(0, partition_max_bytes=1))))
        _, first = await read_fetch_answer(reader)
        assert not sent  # small records: read and written
        writer.write(fetch_frame(2, request(at(0))))
        _, whole = await read_fetch_answer(reader)
        writer.close()
    finally:
        await listener.stop()
    assert sent, "the large records did not leave through sendfile"
    log = whole_log(node)
    assert bytes(partitions(whole)[0].records or b"") == log
    assert log.startswith(bytes(partitions(first)[0].records or b""))
    assert partitions(whole)[0].high_watermark == 3


@pytest.mark.asyncio
async def test_a_waiting_fetch_leaves_the_purgatory_when_its_connection_is_lost(
    tmp_path: Path, clock: ManualClock
) -> None:
    """A fetch is parked in the read callback, before its task starts: a connection the client
    resets, or one the listener gives up waiting on (its EOF, then `close_wait_ms`), still
    unparks it."""
    (node,) = served(tmp_path, clock, (1,))
    purgatory = node.rm._delayed.fetch
    listener = KafkaListener("PLAINTEXT", "127.0.0.1", 0, KafkaListenerConfig(close_wait_ms=100))
    await listener.start(handlers(node))
    try:
        waiting = fetch_frame(1, request(at(0), max_wait_ms=60_000))
        _, writer = await asyncio.open_connection("127.0.0.1", listener.port)
        writer.write(waiting)
        await eventually(lambda: len(purgatory) == 1, "the fetch parked")
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()  # RST
        await eventually(lambda: len(purgatory) == 0, "unparked: reset")
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
        writer.write(waiting)
        writer.write_eof()  # the listener waits close_wait_ms for the answer, then closes
        async with asyncio.timeout(5):
            assert await reader.read() == b""
        await eventually(lambda: len(purgatory) == 0, "unparked: closed after close_wait_ms")
        writer.close()
    finally:
        await listener.stop()


@pytest.mark.asyncio
async def test_offset_for_leader_epoch_is_answered_at_once(
    tmp_path: Path, clock: ManualClock
) -> None:
    (node,) = served(tmp_path, clock, (1,))
    await produce(node, batch(3))

    def asked(leader_epoch: int, current: int = -1, partition: int = 0) -> tuple[int, int, int]:
        body = OffsetForLeaderEpochRequest(
            replica_id=-1,
            topics=[
                OffsetForLeaderTopic(
                    topic="t",
                    partitions=[
                        OffsetForLeaderPartition(
                            partition=partition,
                            leader_epoch=leader_epoch,
                            current_leader_epoch=current,
                        )
                    ],
                )
            ],
        )
        header = RequestHeader(request_api_key=23, request_api_version=4, correlation_id=1)
        answer = handlers(node).handle(KafkaRequest(0, header, body, 0), "P")
        assert isinstance(answer, OffsetForLeaderEpochResponse)  # not an awaitable
        (result,) = answer.topics[0].partitions
        return result.error_code, result.leader_epoch, result.end_offset

    assert asked(EPOCH) == (0, EPOCH, 3)
    assert asked(EPOCH, current=EPOCH - 1)[0] == FencedLeaderEpochError.code
    assert asked(EPOCH, current=EPOCH + 1)[0] == UnknownLeaderEpochError.code
    assert asked(EPOCH, partition=3)[0] == UnknownTopicOrPartitionError.code


@pytest.mark.asyncio
async def test_a_broker_not_serving_data_refuses_the_request(
    tmp_path: Path, clock: ManualClock
) -> None:
    (node,) = served(tmp_path, clock, (1,))
    apis = handlers(node)
    apis._service("Fetch").attach(None)
    with pytest.raises(RequestRefusedError, match=r"^broker 1: not serving data requests"):
        apis.fetch(request(at(0)), 12)


@pytest.mark.asyncio
async def test_a_session_reads_its_partitions_in_its_order_across_topics(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Partitions that interleave topics (t-0, u-0, t-1) are read in the request's order,
    then the session's (partitions that got records move to its end: Kafka's fairness), not
    grouped by topic: with a budget of one batch a fetch and t-0 read to its end, u-0 gets
    the budget before t-1, then t-1 before u-0."""
    image = cluster_image(
        *create_topic("t", TID, (1,), (1,), leader_epoch=EPOCH),
        *create_topic("u", SOLO_TID, (1,), leader_epoch=EPOCH),
    )
    node = Node(tmp_path, 1, clock)
    node.rm.apply_image(image)
    for topic, partition in (("t", 0), ("u", 0), ("t", 1)):
        await produce(node, batch(2), topic=topic, partition=partition)
    apis = handlers(node)

    def entry(topic: str, partition: int, offset: int) -> FetchTopic:
        return FetchTopic(topic=topic, partitions=[at(offset, partition=partition)])

    def fetched(**fields: Any) -> tuple[int, list[tuple[str, int]]]:
        body = FetchRequest(max_bytes=len(batch(2)), min_bytes=1, **fields)
        answer = now(apis.fetch(body, 12))
        got = [
            (t.topic, p.partition_index)
            for t in answer.responses
            for p in t.partitions
            if p.records
        ]
        return answer.session_id, got

    topics = [entry("t", 0, 2), entry("u", 0, 0), entry("t", 1, 0)]
    session, first = fetched(session_epoch=0, topics=topics)
    assert session > 0 and first == [("u", 0)]
    # u-0 moved to the end (t-0, t-1, u-0); the client sends its new offset.
    _, second = fetched(session_id=session, session_epoch=1, topics=[entry("u", 0, 2)])
    assert second == [("t", 1)]
