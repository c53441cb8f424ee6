"""A follower's ReplicaFetch gRPC stream (`replica_fetch_stream`) against a leader's
`ReplicaFetchService` over a real broker (replica manager, logs) on 127.0.0.1:0, and against
fake leaders answering what no leader answers.

Holds: the stream's fetches form one KIP-227 session (a full fetch, then only changes, the
answers only news); the leader's purgatory long-polls each request (`max_wait_ms`,
`min_bytes`); a stream the leader ends (a stop, a restart) is a typed failure and the next
fetch opens a new stream and session; answers that are not ones, and refusals, are typed
errors naming the leader; the service serves followers only, one per stream."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
import pytest_asyncio

from replog.errors import (
    InvalidFetchSessionEpochError,
    InvalidRequestError,
    MalformedResponseError,
    NetworkError,
)
from replog.pb import broker_pb2 as pb
from replog.record import build_batch
from replog.replication import messages as m
from replog.replication.fetch_session import LeaderFetchSession
from replog.server.data_plane.broker_cores import BrokerCores
from replog.server.data_plane.repeat_reads import RepeatReads
from replog.server.data_plane.replica_fetch_service import (
    SERVICE_NAME,
    ReplicaFetchService,
    add_replica_fetch_service,
)
from replog.server.data_plane.replica_fetch_stream import ReplicaFetchStream
from replog.server.data_plane.replica_manager import ReplicaManager, ReplicaManagerConfig
from replog.storage.log_manager import LogManager
from replog.testing import GARBAGE, LoopTasks
from replog.wire import broker_codec as codec
from tests.metadata.metadata_helpers import create_topic, replayed, topic_id
from tests.server.data_plane.test_replica_fetcher import raw_leader, three_broker_image

TOPIC_ID = topic_id(5)
FOLLOWER = 2
FOLLOWER_EPOCH = 102  # three_broker_image registers broker b with epoch 100 + b
BATCH = build_batch([(0, b"k", b"v", ())])
TIMEOUT_S = 10


@dataclass
class Leader:
    """Broker 1 leading orders-0 and orders-1 (replicas 1, 2, 3), its ReplicaFetch service on
    a grpc.aio server; `requests` is every FetchRequest the service served, in order."""

    rm: ReplicaManager
    service: ReplicaFetchService
    server: Any
    address: str
    requests: list[pb.FetchRequest]

    async def produce(self, partition: int = 0) -> None:
        request = m.ProduceRequest(
            m.ACKS_LEADER, 5000, (m.ProducePartition("orders", partition, BATCH),)
        )
        (result,) = (await self.rm.produce(request)).partitions
        assert result.error is None


async def grpc_server(register: Callable[[Any], None], port: int = 0) -> tuple[Any, str]:
    server = grpc.aio.server()
    register(server)
    bound = server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    return server, f"127.0.0.1:{bound}"


@pytest_asyncio.fixture
async def leader(tmp_path: Path) -> AsyncIterator[Leader]:
    log_manager = LogManager(str(tmp_path / "broker1"))
    rm = ReplicaManager(
        ReplicaManagerConfig(1, replica_fetch_wait_ms_max=10_000), log_manager, tasks=LoopTasks()
    )
    broker = BrokerCores(1, replica_manager=rm)
    requests: list[pb.FetchRequest] = []

    async def serve(
        request: pb.FetchRequest, session: LeaderFetchSession, repeats: RepeatReads
    ) -> m.FetchResponse:
        requests.append(request)
        return await broker.replica_fetch(request, session, repeats)

    service = ReplicaFetchService(1, serve, 1 << 20)
    server, address = await grpc_server(lambda s: add_replica_fetch_service(service, s))
    image = three_broker_image({1: address, 2: "127.0.0.1:2", 3: "127.0.0.1:3"})
    # orders-1 beside its orders-0, as a CreatePartitions would add it.
    image = replayed(image, *create_topic("orders", TOPIC_ID, (1, 2, 3), (1, 2, 3))[2:])
    rm.apply_image(image)
    await rm.start()
    running = Leader(rm, service, server, address, requests)
    try:
        yield running
    finally:
        await rm.stop()
        await running.server.stop(grace=None)  # a test may have restarted it
        log_manager.shutdown()


def fetch(
    offsets: dict[int, int], *, max_wait_ms: int = 0, min_bytes: int = 1, replica: int = FOLLOWER
) -> m.FetchRequest:
    """Follower `replica`'s fetch of orders-p at offsets[p]."""
    return m.FetchRequest(
        tuple(
            m.FetchPartition(
                "orders",
                partition,
                offset,
                current_leader_epoch=0,
                topic_id=TOPIC_ID,
                partition_max_bytes=1 << 20,
            )
            for partition, offset in sorted(offsets.items())
        ),
        replica_id=replica,
        replica_epoch=FOLLOWER_EPOCH,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=1 << 20,
    )


