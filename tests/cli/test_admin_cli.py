"""`replog configs`, `reassign`, `elect-leaders` and `delete-records` against scripted fakes.

The commands run in-process through the same `main` as the `replog` script; the controller is
the fake of `tests/admin` (what was asked is checked too), and delete-records' Admin client is
replaced by a fake. Output is compared with the Kafka tools' lines; a refusal is one line per
failed item on stderr with exit code 1; a usage mistake is exit code 2. The same commands run
against a real cluster in tests/cli/test_cli_admin_cluster.py.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from cli_runner import Outcome, replog
from fake_kafka_listener import FakeKafkaListener, listening

from replog.admin.controller_results import OngoingReassignment
from replog.cli import reassign
from replog.cli.configs import parse_add_config, parse_delete_config
from replog.client import records, sync_admin
from replog.common import TopicPartition
from replog.errors import (
    ElectionNotNeededError,
    InvalidConfigError,
    NoReassignmentInProgressError,
    OffsetOutOfRangeError,
    PreferredLeaderNotAvailableError,
    ReplogError,
    UnknownTopicOrPartitionError,
)
from replog.kafka.messages import alter_partition_reassignments_response as apr
from replog.kafka.messages import describe_cluster_response as dcl
from replog.kafka.messages import describe_configs_response as dcr
from replog.kafka.messages import elect_leaders_response as elr
from replog.kafka.messages import incremental_alter_configs_response as iacr
from replog.kafka.messages import list_partition_reassignments_response as lpr
from replog.kafka.messages import metadata_response as mr
from replog.kafka.messages.alter_partition_reassignments_request import (
    AlterPartitionReassignmentsRequest,
)
from replog.kafka.messages.describe_configs_request import DescribeConfigsRequest
from replog.kafka.messages.incremental_alter_configs_request import (
    IncrementalAlterConfigsRequest,
)
from replog.kafka.messages.metadata_request import MetadataRequest


@pytest.fixture(autouse=True)
def no_debug(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REPLOG_DEBUG", raising=False)


@pytest.fixture
def controller() -> Iterator[FakeKafkaListener]:
    with listening() as (node,):
        node.script("Metadata", metadata)
        node.script("DescribeCluster", cluster)
        yield node


def at(node: FakeKafkaListener, *args: str) -> Outcome:
    return replog(*args, "--bootstrap-server", node.address)


# --- the fake cluster: topic t (3 partitions), brokers 1, 2, 3 ------------------------------------

REPLICAS = {0: [1, 2], 1: [2, 3], 2: [3, 1]}


def metadata(request: MetadataRequest) -> mr.MetadataResponse:
    topics = []
    for name in [t.name for t in request.topics] if request.topics else ["t"]:
        if name == "t":
            partitions = [
                mr.MetadataResponsePartition(
                    partition_index=p, leader_id=r[0], replica_nodes=r, isr_nodes=r
                )
                for p, r in REPLICAS.items()
            ]
            topics.append(mr.MetadataResponseTopic(name="t", partitions=partitions))
        else:
            code = UnknownTopicOrPartitionError.code
            topics.append(mr.MetadataResponseTopic(name=name, error_code=code))
    return mr.MetadataResponse(controller_id=1, topics=topics)


def cluster(request: object) -> dcl.DescribeClusterResponse:
    brokers = [
        dcl.DescribeClusterBroker(broker_id=i, host="127.0.0.1", port=9000 + i) for i in (1, 2, 3)
    ]
    return dcl.DescribeClusterResponse(controller_id=1, cluster_id="c", brokers=brokers)


def write(tmp_path: Path, name: str, document: Any) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return str(path)


def one_line_refusal(outcome: Outcome, command: str, *fragments: str) -> str:
    assert outcome.returncode == 1, outcome
    lines = outcome.stderr.splitlines()
    assert len(lines) == 1, outcome.stderr
    assert lines[0].startswith(f"replog {command}: ") and "Traceback" not in outcome.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


# --- configs ------------------------------------------------------------------------------------


def described(request: DescribeConfigsRequest) -> dcr.DescribeConfigsResponse:
    """Topic t: retention.ms set on it, retention.bytes from the brokers' static config,
    cleanup.policy at its default. Broker 2: a dynamic min.insync.replicas and a sensitive
    key; brokers 1 and 3 inherit min.insync.replicas from the cluster default, which sets
    log.retention.ms."""
    results = []
    for resource in request.resources:
        name = resource.resource_name
        if resource.resource_type == 2 and name != "t":
            results.append(
                dcr.DescribeConfigsResult(
                    resource_type=2,
                    resource_name=name,
                    error_code=UnknownTopicOrPartitionError.code,
                    error_message=f"topic {name!r} is unknown",
                )
            )
            continue
        if resource.resource_type == 32:  # group g: its own session, the broker's interval
            entries = [
                entry(name="consumer.heartbeat.interval.ms", value="5000",
                               config_source=4),
                entry(name="consumer.session.timeout.ms", value="50000",
                               config_source=8),
            ]  # fmt: skip
        elif resource.resource_type == 2:
            entries = [
                entry(name="cleanup.policy", value="delete",
                               config_source=5),
                entry(name="retention.bytes", value="1024",
                               config_source=4),
                entry(name="retention.ms", value="1000", config_source=1),
            ]  # fmt: skip
        elif name == "":
            entries = [
                entry(name="log.retention.ms", value="5",
                               config_source=3),
            ]  # fmt: skip
        elif name == "2":
            entries = [
                entry(name="min.insync.replicas", value="2",
                               config_source=2),
                entry(name="secret", is_sensitive=True, config_source=2),
            ]  # fmt: skip
        else:
            entries = [
                entry(name="min.insync.replicas", value="2",
                               config_source=3),
            ]  # fmt: skip
        results.append(
            dcr.DescribeConfigsResult(
                resource_type=resource.resource_type, resource_name=name, configs=entries
            )
        )
    return dcr.DescribeConfigsResponse(results=results)


def entry(
    name: str, config_source: int, value: str | None = None, is_sensitive: bool = False
) -> dcr.DescribeConfigsResourceResult:
    return dcr.DescribeConfigsResourceResult(
        name=name, value=value, config_source=config_source, is_sensitive=is_sensitive
    )


def test_configs_describe_prints_kafka_configs_lines(controller: FakeKafkaListener) -> None:
    controller.script("DescribeConfigs", described)
    dynamic = at(controller, "configs", "describe", "--entity-type", "topics", "--entity-name", "t")
    assert (dynamic.returncode, dynamic.stderr) == (0, "")
    assert dynamic.stdout == (
        "Dynamic configs for topic t are:\n"
        "  retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000}\n"
    )
    every = at(controller, "configs", "describe", "--entity-type", "topics", "--entity-name", "t",
               "--all")  # fmt: skip
    assert every.stdout == (
        "All configs for topic t are:\n"
        "  cleanup.policy=delete sensitive=false synonyms={DEFAULT_CONFIG:cleanup.policy=delete}\n"
        # A topic's value from a broker setting names the broker-level key, as Kafka does.
        "  retention.bytes=1024 sensitive=false "
        "synonyms={STATIC_BROKER_CONFIG:log.retention.bytes=1024}\n"
        "  retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000}\n"
    )
    (request,) = controller.asked("DescribeConfigs")[:1]
    assert [(r.resource_type, r.resource_name) for r in request.resources] == [(2, "t")]


def test_configs_describe_brokers(controller: FakeKafkaListener) -> None:
    controller.script("DescribeConfigs", described)
    every_broker = at(controller, "configs", "describe", "--entity-type", "brokers")
    assert every_broker.returncode == 0, every_broker.stderr
    assert every_broker.stdout == (
        "Dynamic configs for broker 1 are:\n"
        "Dynamic configs for broker 2 are:\n"
        "  min.insync.replicas=2 sensitive=false "
        "synonyms={DYNAMIC_BROKER_CONFIG:min.insync.replicas=2}\n"
        "  secret=null sensitive=true synonyms={DYNAMIC_BROKER_CONFIG:secret=null}\n"
        "Dynamic configs for broker 3 are:\n"
    )
    default = at(controller, "configs", "describe", "--entity-type", "brokers", "--entity-default")
    assert default.stdout == (
        "Default configs for brokers in the cluster are:\n"
        "  log.retention.ms=5 sensitive=false "
        "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=5}\n"
    )
    as_json = at(controller, "configs", "describe", "--entity-type", "brokers", "--entity-name",
                 "2", "--json")  # fmt: skip
    assert json.loads(as_json.stdout) == {
        "resources": [
            {
                "entity_type": "brokers",
                "entity_name": "2",
                "configs": [
                    {"name": "min.insync.replicas", "value": "2",
                     "source": "DYNAMIC_BROKER_CONFIG", "is_default": False,
                     "is_sensitive": False, "read_only": False},
                    {"name": "secret", "value": None, "source": "DYNAMIC_BROKER_CONFIG",
                     "is_default": False, "is_sensitive": True, "read_only": False},
                ],
            }
        ]
    }  # fmt: skip


def test_configs_describe_and_alter_a_group(controller: FakeKafkaListener) -> None:
    """KIP-848's group configs: kafka-configs.sh's `--entity-type groups --entity-name G`."""
    controller.script("DescribeConfigs", described)
    controller.script("IncrementalAlterConfigs", altered)
    group = ("--entity-type", "groups", "--entity-name", "g")
    dynamic = at(controller, "configs", "describe", *group)
    assert (dynamic.returncode, dynamic.stderr) == (0, "")
    assert dynamic.stdout == (
        "Dynamic configs for group g are:\n"
        "  consumer.session.timeout.ms=50000 sensitive=false "
        "synonyms={DYNAMIC_GROUP_CONFIG:consumer.session.timeout.ms=50000}\n"
    )
    every = at(controller, "configs", "describe", *group, "--all")
    assert every.stdout.splitlines()[:2] == [
        "All configs for group g are:",
        # From the broker's setting: named by its broker key, as for topics.
        "  consumer.heartbeat.interval.ms=5000 sensitive=false "
        "synonyms={STATIC_BROKER_CONFIG:group.consumer.heartbeat.interval.ms=5000}",
    ]
    (request,) = controller.asked("DescribeConfigs")[:1]
    assert [(r.resource_type, r.resource_name) for r in request.resources] == [(32, "g")]
    done = at(controller, "configs", "alter", *group, "--add-config",
              "consumer.heartbeat.interval.ms=6000", "--delete-config",
              "consumer.session.timeout.ms")  # fmt: skip
    assert (done.returncode, done.stdout) == (0, "Completed updating config for group g.\n")
    (resource,) = controller.asked("IncrementalAlterConfigs")[0].resources
    assert (resource.resource_type, resource.resource_name) == (32, "g")
    unnamed = at(controller, "configs", "describe", "--entity-type", "groups")
    assert unnamed.returncode == 2 and "groups needs --entity-name" in unnamed.stderr
    default = at(controller, "configs", "alter", "--entity-type", "groups", "--entity-default",
                 "--add-config", "a=1")  # fmt: skip
    assert default.returncode == 2


def test_configs_describe_refusals(controller: FakeKafkaListener) -> None:
    controller.script("DescribeConfigs", described)
    missing = at(controller, "configs", "describe", "--entity-type", "topics", "--entity-name", "x")
    one_line_refusal(missing, "configs", "topic 'x' does not exist")
    bad_broker = at(controller, "configs", "describe", "--entity-type", "brokers",
                    "--entity-name", "one")  # fmt: skip
    one_line_refusal(bad_broker, "configs", "'one': a broker's name is its id")
    usage = at(controller, "configs", "describe", "--entity-type", "topics", "--entity-default")
    assert usage.returncode == 2 and "--entity-default is only for" in usage.stderr
    assert at(controller, "configs", "describe", "--entity-type", "clients").returncode == 2


def altered(request: IncrementalAlterConfigsRequest) -> iacr.IncrementalAlterConfigsResponse:
    results = []
    for resource in request.resources:
        bad = [c.name for c in resource.configs if c.name.startswith("bogus")]
        results.append(
            iacr.AlterConfigsResourceResponse(
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                error_code=InvalidConfigError.code if bad else 0,
                error_message=(
                    f"topic {resource.resource_name!r}: unknown config {bad[0]!r}" if bad else None
                ),
            )
        )
    return iacr.IncrementalAlterConfigsResponse(responses=results)


def test_configs_alter_sends_one_incremental_request(controller: FakeKafkaListener) -> None:
    controller.script("IncrementalAlterConfigs", altered)
    done = at(controller, "configs", "alter", "--entity-type", "topics", "--entity-name", "t",
              "--add-config", "retention.ms=1000,cleanup.policy=[compact,delete]",
              "--delete-config", "segment.ms")  # fmt: skip
    assert (done.returncode, done.stdout) == (0, "Completed updating config for topic t.\n")
    (request,) = controller.asked("IncrementalAlterConfigs")
    (resource,) = request.resources
    assert (resource.resource_type, resource.resource_name) == (2, "t")
    assert [(c.name, c.config_operation, c.value) for c in resource.configs] == [
        ("retention.ms", 0, "1000"),
        ("cleanup.policy", 0, "compact,delete"),
        ("segment.ms", 1, None),
    ]  # fmt: skip
    broker = at(controller, "configs", "alter", "--entity-type", "brokers", "--entity-name", "2",
                "--add-config", "min.insync.replicas=2")  # fmt: skip
    assert broker.stdout == "Completed updating config for broker 2.\n"
    default = at(controller, "configs", "alter", "--entity-type", "brokers", "--entity-default",
                 "--delete-config", "log.retention.ms")  # fmt: skip
    assert default.stdout == "Completed updating default config for brokers in the cluster.\n"
    assert controller.asked("IncrementalAlterConfigs")[2].resources[0].resource_name == ""


def test_configs_alter_warns_of_a_topic_min_isr_above_its_replication_factor(
    controller: FakeKafkaListener,
) -> None:
    """As `topics create` warns (topic t has 2 replicas); the change is made either way."""
    controller.script("IncrementalAlterConfigs", altered)
    base = ("configs", "alter", "--add-config")
    above = at(controller, *base, "min.insync.replicas=3", "--entity-type", "topics",
               "--entity-name", "t")  # fmt: skip
    assert (above.returncode, above.stdout) == (0, "Completed updating config for topic t.\n")
    assert above.stderr.splitlines() == [
        "replog configs: warning: min.insync.replicas=3 is above the replication factor (2); it "
        "is capped at 2 (KIP-966's effective min ISR), so acks=all writes need every replica "
        "in sync"
    ]
    at_factor = at(controller, *base, "min.insync.replicas=2", "--entity-type", "topics",
                   "--entity-name", "t")  # fmt: skip
    broker = at(controller, *base, "min.insync.replicas=5", "--entity-type", "brokers",
                "--entity-name", "2")  # fmt: skip
    assert [(o.returncode, o.stderr) for o in (at_factor, broker)] == [(0, ""), (0, "")]


def test_configs_alter_refusals(controller: FakeKafkaListener) -> None:
    controller.script("IncrementalAlterConfigs", altered)
    base = ("configs", "alter", "--entity-type", "topics", "--entity-name", "t")
    bogus = at(controller, *base, "--add-config", "bogus.key=1")
    assert one_line_refusal(bogus, "configs") == (
        "replog configs: topic 't': unknown config 'bogus.key'"
    )
    both = at(controller, *base, "--add-config", "a=1", "--delete-config", "a")
    one_line_refusal(both, "configs", "config a is both added and deleted")
    malformed = at(controller, *base, "--add-config", "retention.ms")
    one_line_refusal(malformed, "configs", "expected KEY=VALUE")
    assert len(controller.asked("IncrementalAlterConfigs")) == 1  # only the bogus key was sent
    nothing = at(controller, *base)
    assert nothing.returncode == 2 and "nothing to alter" in nothing.stderr
    unnamed = at(controller, "configs", "alter", "--entity-type", "topics", "--add-config", "a=1")
    assert unnamed.returncode == 2 and "alter needs --entity-name" in unnamed.stderr


def test_add_config_syntax() -> None:
    assert parse_add_config("a=1, b = [x,y] ,c=d=e,") == {"a": "1", "b": "x,y", "c": "d=e"}
    for bad, fragment in [("a=1,a=2", "a: given twice"), ("a=[x,y", "'[' is not closed"),
                          ("=1", "expected KEY=VALUE"), (",", "names no config")]:  # fmt: skip
        with pytest.raises(ReplogError, match=fragment.replace("[", r"\[")):
            parse_add_config(bad)
    assert parse_delete_config("a, b") == ["a", "b"]
    with pytest.raises(ReplogError, match="given twice"):
        parse_delete_config("a,a")


# --- reassign -----------------------------------------------------------------------------------


def test_propose_keeps_each_topics_replica_count_and_spreads_evenly() -> None:
    current = {("t", p): (1, 2) for p in range(6)} | {("u", 0): (1, 2, 3)}
    brokers = [(1, None), (2, None), (3, None), (4, None)]
    proposed = reassign.propose(current, brokers, random.Random(7))
    assert set(proposed) == set(current)
    assert all(len(proposed[tp]) == len(current[tp]) for tp in current)
    t_counts = [sum(b in proposed[("t", p)] for p in range(6)) for b in (1, 2, 3, 4)]
    assert max(t_counts) - min(t_counts) <= 1 and sum(t_counts) == 12
    with pytest.raises(ReplogError, match="'u' has 3 replicas per partition, more than the 2"):
        reassign.propose(current, brokers[:2], random.Random(7))


def test_reassignment_states_and_lines() -> None:
    assert reassign.reassignment_state([1, 2], [1, 2], ongoing=False) == reassign.COMPLETED
    assert reassign.reassignment_state([1, 2], [2, 1], ongoing=False) == reassign.DIFFERENT
    assert reassign.reassignment_state([1, 2], [1, 2, 3], ongoing=True) == reassign.IN_PROGRESS
    assert reassign.state_line("t", 0, reassign.DIFFERENT, [2, 1], [1, 2]) == (
        "There is no active reassignment of partition t-0, but replica set is 2,1 rather than 1,2."
    )
    ongoing = OngoingReassignment(TopicPartition("t", 1), (1, 3, 2), (3,), (2,))
    assert reassign.ongoing_line(ongoing) == "t-1: replicas: 1,3,2. adding: 3. removing: 2."
    assert reassign.parse_broker_list("3, 1") == [3, 1]
    for bad in ("1,1", "1,x", "-1"):
        with pytest.raises(ReplogError, match="--broker-list"):
            reassign.parse_broker_list(bad)


def test_reassign_generate(controller: FakeKafkaListener, tmp_path: Path) -> None:
    move = write(tmp_path, "move.json", {"version": 1, "topics": [{"topic": "t"}]})
    done = at(controller, "reassign", "generate", "--topics-to-move-json-file", move,
              "--broker-list", "1,2,3")  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "Current partition replica assignment"
    assert json.loads(lines[1]) == {
        "version": 1,
        "partitions": [{"topic": "t", "partition": p, "replicas": r} for p, r in REPLICAS.items()],
    }
    assert lines[2:4] == ["", "Proposed partition reassignment configuration"]
    proposed = json.loads(lines[4])["partitions"]
    assert [(p["topic"], p["partition"], len(p["replicas"])) for p in proposed] == [
        ("t", 0, 2), ("t", 1, 2), ("t", 2, 2)
    ]  # fmt: skip
    assert sorted(p["replicas"][0] for p in proposed) == [1, 2, 3]  # one leader each
    assert controller.asked("AlterPartitionReassignments") == []  # generate changes nothing
    unknown = at(controller, "reassign", "generate", "--topics-to-move-json-file", move,
                 "--broker-list", "1,7")  # fmt: skip
    one_line_refusal(unknown, "reassign", "broker 7 is not registered")
    missing = write(tmp_path, "m2.json", {"version": 1, "topics": [{"topic": "nope"}]})
    gone = at(controller, "reassign", "generate", "--topics-to-move-json-file", missing,
              "--broker-list", "1,2")  # fmt: skip
    one_line_refusal(gone, "reassign", "topic 'nope' does not exist")


def reassignments_answer(failing: Mapping[int, tuple[int, str]]) -> Any:
    def answer(request: AlterPartitionReassignmentsRequest) -> Any:
        topics = []
        for topic in request.topics:
            results = []
            for p in topic.partitions:
                code, message = failing.get(p.partition_index, (0, ""))
                results.append(
                    apr.ReassignablePartitionResponse(
                        partition_index=p.partition_index,
                        error_code=code,
                        error_message=message or None,
                    )
                )
            topics.append(apr.ReassignableTopicResponse(name=topic.name, partitions=results))
        return apr.AlterPartitionReassignmentsResponse(responses=topics)

    return answer


def ongoing(*moves: tuple[int, list[int], list[int], list[int]]) -> Any:
    """A ListPartitionReassignments answer: (partition of t, replicas, adding, removing)."""
    partitions = [
        lpr.OngoingPartitionReassignment(
            partition_index=p, replicas=r, adding_replicas=a, removing_replicas=d
        )
        for p, r, a, d in moves
    ]
    topics = [lpr.OngoingTopicReassignment(name="t", partitions=partitions)] if moves else []
    return lpr.ListPartitionReassignmentsResponse(topics=topics)


PLAN = {
    "version": 1,
    "partitions": [
        {"topic": "t", "partition": 0, "replicas": [2, 3]},
        {"topic": "t", "partition": 1, "replicas": [2, 3]},
    ],
}


def test_reassign_execute(controller: FakeKafkaListener, tmp_path: Path) -> None:
    plan = write(tmp_path, "plan.json", PLAN)
    controller.script("AlterPartitionReassignments", reassignments_answer({}))
    done = at(controller, "reassign", "execute", "--reassignment-json-file", plan)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == (
        "Current partition replica assignment\n\n"
        '{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]},'
        '{"topic":"t","partition":1,"replicas":[2,3]}]}\n\n'
        "Save this to use as the --reassignment-json-file option during rollback\n"
        "Successfully started partition reassignments for t-0,t-1\n"
    )
    (request,) = controller.asked("AlterPartitionReassignments")
    assert [(p.partition_index, p.replicas) for p in request.topics[0].partitions] == [
        (0, [2, 3]),
        (1, [2, 3]),
    ]

    invalid = (61, "cannot reassign t-1: broker 9 is not registered")  # INVALID_REPLICA_ASSIGNMENT
    controller.script("AlterPartitionReassignments", reassignments_answer({1: invalid}))
    half = at(controller, "reassign", "execute", "--reassignment-json-file", plan)
    assert half.stdout.endswith("Successfully started partition reassignment for t-0\n")
    one_line_refusal(half, "reassign", "cannot reassign t-1: broker 9 is not registered")


def test_reassign_execute_refusals(controller: FakeKafkaListener, tmp_path: Path) -> None:
    controller.script("ListPartitionReassignments", ongoing((2, [3, 1], [], [])))
    plan = write(tmp_path, "plan.json", PLAN)
    busy = at(controller, "reassign", "execute", "--reassignment-json-file", plan)
    one_line_refusal(busy, "reassign", "a partition reassignment is in progress", "--additional")
    assert controller.asked("AlterPartitionReassignments") == []
    controller.script("AlterPartitionReassignments", reassignments_answer({}))
    extra = at(controller, "reassign", "execute", "--reassignment-json-file", plan, "--additional")
    assert extra.returncode == 0, extra.stderr
    bad_partition = write(
        tmp_path, "p.json", {"partitions": [{"topic": "t", "partition": 9, "replicas": [1]}]}
    )
    nine = at(controller, "reassign", "execute", "--reassignment-json-file", bad_partition)
    one_line_refusal(nine, "reassign", "partition t-9 does not exist: topic 't' has 3 partitions")
    broken = tmp_path / "broken.json"
    broken.write_text('{"partitions": [')
    bad_json = at(controller, "reassign", "execute", "--reassignment-json-file", str(broken))
    one_line_refusal(bad_json, "reassign", "broken.json: not valid JSON")


def test_reassign_verify_cancel_and_list(controller: FakeKafkaListener, tmp_path: Path) -> None:
    plan = write(
        tmp_path,
        "plan.json",
        {
            "version": 1,
            "partitions": [
                {"topic": "t", "partition": 0, "replicas": [1, 2]},  # completed
                {"topic": "t", "partition": 1, "replicas": [1, 3]},  # in progress
                {"topic": "t", "partition": 2, "replicas": [1, 2]},  # cancelled: [3, 1]
            ],
        },
    )
    controller.script("ListPartitionReassignments", ongoing((1, [2, 3, 1], [1], [2])))
    verify = at(controller, "reassign", "verify", "--reassignment-json-file", plan)
    assert verify.returncode == 1  # not all complete
    assert verify.stdout == (
        "Status of partition reassignment:\n"
        "Reassignment of partition t-0 is completed.\n"
        "Reassignment of partition t-1 is still in progress.\n"
        "There is no active reassignment of partition t-2, but replica set is 3,1 rather than "
        "1,2.\n"
    )
    (asked,) = controller.asked("ListPartitionReassignments")
    assert [(t.name, t.partition_indexes) for t in asked.topics] == [("t", [0, 1, 2])]
    as_json = at(controller, "reassign", "verify", "--reassignment-json-file", plan, "--json")
    states = [(p["partition"], p["state"]) for p in json.loads(as_json.stdout)["partitions"]]
    assert states == [(0, "completed"), (1, "in progress"), (2, "different")]
    done_plan = write(
        tmp_path, "done.json", {"partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2]}]}
    )
    assert (
        at(controller, "reassign", "verify", "--reassignment-json-file", done_plan).returncode == 0
    )

    listed = at(controller, "reassign", "list")
    assert listed.stdout == (
        "Current partition reassignments:\nt-1: replicas: 2,3,1. adding: 1. removing: 2.\n"
    )
    assert json.loads(at(controller, "reassign", "list", "--json").stdout) == {
        "reassignments": [
            {"topic": "t", "partition": 1, "replicas": [2, 3, 1], "adding_replicas": [1],
             "removing_replicas": [2]}
        ]
    }  # fmt: skip
    controller.script("ListPartitionReassignments", ongoing())
    assert at(controller, "reassign", "list").stdout == "No partition reassignments found.\n"

    none = (NoReassignmentInProgressError.code, "no reassignment is in progress")
    controller.script("AlterPartitionReassignments", reassignments_answer({0: none, 2: none}))
    cancel = at(controller, "reassign", "cancel", "--reassignment-json-file", plan)
    assert (cancel.returncode, cancel.stderr) == (0, "")
    assert cancel.stdout == "Successfully cancelled partition reassignment for: t-1\n"
    (request,) = controller.asked("AlterPartitionReassignments")
    assert all(p.replicas is None for p in request.topics[0].partitions)  # = cancel
    controller.script("AlterPartitionReassignments", reassignments_answer({0: none, 1: none,
                                                                          2: none}))  # fmt: skip
    idle = at(controller, "reassign", "cancel", "--reassignment-json-file", plan)
    assert idle.stdout == "None of the specified partition reassignments are active.\n"


# --- elect-leaders ------------------------------------------------------------------------------


def elections(results: Mapping[tuple[str, int], tuple[int, str]]) -> elr.ElectLeadersResponse:
    by_topic: dict[str, list[elr.PartitionResult]] = {}
    for (topic, p), (code, message) in results.items():
        by_topic.setdefault(topic, []).append(
            elr.PartitionResult(partition_id=p, error_code=code, error_message=message or None)
        )
    return elr.ElectLeadersResponse(
        replica_election_results=[
            elr.ReplicaElectionResult(topic=t, partition_result=ps) for t, ps in by_topic.items()
        ]
    )


def test_elect_leaders_prints_kafkas_lines(controller: FakeKafkaListener, tmp_path: Path) -> None:
    not_needed = (ElectionNotNeededError.code, "the preferred replica leads")
    failed = (PreferredLeaderNotAvailableError.code, "t-2: replica 3 is not in the ISR")
    controller.script(
        "ElectLeaders",
        elections({("t", 1): (0, ""), ("t", 0): (0, ""), ("u", 0): not_needed, ("t", 2): failed}),
    )
    outcome = at(controller, "elect-leaders", "--election-type", "preferred",
                 "--all-topic-partitions")  # fmt: skip
    assert outcome.stdout == (
        "Successfully completed leader election (PREFERRED) for partitions t-0, t-1\n"
        "Valid replica already elected for partitions u-0\n"
    )
    assert one_line_refusal(outcome, "elect-leaders") == (
        "replog elect-leaders: Error completing leader election (PREFERRED) for partition: t-2: "
        "t-2: replica 3 is not in the ISR"
    )
    (request,) = controller.asked("ElectLeaders")
    assert (request.election_type, request.topic_partitions) == (0, None)  # all partitions

    controller.script("ElectLeaders", elections({("t", 0): (0, "")}))
    one = at(controller, "elect-leaders", "--election-type", "UNCLEAN", "--topic", "t",
             "--partition", "0", "--json")  # fmt: skip
    assert one.returncode == 0
    assert json.loads(one.stdout) == {
        "partitions": [{"topic": "t", "partition": 0, "result": "elected", "error": None}]
    }
    request = controller.asked("ElectLeaders")[1]
    assert request.election_type == 1
    assert [(t.topic, t.partitions) for t in request.topic_partitions] == [("t", [0])]

    listed = write(tmp_path, "e.json", {"partitions": [{"topic": "t", "partition": 0}]})
    from_file = at(controller, "elect-leaders", "--election-type", "preferred",
                   "--path-to-json-file", listed)  # fmt: skip
    assert from_file.returncode == 0
    asked = controller.asked("ElectLeaders")[2].topic_partitions
    assert [(t.topic, t.partitions) for t in asked] == [("t", [0])]


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--topic", "t"],
        ["--all-topic-partitions", "--topic", "t", "--partition", "0"],
        ["--all-topic-partitions", "--path-to-json-file", "f"],
    ],
)
def test_elect_leaders_usage_mistakes_exit_2(
    controller: FakeKafkaListener, args: list[str]
) -> None:
    outcome = at(controller, "elect-leaders", "--election-type", "preferred", *args)
    assert outcome.returncode == 2 and "Traceback" not in outcome.stderr
    assert controller.asked("ElectLeaders") == []


# --- delete-records -----------------------------------------------------------------------------


class FakeAdmin:
    """delete_records as the Admin client answers it: the low watermark, or the first failed
    partition's error for the whole call."""

    high_watermark = 10
    calls: list[dict[Any, int]] = []
    each_timeouts: list[int] = []  # one blocking call per command, under its one timeout

    def __init__(self, config: Mapping[str, object]) -> None:
        self.config = config

    def __enter__(self) -> FakeAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def delete_records(self, before: Mapping[Any, int], *, timeout_ms: int) -> dict[Any, int]:
        FakeAdmin.calls.append(dict(before))
        for tp, offset in before.items():
            if tp.topic != "t":
                raise UnknownTopicOrPartitionError(f"topic {tp.topic!r} does not exist")
            if offset > self.high_watermark:
                raise OffsetOutOfRangeError(f"{tp.topic}-{tp.partition}: offset {offset} is out")
        return {tp: self.high_watermark if o == -1 else o for tp, o in before.items()}

    def delete_records_each(
        self, before: Mapping[Any, int], *, timeout_ms: int
    ) -> dict[Any, int | ReplogError]:
        """The Admin's per-partition outcomes: each partition asked on its own."""
        FakeAdmin.each_timeouts.append(timeout_ms)
        outcomes: dict[Any, int | ReplogError] = {}
        for tp, offset in before.items():
            try:
                outcomes[tp] = self.delete_records({tp: offset}, timeout_ms=timeout_ms)[tp]
            except ReplogError as exc:
                outcomes[tp] = exc
        return outcomes


