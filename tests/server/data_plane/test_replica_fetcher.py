"""ReplicaFetcherManager against fake leaders (grpc.aio servers with the ReplicaFetch service
on 127.0.0.1:0) and a fake replica manager: one task per source,
answers go to process_follower_fetch with the record bytes untouched, a dead or hung peer
or an answer that is not one goes to follower_fetch_failed with one warning naming leader,
address and cause and a new channel, tasks follow fetch_sources(), a storage error stops the
fetchers, stop() ends everything."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

import grpc
import pytest
import pytest_asyncio

from replog.errors import KafkaStorageError, NotLeaderOrFollowerError
from replog.pb import broker_pb2 as pb
from replog.quorum.metadata.image import MetadataImage
from replog.quorum.metadata.records import Endpoint, RegisterBrokerRecord
from replog.record import build_batch
from replog.record.batch import iter_batches
from replog.replication import messages as m
from replog.replication.fetch_session import LeaderFetchSession
from replog.server.data_plane.broker_cores import BrokerCores
from replog.server.data_plane.repeat_reads import RepeatReads
from replog.server.data_plane.replica_fetch_service import SERVICE_NAME as REPLICA_FETCH_SERVICE
from replog.server.data_plane.replica_fetch_service import (
    ReplicaFetchService,
    add_replica_fetch_service,
)
from replog.server.data_plane.replica_fetcher import ReplicaFetcherManager
from replog.server.data_plane.replica_manager import ReplicaManager, ReplicaManagerConfig
from replog.server.runtime.tolerant_service import Refused
from replog.storage.log_manager import LogManager
from replog.testing import GARBAGE, LoopTasks
from replog.wire import broker_codec as codec
from replog.wire.redialing_channel import RedialingChannel
from tests.eventually import eventually
from tests.metadata.metadata_helpers import bootstrapped, create_topic, replayed, topic_id
from tests.server.kafka.kafka_broker_listener import kafka_client_of

BATCH = build_batch([(0, b"k", b"v", ())])
TIMEOUT_S = 10


@dataclass
class FakeFollower:
    """The follower side of a replica manager: fetch `topic-0` from each source until told
    otherwise; records every step."""

    sources: list[int] = field(default_factory=list)
    fetch_wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    processed: list[tuple[int, m.FetchRequest, m.FetchResponse]] = field(default_factory=list)
    failed: list[tuple[int, m.FetchRequest]] = field(default_factory=list)
    paused: set[int] = field(default_factory=set)
    process_error: BaseException | None = None
    max_wait_ms: int = 50

    def fetch_sources(self) -> list[int]:
        return list(self.sources)

    def build_follower_fetch(self, source_broker_id: int, now_ms: int) -> m.FetchRequest | None:
        if source_broker_id in self.paused:
            return None
        return m.FetchRequest(
            (m.FetchPartition(f"topic{source_broker_id}", 0, fetch_offset=len(self.processed)),),
            replica_id=9,
            replica_epoch=100,
            max_wait_ms=self.max_wait_ms,
        )

    def follower_fetch_changes(self, source_broker_id: int) -> None:
        return None  # the stream compares every entry

    def process_follower_fetch(
        self, source_broker_id: int, request: m.FetchRequest, response: m.FetchResponse, now_ms: int
    ) -> None:
        if self.process_error is not None:
            raise self.process_error
        self.processed.append((source_broker_id, request, response))

    def follower_fetch_failed(
        self, source_broker_id: int, request: m.FetchRequest, now_ms: int
    ) -> None:
        self.failed.append((source_broker_id, request))


class FakeLeader:
    """A leader answering every fetch with BATCH on its ReplicaFetch service. `hang`: never
    answers; `end_connections`: ends each stream at its second request."""

    def __init__(self, hang: bool = False, end_connections: bool = False) -> None:
        self.hang = hang
        self.end_connections = end_connections
        self.requests: list[pb.FetchRequest] = []
        self.sessions: list[LeaderFetchSession] = []  # one per stream, in order
        self.stream_service = ReplicaFetchService(1, self.serve, 1 << 20)

    async def serve(
        self, request: pb.FetchRequest, session: LeaderFetchSession, repeats: RepeatReads
    ) -> m.FetchResponse:
        if not any(s is session for s in self.sessions):
            self.sessions.append(session)
        elif self.end_connections:
            raise Refused(grpc.StatusCode.UNAVAILABLE, "ending the stream")
        self.requests.append(request)
        if self.hang:
            await asyncio.sleep(3600)
        decoded = codec.fetch_request_from_proto(request)
        return m.FetchResponse(
            tuple(
                m.FetchPartitionResult(p.topic, p.partition, high_watermark=1, records=BATCH)
                for p in decoded.partitions
            )
        )


@dataclass
class Leaders:
    addresses: dict[int, str]
    servicers: dict[int, FakeLeader]


async def serving(servicer: FakeLeader) -> tuple[Any, str]:
    """A started grpc.aio server for `servicer` on a free port, and its address."""
    server = grpc.aio.server()
    add_replica_fetch_service(servicer.stream_service, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, f"127.0.0.1:{port}"


async def stopped(server: Any, servicer: FakeLeader) -> None:
    await server.stop(grace=None)


@pytest_asyncio.fixture
async def leaders() -> AsyncIterator[Leaders]:
    servers = []
    addresses: dict[int, str] = {}
    servicers: dict[int, FakeLeader] = {}
    for broker_id in (1, 2, 3):
        servicer = FakeLeader(hang=broker_id == 3)
        server, addresses[broker_id] = await serving(servicer)
        servers.append((server, servicer))
        servicers[broker_id] = servicer
    try:
        yield Leaders(addresses, servicers)
    finally:
        for server, servicer in servers:
            await stopped(server, servicer)


def _log_bytes(log: Any) -> bytes:
    """Every batch of `log`, as stored (offsets and leader epoch stamped)."""
    return bytes(log.read(0, 64 * 1024 * 1024))


@pytest.mark.asyncio
async def test_each_source_gets_a_task_and_answers_reach_the_manager(leaders: Leaders) -> None:
    rm = FakeFollower(sources=[1, 2])
    fetchers = ReplicaFetcherManager(rm, leaders.addresses.get, idle_poll_ms=10, tasks=LoopTasks())
    fetchers.start()
    try:
        await eventually(lambda: {s for s, _, _ in rm.processed} == {1, 2}, "both sources fetched")
        source, _, response = rm.processed[0]
        assert response.partitions[0].records == BATCH  # the leader's bytes, untouched
        assert response.partitions[0].topic == f"topic{source}"
        assert fetchers.sources == {1, 2}
        wire = leaders.servicers[1].requests[0]
        assert wire.replica_id == 9 and wire.replica_epoch == 100
    finally:
        await fetchers.stop()
    assert rm.failed == []


@pytest.mark.asyncio
async def test_tasks_follow_the_fetch_sources(leaders: Leaders) -> None:
    rm = FakeFollower(sources=[1])
    fetchers = ReplicaFetcherManager(rm, leaders.addresses.get, idle_poll_ms=10, tasks=LoopTasks())
    fetchers.start()
    try:
        await eventually(lambda: fetchers.sources == {1}, "fetcher for broker 1")
        rm.sources = [2]
        rm.fetch_wakeup.set()
        await eventually(lambda: fetchers.sources == {2}, "fetcher moved to broker 2")
        count = len(leaders.servicers[1].requests)
        await eventually(lambda: any(s == 2 for s, _, _ in rm.processed), "fetched from 2")
        await asyncio.sleep(0.1)
        assert len(leaders.servicers[1].requests) == count  # nothing more to broker 1
        rm.sources = []
        rm.fetch_wakeup.set()
        await eventually(lambda: fetchers.sources == set(), "no fetchers")
    finally:
        await fetchers.stop()


def fetcher_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "replog.server.fetcher" and r.levelno == logging.WARNING
    ]


@pytest.mark.asyncio
async def test_a_dead_peer_is_a_failed_fetch_and_the_task_keeps_trying(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Kafka's fetcher warns on every failed fetch ("Error in response for fetch request"),
    a dead leader's included; the manager's back-off paces them."""
    caplog.set_level(logging.WARNING, "replog.server.fetcher")
    rm = FakeFollower(sources=[1])
    fetchers = ReplicaFetcherManager(rm, {1: "127.0.0.1:1"}.get, idle_poll_ms=10, tasks=LoopTasks())
    fetchers.start()
    try:
        await eventually(lambda: len(rm.failed) >= 2, "two failed fetches")
        assert all(source == 1 for source, _ in rm.failed)
        assert rm.processed == []
    finally:
        await fetchers.stop()
    warnings = fetcher_warnings(caplog)
    assert len(warnings) == len(rm.failed)
    said = "NetworkError: broker 1 at 127.0.0.1:1: ReplicaFetch.Fetch failed: UNAVAILABLE"
    assert f"fetch from leader broker 1 at 127.0.0.1:1 failed: {said}" in warnings[0]


