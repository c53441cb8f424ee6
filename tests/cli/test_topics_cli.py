"""`replog topics` as an operator uses it, against scripted in-process fake Kafka listeners.

The commands run in-process through the same `main` as the `replog` script (one also runs as
a real process). Output is compared with kafka-topics.sh's layout; a refusal is one line on
stderr, exit code 1 and no traceback; an argparse mistake is exit code 2; Ctrl-C is 130.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from cli_runner import Outcome, replog
from fake_controller import interrupt_main_when
from fake_kafka_listener import HANG, FakeKafkaListener, http2_server, listening

from replog.admin.cluster_metadata import PartitionInfo
from replog.cli.local_cluster import LocalCluster, LocalNode
from replog.cli.topics import is_at_min_isr, is_under_min_isr
from replog.errors import (
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    RequestTimedOutError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from replog.kafka import staleness_tag
from replog.kafka.messages import create_partitions_response as cpr
from replog.kafka.messages import create_topics_response as ctr
from replog.kafka.messages import delete_topics_response as dtr
from replog.kafka.messages import describe_configs_response as dcr
from replog.kafka.messages import list_partition_reassignments_response as lpr
from replog.kafka.messages import metadata_response as mr
from replog.kafka.messages.describe_configs_request import DescribeConfigsRequest
from replog.kafka.messages.metadata_request import MetadataRequest
from tests.local_ports import free_port

ORDERS_ID = uuid.UUID("5d2a6f1e-8c3b-4a7d-9e0f-112233445566")  # XSpvHow7Sn2eDxEiM0RVZg
AUDIT_ID = uuid.UUID("0a1b2c3d-4e5f-4a6b-8c7d-8e9fa0b1c2d3")  # ChssPU5fSmuMfY6foLHC0w


def assert_refused(outcome: Outcome, *fragments: str) -> str:
    """A one-line refusal with exit code 1; returns the line."""
    assert outcome.returncode == 1, outcome
    lines = outcome.stderr.splitlines()
    assert len(lines) == 1, outcome.stderr
    assert lines[0].startswith("replog topics: "), lines[0]
    assert "Traceback" not in outcome.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


@pytest.fixture(autouse=True)
def no_debug(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REPLOG_DEBUG", raising=False)  # it turns refusals into tracebacks


@pytest.fixture
def controller() -> Iterator[FakeKafkaListener]:
    """A broker's Kafka listener, answering the cluster `cluster_metadata` describes."""
    with listening() as (node,):
        node.script("Metadata", cluster_metadata)
        node.script("DescribeConfigs", topic_configs)
        node.script("ListPartitionReassignments", reassignments)
        yield node


def partition(
    index: int, leader: int, replicas: list[int], isr: list[int]
) -> mr.MetadataResponsePartition:
    return mr.MetadataResponsePartition(
        partition_index=index,
        leader_id=leader,
        leader_epoch=4,
        replica_nodes=replicas,
        isr_nodes=isr,
        offline_replicas=[3] if 3 in replicas else [],
        error_code=5 if leader == -1 else 0,
    )


TOPICS = {
    "orders": mr.MetadataResponseTopic(
        name="orders",
        topic_id=ORDERS_ID,
        partitions=[
            partition(2, -1, [3, 1, 2], [3]),  # no leader; out of order on purpose
            partition(0, 1, [1, 2, 3], [1, 2, 3]),
            partition(1, 2, [2, 3, 1], [2, 1]),  # under-replicated
        ],
    ),
    "audit": mr.MetadataResponseTopic(
        name="audit",
        topic_id=AUDIT_ID,
        # Moving from [3, 1] to [3, 4]; its leader, broker 3, is fenced (not in `brokers`).
        partitions=[partition(0, 3, [3, 1, 4], [3, 1, 4])],
    ),
}


def cluster_metadata(request: MetadataRequest) -> mr.MetadataResponse:
    """Brokers 1, 2 and 4 alive (3 fenced); the topics asked for, or all of them."""
    names = [t.name for t in request.topics] if request.topics else list(TOPICS)
    return mr.MetadataResponse(
        controller_id=1,
        cluster_id="test-cluster",
        brokers=[
            mr.MetadataResponseBroker(node_id=i, host="127.0.0.1", port=9000 + i) for i in (1, 2, 4)
        ],
        topics=[
            TOPICS[name]
            if name in TOPICS
            else mr.MetadataResponseTopic(name=name, error_code=UnknownTopicOrPartitionError.code)
            for name in names
        ],
    )


