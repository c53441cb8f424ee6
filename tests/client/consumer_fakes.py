"""An in-process fake cluster for the consumer's unit tests: brokers, logs and a coordinator.

`FakeCluster` stands in for the client's `Connections`: `connections()` returns an object whose
`broker(address)` and `coordinator(address)` answer Metadata, Fetch, ListOffsets,
FindCoordinator, OffsetCommit and OffsetFetch from in-memory partition logs and committed
offsets, and the classic and consumer-protocol group calls from the real coordinator cores
(`FakeGroups`), as a replog broker would (leader checks, leader-epoch fencing, OFFSET_OUT_OF_RANGE,
reads bounded by the high watermark, whole batches from the one holding the fetch offset,
long polls woken by appends). Tests steer it: move leaders, stop nodes (calls to them fail
with gRPC UNAVAILABLE), script errors, hold back the high watermark, and give a node a stale
view of who leads (`stale_views`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from collections import deque
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from fake_nodes import FakeNodes, call_on, grpc_unavailable, unavailable

from replog.client.records import ConsumerRecord, OffsetAndMetadata, TopicPartition
from replog.clock import monotonic_ms
from replog.coordinator import classic_group_messages as gm
from replog.coordinator import consumer_group_messages as cgm
from replog.coordinator import messages as cm
from replog.coordinator.classic_group_coordinator import (
    ClassicGroupConfig,
    ClassicGroupCoordinator,
)
from replog.coordinator.classic_group_messages import GroupResult
from replog.coordinator.consumer_group_coordinator import (
    ConsumerGroupConfig,
    ConsumerGroupCoordinator,
)
from replog.errors import (
    FencedLeaderEpochError,
    KafkaError,
    KafkaTimeoutError,
    NetworkError,
    NotCoordinatorError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    UnknownLeaderEpochError,
    UnknownTopicOrPartitionError,
)
from replog.kafka.messages.metadata_response import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from replog.kafka.protocol.codec import ZERO_UUID
from replog.record import build_batch, iter_batches, read_header
from replog.replication import messages as m
from replog.replication.fetch_session import FetcherSession, LeaderFetchSession

BASE_TIMESTAMP = 1_700_000_000_000


def consumer_settings(cluster: FakeCluster, **overrides: object) -> dict[str, Any]:
    """A consumer config for `cluster` with short timers (a test's overrides win)."""
    return {
        "bootstrap_servers": cluster.bootstrap,
        "auto_offset_reset": "earliest",
        "fetch_max_wait_ms": 50,
        "request_timeout_ms": 2_000,
        "default_api_timeout_ms": 3_000,
        "retry_backoff_ms": 10,
        "retry_backoff_max_ms": 50,
        **overrides,
    }


async def poll_until(c: Any, count: int, timeout_s: float = 5.0) -> list[ConsumerRecord]:
    """Poll the asyncio Consumer `c` until `count` records came; fails after `timeout_s`."""
    got: list[ConsumerRecord] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < count:
        assert time.monotonic() < deadline, f"only {len(got)} of {count} records arrived"
        for records in (await c.poll(100)).values():
            got.extend(records)
    return got


@dataclass
class FakePartition:
    leader: int
    epoch: int = 0
    batches: list[bytes] = field(default_factory=list)
    log_start: int = 0
    hw_lag: int = 0  # records at the end of the log not yet committed (above the HW)
    errors: deque[KafkaError] = field(default_factory=deque)  # the next fetches answer these

    @property
    def log_end(self) -> int:
        if not self.batches:
            return self.log_start
        return read_header(self.batches[-1]).next_offset

    @property
    def high_watermark(self) -> int:
        return max(self.log_start, self.log_end - self.hw_lag)

    def append(
        self,
        values: Sequence[bytes | None],
        *,
        key: bytes | None = None,
        timestamp: int | None = None,
        **options: object,
    ) -> int:
        base = self.log_end
        records = [
            (
                (BASE_TIMESTAMP + base + i) if timestamp is None else timestamp,
                key,
                value,
                (),
            )
            for i, value in enumerate(values)
        ]
        self.batches.append(
            build_batch(records, base_offset=base, partition_leader_epoch=self.epoch, **options)  # type: ignore[arg-type]
        )
        return base

    def read(self, offset: int, max_bytes: int) -> bytes:
        out: list[bytes] = []
        size = 0
        hw = self.high_watermark
        for raw in self.batches:
            batch = read_header(raw)  # no CRC check: tests plant corrupt batches
            if batch.last_offset < offset or batch.base_offset < self.log_start:
                continue
            if batch.next_offset > hw:
                break  # the leader serves consumers whole batches below the HW
            if out and size + len(raw) > max_bytes:
                break
            out.append(raw)
            size += len(raw)
        return b"".join(out)

    def offset_for_time(self, timestamp: int) -> tuple[int, int] | None:
        for raw in self.batches:
            for record in next(iter_batches(raw)).records():
                if record.offset < self.log_start or record.offset >= self.high_watermark:
                    continue
                if record.timestamp >= timestamp:
                    return record.offset, record.timestamp
        return None


def fake_topic_id(name: str) -> UUID:
    """The fake cluster's id of topic `name` (the same for every answer)."""
    return UUID(bytes=hashlib.md5(name.encode()).digest())


class FakeGroups:
    """The group coordinator core behind the fake coordinator: answers when the core gives
    them, timers on the loop's clock (`monotonic_ms`), no records written (a fake has no
    `__consumer_offsets`). The initial rebalance delay is 0 unless a test sets another."""

    def __init__(self, initial_rebalance_delay_ms: int = 0) -> None:
        self.core = ClassicGroupCoordinator(
            ClassicGroupConfig(
                min_session_timeout_ms=100, initial_rebalance_delay_ms=initial_rebalance_delay_ms
            )
        )
        # KIP-848's groups: a 100 ms heartbeat interval, a 1 s session (the tests' GROUP).
        self.consumer = ConsumerGroupCoordinator(
            ConsumerGroupConfig(
                session_timeout_ms=1_000,
                heartbeat_interval_ms=100,
                min_session_timeout_ms=1,
                min_heartbeat_interval_ms=1,
            )
        )
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._next_id = 0
        self._timer: asyncio.TimerHandle | None = None
        self.calls: list[str] = []

    def _settle(self, result: GroupResult) -> None:
        for answer in [*result.joins, *result.syncs]:
            future = self._waiting.pop(answer.request_id, None)
            if future is not None and not future.done():
                future.set_result(answer)
        for request_id in result.superseded:
            future = self._waiting.pop(request_id, None)
            if future is not None and not future.done():
                future.set_exception(asyncio.CancelledError())
        self._arm()

    def _arm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        deadlines = [self.core.next_deadline_ms(), self.consumer.next_deadline_ms()]
        deadline = min((d for d in deadlines if d is not None), default=None)
        if deadline is not None:
            delay = max(0, deadline - monotonic_ms()) / 1000
            self._timer = asyncio.get_running_loop().call_later(delay, self.tick)

    def tick(self) -> None:
        self.consumer.tick(monotonic_ms())
        self._settle(self.core.tick(monotonic_ms()))

    def consumer_heartbeat(
        self, request: cgm.ConsumerGroupHeartbeatRequest, topics: Mapping[str, int]
    ) -> cgm.ConsumerGroupHeartbeatResponse:
        self.calls.append(f"ConsumerGroupHeartbeat({request.member_epoch})")
        self.consumer.set_topics({name: (fake_topic_id(name), n) for name, n in topics.items()})
        answer, _ = self.consumer.heartbeat(request, monotonic_ms())
        self._settle(self.consumer.take_classic_answers())
        return answer

    async def _parked(self, call: Any) -> Any:
        self._next_id += 1
        request_id = self._next_id
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = future
        self._settle(call(request_id))
        return await future

    async def join(self, request: gm.JoinGroupRequest) -> gm.JoinGroupResponse:
        self.calls.append("JoinGroup")
        answer: gm.JoinGroupResponse = await self._parked(
            lambda rid: self.core.join(request, rid, monotonic_ms())
        )
        return answer

    async def sync(self, request: gm.SyncGroupRequest) -> gm.SyncGroupResponse:
        self.calls.append("SyncGroup")
        answer: gm.SyncGroupResponse = await self._parked(
            lambda rid: self.core.sync(request, rid, monotonic_ms())
        )
        return answer

    def heartbeat(self, request: gm.HeartbeatRequest) -> KafkaError | None:
        self.calls.append("Heartbeat")
        error = self.core.heartbeat(request, monotonic_ms())
        self._arm()
        return error

    def leave(self, request: gm.LeaveGroupRequest) -> gm.LeaveGroupResponse:
        self.calls.append("LeaveGroup")
        answer, result = self.core.leave(request, monotonic_ms())
        self._settle(result)
        return answer

    def commit_error(
        self, group_id: str, generation: int, member_id: str, instance: str | None
    ) -> KafkaError | None:
        if group_id in self.consumer.groups:
            return self.consumer.commit_error(group_id, member_id, generation, None)
        if group_id not in self.core.groups:
            return None
        return self.core.commit_error(group_id, generation, member_id, instance)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


@dataclass
class FakeCluster(FakeNodes):
    nodes: int = 3
    topics: dict[str, list[FakePartition]] = field(default_factory=dict)
    down: set[int] = field(default_factory=set)
    committed: dict[tuple[str, TopicPartition], OffsetAndMetadata] = field(default_factory=dict)
    coordinator_node: int = 0
    # Scripted answers: request-level errors the next calls raise, in order.
    find_errors: deque[Exception] = field(default_factory=deque)
    commit_errors: deque[Exception] = field(default_factory=deque)
    commit_partition_errors: deque[dict[TopicPartition, KafkaError]] = field(default_factory=deque)
    # Other consumers the coordinator says commit the same partitions, per commit answer.
    shared_commits: deque[tuple[cm.SharedCommit, ...]] = field(default_factory=deque)
    committers: list[cm.Committer] = field(default_factory=list)  # who sent each commit
    offset_fetch_errors: deque[Exception] = field(default_factory=deque)
    # While set, OffsetFetch answers (as of the call) wait until it is released (`Event.set`):
    # committed offsets on their way at a moment the test chooses; `offset_fetches` names
    # what each call asked for.
    offset_fetch_gate: asyncio.Event | None = None
    offset_fetches: list[tuple[TopicPartition, ...]] = field(default_factory=list)
    # While set, Heartbeats sent go unanswered (a coordinator stopped by SIGSTOP): each waits
    # out the timeout it was given, then fails as an unanswered call does.
    heartbeats_hang: bool = False
    # Calls cut off as by a channel reset: they raise CancelledError, nobody cancelled them.
    cut_off: deque[str] = field(default_factory=deque)
    # node -> (topic, partition) -> the (leader, leader epoch) its Metadata still names: a
    # broker behind on metadata, or a leader cut off from the cluster naming itself
    stale_views: dict[int, dict[tuple[str, int], tuple[int, int]]] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)
    fetches: list[tuple[int, tuple[tuple[str, int, int], ...]]] = field(default_factory=list)
    streams: list[FakeFetchStream] = field(default_factory=list)  # every FetchStream opened
    wire_fetches: list[m.FetchRequest] = field(default_factory=list)  # as sent in a session
    commits: list[dict[TopicPartition, OffsetAndMetadata]] = field(default_factory=list)
    redials: list[str] = field(default_factory=list)  # addresses whose channel was dropped
    appended: asyncio.Event | None = None
    groups: FakeGroups = field(default_factory=FakeGroups)
    topic_ids: bool = False  # Metadata answers carry topic ids (`fake_topic_id`)
    appended_loop: asyncio.AbstractEventLoop | None = None

    def create(self, topic: str, partitions: int = 1) -> list[FakePartition]:
        self.topics[topic] = [FakePartition(leader=p % self.nodes) for p in range(partitions)]
        return self.topics[topic]

    def partition(self, topic: str, partition: int = 0) -> FakePartition:
        return self.topics[topic][partition]

    def append(
        self, topic: str, partition: int, values: Sequence[bytes | None], **kw: object
    ) -> int:
        base = self.partition(topic, partition).append(values, **kw)  # type: ignore[arg-type]
        self.wake()
        return base

    def wake(self) -> None:
        """Wake long polls; safe from a test thread while a consumer's loop thread waits."""
        event, loop = self.appended, self.appended_loop
        if event is not None and loop is not None:
            call_on(loop, event.set)

    def move_leader(self, topic: str, partition: int, node: int) -> None:
        state = self.partition(topic, partition)
        state.leader = node
        state.epoch += 1

    def connections(self) -> FakeConnections:
        return FakeConnections(self)

    def check_up(self, address: str, call: str = "", *, coordinator: bool = False) -> int:
        node = self.node_of(address)
        if node in self.down:
            failed = grpc_unavailable if coordinator else unavailable
            raise failed(f"failed to connect to {address}: Connection refused")
        if call and self.cut_off and self.cut_off[0] == call:
            self.cut_off.popleft()
            raise asyncio.CancelledError()
        return node


