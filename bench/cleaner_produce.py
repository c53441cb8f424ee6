"""Does the log cleaner stall produce? Produce latency on a compacted topic with the cleaner
cleaning all the while, against the same cluster with `log.cleaner.enable=false` (issue #78).

Per run, five 3-node clusters one after the other (the order reverses every other run): the
cleaner on, on and throttled to 1 MB/s (`log.cleaner.io.max.bytes.per.second`, each node),
off, and off with a process beside the cluster at `SCHED_IDLE` as the cleaning children run,
either spinning in the interpreter or copying 64 MiB over and over (`IDLE_WORK`: what CPU work
at idle priority costs produce on this machine, with and without the caches and memory
bandwidth a pass uses). Each with:
- a load: a background producer writing `--load-rate` records a second (200-byte values over
  5,000 keys, acks=1) to `load`, compacted, `segment.bytes` 256 KiB and
  `min.cleanable.dirty.ratio` 0.01, so a segment rolls about every quarter second and, with the
  cleaner on, a pass starts as soon as the last one ended (`log.cleaner.backoff.ms` 100);
- a probe: `--probes` records sent one at a time, each awaited (acks=all, idempotent), to
  `probe`, compacted too, after 3 s of load; its latencies (client clock) are the figures;
- then a fetch probe, the load still on: `--probes` fetches of `load` (a consumer's Fetch
  of up to 64 KiB to its leader, `PartitionFetcher`), one at a time, each awaited, each from
  an offset `FETCH_STEP` past the last (from the log start to the high watermark, round and
  round): reads of the segments the cleaner rewrites and swaps, never waiting for new data.

`--compare-checkout DIR` adds a cluster per run, the cleaner on with the code of DIR
(another version, e.g. a worktree of the main branch), in the same alternating order.

The cleaner settings are its worst case: with Kafka's defaults (a ratio of 0.5, a backoff of
15 s) a log is cleaned far less often than here, where a cleaner thread on every node is busy
nearly all the time.

Printed per configuration: each run's probe p50, p99 and max (and the fetch probe's, `fetch_`),
then min / median / max over the runs, and the `load` partition's bytes on node 1 at the end
(cleaning on: about the live keys; off: everything written), which shows the cleaner ran. Over
the probe's time (Linux's /proc), where the cores went: how long each node's event loop (its
main thread) waited for a core, per second (`loop_wait_ms_per_s`, the median node; its
schedstat's run delay), and the CPU of the nodes' cleaning children (`cleaning_cores`, the
three summed), of the nodes' main threads (`loop_cores`) and of their other threads
(`other_thread_cores`: the cleaner threads' side of a pass among them), and of the idle process
(`idle_work_cores`). Over the cluster's life, from the nodes' logs: the passes run (`passes`,
the three nodes), those that ran at the cleaner's nice (`urgent_passes`, promoted ones
included: `pass_priority`) and those promoted while under way (`promoted_passes`). The machine
is shared: compare the configurations within a run.

    .venv/bin/python bench/cleaner_produce.py [--runs 3] [--probes 2000] [--load-rate 5000]
        [--base-port 27400] [--kafka-base-port 27410] [--data-dir DIR]
        [--compare-checkout DIR] [--json FILE]
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
import threading
import time
from collections.abc import Sequence
from typing import Any

_BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _BENCH_DIR]
sys.path.insert(0, os.path.dirname(_BENCH_DIR))
sys.path.append(_BENCH_DIR)

from replog_cli import create_topic, running_cluster  # noqa: E402

from replog import Producer  # noqa: E402
from replog.cli.bench.runner import machine  # noqa: E402
from replog.client.records import TopicPartition  # noqa: E402
from replog.clock import monotonic_ms  # noqa: E402
from replog.spark.partition_fetcher import PartitionFetcher  # noqa: E402

COMPACTED = ("cleanup.policy=compact", "segment.bytes=262144", "min.cleanable.dirty.ratio=0.01")
# Each configuration's cleaner settings (every node's server.properties).
CONFIGURATIONS = {
    "cleaner on": ("log.cleaner.enable=true",),
    "cleaner on, 1 MB/s": ("log.cleaner.enable=true", "log.cleaner.io.max.bytes.per.second=1e6"),
    "cleaner off": ("log.cleaner.enable=false",),
    "cleaner off, idle spinner": ("log.cleaner.enable=false",),
    "cleaner off, idle copier": ("log.cleaner.enable=false",),
}
# Configurations with a process beside the cluster at SCHED_IDLE, as the cleaning children run:
# what CPU work at idle priority costs produce on this machine, spinning in the interpreter
# (a few cache lines) or copying 64 MiB over and over (the caches and memory bandwidth the
# nodes share with it, as a pass's reads, hashing and writes use them).
_AT_IDLE = "import os\nos.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))\n"
IDLE_WORK = {
    "cleaner off, idle spinner": _AT_IDLE + "while True:\n    pass\n",
    "cleaner off, idle copier": (
        _AT_IDLE + "buffer = bytearray(64 << 20)\nwhile True:\n    bytes(buffer)\n"
    ),
}


def load(bootstrap: str, rate: int, stop: threading.Event) -> int:
    """Write `rate` records a second to `load` until `stop`; how many were sent."""
    value = b"v" * 200
    sent = 0
    began = time.monotonic()
    with Producer(bootstrap_servers=bootstrap, acks=1, linger_ms=5) as producer:
        while not stop.is_set():
            due = int((time.monotonic() - began) * rate)
            while sent < due:
                producer.send("load", value, key=f"key-{sent % 5000}".encode(), partition=0)
                sent += 1
            time.sleep(0.005)
        producer.flush(timeout=60)
    return sent


def probe(bootstrap: str, count: int) -> list[float]:
    """The latency in ms of `count` sends to `probe`, one at a time."""
    latencies = []
    with Producer(bootstrap_servers=bootstrap, acks="all", linger_ms=0) as producer:
        for i in range(20):  # connections and metadata, unmeasured
            producer.send("probe", b"warm", key=f"w{i}".encode(), partition=0).get(timeout=30)
        for i in range(count):
            began = time.perf_counter()
            producer.send("probe", b"x" * 100, key=f"k{i % 100}".encode(), partition=0).get(
                timeout=30
            )
            latencies.append((time.perf_counter() - began) * 1000)
    return latencies


FETCH_BYTES = 64 * 1024
FETCH_STEP = 997  # offsets: a fetch's 64 KiB hold about 300 records, so each reads afresh
FETCH_TIMEOUT_MS = 30_000


def fetch_probe(bootstrap: str, count: int) -> list[float]:
    """The latency in ms of `count` fetches of `load`, one at a time (module docstring)."""
    latencies = []
    settings = {"bootstrap.servers": bootstrap, "max.partition.fetch.bytes": str(FETCH_BYTES)}
    fetcher = PartitionFetcher(TopicPartition("load", 0), settings)
    try:
        start = fetcher.log_start_offset(FETCH_TIMEOUT_MS)
        end = fetcher.high_watermark(FETCH_TIMEOUT_MS)
        position = start
        for i in range(20 + count):  # the first 20: connections and metadata, unmeasured
            deadline = monotonic_ms() + FETCH_TIMEOUT_MS
            began = time.perf_counter()
            answer = fetcher.wait(fetcher.submit(position, deadline), deadline)
            elapsed = (time.perf_counter() - began) * 1000
            if answer is None:
                raise RuntimeError(f"a fetch of load from {position}: {fetcher.last_failure}")
            if i >= 20:
                latencies.append(elapsed)
            start = max(start, answer.log_start_offset)
            end = max(end, answer.high_watermark)
            position += FETCH_STEP
            if position >= end:  # never at the high watermark: that fetch would wait for data
                position = start
    finally:
        fetcher.close()
    return latencies


def partition_bytes(data_dir: str, topic: str) -> int:
    directory = os.path.join(data_dir, "node-1", "data", f"{topic}-0")
    return sum(
        os.path.getsize(os.path.join(directory, name))
        for name in os.listdir(directory)
        if name.endswith(".log")
    )


def pass_counts(data_dir: str) -> dict[str, int]:
    """The cleaning passes the nodes' logs report: all, urgent, promoted."""
    counts = {"passes": 0, "urgent_passes": 0, "promoted_passes": 0}
    for node in range(1, 4):
        with open(os.path.join(data_dir, f"node-{node}", "node.log"), encoding="utf-8") as f:
            for line in f:
                if "cleaned offsets" not in line:
                    continue
                counts["passes"] += 1
                counts["urgent_passes"] += "), urgent" in line
                counts["promoted_passes"] += ", promoted" in line
    return counts


