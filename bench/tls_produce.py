"""Produce throughput over TLS and SASL_SSL against plaintext, in one run (issue 81's goal: at
most 15% lower), on replog's broker and on Apache Kafka's, the field's baseline.

Per broker of `--broker` (replog, kafka, or both: `replog,kafka`), three local 3-node clusters
side by side, plaintext, ssl and sasl_ssl, each with a topic of 3 partitions, replication
factor 3 and `min.insync.replicas=2`:

- replog: `replog cluster start --security MODE` on base ports P, P + 10 and P + 20; under ssl
  and sasl_ssl the links between the nodes are mutual TLS;
- kafka: Apache Kafka 4.4 (`KafkaSystem`: bench/kafka/kafka.sh with `KAFKA_SECURITY` MODE), its
  brokers from P + 400, P + 410 and P + 420, its controllers 100 above, every link secured as
  replog's: under ssl TLS with client certificates required on the brokers' listener (clients
  and replication) and the controllers'; under sasl_ssl SCRAM-SHA-512 over TLS on the brokers'
  listener (the brokers sign in to each other as the administrator), the controllers' mutual
  TLS, Kafka's StandardAuthorizer with the super users replog's nodes have. Its certificates
  and client files are made by the code that makes replog's (`kafka_security`).

Then the same produce workload against every cluster in turn (per run: every client of
`--client`, every broker, plaintext, ssl, sasl_ssl), `--runs` times, after one unmeasured run
each, so drift in the machine's load falls on all alike:

- `--client replog` (default): `replog perf produce` (replog's blocking Producer, acks=all,
  idempotent), `--records` records of `--record-size` bytes (1 KiB), unthrottled, with the
  cluster's client.properties as `--command-config` (none for plaintext);
- `--client kafka`: Kafka 4.4's ProducerPerformance (the Java client, acks=all) with the
  cluster's client-java.properties, as bench/kafka_tools_check.py runs Kafka's tools;
- `--client replog,kafka`: both.

It prints each run's records/s and CPU per MB sent (the three nodes' from /proc over the run,
the client process's from this one's children's rusage, its start-up included), then per
client and broker the min, median and max records/s of each mode, each secured mode's median
over the same broker's plaintext (the ratio; 0.85 is the goal's bound) and the CPU figures'
medians, and with both brokers replog's median over Kafka's per mode; `--json FILE` writes the
same figures. The ratio is the TLS and SASL cost of the client's listener and of the links
inside the cluster together; Kafka's, under the same client, shows what the client's own side
costs, which no broker removes.

    .venv/bin/python bench/tls_produce.py [--broker replog,kafka] [--client replog,kafka]
        [--runs 5] [--records 100000] [--base-port 24100] [--json FILE]

Bench only (CI never runs it). Every cluster is stopped at the end, also on failure.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

_BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _BENCH_DIR]
sys.path.insert(0, os.path.dirname(_BENCH_DIR))
sys.path.append(_BENCH_DIR)

from replog_cli import KAFKA_PORT_OFFSET, node_pids, replog_cli  # noqa: E402

from replog.cli.bench.server_cpu import cpu_seconds  # noqa: E402

MODES = ("plaintext", "ssl", "sasl_ssl")
BROKERS = ("replog", "kafka")
CLIENTS = ("replog", "kafka")
TOPIC = "tls-bench"
PARTITIONS = 3
GOAL_RATIO = 0.85  # at most 15% lower than plaintext
PORT_STEP = 10  # a broker's clusters' base ports: B, B + 10, B + 20 (3 nodes each)
# Kafka's clusters' brokers from the base port + 400 (replog's take up to + 322: gRPC, metrics,
# Kafka listeners, controllers' Kafka listeners); their controllers 100 above (kafka.sh).
APACHE_KAFKA_PORT_OFFSET = 400


@dataclass(frozen=True)
class Cluster:
    broker: str  # "replog" or "kafka"
    mode: str
    bootstrap: str
    client_config: Path | None  # librdkafka's keys, which replog's tools read (None: plaintext)
    java_config: Path | None  # the same for Kafka's Java tools
    pids: tuple[int, ...]  # its nodes' processes


@dataclass(frozen=True)
class Sample:
    """One measured run."""

    rate: float  # records/s
    nodes_ms_per_mb: float  # the CPU of the cluster's nodes over the run, per MB sent
    client_ms_per_mb: float  # the client process's (with its start: a JVM's, an interpreter's)


Key = tuple[str, str, str]  # client, broker, mode


def names(known: Sequence[str], what: str) -> Callable[[str], tuple[str, ...]]:
    """An argparse type: a comma-separated list of `known` names, each once, in `known`'s
    order."""

    def parse(text: str) -> tuple[str, ...]:
        given = [name.strip() for name in text.split(",") if name.strip()]
        unknown = [name for name in given if name not in known]
        if unknown or not given:
            raise argparse.ArgumentTypeError(
                f"{what} {text!r}: one or more of {', '.join(known)}, comma-separated"
            )
        return tuple(name for name in known if name in given)

    return parse


@contextmanager
def replog_cluster(mode: str, work: Path, base_port: int) -> Iterator[Cluster]:
    """replog's 3-node cluster secured by `mode`, stopped on exit."""
    data_dir = work / f"replog-{mode}"
    kafka = base_port + KAFKA_PORT_OFFSET
    replog_cli(
        "cluster", "start", "--data-dir", str(data_dir), "--base-port", str(base_port),
        "--kafka-base-port", str(kafka), "--security", mode,
    )  # fmt: skip
    try:
        secured = mode != "plaintext"
        yield Cluster(
            "replog",
            mode,
            ",".join(f"127.0.0.1:{kafka + i}" for i in range(3)),
            data_dir / "client.properties" if secured else None,
            data_dir / "client-java.properties" if secured else None,
            tuple(node_pids(str(data_dir))),
        )
    finally:
        replog_cli("cluster", "stop", "--data-dir", str(data_dir))


