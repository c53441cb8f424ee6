"""replog's own client against Apache Kafka 4.4's recorded answers: the exchanges
bench/kafka_client_check.py recorded (`--record`) with replog's Producer, Consumer and Admin
against a 3-node Kafka, served by the replay server (no JVM). Each test repeats one check's
calls and asserts what the client made of Kafka's real answers to Metadata, Produce, Fetch,
ListOffsets, FindCoordinator, JoinGroup / SyncGroup, ConsumerGroupHeartbeat, OffsetCommit,
CreateTopics, DescribeConfigs, DescribeCluster, DescribeQuorum and the other admin calls."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from typing import Any

import replog
from replog import aio
from tests.kafka.recorded_exchanges import RECORDED, Recording
from tests.kafka.replay_server import ReplayServer

# The settings the checks ran with (bench/kafka_client_check.py), so that the requests match.
TIMEOUTS = {"request.timeout.ms": 10_000, "default.api.timeout.ms": 30_000}
PRODUCER_TIMEOUTS = {"request.timeout.ms": 10_000, "max.block.ms": 30_000}
PARTITIONS = 3
GROUP_RECORDS = 300


@contextlib.contextmanager
def kafka(check: str) -> Iterator[str]:
    """The bootstrap servers of Kafka's stand-in for `check`; no request may go unrecorded."""
    with ReplayServer(Recording.load(RECORDED / f"replog-{check}.json")) as server:
        yield server.bootstrap
        assert server.misses == []


def settings(bootstrap: str, **more: Any) -> dict[str, Any]:
    return {
        "bootstrap_servers": bootstrap,
        **{k.replace(".", "_"): v for k, v in TIMEOUTS.items()},
        **more,
    }


def topic_values(topic: str, count: int = GROUP_RECORDS) -> list[bytes]:
    return [b"%s-%05d" % (topic.encode(), i) for i in range(count)]


def test_the_asyncio_producer_is_given_the_offsets_kafka_gave() -> None:
    values = [b"aio-%04d" % i for i in range(200)]

    async def run(bootstrap: str) -> list[int]:
        config = {"bootstrap.servers": bootstrap, **PRODUCER_TIMEOUTS}
        async with aio.Producer(config) as producer:
            return [(await producer.send("kc-produce-aio", v)).offset for v in values]

    with kafka("produce-aio") as bootstrap:
        assert asyncio.run(run(bootstrap)) == list(range(200))


def test_an_assigned_consumer_reads_kafkas_records() -> None:
    topic = "kc-consume"
    got: list[bytes] = []
    with (
        kafka("consume-assigned") as bootstrap,
        replog.Consumer(**settings(bootstrap, auto_offset_reset="earliest")) as consumer,
    ):
        consumer.assign([replog.TopicPartition(topic, p) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 30
        while len(got) < GROUP_RECORDS and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got += [r.value or b"" for r in records]
    assert sorted(got) == topic_values(topic)


def test_group_members_of_both_protocols_read_and_commit() -> None:
    async def member(bootstrap: str, protocol: str) -> int:
        topic = f"kc-group-aio-{protocol}"
        config = settings(
            bootstrap, group_id=topic, group_protocol=protocol, auto_offset_reset="earliest"
        )
        got = 0
        async with aio.Consumer(topic, **config) as consumer:
            deadline = time.monotonic() + 30
            while got < GROUP_RECORDS and time.monotonic() < deadline:
                got += sum(map(len, (await consumer.poll(timeout_ms=500)).values()))
            await consumer.commit()
        return got

    with kafka("group-aio") as bootstrap:
        assert asyncio.run(member(bootstrap, "classic")) == GROUP_RECORDS
        assert asyncio.run(member(bootstrap, "consumer")) == GROUP_RECORDS


def test_admin_describes_kafkas_cluster_and_quorum() -> None:
    with kafka("admin-describe-cluster") as bootstrap, replog.Admin(**settings(bootstrap)) as admin:
        cluster = admin.describe_cluster()
    assert sorted(b.broker_id for b in cluster.brokers) == [1, 2, 3]
    assert cluster.cluster_id and cluster.controller_id in (1, 2, 3)
    with kafka("admin-describe-quorum") as bootstrap, replog.Admin(**settings(bootstrap)) as admin:
        quorum = admin.describe_quorum()
    assert sorted(quorum.voters) == [1, 2, 3] and quorum.leader_id in quorum.voters


def test_admin_creates_grows_and_deletes_topics_at_kafka() -> None:
    with kafka("admin-create-topics") as bootstrap, replog.Admin(**settings(bootstrap)) as admin:
        created = admin.create_topics(
            [replog.NewTopic("kc-admin-created", 2, 3, configs={"min.insync.replicas": "2"})]
        )
    assert [t.name for t in created] == ["kc-admin-created"]
    with (
        kafka("admin-create-partitions") as bootstrap,
        replog.Admin(**settings(bootstrap)) as admin,
    ):
        admin.create_partitions({"kc-admin-grow": 3})
    with kafka("admin-delete-topics") as bootstrap, replog.Admin(**settings(bootstrap)) as admin:
        admin.delete_topics(["kc-admin-deleted"])


def test_admin_reads_kafkas_topics_and_configs() -> None:
    with (
        kafka("admin-list-describe-topics") as bootstrap,
        replog.Admin(**settings(bootstrap)) as admin,
    ):
        names = admin.list_topics()
        described = admin.describe_topics(["kc-admin-topic"])["kc-admin-topic"]
    assert "kc-admin-topic" in names and "__consumer_offsets" not in names
    assert [p.partition for p in described.partitions] == [0, 1, 2]
    assert all(
        sorted(p.replicas) == [1, 2, 3] and p.leader in p.replicas for p in described.partitions
    )
    resource = replog.ConfigResource(replog.ConfigResourceType.TOPIC, "kc-admin-configs")
    broker = replog.ConfigResource(replog.ConfigResourceType.BROKER, "1")
    with kafka("admin-configs") as bootstrap, replog.Admin(**settings(bootstrap)) as admin:
        configs = admin.describe_configs([resource, broker])
        admin.incremental_alter_configs({resource: {"retention.ms": "3600000"}})
        admin.incremental_alter_configs({resource: {"retention.ms": None}})
    topic_entries = {e.name: e.value for e in configs[resource].entries}
    assert topic_entries["min.insync.replicas"] == "2"
    assert "log.dirs" in {e.name for e in configs[broker].entries}


def test_admin_lists_offsets_and_deletes_records_at_kafka() -> None:
    tp = replog.TopicPartition("kc-admin-offsets", 0)
    with (
        kafka("admin-offsets-delete-records") as bootstrap,
        replog.Admin(**settings(bootstrap)) as admin,
    ):
        earliest = admin.list_offsets({tp: replog.OffsetSpec.EARLIEST})[tp]
        latest = admin.list_offsets({tp: replog.OffsetSpec.LATEST})[tp]
        low = admin.delete_records({tp: 4})[tp]
    assert (earliest and earliest.offset, latest and latest.offset, low) == (0, 10, 4)
