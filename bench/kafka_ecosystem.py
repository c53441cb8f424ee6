"""Kafka's own programs against replog: the compatibility matrix of docs/kafka-protocol.md.

Fetches Apache Kafka 4.4's jars (Maven, through `bench/kafka/kafka.sh fetch`) and franz-go's
module (the Go module proxy; its `pkg/kgo` tests built once into a binary), starts local 3-node
replog clusters in a temporary directory, and runs:

- Kafka's command-line tools, one row per operation (`bench/kafka_tools_matrix.py`);
- Kafka's perf and verifiable producers and consumers (`bench/kafka_tools_check.py`);
- franz-go's integration tests, on a cluster of their own (`bench/franz_go_check.py`), its
  SCRAM tests on a one-node cluster with a SASL listener 70 ports above it
  (`bench/franz_go_sasl.py`);
- Kafka Connect and Kafka Streams applications, unchanged, their compacted topics cleaned
  (`bench/kafka_connect_check.py`, `bench/kafka_streams_check.py`), each on a cluster of its
  own within 20 ports of base + 20 and base + 50 (Connect's REST listener at base + 40).

It prints each table in Markdown (`--markdown FILE` also writes them there) and exits 1 when
anything failed that is not explained by a feature of the "not built" list
(docs/not-built.md), which is named in the row.

    .venv/bin/python bench/kafka_ecosystem.py [--only tools|franz-go|connect|streams]
        [--base-port 23300]

Bench only: it needs Java, Maven and Go (Go for franz-go only; CI never runs it). The franz-go
run takes 10-20 minutes on two cores, Connect and Streams 1-3 minutes each.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import franz_go_check
import franz_go_sasl
import kafka_apps
import kafka_connect_check
import kafka_streams_check
import kafka_tools_check
import kafka_tools_matrix
from replog_cli import KAFKA_PORT_OFFSET, replog_cli, running_cluster

# franz-go's SCRAM tests' one-node cluster, 70 ports above franz-go's own: clear of each other
# cluster of the run (base + 0, 10, 20 and 50, each taking its first ports and those 100, 200
# and 300 above them).
SASL_PORT_OFFSET = 70

# The application checks, in the order they run: (the check, its lines, its base port's
# offset from --base-port).
APPS = {
    "connect": (kafka_connect_check.run, 200, 20),
    "streams": (kafka_streams_check.run, 500, 50),
}


def controller_listeners(data_dir: str) -> str:
    """The cluster's Kafka-protocol controller listeners, as `replog cluster status --json`
    names them ("" when it names none)."""
    status = json.loads(replog_cli("cluster", "status", "--data-dir", data_dir, "--json"))
    found = [
        node.get("kafka_controller")
        for node in status["nodes"]
        if "controller" in node.get("roles", ())
    ]
    return ",".join(address for address in found if address)


def segment_finder(data_dir: str) -> Callable[[str, int], Path]:
    def first_segment(topic: str, node_id: int) -> Path:
        partition_dir = Path(data_dir) / f"node-{node_id}" / "data" / f"{topic}-0"
        return min(partition_dir.glob("*.log"))

    return first_segment


def tools_rows(libs: Path, base_port: int, records: int, work: Path) -> tuple[list[str], bool]:
    data_dir = str(work / "tools-cluster")
    bootstrap = ",".join(f"127.0.0.1:{base_port + KAFKA_PORT_OFFSET + i}" for i in range(3))
    rows = ["| tool | operation | result |", "| --- | --- | --- |"]
    all_ok = True
    with running_cluster(data_dir, base_port) as cluster_bootstrap:
        for check in kafka_tools_check.checks_on(libs, cluster_bootstrap, bootstrap, records):
            tool, _, operation = check.tool.partition(" ")
            rows.append(row(tool, operation or "run", check.ok, check.said, None))
            all_ok &= check.ok
            print(rows[-1], flush=True)
        cluster = kafka_tools_matrix.Cluster(
            libs=libs,
            bootstrap=bootstrap,
            controllers=controller_listeners(data_dir),
            work=work,
            stop_node=lambda node_id: print(
                replog_cli("cluster", "kill", str(node_id), "--data-dir", data_dir), end=""
            ),
            segment_file=segment_finder(data_dir),
        )
        for operation in kafka_tools_matrix.operations():
            try:
                ok, said = operation.run(cluster)
            except Exception as failure:  # a row that raised is a failed row, not a stop
                ok, said = False, f"{type(failure).__name__}: {failure}"
            rows.append(row(operation.tool, operation.operation, ok, said, operation.needs))
            all_ok &= ok or operation.needs is not None
            print(rows[-1], flush=True)
    return rows, all_ok


def franz_go_rows(base_port: int, work: Path) -> tuple[list[str], bool]:
    source, binary = franz_go_check.fetch_and_build()
    data_dir = str(work / "franz-go-cluster")
    seeds = ",".join(f"127.0.0.1:{base_port + KAFKA_PORT_OFFSET + i}" for i in range(3))
    log = work / "franz-go.log"
    with running_cluster(data_dir, base_port, "--override", "group.initial.rebalance.delay.ms=0"):
        results = franz_go_check.run(binary, source, seeds, log)
    shutil.copy(log, Path(tempfile.gettempdir()) / "replog-franz-go.log")
    # The SCRAM tests skipped above (no SASL listener named) run where there is one.
    sasl_work = work / "franz-go-sasl"
    sasl_work.mkdir()
    try:
        with_sasl = franz_go_sasl.run(binary, source, base_port + SASL_PORT_OFFSET, sasl_work)
        by_name = {result.name: result for result in franz_go_sasl.per_test(with_sasl)}
    except (RuntimeError, OSError, subprocess.SubprocessError) as failure:
        said = f"the SASL cluster failed: {type(failure).__name__}: {failure}"
        by_name = {
            name: franz_go_check.TestResult(name, "FAIL", said, None)
            for name in franz_go_sasl.TESTS
        }
    results = [by_name.get(result.name, result) for result in results]
    rows = [f"| franz-go {franz_go_check.VERSION} test | result |", "| --- | --- |"]
    all_ok = True
    for result in results:
        ok = result.outcome == "PASS"
        verdict = result.outcome.lower() if not result.said else f"{result.outcome.lower()}: "
        if result.said:
            verdict += result.said
        if result.needs is not None and not ok:
            verdict = f"needs {result.needs} (not built): {verdict}"
        rows.append(f"| {result.name} | {escape(verdict)} |")
        all_ok &= ok or result.needs is not None
    passed = sum(r.outcome == "PASS" for r in results)
    rows.append(f"| {passed} of {len(results)} passed | |")
    return rows, all_ok


def app_rows(app: str, base_port: int, work: Path) -> tuple[list[str], bool]:
    """The rows of the Kafka `app` check (`APPS`), run on a cluster of its own."""
    run, lines, offset = APPS[app]
    scratch = work / app
    scratch.mkdir()
    try:
        results = run(kafka_apps.app_libs(app), base_port + offset, lines, scratch)
    except (RuntimeError, TimeoutError, OSError) as failure:
        results = [("run", False, f"{type(failure).__name__}: {failure}")]
    rows = [f"| Kafka {app.capitalize()} check | result |", "| --- | --- |"]
    for name, ok, said in results:
        rows.append(f"| {escape(name)} | {escape(('ok: ' if ok else 'FAIL: ') + said)} |")
    return rows, all(ok for _, ok, _ in results)


def row(tool: str, operation: str, ok: bool, said: str, needs: str | None) -> str:
    if ok:
        result = "ok" + (f": {said}" if said else "")
    elif needs is not None:
        result = f"needs {needs} (not built): {said}"
    else:
        result = f"FAIL: {said}"
    return f"| {tool} | {escape(operation)} | {escape(result)} |"


def escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")[:400]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=("tools", "franz-go", *APPS))
    parser.add_argument("--base-port", type=int, default=23300)
    parser.add_argument("--records", type=int, default=20_000, help="for the perf tools")
    parser.add_argument("--markdown", type=Path, help="also write the tables to this file")
    args = parser.parse_args(argv)
    for program in ("java", "go") if args.only in (None, "franz-go") else ("java",):
        if shutil.which(program) is None:
            print(f"kafka_ecosystem: needs {program} on PATH", file=sys.stderr)
            return 1
    tables: list[list[str]] = []
    all_ok = True
    with tempfile.TemporaryDirectory(prefix="replog-kafka-ecosystem-") as scratch:
        work = Path(scratch)
        if args.only in (None, "tools"):
            libs = kafka_tools_check.kafka_libs()
            rows, ok = tools_rows(libs, args.base_port, args.records, work)
            tables.append(rows)
            all_ok &= ok
        if args.only in (None, "franz-go"):
            rows, ok = franz_go_rows(args.base_port + 10, work)
            tables.append(rows)
            all_ok &= ok
        for app in APPS:
            if args.only in (None, app):
                rows, ok = app_rows(app, args.base_port, work)
                tables.append(rows)
                all_ok &= ok
    text = "\n\n".join("\n".join(rows) for rows in tables) + "\n"
    print(text)
    if args.markdown is not None:
        args.markdown.write_text(text)
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