def entries(request: pb.FetchRequest) -> list[tuple[int, int]]:
    """(partition, fetch offset) of each entry a request carried."""
    return [(p.partition, p.fetch_offset) for t in request.topics for p in t.partitions]


def stream_to(address: str) -> ReplicaFetchStream:
    return ReplicaFetchStream(address, 1, request_timeout_ms=TIMEOUT_S * 1000)


@pytest.mark.asyncio
async def test_the_stream_is_one_incremental_session(leader: Leader) -> None:
    follower = stream_to(leader.address)
    try:
        first = await follower.fetch(fetch({0: 0, 1: 0}))
        await leader.produce(0)
        second = await follower.fetch(fetch({0: 0, 1: 0}))
        third = await follower.fetch(fetch({0: 1, 1: 0}))
    finally:
        await follower.aclose()
    # A full fetch opens the session; then each request carries only what changed.
    assert [r.session_epoch for r in leader.requests] == [0, 1, 2]
    assert entries(leader.requests[0]) == [(0, 0), (1, 0)]
    assert entries(leader.requests[1]) == []
    assert entries(leader.requests[2]) == [(0, 1)]
    # The first answer tells both partitions; later ones only news (the records appended to
    # orders-0, the leader's bytes) and the entries that changed (answered in full, without
    # records: the follower is at the leader's end; the high watermark waits for broker 3).
    assert {(p.partition, p.high_watermark) for p in first.partitions} == {(0, 0), (1, 0)}
    (appended,) = second.partitions
    assert appended.partition == 0 and len(appended.records) == len(BATCH)
    assert [(p.partition, p.records) for p in third.partitions] == [(0, b"")]


@pytest.mark.asyncio
async def test_the_leader_long_polls_each_request_until_min_bytes_arrive(leader: Leader) -> None:
    follower = stream_to(leader.address)
    try:
        await follower.fetch(fetch({0: 0}))  # opens the session: the leader's news told
        waiting = asyncio.ensure_future(
            follower.fetch(fetch({0: 0}, max_wait_ms=TIMEOUT_S * 1000, min_bytes=2 * len(BATCH)))
        )
        await asyncio.sleep(0.3)
        assert not waiting.done()  # nothing to read: parked in the leader's fetch purgatory
        await leader.produce(0)
        await asyncio.sleep(0.3)
        assert not waiting.done()  # one batch, fewer than min_bytes
        await leader.produce(0)
        answer = await asyncio.wait_for(waiting, TIMEOUT_S)
    finally:
        await follower.aclose()
    (partition,) = answer.partitions
    assert len(partition.records) == 2 * len(BATCH)
    assert leader.requests[-1].max_wait_ms == TIMEOUT_S * 1000


