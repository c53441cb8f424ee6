"""Produce throughput over TLS and SASL_SSL against plaintext, in one run (issue 81's goal: at
most 15% lower).

Starts three local 3-node clusters side by side (`replog cluster start --security plaintext`,
`ssl` and `sasl_ssl`, on base ports P, P + 10 and P + 20), each with a topic of 3 partitions,
replication factor 3 and `min.insync.replicas=2`, then runs the same produce workload against
them in turn (plaintext, ssl, sasl_ssl, plaintext, ...), `--runs` times each, so drift in the
machine's load falls on all three alike:

- `--client replog` (default): `replog perf produce` (replog's blocking Producer, acks=all,
  idempotent), `--records` records of `--record-size` bytes (1 KiB), unthrottled, with the
  cluster's client.properties as `--command-config` (none for plaintext);
- `--client kafka`: Kafka 4.4's ProducerPerformance (the Java client, acks=all) with the
  cluster's client-java.properties, as bench/kafka_tools_check.py runs Kafka's tools.

It prints, per mode, each run's records/s and their min, median and max, then each secured
mode's median over plaintext's (the ratio; 0.85 is the goal's bound); `--json FILE` writes
the same figures. The nodes' internal links are whatever `cluster start` makes them (mutual
TLS under ssl and sasl_ssl), so the ratio is the TLS and SASL cost of the Kafka listeners and
of the links inside the cluster together.

    .venv/bin/python bench/tls_produce.py [--runs 5] [--records 100000] [--base-port 24100]

Bench only (CI never runs it). Every cluster is stopped at the end, also on failure.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from replog_cli import KAFKA_PORT_OFFSET, replog_cli

MODES = ("plaintext", "ssl", "sasl_ssl")
TOPIC = "tls-bench"
PARTITIONS = 3
GOAL_RATIO = 0.85  # at most 15% lower than plaintext
PORT_STEP = 10  # the clusters' base ports: P, P + 10, P + 20 (3 nodes each)


@dataclass
class Cluster:
    mode: str
    data_dir: Path
    bootstrap: str

    @property
    def client_config(self) -> Path | None:
        return None if self.mode == "plaintext" else self.data_dir / "client.properties"

    @property
    def java_config(self) -> Path | None:
        return None if self.mode == "plaintext" else self.data_dir / "client-java.properties"


@dataclass
class Figures:
    mode: str
    runs: list[float] = field(default_factory=list)  # records/s of each run

    def summary(self) -> dict[str, float]:
        return {
            "min": min(self.runs),
            "median": statistics.median(self.runs),
            "max": max(self.runs),
        }


@contextmanager
def started(mode: str, work: Path, base_port: int) -> Iterator[Cluster]:
    """A 3-node cluster secured by `mode`, its topic made, stopped on exit."""
    data_dir = work / mode
    kafka = base_port + KAFKA_PORT_OFFSET
    replog_cli(
        "cluster", "start", "--data-dir", str(data_dir), "--base-port", str(base_port),
        "--kafka-base-port", str(kafka), "--security", mode,
    )  # fmt: skip
    try:
        cluster = Cluster(mode, data_dir, ",".join(f"127.0.0.1:{kafka + i}" for i in range(3)))
        replog_cli(
            "topics", "create", "--bootstrap-server", cluster.bootstrap, "--topic", TOPIC,
            "--partitions", str(PARTITIONS), "--replication-factor", "3", "--config",
            "min.insync.replicas=2", *_config_args(cluster.client_config),
        )  # fmt: skip
        yield cluster
    finally:
        replog_cli("cluster", "stop", "--data-dir", str(data_dir))


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
        raise RuntimeError(f"{cluster.mode}: {document['records']} of {records} records sent")
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
        raise RuntimeError(f"{cluster.mode}: ProducerPerformance said: {(final or err)[-800:]}")
    return float(final.split("records sent, ")[1].split(" records/sec")[0])


def measure(args: argparse.Namespace, work: Path) -> dict[str, Figures]:
    figures = {mode: Figures(mode) for mode in MODES}
    libs = None
    if args.client == "kafka":
        from kafka_tools_check import kafka_libs

        libs = kafka_libs()
    with ExitStack() as stack:
        clusters = [
            stack.enter_context(started(mode, work, args.base_port + i * PORT_STEP))
            for i, mode in enumerate(MODES)
        ]
        for cluster in clusters:  # one unmeasured run each: connections, JIT, page cache
            run_once(args, cluster, libs, max(args.records // 10, 1000))
        for run in range(args.runs):
            for cluster in clusters:
                rate = run_once(args, cluster, libs, args.records)
                figures[cluster.mode].runs.append(rate)
                print(f"run {run + 1} {cluster.mode:<9} {rate:10.0f} records/s", flush=True)
    return figures


def run_once(args: argparse.Namespace, cluster: Cluster, libs: Path | None, records: int) -> float:
    if libs is not None:
        return kafka_run(cluster, records, args.record_size, libs)
    return replog_run(cluster, records, args.record_size)


def report(figures: dict[str, Figures], args: argparse.Namespace) -> dict[str, object]:
    plain = figures["plaintext"].summary()["median"]
    document: dict[str, object] = {
        "client": args.client,
        "records": args.records,
        "record_size": args.record_size,
        "runs": args.runs,
        "cpus": os.cpu_count(),
        "modes": {},
    }
    modes: dict[str, object] = {}
    print(f"\n{args.client} client, {args.records} records of {args.record_size} B, acks=all, RF 3")
    print(f"{'mode':<10} {'min':>10} {'median':>10} {'max':>10}  ratio (median / plaintext)")
    for mode, found in figures.items():
        summary = found.summary()
        ratio = summary["median"] / plain
        modes[mode] = {**summary, "runs": found.runs, "ratio": ratio}
        goal = (
            "" if mode == "plaintext" else ("  goal met" if ratio >= GOAL_RATIO else "  BELOW GOAL")
        )
        print(
            f"{mode:<10} {summary['min']:>10.0f} {summary['median']:>10.0f} "
            f"{summary['max']:>10.0f}  {ratio:.3f}{goal}"
        )
    document["modes"] = modes
    return document


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="measured runs per mode (default 5)")
    parser.add_argument("--records", type=int, default=100_000, help="records per run")
    parser.add_argument("--record-size", type=int, default=1024, help="bytes per record")
    parser.add_argument("--base-port", type=int, default=24100, help="the first cluster's")
    parser.add_argument("--client", choices=("replog", "kafka"), default="replog")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.records < 1:
        parser.error("--runs and --records must be at least 1")
    with tempfile.TemporaryDirectory(prefix="replog-tls-bench-") as work:
        figures = measure(args, Path(work))
    document = report(figures, args)
    if args.json:
        Path(args.json).write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
