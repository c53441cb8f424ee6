"""How a broker reaches the active controller: one call that follows NOT_CONTROLLER redirects
and survives a controller election (Kafka's `NodeToControllerChannelManager`).

Rules:
- `ControllerCalls.call` sends one request until a controller answers it with anything but
  NOT_CONTROLLER, or its time passes: the call's `timeout_ms` (a forwarded client request's
  own), else `request_timeout_ms`. Which controller next, when, and the `RequestTimedOutError`
  at the end are `controller_retry`'s decisions; a wait past a few seconds is logged at
  WARNING with what it waits for. The answer's own error (other than NOT_CONTROLLER) is the
  caller's to read.
- Calls fail fast (no wait-for-ready) and an UNAVAILABLE call replaces its channel (as the
  broker lifecycle driver does), so a restarted controller is dialled afresh.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol, TypeVar

import grpc

from replog.clock import Clock, monotonic_ms
from replog.errors import NetworkError, NotControllerError
from replog.pb import common_pb2, controller_pb2_grpc
from replog.server.controller.controller_retry import ActiveController, ControllerRetry
from replog.server.runtime.peer_channels import PeerChannels, PeerLinks, PeerLinksFactory
from replog.wire.grpc_reconnect import RECONNECT_OPTIONS

log = logging.getLogger("replog.server.controller.controller_calls")

REQUEST_TIMEOUT_MS_DEFAULT = 30_000
RETRY_BACKOFF_MS_DEFAULT = 50
RETRY_BACKOFF_MAX_MS_DEFAULT = 1000
CHANNEL_OPTIONS = [
    ("grpc.keepalive_time_ms", 10_000),
    *RECONNECT_OPTIONS,
]


class ControllerAnswer(Protocol):
    """Every Controller response: the answering controller and a request-level error."""

    @property
    def controller_id(self) -> int: ...
    @property
    def error(self) -> common_pb2.ErrorStatus: ...
    def HasField(self, field_name: str) -> bool: ...


A = TypeVar("A", bound=ControllerAnswer)
Stub = Any  # controller_pb2_grpc.ControllerStub (generated code has no precise types)


class ControllerCalls:
    """Unary calls to the active controller, redirected and retried (module docstring)."""

    def __init__(
        self,
        controller_addresses: Mapping[int, str],
        hint: Callable[[], int | None] = lambda: None,
        *,
        request_timeout_ms: int = REQUEST_TIMEOUT_MS_DEFAULT,
        retry_backoff_ms: int = RETRY_BACKOFF_MS_DEFAULT,
        retry_backoff_max_ms: int = RETRY_BACKOFF_MAX_MS_DEFAULT,
        clock: Clock = monotonic_ms,
        controller_links: PeerLinksFactory = PeerChannels,
    ) -> None:
        """`controller_links`: makes the links to the controllers (`peer_channels`)."""
        self._addresses = dict(controller_addresses)
        self.active = ActiveController(list(controller_addresses), hint)
        self._request_timeout_ms = request_timeout_ms
        self._retry_backoff_ms = retry_backoff_ms
        self._retry_backoff_max_ms = retry_backoff_max_ms
        self._clock = clock
        self._controllers: PeerLinks[Stub] = controller_links(
            controller_addresses, controller_pb2_grpc.ControllerStub, CHANNEL_OPTIONS
        )

    async def call(
        self,
        what: str,
        send: Callable[[Stub, float], Awaitable[A]],
        *,
        timeout_ms: int | None = None,
    ) -> A:
        """`send(stub, timeout_s)` to the active controller until one answers (module docstring).

        `what` names the request in errors and logs ("AllocateProducerIds for broker 1");
        `timeout_ms` is how long it may take in all (None: `request_timeout_ms`).
        """
        retry = ControllerRetry(
            what,
            self.active,
            now_ms=self._clock(),
            timeout_ms=self._request_timeout_ms if timeout_ms is None else timeout_ms,
            retry_backoff_ms=self._retry_backoff_ms,
            retry_backoff_max_ms=self._retry_backoff_max_ms,
        )
        while True:
            attempt = retry.next(self._clock())
            controller_id = attempt.controller_id
            if attempt.delay_ms > 0:
                await asyncio.sleep(attempt.delay_ms / 1000)
            stub = self._controllers.stub(controller_id)
            assert stub is not None, f"controller {controller_id} has no address"
            try:
                answer = await self._noted(
                    retry, controller_id, send(stub, attempt.timeout_ms / 1000)
                )
            except grpc.aio.AioRpcError as exc:
                code = exc.code()
                log.info("%s: controller %d failed: %s", what, controller_id, code.name)
                if code == grpc.StatusCode.UNAVAILABLE:
                    self._controllers.reconnect(controller_id)
                retry.failed(
                    controller_id,
                    NetworkError(
                        f"controller {controller_id} at {self._addresses[controller_id]}: "
                        f"{code.name}: {exc.details()}"
                    ),
                    timed_out=code == grpc.StatusCode.DEADLINE_EXCEEDED,
                )
                continue
            if answer.HasField("error") and answer.error.code == NotControllerError.code:
                retry.redirected(
                    controller_id,
                    NotControllerError(
                        f"controller {controller_id}: "
                        f"{answer.error.message or 'not the controller'}"
                    ),
                    answer.controller_id if answer.controller_id >= 0 else None,
                )
                continue
            return answer

    async def _noted(self, retry: ControllerRetry, controller_id: int, sent: Awaitable[A]) -> A:
        """`sent`'s answer, saying what the request waits for while it is overdue."""
        task = asyncio.ensure_future(sent)
        try:
            while True:
                if (note := retry.note(self._clock(), controller_id)) is not None:
                    log.warning("%s", note)
                done, _ = await asyncio.wait(
                    {task}, timeout=retry.until_note_ms(self._clock()) / 1000
                )
                if done:
                    return task.result()
        finally:
            task.cancel()

    async def close(self) -> None:
        await self._controllers.close()
