"""Consumer groups through the Kafka listener of a real node (`replog node`).

- confluent-kafka (librdkafka, `group.protocol=classic`): two consumers of one group split a
  topic's partitions disjointly and together read every record produced after the split, each
  only from its own partitions; the group is listed and described as Stable with both members
  (by confluent-kafka's admin client, and by `replog consumer-groups --list/--describe --json`
  with each partition's owner and log-end offset, `--state`, `--members`); a consumer of the
  group started after both closed resumes from their commits, reading none of the records
  committed before; `--delete` refuses the group while it has members, then deletes it.
- kafka-python and aiokafka: two consumers of one group split a topic's partitions and commit.
- kafkajs (its default round-robin assigner): two consumers of one group split a topic's
  partitions disjointly and together read every record, each from its own partitions; their
  commits are what `replog consumer-groups --describe` shows.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import aiokafka
import kafka
import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient

from replog.admin.controller_client import ControllerClient
from replog.admin.controller_results import NewTopic
from replog.cli.main import main
from tests.confluent_producer import confluent_producer
from tests.eventually import wait_until
from tests.kafka.client_tools import run_kafkajs
from tests.kafka.kafka_node import RunningNode, running_node

PARTITIONS = 4
RECORDS = 40
KAFKAJS_TOPIC = "from-kafkajs"
KAFKAJS_PARTITIONS = 3
KAFKAJS_RECORDS = 30


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningNode]:
    properties = [
        "offsets.topic.num.partitions=3",
        "offsets.topic.replication.factor=1",
        "group.initial.rebalance.delay.ms=0",
    ]
    root = tmp_path_factory.mktemp("groups-node")
    with running_node(root, "kafka-groups-test", properties) as running:
        with ControllerClient(f"127.0.0.1:{running.grpc_port}", default_timeout_s=60) as admin:
            # Both tests' topics, long before a consumer asks: a group leader that sees a
            # subscribed topic without partitions assigns nothing until its next metadata.
            for created in admin.create_topics(
                [
                    NewTopic("events", PARTITIONS, 1),
                    NewTopic("more", 2, 1),
                    NewTopic(KAFKAJS_TOPIC, KAFKAJS_PARTITIONS, 1),
                ]
            ):
                assert created.error is None, created
        yield running


def produce(node: RunningNode, values: list[str]) -> None:
    with confluent_producer({"bootstrap.servers": node.kafka_address}) as producer:
        for i, value in enumerate(values):
            producer.produce("events", value=value.encode(), partition=i % PARTITIONS)
        assert producer.flush(30) == 0, node.log_text()[-3000:]


def consumer(node: RunningNode, name: str) -> Any:
    return Consumer(
        {
            "bootstrap.servers": node.kafka_address,
            "group.id": "readers",
            "group.protocol": "classic",
            "client.id": name,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
        }
    )


def test_two_confluent_consumers_split_the_partitions_and_resume_from_commits(
    node: RunningNode, capsys: pytest.CaptureFixture[str]
) -> None:
    members = {name: consumer(node, name) for name in ("c1", "c2")}
    read: dict[str, list[tuple[int, int, str]]] = {name: [] for name in members}
    try:
        for member in members.values():
            member.subscribe(["events"])

        def poll_all() -> None:
            for name, member in members.items():
                message = member.poll(0.1)
                if message is not None and message.error() is None:
                    read[name].append(
                        (message.partition(), message.offset(), message.value().decode())
                    )

        def both_assigned() -> bool:
            poll_all()
            return all(member.assignment() for member in members.values())

        # The first member may own every partition for a while: the split comes when the
        # second one has joined (a rebalance).
        wait_until(both_assigned, "both members have partitions", timeout_s=60)
        produce(node, [f"first-{i}" for i in range(RECORDS)])

        def every_record_read() -> bool:
            poll_all()
            return sum(map(len, read.values())) >= RECORDS

        wait_until(every_record_read, "every record read", timeout_s=60)
        owned = {
            name: {tp.partition for tp in member.assignment()} for name, member in members.items()
        }
        assert owned["c1"] and owned["c2"] and not owned["c1"] & owned["c2"], owned
        assert owned["c1"] | owned["c2"] == set(range(PARTITIONS))
        for name, records in read.items():
            assert {partition for partition, _, _ in records} <= owned[name]
        values = sorted(value for records in read.values() for _, _, value in records)
        assert values == sorted(f"first-{i}" for i in range(RECORDS))

        with AdminClient({"bootstrap.servers": node.kafka_address}) as admin:
            listed = admin.list_consumer_groups().result(30)
            assert [g.group_id for g in listed.valid] == ["readers"]
            (described,) = admin.describe_consumer_groups(["readers"]).values()
            group = described.result(30)
        assert str(group.state).endswith("STABLE")
        assert sorted(m.client_id for m in group.members) == ["c1", "c2"]

        tool = ["consumer-groups", "--bootstrap-server", node.kafka_address, "--json"]
        assert main([*tool, "--list"]) == 0
        assert [g["group"] for g in json.loads(capsys.readouterr().out)] == ["readers"]
        assert main([*tool, "--describe", "--group", "readers"]) == 0
        rows = json.loads(capsys.readouterr().out)
        assert [(r["topic"], r["partition"]) for r in rows] == [
            ("events", p) for p in range(PARTITIONS)
        ]
        assert {r["clientId"] for r in rows} == {"c1", "c2"}
        assert {r["host"] for r in rows} == {"/127.0.0.1"}
        assert all(r["consumerId"] and r["logEndOffset"] == RECORDS // PARTITIONS for r in rows)
        assert main([*tool, "--describe", "--group", "readers", "--state"]) == 0
        state = json.loads(capsys.readouterr().out)
        assert (state["state"], state["members"], state["coordinatorId"]) == ("Stable", 2, 1)
        assert main([*tool, "--describe", "--group", "readers", "--members"]) == 0
        listed = json.loads(capsys.readouterr().out)
        assert sorted((m["clientId"], m["partitions"]) for m in listed) == [("c1", 2), ("c2", 2)]
        assert main([*tool, "--delete", "--group", "readers"]) == 1  # it has members
        assert json.loads(capsys.readouterr().out) == [
            {"group": "readers", "error": "NON_EMPTY_GROUP"}
        ]

        for member in members.values():
            member.commit(asynchronous=False)
    finally:
        for member in members.values():
            member.close()

    produce(node, [f"second-{i}" for i in range(8)])
    again = consumer(node, "c3")
    resumed: list[str] = []
    try:
        again.subscribe(["events"])
        started = time.monotonic()
        while len(resumed) < 8 and time.monotonic() - started < 60:
            message = again.poll(0.2)
            if message is not None and message.error() is None:
                resumed.append(message.value().decode())
        # A little longer: nothing committed before may come again.
        deadline = time.monotonic() + 1
        while time.monotonic() < deadline:
            message = again.poll(0.1)
            if message is not None and message.error() is None:
                resumed.append(message.value().decode())
    finally:
        again.close()
    assert sorted(resumed) == sorted(f"second-{i}" for i in range(8)), node.log_text()[-3000:]
    # Every member left: the group and its offsets can be deleted.
    assert main([*tool, "--delete", "--group", "readers"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"group": "readers", "error": None}]


def test_kafka_python_and_aiokafka_groups_split_and_commit(node: RunningNode) -> None:
    python_members = [
        kafka.KafkaConsumer(
            "more",
            bootstrap_servers=node.kafka_address,
            group_id="kafka-python",
            client_id=f"k{i}",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            # kafka-python 3.0 loses a metadata update asked for while an earlier request is in
            # flight (`ClusterMetadata.set_topics`' TODO): a leader that then assigns without
            # the topic's partitions waits for the next refresh, 5 minutes by default.
            metadata_max_age_ms=1000,
        )
        for i in range(2)
    ]
    try:

        def split_and_committed() -> bool:
            for member in python_members:
                member.poll(50)
            owned = [member.assignment() for member in python_members]
            if not all(owned) or owned[0] & owned[1]:
                return False
            try:
                for member in python_members:
                    offsets = {tp: kafka.OffsetAndMetadata(1, "", -1) for tp in member.assignment()}
                    member.commit(offsets)
            except (kafka.errors.RebalanceInProgressError, kafka.errors.CommitFailedError):
                return False  # a rebalance started after the split (new topic metadata)
            reader = python_members[0]
            return [reader.committed(kafka.TopicPartition("more", p)) for p in (0, 1)] == [1, 1]

        wait_until(split_and_committed, "kafka-python's members split and commit", timeout_s=60)
    finally:
        for member in python_members:
            member.close()

    async def aiokafka_group() -> list[set[int]]:
        members = [
            aiokafka.AIOKafkaConsumer(
                "more",
                bootstrap_servers=node.kafka_address,
                group_id="aiokafka",
                client_id=f"a{i}",
                enable_auto_commit=False,
            )
            for i in range(2)
        ]
        for member in members:
            await member.start()
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                for member in members:
                    await member.getmany(timeout_ms=50)
                owned = [{tp.partition for tp in member.assignment()} for member in members]
                if all(owned) and not owned[0] & owned[1]:
                    for member in members:
                        await member.commit({tp: 2 for tp in member.assignment()})
                    return owned
            raise AssertionError(f"aiokafka's members did not split the partitions: {owned}")
        finally:
            for member in members:
                await member.stop()

    assert sorted(map(sorted, asyncio.run(aiokafka_group()))) == [[0], [1]]


def test_kafkajs_group_splits_the_partitions_and_commits(
    node: RunningNode, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run_kafkajs(node.kafka_address, "group", KAFKAJS_TOPIC, str(KAFKAJS_RECORDS))
    owned = {name: set(partitions) for name, partitions in result["owned"].items()}
    assert owned["j1"] and owned["j2"] and not owned["j1"] & owned["j2"], owned
    assert owned["j1"] | owned["j2"] == set(range(KAFKAJS_PARTITIONS))
    for name, records in result["read"].items():
        assert {partition for partition, _, _ in records} <= owned[name], (name, records)
    values = sorted(value for records in result["read"].values() for _, _, value in records)
    assert values == sorted(f"kafkajs-{i}" for i in range(KAFKAJS_RECORDS))

    tool = ["consumer-groups", "--bootstrap-server", node.kafka_address, "--json"]
    assert main([*tool, "--describe", "--group", "kafkajs"]) == 0
    rows = json.loads(capsys.readouterr().out)
    each = KAFKAJS_RECORDS // KAFKAJS_PARTITIONS
    assert [(r["topic"], r["partition"], r["currentOffset"], r["lag"]) for r in rows] == [
        (KAFKAJS_TOPIC, p, each, 0) for p in range(KAFKAJS_PARTITIONS)
    ]
