"""Produce requests per second a broker serves through its Kafka listener with Kafka's
default batching (issue #55's "requests per second" goal), and what each costs the brokers.

A local 3-node replog cluster (`replog cluster start`, Kafka listeners at the gRPC base port +
200), or with `--bootstrap` a running Kafka-protocol cluster (Apache Kafka from
`bench/kafka/kafka.sh`). For each shape `PxN` (P producer processes, a fresh topic of N
partitions, RF 3), P confluent-kafka producers send 1 KiB records (no key) with Kafka's
producer defaults: `batch.size` 16384, `linger.ms` 5, acks=all, idempotence on. A shape
`PxNpK` turns idempotence off and keeps K requests in flight per connection, as the Java
producer does (5). Each shape is measured `--runs` times, the shapes in turn run by run. Over
each measured window (after `--warm-up` seconds):

- produce requests/s per broker: replog's own count (the `Produce` series of
  `replog_kafka_request_duration_seconds`, summed over the three nodes, divided by 3), with the
  producers' count (librdkafka's statistics) beside it; for `--bootstrap`, the producers';
- the brokers' time per request, from reading a request to its answer (that histogram's sum
  over its count; replog only), and the servers' CPU per request (/proc/<pid>/stat of the
  nodes, or of `--pids`);
- records/s acknowledged and records per request; the producers' round trip (librdkafka's
  `rtt` p50, the median over brokers and producers); the machine's load average.

Why the shapes matter: librdkafka's idempotent producer keeps at most 5 *records* in flight
per partition (`RD_KAFKA_IDEMP_MAX_INFLIGHT` is compared with the partition's in-flight message
count), so with 15 records a 16 KiB batch it sends one request per partition and waits for its
answer. One producer on 3 partitions (one led by each broker) is then request-response: a
broker serves 1 / (its time + the client's turnaround) requests/s, whatever its capacity. More
partitions, producers or requests in flight measure the capacity.

    .venv/bin/python bench/kafka_listener_requests.py [--shapes 1x3,1x12,4x12,1x3p5] [--runs 3]
        [--seconds 10] [--base-port P] [--data-dir DIR] [--json FILE]
    .venv/bin/python bench/kafka_listener_requests.py --bootstrap HOST:PORT,... --pids P,P,P

The machine is shared: requests/s follow the cores left to the run; CPU per request moves
less. Compare code versions or systems by running this script for each, interleaved, in one
period (docs/benchmarks.md, "Produce requests per second through the Kafka listener").
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import statistics
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

# bench/ first on sys.path would let bench/timeline.py shadow the package replog imports: the
# checkout goes first, bench/ last (for replog_cli).
_BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _BENCH_DIR]
sys.path.insert(0, os.path.dirname(_BENCH_DIR))
sys.path.append(_BENCH_DIR)

from replog_cli import KAFKA_PORT_OFFSET, create_topic, node_pids, running_cluster  # noqa: E402

from replog.cli.bench import versions  # noqa: E402
from replog.cli.bench.runner import machine  # noqa: E402
from replog.cli.bench.server_cpu import cpu_seconds  # noqa: E402
from replog.cli.local_cluster import METRICS_PORT_OFFSET  # noqa: E402

RECORD_BYTES = 1024
BROKERS = 3
KAFKA_DEFAULTS = {
    "acks": "all",
    "enable.idempotence": True,
    "batch.size": 16384,
    "linger.ms": 5,
}
_SHAPE = re.compile(r"(\d+)x(\d+)(?:p(\d+))?")
_PRODUCE_SERIES = re.compile(
    r'^replog_kafka_request_duration_seconds_(count|sum)\{api="Produce"\} (\S+)$', re.M
)


@dataclass(frozen=True)
class Shape:
    producers: int
    partitions: int
    # 0: idempotent (librdkafka's rule: one request per partition in flight); N: idempotence
    # off and N requests in flight per connection, as the Java producer keeps (5).
    in_flight: int = 0

    @classmethod
    def parse(cls, text: str) -> Shape:
        found = _SHAPE.fullmatch(text)
        if found is None:
            raise argparse.ArgumentTypeError(
                f"a shape is PRODUCERSxPARTITIONS, optionally pIN_FLIGHT (1x3, 1x3p5), not {text!r}"
            )
        producers, partitions, in_flight = found.groups()
        return cls(int(producers), int(partitions), int(in_flight or 0))

    def settings(self) -> dict[str, Any]:
        """The producer settings of this shape (Kafka's defaults, `in_flight` aside)."""
        if not self.in_flight:
            return dict(KAFKA_DEFAULTS)
        return KAFKA_DEFAULTS | {
            "enable.idempotence": False,
            "max.in.flight.requests.per.connection": self.in_flight,
        }

    def __str__(self) -> str:
        pipelined = f"p{self.in_flight}" if self.in_flight else ""
        return f"{self.producers}x{self.partitions}{pipelined}"


# --- one producer process -------------------------------------------------------------------


def _produce(
    bootstrap: str, topic: str, settings: dict[str, Any], seconds: float, out: Any
) -> None:
    """Send for `seconds`, then report (acked records at each second, librdkafka's stats)."""
    import confluent_kafka

    stats: list[dict[str, Any]] = []
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            **settings,
            "statistics.interval.ms": 500,
            "stats_cb": lambda text: stats.append(json.loads(text)),
            "delivery.report.only.error": True,
        }
    )
    value = os.urandom(RECORD_BYTES)
    produced = 0
    acked: list[tuple[float, int]] = []
    end = time.monotonic() + seconds
    next_mark = time.monotonic()
    while (now := time.monotonic()) < end:
        if now >= next_mark:
            acked.append((now, produced - len(producer)))
            next_mark += 0.5
        for _ in range(100):
            try:
                producer.produce(topic, value)
                produced += 1
            except BufferError:  # librdkafka's queue is full
                producer.poll(0.005)
        producer.poll(0)
    acked.append((time.monotonic(), produced - len(producer)))
    rtts = [
        broker["rtt"]["p50"] / 1000
        for snapshot in stats[-3:]
        for broker in snapshot.get("brokers", {}).values()
        if broker.get("nodeid", -1) >= 0 and broker["rtt"]["cnt"]
    ]
    # Produce requests sent so far, at librdkafka's clock (`ts`: CLOCK_MONOTONIC, in us, the
    # clock of time.monotonic on Linux).
    requests = [
        (
            snapshot["ts"] / 1e6,
            sum(b.get("req", {}).get("Produce", 0) for b in snapshot.get("brokers", {}).values()),
        )
        for snapshot in stats
    ]
    producer.purge()
    producer.flush(5)
    out.put(
        {"acked": acked, "requests": requests, "rtt_ms": statistics.median(rtts) if rtts else 0.0}
    )