def reassignments(request: object) -> lpr.ListPartitionReassignmentsResponse:
    """audit-0 moving from [3, 1] to [3, 4]."""
    moving = lpr.OngoingPartitionReassignment(
        partition_index=0, replicas=[3, 1, 4], adding_replicas=[4], removing_replicas=[1]
    )
    return lpr.ListPartitionReassignmentsResponse(
        topics=[lpr.OngoingTopicReassignment(name="audit", partitions=[moving])]
    )


TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5  # DescribeConfigs' sources


def topic_configs(request: DescribeConfigsRequest) -> dcr.DescribeConfigsResponse:
    overrides = {"orders": {"retention.ms": "86400000", "cleanup.policy": "compact"}}
    results = []
    for resource in request.resources:
        entries = [
            dcr.DescribeConfigsResourceResult(name=k, value=v, config_source=TOPIC_CONFIG)
            for k, v in overrides.get(resource.resource_name, {}).items()
        ]
        entries.append(
            dcr.DescribeConfigsResourceResult(
                name="segment.bytes", value="1073741824", config_source=DEFAULT_CONFIG
            )
        )
        results.append(
            dcr.DescribeConfigsResult(
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                configs=entries,
            )
        )
    return dcr.DescribeConfigsResponse(results=results)


# --- describe -----------------------------------------------------------------------------------

DESCRIBE_GOLDEN = (
    "Topic: audit\tTopicId: ChssPU5fSmuMfY6foLHC0w\tPartitionCount: 1\tReplicationFactor: 2\t"
    "Configs: \n"
    "\tTopic: audit\tPartition: 0\tLeader: 3\tReplicas: 3,1,4\tIsr: 3,1,4\t"
    "Adding Replicas: 4\tRemoving Replicas: 1\n"
    "Topic: orders\tTopicId: XSpvHow7Sn2eDxEiM0RVZg\tPartitionCount: 3\tReplicationFactor: 3\t"
    "Configs: cleanup.policy=compact,retention.ms=86400000\n"
    "\tTopic: orders\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1,2,3\n"
    "\tTopic: orders\tPartition: 1\tLeader: 2\tReplicas: 2,3,1\tIsr: 2,1\n"
    "\tTopic: orders\tPartition: 2\tLeader: none\tReplicas: 3,1,2\tIsr: 3\n"
)


def test_describe_prints_kafka_topics_layout(controller: FakeKafkaListener) -> None:
    outcome = replog("topics", "describe", "--bootstrap-server", controller.address)
    assert outcome.returncode == 0, outcome.stderr
    assert outcome.stdout == DESCRIBE_GOLDEN
    assert outcome.stderr == ""
    (metadata,) = controller.asked("Metadata")
    assert metadata.topics is None  # every topic
    (configs,) = controller.asked("DescribeConfigs")
    assert [(r.resource_type, r.resource_name) for r in configs.resources] == [
        (2, "audit"),
        (2, "orders"),
    ]


def test_describe_one_topic(controller: FakeKafkaListener) -> None:
    outcome = replog(
        "topics", "describe", "--topic", "orders", "--bootstrap-server", controller.address
    )
    assert outcome.returncode == 0, outcome.stderr
    assert outcome.stdout == DESCRIBE_GOLDEN[DESCRIBE_GOLDEN.index("Topic: orders") :]
    assert [t.name for t in controller.asked("Metadata")[0].topics] == ["orders"]


# Without an active controller no reassignment can be listed: audit-0's moving replicas are
# not known, and its replication factor counts them all.
STALE_GOLDEN = DESCRIBE_GOLDEN.replace(
    "PartitionCount: 1\tReplicationFactor: 2", "PartitionCount: 1\tReplicationFactor: 3"
).replace("\tAdding Replicas: 4\tRemoving Replicas: 1", "")


def with_staleness(
    stale: bool, leader_known: bool, age_ms: int = 0, contact_ms: int | None = None,
    unreachable: frozenset[int] = frozenset(),
) -> Any:  # fmt: skip
    """`cluster_metadata` with replog's staleness tag, as a controller's listener answers."""

    def answer(request: MetadataRequest) -> mr.MetadataResponse:
        response = cluster_metadata(request)
        staleness = staleness_tag.MetadataStaleness(
            stale, leader_known, age_ms, contact_ms, 1, unreachable
        )
        response.unknown_tagged_fields = (staleness_tag.encode(staleness),)
        return response

    return answer


