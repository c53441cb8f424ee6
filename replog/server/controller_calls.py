"""How a broker reaches the active controller: which voter to ask, and one call that follows
NOT_CONTROLLER redirects (Kafka's `NodeToControllerChannelManager`).

Rules:
- `ActiveController` picks the target: first the Raft leader the broker knows of (`hint`),
  else the first voter of `controller.quorum.voters`. After a NOT_CONTROLLER answer naming
  another controller, that one; after a failure naming none (unreachable, timed out,
  NOT_CONTROLLER without a name), the Raft leader if it is another node, else the next voter.
  The AlterPartition sender and `ControllerCalls` share it.
- `ControllerCalls.call` sends one request until a controller answers it with anything but
  NOT_CONTROLLER, or `request_timeout_ms` passes (then `RequestTimedOutError`, retriable,
  naming the request and the last failure; an attempt timed out with the request names
  itself only when nothing failed before it). A NOT_CONTROLLER answer goes at once to the
  controller it names, at most once per voter in a row; a failed call and further redirects
  wait a backoff growing from `retry_backoff_ms` to `retry_backoff_max_ms` first. The answer's
  own error (other than NOT_CONTROLLER) is the caller's to read.
- Calls fail fast (no wait-for-ready) and an UNAVAILABLE call replaces its channel (as the
  broker lifecycle driver does), so a restarted controller is dialled afresh.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

import grpc

from replog.clock import Clock, monotonic_ms
from replog.errors import KafkaError, NetworkError, NotControllerError, RequestTimedOutError
from replog.pb import common_pb2, controller_pb2_grpc
from replog.server.peer_channels import PeerChannels

log = logging.getLogger("replog.server.controller_calls")

REQUEST_TIMEOUT_MS_DEFAULT = 30_000
RETRY_BACKOFF_MS_DEFAULT = 50
RETRY_BACKOFF_MAX_MS_DEFAULT = 1000
CHANNEL_OPTIONS = [
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.initial_reconnect_backoff_ms", 50),
    ("grpc.min_reconnect_backoff_ms", 50),
    ("grpc.max_reconnect_backoff_ms", 1000),
]


class ActiveController:
    """The controller a broker's next request goes to (module docstring)."""

    def __init__(self, voters: Sequence[int], hint: Callable[[], int | None]) -> None:
        if not voters:
            raise ValueError("ActiveController needs at least one controller")
        self._voters = list(voters)  # controller.quorum.voters order
        self._hint = hint
        self._controller_id: int | None = None

    def target(self) -> int:
        if self._controller_id is None:
            hint = self._hint()
            self._controller_id = hint if hint in self._voters else self._voters[0]
        return self._controller_id

    def move_on_from(self, failed_id: int, named_id: int | None = None) -> None:
        """The next target after `failed_id` failed: the one named, the Raft leader if it is
        another, else the next voter."""
        if named_id is not None and named_id in self._voters and named_id != failed_id:
            self._controller_id = named_id
            return
        hint = self._hint()
        if hint is not None and hint in self._voters and hint != failed_id:
            self._controller_id = hint
            return
        index = self._voters.index(failed_id) if failed_id in self._voters else -1
        self._controller_id = self._voters[(index + 1) % len(self._voters)]

    def __len__(self) -> int:
        return len(self._voters)


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
    ) -> None:
        self._addresses = dict(controller_addresses)
        self.active = ActiveController(list(controller_addresses), hint)
        self._request_timeout_ms = request_timeout_ms
        self._retry_backoff_ms = retry_backoff_ms
        self._retry_backoff_max_ms = retry_backoff_max_ms
        self._clock = clock
        self._controllers: PeerChannels[Stub] = PeerChannels(
            controller_addresses, controller_pb2_grpc.ControllerStub, CHANNEL_OPTIONS
        )

    async def call(self, what: str, send: Callable[[Stub, float], Awaitable[A]]) -> A:
        """`send(stub, timeout_s)` to the active controller until one answers (module docstring).

        `what` names the request in errors and logs ("AllocateProducerIds for broker 1").
        """
        deadline_ms = self._clock() + self._request_timeout_ms
        failures = 0
        redirects = 0
        last: KafkaError | None = None
        while True:
            remaining_ms = deadline_ms - self._clock()
            if remaining_ms <= 0:
                raise RequestTimedOutError(
                    f"{what}: no controller answered within {self._request_timeout_ms} ms"
                    + ("" if last is None else f" (last failure: {last})")
                )
            controller_id = self.active.target()
            stub = self._controllers.stub(controller_id)
            assert stub is not None, f"controller {controller_id} has no address"
            try:
                answer = await send(stub, remaining_ms / 1000)
            except grpc.aio.AioRpcError as exc:
                code = exc.code()
                log.info("%s: controller %d failed: %s", what, controller_id, code.name)
                if code == grpc.StatusCode.UNAVAILABLE:
                    self._controllers.reconnect(controller_id)
                # An attempt given only the request's remaining time and timed out says no
                # more than that the time ran out: an earlier failure (a redirect, a refused
                # connection) stays the one the error names.
                if not (code == grpc.StatusCode.DEADLINE_EXCEEDED and last is not None):
                    last = NetworkError(
                        f"controller {controller_id} at {self._addresses[controller_id]}: "
                        f"{code.name}: {exc.details()}"
                    )
                self.active.move_on_from(controller_id)
                failures += 1
                await self._back_off(failures, deadline_ms)
                continue
            if answer.HasField("error") and answer.error.code == NotControllerError.code:
                named = answer.controller_id if answer.controller_id >= 0 else None
                last = NotControllerError(
                    f"controller {controller_id}: {answer.error.message or 'not the controller'}"
                )
                self.active.move_on_from(controller_id, named)
                redirects += 1
                if redirects > len(self.active):
                    failures += 1
                    await self._back_off(failures, deadline_ms)
                continue
            return answer

    async def _back_off(self, failures: int, deadline_ms: int) -> None:
        delay_ms = min(
            self._retry_backoff_max_ms, self._retry_backoff_ms * 2 ** min(failures - 1, 10)
        )
        delay_ms = min(delay_ms, max(0, deadline_ms - self._clock()))
        await asyncio.sleep(delay_ms / 1000)

    async def close(self) -> None:
        await self._controllers.close()
