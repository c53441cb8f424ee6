"""What idle partitions cost the busy ones: produce latency next to N idle replicated partitions.

A 3-node local cluster (`replog cluster start`, embedded defaults) holds a busy topic (3
partitions, RF 3, `min.insync.replicas=2`) and, for a trial with N idle partitions, a second
topic of N partitions (RF 3) that nobody writes. Each trial runs `replog perf produce` on the
busy topic at a fixed, modest rate (100-byte records, acks=all, the producer's defaults) and
reads its latency percentiles, while the nodes' CPU is metered from /proc.

With `--consumer`, a consumer (the client library's `Consumer`, in a process of its own) is
assigned every partition of both topics from their ends during each trial, as an application
reading many mostly idle partitions would be, and the trial also reports how long the busy
topic's records took from `send` (their timestamps) to that consumer's `poll`, and the
consumer's CPU. Its fetches carry every partition it reads, each round, unless fetch sessions
leave the unchanged ones out.

The baseline, measured in the same run, is N = 0: the same cluster and load with no idle
topic. Each figure is the median over `--runs` rounds; the N values alternate within a round
so that every N sees the same machine. Ratios are against the baseline's median.

Why: a follower fetches all partitions it follows from one leader in one request, and every
append on the leader answers it. Incremental fetch sessions (KIP-227) send only the changed
partitions, and dirty-only rounds (docs/replication.md) make both sides' work per round what
changed, so idle partitions should cost next to nothing; this measures whether they do.

    .venv/bin/python bench/idle_partitions.py                    # N = 0 60 150 600, 3 runs
    .venv/bin/python bench/idle_partitions.py --idle 0 300 --runs 1 --records 10000
    .venv/bin/python bench/idle_partitions.py --idle 0 600 --consumer
    .venv/bin/python bench/idle_partitions.py --idle 0 600 --quiet-seconds 10

With `--quiet-seconds S`, each trial first meters the nodes' CPU for S seconds with nothing
written (after the settle time): what the idle partitions alone cost.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUSY_TOPIC = "busy"
BUSY_PARTITIONS = 3
CLK_TCK = os.sysconf("SC_CLK_TCK")
# The consumer worker looks up every partition's end offset before it says "ready".
CONSUMER_START_TIMEOUT_S = 120.0


def replog(*args: str, timeout_s: float = 300) -> subprocess.CompletedProcess[str]:
    """`replog ARGS` in this interpreter; a non-zero exit raises with its stderr."""
    done = subprocess.run(
        [sys.executable, "-m", "replog.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        cwd=ROOT,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"replog {' '.join(args)}: exit {done.returncode}: {done.stderr}")
    return done


def cpu_s(pids: list[int]) -> float:
    """User plus system CPU seconds of `pids` so far."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / CLK_TCK


@dataclass
class Trial:
    idle: int
    p50_ms: float
    p99_ms: float
    records_s: float
    node_cores: float
    # With --consumer: send-to-poll latency of the busy topic's records, and its CPU.
    consumer_p50_ms: float | None = None
    consumer_p99_ms: float | None = None
    consumer_cores: float | None = None
    # With --quiet-seconds: the nodes' CPU before the load starts, with nothing to replicate.
    quiet_cores: float | None = None


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def consume_worker(bootstrap: str, topics: dict[str, int], busy_records: int) -> dict[str, Any]:
    """Run in a process of its own (`--consume-worker`): a Consumer assigned every partition of
    `topics` from their ends prints "ready", then reads until `busy_records` records of the
    busy topic came (or none for 30 s) and returns their send-to-poll latencies' percentiles
    and its CPU from "ready" on."""
    from replog import Consumer, TopicPartition

    partitions = [TopicPartition(t, p) for t, n in topics.items() for p in range(n)]
    consumer = Consumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        consumer.assign(partitions)
        consumer.seek_to_end(*partitions)
        for tp in partitions:
            consumer.position(tp)  # looked up now, not while the trial runs
        latencies: list[float] = []
        print("ready", flush=True)
        cpu0, wall0, last = time.process_time(), time.monotonic(), time.monotonic()
        while len(latencies) < busy_records and time.monotonic() - last < 30:
            polled = consumer.poll(100)
            now_ms = time.time() * 1000
            for tp, records in polled.items():
                if tp.topic == BUSY_TOPIC:
                    latencies.extend(now_ms - r.timestamp for r in records)
                    last = time.monotonic()
        cores = (time.process_time() - cpu0) / (time.monotonic() - wall0)
    finally:
        consumer.close()
    if len(latencies) < busy_records:
        raise RuntimeError(f"consumer: {len(latencies)} of {busy_records} busy records came")
    return {
        "p50_ms": percentile(latencies, 0.5),
        "p99_ms": percentile(latencies, 0.99),
        "cores": cores,
    }


