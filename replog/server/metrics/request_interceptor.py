"""`replog_requests_total` and `replog_request_duration_seconds`: a grpc.aio server interceptor.

Every unary-unary call of every service on the node's listener is timed from the handler's
start to its answer (Kafka's TotalTimeMs minus the network queueing gRPC does before the handler)
and counted by service, method and gRPC status code. The service label is the proto service's
short name (`ReplicaFetch`, `Controller`, `RaftQuorum`, ...), the method its RPC name (`Fetch`).

Rules:
- The status code is what the handler's context says when it returns (OK unless it set or
  aborted with another), UNKNOWN for an exception escaping it, CANCELLED when the call was
  cancelled. Replog's services answer Kafka errors in-band, so those count as OK, as Kafka's
  RequestsPerSec counts every request.
- Per call: one clock read each side, one counter increment and one histogram observation on
  children looked up once per (method, code); the wrapped handler is built once per method.
- A bidirectional-stream method (`ReplicaFetch.Fetch`) counts each answer as one
  request, timed from its request's arrival to the answer (the answers come in the order of
  the requests), OK; a stream that ends in an error or is cancelled counts
  the request it was answering with that code. Other streaming kinds (none) pass through.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

import grpc

from replog.clock import monotonic_s
from replog.server.metrics.instruments import NodeMetrics
from replog.wire.wrapping_interceptor import Handler, WrappingInterceptor


def split_method(full_method: str) -> tuple[str, str]:
    """`/replog.pb.controller.Controller/CreateTopics` -> (`Controller`, `CreateTopics`)."""
    path = full_method.lstrip("/")
    service, _, method = path.rpartition("/")
    return service.rpartition(".")[2] or "unknown", method or "unknown"


def status_name(code: object) -> str:
    """The name of a gRPC status as a context reports it (None: not set, so OK)."""
    if code is None:
        return "OK"
    if isinstance(code, grpc.StatusCode):
        return str(code.name)
    if isinstance(code, int):
        for status in grpc.StatusCode:
            if status.value[0] == code:
                return str(status.name)
    return "UNKNOWN"


class RequestMetricsInterceptor(WrappingInterceptor):
    """Counts and times every unary call and stream answer (module docstring)."""

    def __init__(self, metrics: NodeMetrics) -> None:
        super().__init__()
        self._metrics = metrics

    def _instruments(self, full_method: str) -> tuple[Any, Callable[[str], None]]:
        """The method's duration histogram and a `count(code)` for it."""
        service, method = split_method(full_method)
        metrics = self._metrics
        duration = metrics.request_duration.labels(service=service, method=method)
        counters: dict[str, Any] = {}

        def count(code: str) -> None:
            counter = counters.get(code)
            if counter is None:
                counter = counters[code] = metrics.requests.labels(
                    service=service, method=method, code=code
                )
            counter.inc()

        return duration, count

    def _wrap_stream(self, full_method: str, handler: Handler) -> Handler:
        duration, count = self._instruments(full_method)
        behavior = handler.stream_stream

        async def measured(requests: Any, context: grpc.aio.ServicerContext) -> Any:
            arrivals: list[float] = []  # of the requests not answered yet, oldest first

            async def arriving() -> Any:
                async for request in requests:
                    arrivals.append(monotonic_s())
                    yield request

            def answered(code: str) -> None:
                if arrivals:
                    duration.observe(monotonic_s() - arrivals.pop(0))
                    count(code)

            try:
                async for answer in behavior(arriving(), context):
                    answered("OK")
                    yield answer
            except asyncio.CancelledError:
                answered("CANCELLED")
                raise
            except BaseException:
                reported = _context_code(context)
                answered("UNKNOWN" if reported is None else status_name(reported))
                raise

        return grpc.stream_stream_rpc_method_handler(
            measured,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )

    def _wrap_unary(self, full_method: str, handler: Handler) -> Handler:
        duration, count = self._instruments(full_method)
        behavior = handler.unary_unary

        async def measured(request: Any, context: grpc.aio.ServicerContext) -> Any:
            start = monotonic_s()
            code = "UNKNOWN"
            try:
                answer = behavior(request, context)
                if inspect.isawaitable(answer):
                    answer = await answer
                code = status_name(_context_code(context))
                return answer
            except asyncio.CancelledError:
                code = "CANCELLED"
                raise
            except BaseException:
                # An abort sets the context's code before raising; anything else is UNKNOWN.
                reported = _context_code(context)
                code = "UNKNOWN" if reported is None else status_name(reported)
                raise
            finally:
                duration.observe(monotonic_s() - start)
                count(code)

        return grpc.unary_unary_rpc_method_handler(
            measured,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )


def _context_code(context: grpc.aio.ServicerContext) -> object:
    code = getattr(context, "code", None)
    if code is None:
        return None
    try:
        return code()
    except Exception:  # an older grpc without ServicerContext.code()
        return None
