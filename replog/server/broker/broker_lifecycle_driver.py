"""Drives one broker's `BrokerLifecycle` against the controller quorum's Controller service.

Theory of operation: one task (`run`) owns the core, as `RaftDriver` owns its Raft node. Every
input (a response, a failed call, a new metadata offset, readiness, a shutdown request) is a
closure posted to its inbox; after each, the task drains the core's `ready()`:

    requests      -> one gRPC call each, to the controller the request names
    state changes -> logged, and the events `wait_until_caught_up`, `wait_until_running` and
                     `controlled_shutdown` wait on are set

and sleeps until the next input or `wake_at_ms`, then ticks the core.

Rules:
- The controllers' addresses are those of `controller.quorum.voters`: each controller node
  serves the Controller service on the listener the voter list names.
- A call is never retried here. Its answer goes to the core as a response; a gRPC failure
  (unreachable, deadline exceeded after `request_timeout_ms`, ...) goes to the core as
  `request_failed`, and the core decides where and when to try again (NOT_CONTROLLER redirects,
  backoff). An UNAVAILABLE call also replaces the channel, so that the next call to that
  controller connects afresh instead of failing fast through gRPC's reconnect backoff.
- Only the task touches the core; other code calls the public methods, which post.
"""

from __future__ import annotations

import asyncio
import logging
import random
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import grpc

from replog.clock import Clock, monotonic_ms
from replog.errors import BrokerLifecycleError, NotControllerError
from replog.pb import controller_pb2 as pb
from replog.pb import controller_pb2_grpc
from replog.quorum.metadata.broker_lifecycle import (
    BrokerLifecycle,
    BrokerLifecycleConfig,
    HeartbeatRequest,
    HeartbeatResponse,
    LifecycleRequest,
    LifecycleState,
    RegistrationRequest,
    RegistrationResponse,
    StateChange,
)
from replog.server.runtime.node_tasks import Spawner
from replog.server.runtime.peer_channels import PeerChannels, PeerLinks, PeerLinksFactory
from replog.wire.grpc_reconnect import RECONNECT_OPTIONS

log = logging.getLogger("replog.server.broker")

_CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", 4 * 1024 * 1024),
    ("grpc.max_receive_message_length", 4 * 1024 * 1024),
    ("grpc.keepalive_time_ms", 10_000),
    # Kafka's client reconnects, as in the Raft transport (replog/wire/grpc_reconnect.py): gRPC's
    # default (1 s growing to 120 s) would hide a restarted controller for minutes.
    *RECONNECT_OPTIONS,
]