def start_consumer(cluster: Cluster, topics: dict[str, int], records: int) -> subprocess.Popen[str]:
    """The `consume_worker` process, once it is ready to read (its stderr goes to a file in
    the cluster's directory, quoted if it fails)."""
    spec = json.dumps({"bootstrap": cluster.bootstrap, "topics": topics, "records": records})
    with open(os.path.join(cluster.directory, "consumer.stderr"), "w") as errors:
        worker = subprocess.Popen(  # the child keeps its own copy of `errors`
            [sys.executable, os.path.abspath(__file__), "--consume-worker", spec],
            stdout=subprocess.PIPE, stderr=errors, text=True, cwd=ROOT,
        )  # fmt: skip
    try:
        assert worker.stdout is not None
        ready, _, _ = select.select([worker.stdout], [], [], CONSUMER_START_TIMEOUT_S)
        if not ready or worker.stdout.readline().strip() != "ready":
            raise RuntimeError(
                f"consumer worker not ready within {CONSUMER_START_TIMEOUT_S:g} s: "
                f"{consumer_errors(cluster)}"
            )
    except BaseException:
        worker.kill()
        worker.wait()
        raise
    return worker


def consumer_errors(cluster: Cluster) -> str:
    with open(os.path.join(cluster.directory, "consumer.stderr")) as f:
        return f.read()[-2000:] or "(no output on stderr)"


def consumer_result(cluster: Cluster, worker: subprocess.Popen[str]) -> dict[str, Any]:
    out, _ = worker.communicate(timeout=120)
    if worker.returncode != 0:
        raise RuntimeError(f"consumer worker: exit {worker.returncode}: {consumer_errors(cluster)}")
    result: dict[str, Any] = json.loads(out)
    return result


