"""The scrape-time gauges: `NodeStateCollector` against hand-made `NodeState` snapshots."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from replog.quorum.metadata.broker_lifecycle import LifecycleState
from replog.server.process.node_state import (
    BrokerState,
    NodeState,
    RaftState,
    ReplicaCounts,
    ReplicaState,
    read_node_state,
    register_node_state,
)
from replog.storage import write_hints
from replog.storage.cleaner.log_cleaner import CleanerStats

START_PHASES = "replog_broker_start_phase_time_seconds"

RAFT = RaftState(high_watermark=40, log_end_offset=42, epoch=3, leader_id=2)


def leader(
    topic: str, partition: int, replicas: int, isr: int, min_isr: int, size: int = 0
) -> ReplicaState:
    return ReplicaState(topic, partition, True, replicas, isr, min_isr, size)


def follower(topic: str, partition: int, size: int = 0) -> ReplicaState:
    return ReplicaState(topic, partition, False, 0, 0, 0, size)


def scrape(state: NodeState) -> CollectorRegistry:
    registry = CollectorRegistry()
    register_node_state(registry, lambda replicas: state)
    return registry


def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def test_replication_health_counts_only_partitions_this_broker_leads() -> None:
    replicas = (
        leader("a", 0, replicas=3, isr=3, min_isr=2, size=100),  # healthy
        leader("a", 1, replicas=3, isr=2, min_isr=2, size=7),  # under-replicated, at min ISR
        leader("b", 0, replicas=3, isr=1, min_isr=2),  # under-replicated, under min ISR
        leader("c", 0, replicas=1, isr=1, min_isr=1),  # RF 1: at min ISR, not under-replicated
        follower("d", 0, size=55),  # a follower's ISR view is not its to report
    )
    registry = scrape(
        NodeState(
            RAFT,
            BrokerState(
                replicas, {"produce": 4, "fetch": 9}, metadata_offset_lag=5, write_hints_dropped=3
            ),
        )
    )
    assert value(registry, "replog_under_replicated_partitions") == 2
    assert value(registry, "replog_under_min_isr_partitions") == 1
    assert value(registry, "replog_at_min_isr_partitions") == 2
    assert value(registry, "replog_log_size_bytes", topic="a", partition="0") == 100
    assert value(registry, "replog_log_size_bytes", topic="a", partition="1") == 7
    assert value(registry, "replog_log_size_bytes", topic="d", partition="0") == 55
    assert value(registry, "replog_purgatory_size", purgatory="produce") == 4
    assert value(registry, "replog_purgatory_size", purgatory="fetch") == 9
    assert value(registry, "replog_metadata_offset_lag") == 5
    assert value(registry, "replog_write_hints_dropped_total") == 3


def test_a_healthy_broker_reports_zeros_and_missing_purgatories_as_zero() -> None:
    registry = scrape(NodeState(RAFT, BrokerState((leader("a", 0, 3, 3, 2),), {}, 0)))
    assert value(registry, "replog_under_replicated_partitions") == 0
    assert value(registry, "replog_under_min_isr_partitions") == 0
    assert value(registry, "replog_at_min_isr_partitions") == 0
    assert value(registry, "replog_purgatory_size", purgatory="produce") == 0


def test_raft_gauges() -> None:
    registry = scrape(NodeState(RAFT))
    assert value(registry, "replog_raft_high_watermark") == 40
    assert value(registry, "replog_raft_log_end_offset") == 42
    assert value(registry, "replog_raft_current_epoch") == 3
    assert value(registry, "replog_raft_current_leader") == 2
    unknown = scrape(NodeState(RaftState(0, 0, 0, -1)))
    assert value(unknown, "replog_raft_current_leader") == -1


def test_offline_partitions_come_from_the_active_controller_only() -> None:
    active = scrape(
        NodeState(RAFT, is_controller=True, active_controller=True, offline_partitions=3)
    )
    assert value(active, "replog_active_controller") == 1
    assert value(active, "replog_offline_partitions") == 3
    standby = scrape(NodeState(RAFT, is_controller=True, offline_partitions=3))
    assert value(standby, "replog_active_controller") == 0
    assert value(standby, "replog_offline_partitions") == 0


def quorum_member(leader_id: int) -> Any:
    """A `RaftDriver` as `read_node_state` reads it: its status only."""
    status = SimpleNamespace(
        high_watermark=40, log_end_offset=42, quorum_epoch=3, leader_id=leader_id
    )
    return SimpleNamespace(status=lambda: status)


def controller(active_id: int, offline_partitions: int) -> Any:
    """A `ControllerDriver` as `read_node_state` reads it: the values its loop publishes."""
    return SimpleNamespace(controller_id=active_id, offline_partitions=offline_partitions)


def test_a_controller_only_node_reports_the_controllers_offline_partitions() -> None:
    """process.roles=controller: no broker image, and still the active controller's count."""
    state = read_node_state(1, quorum_member(1), controller(1, 4), broker=None)
    assert (state.broker, state.is_controller, state.active_controller) == (None, True, True)
    assert state.offline_partitions == 4
    registry = scrape(state)
    assert value(registry, "replog_offline_partitions") == 4
    assert value(registry, "replog_under_replicated_partitions") is None  # no broker role


