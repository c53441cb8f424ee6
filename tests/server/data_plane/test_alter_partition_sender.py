"""AlterPartitionSender against fake controllers (grpc.aio Controller servers on 127.0.0.1:0)
and a fake replica manager: batched requests, per-partition answers as KafkaError instances or
committed state, NOT_CONTROLLER redirects, unreachable controllers, request-level errors
retried, never two requests for one partition at once, nothing before a broker epoch."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

import grpc
import pytest
import pytest_asyncio

from replog.errors import (
    FencedLeaderEpochError,
    KafkaError,
    NotControllerError,
    StaleBrokerEpochError,
)
from replog.pb import common_pb2, controller_pb2_grpc
from replog.pb import controller_pb2 as pb
from replog.replication.leader_state import IsrChange
from replog.server.data_plane import alter_partition_sender
from replog.server.data_plane.alter_partition_sender import (
    ALTER_PARTITION_BATCH_MAX,
    ALTER_PARTITION_IN_FLIGHT_MAX,
    RESULTS_PER_TURN,
    AlterPartitionSender,
)
from replog.server.data_plane.replica_fetcher import ReplicaFetcherManager
from replog.server.data_plane.replica_manager import ReplicaManager, ReplicaManagerConfig
from replog.storage.log_config import LogConfig
from replog.storage.log_manager import LogManager
from replog.testing import LoopTasks
from tests.eventually import eventually
from tests.metadata.metadata_helpers import (
    bootstrapped,
    create_topic,
    register,
    replayed,
    topic_id,
)

TIMEOUT_S = 10
TOPIC_ID = UUID(int=0x5)


def change(partition: int, new_isr: tuple[int, ...] = (1, 2), leader_epoch: int = 3) -> IsrChange:
    return IsrChange(
        topic="orders",
        topic_id=TOPIC_ID,
        partition=partition,
        leader_epoch=leader_epoch,
        partition_epoch=7,
        new_isr=new_isr,
        broker_epochs=tuple(-1 for _ in new_isr),
        leader_recovery_state=0,
        is_expansion=True,
    )


@dataclass
class FakeLeaders:
    """The replica manager's AlterPartition side."""

    pending: list[IsrChange] = field(default_factory=list)
    isr_wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    results: list[tuple[IsrChange, KafkaError | None, tuple[int, ...], int, int]] = field(
        default_factory=list
    )

    def hand_over(self, *changes: IsrChange) -> None:
        self.pending.extend(changes)
        self.isr_wakeup.set()

    def pending_isr_changes(self) -> list[IsrChange]:
        changes, self.pending = self.pending, []
        return changes

    def on_isr_change_result(
        self,
        change: IsrChange,
        error: KafkaError | None,
        isr: tuple[int, ...],
        leader_epoch: int,
        partition_epoch: int,
    ) -> None:
        self.results.append((change, error, isr, leader_epoch, partition_epoch))


def status(cls: Any, message: str) -> common_pb2.ErrorStatus:
    return common_pb2.ErrorStatus(code=cls.code, error_name=cls.error_name, message=message)


@dataclass
class Quorum:
    active: int = 2
    stale_answers: int = 0  # STALE_BROKER_EPOCH for this many requests first
    fence_partition: int | None = None  # FENCED_LEADER_EPOCH for this partition
    delay_s: float = 0.0
    requests: list[tuple[int, pb.AlterPartitionRequest]] = field(default_factory=list)
    in_flight: dict[tuple[bytes, int], int] = field(default_factory=dict)
    overlaps: int = 0
    concurrent: int = 0  # requests being answered now
    most_concurrent: int = 0


