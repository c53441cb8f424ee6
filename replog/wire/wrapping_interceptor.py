"""A grpc.aio server interceptor that wraps each method's handler once: the shape the node's
interceptors share (`server.metrics.request_interceptor`, `wire.link_peer_check`).

Rules: a method's wrapped handler is built at its first call and kept (a dictionary probe per
call after that); unary-unary and stream-stream handlers are wrapped by the subclass's
`_wrap_unary` / `_wrap_stream`; any other kind (replog serves none) passes through as it is.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias

import grpc

Handler: TypeAlias = Any  # grpc.RpcMethodHandler (grpc ships no type hints)


class WrappingInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    def __init__(self) -> None:
        self._wrapped: dict[str, Handler] = {}

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Handler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Handler:
        method: str = handler_call_details.method
        wrapped = self._wrapped.get(method)
        if wrapped is not None:
            return wrapped
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        if handler.unary_unary is not None:
            wrapped = self._wrap_unary(method, handler)
        elif handler.stream_stream is not None:
            wrapped = self._wrap_stream(method, handler)
        else:
            return handler
        self._wrapped[method] = wrapped
        return wrapped

    @abstractmethod
    def _wrap_unary(self, full_method: str, handler: Handler) -> Handler:
        """The handler that runs `handler` (a unary-unary one) for `full_method`."""

    @abstractmethod
    def _wrap_stream(self, full_method: str, handler: Handler) -> Handler:
        """The handler that runs `handler` (a stream-stream one) for `full_method`."""