@contextmanager
def kafka_cluster(mode: str, work: Path, base_port: int) -> Iterator[Cluster]:
    """Apache Kafka's 3-node cluster secured by `mode` (module docstring), stopped on exit."""
    from replog.cli.bench.systems import KafkaSystem

    kafka = KafkaSystem(str(work / f"kafka-{mode}"), base_port, None, security=mode)
    kafka.start()
    try:
        secured = kafka.secured
        yield Cluster(
            "kafka",
            mode,
            kafka.bootstrap_servers,
            None if secured is None else Path(secured.client_config_path),
            None if secured is None else Path(secured.java_client_config_path),
            tuple(kafka.server_pids()),
        )
    finally:
        kafka.stop()


@contextmanager
def started(broker: str, mode: str, work: Path, base_port: int) -> Iterator[Cluster]:
    """A cluster of `broker` secured by `mode`, its topic made, stopped on exit."""
    cluster_of = kafka_cluster if broker == "kafka" else replog_cluster
    with cluster_of(mode, work, base_port) as cluster:
        replog_cli(
            "topics", "create", "--bootstrap-server", cluster.bootstrap, "--topic", TOPIC,
            "--partitions", str(PARTITIONS), "--replication-factor", "3", "--config",
            "min.insync.replicas=2", *_config_args(cluster.client_config),
        )  # fmt: skip
        yield cluster


def base_port_of(broker: str, mode_index: int, base_port: int) -> int:
    """The base port of `broker`'s cluster of the `mode_index`th mode (module docstring)."""
    offset = APACHE_KAFKA_PORT_OFFSET if broker == "kafka" else 0
    return base_port + offset + mode_index * PORT_STEP


def _config_args(path: Path | None) -> list[str]:
    return [] if path is None else ["--command-config", str(path)]


def replog_run(cluster: Cluster, records: int, record_size: int) -> float:
    """One `replog perf produce` run; its records/s."""
    out = replog_cli(
        "perf", "produce", "--bootstrap-server", cluster.bootstrap, "--topic", TOPIC,
        "--num-records", str(records), "--record-size", str(record_size), "--throughput", "-1",
        "--producer-props", "acks=all", "--output", "json", "--no-progress",
        *_config_args(cluster.client_config),
    )  # fmt: skip
    document, _ = json.JSONDecoder().raw_decode(out[out.index("{") :])
    if document["failed"] or document["records"] != records:
        raise RuntimeError(
            f"{cluster.broker} {cluster.mode}: {document['records']} of {records} records sent"
        )
    return float(document["records_per_sec"])


