"""`DataWorkload`: the data-plane clients of one simulation run: idempotent producers with acks
0, 1 and all, and consumers, calling the brokers' request cores (`BrokerCores`) through the
simulated network, as the Kafka listener's handlers do.

Rules:
- The topics (`topic_specs`) have replication factor 3 and min.insync.replicas 2; one has
  `flush.messages=1`, one is the transactional clients' (`txn_workload`), and the brokers'
  `__transaction_state` is checked with them. They are created through the controllers
  (`create_topics`, retried until acknowledged, at the controller the last answer named),
  but for the internal one, which a broker creates on the first FindCoordinator.
- A producer behaves as an idempotent client with one request in flight: its producer id
  comes from a broker (InitProducerId's `generate_producer_id`), each batch carries its epoch
  and base sequence, and a batch is retried with the same sequence after a lost call, a
  timeout or a retriable error, at the leader a broker's image names. A sequence or producer
  id the leader refuses (the records before it lost) bumps the epoch, sequences restarting at
  0, as Kafka's producer does. acks=0 sends once and hears nothing.
- Every acknowledged acks=all batch is kept (`acked`) with its offset, its bytes as sent and
  when it was acknowledged, for the end check that it is readable.
- A consumer per partition fetches from the leader from offset 0 with the leader epoch of the
  image that named the leader (KIP-320), both kept until an error or a lost call; it hands
  every answer to the checker (`DataChecker.check_fenced` at the broker, `check_consumed` at
  the consumer) and moves on; an offset out of range restarts it at 0. A consumer of the
  transactional topic reads read_committed and hands each answer to its
  `ReadCommittedView` too (`start_consumer`).
- A call that reaches a node finds whichever broker runs there on arrival; an answer from a
  broker that stopped meanwhile never leaves it (the node died with it).
- Every random choice comes from the workload's own `random.Random`.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from replog.errors import (
    InvalidProducerEpochError,
    KafkaError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceNumberError,
    UnknownProducerIdError,
)
from replog.pb import controller_pb2 as pb
from replog.record import build_batch
from replog.record.header import read_header
from replog.replication import messages as m
from replog.server.broker.broker_runtime import BrokerRuntime
from replog.sim.cluster import SimCluster
from replog.sim.data_invariants import PAYLOAD_START, DataChecker, TopicSpec
from replog.sim.network import CallLost
from replog.sim.sim_tasks import SimTasks
from replog.sim.txn_invariants import ReadCommittedView
from replog.topic_names import TRANSACTION_STATE_TOPIC

__all__ = ["AckedBatch", "DataWorkload", "topic_specs"]

R = TypeVar("R")

CLIENT_ID = 998
CALL_TIMEOUT_S = 2.0
PRODUCE_TIMEOUT_MS = 1500
PRODUCE_EVERY_S = (0.02, 0.15)
RETRY_BACKOFF_S = 0.1
FETCH_WAIT_MS = 100
# A consumer sometimes stops fetching for a while (its application is busy), keeping the
# leader and epoch it knew: leaderships may move away and back meanwhile.
CONSUMER_PAUSE_RATE = 0.1
CONSUMER_PAUSE_S = (0.5, 3.0)
FETCH_BYTES = 64 * 1024
REFUSED_SEQUENCE = (
    OutOfOrderSequenceNumberError,
    UnknownProducerIdError,
    InvalidProducerEpochError,
)


def topic_specs(nodes: int, state_partitions: int) -> tuple[TopicSpec, ...]:
    """The run's topics (module Rules); `state_partitions`: `__transaction_state`'s."""
    rf = min(3, nodes)
    return (
        TopicSpec("data", 2, rf, 2, flushed=False),
        TopicSpec("data-flushed", 1, rf, 2, flushed=True),
        TopicSpec("txn", 2, rf, 2, flushed=False, kind="transactional"),
        TopicSpec(TRANSACTION_STATE_TOPIC, state_partitions, rf, 2, flushed=False, kind="internal"),
    )


@dataclass(frozen=True)
class AckedBatch:
    """An acknowledged acks=all batch."""

    topic: str
    partition: int
    base_offset: int
    payload: bytes  # the batch from its attributes on, as sent
    sent_ms: int  # when its producer built it (its first send)
    acked_ms: int
    producer: str


class DataWorkload:
    """The producers and consumers of one run (module docstring)."""

    def __init__(
        self,
        cluster: SimCluster,
        checker: DataChecker,
        specs: tuple[TopicSpec, ...],
        rng: random.Random,
    ) -> None:
        self.cluster = cluster
        self.checker = checker
        self.specs = specs
        self.rng = rng
        self.tasks = SimTasks()
        # Calls being served at a node: kept so that a call to a node that died with it (it
        # waits for nothing that will come) is cancelled at the end, not destroyed pending.
        # In start order, as `SimTasks` keeps a node's (its docstring: why not a set).
        self._serving: dict[asyncio.Task[object], None] = {}
        self.producing = True
        self.created: set[str] = set()
        self._controller_hint: int | None = None
        self.acked: list[AckedBatch] = []
        self.counts = {"acks=0 sent": 0, "acks=1 acked": 0, "acks=all acked": 0, "consumed": 0}

    def start(self) -> None:
        """The producers and consumers start; they wait for the topics (`create_topics`)."""
        targets = [(s.name, p) for s in self.specs if s.kind == "data" for p in range(s.partitions)]
        # acks=all on the first partition of each topic, acks=1 and 0 beside them.
        producers = [(m.ACKS_ALL, s.name, 0) for s in self.specs if s.kind == "data"]
        producers += [(m.ACKS_LEADER, *targets[1]), (m.ACKS_NONE, *targets[0])]
        for index, (acks, topic, partition) in enumerate(producers):
            producer = _Producer(self, f"producer {index} (acks={acks})", topic, partition, acks)
            self.tasks.spawn(producer.run(), name=producer.name)
        for topic, partition in targets:
            self.start_consumer(topic, partition)

    def start_consumer(
        self, topic: str, partition: int, view: ReadCommittedView | None = None
    ) -> None:
        """A consumer of the partition: read_committed with a `view`, else read_uncommitted."""
        consumer = _Consumer(self, topic, partition, view)
        self.tasks.spawn(consumer.run(), name=consumer.name)

    def stop_producing(self) -> None:
        self.producing = False

    def stop(self) -> None:
        self.tasks.cancel_all()
        for serving in list(self._serving):
            serving.cancel()

    # --- calls --------------------------------------------------------------------------------

    async def call(self, node_id: int, work: Callable[[BrokerRuntime], Awaitable[R]]) -> R:
        """`work` on node `node_id`'s broker, through the network (module Rules)."""
        node = self.cluster.nodes[node_id]

        async def serve() -> R:
            broker = node.broker
            if broker is None:
                raise CallLost(node_id, unreachable=True)
            serving = asyncio.current_task()
            assert serving is not None
            self._serving[serving] = None
            try:
                answer = await work(broker)
            finally:
                self._serving.pop(serving, None)
            if node.broker is not broker:
                raise CallLost(node_id, unreachable=True)
            return answer

        return await self.cluster.network.call(
            CLIENT_ID, node_id, serve if node.up else None, timeout_s=CALL_TIMEOUT_S
        )

    def leader_of(
        self, topic: str, partition: int, rng: random.Random | None = None
    ) -> tuple[int, int] | None:
        """(leader, leader epoch) as a random running broker's image names them, chosen by
        `rng` (the workload's when not given)."""
        up = [n for n in self.cluster.up_nodes() if n.broker is not None]
        if not up:
            return None
        broker = (rng or self.rng).choice(up).broker
        assert broker is not None
        entry = broker.image.topics.by_name.get(topic)
        registration = None if entry is None else entry.partitions.get(partition)
        if registration is None or registration.leader < 0:
            return None
        return registration.leader, registration.leader_epoch

    # --- topics -------------------------------------------------------------------------------

    async def create_topics(self) -> None:
        """Until every topic's creation is acknowledged (but the internal ones')."""
        specs = [spec for spec in self.specs if spec.kind != "internal"]
        while len(self.created) < len(specs):
            for spec in specs:
                if spec.name not in self.created and await self._create(spec):
                    self.created.add(spec.name)
            await asyncio.sleep(RETRY_BACKOFF_S)

    async def _create(self, spec: TopicSpec) -> bool:
        target = self._controller_hint or self.rng.choice(self.cluster.voter_ids)
        service = self.cluster.services.get(target)
        request = pb.CreateTopicsRequest(
            topics=[
                pb.CreatableTopic(
                    name=spec.name,
                    num_partitions=spec.partitions,
                    replication_factor=spec.replication_factor,
                    configs=spec.configs(),
                )
            ],
            timeout_ms=int(CALL_TIMEOUT_S * 1000),
        )

        async def serve() -> pb.CreateTopicsResponse:
            assert service is not None
            return await service.CreateTopics(request, None)

        try:
            answer = await self.cluster.network.call(
                CLIENT_ID, target, None if service is None else serve, timeout_s=CALL_TIMEOUT_S
            )
        except CallLost:
            self._controller_hint = None
            return False
        if answer.error.code:
            self._controller_hint = answer.controller_id if answer.controller_id > 0 else None
            return False
        return answer.topics[0].error.code in (0, 36)  # 36: TOPIC_ALREADY_EXISTS


