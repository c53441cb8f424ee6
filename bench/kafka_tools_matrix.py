"""Kafka 4.4's command-line tools against a running replog cluster: one row per operation.

Each operation runs one of Kafka's tool classes (`java -cp '<libs>/*' org.apache.kafka.tools.X`,
the jars `bench/kafka/kafka.sh fetch` gets from Maven) and judges what it printed, not only its
exit status: several tools print an error and still exit 0. An operation that needs a feature
replog does not build (docs/not-built.md) names it in `needs`; its failure is expected and
reported as such, never hidden.

Operations run in order and some build on earlier ones (the topic `tools` is created first,
the consumer group `tools-group` commits before it is described). `unregister` stops node 3,
so it runs last. Used by `bench/kafka_ecosystem.py`.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kafka_tools_check import tool

TOOL_TIMEOUT_S = 120
TOPIC = "tools"
GROUP = "tools-group"
RECORDS = 300


@dataclass
class Cluster:
    """What the operations need to know of the cluster under test."""

    libs: Path
    bootstrap: str  # Kafka listeners
    controllers: str  # Kafka-protocol controller listeners ("" when the cluster has none)
    work: Path  # scratch files (reassignment plans, offsets JSON)
    stop_node: Callable[[int], None]  # stops one node for good (unregister's precondition)
    segment_file: Callable[[str, int], Path]  # a partition's first segment on some node


@dataclass
class Said:
    status: int
    out: str
    err: str

    @property
    def text(self) -> str:
        return (self.out + "\n" + self.err).strip()


def run_tool(cluster: Cluster, main_class: str, *args: str, stdin: str | None = None) -> Said:
    """One of Kafka's tools (`kafka_tools_check.tool`); a tool still running after
    TOOL_TIMEOUT_S is killed and says so (a tool retrying a refused request never exits)."""
    try:
        status, out, err = tool(
            cluster.libs, main_class, *args, stdin=stdin, timeout_s=TOOL_TIMEOUT_S
        )
    except subprocess.TimeoutExpired as expired:
        said = expired.stdout.decode() if isinstance(expired.stdout, bytes) else expired.stdout
        return Said(-1, said or "", f"still running after {TOOL_TIMEOUT_S} s: killed")
    return Said(status, out, err)


ERROR_WORDS = re.compile(r"\b(Error|ERROR|Exception|exception)\b")


def clean(said: Said, *expected: str) -> tuple[bool, str]:
    """Exit 0, no error or exception printed, and every expected pattern in the output."""
    missing = [p for p in expected if not re.search(p, said.text, re.MULTILINE)]
    error = ERROR_WORDS.search(said.text)
    ok = said.status == 0 and not missing and error is None
    if ok:
        return True, first_lines(said.out)
    why = [f"exit {said.status}"] if said.status != 0 else []
    why += [f"no /{p}/ in the output" for p in missing]
    if error is not None:
        line = next(x for x in said.text.splitlines() if ERROR_WORDS.search(x))
        why.append(f"said: {line.strip()[:200]}")
    return False, "; ".join(why) + (f" | {first_lines(said.text)}" if said.text else "")


def first_lines(text: str, lines: int = 2, width: int = 160) -> str:
    kept = [line.strip() for line in text.strip().splitlines() if line.strip()][:lines]
    return " / ".join(line[:width] for line in kept)


@dataclass
class Operation:
    tool: str  # the script's name in Kafka's bin/
    operation: str
    run: Callable[[Cluster], tuple[bool, str]]
    needs: str | None = None  # a feature of the "not built" list this operation needs


def topics(*args: str) -> Callable[[Cluster], Said]:
    return lambda c: run_tool(c, "TopicCommand", "--bootstrap-server", c.bootstrap, *args)


def topic_id(cluster: Cluster, topic: str) -> str:
    found = re.search(r"TopicId:\s*(\S+)", topics("--describe", "--topic", topic)(cluster).out)
    return found.group(1) if found else "none"


def describe_by_id(cluster: Cluster) -> tuple[bool, str]:
    wanted = topic_id(cluster, TOPIC)
    said = topics("--describe", "--topic-id", wanted)(cluster)
    return clean(said, rf"Topic: {TOPIC}\s+TopicId: {re.escape(wanted)}", r"Partition: 2")


def configs(*args: str) -> Callable[[Cluster], Said]:
    return lambda c: run_tool(c, "ConfigCommand", "--bootstrap-server", c.bootstrap, *args)


def features(*args: str) -> Callable[[Cluster], Said]:
    return lambda c: run_tool(c, "FeatureCommand", "--bootstrap-server", c.bootstrap, *args)


def groups(*args: str) -> Callable[[Cluster], Said]:
    return lambda c: run_tool(
        c, "consumer.group.ConsumerGroupCommand", "--bootstrap-server", c.bootstrap, *args
    )


def offsets_at(time_spec: str, expected: str | None) -> Callable[[Cluster], tuple[bool, str]]:
    """GetOffsetShell at `time_spec`: `expected` in its output, or (None) no offset printed,
    Kafka's answer (-1) for an offset that does not exist."""

    def check(cluster: Cluster) -> tuple[bool, str]:
        said = run_tool(
            cluster,
            "GetOffsetShell",
            "--bootstrap-server",
            cluster.bootstrap,
            "--topic",
            TOPIC,
            "--time",
            time_spec,
        )
        if expected is not None:
            return clean(said, expected)
        ok, why = clean(said)
        printed = [line for line in said.out.splitlines() if line.startswith(f"{TOPIC}:")]
        if ok and printed:
            return False, f"printed offsets: {first_lines(said.out)}"
        return ok, "nothing printed" if ok else why

    return check


