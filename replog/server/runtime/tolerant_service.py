"""What every gRPC service a node serves shares in serving a call.

- `add_tolerant_service`: registers a servicer as its generated `add_*Servicer_to_server` does,
  but with deserializers that hand bytes which are not a message of the method's request type
  to the servicer as `Undecodable` instead of failing (gRPC's own deserializer would answer
  INTERNAL and log a traceback), so that the call fails with INVALID_ARGUMENT naming them.
  Given a `RequestLimit`, a request longer than it is not parsed at all: the servicer gets it
  as `Oversize`, and the call fails with RESOURCE_EXHAUSTED naming its size and the limit (as
  Kafka's broker refuses a request over socket.request.max.bytes from its size prefix).
  A method's request or response type is a generated message class, or anything with the same
  `DESCRIPTOR` and `FromString` (request) or `SerializeToString` (response), such as the
  fetch answer with its records (`broker_codec.FetchResponseWire`).
- `add_guarded_service`: registers a servicer that does not guard its own calls (`RaftQuorum`,
  `MetadataLog`, `Controller`) tolerantly, every method of its protobuf service descriptor
  run through `serve_guarded`: garbage fails with INVALID_ARGUMENT naming it, as on the
  `ReplicaFetch` service, which guards its calls itself.
- `serve_guarded`: runs one call; `Undecodable` or `Oversize` bytes and a `Refused` abort with
  their status, any other exception is logged and aborts INTERNAL naming it; never a crashed
  process. `refuse_undecodable` and `abort_for` are its two halves, for a stream that checks
  a request in one task and aborts the call in another.
- `remaining_ms`: how long the caller still waits, less `DEADLINE_MARGIN_MS`, so that a call
  that waits ends with Kafka's answer rather than the caller's DEADLINE_EXCEEDED.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, NoReturn, TypeAlias, TypeVar

import grpc
from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message import DecodeError
from google.protobuf.message_factory import GetMessageClass

Context: TypeAlias = Any  # grpc.aio.ServicerContext (grpc ships no type hints)

# Answer this long before the caller's gRPC deadline (as the Controller service does).
DEADLINE_MARGIN_MS = 20

R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Undecodable:
    """What the tolerant deserializer hands the service for bytes it cannot parse."""

    method: str
    message_type: str
    data: bytes
    reason: str


@dataclass(frozen=True, slots=True)
class Oversize:
    """What the tolerant deserializer hands the service for a request over its limit."""

    message_type: str
    size: int
    limit: RequestLimit


@dataclass(frozen=True, slots=True)
class RequestLimit:
    """The most bytes a request may have, and the setting that says so (named in refusals)."""

    max_bytes: int
    setting: str


class Refused(Exception):
    """The whole call fails with a gRPC status (raised inside a service only)."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code = code
        self.details = details


def _tolerant(method: str, message_type: Any, limit: RequestLimit | None) -> Callable[[bytes], Any]:
    def deserialize(data: bytes) -> Any:
        if limit is not None and len(data) > limit.max_bytes:
            return Oversize(message_type.DESCRIPTOR.name, len(data), limit)
        try:
            return message_type.FromString(data)
        except DecodeError as error:
            return Undecodable(method, message_type.DESCRIPTOR.full_name, data, str(error))

    return deserialize


def add_tolerant_service(
    server: Any,
    service_name: str,
    service: Any,
    methods: Mapping[str, tuple[Any, Any]],
    streams: Mapping[str, tuple[Any, Any]] | None = None,
    limit: RequestLimit | None = None,
) -> None:
    """Register `service`'s unary `methods` and its bidirectional-stream `streams` (name ->
    (request type, response type)) under `service_name` on a grpc.aio server, with tolerant
    deserializers (module docstring; a stream's applies to each of its requests), refusing
    requests over `limit` if given."""
    handlers = {
        method: grpc.unary_unary_rpc_method_handler(
            getattr(service, method),
            request_deserializer=_tolerant(method, request_type, limit),
            response_serializer=response_type.SerializeToString,
        )
        for method, (request_type, response_type) in methods.items()
    }
    for method, (request_type, response_type) in (streams or {}).items():
        handlers[method] = grpc.stream_stream_rpc_method_handler(
            getattr(service, method),
            request_deserializer=_tolerant(method, request_type, limit),
            response_serializer=response_type.SerializeToString,
        )
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service_name, handlers),))
    server.add_registered_method_handlers(service_name, handlers)