# --- the brokers' side ----------------------------------------------------------------------


def produce_counts(base_port: int) -> tuple[float, float]:
    """(Produce requests answered, seconds spent answering them), summed over the nodes."""
    count = total = 0.0
    for i in range(BROKERS):
        url = f"http://127.0.0.1:{base_port + METRICS_PORT_OFFSET + i}/metrics"
        with urllib.request.urlopen(url, timeout=5) as answer:
            page = answer.read().decode()
        for kind, value in _PRODUCE_SERIES.findall(page):
            if kind == "count":
                count += float(value)
            else:
                total += float(value)
    return count, total


@dataclass(frozen=True)
class Trial:
    shape: str
    run: int
    seconds: float
    requests_per_s_per_broker: float  # the brokers' count (replog), else the clients'
    client_requests_per_s_per_broker: float  # the producers' count (librdkafka's statistics)
    records_per_s: float
    records_per_request: float
    broker_ms_per_request: float  # from reading a request to its answer
    broker_cpu_ms_per_request: float  # the three nodes' CPU over the requests they answered
    client_rtt_ms: float  # librdkafka's rtt p50, median over producers and brokers
    load_average: float


def one_trial(
    shape: Shape, run: int, setup: dict[str, Any], warm_up_s: float, seconds: float
) -> Trial:
    topic = f"req-{int(time.time())}-{run}-{shape}"  # fresh in a cluster measured before
    setup["create_topic"](topic, shape.partitions)
    context = multiprocessing.get_context("spawn")
    out: Any = context.Queue()
    procs = [
        context.Process(
            target=_produce,
            args=(setup["kafka"], topic, shape.settings(), warm_up_s + seconds, out),
        )
        for _ in range(shape.producers)
    ]
    for proc in procs:
        proc.start()
    time.sleep(warm_up_s)
    replog = setup["base_port"] is not None
    start_at = time.monotonic()
    start_counts = produce_counts(setup["base_port"]) if replog else (0.0, 0.0)
    start_cpu = cpu_seconds(setup["pids"])
    time.sleep(seconds)
    end_at = time.monotonic()
    end_counts = produce_counts(setup["base_port"]) if replog else (0.0, 0.0)
    end_cpu = cpu_seconds(setup["pids"])
    load = os.getloadavg()[0]
    reports = [out.get(timeout=warm_up_s + seconds + 60) for _ in procs]
    for proc in procs:
        proc.join(30)
    window = end_at - start_at
    sent = sum(_between(r["requests"], start_at, end_at) for r in reports)
    # The brokers' own count where there is one (replog's metrics), else the clients'.
    requests = end_counts[0] - start_counts[0] if replog else sent
    records = sum(_between(r["acked"], start_at, end_at) for r in reports)
    cpu = sum(end_cpu[p] - start_cpu[p] for p in setup["pids"] if p in start_cpu and p in end_cpu)
    return Trial(
        shape=str(shape),
        run=run,
        seconds=round(window, 2),
        requests_per_s_per_broker=round(requests / window / BROKERS, 1),
        client_requests_per_s_per_broker=round(sent / window / BROKERS, 1),
        records_per_s=round(records / window),
        records_per_request=round(records / requests, 1) if requests else 0.0,
        broker_ms_per_request=(
            round((end_counts[1] - start_counts[1]) / requests * 1000, 2)
            if replog and requests
            else 0.0
        ),
        broker_cpu_ms_per_request=round(cpu / requests * 1000, 3) if requests else 0.0,
        client_rtt_ms=round(statistics.median(r["rtt_ms"] for r in reports), 2),
        load_average=round(load, 1),
    )


