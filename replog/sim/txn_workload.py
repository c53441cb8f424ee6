"""`TxnWorkload`: the transactional clients of one simulation run: transactional producers
speaking Kafka's requests to the brokers' Kafka listener handlers (`KafkaApis.handle`) through
the simulated network, and read_committed consumers (`workload`'s consumers with
`TxnChecker` views).

Rules:
- Each of `TRANSACTIONAL_IDS` has a run of producer instances, from the transactional
  topic's creation on (so that `__transaction_state`, which the first FindCoordinator
  creates, gets a replica on every node). An instance finds its
  coordinator (FindCoordinator), initialises (InitProducerId), and runs transactions over
  every partition of the transactional topic: one or two batches each, acks=all, retried
  with the same sequence at the leader a broker's image names; EndTxn commits or aborts as
  drawn (`COMMIT_RATE`). Each id draws its transaction version once: 1 (AddPartitionsToTxn
  v3 before its produces, Produce v11, which the leader verifies with the coordinator, EndTxn
  v4) or 2 (Produce v12, which the leader adds, EndTxn v5, which bumps the epoch and answers
  it).
- As Kafka's producer: a retriable error (a lost call, NOT_COORDINATOR, a load in progress,
  CONCURRENT_TRANSACTIONS, a leader moved) asks again, finding the coordinator or leader
  again; an abortable one (a refused sequence, INVALID_TXN_STATE, TRANSACTION_ABORTABLE)
  aborts the transaction and bumps the epoch (InitProducerId with the producer id and epoch,
  KIP-360); a fencing one (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH) ends the instance once a
  newer one has initialised (a fenced zombie), and otherwise (its transaction timed out at
  the coordinator) initialises it again.
- Every `NEW_INSTANCE_EVERY_S` a new instance of each id starts; the old one is not told and
  keeps sending (a zombie) until its coordinator or a leader fences it. The moment the new
  one's InitProducerId is answered is its predecessors' fencing time (`TxnChecker`).
- Every transaction and its batches are noted in the `TxnChecker` as they are sent, its
  EndTxn when first sent and when answered; the producers stop at `stop_producing`, leaving
  an open transaction to its timeout, as a closed producer does.
- Once the faults stop, a producer starting up (`find_coordinator_after_faults`) asks a
  running broker for a transaction coordinator until every running broker's image has
  `__transaction_state`: a broker creates it only when asked (Kafka's automatic creation),
  and the faults may have kept every earlier request from reaching a serving broker or its
  creation from reaching the controller, so the end checks could not expect it otherwise.
- Every random choice comes from the workload's own `random.Random`.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import random
from typing import Any

from replog.coordinator.transaction_log_replay import partition_for_transactional_id
from replog.errors import (
    CoordinatorNotAvailableError,
    DuplicateSequenceNumberError,
    InvalidProducerEpochError,
    KafkaError,
    NotCoordinatorError,
    ProducerFencedError,
    error_for_code,
)
from replog.kafka.connection import KafkaRequest
from replog.kafka.messages.add_partitions_to_txn_request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
)
from replog.kafka.messages.end_txn_request import EndTxnRequest
from replog.kafka.messages.find_coordinator_request import FindCoordinatorRequest
from replog.kafka.messages.init_producer_id_request import InitProducerIdRequest
from replog.kafka.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from replog.kafka.messages.request_header import RequestHeader
from replog.kafka.protocol.codec import Message
from replog.record.builder import BatchBuilder
from replog.server.broker.broker_runtime import BrokerRuntime
from replog.sim.data_invariants import TopicSpec
from replog.sim.sim_tasks import SimTasks
from replog.sim.txn_invariants import Txn, TxnChecker
from replog.sim.workload import DataWorkload
from replog.topic_names import TRANSACTION_STATE_TOPIC

__all__ = ["TRANSACTIONAL_IDS", "TxnWorkload"]

TRANSACTIONAL_IDS = ("txn-a", "txn-b")
LISTENER = "PLAINTEXT"
TXN_TIMEOUT_MS = 3000
PRODUCE_TIMEOUT_MS = 1500
TXN_EVERY_S = (0.1, 0.5)
NEW_INSTANCE_EVERY_S = (1.0, 4.0)
COMMIT_RATE = 0.7
RETRY_BACKOFF_S = 0.1
FIND_COORDINATOR, INIT_PRODUCER_ID, ADD_PARTITIONS, END_TXN, PRODUCE = 10, 22, 24, 26, 0
FENCING = (ProducerFencedError.code, InvalidProducerEpochError.code)
MOVED = (NotCoordinatorError.code, CoordinatorNotAvailableError.code)


class _Fenced(Exception):
    """The instance was fenced (module Rules): it ends or initialises again."""


class _Abortable(Exception):
    """The transaction must abort, the epoch bumped after (module Rules)."""


class _Stopped(Exception):
    """The producers stop (`stop_producing`)."""


class TxnWorkload:
    """The transactional producers of one run (module docstring); the consumers are
    `DataWorkload`'s, with `TxnChecker` views."""

    def __init__(
        self, data: DataWorkload, checker: TxnChecker, spec: TopicSpec, rng: random.Random
    ) -> None:
        self.data = data
        self.checker = checker
        self.spec = spec
        self.rng = rng
        self.tasks = SimTasks()
        self.newest: dict[str, _Instance] = {}  # the instance started last, for each id
        self.fresh: dict[str, asyncio.Lock] = {}

    def start(self) -> None:
        """The producers and the read_committed consumers start (they wait for the topic)."""
        spec = self.spec
        for partition in range(spec.partitions):
            self.data.start_consumer(spec.name, partition, self.checker.view(spec.name, partition))
        for transactional_id in TRANSACTIONAL_IDS:
            version = self.rng.choice((1, 2))
            self.tasks.spawn(
                self._instances(transactional_id, version), name=f"producers of {transactional_id}"
            )

    def stop(self) -> None:
        self.tasks.cancel_all()

    def find_coordinator_after_faults(self) -> None:
        """Module Rules; the lookups are counted in the checker's report."""
        self.tasks.spawn(self._until_state_topic(), name="a producer starting after the faults")

    async def _until_state_topic(self) -> None:
        cluster = self.data.cluster
        find = FindCoordinatorRequest(key_type=1, coordinator_keys=[TRANSACTIONAL_IDS[0]])
        while True:
            brokers = [n for n in cluster.up_nodes() if n.broker is not None]
            if brokers and all(
                TRANSACTION_STATE_TOPIC in n.broker.image.topics.by_name
                for n in brokers
                if n.broker is not None
            ):
                return
            if brokers:
                self.checker.counts["coordinator lookups after the faults"] += 1
                with contextlib.suppress(Exception):  # a lost call or a refusal: ask again
                    await self.kafka(self.rng.choice(brokers).node_id, FIND_COORDINATOR, 4, find)
            await asyncio.sleep(RETRY_BACKOFF_S)

    async def _instances(self, transactional_id: str, version: int) -> None:
        """A new instance every `NEW_INSTANCE_EVERY_S`, each once its predecessor initialised;
        the id's fresh initialisations one at a time (`fresh`), so that the newest instance's
        is the last the coordinator commits."""
        fresh = self.fresh[transactional_id] = asyncio.Lock()
        # The first FindCoordinator creates `__transaction_state` with as many replicas as
        # brokers are registered then: after the topic's creation, every one is.
        while self.spec.name not in self.data.created:
            await asyncio.sleep(RETRY_BACKOFF_S)
        number = 0
        while self.data.producing:
            async with fresh:
                instance = self.newest[transactional_id] = _Instance(
                    self, transactional_id, number, version
                )
                self.tasks.spawn(instance.run(), name=instance.name)
                await instance.initialised.wait()
            if instance.epoch >= 0:
                self.checker.fenced(transactional_id, number)
            number += 1
            await asyncio.sleep(self.rng.uniform(*NEW_INSTANCE_EVERY_S))

    async def kafka(self, node_id: int, key: int, version: int, body: Message) -> Any:
        """`body` as Kafka API `key` at `version`, handled by node `node_id`'s Kafka listener."""

        async def handle(broker: BrokerRuntime) -> Any:
            header = RequestHeader(
                request_api_key=key, request_api_version=version, correlation_id=1
            )
            answer = broker.kafka_apis.handle(KafkaRequest(0, header, body, 0), LISTENER)
            return await answer if inspect.isawaitable(answer) else answer

        return await self.data.call(node_id, handle)


