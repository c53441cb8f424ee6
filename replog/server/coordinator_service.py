"""The `GroupCoordinator` gRPC servicer: FindCoordinator, OffsetCommit and OffsetFetch to the
broker's `GroupCoordinator`.

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
- A commit waits for acks=all at most until a little before the caller's gRPC deadline, so the
  caller gets Kafka's answer (REQUEST_TIMED_OUT) rather than DEADLINE_EXCEEDED.
- An unexpected exception is logged and the call fails with INTERNAL naming it; never a
  crashed process.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, Protocol, TypeVar

import grpc

from replog.coordinator import messages as cm
from replog.errors import CoordinatorNotAvailableError, InvalidRequestError
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

log = logging.getLogger("replog.server.coordinator")

SERVICE_NAME = "replog.pb.coordinator.GroupCoordinator"

R = TypeVar("R")


class CoordinatorRequests(Protocol):
    """What the service needs of the coordinator (`group_coordinator.GroupCoordinator`)."""

    def find_coordinator(self, group_id: str) -> cm.FindCoordinatorResponse: ...
    async def offset_commit(
        self, request: cm.OffsetCommitRequest, *, timeout_ms: int | None = None
    ) -> cm.OffsetCommitResponse: ...
    def offset_fetch(self, request: cm.OffsetFetchRequest) -> cm.OffsetFetchResponse: ...


class CoordinatorService(coordinator_pb2_grpc.GroupCoordinatorServicer):
    def __init__(self, broker_id: int, coordinator: CoordinatorRequests | None = None) -> None:
        self.broker_id = broker_id
        self._coordinator = coordinator

    def attach(self, coordinator: CoordinatorRequests | None) -> None:
        """Serve from `coordinator` from now on (None: answer COORDINATOR_NOT_AVAILABLE)."""
        self._coordinator = coordinator

    def _unavailable(self) -> CoordinatorNotAvailableError:
        return CoordinatorNotAvailableError(
            f"broker {self.broker_id} does not coordinate groups yet (its data plane is "
            "starting) or any more (it is stopping)"
        )

    async def FindCoordinator(
        self, request: pb.FindCoordinatorRequest, context: Context
    ) -> pb.FindCoordinatorResponse:
        async def serve() -> pb.FindCoordinatorResponse:
            coordinator = self._coordinator
            if coordinator is None:
                answer = cm.FindCoordinatorResponse(self._unavailable())
            else:
                answer = coordinator.find_coordinator(request.group_id)
            return codec.find_coordinator_response_to_proto(answer)

        return await self._serve(request, context, serve)

    async def OffsetCommit(
        self, request: pb.OffsetCommitRequest, context: Context
    ) -> pb.OffsetCommitResponse:
        async def serve() -> pb.OffsetCommitResponse:
            decoded = codec.offset_commit_request_from_proto(request)
            host = peer_host(context.peer() if context is not None else None)
            decoded = replace(decoded, committer=replace(decoded.committer, host=host))
            coordinator = self._coordinator
            if coordinator is None:
                answer = cm.OffsetCommitResponse(self._unavailable())
            else:
                answer = await coordinator.offset_commit(decoded, timeout_ms=remaining_ms(context))
            return codec.offset_commit_response_to_proto(answer)

        return await self._serve(request, context, serve)

    async def OffsetFetch(
        self, request: pb.OffsetFetchRequest, context: Context
    ) -> pb.OffsetFetchResponse:
        async def serve() -> pb.OffsetFetchResponse:
            decoded = codec.offset_fetch_request_from_proto(request)
            coordinator = self._coordinator
            if coordinator is None:
                answer = cm.OffsetFetchResponse(self._unavailable())
            else:
                answer = coordinator.offset_fetch(decoded)
            return codec.offset_fetch_response_to_proto(answer)

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
}


def add_coordinator_service(service: CoordinatorService, server: Any) -> None:
    """Register `service` on a grpc.aio server with deserializers that hand garbage to the
    service instead of failing (see the module docstring)."""
    add_tolerant_service(server, SERVICE_NAME, service, _METHODS)
