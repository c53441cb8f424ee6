"""Partition creation and restart at scale, end to end (issue #50's goals).

Everything runs on one machine: 3-node local clusters of combined broker+controller nodes
(`replog cluster start`, Kafka's default timers) in a temporary directory, driven over gRPC.

1. Create: a fresh cluster per run; `--topics` topics x 10 partitions, replication factor 3, in
   CreateTopics requests of `--per-request` topics, sent one after the other. Two times per run:
   - answered: from the first request to the last answer (the controller's part; this is the
     baseline the end-to-end time is set against, measured in the same run);
   - end to end: until every broker reports every replica created (`replog_partitions`) and
     every partition led (`replog_leader_partitions`), with no replica change left to apply
     (`replog_pending_replica_changes`), read from each node's metrics endpoint.
   A request retried by the client whose first attempt had committed is answered
   TOPIC_ALREADY_EXISTS for this script's own (fresh) topic names: counted as created.
   Also per run: the longest event-loop stall of any node during the creation (from the
   `replog_event_loop_stall_seconds` histogram: the bucket the longest stall fell in), and how
   often the metadata quorum's leader changed (`replog_raft_current_epoch` on every node).
2. Restart (with `--restart`): the last run's cluster, holding its partitions, is stopped
   cleanly and started again; the time from `cluster start` until every replica is led again,
   against a fresh empty cluster's start measured in the same run (the baseline).

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
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import asdict, dataclass, field

from replog.admin.controller_client import ControllerClient
from replog.admin.controller_results import NewTopic
from replog.cli.local_cluster import METRICS_PORT_OFFSET, LocalCluster

NODES = 3
PARTITIONS_PER_TOPIC = 10
REPLICATION_FACTOR = 3
TOPIC_ALREADY_EXISTS = "TopicAlreadyExistsError"
STALL_HISTOGRAM = "replog_event_loop_stall_seconds_bucket"


def replog_cli(*args: str, timeout: float = 600) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "replog.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"replog {' '.join(args)} failed: {done.stderr.strip()[-2000:]}")


@dataclass
class Scrape:
    """The figures of one node's metrics endpoint this benchmark reads."""

    partitions: int = 0
    leaders: int = 0
    pending: int = 0
    epoch: int = -1
    stall_buckets: dict[float, float] = field(default_factory=dict)  # le -> count


def scrape(url: str) -> Scrape | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            text = answer.read().decode()
    except OSError:
        return None
    found = Scrape()
    for line in text.splitlines():
        if line.startswith("#") or not line:
            continue
        name, _, value = line.rpartition(" ")
        if name == "replog_partitions":
            found.partitions = int(float(value))
        elif name == "replog_leader_partitions":
            found.leaders = int(float(value))
        elif name == "replog_pending_replica_changes":
            found.pending = int(float(value))
        elif name == "replog_raft_current_epoch":
            found.epoch = int(float(value))
        elif name.startswith(STALL_HISTOGRAM):
            bound = name.split('le="', 1)[1].split('"', 1)[0]
            found.stall_buckets[float(bound)] = float(value)
    return found


def longest_stall_bucket(before: Scrape, after: Scrape) -> float:
    """The upper bound of the largest bucket that counted a stall between the two scrapes."""
    largest = 0.0
    previous = 0.0
    for bound in sorted(after.stall_buckets):
        added = after.stall_buckets[bound] - before.stall_buckets.get(bound, 0.0)
        if added > previous:  # cumulative buckets: a rise means stalls of up to `bound`
            largest = bound
        previous = added
    return largest


class Cluster:
    def __init__(self, directory: str, base_port: int) -> None:
        self.directory = directory
        self.base_port = base_port
        self.client: ControllerClient | None = None

    def metrics_urls(self) -> list[str]:
        return [
            f"http://127.0.0.1:{self.base_port + METRICS_PORT_OFFSET + i}/metrics"
            for i in range(NODES)
        ]

    def start(self, *, fresh: bool) -> float:
        """Start the cluster; seconds until `cluster start` returned."""
        began = time.perf_counter()
        args = ["cluster", "start", "--data-dir", self.directory, "--base-port"]
        args += [str(self.base_port), "--nodes", str(NODES), "--timeout", "600"]
        replog_cli(*args, *(["--fresh"] if fresh else []))
        seconds = time.perf_counter() - began
        addresses = LocalCluster.load(self.directory).controller_addresses()
        self.client = ControllerClient(
            list(addresses.values()), node_addresses=addresses, default_timeout_s=120
        )
        return seconds

    def stop(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None
        with contextlib.suppress(Exception):
            replog_cli("cluster", "stop", "--data-dir", self.directory, "--timeout", "120")

    def scrapes(self) -> list[Scrape]:
        found = [scrape(url) for url in self.metrics_urls()]
        return [s if s is not None else Scrape() for s in found]

    def wait_replicas(self, partitions: int, timeout_s: float = 900) -> list[Scrape]:
        """Until every replica of `partitions` partitions exists and every one is led."""
        deadline = time.monotonic() + timeout_s
        while True:
            now = self.scrapes()
            replicas = sum(s.partitions for s in now)
            leaders = sum(s.leaders for s in now)
            if (
                replicas == partitions * REPLICATION_FACTOR
                and leaders == partitions
                and not any(s.pending for s in now)
            ):
                return now
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"replicas not all created and led after {timeout_s:.0f} s: {replicas} of "
                    f"{partitions * REPLICATION_FACTOR} replicas, {leaders} of {partitions} "
                    f"leaders, pending {[s.pending for s in now]}"
                )
            time.sleep(0.05)

    def create(self, prefix: str, topics: int, per_request: int) -> None:
        assert self.client is not None
        names = [f"{prefix}-{i:06d}" for i in range(topics)]
        for start in range(0, topics, per_request):
            batch = [
                NewTopic(name, PARTITIONS_PER_TOPIC, REPLICATION_FACTOR)
                for name in names[start : start + per_request]
            ]
            results = self.client.create_topics(batch, timeout_s=300)
            # Fresh names: "already exists" is an earlier attempt of this very request that
            # committed before the client retried it.
            failed = [
                r
                for r in results
                if r.error is not None and type(r.error).__name__ != TOPIC_ALREADY_EXISTS
            ]
            if failed:
                raise RuntimeError(f"CreateTopics: {failed[0].name}: {failed[0].error!r}")