def test_a_standby_controller_reports_no_offline_partitions() -> None:
    state = read_node_state(2, quorum_member(1), controller(1, 4), broker=None)
    assert (state.active_controller, state.offline_partitions) == (False, 0)
    assert value(scrape(state), "replog_offline_partitions") == 0
    assert value(scrape(state), "replog_active_controller") == 0


def test_families_of_missing_roles_are_left_out() -> None:
    text = generate_latest(scrape(NodeState(RAFT))).decode()
    assert "replog_raft_high_watermark 40.0" in text
    for absent in ("replog_active_controller", "replog_under_replicated", "replog_purgatory"):
        assert absent not in text


def test_every_scrape_reads_the_state_afresh() -> None:
    states = [NodeState(RaftState(1, 1, 1, 1)), NodeState(RaftState(9, 9, 1, 1))]
    registry = CollectorRegistry()
    register_node_state(registry, lambda replicas: states[0])
    assert value(registry, "replog_raft_high_watermark") == 1
    states.pop(0)
    assert value(registry, "replog_raft_high_watermark") == 9


def broker_before_its_data_plane(
    lifecycle: LifecycleState = LifecycleState.STARTING,
) -> Any:
    """What `read_node_state` reads of a BrokerRuntime whose logs are not open yet."""
    return SimpleNamespace(
        metadata=SimpleNamespace(last_applied_offset=39),
        replica_manager=None,
        log_manager=None,
        start_phases={},
        lifecycle=SimpleNamespace(state=lifecycle),
    )