class _Instance:
    """One producer instance of a transactional id (module Rules)."""

    def __init__(
        self, workload: TxnWorkload, transactional_id: str, number: int, version: int
    ) -> None:
        self.workload = workload
        self.transactional_id = transactional_id
        self.number = number
        self.version = version
        self.name = f"{transactional_id} instance {number}"
        self.coordinator: int | None = None
        self.producer_id = -1
        self.epoch = -1
        self.sequences: dict[int, int] = {}
        self.transactions = 0
        self.initialised = asyncio.Event()  # its first InitProducerId answered, or it stopped

    async def run(self) -> None:
        workload = self.workload
        rng = workload.rng
        try:
            try:
                await self._init(None)
            finally:
                self.initialised.set()
            while True:
                await asyncio.sleep(rng.uniform(*TXN_EVERY_S))
                self._check_producing()
                try:
                    try:
                        await self._transaction()
                    except _Abortable:
                        await self._init((self.producer_id, self.epoch))
                except _Fenced:
                    async with workload.fresh[self.transactional_id]:
                        if not self.newest:
                            raise
                        await self._init(None)  # its transaction timed out: initialise again
        except _Stopped:
            return
        except _Fenced:
            workload.checker.counts["zombies fenced"] += 1

    @property
    def newest(self) -> bool:
        return self.workload.newest.get(self.transactional_id) is self

    def _check_producing(self) -> None:
        if not self.workload.data.producing:
            raise _Stopped

    # --- the coordinator ----------------------------------------------------------------------

    async def _at_coordinator(self, key: int, version: int, body: Message) -> Any:
        """`body`'s answer from the coordinator, found again while it is unknown; None after a
        lost call or a coordinator error (the caller asks again)."""
        workload = self.workload
        if self.coordinator is None:
            up = [n.node_id for n in workload.data.cluster.up_nodes()]
            if not up:
                return None
            find = FindCoordinatorRequest(key_type=1, coordinator_keys=[self.transactional_id])
            try:
                found = await workload.kafka(workload.rng.choice(up), FIND_COORDINATOR, 4, find)
            except Exception:  # a lost call: ask again
                return None
            (coordinator,) = found.coordinators
            if coordinator.error_code:
                return None
            self.coordinator = coordinator.node_id
        try:
            return await workload.kafka(self.coordinator, key, version, body)
        except Exception:  # a lost call or a refused request: find the coordinator again
            self.coordinator = None
            return None

    def _coordinator_error(self, code: int) -> KafkaError | None:
        """The error of a coordinator's answer (`_Fenced` raised for a fencing one); one that
        says it is not the coordinator (any more) forgets it."""
        if code == 0:
            return None
        error = error_for_code(code, self.name)
        if code in FENCING:
            raise _Fenced(error)
        if code in MOVED:
            self.coordinator = None
        return error

    async def _init(self, expected: tuple[int, int] | None) -> None:
        """InitProducerId until answered (KIP-360's bump when `expected` names the producer)."""
        while True:
            self._check_producing()
            body = InitProducerIdRequest(
                transactional_id=self.transactional_id,
                transaction_timeout_ms=TXN_TIMEOUT_MS,
                producer_id=-1 if expected is None else expected[0],
                producer_epoch=-1 if expected is None else expected[1],
            )
            answer = await self._at_coordinator(INIT_PRODUCER_ID, 4, body)
            if answer is not None:
                error = self._coordinator_error(answer.error_code)
                if error is None:
                    self.producer_id, self.epoch = answer.producer_id, answer.producer_epoch
                    self.sequences = {}
                    return
            await asyncio.sleep(RETRY_BACKOFF_S)

    # --- one transaction ----------------------------------------------------------------------

    async def _transaction(self) -> None:
        workload = self.workload
        rng = workload.rng
        spec = workload.spec
        txn = workload.checker.begin(self.transactional_id, self.number, self.transactions)
        self.transactions += 1
        partitions = list(range(spec.partitions))
        if self.version == 1:
            await self._add_partitions(partitions)
        for partition in partitions:
            for _ in range(rng.randint(1, 2)):
                await self._produce(txn, partition, rng.randint(1, 3))
        await self._end(txn, rng.random() < COMMIT_RATE)

    async def _add_partitions(self, partitions: list[int]) -> None:
        body = AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=self.transactional_id,
            v3_and_below_producer_id=self.producer_id,
            v3_and_below_producer_epoch=self.epoch,
            v3_and_below_topics=[
                AddPartitionsToTxnTopic(name=self.workload.spec.name, partitions=partitions)
            ],
        )
        while True:
            self._check_producing()
            answer = await self._at_coordinator(ADD_PARTITIONS, 3, body)
            if answer is not None:
                codes = {
                    p.partition_error_code
                    for t in answer.results_by_topic_v3_and_below
                    for p in t.results_by_partition
                }
                errors = [self._coordinator_error(code) for code in sorted(codes)]
                refused = [e for e in errors if e is not None and not e.retriable]
                if refused:
                    raise _Abortable(refused[0])
                if not any(errors):
                    return
            await asyncio.sleep(RETRY_BACKOFF_S)

    async def _produce(self, txn: Txn, partition: int, count: int) -> None:
        """One batch of `count` records to `partition`, until acknowledged (module Rules)."""
        workload = self.workload
        topic = workload.spec.name
        sequence = self.sequences.get(partition, 0)
        builder = BatchBuilder(
            producer_id=self.producer_id,
            producer_epoch=self.epoch,
            base_sequence=sequence,
            is_transactional=True,
        )
        now = workload.data.cluster.client_wall_clock()
        for i in range(count):
            builder.append(now, None, f"{txn.name} {partition} {sequence + i}".encode())
        batch = builder.build()
        workload.checker.sent(txn, topic, partition, self.producer_id, self.epoch, sequence)
        request = ProduceRequest(
            transactional_id=self.transactional_id,
            acks=-1,
            timeout_ms=PRODUCE_TIMEOUT_MS,
            topic_data=[
                TopicProduceData(
                    name=topic,
                    partition_data=[PartitionProduceData(index=partition, records=batch)],
                )
            ],
        )
        version = 12 if self.version == 2 else 11
        while True:
            self._check_producing()
            found = workload.data.leader_of(topic, partition, workload.rng)
            if found is not None:
                try:
                    answer = await workload.kafka(found[0], PRODUCE, version, request)
                except Exception:  # a lost call or a refused request: find the leader again
                    answer = None
                if answer is not None:
                    (result,) = answer.responses[0].partition_responses
                    code = result.error_code
                    if code in (0, DuplicateSequenceNumberError.code):
                        self.sequences[partition] = sequence + count
                        workload.checker.acked(txn, topic, partition)
                        return
                    error = error_for_code(code, f"{self.name}: {topic}-{partition}")
                    if code in FENCING:
                        raise _Fenced(error)
                    if not error.retriable:
                        raise _Abortable(error)
            await asyncio.sleep(RETRY_BACKOFF_S)

    async def _end(self, txn: Txn, commit: bool) -> None:
        """EndTxn until answered; the coordinator's epoch then noted (`TxnChecker`)."""
        workload = self.workload
        workload.checker.ending(txn, commit)
        body = EndTxnRequest(
            transactional_id=self.transactional_id,
            producer_id=self.producer_id,
            producer_epoch=self.epoch,
            committed=commit,
        )
        version = 5 if self.version == 2 else 4
        while True:
            self._check_producing()
            answer = await self._at_coordinator(END_TXN, version, body)
            if answer is not None:
                error = self._coordinator_error(answer.error_code)
                if error is None:
                    workload.checker.ended(txn, self._coordinator_epoch())
                    if self.version == 2:
                        self.producer_id, self.epoch = answer.producer_id, answer.producer_epoch
                        self.sequences = {}
                    return
                if not error.retriable:
                    raise _Abortable(error)
            await asyncio.sleep(RETRY_BACKOFF_S)

    def _coordinator_epoch(self) -> int | None:
        """The leader epoch of the id's `__transaction_state` partition in the coordinator's
        image: the coordinator epoch its markers carry."""
        node = self.coordinator
        broker = None if node is None else self.workload.data.cluster.nodes[node].broker
        topic = None if broker is None else broker.image.topics.by_name.get(TRANSACTION_STATE_TOPIC)
        if topic is None:
            return None
        index = partition_for_transactional_id(self.transactional_id, len(topic.partitions))
        registration = topic.partitions.get(index)
        return None if registration is None else registration.leader_epoch
