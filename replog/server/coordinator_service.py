"""The `GroupCoordinator` gRPC servicer: FindCoordinator, OffsetCommit, OffsetFetch and the
classic group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, DescribeGroups,
ListGroups, DeleteGroups) and KIP-848's ConsumerGroupHeartbeat (replog's consumer with
`group.protocol=consumer`) and ConsumerGroupDescribe (`replog consumer-groups`) to the broker's
`GroupCoordinator`.

Thin: each method decodes the request (`coordinator_codec`), asks the coordinator and encodes
the answer; the coordinator and `replog.coordinator` decide everything else.

Rules:
- Bytes that are not a protobuf message of the method's request type fail with
  INVALID_ARGUMENT, answered by the service and not by gRPC's own deserializer (which would
  answer INTERNAL and log a traceback): register the service with `add_coordinator_service`.
  A request the codec cannot hold (a partition named twice) fails with INVALID_ARGUMENT too.
- Until the broker's data plane runs and its coordinator is attached (`attach`), and after it
  stops, every call is answered with Kafka's COORDINATOR_NOT_AVAILABLE (retriable), as Kafka
  answers while its coordinator is not active.
- JoinGroup's client host is the gRPC peer's host (DescribeGroups' CLIENT-HOST);
  ConsumerGroupHeartbeat's is written as Kafka writes it ("/127.0.0.1").
- A commit waits for acks=all at most until a little before the caller's gRPC deadline, so the
  caller gets Kafka's answer (REQUEST_TIMED_OUT) rather than DEADLINE_EXCEEDED.
- An unexpected exception is logged and the call fails with INTERNAL naming it; never a
  crashed process.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace
from typing import Any, Protocol, TypeVar

import grpc

from replog.coordinator import classic_group_messages as gm
from replog.coordinator import consumer_group_messages as cgm
from replog.coordinator import messages as cm
from replog.errors import CoordinatorNotAvailableError, InvalidRequestError, KafkaError
from replog.pb import coordinator_pb2 as pb
from replog.pb import coordinator_pb2_grpc
from replog.server.tolerant_service import (
    Context,
    Refused,
    add_tolerant_service,
    remaining_ms,
    serve_guarded,
)
from replog.wire import coordinator_codec as codec
from replog.wire.broker_codec import error_to_proto

log = logging.getLogger("replog.server.coordinator")

SERVICE_NAME = "replog.pb.coordinator.GroupCoordinator"

R = TypeVar("R")


class CoordinatorRequests(Protocol):
    """What the service (and the Kafka listener's group handlers) need of the coordinator
    (`group_coordinator.GroupCoordinator`)."""

    def find_coordinator(
        self, group_id: str, listener_name: str | None = None
    ) -> cm.FindCoordinatorResponse: ...
    async def join_group(self, request: gm.JoinGroupRequest) -> gm.JoinGroupResponse: ...
    async def sync_group(self, request: gm.SyncGroupRequest) -> gm.SyncGroupResponse: ...
    def heartbeat(self, request: gm.HeartbeatRequest) -> KafkaError | None: ...
    async def leave_group(self, request: gm.LeaveGroupRequest) -> gm.LeaveGroupResponse: ...
    def describe_groups(self, group_ids: Iterable[str]) -> list[gm.DescribedGroup]: ...
    def list_groups(
        self, states: Iterable[str] = ()
    ) -> tuple[KafkaError | None, list[gm.ListedGroup]]: ...
    async def delete_groups(
        self, group_ids: Iterable[str]
    ) -> list[tuple[str, KafkaError | None]]: ...
    async def offset_commit(
        self, request: cm.OffsetCommitRequest, *, timeout_ms: int | None = None
    ) -> cm.OffsetCommitResponse: ...
    def offset_fetch(self, request: cm.OffsetFetchRequest) -> cm.OffsetFetchResponse: ...
    async def offset_delete(self, request: cm.OffsetDeleteRequest) -> cm.OffsetDeleteResponse: ...
    async def consumer_group_heartbeat(
        self, request: cgm.ConsumerGroupHeartbeatRequest
    ) -> cgm.ConsumerGroupHeartbeatResponse: ...
    def consumer_group_describe(
        self, group_ids: Iterable[str]
    ) -> list[cgm.DescribedConsumerGroup]: ...


class UnavailableCoordinator:
    """The coordinator of a broker whose data plane is not running: every answer is
    COORDINATOR_NOT_AVAILABLE."""

    def __init__(self, broker_id: int) -> None:
        self.error = CoordinatorNotAvailableError(
            f"broker {broker_id} does not coordinate groups yet (its data plane is starting) "
            "or any more (it is stopping)"
        )

    def find_coordinator(
        self, group_id: str, listener_name: str | None = None
    ) -> cm.FindCoordinatorResponse:
        return cm.FindCoordinatorResponse(self.error)

    async def join_group(self, request: gm.JoinGroupRequest) -> gm.JoinGroupResponse:
        return gm.JoinGroupResponse(0, self.error, request.member_id)

    async def sync_group(self, request: gm.SyncGroupRequest) -> gm.SyncGroupResponse:
        return gm.SyncGroupResponse(0, self.error)

    def heartbeat(self, request: gm.HeartbeatRequest) -> KafkaError | None:
        return self.error

    async def leave_group(self, request: gm.LeaveGroupRequest) -> gm.LeaveGroupResponse:
        return gm.LeaveGroupResponse(self.error)

    def describe_groups(self, group_ids: Iterable[str]) -> list[gm.DescribedGroup]:
        return [gm.DescribedGroup(group_id, self.error, "") for group_id in group_ids]

    def list_groups(
        self, states: Iterable[str] = ()
    ) -> tuple[KafkaError | None, list[gm.ListedGroup]]:
        return self.error, []

    async def delete_groups(self, group_ids: Iterable[str]) -> list[tuple[str, KafkaError | None]]:
        return [(group_id, self.error) for group_id in group_ids]

    async def offset_commit(
        self, request: cm.OffsetCommitRequest, *, timeout_ms: int | None = None
    ) -> cm.OffsetCommitResponse:
        return cm.OffsetCommitResponse(self.error)

    def offset_fetch(self, request: cm.OffsetFetchRequest) -> cm.OffsetFetchResponse:
        return cm.OffsetFetchResponse(self.error)

    async def offset_delete(self, request: cm.OffsetDeleteRequest) -> cm.OffsetDeleteResponse:
        return cm.OffsetDeleteResponse(self.error)

    async def consumer_group_heartbeat(
        self, request: cgm.ConsumerGroupHeartbeatRequest
    ) -> cgm.ConsumerGroupHeartbeatResponse:
        return cgm.ConsumerGroupHeartbeatResponse(self.error)

    def consumer_group_describe(self, group_ids: Iterable[str]) -> list[cgm.DescribedConsumerGroup]:
        return [cgm.DescribedConsumerGroup(group_id, self.error) for group_id in group_ids]


class CoordinatorService(coordinator_pb2_grpc.GroupCoordinatorServicer):
    def __init__(self, broker_id: int, coordinator: CoordinatorRequests | None = None) -> None:
        self.broker_id = broker_id
        self._coordinator = coordinator

    def attach(self, coordinator: CoordinatorRequests | None) -> None:
        """Serve from `coordinator` from now on (None: answer COORDINATOR_NOT_AVAILABLE)."""
        self._coordinator = coordinator

    def _current(self) -> CoordinatorRequests:
        coordinator = self._coordinator
        return UnavailableCoordinator(self.broker_id) if coordinator is None else coordinator

    async def FindCoordinator(
        self, request: pb.FindCoordinatorRequest, context: Context
    ) -> pb.FindCoordinatorResponse:
        async def serve() -> pb.FindCoordinatorResponse:
            answer = self._current().find_coordinator(request.group_id)
            return codec.find_coordinator_response_to_proto(answer)

        return await self._serve(request, context, serve)

    async def OffsetCommit(
        self, request: pb.OffsetCommitRequest, context: Context
    ) -> pb.OffsetCommitResponse:
        async def serve() -> pb.OffsetCommitResponse:
            decoded = codec.offset_commit_request_from_proto(request)
            host = peer_host(context.peer() if context is not None else None)
            decoded = replace(decoded, committer=replace(decoded.committer, host=host))
            answer = await self._current().offset_commit(decoded, timeout_ms=remaining_ms(context))
            return codec.offset_commit_response_to_proto(answer)

        return await self._serve(request, context, serve)

    async def OffsetFetch(
        self, request: pb.OffsetFetchRequest, context: Context
    ) -> pb.OffsetFetchResponse:
        async def serve() -> pb.OffsetFetchResponse:
            decoded = codec.offset_fetch_request_from_proto(request)
            return codec.offset_fetch_response_to_proto(self._current().offset_fetch(decoded))

        return await self._serve(request, context, serve)

    async def JoinGroup(
        self, request: pb.JoinGroupRequest, context: Context
    ) -> pb.JoinGroupResponse:
        async def serve() -> pb.JoinGroupResponse:
            host = peer_host(context.peer() if context is not None else None)
            decoded = codec.join_group_request_from_proto(request, host)
            answer = await self._current().join_group(decoded)
            return codec.join_group_response_to_proto(answer)

        return await self._serve(request, context, serve)

    async def SyncGroup(
        self, request: pb.SyncGroupRequest, context: Context
    ) -> pb.SyncGroupResponse:
        async def serve() -> pb.SyncGroupResponse:
            decoded = codec.sync_group_request_from_proto(request)
            answer = await self._current().sync_group(decoded)
            return codec.sync_group_response_to_proto(answer)

        return await self._serve(request, context, serve)

    async def Heartbeat(
        self, request: pb.HeartbeatRequest, context: Context
    ) -> pb.HeartbeatResponse:
        async def serve() -> pb.HeartbeatResponse:
            error = self._current().heartbeat(codec.heartbeat_request_from_proto(request))
            return pb.HeartbeatResponse(error=error_to_proto(error))

        return await self._serve(request, context, serve)

    async def LeaveGroup(
        self, request: pb.LeaveGroupRequest, context: Context
    ) -> pb.LeaveGroupResponse:
        async def serve() -> pb.LeaveGroupResponse:
            decoded = codec.leave_group_request_from_proto(request)
            answer = await self._current().leave_group(decoded)
            return codec.leave_group_response_to_proto(answer)

        return await self._serve(request, context, serve)

    async def DescribeGroups(
        self, request: pb.DescribeGroupsRequest, context: Context
    ) -> pb.DescribeGroupsResponse:
        async def serve() -> pb.DescribeGroupsResponse:
            groups = self._current().describe_groups(request.group_ids)
            return codec.describe_groups_response_to_proto(groups)

        return await self._serve(request, context, serve)

    async def ConsumerGroupHeartbeat(
        self, request: pb.ConsumerGroupHeartbeatRequest, context: Context
    ) -> pb.ConsumerGroupHeartbeatResponse:
        async def serve() -> pb.ConsumerGroupHeartbeatResponse:
            host = peer_host(context.peer() if context is not None else None)
            decoded = codec.consumer_group_heartbeat_request_from_proto(
                request, f"/{host}" if host else ""
            )
            answer = await self._current().consumer_group_heartbeat(decoded)
            return codec.consumer_group_heartbeat_response_to_proto(answer)

        return await self._serve(request, context, serve)

    async def ConsumerGroupDescribe(
        self, request: pb.ConsumerGroupDescribeRequest, context: Context
    ) -> pb.ConsumerGroupDescribeResponse:
        async def serve() -> pb.ConsumerGroupDescribeResponse:
            groups = self._current().consumer_group_describe(request.group_ids)
            return codec.consumer_group_describe_response_to_proto(groups)

        return await self._serve(request, context, serve)

    async def ListGroups(
        self, request: pb.ListGroupsRequest, context: Context
    ) -> pb.ListGroupsResponse:
        async def serve() -> pb.ListGroupsResponse:
            error, groups = self._current().list_groups(request.states)
            return codec.list_groups_response_to_proto(error, groups)

        return await self._serve(request, context, serve)

    async def DeleteGroups(
        self, request: pb.DeleteGroupsRequest, context: Context
    ) -> pb.DeleteGroupsResponse:
        async def serve() -> pb.DeleteGroupsResponse:
            results = await self._current().delete_groups(request.group_ids)
            return codec.delete_groups_response_to_proto(results)

        return await self._serve(request, context, serve)

    async def _serve(self, request: Any, context: Context, serve: Callable[[], Awaitable[R]]) -> R:
        """Run `serve`; garbage and codec refusals abort INVALID_ARGUMENT, the rest INTERNAL."""

        async def refusing_invalid() -> R:
            try:
                return await serve()
            except InvalidRequestError as error:
                raise Refused(grpc.StatusCode.INVALID_ARGUMENT, str(error)) from None

        return await serve_guarded(
            request, context, refusing_invalid, who=f"broker {self.broker_id}", log=log
        )


def peer_host(peer: str | None) -> str:
    """The host of a gRPC peer (`ipv4:127.0.0.1:5000`, `ipv6:[::1]:5000`): "" if none."""
    if not peer or ":" not in peer:
        return ""
    address = peer.split(":", 1)[1]
    host = address.rsplit(":", 1)[0] if ":" in address else address
    return host.strip("[]")


_METHODS: dict[str, tuple[Any, Any]] = {
    "FindCoordinator": (pb.FindCoordinatorRequest, pb.FindCoordinatorResponse),
    "OffsetCommit": (pb.OffsetCommitRequest, pb.OffsetCommitResponse),
    "OffsetFetch": (pb.OffsetFetchRequest, pb.OffsetFetchResponse),
    "JoinGroup": (pb.JoinGroupRequest, pb.JoinGroupResponse),
    "SyncGroup": (pb.SyncGroupRequest, pb.SyncGroupResponse),
    "Heartbeat": (pb.HeartbeatRequest, pb.HeartbeatResponse),
    "LeaveGroup": (pb.LeaveGroupRequest, pb.LeaveGroupResponse),
    "DescribeGroups": (pb.DescribeGroupsRequest, pb.DescribeGroupsResponse),
    "ListGroups": (pb.ListGroupsRequest, pb.ListGroupsResponse),
    "DeleteGroups": (pb.DeleteGroupsRequest, pb.DeleteGroupsResponse),
    "ConsumerGroupHeartbeat": (
        pb.ConsumerGroupHeartbeatRequest,
        pb.ConsumerGroupHeartbeatResponse,
    ),
    "ConsumerGroupDescribe": (pb.ConsumerGroupDescribeRequest, pb.ConsumerGroupDescribeResponse),
}


def add_coordinator_service(service: CoordinatorService, server: Any) -> None:
    """Register `service` on a grpc.aio server with deserializers that hand garbage to the
    service instead of failing (see the module docstring)."""
    add_tolerant_service(server, SERVICE_NAME, service, _METHODS)
