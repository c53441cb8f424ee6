"""Gauges read from a node's live state at scrape time: custom Collectors over a snapshot.

`register_node_state` registers two collectors that ask a snapshot function for a
`NodeState` on every scrape and yield gauge families from it. `read_node_state` builds the
snapshot from the live objects of a node; the only figures kept up to date between scrapes are
the replica counts (`replica_counts`), which change with metadata and ISR changes only, so the
hot paths pay nothing.

- `NodeStateCollector`: the node's summary families, whose cost does not grow with the number
  of replicas: their counts are read, not walked (~60 us of CPU for the page at 33,000
  replicas, where a walk took ~8 ms holding the GIL the event loop waits for).
- `ReplicaGaugesCollector`: the families with a series per partition or group
  (`replog_log_size_bytes`, `replog_partition_high_watermark`, the consumer groups'). Turning
  10,000 replicas' series into text costs ~0.5 s of a scrape.
- Both describe their families, so a scrape that names the families it wants (Prometheus'
  `/metrics?name[]=replog_partitions&name[]=...`, as the benchmarks poll) runs only the
  collector that yields them: a poll of the summary never builds a per-partition series.

Rules (Kafka's, docs/design/clients.md#metric-names):
- Under-replicated: a partition this broker leads whose committed ISR is smaller than its
  replica set. Under min ISR: one it leads whose ISR is below the effective
  `min.insync.replicas` (capped at the replica count); at min ISR: ISR equal to it. A broker
  reports only the partitions it leads, so summing over brokers counts each partition once.
- Offline partitions: partitions without a leader in the controller's committed state
  (`ControllerDriver.offline_partitions`), reported by the active controller only, whatever
  the node's other roles; the others report 0, so a sum over nodes is the cluster's count
  (Kafka's OfflinePartitionsCount of the active controller). Not the broker's image: a
  controller-only node has none, and it would report 0 while partitions are offline.
- `replog_active_controller` is 1 on the node that believes it is the active controller.
- The Raft gauges are the node's view of the metadata quorum (leader -1: unknown).
- `replog_metadata_offset_lag`: the metadata log's high watermark minus the offset just past
  what the broker applied (0 when caught up).
- `replog_write_hints_dropped_total`: writeback and page-cache hints the process's hint thread
  skipped because its queue was full (the disk is behind the appends) or a descriptor could not
  be duplicated; a counter, read from `write_hints.runner` (process-wide, like the thread).
- Consumer groups (docs/groups.md#metrics): the broker coordinating a group reports it
  (`replog_consumer_groups` by state, `replog_consumer_group_members`, its committed offsets,
  and `replog_consumer_group_lag` for the partitions this broker leads, where it knows the
  high watermark exactly); each leader reports `replog_partition_high_watermark`, so a query
  can join the two for partitions led elsewhere. `replog_consumer_group_rebalances` counts the
  rebalances completed by this broker's coordinators since it started. Summing over brokers
  counts each group once.
- Families of a role the node does not have (no broker, no controller) are left out.
- `replog_broker_state`: this process's broker lifecycle as Kafka's BrokerState metric counts
  it (3: running, unfenced by the controller). A node restarted after a crash reports its own
  state, where the controller lists the killed process's registration until its session
  expires: `replog cluster start` and `restart` wait on it.
- `replog_broker_start_phase_time_seconds{phase}`: the Unix time at which this broker process
  reached each phase of its start (`broker_runtime.START_PHASES`): started, registered,
  metadata caught up, logs loaded, replicas of the first image applied, unfenced; a phase not
  reached yet has no series. A restart's timeline (bench/partition_creation.py) reads them.

Thread safety: the HTTP endpoint scrapes on its own thread while the event loop changes the
state. Reads here copy containers in one C call (`tuple(d.values())`, atomic under the GIL)
and read plain attributes (the replica counts: one tuple the loop replaces); a scrape that
still races with a change (a log's segment map resized mid-sum) retries once, then reports
what it has.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from replog.quorum.metadata.broker_lifecycle import BROKER_STATE_METRIC
from replog.server.data_plane.replica_counts import ReplicaCounts, led_figures
from replog.server.groups.group_coordinator import GroupMetrics
from replog.storage import write_hints
from replog.storage.cleaner.log_cleaner import CleanerStats

if TYPE_CHECKING:
    from replog.server.broker.broker_runtime import BrokerRuntime
    from replog.server.controller.controller_driver import ControllerDriver
    from replog.server.data_plane.partition import Partition
    from replog.server.raft.raft_driver import RaftDriver

log = logging.getLogger("replog.server.metrics")

NO_LEADER = -1
GROUP_STATES = ("Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead")


@dataclass(frozen=True, slots=True)
class ReplicaState:
    """One partition replica hosted by this broker, as the gauges need it."""

    topic: str
    partition: int
    is_leader: bool
    replica_count: int
    isr_size: int  # the committed ISR (leaders only; 0 otherwise)
    min_isr: int  # the effective min.insync.replicas (leaders only; 0 otherwise)
    size_bytes: int
    high_watermark: int = -1  # leaders only


@dataclass(frozen=True, slots=True)
class RaftState:
    high_watermark: int
    log_end_offset: int
    epoch: int
    leader_id: int  # -1: unknown


@dataclass(frozen=True, slots=True)
class BrokerState:
    replicas: tuple[ReplicaState, ...]  # empty in a snapshot taken without them
    purgatory_sizes: Mapping[str, int]  # "produce", "fetch" -> waiting requests
    metadata_offset_lag: int
    write_hints_dropped: int = 0
    pending_replica_changes: int = 0
    groups: GroupMetrics | None = None  # None: the group coordinator is not up
    # Counted while reading the live replicas; None: count `replicas`.
    counts: ReplicaCounts | None = None
    start_phases: Mapping[str, float] = field(default_factory=dict)  # phase -> Unix time
    cleaner: CleanerStats | None = None  # None: the logs are not open yet
    # Kafka's BrokerState metric value of its lifecycle (`BROKER_STATE_METRIC`; 0 NOT_RUNNING).
    lifecycle_state: int = 0

    @property
    def replica_counts(self) -> ReplicaCounts:
        return self.counts if self.counts is not None else ReplicaCounts.of(self.replicas)


@dataclass(frozen=True, slots=True)
class NodeState:
    raft: RaftState
    broker: BrokerState | None = None  # None: no broker role (or its data plane not up yet)
    is_controller: bool = False
    active_controller: bool = False
    offline_partitions: int = 0


# The snapshot function of the collectors: its argument says whether to read every replica
# (the per-partition families need them; the summary needs only their counts).
Snapshot = Callable[[bool], NodeState]


def register_node_state(registry: CollectorRegistry, snapshot: Snapshot) -> None:
    """Register the node's state gauges (module docstring) on `registry`."""
    registry.register(NodeStateCollector(snapshot))
    registry.register(ReplicaGaugesCollector(snapshot))