class _Producer:
    def __init__(
        self, workload: DataWorkload, name: str, topic: str, partition: int, acks: int
    ) -> None:
        self.workload = workload
        self.name = name
        self.topic = topic
        self.partition = partition
        self.acks = acks
        self.producer_id = -1
        self.epoch = 0
        self.sequence = 0
        self.leader: int | None = None

    async def run(self) -> None:
        workload = self.workload
        rng = workload.rng
        while self.producer_id < 0:
            await asyncio.sleep(RETRY_BACKOFF_S)
            await self._init_producer_id()
        while workload.producing:
            await asyncio.sleep(rng.uniform(*PRODUCE_EVERY_S))
            count = rng.randint(1, 3)
            values = [f"{self.name} {self.sequence + i}".encode() for i in range(count)]
            if self.acks == m.ACKS_NONE:
                await self._send_once(self._batch(values))
                workload.counts["acks=0 sent"] += 1
            else:
                await self._send_until_acked(values)
            self.sequence += count

    async def _init_producer_id(self) -> None:
        up = [n.node_id for n in self.workload.cluster.up_nodes()]
        if not up:
            return

        async def generate(broker: BrokerRuntime) -> int:
            return broker.producer_ids.generate_producer_id()

        # No block of ids yet, or the call was lost: the caller asks again.
        with contextlib.suppress(CallLost, KafkaError):
            self.producer_id = await self.workload.call(self.workload.rng.choice(up), generate)

    def _batch(self, values: list[bytes]) -> bytes:
        now = self.workload.cluster.client_wall_clock()  # record timestamps: a client's clock
        return build_batch(
            [(now, None, value, ()) for value in values],
            producer_id=self.producer_id,
            producer_epoch=self.epoch,
            base_sequence=self.sequence,
        )

    def _request(self, batch: bytes) -> m.ProduceRequest:
        return m.ProduceRequest(
            self.acks,
            PRODUCE_TIMEOUT_MS,
            (m.ProducePartition(self.topic, self.partition, batch),),
        )

    async def _send_once(self, batch: bytes) -> m.ProducePartitionResult | None:
        """One attempt at the leader: its answer, None when there was none."""
        workload = self.workload
        if self.leader is None:
            found = workload.leader_of(self.topic, self.partition)
            self.leader = None if found is None else found[0]
        if self.leader is None:
            return None
        request = self._request(batch)

        async def produce(broker: BrokerRuntime) -> m.ProduceResponse | None:
            return await broker.service.produce(request)

        try:
            answer = await workload.call(self.leader, produce)
        except Exception:  # a lost call or a refusal of the whole request: find the leader
            self.leader = None
            return None
        return None if answer is None else answer.partitions[0]

    async def _send_until_acked(self, values: list[bytes]) -> None:
        workload = self.workload
        batch = self._batch(values)
        while workload.producing:
            result = await self._send_once(batch)
            if result is not None and result.error is None:
                if self.acks == m.ACKS_ALL:
                    workload.counts["acks=all acked"] += 1
                    workload.acked.append(
                        AckedBatch(
                            self.topic,
                            self.partition,
                            result.base_offset,
                            batch[PAYLOAD_START:],
                            workload.cluster.client_time_to_virtual_ms(
                                read_header(batch).base_timestamp
                            ),
                            workload.cluster.loop.now_ms(),
                            self.name,
                        )
                    )
                else:
                    workload.counts["acks=1 acked"] += 1
                return
            if result is not None and isinstance(result.error, REFUSED_SEQUENCE):
                self.epoch += 1  # the records before this batch are gone: a new epoch
                self.sequence = 0
                batch = self._batch(values)
            elif result is not None:
                self.leader = None
            await asyncio.sleep(RETRY_BACKOFF_S)


