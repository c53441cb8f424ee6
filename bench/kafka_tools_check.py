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
    .venv/bin/python bench/kafka_tools_check.py --security ssl|sasl_ssl [--base-port 23100]

With `--security ssl` or `sasl_ssl` the cluster is started so (`replog cluster start
--security`) and Kafka's admin and console tools use the client-java.properties it writes, as
it is (each tool's `--command-config`): kafka-topics creates and lists a topic,
kafka-console-producer and -consumer write and read it back; under sasl_ssl also kafka-configs
makes a SCRAM user, which kafka-console-producer is refused as until kafka-acls (`--producer`)
grants it, and kafka-acls `--list` shows the ACLs.

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


SECURE_TOPIC = "secure"
USER = "carol"  # the SCRAM user the sasl_ssl checks make and grant
USER_PASSWORD = "carol-scram-512"


def security_checks(libs: Path, base_port: int, security: str, work: Path) -> list[Check]:
    """Kafka's tools with the client-java.properties of a `--security` cluster (module doc)."""
    data_dir = work / "cluster"
    with running_cluster(str(data_dir), base_port, "--security", security) as bootstrap:
        java = str(data_dir / "client-java.properties")
        checks = [
            _tool_check(
                libs, "kafka-topics --create", "Created topic", "TopicCommand",
                "--bootstrap-server", bootstrap, "--command-config", java, "--create",
                "--topic", SECURE_TOPIC, "--partitions", str(PARTITIONS),
                "--replication-factor", "3",
            ),
            _tool_check(
                libs, "kafka-topics --list", SECURE_TOPIC, "TopicCommand",
                "--bootstrap-server", bootstrap, "--command-config", java, "--list",
            ),
            _console_round_trip(libs, bootstrap, java, "admin" if security == "sasl_ssl" else ""),
        ]  # fmt: skip
        if security == "sasl_ssl":
            checks += _acl_checks(libs, bootstrap, java, work)
    return checks


def _tool_check(libs: Path, name: str, expected: str, main_class: str, *args: str) -> Check:
    status, out, err = tool(libs, main_class, *args)
    ok = status == 0 and expected in out
    return Check(name, ok, (out.strip().splitlines() or [""])[-1] if ok else (out + err)[-500:])


def _produce(libs: Path, bootstrap: str, config: str, lines: list[str]) -> tuple[int, str]:
    status, out, err = tool(
        libs, "ConsoleProducer", "--bootstrap-server", bootstrap, "--topic", SECURE_TOPIC,
        "--command-config", config, "--command-property", "max.block.ms=15000",
        stdin="".join(f"{line}\n" for line in lines), timeout_s=60,
    )  # fmt: skip
    return status, out + err


def _console_round_trip(libs: Path, bootstrap: str, java: str, who: str) -> Check:
    lines = [f"record-{i}" for i in range(100)]
    status, said = _produce(libs, bootstrap, java, lines)
    if status != 0:
        return Check("kafka-console-producer, kafka-console-consumer", False, said[-500:])
    status, out, err = tool(
        libs, "consumer.ConsoleConsumer", "--bootstrap-server", bootstrap, "--topic",
        SECURE_TOPIC, "--command-config", java, "--from-beginning", "--max-messages",
        str(len(lines)), "--group", "secure-readers", "--timeout-ms", "30000",
    )  # fmt: skip
    read = sorted(line for line in out.splitlines() if line.startswith("record-"))
    ok = status == 0 and read == sorted(lines)
    as_whom = f" as {who}" if who else ""
    said = f"{len(read)} of {len(lines)} records written and read back{as_whom}"
    return Check("kafka-console-producer, kafka-console-consumer", ok, said if ok else err[-500:])


def _acl_checks(libs: Path, bootstrap: str, java: str, work: Path) -> list[Check]:
    """A SCRAM user made with kafka-configs, refused, granted with kafka-acls --producer, then
    allowed; kafka-acls --list shows the grant."""
    checks = [
        _tool_check(
            libs, "kafka-configs --alter --entity-type users", "Completed updating config",
            "ConfigCommand", "--bootstrap-server", bootstrap, "--command-config", java,
            "--alter", "--entity-type", "users", "--entity-name", USER, "--add-config",
            f"SCRAM-SHA-512=[iterations=8192,password={USER_PASSWORD}]",
        )
    ]  # fmt: skip
    admin = Path(java).read_text(encoding="utf-8")
    carol = work / "carol-java.properties"
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{USER}" password="{USER_PASSWORD}";'
    )
    carol.write_text(
        "".join(
            f"sasl.jaas.config={jaas}\n" if line.startswith("sasl.jaas.config=") else line + "\n"
            for line in admin.splitlines()
        ),
        encoding="utf-8",
    )
    status, said = _produce(libs, bootstrap, str(carol), ["refused"])
    refused = "TopicAuthorizationException" in said or "Not authorized to access" in said
    checks.append(
        Check(
            f"kafka-console-producer as {USER} without ACLs (refused)",
            refused,
            "refused: " + _authorization_line(said) if refused else said[-300:],
        )
    )
    checks.append(
        _tool_check(
            libs, "kafka-acls --add --producer", f"User:{USER}", "AclCommand",
            "--bootstrap-server", bootstrap, "--command-config", java, "--add",
            "--allow-principal", f"User:{USER}", "--producer", "--topic", SECURE_TOPIC,
        )
    )  # fmt: skip
    checks.append(
        _tool_check(
            libs, "kafka-acls --list", "operation=WRITE", "AclCommand", "--bootstrap-server",
            bootstrap, "--command-config", java, "--list", "--topic", SECURE_TOPIC,
        )
    )  # fmt: skip
    status, said = _produce(libs, bootstrap, str(carol), ["allowed"])
    checks.append(
        Check(
            f"kafka-console-producer as {USER} after kafka-acls --add",
            status == 0 and "Exception" not in said and "authorization failed" not in said.lower(),
            "1 record written" if status == 0 else said[-500:],
        )
    )
    return checks


def _authorization_line(said: str) -> str:
    return next((line for line in said.splitlines() if "uthoriz" in line), said[-200:])[-200:]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--base-port", type=int, default=23100)
    parser.add_argument(
        "--security",
        choices=("plaintext", "ssl", "sasl_ssl"),
        default="plaintext",
        help="start the cluster so and check Kafka's admin and console tools with its "
        "client-java.properties (plaintext: the perf and verifiable tools)",
    )
    args = parser.parse_args(argv)
    if shutil.which("java") is None:
        print("kafka_tools_check: needs java on PATH (Kafka's tools are Java)", file=sys.stderr)
        return 1
    libs = kafka_libs()
    with tempfile.TemporaryDirectory(prefix="replog-kafka-tools-") as work:
        if args.security == "plaintext":
            checks = run(libs, args.base_port, args.records, Path(work))
        else:
            checks = security_checks(libs, args.base_port, args.security, Path(work))
    width = max(len(c.tool) for c in checks)
    for check in checks:
        print(f"{'ok  ' if check.ok else 'FAIL'} {check.tool:<{width}}  {check.said}")
    return 0 if all(c.ok for c in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