@pytest.mark.asyncio
async def test_a_leader_with_no_known_address_is_a_failed_fetch_with_one_warning_each(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, "replog.server.fetcher")
    rm = FakeFollower(sources=[1])
    fetchers = ReplicaFetcherManager(rm, {}.get, idle_poll_ms=10, tasks=LoopTasks())
    fetchers.start()
    try:
        await eventually(lambda: len(rm.failed) >= 2, "two failed fetches")
    finally:
        await fetchers.stop()
    assert rm.processed == [] and fetchers.fetches == 0
    warnings = fetcher_warnings(caplog)
    assert len(warnings) == len(rm.failed) == fetchers.failures
    assert warnings[0].startswith("fetch from leader broker 1 failed: it has no known address")


async def raw_leader(fetch: Any) -> tuple[Any, str]:
    """A started grpc.aio server whose ReplicaFetch.Fetch is the stream handler `fetch` (raw
    bytes both ways), and its address."""
    server = grpc.aio.server()
    handler = grpc.stream_stream_rpc_method_handler(fetch)
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(REPLICA_FETCH_SERVICE, {"Fetch": handler}),)
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, f"127.0.0.1:{port}"


async def answer_garbage(requests: AsyncIterator[bytes], context: Any) -> AsyncIterator[bytes]:
    async for _ in requests:
        yield GARBAGE


