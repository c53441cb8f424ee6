"""The GroupCoordinator service over a real grpc.aio server on 127.0.0.1:0, in front of a fake
coordinator, driven through `CoordinatorClient`: answers and errors cross the wire typed,
garbage is INVALID_ARGUMENT, a broker without a running coordinator answers
COORDINATOR_NOT_AVAILABLE, and the client's channel handling matches BrokerClient's."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest
import pytest_asyncio

from replog.client.records import OffsetAndMetadata, TopicPartition
from replog.coordinator import messages as cm
from replog.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    InvalidGroupIdError,
    NotCoordinatorError,
    OffsetMetadataTooLargeError,
    UnknownServerError,
)
from replog.pb import coordinator_pb2 as pb
from replog.server.coordinator_service import CoordinatorService, add_coordinator_service
from replog.wire.coordinator_client import CoordinatorClient

T = TopicPartition


@dataclass
class FakeCoordinator:
    find: cm.FindCoordinatorResponse = field(
        default_factory=lambda: cm.FindCoordinatorResponse(None, 2, "10.0.0.2", 9093)
    )
    commit_error: Any = None
    fetch_answer: cm.OffsetFetchResponse = field(default_factory=cm.OffsetFetchResponse)
    raise_error: Exception | None = None
    calls: list[Any] = field(default_factory=list)

    def find_coordinator(self, group_id: str) -> cm.FindCoordinatorResponse:
        self.calls.append(group_id)
        if self.raise_error is not None:
            raise self.raise_error
        return self.find

    async def offset_commit(
        self, request: cm.OffsetCommitRequest, *, timeout_ms: int | None = None
    ) -> cm.OffsetCommitResponse:
        self.calls.append((request, timeout_ms))
        if self.commit_error is not None:
            return cm.OffsetCommitResponse(self.commit_error)
        return cm.OffsetCommitResponse(
            None,
            tuple(
                cm.OffsetCommitPartitionResult(
                    e.topic,
                    e.partition,
                    OffsetMetadataTooLargeError(f"{e.topic}-{e.partition}: too long")
                    if len(e.metadata) > 3
                    else None,
                )
                for e in request.entries
            ),
        )

    def offset_fetch(self, request: cm.OffsetFetchRequest) -> cm.OffsetFetchResponse:
        self.calls.append(request)
        return self.fetch_answer


@dataclass
class Harness:
    service: CoordinatorService
    coordinator: FakeCoordinator
    client: CoordinatorClient
    address: str


@pytest_asyncio.fixture
async def harness() -> AsyncIterator[Harness]:
    coordinator = FakeCoordinator()
    service = CoordinatorService(1, coordinator)
    server = grpc.aio.server()
    add_coordinator_service(service, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    address = f"127.0.0.1:{port}"
    client = CoordinatorClient(address, request_timeout_ms=5000)
    try:
        yield Harness(service, coordinator, client, address)
    finally:
        await client.close()
        await server.stop(grace=None)


@pytest.mark.asyncio
async def test_find_coordinator(harness: Harness) -> None:
    assert await harness.client.find_coordinator("g") == (2, "10.0.0.2:9093")
    harness.coordinator.find = cm.FindCoordinatorResponse(
        CoordinatorNotAvailableError("__consumer_offsets-3 has no leader")
    )
    with pytest.raises(CoordinatorNotAvailableError, match="__consumer_offsets-3 has no leader"):
        await harness.client.find_coordinator("g")


@pytest.mark.asyncio
async def test_commit_returns_per_partition_errors_and_raises_request_level_ones(
    harness: Harness,
) -> None:
    offsets = {
        T("orders", 0): OffsetAndMetadata(10, "ok", 4),
        T("orders", 1): OffsetAndMetadata(11, "too long"),
        T("users", 0): OffsetAndMetadata(12),
    }
    results, shared = await harness.client.offset_commit(
        "g", offsets, committer=cm.Committer("app", "i-1"), timeout_ms=3000
    )
    assert shared == ()
    assert results[T("orders", 0)] is None and results[T("users", 0)] is None
    error = results[T("orders", 1)]
    assert isinstance(error, OffsetMetadataTooLargeError) and "orders-1" in str(error)
    (request, timeout_ms) = harness.coordinator.calls[0]
    assert request == cm.OffsetCommitRequest(
        "g",
        (
            cm.CommitEntry("orders", 0, 10, 4, "ok"),
            cm.CommitEntry("orders", 1, 11, -1, "too long"),
            cm.CommitEntry("users", 0, 12, -1, ""),
        ),
        -1,
        "",
        cm.Committer("app", "i-1", "127.0.0.1"),  # the host as the service saw the call
    )
    assert 0 < timeout_ms < 3000  # the caller's deadline, less the margin
    for error_class in (
        NotCoordinatorError,
        CoordinatorLoadInProgressError,
        CoordinatorNotAvailableError,
        InvalidGroupIdError,
    ):
        harness.coordinator.commit_error = error_class("group 'g': why")
        with pytest.raises(error_class, match="group 'g': why"):
            await harness.client.offset_commit("g", offsets)


@pytest.mark.asyncio
async def test_fetch_named_and_all_partitions(harness: Harness) -> None:
    harness.coordinator.fetch_answer = cm.OffsetFetchResponse(
        None,
        (
            cm.FetchedOffset("orders", 0, 10, 4, "m"),
            cm.FetchedOffset("orders", 1),
        ),
    )
    answer = await harness.client.offset_fetch("g", [T("orders", 1), T("orders", 0)])
    assert list(answer.items()) == [
        (T("orders", 1), None),
        (T("orders", 0), OffsetAndMetadata(10, "m", 4)),
    ]
    assert harness.coordinator.calls[-1] == cm.OffsetFetchRequest(
        "g", (("orders", 1), ("orders", 0))
    )
    await harness.client.offset_fetch("g", None)
    assert harness.coordinator.calls[-1] == cm.OffsetFetchRequest("g", None)
    harness.coordinator.fetch_answer = cm.OffsetFetchResponse(
        CoordinatorLoadInProgressError("still loading")
    )
    with pytest.raises(CoordinatorLoadInProgressError, match="still loading"):
        await harness.client.offset_fetch("g", None)


@pytest.mark.asyncio
async def test_without_a_coordinator_every_call_is_coordinator_not_available(
    harness: Harness,
) -> None:
    harness.service.attach(None)
    with pytest.raises(CoordinatorNotAvailableError, match="broker 1 does not coordinate"):
        await harness.client.find_coordinator("g")
    with pytest.raises(CoordinatorNotAvailableError):
        await harness.client.offset_commit("g", {T("t", 0): OffsetAndMetadata(1)})
    with pytest.raises(CoordinatorNotAvailableError):
        await harness.client.offset_fetch("g", None)
    assert harness.coordinator.calls == []


async def raw_call(address: str, method: str, data: bytes) -> grpc.aio.AioRpcError:
    async with grpc.aio.insecure_channel(address) as channel:
        call = channel.unary_unary(
            f"/replog.pb.coordinator.GroupCoordinator/{method}",
            request_serializer=lambda b: b,
            response_deserializer=lambda b: b,
        )
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call(data, timeout=5)
    return caught.value


@pytest.mark.asyncio
async def test_garbage_and_impossible_requests_are_invalid_argument(harness: Harness) -> None:
    for method in ("FindCoordinator", "OffsetCommit", "OffsetFetch"):
        error = await raw_call(harness.address, method, b"\xff\xff\xff garbage")
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert f"{method}: the 11 request bytes are not a replog.pb.coordinator." in (
            error.details() or ""
        )
    twice = pb.OffsetFetchRequest(
        group_id="g", topics=[pb.OffsetFetchTopic(name="t", partitions=[0, 0])]
    )
    error = await raw_call(harness.address, "OffsetFetch", twice.SerializeToString())
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "OffsetFetch names t-0 more than once" in (error.details() or "")
    assert harness.coordinator.calls == []


@pytest.mark.asyncio
async def test_an_unexpected_failure_is_internal_naming_it(harness: Harness) -> None:
    harness.coordinator.raise_error = UnknownServerError("boom")
    error = await raw_call(
        harness.address,
        "FindCoordinator",
        pb.FindCoordinatorRequest(group_id="g").SerializeToString(),
    )
    assert error.code() == grpc.StatusCode.INTERNAL
    assert "UnknownServerError: boom" in (error.details() or "")


@pytest.mark.asyncio
async def test_an_unreachable_coordinator_fails_fast_and_the_channel_is_replaced() -> None:
    client = CoordinatorClient("127.0.0.1:1", request_timeout_ms=5000)
    try:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await client.find_coordinator("g")
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
        assert client._channel._channel is None  # the next call dials afresh
    finally:
        await client.close()
