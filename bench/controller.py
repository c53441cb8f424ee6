"""Controller benchmark (issue #5): topic creation, controller failover, memory per partition.

Everything runs on one machine: the script starts (and always stops) local 3-node clusters of
combined broker+controller nodes with `replog cluster start` (Kafka's default timers), talks to
them over gRPC, and runs its in-process baselines in child processes of its own.

1. Create (cluster A, fresh). Trials of 1,000 topics x 10 partitions, replication factor 3 (the
   issue's 10k partitions), through the Controller service with `ControllerClient`, in
   CreateTopics requests of `--request-sizes` topics each (900 is about the most one request
   may hold: its 11 records per topic must fit one metadata batch of 10,000 records). Trials
   alternate between the request sizes, so the image grows under all of them alike (0 to
   100k partitions in the full run). Per trial: wall time from the first request until every
   broker reports every replica created and every partition led, with no replica change left
   to apply (its metrics endpoint: `replog/cli/bench/cluster_metrics.py`), and, printed
   beside it, to the last answer; partitions/s, and metadata records/s, the records counted as
   the committed offset after minus before (DescribeCluster's `metadata_offset`; NoOpRecords,
   one per 500 ms, are counted too and are negligible here). The CPU time of the three nodes
   and of this client over the trial says how busy the 2 cores were.
   Baseline: the pure controller core (`QuorumController` over the fake log of
   tests/controller/controller_harness.py, one active controller, commits at once) creating
   the same topics with the same request sizes in the same order, in a child process. The
   ratio (cluster / core throughput) is what the quorum, three replaying nodes, the broker
   images, protobuf and gRPC cost on top of the controller's own decisions.
2. Memory (cluster A). VmRSS of each node process (/proc/<pid>/status) with an empty image and
   again after growing it; the growth divided by the partitions added is the resident memory
   per partition. Each node holds the partitions twice (its controller's timeline state and
   its broker's MetadataImage), plus its Raft log's buffers. Baselines, each in a fresh child
   process measured the same way (RSS growth): a plain dict holding one small tuple per
   partition (leader, replicas, ISR, leader epoch, partition epoch), the least any Python
   process could spend; and, to split the node's figure, the controller core's state for the
   same partitions and a broker MetadataImage loaded from a snapshot of that state (its own
   objects, decoded from bytes in 1,000-record chunks so transient memory stays small).
3. Failover (cluster A at the large image, then cluster B: empty image, then the small one).
   kill -9 of the active controller's process group (found with DescribeCluster's
   `controller_id` and the node's pid file), then CreateTopics of a new 1-partition topic
   sent to the survivors (connections open before the kill) every 10 ms until one succeeds:
   the time from the kill to that answer (`replog/cli/bench/controller_failover.py`, which
   `replog bench`'s controller run uses too). Also when a survivor first names the new
   controller (the rest is the new controller's claim and its first commit). Between trials
   the killed node is restarted and the script waits until its broker has re-registered (a
   new broker epoch: the old incarnation's session must expire first, 9 s), every broker is
   unfenced, the voters' logs are equal and the metadata log is quiet, so no big write (the
   old incarnation's fencing rewrites every partition it was in) overlaps the next trial.
   If the cluster does not settle within 60 s, the trial reports why and how often the
   active controller changed meanwhile, and the next trial at that size runs on a fresh
   cluster grown to the same image without waiting for a rejoin again (at 100k partitions
   the restarted node never rejoins: see docs/benchmarks.md).
   The probe topic has replication factor 1: from 9 s after the kill until the node is back
   only two brokers are active, and a replication factor 3 create would then be refused for
   lack of brokers, not of a controller. Baseline: the same trial on an empty image, in the
   same run; the ratio shows what the image's size adds.

Images use replication factor 3 throughout (RF 1 would put a third of the ISR and replica
entries in memory and records; 100k x RF 3 takes about 13 s to create here, so it is
affordable). Every figure is the median over its trials; per-trial values are printed too.

    .venv/bin/python bench/controller.py             # full run, about 4 minutes
    .venv/bin/python bench/controller.py --quick     # smoke run, about 40 s
    .venv/bin/python bench/controller.py --json out.json

Clusters live in a temporary directory, on ports 19600-19602 (A) and 19610-19612 (B)
(`--base-port P`: P and P+10).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib.util
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import grpc

from replog.admin.cluster_metadata import ClusterDescription
from replog.admin.controller_client import ControllerClient
from replog.admin.controller_results import NewTopic
from replog.cli.bench.cluster_metrics import metrics_urls, wait_replicas
from replog.cli.bench.controller_failover import over_grpc
from replog.cli.bench.create_topics import create_in_requests
from replog.cli.local_cluster import LocalCluster
from replog.pb import raft_pb2, raft_pb2_grpc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HARNESS = os.path.join(ROOT, "tests", "controller", "controller_harness.py")
BASE_PORT_A = 19600
BASE_PORT_B = 19610
NODES = 3
PARTITIONS_PER_TOPIC = 10
REPLICATION_FACTOR = 3
SNAPSHOT_CHUNK_RECORDS = 1000
MAX_TOPICS_PER_REQUEST = 900  # 900 x 11 records = 9,900: one metadata batch holds 10,000
PAGE = os.sysconf("SC_PAGE_SIZE")
TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Mode:
    topics_per_trial: int
    request_sizes: tuple[int, ...]
    create_trials: int  # per request size
    small_image: int  # partitions (cluster B's second failover size)
    large_image: int  # partitions (cluster A after the create trials, topped up)
    failover_trials: int  # per image size


FULL = Mode(1000, (100, 900), 5, 10_000, 100_000, 3)
QUICK = Mode(100, (10, 50), 1, 1_000, 2_000, 1)


# --- results ---------------------------------------------------------------------------------


@dataclass
class CreateTrial:
    topics_per_request: int
    partitions: int
    image_before: int  # partitions already in the image
    seconds: float  # end to end: every replica created and led
    records: int
    node_cpu_s: float
    client_cpu_s: float
    answered_s: float = 0.0  # to the last CreateTopics answer

    @property
    def partitions_per_s(self) -> float:
        return self.partitions / self.seconds

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds

    @property
    def cores(self) -> float:
        return (self.node_cpu_s + self.client_cpu_s) / self.seconds


@dataclass
class FailoverTrial:
    image_partitions: int
    killed: int
    new_controller: int
    seconds: float  # kill -9 -> first successful CreateTopics
    known_s: float | None  # kill -9 -> a survivor first names the new controller
    rejoin_s: float | None = None  # restart -> re-registered, unfenced, caught up, quiet
    rejoin_failed: str | None = None  # why the cluster did not settle within the time allowed
    controller_changes: int = 0  # while waiting for it to settle


@dataclass
class Results:
    machine: dict[str, object] = field(default_factory=dict)
    create: list[CreateTrial] = field(default_factory=list)
    core_create: list[dict[str, float]] = field(default_factory=list)
    rss_kib: dict[str, dict[int, int]] = field(default_factory=dict)  # label -> node -> KiB
    core_memory: dict[str, float] = field(default_factory=dict)
    image_memory: dict[str, float] = field(default_factory=dict)
    dict_memory: dict[str, float] = field(default_factory=dict)
    failover: list[FailoverTrial] = field(default_factory=list)
    loadavg: list[tuple[str, tuple[float, float, float]]] = field(default_factory=list)


# --- process facts ---------------------------------------------------------------------------


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def cpu_seconds(pid: int) -> float:
    """utime + stime of `pid` (its threads included)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def port_free(port: int) -> bool:
    with socket.socket() as s:
        # SO_REUSEADDR: a previous run's connections in TIME_WAIT do not make the port busy.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def note_load(results: Results, when: str) -> None:
    load = os.getloadavg()
    results.loadavg.append((when, load))
    print(f"  [load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}: {when}]", flush=True)