@pytest.mark.asyncio
async def test_an_answer_that_is_not_one_is_one_warning_and_a_new_channel_per_failure(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A leader whose stream answers garbage: each fetch fails as a whole (the manager backs
    its partitions off), one warning each naming the leader, its address and what was wrong,
    and the next fetch dials a new channel (Kafka's BrokerBlockingSender closes the
    connection)."""
    caplog.set_level(logging.WARNING, "replog.server.fetcher")
    redialled: list[str] = []
    reconnect = RedialingChannel.reconnect

    def recording(channel: RedialingChannel[Any]) -> None:
        redialled.append(channel.address)
        reconnect(channel)

    monkeypatch.setattr(RedialingChannel, "reconnect", recording)
    server, address = await raw_leader(answer_garbage)
    rm = FakeFollower(sources=[1])
    fetchers = ReplicaFetcherManager(rm, {1: address}.get, idle_poll_ms=10, tasks=LoopTasks())
    fetchers.start()
    try:
        await eventually(lambda: len(rm.failed) >= 2, "two failed fetches")
    finally:
        await fetchers.stop()
        await server.stop(grace=None)
    assert rm.processed == []
    warnings = fetcher_warnings(caplog)
    assert len(warnings) == len(rm.failed) == fetchers.failures
    assert warnings[0].startswith(
        f"fetch from leader broker 1 at {address} failed: MalformedResponseError: "
        f"broker 1 at {address} answered ReplicaFetch.Fetch with bytes that are no FetchResponse"
    )
    assert warnings[0].endswith("; backing off its 1 partition(s)")
    assert redialled == [address] * len(rm.failed)


@pytest.mark.asyncio
async def test_every_fetch_from_a_source_goes_on_one_stream(leaders: Leaders) -> None:
    rm = FakeFollower(sources=[1])
    fetchers = ReplicaFetcherManager(rm, leaders.addresses.get, idle_poll_ms=10, tasks=LoopTasks())
    fetchers.start()
    try:
        await eventually(lambda: len(rm.processed) >= 5, "five fetches")
    finally:
        await fetchers.stop()
    assert len(leaders.servicers[1].sessions) == 1
    assert [r.topics[0].partitions[0].fetch_offset for r in leaders.servicers[1].requests[:5]] == [
        0,
        1,
        2,
        3,
        4,
    ]
    # A session: the first request in full (epoch 0), the next ones incremental.
    assert [r.session_epoch for r in leaders.servicers[1].requests[:3]] == [0, 1, 2]


@pytest.mark.asyncio
async def test_a_stream_the_leader_ends_is_a_failed_fetch_and_the_next_opens_another(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, "replog.server.fetcher")
    servicer = FakeLeader(end_connections=True)
    server, address = await serving(servicer)
    rm = FakeFollower(sources=[1])
    fetchers = ReplicaFetcherManager(rm, {1: address}.get, idle_poll_ms=10, tasks=LoopTasks())
    fetchers.start()
    try:
        await eventually(lambda: len(rm.failed) >= 2, "two ended connections")
    finally:
        await fetchers.stop()
        await stopped(server, servicer)
    # Each stream: one answer processed, then its end is a failed fetch; a new one (and
    # a new session, starting with a full fetch) follows.
    assert len(servicer.sessions) >= 2 and len(rm.processed) >= 2
    assert all(r.session_epoch == 0 for r in servicer.requests)
    warnings = fetcher_warnings(caplog)
    assert len(warnings) == len(rm.failed)
    ended = f"NetworkError: broker 1 at {address}: ReplicaFetch.Fetch failed: UNAVAILABLE"
    assert all(ended in w for w in warnings), warnings


@pytest.mark.asyncio
async def test_a_source_without_an_address_is_a_failed_fetch() -> None:
    rm = FakeFollower(sources=[4])
    fetchers = ReplicaFetcherManager(rm, lambda broker_id: None, idle_poll_ms=10, tasks=LoopTasks())
    fetchers.start()
    try:
        await eventually(lambda: len(rm.failed) >= 1, "a failed fetch")
    finally:
        await fetchers.stop()


@pytest.mark.asyncio
async def test_a_hung_peer_times_out_into_a_failed_fetch(leaders: Leaders) -> None:
    rm = FakeFollower(sources=[3])
    fetchers = ReplicaFetcherManager(
        rm, leaders.addresses.get, idle_poll_ms=10, request_timeout_ms=100, tasks=LoopTasks()
    )
    fetchers.start()
    try:
        await eventually(lambda: len(rm.failed) >= 1, "a timed-out fetch")
    finally:
        await fetchers.stop()


@pytest.mark.asyncio
async def test_an_idle_source_waits_for_the_wakeup(leaders: Leaders) -> None:
    rm = FakeFollower(sources=[1], paused={1})
    fetchers = ReplicaFetcherManager(
        rm, leaders.addresses.get, idle_poll_ms=60_000, tasks=LoopTasks()
    )
    fetchers.start()
    try:
        await eventually(lambda: fetchers.sources == {1}, "the task runs")
        await asyncio.sleep(0.1)
        assert leaders.servicers[1].requests == []
        rm.paused.clear()
        rm.fetch_wakeup.set()
        await eventually(lambda: len(rm.processed) >= 1, "fetched after the wakeup")
    finally:
        await fetchers.stop()


@pytest.mark.asyncio
async def test_stop_cancels_a_fetch_in_flight(leaders: Leaders) -> None:
    rm = FakeFollower(sources=[3])
    fetchers = ReplicaFetcherManager(rm, leaders.addresses.get, tasks=LoopTasks())
    fetchers.start()
    await eventually(lambda: len(leaders.servicers[3].requests) == 1, "a fetch in flight")
    await asyncio.wait_for(fetchers.stop(), 2)
    assert fetchers.sources == set()
    assert rm.processed == [] and rm.failed == []


@pytest.mark.asyncio
async def test_a_storage_error_stops_the_fetchers_and_is_reported(leaders: Leaders) -> None:
    rm = FakeFollower(sources=[1, 2], process_error=KafkaStorageError("log dir /d: EIO"))
    reported: list[KafkaStorageError] = []
    fetchers = ReplicaFetcherManager(
        rm,
        leaders.addresses.get,
        idle_poll_ms=10,
        on_storage_error=reported.append,
        tasks=LoopTasks(),
    )
    fetchers.start()
    try:
        await eventually(lambda: len(reported) >= 1, "the storage error reported")
        await eventually(lambda: fetchers.sources == set(), "every fetcher stopped")
    finally:
        await fetchers.stop()


@pytest.mark.asyncio
async def test_an_unexpected_error_in_processing_is_a_failed_fetch(leaders: Leaders) -> None:
    rm = FakeFollower(sources=[1], process_error=RuntimeError("bug"))
    fetchers = ReplicaFetcherManager(rm, leaders.addresses.get, idle_poll_ms=10, tasks=LoopTasks())
    fetchers.start()
    try:
        await eventually(lambda: len(rm.failed) >= 2, "failures, and it goes on")
    finally:
        await fetchers.stop()


# --- three real brokers in one process -------------------------------------------------------


@dataclass
class Broker:
    broker_id: int
    server: Any
    address: str
    log_manager: LogManager
    replica_manager: ReplicaManager
    service: BrokerCores
    fetchers: ReplicaFetcherManager | None = None


def three_broker_image(addresses: dict[int, str]) -> MetadataImage:
    registrations = []
    for broker_id, address in addresses.items():
        host, port = address.rsplit(":", 1)
        registrations.append(
            RegisterBrokerRecord(
                broker_id,
                UUID(int=1000 + broker_id),
                100 + broker_id,
                endpoints=(Endpoint("PLAINTEXT", host, int(port)),),
                fenced=False,
            )
        )
    return replayed(bootstrapped(), *registrations, *create_topic("orders", topic_id(5), (1, 2, 3)))


@pytest.mark.asyncio
async def test_three_brokers_replicate_an_acks_all_produce(tmp_path: Path) -> None:
    brokers: dict[int, Broker] = {}
    try:
        for broker_id in (1, 2, 3):
            log_manager = LogManager(str(tmp_path / f"broker{broker_id}"))
            replica_manager = ReplicaManager(
                ReplicaManagerConfig(broker_id, replica_fetch_wait_ms_max=100),
                log_manager,
                tasks=LoopTasks(),
            )
            service = BrokerCores(broker_id, replica_manager=replica_manager)
            server = grpc.aio.server()
            add_replica_fetch_service(
                ReplicaFetchService(broker_id, service.replica_fetch, 1 << 24), server
            )
            port = server.add_insecure_port("127.0.0.1:0")
            await server.start()
            brokers[broker_id] = Broker(
                broker_id,
                server,
                f"127.0.0.1:{port}",
                log_manager,
                replica_manager,
                service,
            )
        image = three_broker_image({b.broker_id: b.address for b in brokers.values()})

        def address_of(broker_id: int) -> str | None:
            registration = image.cluster.brokers.get(broker_id)
            if registration is None:
                return None
            endpoint = registration.endpoints[0]
            return f"{endpoint.host}:{endpoint.port}"

        for broker in brokers.values():
            broker.replica_manager.apply_image(image)
            await broker.replica_manager.start()
            broker.fetchers = ReplicaFetcherManager(
                broker.replica_manager, address_of, idle_poll_ms=10, tasks=LoopTasks()
            )
            broker.fetchers.start()
        assert brokers[1].replica_manager.fetch_sources() == []
        assert brokers[2].replica_manager.fetch_sources() == [1]

        async with kafka_client_of(brokers[1].service, image=lambda: image) as client:
            produced = await asyncio.wait_for(
                client.produce(
                    m.ProduceRequest(m.ACKS_ALL, 5000, (m.ProducePartition("orders", 0, BATCH),))
                ),
                TIMEOUT_S,
            )
            (result,) = produced.partitions
            assert result.error is None and result.base_offset == 0
            # acks=all answered: both followers have it, and the HW covers it.
            for follower in (2, 3):
                log = brokers[follower].log_manager.get_log("orders", 0)
                assert log.log_end_offset == 1
            fetched = await client.fetch(
                m.FetchRequest((m.FetchPartition("orders", 0, 0, topic_id=topic_id(5)),))
            )
            (partition,) = fetched.partitions
            assert partition.error is None and partition.high_watermark == 1
            assert len(partition.records) == len(BATCH)
            # Pipelined on one Kafka connection: appended in the order sent, each answered
            # with its own offset once the followers have it.
            values = [f"pipelined-{i}".encode() for i in range(20)]
            requests = [
                m.ProduceRequest(
                    m.ACKS_ALL,
                    5000,
                    (m.ProducePartition("orders", 0, build_batch([(0, None, value, ())])),),
                )
                for value in values
            ]
            stream = client.produce_stream()
            try:
                answers = await asyncio.wait_for(
                    asyncio.gather(*(stream.produce(r) for r in requests)), TIMEOUT_S
                )
            finally:
                stream.close()
            assert [a.partitions[0].error for a in answers] == [None] * 20
            assert [a.partitions[0].base_offset for a in answers] == list(range(1, 21))
            fetched = await client.fetch(m.FetchRequest((m.FetchPartition("orders", 0, 1),)))
            stored = [
                record.value
                for batch in iter_batches(fetched.partitions[0].records)
                for record in batch.records()
            ]
            assert stored == values
            # A batch past SPLIT_MIN_BYTES goes record_wire's way: joined into each ReplicaFetch
            # answer, split off it by the follower. The same record everywhere, and the same
            # bytes on every replica.
            big_value = os.urandom(3 * codec.SPLIT_MIN_BYTES)
            big = build_batch([(0, None, big_value, ())])
            assert len(big) >= codec.SPLIT_MIN_BYTES
            produced = await asyncio.wait_for(
                client.produce(
                    m.ProduceRequest(m.ACKS_ALL, 5000, (m.ProducePartition("orders", 0, big),))
                ),
                TIMEOUT_S,
            )
            assert produced.partitions[0].error is None
            assert produced.partitions[0].base_offset == 21
            fetched = await client.fetch(m.FetchRequest((m.FetchPartition("orders", 0, 21),)))
            [batch] = iter_batches(fetched.partitions[0].records)
            assert [record.value for record in batch.records()] == [big_value]
        # The followers learn the HW on their next fetch.
        await eventually(
            lambda: all(
                brokers[b].log_manager.get_log("orders", 0).high_watermark == 22 for b in (2, 3)
            ),
            "the followers' high watermarks",
        )
        leader_bytes = _log_bytes(brokers[1].log_manager.get_log("orders", 0))
        assert leader_bytes == _log_bytes(brokers[2].log_manager.get_log("orders", 0))
        assert leader_bytes == _log_bytes(brokers[3].log_manager.get_log("orders", 0))
        # A consumer may also ask a follower: it is not the leader.
        async with kafka_client_of(brokers[2].service, image=lambda: image) as client:
            answer = await client.fetch(m.FetchRequest((m.FetchPartition("orders", 0, 0),)))
            assert isinstance(answer.partitions[0].error, NotLeaderOrFollowerError)
    finally:
        for broker in brokers.values():
            if broker.fetchers is not None:
                await broker.fetchers.stop()
            await broker.replica_manager.stop()
            await broker.server.stop(grace=None)
            broker.log_manager.shutdown()