@pytest.fixture
def fake_admin(monkeypatch: pytest.MonkeyPatch) -> type[FakeAdmin]:
    FakeAdmin.calls = []
    FakeAdmin.each_timeouts = []
    # The command imports the Admin client when it runs (its --help loads no gRPC).
    monkeypatch.setattr(sync_admin, "Admin", FakeAdmin)
    return FakeAdmin


def offsets_file(tmp_path: Path, *entries: tuple[str, int, int]) -> str:
    partitions = [{"topic": t, "partition": p, "offset": o} for t, p, o in entries]
    return write(tmp_path, "offsets.json", {"partitions": partitions, "version": 1})


def test_delete_records(fake_admin: type[FakeAdmin], tmp_path: Path) -> None:
    path = offsets_file(tmp_path, ("t", 0, 3), ("t", 1, -1))
    done = replog("delete-records", "--offset-json-file", path, "--bootstrap-server", "h:1")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == (
        "Executing records delete operation\n"
        "Records delete operation completed:\n"
        "partition: t-0\tlow_watermark: 3\n"
        "partition: t-1\tlow_watermark: 10\n"
    )
    assert sorted(tuple(call.items()) for call in fake_admin.calls) == [
        ((records.TopicPartition("t", 0), 3),),
        ((records.TopicPartition("t", 1), -1),),
    ]  # one request per partition