# --- a local cluster -------------------------------------------------------------------------


def replog_cli(*args: str, check: bool = True, timeout: float = 180) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "replog.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if check and done.returncode != 0:
        raise RuntimeError(f"replog {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


class BenchCluster:
    """A `replog cluster` of 3 combined nodes in `directory` (started, stopped, probed)."""

    def __init__(self, directory: str, base_port: int) -> None:
        self.directory = directory
        self.base_port = base_port
        self.addresses: dict[int, str] = {}
        self.client: ControllerClient | None = None
        self.partitions = 0  # in the image, as created by this script
        # Active controllers seen by describe_cluster: how often it changed.
        self.last_controller: int | None = None
        self.controller_changes = 0
        self._topic_serial = 0

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        busy = [p for p in range(self.base_port, self.base_port + NODES) if not port_free(p)]
        if busy:
            raise SystemExit(f"ports in use: {busy} (another run?)")
        replog_cli(
            "cluster",
            "start",
            "--data-dir",
            self.directory,
            "--base-port",
            str(self.base_port),
            "--nodes",
            str(NODES),
            "--fresh",
        )
        self.addresses = LocalCluster.load(self.directory).controller_addresses()
        self.client = ControllerClient(
            list(self.addresses.values()), node_addresses=self.addresses, default_timeout_s=120
        )
        self.wait_settled({})

    def stop(self) -> None:
        if self.client is not None:
            self.client.close()
        if not os.path.exists(os.path.join(self.directory, "cluster.json")):
            return
        # A short timeout: with a large image the three brokers' simultaneous controlled
        # shutdowns are not granted within the brokers' own 30 s limit (see docs/benchmarks.md),
        # and the data is thrown away anyway.
        with contextlib.suppress(Exception):
            replog_cli("cluster", "stop", "--data-dir", self.directory, "--timeout", "5")
        for node_id in self.addresses:  # whatever survived the stop: kill its process group
            with contextlib.suppress(OSError, ValueError):
                os.killpg(self.pid(node_id), signal.SIGKILL)

    def pid(self, node_id: int) -> int:
        path = os.path.join(self.directory, f"node-{node_id}", "node.pid")
        with open(path, encoding="ascii") as f:
            return int(f.read().strip())

    def pids(self) -> dict[int, int]:
        return {node_id: self.pid(node_id) for node_id in self.addresses}

    def kill(self, node_id: int) -> None:
        # Straight to the process group: `replog cluster kill` would add a Python start-up
        # (a few hundred ms) to the measured time.
        os.killpg(self.pid(node_id), signal.SIGKILL)

    def restart(self, node_id: int) -> None:
        # The killed process may take a moment to be reaped; restart refuses a running node.
        deadline = time.monotonic() + 10
        while True:
            try:
                replog_cli("cluster", "restart", str(node_id), "--data-dir", self.directory)
                return
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    # -- probes ------------------------------------------------------------------------------

    def describe_cluster(self) -> ClusterDescription:
        assert self.client is not None
        answer = self.client.describe_cluster()
        if answer.controller_id is not None and answer.controller_id != self.last_controller:
            if self.last_controller is not None:
                self.controller_changes += 1
            self.last_controller = answer.controller_id
        return answer

    def describe_quorum(self) -> raft_pb2.DescribeQuorumResponse | None:
        """The Raft leader's DescribeQuorum answer, or None if no node names a live leader."""
        for address in self.addresses.values():
            with grpc.insecure_channel(address) as channel:
                stub = raft_pb2_grpc.RaftQuorumStub(channel)  # type: ignore[no-untyped-call]
                try:
                    answer = stub.DescribeQuorum(raft_pb2.DescribeQuorumRequest(), timeout=2)
                except grpc.RpcError:
                    continue
            if answer.error_code == 0:
                return answer
        return None

    def wait_settled(self, old_epochs: dict[int, int], timeout_s: float = 180) -> None:
        """Until the cluster is at rest: every broker registered (the ones in `old_epochs` with
        a new broker epoch, i.e. re-registered after a kill) and unfenced, the voters' logs
        equal, and no more than NoOpRecords committed over half a second."""
        deadline = time.monotonic() + timeout_s
        why = "not asked yet"
        while time.monotonic() < deadline:
            quorum = self.describe_quorum()
            if quorum is None or len(quorum.voters) != NODES:
                why = "no leader with 3 voters"
            elif len({v.log_end_offset for v in quorum.voters}) != 1:
                why = f"voters' log ends differ: {[v.log_end_offset for v in quorum.voters]}"
            else:
                first = self.describe_cluster()
                brokers = {b.broker_id: b for b in first.brokers}
                stale = [b for b, epoch in old_epochs.items() if brokers[b].broker_epoch == epoch]
                if len(brokers) != NODES or any(
                    b.fenced or b.in_controlled_shutdown for b in brokers.values()
                ):
                    why = f"brokers: {[(b.broker_id, b.fenced) for b in first.brokers]}"
                elif stale:
                    why = f"brokers {stale} not re-registered yet"
                else:
                    time.sleep(0.5)
                    second = self.describe_cluster()
                    if second.metadata_offset - first.metadata_offset <= 3:
                        return
                    why = f"still writing ({first.metadata_offset} -> {second.metadata_offset})"
            time.sleep(0.2)
        raise RuntimeError(f"the cluster in {self.directory} did not settle: {why}")

    def active_controller(self) -> int:
        controller = self.describe_cluster().controller_id
        quorum = self.describe_quorum()
        if controller is None or quorum is None or quorum.leader_id != controller:
            raise RuntimeError(f"no agreed active controller ({controller}, {quorum})")
        return controller

    def rss(self) -> dict[int, int]:
        return {node_id: rss_kib(pid) for node_id, pid in self.pids().items()}

    # -- writes ------------------------------------------------------------------------------

    def new_topics(self, prefix: str, count: int) -> list[NewTopic]:
        names = range(self._topic_serial, self._topic_serial + count)
        self._topic_serial += count
        return [
            NewTopic(f"{prefix}-{i:06d}", PARTITIONS_PER_TOPIC, REPLICATION_FACTOR) for i in names
        ]

    def create(self, topics: Sequence[NewTopic], per_request: int) -> None:
        assert self.client is not None
        create_in_requests(self.client, topics, per_request, timeout_s=120)
        self.partitions += sum(t.num_partitions for t in topics)

    def wait_replicas(self) -> None:
        """Until every broker has created every replica of the image and every partition is
        led (the end of a creation, end to end)."""
        wait_replicas(metrics_urls(self.base_port, NODES), self.partitions, REPLICATION_FACTOR, 600)

    def grow_to(self, partitions: int) -> None:
        """Create topics (largest requests) until the image holds `partitions` partitions."""
        missing = (partitions - self.partitions) // PARTITIONS_PER_TOPIC
        if missing > 0:
            self.create(self.new_topics("fill", missing), MAX_TOPICS_PER_REQUEST)
            self.wait_settled({})


# --- 1. create -------------------------------------------------------------------------------


def trial_plan(mode: Mode) -> list[int]:
    """Topics per request of each create trial, sizes alternating."""
    return [size for _ in range(mode.create_trials) for size in mode.request_sizes]


def create_trial(cluster: BenchCluster, topics_count: int, per_request: int) -> CreateTrial:
    topics = cluster.new_topics(f"t{per_request}", topics_count)  # built before the clock
    pids = cluster.pids()
    image_before = cluster.partitions
    offset_before = cluster.describe_cluster().metadata_offset
    nodes_cpu = sum(cpu_seconds(p) for p in pids.values())
    client_cpu = time.process_time()
    began = time.perf_counter()
    cluster.create(topics, per_request)
    answered = time.perf_counter() - began
    cluster.wait_replicas()
    seconds = time.perf_counter() - began
    client_cpu = time.process_time() - client_cpu
    nodes_cpu = sum(cpu_seconds(p) for p in pids.values()) - nodes_cpu
    offset_after = cluster.describe_cluster().metadata_offset
    # The followers are still replaying the last batch: let them finish before the next trial.
    cluster.wait_settled({})
    return CreateTrial(
        per_request,
        topics_count * PARTITIONS_PER_TOPIC,
        image_before,
        seconds,
        offset_after - offset_before,
        nodes_cpu,
        client_cpu,
        answered,
    )


# --- 3. failover -----------------------------------------------------------------------------


def failover_trial(
    cluster: BenchCluster, *, rejoin: bool, rejoin_timeout_s: float = 60
) -> FailoverTrial:
    cluster.wait_settled({})
    killed = cluster.active_controller()
    epochs = {b.broker_id: b.broker_epoch for b in cluster.describe_cluster().brokers}
    name = f"failover-{cluster.partitions}-{time.time_ns()}"
    timed = over_grpc(cluster.addresses, killed, lambda: cluster.kill(killed), name)
    new_controller = timed.new_controller
    trial = FailoverTrial(cluster.partitions, killed, new_controller, timed.seconds, timed.known_s)
    if rejoin:
        began = time.perf_counter()
        cluster.restart(killed)
        # Count changes of the active controller after this failover, not the failover itself.
        cluster.last_controller = new_controller
        changes = cluster.controller_changes
        try:
            cluster.wait_settled({killed: epochs[killed]}, timeout_s=rejoin_timeout_s)
        except RuntimeError as exc:
            trial.rejoin_failed = str(exc)
        else:
            trial.rejoin_s = time.perf_counter() - began
        trial.controller_changes = cluster.controller_changes - changes
    return trial


class Fleet:
    """The clusters of one phase, one at a time, in `tmp` on `base_port`: a fresh one whenever
    the current one cannot be used again (its killed node did not rejoin)."""

    def __init__(self, tmp: str, name: str, base_port: int) -> None:
        self.tmp, self.name, self.base_port = tmp, name, base_port
        self.current: BenchCluster | None = None
        self.started = 0
        self.rejoin_fails: set[int] = set()  # image sizes at which a killed node did not rejoin

    def at(self, partitions: int) -> BenchCluster:
        """The current cluster grown to `partitions`, or a fresh one."""
        if self.current is None:
            self.started += 1
            directory = os.path.join(self.tmp, f"{self.name}{self.started}")
            self.current = BenchCluster(directory, self.base_port)
            try:
                self.current.start()
            except BaseException:
                self.discard()
                raise
        self.current.grow_to(partitions)
        return self.current

    def discard(self) -> None:
        if self.current is not None:
            self.current.stop()
            self.current = None

    def __enter__(self) -> Fleet:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.discard()


def failover_series(
    fleet: Fleet, partitions: int, trials: int, results: Results, *, reuse_after: bool
) -> None:
    """`trials` failovers at an image of `partitions`; the killed node is restarted and waited
    for whenever its cluster is used again. If it did not rejoin once at this size, later
    trials use fresh clusters instead of waiting again."""
    for trial in range(trials):
        cluster = fleet.at(partitions)
        used_again = reuse_after or trial < trials - 1
        rejoin = used_again and partitions not in fleet.rejoin_fails
        result = failover_trial(cluster, rejoin=rejoin)
        results.failover.append(result)
        known = "?" if result.known_s is None else f"{result.known_s:.3f}"
        if result.rejoin_s is not None:
            rejoined = f", rejoined in {result.rejoin_s:.1f} s"
        elif result.rejoin_failed is not None:
            rejoined = (
                f"; NOT rejoined: {result.rejoin_failed}; the active controller changed "
                f"{result.controller_changes} times meanwhile"
            )
        else:
            rejoined = ""
        print(
            f"  failover at {result.image_partitions:,} partitions, trial {trial + 1}: "
            f"{result.seconds:.3f} s (node {result.killed} -> {result.new_controller}; "
            f"new controller named after {known} s{rejoined})",
            flush=True,
        )
        if result.rejoin_s is None and used_again:
            if rejoin:
                fleet.rejoin_fails.add(partitions)
            fleet.discard()


# --- baselines, in child processes -------------------------------------------------------------


def child_core(
    plan: list[int], topics_per_trial: int, fill_partitions: int, snapshot_path: str
) -> dict[str, object]:
    """The controller core creating the same topics as cluster A, in the same order."""
    spec = importlib.util.spec_from_file_location("controller_harness", HARNESS)
    assert spec is not None and spec.loader is not None
    harness = importlib.util.module_from_spec(spec)
    sys.modules["controller_harness"] = harness  # its dataclasses look their module up
    spec.loader.exec_module(harness)
    from replog.quorum.controller.replication_control import CreatableTopic
    from replog.quorum.metadata.record_batches import encode_snapshot

    cluster = harness.Cluster.create((1,), seed=0)
    cluster.elect(1)
    cluster.log.commit()
    for broker_id in range(1, NODES + 1):
        cluster.start_broker(broker_id)
    log = cluster.log

    def forget_committed() -> None:
        # The fake log keeps every batch; Raft keeps committed records on disk, not in memory.
        # Only the last batch is needed (for the next offset).
        del log.batches[: log.committed_count - 1]
        log.committed_count = 1

    def create(names: list[str], per_request: int) -> None:
        for start in range(0, len(names), per_request):
            topics = [
                CreatableTopic(n, PARTITIONS_PER_TOPIC, REPLICATION_FACTOR)
                for n in names[start : start + per_request]
            ]
            pending = cluster.active.create_topics(topics, cluster.now_ms)
            log.commit()
            # A large request is written in steps, one per loop turn (a tick, then Raft's
            # commit of what it wrote), as on a node.
            while not pending.done:
                cluster.advance(0)
                log.commit()
            assert all(r.error is None for r in pending.result())
            forget_committed()

    gc.collect()
    rss_before = rss_kib(os.getpid())
    serial = 0
    trials = []
    for per_request in plan:
        names = [f"t{per_request}-{serial + i:06d}" for i in range(topics_per_trial)]
        serial += topics_per_trial
        began = time.perf_counter()
        create(names, per_request)
        seconds = time.perf_counter() - began
        trials.append({"topics_per_request": per_request, "seconds": seconds})
    fill = max(0, fill_partitions // PARTITIONS_PER_TOPIC - serial)
    create([f"fill-{serial + i:06d}" for i in range(fill)], MAX_TOPICS_PER_REQUEST)
    partitions = (serial + fill) * PARTITIONS_PER_TOPIC
    gc.collect()
    rss_controller = rss_kib(os.getpid())
    # For the image child: the same state as snapshot bytes, in chunks it can load one at a
    # time (a broker's image holds objects of its own, decoded from bytes).
    records = cluster.active.snapshot_records()
    with open(snapshot_path, "wb") as f:
        for start in range(0, len(records), SNAPSHOT_CHUNK_RECORDS):
            chunk = encode_snapshot(
                records[start : start + SNAPSHOT_CHUNK_RECORDS], quorum_epoch=0, timestamp_ms=0
            )
            f.write(len(chunk).to_bytes(4, "big") + chunk)
    return {
        "trials": trials,
        "partitions": partitions,
        "controller_bytes_per_partition": (rss_controller - rss_before) * 1024 / partitions,
    }


def child_image(snapshot_path: str, partitions: int) -> dict[str, object]:
    """A broker's MetadataImage of the core's final state, loaded from its snapshot bytes
    chunk by chunk, so that little transient memory inflates the RSS growth."""
    from replog.quorum.metadata.delta import MetadataDelta
    from replog.quorum.metadata.image import MetadataImage, MetadataProvenance
    from replog.quorum.metadata.record_batches import decode_snapshot

    gc.collect()
    before = rss_kib(os.getpid())
    delta = MetadataDelta(MetadataImage.EMPTY)
    with open(snapshot_path, "rb") as f:
        while header := f.read(4):
            chunk = f.read(int.from_bytes(header, "big"))
            for record in decode_snapshot(chunk, where=snapshot_path):
                delta.replay(record, 0)
    image = delta.apply(MetadataProvenance(0, 0))
    del delta
    gc.collect()
    after = rss_kib(os.getpid())
    count = sum(len(t.partitions) for t in image.topics.by_name.values())
    assert count == partitions, (count, partitions)
    return {"partitions": partitions, "bytes_per_partition": (after - before) * 1024 / partitions}


def child_dict(partitions: int) -> dict[str, object]:
    """A plain dict: (topic, partition) -> (leader, replicas, isr, leader epoch, part. epoch)."""
    gc.collect()
    before = rss_kib(os.getpid())
    table = {}
    for index in range(partitions):
        replicas = tuple([1 + (index + k) % NODES for k in range(REPLICATION_FACTOR)])
        isr = tuple(list(replicas))  # a tuple of its own, as in a partition registration
        table[(index // PARTITIONS_PER_TOPIC, index % PARTITIONS_PER_TOPIC)] = (
            replicas[0],
            replicas,
            isr,
            0,
            0,
        )
    gc.collect()
    after = rss_kib(os.getpid())
    assert len(table) == partitions
    return {"partitions": partitions, "bytes_per_partition": (after - before) * 1024 / partitions}


def run_child(*args: str) -> dict[str, object]:
    done = subprocess.run(
        # -P: bench/ not first on sys.path, where bench/timeline.py would shadow the package.
        [sys.executable, "-P", os.path.abspath(__file__), "--child", *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


# --- the run -----------------------------------------------------------------------------------


def machine() -> dict[str, object]:
    model = "?"
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="ascii") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    ).stdout.strip()
    return {
        "nproc": os.cpu_count(),
        "cpu": model,
        "python": sys.version.split()[0],
        "commit": commit + (" (with uncommitted changes)" if dirty else ""),
    }


def run(mode: Mode, tmp: str, results: Results, base_port: int = BASE_PORT_A) -> None:
    plan = trial_plan(mode)
    create_total = len(plan) * mode.topics_per_trial * PARTITIONS_PER_TOPIC
    large = max(mode.large_image, create_total)

    print(f"baseline: controller core, {len(plan)} trials + fill to {large:,}", flush=True)
    snapshot = os.path.join(tmp, "core.snapshot")
    core = run_child("core", json.dumps(plan), str(mode.topics_per_trial), str(large), snapshot)
    results.core_create = core["trials"]  # type: ignore[assignment]
    results.core_memory = {k: v for k, v in core.items() if k != "trials"}  # type: ignore[misc]
    partitions = str(core["partitions"])
    results.image_memory = run_child("image", snapshot, partitions)  # type: ignore[assignment]
    results.dict_memory = run_child("dict", str(large))  # type: ignore[assignment]

    print("cluster A: create trials, memory, failover at the large image", flush=True)
    with Fleet(tmp, "a", base_port) as fleet:
        a = fleet.at(0)
        note_load(results, "cluster A started")
        results.rss_kib["empty"] = a.rss()
        for index, per_request in enumerate(plan):
            trial = create_trial(a, mode.topics_per_trial, per_request)
            results.create.append(trial)
            print(
                f"  create {trial.partitions:,} partitions, {per_request} topics/request, "
                f"image {trial.image_before:,}: {trial.seconds:.2f} s, "
                f"{trial.partitions_per_s:,.0f} partitions/s, {trial.records_per_s:,.0f} "
                f"records/s, {trial.cores:.2f} cores busy",
                flush=True,
            )
            if index == 0:
                results.rss_kib[f"{a.partitions}"] = a.rss()
        a.grow_to(large)
        results.rss_kib[f"{a.partitions}"] = a.rss()
        note_load(results, f"cluster A at {a.partitions:,} partitions")
        failover_series(fleet, large, mode.failover_trials, results, reuse_after=False)
        note_load(results, f"failovers at {large:,} done ({fleet.started} clusters)")

    print("cluster B: failover at an empty image, then at the small image", flush=True)
    with Fleet(tmp, "b", base_port + BASE_PORT_B - BASE_PORT_A) as fleet:
        failover_series(fleet, 0, mode.failover_trials, results, reuse_after=True)
        failover_series(fleet, mode.small_image, mode.failover_trials, results, reuse_after=False)
        note_load(results, f"failovers at 0 and {mode.small_image:,} done")


# --- report ------------------------------------------------------------------------------------


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def report(results: Results, mode: Mode) -> None:
    m = results.machine
    print()
    print(f"# commit {m['commit']}; python {m['python']}; nproc {m['nproc']}; {m['cpu']}")
    print(
        f"# {mode.topics_per_trial:,} topics x {PARTITIONS_PER_TOPIC} partitions, RF "
        f"{REPLICATION_FACTOR}, per create trial; medians of {mode.create_trials} trials per "
        f"request size and of {mode.failover_trials} failovers per image"
    )
    print()
    print("Create (cluster: 3 combined nodes; core: QuorumController in-process)")
    print(
        f"{'topics/request':>14} {'cluster s':>10} {'partitions/s':>13} {'records/s':>10} "
        f"{'cores':>6} {'core s':>8} {'core part./s':>13} {'ratio':>7}  cluster s per trial "
        "(answered s)"
    )
    for size in mode.request_sizes:
        trials = [t for t in results.create if t.topics_per_request == size]
        core = [c["seconds"] for c in results.core_create if c["topics_per_request"] == size]
        seconds = median([t.seconds for t in trials])
        partitions = trials[0].partitions
        core_s = median(core)
        print(
            f"{size:>14} {seconds:>10.2f} {partitions / seconds:>13,.0f} "
            f"{median([t.records_per_s for t in trials]):>10,.0f} "
            f"{median([t.cores for t in trials]):>6.2f} {core_s:>8.3f} "
            f"{partitions / core_s:>13,.0f} {core_s / seconds:>6.3f}x  "
            + ", ".join(f"{t.seconds:.2f} ({t.answered_s:.2f})" for t in trials)
        )

    print()
    print("Resident memory per partition (RSS growth / partitions added)")
    labels = list(results.rss_kib)
    empty = results.rss_kib[labels[0]]
    for label in labels[1:]:
        partitions = int(label)
        per_node = {
            n: (results.rss_kib[label][n] - empty[n]) * 1024 / partitions for n in sorted(empty)
        }
        rss_mib = ", ".join(f"{results.rss_kib[label][n] / 1024:.0f}" for n in sorted(empty))
        print(
            f"  {partitions:>7,} partitions: node median {median(list(per_node.values())):,.0f} "
            f"B/partition (per node: "
            + ", ".join(f"{v:,.0f}" for v in per_node.values())
            + f"; RSS {rss_mib} MiB, empty "
            + ", ".join(f"{empty[n] / 1024:.0f}" for n in sorted(empty))
            + " MiB)"
        )
    largest = int(labels[-1])
    node = median(
        [(results.rss_kib[labels[-1]][n] - empty[n]) * 1024 / largest for n in sorted(empty)]
    )
    plain = float(results.dict_memory["bytes_per_partition"])  # type: ignore[arg-type]
    core_c = float(results.core_memory["controller_bytes_per_partition"])
    core_i = float(results.image_memory["bytes_per_partition"])  # type: ignore[arg-type]
    print(f"  controller core state (in-process): {core_c:,.0f} B/partition")
    print(f"  broker image loaded from a snapshot of it (in-process): {core_i:,.0f} B/partition")
    print(f"  plain dict of tuples (baseline): {plain:,.0f} B/partition")
    print(
        f"  node / plain dict: {node / plain:.1f}x; node / (core + image): "
        f"{node / (core_c + core_i):.2f}x"
    )

    print()
    print("Failover (kill -9 of the active controller -> first successful CreateTopics)")
    print(f"{'image partitions':>16} {'median s':>9} {'named s':>8} {'ratio':>7}  per trial")
    sizes = sorted({t.image_partitions for t in results.failover})
    base = median([t.seconds for t in results.failover if t.image_partitions == sizes[0]])
    for size in sizes:
        trials = [t for t in results.failover if t.image_partitions == size]
        seconds = median([t.seconds for t in trials])
        named = median([t.known_s for t in trials if t.known_s is not None])
        print(
            f"{size:>16,} {seconds:>9.3f} {named:>8.3f} {seconds / base:>6.2f}x  "
            + ", ".join(f"{t.seconds:.3f}" for t in trials)
        )
    for size in sizes:
        trials = [t for t in results.failover if t.image_partitions == size]
        rejoins = [t.rejoin_s for t in trials if t.rejoin_s is not None]
        failed = [t for t in trials if t.rejoin_failed is not None]
        if rejoins:
            print(
                f"  {size:,}: restart -> re-registered and settled: median "
                f"{median(rejoins):.1f} s over {len(rejoins)}"
            )
        for t in failed:
            print(
                f"  {size:,}: killed node {t.killed} did NOT rejoin: {t.rejoin_failed} "
                f"(active controller changed {t.controller_changes} times meanwhile)"
            )

    print()
    print("Goals (issue #5)")
    at_10k = [t for t in results.create if t.partitions == 10_000]
    if at_10k:
        best = min(
            median([t.seconds for t in at_10k if t.topics_per_request == s])
            for s in mode.request_sizes
        )
        verdict = "met" if best < 10 else "missed"
        print(f"  10k partitions created in < 10 s: {best:.2f} s -> {verdict}")
    else:
        print("  10k partitions created in < 10 s: not measured (trials are not 10k partitions)")
    big = [t.seconds for t in results.failover if t.image_partitions >= 100_000]
    if big:
        verdict = "met" if median(big) < 1 else "missed"
        print(f"  failover < 1 s at 100k partitions: {median(big):.3f} s -> {verdict}")
    else:
        print("  failover < 1 s at 100k partitions: not measured (no 100k image)")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":  # a baseline in a fresh process
        kind, args = sys.argv[2], sys.argv[3:]
        if kind == "core":
            out = child_core(json.loads(args[0]), int(args[1]), int(args[2]), args[3])
        elif kind == "image":
            out = child_image(args[0], int(args[1]))
        else:
            out = child_dict(int(args[0]))
        print(json.dumps(out))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, one trial of each")
    parser.add_argument("--json", metavar="FILE", help="also write every measurement here")
    parser.add_argument("--request-sizes", type=int, nargs="+", help="topics per CreateTopics")
    parser.add_argument("--failover-trials", type=int, help="trials per image size")
    parser.add_argument(
        "--base-port", type=int, default=BASE_PORT_A, help="cluster A's; cluster B's is 10 above"
    )
    args = parser.parse_args()
    mode = QUICK if args.quick else FULL
    if args.request_sizes:
        if max(args.request_sizes) > MAX_TOPICS_PER_REQUEST:
            parser.error(f"at most {MAX_TOPICS_PER_REQUEST} topics per request")
        mode = Mode(**{**asdict(mode), "request_sizes": tuple(args.request_sizes)})
    if args.failover_trials:
        mode = Mode(**{**asdict(mode), "failover_trials": args.failover_trials})

    results = Results(machine=machine())
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench-controller-") as tmp:
        run(mode, tmp, results, args.base_port)
    report(results, mode)
    print(f"\n# total {time.monotonic() - began:.0f} s")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(asdict(results), f, indent=1, default=str)


if __name__ == "__main__":
    main()
