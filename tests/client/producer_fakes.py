"""An in-process fake cluster for the producer's unit tests: brokers that take Produce,
Metadata and InitProducerId, and partition logs that judge idempotent batches exactly as a
replog broker does (`replog.replication.producer_state.ProducerStateTable`).

`FakeCluster` stands in for the producer's `Connections` (`install(monkeypatch)`): every
Producer built afterwards talks to it. Tests steer it:
- `log(topic, partition).max_message_bytes`: batches larger than that are refused with
  MESSAGE_TOO_LARGE, as the topic's `max.message.bytes` makes a broker refuse them;
  `segment_bytes`: appends larger than that are refused with RECORD_LIST_TOO_LARGE, as a
  broker refuses an append larger than a segment;
- `refuse(topic, partition, error, times)`: the next produces of that partition answer `error`
  and append nothing;
- `lose(topic, partition, times)`: the next produces append, then the call fails with gRPC
  UNAVAILABLE (the answer is lost: the client cannot know the batch was written);
- `gate`: while closed, produce calls wait before doing anything (`held` counts them); opening
  it from any thread lets them go on, `release_one` lets exactly the oldest (or a chosen) one;
- `down`: nodes whose calls fail with UNAVAILABLE; `move_leader`; `leader = -1` for none;
- `cut_off_leader(topic, partition, new_leader)`: the leader is cut off from the rest of the
  cluster, which elects `new_leader`; the old one still believes it leads (its Metadata names
  itself at the old epoch) and answers every produce REQUEST_TIMED_OUT, as acks=all waits for
  followers that never fetch;
- `pid_errors`: InitProducerId answers these first;
- `serves_configs`: DescribeConfigs (the topic's max.message.bytes) is answered, or refused
  UNIMPLEMENTED as by a broker-only node.
It records every produce call (node, partitions with their base sequences) and the largest
number of produce calls a node had outstanding at once.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from fake_nodes import FakeNodes, call_on, unavailable

from replog.errors import (
    KafkaError,
    MessageSizeTooLargeError,
    NetworkError,
    NotLeaderOrFollowerError,
    RecordBatchTooLargeError,
    RequestTimedOutError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
)
from replog.kafka.messages.metadata_response import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from replog.record import RecordBatch, iter_frames, read_header, stamp_batch
from replog.replication import messages as m
from replog.replication.producer_state import ProducerStateTable
from replog.wire.kafka_broker_client import PRODUCE_MAX_VERSION


class Gate:
    """Open or closed; waiters on any loop; opened and closed from any thread."""

    def __init__(self) -> None:
        self._open = True
        self._lock = threading.Lock()
        self._waiters: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = deque()

    @property
    def held(self) -> int:
        with self._lock:
            return sum(1 for _, f in self._waiters if not f.done())

    def close(self) -> None:
        with self._lock:
            self._open = False

    def open(self) -> None:
        with self._lock:
            self._open = True
            waiters, self._waiters = self._waiters, deque()
        for loop, future in waiters:
            _resolve(loop, future)

    def release_one(self, index: int = 0) -> None:
        """Let the `index`-th oldest waiting call go on (the gate stays closed)."""
        with self._lock:
            live = [w for w in self._waiters if not w[1].done()]
            loop, future = live[index]
            self._waiters.remove((loop, future))
        _resolve(loop, future)

    async def wait(self) -> None:
        with self._lock:
            if self._open:
                return
            loop = asyncio.get_running_loop()
            future: asyncio.Future[None] = loop.create_future()
            self._waiters.append((loop, future))
        await future


def _resolve(loop: asyncio.AbstractEventLoop, future: asyncio.Future[None]) -> None:
    def settle() -> None:
        if not future.done():
            future.set_result(None)

    call_on(loop, settle)


@dataclass
class FakeLog:
    """One partition's log: whole batches, offsets stamped, idempotence judged."""

    name: str
    leader: int
    epoch: int = 1
    batches: list[bytes] = field(default_factory=list)
    next_offset: int = 0
    max_message_bytes: int | None = None  # the topic's limit on a batch, as a broker checks it
    segment_bytes: int | None = None  # the topic's limit on one append, as a broker checks it

    def __post_init__(self) -> None:
        self.state = ProducerStateTable(self.name)

    def append(self, records: bytes) -> tuple[int, int]:
        """(base offset, record count) of the append, or of the duplicate it repeats."""
        limit = self.max_message_bytes
        for _, size in iter_frames(records):
            if limit is not None and size > limit:
                raise MessageSizeTooLargeError(
                    f"{self.name}: batch of {size} bytes exceeds max.message.bytes {limit}"
                )
        if self.segment_bytes is not None and len(records) > self.segment_bytes:
            raise RecordBatchTooLargeError(
                f"{self.name}: append of {len(records)} bytes exceeds segment.bytes "
                f"{self.segment_bytes}"
            )
        headers = [read_header(records, position) for position, _ in iter_frames(records)]
        duplicate = self.state.check_batches(headers)  # raises the sequence errors
        if duplicate is not None:
            return duplicate.first_offset, duplicate.last_offset - duplicate.first_offset + 1
        base = self.next_offset
        for position, size in iter_frames(records):
            buf = bytearray(records[position : position + size])
            stamp_batch(buf, 0, self.next_offset, self.epoch)
            header = read_header(buf)
            self.state.update(header)
            self.batches.append(bytes(buf))
            self.next_offset = header.next_offset
        return base, self.next_offset - base

    def values(self) -> list[bytes | None]:
        return [r.value for b in self.batches for r in RecordBatch.parse(b).records()]

    def records(self) -> list[Any]:
        return [r for b in self.batches for r in RecordBatch.parse(b).records()]

    def headers(self) -> list[Any]:
        return [RecordBatch.parse(b).header for b in self.batches]