class NodeStateCollector(Collector):
    """Yields the summary gauges of `NodeState` (module docstring) on every scrape."""

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot

    def describe(self) -> Iterator[Metric]:
        return _summary_families(_EVERY_ROLE)

    def collect(self) -> Iterator[Metric]:
        return _summary_families(self._snapshot(False))


class ReplicaGaugesCollector(Collector):
    """Yields the per-partition and per-group gauges of `NodeState` on every scrape."""

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot

    def describe(self) -> Iterator[Metric]:
        assert _EVERY_ROLE.broker is not None
        return _replica_families(_EVERY_ROLE.broker)

    def collect(self) -> Iterator[Metric]:
        broker = self._snapshot(True).broker
        if broker is not None:
            yield from _replica_families(broker)


def _summary_families(state: NodeState) -> Iterator[Metric]:
    raft = state.raft
    yield _gauge("replog_raft_high_watermark", "Metadata log high watermark", raft.high_watermark)
    yield _gauge("replog_raft_log_end_offset", "Metadata log end offset", raft.log_end_offset)
    yield _gauge("replog_raft_current_epoch", "Metadata quorum epoch", raft.epoch)
    yield _gauge(
        "replog_raft_current_leader", "Metadata quorum leader id (-1: unknown)", raft.leader_id
    )
    if state.is_controller:
        yield _gauge(
            "replog_active_controller",
            "1 on the active controller, 0 elsewhere",
            1 if state.active_controller else 0,
        )
        yield _gauge(
            "replog_offline_partitions",
            "Partitions without a leader (active controller's view; 0 elsewhere)",
            state.offline_partitions if state.active_controller else 0,
        )
    broker = state.broker
    if broker is None:
        return
    counts = broker.replica_counts
    yield _gauge(
        "replog_broker_state",
        "This process's broker state, as Kafka's BrokerState metric: 1 starting, 2 recovery, "
        "3 running, 6 pending controlled shutdown, 7 shutting down",
        broker.lifecycle_state,
    )
    yield _gauge(
        "replog_under_replicated_partitions",
        "Partitions this broker leads whose ISR is smaller than their replica set",
        counts.under_replicated,
    )
    yield _gauge(
        "replog_under_min_isr_partitions",
        "Partitions this broker leads whose ISR is below min.insync.replicas",
        counts.under_min_isr,
    )
    yield _gauge(
        "replog_at_min_isr_partitions",
        "Partitions this broker leads whose ISR equals min.insync.replicas",
        counts.at_min_isr,
    )
    yield _gauge(
        "replog_partitions",
        "Partition replicas on this broker (Kafka's PartitionCount)",
        counts.partitions,
    )
    yield _gauge(
        "replog_leader_partitions",
        "Partitions this broker leads (Kafka's LeaderCount)",
        counts.leaders,
    )
    yield _gauge(
        "replog_pending_replica_changes",
        "Replica changes of applied metadata images this broker has yet to carry out",
        broker.pending_replica_changes,
    )
    purgatory = GaugeMetricFamily(
        "replog_purgatory_size",
        "Requests waiting in a purgatory (produce: acks=all; fetch: min bytes)",
        labels=["purgatory"],
    )
    for name in ("produce", "fetch"):
        purgatory.add_metric([name], broker.purgatory_sizes.get(name, 0))
    yield purgatory
    yield _gauge(
        "replog_metadata_offset_lag",
        "Metadata log high watermark minus the offset after the last one the broker applied",
        broker.metadata_offset_lag,
    )
    yield CounterMetricFamily(
        "replog_write_hints_dropped",
        "Writeback and page-cache hints skipped (queue full: the disk is behind the appends)",
        value=broker.write_hints_dropped,
    )
    phases = GaugeMetricFamily(
        "replog_broker_start_phase_time_seconds",
        "Unix time at which this broker's start reached a phase (started, registered, "
        "metadata_caught_up, logs_loaded, replicas_applied, unfenced)",
        labels=["phase"],
    )
    for phase, at in broker.start_phases.items():
        phases.add_metric([phase], at)
    yield phases
    if broker.cleaner is not None:
        yield from _cleaner_families(broker.cleaner)