class BrokerLifecycleDriver:
    """Owns a `BrokerLifecycle` and its calls to the controllers; see the module docstring."""

    def __init__(
        self,
        config: BrokerLifecycleConfig,
        controller_addresses: Mapping[int, str],
        *,
        tasks: Spawner,
        clock: Clock = monotonic_ms,
        rng: random.Random | None = None,
        incarnation_id: uuid.UUID | None = None,
        leaves_nothing_to_hand_over: Callable[[], bool] = lambda: False,
        on_registered: Callable[[int], None] = lambda broker_epoch: None,
        controller_links: PeerLinksFactory = PeerChannels,
    ) -> None:
        """`controller_links`: makes the links to the controllers (`peer_channels`)."""
        self._spawner = tasks  # its background tasks' owner (node_tasks)
        # Told (in the task) of every registration the controller accepted, with its epoch.
        self._on_registered = on_registered
        self.config = config
        self._clock = clock
        # Asked (in the task) while a controlled shutdown is pending, after each new metadata
        # offset and once as it begins: whether the published image leaves nothing to hand
        # over (the core's Rule 7a).
        self._leaves_nothing_to_hand_over = leaves_nothing_to_hand_over
        if incarnation_id is None:
            # A fresh incarnation per process start: the controller tells a restart from a
            # retried registration by it. From `rng` when given (a simulation's seeded one).
            incarnation_id = (
                uuid.uuid4() if rng is None else uuid.UUID(int=rng.getrandbits(128), version=4)
            )
        self.core = BrokerLifecycle(
            config,
            incarnation_id=incarnation_id,
            rng=rng or random.Random(),
            now_ms=clock(),
        )
        self._inbox: asyncio.Queue[Callable[[int], None]] = asyncio.Queue()
        self._controllers: PeerLinks[Any] = controller_links(
            controller_addresses,
            controller_pb2_grpc.ControllerStub,
            _CHANNEL_OPTIONS,
        )
        self._calls: set[asyncio.Task[None]] = set()
        self._refusals_said: set[int] = set()  # registration error codes said since a success
        self._task: asyncio.Task[None] | None = None
        self._stopped = False
        self._caught_up = asyncio.Event()
        self._running = asyncio.Event()
        self._shut_down = asyncio.Event()
        self._shut_down_reason = ""
        self.state_changes: list[StateChange] = []

    # --- what it knows -----------------------------------------------------------------------

    @property
    def state(self) -> LifecycleState:
        return self.core.state

    @property
    def broker_epoch(self) -> int | None:
        return self.core.broker_epoch

    @property
    def is_fenced(self) -> bool:
        return self.core.is_fenced

    @property
    def caught_up(self) -> bool:
        """A heartbeat answer said the broker caught up with the metadata log (it stays so)."""
        return self._caught_up.is_set()

    # --- inputs (post to the task) -----------------------------------------------------------

    def _post(self, event: Callable[[int], None]) -> None:
        self._inbox.put_nowait(event)

    def update_metadata_offset(self, offset: int) -> None:
        """The broker published the image up to `offset` (its loader's last applied offset)."""
        self._post(lambda now: self._on_metadata_offset(offset))

    def _on_metadata_offset(self, offset: int) -> None:
        self.core.update_metadata_offset(offset)
        self._check_handover()

    def _begin_controlled_shutdown(self, now: int) -> None:
        self.core.begin_controlled_shutdown(now)
        self._check_handover()

    def _check_handover(self) -> None:
        if (
            self.core.state is LifecycleState.PENDING_CONTROLLED_SHUTDOWN
            and self._leaves_nothing_to_hand_over()
        ):
            self.core.nothing_to_hand_over()

    def set_ready_to_unfence(self) -> None:
        """The first image is published and the logs are recovered: ask to be unfenced."""
        self._post(self.core.set_ready_to_unfence)

    def controller_hint(self, controller_id: int | None) -> None:
        """The Raft leader (the active controller) is `controller_id`."""
        self._post(lambda now: self.core.controller_hint(controller_id, now))

    # --- waiting -----------------------------------------------------------------------------

    async def wait_until_caught_up(self) -> None:
        """Until a heartbeat answer said the broker caught up (RECOVERY or later)."""
        await self._wait_for(self._caught_up, "caught up with the metadata log")

    async def wait_until_running(self) -> None:
        """Until the controller unfenced the broker (RUNNING); raises `BrokerLifecycleError`
        if it shuts down first (no registration in time, a shutdown while starting)."""
        await self._wait_for(self._running, "running")

    async def _wait_for(self, event: asyncio.Event, what: str) -> None:
        done = asyncio.create_task(event.wait())
        down = asyncio.create_task(self._shut_down.wait())
        try:
            await asyncio.wait({done, down}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            done.cancel()
            down.cancel()
        if not event.is_set():
            raise BrokerLifecycleError(
                f"broker {self.config.broker_id} shut down before it was {what}: "
                f"{self._shut_down_reason}"
            )

    async def wait_shut_down(self) -> str:
        """Until the lifecycle ended (SHUTTING_DOWN, or its loop stopped); returns why."""
        await self._shut_down.wait()
        return self._shut_down_reason

    async def controlled_shutdown(self, timeout_ms: int) -> bool:
        """Hand leaderships over and wait until the controller lets the broker go.

        True when the lifecycle ended on its own (the controller said `should_shut_down`, or
        there was nothing to hand over); False when `timeout_ms` passed first, and the broker
        then stops anyway.
        """
        if self._task is None or self._task.done():
            # No loop runs the core: nothing was registered through it, nothing to hand over.
            self.core.begin_shutdown("controlled shutdown of a broker lifecycle not running")
            self._drain_ready()
            return True
        self._post(self._begin_controlled_shutdown)
        try:
            async with asyncio.timeout(timeout_ms / 1000):
                await self._shut_down.wait()
        except TimeoutError:
            log.warning(
                "broker %d: controlled shutdown not granted within %d ms; stopping anyway",
                self.config.broker_id,
                timeout_ms,
            )
            self._post(
                lambda now: self.core.begin_shutdown(
                    f"controlled shutdown not granted within {timeout_ms} ms"
                )
            )
            return False
        return True

    # --- the loop ----------------------------------------------------------------------------

    def start(self) -> asyncio.Task[None]:
        """Run the loop in a task (idempotent)."""
        if self._task is None:
            self._task = self._spawner.spawn(self.run(), name="the broker lifecycle")
        return self._task

    async def run(self) -> None:
        """Register, heartbeat, shut down: until SHUTTING_DOWN or `stop`."""
        try:
            # Inputs posted before the start (a controller hint, an offset) shape the first
            # registration, which goes out at the first tick.
            while not self._inbox.empty():
                self._inbox.get_nowait()(self._clock())
            self.core.tick(self._clock())
            while not self._stopped:
                self._drain_ready()
                if self.core.state is LifecycleState.SHUTTING_DOWN:
                    break
                wake_at = self.core.wake_at_ms()
                timeout = None if wake_at is None else max(0, wake_at - self._clock()) / 1000
                try:
                    async with asyncio.timeout(timeout):
                        event = await self._inbox.get()
                except TimeoutError:
                    self.core.tick(self._clock())
                    continue
                event(self._clock())
                while not self._inbox.empty():
                    self._inbox.get_nowait()(self._clock())
            self._drain_ready()
        finally:
            # Whoever waits on the lifecycle must not wait forever on a loop that is gone.
            if not self._shut_down.is_set():
                self._shut_down_reason = "the broker lifecycle loop stopped"
                self._shut_down.set()

    def _drain_ready(self) -> None:
        while self.core.has_ready():
            ready = self.core.ready()
            for change in ready.state_changes:
                self._on_state_change(change)
            for request in ready.requests:
                if self._stopped or self.core.state is LifecycleState.SHUTTING_DOWN:
                    break
                task = self._spawner.spawn(self._call(request), name="a broker lifecycle call")
                self._calls.add(task)
                task.add_done_callback(self._calls.discard)

    def _on_state_change(self, change: StateChange) -> None:
        self.state_changes.append(change)
        log.info(
            "broker %d: %s -> %s (%s)",
            self.config.broker_id,
            change.previous.value,
            change.state.value,
            change.reason,
        )
        if change.state is LifecycleState.RECOVERY:
            self._caught_up.set()
        elif change.state is LifecycleState.RUNNING:
            self._running.set()
        elif change.state is LifecycleState.SHUTTING_DOWN:
            self._shut_down_reason = change.reason
            self._shut_down.set()

    async def stop(self) -> None:
        """Stop sending (no handover: use `controlled_shutdown` first) and close channels."""
        self._stopped = True
        self._post(lambda now: self.core.begin_shutdown("the broker is stopping"))
        if self._task is not None:
            try:
                async with asyncio.timeout(1):
                    await asyncio.shield(self._task)
            except (asyncio.CancelledError, TimeoutError):
                pass
            except Exception:
                log.exception("broker %d: the lifecycle loop failed", self.config.broker_id)
        if not self._shut_down.is_set():
            self._shut_down_reason = "the broker is stopping"
            self._shut_down.set()
        for task in list(self._calls):
            task.cancel()
        await self._controllers.close()

    # --- calls -------------------------------------------------------------------------------

    async def _call(self, request: LifecycleRequest) -> None:
        stub = self._controllers.stub(request.controller_id)
        cid = request.correlation_id
        if stub is None:
            reason = f"no address for controller {request.controller_id}"
            self._post(lambda now: self.core.request_failed(cid, now, reason))
            return
        timeout = self.config.request_timeout_ms / 1000
        try:
            if isinstance(request, RegistrationRequest):
                sent_ms = self._clock()
                answer: Any = await stub.BrokerRegistration(
                    registration_to_proto(request), timeout=timeout
                )
                response = registration_response_from_proto(cid, answer)
                log.debug(
                    "broker %d: registration answered by controller %d: error %d, naming %d",
                    self.config.broker_id,
                    request.controller_id,
                    response.error_code,
                    response.controller_id,
                )
                self._say_registration_refused(request.controller_id, response)
                if response.error_code == 0:
                    # A restart's timeline: how long the registration's write took to commit.
                    log.info(
                        "broker %d: registered by controller %d at broker epoch %d (answered "
                        "in %d ms)",
                        self.config.broker_id,
                        request.controller_id,
                        response.broker_epoch,
                        self._clock() - sent_ms,
                    )
                self._post(lambda now: self._registration_answered(response, now))
            else:
                answer = await stub.BrokerHeartbeat(heartbeat_to_proto(request), timeout=timeout)
                beat = heartbeat_response_from_proto(cid, answer)
                self._post(lambda now: self.core.handle_heartbeat_response(beat, now))
        except grpc.aio.AioRpcError as exc:
            code = exc.code()
            log.debug("broker lifecycle call to %d failed: %s", request.controller_id, code)
            if code == grpc.StatusCode.UNAVAILABLE:
                self._controllers.reconnect(request.controller_id)
            reason = f"{code.name}: {exc.details()}"
            self._post(lambda now: self.core.request_failed(cid, now, reason))

    def _registration_answered(self, response: RegistrationResponse, now: int) -> None:
        self.core.handle_registration_response(response, now)
        if response.error_code == 0:
            self._on_registered(response.broker_epoch)

    def _say_registration_refused(self, controller_id: int, response: RegistrationResponse) -> None:
        """A refused registration is retried by the core; its cause is said once per kind (a
        restarted broker waits out its previous incarnation's session, up to
        broker.session.timeout.ms, and would otherwise wait in silence)."""
        if response.error_code == 0:
            self._refusals_said.clear()
            return
        if response.error_code == NotControllerError.code or (
            response.error_code in self._refusals_said
        ):
            return  # a node that is not (yet) the controller: the core asks the right one
        self._refusals_said.add(response.error_code)
        log.info(
            "broker %d: registration refused by controller %d (%s); retrying",
            self.config.broker_id,
            controller_id,
            response.error_message or f"error {response.error_code}",
        )


# --- protobuf translation ----------------------------------------------------------------------


def registration_to_proto(request: RegistrationRequest) -> pb.BrokerRegistrationRequest:
    message = pb.BrokerRegistrationRequest(
        broker_id=request.broker_id,
        cluster_id=request.cluster_id,
        incarnation_id=request.incarnation_id.bytes,
        listeners=[
            pb.Listener(
                name=e.name, host=e.host, port=e.port, security_protocol=e.security_protocol
            )
            for e in request.listeners
        ],
        features=[
            pb.SupportedFeature(
                name=f.name,
                min_supported_version=f.min_supported_version,
                max_supported_version=f.max_supported_version,
            )
            for f in request.features
        ],
        previous_broker_epoch=request.previous_broker_epoch,
    )
    if request.rack is not None:
        message.rack = request.rack
    return message


def heartbeat_to_proto(request: HeartbeatRequest) -> pb.BrokerHeartbeatRequest:
    return pb.BrokerHeartbeatRequest(
        broker_id=request.broker_id,
        broker_epoch=request.broker_epoch,
        current_metadata_offset=request.current_metadata_offset,
        want_fence=request.want_fence,
        want_shut_down=request.want_shut_down,
    )


def registration_response_from_proto(
    correlation_id: int, message: pb.BrokerRegistrationResponse
) -> RegistrationResponse:
    return RegistrationResponse(
        correlation_id,
        error_code=message.error.code,
        error_message=message.error.message,
        controller_id=message.controller_id,
        broker_epoch=message.broker_epoch,
    )


def heartbeat_response_from_proto(
    correlation_id: int, message: pb.BrokerHeartbeatResponse
) -> HeartbeatResponse:
    return HeartbeatResponse(
        correlation_id,
        error_code=message.error.code,
        error_message=message.error.message,
        controller_id=message.controller_id,
        is_caught_up=message.is_caught_up,
        is_fenced=message.is_fenced,
        should_shut_down=message.should_shut_down,
    )
