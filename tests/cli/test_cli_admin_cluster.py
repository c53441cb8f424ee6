"""The admin commands of issue 9 against one real 3-node cluster (shared by the module):
`topics alter` and the min-ISR/override filters, `configs describe|alter`, `reassign
generate|execute|verify|cancel|list`, `elect-leaders` and `delete-records`: exit codes, Kafka's
lines and `--json`, what the cluster looks like afterwards, and bad inputs (an unknown topic,
bad JSON, a bad config key) as one stderr line with exit code 1.

Commands run in this process through `replog`'s `main` (as the script runs them), except one
run as a real process; the tests run in file order and build on each other's topics.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_runner import Outcome
from cli_runner import replog as run_replog
from client_cluster import ClientCluster, client_cluster

from replog import Admin, Producer
from replog.client.admin_results import OffsetSpec
from replog.client.records import TopicPartition
from tests.eventually import wait_until


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClientCluster]:
    with client_cluster(tmp_path_factory.mktemp("admin") / "cluster") as started:
        yield started


@pytest.fixture(autouse=True)
def no_debug(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REPLOG_DEBUG", raising=False)


def replog(cluster: ClientCluster, *args: str) -> Outcome:
    return run_replog(*args, "--data-dir", str(cluster.loopback.data_dir))


def ok(outcome: Outcome) -> str:
    assert (outcome.returncode, outcome.stderr) == (0, ""), outcome
    return outcome.stdout


def refused(outcome: Outcome, command: str, *fragments: str) -> str:
    assert outcome.returncode == 1, outcome
    lines = outcome.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"replog {command}: "), outcome.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def describe(cluster: ClientCluster, topic: str) -> dict[str, Any]:
    (found,) = json.loads(ok(replog(cluster, "topics", "describe", "--topic", topic, "--json")))[
        "topics"
    ]
    assert isinstance(found, dict)
    return found


def write(tmp_path: Path, name: str, document: Any) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return str(path)


# --- topics -------------------------------------------------------------------------------------


def test_topics_alter_and_the_new_describe_filters(cluster: ClientCluster) -> None:
    created = replog(cluster, "topics", "create", "--topic", "orders", "--partitions", "2",
                     "--replication-factor", "3", "--config", "min.insync.replicas=2")  # fmt: skip
    assert ok(created) == "Created topic orders.\n"
    assert ok(replog(cluster, "topics", "alter", "--topic", "orders", "--partitions", "3")) == (
        "Altered topic orders: 3 partitions.\n"
    )
    cluster.wait_for_leaders("orders", 3, 20)
    orders = describe(cluster, "orders")
    assert [p["partition"] for p in orders["partitions"]] == [0, 1, 2]
    assert all(len(p["replicas"]) == 3 == len(p["isr"]) for p in orders["partitions"])
    refused(
        replog(cluster, "topics", "alter", "--topic", "orders", "--partitions", "2"),
        "topics",
        "orders",
    )
    refused(
        replog(cluster, "topics", "alter", "--topic", "nope", "--partitions", "2"), "topics", "nope"
    )

    # RF 2 with min.insync.replicas 2: every partition is at its minimum ISR.
    ok(replog(cluster, "topics", "create", "--topic", "tight", "--partitions", "2",
              "--replication-factor", "2", "--config", "min.insync.replicas=2"))  # fmt: skip
    ok(replog(cluster, "topics", "create", "--topic", "plain", "--partitions", "1",
              "--replication-factor", "3"))  # fmt: skip
    cluster.wait_for_leaders("tight", 2, 20)
    at_min = ok(replog(cluster, "topics", "describe", "--at-min-isr-partitions")).splitlines()
    assert [line.split("\tLeader:")[0] for line in at_min] == [
        "\tTopic: tight\tPartition: 0",
        "\tTopic: tight\tPartition: 1",
    ]
    assert ok(replog(cluster, "topics", "describe", "--under-min-isr-partitions")) == ""
    as_json = json.loads(ok(replog(cluster, "topics", "describe", "--at-min-isr-partitions",
                                   "--json")))  # fmt: skip
    assert [(t["name"], len(t["partitions"])) for t in as_json["topics"]] == [("tight", 2)]
    overrides = ok(replog(cluster, "topics", "describe", "--topics-with-overrides")).splitlines()
    assert [line.split("\t")[0] for line in overrides] == ["Topic: orders", "Topic: tight"]
    assert overrides[0].endswith("Configs: min.insync.replicas=2")
    listed = ok(replog(cluster, "topics", "list", "--exclude-internal")).split()
    assert listed == ["orders", "plain", "tight"]


# --- configs ------------------------------------------------------------------------------------


def test_configs_describe_and_alter(cluster: ClientCluster) -> None:
    base = ("configs", "describe", "--entity-type", "topics", "--entity-name", "orders")
    assert ok(replog(cluster, *base)) == (
        "Dynamic configs for topic orders are:\n"
        "  min.insync.replicas=2 sensitive=false "
        "synonyms={DYNAMIC_TOPIC_CONFIG:min.insync.replicas=2}\n"
    )
    alter = ("configs", "alter", "--entity-type", "topics", "--entity-name", "orders")
    assert ok(replog(cluster, *alter, "--add-config",
                     "retention.ms=86400000,cleanup.policy=[compact,delete]")) == (
        "Completed updating config for topic orders.\n"
    )  # fmt: skip
    document = json.loads(ok(replog(cluster, *base, "--json")))
    (resource,) = document["resources"]
    assert (resource["entity_type"], resource["entity_name"]) == ("topics", "orders")
    assert {c["name"]: (c["value"], c["source"]) for c in resource["configs"]} == {
        "cleanup.policy": ("compact,delete", "DYNAMIC_TOPIC_CONFIG"),
        "min.insync.replicas": ("2", "DYNAMIC_TOPIC_CONFIG"),
        "retention.ms": ("86400000", "DYNAMIC_TOPIC_CONFIG"),
    }
    ok(replog(cluster, *alter, "--delete-config", "cleanup.policy"))
    every = ok(replog(cluster, *base, "--all")).splitlines()
    assert every[0] == "All configs for topic orders are:"
    assert (
        "  cleanup.policy=delete sensitive=false synonyms={DEFAULT_CONFIG:cleanup.policy=delete}"
        in every
    )
    assert len(every) > 10  # every topic config, with its effective value

    # Brokers: a dynamic value on broker 2, the cluster-wide default, and back.
    brokers = ("configs", "alter", "--entity-type", "brokers")
    ok(replog(cluster, *brokers, "--entity-name", "2", "--add-config", "log.retention.ms=7200000"))
    ok(replog(cluster, *brokers, "--entity-default", "--add-config", "log.retention.ms=3600000"))
    shown = ok(replog(cluster, "configs", "describe", "--entity-type", "brokers")).splitlines()
    assert shown == [
        "Dynamic configs for broker 1 are:",
        "Dynamic configs for broker 2 are:",
        "  log.retention.ms=7200000 sensitive=false "
        "synonyms={DYNAMIC_BROKER_CONFIG:log.retention.ms=7200000}",
        "Dynamic configs for broker 3 are:",
    ]
    default = ok(replog(cluster, "configs", "describe", "--entity-type", "brokers",
                        "--entity-default"))  # fmt: skip
    assert default.splitlines()[0] == "Default configs for brokers in the cluster are:"
    assert "log.retention.ms=3600000" in default
    ok(replog(cluster, *brokers, "--entity-name", "2", "--delete-config", "log.retention.ms"))
    ok(replog(cluster, *brokers, "--entity-default", "--delete-config", "log.retention.ms"))
    assert "log.retention.ms" not in ok(
        replog(cluster, "configs", "describe", "--entity-type", "brokers")
    )

    # A group's own configs (KIP-848): any group id; the controller holds them to its bounds.
    group = ("--entity-type", "groups", "--entity-name", "billing")
    done = replog(cluster, "configs", "alter", *group, "--add-config",
                  "consumer.session.timeout.ms=50000")  # fmt: skip
    assert ok(done) == "Completed updating config for group billing.\n"
    assert ok(replog(cluster, "configs", "describe", *group)).splitlines() == [
        "Dynamic configs for group billing are:",
        "  consumer.session.timeout.ms=50000 sensitive=false "
        "synonyms={DYNAMIC_GROUP_CONFIG:consumer.session.timeout.ms=50000}",
    ]
    refused(
        replog(cluster, "configs", "alter", *group, "--add-config",
               "consumer.heartbeat.interval.ms=1"),
        "configs",
        "consumer.heartbeat.interval.ms must be greater than or equal to "
        "group.consumer.min.heartbeat.interval.ms",
    )  # fmt: skip

    # Bad inputs: one line, exit 1.
    refused(replog(cluster, *alter, "--add-config", "bogus.key=1"), "configs", "bogus.key")
    refused(replog(cluster, *alter, "--add-config", "retention.ms=soon"), "configs", "soon")
    refused(
        replog(cluster, "configs", "describe", "--entity-type", "topics", "--entity-name", "nope"),
        "configs",
        "topic 'nope' does not exist",
    )
    refused(
        replog(cluster, "configs", "alter", "--entity-type", "topics", "--entity-name", "nope",
               "--add-config", "retention.ms=1"),
        "configs",
        "nope",
    )  # fmt: skip
    # A broker the cluster does not have: refused (Kafka's BROKER_ID_NOT_REGISTERED), naming
    # the registered ones, never "Completed updating config for broker 9."
    refused(
        replog(cluster, *brokers, "--entity-name", "9", "--add-config", "log.retention.ms=1"),
        "configs",
        "broker 9: no broker with that id is registered (registered brokers: 1, 2, 3)",
    )


# --- reassign and elect-leaders -----------------------------------------------------------------


def test_reassign_generate_execute_verify(cluster: ClientCluster, tmp_path: Path) -> None:
    move = write(tmp_path, "move.json", {"version": 1, "topics": [{"topic": "orders"}]})
    generated = ok(replog(cluster, "reassign", "generate", "--topics-to-move-json-file", move,
                          "--broker-list", "1,2,3")).splitlines()  # fmt: skip
    assert generated[0] == "Current partition replica assignment"
    assert generated[2:4] == ["", "Proposed partition reassignment configuration"]
    current, proposed = json.loads(generated[1]), json.loads(generated[4])
    orders = describe(cluster, "orders")["partitions"]
    assert current == {
        "version": 1,
        "partitions": [
            {"topic": "orders", "partition": p["partition"], "replicas": p["replicas"]}
            for p in orders
        ],
    }
    assert [sorted(p["replicas"]) for p in proposed["partitions"]] == [[1, 2, 3]] * 3
    refused(
        replog(cluster, "reassign", "generate", "--topics-to-move-json-file", move,
               "--broker-list", "1,2"),
        "reassign",
        "3 replicas per partition, more than the 2 brokers",
    )  # fmt: skip

    # Reverse tight-0's replica order: nothing moves, but its preferred leader changes.
    (tight0, _) = describe(cluster, "tight")["partitions"]
    reversed_replicas = list(reversed(tight0["replicas"]))
    plan = write(tmp_path, "plan.json", {"version": 1, "partitions": [
        {"topic": "tight", "partition": 0, "replicas": reversed_replicas}]})  # fmt: skip
    executed = ok(replog(cluster, "reassign", "execute", "--reassignment-json-file", plan))
    assert executed.splitlines()[-1] == "Successfully started partition reassignment for tight-0"
    assert json.loads(executed.splitlines()[2])["partitions"][0]["replicas"] == tight0["replicas"]

    def verified() -> bool:
        return (
            replog(cluster, "reassign", "verify", "--reassignment-json-file", plan).returncode == 0
        )

    wait_until(verified, "the reassignment of tight-0 to complete", timeout_s=20, poll_s=0.2)
    assert ok(replog(cluster, "reassign", "verify", "--reassignment-json-file", plan)) == (
        "Status of partition reassignment:\nReassignment of partition tight-0 is completed.\n"
    )
    status = json.loads(ok(replog(cluster, "reassign", "verify", "--reassignment-json-file", plan,
                                  "--json")))  # fmt: skip
    assert status["partitions"][0]["state"] == "completed"
    after = describe(cluster, "tight")["partitions"][0]
    assert after["replicas"] == reversed_replicas and after["leader"] == tight0["leader"]

    # The preferred replica (now the other one) takes the leadership back.
    election = ("elect-leaders", "--election-type", "preferred")
    elected = ok(replog(cluster, *election, "--topic", "tight", "--partition", "0"))
    assert elected == "Successfully completed leader election (PREFERRED) for partitions tight-0\n"
    # Described from any broker's metadata, which applies the election soon after the answer.
    wait_until(
        lambda: describe(cluster, "tight")["partitions"][0]["leader"] == reversed_replicas[0],
        "the preferred replica's leadership in the metadata",
        timeout_s=20,
        poll_s=0.2,
    )
    again = ok(replog(cluster, *election, "--topic", "tight", "--partition", "0"))
    assert again == "Valid replica already elected for partitions tight-0\n"
    listed = write(tmp_path, "elect.json", {"partitions": [
        {"topic": "tight", "partition": 0}, {"topic": "plain", "partition": 0}]})  # fmt: skip
    as_json = json.loads(ok(replog(cluster, *election, "--path-to-json-file", listed, "--json")))
    assert [(p["topic"], p["result"]) for p in as_json["partitions"]] == [
        ("plain", "not_needed"),
        ("tight", "not_needed"),
    ]
    unclean = ok(replog(cluster, "elect-leaders", "--election-type", "unclean", "--topic",
                        "plain", "--partition", "0"))  # fmt: skip
    assert unclean == "Valid replica already elected for partitions plain-0\n"
    refused(
        replog(cluster, *election, "--topic", "tight", "--partition", "7"),
        "elect-leaders",
        "Error completing leader election (PREFERRED) for partition: tight-7",
    )
    refused(
        replog(cluster, *election, "--topic", "nope", "--partition", "0"), "elect-leaders", "nope-0"
    )


def test_reassign_in_progress_list_and_cancel(cluster: ClientCluster, tmp_path: Path) -> None:
    """A reassignment that adds a frozen broker stays in progress until cancelled."""
    # The broker to freeze must not be the active controller: first (a quick reassignment)
    # put tight-1 on the controller and one other broker, then add the third one.
    controller = cluster.loopback.wait_for_leader().leader_id
    (other, outsider) = sorted({1, 2, 3} - {controller})
    first = write(tmp_path, "first.json", {"version": 1, "partitions": [
        {"topic": "tight", "partition": 1, "replicas": [controller, other]}]})  # fmt: skip
    ok(replog(cluster, "reassign", "execute", "--reassignment-json-file", first))
    wait_until(  # gently: each poll is a whole command
        lambda: (
            replog(cluster, "reassign", "verify", "--reassignment-json-file", first).returncode == 0
        ),
        "tight-1 to move to the controller's broker",
        timeout_s=20,
        poll_s=0.2,
    )
    tight1 = describe(cluster, "tight")["partitions"][1]
    target = [tight1["replicas"][0], outsider]
    plan = write(tmp_path, "plan.json", {"version": 1, "partitions": [
        {"topic": "tight", "partition": 1, "replicas": target}]})  # fmt: skip
    cluster.loopback.signal(outsider, signal.SIGSTOP)
    try:
        ok(replog(cluster, "reassign", "execute", "--reassignment-json-file", plan))
        listed = ok(replog(cluster, "reassign", "list")).splitlines()
        removed = tight1["replicas"][1]
        assert listed == [
            "Current partition reassignments:",
            f"tight-1: replicas: {','.join(map(str, [*target, removed]))}. adding: {outsider}. "
            f"removing: {removed}.",
        ]
        (ongoing,) = json.loads(ok(replog(cluster, "reassign", "list", "--json")))["reassignments"]
        assert (ongoing["topic"], ongoing["partition"]) == ("tight", 1)
        assert ongoing["adding_replicas"] == [outsider]
        verify = replog(cluster, "reassign", "verify", "--reassignment-json-file", plan)
        assert (verify.returncode, verify.stderr) == (1, "")  # not complete: exit code 1
        assert verify.stdout.splitlines()[1] == (
            "Reassignment of partition tight-1 is still in progress."
        )
        busy = replog(cluster, "reassign", "execute", "--reassignment-json-file", plan)
        refused(busy, "reassign", "a partition reassignment is in progress")
        cancelled = ok(replog(cluster, "reassign", "cancel", "--reassignment-json-file", plan))
        assert cancelled == "Successfully cancelled partition reassignment for: tight-1\n"
        assert ok(replog(cluster, "reassign", "list")) == "No partition reassignments found.\n"
        verify = replog(cluster, "reassign", "verify", "--reassignment-json-file", plan)
        assert verify.returncode == 1
        assert verify.stdout.splitlines()[1] == (
            "There is no active reassignment of partition tight-1, but replica set is "
            f"{','.join(map(str, tight1['replicas']))} rather than {','.join(map(str, target))}."
        )
        idle = ok(replog(cluster, "reassign", "cancel", "--reassignment-json-file", plan))
        assert idle == "None of the specified partition reassignments are active.\n"
    finally:
        cluster.loopback.signal(outsider, signal.SIGCONT)
    broken = tmp_path / "broken.json"
    broken.write_text('{"version": 1, "partitions": [{"topic": "tight"')
    refused(
        replog(cluster, "reassign", "verify", "--reassignment-json-file", str(broken)),
        "reassign",
        "broken.json: not valid JSON",
    )
    unknown = write(tmp_path, "unknown.json", {"version": 1, "partitions": [
        {"topic": "nope", "partition": 0, "replicas": [1]}]})  # fmt: skip
    refused(
        replog(cluster, "reassign", "execute", "--reassignment-json-file", unknown),
        "reassign",
        "topic 'nope' does not exist",
    )


# --- delete-records -----------------------------------------------------------------------------


def test_delete_records(cluster: ClientCluster, tmp_path: Path) -> None:
    with Producer(bootstrap_servers=cluster.bootstrap, linger_ms=0) as producer:
        sends = [producer.send("orders", b"v%d" % i, partition=i % 2) for i in range(20)]
        for send in sends:
            send.get(timeout=20)  # current timestamps: retention leaves them alone
    offsets = write(tmp_path, "offsets.json", {"version": 1, "partitions": [
        {"topic": "orders", "partition": 0, "offset": 4},
        {"topic": "orders", "partition": 1, "offset": -1}]})  # fmt: skip
    done = ok(replog(cluster, "delete-records", "--offset-json-file", offsets))
    assert done == (
        "Executing records delete operation\n"
        "Records delete operation completed:\n"
        "partition: orders-0\tlow_watermark: 4\n"
        "partition: orders-1\tlow_watermark: 10\n"
    )
    with Admin(bootstrap_servers=cluster.bootstrap) as admin:
        earliest = admin.list_offsets(
            {TopicPartition("orders", p): OffsetSpec.EARLIEST for p in (0, 1)}
        )
    starts = [earliest[TopicPartition("orders", p)] for p in (0, 1)]
    assert [start.offset if start else None for start in starts] == [4, 10]
    again = json.loads(ok(replog(cluster, "delete-records", "--offset-json-file", offsets,
                                 "--json")))  # fmt: skip
    assert again["partitions"] == [
        {"topic": "orders", "partition": 0, "low_watermark": 4, "error": None},
        {"topic": "orders", "partition": 1, "low_watermark": 10, "error": None},
    ]

    past = write(tmp_path, "past.json", {"version": 1, "partitions": [
        {"topic": "orders", "partition": 0, "offset": 500}]})  # fmt: skip
    refused(
        replog(cluster, "delete-records", "--offset-json-file", past),
        "delete-records",
        "partition: orders-0\terror: ",
        "500",
    )
    unknown = write(tmp_path, "unknown.json", {"version": 1, "partitions": [
        {"topic": "nope", "partition": 0, "offset": 1}]})  # fmt: skip
    refused(
        replog(cluster, "delete-records", "--offset-json-file", unknown),
        "delete-records",
        "topic 'nope' does not exist",
    )
    broken = tmp_path / "broken.json"
    broken.write_text("{'partitions': []}")
    refused(
        replog(cluster, "delete-records", "--offset-json-file", str(broken)),
        "delete-records",
        "not valid JSON",
    )


def test_as_a_real_process(cluster: ClientCluster) -> None:
    """The `replog` script itself: exit codes and the one stderr line survive the process."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    env.pop("REPLOG_DEBUG", None)
    data_dir = str(cluster.loopback.data_dir)
    started = time.monotonic()
    described = subprocess.run(
        [sys.executable, "-m", "replog.cli.main", "configs", "describe", "--entity-type",
         "topics", "--entity-name", "tight", "--data-dir", data_dir],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert (described.returncode, described.stderr) == (0, "")
    assert described.stdout.startswith("Dynamic configs for topic tight are:\n")
    bad = subprocess.run(
        [sys.executable, "-m", "replog.cli.main", "configs", "alter", "--entity-type", "topics",
         "--entity-name", "tight", "--add-config", "bogus.key=1", "--data-dir", data_dir],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert bad.returncode == 1 and bad.stdout == ""
    assert bad.stderr == "replog configs: topic 'tight': unknown config 'bogus.key'\n"
    assert time.monotonic() - started < 30