@dataclass
class ProduceCall:
    node: int
    acks: int
    partitions: list[tuple[str, int, int, int]]  # topic, partition, base sequence, records
    batches: list[int] = field(default_factory=list)  # how many batches each entry carried


@dataclass
class FakeCluster(FakeNodes):
    nodes: int = 3
    topics: dict[str, list[FakeLog]] = field(default_factory=dict)
    down: set[int] = field(default_factory=set)
    gate: Gate = field(default_factory=Gate)
    refusals: dict[tuple[str, int], deque[KafkaError]] = field(default_factory=dict)
    losses: dict[tuple[str, int], int] = field(default_factory=dict)
    pid_errors: deque[Exception] = field(default_factory=deque)
    calls: list[ProduceCall] = field(default_factory=list)
    metadata_calls: int = 0
    metadata_nodes: list[int] = field(default_factory=list)  # who was asked, in order
    # node -> the partitions it still believes it leads, and at which leader epoch
    zombies: dict[int, dict[tuple[str, int], int]] = field(default_factory=dict)
    pid_calls: int = 0
    next_pid: int = 1000
    serves_configs: bool = True  # DescribeConfigs: answered, or UNIMPLEMENTED (broker-only)
    config_calls: int = 0
    outstanding: dict[int, int] = field(default_factory=dict)
    peak_outstanding: dict[int, int] = field(default_factory=dict)
    # Per node, the requests held at the gate, oldest first: what `cut` fails.
    held: dict[int, list[asyncio.Future[None]]] = field(default_factory=dict)

    def create(self, topic: str, partitions: int = 1) -> list[FakeLog]:
        self.topics[topic] = [
            FakeLog(f"{topic}-{p}", leader=p % self.nodes) for p in range(partitions)
        ]
        return self.topics[topic]

    def log(self, topic: str, partition: int = 0) -> FakeLog:
        return self.topics[topic][partition]

    def move_leader(self, topic: str, partition: int, node: int) -> None:
        log = self.log(topic, partition)
        log.leader = node
        log.epoch += 1

    def cut_off_leader(self, topic: str, partition: int, new_leader: int) -> None:
        log = self.log(topic, partition)
        self.zombies.setdefault(log.leader, {})[(topic, partition)] = log.epoch
        self.move_leader(topic, partition, new_leader)

    def refuse(self, topic: str, partition: int, error: KafkaError, times: int = 1) -> None:
        self.refusals.setdefault((topic, partition), deque()).extend([error] * times)

    def lose(self, topic: str, partition: int, times: int = 1) -> None:
        self.losses[(topic, partition)] = self.losses.get((topic, partition), 0) + times

    def connections(self) -> FakeConnections:
        return FakeConnections(self)

    def cut(self, node: int, error: BaseException) -> int:
        """Fail every request held at the gate on `node` together, none appended, as a
        failed ProduceStream call does: the oldest with `error`, the later ones with
        NetworkError. Returns how many failed."""
        held = [f for f in self.held.pop(node, []) if not f.done()]
        for i, cut in enumerate(held):
            cut.set_exception(
                error if i == 0 else NetworkError(f"node {node}: the call ended earlier")
            )
        return len(held)

    def check_up(self, address: str) -> int:
        node = self.node_of(address)
        if node in self.down:
            raise unavailable("Connection refused")
        return node

    # --- the Broker service ---------------------------------------------------------------------

    async def produce(self, address: str, request: m.ProduceRequest) -> m.ProduceResponse:
        node = self.check_up(address)
        self.calls.append(
            ProduceCall(
                node,
                request.acks,
                [
                    (
                        p.topic,
                        p.partition,
                        read_header(p.records).base_sequence,
                        read_header(p.records).records_count,
                    )
                    for p in request.partitions
                ],
                [sum(1 for _ in iter_frames(p.records)) for p in request.partitions],
            )
        )
        self.outstanding[node] = self.outstanding.get(node, 0) + 1
        self.peak_outstanding[node] = max(
            self.peak_outstanding.get(node, 0), self.outstanding[node]
        )
        cut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.held.setdefault(node, []).append(cut)
        opened = asyncio.ensure_future(self.gate.wait())
        try:
            await asyncio.wait({opened, cut}, return_when=asyncio.FIRST_COMPLETED)
            if cut.done():
                cut.result()  # raises the cut's error
            self.check_up(address)
            return self._produce(node, address, request)
        finally:
            opened.cancel()
            if cut in self.held.get(node, ()):
                self.held[node].remove(cut)
            self.outstanding[node] -= 1

    def _produce(self, node: int, address: str, request: m.ProduceRequest) -> m.ProduceResponse:
        results = []
        lost = False
        for entry in request.partitions:
            key = (entry.topic, entry.partition)
            logs = self.topics.get(entry.topic)
            if logs is None or entry.partition >= len(logs):
                results.append(
                    m.ProducePartitionResult(
                        *key, UnknownTopicOrPartitionError(f"{entry.topic}-{entry.partition}")
                    )
                )
                continue
            log = logs[entry.partition]
            if key in self.zombies.get(node, {}):
                results.append(
                    m.ProducePartitionResult(
                        *key, RequestTimedOutError(f"{log.name}: the followers never came")
                    )
                )
                continue
            if log.leader != node:
                results.append(
                    m.ProducePartitionResult(
                        *key, NotLeaderOrFollowerError(f"{log.name}: node {node} is not leader")
                    )
                )
                continue
            refusals = self.refusals.get(key)
            if refusals:
                results.append(m.ProducePartitionResult(*key, refusals.popleft()))
                continue
            try:
                base, _ = log.append(entry.records)
            except KafkaError as exc:
                results.append(m.ProducePartitionResult(*key, exc))
                continue
            if self.losses.get(key):
                self.losses[key] -= 1
                lost = True
            results.append(m.ProducePartitionResult(*key, base_offset=base))
        if lost:
            raise unavailable("Socket closed")
        if request.acks == m.ACKS_NONE:
            return m.ProduceResponse(tuple(r for r in results if r.error is not None))
        return m.ProduceResponse(tuple(results))

    async def metadata(self, address: str, topics: Sequence[str] | None) -> MetadataResponse:
        node = self.check_up(address)
        self.metadata_calls += 1
        self.metadata_nodes.append(node)
        believed = self.zombies.get(node, {})
        answered = []
        for name in list(topics or ()) or sorted(self.topics):
            logs = self.topics.get(name)
            if logs is None:
                answered.append(MetadataResponseTopic(name=name, error_code=3))
                continue
            answered.append(
                MetadataResponseTopic(
                    name=name,
                    partitions=[
                        MetadataResponsePartition(
                            partition_index=p,
                            leader_id=node if (name, p) in believed else log.leader,
                            leader_epoch=believed.get((name, p), log.epoch),
                            replica_nodes=list(range(self.nodes)),
                            isr_nodes=list(range(self.nodes)),
                        )
                        for p, log in enumerate(logs)
                    ],
                )
            )
        brokers = [
            MetadataResponseBroker(node_id=n, host=f"node{n}", port=9092)
            for n in range(self.nodes)
            if n not in self.down
        ]
        return MetadataResponse(
            controller_id=0, cluster_id="fake", brokers=brokers, topics=answered
        )

    async def init_producer_id(self, address: str) -> tuple[int, int]:
        self.check_up(address)
        self.pid_calls += 1
        if self.pid_errors:
            raise self.pid_errors.popleft()
        self.next_pid += 1
        return self.next_pid - 1, 0


