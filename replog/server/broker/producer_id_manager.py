"""ProducerIdManager: the broker's producer ids for InitProducerId, from blocks the active
controller allocates (AllocateProducerIds; Kafka's `RPCProducerIdManager`).

Theory of operation: the pure `ProducerIdBlocks` decides which id comes next and when a block
is wanted; this shell keeps the time, runs the one AllocateProducerIds request in flight as a
task, and sets a timer when a wanted request waits out its backoff. The request itself is
`allocate(broker_epoch) -> (first id, size)`, injected: `allocate_from_controller` is the gRPC
one (through `ControllerCalls`, which follows NOT_CONTROLLER redirects and survives controller
failover within its request timeout); tests inject fakes.

Rules:
- Nothing is sent before `start()` (the broker has registered and serves its data plane);
  `start()` asks for the first block at once, so the first producer does not wait;
  afterwards the next block is prefetched when 90% of the current one is handed out.
- `generate_producer_id()` never waits: an id, or `CoordinatorLoadInProgressError` (retriable)
  while no block is available, naming the last failure to get one.
- The request names the broker's current epoch (the controller refuses a stale one with
  STALE_BROKER_EPOCH); without one (not registered yet) it fails with
  BROKER_ID_NOT_REGISTERED. Every failure is typed (`replog.errors`), logged, and retried in
  the background after the backoff while a block is wanted.
- Everything runs on the event loop thread; `stop()` cancels the request and the timer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from replog.clock import Clock, monotonic_ms
from replog.errors import BrokerIdNotRegisteredError, KafkaError, UnknownServerError
from replog.pb import controller_pb2 as controller_pb
from replog.replication.producer_id_blocks import (
    RETRY_BACKOFF_MAX_MS_DEFAULT,
    RETRY_BACKOFF_MS_DEFAULT,
    ProducerIdBlocks,
)
from replog.server.controller.controller_calls import ControllerCalls, Stub
from replog.server.runtime.node_tasks import Spawner
from replog.wire.broker_codec import error_from_proto

log = logging.getLogger("replog.server.producer_ids")

# broker epoch -> (first producer id, number of ids); raises a KafkaError on failure.
Allocate = Callable[[int], Awaitable[tuple[int, int]]]
Allocated = controller_pb.AllocateProducerIdsResponse


def allocate_from_controller(calls: ControllerCalls, broker_id: int) -> Allocate:
    """AllocateProducerIds to the active controller for `broker_id`."""

    async def allocate(broker_epoch: int) -> tuple[int, int]:
        request = controller_pb.AllocateProducerIdsRequest(
            broker_id=broker_id, broker_epoch=broker_epoch
        )

        def send(stub: Stub, timeout_s: float) -> Awaitable[Allocated]:
            answer: Awaitable[Allocated] = stub.AllocateProducerIds(request, timeout=timeout_s)
            return answer

        answer = await calls.call(f"AllocateProducerIds for broker {broker_id}", send)
        error = error_from_proto(answer)
        if error is not None:
            raise error
        return answer.producer_id_start, answer.producer_id_len

    return allocate


class ProducerIdManager:
    """Producer ids for this broker's InitProducerId answers (module docstring)."""

    def __init__(
        self,
        broker_id: int,
        broker_epoch: Callable[[], int | None],
        allocate: Allocate,
        *,
        tasks: Spawner,
        clock: Clock = monotonic_ms,
        retry_backoff_ms: int = RETRY_BACKOFF_MS_DEFAULT,
        retry_backoff_max_ms: int = RETRY_BACKOFF_MAX_MS_DEFAULT,
    ) -> None:
        self._spawner = tasks  # its background tasks' owner (node_tasks)
        self.broker_id = broker_id
        self._broker_epoch = broker_epoch
        self._allocate = allocate
        self._clock = clock
        self.blocks = ProducerIdBlocks(
            broker_id, retry_backoff_ms=retry_backoff_ms, retry_backoff_max_ms=retry_backoff_max_ms
        )
        self._request: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._started = False
        self._stopped = False
        self.requests_sent = 0  # for tests and metrics

    def start(self) -> None:
        """Ask for the first block now (call on the event loop once the broker registered)."""
        self._started = True
        self.blocks.want_block()
        self._pump()

    def generate_producer_id(self) -> int:
        """A producer id never handed out before in the cluster; `CoordinatorLoadInProgressError`
        while none is available (a block is then on its way)."""
        try:
            return self.blocks.next_id()
        finally:
            self._pump()

    async def stop(self) -> None:
        self._stopped = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        task, self._request = self._request, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # --- the request ---------------------------------------------------------------------------

    def _pump(self) -> None:
        """Send the wanted request now, or set a timer for when its backoff ends."""
        if self._stopped or not self._started:
            return
        now_ms = self._clock()
        if self.blocks.start_request(now_ms):
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            self.requests_sent += 1
            self._request = self._spawner.spawn(self._send(), name="a producer id block request")
            return
        retry_at_ms = self.blocks.retry_at_ms()
        if retry_at_ms is not None and self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(
                max(0, retry_at_ms - now_ms) / 1000, self._on_timer
            )

    def _on_timer(self) -> None:
        self._timer = None
        self._pump()

    async def _send(self) -> None:
        try:
            epoch = self._broker_epoch()
            if epoch is None or epoch < 0:
                raise BrokerIdNotRegisteredError(
                    f"broker {self.broker_id} has no broker epoch yet (not registered with the "
                    "controller), so it cannot ask for producer ids"
                )
            first, size = await self._allocate(epoch)
        except asyncio.CancelledError:
            raise
        except KafkaError as error:
            self._failed(error)
        except Exception as exc:  # a bug must not leave the request in flight forever
            log.exception("broker %d: AllocateProducerIds failed", self.broker_id)
            self._failed(UnknownServerError(f"AllocateProducerIds failed: {exc!r}"))
        else:
            refused = self.blocks.on_block(first, size, self._clock())
            if refused is None:
                last = first + size - 1
                log.info("broker %d: producer ids %d-%d allocated", self.broker_id, first, last)
            else:
                log.error("broker %d: %s", self.broker_id, refused)
        finally:
            if asyncio.current_task() is self._request:
                self._request = None
        self._pump()

    def _failed(self, error: KafkaError) -> None:
        log.warning(
            "broker %d: AllocateProducerIds failed (%s: %s); retrying after a backoff",
            self.broker_id,
            error.error_name,
            error,
        )
        self.blocks.on_failure(error, self._clock())