def _between(marks: Sequence[Sequence[float]], start: float, end: float) -> float:
    """How much a count grew between `start` and `end`, interpolated from its marks
    ((time, count so far), in time order)."""

    def at(t: float) -> float:
        before = [m for m in marks if m[0] <= t]
        after = [m for m in marks if m[0] >= t]
        if not before:
            return after[0][1]
        if not after:
            return before[-1][1]
        (t0, a0), (t1, a1) = before[-1], after[0]
        return a0 if t1 == t0 else a0 + (a1 - a0) * (t - t0) / (t1 - t0)

    return at(end) - at(start)


def spread(values: Sequence[float]) -> str:
    return f"{min(values):.4g} / {statistics.median(values):.4g} / {max(values):.4g}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", type=shapes_arg, default="1x3,1x12,4x12")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--warm-up", type=float, default=3.0)
    parser.add_argument("--base-port", type=int, default=23400)
    parser.add_argument("--data-dir", help="the cluster's directory (default: a temporary one)")
    parser.add_argument(
        "--bootstrap",
        help="measure this running Kafka-protocol cluster (e.g. Apache Kafka from "
        "bench/kafka/kafka.sh) instead of starting replog: requests counted by the clients",
    )
    parser.add_argument(
        "--pids", default="", help="with --bootstrap: the servers' process ids, for their CPU"
    )
    parser.add_argument("--json", help="write every trial here")
    args = parser.parse_args(argv)
    shapes: list[Shape] = args.shapes
    if args.bootstrap:
        setup = {
            "kafka": args.bootstrap,
            "base_port": None,
            "pids": [int(p) for p in args.pids.split(",") if p],
            "create_topic": lambda topic, partitions: _create_kafka_topic(
                args.bootstrap, topic, partitions
            ),
        }
        trials = _runs(shapes, args, setup)
    else:
        kafka = ",".join(
            f"127.0.0.1:{args.base_port + KAFKA_PORT_OFFSET + i}" for i in range(BROKERS)
        )
        with tempfile.TemporaryDirectory(prefix="replog-bench-requests-") as work:
            data_dir = args.data_dir or str(Path(work) / "cluster")
            with running_cluster(data_dir, args.base_port, "--fresh") as boot:
                setup = {
                    "kafka": kafka,
                    "base_port": args.base_port,
                    "pids": node_pids(data_dir),
                    "create_topic": lambda topic, partitions: create_topic(boot, topic, partitions),
                }
                trials = _runs(shapes, args, setup)
    print()
    print(
        f"{args.runs} runs, confluent-kafka with {KAFKA_DEFAULTS}, 1 KiB records, RF 3; "
        "min / median / max"
    )
    columns = (
        ("requests/s/broker", "requests_per_s_per_broker"),
        ("records/s", "records_per_s"),
        ("broker ms/request", "broker_ms_per_request"),
        ("CPU ms/request", "broker_cpu_ms_per_request"),
        ("client rtt ms", "client_rtt_ms"),
        ("load", "load_average"),
    )
    print(f"{'shape':6s}" + "".join(f"{name:>25s}" for name, _ in columns))
    for shape in shapes:
        mine = [t for t in trials if t.shape == str(shape)]
        print(
            f"{shape!s:6s}"
            + "".join(f"{spread([getattr(t, field) for t in mine]):>25s}" for _, field in columns)
        )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(
                {
                    "trials": [asdict(t) for t in trials],
                    "args": vars(args) | {"shapes": [str(s) for s in shapes]},
                    "machine": machine(),
                    "versions": versions(),
                },
                f,
                indent=2,
            )
    return 0


