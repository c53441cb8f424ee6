"""ClusterMetadata against tiny in-process fake brokers (Kafka listeners that answer Metadata).

Covered: the bootstrap failure names every address and its cause, a missing topic fails at once,
concurrent callers share one refresh, stale and aged metadata is refreshed on use (and the cache
serves when that fails), advertised brokers are asked when the bootstrap one is gone, a broker
that failed (hung) is asked after the others, and so is one whose produce or fetch timed out
(`distrust`: it may be a leader cut off from the cluster) until it answers again; an answer
never moves a partition back to an older leader epoch unless the topic's id changed (KIP-320);
and a caller giving up does not cancel a shared refresh.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import pytest
import pytest_asyncio

from replog.client.cluster_metadata import ClusterMetadata, PartitionState
from replog.client.connections import Connections
from replog.clock import monotonic_ms
from replog.common import TopicPartition
from replog.errors import (
    InvalidTopicError,
    KafkaTimeoutError,
    NoBrokersAvailableError,
    UnknownTopicOrPartitionError,
)
from replog.kafka.messages.api_versions_request import ApiVersionsRequest
from replog.kafka.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from replog.kafka.messages.metadata_request import MetadataRequest
from replog.kafka.messages.metadata_response import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from replog.kafka.protocol.codec import ZERO_UUID
from replog.kafka.protocol.framing import decode_request, encode_response


class KafkaServer:
    """A Kafka listener on the test's loop that answers Metadata with `handler`; `stop` closes
    it and every connection (the broker is gone)."""

    def __init__(self, handler: Callable[[MetadataRequest], Awaitable[MetadataResponse]]) -> None:
        self._handler = handler
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while True:
                size = int.from_bytes(await reader.readexactly(4), "big")
                header, request = decode_request(await reader.readexactly(size))
                key, version = header.request_api_key, header.request_api_version
                if isinstance(request, ApiVersionsRequest):
                    answer: Any = ApiVersionsResponse(
                        api_keys=[
                            ApiVersion(api_key=3, min_version=0, max_version=12),
                            ApiVersion(api_key=18, min_version=0, max_version=3),
                        ]
                    )
                else:
                    assert isinstance(request, MetadataRequest)
                    answer = await self._handler(request)
                writer.write(encode_response(key, version, header.correlation_id, answer))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()

    async def stop(self, grace: object = None) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.close()
        await self._server.wait_closed()


@dataclass
class FakeBroker:
    """Answers Metadata from `topics` (name -> partition count; partition p led by node
    (p + leader_shift) % 3 at `leader_epoch`)."""

    broker_id: int
    topics: dict[str, int]
    leader_epoch: int = 5
    leader_shift: int = 0
    topic_id: bytes = b""
    advertised: list[tuple[int, str]] = field(default_factory=list)  # (id, host:port)
    calls: list[list[str]] = field(default_factory=list)
    gate: asyncio.Event | None = None  # when set: answers wait for it
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    server: Any = None
    address: str = ""

    async def metadata(self, request: MetadataRequest) -> MetadataResponse:
        asked = [t.name or "" for t in request.topics or ()]
        self.calls.append(asked)
        self.arrived.set()
        if self.gate is not None:
            await self.gate.wait()
        names = asked or sorted(self.topics)
        topics = []
        for name in names:
            count = self.topics.get(name)
            if count is None:
                topics.append(MetadataResponseTopic(name=name, error_code=3))
                continue
            partitions = [
                MetadataResponsePartition(
                    partition_index=p,
                    leader_id=(p + self.leader_shift) % 3,
                    leader_epoch=self.leader_epoch,
                    replica_nodes=[0, 1, 2],
                    isr_nodes=[0, 1, 2],
                )
                for p in reversed(range(count))  # out of order on purpose
            ]
            topic_id = UUID(bytes=self.topic_id) if self.topic_id else ZERO_UUID
            topics.append(
                MetadataResponseTopic(name=name, topic_id=topic_id, partitions=partitions)
            )
        brokers = [
            MetadataResponseBroker(
                node_id=i, host=a.rsplit(":", 1)[0], port=int(a.rsplit(":", 1)[1])
            )
            for i, a in self.advertised
        ]
        return MetadataResponse(
            controller_id=7, cluster_id="fake-cluster", brokers=brokers, topics=topics
        )


async def start_fake(broker_id: int, topics: dict[str, int]) -> FakeBroker:
    fake = FakeBroker(broker_id, topics)
    server = KafkaServer(fake.metadata)
    port = await server.start()
    fake.server = server
    fake.address = f"127.0.0.1:{port}"
    fake.advertised = [(broker_id, fake.address)]
    return fake


def dead_address() -> str:
    """A loopback address nobody listens at (connection refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


@dataclass
class Harness:
    connections: Connections
    made: list[ClusterMetadata] = field(default_factory=list)

    def metadata(self, bootstrap: list[str], **overrides: int) -> ClusterMetadata:
        settings = {
            "metadata_max_age_ms": 300_000,
            "retry_backoff_ms": 10,
            "retry_backoff_max_ms": 50,
            "request_timeout_ms": 2_000,
            **overrides,
        }
        made = ClusterMetadata(bootstrap, self.connections, **settings)
        self.made.append(made)
        return made


@pytest_asyncio.fixture
async def harness() -> AsyncIterator[Harness]:
    h = Harness(Connections(request_timeout_ms=2_000, client_id="test"))
    yield h
    for made in h.made:
        await made.close()
    await h.connections.close()


@pytest_asyncio.fixture
async def fake() -> AsyncIterator[FakeBroker]:
    broker = await start_fake(0, {"orders": 3, "events": 1})
    yield broker
    await broker.server.stop(None)


def soon(ms: int = 5_000) -> int:
    return monotonic_ms() + ms


@pytest.mark.asyncio
async def test_partitions_brokers_and_cluster_come_from_the_answer(
    harness: Harness, fake: FakeBroker
) -> None:
    metadata = harness.metadata([fake.address])
    refreshed: list[frozenset[str]] = []
    metadata.add_listener(lambda: refreshed.append(metadata.topics))
    states = await metadata.partitions_for("orders", deadline_ms=soon())
    assert [s.partition for s in states] == [0, 1, 2]
    assert states[1] == PartitionState("orders", 1, 1, 5, (0, 1, 2), (0, 1, 2), ())
    assert metadata.partition(TopicPartition("orders", 2)) == states[2]
    assert metadata.partition(TopicPartition("orders", 3)) is None
    assert metadata.brokers() == {0: fake.address}
    assert metadata.broker_address(0) == fake.address
    assert metadata.broker_address(1) is None
    assert metadata.cluster_id == "fake-cluster"
    assert metadata.controller_id == 7
    assert refreshed == [frozenset({"orders"})]
    assert fake.calls == [["orders"]]


@pytest.mark.asyncio
async def test_bootstrap_failure_names_every_address_and_the_cause(harness: Harness) -> None:
    first, second = dead_address(), dead_address()
    metadata = harness.metadata([first, second])
    with pytest.raises(NoBrokersAvailableError) as raised:
        await metadata.refresh(deadline_ms=soon())
    assert str(raised.value) == (
        f"no broker reachable at {first} after 1 attempt, {second} after 1 attempt: "
        "connection refused"
    )
    with pytest.raises(NoBrokersAvailableError, match=f"{first} after 2 attempts"):
        await metadata.refresh(deadline_ms=soon())


@pytest.mark.asyncio
async def test_partitions_for_on_a_dead_cluster_times_out_naming_the_cause(
    harness: Harness,
) -> None:
    address = dead_address()
    metadata = harness.metadata([address])
    started = time.monotonic()
    with pytest.raises(KafkaTimeoutError) as raised:
        await metadata.partitions_for("orders", deadline_ms=soon(400))
    elapsed = time.monotonic() - started
    assert 0.3 < elapsed < 2.0
    text = str(raised.value)
    assert "topic 'orders'" in text and address in text and "connection refused" in text


@pytest.mark.asyncio
async def test_a_missing_topic_fails_at_once(harness: Harness, fake: FakeBroker) -> None:
    metadata = harness.metadata([fake.address])
    started = time.monotonic()
    with pytest.raises(UnknownTopicOrPartitionError, match=r"^topic 'nope' does not exist$"):
        await metadata.partitions_for("nope", deadline_ms=soon(30_000))
    assert time.monotonic() - started < 5  # not the 30 s deadline; room for a loaded machine
    assert fake.calls == [["nope"]]


@pytest.mark.asyncio
async def test_a_topic_seen_before_and_called_unknown_is_waited_for(
    harness: Harness, fake: FakeBroker
) -> None:
    # After a whole-cluster restart a broker may answer before it caught up on the metadata
    # log, calling an existing topic unknown: a topic seen before is retried until the deadline
    # (max.block.ms), so sends to it do not fail at once with "does not exist".
    metadata = harness.metadata([fake.address])
    before = await metadata.partitions_for("orders", deadline_ms=soon())
    fake.topics.pop("orders")  # the restarted broker does not know it yet
    metadata.request_update()

    asked = len(fake.calls)

    async def catch_up() -> None:
        # Once the broker answered "unknown" (the wait is on), it catches up.
        async with asyncio.timeout(5):
            while len(fake.calls) <= asked:
                await asyncio.sleep(0.001)
        fake.topics["orders"] = 3

    caught_up = asyncio.create_task(catch_up())
    waited = await metadata.partitions_for(
        "orders", deadline_ms=soon(10_000), wait_for_seen_topic=True
    )
    assert waited == before
    await caught_up
    fake.topics.pop("orders")  # deleted for good: the deadline ends the wait
    metadata.request_update()
    with pytest.raises(KafkaTimeoutError, match="metadata for topic 'orders' not available"):
        await metadata.partitions_for("orders", deadline_ms=soon(500), wait_for_seen_topic=True)
    # Without the flag (a consumer's refresh) the answer is taken at once.
    with pytest.raises(UnknownTopicOrPartitionError, match="does not exist"):
        await metadata.partitions_for("orders", deadline_ms=soon(10_000))


@pytest.mark.asyncio
async def test_an_illegal_topic_name_is_refused_without_asking(
    harness: Harness, fake: FakeBroker
) -> None:
    metadata = harness.metadata([fake.address])
    with pytest.raises(InvalidTopicError, match="bad name"):
        await metadata.partitions_for("bad name", deadline_ms=soon())
    assert fake.calls == []


@pytest.mark.asyncio
async def test_concurrent_callers_share_one_refresh(harness: Harness, fake: FakeBroker) -> None:
    metadata = harness.metadata([fake.address])
    fake.gate = asyncio.Event()
    callers = [
        asyncio.create_task(metadata.partitions_for("orders", deadline_ms=soon())) for _ in range(5)
    ]
    await asyncio.wait_for(fake.arrived.wait(), 5)
    await asyncio.sleep(0.05)  # let the other callers reach the shared refresh
    fake.gate.set()
    answers = await asyncio.gather(*callers)
    assert all(a == answers[0] for a in answers)
    assert fake.calls == [["orders"]]


@pytest.mark.asyncio
async def test_a_caller_giving_up_does_not_cancel_the_shared_refresh(
    harness: Harness, fake: FakeBroker
) -> None:
    metadata = harness.metadata([fake.address])
    fake.gate = asyncio.Event()
    impatient = asyncio.create_task(metadata.partitions_for("orders", deadline_ms=soon(100)))
    patient = asyncio.create_task(metadata.partitions_for("orders", deadline_ms=soon()))
    with pytest.raises(KafkaTimeoutError):
        await impatient
    fake.gate.set()
    assert len(await patient) == 3
    assert fake.calls == [["orders"]]


@pytest.mark.asyncio
async def test_a_refresh_for_other_topics_asks_for_every_topic_used(
    harness: Harness, fake: FakeBroker
) -> None:
    metadata = harness.metadata([fake.address])
    await metadata.partitions_for("orders", deadline_ms=soon())
    await metadata.partitions_for("events", deadline_ms=soon())
    assert fake.calls == [["orders"], ["events", "orders"]]
    assert metadata.topics == {"orders", "events"}


@pytest.mark.asyncio
async def test_a_caller_woken_as_a_pass_for_other_topics_ends_starts_the_next_pass(
    harness: Harness, fake: FakeBroker
) -> None:
    """A caller for "events" runs in the loop turn the "orders" pass ends in, before the
    pass's done callback: it asks again rather than waiting on the done pass forever (awaiting
    a done task does not yield, so the loop never ran again: a CI worker grew to 4 GiB)."""
    metadata = harness.metadata([fake.address])
    waits = 0
    wait = metadata._wait

    async def counted_wait(task: asyncio.Task[None], deadline_ms: int) -> None:
        nonlocal waits
        waits += 1
        assert waits < 100, "the refresh keeps waiting on a pass that is over"
        await wait(task, deadline_ms)

    metadata._wait = counted_wait  # type: ignore[method-assign]
    ended = asyncio.get_running_loop().create_future()
    # A listener runs inside the pass: the caller it wakes runs before the pass's callbacks.
    metadata.add_listener(lambda: ended.done() or ended.set_result(None))

    async def events_after_the_orders_pass() -> tuple[PartitionState, ...]:
        await ended
        return await metadata.partitions_for("events", deadline_ms=soon())

    caller = asyncio.create_task(events_after_the_orders_pass())
    assert len(await metadata.partitions_for("orders", deadline_ms=soon())) == 3
    assert len(await asyncio.wait_for(caller, 5)) == 1
    assert fake.calls == [["orders"], ["events", "orders"]]


@pytest.mark.asyncio
async def test_stale_metadata_is_refreshed_on_next_use(harness: Harness, fake: FakeBroker) -> None:
    metadata = harness.metadata([fake.address])
    await metadata.partitions_for("orders", deadline_ms=soon())
    await metadata.partitions_for("orders", deadline_ms=soon())
    assert len(fake.calls) == 1  # fresh: served from the cache
    fake.topics["orders"] = 4
    metadata.request_update()
    assert len(await metadata.partitions_for("orders", deadline_ms=soon())) == 4
    assert len(fake.calls) == 2
    assert not metadata.needs_refresh()


@pytest.mark.asyncio
async def test_metadata_older_than_max_age_is_refreshed(harness: Harness, fake: FakeBroker) -> None:
    metadata = harness.metadata([fake.address], metadata_max_age_ms=0)
    await metadata.partitions_for("orders", deadline_ms=soon())
    await metadata.partitions_for("orders", deadline_ms=soon())
    assert len(fake.calls) == 2


@pytest.mark.asyncio
async def test_a_known_topic_is_served_from_cache_when_the_refresh_fails(
    harness: Harness, fake: FakeBroker
) -> None:
    metadata = harness.metadata([fake.address])
    before = await metadata.partitions_for("orders", deadline_ms=soon())
    await fake.server.stop(None)
    metadata.request_update()
    started = time.monotonic()
    assert await metadata.partitions_for("orders", deadline_ms=soon(10_000)) == before
    assert time.monotonic() - started < 2.0
    with pytest.raises(NoBrokersAvailableError, match=fake.address):
        await metadata.refresh(deadline_ms=soon())


@pytest.mark.asyncio
async def test_advertised_brokers_are_asked_when_the_bootstrap_one_is_gone(
    harness: Harness, fake: FakeBroker
) -> None:
    other = await start_fake(1, {"orders": 3})
    try:
        fake.advertised = [(0, fake.address), (1, other.address)]
        metadata = harness.metadata([fake.address])
        await metadata.partitions_for("orders", deadline_ms=soon())
        await fake.server.stop(None)
        await metadata.refresh(deadline_ms=soon())
        assert other.calls == [["orders"]]
        assert metadata.brokers() == {1: other.address}
    finally:
        await other.server.stop(None)


@pytest.mark.asyncio
async def test_a_hung_broker_is_asked_after_the_others_once_it_failed(
    harness: Harness, fake: FakeBroker
) -> None:
    """A broker that accepts calls but never answers (SIGSTOP) must not take every pass:
    after one timeout the next pass asks the others first and learns the new leaders."""
    other = await start_fake(1, {"orders": 3})
    try:
        fake.advertised = other.advertised = [(0, fake.address), (1, other.address)]
        metadata = harness.metadata([fake.address], request_timeout_ms=300)
        await metadata.partitions_for("orders", deadline_ms=soon())
        assert metadata.brokers() == {0: fake.address, 1: other.address}
        fake.gate = asyncio.Event()  # hung from now on
        asked_before = len(fake.calls)
        # A caller as patient as the request timeout: the pass asks the last broker that
        # answered, which hangs until the timeout ends the pass.
        with pytest.raises(KafkaTimeoutError):
            await metadata.refresh(deadline_ms=soon(100))
        # The shared pass goes on until the request timeout, and then has no time left.
        with pytest.raises(NoBrokersAvailableError, match=fake.address):
            await metadata.refresh(deadline_ms=soon())
        assert len(fake.calls) == asked_before + 1 and not other.calls
        # The next pass asks the other broker first (were the hung one first, it would be
        # called again and the pass would wait out another request timeout).
        await metadata.refresh(deadline_ms=soon())
        assert other.calls and len(fake.calls) == asked_before + 1
    finally:
        fake.gate.set()
        await other.server.stop(None)


@pytest.mark.asyncio
async def test_a_distrusted_broker_is_asked_after_the_others_until_it_answers_again(
    harness: Harness, fake: FakeBroker
) -> None:
    """A leader cut off from the cluster answers Metadata at once, naming itself: after its
    produce or fetch timed out, the others are asked first; once it answers a pass again it
    is trusted (and asked first, as the last to answer)."""
    other = await start_fake(1, {"orders": 3})
    third = await start_fake(2, {"orders": 3})
    try:
        fake.advertised = other.advertised = [(0, fake.address), (1, other.address)]
        metadata = harness.metadata([fake.address])
        await metadata.partitions_for("orders", deadline_ms=soon())
        asked_before = len(fake.calls)
        metadata.distrust(fake.address)
        assert metadata.needs_refresh()
        await metadata.refresh(deadline_ms=soon())
        await metadata.refresh(deadline_ms=soon())
        assert len(fake.calls) == asked_before and len(other.calls) == 2
        # Still a broker: when the others fail, it is asked...
        await other.server.stop(None)
        fake.advertised = [(2, third.address), (0, fake.address)]
        await metadata.refresh(deadline_ms=soon())
        assert len(fake.calls) == asked_before + 1
        # ... and trusted again: the last to answer, it is asked before `third`.
        await metadata.refresh(deadline_ms=soon())
        assert len(fake.calls) == asked_before + 2 and not third.calls
    finally:
        await other.server.stop(None)
        await third.server.stop(None)


@pytest.mark.asyncio
async def test_a_pass_under_way_when_a_broker_is_distrusted_leaves_the_metadata_stale(
    harness: Harness, fake: FakeBroker
) -> None:
    """Its answer may come from that very broker (Kafka's update request version): the
    metadata stays stale and the broker distrusted."""
    other = await start_fake(1, {"orders": 3})
    try:
        fake.advertised = [(0, fake.address), (1, other.address)]
        metadata = harness.metadata([fake.address])
        await metadata.partitions_for("orders", deadline_ms=soon())
        fake.gate = asyncio.Event()
        fake.arrived.clear()
        refresh = asyncio.create_task(metadata.refresh(deadline_ms=soon()))
        await fake.arrived.wait()
        metadata.distrust(fake.address)
        fake.gate.set()
        await refresh
        assert metadata.needs_refresh()
        await metadata.refresh(deadline_ms=soon())
        assert other.calls, "the distrusted broker was asked first again"
    finally:
        await other.server.stop(None)


@pytest.mark.asyncio
async def test_an_answer_never_moves_a_partition_back_to_an_older_leader_epoch(
    harness: Harness, fake: FakeBroker
) -> None:
    """KIP-320: a broker that lags on metadata (or is cut off) names an older leader; the
    known newer one is kept. A topic created again (a new id) starts afresh."""
    newer = await start_fake(1, {"orders": 3})
    try:
        newer.leader_epoch, newer.leader_shift = 6, 1
        newer.advertised = [(1, newer.address), (0, fake.address)]
        metadata = harness.metadata([newer.address])

        def known() -> list[tuple[int, int]]:
            return [(s.leader, s.leader_epoch) for s in metadata.cached_partitions("orders") or ()]

        await metadata.refresh(["orders"], deadline_ms=soon())
        assert known() == [(1, 6), (2, 6), (0, 6)]
        await newer.server.stop(None)
        await metadata.refresh(["orders"], deadline_ms=soon())  # fake: epoch 5, leader p % 3
        assert fake.calls and known() == [(1, 6), (2, 6), (0, 6)]
        await metadata.refresh(deadline_ms=soon(), every_topic=True)
        assert known() == [(1, 6), (2, 6), (0, 6)]
        fake.topics.pop("orders")  # a broker that does not know the topic yet...
        await metadata.refresh(["orders"], deadline_ms=soon())
        assert metadata.cached_partitions("orders") is None
        fake.topics["orders"] = 3  # ... does not make an older epoch acceptable
        await metadata.refresh(["orders"], deadline_ms=soon())
        assert known() == [(1, 6), (2, 6), (0, 6)]
        fake.topic_id = bytes(16 * [7])  # an id where there was none: not a new topic
        await metadata.refresh(["orders"], deadline_ms=soon())
        assert known() == [(1, 6), (2, 6), (0, 6)]
        fake.topic_id = b""  # a broker that sends none: the id known stays
        await metadata.refresh(["orders"], deadline_ms=soon())
        assert known() == [(1, 6), (2, 6), (0, 6)]
        fake.topic_id = bytes(16 * [8])  # another id: deleted and created again
        await metadata.refresh(["orders"], deadline_ms=soon())
        assert known() == [(0, 5), (1, 5), (2, 5)]
    finally:
        await newer.server.stop(None)


@pytest.mark.asyncio
async def test_listeners_run_after_each_refresh_and_a_failing_one_is_contained(
    harness: Harness, fake: FakeBroker
) -> None:
    metadata = harness.metadata([fake.address])
    seen: list[int] = []

    def broken() -> None:
        raise RuntimeError("listener bug")

    record: Callable[[], None] = lambda: seen.append(len(fake.calls))  # noqa: E731
    metadata.add_listener(broken)
    metadata.add_listener(record)
    await metadata.refresh(["orders"], deadline_ms=soon())
    await metadata.refresh(deadline_ms=soon())
    assert seen == [1, 2]