class FakeConnections:
    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster
        self.closed = False

    def broker(self, address: str) -> FakeBroker:
        return FakeBroker(self.cluster, address)

    def coordinator(self, address: str) -> FakeCoordinator:
        return FakeCoordinator(self.cluster, address)

    def redial(self, address: str) -> None:
        """Drop the channel to `address` (after a malformed answer): the next call dials."""
        self.cluster.redials.append(address)

    async def close(self) -> None:
        self.closed = True


@dataclass
class FakeFetchStream:
    """A broker's `FetchStream` call: each fetch answered as `Fetch` answers it. With
    `sessions`, through the real KIP-227 session pair (`replication.fetch_session`): the wire
    requests (`cluster.wire_fetches`) carry only what changed, the broker serves the session's
    whole partition list, and the answer keeps only the partitions with news."""

    broker: FakeBroker
    sessions: bool = False
    closed: bool = False
    fetcher: FetcherSession = field(default_factory=FetcherSession)
    leader: LeaderFetchSession = field(default_factory=LeaderFetchSession)

    async def fetch(
        self, request: m.FetchRequest, *, resend: Collection[tuple[str, int]] = ()
    ) -> m.FetchResponse:
        assert not self.closed, "a fetch on a closed stream"
        if not self.sessions:
            return await self.broker.fetch(request)
        wire = self.fetcher.to_send(request, resend)
        self.broker.cluster.wire_fetches.append(wire)
        try:
            served = self.leader.full_request(wire)
            return self.leader.answer(wire, await self.broker.fetch(served))
        except BaseException:
            # A failed fetch ends the real stream's call, and the next opens a new session.
            self.fetcher.reset()
            self.leader = LeaderFetchSession()
            raise

    def close(self) -> None:
        self.closed = True