def test_delete_records_is_one_call_under_one_timeout(
    fake_admin: type[FakeAdmin], tmp_path: Path
) -> None:
    # The partitions went all at once, then each again when that failed: --timeout spent twice.
    # Now one blocking call (Ctrl-C cancels it) with each partition's own outcome.
    path = offsets_file(tmp_path, ("t", 0, 3), ("t", 1, 3))
    outcome = replog(
        "delete-records", "--offset-json-file", path, "--timeout", "0.3",
        "--bootstrap-server", "h:1",
    )  # fmt: skip
    assert outcome.returncode == 0
    assert fake_admin.each_timeouts == [300]


def test_delete_records_reports_each_failed_partition(
    fake_admin: type[FakeAdmin], tmp_path: Path
) -> None:
    path = offsets_file(tmp_path, ("t", 0, 3), ("nope", 0, 1), ("t", 1, 99))
    outcome = replog("delete-records", "--offset-json-file", path, "--bootstrap-server", "h:1")
    assert outcome.returncode == 1
    assert outcome.stdout.splitlines()[-1] == "partition: t-0\tlow_watermark: 3"
    assert outcome.stderr.splitlines() == [
        "replog delete-records: partition: nope-0\terror: topic 'nope' does not exist",
        "replog delete-records: partition: t-1\terror: t-1: offset 99 is out",
    ]
    assert len(fake_admin.calls) == 3  # each partition on its own
    as_json = replog("delete-records", "--offset-json-file", path, "--json",
                     "--bootstrap-server", "h:1")  # fmt: skip
    assert json.loads(as_json.stdout)["partitions"] == [
        {"topic": "t", "partition": 0, "low_watermark": 3, "error": None},
        {"topic": "nope", "partition": 0, "low_watermark": None,
         "error": "topic 'nope' does not exist"},
        {"topic": "t", "partition": 1, "low_watermark": None, "error": "t-1: offset 99 is out"},
    ]  # fmt: skip
    single = offsets_file(tmp_path, ("nope", 0, 1))
    alone = replog("delete-records", "--offset-json-file", single, "--bootstrap-server", "h:1")
    one_line_refusal(alone, "delete-records", "partition: nope-0\terror: topic 'nope'")


