"""Apache Kafka's own client tools against replog's Kafka listener: a compatibility check.

Starts a local 3-node replog cluster (`replog cluster start`, in a temporary directory), then
runs Kafka's producer and consumer perf tools and its verifiable producer and consumer (the
Java client, from the jars `bench/kafka/kafka.sh fetch` puts in Maven's cache) against it, and
checks what each says:

- `ProducerPerformance` (kafka-producer-perf-test, acks=all, idempotent as the Java client is
  by default): every record sent;
- `ConsumerPerformance` (kafka-consumer-perf-test, a classic consumer group): every record
  consumed, and the rebalance time it measured;
- `VerifiableProducer` (kafka-verifiable-producer, acks=-1): every record acknowledged;
- `VerifiableConsumer` (kafka-verifiable-consumer, a classic group, auto commit off): every
  record consumed once, the partitions assigned, offsets committed;
- `VerifiableConsumer --group-protocol consumer` (KIP-848, ConsumerGroupHeartbeat): the same
  checks as the classic group.

    .venv/bin/python bench/kafka_tools_check.py [--records 20000] [--base-port 23100]

Bench only: it needs Maven (CI never runs it). Exit status 1 when any check fails. The figures
it prints (records/s) are the Java tools' own and move with the machine's load; the check is
the point, not the speed (`replog bench --systems replog-kafka,kafka` measures speed).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from replog_cli import KAFKA_PORT_OFFSET, create_topic, running_cluster

HERE = Path(__file__).resolve().parent
KAFKA_SH = HERE / "kafka" / "kafka.sh"
TOOL_TIMEOUT_S = 180
PARTITIONS = 3


@dataclass
class Check:
    tool: str
    ok: bool
    said: str


def kafka_libs() -> Path:
    """Kafka's jars (fetched with Maven once: bench/kafka/kafka.sh)."""
    subprocess.run(["bash", str(KAFKA_SH), "fetch"], check=True, capture_output=True)
    version = os.environ.get("KAFKA_VERSION", "4.4.0")
    cache = os.environ.get("KAFKA_CACHE", str(Path.home() / f".cache/replog-bench/kafka-{version}"))
    return Path(cache) / "libs"