@pytest.mark.asyncio
async def test_a_stream_the_leader_ends_fails_typed_and_the_next_fetch_opens_a_new_session(
    leader: Leader,
) -> None:
    follower = stream_to(leader.address)
    try:
        await follower.fetch(fetch({0: 0}))
        waiting = asyncio.ensure_future(follower.fetch(fetch({0: 0}, max_wait_ms=60_000)))
        await asyncio.sleep(0.2)
        leader.service.stop()  # the leader stops serving data: its streams end
        await leader.produce(0)  # wakes the parked fetch: its answer goes out first
        answer = await asyncio.wait_for(waiting, TIMEOUT_S)
        assert len(answer.partitions[0].records) == len(BATCH)
        with pytest.raises(NetworkError, match=r"broker 1 at .*: UNAVAILABLE: .*stopping"):
            await follower.fetch(fetch({0: 1}))
        follower.failed()
        with pytest.raises(NetworkError, match="the broker is stopping"):
            await follower.fetch(fetch({0: 1}))
    finally:
        await follower.aclose()
    assert [r.session_epoch for r in leader.requests] == [0, 1]


@pytest.mark.asyncio
async def test_a_stopped_leader_ends_every_new_stream_unavailable(leader: Leader) -> None:
    # Ended before the follower's first write is through, a call's status on the follower's
    # side would be gRPC core's INTERNAL instead (a race: about 1 call in 100 without the
    # service's wait for that write).
    leader.service.stop()
    follower = stream_to(leader.address)
    errors: list[str] = []
    try:
        for _ in range(200):
            with pytest.raises(NetworkError) as failed:
                await follower.fetch(fetch({0: 1}))
            errors.append(str(failed.value))
            follower.failed()
    finally:
        await follower.aclose()
    assert [e for e in errors if not re.search("UNAVAILABLE: .*the broker is stopping", e)] == []


@pytest.mark.asyncio
async def test_a_leader_that_stops_mid_stream_ends_each_stream_unavailable(leader: Leader) -> None:
    # Each follower sends its next fetch as soon as its answer is in, as a follower does, while
    # the leader ends its call after that answer: ended before that write is through, the
    # follower's status would be gRPC core's INTERNAL instead (a race).
    followers = [stream_to(leader.address) for _ in range(100)]

    async def fetch_on(follower: ReplicaFetchStream) -> str:
        """How the follower's stream ended: at its parked fetch (one not parked yet when the
        leader stopped) or, answered, at its next."""
        try:
            await follower.fetch(fetch({0: 0}, max_wait_ms=60_000))
            await follower.fetch(fetch({0: 1}))
        except NetworkError as exc:
            return str(exc)
        return "answered after the stop"

    try:
        for follower in followers:
            await follower.fetch(fetch({0: 0}))  # each opens its session
        fetching = [asyncio.ensure_future(fetch_on(follower)) for follower in followers]
        await asyncio.sleep(0.5)  # every fetch parked in the leader's purgatory
        leader.service.stop()
        await leader.produce(0)  # wakes them: each answer goes out, then the call ends
        ended = await asyncio.wait_for(asyncio.gather(*fetching), TIMEOUT_S)
    finally:
        for follower in followers:
            await follower.aclose()
    assert [e for e in ended if not re.search("UNAVAILABLE: .*the broker is stopping", e)] == []


@pytest.mark.asyncio
async def test_a_restarted_leader_is_found_again_with_a_full_fetch(leader: Leader) -> None:
    follower = stream_to(leader.address)
    port = int(leader.address.rsplit(":", 1)[1])
    try:
        await follower.fetch(fetch({0: 0}))
        await follower.fetch(fetch({0: 0}))
        await leader.server.stop(grace=None)  # the leader's process went away
        with pytest.raises(NetworkError, match=f"broker 1 at {leader.address}"):
            await follower.fetch(fetch({0: 0}))
        follower.failed()
        leader.server, _ = await grpc_server(
            lambda s: add_replica_fetch_service(leader.service, s), port
        )
        answer = await follower.fetch(fetch({0: 0}))
    finally:
        await follower.aclose()
    assert [p.partition for p in answer.partitions] == [0]  # a new session: answered in full
    assert [r.session_epoch for r in leader.requests] == [0, 1, 0]