@dataclass
class FakeBroker:
    cluster: FakeCluster
    address: str

    async def metadata(
        self, topics: Sequence[str] | None = None, *, timeout_ms: int | None = None
    ) -> MetadataResponse:
        cluster = self.cluster
        view = cluster.stale_views.get(cluster.check_up(self.address), {})
        cluster.calls.append("Metadata")
        answer = MetadataResponse(controller_id=0, cluster_id="fake")
        for node in range(cluster.nodes):
            answer.brokers.append(
                MetadataResponseBroker(node_id=node, host=f"node{node}", port=9092)
            )
        for name in topics or sorted(cluster.topics):
            found = cluster.topics.get(name)
            if found is None:
                answer.topics.append(MetadataResponseTopic(name=name, error_code=3))
                continue
            answer.topics.append(
                MetadataResponseTopic(
                    name=name,
                    topic_id=fake_topic_id(name) if cluster.topic_ids else ZERO_UUID,
                    partitions=[
                        MetadataResponsePartition(
                            partition_index=i,
                            leader_id=view.get((name, i), (p.leader, p.epoch))[0],
                            leader_epoch=view.get((name, i), (p.leader, p.epoch))[1],
                            replica_nodes=[p.leader],
                            isr_nodes=[p.leader],
                        )
                        for i, p in enumerate(found)
                    ],
                )
            )
        return answer

    def _led(self, node: int, topic: str, partition: int, epoch: int) -> FakePartition:
        where = f"{topic}-{partition}"
        found = self.cluster.topics.get(topic)
        if found is None or partition >= len(found):
            raise UnknownTopicOrPartitionError(f"{where}: not hosted here")
        state = found[partition]
        if state.leader != node:
            raise NotLeaderOrFollowerError(f"{where}: broker {node} is not the leader")
        if epoch >= 0 and epoch < state.epoch:
            raise FencedLeaderEpochError(f"{where}: epoch {epoch} < {state.epoch}")
        if epoch > state.epoch:
            raise UnknownLeaderEpochError(f"{where}: epoch {epoch} > {state.epoch}")
        return state

    def _read(self, node: int, request: m.FetchRequest) -> list[m.FetchPartitionResult]:
        results = []
        for entry in request.partitions:
            state = None
            try:
                state = self._led(node, entry.topic, entry.partition, entry.current_leader_epoch)
                if state.errors:
                    raise state.errors.popleft()
                if not state.log_start <= entry.fetch_offset <= state.log_end:
                    raise OffsetOutOfRangeError(
                        f"{entry.topic}-{entry.partition}: offset {entry.fetch_offset} outside "
                        f"[{state.log_start}, {state.log_end}]"
                    )
            except KafkaError as error:
                # As a replog leader answers: its high watermark and log start offset too.
                results.append(
                    m.FetchPartitionResult(
                        entry.topic,
                        entry.partition,
                        error,
                        high_watermark=-1 if state is None else state.high_watermark,
                        log_start_offset=-1 if state is None else state.log_start,
                    )
                )
                continue
            results.append(
                m.FetchPartitionResult(
                    entry.topic,
                    entry.partition,
                    high_watermark=state.high_watermark,
                    last_stable_offset=state.high_watermark,
                    log_start_offset=state.log_start,
                    records=state.read(entry.fetch_offset, entry.partition_max_bytes),
                )
            )
        return results

    async def fetch(
        self, request: m.FetchRequest, *, timeout_ms: int | None = None
    ) -> m.FetchResponse:
        cluster = self.cluster
        node = cluster.check_up(self.address, "Fetch")
        cluster.fetches.append(
            (node, tuple((p.topic, p.partition, p.fetch_offset) for p in request.partitions))
        )
        results = self._read(node, request)
        if request.max_wait_ms > 0 and not any(r.records or r.error for r in results):
            if cluster.appended is None or cluster.appended_loop is not asyncio.get_running_loop():
                cluster.appended = asyncio.Event()
                cluster.appended_loop = asyncio.get_running_loop()
            cluster.appended.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(cluster.appended.wait(), request.max_wait_ms / 1000)
            cluster.check_up(self.address)
            results = self._read(node, request)
        return m.FetchResponse(tuple(results))

    def fetch_stream(self, *, sessions: bool = False) -> FakeFetchStream:
        stream = FakeFetchStream(self, sessions)
        self.cluster.streams.append(stream)
        return stream

    async def list_offsets(
        self, request: m.ListOffsetsRequest, *, timeout_ms: int | None = None
    ) -> m.ListOffsetsResponse:
        node = self.cluster.check_up(self.address, "ListOffsets")
        self.cluster.calls.append("ListOffsets")
        results = []
        for entry in request.partitions:
            try:
                state = self._led(node, entry.topic, entry.partition, entry.current_leader_epoch)
            except KafkaError as error:
                results.append(m.ListOffsetsPartitionResult(entry.topic, entry.partition, error))
                continue
            if entry.timestamp == m.EARLIEST_TIMESTAMP:
                offset, timestamp = state.log_start, -1
            elif entry.timestamp == m.LATEST_TIMESTAMP:
                offset, timestamp = state.high_watermark, -1
            else:
                found = state.offset_for_time(entry.timestamp)
                offset, timestamp = found if found is not None else (-1, -1)
            results.append(
                m.ListOffsetsPartitionResult(
                    entry.topic, entry.partition, None, timestamp, offset, state.epoch
                )
            )
        return m.ListOffsetsResponse(tuple(results))

    async def close(self) -> None:
        pass