def produce(cluster: Cluster) -> tuple[bool, str]:
    lines = "".join(f"k{i}:v{i}\n" for i in range(RECORDS))
    said = run_tool(
        cluster,
        "ConsoleProducer",
        "--bootstrap-server",
        cluster.bootstrap,
        "--topic",
        TOPIC,
        "--reader-property",
        "parse.key=true",
        "--reader-property",
        "key.separator=:",
        stdin=lines,
    )
    ok, why = clean(said)
    return ok, f"{RECORDS} lines sent" if ok else why


def consume(cluster: Cluster) -> tuple[bool, str]:
    said = run_tool(
        cluster,
        "consumer.ConsoleConsumer",
        "--bootstrap-server",
        cluster.bootstrap,
        "--topic",
        TOPIC,
        "--from-beginning",
        "--max-messages",
        str(RECORDS),
        "--group",
        GROUP,
        "--timeout-ms",
        "30000",
    )
    got = [line for line in said.out.splitlines() if line.startswith("v")]
    ok = said.status == 0 and sorted(got) == sorted(f"v{i}" for i in range(RECORDS))
    return ok, f"{len(got)} of {RECORDS} records read" + ("" if ok else f" | {said.err[-300:]}")


def delete_records(cluster: Cluster) -> tuple[bool, str]:
    plan = cluster.work / "delete-records.json"
    plan.write_text(
        json.dumps({"version": 1, "partitions": [{"topic": TOPIC, "partition": 0, "offset": 1}]})
    )
    said = run_tool(
        cluster,
        "DeleteRecordsCommand",
        "--bootstrap-server",
        cluster.bootstrap,
        "--offset-json-file",
        str(plan),
    )
    return clean(said, rf"partition: {TOPIC}-0\s+low_watermark: 1")


def reassign(action: str, *more: str) -> Callable[[Cluster], tuple[bool, str]]:
    def check(cluster: Cluster) -> tuple[bool, str]:
        plan = cluster.work / "reassign.json"
        plan.write_text(
            json.dumps(
                {
                    "version": 1,
                    "partitions": [
                        {
                            "topic": "moved",
                            "partition": 0,
                            "replicas": [2, 3],
                            "log_dirs": ["any", "any"],
                        }
                    ],
                }
            )
        )
        said = run_tool(
            cluster,
            "reassign.ReassignPartitionsCommand",
            "--bootstrap-server",
            cluster.bootstrap,
            "--reassignment-json-file",
            str(plan),
            f"--{action}",
            *more,
        )
        if action == "execute":
            return clean(said, r"Successfully started partition reassignment")
        if action == "verify":
            return clean(said, r"Reassignment of partition moved-0 is (complete|completed)")
        return clean(said)

    return check