class FakeController(controller_pb2_grpc.ControllerServicer):
    def __init__(self, node_id: int, quorum: Quorum) -> None:
        self.node_id = node_id
        self.quorum = quorum

    async def AlterPartition(
        self, request: pb.AlterPartitionRequest, context: Any
    ) -> pb.AlterPartitionResponse:
        quorum = self.quorum
        quorum.requests.append((self.node_id, request))
        if self.node_id != quorum.active:
            return pb.AlterPartitionResponse(
                controller_id=quorum.active,
                error=status(NotControllerError, f"node {self.node_id} is not the controller"),
            )
        if quorum.stale_answers > 0:
            quorum.stale_answers -= 1
            return pb.AlterPartitionResponse(
                controller_id=quorum.active,
                error=status(StaleBrokerEpochError, f"broker epoch {request.broker_epoch}"),
            )
        keys = [(t.topic_id, p.partition_index) for t in request.topics for p in t.partitions]
        for key in keys:
            if quorum.in_flight.get(key):
                quorum.overlaps += 1
            quorum.in_flight[key] = quorum.in_flight.get(key, 0) + 1
        quorum.concurrent += 1
        quorum.most_concurrent = max(quorum.most_concurrent, quorum.concurrent)
        try:
            await asyncio.sleep(quorum.delay_s)
        finally:
            quorum.concurrent -= 1
            for key in keys:
                quorum.in_flight[key] -= 1
        topics = []
        for topic in request.topics:
            results = []
            for p in topic.partitions:
                if p.partition_index == quorum.fence_partition:
                    results.append(
                        pb.AlterPartitionPartitionResult(
                            partition_index=p.partition_index,
                            error=status(
                                FencedLeaderEpochError,
                                f"orders-{p.partition_index}: leader epoch {p.leader_epoch} "
                                "is fenced",
                            ),
                        )
                    )
                    continue
                results.append(
                    pb.AlterPartitionPartitionResult(
                        partition_index=p.partition_index,
                        leader_id=request.broker_id,
                        leader_epoch=p.leader_epoch,
                        isr=[m.broker_id for m in p.new_isr],
                        partition_epoch=p.partition_epoch + 1,
                    )
                )
            topics.append(pb.AlterPartitionTopicResult(topic_id=topic.topic_id, partitions=results))
        return pb.AlterPartitionResponse(controller_id=quorum.active, topics=topics)


@dataclass
class Harness:
    quorum: Quorum
    addresses: dict[int, str]


@pytest_asyncio.fixture
async def controllers() -> AsyncIterator[Harness]:
    quorum = Quorum()
    servers = []
    addresses: dict[int, str] = {}
    for node_id in (1, 2):
        server = grpc.aio.server()
        controller_pb2_grpc.add_ControllerServicer_to_server(  # type: ignore[no-untyped-call]
            FakeController(node_id, quorum), server
        )
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        servers.append(server)
        addresses[node_id] = f"127.0.0.1:{port}"
    try:
        yield Harness(quorum, addresses)
    finally:
        for server in servers:
            await server.stop(grace=None)


def sender(rm: FakeLeaders, addresses: dict[int, str], **kwargs: Any) -> AlterPartitionSender:
    kwargs.setdefault("broker_epoch", lambda: 42)
    kwargs.setdefault("tasks", LoopTasks())
    return AlterPartitionSender(
        rm, 1, controller_addresses=addresses, retry_backoff_ms=10, **kwargs
    )


@pytest.mark.asyncio
async def test_changes_go_in_one_request_after_a_redirect_and_results_come_back(
    controllers: Harness,
) -> None:
    rm = FakeLeaders()
    alter = sender(rm, controllers.addresses)  # no hint: asks controller 1 first
    rm.hand_over(change(0), change(1, (1, 2, 3)))
    alter.start()
    try:
        await eventually(lambda: len(rm.results) == 2, "both answers")
    finally:
        await alter.stop()
    asked = [node for node, _ in controllers.quorum.requests]
    assert asked == [1, 2]  # NOT_CONTROLLER named 2: straight there
    request = controllers.quorum.requests[-1][1]
    assert request.broker_id == 1 and request.broker_epoch == 42
    assert [p.partition_index for p in request.topics[0].partitions] == [0, 1]
    by_partition = {c.partition: (error, isr, le, pe) for c, error, isr, le, pe in rm.results}
    assert by_partition[1] == (None, (1, 2, 3), 3, 8)
    assert by_partition[0] == (None, (1, 2), 3, 8)


@pytest.mark.asyncio
async def test_a_partition_error_is_a_kafka_error_naming_the_partition(
    controllers: Harness,
) -> None:
    controllers.quorum.fence_partition = 1
    rm = FakeLeaders()
    alter = sender(rm, controllers.addresses, controller_hint=lambda: 2)
    rm.hand_over(change(0), change(1))
    alter.start()
    try:
        await eventually(lambda: len(rm.results) == 2, "both answers")
    finally:
        await alter.stop()
    errors = {c.partition: error for c, error, *_ in rm.results}
    assert errors[0] is None
    assert isinstance(errors[1], FencedLeaderEpochError) and "orders-1" in str(errors[1])
    assert [node for node, _ in controllers.quorum.requests] == [2]  # the hint was right