def test_describe_without_an_active_controller_warns_that_it_may_be_stale(
    controller: FakeKafkaListener,
) -> None:
    # With two of three nodes killed the answer may still show the dead node as leader: the
    # CLI must say that no controller could have fenced it. Kafka's Metadata names some live
    # broker as controller whatever happens: replog's tag says whether a leader is known.
    controller.script("Metadata", with_staleness(stale=False, leader_known=False))
    outcome = replog("topics", "describe", "--bootstrap-server", controller.address)
    assert outcome.returncode == 0, outcome.stderr
    assert outcome.stdout == STALE_GOLDEN  # still shown: it is all there is
    assert outcome.stderr.startswith("replog topics: warning: no active controller")
    assert "leaders and ISRs may be stale" in outcome.stderr
    controller.script("Metadata", with_staleness(stale=False, leader_known=True))
    assert replog("topics", "describe", "--bootstrap-server", controller.address).stderr == ""


def test_describe_of_stale_metadata_says_how_old_and_counts_silent_leaders_unavailable(
    controller: FakeKafkaListener,
) -> None:
    """The answering node campaigns (the quorum is lost): its age and last contact are said,
    and leaders it has not heard from count as unavailable (the real cluster's check is in
    tests/cluster/test_cluster_topics_cli.py)."""
    stale = with_staleness(
        stale=True, leader_known=False, age_ms=42_300,
        contact_ms=1_764_064_800_000,  # 2025-11-25T10:00:00Z
        unreachable=frozenset({2}),
    )  # fmt: skip
    controller.script("Metadata", stale)
    outcome = replog("topics", "describe", "--bootstrap-server", controller.address)
    assert outcome.returncode == 0, outcome.stderr
    assert outcome.stdout == STALE_GOLDEN
    assert outcome.stderr == (
        "replog topics: warning: metadata stale: the quorum has not been reached for 42 s "
        "(node 1 last heard from the quorum's leader at 2025-11-25T10:00:00.000Z); leaders and "
        "ISRs are as last committed then (only an active controller fences a dead broker or "
        "moves a leadership); broker 2 was not heard from within broker.session.timeout.ms, so "
        "the partitions it leads count as unavailable\n"
    )
    document = json.loads(
        replog("topics", "describe", "--json", "--bootstrap-server", controller.address).stdout
    )
    assert (document["stale"], document["metadata_age_ms"]) == (True, 42_300)
    unavailable = replog(
        "topics", "describe", "--unavailable-partitions", "--bootstrap-server", controller.address
    )
    led_by_2 = [line for line in STALE_GOLDEN.splitlines() if "\tLeader: 2\t" in line]
    assert led_by_2
    assert all(line in unavailable.stdout.splitlines() for line in led_by_2)
    # No controller could say which reassignments are in progress: none is asked.
    assert controller.asked("ListPartitionReassignments") == []


def test_describe_says_when_the_reassignments_cannot_be_read(
    controller: FakeKafkaListener,
) -> None:
    """A controller lost before any node says the metadata is stale: the broker cannot forward
    ListPartitionReassignments; the topics are still described, and the gap is said."""
    timed_out = lpr.ListPartitionReassignmentsResponse(
        error_code=RequestTimedOutError.code, error_message="no controller answered"
    )
    controller.script("ListPartitionReassignments", timed_out)
    outcome = replog("topics", "describe", "--bootstrap-server", controller.address)
    assert (outcome.returncode, outcome.stdout) == (0, STALE_GOLDEN)
    assert outcome.stderr == (
        "replog topics: warning: the reassignments in progress could not be read "
        "(RequestTimedOutError: no controller answered); adding and removing replicas are not "
        "shown\n"
    )


def test_describing_a_missing_topic_is_refused_unless_if_exists(
    controller: FakeKafkaListener,
) -> None:
    args = ("topics", "describe", "--topic", "nope", "--bootstrap-server", controller.address)
    line = assert_refused(replog(*args))
    assert line == "replog topics: topic 'nope' does not exist"
    quiet = replog(*args, "--if-exists")
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")