def kafka_run(cluster: Cluster, records: int, record_size: int, libs: Path) -> float:
    """One run of Kafka's ProducerPerformance; its records/s."""
    from kafka_tools_check import tool

    config = [] if cluster.java_config is None else ["--command-config", str(cluster.java_config)]
    status, out, err = tool(
        libs, "ProducerPerformance", "--topic", TOPIC, "--num-records", str(records),
        "--record-size", str(record_size), "--throughput", "-1", *config,
        "--command-property", f"bootstrap.servers={cluster.bootstrap}", "acks=all",
    )  # fmt: skip
    final = out.strip().splitlines()[-1] if out.strip() else ""
    if status != 0 or f"{records} records sent" not in final:
        raise RuntimeError(
            f"{cluster.broker} {cluster.mode}: ProducerPerformance said: {(final or err)[-800:]}"
        )
    return float(final.split("records sent, ")[1].split(" records/sec")[0])


def measured(run: Callable[[], float], cluster: Cluster, megabytes: float) -> Sample:
    """`run` (a client's, in a child process of this one) and the CPU it and the nodes used."""
    nodes_before = sum(cpu_seconds(cluster.pids).values())
    client_before = children_cpu_seconds()
    rate = run()
    client = children_cpu_seconds() - client_before
    nodes = sum(cpu_seconds(cluster.pids).values()) - nodes_before
    return Sample(rate, nodes * 1000 / megabytes, client * 1000 / megabytes)


def children_cpu_seconds() -> float:
    """User + system CPU of this process's children that ended (the clients' processes)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(args: argparse.Namespace, work: Path) -> dict[Key, list[Sample]]:
    figures: dict[Key, list[Sample]] = {
        (client, broker, mode): [] for client in args.client for broker in args.broker
        for mode in MODES
    }  # fmt: skip
    libs = None
    if "kafka" in args.client:
        from kafka_tools_check import kafka_libs

        libs = kafka_libs()

    def run_once(client: str, cluster: Cluster, records: int) -> float:
        if client == "kafka":
            assert libs is not None
            return kafka_run(cluster, records, args.record_size, libs)
        return replog_run(cluster, records, args.record_size)

    megabytes = args.records * args.record_size / 1e6
    with ExitStack() as stack:
        clusters: list[Cluster] = []
        for broker in args.broker:
            for index, mode in enumerate(MODES):
                port = base_port_of(broker, index, args.base_port)
                clusters.append(stack.enter_context(started(broker, mode, work, port)))
        for client in args.client:  # one unmeasured run each: connections, JIT, page cache
            for cluster in clusters:
                run_once(client, cluster, max(args.records // 10, 1000))
        for run in range(args.runs):
            for client in args.client:
                for cluster in clusters:
                    sample = measured(
                        partial(run_once, client, cluster, args.records), cluster, megabytes
                    )
                    figures[(client, cluster.broker, cluster.mode)].append(sample)
                    print(
                        f"run {run + 1} {client} client, {cluster.broker} broker, "
                        f"{cluster.mode:<9} {sample.rate:10.0f} records/s, CPU per MB: nodes "
                        f"{sample.nodes_ms_per_mb:.0f} ms, client {sample.client_ms_per_mb:.0f} ms",
                        flush=True,
                    )
    return figures


@dataclass(frozen=True)
class Row:
    """A client's runs against a broker's cluster of a mode."""

    client: str
    broker: str
    mode: str
    min: float  # records/s
    median: float
    max: float
    ratio: float  # the median over the same client's and broker's plaintext median
    nodes_ms_per_mb: float  # each CPU figure's own median over the runs
    client_ms_per_mb: float
    runs: list[dict[str, float]]  # each run's `Sample`


def results(figures: dict[Key, list[Sample]]) -> list[Row]:
    """A row per client, broker and mode, in `figures`' order."""
    rows = []
    for (client, broker, mode), samples in figures.items():
        rates = [sample.rate for sample in samples]
        median = statistics.median(rates)
        plain = statistics.median(s.rate for s in figures[(client, broker, "plaintext")])
        rows.append(
            Row(
                client,
                broker,
                mode,
                min(rates),
                median,
                max(rates),
                median / plain,
                statistics.median(sample.nodes_ms_per_mb for sample in samples),
                statistics.median(sample.client_ms_per_mb for sample in samples),
                [asdict(sample) for sample in samples],
            )
        )
    return rows