@dataclass
class FakeCoordinator:
    """`KafkaCoordinatorClient`'s calls: a stopped node is a NetworkError naming its address, as
    a refused connection to a Kafka listener is."""

    cluster: FakeCluster
    address: str

    def _up(self, call: str = "") -> int:
        if self.cluster.node_of(self.address) in self.cluster.down:
            raise NetworkError(f"cannot connect to {self.address}: connection refused")
        return self.cluster.check_up(self.address, call)

    def _check(self, queue: deque[Exception], call: str) -> None:
        node = self._up(call)
        if queue:
            raise queue.popleft()
        if node != self.cluster.coordinator_node:
            raise NotCoordinatorError(f"broker {node} is not the coordinator")

    async def find_coordinator(
        self, group_id: str, *, timeout_ms: int | None = None
    ) -> tuple[int, str]:
        self._up()
        self.cluster.calls.append("FindCoordinator")
        if self.cluster.find_errors:
            raise self.cluster.find_errors.popleft()
        node = self.cluster.coordinator_node
        return node, self.cluster.address(node)

    async def offset_commit(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        *,
        generation_id: int = -1,
        member_id: str = "",
        committer: cm.Committer = cm.NO_COMMITTER,
        group_instance_id: str | None = None,
        timeout_ms: int | None = None,
    ) -> tuple[dict[TopicPartition, KafkaError | None], tuple[cm.SharedCommit, ...]]:
        self.cluster.calls.append("OffsetCommit")
        self.cluster.committers.append(committer)
        self._check(self.cluster.commit_errors, "OffsetCommit")
        errors = (
            self.cluster.commit_partition_errors.popleft()
            if self.cluster.commit_partition_errors
            else {}
        )
        fenced = self.cluster.groups.commit_error(
            group_id, generation_id, member_id, group_instance_id
        )
        if fenced is not None:
            errors = dict.fromkeys(offsets, fenced)
        answer: dict[TopicPartition, KafkaError | None] = {}
        stored = {}
        for tp, offset in offsets.items():
            answer[tp] = errors.get(tp)
            if answer[tp] is None:
                self.cluster.committed[(group_id, tp)] = offset
                stored[tp] = offset
        self.cluster.commits.append(stored)
        shared = self.cluster.shared_commits
        return answer, (shared.popleft() if shared else ())

    async def offset_fetch(
        self,
        group_id: str,
        partitions: Sequence[TopicPartition] | None,
        *,
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        self.cluster.calls.append("OffsetFetch")
        self._check(self.cluster.offset_fetch_errors, "OffsetFetch")
        assert partitions is not None
        self.cluster.offset_fetches.append(tuple(partitions))
        answer = {tp: self.cluster.committed.get((group_id, tp)) for tp in partitions}
        gate = self.cluster.offset_fetch_gate
        if gate is not None:
            await gate.wait()
        return answer

    async def join_group(
        self, request: gm.JoinGroupRequest, *, timeout_ms: int | None = None
    ) -> gm.JoinGroupResponse:
        self._check(deque(), "JoinGroup")
        return await self.cluster.groups.join(request)

    async def sync_group(
        self, request: gm.SyncGroupRequest, *, timeout_ms: int | None = None
    ) -> gm.SyncGroupResponse:
        self._check(deque(), "SyncGroup")
        return await self.cluster.groups.sync(request)

    async def heartbeat(
        self, request: gm.HeartbeatRequest, *, timeout_ms: int | None = None
    ) -> KafkaError | None:
        self._check(deque(), "Heartbeat")
        if self.cluster.heartbeats_hang:
            self.cluster.calls.append("Heartbeat unanswered")
            wait_ms = 30_000 if timeout_ms is None else timeout_ms
            await asyncio.sleep(wait_ms / 1000)
            raise KafkaTimeoutError(f"Heartbeat: no answer within {wait_ms} ms")
        return self.cluster.groups.heartbeat(request)

    async def leave_group(
        self, request: gm.LeaveGroupRequest, *, timeout_ms: int | None = None
    ) -> gm.LeaveGroupResponse:
        self._check(deque(), "LeaveGroup")
        return self.cluster.groups.leave(request)

    async def consumer_group_heartbeat(
        self, request: cgm.ConsumerGroupHeartbeatRequest, *, timeout_ms: int | None = None
    ) -> cgm.ConsumerGroupHeartbeatResponse:
        self._check(deque(), "ConsumerGroupHeartbeat")
        counts = {name: len(parts) for name, parts in self.cluster.topics.items()}
        return self.cluster.groups.consumer_heartbeat(request, counts)

    async def close(self) -> None:
        pass