class Cluster:
    """A local cluster in a temporary directory, stopped and removed by `stop`."""

    def __init__(self, base_port: int, kafka_base_port: int) -> None:
        self.directory = tempfile.mkdtemp(prefix="replog-bench-idle-")
        self.data_dir = os.path.join(self.directory, "cluster")
        self.base_port = base_port
        self.kafka_base_port = kafka_base_port
        # The brokers' Kafka listeners: every client's way in.
        self.bootstrap = ",".join(f"127.0.0.1:{kafka_base_port + i}" for i in range(3))

    def start(self) -> None:
        replog(
            "cluster", "start", "--data-dir", self.data_dir, "--base-port", str(self.base_port),
            "--kafka-base-port", str(self.kafka_base_port),
        )  # fmt: skip

    def pids(self) -> list[int]:
        pids = []
        for node in (1, 2, 3):
            with open(os.path.join(self.data_dir, f"node-{node}", "node.pid")) as f:
                pids.append(int(f.read()))
        return pids

    def create_topic(self, name: str, partitions: int) -> None:
        replog(
            "topics", "create", "--topic", name, "--partitions", str(partitions),
            "--replication-factor", "3", "--config", "min.insync.replicas=2",
            "--bootstrap-server", self.bootstrap,
        )  # fmt: skip
        self.wait_fully_replicated(name)

    def wait_fully_replicated(self, name: str, timeout_s: float = 120) -> None:
        """Until every partition of `name` has a leader and all three replicas in its ISR."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            described = replog(
                "topics", "describe", "--topic", name, "--json",
                "--bootstrap-server", self.bootstrap,
            )  # fmt: skip
            [topic] = json.loads(described.stdout)["topics"]
            partitions = topic["partitions"]
            if all(p["leader"] not in (None, -1) and len(p["isr"]) == 3 for p in partitions):
                return
            time.sleep(0.5)
        raise RuntimeError(f"topic {name}: not fully replicated within {timeout_s:g} s")

    def delete_topic(self, name: str) -> None:
        replog("topics", "delete", "--topic", name, "--bootstrap-server", self.bootstrap)

    def stop(self) -> None:
        try:
            replog("cluster", "stop", "--data-dir", self.data_dir)
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)


def trial(cluster: Cluster, idle: int, args: argparse.Namespace, round_index: int) -> Trial:
    idle_topic = f"idle-{idle}-{round_index}"
    if idle:
        cluster.create_topic(idle_topic, idle)
    worker = None
    try:
        time.sleep(args.settle_seconds)  # let the fetchers settle on the new partition set
        quiet_cores = None
        if args.quiet_seconds > 0:
            pids = cluster.pids()
            before, began = cpu_s(pids), time.monotonic()
            time.sleep(args.quiet_seconds)
            quiet_cores = (cpu_s(pids) - before) / (time.monotonic() - began)
        if args.consumer:
            topics = {BUSY_TOPIC: BUSY_PARTITIONS, **({idle_topic: idle} if idle else {})}
            worker = start_consumer(cluster, topics, args.records)
        pids = cluster.pids()
        before, began = cpu_s(pids), time.monotonic()
        done = replog(
            "perf", "produce", "--topic", BUSY_TOPIC, "--num-records", str(args.records),
            "--record-size", "100", "--throughput", str(args.rate), "--output", "json",
            "--no-progress", "--bootstrap-server", cluster.bootstrap,
        )  # fmt: skip
        node_cores = (cpu_s(pids) - before) / (time.monotonic() - began)
        result: dict[str, Any] = json.loads(done.stdout)
        if result["failed"]:
            raise RuntimeError(f"{result['failed']} records failed: {result['first_error']}")
        latency = result["latency_ms"]
        trial = Trial(idle, latency["p50"], latency["p99"], result["records_per_sec"], node_cores)
        trial.quiet_cores = quiet_cores
        if worker is not None:
            consumed = consumer_result(cluster, worker)
            trial.consumer_p50_ms = consumed["p50_ms"]
            trial.consumer_p99_ms = consumed["p99_ms"]
            trial.consumer_cores = consumed["cores"]
        return trial
    finally:
        if worker is not None and worker.poll() is None:
            worker.kill()  # the trial failed before the consumer was done
            worker.wait()
        if idle:
            cluster.delete_topic(idle_topic)


def table(trials: list[Trial], idle_counts: list[int]) -> list[str]:
    def median(n: int, key: str) -> float:
        values: list[float] = [getattr(t, key) for t in trials if t.idle == n]
        return statistics.median(values)

    consumed = all(t.consumer_p50_ms is not None for t in trials)
    quiet = all(t.quiet_cores is not None for t in trials)
    base_p50, base_p99 = median(0, "p50_ms"), median(0, "p99_ms")
    header = (
        "| idle partitions | p50 ms | p99 ms | p50 vs baseline | p99 vs baseline "
        "| records/s | node cores (3 nodes) |"
    )
    rule = "|---:|---:|---:|---:|---:|---:|---:|"
    if consumed:
        header += " consumer p50 / p99 ms | vs baseline | consumer cores |"
        rule += "---:|---:|---:|"
    if quiet:
        header += " quiet node cores |"
        rule += "---:|"
    lines = [header, rule]
    for n in idle_counts:
        p50, p99 = median(n, "p50_ms"), median(n, "p99_ms")
        line = (
            f"| {n}{' (baseline)' if n == 0 else ''} | {p50:.1f} | {p99:.1f} | "
            f"{p50 / base_p50:.2f}x | {p99 / base_p99:.2f}x | {median(n, 'records_s'):,.0f} | "
            f"{median(n, 'node_cores'):.2f} |"
        )
        if consumed:
            c50, c99 = median(n, "consumer_p50_ms"), median(n, "consumer_p99_ms")
            line += (
                f" {c50:.1f} / {c99:.1f} | {c50 / median(0, 'consumer_p50_ms'):.2f}x / "
                f"{c99 / median(0, 'consumer_p99_ms'):.2f}x | {median(n, 'consumer_cores'):.2f} |"
            )
        if quiet:
            line += f" {median(n, 'quiet_cores'):.3f} |"
        lines.append(line)
    return lines


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--idle", type=int, nargs="+", default=[0, 60, 150, 600])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--records", type=int, default=25_000, help="records per trial")
    parser.add_argument("--rate", type=int, default=5_000, help="records/s per trial")
    parser.add_argument("--settle-seconds", type=float, default=3.0)
    parser.add_argument(
        "--quiet-seconds",
        type=float,
        default=0.0,
        help="also meter the nodes' CPU this long with no load (what idle partitions cost)",
    )
    parser.add_argument("--base-port", type=int, default=39092)
    parser.add_argument(
        "--kafka-base-port", type=int, default=39292, help="the nodes' Kafka listeners from here"
    )
    parser.add_argument(
        "--consumer",
        action="store_true",
        help="also read both topics with a consumer and time the busy records to it",
    )
    parser.add_argument("--consume-worker", metavar="JSON", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if 0 not in args.idle:
        parser.error("--idle must include 0: the baseline")
    if min(args.idle) < 0 or args.runs < 1 or args.records < 1 or args.rate < 1:
        parser.error("--idle counts must be >= 0; --runs, --records and --rate >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.consume_worker:
        spec = json.loads(args.consume_worker)
        print(json.dumps(consume_worker(spec["bootstrap"], spec["topics"], spec["records"])))
        return 0
    cluster = Cluster(args.base_port, args.kafka_base_port)
    trials: list[Trial] = []
    try:
        cluster.start()  # inside: a failed start still stops what started and removes the dir
        cluster.create_topic(BUSY_TOPIC, BUSY_PARTITIONS)
        for round_index in range(args.runs):
            order = args.idle if round_index % 2 == 0 else list(reversed(args.idle))
            for n in order:
                t = trial(cluster, n, args, round_index)
                trials.append(t)
                consumed = ""
                if t.consumer_p50_ms is not None:
                    consumed = (
                        f"  consumer p50 {t.consumer_p50_ms:7.1f} ms  p99 "
                        f"{t.consumer_p99_ms:7.1f} ms  {t.consumer_cores:.2f} cores"
                    )
                print(
                    f"run {round_index + 1} idle {n:5d}: p50 {t.p50_ms:7.1f} ms  "
                    f"p99 {t.p99_ms:7.1f} ms  {t.records_s:8,.0f} records/s  "
                    f"nodes {t.node_cores:.2f} cores{consumed}"
                    + ("" if t.quiet_cores is None else f"  quiet {t.quiet_cores:.3f} cores"),
                    flush=True,
                )
    finally:
        cluster.stop()
    print()
    print(
        f"{args.rate:,} records/s of 100 B, acks=all, to 3 partitions; "
        f"medians of {args.runs} runs; load average {os.getloadavg()[0]:.1f}"
    )
    for line in table(trials, sorted(set(args.idle))):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