class FakeConnections:
    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster
        self.closed = False

    def broker(self, address: str) -> FakeBroker:
        return FakeBroker(self.cluster, address)

    def produce_stream(self, address: str) -> FakeBroker:
        # Each request on its own: they fail together only when the test cuts them.
        return FakeBroker(self.cluster, address)

    async def topic_configs(
        self, address: str, topics: list[str], keys: list[str], *, timeout_ms: int
    ) -> dict[str, dict[str, str | None] | KafkaError]:
        self.cluster.check_up(address)
        if not self.cluster.serves_configs:
            raise UnsupportedVersionError(f"the broker at {address} does not serve DescribeConfigs")
        self.cluster.config_calls += 1
        answer: dict[str, dict[str, str | None] | KafkaError] = {}
        for topic in topics:
            logs = self.cluster.topics.get(topic)
            if logs is None:
                answer[topic] = UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
                continue
            limit, segment = logs[0].max_message_bytes, logs[0].segment_bytes
            answer[topic] = {
                key: None if value is None else str(value)
                for key, value in (("max.message.bytes", limit), ("segment.bytes", segment))
                if key in keys
            }
        return answer

    async def close(self) -> None:
        self.closed = True


@dataclass
class FakeBroker:
    cluster: FakeCluster
    address: str

    async def produce(
        self,
        request: m.ProduceRequest,
        *,
        timeout_ms: int | None = None,
        max_version: int = PRODUCE_MAX_VERSION,
    ) -> m.ProduceResponse:
        return await self.cluster.produce(self.address, request)

    async def metadata(
        self, topics: Sequence[str] | None = None, *, timeout_ms: int | None = None
    ) -> MetadataResponse:
        return await self.cluster.metadata(self.address, topics)

    async def init_producer_id(self, *, timeout_ms: int | None = None) -> tuple[int, int]:
        return await self.cluster.init_producer_id(self.address)

    async def close(self) -> None:
        return None


def producer_settings(cluster: FakeCluster, **overrides: object) -> dict[str, Any]:
    """A producer config for `cluster` with short timers (a test's overrides win)."""
    return {
        "bootstrap_servers": cluster.bootstrap,
        "linger_ms": 0,
        "request_timeout_ms": 2_000,
        "retry_backoff_ms": 5,
        "retry_backoff_max_ms": 20,
        "max_block_ms": 3_000,
        **overrides,
    }


# What a crashed sender's refusals say (`break_drain`), after "send to topic 't': " or "flush: ".
SENDER_CRASH = (
    r"the producer's sender stopped on an unexpected error \(RuntimeError: a bug in drain\)"
)


def break_drain(monkeypatch: Any, accumulator: Any) -> None:
    """Make the accumulator's drain raise (a bug) as soon as a batch is queued: the sender
    crashes on its next pass."""
    drain = accumulator.drain

    def broken(*args: Any) -> Any:
        if accumulator.has_queued():
            raise RuntimeError("a bug in drain")
        return drain(*args)

    monkeypatch.setattr(accumulator, "drain", broken)