def node_pids(data_dir: str) -> list[int]:
    pids = []
    for node in range(1, 4):
        with open(os.path.join(data_dir, f"node-{node}", "node.pid"), encoding="ascii") as f:
            pids.append(int(f.read().split()[0]))
    return pids


def _proc_cpu_s(pid: int) -> float:
    return _proc_cpu_s_of(f"/proc/{pid}/stat")


def _proc_cpu_s_of(stat_path: str) -> float:
    with open(stat_path, "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _cleaning_children(pids: Sequence[int]) -> dict[int, float]:
    """The CPU seconds of every live cleaning child of `pids`, by its pid."""
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                if b"cleaning_process" not in f.read():
                    continue
            with open(f"/proc/{name}/stat", "rb") as f:
                parent = int(f.read().rsplit(b")", 1)[1].split()[1])
            if parent in pids:
                found[int(name)] = _proc_cpu_s(int(name))
        except (OSError, ValueError, IndexError):
            continue
    return found


Sample = tuple[float, list[int], dict[int, float], float, float]


def _threads_cpu_s(pid: int) -> tuple[float, float]:
    """The CPU seconds of a process's main thread and of its other threads, summed."""
    main = others = 0.0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            cpu = _proc_cpu_s_of(f"/proc/{pid}/task/{task}/stat")
        except OSError:  # a thread that ended meanwhile
            continue
        if int(task) == pid:
            main = cpu
        else:
            others += cpu
    return main, others


def cores_sample(pids: Sequence[int]) -> Sample:
    """Now, each node's main thread's run delay (ns), its cleaning children's CPU, and the
    CPU of the nodes' main threads and of their other threads (all nodes summed)."""
    delays = []
    mains = others = 0.0
    for pid in pids:
        with open(f"/proc/{pid}/task/{pid}/schedstat", encoding="ascii") as f:
            delays.append(int(f.read().split()[1]))
        main, other = _threads_cpu_s(pid)
        mains += main
        others += other
    return time.monotonic(), delays, _cleaning_children(pids), mains, others


def cores_used(before: Sample, after: Sample) -> dict[str, float]:
    elapsed = after[0] - before[0]
    waits = [(b - a) / 1e6 / elapsed for a, b in zip(before[1], after[1], strict=True)]
    children = sum(cpu - before[2].get(pid, 0.0) for pid, cpu in after[2].items())
    return {
        "loop_wait_ms_per_s": statistics.median(waits),
        "cleaning_cores": children / elapsed,
        "loop_cores": (after[3] - before[3]) / elapsed,
        "other_thread_cores": (after[4] - before[4]) / elapsed,
        "seconds": elapsed,
    }


PORT_TRIES = 5
PORT_STEP = 20  # the next try's ports: above every port of the last (its +100s included)


def started_cluster(
    stack: contextlib.ExitStack,
    args: argparse.Namespace,
    data_dir: str,
    overrides: Sequence[str],
    checkout: str | None,
) -> str:
    """A running cluster (stopped with `stack`), its bootstrap servers. On a shared machine
    another process's connection may hold a port of ours (an ephemeral port, in TIME-WAIT):
    the start then refuses before it does anything, and the next try moves every port up by
    `PORT_STEP`."""
    for attempt in range(PORT_TRIES):
        shift = attempt * PORT_STEP
        cluster = running_cluster(
            data_dir,
            args.base_port + shift,
            *overrides,
            kafka_base_port=args.kafka_base_port + shift,
            checkout=checkout,
        )
        try:
            return stack.enter_context(cluster)
        except RuntimeError as exc:
            if "is in use" not in str(exc) or attempt + 1 == PORT_TRIES:
                raise
            print(f"(a port in use, the ports moved up by {PORT_STEP}: {exc})", flush=True)
    raise AssertionError("unreachable")


def one(
    args: argparse.Namespace,
    data_dir: str,
    settings: Sequence[str],
    checkout: str | None,
    idle_work: str | None,
) -> dict[str, Any]:
    overrides = (
        *(item for setting in settings for item in ("--override", setting)),
        "--override",
        "log.cleaner.backoff.ms=100",
        "--override",
        "metrics.port=0",
        "--fresh",
    )
    with contextlib.ExitStack() as stack:
        bootstrap = started_cluster(stack, args, data_dir, overrides, checkout)
        create_topic(bootstrap, "load", 1, *COMPACTED)
        create_topic(bootstrap, "probe", 1, *COMPACTED)
        stop = threading.Event()
        counted: list[int] = []
        writer = threading.Thread(
            target=lambda: counted.append(load(bootstrap, args.load_rate, stop)), daemon=True
        )
        writer.start()
        spinning = (
            None if idle_work is None else subprocess.Popen([sys.executable, "-c", idle_work])
        )
        try:
            time.sleep(3)
            pids = node_pids(data_dir)
            before = cores_sample(pids)
            spun_before = 0.0 if spinning is None else _proc_cpu_s(spinning.pid)
            latencies = probe(bootstrap, args.probes)
            cores = cores_used(before, cores_sample(pids))
            if spinning is not None:
                spun = _proc_cpu_s(spinning.pid) - spun_before
                cores["idle_work_cores"] = spun / cores["seconds"]
            fetched = fetch_probe(bootstrap, args.probes)
        finally:
            if spinning is not None:
                spinning.kill()
                spinning.wait()
        stop.set()
        writer.join(120)
        time.sleep(1)  # the last pass
        size = partition_bytes(data_dir, "load")
    passes = pass_counts(data_dir)
    return {
        **percentiles(latencies),
        **percentiles(fetched, "fetch_"),
        "load_records": counted[0] if counted else 0,
        "load_bytes_node1": size,
        **cores,
        **passes,
    }


def percentiles(latencies: Sequence[float], prefix: str = "") -> dict[str, float]:
    ordered = sorted(latencies)
    return {
        f"{prefix}p50_ms": statistics.median(ordered),
        f"{prefix}p99_ms": ordered[int(len(ordered) * 0.99) - 1],
        f"{prefix}max_ms": ordered[-1],
    }


def spread(values: Sequence[float]) -> str:
    ordered = sorted(values)
    return f"{ordered[0]:.2f} / {statistics.median(ordered):.2f} / {ordered[-1]:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--probes", type=int, default=2000)
    parser.add_argument("--load-rate", type=int, default=5000)
    parser.add_argument("--base-port", type=int, default=27400)
    parser.add_argument("--kafka-base-port", type=int, default=27410)
    parser.add_argument("--data-dir")
    parser.add_argument("--compare-checkout", metavar="DIR")
    parser.add_argument("--json")
    args = parser.parse_args()
    # Each configuration: its cleaner settings, and the checkout whose code runs (None: this).
    configurations: dict[str, tuple[Sequence[str], str | None, str | None]] = {
        name: (settings, None, IDLE_WORK.get(name)) for name, settings in CONFIGURATIONS.items()
    }
    if args.compare_checkout:
        other = os.path.abspath(args.compare_checkout)
        configurations[f"cleaner on, {os.path.basename(other)}"] = (
            CONFIGURATIONS["cleaner on"],
            other,
            None,
        )
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in configurations}
    with tempfile.TemporaryDirectory(prefix="cleaner-bench-") as scratch:
        data_dir = args.data_dir or os.path.join(scratch, "cluster")
        for run in range(args.runs):
            names = list(configurations)
            if run % 2:  # which goes first alternates
                names.reverse()
            for name in names:
                result = one(args, data_dir, *configurations[name])
                results[name].append(result)
                print(f"run {run + 1} {name}: {json.dumps(result)}", flush=True)
    print("\nprobe and fetch probe latency, ms, min / median / max over runs")
    for name, runs in results.items():
        print(
            f"{name}: p50 {spread([r['p50_ms'] for r in runs])}, "
            f"p99 {spread([r['p99_ms'] for r in runs])}, "
            f"max {spread([r['max_ms'] for r in runs])}, "
            f"fetch p50 {spread([r['fetch_p50_ms'] for r in runs])}, "
            f"p99 {spread([r['fetch_p99_ms'] for r in runs])}, "
            f"max {spread([r['fetch_max_ms'] for r in runs])}, "
            f"load partition on node 1 {spread([r['load_bytes_node1'] / 1e6 for r in runs])} MB, "
            f"loop wait {spread([r['loop_wait_ms_per_s'] for r in runs])} ms/s, "
            f"cleaning children {spread([r['cleaning_cores'] for r in runs])} cores, "
            f"nodes' loops {spread([r['loop_cores'] for r in runs])} cores, "
            f"nodes' other threads {spread([r['other_thread_cores'] for r in runs])} cores"
            + (
                f", idle work {spread([r['idle_work_cores'] for r in runs])} cores"
                if name in IDLE_WORK
                else ""
            )
        )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"machine": machine(), "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