@pytest.mark.parametrize(
    ("flags", "lines"),
    [
        (["--under-replicated-partitions"], ["orders\tPartition: 1", "orders\tPartition: 2"]),
        (["--unavailable-partitions"], ["audit\tPartition: 0", "orders\tPartition: 2"]),
        (
            ["--under-replicated-partitions", "--unavailable-partitions"],
            ["audit\tPartition: 0", "orders\tPartition: 1", "orders\tPartition: 2"],
        ),
    ],
)
def test_describe_filters_print_only_the_matching_partitions(
    controller: FakeKafkaListener, flags: list[str], lines: list[str]
) -> None:
    outcome = replog("topics", "describe", *flags, "--bootstrap-server", controller.address)
    assert outcome.returncode == 0, outcome.stderr
    printed = outcome.stdout.splitlines()
    assert [line.split("\tLeader")[0] for line in printed] == [f"\tTopic: {x}" for x in lines]
    assert all(line in DESCRIBE_GOLDEN.splitlines() for line in printed)
    assert controller.asked("DescribeConfigs") == []  # no topic lines, no configs needed


def test_describe_json(controller: FakeKafkaListener) -> None:
    outcome = replog("topics", "describe", "--json", "--bootstrap-server", controller.address)
    assert outcome.returncode == 0, outcome.stderr
    document = json.loads(outcome.stdout)
    audit, orders = document["topics"]
    assert audit == {
        "name": "audit",
        "topic_id": "ChssPU5fSmuMfY6foLHC0w",
        "partition_count": 1,
        "replication_factor": 2,
        "configs": {},
        "partitions": [
            {
                "partition": 0,
                "leader": 3,
                "leader_epoch": 4,
                "replicas": [3, 1, 4],
                "isr": [3, 1, 4],
                "adding_replicas": [4],
                "removing_replicas": [1],
                "offline_replicas": [3],
            }
        ],
    }
    assert orders["configs"] == {"cleanup.policy": "compact", "retention.ms": "86400000"}
    assert [p["partition"] for p in orders["partitions"]] == [0, 1, 2]
    assert orders["partitions"][2]["leader"] is None
    filtered = replog(
        "topics", "describe", "--json", "--unavailable-partitions",
        "--bootstrap-server", controller.address,
    )  # fmt: skip
    topics = json.loads(filtered.stdout)["topics"]
    assert [(t["name"], [p["partition"] for p in t["partitions"]]) for t in topics] == [
        ("audit", [0]),
        ("orders", [2]),
    ]


def min_isr_configs(request: DescribeConfigsRequest) -> dcr.DescribeConfigsResponse:
    """orders: min.insync.replicas 2 (a topic override); audit: 3 (from the brokers)."""
    values = {"orders": ("2", TOPIC_CONFIG), "audit": ("3", STATIC_BROKER_CONFIG)}
    results = []
    for resource in request.resources:
        value, source = values[resource.resource_name]
        entry = dcr.DescribeConfigsResourceResult(
            name="min.insync.replicas", value=value, config_source=source
        )
        results.append(
            dcr.DescribeConfigsResult(
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                configs=[entry],
            )
        )
    return dcr.DescribeConfigsResponse(results=results)


@pytest.mark.parametrize(
    ("flags", "lines"),
    [
        # orders-2 has no leader; orders-1 has 2 in sync (= its min), audit-0 3 (= its min).
        (["--under-min-isr-partitions"], ["orders\tPartition: 2"]),
        (["--at-min-isr-partitions"], ["audit\tPartition: 0", "orders\tPartition: 1"]),
        (
            ["--at-min-isr-partitions", "--unavailable-partitions"],
            ["audit\tPartition: 0", "orders\tPartition: 1", "orders\tPartition: 2"],
        ),
    ],
)
def test_describe_min_isr_filters(
    controller: FakeKafkaListener, flags: list[str], lines: list[str]
) -> None:
    controller.script("DescribeConfigs", min_isr_configs)
    outcome = replog("topics", "describe", *flags, "--bootstrap-server", controller.address)
    assert outcome.returncode == 0, outcome.stderr
    printed = outcome.stdout.splitlines()
    assert [line.split("\tLeader")[0] for line in printed] == [f"\tTopic: {x}" for x in lines]
    assert all(line in DESCRIBE_GOLDEN.splitlines() for line in printed)
    (asked,) = controller.asked("DescribeConfigs")  # only the key needed
    assert [list(r.configuration_keys) for r in asked.resources] == [["min.insync.replicas"]] * 2


def test_describe_topics_with_overrides(controller: FakeKafkaListener) -> None:
    outcome = replog(
        "topics", "describe", "--topics-with-overrides", "--bootstrap-server", controller.address
    )
    assert outcome.returncode == 0, outcome.stderr
    (line,) = outcome.stdout.splitlines()  # the topic line only, of the topic with overrides
    assert line.startswith("Topic: orders\t") and line in DESCRIBE_GOLDEN.splitlines()
    mixed = replog(
        "topics", "describe", "--topics-with-overrides", "--under-replicated-partitions",
        "--bootstrap-server", controller.address,
    )  # fmt: skip
    assert mixed.returncode == 2 and "cannot be combined" in mixed.stderr