@pytest.mark.asyncio
async def test_an_unreachable_controller_is_left_for_the_next(controllers: Harness) -> None:
    addresses = {3: "127.0.0.1:1", **controllers.addresses}
    rm = FakeLeaders()
    alter = sender(rm, addresses)  # voter order 3, 1, 2; 3 is dead
    rm.hand_over(change(0))
    alter.start()
    try:
        await eventually(lambda: len(rm.results) == 1, "the answer")
    finally:
        await alter.stop()
    assert rm.results[0][1] is None
    assert [node for node, _ in controllers.quorum.requests] == [1, 2]


@pytest.mark.asyncio
async def test_a_request_level_error_is_retried_until_answered(controllers: Harness) -> None:
    controllers.quorum.stale_answers = 2
    rm = FakeLeaders()
    alter = sender(rm, controllers.addresses, controller_hint=lambda: 2)
    rm.hand_over(change(0))
    alter.start()
    try:
        await eventually(lambda: len(rm.results) == 1, "the answer")
    finally:
        await alter.stop()
    assert rm.results[0][1] is None
    assert len(controllers.quorum.requests) == 3


@pytest.mark.asyncio
async def test_never_two_requests_for_one_partition_at_once(controllers: Harness) -> None:
    controllers.quorum.delay_s = 0.2
    rm = FakeLeaders()
    alter = sender(rm, controllers.addresses, controller_hint=lambda: 2)
    rm.hand_over(change(0))
    alter.start()
    try:
        await eventually(lambda: controllers.quorum.requests, "the first request")
        rm.hand_over(change(0, (1,), leader_epoch=4), change(1))
        await eventually(lambda: len(rm.results) == 3, "all answers")
    finally:
        await alter.stop()
    assert controllers.quorum.overlaps == 0
    assert len(controllers.quorum.requests) == 2
    assert [c.leader_epoch for c, *_ in rm.results if c.partition == 0] == [3, 4]


@pytest.mark.asyncio
async def test_nothing_is_sent_before_the_broker_has_an_epoch(controllers: Harness) -> None:
    epoch: list[int | None] = [None]
    rm = FakeLeaders()
    alter = sender(rm, controllers.addresses, broker_epoch=lambda: epoch[0])
    rm.hand_over(change(0))
    alter.start()
    try:
        await asyncio.sleep(0.1)
        assert controllers.quorum.requests == []
        epoch[0] = 17
        rm.isr_wakeup.set()
        await eventually(lambda: len(rm.results) == 1, "the answer")
    finally:
        await alter.stop()
    assert controllers.quorum.requests[-1][1].broker_epoch == 17