def test_delete_records_file_mistakes(fake_admin: type[FakeAdmin], tmp_path: Path) -> None:
    bad = offsets_file(tmp_path, ("t", 0, -5))
    one_line_refusal(
        replog("delete-records", "--offset-json-file", bad, "--bootstrap-server", "h:1"),
        "delete-records",
        "offset -5: must be >= 0, or -1",
    )
    missing = str(tmp_path / "none.json")
    one_line_refusal(
        replog("delete-records", "--offset-json-file", missing, "--bootstrap-server", "h:1"),
        "delete-records",
        "none.json: No such file or directory",
    )
    assert fake_admin.calls == []


# --- help ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "flags"),
    [
        (["configs"], ["describe", "alter"]),
        (["configs", "describe"], ["--entity-type", "--entity-name", "--entity-default", "--all",
                                   "--json", "--bootstrap-server"]),
        (["configs", "alter"], ["--add-config", "--delete-config", "--entity-name"]),
        (["reassign"], ["generate", "execute", "verify", "cancel", "list"]),
        (["reassign", "generate"], ["--topics-to-move-json-file", "--broker-list"]),
        (["reassign", "execute"], ["--reassignment-json-file", "--additional"]),
        (["reassign", "verify"], ["--reassignment-json-file", "--json"]),
        (["reassign", "cancel"], ["--reassignment-json-file"]),
        (["reassign", "list"], ["--json"]),
        (["elect-leaders"], ["--election-type", "--all-topic-partitions", "--path-to-json-file",
                             "--topic", "--partition", "--json"]),
        (["delete-records"], ["--offset-json-file", "--command-config", "--json",
                              "--bootstrap-server"]),
    ],
)  # fmt: skip
def test_every_command_has_help(command: list[str], flags: list[str]) -> None:
    outcome = replog(*command, "--help")
    assert outcome.returncode == 0
    assert outcome.stdout.startswith(f"usage: replog {' '.join(command)}")
    for flag in flags:
        assert flag in outcome.stdout


@pytest.mark.parametrize(
    ("command", "usage", "unknown"),
    [
        (["produce", "--topic", "t", "--partition", "3"], "replog produce", "--partition 3"),
        (["topics", "list", "--bogus"], "replog topics list", "--bogus"),
        (["--bogus", "cluster", "status"], "replog cluster status", "--bogus"),
    ],
)
def test_an_unknown_flag_is_named_with_its_commands_usage(
    command: list[str], usage: str, unknown: str
) -> None:
    """Under the command's own usage, not the top-level one (`replog [-h] ... COMMAND ...`),
    which does not say what the command takes."""
    outcome = replog(*command)
    assert outcome.returncode == 2
    assert outcome.stderr.startswith(f"usage: {usage} "), outcome.stderr
    assert outcome.stderr.endswith(f"{usage}: error: unrecognized arguments: {unknown}\n")