def replog_over_kafka(figures: dict[Key, list[Sample]]) -> dict[str, dict[str, float]]:
    """Per client, per mode: replog's median records/s over Kafka's (clients both brokers ran
    for)."""
    found: dict[str, dict[str, float]] = {}
    for (client, broker, mode), samples in figures.items():
        kafka = figures.get((client, "kafka", mode))
        if broker == "replog" and kafka:
            found.setdefault(client, {})[mode] = statistics.median(
                s.rate for s in samples
            ) / statistics.median(s.rate for s in kafka)
    return found


def report_lines(
    rows: Sequence[Row], pairs: dict[str, dict[str, float]], records: int, record_size: int
) -> list[str]:
    """The printed report: a table per client and broker, then replog over Kafka."""
    lines: list[str] = []
    heading = None
    for row in rows:
        if (row.client, row.broker) != heading:
            heading = (row.client, row.broker)
            lines += [
                "",
                f"{row.client} client, {row.broker} broker, {records} records of {record_size} B, "
                "acks=all, RF 3; records/s, the ratio of medians to plaintext's, CPU ms per MB "
                "(medians)",
                f"{'mode':<10} {'min':>8} {'median':>8} {'max':>8} {'ratio':>6} {'nodes':>6} "
                f"{'client':>6}",
            ]
        goal = ""
        if row.mode != "plaintext":
            goal = "  goal met" if row.ratio >= GOAL_RATIO else "  BELOW GOAL"
        lines.append(
            f"{row.mode:<10} {row.min:>8.0f} {row.median:>8.0f} {row.max:>8.0f} {row.ratio:>6.3f} "
            f"{row.nodes_ms_per_mb:>6.0f} {row.client_ms_per_mb:>6.0f}{goal}"
        )
    for client, ratios in pairs.items():
        each = ", ".join(f"{mode} {ratio:.3f}" for mode, ratio in ratios.items())
        lines += ["", f"{client} client, replog's median records/s over Kafka's: {each}"]
    return lines


def parser() -> argparse.ArgumentParser:
    made = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    made.add_argument("--runs", type=int, default=5, help="measured runs per mode (default 5)")
    made.add_argument("--records", type=int, default=100_000, help="records per run")
    made.add_argument("--record-size", type=int, default=1024, help="bytes per record")
    made.add_argument("--base-port", type=int, default=24100, help="the first cluster's")
    made.add_argument(
        "--broker", type=names(BROKERS, "--broker"), default=("replog",),
        help="replog, kafka (Apache Kafka 4.4) or replog,kafka (default replog)",
    )  # fmt: skip
    made.add_argument(
        "--client", type=names(CLIENTS, "--client"), default=("replog",),
        help="replog (replog perf produce), kafka (Kafka's ProducerPerformance) or both",
    )  # fmt: skip
    made.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    return made


def main(argv: Sequence[str] | None = None) -> int:
    arguments = parser()
    args = arguments.parse_args(argv)
    if args.runs < 1 or args.records < 1:
        arguments.error("--runs and --records must be at least 1")
    with tempfile.TemporaryDirectory(prefix="replog-tls-bench-") as work:
        figures = measure(args, Path(work))
    rows, pairs = results(figures), replog_over_kafka(figures)
    print("\n".join(report_lines(rows, pairs, args.records, args.record_size)))
    if args.json:
        document = {
            "records": args.records,
            "record_size": args.record_size,
            "runs": args.runs,
            "cpus": os.cpu_count(),
            "results": [asdict(row) for row in rows],
            "replog_over_kafka": pairs,
        }
        Path(args.json).write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