def _cleaner_families(cleaner: CleanerStats) -> Iterator[Metric]:
    """The log cleaner's gauges, Kafka's `LogCleaner` and `LogCleanerManager` ones."""
    yield _gauge(
        "replog_log_cleaner_max_dirty_percent",
        "The largest dirty ratio of the compacted logs at the cleaner's last choice, in percent "
        "(Kafka's max-dirty-percent)",
        cleaner.max_dirty_percent,
    )
    yield _gauge(
        "replog_log_cleaner_recopy_percent",
        "Bytes written over bytes read by each cleaner thread's last pass, in percent, averaged "
        "(Kafka's cleaner-recopy-percent)",
        cleaner.recopy_percent,
    )
    yield _gauge(
        "replog_log_cleaner_max_clean_time_seconds",
        "The longest of the cleaner threads' last passes (Kafka's max-clean-time-secs)",
        cleaner.max_clean_time_s,
    )
    yield _gauge(
        "replog_log_cleaner_max_buffer_utilization_percent",
        "The fullest key map of the cleaner threads' last passes, in percent of its slots "
        "(Kafka's max-buffer-utilization-percent)",
        cleaner.max_buffer_utilization_percent,
    )
    yield _gauge(
        "replog_log_cleaner_time_since_last_run_seconds",
        "Seconds since a cleaner thread last looked for a log to clean "
        "(Kafka's time-since-last-run-ms)",
        cleaner.time_since_last_run_ms / 1000,
    )
    uncleanable = GaugeMetricFamily(
        "replog_log_cleaner_uncleanable_partitions",
        "Logs whose cleaning failed on a corrupt record, per log dir, not cleaned again until "
        "removed (Kafka's uncleanable-partitions-count)",
        labels=["log_dir"],
    )
    for log_dir, count in sorted(cleaner.uncleanable_partitions.items()):
        uncleanable.add_metric([log_dir], count)
    yield uncleanable