def with_internal(request: MetadataRequest) -> mr.MetadataResponse:
    answer = cluster_metadata(request)
    if not request.topics:
        answer.topics.append(
            mr.MetadataResponseTopic(
                name="__consumer_offsets", is_internal=True, partitions=[partition(0, 1, [1], [1])]
            )
        )
    return answer


def test_exclude_internal(controller: FakeKafkaListener) -> None:
    controller.script("Metadata", with_internal)
    listed = replog("topics", "list", "--bootstrap-server", controller.address)
    assert listed.stdout.split() == ["__consumer_offsets", "audit", "orders"]
    without = replog(
        "topics", "list", "--exclude-internal", "--bootstrap-server", controller.address
    )
    assert without.stdout.split() == ["audit", "orders"]
    described = replog(
        "topics", "describe", "--exclude-internal", "--json", "--bootstrap-server",
        controller.address,
    )  # fmt: skip
    assert [t["name"] for t in json.loads(described.stdout)["topics"]] == ["audit", "orders"]
    everything = replog("topics", "describe", "--json", "--bootstrap-server", controller.address)
    assert "__consumer_offsets" in [t["name"] for t in json.loads(everything.stdout)["topics"]]


# --- list, create, delete -----------------------------------------------------------------------


def test_list(controller: FakeKafkaListener) -> None:
    text = replog("topics", "list", "--bootstrap-server", controller.address)
    assert (text.returncode, text.stdout, text.stderr) == (0, "audit\norders\n", "")
    as_json = replog("topics", "list", "--json", "--bootstrap-server", controller.address)
    assert json.loads(as_json.stdout) == {"topics": ["audit", "orders"]}


def created(name: str, code: int = 0, message: str = "") -> ctr.CreateTopicsResponse:
    result = ctr.CreatableTopicResult(
        name=name, error_code=code, error_message=message or None, replication_factor=-1
    )
    return ctr.CreateTopicsResponse(topics=[result])


def test_create(controller: FakeKafkaListener) -> None:
    controller.script("CreateTopics", created("orders"))
    outcome = replog(
        "topics", "create", "--topic", "orders", "--partitions", "3",
        "--replication-factor", "2", "--config", "retention.ms=1000",
        "--config", "cleanup.policy=compact,delete", "--bootstrap-server", controller.address,
    )  # fmt: skip
    assert (outcome.returncode, outcome.stdout, outcome.stderr) == (
        0,
        "Created topic orders.\n",
        "",
    )
    (request,) = controller.asked("CreateTopics")
    (topic,) = request.topics
    assert (topic.name, topic.num_partitions, topic.replication_factor) == ("orders", 3, 2)
    assert {c.name: c.value for c in topic.configs} == {
        "retention.ms": "1000",
        "cleanup.policy": "compact,delete",
    }
    assert not request.validate_only and request.timeout_ms > 0

    replog("topics", "create", "--topic", "orders", "--bootstrap-server", controller.address)
    (_, defaults) = controller.asked("CreateTopics")
    assert (defaults.topics[0].num_partitions, defaults.topics[0].replication_factor) == (-1, -1)


def test_create_refusals(controller: FakeKafkaListener) -> None:
    base = ("topics", "create", "--topic", "orders", "--bootstrap-server", controller.address)
    controller.script(
        "CreateTopics",
        created("orders", InvalidReplicationFactorError.code, "replication factor 5 > 3 brokers"),
    )
    assert assert_refused(replog(*base)) == "replog topics: replication factor 5 > 3 brokers"

    controller.script(
        "CreateTopics", created("orders", TopicAlreadyExistsError.code, "topic 'orders' exists")
    )
    assert_refused(replog(*base), "topic 'orders' exists")
    quiet = replog(*base, "--if-not-exists")
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")

    sent = len(controller.asked("CreateTopics"))
    assert_refused(
        replog(*base, "--config", "retention.ms"), "--config 'retention.ms'", "KEY=VALUE"
    )
    assert_refused(replog(*base, "--config", "a=1", "--config", "a=2"), "--config a: given twice")
    assert len(controller.asked("CreateTopics")) == sent  # refused before asking anyone


