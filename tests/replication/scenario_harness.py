"""An in-process cluster for the replication scenarios of docs/design/replication.md#scenarios.

Imported by module name (`from scenario_harness import Cluster`): pytest puts this folder on
`sys.path` (tests/ holds no packages).

Real `ReplicaManager`s, each over its own `LogManager` in a temporary directory, in one process.
The harness plays everything else, step by step and deterministically:

- the controller: it owns the metadata image (built from the same records the real controller
  writes), publishes it to the brokers with `apply_image`, answers their AlterPartition requests
  (`pending_isr_changes` -> `on_isr_change_result`), fences, unfences, elects (clean, forced or
  unclean) with Kafka's KRaft rules of docs/design/replication.md#leader-election, without ELR;
- the network: `deliver_fetch` moves one follower Fetch to its leader and the answer back, and
  can drop the request or the answer; `isolate` cuts a broker off the data plane. With
  `fetch_sessions`, each follower fetches from each leader as the real fetcher does: in a
  replica fetch stream's incremental fetch session, served by the leader's
  `BrokerCores.replica_fetch` (idle entries answered from kept reads, `repeat_reads`); a
  failed or dropped exchange, or a crash of either side, ends the stream and its session
  on both sides;
- the clock: one `ManualClock` for every broker and log manager; nothing moves unless a test
  advances it (`advance` also runs every broker's `tick`);
- failures: `crash` closes the logs without flushing (no clean-shutdown marker, no checkpoint)
  and can cut a partition's active `.log` back to a batch boundary (lost page cache) or tear its
  tail; `restart` opens a new LogManager and ReplicaManager on the same directory.

It also keeps the ledger of acknowledged writes (acks=all) and checks the two invariants every
scenario ends with: each acknowledged record is at its offset on the leader and every ISR
member, and live replicas are byte-identical below the smallest log end offset.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from uuid import UUID

from replog.errors import (
    FencedLeaderEpochError,
    IneligibleReplicaError,
    InvalidUpdateVersionError,
    KafkaError,
)
from replog.quorum.metadata.delta import MetadataDelta
from replog.quorum.metadata.image import MetadataImage, MetadataProvenance
from replog.quorum.metadata.partition_registration import PartitionRegistration
from replog.quorum.metadata.records import (
    LEADER_UNCHANGED,
    METADATA_VERSION_FEATURE,
    NO_LEADER,
    RECOVERY_STATE_UNCHANGED,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    ConfigResourceType,
    Endpoint,
    FeatureLevelRecord,
    FenceChange,
    LeaderRecoveryState,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from replog.record import BatchOptions, RecordBatch, build_batch, iter_frames, read_header
from replog.replication.fetch_session import (
    SESSION_ADDS_PER_REQUEST,
    SESSION_CHANGES_PER_REQUEST,
    FetcherSession,
    LeaderFetchSession,
)
from replog.replication.leader_state import IsrChange
from replog.replication.messages import (
    ACKS_ALL,
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    IsolationLevel,
    OffsetForLeaderPartition,
    OffsetsForLeaderEpochRequest,
    ProducePartition,
    ProducePartitionResult,
    ProduceRequest,
)
from replog.server.data_plane.broker_cores import BrokerCores
from replog.server.data_plane.repeat_reads import RepeatReads
from replog.server.data_plane.replica_manager import ReplicaManager, ReplicaManagerConfig
from replog.storage.log import Log
from replog.storage.log_config import LogConfig
from replog.storage.log_manager import LogManager, LogManagerConfig
from replog.testing import LoopTasks, ManualClock
from replog.wire import broker_codec

START_MS = 1_700_000_000_000
QUORUM_EPOCH = 3
# An answer that never comes within this much real time is a bug in the broker (with
# replica.fetch.wait.max.ms = 0 every fetch answers at once), not something to wait out.
REAL_TIMEOUT_S = 5.0


@dataclass
class Broker:
    broker_id: int
    log_dir: str
    config: ReplicaManagerConfig
    log_manager: LogManager | None = None
    replica_manager: ReplicaManager | None = None
    incarnations: int = 0

    @property
    def alive(self) -> bool:
        return self.replica_manager is not None

    @property
    def rm(self) -> ReplicaManager:
        assert self.replica_manager is not None, f"broker {self.broker_id} is down"
        return self.replica_manager

    @property
    def lm(self) -> LogManager:
        assert self.log_manager is not None, f"broker {self.broker_id} is down"
        return self.log_manager


@dataclass
class _FetchConnection:
    """One follower's replica fetch stream to one leader: both sides of its fetch
    session."""

    fetcher: FetcherSession = field(
        default_factory=lambda: FetcherSession(
            SESSION_ADDS_PER_REQUEST, SESSION_CHANGES_PER_REQUEST
        )
    )
    leader_session: LeaderFetchSession = field(default_factory=LeaderFetchSession)
    kept_reads: RepeatReads = field(default_factory=RepeatReads)


@dataclass
class Exchange:
    """One follower fetch as the network carried it (None parts were dropped)."""

    follower_id: int
    leader_id: int
    request: FetchRequest
    response: FetchResponse | None

    @property
    def diverging_epochs(self) -> list[tuple[int, int]]:
        if self.response is None:
            return []
        return [
            (p.diverging_epoch.leader_epoch, p.diverging_epoch.end_offset)
            for p in self.response.partitions
            if p.diverging_epoch is not None
        ]

    @property
    def errors(self) -> list[KafkaError]:
        if self.response is None:
            return []
        return [p.error for p in self.response.partitions if p.error is not None]


@dataclass
class Ledger:
    """Records acknowledged under acks=all, per topic: offset -> value."""

    acked: dict[str, dict[int, bytes]] = field(default_factory=dict)
    # Offsets a scenario documents as lost (e.g. unclean election), with the reason.
    forgiven: dict[str, dict[int, str]] = field(default_factory=dict)

    def record(self, topic: str, base_offset: int, values: Sequence[bytes]) -> None:
        """Acked at `base_offset` on: no offset may be acknowledged twice."""
        acked = self.acked.setdefault(topic, {})
        for i, value in enumerate(values):
            offset = base_offset + i
            assert offset not in acked, (
                f"{topic}: offset {offset} acknowledged twice: {acked[offset]!r} and {value!r}"
            )
            acked[offset] = value

    def forgive_from(self, topic: str, offset: int, reason: str) -> list[int]:
        """Stop requiring acked offsets >= `offset` (a loss docs/design/replication.md#scenarios
        documents)."""
        lost = sorted(o for o in self.acked.get(topic, {}) if o >= offset)
        for o in lost:
            self.forgiven.setdefault(topic, {})[o] = reason
            del self.acked[topic][o]
        return lost


class Cluster:
    """Brokers, controller, network and clock of one scenario (see the module docstring)."""

    def __init__(
        self,
        root: Path,
        broker_ids: Iterable[int],
        *,
        replica_lag_time_ms_max: int = 10_000,
        replica_fetch_backoff_ms: int = 10,
        default_min_insync_replicas: int = 1,
        broker_overrides: dict[int, dict[str, Any]] | None = None,
        log_config: LogConfig | None = None,
        fetch_sessions: bool = False,
    ) -> None:
        self.root = root
        self.clock = ManualClock(START_MS)
        self.log_config = log_config or LogConfig(segment_index_bytes=64 * 1024)
        self.image = _replayed(MetadataImage.EMPTY, FeatureLevelRecord(METADATA_VERSION_FEATURE, 7))
        self.brokers: dict[int, Broker] = {}
        self.isolated: set[int] = set()
        self.held_back: set[int] = set()  # brokers that do not receive metadata for now
        self.exchanges: list[Exchange] = []
        self.ledger = Ledger()
        self.topic_ids: dict[str, UUID] = {}
        self._next_broker_epoch = 100
        self._tasks: dict[int, list[asyncio.Task[Any]]] = {}
        self.fetch_sessions = fetch_sessions
        self._connections: dict[tuple[int, int], _FetchConnection] = {}  # (follower, leader)
        self._services: dict[int, tuple[ReplicaManager, BrokerCores]] = {}
        overrides = broker_overrides or {}
        for broker_id in broker_ids:
            config = ReplicaManagerConfig(
                broker_id=broker_id,
                replica_lag_time_ms_max=replica_lag_time_ms_max,
                replica_fetch_wait_ms_max=0,
                replica_fetch_backoff_ms=replica_fetch_backoff_ms,
                default_min_insync_replicas=default_min_insync_replicas,
            )
            config = replace(config, **overrides.get(broker_id, {}))
            log_dir = str(root / f"broker-{broker_id}")
            self.brokers[broker_id] = Broker(broker_id, log_dir, config)
        for broker_id in self.brokers:
            self._start(broker_id)
            self._replay(self._registration(broker_id))
        self.publish()

    # --- brokers --------------------------------------------------------------------------

    def _registration(self, broker_id: int) -> RegisterBrokerRecord:
        self._next_broker_epoch += 1
        broker = self.brokers[broker_id]
        broker.incarnations += 1
        return RegisterBrokerRecord(
            broker_id,
            UUID(int=1000 * broker.incarnations + broker_id),
            self._next_broker_epoch,
            endpoints=(Endpoint("PLAINTEXT", f"broker{broker_id}", 9092),),
            fenced=False,
        )

    def _start(self, broker_id: int) -> None:
        broker = self.brokers[broker_id]
        broker.log_manager = LogManager(
            broker.log_dir,
            LogManagerConfig(log=self.log_config),
            clock=self.clock,
            task_clock=self.clock,
        )
        broker.replica_manager = ReplicaManager(
            broker.config,
            broker.log_manager,
            clock=self.clock,
            # Record timestamps come from this clock too: producer-id expiry must compare
            # them with it, not with the wall clock (which would expire every producer).
            wall_clock=self.clock,
            broker_epoch=lambda: self.broker_epoch(broker_id),
            tasks=LoopTasks(),
        )

    def broker_epoch(self, broker_id: int) -> int:
        registration = self.image.cluster.brokers.get(broker_id)
        return -1 if registration is None else registration.broker_epoch

    def rm(self, broker_id: int) -> ReplicaManager:
        return self.brokers[broker_id].rm

    def log(self, broker_id: int, topic: str, partition: int = 0) -> Log:
        return self.brokers[broker_id].lm.get_log(topic, partition)

    def alive_ids(self) -> list[int]:
        return [b for b, broker in self.brokers.items() if broker.alive]

    def crash(
        self,
        broker_id: int,
        *,
        cut_to_offset: dict[str, int] | None = None,
        torn_tail: dict[str, bytes] | None = None,
    ) -> None:
        """Hard crash: no flush, no checkpoint, no clean-shutdown marker.

        `cut_to_offset[topic]`: the partition's active `.log` loses everything from the batch
        starting at that offset (page cache lost at power failure). `torn_tail[topic]`: those
        bytes end up appended to the active `.log` (a write half done when the power went).
        """
        broker = self.brokers[broker_id]
        for task in self._tasks.pop(broker_id, []):
            task.cancel()
        for key in [k for k in self._connections if broker_id in k]:
            del self._connections[key]  # the connections die with the process
        for log in broker.lm.all_logs().values():
            log.close_without_flush()
        broker.log_manager = None
        broker.replica_manager = None
        for topic, offset in (cut_to_offset or {}).items():
            cut_active_segment(self.partition_dir(broker_id, topic), offset)
        for topic, tail in (torn_tail or {}).items():
            with open(active_segment_path(self.partition_dir(broker_id, topic)), "ab") as f:
                f.write(tail)

    def restart(self, broker_id: int, *, publish: bool = True) -> None:
        """A new incarnation on the same log dir: recovery, registration (new broker epoch,
        unfenced), then the current image. Leaderless partitions whose ISR holds it elect it."""
        assert not self.brokers[broker_id].alive
        self._start(broker_id)
        self._replay(self._registration(broker_id))
        self._elect_leaderless(broker_id)
        if publish:
            self.publish()

    def partition_dir(self, broker_id: int, topic: str, partition: int = 0) -> str:
        return os.path.join(self.brokers[broker_id].log_dir, f"{topic}-{partition}")

    def checkpoint_high_watermarks(self, broker_id: int) -> None:
        """The 5 s HW checkpoint task runs now on this broker."""
        self.brokers[broker_id].lm.checkpoint_high_watermarks()

    # --- controller ----------------------------------------------------------------------

    def _replay(self, *records: MetadataRecord) -> None:
        self.image = _replayed(self.image, *records)

    def publish(self, only: Iterable[int] | None = None) -> None:
        """Send the current image to every live broker not held back (or to `only`)."""
        targets = list(only) if only is not None else self.alive_ids()
        for broker_id in targets:
            if broker_id in self.held_back or not self.brokers[broker_id].alive:
                continue
            self.rm(broker_id).apply_image(self.image)

    def create_topic(
        self,
        name: str,
        replicas: Sequence[int],
        *,
        isr: Sequence[int] | None = None,
        leader: int | None = None,
        leader_epoch: int = 0,
        configs: dict[str, str] | None = None,
    ) -> UUID:
        topic_id = UUID(int=len(self.topic_ids) + 1)
        self.topic_ids[name] = topic_id
        records: list[MetadataRecord] = [TopicRecord(name, topic_id)]
        for key, value in (configs or {}).items():
            records.append(ConfigRecord(ConfigResourceType.TOPIC, name, key, value))
        records.append(
            PartitionRecord(
                topic_id,
                0,
                tuple(replicas),
                tuple(isr if isr is not None else replicas),
                replicas[0] if leader is None else leader,
                leader_epoch=leader_epoch,
            )
        )
        self._replay(*records)
        self.publish()
        return topic_id

    def partition(self, topic: str, partition: int = 0) -> PartitionRegistration:
        return self.image.topics.by_name[topic].partitions[partition]

    def change_partition(
        self,
        topic: str,
        *,
        isr: Sequence[int] | None = None,
        leader: int = LEADER_UNCHANGED,
        recovering: bool | None = None,
        publish: bool = True,
    ) -> PartitionRegistration:
        """One PartitionChangeRecord: naming a leader (even the same) bumps the leader epoch."""
        state = RECOVERY_STATE_UNCHANGED
        if recovering is not None:
            state = int(
                LeaderRecoveryState.RECOVERING if recovering else LeaderRecoveryState.RECOVERED
            )
        self._replay(
            PartitionChangeRecord(
                self.topic_ids[topic],
                0,
                isr=None if isr is None else tuple(isr),
                leader=leader,
                leader_recovery_state=state,
            )
        )
        if publish:
            self.publish()
        return self.partition(topic)

    def elect(
        self, topic: str, leader: int, *, isr: Sequence[int] | None = None, publish: bool = True
    ) -> PartitionRegistration:
        """A clean election (or a forced one, e.g. preferred): leader epoch + 1."""
        return self.change_partition(topic, isr=isr, leader=leader, publish=publish)

    def elect_unclean(self, topic: str, leader: int) -> PartitionRegistration:
        """KRaft unclean election (docs/design/replication.md#leader-election): ISR := [leader],
        RECOVERING, leader epoch + 1."""
        return self.change_partition(topic, isr=[leader], leader=leader, recovering=True)

    def fence(self, broker_id: int, *, publish: bool = True) -> None:
        """The broker missed its heartbeats: fenced, dropped from every ISR unless it is the last
        member (no ELR: the ISR keeps it and the leader becomes -1), leaders moved
        (docs/design/replication.md#leader-election)."""
        records: list[MetadataRecord] = [
            BrokerRegistrationChangeRecord(
                broker_id, self.broker_epoch(broker_id), fenced=FenceChange.FENCE
            )
        ]
        fenced = {broker_id} | {
            b for b, r in self.image.cluster.brokers.items() if r.fenced or not r.is_active
        }
        for topic in self.image.topics.by_name.values():
            for partition_id, registration in topic.partitions.items():
                if broker_id not in registration.isr and registration.leader != broker_id:
                    continue
                isr = tuple(r for r in registration.isr if r != broker_id) or registration.isr
                leader = LEADER_UNCHANGED
                if registration.leader == broker_id:
                    candidates = [r for r in registration.replicas if r in isr and r not in fenced]
                    leader = candidates[0] if candidates else NO_LEADER
                records.append(
                    PartitionChangeRecord(
                        topic.topic_id,
                        partition_id,
                        isr=None if isr == registration.isr else isr,
                        leader=leader,
                    )
                )
        self._replay(*records)
        if publish:
            self.publish()

    def _elect_leaderless(self, broker_id: int) -> None:
        for topic in self.image.topics.by_name.values():
            for partition_id, registration in topic.partitions.items():
                if registration.leader == NO_LEADER and broker_id in registration.isr:
                    self._replay(
                        PartitionChangeRecord(topic.topic_id, partition_id, leader=broker_id)
                    )

    def answer_isr_changes(self) -> int:
        """Answer every pending AlterPartition as the KRaft controller would; returns how many
        were committed."""
        committed = 0
        for broker_id in self.alive_ids():
            rm = self.rm(broker_id)
            for change in rm.pending_isr_changes():
                registration = self.image.topics.by_id[change.topic_id].partitions[change.partition]
                error = self.check_isr_change(broker_id, change, registration)
                if error is None:
                    state = RECOVERY_STATE_UNCHANGED
                    if change.leader_recovery_state != registration.leader_recovery_state:
                        state = change.leader_recovery_state
                    self._replay(
                        PartitionChangeRecord(
                            change.topic_id,
                            change.partition,
                            isr=tuple(change.new_isr),
                            leader_recovery_state=state,
                        )
                    )
                    registration = self.image.topics.by_id[change.topic_id].partitions[
                        change.partition
                    ]
                    committed += 1
                rm.on_isr_change_result(
                    change,
                    error,
                    registration.isr,
                    registration.leader_epoch,
                    registration.partition_epoch,
                )
                if error is None:
                    self.publish()
        return committed

    def check_isr_change(
        self, broker_id: int, change: IsrChange, registration: PartitionRegistration
    ) -> KafkaError | None:
        where = f"{change.topic}-{change.partition}"
        if registration.leader != broker_id or change.leader_epoch != registration.leader_epoch:
            return FencedLeaderEpochError(
                f"{where}: AlterPartition from broker {broker_id} at leader epoch "
                f"{change.leader_epoch}; the partition is at {registration.leader_epoch}"
            )
        if change.partition_epoch != registration.partition_epoch:
            return InvalidUpdateVersionError(
                f"{where}: partition epoch {change.partition_epoch}, current "
                f"{registration.partition_epoch}"
            )
        brokers = self.image.cluster.brokers
        for replica, epoch in zip(change.new_isr, change.broker_epochs, strict=False):
            if replica in registration.isr:
                continue
            reg = brokers.get(replica)
            if reg is None or not reg.is_active or (epoch != -1 and epoch != reg.broker_epoch):
                return IneligibleReplicaError(f"{where}: broker {replica} may not join the ISR")
        return None

    # --- network -------------------------------------------------------------------------

    def isolate(self, *broker_ids: int) -> None:
        self.isolated.update(broker_ids)

    def heal(self, *broker_ids: int) -> None:
        self.isolated.difference_update(broker_ids or set(self.isolated))

    async def deliver_fetch(
        self,
        follower_id: int,
        leader_id: int | None = None,
        *,
        drop_request: bool = False,
        drop_response: bool = False,
    ) -> Exchange | None:
        """One follower Fetch: build, carry to the leader, answer, carry back, process.

        None when the follower has nothing to fetch (no source, or in backoff). A dropped
        request or response, a dead or isolated peer: the follower sees a failed RPC.
        """
        follower = self.rm(follower_id)
        if leader_id is None:
            sources = follower.fetch_sources()
            if not sources:
                return None
            assert len(sources) == 1, f"broker {follower_id} follows {sources}; name one"
            leader_id = sources[0]
        now = self.clock.now_ms
        request = follower.build_follower_fetch(leader_id, now)
        if request is None:
            return None
        leader = self.brokers[leader_id]
        cut = {follower_id, leader_id} & self.isolated
        if drop_request or cut or not leader.alive:
            self._connections.pop((follower_id, leader_id), None)  # the connection failed
            follower.follower_fetch_failed(leader_id, request, now)
            exchange = Exchange(follower_id, leader_id, request, None)
            self.exchanges.append(exchange)
            return exchange
        response = await asyncio.wait_for(
            self._leader_fetch(follower_id, leader_id, request), REAL_TIMEOUT_S
        )
        exchange = Exchange(follower_id, leader_id, request, response)
        self.exchanges.append(exchange)
        if drop_response:
            self._connections.pop((follower_id, leader_id), None)
            exchange.response = None
            follower.follower_fetch_failed(leader_id, request, self.clock.now_ms)
        else:
            follower.process_follower_fetch(leader_id, request, response, self.clock.now_ms)
        return exchange

    async def _leader_fetch(
        self, follower_id: int, leader_id: int, request: FetchRequest
    ) -> FetchResponse:
        """The leader's answer to `request`: straight from its replica manager, or with
        `fetch_sessions` through its broker service on the pair's connection's session (whose
        answer, after the first, holds only the partitions with news, as the wire's does)."""
        rm = self.rm(leader_id)
        if not self.fetch_sessions:
            return await rm.fetch(request)
        served = self._services.get(leader_id)
        if served is None or served[0] is not rm:  # a new incarnation serves anew
            service = BrokerCores(leader_id, replica_manager=rm)
            served = self._services[leader_id] = (rm, service)
        stream = self._connections.setdefault((follower_id, leader_id), _FetchConnection())
        answer = await served[1].replica_fetch(
            broker_codec.fetch_request_to_proto(stream.fetcher.to_send(request)),
            stream.leader_session,
            stream.kept_reads,
        )
        return stream.fetcher.read_answer(answer)

    def _fingerprint(self) -> tuple[object, ...]:
        state: list[object] = [self.image.provenance.last_offset]
        for broker_id in self.alive_ids():
            for tp, log in sorted(self.brokers[broker_id].lm.all_logs().items()):
                state.append(
                    (broker_id, tp, log.log_start_offset, log.log_end_offset, log.high_watermark)
                )
        return tuple(state)

    async def replicate_round(
        self, followers: Iterable[int] | None = None, *, answer: bool = True
    ) -> None:
        """Every live, connected follower fetches once from each of its sources; the
        controller then answers the AlterPartitions this caused (unless not `answer`)."""
        for broker_id in list(followers) if followers is not None else self.alive_ids():
            if not self.brokers[broker_id].alive or broker_id in self.isolated:
                continue
            for source in self.rm(broker_id).fetch_sources():
                await self.deliver_fetch(broker_id, source)
        if answer:
            self.answer_isr_changes()
        await asyncio.sleep(0)

    async def settle(self, followers: Iterable[int] | None = None, max_rounds: int = 50) -> None:
        """Replicate until nothing moves (offsets, HWs, metadata), allowing for fetch backoff."""
        chosen = list(followers) if followers is not None else None
        idle = 0
        for _ in range(max_rounds):
            before = self._fingerprint()
            await self.replicate_round(chosen)
            if self._fingerprint() == before:
                idle += 1
                if idle >= 2:
                    return
                # A follower may sit in replica.fetch.backoff.ms after an error.
                self.advance(max(b.config.replica_fetch_backoff_ms for b in self.brokers.values()))
            else:
                idle = 0
        raise AssertionError(f"replication did not settle in {max_rounds} rounds")

    # --- clock ---------------------------------------------------------------------------

    def tick(self) -> None:
        for broker_id in self.alive_ids():
            self.rm(broker_id).tick(self.clock.now_ms)

    def advance(self, ms: int) -> None:
        self.clock.advance(ms)
        self.tick()

    async def advance_past_lag(self, leader_id: int) -> None:
        """Enough time for the isr-expiration task to drop a stuck follower
        (docs/design/replication.md#isr-shrink: lag plus up to one period of lag/2), in steps so the
        task gets its chances; connected followers keep fetching meanwhile, so only the cut-off ones
        fall out."""
        lag = self.brokers[leader_id].config.replica_lag_time_ms_max
        step = max(lag // 4, 1)
        for _ in range(8):
            self.advance(step)
            await self.replicate_round()

    # --- clients -------------------------------------------------------------------------

    def start_produce(
        self,
        broker_id: int,
        topic: str,
        values: Sequence[bytes],
        *,
        acks: int = ACKS_ALL,
        timeout_ms: int = 30_000,
        batch_options: BatchOptions | None = None,
    ) -> asyncio.Task[ProducePartitionResult]:
        records = build_batch(
            [(self.clock.now_ms, None, v, ()) for v in values], **(batch_options or {})
        )
        request = ProduceRequest(acks, timeout_ms, (ProducePartition(topic, 0, records),))
        rm = self.rm(broker_id)

        async def run() -> ProducePartitionResult:
            response = await rm.produce(request)
            (result,) = response.partitions
            if acks == ACKS_ALL and result.error is None:
                self.ledger.record(topic, result.base_offset, values)
            return result

        task = asyncio.ensure_future(run())
        self._tasks.setdefault(broker_id, []).append(task)
        return task

    def start_delete_records(
        self, broker_id: int, topic: str, offset: int, *, timeout_ms: int = 30_000
    ) -> asyncio.Task[DeleteRecordsResponse]:
        """DeleteRecords below `offset` on `broker_id`, answered when the low watermark
        reaches it; cancelled, like a produce, if that broker crashes first."""
        request = DeleteRecordsRequest(
            (DeleteRecordsPartition(topic, 0, offset),), timeout_ms=timeout_ms
        )
        task = asyncio.ensure_future(self.rm(broker_id).delete_records(request))
        self._tasks.setdefault(broker_id, []).append(task)
        return task

    async def produce(
        self,
        broker_id: int,
        topic: str,
        values: Sequence[bytes],
        *,
        acks: int = ACKS_ALL,
        timeout_ms: int = 30_000,
        replicate: bool = True,
        batch_options: BatchOptions | None = None,
    ) -> ProducePartitionResult:
        """Produce one batch and, for acks=all, replicate until the answer comes."""
        task = self.start_produce(
            broker_id, topic, values, acks=acks, timeout_ms=timeout_ms, batch_options=batch_options
        )
        return await self.finish(task, replicate=replicate)

    async def finish(
        self, task: asyncio.Task[ProducePartitionResult], *, replicate: bool = True
    ) -> ProducePartitionResult:
        for _ in range(100):
            for _ in range(3):
                await asyncio.sleep(0)
            if task.done():
                return task.result()
            if replicate:
                await self.replicate_round()
        raise AssertionError("the produce did not complete")

    async def consumer_fetch(
        self, broker_id: int, topic: str, offset: int, *, leader_epoch: int = -1
    ) -> Any:
        request = FetchRequest(
            (FetchPartition(topic, 0, offset, current_leader_epoch=leader_epoch),),
            max_wait_ms=0,
            isolation_level=IsolationLevel.READ_UNCOMMITTED,
        )
        response = await asyncio.wait_for(self.rm(broker_id).fetch(request), REAL_TIMEOUT_S)
        (result,) = response.partitions
        return result

    def offsets_for_leader_epoch(
        self,
        broker_id: int,
        topic: str,
        leader_epoch: int,
        current_leader_epoch: int = -1,
        replica_id: int = -1,
    ) -> tuple[int, int]:
        request = OffsetsForLeaderEpochRequest(
            (OffsetForLeaderPartition(topic, 0, leader_epoch, current_leader_epoch),),
            replica_id=replica_id,
        )
        (result,) = self.rm(broker_id).offsets_for_leader_epoch(request).partitions
        assert result.error is None, result.error
        return result.leader_epoch, result.end_offset

    # --- inspection and invariants -------------------------------------------------------

    def records(self, broker_id: int, topic: str) -> dict[int, bytes | None]:
        log = self.log(broker_id, topic)
        found: dict[int, bytes | None] = {}
        for _, data in log.read_batches(log.log_start_offset):
            for record in RecordBatch.parse(data).records():
                found[record.offset] = record.value
        return found

    def batches(self, broker_id: int, topic: str, start: int, end: int) -> list[tuple[int, bytes]]:
        return list(self.log(broker_id, topic).read_batches(start, end))

    def epochs(self, broker_id: int, topic: str) -> list[tuple[int, int]]:
        cache = self.log(broker_id, topic).leader_epoch_cache
        return [(e.leader_epoch, e.start_offset) for e in cache.entries()]

    def assert_acked_present(self, topic: str) -> None:
        """Every acked record is on the leader and every live ISR member, unless DeleteRecords
        removed it there (below that replica's log start offset)."""
        registration = self.partition(topic)
        members = {registration.leader, *registration.isr} - {NO_LEADER}
        acked = self.ledger.acked.get(topic, {})
        for broker_id in sorted(members):
            if not self.brokers[broker_id].alive:
                continue
            found = self.records(broker_id, topic)
            start = self.log(broker_id, topic).log_start_offset
            for offset, value in sorted(acked.items()):
                assert offset < start or found.get(offset) == value, (
                    f"{topic}: broker {broker_id} ("
                    f"{'leader' if broker_id == registration.leader else 'ISR'}, ISR "
                    f"{list(registration.isr)}) has {found.get(offset)!r} at offset {offset}, "
                    f"acked as {value!r}"
                )

    def assert_identical(self, topic: str, replicas: Iterable[int] | None = None) -> int:
        """Live replicas hold the same batches below the smallest log end offset; returns it."""
        ids = [
            b
            for b in (replicas if replicas is not None else self.partition(topic).replicas)
            if self.brokers[b].alive
        ]
        logs = {b: self.log(b, topic) for b in ids}
        start = max(log.log_start_offset for log in logs.values())
        end = min(log.log_end_offset for log in logs.values())
        reference = self.batches(ids[0], topic, start, end)
        for broker_id in ids[1:]:
            assert self.batches(broker_id, topic, start, end) == reference, (
                f"brokers {ids[0]} and {broker_id} differ below offset {end}"
            )
        return end

    def assert_invariants(self, topic: str) -> None:
        self.assert_acked_present(topic)
        self.assert_identical(topic)

    async def __aenter__(self) -> Cluster:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        for tasks in self._tasks.values():
            for task in tasks:
                task.cancel()
        for tasks in self._tasks.values():
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        self._tasks.clear()
        for broker in self.brokers.values():
            if broker.log_manager is not None:
                for log in broker.log_manager.all_logs().values():
                    log.close_without_flush()
            broker.log_manager = None
            broker.replica_manager = None


# --- files ----------------------------------------------------------------------------------


def active_segment_path(partition_dir: str) -> str:
    logs = sorted(f for f in os.listdir(partition_dir) if f.endswith(".log"))
    assert logs, f"no segment in {partition_dir}"
    return os.path.join(partition_dir, logs[-1])


def cut_active_segment(partition_dir: str, offset: int) -> int:
    """Drop the active `.log` from the batch holding `offset` on; returns the new size."""
    path = active_segment_path(partition_dir)
    with open(path, "rb") as f:
        data = f.read()
    size = len(data)
    for position, _size in iter_frames(data):
        header = read_header(data, position)
        if header.base_offset + header.last_offset_delta >= offset:
            size = position
            break
    os.truncate(path, size)
    return size


def _replayed(image: MetadataImage, *records: MetadataRecord) -> MetadataImage:
    delta = MetadataDelta(image)
    for offset, record in enumerate(records, start=image.provenance.last_offset + 1):
        delta.replay(record, offset)
    return delta.apply(
        MetadataProvenance(image.provenance.last_offset + len(records), QUORUM_EPOCH)
    )
