"""Sends the partition leaders' ISR changes to the active controller (Kafka's
`AlterPartitionManager`), and hands each answer back to the replica manager.

Theory of operation: one task loops: drain `pending_isr_changes()` into the unsent set (keyed
by topic id and partition; a newer change for a partition replaces an unsent older one), send
everything unsent in AlterPartition requests of at most `ALTER_PARTITION_BATCH_MAX` partitions,
up to `ALTER_PARTITION_IN_FLIGHT_MAX` of them at once (disjoint), wait for their answers, and
repeat; when nothing is unsent it sleeps until the replica manager's `isr_wakeup`. No request
goes out while others are in flight, so two requests for the same partition are never
outstanding together; changes made meanwhile wait for the next requests.

Rules:
- Each per-partition answer goes to `on_isr_change_result`: an error as the `replog.errors`
  instance for its code, naming the partition; success with the committed ISR, leader epoch and
  partition epoch. The replica manager decides what an error means for the partition. At most
  `RESULTS_PER_TURN` answers are applied per event-loop turn: the sender's one task applies
  them, each request's as it comes, never the requests' own tasks at once.
- A request-level failure retries the same changes (Kafka retries them until answered):
  NOT_CONTROLLER goes at once to the controller the answer names (else the next voter),
  at most once per voter in a row before backing off; an unreachable or timed-out controller
  moves to the known active controller (the Raft leader, `controller_hint`) or the next voter
  (`controller_retry.ActiveController`), after a backoff growing from `retry_backoff_ms` to
  `retry_backoff_max_ms`; STALE_BROKER_EPOCH and any other request-level error retry after
  the backoff with the broker's then-current epoch. A partition the answer leaves out is sent
  again.
- Nothing is sent before the broker has an epoch (it registered): the controller would refuse.
- Calls fail fast (no wait-for-ready), time out after `request_timeout_ms`, and an UNAVAILABLE
  call replaces its channel (as the broker lifecycle driver does).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol
from uuid import UUID

import grpc

from replog.errors import KafkaError, NotControllerError, error_for_code
from replog.pb import controller_pb2 as pb
from replog.pb import controller_pb2_grpc
from replog.replication.leader_state import IsrChange
from replog.server.controller.controller_calls import CHANNEL_OPTIONS
from replog.server.controller.controller_retry import ActiveController
from replog.server.data_plane.replica_fetcher import wait_for_wakeup
from replog.server.runtime.loop_turns import yield_turn
from replog.server.runtime.node_tasks import Spawner
from replog.server.runtime.peer_channels import PeerChannels, PeerLinks, PeerLinksFactory

log = logging.getLogger("replog.server.alter_partition")

# Partitions per AlterPartition request (the rest follow in the next requests, at once): the
# controller decodes and writes a request in one turn of its loop, 60-70 ms of a loaded
# machine's CPU at 500 (a restart's ISR expansions).
ALTER_PARTITION_BATCH_MAX = 250
# Requests of one broker in flight together: each waits for its commit on the controller
# (a Raft round trip and an fsync) far longer than the controller spends on it, so a second
# one written meanwhile keeps a restart's thousands of ISR expansions going at the rate of
# one request of 500 (Kafka sends one request, of every pending change).
ALTER_PARTITION_IN_FLIGHT_MAX = 2

# Answers handed to the replica manager per event-loop turn: each commits an ISR change (the
# leader state, its high watermark, waiters), and 500 in one turn held the loop for tens of ms.
RESULTS_PER_TURN = 100
REQUEST_TIMEOUT_MS_DEFAULT = 30_000
RETRY_BACKOFF_MS_DEFAULT = 50  # Kafka's AlterPartitionManager retry delay
RETRY_BACKOFF_MAX_MS_DEFAULT = 1000
IDLE_POLL_MS = 1000

PartitionKey = tuple[UUID, int]


class IsrChangeSource(Protocol):
    """What the sender needs of the replica manager (`replica_manager.ReplicaManager`)."""

    @property
    def isr_wakeup(self) -> asyncio.Event: ...
    def pending_isr_changes(self) -> list[IsrChange]: ...
    def on_isr_change_result(
        self,
        change: IsrChange,
        error: KafkaError | None,
        isr: tuple[int, ...],
        leader_epoch: int,
        partition_epoch: int,
    ) -> None: ...


def _key(change: IsrChange) -> PartitionKey:
    return (change.topic_id, change.partition)


def alter_partition_request(
    broker_id: int, broker_epoch: int, changes: list[IsrChange]
) -> pb.AlterPartitionRequest:
    """One request for `changes`, grouped by topic id in first-appearance order."""
    by_topic: dict[UUID, list[pb.AlterPartitionPartition]] = {}
    for change in changes:
        by_topic.setdefault(change.topic_id, []).append(
            pb.AlterPartitionPartition(
                partition_index=change.partition,
                leader_epoch=change.leader_epoch,
                new_isr=[
                    pb.IsrMember(broker_id=member, broker_epoch=epoch)
                    for member, epoch in zip(change.new_isr, change.broker_epochs, strict=True)
                ],
                leader_recovery_state=change.leader_recovery_state,
                partition_epoch=change.partition_epoch,
            )
        )
    return pb.AlterPartitionRequest(
        broker_id=broker_id,
        broker_epoch=broker_epoch,
        topics=[
            pb.AlterPartitionTopic(topic_id=topic_id.bytes, partitions=partitions)
            for topic_id, partitions in by_topic.items()
        ],
    )


class AlterPartitionSender:
    def __init__(
        self,
        replica_manager: IsrChangeSource,
        broker_id: int,
        broker_epoch: Callable[[], int | None],
        controller_addresses: Mapping[int, str],
        controller_hint: Callable[[], int | None] = lambda: None,
        *,
        tasks: Spawner,
        request_timeout_ms: int = REQUEST_TIMEOUT_MS_DEFAULT,
        retry_backoff_ms: int = RETRY_BACKOFF_MS_DEFAULT,
        retry_backoff_max_ms: int = RETRY_BACKOFF_MAX_MS_DEFAULT,
        controller_links: PeerLinksFactory = PeerChannels,
    ) -> None:
        """`controller_links`: makes the links to the controllers (`peer_channels`)."""
        self._spawner = tasks  # its background tasks' owner (node_tasks)
        if not controller_addresses:
            raise ValueError("AlterPartitionSender needs at least one controller address")
        self._rm = replica_manager
        self.broker_id = broker_id
        self._broker_epoch = broker_epoch
        # controller.quorum.voters order
        self._active = ActiveController(list(controller_addresses), controller_hint)
        self._request_timeout_ms = request_timeout_ms
        self._retry_backoff_ms = retry_backoff_ms
        self._retry_backoff_max_ms = retry_backoff_max_ms
        self._unsent: dict[PartitionKey, IsrChange] = {}
        self._controllers: PeerLinks[Any] = controller_links(
            controller_addresses,
            controller_pb2_grpc.ControllerStub,
            CHANNEL_OPTIONS,
        )
        self._task: asyncio.Task[None] | None = None
        self.requests_sent = 0  # for tests and metrics

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = self._spawner.spawn(self._run(), name="the AlterPartition sender")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._controllers.close()

    @property
    def unsent(self) -> list[IsrChange]:
        return list(self._unsent.values())

    # --- the loop ----------------------------------------------------------------------------

    async def _run(self) -> None:
        failures = 0  # request-level failures in a row
        redirects = 0  # NOT_CONTROLLER answers in a row
        while True:
            # `isr_wakeup`, set only when IsrChanges become pending; the fetchers clear their
            # own event, so they cannot swallow this wake.
            self._rm.isr_wakeup.clear()
            for change in self._rm.pending_isr_changes():
                self._unsent[_key(change)] = change
            broker_epoch = self._broker_epoch()
            if not self._unsent or broker_epoch is None or broker_epoch < 0:
                await wait_for_wakeup(self._rm.isr_wakeup, IDLE_POLL_MS)
                continue
            # At most ALTER_PARTITION_BATCH_MAX partitions a request: the controller applies a
            # request in one write on its event loop, and 3,300 ISR changes at once (a broker
            # back from a restart) held that loop for seconds.
            batches: list[dict[PartitionKey, IsrChange]] = []
            while self._unsent and len(batches) < ALTER_PARTITION_IN_FLIGHT_MAX:
                batch = dict(itertools.islice(self._unsent.items(), ALTER_PARTITION_BATCH_MAX))
                for key in batch:
                    del self._unsent[key]
                batches.append(batch)
            controller_id = self._active.target()
            outcomes = await self._send_all(controller_id, broker_epoch, batches)
            # Answered partitions are done; the rest go back unless a newer change came.
            for batch, outcome in zip(batches, outcomes, strict=True):
                for key, change in batch.items():
                    if key not in outcome.answered:
                        self._unsent.setdefault(key, change)
            outcome = _Outcome(
                redirect=any(o.redirect for o in outcomes), failed=any(o.failed for o in outcomes)
            )
            if outcome.redirect:
                redirects += 1
                if redirects <= len(self._active):
                    continue  # straight to the controller the answer named
            else:
                redirects = 0
            if outcome.failed:
                failures += 1
                delay_ms = min(
                    self._retry_backoff_max_ms, self._retry_backoff_ms * 2 ** min(failures - 1, 10)
                )
                await asyncio.sleep(delay_ms / 1000)
            else:
                failures = 0

    async def _send_all(
        self, controller_id: int, broker_epoch: int, batches: list[dict[PartitionKey, IsrChange]]
    ) -> list[_Outcome]:
        """Send the batches together and apply each answer as it comes, in this one task, so
        that the loop gets a turn after every `RESULTS_PER_TURN` answers applied: two requests
        each applying their own answers, each yielding after its own hundred, applied two
        hundred in one turn."""
        async with asyncio.TaskGroup() as requests:
            calls = [
                requests.create_task(self._send(controller_id, broker_epoch, batch))
                for batch in batches
            ]
            applied = 0
            for finished in asyncio.as_completed(calls):
                batch, outcome, response = await finished
                if response is not None:
                    applied = await self._apply(batch, response, outcome.answered, applied)
        return [call.result()[1] for call in calls]

    async def _send(
        self, controller_id: int, broker_epoch: int, batch: dict[PartitionKey, IsrChange]
    ) -> tuple[dict[PartitionKey, IsrChange], _Outcome, pb.AlterPartitionResponse | None]:
        """One request: its outcome, and the answer to apply (None when it failed whole)."""
        request = alter_partition_request(self.broker_id, broker_epoch, list(batch.values()))
        self.requests_sent += 1
        stub = self._controllers.stub(controller_id)
        assert stub is not None, f"controller {controller_id} has no address"
        try:
            response: pb.AlterPartitionResponse = await stub.AlterPartition(
                request, timeout=self._request_timeout_ms / 1000
            )
        except grpc.aio.AioRpcError as exc:
            log.info(
                "broker %d: AlterPartition to controller %d failed: %s",
                self.broker_id,
                controller_id,
                exc.code().name,
            )
            if exc.code() == grpc.StatusCode.UNAVAILABLE:
                self._controllers.reconnect(controller_id)
            self._active.move_on_from(controller_id)
            return batch, _Outcome(failed=True), None
        if response.HasField("error") and response.error.code != 0:
            error = error_for_code(response.error.code, response.error.message)
            named = response.controller_id if response.controller_id >= 0 else None
            if isinstance(error, NotControllerError):
                self._active.move_on_from(controller_id, named)
                return batch, _Outcome(redirect=True, failed=True), None
            log.warning(
                "broker %d: AlterPartition refused by controller %d: %s; retrying",
                self.broker_id,
                controller_id,
                error,
            )
            return batch, _Outcome(failed=True), None
        return batch, _Outcome(), response

    async def _apply(
        self,
        batch: dict[PartitionKey, IsrChange],
        response: pb.AlterPartitionResponse,
        answered: set[PartitionKey],
        applied: int,
    ) -> int:
        """Hand each per-partition answer to the replica manager, adding its partition to
        `answered`; `applied` answers went before this one's in the round. Returns the count."""
        for topic in response.topics:
            if len(topic.topic_id) != 16:
                continue
            topic_id = UUID(bytes=topic.topic_id)
            for result in topic.partitions:
                key = (topic_id, result.partition_index)
                change = batch.get(key)
                if change is None or key in answered:
                    log.warning(
                        "broker %d: AlterPartition answered %s-%d, which it did not ask about",
                        self.broker_id,
                        topic_id,
                        result.partition_index,
                    )
                    continue
                answered.add(key)
                applied += 1
                if applied % RESULTS_PER_TURN == 0:
                    # Each answer is checked against the partition's state when it is applied
                    # (`on_isr_change_result`), so others may run between two of them.
                    await yield_turn()
                partition_error: KafkaError | None = None
                if result.HasField("error") and result.error.code != 0:
                    partition_error = error_for_code(result.error.code, result.error.message)
                self._rm.on_isr_change_result(
                    change,
                    partition_error,
                    tuple(result.isr),
                    result.leader_epoch,
                    result.partition_epoch,
                )
        return applied


class _Outcome:
    __slots__ = ("answered", "failed", "redirect")

    def __init__(
        self,
        *,
        answered: set[PartitionKey] | None = None,
        failed: bool = False,
        redirect: bool = False,
    ) -> None:
        self.answered = answered or set()
        self.failed = failed
        self.redirect = redirect