def _replica_families(broker: BrokerState) -> Iterator[Metric]:
    sizes = GaugeMetricFamily(
        "replog_log_size_bytes",
        "Bytes of a partition replica's log on this broker",
        labels=["topic", "partition"],
    )
    for replica in broker.replicas:
        sizes.add_metric([replica.topic, str(replica.partition)], replica.size_bytes)
    yield sizes
    yield from _group_families(broker)


def _group_families(broker: BrokerState) -> Iterator[Metric]:
    """The high watermarks this broker leads and the consumer groups it coordinates."""
    high_watermarks = GaugeMetricFamily(
        "replog_partition_high_watermark",
        "High watermark of a partition this broker leads",
        labels=["topic", "partition"],
    )
    led: dict[tuple[str, int], int] = {}
    for replica in broker.replicas:
        if replica.is_leader:
            led[(replica.topic, replica.partition)] = replica.high_watermark
            high_watermarks.add_metric(
                [replica.topic, str(replica.partition)], replica.high_watermark
            )
    yield high_watermarks
    groups = broker.groups
    if groups is None:
        return
    states = GaugeMetricFamily(
        "replog_consumer_groups",
        "Consumer groups this broker coordinates, by state",
        labels=["state"],
    )
    counts = {state: 0 for state in GROUP_STATES}
    members = GaugeMetricFamily(
        "replog_consumer_group_members", "Members of a consumer group", labels=["group"]
    )
    committed = GaugeMetricFamily(
        "replog_consumer_group_committed_offset",
        "A consumer group's committed offset of a partition (the next offset to read)",
        labels=["group", "topic", "partition"],
    )
    lag = GaugeMetricFamily(
        "replog_consumer_group_lag",
        "High watermark minus committed offset (partitions this broker leads)",
        labels=["group", "topic", "partition"],
    )
    for group in groups.groups:
        counts[group.state] = counts.get(group.state, 0) + 1
        members.add_metric([group.group_id], group.members)
        for topic, partition, offset in group.committed:
            labels = [group.group_id, topic, str(partition)]
            committed.add_metric(labels, offset)
            high_watermark = led.get((topic, partition))
            if high_watermark is not None:
                lag.add_metric(labels, max(0, high_watermark - offset))
    for state, count in counts.items():
        states.add_metric([state], count)
    yield states
    yield members
    yield committed
    yield lag
    yield CounterMetricFamily(
        "replog_consumer_group_rebalances",
        "Rebalances completed by the group coordinators of this broker since it started",
        value=groups.rebalances,
    )


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)


# What `describe` yields the families of: a node with every role.
_EVERY_ROLE = NodeState(
    RaftState(0, 0, 0, NO_LEADER),
    BrokerState((), {}, 0, groups=GroupMetrics((), 0), cleaner=CleanerStats(0, 0, 0, 0, 0)),
    is_controller=True,
)


