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
from typing import Any, Protocol, TypeAlias, TypeVar

import grpc
from google.protobuf.message import DecodeError

from replog.coordinator import messages as cm
from replog.errors import CoordinatorNotAvailableError, InvalidRequestError
from replog.pb import coordinator_pb2 as pb
from replog.pb import coordinator_pb2_grpc
from replog.server import coordinator_codec as codec
from replog.server.broker_service import Undecodable

log = logging.getLogger("replog.server.coordinator")

Context: TypeAlias = Any  # grpc.aio.ServicerContext (grpc ships no type hints)

SERVICE_NAME = "replog.pb.coordinator.GroupCoordinator"
# Answer this long before the caller's gRPC deadline (as the Broker service does).
DEADLINE_MARGIN_MS = 20

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
            coordinator = self._coordinator
            if coordinator is None:
                answer = cm.OffsetCommitResponse(self._unavailable())
            else:
                answer = await coordinator.offset_commit(decoded, timeout_ms=_remaining_ms(context))
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
        if isinstance(request, Undecodable):
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"broker {self.broker_id}: {request.method}: the {len(request.data)} request "
                f"bytes are not a {request.message_type} message: {request.reason}",
            )
        try:
            return await serve()
        except InvalidRequestError as error:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, f"broker {self.broker_id}: {error}"
            )
            raise  # abort raised already; this keeps mypy sure the function never falls off
        except Exception as exc:
            name = type(request).__name__
            log.exception("broker %d: %s failed unexpectedly", self.broker_id, name)
            await context.abort(
                grpc.StatusCode.INTERNAL,
                f"broker {self.broker_id}: {name} failed: {type(exc).__name__}: {exc}",
            )
            raise


def _remaining_ms(context: Context) -> int | None:
    """How long the caller still waits, less the margin; None without a deadline."""
    remaining_s = None if context is None else context.time_remaining()
    if remaining_s is None:
        return None
    return max(0, int(remaining_s * 1000) - DEADLINE_MARGIN_MS)


def _tolerant(method: str, message_type: Any) -> Callable[[bytes], Any]:
    def deserialize(data: bytes) -> Any:
        try:
            return message_type.FromString(data)
        except DecodeError as error:
            return Undecodable(method, message_type.DESCRIPTOR.full_name, data, str(error))

    return deserialize


_METHODS: dict[str, tuple[Any, Any]] = {
    "FindCoordinator": (pb.FindCoordinatorRequest, pb.FindCoordinatorResponse),
    "OffsetCommit": (pb.OffsetCommitRequest, pb.OffsetCommitResponse),
    "OffsetFetch": (pb.OffsetFetchRequest, pb.OffsetFetchResponse),
}


def add_coordinator_service(service: CoordinatorService, server: Any) -> None:
    """Register `service` on a grpc.aio server with deserializers that hand garbage to the
    service instead of failing (see the module docstring)."""
    handlers = {
        method: grpc.unary_unary_rpc_method_handler(
            getattr(service, method),
            request_deserializer=_tolerant(method, request_type),
            response_serializer=response_type.SerializeToString,
        )
        for method, (request_type, response_type) in _METHODS.items()
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE_NAME, handlers),))
    server.add_registered_method_handlers(SERVICE_NAME, handlers)