class _Consumer:
    def __init__(
        self,
        workload: DataWorkload,
        topic: str,
        partition: int,
        view: ReadCommittedView | None = None,
    ) -> None:
        self.workload = workload
        self.topic = topic
        self.partition = partition
        self.view = view
        self.name = f"{'read_committed ' if view else ''}consumer of {topic}-{partition}"
        self.position = 0
        self.leader: tuple[int, int] | None = None  # (leader, leader epoch) until an error

    async def run(self) -> None:
        rng = self.workload.rng
        while True:
            if not await self.fetch_once():
                await asyncio.sleep(RETRY_BACKOFF_S)
            elif rng.random() < CONSUMER_PAUSE_RATE:
                await asyncio.sleep(rng.uniform(*CONSUMER_PAUSE_S))

    async def fetch_once(self) -> bool:
        """One fetch from the leader; whether it was answered without an error."""
        workload = self.workload
        found = self.leader = self.leader or workload.leader_of(self.topic, self.partition)
        if found is None:
            return False
        leader, leader_epoch = found
        request = m.FetchRequest(
            (
                m.FetchPartition(
                    self.topic,
                    self.partition,
                    self.position,
                    FETCH_BYTES,
                    current_leader_epoch=leader_epoch,
                ),
            ),
            max_wait_ms=FETCH_WAIT_MS,
            isolation_level=(
                m.IsolationLevel.READ_UNCOMMITTED
                if self.view is None
                else m.IsolationLevel.READ_COMMITTED
            ),
        )

        async def fetch(broker: BrokerRuntime) -> m.FetchResponse:
            checker = workload.checker
            waiting = broker.service.fetch(request)
            if isinstance(waiting, m.FetchResponse):
                checker.check_fenced(broker, leader, request, waiting, self.name)
                return waiting
            parked = checker.park_fetch(broker, request)
            try:
                answer = await waiting
            finally:
                checker.unpark(parked)
            checker.check_fenced(broker, leader, request, answer, self.name, parked)
            return answer

        try:
            answer = await workload.call(leader, fetch)
        except Exception:  # a lost call or a refusal of the whole request
            self.leader = None
            return False
        (result,) = answer.partitions
        if result.error is not None:
            self.leader = None
            if isinstance(result.error, OffsetOutOfRangeError):
                self.position = 0
                if self.view is not None:
                    self.view.restart()
            return False
        after = self.position
        if result.records:
            after = workload.checker.check_consumed(
                self.topic, self.partition, result.records, result.high_watermark, self.name
            )
            workload.counts["consumed"] += 1
        if self.view is not None and not self.view.answered(self.position, result, self.name):
            self.position = 0  # its partition's history restarted: read it again
        else:
            self.position = max(self.position, after)
        return True