# --- reading a live node ---------------------------------------------------------------------


def read_node_state(
    node_id: int,
    driver: RaftDriver,
    controller: ControllerDriver | None,
    broker: BrokerRuntime | None,
    replicas: bool = True,
) -> NodeState:
    """The live state of a node's parts (see the module docstring's thread-safety note);
    without `replicas`, the broker's replicas only counted (`BrokerState.counts`)."""
    status = driver.status()
    raft = RaftState(
        high_watermark=status.high_watermark,
        log_end_offset=status.log_end_offset,
        epoch=status.quorum_epoch,
        leader_id=NO_LEADER if status.leader_id is None else status.leader_id,
    )
    active = controller is not None and controller.controller_id == node_id
    # Gated by the same `active` as the gauge: the state holds what a scrape reports.
    offline = controller.offline_partitions if controller is not None and active else 0
    return NodeState(
        raft=raft,
        broker=None
        if broker is None
        else _read_broker(broker, status.high_watermark, replicas=replicas),
        is_controller=controller is not None,
        active_controller=active,
        offline_partitions=offline,
    )


def _read_broker(
    broker: BrokerRuntime, metadata_high_watermark: int, *, replicas: bool
) -> BrokerState | None:
    applied_end = broker.metadata.last_applied_offset + 1
    lag = max(0, metadata_high_watermark - applied_end)
    replica_manager = broker.replica_manager
    dropped = getattr(write_hints.runner, "dropped", 0)  # a test's runner may keep no count
    phases = dict(broker.start_phases)
    state = BROKER_STATE_METRIC[broker.lifecycle.state]
    log_manager = broker.log_manager
    cleaner = None if log_manager is None else log_manager.cleaner.stats()
    if replica_manager is None:  # the data plane is not up yet: no replicas to report
        return BrokerState(
            (),
            {},
            lag,
            dropped,
            counts=ReplicaCounts(),
            start_phases=phases,
            cleaner=cleaner,
            lifecycle_state=state,
        )
    states: tuple[ReplicaState, ...] = ()
    counts: ReplicaCounts | None = None
    groups: GroupMetrics | None = None
    if replicas:
        coordinator = broker.group_coordinator
        for attempt in (1, 2):
            try:
                states = tuple(
                    _replica_state(p) for p in tuple(replica_manager.partitions().values())
                )
                groups = None if coordinator is None else coordinator.metrics_snapshot()
                break
            except RuntimeError:  # a container changed size under the scrape (see docstring)
                log.debug("metrics scrape raced with a change (attempt %d)", attempt)
    else:
        counts = replica_manager.replica_counts.counts
    return BrokerState(
        states,
        replica_manager.purgatory_sizes(),
        lag,
        dropped,
        replica_manager.pending_changes,
        groups,
        counts=counts,
        start_phases=phases,
        cleaner=cleaner,
        lifecycle_state=state,
    )


def _count_replicas(partitions: tuple[Partition, ...]) -> ReplicaCounts:
    """The counts by a walk over every replica: the oracle the tests check the counts the
    replica manager keeps (`LiveReplicaCounts`) against."""
    return ReplicaCounts.tally(
        len(partitions),
        (figures for partition in partitions if (figures := led_figures(partition)) is not None),
    )


def _replica_state(partition: Partition) -> ReplicaState:
    figures = led_figures(partition)
    if figures is None:
        return ReplicaState(
            partition.topic, partition.partition, False, 0, 0, 0, partition.log.size_in_bytes
        )
    replica_count, isr_size, min_isr = figures
    return ReplicaState(
        topic=partition.topic,
        partition=partition.partition,
        is_leader=True,
        replica_count=replica_count,
        isr_size=isr_size,
        min_isr=min_isr,
        size_bytes=partition.log.size_in_bytes,
        high_watermark=partition.log.high_watermark,
    )