def test_create_warns_of_a_min_isr_above_the_replication_factor(
    controller: FakeKafkaListener,
) -> None:
    """Accepted, as Kafka accepts it, but said: the leader caps it at the replica count, so
    acks=all then needs every replica (saying nothing would leave the user to find out)."""
    base = ("topics", "create", "--topic", "orders", "--bootstrap-server", controller.address)
    controller.script("CreateTopics", created("orders"))
    above = replog(*base, "--replication-factor", "3", "--config", "min.insync.replicas=5")
    assert (above.returncode, above.stdout) == (0, "Created topic orders.\n")
    assert above.stderr.splitlines() == [
        "replog topics: warning: min.insync.replicas=5 is above the replication factor (3); it "
        "is capped at 3 (KIP-966's effective min ISR), so acks=all writes need every replica "
        "in sync"
    ]
    # Without --replication-factor: the factor the controller chose, from its answer.
    chosen = ctr.CreateTopicsResponse(
        topics=[ctr.CreatableTopicResult(name="orders", replication_factor=2)]
    )
    controller.script("CreateTopics", chosen)
    defaulted = replog(*base, "--config", "min.insync.replicas=3")
    assert defaulted.returncode == 0 and "above the replication factor (2)" in defaulted.stderr
    controller.script("CreateTopics", created("orders"))
    at_factor = replog(*base, "--replication-factor", "3", "--config", "min.insync.replicas=3")
    assert (at_factor.returncode, at_factor.stderr) == (0, "")


def partitions_created(name: str, code: int = 0, message: str = "") -> Any:
    result = cpr.CreatePartitionsTopicResult(
        name=name, error_code=code, error_message=message or None
    )
    return cpr.CreatePartitionsResponse(results=[result])


def test_alter_adds_partitions(controller: FakeKafkaListener) -> None:
    controller.script("CreatePartitions", partitions_created("orders"))
    outcome = replog(
        "topics", "alter", "--topic", "orders", "--partitions", "6",
        "--bootstrap-server", controller.address,
    )  # fmt: skip
    assert (outcome.returncode, outcome.stdout, outcome.stderr) == (
        0,
        "Altered topic orders: 6 partitions.\n",
        "",
    )
    (request,) = controller.asked("CreatePartitions")
    (topic,) = request.topics
    assert (topic.name, topic.count, topic.assignments) == ("orders", 6, None)
    assert not request.validate_only


def test_alter_refusals(controller: FakeKafkaListener) -> None:
    base = ("topics", "alter", "--partitions", "2", "--bootstrap-server", controller.address)
    controller.script(
        "CreatePartitions",
        partitions_created("orders", InvalidPartitionsError.code, "2 would not be an increase"),
    )
    assert_refused(replog(*base, "--topic", "orders"), "2 would not be an increase")
    controller.script(
        "CreatePartitions",
        partitions_created("nope", UnknownTopicOrPartitionError.code, "no such topic"),
    )
    assert_refused(replog(*base, "--topic", "nope"), "no such topic")
    quiet = replog(*base, "--topic", "nope", "--if-exists")
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")


@pytest.mark.parametrize(
    "args",
    [
        ["topics", "create", "--partitions", "3"],  # no --topic
        ["topics", "create", "--topic", "t", "--partitions", "0"],
        ["topics", "create", "--topic", "t", "--replication-factor", "x"],
        ["topics", "describe", "--timeout", "0"],
        ["topics", "delete"],
        ["topics", "alter", "--topic", "t"],  # no --partitions
        ["topics", "alter", "--topic", "t", "--partitions", "0"],
        ["topics"],
    ],
)
def test_usage_mistakes_exit_2(args: list[str]) -> None:
    outcome = replog(*args)
    assert outcome.returncode == 2
    assert "Traceback" not in outcome.stderr
    assert "usage: replog topics" in outcome.stderr


def test_delete(controller: FakeKafkaListener) -> None:
    base = ("topics", "delete", "--topic", "orders", "--bootstrap-server", controller.address)
    controller.script(
        "DeleteTopics",
        dtr.DeleteTopicsResponse(
            responses=[dtr.DeletableTopicResult(name="orders", topic_id=uuid.UUID(int=1))]
        ),
    )
    outcome = replog(*base)
    assert (outcome.returncode, outcome.stdout, outcome.stderr) == (
        0,
        "Deleted topic orders.\n",
        "",
    )
    (asked,) = controller.asked("DeleteTopics")
    assert [t.name for t in asked.topics] == ["orders"]  # v6: by name in `topics`

    missing = dtr.DeletableTopicResult(
        name="orders",
        error_code=UnknownTopicOrPartitionError.code,
        error_message="unknown topic 'orders'",
    )
    controller.script("DeleteTopics", dtr.DeleteTopicsResponse(responses=[missing]))
    assert_refused(replog(*base), "unknown topic 'orders'")
    quiet = replog(*base, "--if-exists")
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")


