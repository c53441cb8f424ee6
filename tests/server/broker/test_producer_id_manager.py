"""The broker's producer-id manager and its way to the controller.

- ProducerIdManager with a fake `allocate`: the first block is asked for at start (with the
  broker epoch), ids are unique and contiguous across blocks, the next block is prefetched at
  90% use with exactly one request, COORDINATOR_LOAD_IN_PROGRESS while none is available,
  typed failures (stale epoch, no epoch yet, a crashing call) retried after a backoff, nothing
  before `start`, `stop` cancels the request in flight.
- ControllerCalls + allocate_from_controller against fake Controller servers on 127.0.0.1:0:
  NOT_CONTROLLER redirects to the named controller, an unreachable controller (failover) moves
  on to the next, a request-level error is raised as its class, no answer within the request
  timeout is REQUEST_TIMED_OUT naming the last failure.
- The whole path against a real lone controller (Raft + ControllerDriver + Controller service
  on a gRPC server): blocks of 1000 in order, a stale broker epoch refused.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
import pytest_asyncio

from replog.errors import (
    BrokerIdNotRegisteredError,
    CoordinatorLoadInProgressError,
    KafkaError,
    NotControllerError,
    RequestTimedOutError,
    StaleBrokerEpochError,
    UnknownServerError,
)
from replog.pb import common_pb2, controller_pb2_grpc
from replog.pb import controller_pb2 as pb
from replog.server.broker.producer_id_manager import ProducerIdManager, allocate_from_controller
from replog.server.controller.controller_calls import ControllerCalls
from replog.server.controller.controller_retry import ActiveController
from replog.testing import LoopTasks
from tests.eventually import eventually
from tests.server.controller.test_controller_driver import active, lone_controller, start_brokers

TIMEOUT_S = 10


@dataclass
class FakeAllocate:
    """`allocate` answered from a script: a block (first, size), an exception, or None to wait
    for `release` (then the next block in line)."""

    script: list[tuple[int, int] | BaseException | None] = field(default_factory=list)
    epochs: list[int] = field(default_factory=list)
    released: asyncio.Event = field(default_factory=asyncio.Event)
    next_first: int = 0
    size: int = 1000

    async def __call__(self, broker_epoch: int) -> tuple[int, int]:
        self.epochs.append(broker_epoch)
        step = self.script.pop(0) if self.script else (self.next_first, self.size)
        if step is None:
            await self.released.wait()
            self.released.clear()
            step = (self.next_first, self.size)
        if isinstance(step, BaseException):
            raise step
        self.next_first = step[0] + step[1]
        return step


def manager(allocate: FakeAllocate, epoch: Callable[[], int | None] = lambda: 42) -> Any:
    return ProducerIdManager(
        7, epoch, allocate, retry_backoff_ms=1, retry_backoff_max_ms=5, tasks=LoopTasks()
    )


@pytest.mark.asyncio
async def test_the_first_block_comes_at_start_and_ids_are_unique_across_blocks() -> None:
    allocate = FakeAllocate(size=100)
    ids = manager(allocate)
    with pytest.raises(CoordinatorLoadInProgressError):
        ids.generate_producer_id()  # not started: nothing was asked for
    assert allocate.epochs == []
    ids.start()
    try:
        await eventually(lambda: ids.blocks.next_block is not None, "the first block")
        assert allocate.epochs == [42]
        handed = [ids.generate_producer_id() for _ in range(90)]
        assert ids.requests_sent == 1  # ids 0..89: below 90% of the block
        handed.append(ids.generate_producer_id())  # id 90: prefetch
        assert ids.requests_sent == 2
        await eventually(lambda: ids.blocks.next_block is not None, "the prefetched block")
        handed += [ids.generate_producer_id() for _ in range(109)]
        assert handed == list(range(200))
        assert ids.requests_sent == 3  # id 190 prefetched the third block
    finally:
        await ids.stop()


@pytest.mark.asyncio
async def test_no_id_while_the_block_is_on_its_way_then_ids() -> None:
    allocate = FakeAllocate(script=[None])
    ids = manager(allocate)
    ids.start()
    try:
        await eventually(lambda: allocate.epochs == [42], "the request")
        with pytest.raises(CoordinatorLoadInProgressError) as refused:
            ids.generate_producer_id()
        assert refused.value.retriable and "broker 7" in str(refused.value)
        assert ids.requests_sent == 1  # the refusal sends no second request
        allocate.released.set()
        await eventually(lambda: ids.blocks.next_block is not None, "the block")
        assert ids.generate_producer_id() == 0
    finally:
        await ids.stop()


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("failure", "name"),
    [
        (StaleBrokerEpochError("broker 7: broker epoch 42 is not 43"), "STALE_BROKER_EPOCH"),
        (UnknownServerError("producer ids are exhausted"), "UNKNOWN_SERVER_ERROR"),
        (RequestTimedOutError("no controller answered"), "REQUEST_TIMED_OUT"),
        (RuntimeError("a bug in the call"), "UNKNOWN_SERVER_ERROR"),
    ],
)
async def test_a_failed_request_is_named_and_retried_after_a_backoff(
    failure: BaseException, name: str
) -> None:
    allocate = FakeAllocate(script=[failure, None])
    ids = manager(allocate)
    ids.start()
    try:
        await eventually(lambda: len(allocate.epochs) == 2, "the retry")
        with pytest.raises(CoordinatorLoadInProgressError) as refused:
            ids.generate_producer_id()
        assert name in str(refused.value)
        last = ids.blocks.last_failure
        assert isinstance(last, KafkaError) and last.error_name == name
        allocate.released.set()
        await eventually(lambda: ids.blocks.next_block is not None, "the block")
        assert ids.generate_producer_id() == 0
        assert ids.blocks.last_failure is None
    finally:
        await ids.stop()


@pytest.mark.asyncio
async def test_without_a_broker_epoch_nothing_is_asked_until_there_is_one() -> None:
    allocate = FakeAllocate()
    epoch: list[int | None] = [None]
    ids = manager(allocate, lambda: epoch[0])
    ids.start()
    try:
        await eventually(lambda: ids.blocks.last_failure is not None, "the failure")
        assert isinstance(ids.blocks.last_failure, BrokerIdNotRegisteredError)
        assert allocate.epochs == []
        epoch[0] = 5
        await eventually(lambda: ids.blocks.next_block is not None, "the block")
        assert allocate.epochs == [5]
    finally:
        await ids.stop()


@pytest.mark.asyncio
async def test_stop_cancels_the_request_in_flight() -> None:
    allocate = FakeAllocate(script=[None])
    ids = manager(allocate)
    ids.start()
    await eventually(lambda: allocate.epochs == [42], "the request")
    await ids.stop()
    allocate.released.set()
    await asyncio.sleep(0)
    assert ids.blocks.next_block is None
    with pytest.raises(CoordinatorLoadInProgressError):
        ids.generate_producer_id()
    assert ids.requests_sent == 1


# --- through gRPC to fake controllers -------------------------------------------------------


def status(cls: Any, message: str) -> common_pb2.ErrorStatus:
    return common_pb2.ErrorStatus(code=cls.code, error_name=cls.error_name, message=message)


@dataclass
class Quorum:
    active: int | None = 2  # None: every controller says NOT_CONTROLLER, naming none
    error: Any = None  # a request-level error class the active controller answers
    next_first: int = 0
    asked: list[tuple[int, int, int]] = field(default_factory=list)  # node, broker, epoch


class FakeController(controller_pb2_grpc.ControllerServicer):
    def __init__(self, node_id: int, quorum: Quorum) -> None:
        self.node_id = node_id
        self.quorum = quorum

    async def AllocateProducerIds(
        self, request: pb.AllocateProducerIdsRequest, context: Any
    ) -> pb.AllocateProducerIdsResponse:
        quorum = self.quorum
        quorum.asked.append((self.node_id, request.broker_id, request.broker_epoch))
        if quorum.active != self.node_id:
            return pb.AllocateProducerIdsResponse(
                controller_id=-1 if quorum.active is None else quorum.active,
                error=status(NotControllerError, f"node {self.node_id} is not the controller"),
            )
        if quorum.error is not None:
            return pb.AllocateProducerIdsResponse(
                controller_id=self.node_id, error=status(quorum.error, "refused by the fake")
            )
        first, quorum.next_first = quorum.next_first, quorum.next_first + 1000
        return pb.AllocateProducerIdsResponse(
            controller_id=self.node_id, producer_id_start=first, producer_id_len=1000
        )


@dataclass
class Controllers:
    quorum: Quorum
    addresses: dict[int, str]
    servers: dict[int, Any]


@pytest_asyncio.fixture
async def controllers() -> AsyncIterator[Controllers]:
    quorum = Quorum()
    harness = Controllers(quorum, {}, {})
    for node_id in (1, 2, 3):
        server = grpc.aio.server()
        controller_pb2_grpc.add_ControllerServicer_to_server(  # type: ignore[no-untyped-call]
            FakeController(node_id, quorum), server
        )
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        harness.servers[node_id] = server
        harness.addresses[node_id] = f"127.0.0.1:{port}"
    try:
        yield harness
    finally:
        for server in harness.servers.values():
            await server.stop(grace=None)


def calls(addresses: dict[int, str], **kwargs: Any) -> ControllerCalls:
    return ControllerCalls(addresses, retry_backoff_ms=5, retry_backoff_max_ms=20, **kwargs)


@pytest.mark.asyncio
async def test_not_controller_redirects_to_the_named_controller(controllers: Controllers) -> None:
    controllers.quorum.active = 3
    channel = calls(controllers.addresses)  # no hint: controller 1 first
    try:
        allocate = allocate_from_controller(channel, 4)
        assert await allocate(17) == (0, 1000)
        assert controllers.quorum.asked == [(1, 4, 17), (3, 4, 17)]  # 1 named 3: not 2
        assert await allocate(17) == (1000, 1000)  # straight to the active one now
        assert controllers.quorum.asked[2:] == [(3, 4, 17)]
    finally:
        await channel.close()


@pytest.mark.asyncio
async def test_controller_failover_moves_on_to_the_new_active_controller(
    controllers: Controllers,
) -> None:
    channel = calls(controllers.addresses, hint=lambda: 2)
    try:
        allocate = allocate_from_controller(channel, 4)
        assert await allocate(17) == (0, 1000)
        # Controller 2 dies; controller 3 takes over (1 would redirect there too).
        await controllers.servers[2].stop(grace=None)
        controllers.quorum.active = 3
        assert await allocate(17) == (1000, 1000)
        assert controllers.quorum.asked[-1] == (3, 4, 17)
    finally:
        await channel.close()


@pytest.mark.asyncio
async def test_a_request_level_error_is_raised_as_its_class(controllers: Controllers) -> None:
    controllers.quorum.error = StaleBrokerEpochError
    channel = calls(controllers.addresses, hint=lambda: 2)
    try:
        with pytest.raises(StaleBrokerEpochError, match="refused by the fake"):
            await allocate_from_controller(channel, 4)(17)
        assert len(controllers.quorum.asked) == 1  # not retried by the call itself
    finally:
        await channel.close()


@pytest.mark.asyncio
async def test_no_active_controller_times_out_naming_the_last_failure(
    controllers: Controllers,
) -> None:
    controllers.quorum.active = None
    channel = calls(controllers.addresses, request_timeout_ms=300)
    try:
        with pytest.raises(RequestTimedOutError) as failure:
            await allocate_from_controller(channel, 4)(17)
        assert failure.value.retriable
        assert "AllocateProducerIds for broker 4" in str(failure.value)
        assert "300 ms" in str(failure.value) and "not the controller" in str(failure.value)
        asked = [node for node, _, _ in controllers.quorum.asked]
        assert set(asked) == {1, 2, 3}  # went round the voters, backing off
    finally:
        await channel.close()


@pytest.mark.asyncio
async def test_an_attempt_cut_short_by_the_deadline_leaves_the_earlier_failure_named() -> None:
    """The last attempt gets only what is left of the request's time; its DEADLINE_EXCEEDED
    would hide why the request failed (on a loaded machine the test above met it)."""
    channel = calls({1: "127.0.0.1:1", 2: "127.0.0.1:2"}, request_timeout_ms=200)
    attempts: list[float] = []

    async def send(stub: Any, timeout_s: float) -> pb.AllocateProducerIdsResponse:
        attempts.append(timeout_s)
        if len(attempts) == 1:
            return pb.AllocateProducerIdsResponse(
                controller_id=-1, error=status(NotControllerError, "node 1 is not the controller")
            )
        await asyncio.sleep(timeout_s)
        raise grpc.aio.AioRpcError(
            grpc.StatusCode.DEADLINE_EXCEEDED,
            grpc.aio.Metadata(),
            grpc.aio.Metadata(),
            details="Deadline Exceeded",
        )

    try:
        with pytest.raises(
            RequestTimedOutError,
            match=r"within 200 ms \(last failure: controller 1: node 1 is not the controller\)",
        ):
            await channel.call("AllocateProducerIds for broker 4", send)
        assert len(attempts) == 2
    finally:
        await channel.close()


@pytest.mark.asyncio
async def test_an_unreachable_quorum_times_out_naming_the_address() -> None:
    # Port 1 refuses at once (UNAVAILABLE); on a loaded machine the first call's channel may
    # not be up within its share of the deadline (DEADLINE_EXCEEDED): either way the error
    # names the address and what failed there.
    channel = calls({1: "127.0.0.1:1"}, request_timeout_ms=500)
    try:
        with pytest.raises(
            RequestTimedOutError,
            match=r"within 500 ms \(last failure: controller 1 at 127\.0\.0\.1:1: "
            r"(UNAVAILABLE|DEADLINE_EXCEEDED)",
        ):
            await allocate_from_controller(channel, 4)(17)
    finally:
        await channel.close()


def test_the_active_controller_is_the_hint_then_the_named_then_the_next_voter() -> None:
    hint: list[int | None] = [None]
    target = ActiveController([1, 2, 3], lambda: hint[0])
    assert target.target() == 1 and len(target) == 3
    target.move_on_from(1, named_id=3)
    assert target.target() == 3
    target.move_on_from(3)  # no name, no hint: the next voter, wrapping around
    assert target.target() == 1
    hint[0] = 2
    target.move_on_from(1, named_id=9)  # a name that is no voter: the Raft leader
    assert target.target() == 2
    target.move_on_from(2)  # the hint is the one that failed: the next voter
    assert target.target() == 3
    with pytest.raises(ValueError, match="at least one controller"):
        ActiveController([], lambda: None)


# --- against a real controller ----------------------------------------------------------------


def test_blocks_from_a_real_controller_in_order_and_stale_epochs_refused(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with lone_controller(tmp_path) as node:
            await active(node)
            epochs = await start_brokers(node, (1, 2))
            server = grpc.aio.server()
            controller_pb2_grpc.add_ControllerServicer_to_server(  # type: ignore[no-untyped-call]
                node.service, server
            )
            port = server.add_insecure_port("127.0.0.1:0")
            await server.start()
            channel = calls({1: f"127.0.0.1:{port}"})
            try:
                one = ProducerIdManager(
                    1, lambda: epochs[1], allocate_from_controller(channel, 1), tasks=LoopTasks()
                )
                two = ProducerIdManager(
                    2, lambda: epochs[2], allocate_from_controller(channel, 2), tasks=LoopTasks()
                )
                one.start()
                await eventually(lambda: one.blocks.next_block is not None, "broker 1's block")
                two.start()
                await eventually(lambda: two.blocks.next_block is not None, "broker 2's block")
                assert one.generate_producer_id() == 0
                assert two.generate_producer_id() == 1000
                with pytest.raises(StaleBrokerEpochError, match="broker epoch"):
                    await allocate_from_controller(channel, 1)(epochs[1] + 100)
                with pytest.raises(StaleBrokerEpochError, match="not registered"):
                    await allocate_from_controller(channel, 9)(1)
                await one.stop()
                await two.stop()
            finally:
                await channel.close()
                await server.stop(grace=None)

    asyncio.run(scenario())