def tool(
    libs: Path,
    main_class: str,
    *args: str,
    stdin: str | None = None,
    timeout_s: float = TOOL_TIMEOUT_S,
) -> tuple[int, str, str]:
    """Run one of Kafka's tools (`stdin` its input); its exit status, stdout and stderr (SLF4J
    noise dropped). Raises subprocess.TimeoutExpired after `timeout_s`."""
    done = subprocess.run(
        ["java", "-Xmx256m", "-cp", f"{libs}/*", f"org.apache.kafka.tools.{main_class}", *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=timeout_s,
    )
    stderr = "\n".join(line for line in done.stderr.splitlines() if "SLF4J" not in line)
    return done.returncode, done.stdout, stderr


def events(stdout: str) -> list[dict[str, object]]:
    """The JSON lines a verifiable tool printed."""
    found = []
    for line in stdout.splitlines():
        if line.startswith("{"):
            found.append(json.loads(line))
    return found


def producer_perf(libs: Path, bootstrap: str, records: int) -> Check:
    status, out, err = tool(
        libs,
        "ProducerPerformance",
        "--topic",
        "perf",
        "--num-records",
        str(records),
        "--record-size",
        "100",
        "--throughput",
        "-1",
        "--command-property",  # one flag, many values: a second flag would replace the first
        f"bootstrap.servers={bootstrap}",
        "acks=all",
    )
    final = out.strip().splitlines()[-1] if out.strip() else err[-500:]
    sent = re.match(r"(\d+) records sent", final)
    ok = status == 0 and sent is not None and int(sent.group(1)) == records
    return Check("kafka-producer-perf-test (acks=all)", ok, final)


def consumer_perf(libs: Path, bootstrap: str, records: int) -> Check:
    status, out, err = tool(
        libs,
        "ConsumerPerformance",
        "--bootstrap-server",
        bootstrap,
        "--topic",
        "perf",
        "--num-records",
        str(records),
        "--timeout",
        "60000",
    )
    lines = out.strip().splitlines()
    header = next((i for i, line in enumerate(lines) if line.startswith("start.time")), None)
    if status != 0 or header is None or header + 1 >= len(lines):
        return Check("kafka-consumer-perf-test (classic group)", False, (out + err)[-500:])
    row = dict(zip(lines[header].split(", "), lines[header + 1].split(", "), strict=False))
    consumed = int(row.get("data.consumed.in.nMsg", "0"))
    said = (
        f"{consumed} records, {float(row.get('nMsg.sec', '0')):.0f} records/s, rebalance "
        f"{row.get('rebalance.time.ms')} ms"
    )
    return Check("kafka-consumer-perf-test (classic group)", consumed == records, said)


def verifiable_producer(libs: Path, bootstrap: str, records: int) -> Check:
    status, out, err = tool(
        libs,
        "VerifiableProducer",
        "--bootstrap-server",
        bootstrap,
        "--topic",
        "verifiable",
        "--max-messages",
        str(records),
        "--acks",
        "-1",
    )
    data = [e for e in events(out) if e.get("name") == "tool_data"]
    errors = [e for e in events(out) if e.get("name") == "producer_send_error"]
    if status != 0 or not data:
        return Check("kafka-verifiable-producer (acks=-1)", False, (out + err)[-500:])
    sent, acked = data[-1]["sent"], data[-1]["acked"]
    ok = sent == acked == records and not errors
    return Check(
        "kafka-verifiable-producer (acks=-1)",
        ok,
        f"{sent} sent, {acked} acked, {len(errors)} errors",
    )


def run_verifiable_consumer(
    libs: Path, bootstrap: str, group: str, records: int, *more: str
) -> tuple[int, str, str]:
    return tool(
        libs,
        "VerifiableConsumer",
        "--bootstrap-server",
        bootstrap,
        "--topic",
        "verifiable",
        "--group-id",
        group,
        "--max-messages",
        str(records),
        *more,
    )


def verifiable_consumer(
    libs: Path, bootstrap: str, records: int, group: str, name: str, *more: str
) -> Check:
    status, out, err = run_verifiable_consumer(libs, bootstrap, group, records, *more)
    seen = events(out)
    consumed: set[tuple[int, int]] = set()
    duplicates = 0
    for event in seen:
        if event.get("name") != "records_consumed":
            continue
        for part in event["partitions"]:  # type: ignore[attr-defined]
            for offset in range(part["minOffset"], part["maxOffset"] + 1):
                key = (part["partition"], offset)
                duplicates += key in consumed
                consumed.add(key)
    assigned = [e for e in seen if e.get("name") == "partitions_assigned"]
    commits = [e for e in seen if e.get("name") == "offsets_committed"]
    failed_commits = [e for e in commits if not e.get("success", False)]
    ok = (
        status == 0
        and len(consumed) == records
        and duplicates == 0
        and bool(assigned)
        and bool(commits)
        and not failed_commits
    )
    said = (
        f"{len(consumed)} records, {duplicates} twice, {len(assigned)} assignments, "
        f"{len(commits)} commits ({len(failed_commits)} failed)"
    )
    return Check(name, ok, said if seen else err[-500:])


def run(libs: Path, base_port: int, records: int, work: Path) -> list[Check]:
    with running_cluster(str(work / "cluster"), base_port) as cluster_bootstrap:
        bootstrap = ",".join(f"127.0.0.1:{base_port + KAFKA_PORT_OFFSET + i}" for i in range(3))
        return checks_on(libs, cluster_bootstrap, bootstrap, records)


def checks_on(libs: Path, cluster_bootstrap: str, bootstrap: str, records: int) -> list[Check]:
    """Every check against a running cluster (its topics `perf` and `verifiable` made here)."""
    for topic in ("perf", "verifiable"):
        create_topic(cluster_bootstrap, topic, PARTITIONS)
    checks = [producer_perf(libs, bootstrap, records)]
    checks.append(consumer_perf(libs, bootstrap, records))
    verifiable = max(records // 10, 100)
    checks.append(verifiable_producer(libs, bootstrap, verifiable))
    checks.append(
        verifiable_consumer(
            libs,
            bootstrap,
            verifiable,
            "verifiable-group",
            "kafka-verifiable-consumer (classic group)",
        )
    )
    checks.append(
        verifiable_consumer(
            libs,
            bootstrap,
            verifiable,
            "kip-848-group",
            "kafka-verifiable-consumer --group-protocol consumer",
            "--group-protocol",
            "consumer",
        )
    )
    return checks


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--base-port", type=int, default=23100)
    args = parser.parse_args(argv)
    if shutil.which("java") is None:
        print("kafka_tools_check: needs java on PATH (Kafka's tools are Java)", file=sys.stderr)
        return 1
    libs = kafka_libs()
    with tempfile.TemporaryDirectory(prefix="replog-kafka-tools-") as work:
        checks = run(libs, args.base_port, args.records, Path(work))
    width = max(len(c.tool) for c in checks)
    for check in checks:
        print(f"{'ok  ' if check.ok else 'FAIL'} {check.tool:<{width}}  {check.said}")
    return 0 if all(c.ok for c in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
