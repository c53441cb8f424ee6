"""Creating `__consumer_offsets`: one CreateTopics at a time however many FindCoordinators
ask, a backoff after a failure, the failure kept for FindCoordinator's message, and the
request the controller gets (partitions, replicas, Kafka's topic configs: compacted, 100 MiB
segments)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from replog.errors import (
    InvalidReplicationFactorError,
    KafkaError,
    RequestTimedOutError,
    TopicAlreadyExistsError,
)
from replog.pb import common_pb2
from replog.pb import controller_pb2 as pb
from replog.server.coordination import internal_topic_creator
from replog.server.groups.offsets_topic_creator import OffsetsTopicCreator, create_via_controller
from replog.testing import LoopTasks, ManualClock


@dataclass
class FakeCreate:
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    failures: list[KafkaError] = field(default_factory=list)
    calls: int = 0

    async def __call__(self) -> None:
        self.calls += 1
        await self.gate.wait()
        if self.failures:
            raise self.failures.pop(0)


async def settled(creator: internal_topic_creator.InternalTopicCreator) -> None:
    for _ in range(100):
        if not creator.in_flight:
            return
        await asyncio.sleep(0)
    raise AssertionError("the creation did not finish")


@pytest.mark.asyncio
async def test_one_creation_at_a_time_and_a_backoff_after_a_failure() -> None:
    clock = ManualClock(1000)
    create = FakeCreate(failures=[InvalidReplicationFactorError("3 replicas, 1 broker")])
    creator = OffsetsTopicCreator(1, create, clock=clock, retry_backoff_ms=500, tasks=LoopTasks())
    for _ in range(5):
        creator.request()
    await asyncio.sleep(0)
    assert create.calls == 1 and creator.in_flight
    create.gate.set()
    await settled(creator)
    assert isinstance(creator.last_failure, InvalidReplicationFactorError)
    creator.request()  # within the backoff: nothing
    assert not creator.in_flight and creator.attempts == 1
    clock.now_ms += 500
    creator.request()
    await settled(creator)
    assert create.calls == 2 and creator.last_failure is None
    await creator.stop()


@pytest.mark.asyncio
async def test_topic_already_exists_is_success_and_stop_cancels() -> None:
    create = FakeCreate(failures=[TopicAlreadyExistsError("exists")])
    creator = OffsetsTopicCreator(1, create, clock=ManualClock(1000), tasks=LoopTasks())
    creator.request()
    create.gate.set()
    await settled(creator)
    assert creator.last_failure is None
    create.gate.clear()
    creator.request()
    await asyncio.sleep(0)
    assert creator.in_flight
    await creator.stop()
    assert not creator.in_flight


@dataclass
class FakeCalls:
    answer: pb.CreateTopicsResponse
    sent: list[Any] = field(default_factory=list)

    async def call(self, what: str, send: Callable[[Any, float], Awaitable[Any]]) -> Any:
        stub = self

        class Stub:
            def CreateTopics(self, request: Any, timeout: float) -> Awaitable[Any]:
                stub.sent.append((what, request, timeout))

                async def answer() -> Any:
                    return stub.answer

                return answer()

        return await send(Stub(), 7.0)


def status(error: type[KafkaError], message: str) -> common_pb2.ErrorStatus:
    return common_pb2.ErrorStatus(code=error.code, error_name=error.error_name, message=message)


@pytest.mark.asyncio
async def test_the_create_topics_request_and_its_errors() -> None:
    calls = FakeCalls(pb.CreateTopicsResponse(topics=[pb.CreatableTopicResult(name="x")]))
    create = create_via_controller(
        calls,  # type: ignore[arg-type]
        4,
        num_partitions=50,
        replication_factor=3,
        segment_bytes=104857600,
        timeout_ms=9000,
    )
    await create()
    (what, request, timeout_s) = calls.sent[0]
    assert what == "CreateTopics __consumer_offsets for broker 4" and timeout_s == 7.0
    (topic,) = request.topics
    assert (topic.name, topic.num_partitions, topic.replication_factor) == (
        "__consumer_offsets",
        50,
        3,
    )
    assert dict(topic.configs) == {
        "cleanup.policy": "compact",
        "segment.bytes": "104857600",
        "compression.type": "producer",
    }
    assert request.timeout_ms == 9000
    calls.answer = pb.CreateTopicsResponse(
        topics=[
            pb.CreatableTopicResult(
                name="__consumer_offsets",
                error=status(InvalidReplicationFactorError, "3 replicas but 2 live brokers"),
            )
        ]
    )
    with pytest.raises(InvalidReplicationFactorError, match="3 replicas but 2 live brokers"):
        await create()
    calls.answer = pb.CreateTopicsResponse(error=status(RequestTimedOutError, "slow"))
    with pytest.raises(RequestTimedOutError, match="slow"):
        await create()


@pytest.mark.asyncio
async def test_an_internal_topic_asks_its_replication_factor_at_each_attempt() -> None:
    calls = FakeCalls(pb.CreateTopicsResponse(topics=[pb.CreatableTopicResult(name="x")]))
    brokers = [1]
    create = internal_topic_creator.create_via_controller(
        calls,  # type: ignore[arg-type]
        4,
        topic="__transaction_state",
        num_partitions=50,
        replication_factor=lambda: min(3, len(brokers)),
        configs=lambda replicas: {"min.insync.replicas": str(min(2, replicas))},
        timeout_ms=9000,
    )
    await create()
    brokers += [2, 3]
    await create()
    sent = [
        (topic.name, topic.replication_factor, dict(topic.configs))
        for what, request, _ in calls.sent
        for topic in request.topics
    ]
    assert sent == [
        ("__transaction_state", 1, {"min.insync.replicas": "1"}),
        ("__transaction_state", 3, {"min.insync.replicas": "2"}),
    ]
    assert calls.sent[0][0] == "CreateTopics __transaction_state for broker 4"
    creator = internal_topic_creator.InternalTopicCreator(
        4, "__transaction_state", create, clock=ManualClock(0), tasks=LoopTasks()
    )
    creator.request()
    await settled(creator)
    assert creator.last_failure is None and len(calls.sent) == 3
    await creator.stop()