def test_the_dropped_write_hints_are_the_process_hint_runners_count(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(write_hints, "runner", SimpleNamespace(dropped=7))
    state = read_node_state(1, quorum_member(1), None, broker_before_its_data_plane())
    assert state.broker is not None and state.broker.write_hints_dropped == 7
    assert value(scrape(state), "replog_write_hints_dropped_total") == 7


def test_a_leaders_replication_factor_leaves_out_the_replicas_being_added(tmp_path: Path) -> None:
    # As Kafka's UnderReplicatedPartitions counts it: during a reassignment the replicas being
    # added are not expected in the ISR yet.
    from replog.quorum.metadata.records import PartitionChangeRecord
    from replog.server.process.node_state import _replica_state
    from replog.testing import ManualClock
    from tests.metadata.metadata_helpers import replayed
    from tests.server.data_plane.test_replica_manager import TID, two_nodes

    leader_node, _, image = two_nodes(tmp_path, ManualClock())
    adding = PartitionChangeRecord(TID, 0, replicas=(1, 2, 3), adding_replicas=(3,))
    leader_node.rm.apply_image(replayed(image, adding))
    partition = leader_node.rm.partition("t", 0)
    assert partition is not None
    state = _replica_state(partition)
    assert (state.replica_count, state.isr_size) == (2, 2)  # not under-replicated


def test_consumer_groups_lag_states_members_and_rebalances() -> None:
    from replog.server.groups.group_coordinator import GroupMetrics, GroupSnapshot

    replicas = (
        ReplicaState("t", 0, True, 1, 1, 1, 0, high_watermark=50),
        ReplicaState("t", 1, False, 0, 0, 0, 0),  # led elsewhere: no lag from here
    )
    groups = GroupMetrics(
        (
            GroupSnapshot("readers", "Stable", 2, (("t", 0, 42), ("t", 1, 7))),
            GroupSnapshot("old", "Empty", 0, (("t", 0, 60),)),  # past the HW: lag 0
        ),
        rebalances=5,
    )
    registry = scrape(NodeState(RAFT, BrokerState(replicas, {}, 0, groups=groups)))
    assert value(registry, "replog_partition_high_watermark", topic="t", partition="0") == 50
    assert value(registry, "replog_partition_high_watermark", topic="t", partition="1") is None
    assert (
        value(registry, "replog_consumer_group_lag", group="readers", topic="t", partition="0") == 8
    )
    assert (
        value(registry, "replog_consumer_group_lag", group="readers", topic="t", partition="1")
        is None
    )
    assert value(registry, "replog_consumer_group_lag", group="old", topic="t", partition="0") == 0
    assert (
        value(
            registry,
            "replog_consumer_group_committed_offset",
            group="readers",
            topic="t",
            partition="1",
        )
        == 7
    )
    assert value(registry, "replog_consumer_groups", state="Stable") == 1
    assert value(registry, "replog_consumer_groups", state="Empty") == 1
    assert value(registry, "replog_consumer_groups", state="PreparingRebalance") == 0
    assert value(registry, "replog_consumer_group_members", group="readers") == 2
    assert value(registry, "replog_consumer_group_rebalances_total") == 5
    # Without a coordinator (not up yet): no group families, the high watermarks still.
    bare = scrape(NodeState(RAFT, BrokerState(replicas, {}, 0)))
    assert value(bare, "replog_consumer_groups", state="Stable") is None


def test_a_scrape_naming_summary_families_never_reads_each_replica() -> None:
    """A poll that names what it reads (`?name[]=...`, the benchmarks') runs only the summary
    collector: no series per partition is built, whose text alone costs ~0.5 s at 10,000."""
    replicas = (leader("a", 0, 3, 2, 2, size=10), follower("a", 1, size=5))
    full = NodeState(RAFT, BrokerState(replicas, {}, 0))
    counted = NodeState(
        RAFT,
        BrokerState((), {}, 0, counts=ReplicaCounts.of(replicas), start_phases={"unfenced": 7.5}),
    )
    asked: list[bool] = []

    def snapshot(replicas: bool) -> NodeState:
        asked.append(replicas)
        return full if replicas else counted

    registry = CollectorRegistry()
    register_node_state(registry, snapshot)
    names = ["replog_partitions", "replog_under_replicated_partitions", START_PHASES]
    text = generate_latest(registry.restricted_registry(names)).decode()
    assert asked == [False]
    assert "replog_partitions 2.0" in text and "replog_under_replicated_partitions 1.0" in text
    assert 'replog_broker_start_phase_time_seconds{phase="unfenced"} 7.5' in text
    assert "replog_log_size_bytes" not in text
    # An unnamed scrape reads everything, and both parts agree on the counts.
    asked.clear()
    assert value(registry, "replog_log_size_bytes", topic="a", partition="1") == 5
    assert sorted(asked) == [False, True]
    assert value(registry, "replog_leader_partitions") == 1


def test_a_live_brokers_replicas_counted_without_reading_them_match_their_states(
    tmp_path: Path,
) -> None:
    from replog.server.process.node_state import _count_replicas, _replica_state
    from replog.testing import ManualClock
    from tests.server.data_plane.test_replica_manager import two_nodes

    leader_node, follower_node, _ = two_nodes(tmp_path, ManualClock())
    for node in (leader_node, follower_node):
        partitions = tuple(node.rm.partitions().values())
        states = tuple(_replica_state(p) for p in partitions)
        assert _count_replicas(partitions) == ReplicaCounts.of(states)
    assert ReplicaCounts.of(_replica_state(p) for p in leader_node.rm.partitions().values()) == (
        ReplicaCounts(partitions=1, leaders=1, under_replicated=0, under_min_isr=0, at_min_isr=0)
    )


def test_the_log_cleaners_gauges_are_its_stats() -> None:
    stats = CleanerStats(
        max_dirty_percent=62.5,
        recopy_percent=12.0,
        max_clean_time_s=0.25,
        max_buffer_utilization_percent=3.0,
        time_since_last_run_ms=1500,
        uncleanable_partitions={"/d0": 2, "/d1": 0},
    )
    registry = scrape(NodeState(RAFT, BrokerState((), {}, 0, cleaner=stats)))
    assert value(registry, "replog_log_cleaner_max_dirty_percent") == 62.5
    assert value(registry, "replog_log_cleaner_recopy_percent") == 12.0
    assert value(registry, "replog_log_cleaner_max_clean_time_seconds") == 0.25
    assert value(registry, "replog_log_cleaner_max_buffer_utilization_percent") == 3.0
    assert value(registry, "replog_log_cleaner_time_since_last_run_seconds") == 1.5
    assert value(registry, "replog_log_cleaner_uncleanable_partitions", log_dir="/d0") == 2
    assert value(registry, "replog_log_cleaner_uncleanable_partitions", log_dir="/d1") == 0
    # Logs not open yet: no cleaner families.
    bare = scrape(NodeState(RAFT, BrokerState((), {}, 0)))
    assert value(bare, "replog_log_cleaner_max_dirty_percent") is None


def test_the_broker_state_is_kafkas_broker_state_metric_of_its_lifecycle() -> None:
    kafka_values = {
        LifecycleState.STARTING: 1,
        LifecycleState.RECOVERY: 2,
        LifecycleState.RUNNING: 3,
        LifecycleState.PENDING_CONTROLLED_SHUTDOWN: 6,
        LifecycleState.SHUTTING_DOWN: 7,
    }
    assert set(kafka_values) == set(LifecycleState)
    for lifecycle, expected in kafka_values.items():
        state = read_node_state(1, quorum_member(1), None, broker_before_its_data_plane(lifecycle))
        assert value(scrape(state), "replog_broker_state") == expected