def reassign_wait(cluster: Cluster) -> tuple[bool, str]:
    """--verify until the move is done (it throttles at 1 MB/s; the topic holds a few KB)."""
    deadline = time.monotonic() + 60
    while True:
        ok, said = reassign("verify")(cluster)
        if ok or time.monotonic() > deadline:
            return ok, said
        time.sleep(1)


def quorum(bootstrap_flag: str, *what: str) -> Callable[[Cluster], tuple[bool, str]]:
    def check(cluster: Cluster) -> tuple[bool, str]:
        if bootstrap_flag == "--bootstrap-controller" and not cluster.controllers:
            return False, "the cluster names no Kafka-protocol controller listener"
        address = (
            cluster.controllers
            if bootstrap_flag == "--bootstrap-controller"
            else (cluster.bootstrap)
        )
        said = run_tool(
            cluster, "MetadataQuorumCommand", bootstrap_flag, address, "describe", *what
        )
        if what == ("--status",):
            return clean(said, r"LeaderId:\s+\d", r"HighWatermark:\s+\d+", r"CurrentVoters:")
        return clean(said, r"NodeId\s+DirectoryId\s+LogEndOffset\s+Lag", r"Leader")

    return check


def unregister(cluster: Cluster) -> tuple[bool, str]:
    cluster.stop_node(3)
    deadline = time.monotonic() + 60
    while True:
        said = run_tool(
            cluster,
            "ClusterTool",
            "unregister",
            "--bootstrap-server",
            cluster.bootstrap,
            "--id",
            "3",
        )
        ok, why = clean(said, r"Broker 3 is no longer registered")
        if ok or time.monotonic() > deadline:
            return ok, why
        time.sleep(2)  # the controller fences a stopped broker after its session times out


def dump_log(cluster: Cluster) -> tuple[bool, str]:
    segment = cluster.segment_file(TOPIC, 1)
    said = run_tool(cluster, "DumpLogSegments", "--files", str(segment), "--deep-iteration")
    return clean(said, r"baseOffset: \d+ lastOffset: \d+", r"crc: \d+ isvalid: true")


def said_ok(
    make: Callable[[Cluster], Said], *expected: str
) -> Callable[[Cluster], tuple[bool, str]]:
    return lambda cluster: clean(make(cluster), *expected)


