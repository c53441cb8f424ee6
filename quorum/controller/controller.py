"""QuorumController: the pure core of a KRaft-style metadata controller (KIP-631).

Inputs, all on one thread: write operations (`write` and the request helpers), reads (`read`),
Raft events (`handle_commit`, `handle_load_snapshot`, `handle_leader_change`) and time
(`tick(now_ms)`, with `next_wake_ms` saying when the next tick is due). Outputs: the batches
it hands to the injected `MetadataLog` (`prepare_append`, `resign`) and the `PendingResponse`
of each write, settled when its records commit.

Rules:
- Only the active controller writes. A write on a standby fails at once with NOT_CONTROLLER,
  naming the active controller when one is known.
- Write path (docs/design/kraft.md#controller): run the operation against the latest state; split
  its records into batches of at most `max_records_per_batch` (an atomic result must fit in one);
  for each batch ask the log for its offsets, replay every record at its future offset at once,
  and snapshot the state at the batch's last offset; then park the response until that offset
  commits. A write without records waits for the last batch written (or answers at once if
  every one is committed), so it never reveals state that could be rolled back.
- Commit path: the active controller already replayed its records, so a commit only advances
  the committed and stable offsets and completes the responses up to the stable offset. A
  standby replays the committed records, then advances. A standby's replay of one batch may
  run in steps (`commit_in_steps`, `REPLAY_STEP_RECORDS` records each: a restart replays the
  whole log, and one batch can hold thousands of records); the caller takes no other input
  between two steps, and the offsets move only at the last one, so no read, write or tick
  sees a half-replayed batch; a Raft event between two steps (a leader change, a snapshot
  load, another batch) is refused with an error, the loader's rule too. A snapshot load runs
  in the same steps (`load_snapshot_in_steps`) under the same rule: the state is emptied at
  its first step and stands for the snapshot's offset only after its last.
- Reads are served at the last stable offset: never uncommitted state. Standbys serve them
  too (their committed state may lag the leader's); whether a request to a standby gets
  NOT_CONTROLLER instead is the service's decision.
- Claiming leadership: activate the offsets (writes start after the last committed offset),
  start a fresh heartbeat session for every registered broker, write the bootstrap records if
  the log holds no metadata yet (`metadata.version` first, then the configured SCRAM
  credentials), move fenced brokers still named
  in ISRs out of them and of their leaderships (a session-expiry fencing writes its fencing
  record first, and a predecessor may have failed over before the rest of its moves), elect
  leaders for leaderless partitions an active ISR member can lead (a predecessor may have
  lost them half way), and start the periodic tasks.
- Renouncing (another leader, an unknown one, or a failure of our own): revert every
  structure to the last stable offset, drop the heartbeat sessions and periodic tasks, and fail
  every parked response with NOT_CONTROLLER naming the new leader when known. The state is
  then exactly the committed state, and a standby's from then on: it replays what the new
  leader commits, possibly including its own formerly uncommitted records. A failover never
  replays the log from the start: a standby already holds the committed state.
- An unexpected exception in a write on the active controller makes it renounce and resign
  Raft leadership (the caller gets UNKNOWN_SERVER_ERROR); a `KafkaError` is just the caller's
  answer. So does any sign that its idea of the log is wrong: a batch placed at another offset
  than expected, or a committed batch it did not write. A replay failure is fatal: it
  propagates, and the shell must stop the process.
- Stepped writes (docs/controller.md#stepped-writes): a result with `then` or `after` is one
  step; the next runs at a later tick (or `run_steps`, which a shell may call more often than
  it ticks), against the latest state. A tick runs the queued steps in order while they have
  written fewer than `max_partition_changes_per_step` records in it (one step at least); the
  others keep their place for the next tick. At most one sweep of
  each kind started by the controller runs at a time: leaderless-partition elections, and
  the moves of fenced brokers still named in ISRs (started whenever a tick finds one;
  `next_wake_ms` asks for that tick at once, as no queued step stands for those moves).
  A `then` write is answered by its last step; an `after` chain answers nobody. A step
  whose batch is refused without a failover ends its write there, and its `on_drop` tells
  the step's owner (an evacuation mark goes with it).
  Renouncing drops the steps left and fails their callers with NOT_CONTROLLER.
- Periodic work on the active controller (docs/design/kraft.md#controller): a NoOpRecord every
  `metadata_max_idle_interval_ms`; fencing of brokers whose session expired, one broker per
  write, oldest first, when the oldest session expires; preferred-leader elections every
  `leader_imbalance_check_interval_ms` (if `auto_leader_rebalance_enable`) and unclean
  elections every `unclean_leader_election_interval_ms`, each bounded per run and rerun at the
  next tick while partitions are left over; clean elections for leaderless partitions with an
  active ISR member on activation and every `leaderless_partition_check_interval_ms`
  (docs/controller.md#leaderless-partitions), in bounded steps.

Theory of operation: `OffsetControl` owns the snapshot registry. Between the last stable offset
and the newest snapshot lie exactly the in-flight batches; the purgatory holds their
responses, keyed by their last offsets. A commit deletes the snapshots it passes and completes
the responses it covers; a renounce reverts to the stable snapshot and fails the rest. Raft
batches may merge several of our writes, but never split one, so a commit always ends at one
of our snapshots (or at a control batch, which changes no metadata).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Generic, TypeVar
from uuid import UUID

from replog.common.feature_update import FeatureUpdate
from replog.errors import (
    InvalidRequestError,
    KafkaError,
    MetadataReplayError,
    NotControllerError,
    RequestTimedOutError,
    UnknownServerError,
)
from replog.quorum.controller.acl_state import AclState
from replog.quorum.controller.broker_heartbeat import BrokerHeartbeatReply, BrokerHeartbeatRequest
from replog.quorum.controller.cluster_control import (
    BrokerRegistrationReply,
    BrokerRegistrationRequest,
    ClusterControl,
)
from replog.quorum.controller.config_control import AlterConfigOp, ConfigControl
from replog.quorum.controller.controller_config import ControllerConfig
from replog.quorum.controller.controller_result import ControllerResult, Step, StepContext
from replog.quorum.controller.deferred_queue import DeferredQueue
from replog.quorum.controller.feature_control import FeatureControl
from replog.quorum.controller.metadata_log import MetadataLog
from replog.quorum.controller.offset_control import OffsetControl
from replog.quorum.controller.operation import (
    ReadContext,
    ReadOperation,
    WriteContext,
    WriteOperation,
)
from replog.quorum.controller.pending_response import PendingResponse
from replog.quorum.controller.placement import RandomSource
from replog.quorum.controller.producer_id_control import ProducerIdControl, ProducerIdsBlock
from replog.quorum.controller.replication_control import (
    AlterPartitionItem,
    AlterPartitionResult,
    CreatableTopic,
    CreatePartitionsResult,
    CreatePartitionsTopic,
    CreateTopicResult,
    DeleteTopicResult,
    ElectionType,
    ElectLeadersResult,
    ReassignablePartition,
    ReassignmentResult,
    ReplicationControl,
)
from replog.quorum.controller.scram_credentials import ScramCredentials
from replog.quorum.metadata.deferred_records import DeferredItem, DeferredRecords
from replog.quorum.metadata.fence_notices import FenceNotice
from replog.quorum.metadata.image import ConfigResource
from replog.quorum.metadata.log_batches import CommittedRecords, SnapshotRecords
from replog.quorum.metadata.records import (
    AccessControlEntryRecord,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    FeatureLevelRecord,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
)
from replog.quorum.metadata.steps import REPLAY_STEP_RECORDS, Steps, run_to_end

R = TypeVar("R")
AclRecord = AccessControlEntryRecord | RemoveAccessControlEntryRecord
MOVE_OFF_FENCED = "move fenced brokers out of ISRs and leaderships"
# Partitions (in whole topics) one step of `snapshot_records_in_steps` takes: 5-10 ms of CPU.
SNAPSHOT_STEP_PARTITIONS = 5_000


class _Parked(Generic[R]):
    """A response waiting in the purgatory for its offset to commit."""

    __slots__ = ("pending", "response")

    def __init__(self, pending: PendingResponse[R], response: R) -> None:
        self.pending = pending
        self.response = response

    def complete(self, error: Exception | None) -> None:
        if error is None:
            self.pending.succeed(self.response)
        else:
            self.pending.fail(error)


class QuorumController:
    """One node's controller: active (writing) or standby (replaying)."""

    def __init__(
        self,
        config: ControllerConfig,
        log: MetadataLog,
        rng: RandomSource,
        on_notice: Callable[[FenceNotice], None] | None = None,
    ) -> None:
        self.config = config
        # Told each broker this controller fences or unfences, and why, as it appends the
        # records (the shell logs it).
        self._on_notice = on_notice
        self.node_id = config.node_id
        self._log = log
        self.offset_control = OffsetControl()
        registry = self.offset_control.registry
        self.features = FeatureControl(registry)
        self.cluster = ClusterControl(
            registry,
            cluster_id=config.cluster_id,
            features=self.features,
            session_timeout_ms=config.broker_session_timeout_ms,
            max_partition_changes_per_step=config.max_partition_changes_per_step,
        )
        self.configs = ConfigControl(registry, config.static_broker_configs)
        self.producer_ids = ProducerIdControl(registry, self.cluster)
        self.scram = ScramCredentials(registry)
        self.acls = AclState(registry)
        self.replication = ReplicationControl(
            registry,
            self.cluster,
            self.configs,
            rng,
            default_num_partitions=config.default_num_partitions,
            default_replication_factor=config.default_replication_factor,
            elr_enabled=self.features.eligible_leader_replicas_enabled,
        )
        self.purgatory = DeferredQueue()
        # Raft's view, as last told: the leader (None: unknown) in `quorum_epoch`.
        self._leader_id: int | None = None
        self._quorum_epoch = -1
        # The quorum epoch we are active in; None on a standby. Our in-flight batches carry
        # epochs from `_activation_epoch` (when this leadership began) up to it.
        self._claim_epoch: int | None = None
        # A batch `commit_in_steps` has begun to replay and not finished: its description.
        self._half_replayed: str | None = None
        self._activation_epoch = -1
        # Never claim an epoch we renounced in: the log may hold our reverted writes of it.
        self._renounced_epoch = -1
        self._next_noop_ms: int | None = None
        self._next_balance_ms: int | None = None
        self._next_unclean_ms: int | None = None
        self._next_leaderless_ms: int | None = None
        # Later steps of writes (`ControllerResult.then`, `after`), one run per tick each, with
        # the response their last step settles.
        self._steps: deque[tuple[WriteOperation[Any], PendingResponse[Any]]] = deque()
        # The sweeps this controller started that are still running (`_start_sweep`): another
        # of the same kind would only redo its scans.
        self._sweeps: set[str] = set()
        # Why the last failure-driven renounce happened, for the shell's logs and for tests.
        self.last_failover_reason: str | None = None
        self._dispatch: dict[type, Callable[[MetadataRecord, int], None]] = self._replayers()

    def __repr__(self) -> str:
        role = "active" if self.is_active else "standby"
        return (
            f"QuorumController(node {self.node_id}, {role}, leader={self._leader_id}, "
            f"quorum_epoch={self._quorum_epoch}, {self.offset_control!r}, "
            f"pending={len(self.purgatory)})"
        )

    # -- status ----------------------------------------------------------------------------------

    @property
    def is_active(self) -> bool:
        return self._claim_epoch is not None

    @property
    def leader_id(self) -> int | None:
        """The active controller as Raft last said (None: unknown)."""
        return self._leader_id

    @property
    def quorum_epoch(self) -> int:
        return self._quorum_epoch

    @property
    def claim_epoch(self) -> int | None:
        return self._claim_epoch

    @property
    def last_committed_offset(self) -> int:
        return self.offset_control.last_committed_offset

    @property
    def last_stable_offset(self) -> int:
        return self.offset_control.last_stable_offset

    # -- writes ----------------------------------------------------------------------------------

    def write(
        self, op: WriteOperation[R], now_ms: int, description: str = "write"
    ) -> PendingResponse[R]:
        """Run `op` on the latest state; its response settles once its records commit."""
        pending: PendingResponse[R] = PendingResponse(description)
        if self._claim_epoch is None:
            pending.fail(self._not_controller(f"cannot {description}"))
        elif len(self.purgatory) >= self.config.max_pending_writes:
            pending.fail(
                RequestTimedOutError(
                    f"cannot {description}: {len(self.purgatory)} writes already wait for "
                    f"their commit (max_pending_writes); retry later"
                )
            )
        else:
            self._run_write(op, now_ms, pending)
        return pending

    def register_broker(
        self, request: BrokerRegistrationRequest, now_ms: int
    ) -> PendingResponse[BrokerRegistrationReply]:
        return self.write(
            lambda ctx: ctx.cluster.register_broker(
                request,
                next_write_offset=ctx.next_write_offset,
                now_ms=ctx.now_ms,
                replication=ctx.replication,
            ),
            now_ms,
            f"register broker {request.broker_id}",
        )

    def broker_heartbeat(
        self, request: BrokerHeartbeatRequest, now_ms: int
    ) -> PendingResponse[BrokerHeartbeatReply]:
        return self.write(
            lambda ctx: ctx.cluster.process_heartbeat(
                request, now_ms=ctx.now_ms, replication=ctx.replication
            ),
            now_ms,
            f"process the heartbeat of broker {request.broker_id}",
        )

    def unregister_broker(self, broker_id: int, now_ms: int) -> PendingResponse[None]:
        return self.write(
            lambda ctx: ctx.cluster.unregister_broker(broker_id, replication=ctx.replication),
            now_ms,
            f"unregister broker {broker_id}",
        )

    def incremental_alter_configs(
        self,
        changes: Mapping[ConfigResource, Sequence[AlterConfigOp]],
        now_ms: int,
        *,
        validate_only: bool = False,
        replaced: Collection[ConfigResource] = (),
    ) -> PendingResponse[dict[ConfigResource, KafkaError | None]]:
        """`replaced`: resources whose dynamic configs not in `changes` are deleted (Kafka's
        legacy AlterConfigs), as this controller's state has them."""
        return self.write(
            lambda ctx: ctx.configs.incremental_alter_configs(
                changes,
                topic_exists=ctx.replication.topic_exists,
                registered_brokers=lambda: ctx.cluster.registrations().keys(),
                validate_only=validate_only,
                replaced=replaced,
            ),
            now_ms,
            "alter configs",
        )

    def allocate_producer_ids(
        self, broker_id: int, broker_epoch: int, now_ms: int
    ) -> PendingResponse[ProducerIdsBlock]:
        return self.write(
            lambda ctx: ctx.producer_ids.generate_next_block(broker_id, broker_epoch),
            now_ms,
            f"allocate producer ids to broker {broker_id}",
        )

    def create_topics(
        self, topics: Sequence[CreatableTopic], now_ms: int, *, validate_only: bool = False
    ) -> PendingResponse[tuple[CreateTopicResult, ...]]:
        return self.write(
            lambda ctx: ctx.replication.create_topics(
                topics,
                validate_only=validate_only,
                config_validator=ctx.configs.validate_topic_configs,
            ),
            now_ms,
            f"create topics {', '.join(t.name for t in topics)}",
        )

    def delete_topics(
        self, now_ms: int, names: Sequence[str] = (), topic_ids: Sequence[UUID] = ()
    ) -> PendingResponse[tuple[DeleteTopicResult, ...]]:
        return self.write(
            lambda ctx: ctx.replication.delete_topics(names, topic_ids),
            now_ms,
            "delete topics",
        )

    def create_partitions(
        self, topics: Sequence[CreatePartitionsTopic], now_ms: int, *, validate_only: bool = False
    ) -> PendingResponse[tuple[CreatePartitionsResult, ...]]:
        return self.write(
            lambda ctx: ctx.replication.create_partitions(topics, validate_only=validate_only),
            now_ms,
            "create partitions",
        )

    def alter_partition(
        self,
        broker_id: int,
        broker_epoch: int,
        items: Sequence[AlterPartitionItem],
        now_ms: int,
    ) -> PendingResponse[tuple[AlterPartitionResult, ...]]:
        return self.write(
            lambda ctx: ctx.replication.alter_partition(broker_id, broker_epoch, items),
            now_ms,
            f"alter partitions for broker {broker_id}",
        )

    def elect_leaders(
        self,
        election_type: ElectionType,
        now_ms: int,
        partitions: Sequence[tuple[str, int]] | None = None,
    ) -> PendingResponse[tuple[ElectLeadersResult, ...]]:
        return self.write(
            lambda ctx: ctx.replication.elect_leaders(election_type, partitions),
            now_ms,
            f"run {election_type.name} elections",
        )

    def alter_partition_reassignments(
        self, partitions: Sequence[ReassignablePartition], now_ms: int
    ) -> PendingResponse[tuple[ReassignmentResult, ...]]:
        return self.write(
            lambda ctx: ctx.replication.alter_partition_reassignments(partitions),
            now_ms,
            "alter partition reassignments",
        )

    def update_features(
        self, updates: Sequence[FeatureUpdate], now_ms: int, *, validate_only: bool = False
    ) -> PendingResponse[None]:
        """UpdateFeatures (`FeatureControl.update_features`): one atomic batch, answered once
        committed; `validate_only` (or a refusal) writes nothing."""
        return self.write(
            lambda ctx: ctx.features.update_features(
                updates,
                controller_id=self.node_id,
                brokers={i: r.features for i, r in ctx.cluster.registrations().items()},
                validate_only=validate_only,
            ),
            now_ms,
            "update features",
        )

    def write_acls(
        self,
        decide: Callable[[list[AccessControlEntryRecord]], tuple[Sequence[AclRecord], R]],
        now_ms: int,
        description: str,
    ) -> PendingResponse[R]:
        """CreateAcls or DeleteAcls: `decide` (`replog.security.acl_control`, composed by the
        shell) is given the latest ACLs and gives the records to write, in one atomic batch,
        and the answer."""

        def op(ctx: WriteContext) -> ControllerResult[R]:
            records, response = decide(self.acls.acls())
            return ControllerResult.of(records, response, is_atomic=True)

        return self.write(op, now_ms, description)

    # -- reads -----------------------------------------------------------------------------------

    def read(self, query: ReadOperation[R]) -> R:
        """Run `query` on the state at the last stable offset (committed state only)."""
        return query(
            ReadContext(
                cluster=self.cluster,
                configs=self.configs,
                features=self.features,
                producer_ids=self.producer_ids,
                replication=self.replication,
                scram=self.scram,
                offset=self.offset_control.last_stable_offset,
            )
        )

    def snapshot_records(self, offset: int | None = None) -> list[MetadataRecord]:
        """Records recreating the managers' state at `offset` (None: latest): features first
        (a log begins with `metadata.version`), then brokers, topics with their partitions,
        configs (a topic's after the topic), producer ids, SCRAM credentials and ACLs."""
        return list(self.deferred_snapshot_records(offset))

    def deferred_snapshot_records(self, offset: int | None = None) -> DeferredRecords:
        """`snapshot_records` with each PartitionRecord made only when read
        (`deferred_records`)."""
        return run_to_end(self._snapshot_in_steps(offset, parts_of=0))

    def snapshot_records_in_steps(self, offset: int) -> Steps[DeferredRecords]:
        """`deferred_snapshot_records(offset)` taken in steps of whole topics, about
        `SNAPSHOT_STEP_PARTITIONS` partitions a step (a stop's snapshot: 100,000 partitions
        in one loop turn held it 155-172 ms of CPU). Each step reads at `offset` only, the
        state of that offset's snapshot, which the steps hold from the first to the last, or
        to `close()` (`OffsetControl.hold`): writes, commits and reverts may run between
        steps. A snapshot load between them drops it: the next step raises
        `UnknownSnapshotError`. Call `close()` on steps abandoned half way."""
        self.offset_control.hold(offset)
        try:
            return (yield from self._snapshot_in_steps(offset, parts_of=SNAPSHOT_STEP_PARTITIONS))
        finally:
            self.offset_control.release(offset)

    def _snapshot_in_steps(self, offset: int | None, *, parts_of: int) -> Steps[DeferredRecords]:
        items: list[DeferredItem] = [
            *self.features.snapshot_records(offset),
            *self.cluster.snapshot_records(offset),
        ]
        for part in self.replication.deferred_snapshot_parts(offset, parts_of=parts_of):
            items.extend(part)
            if parts_of:
                yield  # before the next part is read: reading is the cost
        return DeferredRecords(
            items,
            self.configs.snapshot_records(offset),
            self.producer_ids.snapshot_records(offset),
            self.scram.snapshot_records(offset),
            self.acls.snapshot_records(offset),
        )

    # -- Raft events -----------------------------------------------------------------------------

    def handle_commit(self, batch: CommittedRecords) -> None:
        """Raft committed `batch` (records decoded; none for a control batch)."""
        run_to_end(self.commit_in_steps(batch))

    def commit_in_steps(self, batch: CommittedRecords) -> Steps[None]:
        """`handle_commit` as steps: a standby replays at most `REPLAY_STEP_RECORDS` of the
        batch's records a step (module Rules, commit path); the committed and stable offsets
        move, and the parked responses complete, in the last step only."""
        self._check_whole("a committed batch")
        if self._claim_epoch is not None and batch.records and not self._wrote(batch):
            # Not a batch we wrote in our epoch: our idea of the log is wrong. Become a
            # standby (reverting our uncommitted writes) and take the batch as one.
            self._fail_over(
                f"committed batch {batch.base_offset}..{batch.last_offset} of quorum epoch "
                f"{batch.quorum_epoch} is not one this controller wrote in quorum epoch "
                f"{self._claim_epoch}"
            )
        if self._claim_epoch is None:
            base = batch.base_offset
            yield from self._replay_in_steps(
                batch.records,
                lambda index: base + index,
                f"committed batch {base}..{batch.last_offset}",
            )
        self.offset_control.handle_commit_batch(batch.last_offset, batch.quorum_epoch)
        self.purgatory.complete_up_to(self.offset_control.last_stable_offset)

    def handle_load_snapshot(self, snapshot: SnapshotRecords) -> None:
        """Replace the whole state with a Raft snapshot's (a restart, a standby that fell
        behind)."""
        run_to_end(self.load_snapshot_in_steps(snapshot))

    def load_snapshot_in_steps(self, snapshot: SnapshotRecords) -> Steps[None]:
        """`handle_load_snapshot` as steps of at most `REPLAY_STEP_RECORDS` records (module
        Rules, commit path: a restart's snapshot holds a record per partition); the offsets
        move to the snapshot's at the last step only."""
        self._check_whole("a snapshot load")
        if self._claim_epoch is not None:
            raise RuntimeError(
                f"node {self.node_id} is the active controller in quorum epoch "
                f"{self._claim_epoch} and must never load a snapshot"
            )
        self.offset_control.begin_snapshot_load()
        last = snapshot.last_contained_offset
        # Emptied and refilled: no offset stands for this state until the last step. A
        # snapshot's records all stand at its last offset: nothing finer is known.
        yield from self._replay_in_steps(
            snapshot.records, lambda _: last, f"the snapshot ending at offset {last}"
        )
        self.offset_control.handle_snapshot_loaded(last, snapshot.quorum_epoch)

    def _replay_in_steps(
        self, records: Sequence[MetadataRecord], offset_of: Callable[[int], int], what: str
    ) -> Steps[None]:
        """Replay `records` (record i at `offset_of(i)`), `REPLAY_STEP_RECORDS` a step;
        between two steps any other input is refused, naming `what` (`_check_whole`)."""
        for start in range(0, len(records), REPLAY_STEP_RECORDS):
            if start:
                self._half_replayed = what
                yield
                self._half_replayed = None
            for index in range(start, min(start + REPLAY_STEP_RECORDS, len(records))):
                self._replay(records[index], offset_of(index))

    def handle_leader_change(self, leader_id: int | None, quorum_epoch: int, now_ms: int) -> None:
        """Raft's leader is now `leader_id` (None: unknown) in `quorum_epoch`. When it is this
        node, every committed record of earlier epochs has already been handed over."""
        self._check_whole("a leader change")
        if quorum_epoch < self._quorum_epoch:
            return  # an older announcement overtaken by a newer one
        self._quorum_epoch = quorum_epoch
        self._leader_id = leader_id
        if leader_id == self.node_id:
            if self._claim_epoch is not None:
                # Still the leader, in a newer epoch: our in-flight writes stay in the log.
                self._claim_epoch = quorum_epoch
            elif quorum_epoch > self._renounced_epoch:
                self._claim(quorum_epoch, now_ms)
        elif self._claim_epoch is not None:
            self._renounce(leader_id)

    # -- time ------------------------------------------------------------------------------------

    def tick(self, now_ms: int) -> None:
        """Run the periodic work due at `now_ms` (active controller only)."""
        self._run_steps(now_ms)
        # Ahead of this tick's new fencings: their first steps take their share of its budget.
        self._move_off_fenced(now_ms)
        self._fence_stale_brokers(now_ms)
        if self._due(self._next_balance_ms, now_ms):
            self._next_balance_ms = self._run_elections(
                now_ms,
                self.replication.has_imbalanced_partitions,
                _balance_partition_leaders,
                self.config.leader_imbalance_check_interval_ms,
                "balance partition leaders",
            )
        if self._due(self._next_unclean_ms, now_ms):
            self._next_unclean_ms = self._run_elections(
                now_ms,
                self.replication.has_leaderless_partitions,
                _elect_unclean_leaders,
                self.config.unclean_leader_election_interval_ms,
                "elect unclean leaders",
            )
        if self._due(self._next_leaderless_ms, now_ms):
            self._elect_leaderless(now_ms)
            if self._claim_epoch is not None:
                interval = self.config.leaderless_partition_check_interval_ms
                self._next_leaderless_ms = now_ms + interval
        if self._due(self._next_noop_ms, now_ms):
            self.write(_write_no_op, now_ms, "write a NoOpRecord")
            if self._claim_epoch is not None:
                self._next_noop_ms = now_ms + self.config.metadata_max_idle_interval_ms

    @property
    def steps_queued(self) -> bool:
        """Whether stepped writes have steps left that this (active) controller would run
        (`run_steps`)."""
        return self._claim_epoch is not None and bool(self._steps)

    def run_steps(self, now_ms: int) -> None:
        """The next steps of the queued writes, within the budget a tick gives them
        (`_run_steps`), without the tick's periodic work: for a shell that runs them at the
        pace of its loop's turns rather than of its ticks."""
        self._run_steps(now_ms)

    def next_wake_ms(self, now_ms: int) -> int | None:
        """When `tick` next has work (None: not before some other input)."""
        if self._claim_epoch is None:
            return None
        if self._steps or self._move_off_fenced_due():
            return now_ms
        candidates = (
            self._next_noop_ms,
            self._next_balance_ms,
            self._next_unclean_ms,
            self._next_leaderless_ms,
            self.cluster.next_session_expiry_ms(now_ms),
        )
        deadlines = [deadline for deadline in candidates if deadline is not None]
        return min(deadlines, default=None)

    # -- leadership ------------------------------------------------------------------------------

    def _claim(self, quorum_epoch: int, now_ms: int) -> None:
        self._claim_epoch = quorum_epoch
        self._activation_epoch = quorum_epoch
        self.offset_control.activate(self.offset_control.last_committed_offset + 1)
        self.cluster.activate(now_ms)
        interval = self.config.metadata_max_idle_interval_ms
        self._next_noop_ms = now_ms + interval if interval > 0 else None
        if self.config.auto_leader_rebalance_enable:
            self._next_balance_ms = now_ms + self.config.leader_imbalance_check_interval_ms
        self._next_unclean_ms = now_ms + self.config.unclean_leader_election_interval_ms
        self._next_leaderless_ms = now_ms + self.config.leaderless_partition_check_interval_ms
        if self.features.metadata_version() is None:
            # An empty log: write what every metadata log begins with.
            levels = (
                self.config.bootstrap_metadata_version,
                self.config.bootstrap_transaction_version,
            )
            elr = self.config.eligible_leader_replicas_enable
            records: list[MetadataRecord] = [
                *FeatureControl.bootstrap_records(*levels, eligible_leader_replicas=elr),
                *self.config.bootstrap_scram_credentials,
            ]
            self.write(
                lambda ctx: ControllerResult.of(records, None),
                now_ms,
                "write the bootstrap records",
            )
        # A session-expiry fencing may be half done (a failover between its steps): its
        # broker, fenced already, is still named in ISRs; the moves go on from the metadata.
        self._move_off_fenced(now_ms)
        # The elections of an unfencing may be lost half way (a failover between its steps or
        # batches): the new active controller redoes what is left of them.
        self._elect_leaderless(now_ms)

    def _renounce(self, new_leader_id: int | None) -> None:
        """Stop being active: back to the committed state, every waiting caller told."""
        claim_epoch = self._claim_epoch
        assert claim_epoch is not None, "only the active controller renounces"
        self._claim_epoch = None
        self._renounced_epoch = max(self._renounced_epoch, claim_epoch)
        self._next_noop_ms = None
        self._next_balance_ms = None
        self._next_unclean_ms = None
        self._next_leaderless_ms = None
        steps, self._steps = self._steps, deque()
        self._sweeps.clear()
        self.offset_control.deactivate()
        self.cluster.deactivate()
        assert (
            self.offset_control.registry.latest_offset() == self.offset_control.last_stable_offset
        ), "after a renounce the state is the stable state"
        lost = self._not_controller(
            f"node {self.node_id} lost leadership of quorum epoch {claim_epoch} before "
            "the write committed",
            new_leader_id,
        )
        self.purgatory.fail_all(lost)
        for _, pending in steps:
            pending.fail(lost)

    def _fail_over(self, reason: str) -> None:
        """Renounce after a failure of our own, and hand Raft leadership to another node."""
        claim_epoch = self._claim_epoch
        assert claim_epoch is not None, "only the active controller fails over"
        self.last_failover_reason = reason
        self._leader_id = None
        self._renounce(None)
        self._log.resign(claim_epoch)

    # -- write path ------------------------------------------------------------------------------

    def _run_write(self, op: WriteOperation[R], now_ms: int, pending: PendingResponse[R]) -> None:
        claim_epoch = self._claim_epoch
        next_write_offset = self.offset_control.next_write_offset
        assert claim_epoch is not None and next_write_offset is not None, "active only"
        context = WriteContext(
            cluster=self.cluster,
            configs=self.configs,
            features=self.features,
            producer_ids=self.producer_ids,
            replication=self.replication,
            scram=self.scram,
            now_ms=now_ms,
            next_write_offset=next_write_offset,
        )
        try:
            result = op(context)
        except KafkaError as error:
            pending.fail(error)
            return
        except Exception as error:
            self._fail_over(f"{pending.description} failed unexpectedly: {error!r}")
            pending.fail(UnknownServerError(f"{pending.description} failed: {error!r}"))
            return
        if not result.records:
            if result.then is None:
                self._answer_without_records(result, pending)
            self._queue_steps(result, pending)
            return
        last_offset = self._append(claim_epoch, result, pending)
        if last_offset is None:
            if result.on_drop is not None and self._claim_epoch is not None:
                result.on_drop()  # refused without a failover: the rest of the write is dropped
            return
        if result.on_batch_end is not None:
            result.on_batch_end(last_offset)
        if self._on_notice is not None:
            for notice in result.notices:
                self._on_notice(notice)
        if result.then is None:
            self.purgatory.add(last_offset, _Parked(pending, result.response))
        self._queue_steps(result, pending)

    def _append(
        self, claim_epoch: int, result: ControllerResult[R], pending: PendingResponse[R]
    ) -> int | None:
        """Append and replay a result's records; their last offset, or None if the write
        failed (`pending` is told why)."""
        batches = self._batches(result, pending)
        if batches is None:
            return None
        last_offset = -1
        for index, batch in enumerate(batches):
            try:
                last_offset = self._log.prepare_append(claim_epoch, batch)
            except NotControllerError:
                self._renounce(None)
                pending.fail(self._not_controller(f"cannot {pending.description}"))
                return None
            except KafkaError as error:
                if index > 0:
                    # Earlier batches of this write are in the log: it is now half done.
                    self._fail_over(f"{pending.description}: batch {index} refused: {error!r}")
                pending.fail(error)
                return None
            except Exception as error:
                self._fail_over(f"{pending.description}: append failed: {error!r}")
                pending.fail(UnknownServerError(f"{pending.description} failed: {error!r}"))
                return None
            base_offset = last_offset - len(batch) + 1
            expected = self.offset_control.next_write_offset
            if base_offset != expected:
                # Records may embed their own offsets (a broker epoch), so they are wrong now.
                self._fail_over(
                    f"{pending.description}: the log put the batch at offset {base_offset}, "
                    f"but the controller expected {expected}"
                )
                pending.fail(UnknownServerError(f"{pending.description} failed: offset mismatch"))
                return None
            for position, record in enumerate(batch):
                self._replay(record, base_offset + position)
            self.offset_control.handle_schedule_append(last_offset)
        return last_offset

    def _queue_steps(self, result: ControllerResult[R], pending: PendingResponse[R]) -> None:
        """Queue what is left of a stepped write for the next ticks (`ControllerResult.then`,
        `after`)."""
        if result.after is not None:
            follow_up: PendingResponse[None] = PendingResponse(f"{pending.description} (rest)")
            self._steps.append((result.after, follow_up))
        if result.then is not None:
            self._steps.append((result.then, pending))

    def _run_steps(self, now_ms: int) -> None:
        """The next step of the queued writes, in order, while this tick's steps have written
        fewer than `max_partition_changes_per_step` records (those queued by this tick wait
        for the next, and so do those past the budget, keeping their place): each loop turn
        stays bounded however many writes go on."""
        budget = self.config.max_partition_changes_per_step
        start = self.offset_control.next_write_offset
        for _ in range(len(self._steps)):
            written = self.offset_control.next_write_offset
            if self._claim_epoch is None or written is None or start is None:
                return
            if written - start >= budget:
                return
            op, pending = self._steps.popleft()
            self._run_write(op, now_ms, pending)

    def _elect_leaderless(self, now_ms: int) -> None:
        """Clean elections for leaderless partitions that an active ISR member can lead, a
        bounded step per tick (`ReplicationControl.elect_leaderless_partitions`)."""
        self._start_sweep(
            "elect leaders for leaderless partitions",
            self.replication.has_leaderless_partitions,
            self.replication.elect_leaderless_partitions,
            now_ms,
        )

    def _move_off_fenced(self, now_ms: int) -> None:
        """The moves of fencings not made yet (a session-expiry fencing writes its fencing
        record with its first step; a failover may come before the rest), a bounded step per
        tick (`ReplicationControl.move_off_fenced_brokers`)."""
        self._start_sweep(
            MOVE_OFF_FENCED,
            self.replication.names_fenced_brokers,
            self.replication.move_off_fenced_brokers,
            now_ms,
        )

    def _move_off_fenced_due(self) -> bool:
        """Whether the next tick starts the sweep of fenced brokers: a session-expiry fencing
        wrote its fencing record with its first moves and left the rest (no step is queued for
        them, and the other deadlines may be seconds away)."""
        return MOVE_OFF_FENCED not in self._sweeps and self.replication.names_fenced_brokers()

    def _start_sweep(
        self,
        description: str,
        needed: Callable[[], bool],
        first: Callable[[int], ControllerResult[None]],
        now_ms: int,
    ) -> None:
        """Write `first(max_partition_changes_per_step)` and the steps it leads to, one per
        tick, if this controller is active, no sweep of this kind runs already, and it is
        `needed`."""
        if self._claim_epoch is None or description in self._sweeps or not needed():
            return
        sweeps = self._sweeps
        limit = self.config.max_partition_changes_per_step

        def sweep(step: Step[None]) -> Step[None]:
            def run(ctx: StepContext) -> ControllerResult[None]:
                result = step(ctx)
                if result.then is None:
                    sweeps.discard(description)
                    return result
                return ControllerResult.partial(result.records, sweep(result.then))

            return run

        def dropped(pending: PendingResponse[None]) -> None:
            if pending.error is not None:  # refused, or dropped half way
                sweeps.discard(description)

        sweeps.add(description)
        self.write(sweep(lambda ctx: first(limit)), now_ms, description).add_done_callback(dropped)

    def _answer_without_records(
        self, result: ControllerResult[R], pending: PendingResponse[R]
    ) -> None:
        """A write that wrote nothing answers once everything it may have seen commits: every
        batch written so far, not only those a response waits for (the records of a stepped
        write's earlier steps wait in none until its last step, which may write nothing)."""
        control = self.offset_control
        written = control.registry.latest_offset()
        assert written is not None, "the stable snapshot always exists"
        if result.on_batch_end is not None:
            result.on_batch_end(written)
        if written <= control.last_stable_offset:
            pending.succeed(result.response)
        else:
            self.purgatory.add(written, _Parked(pending, result.response))

    def _batches(
        self, result: ControllerResult[R], pending: PendingResponse[R]
    ) -> list[tuple[MetadataRecord, ...]] | None:
        limit = self.config.max_records_per_batch
        records = result.records
        if len(records) <= limit:
            return [records]
        if result.is_atomic:
            pending.fail(
                InvalidRequestError(
                    f"cannot {pending.description}: it takes {len(records)} records, which "
                    f"must commit together, but a batch holds at most {limit}"
                )
            )
            return None
        return [records[start : start + limit] for start in range(0, len(records), limit)]

    def _wrote(self, batch: CommittedRecords) -> bool:
        """Whether a committed data batch is one of our in-flight writes (or ends with one)."""
        claim_epoch = self._claim_epoch
        assert claim_epoch is not None, "only the active controller writes"
        return (
            self._activation_epoch <= batch.quorum_epoch <= claim_epoch
            and self.offset_control.is_pending_batch_end(batch.last_offset)
        )

    # -- periodic work ---------------------------------------------------------------------------

    def _due(self, deadline_ms: int | None, now_ms: int) -> bool:
        return self._claim_epoch is not None and deadline_ms is not None and now_ms >= deadline_ms

    def _run_elections(
        self,
        now_ms: int,
        needed: Callable[[], bool],
        op: WriteOperation[bool],
        interval_ms: int,
        description: str,
    ) -> int | None:
        """Run one bounded round of periodic elections; return when the next is due: at once
        (the next tick) if this round left partitions over, else after `interval_ms`."""
        left_over: list[bool] = []
        if needed():

            def elect(ctx: WriteContext) -> ControllerResult[bool]:
                result = op(ctx)
                # Known now, while the response itself waits for the commit.
                left_over.append(result.response)
                return result

            self.write(elect, now_ms, description)
        more = any(left_over)
        if self._claim_epoch is None:
            return None
        return now_ms if more else now_ms + interval_ms

    def _fence_stale_brokers(self, now_ms: int) -> None:
        if self._claim_epoch is not None and self.cluster.take_revived():
            # A broker whose evacuation was given up half way (a refused or dropped step) is
            # active: it may lead again what the first steps left without a leader.
            self._elect_leaderless(now_ms)
        while self._claim_epoch is not None:
            broker_id = self.cluster.find_stale_broker(now_ms)
            if broker_id is None:
                return
            self.write(
                _fence_stale_broker(broker_id),
                now_ms,
                f"fence broker {broker_id} (session expired)",
            )
            registration = self.cluster.registration(broker_id)
            if registration is not None and not registration.fenced:
                return  # the write failed; the next tick tries again

    # -- replay ----------------------------------------------------------------------------------

    def _replay(self, record: MetadataRecord, offset: int) -> None:
        replay = self._dispatch.get(type(record))
        if replay is None:
            raise MetadataReplayError(
                f"{type(record).__name__} at offset {offset} is not a metadata record this "
                "controller can replay"
            )
        replay(record, offset)

    def _replayers(self) -> dict[type, Callable[[MetadataRecord, int], None]]:
        cluster = self.cluster.replay
        replication = self.replication.replay
        return {
            RegisterBrokerRecord: cluster,  # type: ignore[dict-item]
            UnregisterBrokerRecord: cluster,  # type: ignore[dict-item]
            BrokerRegistrationChangeRecord: cluster,  # type: ignore[dict-item]
            TopicRecord: replication,  # type: ignore[dict-item]
            PartitionRecord: replication,  # type: ignore[dict-item]
            PartitionChangeRecord: replication,  # type: ignore[dict-item]
            RemoveTopicRecord: replication,  # type: ignore[dict-item]
            ConfigRecord: self.configs.replay,  # type: ignore[dict-item]
            FeatureLevelRecord: self.features.replay,  # type: ignore[dict-item]
            ProducerIdsRecord: self.producer_ids.replay,  # type: ignore[dict-item]
            UserScramCredentialRecord: self.scram.replay,  # type: ignore[dict-item]
            RemoveUserScramCredentialRecord: self.scram.replay,  # type: ignore[dict-item]
            AccessControlEntryRecord: self.acls.replay,  # type: ignore[dict-item]
            RemoveAccessControlEntryRecord: self.acls.replay,  # type: ignore[dict-item]
            NoOpRecord: _replay_no_op,
        }

    # -- errors ----------------------------------------------------------------------------------

    def _check_whole(self, what: str) -> None:
        """Refuse a Raft event while a batch is half replayed (module Rules, commit path):
        claiming, or loading, over half a batch would write on state no offset stands for."""
        if self._half_replayed is not None:
            raise RuntimeError(
                f"node {self.node_id}: {what} arrived while {self._half_replayed} was half "
                "replayed; the caller must finish its steps first"
            )

    def _not_controller(self, what: str, leader_id: int | None = None) -> NotControllerError:
        """NOT_CONTROLLER for `what`, naming `leader_id` (None: the leader Raft last named)."""
        leader = self._leader_id if leader_id is None else leader_id
        if leader is None or leader == self.node_id:
            known = "no active controller is known yet"
        else:
            known = f"the active controller is node {leader}"
        return NotControllerError(
            f"{what}: node {self.node_id} is not the active controller; {known}"
        )


def _write_no_op(ctx: WriteContext) -> ControllerResult[None]:
    return ControllerResult.of([NoOpRecord()], None)


def _fence_stale_broker(broker_id: int) -> WriteOperation[None]:
    def fence(ctx: WriteContext) -> ControllerResult[None]:
        return ctx.cluster.fence_stale_broker(broker_id, replication=ctx.replication)

    return fence


def _balance_partition_leaders(ctx: WriteContext) -> ControllerResult[bool]:
    return ctx.replication.balance_partition_leaders()


def _elect_unclean_leaders(ctx: WriteContext) -> ControllerResult[bool]:
    return ctx.replication.elect_unclean_leaders()


def _replay_no_op(record: MetadataRecord, offset: int) -> None:
    """A NoOpRecord only moves the high watermark."""