def add_guarded_service(
    server: Any,
    service: Any,
    descriptor: ServiceDescriptor,
    *,
    who: str,
    log: logging.Logger,
) -> None:
    """Register `service`, which implements every (unary) method of `descriptor`, on a grpc.aio
    server as `add_tolerant_service` does, each call run through `serve_guarded` (module
    docstring): a servicer need not check for `Undecodable` requests itself."""
    methods: dict[str, tuple[Any, Any]] = {}
    handlers: dict[str, Callable[[Any, Context], Awaitable[Any]]] = {}
    for method in descriptor.methods:
        if method.client_streaming or method.server_streaming:
            raise ValueError(
                f"{descriptor.full_name}.{method.name}: only unary methods are guarded"
            )
        methods[method.name] = (
            GetMessageClass(method.input_type),
            GetMessageClass(method.output_type),
        )
        handlers[method.name] = _guarded(getattr(service, method.name), who, log)
    add_tolerant_service(server, descriptor.full_name, SimpleNamespace(**handlers), methods)


def _guarded(
    handler: Callable[[Any, Context], Awaitable[R]], who: str, log: logging.Logger
) -> Callable[[Any, Context], Awaitable[R]]:
    async def guarded(request: Any, context: Context) -> R:
        return await serve_guarded(
            request, context, lambda: handler(request, context), who=who, log=log
        )

    return guarded


async def serve_guarded(
    request: Any,
    context: Context,
    serve: Callable[[], Awaitable[R]],
    *,
    who: str,
    log: logging.Logger,
) -> R:
    """`await serve()` for `request` (module docstring); every abort's details start with
    `who` ("broker 1")."""
    try:
        refuse_undecodable(request)
        return await serve()
    except Exception as exc:
        await abort_for(exc, context, type(request).__name__, who=who, log=log)


def refuse_undecodable(request: Any) -> None:
    """Raise `Refused` for `Undecodable` bytes (INVALID_ARGUMENT, naming the bytes and why)
    and for an `Oversize` request (RESOURCE_EXHAUSTED, naming its size and the limit)."""
    if isinstance(request, Oversize):
        raise Refused(
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            f"{request.message_type} of {request.size} bytes is larger than "
            f"{request.limit.setting} ({request.limit.max_bytes})",
        )
    if isinstance(request, Undecodable):
        raise Refused(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"{request.method}: the {len(request.data)} request bytes are not a "
            f"{request.message_type} message: {request.reason}",
        )


async def abort_for(
    error: Exception, context: Context, name: str, *, who: str, log: logging.Logger
) -> NoReturn:
    """Abort the call for `error`, raised serving a request of type `name`: a `Refused` with its
    status, anything else logged (with its traceback) and INTERNAL naming it; an abort the
    service made itself (`context.abort`) is left as it is."""
    if isinstance(error, grpc.aio.AbortError):
        raise error
    if isinstance(error, Refused):
        await context.abort(error.code, f"{who}: {error.details}")
    else:
        log.error("%s: %s failed unexpectedly", who, name, exc_info=error)
        await context.abort(
            grpc.StatusCode.INTERNAL, f"{who}: {name} failed: {type(error).__name__}: {error}"
        )
    raise error  # abort raised already; this keeps mypy sure the function never returns


def remaining_ms(context: Context) -> int | None:
    """How long the caller still waits, less the margin; None without a deadline."""
    remaining_s = None if context is None else context.time_remaining()
    if remaining_s is None:
        return None
    return max(0, int(remaining_s * 1000) - DEADLINE_MARGIN_MS)