def operations() -> list[Operation]:
    """Every operation, in the order they run."""
    return [
        Operation(
            "kafka-broker-api-versions",
            "list every broker's API versions",
            said_ok(
                lambda c: run_tool(
                    c, "BrokerApiVersionsCommand", "--bootstrap-server", c.bootstrap
                ),
                r"Produce\(0\): \d+ to \d+",
            ),
        ),
        Operation(
            "kafka-cluster",
            "cluster-id",
            said_ok(
                lambda c: run_tool(
                    c, "ClusterTool", "cluster-id", "--bootstrap-server", c.bootstrap
                ),
                r"^Cluster ID: \S+$",
            ),
        ),
        Operation(
            "kafka-topics",
            "--create (3 partitions, RF 3, a config)",
            said_ok(
                topics(
                    "--create",
                    "--topic",
                    TOPIC,
                    "--partitions",
                    "3",
                    "--replication-factor",
                    "3",
                    "--config",
                    "retention.ms=86400000",
                ),
                r"Created topic",
            ),
        ),
        Operation(
            "kafka-topics",
            "--create a topic to reassign (RF 1 on node 1)",
            said_ok(
                topics("--create", "--topic", "moved", "--replica-assignment", "1"),
                r"Created topic",
            ),
        ),
        Operation("kafka-topics", "--list", said_ok(topics("--list"), rf"^{TOPIC}$")),
        Operation(
            "kafka-topics",
            "--describe --topic",
            said_ok(topics("--describe", "--topic", TOPIC), r"Partition: 2\s+Leader: \d"),
        ),
        Operation("kafka-topics", "--describe --topic-id", describe_by_id),
        Operation(
            "kafka-topics",
            "--alter --partitions 2 (from 1)",
            said_ok(topics("--alter", "--topic", "moved", "--partitions", "2")),
        ),
        Operation("kafka-console-producer", "produce keyed lines", produce),
        Operation("kafka-console-consumer", "consume from the beginning in a group", consume),
        Operation("kafka-get-offsets", "--time -1 (latest)", offsets_at("-1", rf"^{TOPIC}:0:\d+")),
        Operation("kafka-get-offsets", "--time -2 (earliest)", offsets_at("-2", rf"^{TOPIC}:0:0$")),
        Operation(
            "kafka-get-offsets", "--time -3 (max timestamp)", offsets_at("-3", rf"^{TOPIC}:0:\d+")
        ),
        Operation(
            "kafka-get-offsets", "--time -4 (earliest local)", offsets_at("-4", rf"^{TOPIC}:0:0$")
        ),
        Operation(
            "kafka-get-offsets",
            "--time -5 (latest tiered: none without tiered storage, prints nothing)",
            offsets_at("-5", None),
        ),
        Operation(
            "kafka-get-offsets",
            "--time -6 (earliest pending upload: none, prints nothing)",
            offsets_at("-6", None),
        ),
        Operation(
            "kafka-configs",
            "--describe a topic",
            said_ok(
                configs("--entity-type", "topics", "--entity-name", TOPIC, "--describe"),
                r"retention.ms=86400000",
            ),
        ),
        Operation(
            "kafka-configs",
            "--alter --add-config on a topic",
            said_ok(
                configs(
                    "--entity-type",
                    "topics",
                    "--entity-name",
                    TOPIC,
                    "--alter",
                    "--add-config",
                    "retention.ms=172800000",
                ),
                r"Completed updating config",
            ),
        ),
        Operation(
            "kafka-configs",
            "--alter --delete-config of an unset key",
            said_ok(
                configs(
                    "--entity-type",
                    "topics",
                    "--entity-name",
                    TOPIC,
                    "--alter",
                    "--delete-config",
                    "leader.replication.throttled.replicas",
                ),
                r"Completed updating config",
            ),
        ),
        Operation(
            "kafka-configs",
            "--describe --all a broker",
            said_ok(
                configs("--entity-type", "brokers", "--entity-name", "1", "--describe", "--all"),
                r"log.segment.bytes=",
            ),
        ),
        Operation(
            "kafka-configs",
            "--describe broker-loggers",
            said_ok(
                configs("--entity-type", "broker-loggers", "--entity-name", "1", "--describe"),
                r"root=",
            ),
        ),
        Operation(
            "kafka-configs",
            "--alter broker-loggers (a level at run time)",
            said_ok(
                configs(
                    "--entity-type",
                    "broker-loggers",
                    "--entity-name",
                    "1",
                    "--alter",
                    "--add-config",
                    "replog=DEBUG",
                ),
                r"Completed updating config",
            ),
        ),
        Operation("kafka-consumer-groups", "--list", said_ok(groups("--list"), rf"^{GROUP}$")),
        Operation(
            "kafka-consumer-groups",
            "--describe --group",
            said_ok(
                groups("--describe", "--group", GROUP), rf"{GROUP}\s+{TOPIC}\s+0\s+\d+\s+\d+\s+0"
            ),
        ),
        Operation(
            "kafka-consumer-groups",
            "--reset-offsets --to-earliest --execute",
            said_ok(
                groups(
                    "--reset-offsets",
                    "--group",
                    GROUP,
                    "--topic",
                    TOPIC,
                    "--to-earliest",
                    "--execute",
                ),
                rf"{GROUP}\s+{TOPIC}\s+0\s+0",
            ),
        ),
        Operation(
            "kafka-consumer-groups",
            "--delete-offsets",
            said_ok(
                groups("--delete-offsets", "--group", GROUP, "--topic", f"{TOPIC}:2"),
                rf"{TOPIC}\s+2\s+Successful",
            ),
        ),
        Operation("kafka-delete-records", "delete up to offset 1", delete_records),
        Operation(
            "kafka-leader-election",
            "--election-type preferred --all-topic-partitions",
            said_ok(
                lambda c: run_tool(
                    c,
                    "LeaderElectionCommand",
                    "--bootstrap-server",
                    c.bootstrap,
                    "--election-type",
                    "preferred",
                    "--all-topic-partitions",
                )
            ),
        ),
        Operation(
            "kafka-reassign-partitions",
            "--execute --throttle 1000000",
            reassign("execute", "--throttle", "1000000"),
        ),
        Operation(
            "kafka-reassign-partitions",
            "--verify (until complete; clears the throttle)",
            reassign_wait,
        ),
        Operation("kafka-reassign-partitions", "--cancel after completion", reassign("cancel")),
        Operation(
            "kafka-log-dirs",
            "--describe",
            said_ok(
                lambda c: run_tool(
                    c, "LogDirsCommand", "--bootstrap-server", c.bootstrap, "--describe"
                ),
                r'"partition":"tools-0"',
            ),
        ),
        Operation("kafka-dump-log", "--deep-iteration on a replog segment", dump_log),
        Operation(
            "kafka-transactions",
            "describe-producers on a follower",
            lambda c: describe_producers_on_follower(c),
        ),
        Operation(
            "kafka-transactions",
            "list",
            said_ok(
                lambda c: run_tool(
                    c, "TransactionsCommand", "--bootstrap-server", c.bootstrap, "list"
                ),
                r"TransactionalId",
            ),
            needs="transactions",
        ),
        Operation(
            "kafka-features",
            "describe",
            said_ok(
                lambda c: run_tool(
                    c, "FeatureCommand", "--bootstrap-server", c.bootstrap, "describe"
                ),
                r"Feature: metadata.version\s+SupportedMinVersion",
            ),
        ),
        Operation(
            "kafka-features",
            "upgrade --release-version 3.6-IV0 --dry-run",
            said_ok(
                features("upgrade", "--release-version", "3.6-IV0", "--dry-run"),
                r"^metadata.version can be upgraded to 12\.$",
            ),
        ),
        Operation(
            "kafka-features",
            "upgrade --feature transaction.version=2",
            said_ok(
                features("upgrade", "--feature", "transaction.version=2"),
                r"^transaction.version was upgraded to 2\.$",
            ),
        ),
        Operation(
            "kafka-metadata-quorum",
            "--bootstrap-server describe --status",
            quorum("--bootstrap-server", "--status"),
        ),
        Operation(
            "kafka-metadata-quorum",
            "--bootstrap-server describe --replication",
            quorum("--bootstrap-server", "--replication"),
        ),
        Operation(
            "kafka-metadata-quorum",
            "--bootstrap-controller describe --status",
            quorum("--bootstrap-controller", "--status"),
        ),
        Operation(
            "kafka-metadata-quorum",
            "--bootstrap-controller describe --replication",
            quorum("--bootstrap-controller", "--replication"),
        ),
        Operation(
            "kafka-features",
            "--bootstrap-controller describe",
            lambda c: (
                (False, "the cluster names no Kafka-protocol controller listener")
                if not c.controllers
                else clean(
                    run_tool(
                        c, "FeatureCommand", "--bootstrap-controller", c.controllers, "describe"
                    ),
                    r"Feature: metadata.version",
                )
            ),
        ),
        Operation("kafka-topics", "--delete", said_ok(topics("--delete", "--topic", "moved"))),
        Operation(
            "kafka-consumer-groups",
            "--delete --group",
            said_ok(groups("--delete", "--group", GROUP), r"Deletion of requested"),
        ),
        Operation("kafka-cluster", "unregister --id 3 (node 3 stopped first)", unregister),
    ]


def describe_producers_on_follower(cluster: Cluster) -> tuple[bool, str]:
    said = topics("--describe", "--topic", TOPIC)(cluster)
    found = re.search(r"Partition: 0\s+Leader: (\d+)\s+Replicas: ([\d,]+)", said.out)
    if found is None:
        return False, f"could not read partition 0's replicas: {first_lines(said.text)}"
    follower = next(r for r in found.group(2).split(",") if r != found.group(1))
    said = run_tool(
        cluster,
        "TransactionsCommand",
        "--bootstrap-server",
        cluster.bootstrap,
        "describe-producers",
        "--topic",
        TOPIC,
        "--partition",
        "0",
        "--broker-id",
        follower,
    )
    return clean(said, r"ProducerId\s+ProducerEpoch")
