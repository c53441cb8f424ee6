"""A transactional producer's calls to its coordinators: the shell of `TransactionManager`.

It sends what the manager says and reports each answer back; the manager decides. Every call
runs on the producer's event loop, within the deadline its caller gives (`max.block.ms` for
the producer's methods, as Kafka's).

Rules:
- The transaction coordinator is found with FindCoordinator key type 1 on any broker (the
  metadata's, else the bootstrap ones), a group's with key type 0, each kept until
  NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE (or a lost call) says to look it up again. A
  transport error (lost connection, no answer in time) is retried after `retry.backoff.ms`,
  doubling up to `retry.backoff.max.ms`, until the deadline, which then raises
  KafkaTimeoutError naming the call and the last cause.
- The transaction version is read from the ApiVersions answer of the coordinator's connection
  (`transaction.version` >= 2 among its finalized features) at init_transactions and again at
  each begin_transaction, never inside a transaction, as Kafka's producer reads it.
- AddPartitionsToTxn (version 1) runs whenever the manager has partitions to add (the sender
  starts it, `poll`); their batches wait until it succeeds. It never raises (it runs in the
  sender's task group): lost calls and timeouts are asked again, an error that ends the
  transaction fails the queued batches with it.
- Answers that end the transaction go to the manager (`fail`): an abortable one leaves only
  abort_transaction, a fatal one fails every queued batch and every later call.
- commit_transaction sends everything queued first (a flush) and raises the abortable error if
  a batch failed; abort_transaction fails the batches not yet sent with
  TransactionAbortedError, waits for those on the wire, then ends the transaction.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol, TypeVar

from replog.client.call_guard import guarded
from replog.client.cluster_metadata import ClusterMetadata
from replog.client.config import ProducerConfig
from replog.client.connections import Connections
from replog.client.records import ConsumerGroupMetadata
from replog.client.task_owner import TaskOwner
from replog.client.transaction_manager import Outcome, TransactionManager, TxnState, classify
from replog.common import OffsetAndMetadata, TopicPartition
from replog.errors import (
    KafkaError,
    KafkaTimeoutError,
    NetworkError,
    ReplogError,
    RequestTimedOutError,
    TransactionAbortedError,
)
from replog.wire.kafka_coordinator_client import COORDINATOR_LANE, GROUP_KEY_TYPE
from replog.wire.kafka_transaction_client import TRANSACTION_KEY_TYPE, KafkaTransactionClient

log = logging.getLogger("replog.client")
T = TypeVar("T")
TRANSACTION_VERSION_FEATURE = "transaction.version"


class Sender(Protocol):
    """What this shell needs of the producer's sender (`replog/client/sender.py`)."""

    @property
    def tasks(self) -> TaskOwner: ...

    def wakeup(self) -> None: ...

    def start_over(self, producer_id: int, epoch: int) -> None: ...

    def abort_queued(self, error: BaseException | None) -> None: ...

    def transaction_failed(self, error: ReplogError | None) -> None: ...

    async def flush(self, timeout_ms: int | None, *, what: str = "flush") -> None: ...


