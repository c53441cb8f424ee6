"""Partition creation and restart at scale, end to end (issue #50's goals).

Everything runs on one machine: 3-node local clusters of combined broker+controller nodes
(`replog cluster start`, Kafka's default timers) in a temporary directory, driven over gRPC.

1. Create: a fresh cluster per run; `--topics` topics x 10 partitions, replication factor 3, in
   CreateTopics requests of `--per-request` topics, sent one after the other. Two times per run:
   - answered: from the first request to the last answer (the controller's part; this is the
     baseline the end-to-end time is set against, measured in the same run);
   - end to end: until every broker reports every replica created (`replog_partitions`) and
     every partition led (`replog_leader_partitions`), with no replica change left to apply
     (`replog_pending_replica_changes`), read from each node's metrics endpoint, polled at
     the creation's pace (`cluster_metrics.wait_replicas`: seldom far from the end, where
     each poll would take the nodes' interpreter locks and a core from what it times, yet
     within a tenth of the time waited so far, as a creation's pace quickens after its first
     replicas);
   - the phases on the way (`CreationPhases`): when each node held its replicas, every
     partition was led, and every ISR was full.
   A request retried by the client whose first attempt had committed is answered
   TOPIC_ALREADY_EXISTS for this script's own (fresh) topic names: counted as created.
   Also per run: the longest event-loop stall of any node during the creation (from the
   `replog_event_loop_stall_seconds` histogram: the bucket the longest stall fell in), and how
   often the metadata quorum's leader changed (`replog_raft_current_epoch` on every node).
   And the file system's floor for the replicas (`Floor`), measured before each run and
   after the last, and each node's CPU seconds (user + system, all threads) from the first
   request until the end to end condition held, printed per 1,000 replicas created: a cost
   that, unlike the times, does not grow with what else the machine runs (system time
   spent waiting on a shared file system's locks still does).
2. Restart (with `--restart`): the last run's cluster, holding its partitions, is stopped
   cleanly and started again; the time from `cluster start` until every replica is led again,
   against a fresh empty cluster's start measured in the same run (the baseline). Where that
   time goes, as a timeline from `cluster start` (`replog/cli/bench/start_timeline.py`): per
   node, when its broker had started, caught up with the metadata log, loaded its logs,
   applied its first image's replicas and was unfenced (the slowest node's time per phase is
   printed); for the cluster, when every partition had a leader in the controller's view, was
   led by a broker, had a full ISR, and the benchmark's "ready" condition held.

Deletions and the floor (`replog/cli/bench/fs_settle.py`): after a large deletion this ext4
file system (mounted `discard`) costs every `mkdir` and `open` 2-3x for tens of seconds to
minutes, which would slow the next run's figures. So nothing is deleted between the first
measurement and the last: every run's clusters stay until after the final floor and are
deleted then (in `--work-dir` they are kept). What an earlier invocation left in the work
directory (`create-*`, `restart-*`, `fs-floor-*`) is deleted first. Before each run the
benchmark reads the floor once; with `--settle-timeout S` it waits for the floor to settle: it
reads it every `--settle-interval` seconds (15) until two consecutive readings agree within
`--settle-tolerance` (0.2, a fraction of the smaller), for at most S seconds, printing what
it waits for. The wait is off by default: each reading makes and removes a run's worth of
directories, so readings in a row slow the file system they measure (quiet, before the first
run: 1.6, 4.9, 6.7, 11.4 s; at 100,000 partitions 7.8 s rising to 94 s). Each run's floor is
printed and kept in `--json` (`settles`), and the report names a run whose floor stood above
the lowest.

    .venv/bin/python bench/partition_creation.py                    # 10k partitions, 3 runs
    .venv/bin/python bench/partition_creation.py --topics 10000 --per-request 900 --runs 1
    .venv/bin/python bench/partition_creation.py --restart --json out.json

Goals (docs/benchmarks.md, "Partition creation"): 10,000 partitions end to end in under 10 s;
100,000 in under 100 s with no quorum leader change; the longest event-loop stall under
100 ms; a restart of a stopped cluster holding 10,000 partitions in under 10 s.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from replog_cli import replog_cli

from replog.admin.controller_client import ControllerClient
from replog.admin.controller_results import NewTopic
from replog.cli.bench.cluster_metrics import (
    Scrape,
    longest_stall_bucket,
    metrics_urls,
    scrapes,
    wait_replicas,
)
from replog.cli.bench.create_topics import create_in_requests
from replog.cli.bench.fs_settle import (
    Settle,
    agree,
    plan_steps,
    stale_run_dirs,
    wait_settled,
)
from replog.cli.bench.server_cpu import cpu_seconds
from replog.cli.bench.start_timeline import (
    CLUSTER_PHASES,
    NODE_PHASES,
    StartTimeline,
    TimelineWatch,
)
from replog.cli.local_cluster import LocalCluster
from replog.server.data_plane.replica_applier import APPLY_ROUND_CHANGES
from replog.storage.fs import OsFileSystem

NODES = 3
PARTITIONS_PER_TOPIC = 10
REPLICATION_FACTOR = 3
STALL_GOAL_MS = 100  # issue #50: the longest event-loop stall of a creation, median of the runs


@dataclass
class Floor:
    """What the file system alone costs a creation of `replicas` new replicas, measured in the
    run: no code creating them through this file system can be faster (`floor_s`).

    A node creates a replica with a directory, its `.log` file and its `partition.metadata`
    (written under its name: the directory is new), and for a leader (a third of the
    replicas) a leader-epoch checkpoint the same way, none of them synced on its own; a round
    of up to `APPLY_ROUND_CHANGES` creations then ends with one `syncfs` of the file system
    (docs/storage.md, "Creating many replicas"), and a node's rounds run one after the other.
    So the floor is the larger of the operations' CPU spread over the cores and one node's
    chain of syncs."""

    cpu_s_per_replica: float  # user and system CPU of one replica's file operations
    sync_s: float  # the median `syncfs` after a round's files
    replicas: int
    rounds_per_node: int

    @property
    def cpu_s(self) -> float:
        return self.cpu_s_per_replica * self.replicas / (os.cpu_count() or 1)

    @property
    def syncs_s(self) -> float:
        return self.sync_s * self.rounds_per_node

    @property
    def floor_s(self) -> float:
        return max(self.cpu_s, self.syncs_s)


def measure_floor(directory: str, replicas: int, ops: int = 2000) -> Floor:
    """`Floor` for `replicas` new replicas over the cluster's nodes, from `ops` replicas' file
    operations in `directory` (the clusters' file system), in rounds of the nodes' size. CPU
    is this thread's alone (`time.thread_time`)."""
    work = tempfile.mkdtemp(prefix="fs-floor-", dir=directory)
    fs = OsFileSystem()

    def new_file(path: str) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(fd, b"0\n1\n0 0\n")
        os.close(fd)

    cpu = 0.0
    syncs: list[float] = []
    for first in range(0, ops, APPLY_ROUND_CHANGES):
        began = time.thread_time()
        for i in range(first, min(ops, first + APPLY_ROUND_CHANGES)):
            replica = os.path.join(work, f"t-{i}")
            os.mkdir(replica)
            os.close(os.open(os.path.join(replica, "0.log"), os.O_RDWR | os.O_CREAT | os.O_EXCL))
            new_file(os.path.join(replica, "partition.metadata"))
            if i % REPLICATION_FACTOR == 0:
                new_file(os.path.join(replica, "leader-epoch-checkpoint"))
        cpu += time.thread_time() - began
        synced = time.perf_counter()
        fs.sync_file_systems([work])
        syncs.append(time.perf_counter() - synced)
    shutil.rmtree(work)
    per_node = -(-replicas // NODES)
    return Floor(cpu / ops, statistics.median(syncs), replicas, -(-per_node // APPLY_ROUND_CHANGES))


def stop_killed_a_node(said: str) -> bool:
    """Whether `replog cluster stop`'s output reports a node killed: a line "killed (SIGKILL
    after ...) node N" per such node. Its line saying what a long stop waits for names the
    SIGKILL to come too, and is no kill."""
    return any(line.startswith("killed ") for line in said.splitlines())


class Cluster:
    def __init__(self, directory: str, base_port: int, kafka_base_port: int) -> None:
        self.directory = directory
        self.base_port = base_port
        self.kafka_base_port = kafka_base_port
        self.client: ControllerClient | None = None

    def start(self, *, fresh: bool) -> float:
        """Start the cluster; seconds until `cluster start` returned."""
        began = time.perf_counter()
        args = ["cluster", "start", "--data-dir", self.directory, "--base-port"]
        args += [str(self.base_port), "--kafka-base-port", str(self.kafka_base_port)]
        args += ["--nodes", str(NODES), "--timeout", "600"]
        replog_cli(*args, *(["--fresh"] if fresh else []))
        seconds = time.perf_counter() - began
        addresses = LocalCluster.load(self.directory).controller_addresses()
        self.client = ControllerClient(
            list(addresses.values()), node_addresses=addresses, default_timeout_s=120
        )
        return seconds

    def stop(self) -> tuple[float, bool]:
        """Stop the cluster: seconds taken, and whether a node had to be killed (its logs then
        restart through recovery) after `cluster stop`'s default bound (90 s)."""
        if self.client is not None:
            self.client.close()
            self.client = None
        began = time.perf_counter()
        try:
            said = replog_cli("cluster", "stop", "--data-dir", self.directory)
        except RuntimeError as error:
            said = str(error)
        return time.perf_counter() - began, stop_killed_a_node(said)

    def scrapes(self) -> list[Scrape]:
        return scrapes(metrics_urls(self.base_port, NODES))

    def node_cpu_s(self) -> list[float]:
        """Each running node's user + system CPU seconds so far (all its threads), by node
        id (a node not running reads 0)."""
        pids = []
        for node in LocalCluster.load(self.directory).nodes:
            with open(node.pid_path, encoding="ascii") as f:
                pids.append(int(f.read().strip()))
        found = cpu_seconds(pids)
        return [found.get(pid, 0.0) for pid in pids]

    def wait_replicas(
        self,
        partitions: int,
        timeout_s: float = 900,
        on_scrape: Callable[[float, list[Scrape]], None] | None = None,
    ) -> list[Scrape]:
        return wait_replicas(
            metrics_urls(self.base_port, NODES),
            partitions,
            REPLICATION_FACTOR,
            timeout_s,
            on_scrape=on_scrape,
        )

    def watch_start(self, partitions: int) -> TimelineWatch:
        return TimelineWatch(metrics_urls(self.base_port, NODES), partitions, REPLICATION_FACTOR)

    def create(self, prefix: str, topics: int, per_request: int) -> None:
        assert self.client is not None
        batch = [
            NewTopic(f"{prefix}-{i:06d}", PARTITIONS_PER_TOPIC, REPLICATION_FACTOR)
            for i in range(topics)
        ]
        create_in_requests(self.client, batch, per_request, timeout_s=300)


@dataclass
class CreateRun:
    partitions: int
    answered_s: float
    end_to_end_s: float
    longest_stall_s: float  # the upper bound of the bucket the longest stall fell in
    quorum_epoch_changes: int
    # Each node's CPU seconds from the first CreateTopics until the end to end condition held
    # (the creation's work, and the metrics polls that watched it).
    node_cpu_s: list[float] = field(default_factory=list)
    # Seconds from the first request until each phase was first seen (`CreationPhases`).
    phases: dict[str, float] = field(default_factory=dict)

    @property
    def ratio(self) -> float:
        return self.end_to_end_s / self.answered_s

    @property
    def cpu_s_per_1000_replicas(self) -> float:
        """The nodes' CPU over the run's replicas, per 1,000: what one replica's creation
        costs the cluster, independent of how busy the machine was."""
        return sum(self.node_cpu_s) * 1000 / (self.partitions * REPLICATION_FACTOR)


class CreationPhases:
    """When each phase of a creation was first seen in the nodes' metrics, in seconds from
    the first request: `node N created` (node N holds every replica it should: with as many
    nodes as replicas per partition, one of each partition), `every partition led` (the
    brokers lead `partitions` partitions), and `ISR full` (led, and no leader reports a
    partition under-replicated). A phase is known to within the poll's interval."""

    def __init__(self, partitions: int, offset_s: float) -> None:
        self.partitions = partitions
        self.offset_s = offset_s  # the time already gone when the watch began
        self.seen: dict[str, float] = {}

    def on_scrape(self, since_s: float, scraped: list[Scrape]) -> None:
        at = self.offset_s + since_s
        for node, found in enumerate(scraped, start=1):
            if found.partitions >= self.partitions and found.answered:
                self.seen.setdefault(f"node {node} created", at)
        if sum(found.leaders for found in scraped) >= self.partitions:
            self.seen.setdefault("every partition led", at)
            if not any(found.under_replicated for found in scraped):
                self.seen.setdefault("ISR full", at)


@dataclass
class RestartRun:
    partitions: int
    fresh_start_s: float  # baseline: an empty cluster, same run
    restart_s: float  # until every replica is led again
    longest_stall_s: float
    stop_s: float  # the `cluster stop` before the restart
    killed: bool  # whether it had to kill a node (an unclean stop)
    # Seconds from `cluster start`: each node's start phases, and the cluster's.
    node_phases: list[dict[str, float]] = field(default_factory=list)
    cluster_phases: dict[str, float] = field(default_factory=dict)

    def phases(self) -> dict[str, float]:
        """Every phase in order: the slowest node's time for each node phase (the cluster
        waits for it), then the cluster's."""
        found: dict[str, float] = {}
        for phase in NODE_PHASES:
            times = [node[phase] for node in self.node_phases if phase in node]
            if times:
                found[phase] = max(times)
        for phase in CLUSTER_PHASES:
            if phase in self.cluster_phases:
                found[phase] = self.cluster_phases[phase]
        return found


@dataclass
class Results:
    commit: str = ""
    # the file system's floor for the replicas of one creation (`Floor`): the settled reading
    # before each run, then one after the last; the lowest is the floor
    floors: list[Floor] = field(default_factory=list)
    # per run, the wait for the floor to settle before it (`fs_settle.wait_settled`): a run
    # whose floor stands above the lowest was measured on a file system still busy (poisoned)
    settles: list[Settle] = field(default_factory=list)
    settle_tolerance: float = 0.2
    create: list[CreateRun] = field(default_factory=list)
    restart: list[RestartRun] = field(default_factory=list)


def create_run(directory: str, ports: tuple[int, int], topics: int, per_request: int) -> CreateRun:
    cluster = Cluster(directory, *ports)
    cluster.start(fresh=True)
    try:
        cluster.wait_replicas(0)
        before = cluster.scrapes()
        cpu_before = cluster.node_cpu_s()
        began = time.perf_counter()
        cluster.create("bench", topics, per_request)
        answered = time.perf_counter() - began
        partitions = topics * PARTITIONS_PER_TOPIC
        phases = CreationPhases(partitions, answered)
        after = cluster.wait_replicas(partitions, on_scrape=phases.on_scrape)
        end_to_end = time.perf_counter() - began
        cpu_after = cluster.node_cpu_s()
        stall = max(longest_stall_bucket(b, a) for b, a in zip(before, after, strict=True))
        epochs = max(a.epoch - b.epoch for b, a in zip(before, after, strict=True))
        cpu = [after - before for before, after in zip(cpu_before, cpu_after, strict=True)]
        return CreateRun(partitions, answered, end_to_end, stall, epochs, cpu, phases.seen)
    finally:
        cluster.stop()


def restart_run(
    directory: str, ports: tuple[int, int], topics: int, per_request: int
) -> RestartRun:
    empty = Cluster(directory + "-empty", *ports)
    fresh_s = empty.start(fresh=True)
    empty.wait_replicas(0)
    fresh_s_total = fresh_s
    empty.stop()
    cluster = Cluster(directory, *ports)
    cluster.start(fresh=True)
    try:
        cluster.create("bench", topics, per_request)
        partitions = topics * PARTITIONS_PER_TOPIC
        cluster.wait_replicas(partitions)
        stop_s, killed = cluster.stop()
        watch = cluster.watch_start(partitions)
        watch.start(time.time())
        cluster.start(fresh=False)
        timeline: StartTimeline = watch.wait_ready(timeout_s=900)
        restart_s = timeline.cluster["ready"]
        stall = max(longest_stall_bucket(Scrape(), a) for a in timeline.last)
        return RestartRun(
            partitions,
            fresh_s_total,
            restart_s,
            stall,
            stop_s,
            killed,
            timeline.nodes,
            timeline.cluster,
        )
    finally:
        cluster.stop()


def timeline_line(run: RestartRun) -> str:
    nodes = "; ".join(
        f"node {i + 1}: " + ", ".join(f"{p} {t:.1f}" for p, t in node.items())
        for i, node in enumerate(run.node_phases)
    )
    cluster = ", ".join(f"{p} {t:.1f}" for p, t in run.cluster_phases.items())
    return f"{nodes}; cluster: {cluster}"


def settle_floor(directory: str, replicas: int, args: argparse.Namespace) -> tuple[Settle, Floor]:
    """Wait for the file system's floor to settle (`fs_settle.wait_settled`, bounded by
    `--settle-timeout`); the settle's readings and the last reading's `Floor`."""
    last: list[Floor] = []

    def measure() -> float:
        last.append(measure_floor(directory, replicas))
        return last[-1].floor_s

    settle = wait_settled(
        measure,
        tolerance=args.settle_tolerance,
        interval_s=args.settle_interval,
        timeout_s=args.settle_timeout,
        clock=time.monotonic,
        sleep=time.sleep,
        say=lambda line: print(f"  {line}", flush=True),
    )
    return settle, last[-1]


def settle_line(settle: Settle, floor: Floor) -> str:
    state = "settled" if settle.settled else "NOT settled (figures may be slowed by it)"
    readings = [round(r, 2) for r in settle.readings]
    return (
        f"file-system floor {floor.floor_s:.2f} s, {state} after {settle.waited_s:.0f} s "
        f"(readings {readings}; load average {os.getloadavg()[0]:.1f})"
    )


def spread(values: list[float]) -> str:
    return f"min {min(values):.2f} / median {statistics.median(values):.2f} / max {max(values):.2f}"


def report(results: Results) -> None:
    print(f"# commit {results.commit}; nproc {os.cpu_count()}")
    if results.create:
        partitions = results.create[0].partitions
        print(f"Create {partitions:,} partitions (RF {REPLICATION_FACTOR}), {len(results.create)}")
        print("runs; baseline: the same run's time to the last CreateTopics answer")
        print(f"  answered s      {spread([r.answered_s for r in results.create])}")
        print(f"  end to end s    {spread([r.end_to_end_s for r in results.create])}")
        print(f"  ratio           {spread([r.ratio for r in results.create])}")
        stalls = [r.longest_stall_s * 1000 for r in results.create]
        median_stall_ms = statistics.median(stalls)
        print(
            f"  longest stall   <= {median_stall_ms:.0f} ms in the median run, <= "
            f"{max(stalls):.0f} ms at most (per run: {stalls})"
        )
        changes = [r.quorum_epoch_changes for r in results.create]
        print(f"  quorum epoch changes per run: {changes}")
        for phase in sorted({p for r in results.create for p in r.phases}):
            times = [r.phases[phase] for r in results.create if phase in r.phases]
            print(f"  {phase:<22} s {spread(times)}")
        cpu = [r.cpu_s_per_1000_replicas for r in results.create]
        print(f"  node CPU s per 1,000 replicas {spread(cpu)} (all nodes, first request to end)")
        median_s = statistics.median(r.end_to_end_s for r in results.create)
        goal_s = 10 if partitions <= 10_000 else 100
        replicas = partitions * REPLICATION_FACTOR
        if results.floors:
            floor = min(results.floors, key=lambda f: f.floor_s)
            print(
                f"  file-system floor for {replicas:,} new replicas: {floor.floor_s:.2f} s "
                f"(the larger of their file operations' CPU on {os.cpu_count()} cores, "
                f"{floor.cpu_s:.2f} s, and one node's {floor.rounds_per_node} round syncs, "
                f"{floor.syncs_s:.2f} s; the lower of {len(results.floors)} measurements "
                f"in this run: {[round(f.floor_s, 2) for f in results.floors]})"
            )
        lowest = min(f.floor_s for f in results.floors) if results.floors else 0.0
        for run, settle in enumerate(results.settles):
            busy = not agree(lowest, settle.floor_s, results.settle_tolerance)
            # Small floors (a few hundred ms) move by more than the tolerance under load: a
            # hint for the reader, not a verdict.
            note = "; above the lowest beyond the tolerance: a busy file system?" if busy else ""
            state = "settled" if settle.settled else "not settled"
            print(
                f"  run {run + 1} floor before it {settle.floor_s:.2f} s ({state} after "
                f"{settle.waited_s:.0f} s){note}"
            )
        # Issue #50's goals are medians of 3 runs: the end-to-end time's and the longest
        # stall's (its bucket; the 100 ms bucket holds stalls up to 100 ms).
        met = median_s < goal_s and median_stall_ms < STALL_GOAL_MS + 1e-9
        verdict = "met" if met else "missed"
        if partitions > 10_000 and any(changes):
            verdict = "missed (quorum leader changed)"
        print(
            f"  goal (medians of the runs): < {goal_s} s end to end, stalls < "
            f"{STALL_GOAL_MS} ms, no quorum leader change -> {verdict}"
        )
    if results.restart:
        print(f"Restart of a stopped cluster holding {results.restart[0].partitions:,} partitions")
        print("  baseline: a fresh empty cluster's start, same run")
        print(f"  fresh start s   {spread([r.fresh_start_s for r in results.restart])}")
        print(f"  restart s       {spread([r.restart_s for r in results.restart])}")
        ratios = [r.restart_s / r.fresh_start_s for r in results.restart]
        print(f"  ratio           {spread(ratios)}")
        stalls = [r.longest_stall_s * 1000 for r in results.restart]
        print(f"  longest stall since start <= {max(stalls):.0f} ms")
        stops = [r.stop_s for r in results.restart]
        killed = sum(r.killed for r in results.restart)
        print(f"  cluster stop s  {spread(stops)}; unclean (a node killed) in {killed} run(s)")
        print("  timeline, s from `cluster start` (node phases: the slowest node's):")
        runs = [r.phases() for r in results.restart]
        for phase in (*NODE_PHASES, *CLUSTER_PHASES):
            times = [run[phase] for run in runs if phase in run]
            if times:
                print(f"    {phase:<20} {spread(times)}")
        median_s = statistics.median(r.restart_s for r in results.restart)
        print(f"  goal: < 10 s -> {'met' if median_s < 10 else 'missed'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=1000, help="topics of 10 partitions")
    parser.add_argument("--per-request", type=int, default=100, help="topics per CreateTopics")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--restart", action="store_true", help="also measure a restart")
    parser.add_argument("--no-create", action="store_true", help="only the restart")
    parser.add_argument("--base-port", type=int, default=19700)
    parser.add_argument(
        "--kafka-base-port", type=int, default=19900, help="the nodes' Kafka listeners from here"
    )
    parser.add_argument("--json", metavar="FILE")
    parser.add_argument(
        "--settle-tolerance",
        type=float,
        default=0.2,
        help="two consecutive floor readings within this fraction count as settled",
    )
    parser.add_argument(
        "--settle-interval", type=float, default=15, help="seconds between floor readings"
    )
    parser.add_argument(
        "--settle-timeout",
        type=float,
        default=0,
        help="at most this long waiting for the floor before each run (default 0: one "
        "reading; readings in a row slow the file system they measure)",
    )
    parser.add_argument(
        "--work-dir",
        metavar="DIR",
        help="put the clusters here and keep them (node logs name what held an event loop)",
    )
    args = parser.parse_args()
    results = Results(settle_tolerance=args.settle_tolerance)
    with contextlib.suppress(Exception):
        results.commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    with contextlib.ExitStack() as stack:
        if args.work_dir:
            os.makedirs(args.work_dir, exist_ok=True)
            tmp = args.work_dir
        else:
            tmp = tempfile.mkdtemp(prefix="replog-bench-creation-")
            stack.callback(shutil.rmtree, tmp, ignore_errors=True)  # on an error too
        replicas = args.topics * PARTITIONS_PER_TOPIC * REPLICATION_FACTOR
        ports = (args.base_port, args.kafka_base_port)
        for step, run in plan_steps(args.runs, create=not args.no_create, restart=args.restart):
            if step == "delete stale":
                stale = stale_run_dirs(os.listdir(tmp))
                if stale:
                    deleting = time.perf_counter()
                    for name in stale:
                        shutil.rmtree(os.path.join(tmp, name))
                    print(
                        f"deleted {len(stale)} directories an earlier run left in {tmp} "
                        f"({time.perf_counter() - deleting:.1f} s)",
                        flush=True,
                    )
            elif step == "settle":
                settle, floor = settle_floor(tmp, replicas, args)
                results.settles.append(settle)
                results.floors.append(floor)
                print(f"run {run + 1}: {settle_line(settle, floor)}", flush=True)
            elif step == "create":
                found = create_run(
                    os.path.join(tmp, f"create-{run}"), ports, args.topics, args.per_request
                )
                print(f"run {run + 1}: {found}", flush=True)
                results.create.append(found)
            elif step == "restart":
                found_restart = restart_run(
                    os.path.join(tmp, f"restart-{run}"), ports, args.topics, args.per_request
                )
                print(f"run {run + 1}: {found_restart}", flush=True)
                print(f"  phases: {timeline_line(found_restart)}", flush=True)
                results.restart.append(found_restart)
            elif step == "final floor":
                results.floors.append(measure_floor(tmp, replicas))
            elif step == "delete runs" and not args.work_dir:
                # After the last measurement: the deletion's aftermath falls on whatever
                # runs next, which waits for it ("settle").
                deleting = time.perf_counter()
                shutil.rmtree(tmp, ignore_errors=True)
                print(f"deleted the runs' clusters ({time.perf_counter() - deleting:.1f} s)")
    report(results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(asdict(results), f, indent=2)


if __name__ == "__main__":
    main()