def shapes_arg(text: str) -> list[Shape]:
    return [Shape.parse(part) for part in text.split(",") if part]


def _create_kafka_topic(bootstrap: str, topic: str, partitions: int) -> None:
    """A topic of `partitions` partitions, RF 3, min.insync.replicas 2, through the AdminClient."""
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.cimpl import NewTopic  # where its type stubs declare it

    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(topic, partitions, 3, config={"min.insync.replicas": "2"})
    admin.create_topics([new])[topic].result(30)
    time.sleep(2)  # leaders elected and known to every broker before the producers start


def _runs(shapes: Sequence[Shape], args: argparse.Namespace, setup: dict[str, Any]) -> list[Trial]:
    """Every shape once a run, the shapes in turn."""
    trials = []
    for run in range(args.runs):
        for shape in shapes:
            trial = one_trial(shape, run, setup, args.warm_up, args.seconds)
            trials.append(trial)
            print(
                f"run {run + 1} {trial.shape:>5s}  {trial.requests_per_s_per_broker:7.1f} "
                f"requests/s per broker (clients counted {trial.client_requests_per_s_per_broker})"
                f"  {trial.records_per_s:7.0f} records/s  {trial.records_per_request:5.1f} "
                f"records/request  broker {trial.broker_ms_per_request:6.2f} ms and "
                f"{trial.broker_cpu_ms_per_request:.3f} CPU ms per request  client rtt "
                f"{trial.client_rtt_ms:.2f} ms  load {trial.load_average}",
                flush=True,
            )
    return trials


if __name__ == "__main__":
    sys.exit(main())
