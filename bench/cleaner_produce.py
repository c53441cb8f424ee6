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
`--kafka` adds Apache Kafka's pair, the field's baseline: a 3-node Kafka cluster
(`bench/kafka/kafka.sh`, as `replog bench`'s kafka system starts it) with its cleaner on and
off, the same broker settings (`log.cleaner.backoff.ms` 100), topics, load, probe and fetch
probe, through the same client (replog's, which speaks Kafka's protocol). Kafka 4 refuses a
`segment.bytes` under 1 MiB, so its topics take the 256 KiB as `internal.segment.bytes` (its
setting for tests, the same rolls). `--only NAME` runs only the configurations named.

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
included: `pass_priority`) and those promoted while under way (`promoted_passes`). For Kafka:
its cleaner threads' CPU (`cleaning_cores`), its other threads' (`other_thread_cores`) and its
passes (each a statistics line in the node's log); a JVM has no event loop to wait. Last, per
system, each latency figure of the cleaner on over the cleaner off in the same run (min /
median / max over the runs): Kafka's ratios beside replog's. The machine is shared: compare
the configurations within a run.

    .venv/bin/python bench/cleaner_produce.py [--runs 3] [--probes 2000] [--load-rate 5000]
        [--base-port 27400] [--kafka-base-port 27410] [--data-dir DIR]
        [--compare-checkout DIR] [--kafka [--apache-kafka-base-port 27700]] [--only NAME]
        [--json FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

_BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _BENCH_DIR]
sys.path.insert(0, os.path.dirname(_BENCH_DIR))
sys.path.append(_BENCH_DIR)

from replog_cli import create_topic, running_cluster  # noqa: E402

from replog import Producer  # noqa: E402
from replog.cli.bench.runner import machine  # noqa: E402
from replog.cli.bench.systems import KafkaSystem  # noqa: E402
from replog.client.records import TopicPartition  # noqa: E402
from replog.clock import monotonic_ms  # noqa: E402
from replog.errors import BenchSystemError  # noqa: E402
from replog.spark.partition_fetcher import PartitionFetcher  # noqa: E402

SEGMENT_BYTES = 262144
COMPACTED = (
    "cleanup.policy=compact",
    f"segment.bytes={SEGMENT_BYTES}",
    "min.cleanable.dirty.ratio=0.01",
)
# Kafka 4 refuses a segment.bytes under 1 MiB (KIP-1030); its setting for tests takes ours.
KAFKA_COMPACTED = (
    "cleanup.policy=compact",
    f"internal.segment.bytes={SEGMENT_BYTES}",
    "min.cleanable.dirty.ratio=0.01",
)
CLEANER_BACKOFF = "log.cleaner.backoff.ms=100"  # every node of both systems
ON = "log.cleaner.enable=true"
OFF = "log.cleaner.enable=false"


@dataclass(frozen=True)
class Configuration:
    """A cluster of a run: its system, every node's cleaner settings (server.properties), the
    checkout whose code runs (replog; None: this one) and the work beside it at SCHED_IDLE."""

    settings: tuple[str, ...]
    system: str = "replog"  # or "kafka"
    checkout: str | None = None
    idle_work: str | None = None


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
CONFIGURATIONS = {
    "cleaner on": Configuration((ON,)),
    "cleaner on, 1 MB/s": Configuration((ON, "log.cleaner.io.max.bytes.per.second=1e6")),
    "cleaner off": Configuration((OFF,)),
    **{name: Configuration((OFF,), idle_work=work) for name, work in IDLE_WORK.items()},
}
KAFKA_CONFIGURATIONS = {
    "kafka, cleaner on": Configuration((ON,), "kafka"),
    "kafka, cleaner off": Configuration((OFF,), "kafka"),
}
# Per system, the configurations whose ratio (on over off, per run) is printed.
ON_OFF = {
    "replog": ("cleaner on", "cleaner off"),
    "kafka": ("kafka, cleaner on", "kafka, cleaner off"),
}
RATIO_FIGURES = ("p50_ms", "p99_ms", "max_ms", "fetch_p50_ms", "fetch_p99_ms", "fetch_max_ms")


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


# A pass's line in a node's log: replog's, and Kafka's statistics (`LogCleaner`, at INFO in
# kafka.sh's logging).
PASS_LINE = {"replog": "cleaned offsets", "kafka": "Log cleaner thread "}
# replog's: how many of a pass's segment groups it swapped in and left as they were.
GROUPS = re.compile(r"(\d+) segment groups swapped, (\d+) unchanged")
PASS_COUNTS = ("passes", "urgent_passes", "promoted_passes", "groups_swapped", "groups_kept")


def count_passes(lines: Iterator[str], system: str) -> dict[str, int]:
    """The cleaning passes a node's log reports: all, urgent and promoted, and their segment
    groups swapped in and left as they were (replog's)."""
    counts = dict.fromkeys(PASS_COUNTS, 0)
    marker = PASS_LINE[system]
    for line in lines:
        if marker not in line:
            continue
        counts["passes"] += 1
        counts["urgent_passes"] += "), urgent" in line
        counts["promoted_passes"] += ", promoted" in line
        groups = GROUPS.search(line)
        if groups:
            counts["groups_swapped"] += int(groups[1])
            counts["groups_kept"] += int(groups[2])
    return counts


def pass_counts(data_dir: str, system: str) -> dict[str, int]:
    """The cleaning passes the nodes' logs report, the three nodes summed (`count_passes`)."""
    counts = dict.fromkeys(PASS_COUNTS, 0)
    for node in range(1, 4):
        with open(os.path.join(data_dir, f"node-{node}", "node.log"), encoding="utf-8") as f:
            for key, value in count_passes(iter(f), system).items():
                counts[key] += value
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


# The time; each node's main thread's run delay (ns); the CPU seconds of the cleaning children by
# pid; of the nodes' main threads, their cleaner threads (Kafka's) and their other threads.
Sample = tuple[float, list[int], dict[int, float], float, float, float]
# Kafka's cleaner threads (`kafka-log-cleaner-thread-N`) as Linux names them: 15 characters.
KAFKA_CLEANER_THREAD = "kafka-log-cleaner-thread-"[:15]


def _threads_cpu_s(pid: int, cleaner_thread: str | None) -> tuple[float, float, float]:
    """The CPU seconds of a process's main thread, of its threads named `cleaner_thread`...
    (none when None) and of its other threads, summed."""
    main = cleaners = others = 0.0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            cpu = _proc_cpu_s_of(f"/proc/{pid}/task/{task}/stat")
            with open(f"/proc/{pid}/task/{task}/comm", encoding="utf-8") as f:
                name = f.read().strip()
        except OSError:  # a thread that ended meanwhile
            continue
        if int(task) == pid:
            main = cpu
        elif cleaner_thread is not None and name.startswith(cleaner_thread):
            cleaners += cpu
        else:
            others += cpu
    return main, cleaners, others


def cores_sample(pids: Sequence[int], system: str) -> Sample:
    """Now, each node's main thread's run delay (ns), its cleaning children's CPU, and the
    CPU of the nodes' main threads, cleaner threads and other threads (all nodes summed)."""
    delays = []
    mains = cleaners = others = 0.0
    for pid in pids:
        with open(f"/proc/{pid}/task/{pid}/schedstat", encoding="ascii") as f:
            delays.append(int(f.read().split()[1]))
        main, cleaner, other = _threads_cpu_s(
            pid, KAFKA_CLEANER_THREAD if system == "kafka" else None
        )
        mains += main
        cleaners += cleaner
        others += other
    return time.monotonic(), delays, _cleaning_children(pids), mains, cleaners, others


def cores_used(before: Sample, after: Sample, system: str) -> dict[str, float]:
    """Per second between the samples (module docstring); for Kafka no loop figures (its main
    thread only waits) and its main thread among the other threads."""
    elapsed = after[0] - before[0]
    children = sum(cpu - before[2].get(pid, 0.0) for pid, cpu in after[2].items())
    mains, cleaners, others = (after[i] - before[i] for i in (3, 4, 5))
    if system == "kafka":
        return {
            "cleaning_cores": cleaners / elapsed,
            "other_thread_cores": (mains + others) / elapsed,
            "seconds": elapsed,
        }
    waits = [(b - a) / 1e6 / elapsed for a, b in zip(before[1], after[1], strict=True)]
    return {
        "loop_wait_ms_per_s": statistics.median(waits),
        "cleaning_cores": (children + cleaners) / elapsed,
        "loop_cores": mains / elapsed,
        "other_thread_cores": others / elapsed,
        "seconds": elapsed,
    }


PORT_TRIES = 5
PORT_STEP = 20  # the next try's ports: above every port of the last (its +100s included)
# What a start that found a port of ours taken says: replog's, kafka.sh's.
PORT_TAKEN = ("is in use", "is taken")


@contextlib.contextmanager
def running_kafka(directory: str, base_port: int, settings: Sequence[str]) -> Iterator[str]:
    """Apache Kafka's 3-node cluster (`KafkaSystem`: kafka.sh) in `directory`, its brokers from
    `base_port`, with `settings` in every node's server.properties, stopped on exit; yields its
    bootstrap servers."""
    kafka = KafkaSystem(directory, base_port, None, properties=(*settings, CLEANER_BACKOFF))
    kafka.start()
    try:
        yield kafka.bootstrap_servers
    finally:
        kafka.stop()


def started_cluster(
    stack: contextlib.ExitStack,
    args: argparse.Namespace,
    data_dir: str,
    configuration: Configuration,
) -> str:
    """A running cluster of `configuration` (stopped with `stack`), its bootstrap servers. On a
    shared machine another process's connection may hold a port of ours (an ephemeral port, in
    TIME-WAIT): the start then refuses before it does anything, and the next try moves every
    port up by `PORT_STEP`."""
    overrides = (
        *(item for setting in configuration.settings for item in ("--override", setting)),
        "--override",
        CLEANER_BACKOFF,
        "--override",
        "metrics.port=0",
        "--fresh",
    )
    for attempt in range(PORT_TRIES):
        shift = attempt * PORT_STEP
        cluster: contextlib.AbstractContextManager[str]
        if configuration.system == "kafka":
            cluster = running_kafka(
                data_dir, args.apache_kafka_base_port + shift, configuration.settings
            )
        else:
            cluster = running_cluster(
                data_dir,
                args.base_port + shift,
                *overrides,
                kafka_base_port=args.kafka_base_port + shift,
                checkout=configuration.checkout,
            )
        try:
            return stack.enter_context(cluster)
        except (RuntimeError, BenchSystemError) as exc:
            if not any(taken in str(exc) for taken in PORT_TAKEN) or attempt + 1 == PORT_TRIES:
                raise
            print(f"(a port in use, the ports moved up by {PORT_STEP}: {exc})", flush=True)
    raise AssertionError("unreachable")


def one(args: argparse.Namespace, data_dir: str, configuration: Configuration) -> dict[str, Any]:
    system = configuration.system
    idle_work = configuration.idle_work
    if system == "kafka":  # kafka.sh wipes its directory as it starts: one of its own
        data_dir += "-kafka"
    with contextlib.ExitStack() as stack:
        bootstrap = started_cluster(stack, args, data_dir, configuration)
        compacted = KAFKA_COMPACTED if system == "kafka" else COMPACTED
        create_topic(bootstrap, "load", 1, *compacted)
        create_topic(bootstrap, "probe", 1, *compacted)
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
            before = cores_sample(pids, system)
            spun_before = 0.0 if spinning is None else _proc_cpu_s(spinning.pid)
            latencies = probe(bootstrap, args.probes)
            cores = cores_used(before, cores_sample(pids, system), system)
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
    passes = pass_counts(data_dir, system)
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


# What the summary prints of a configuration's runs, where its runs have it: (key, label,
# scale, unit).
SUMMARY = (
    ("p50_ms", "p50", 1, ""),
    ("p99_ms", "p99", 1, ""),
    ("max_ms", "max", 1, ""),
    ("fetch_p50_ms", "fetch p50", 1, ""),
    ("fetch_p99_ms", "p99", 1, ""),
    ("fetch_max_ms", "max", 1, ""),
    ("load_bytes_node1", "load partition on node 1", 1e-6, " MB"),
    ("loop_wait_ms_per_s", "loop wait", 1, " ms/s"),
    ("cleaning_cores", "cleaning", 1, " cores"),
    ("loop_cores", "nodes' loops", 1, " cores"),
    ("other_thread_cores", "nodes' other threads", 1, " cores"),
    ("idle_work_cores", "idle work", 1, " cores"),
    ("passes", "passes", 1, ""),
    ("groups_kept", "groups left as they were", 1, ""),
)


def summary_line(name: str, runs: Sequence[Mapping[str, float]]) -> str:
    """`name`'s figures, min / median / max over `runs`, each figure every run has."""
    parts = [
        f"{label} {spread([r[key] * scale for r in runs])}{unit}"
        for key, label, scale, unit in SUMMARY
        if runs and all(key in r for r in runs)
    ]
    return f"{name}: " + ", ".join(parts)


def on_off_ratios(
    results: Mapping[str, Sequence[Mapping[str, float]]],
) -> dict[str, dict[str, list[float]]]:
    """Per system whose pair ran (`ON_OFF`): each latency figure of its cleaner on over its
    cleaner off in the same run, one ratio a run."""
    ratios: dict[str, dict[str, list[float]]] = {}
    for system, (on, off) in ON_OFF.items():
        if results.get(on) and results.get(off):
            ratios[system] = {
                figure: [
                    a[figure] / b[figure] for a, b in zip(results[on], results[off], strict=True)
                ]
                for figure in RATIO_FIGURES
            }
    return ratios


def chosen_configurations(args: argparse.Namespace) -> dict[str, Configuration]:
    """The configurations a run takes, in order (module docstring: `--compare-checkout`,
    `--kafka`, `--only`)."""
    configurations = dict(CONFIGURATIONS)
    if args.compare_checkout:
        other = os.path.abspath(args.compare_checkout)
        configurations[f"cleaner on, {os.path.basename(other)}"] = Configuration(
            (ON,), checkout=other
        )
    if args.kafka:
        configurations.update(KAFKA_CONFIGURATIONS)
    if args.only:
        unknown = sorted(set(args.only) - set(configurations))
        if unknown:
            raise SystemExit(
                f"--only: no configuration {', '.join(map(repr, unknown))} "
                f"(known: {', '.join(map(repr, configurations))})"
            )
        configurations = {n: c for n, c in configurations.items() if n in args.only}
    return configurations


def parser() -> argparse.ArgumentParser:
    made = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    made.add_argument("--runs", type=int, default=3)
    made.add_argument("--probes", type=int, default=2000)
    made.add_argument("--load-rate", type=int, default=5000)
    made.add_argument("--base-port", type=int, default=27400)
    made.add_argument("--kafka-base-port", type=int, default=27410)
    made.add_argument("--data-dir")
    made.add_argument("--compare-checkout", metavar="DIR")
    made.add_argument(
        "--kafka", action="store_true", help="Apache Kafka's cleaner on and off too (kafka.sh)"
    )
    made.add_argument(
        "--apache-kafka-base-port",
        type=int,
        default=27700,
        help="Kafka's brokers listen from here, its controllers 100 above",
    )
    made.add_argument(
        "--only", action="append", metavar="NAME", help="run this configuration (repeatable)"
    )
    made.add_argument("--json")
    return made


def main() -> None:
    args = parser().parse_args()
    configurations = chosen_configurations(args)
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in configurations}
    with tempfile.TemporaryDirectory(prefix="cleaner-bench-") as scratch:
        data_dir = args.data_dir or os.path.join(scratch, "cluster")
        for run in range(args.runs):
            names = list(configurations)
            if run % 2:  # which goes first alternates
                names.reverse()
            for name in names:
                result = one(args, data_dir, configurations[name])
                results[name].append(result)
                print(f"run {run + 1} {name}: {json.dumps(result)}", flush=True)
    print("\nprobe and fetch probe latency, ms, min / median / max over runs")
    for name, runs in results.items():
        print(summary_line(name, runs))
    ratios = on_off_ratios(results)
    if ratios:
        print("\ncleaner on / cleaner off, the same run's, min / median / max over runs")
    for system, figures in ratios.items():
        print(
            f"{system}: "
            + ", ".join(f"{figure[:-3]} {spread(values)}x" for figure, values in figures.items())
        )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(
                {"machine": machine(), "results": results, "on_off_ratios": ratios}, f, indent=2
            )


if __name__ == "__main__":
    main()
