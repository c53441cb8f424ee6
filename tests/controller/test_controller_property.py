"""Property: whatever the interleaving of writes, commits, ticks, failures and leadership
changes, every controller's committed view equals the state built by replaying exactly the
committed records from scratch, with the broker-side replay code (`MetadataDelta`) as oracle.

Also checked after every step: a standby holds nothing uncommitted; the active controller's
latest state is the whole log replayed (its own uncommitted writes included); a write is
answered successfully only once its records are committed. And a controller restarted from
any controller's snapshot of its committed state (what a clean stop writes), through the
snapshot codec, then given the committed batches after it, holds exactly the state of a
controller that replayed the whole committed log.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from controller_harness import CLUSTER_ID, Cluster, controller_view, image_view, replayed_image
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from replog.quorum.controller.config_control import (
    AlterConfigOp,
    AlterConfigOpType,
    broker_resource,
)
from replog.quorum.controller.controller import QuorumController
from replog.quorum.controller.controller_config import ControllerConfig
from replog.quorum.controller.controller_result import ControllerResult
from replog.quorum.controller.operation import WriteContext
from replog.quorum.controller.pending_response import PendingResponse
from replog.quorum.controller.replication_control import CreatableTopic
from replog.quorum.metadata.log_batches import SnapshotRecords
from replog.quorum.metadata.record_batches import decode_snapshot, encode_snapshot

NODES = (1, 2, 3)
RESTARTED = 9  # a controller outside the cluster, built to replay what a restart would
BROKERS = st.integers(1, 4)
TOPICS = st.sampled_from(["a", "b", "c"])


@dataclass
class Write:
    pending: PendingResponse[object]
    last_offset: int | None  # None: the write appended nothing


class ControllerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.cluster = Cluster.create(NODES, leader_imbalance_check_interval_ms=20_000)
        self.writes: list[Write] = []
        # Start from a bootstrapped log, so that the interesting rules are enabled at once.
        self.cluster.elect(1)
        self.cluster.log.commit()

    # -- helpers -------------------------------------------------------------------------------

    def active(self) -> QuorumController | None:
        actives = [c for c in self.cluster.controllers.values() if c.is_active]
        assert len(actives) <= 1, "two active controllers"
        return actives[0] if actives else None

    def track(self, pending: PendingResponse[object], end_before: int) -> None:
        end_after = self.cluster.log.log_end_offset
        self.writes.append(Write(pending, end_after - 1 if end_after > end_before else None))

    # -- rules ---------------------------------------------------------------------------------

    @rule(leader=st.sampled_from((*NODES, None)), keep=st.booleans())
    def elect(self, leader: int | None, keep: bool) -> None:
        # A re-elected leader keeps its own log: Raft never truncates the leader.
        if leader is not None and leader == self.cluster.log.leader_id:
            keep = True
        self.cluster.elect(leader, keep_uncommitted=keep)

    @rule(batches=st.integers(0, 3))
    def commit(self, batches: int) -> None:
        self.cluster.log.commit(min(batches, len(self.cluster.log.uncommitted_batches())))

    @rule(ms=st.sampled_from([1, 499, 500, 2000, 9000]))
    def advance(self, ms: int) -> None:
        self.cluster.advance(ms)

    @precondition(lambda self: self.active() is not None)
    @rule(value=st.integers(-1, 3))
    def alter_config(self, value: int) -> None:
        active = self.active()
        assert active is not None
        before = self.cluster.log.log_end_offset
        op = AlterConfigOp("log.retention.ms", AlterConfigOpType.SET, str(value))
        pending = active.incremental_alter_configs({broker_resource(): [op]}, self.cluster.now_ms)
        self.track(pending, before)  # type: ignore[arg-type]

    @precondition(lambda self: self.active() is not None)
    @rule(broker=BROKERS)
    def register(self, broker: int) -> None:
        before = self.cluster.log.log_end_offset
        self.track(self.cluster.register(broker, commit=False), before)  # type: ignore[arg-type]

    @precondition(lambda self: self.active() is not None)
    @rule(broker=BROKERS)
    def start_broker(self, broker: int) -> None:
        """Register, commit, and heartbeat once caught up: a broker process starting."""
        before = self.cluster.log.log_end_offset
        registered = self.cluster.register(broker, commit=True)
        self.track(registered, before)  # type: ignore[arg-type]
        if registered.error is None:
            before = self.cluster.log.log_end_offset
            self.track(self.cluster.heartbeat(broker, commit=True), before)  # type: ignore[arg-type]

    @precondition(lambda self: self.active() is not None)
    @rule(name=TOPICS)
    def start_brokers_with_a_topic(self, name: str) -> None:
        """Brokers 1..3 start and a replicated topic is created on them, so that broker events
        later move leaders and shrink ISRs."""
        for broker in (1, 2, 3):
            if self.active() is not None:
                self.start_broker(broker)
        if self.active() is not None:
            self.create_topic(name, 3, 3)

    @precondition(lambda self: self.active() is not None)
    @rule(broker=BROKERS, want_fence=st.booleans(), want_shut_down=st.booleans())
    def heartbeat(self, broker: int, want_fence: bool, want_shut_down: bool) -> None:
        active = self.active()
        assert active is not None
        if active.cluster.broker_epoch(broker) is None:
            return
        before = self.cluster.log.log_end_offset
        pending = self.cluster.heartbeat(
            broker, want_fence=want_fence, want_shut_down=want_shut_down, commit=False
        )
        self.track(pending, before)  # type: ignore[arg-type]

    @precondition(lambda self: self.active() is not None)
    @rule(broker=BROKERS)
    def allocate_producer_ids(self, broker: int) -> None:
        active = self.active()
        assert active is not None
        epoch = active.cluster.broker_epoch(broker)
        before = self.cluster.log.log_end_offset
        pending = active.allocate_producer_ids(broker, -1 if epoch is None else epoch, 0)
        self.track(pending, before)  # type: ignore[arg-type]

    @precondition(lambda self: self.active() is not None)
    @rule(name=TOPICS, partitions=st.integers(1, 3), replication_factor=st.integers(1, 2))
    def create_topic(self, name: str, partitions: int, replication_factor: int) -> None:
        active = self.active()
        assert active is not None
        before = self.cluster.log.log_end_offset
        pending = active.create_topics(
            [CreatableTopic(name, partitions, replication_factor)], self.cluster.now_ms
        )
        self.track(pending, before)  # type: ignore[arg-type]

    @precondition(lambda self: self.active() is not None)
    @rule(name=TOPICS)
    def delete_topic(self, name: str) -> None:
        active = self.active()
        assert active is not None
        before = self.cluster.log.log_end_offset
        self.track(active.delete_topics(self.cluster.now_ms, names=[name]), before)  # type: ignore[arg-type]

    @precondition(lambda self: self.active() is not None)
    @rule()
    def buggy_write(self) -> None:
        active = self.active()
        assert active is not None

        def broken(ctx: WriteContext) -> ControllerResult[None]:
            raise RuntimeError("a bug in an operation")

        active.write(broken, self.cluster.now_ms)
        assert not active.is_active

    @precondition(lambda self: self.cluster.log.committed_offset >= 0)
    @rule(node=st.sampled_from(NODES))
    def restart_from_a_stop_snapshot(self, node: int) -> None:
        # What a clean stop writes (`ControllerDriver._snapshot_state`): the state at the last
        # stable offset, ending after the last committed offset, active or not.
        stopped = self.cluster.controller(node)
        end_offset = stopped.last_committed_offset + 1
        data = encode_snapshot(
            stopped.snapshot_records(stopped.last_stable_offset),
            quorum_epoch=stopped.offset_control.last_committed_quorum_epoch,
            timestamp_ms=0,
        )
        log = self.cluster.log
        committed = log.batches[: log.committed_count]
        restarted = self.fresh_controller()
        restarted.handle_load_snapshot(
            SnapshotRecords(
                end_offset - 1,
                stopped.offset_control.last_committed_quorum_epoch,
                tuple(decode_snapshot(data, where="stop snapshot")),
            )
        )
        for batch in committed:
            if batch.base_offset >= end_offset:
                restarted.handle_commit(batch.committed())
        replayed = self.fresh_controller()
        for batch in committed:
            replayed.handle_commit(batch.committed())
        assert restarted.last_committed_offset == replayed.last_committed_offset
        assert restarted.snapshot_records() == replayed.snapshot_records()
        assert controller_view(restarted, None) == image_view(
            replayed_image(log.committed_records())
        )

    def fresh_controller(self) -> QuorumController:
        config = ControllerConfig(
            node_id=RESTARTED, cluster_id=CLUSTER_ID, leader_imbalance_check_interval_ms=20_000
        )
        return QuorumController(config, self.cluster.log.for_node(RESTARTED), random.Random(0))

    # -- invariants ----------------------------------------------------------------------------

    @invariant()
    def committed_views_equal_a_replay_of_the_committed_records(self) -> None:
        log = self.cluster.log
        committed = log.committed_records()
        for controller in self.cluster.controllers.values():
            stable = controller.last_stable_offset
            assert stable == log.committed_offset
            oracle = image_view(replayed_image([(o, r) for o, r in committed if o <= stable]))
            assert controller_view(controller, stable) == oracle, controller
            read = controller.read(lambda ctx, c=controller: controller_view(c, ctx.offset))
            assert read == oracle
            if not controller.is_active:
                assert controller_view(controller, None) == oracle, "a standby holds uncommitted"

    @invariant()
    def the_active_controller_holds_the_whole_log(self) -> None:
        active = self.active()
        if active is None:
            return
        log = self.cluster.log
        everything = [
            (batch.base_offset + index, record)
            for batch in log.batches
            for index, record in enumerate(batch.records)
        ]
        assert controller_view(active, None) == image_view(replayed_image(everything))

    @invariant()
    def answers_come_only_after_commits(self) -> None:
        committed = self.cluster.log.committed_offset
        for write in self.writes:
            if write.pending.done and write.pending.error is None and write.last_offset is not None:
                assert write.last_offset <= committed, write
        active = self.active()
        if active is not None and len(active.purgatory) == 0:
            # Nothing parked: every write of this leadership has been answered.
            assert all(w.pending.done for w in self.writes if w.last_offset is not None)


TestControllerProperty = ControllerMachine.TestCase
TestControllerProperty.settings = settings(max_examples=100, stateful_step_count=40, deadline=None)
