"""gRPC servicers of a quorum node: `RaftQuorum` (node to node) and `MetadataLog` (tools).

Thin: each method turns the protobuf request into the core's message and waits for the answer
through `RaftTransport`, or calls the driver; no protocol decision is made here.
DescribeQuorum answers also carry where each voter listens (`nodes`, KIP-853), so that a tool
told "the leader is node 2" by a follower can ask node 2. KafkaControllerEndpoint says where
this node serves Kafka's protocol as a controller (`controller_endpoints`; port 0: nowhere).

`MetadataLog.Append` writes raw values only on a node whose log has no controller (Raft tests,
benchmarks), by the rules of `MetadataLogAppends`, which the metadata append listener shares;
`MetadataLog.AppendEndpoint` says where that listener is (`controller.quorum.append.port`).

Register both with `add_raft_services`: bytes that are not a request of the method's type fail
with INVALID_ARGUMENT naming them (`tolerant_service`), not gRPC's UNKNOWN.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any, TypeAlias

import grpc

from replog.clock import Clock, monotonic_ms, wall_clock_ms
from replog.errors import KafkaError
from replog.pb import raft_pb2 as pb
from replog.pb import raft_pb2_grpc
from replog.quorum.metadata.records import Endpoint
from replog.quorum.raft.config import VoterAddress
from replog.quorum.raft.messages import DescribeQuorumRequest
from replog.server.raft.controller_endpoints import endpoint_answer
from replog.server.raft.metadata_log_appends import MetadataLogAppends
from replog.server.raft.raft_codec import (
    begin_quorum_epoch_request_from_proto,
    end_quorum_epoch_request_from_proto,
    fetch_snapshot_request_from_proto,
    vote_request_from_proto,
)
from replog.server.raft.raft_driver import RaftDriver
from replog.server.raft.raft_transport import RaftTransport
from replog.server.raft.voter_endpoints import voter_endpoints
from replog.server.runtime.tolerant_service import add_guarded_service

Context: TypeAlias = Any  # grpc.aio.ServicerContext (grpc ships no type hints)

log = logging.getLogger("replog.server.raft")


class RaftQuorumService(raft_pb2_grpc.RaftQuorumServicer):
    def __init__(
        self,
        transport: RaftTransport,
        clock: Clock = monotonic_ms,
        voters: Iterable[VoterAddress] = (),
        kafka_controller_listener: Endpoint | None = None,
    ) -> None:
        self._transport = transport
        self._nodes = voter_endpoints(voters)
        self._kafka_controller = endpoint_answer(kafka_controller_listener)
        self._clock = clock  # the driver's: the core's timestamps are on it

    async def Vote(self, request: pb.VoteRequest, context: Context) -> object:
        return await self._transport.handle(
            context, lambda cid: vote_request_from_proto(request, cid)
        )

    async def BeginQuorumEpoch(
        self, request: pb.BeginQuorumEpochRequest, context: Context
    ) -> object:
        return await self._transport.handle(
            context, lambda cid: begin_quorum_epoch_request_from_proto(request, cid)
        )

    async def EndQuorumEpoch(self, request: pb.EndQuorumEpochRequest, context: Context) -> object:
        return await self._transport.handle(
            context, lambda cid: end_quorum_epoch_request_from_proto(request, cid)
        )

    async def FetchEndpoint(
        self, request: pb.FetchEndpointRequest, context: Context
    ) -> pb.FetchEndpointResponse:
        port = self._transport.fetch_listener.port
        if port is None:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "not listening for Fetch yet")
        return pb.FetchEndpointResponse(port=port)

    async def KafkaControllerEndpoint(
        self, request: pb.KafkaControllerEndpointRequest, context: Context
    ) -> pb.KafkaControllerEndpointResponse:
        return self._kafka_controller

    async def FetchSnapshot(self, request: pb.FetchSnapshotRequest, context: Context) -> object:
        return await self._transport.handle(
            context, lambda cid: fetch_snapshot_request_from_proto(request, cid)
        )

    async def DescribeQuorum(self, request: pb.DescribeQuorumRequest, context: Context) -> object:
        answer = await self._transport.handle(context, DescribeQuorumRequest)
        assert isinstance(answer, pb.DescribeQuorumResponse)
        answer.nodes.extend(self._nodes)
        return _on_wall_clock(answer, self._clock(), wall_clock_ms())


def _on_wall_clock(
    answer: pb.DescribeQuorumResponse, now_ms: int, wall_now_ms: int
) -> pb.DescribeQuorumResponse:
    """Wall-clock times for a client: the core stamps replicas with this process's monotonic
    clock, which means nothing outside it; Kafka's DescribeQuorum carries wall-clock timestamps,
    and the leader describes itself as fetched and caught up now (the core leaves it unknown)."""
    for replica in (*answer.voters, *answer.observers):
        if replica.replica_id == answer.leader_id:
            replica.last_fetch_ms = replica.last_caught_up_ms = now_ms
        for field in ("last_fetch_ms", "last_caught_up_ms"):
            value = getattr(replica, field)
            if value != -1:
                setattr(replica, field, value - now_ms + wall_now_ms)
    return answer


class MetadataLogService(raft_pb2_grpc.MetadataLogServicer):
    """`appends` holds the rules of `Append` (shared with the metadata append listener);
    `append_port` says where that listener listens (None: not listening)."""

    def __init__(
        self,
        driver: RaftDriver,
        *,
        raw_appends: bool = True,
        append_port: Callable[[], int | None] = lambda: None,
    ) -> None:
        self._driver = driver
        self.appends = MetadataLogAppends(driver, raw_appends=raw_appends)
        self._append_port = append_port

    async def Append(self, request: pb.AppendRequest, context: Context) -> pb.AppendResponse:
        return await self.appends.append(list(request.values))

    async def AppendEndpoint(
        self, request: pb.AppendEndpointRequest, context: Context
    ) -> pb.AppendEndpointResponse:
        port = self._append_port()
        if port is None:
            await context.abort(
                grpc.StatusCode.UNAVAILABLE,
                f"node {self._driver.node_id} does not listen for metadata appends "
                "(controller.quorum.append.port): not a controller, or not started yet",
            )
        return pb.AppendEndpointResponse(port=port)

    async def ReadCommitted(
        self, request: pb.ReadCommittedRequest, context: Context
    ) -> pb.ReadCommittedResponse:
        try:
            records, high_watermark, log_start = self._driver.read_committed(
                request.start_offset, request.max_bytes or 1024 * 1024
            )
        except KafkaError as exc:
            return pb.ReadCommittedResponse(error_code=exc.code, error_message=str(exc))
        return pb.ReadCommittedResponse(
            high_watermark=high_watermark, log_start_offset=log_start, records=records
        )


def add_raft_services(
    quorum: RaftQuorumService, metadata_log: MetadataLogService, server: Any, *, node_id: int
) -> None:
    """Register both servicers on a grpc.aio server, guarded (module docstring)."""
    for service, name in ((quorum, "RaftQuorum"), (metadata_log, "MetadataLog")):
        descriptor = pb.DESCRIPTOR.services_by_name[name]
        add_guarded_service(server, service, descriptor, who=f"node {node_id}", log=log)