def test_deleting_an_internal_topic_is_refused_before_asking(controller: FakeKafkaListener) -> None:
    outcome = replog(
        "topics",
        "delete",
        "--topic",
        "__consumer_offsets",
        "--bootstrap-server",
        controller.address,
    )
    assert_refused(outcome, "__consumer_offsets is an internal topic and is not allowed")
    assert controller.asked("DeleteTopics") == []


# --- where the commands ask ---------------------------------------------------------------------


def write_cluster_file(directory: Path, *kafka_addresses: str) -> None:
    """A local cluster whose node i's Kafka listener is the i-th address (its gRPC listener
    is never asked)."""
    LocalCluster(
        str(directory),
        tuple(
            LocalNode(
                i,
                ("broker", "controller"),
                {"CONTROLLER": f"127.0.0.1:{free_port()}", "PLAINTEXT": address},
                str(directory / f"node-{i}"),
            )
            for i, address in enumerate(kafka_addresses, 1)
        ),
    ).write()


def test_the_local_clusters_kafka_listeners_are_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dead = f"127.0.0.1:{free_port()}"
    with listening(2) as (one, two):
        for node in (one, two):
            node.script("Metadata", cluster_metadata)
            node.script("CreateTopics", created("orders"))
        write_cluster_file(tmp_path / "elsewhere", dead, two.address)
        outcome = replog(
            "topics", "create", "--topic", "orders", "--data-dir", str(tmp_path / "elsewhere")
        )
        assert outcome.returncode == 0, outcome.stderr
        assert len(two.asked("CreateTopics")) == 1  # the dead node's listener is passed over

        # Without flags: ./.replog/cluster, as `replog quorum describe` does.
        write_cluster_file(tmp_path / ".replog" / "cluster", one.address, two.address)
        monkeypatch.chdir(tmp_path)
        assert replog("topics", "list").returncode == 0
        assert len(one.asked("Metadata")) == 1

        # --bootstrap-server wins over --data-dir.
        outcome = replog(
            "topics", "list", "--bootstrap-server", two.address,
            "--data-dir", str(tmp_path / "elsewhere"),
        )  # fmt: skip
        assert outcome.returncode == 0, outcome.stderr
        assert len(two.asked("Metadata")) == 1 and len(one.asked("Metadata")) == 1


