"""A Kafka client's admin request forwarded by a broker (`KafkaAdminApis` through the broker's
`ControllerCalls`, configured as a broker configures it) to fake gRPC controllers on
127.0.0.1:0, through a controller election:

- issued while no controller is active (every voter NOT_CONTROLLER naming none, the old active
  one unreachable), with the election over only after more than the broker's 2 s
  `controller.quorum.request.timeout.ms`: the request reaches the elected controller and the
  client gets its answer, not REQUEST_TIMED_OUT; the wait past a few seconds is logged naming
  the request and what it waits for;
- the controller gets what is left of the client's `timeout_ms` at each attempt;
- no controller elected within the client's `timeout_ms` is REQUEST_TIMED_OUT naming it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest
import pytest_asyncio

from replog.clock import monotonic_ms
from replog.errors import NotControllerError, RequestTimedOutError
from replog.kafka.messages import alter_partition_reassignments_request as apr
from replog.pb import common_pb2, controller_pb2_grpc
from replog.pb import controller_pb2 as cpb
from replog.server.controller.controller_calls import ControllerCalls
from replog.server.controller.controller_retry import NOTE_AFTER_MS
from replog.server.kafka.kafka_admin_apis import KafkaAdminApis
from tests.eventually import eventually
from tests.server.kafka.test_kafka_admin_apis import image

QUORUM_REQUEST_TIMEOUT_MS = 2000  # controller.quorum.request.timeout.ms, the broker's default


@dataclass
class Election:
    active: int | None = None  # None: no controller elected yet
    asked: list[tuple[int, int]] = field(default_factory=list)  # node, the request's timeout_ms


class FakeController(controller_pb2_grpc.ControllerServicer):
    def __init__(self, node_id: int, election: Election) -> None:
        self.node_id = node_id
        self.election = election

    async def AlterPartitionReassignments(
        self, request: cpb.AlterPartitionReassignmentsRequest, context: Any
    ) -> cpb.AlterPartitionReassignmentsResponse:
        self.election.asked.append((self.node_id, request.timeout_ms))
        if self.election.active != self.node_id:
            return cpb.AlterPartitionReassignmentsResponse(
                controller_id=-1 if self.election.active is None else self.election.active,
                error=common_pb2.ErrorStatus(
                    code=NotControllerError.code,
                    error_name=NotControllerError.error_name,
                    message=f"node {self.node_id} is not the controller",
                ),
            )
        return cpb.AlterPartitionReassignmentsResponse(
            controller_id=self.node_id,
            results=[
                cpb.ReassignablePartitionResult(topic=t.name, partition_index=p.partition_index)
                for t in request.topics
                for p in t.partitions
            ],
        )


@dataclass
class Quorum:
    election: Election
    addresses: dict[int, str]
    servers: dict[int, Any]


@pytest_asyncio.fixture
async def quorum() -> AsyncIterator[Quorum]:
    election = Election()
    harness = Quorum(election, {}, {})
    for node_id in (1, 2, 3):
        server = grpc.aio.server()
        controller_pb2_grpc.add_ControllerServicer_to_server(  # type: ignore[no-untyped-call]
            FakeController(node_id, election), server
        )
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        harness.servers[node_id] = server
        harness.addresses[node_id] = f"127.0.0.1:{port}"
    # Controller 1, the active one until now, is killed: its port refuses connections.
    await harness.servers[1].stop(grace=None)
    try:
        yield harness
    finally:
        for server in harness.servers.values():
            await server.stop(grace=None)


def reassign(timeout_ms: int) -> apr.AlterPartitionReassignmentsRequest:
    return apr.AlterPartitionReassignmentsRequest(
        timeout_ms=timeout_ms,
        topics=[
            apr.ReassignableTopic(
                name="orders",
                partitions=[apr.ReassignablePartition(partition_index=0, replicas=[2, 1])],
            )
        ],
    )


def broker_forwarding(
    quorum: Quorum, clock: Any = monotonic_ms
) -> tuple[KafkaAdminApis, ControllerCalls]:
    raft_leader: list[int | None] = [None]  # the election is on: no leader known
    calls = ControllerCalls(
        quorum.addresses,
        lambda: raft_leader[0],
        request_timeout_ms=QUORUM_REQUEST_TIMEOUT_MS,
        clock=clock,
    )
    current = image()
    apis = KafkaAdminApis(4, cluster_id="c1", image=lambda: current, forward=calls.call)
    return apis, calls


@pytest.mark.asyncio
async def test_a_request_forwarded_during_an_election_longer_than_2_s_is_answered(
    quorum: Quorum, caplog: pytest.LogCaptureFixture
) -> None:
    skew = [0]  # the broker's clock runs ahead by this much: a long wait without waiting it
    apis, calls = broker_forwarding(quorum, lambda: monotonic_ms() + skew[0])
    caplog.set_level(logging.WARNING, "replog.server.controller.controller_calls")
    try:
        started = monotonic_ms()
        answer = asyncio.ensure_future(apis.alter_partition_reassignments(reassign(30_000)))
        await eventually(
            lambda: {node for node, _ in quorum.election.asked} == {2, 3}, "a round of the voters"
        )
        # Past the broker's controller.quorum.request.timeout.ms, really waited.
        await asyncio.sleep((QUORUM_REQUEST_TIMEOUT_MS + 500 - (monotonic_ms() - started)) / 1000)
        assert not answer.done()
        skew[0] = NOTE_AFTER_MS  # waited long enough to say what for
        await eventually(
            lambda: any("waiting for an active controller" in r.message for r in caplog.records),
            "the note",
        )
        quorum.election.active = 3  # elected at last
        response = await asyncio.wait_for(answer, 20)
        assert response.error_code == 0
        ((partition,),) = [t.partitions for t in response.responses]
        assert (partition.partition_index, partition.error_code) == (0, 0)
        assert quorum.election.asked[-1][0] == 3
        (note,) = {r.message for r in caplog.records if "waiting for" in r.message}
        assert note.startswith(
            "AlterPartitionReassignments from a Kafka client of broker 4: waiting for an "
            "active controller to answer, asking controller"
        )
        assert "left of 30000 ms" in note and "last failure: controller" in note
    finally:
        await calls.close()


@pytest.mark.asyncio
async def test_the_controller_gets_what_is_left_of_the_clients_timeout(quorum: Quorum) -> None:
    quorum.election.active = 2
    apis, calls = broker_forwarding(quorum)
    try:
        response = await apis.alter_partition_reassignments(reassign(25_000))
        assert response.error_code == 0
        ((node, timeout_ms),) = quorum.election.asked
        assert node == 2 and 20_000 < timeout_ms <= 25_000
    finally:
        await calls.close()


@pytest.mark.asyncio
async def test_no_controller_within_the_clients_timeout_is_request_timed_out(
    quorum: Quorum,
) -> None:
    apis, calls = broker_forwarding(quorum)
    try:
        response = await apis.alter_partition_reassignments(reassign(300))
        assert response.error_code == RequestTimedOutError.code
        assert "no controller answered within 300 ms" in (response.error_message or "")
        ((partition,),) = [t.partitions for t in response.responses]
        assert partition.error_code == RequestTimedOutError.code
    finally:
        await calls.close()