@pytest.mark.asyncio
async def test_an_isr_change_is_sent_at_once_while_the_fetcher_waits(
    controllers: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The fetcher and the sender each have their own wake event: with one shared event either
    # could clear the other's wake and an ISR change could wait for the sender's idle poll.
    # That poll is made far longer than the wait for the request, so only a wake sends it in
    # time however late a loaded machine runs the tasks.
    monkeypatch.setattr(alter_partition_sender, "IDLE_POLL_MS", 600_000)
    now_ms = [1_000_000]
    log_manager = LogManager(str(tmp_path), LogConfig(), task_clock=lambda: now_ms[0])
    rm = ReplicaManager(
        ReplicaManagerConfig(1),
        log_manager,
        clock=lambda: now_ms[0],
        broker_epoch=lambda: 10,
        tasks=LoopTasks(),
    )
    rm.apply_image(
        replayed(
            bootstrapped(),
            register(1, 10, fenced=False),
            register(2, 20, fenced=False),
            *create_topic("t", topic_id(1), (1, 2)),
        )
    )
    fetchers = ReplicaFetcherManager(rm, lambda broker_id: None, tasks=LoopTasks())
    alter = AlterPartitionSender(
        rm, 1, lambda: 10, controllers.addresses, lambda: 2, retry_backoff_ms=10, tasks=LoopTasks()
    )
    fetchers.start()
    alter.start()
    try:
        await asyncio.sleep(0.1)  # both tasks are now idle, each waiting for its wake
        assert controllers.quorum.requests == []
        now_ms[0] += 30_001  # broker 2 never fetched: past replica.lag.time.max.ms
        rm.tick(now_ms[0])
        await eventually(lambda: controllers.quorum.requests, "the AlterPartition request")
        partition = rm.partition("t", 0)
        assert partition is not None and partition.leader_state is not None
        leader_state = partition.leader_state
        await eventually(lambda: leader_state.isr == (1,), "the shrink committed")
    finally:
        await alter.stop()
        await fetchers.stop()
        await rm.stop()
        log_manager.shutdown()


async def most_results_in_one_turn(alter: AlterPartitionSender, rm: FakeLeaders, count: int) -> int:
    """Run `alter` until `rm` has `count` answers; the most it applied in one loop turn (a
    task counting turns runs once in each)."""
    turns = itertools.count()
    turn_of_result: list[int] = []
    handed = rm.on_isr_change_result

    def on_result(*args: Any) -> None:
        turn_of_result.append(turn)
        handed(*args)

    rm.on_isr_change_result = on_result  # type: ignore[method-assign]
    turn = next(turns)

    async def count_turns() -> None:
        nonlocal turn
        while True:
            await asyncio.sleep(0)
            turn = next(turns)

    counter = asyncio.create_task(count_turns())
    alter.start()
    try:
        await eventually(lambda: len(rm.results) == count, "every answer")
    finally:
        await alter.stop()
        counter.cancel()
    return max(len(list(run)) for _, run in itertools.groupby(turn_of_result))


@pytest.mark.asyncio
async def test_many_changes_go_in_requests_of_a_bounded_size(controllers: Harness) -> None:
    # The controller applies one request in one write on its event loop: a broker back from a
    # restart with thousands of ISR changes must not hand it all of them at once.
    rm = FakeLeaders()
    alter = sender(rm, controllers.addresses)
    count = ALTER_PARTITION_BATCH_MAX * 2 + 7
    rm.hand_over(*(change(p) for p in range(count)))
    # The loop's other tasks run between every RESULTS_PER_TURN answers applied.
    assert await most_results_in_one_turn(alter, rm, count) <= RESULTS_PER_TURN
    sizes = [
        sum(len(t.partitions) for t in request.topics)
        for node, request in controllers.quorum.requests
        if node == controllers.quorum.active
    ]
    assert sizes == [ALTER_PARTITION_BATCH_MAX, ALTER_PARTITION_BATCH_MAX, 7]


class DirectStub:
    """A controller stub that calls the fake controller on this loop, no gRPC between: two
    requests sent together are answered in the same loop turn."""

    def __init__(self, controller: FakeController) -> None:
        self.controller = controller

    async def AlterPartition(
        self, request: pb.AlterPartitionRequest, timeout: float
    ) -> pb.AlterPartitionResponse:
        return await self.controller.AlterPartition(request, None)


@pytest.mark.asyncio
async def test_two_requests_answered_in_the_same_turn_apply_at_most_a_turns_worth(
    controllers: Harness,
) -> None:
    rm = FakeLeaders()
    alter = sender(rm, controllers.addresses)
    stub = DirectStub(FakeController(controllers.quorum.active, controllers.quorum))
    alter._controllers.stub = lambda controller_id: stub  # type: ignore[method-assign]
    count = ALTER_PARTITION_BATCH_MAX * ALTER_PARTITION_IN_FLIGHT_MAX
    rm.hand_over(*(change(p) for p in range(count)))
    assert await most_results_in_one_turn(alter, rm, count) <= RESULTS_PER_TURN
    assert controllers.quorum.most_concurrent == ALTER_PARTITION_IN_FLIGHT_MAX


@pytest.mark.asyncio
async def test_a_backlog_goes_in_disjoint_requests_in_flight_together(
    controllers: Harness,
) -> None:
    """A restart's thousands of ISR expansions: each request waits for its commit far longer
    than the controller spends on it, so `ALTER_PARTITION_IN_FLIGHT_MAX` requests of bounded
    size go out together, never two for one partition; the next ones once all are answered."""
    controllers.quorum.delay_s = 0.2
    rm = FakeLeaders()
    alter = sender(rm, controllers.addresses, controller_hint=lambda: 2)
    count = ALTER_PARTITION_BATCH_MAX * ALTER_PARTITION_IN_FLIGHT_MAX + 7
    rm.hand_over(*(change(p) for p in range(count)))
    alter.start()
    try:
        await eventually(lambda: len(rm.results) == count, "every answer")
    finally:
        await alter.stop()
    quorum = controllers.quorum
    assert quorum.most_concurrent == ALTER_PARTITION_IN_FLIGHT_MAX > 1
    assert quorum.overlaps == 0
    sizes = [sum(len(t.partitions) for t in request.topics) for _, request in quorum.requests]
    assert sorted(sizes) == [7, *[ALTER_PARTITION_BATCH_MAX] * ALTER_PARTITION_IN_FLIGHT_MAX]
    assert sorted(c.partition for c, *_ in rm.results) == list(range(count))
