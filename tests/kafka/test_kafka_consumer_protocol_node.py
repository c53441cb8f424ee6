"""KIP-848's consumer group protocol through the Kafka listener of a real node, with
confluent-kafka (librdkafka, `group.protocol=consumer`, ConsumerGroupHeartbeat v1):

- two consumers of one group split a topic's partitions disjointly (the coordinator's `uniform`
  assignor) and commit with their member epochs (OffsetCommit v9+); the admin client and
  `replog consumer-groups --describe` (ConsumerGroupDescribe at the Kafka listener) describe
  the group; one consumer closes (it leaves with epoch -1) and the other takes every partition;
- a member killed with kill -9 (a consumer in a child process) has its partitions moved to the
  other once `group.consumer.session.timeout.ms` (3 s here) passes;
- librdkafka's regex subscription and replog's `subscribe(pattern=...)` share a group, the
  coordinator matching both regexes, a topic created later included;
- online migration: a `group.protocol=consumer` member joining a classic group converts it,
  the classic member (now inside a consumer group) and the new one split the partitions; when
  the new one leaves, the group goes back to the classic protocol and the classic member
  takes every partition again.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from replog.admin.controller_client import ControllerClient
from replog.admin.controller_results import NewTopic
from replog.cli.main import main
from tests.eventually import wait_until
from tests.kafka.kafka_node import RunningNode, running_node

PARTITIONS = 4
SESSION_MS = 3000


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningNode]:
    properties = [
        "offsets.topic.num.partitions=3",
        "offsets.topic.replication.factor=1",
        f"group.consumer.session.timeout.ms={SESSION_MS}",
        "group.consumer.min.session.timeout.ms=1",
        "group.consumer.heartbeat.interval.ms=500",
        "group.consumer.min.heartbeat.interval.ms=1",
        "group.initial.rebalance.delay.ms=0",
    ]
    root = tmp_path_factory.mktemp("consumer-protocol-node")
    with running_node(root, "kafka-consumer-protocol-test", properties) as running:
        with ControllerClient(f"127.0.0.1:{running.grpc_port}", default_timeout_s=60) as admin:
            for created in admin.create_topics(
                [NewTopic("split", PARTITIONS, 1), NewTopic("killed", PARTITIONS, 1)]
            ):
                assert created.error is None, created
        yield running


def config(node: RunningNode, group: str, name: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": node.kafka_address,
        "group.id": group,
        "group.protocol": "consumer",
        "client.id": name,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }


def owned(member: Any) -> set[int]:
    return {tp.partition for tp in member.assignment()}


def test_two_members_split_and_one_takes_all_when_the_other_leaves(
    node: RunningNode, capsys: pytest.CaptureFixture[str]
) -> None:
    members = {name: Consumer(config(node, "split-group", name)) for name in ("c1", "c2")}
    try:
        for member in members.values():
            member.subscribe(["split"])

        def split() -> bool:
            for member in members.values():
                member.poll(0.1)
            mine = [owned(m) for m in members.values()]
            return all(mine) and not mine[0] & mine[1] and mine[0] | mine[1] == set(range(4))

        wait_until(split, "both members own partitions", timeout_s=60)
        assert sorted(len(owned(m)) for m in members.values()) == [2, 2]
        # Commits and fetches carry the member epoch (OffsetCommit/OffsetFetch v9+).
        first = members["c1"]
        mine = [TopicPartition("split", p, 3) for p in sorted(owned(first))]
        assert all(tp.error is None for tp in first.commit(offsets=mine, asynchronous=False))
        assert [tp.offset for tp in first.committed(mine, timeout=30)] == [3, 3]
        with AdminClient({"bootstrap.servers": node.kafka_address}) as admin:
            (described,) = admin.describe_consumer_groups(["split-group"]).values()
            group = described.result(30)
        assert sorted(m.client_id for m in group.members) == ["c1", "c2"]

        tool = ["consumer-groups", "--bootstrap-server", node.kafka_address, "--json"]
        assert main([*tool, "--list"]) == 0
        listed = json.loads(capsys.readouterr().out)
        assert [(g["group"], g["state"]) for g in listed] == [("split-group", "Stable")]
        assert main([*tool, "--describe", "--group", "split-group"]) == 0
        rows = json.loads(capsys.readouterr().out)
        by_partition = {r["partition"]: r for r in rows}
        assert sorted(by_partition) == list(range(PARTITIONS))
        for name, member in members.items():
            assert {p for p, r in by_partition.items() if r["clientId"] == name} == owned(member)
        assert {r["currentOffset"] for r in rows} == {3, None}
        assert main([*tool, "--describe", "--group", "split-group", "--state"]) == 0
        state = json.loads(capsys.readouterr().out)
        assert (state["state"], state["members"], state["assignmentStrategy"]) == (
            "Stable",
            2,
            "uniform",
        )
    except BaseException:
        members["c2"].close()  # closed below otherwise, once it has taken every partition
        raise
    finally:
        members["c1"].close()
    survivor = members["c2"]
    try:

        def takes_all() -> bool:
            survivor.poll(0.1)
            return owned(survivor) == set(range(PARTITIONS))

        wait_until(takes_all, "the survivor owns every partition", timeout_s=30)
    finally:
        survivor.close()


CHILD = textwrap.dedent(
    """
    import sys
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({
        "bootstrap.servers": sys.argv[1], "group.id": "killed-group",
        "group.protocol": "consumer", "client.id": "doomed",
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
    })
    consumer.subscribe(["killed"])
    announced = False
    while True:
        consumer.poll(0.1)
        if consumer.assignment() and not announced:
            print("assigned", flush=True)
            announced = True
    """
)


def test_a_killed_member_s_partitions_move_after_the_session_timeout(node: RunningNode) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, node.kafka_address],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    other = Consumer(config(node, "killed-group", "alive"))
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == b"assigned"
        other.subscribe(["killed"])

        def split() -> bool:
            other.poll(0.1)
            return 0 < len(owned(other)) < PARTITIONS

        wait_until(split, "the second member shares the partitions", timeout_s=60)
        child.send_signal(signal.SIGKILL)
        child.wait(10)

        def takes_all() -> bool:
            other.poll(0.1)
            return owned(other) == set(range(PARTITIONS))

        # The session timeout (3 s) plus a heartbeat interval or two.
        wait_until(takes_all, "the dead member's partitions move", timeout_s=SESSION_MS / 1000 + 10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
        if child.stdout is not None:
            child.stdout.close()
        other.close()


def test_a_regex_subscription_is_matched_by_the_coordinator_beside_replogs_pattern(
    node: RunningNode,
) -> None:
    """librdkafka's regex subscription (`^...`, KIP-848's SubscribedTopicRegex) and replog's
    consumer subscribed with `pattern=` in one group: the coordinator matches both, a topic
    created later joins the assignment, the other topics stay out."""
    from replog.client.sync_consumer import Consumer as ReplogConsumer

    def create(*topics: str) -> None:
        with ControllerClient(f"127.0.0.1:{node.grpc_port}", default_timeout_s=60) as admin:
            for made in admin.create_topics([NewTopic(t, 2, 1) for t in topics]):
                assert made.error is None, made

    create("rx-a", "other")
    theirs = Consumer(config(node, "regex-group", "librdkafka"))
    ours = ReplogConsumer(
        bootstrap_servers=node.kafka_address,
        group_id="regex-group",
        group_protocol="consumer",
        client_id="replog",
        retry_backoff_max_ms=200,
    )
    try:
        theirs.subscribe(["^rx-.*"])
        ours.subscribe(pattern=r"rx-.*")

        def together(count: int) -> bool:
            theirs.poll(0.05)
            ours.poll(50)
            mine = {(tp.topic, tp.partition) for tp in theirs.assignment()}
            held = {(tp.topic, tp.partition) for tp in ours.assignment()}
            return len(mine | held) == count and not mine & held and bool(mine) and bool(held)

        wait_until(lambda: together(2), "both share rx-a", timeout_s=60)
        create("rx-b")
        wait_until(lambda: together(4), "rx-b joins the assignment", timeout_s=60)
        topics = {tp.topic for tp in [*theirs.assignment(), *ours.assignment()]}
        assert topics == {"rx-a", "rx-b"} and ours.subscription() <= {"rx-a", "rx-b"}
    finally:
        theirs.close()
        ours.close()


def test_online_migration_between_a_classic_and_a_consumer_protocol_member(
    node: RunningNode,
) -> None:
    classic = Consumer(
        {
            **config(node, "mixed-group", "classic"),
            "group.protocol": "classic",
            "partition.assignment.strategy": "range",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 100,
        }
    )
    modern: Any = None
    try:
        classic.subscribe(["split"])

        def classic_owns_all() -> bool:
            classic.poll(0.05)
            return owned(classic) == set(range(PARTITIONS))

        wait_until(classic_owns_all, "the classic member owns every partition", timeout_s=30)
        modern = Consumer(config(node, "mixed-group", "modern"))
        modern.subscribe(["split"])

        def split() -> bool:
            classic.poll(0.05)
            modern.poll(0.05)
            mine, theirs = owned(classic), owned(modern)
            return (
                bool(mine)
                and bool(theirs)
                and not mine & theirs
                and (mine | theirs == set(range(PARTITIONS)))
            )

        wait_until(split, "the two protocols' members split the partitions", timeout_s=30)
        assert sorted([len(owned(classic)), len(owned(modern))]) == [2, 2]
        modern.close()
        modern = None
        wait_until(classic_owns_all, "the classic member owns every partition again", timeout_s=30)
    finally:
        if modern is not None:
            modern.close()
        classic.close()