def test_without_a_local_cluster_the_default_is_kafkas_port(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """127.0.0.1:9092 (here moved to a port of the test's: the machine's 9092 is not ours),
    and one line at once when nothing answers there."""
    monkeypatch.chdir(tmp_path)
    dead = f"127.0.0.1:{free_port()}"
    monkeypatch.setattr("replog.cli.controller_connection.DEFAULT_BOOTSTRAP", dead)
    assert assert_refused(replog("topics", "list")) == (
        f"replog topics: nothing answers at {dead} (the default) and there is no local cluster "
        "in .replog/cluster: pass --bootstrap-server, or start one with `replog cluster start`"
    )
    with listening() as (default,):
        default.script("Metadata", cluster_metadata)
        monkeypatch.setattr("replog.cli.controller_connection.DEFAULT_BOOTSTRAP", default.address)
        listed = replog("topics", "list")
        assert (listed.returncode, listed.stdout) == (0, "audit\norders\n"), listed.stderr
    assert_refused(
        replog("topics", "list", "--bootstrap-server", "localhost"),
        "--bootstrap-server: 'localhost'",
    )
    assert_refused(
        replog("topics", "list", "--data-dir", str(tmp_path / "none")),
        "no cluster in", "replog cluster start",
    )  # fmt: skip


def test_a_stopped_local_cluster_is_one_line_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`topics list` on a stopped local cluster names the addresses at once instead of retrying
    for --timeout (10 s); a --bootstrap-server the user names still is retried."""
    gone = f"127.0.0.1:{free_port()}"
    write_cluster_file(tmp_path / ".replog" / "cluster", gone)
    monkeypatch.chdir(tmp_path)
    started = time.monotonic()
    outcome = replog("topics", "list", "--timeout", "30")
    assert_refused(
        outcome, "no Kafka listener of the local cluster in", f"answers at {gone}",
        "is it running? (`replog cluster start`)",
    )  # fmt: skip
    assert time.monotonic() - started < 5
    assert (
        "of the local cluster"
        not in replog("topics", "list", "--bootstrap-server", gone, "--timeout", "0.3").stderr
    )


def test_no_broker_reachable_is_one_line_naming_the_addresses() -> None:
    dead = f"127.0.0.1:{free_port()}"
    outcome = replog("topics", "list", "--bootstrap-server", dead, "--timeout", "0.3")
    assert assert_refused(outcome) == (
        f"replog topics: Metadata: no answer within 0.3 s: {dead}: connection refused"
    )
    other = f"127.0.0.1:{free_port()}"
    both = replog("topics", "list", "--bootstrap-server", f"{dead},{other}", "--timeout", "0.3")
    assert assert_refused(both) == (
        f"replog topics: Metadata: no answer within 0.3 s: {dead}: connection refused; "
        f"{other}: connection refused"
    )


def test_a_listener_that_is_not_kafkas_is_named_at_once() -> None:
    """A gRPC port (an HTTP/2 server's first bytes) is refused at once, not waited out."""
    with http2_server() as address:
        started = time.monotonic()
        outcome = replog("topics", "list", "--bootstrap-server", address, "--timeout", "30")
    assert_refused(outcome, f"{address} answered HTTP/2", "not a Kafka listener")
    assert time.monotonic() - started < 5


def test_ctrl_c_exits_130(controller: FakeKafkaListener) -> None:
    controller.script("DeleteTopics", HANG)
    with interrupt_main_when(lambda: bool(controller.asked("DeleteTopics"))):
        outcome = replog(
            "topics", "delete", "--topic", "t", "--bootstrap-server", controller.address
        )
    assert (outcome.returncode, outcome.stderr) == (130, "replog topics: interrupted\n")


@pytest.mark.parametrize(
    ("command", "flags"),
    [
        ([], ["create", "list", "describe", "alter", "delete"]),
        (
            ["create"],
            ["--topic", "--partitions", "--replication-factor", "--config", "--if-not-exists"],
        ),
        (
            ["list"],
            ["--json", "--exclude-internal", "--bootstrap-server", "--data-dir", "--timeout"],
        ),
        (
            ["describe"],
            [
                "--topic",
                "--under-replicated-partitions",
                "--unavailable-partitions",
                "--under-min-isr-partitions",
                "--at-min-isr-partitions",
                "--topics-with-overrides",
                "--exclude-internal",
                "--json",
            ],
        ),
        (["alter"], ["--topic", "--partitions", "--if-exists", "--bootstrap-server"]),
        (["delete"], ["--topic", "--if-exists", "--bootstrap-server"]),
    ],
)
def test_every_command_has_help(command: list[str], flags: list[str]) -> None:
    outcome = replog("topics", *command, "--help")
    assert outcome.returncode == 0
    assert outcome.stdout.startswith(f"usage: replog topics {' '.join(command)}".rstrip())
    for flag in flags:
        assert flag in outcome.stdout


def test_the_replog_command_as_a_process(controller: FakeKafkaListener) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    env.pop("REPLOG_DEBUG", None)
    run = [sys.executable, "-m", "replog.cli.main", "topics"]
    listed = subprocess.run(
        [*run, "list", "--bootstrap-server", controller.address],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert (listed.returncode, listed.stdout) == (0, "audit\norders\n"), listed.stderr
    missing = subprocess.run(
        [*run, "describe", "--topic", "nope", "--bootstrap-server", controller.address],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert missing.returncode == 1
    assert missing.stderr == "replog topics: topic 'nope' does not exist\n"


def test_a_min_isr_above_the_replication_factor_counts_as_the_factor() -> None:
    """The leader caps min.insync.replicas at the replica count (KIP-966's effective min ISR)
    and takes acks=all writes; the filters say what the leader does (min ISR 5 on RF 3 must not
    be listed as under min ISR while writes go through)."""
    full = PartitionInfo(0, 1, 0, 0, (1, 2, 3), (1, 2, 3), (), (), (), None)
    assert not is_under_min_isr(full, 5) and is_at_min_isr(full, 5)
    shrunk = replace(full, isr=(1, 2))
    assert is_under_min_isr(shrunk, 5) and not is_at_min_isr(shrunk, 5)
    assert not is_under_min_isr(shrunk, 2) and is_at_min_isr(shrunk, 2)
    assert not is_under_min_isr(shrunk, None) and not is_at_min_isr(shrunk, None)