@dataclass
class CreateRun:
    partitions: int
    answered_s: float
    end_to_end_s: float
    longest_stall_s: float  # the upper bound of the bucket the longest stall fell in
    quorum_epoch_changes: int

    @property
    def ratio(self) -> float:
        return self.end_to_end_s / self.answered_s


@dataclass
class RestartRun:
    partitions: int
    fresh_start_s: float  # baseline: an empty cluster, same run
    restart_s: float  # until every replica is led again
    longest_stall_s: float


@dataclass
class Results:
    commit: str = ""
    create: list[CreateRun] = field(default_factory=list)
    restart: list[RestartRun] = field(default_factory=list)


def create_run(directory: str, base_port: int, topics: int, per_request: int) -> CreateRun:
    cluster = Cluster(directory, base_port)
    cluster.start(fresh=True)
    try:
        cluster.wait_replicas(0)
        before = cluster.scrapes()
        began = time.perf_counter()
        cluster.create("bench", topics, per_request)
        answered = time.perf_counter() - began
        partitions = topics * PARTITIONS_PER_TOPIC
        after = cluster.wait_replicas(partitions)
        end_to_end = time.perf_counter() - began
        stall = max(longest_stall_bucket(b, a) for b, a in zip(before, after, strict=True))
        epochs = max(a.epoch - b.epoch for b, a in zip(before, after, strict=True))
        return CreateRun(partitions, answered, end_to_end, stall, epochs)
    finally:
        cluster.stop()


def restart_run(directory: str, base_port: int, topics: int, per_request: int) -> RestartRun:
    empty = Cluster(directory + "-empty", base_port)
    fresh_s = empty.start(fresh=True)
    empty.wait_replicas(0)
    fresh_s_total = fresh_s
    empty.stop()
    cluster = Cluster(directory, base_port)
    cluster.start(fresh=True)
    try:
        cluster.create("bench", topics, per_request)
        partitions = topics * PARTITIONS_PER_TOPIC
        cluster.wait_replicas(partitions)
        cluster.stop()
        began = time.perf_counter()
        cluster.start(fresh=False)
        after = cluster.wait_replicas(partitions)
        restart_s = time.perf_counter() - began
        stall = max(longest_stall_bucket(Scrape(), a) for a in after)
        return RestartRun(partitions, fresh_s_total, restart_s, stall)
    finally:
        cluster.stop()


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
        print(f"  longest stall   <= {max(stalls):.0f} ms (per run: {stalls})")
        changes = [r.quorum_epoch_changes for r in results.create]
        print(f"  quorum epoch changes per run: {changes}")
        median_s = statistics.median(r.end_to_end_s for r in results.create)
        goal_s = 10 if partitions <= 10_000 else 100
        verdict = "met" if median_s < goal_s and max(stalls) < 100 + 1e-9 else "missed"
        if partitions > 10_000 and any(changes):
            verdict = "missed (quorum leader changed)"
        print(f"  goal: < {goal_s} s end to end, stalls < 100 ms -> {verdict}")
    if results.restart:
        print(f"Restart of a stopped cluster holding {results.restart[0].partitions:,} partitions")
        print("  baseline: a fresh empty cluster's start, same run")
        print(f"  fresh start s   {spread([r.fresh_start_s for r in results.restart])}")
        print(f"  restart s       {spread([r.restart_s for r in results.restart])}")
        ratios = [r.restart_s / r.fresh_start_s for r in results.restart]
        print(f"  ratio           {spread(ratios)}")
        stalls = [r.longest_stall_s * 1000 for r in results.restart]
        print(f"  longest stall since start <= {max(stalls):.0f} ms")
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
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    results = Results()
    with contextlib.suppress(Exception):
        results.commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="replog-bench-creation-") as tmp:
        for run in range(args.runs):
            if not args.no_create:
                found = create_run(
                    os.path.join(tmp, f"create-{run}"),
                    args.base_port,
                    args.topics,
                    args.per_request,
                )
                print(f"run {run + 1}: {found}", flush=True)
                results.create.append(found)
            if args.restart:
                found_restart = restart_run(
                    os.path.join(tmp, f"restart-{run}"),
                    args.base_port,
                    args.topics,
                    args.per_request,
                )
                print(f"run {run + 1}: {found_restart}", flush=True)
                results.restart.append(found_restart)
    report(results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(asdict(results), f, indent=2)


if __name__ == "__main__":
    main()