class Transactions:
    """One transactional producer's coordinator calls (module docstring)."""

    def __init__(
        self,
        config: ProducerConfig,
        metadata: ClusterMetadata,
        connections: Connections,
        sender: Sender,
        clock: Callable[[], int],
    ) -> None:
        assert config.transactional_id is not None
        self.manager = TransactionManager(config.transactional_id, config.transaction_timeout_ms)
        self._config = config
        self._metadata = metadata
        self._connections = connections
        self._sender = sender
        self._clock = clock
        self._clients: dict[str, KafkaTransactionClient] = {}
        self._coordinator: str | None = None  # the transaction coordinator's address
        self._group_coordinators: dict[str, str] = {}  # group id -> its coordinator's address
        self._adding: asyncio.Task[None] | None = None

    # --- coordinators -----------------------------------------------------------------------

    def _client(self, address: str) -> KafkaTransactionClient:
        client = self._clients.get(address)
        if client is None:
            client = self._clients[address] = KafkaTransactionClient(
                address,
                request_timeout_ms=self._config.request_timeout_ms,
                connections=self._connections.kafka,
            )
        return client

    async def _find(self, key: str, key_type: int, deadline_ms: int) -> str:
        """The address of the coordinator of `key` (FindCoordinator on any broker)."""
        last: ReplogError | None = None
        attempts = 0
        while True:
            addresses = list(self._metadata.brokers().values()) or list(
                self._config.bootstrap_servers
            )
            for address in addresses:
                try:
                    _, found = await self._guarded(
                        address,
                        "FindCoordinator",
                        deadline_ms,
                        lambda c, t: c.find_coordinator(key, timeout_ms=t, key_type=key_type),
                    )
                    return found
                except KafkaError as exc:
                    if not exc.retriable:
                        raise
                    last = exc
            attempts += 1
            await self._backoff(attempts, deadline_ms, f"FindCoordinator of {key!r}", last)

    async def _transaction_coordinator(self, deadline_ms: int) -> str:
        if self._coordinator is None:
            self._coordinator = await self._find(
                self.manager.transactional_id, TRANSACTION_KEY_TYPE, deadline_ms
            )
        return self._coordinator

    async def _guarded(
        self,
        address: str,
        what: str,
        deadline_ms: int,
        call: Callable[[KafkaTransactionClient, int], Awaitable[T]],
    ) -> T:
        timeout_ms = max(1, min(self._config.request_timeout_ms, deadline_ms - self._clock()))
        return await guarded(call(self._client(address), timeout_ms), address=address, what=what)

    async def _backoff(
        self, attempts: int, deadline_ms: int, what: str, last: BaseException | None
    ) -> None:
        now = self._clock()
        if now >= deadline_ms:
            cause = f"; last error: {last}" if last is not None else ""
            raise KafkaTimeoutError(
                f"transactional producer {self.manager.transactional_id!r}: {what} did not "
                f"succeed within max.block.ms={self._config.max_block_ms}{cause}"
            )
        backoff = min(
            self._config.retry_backoff_ms * 2 ** min(attempts - 1, 20),
            max(self._config.retry_backoff_max_ms, self._config.retry_backoff_ms),
        )
        await asyncio.sleep(min(backoff, deadline_ms - now) / 1000)

    async def _coordinator_call(
        self,
        api: str,
        deadline_ms: int,
        call: Callable[[KafkaTransactionClient, int], Awaitable[T]],
        error_of: Callable[[T], KafkaError | None],
        *,
        group: str | None = None,
    ) -> T:
        """`call` to the transaction coordinator (or, with `group`, that group's) until its
        answer is not to be retried (module docstring); an abortable or fatal answer goes to
        the manager and is raised."""
        attempts = 0
        last: ReplogError | None = None
        while True:
            attempts += 1
            try:
                if group is None:
                    address = await self._lookup(api, deadline_ms)
                else:
                    known = self._group_coordinators.get(group)
                    address = known or await self._lookup(api, deadline_ms, group)
                    self._group_coordinators[group] = address
                answer = await self._guarded(address, api, deadline_ms, call)
            except (NetworkError, RequestTimedOutError) as exc:
                last, outcome = exc, Outcome.FIND_COORDINATOR
            else:
                error = error_of(answer)
                outcome = classify(api, error)
                if outcome is Outcome.DONE:
                    return answer
                assert error is not None
                last = error
                if outcome in (Outcome.ABORTABLE, Outcome.FATAL):
                    self._failed(error, api)
                    raise error
            if outcome is Outcome.FIND_COORDINATOR:
                if group is None:
                    self._coordinator = None
                else:
                    self._group_coordinators.pop(group, None)
            await self._backoff(attempts, deadline_ms, api, last)

    async def _lookup(self, api: str, deadline_ms: int, group: str | None = None) -> str:
        """The coordinator `api` goes to (the transaction's, or `group`'s); a lookup refused
        for good ends the transaction as `api`'s answer would (an unauthorized transactional
        id is fatal, an unauthorized group abortable), as Kafka's FindCoordinator handler."""
        try:
            if group is None:
                return await self._transaction_coordinator(deadline_ms)
            return await self._find(group, GROUP_KEY_TYPE, deadline_ms)
        except KafkaError as exc:
            if not exc.retriable:
                self._failed(exc, api)
            raise

    def _failed(self, error: ReplogError, api: str) -> None:
        """The manager learns of `error`; a fatal one stops the sender's queued batches."""
        if self.manager.fail(error, api) is Outcome.FATAL:
            self._sender.transaction_failed(self.manager.last_error)

    # --- the producer's calls ---------------------------------------------------------------

    async def init_transactions(self, deadline_ms: int) -> None:
        manager = self.manager
        manager.begin_init()
        address = await self._lookup("InitProducerId", deadline_ms)
        connection = await self._connections.kafka.get(address, COORDINATOR_LANE)
        manager.version2 = _version2(connection.finalized_features)
        await self._init_producer_id(deadline_ms)

    async def _init_producer_id(self, deadline_ms: int) -> None:
        """InitProducerId for the transactional id (with the current id and epoch after an
        abort that must bump it)."""
        manager = self.manager
        _, producer_id, epoch = await self._coordinator_call(
            "InitProducerId",
            deadline_ms,
            lambda c, t: c.init_producer_id(
                manager.transactional_id,
                manager.transaction_timeout_ms,
                manager.producer_id,
                manager.epoch,
                timeout_ms=t,
            ),
            lambda answer: answer[0],
        )
        manager.on_producer_id(producer_id, epoch)
        self._sender.start_over(producer_id, epoch)
        log.debug(
            "transactional id %r: producer id %d epoch %d (transaction version %d)",
            manager.transactional_id,
            producer_id,
            epoch,
            2 if manager.version2 else 1,
        )

    def poll(self) -> None:
        """The sender's pass: start AddPartitionsToTxn if partitions wait to be added."""
        if self.manager.partitions_to_add() and (self._adding is None or self._adding.done()):
            self._adding = self._sender.tasks.spawn(
                self._add_partitions(), name="AddPartitionsToTxn"
            )

    async def _add_partitions(self) -> None:
        manager = self.manager
        attempts = 0
        while partitions := manager.partitions_to_add():
            attempts += 1
            deadline_ms = self._clock() + self._config.max_block_ms
            try:
                address = await self._transaction_coordinator(deadline_ms)
                results = await self._guarded(
                    address,
                    "AddPartitionsToTxn",
                    deadline_ms,
                    lambda c, t: c.add_partitions_to_txn(
                        manager.transactional_id,
                        manager.producer_id,
                        manager.epoch,
                        partitions,
                        timeout_ms=t,
                    ),
                )
            except (NetworkError, RequestTimedOutError, KafkaTimeoutError) as exc:
                # Asked again: the batches wait, delivery.timeout.ms bounds them.
                self._coordinator = None
                log.debug("AddPartitionsToTxn: %s", exc)
            except ReplogError as exc:
                if not exc.retriable:  # refused for good, or an answer that is none
                    self._failed(exc, "AddPartitionsToTxn")
                    self._sender.abort_queued(manager.last_error)
                    return
                self._coordinator = None
            else:
                outcome = manager.on_partitions_added(results)
                if outcome is Outcome.FATAL:
                    self._sender.transaction_failed(manager.last_error)
                if outcome in (Outcome.ABORTABLE, Outcome.FATAL):
                    self._sender.abort_queued(manager.last_error)
                    return
                if outcome is Outcome.FIND_COORDINATOR:
                    self._coordinator = None
                self._sender.wakeup()
                if outcome is Outcome.DONE:
                    continue
            await asyncio.sleep(
                min(self._config.retry_backoff_ms * 2 ** min(attempts - 1, 10), 1000) / 1000
            )

    def begin_transaction(self) -> None:
        """A transaction starts under the version the coordinator's connection finalized
        last (Kafka reads it again at each begin, never inside a transaction)."""
        manager = self.manager
        address = self._coordinator
        connection = (
            None if address is None else self._connections.kafka.cached(address, COORDINATOR_LANE)
        )
        if connection is not None and manager.state is TxnState.READY:
            manager.version2 = _version2(connection.finalized_features)
        manager.begin_transaction()

    async def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        group: ConsumerGroupMetadata,
        deadline_ms: int,
    ) -> None:
        manager = self.manager
        manager.check_send_offsets()
        if manager.needs_add_offsets():
            await self._coordinator_call(
                "AddOffsetsToTxn",
                deadline_ms,
                lambda c, t: c.add_offsets_to_txn(
                    manager.transactional_id,
                    manager.producer_id,
                    manager.epoch,
                    group.group_id,
                    timeout_ms=t,
                ),
                lambda error: error,
            )
            manager.on_offsets_added()
        else:
            manager.group_added = True  # version 2: the TxnOffsetCommit adds the group
        await self._coordinator_call(
            "TxnOffsetCommit",
            deadline_ms,
            lambda c, t: c.txn_offset_commit(
                manager.transactional_id,
                manager.producer_id,
                manager.epoch,
                offsets,
                (group.group_id, group.generation_id, group.member_id, group.group_instance_id),
                version2=manager.version2,
                timeout_ms=t,
            ),
            _worst,
            group=group.group_id,
        )

    async def commit_transaction(
        self, deadline_ms: int, flush: Callable[[int], Awaitable[None]]
    ) -> None:
        """Commit: `flush` (the producer's, given the time left) sends everything first."""
        manager = self.manager
        manager.begin_commit()
        await flush(max(0, deadline_ms - self._clock()))
        if manager.state is TxnState.ABORTABLE_ERROR and manager.last_error is not None:
            raise manager.last_error
        await self._end(True, deadline_ms)

    async def abort_transaction(self, deadline_ms: int) -> None:
        manager = self.manager
        manager.begin_abort()
        self._sender.abort_queued(
            TransactionAbortedError(
                f"transactional producer {manager.transactional_id!r}: the record was not "
                "sent, its transaction was aborted"
            )
        )
        await self._sender.flush(
            max(0, deadline_ms - self._clock()), what="abort_transaction's wait for requests"
        )
        await self._end(False, deadline_ms)

    async def _end(self, committed: bool, deadline_ms: int) -> None:
        manager = self.manager
        producer_id = epoch = -1
        if manager.needs_end_txn():
            _, producer_id, epoch = await self._coordinator_call(
                "EndTxn",
                deadline_ms,
                lambda c, t: c.end_txn(
                    manager.transactional_id,
                    manager.producer_id,
                    manager.epoch,
                    committed,
                    version2=manager.version2,
                    timeout_ms=t,
                ),
                lambda answer: answer[0],
            )
        if manager.on_end_txn(producer_id, epoch):
            if manager.version2 and epoch >= 0:
                self._sender.start_over(manager.producer_id, manager.epoch)
            return
        await self._init_producer_id(deadline_ms)  # version 1: the epoch bump after an abort


def _version2(features: Mapping[str, int]) -> bool:
    return features.get(TRANSACTION_VERSION_FEATURE, 0) >= 2


def _worst(results: Mapping[TopicPartition, KafkaError | None]) -> KafkaError | None:
    """The error of a per-partition answer that decides it: the first one there is."""
    return next((error for error in results.values() if error is not None), None)