@pytest.mark.asyncio
async def test_the_service_serves_followers_only_and_one_per_stream(leader: Leader) -> None:
    follower = stream_to(leader.address)
    try:
        with pytest.raises(InvalidRequestError, match=r"follower replicas only.*replica -1"):
            await follower.fetch(fetch({0: 0}, replica=m.CONSUMER_REPLICA_ID))
        follower.failed()
        await follower.fetch(fetch({0: 0}))
        with pytest.raises(
            InvalidRequestError, match="names replica 3, the stream's first request broker 2"
        ):
            await follower.fetch(fetch({0: 0}, replica=3))
    finally:
        await follower.aclose()


@pytest.mark.asyncio
async def test_bytes_that_are_no_fetch_request_fail_the_call_invalid_argument(
    leader: Leader,
) -> None:
    async with grpc.aio.insecure_channel(leader.address) as channel:
        call = channel.stream_stream(f"/{SERVICE_NAME}/Fetch")()
        await call.write(GARBAGE)
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await call.read()
    assert failed.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "are not a replog.pb.broker.FetchRequest message" in (failed.value.details() or "")


# --- leaders answering what no leader answers -----------------------------------------------

Answer = Callable[[pb.FetchRequest, Any], Awaitable[bytes]]


async def fake_leader(answer: Answer) -> tuple[Any, str]:
    """A grpc.aio server whose ReplicaFetch.Fetch answers each request with `answer`."""

    async def answer_each(requests: AsyncIterator[bytes], context: Any) -> AsyncIterator[bytes]:
        async for raw in requests:
            yield await answer(pb.FetchRequest.FromString(raw), context)

    return await raw_leader(answer_each)


def answer_naming(topic: str, partition: int, high_watermark: int = 0) -> bytes:
    return codec.fetch_response_to_wire(
        m.FetchResponse((m.FetchPartitionResult(topic, partition, high_watermark=high_watermark),))
    )


async def garbage(request: pb.FetchRequest, context: Any) -> bytes:
    return GARBAGE


async def unasked_partition(request: pb.FetchRequest, context: Any) -> bytes:
    return answer_naming("orders", 7)


async def offset_below_none(request: pb.FetchRequest, context: Any) -> bytes:
    return answer_naming("orders", 0, high_watermark=-5)


async def stale_epoch(request: pb.FetchRequest, context: Any) -> bytes:
    await context.abort(grpc.StatusCode.FAILED_PRECONDITION, "session epoch 3, expected 1")
    return b""


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("answer", "error", "said"),
    [
        (garbage, MalformedResponseError, "with bytes that are no FetchResponse"),
        (unasked_partition, MalformedResponseError, "a partition it did not ask for: orders-7"),
        (offset_below_none, MalformedResponseError, "high_watermark -5 for orders-0"),
        (stale_epoch, InvalidFetchSessionEpochError, "FAILED_PRECONDITION: session epoch 3"),
    ],
)
async def test_an_answer_that_is_not_one_is_a_typed_error_naming_the_leader(
    answer: Answer, error: type[Exception], said: str
) -> None:
    server, address = await fake_leader(answer)
    follower = stream_to(address)
    try:
        with pytest.raises(error) as failed:
            await follower.fetch(fetch({0: 0}))
    finally:
        await follower.aclose()
        await server.stop(grace=None)
    assert f"broker 1 at {address}" in str(failed.value)
    assert said in str(failed.value)


@pytest.mark.asyncio
async def test_a_stream_ended_without_an_error_is_a_network_error() -> None:
    async def answer_nothing(requests: AsyncIterator[bytes], context: Any) -> AsyncIterator[bytes]:
        async for _ in requests:
            return
        yield b""  # an async generator that answers nothing

    server, address = await raw_leader(answer_nothing)
    follower = stream_to(address)
    try:
        with pytest.raises(
            NetworkError, match=r"ended the ReplicaFetch\.Fetch call without an error"
        ):
            await follower.fetch(fetch({0: 0}))
    finally:
        await follower.aclose()
        await server.stop(grace=None)
