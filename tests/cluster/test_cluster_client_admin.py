"""The Admin clients (blocking `replog.Admin` and asyncio `replog.aio.Admin`) on a real 3-node
cluster (issue #7): every method once each way, and every bad input gets its typed error.

- Topics: create (partitions, replication factor, configs), list, describe (leader, replicas,
  isr, flags), grow, delete; the brokers know a topic as soon as create_topics returns.
- Configs: describe, set and delete an override.
- Records: delete_records moves the log start; list_offsets answers earliest, latest, by
  timestamp and max timestamp.
- Elections and reassignments: reordering the replicas and electing the preferred leader moves
  the leadership; reassignments list empty once done.
- Cluster and quorum descriptions.
- Flags: a killed broker makes its single-replica partition offline and its replicated
  partition under-replicated; both clear after it restarts (last test: it restarts a node).
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from client_cluster import ClientCluster, client_cluster, kafka_metadata, run_blocking
from cluster_helpers import wait_for

from replog import Admin, AlterConfigOp, ConfigResource, NewPartitions, NewTopic, OffsetSpec, aio
from replog.admin.controller_results import AlterConfigOpType, ElectionType
from replog.client.records import OffsetAndTimestamp, TopicPartition
from replog.errors import (
    ClientClosedError,
    ElectionNotNeededError,
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidTopicError,
    OffsetOutOfRangeError,
    ReplogError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from replog.record.builder import BatchBuilder
from replog.replication import messages as m
from tests.kafka_broker_clients import kafka_broker_client

pytestmark = pytest.mark.slow

# Short failure detection, so that the offline / under-replicated test takes seconds.
FAST_FAILURE_DETECTION = (
    "--override",
    "broker.heartbeat.interval.ms=500",
    "--override",
    "broker.session.timeout.ms=4000",
    "--override",
    "replica.lag.time.max.ms=2000",
)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClientCluster]:
    with client_cluster(tmp_path_factory.mktemp("c"), 3, *FAST_FAILURE_DETECTION) as started:
        yield started


def kafka(cluster: ClientCluster) -> str:
    """The brokers' Kafka listeners: the Admin client's bootstrap."""
    return ",".join(n.kafka_address or "" for n in cluster.loopback.layout.nodes)


@pytest.fixture
def admin(cluster: ClientCluster) -> Iterator[Admin]:
    with Admin(bootstrap_servers=kafka(cluster), default_api_timeout_ms=20_000) as client:
        yield client


async def produce(address: str, topic: str, partition: int, timestamps: list[int]) -> int:
    """Append one batch, one record per timestamp, at the leader at `address`; its base offset."""
    builder = BatchBuilder()
    for i, timestamp in enumerate(timestamps):
        builder.append(timestamp, None, b"record-%d" % i)
    request = m.ProduceRequest(
        m.ACKS_ALL, 10_000, (m.ProducePartition(topic, partition, builder.build()),)
    )
    async with kafka_broker_client(address) as client:
        (result,) = (await client.produce(request)).partitions
    assert result.error is None, result.error
    return result.base_offset


def broker_knows(address: str, topic: str, partitions: int) -> bool:
    answer = run_blocking(kafka_metadata(address, topic))
    (found,) = answer.topics
    return found.error_code == 0 and len(found.partitions) == partitions


# --- topics ----------------------------------------------------------------------------------


def test_topic_lifecycle(cluster: ClientCluster, admin: Admin) -> None:
    (created,) = admin.create_topics(
        [NewTopic("life", 3, 3, {"cleanup.policy": "compact"})], timeout_ms=20_000
    )
    assert (created.name, created.num_partitions, created.replication_factor) == ("life", 3, 3)
    # create_topics returns once every broker serves the topic: a client may use it at once.
    assert all(broker_knows(a, "life", 3) for a in cluster.kafka_addresses.values())
    assert "life" in admin.list_topics()

    description = admin.describe_topics(["life"])["life"]
    assert description.topic_id == created.topic_id
    assert description.replication_factor == 3 and not description.internal
    assert [p.partition for p in description.partitions] == [0, 1, 2]
    for p in description.partitions:
        assert p.leader in p.replicas and sorted(p.replicas) == sorted(cluster.addresses)
        assert sorted(p.isr) == sorted(p.replicas)
        assert not p.offline and not p.under_replicated
    assert "life" in admin.describe_topics()  # every topic

    admin.create_partitions({"life": 5})
    assert len(admin.describe_topics(["life"])["life"].partitions) == 5
    assert all(broker_knows(a, "life", 5) for a in cluster.kafka_addresses.values())
    admin.create_partitions({"life": NewPartitions("life", 6)}, validate_only=True)
    assert len(admin.describe_topics(["life"])["life"].partitions) == 5

    (deleted,) = admin.delete_topics(["life"])
    assert deleted.name == "life" and deleted.topic_id == created.topic_id
    assert "life" not in admin.list_topics()


def test_validate_only_creates_nothing(admin: Admin) -> None:
    (checked,) = admin.create_topics([NewTopic("dry", 2, 3)], validate_only=True)
    assert checked.error is None
    assert "dry" not in admin.list_topics()


BAD_INPUTS: list[tuple[str, Callable[[Admin], Any], type[ReplogError], str]] = [
    (
        "topic exists",
        lambda a: a.create_topics([NewTopic("taken", 1, 3)]),
        TopicAlreadyExistsError,
        "'taken'",
    ),
    (
        "0 partitions",
        lambda a: a.create_topics([NewTopic("p0", 0, 3)]),
        InvalidPartitionsError,
        "p0",
    ),
    (
        "rf > brokers",
        lambda a: a.create_topics([NewTopic("rf5", 1, 5)]),
        InvalidReplicationFactorError,
        "rf5",
    ),
    (
        "illegal name",
        lambda a: a.create_topics([NewTopic("bad name", 1, 1)]),
        InvalidTopicError,
        "bad name",
    ),
    (
        "bad config value",
        lambda a: a.create_topics([NewTopic("cfg", 1, 1, {"cleanup.policy": "sometimes"})]),
        InvalidConfigError,
        "cleanup.policy",
    ),
    (
        "unknown config",
        lambda a: a.create_topics([NewTopic("cfg", 1, 1, {"no.such.config": "1"})]),
        InvalidConfigError,
        "no.such.config",
    ),
    ("delete missing", lambda a: a.delete_topics(["ghost"]), UnknownTopicOrPartitionError, "ghost"),
    (
        "describe missing",
        lambda a: a.describe_topics(["ghost"]),
        UnknownTopicOrPartitionError,
        "topic 'ghost' does not exist",
    ),
    (
        "shrink partitions",
        lambda a: a.create_partitions({"taken": 1}),
        InvalidPartitionsError,
        "taken",
    ),
    (
        "grow missing",
        lambda a: a.create_partitions({"ghost": 3}),
        UnknownTopicOrPartitionError,
        "ghost",
    ),
    (
        "configs of missing",
        lambda a: a.describe_configs([ConfigResource.topic("ghost")]),
        UnknownTopicOrPartitionError,
        "ghost",
    ),
    (
        "bad config change",
        lambda a: a.incremental_alter_configs(
            {ConfigResource.topic("taken"): {"retention.ms": "x"}}
        ),
        InvalidConfigError,
        "retention.ms",
    ),
    (
        "delete records of missing",
        lambda a: a.delete_records({TopicPartition("ghost", 0): 0}),
        UnknownTopicOrPartitionError,
        "topic 'ghost' does not exist",
    ),
    (
        "delete records of missing partition",
        lambda a: a.delete_records({TopicPartition("taken", 9): 0}),
        UnknownTopicOrPartitionError,
        "taken-9",
    ),
    (
        "delete records beyond the end",
        lambda a: a.delete_records({TopicPartition("taken", 0): 1000}),
        OffsetOutOfRangeError,
        "taken-0",
    ),
    (
        "delete records at a negative offset",
        lambda a: a.delete_records({TopicPartition("taken", 0): -5}),
        InvalidRequestError,
        "taken-0",
    ),
    (
        "offsets of missing",
        lambda a: a.list_offsets({TopicPartition("ghost", 0): OffsetSpec.LATEST}),
        UnknownTopicOrPartitionError,
        "ghost",
    ),
    (
        "offsets for a bad timestamp",
        lambda a: a.list_offsets({TopicPartition("taken", 0): -7}),
        InvalidRequestError,
        "-7",
    ),
    (
        "reassign to a missing broker",
        lambda a: a.alter_partition_reassignments({TopicPartition("taken", 0): [1, 2, 99]}),
        InvalidReplicaAssignmentError,
        "99",
    ),
    (
        "elect with a bad type",
        lambda a: a.elect_leaders("sometimes", [TopicPartition("taken", 0)]),
        InvalidRequestError,
        "sometimes",
    ),
    (
        "elect for a missing topic",
        lambda a: a.elect_leaders("preferred", [TopicPartition("ghost", 0)]),
        UnknownTopicOrPartitionError,
        "ghost",
    ),
    ("a negative timeout", lambda a: a.list_topics(timeout_ms=-1), InvalidRequestError, "-1"),
    (
        "a string for a list",
        lambda a: a.delete_topics("taken"),
        InvalidRequestError,
        "'taken'",
    ),
]


@pytest.mark.parametrize(
    ("call", "error", "named"),
    [case[1:] for case in BAD_INPUTS],
    ids=[case[0] for case in BAD_INPUTS],
)
def test_bad_inputs_get_typed_errors(
    cluster: ClientCluster,
    admin: Admin,
    call: Callable[[Admin], Any],
    error: type[ReplogError],
    named: str,
) -> None:
    cluster.create_topic("taken", 1, 3)
    with pytest.raises(error) as raised:
        call(admin)
    assert named in str(raised.value)


# --- configs ---------------------------------------------------------------------------------


def test_describe_and_alter_configs(cluster: ClientCluster, admin: Admin) -> None:
    cluster.create_topic("configured", 1, 3, {"retention.ms": "3600000"})
    resource = ConfigResource.topic("configured")
    configs = admin.describe_configs([resource])[resource]
    assert configs.overrides() == {"retention.ms": "3600000"}
    entry = {e.name: e for e in configs.entries}["cleanup.policy"]
    assert entry.value == "delete" and entry.is_default

    admin.incremental_alter_configs(
        {resource: [AlterConfigOp("cleanup.policy", AlterConfigOpType.SET, "compact")]}
    )
    admin.incremental_alter_configs({resource: {"retention.ms": None}})  # back to the default
    after = admin.describe_configs([resource], ["cleanup.policy", "retention.ms"])[resource]
    assert after.overrides() == {"cleanup.policy": "compact"}
    assert {e.name for e in after.entries} == {"cleanup.policy", "retention.ms"}

    admin.incremental_alter_configs({resource: {"cleanup.policy": "delete"}}, validate_only=True)
    assert admin.describe_configs([resource])[resource].overrides() == {"cleanup.policy": "compact"}
    broker = admin.describe_configs([ConfigResource.broker(1)])[ConfigResource.broker(1)]
    assert broker.entries


# --- records and offsets ---------------------------------------------------------------------


def test_delete_records_and_list_offsets(cluster: ClientCluster, admin: Admin) -> None:
    cluster.create_topic("records", 2, 3)
    leader = admin.describe_topics(["records"])["records"].partitions[0].leader
    assert leader is not None
    base = asyncio.run(
        produce(cluster.kafka_addresses[leader], "records", 0, [1000, 2000, 3000, 4000, 5000])
    )
    assert base == 0
    tp, empty = TopicPartition("records", 0), TopicPartition("records", 1)
    offsets = admin.list_offsets(
        {tp: OffsetSpec.EARLIEST, empty: OffsetSpec.LATEST}, timeout_ms=10_000
    )
    assert offsets[tp] is not None and offsets[tp].offset == 0
    assert offsets[empty] is not None and offsets[empty].offset == 0
    assert admin.list_offsets({tp: OffsetSpec.LATEST})[tp] == OffsetAndTimestamp(5, -1, 0)
    by_time = admin.list_offsets({tp: 2500})[tp]
    assert by_time is not None and (by_time.offset, by_time.timestamp) == (2, 3000)
    assert admin.list_offsets({tp: 9999})[tp] is None
    newest = admin.list_offsets({tp: OffsetSpec.MAX_TIMESTAMP})[tp]
    assert newest is not None and (newest.offset, newest.timestamp) == (4, 5000)

    assert admin.delete_records({tp: 2}) == {tp: 2}
    earliest = admin.list_offsets({tp: OffsetSpec.EARLIEST})[tp]
    assert earliest is not None and earliest.offset == 2
    assert admin.delete_records({tp: -1, empty: -1}) == {tp: 5, empty: 0}


# --- elections and reassignments --------------------------------------------------------------


def test_reassign_then_elect_the_preferred_leader(cluster: ClientCluster, admin: Admin) -> None:
    cluster.create_topic("elect", 1, 3)
    tp = TopicPartition("elect", 0)
    (result,) = admin.elect_leaders(ElectionType.PREFERRED, [tp])
    assert isinstance(result.error, ElectionNotNeededError)  # not raised: nothing to do

    before = admin.describe_topics(["elect"])["elect"].partitions[0]
    assert before.leader is not None
    others = [r for r in before.replicas if r != before.leader]
    reordered = [others[0], before.leader, others[1]]
    (moved,) = admin.alter_partition_reassignments({tp: reordered})
    assert moved.error is None
    wait_for(
        lambda: list(admin.describe_topics(["elect"])["elect"].partitions[0].replicas) == reordered,
        10,
        "the new replica order",
    )
    assert admin.list_partition_reassignments([tp]) == {}
    assert admin.list_partition_reassignments() == {}

    (elected,) = admin.elect_leaders("preferred", [tp])
    assert elected.error is None and elected.topic_partition == tp
    after = admin.describe_topics(["elect"])["elect"].partitions[0]
    assert after.leader == reordered[0] and after.leader_epoch > before.leader_epoch


# --- cluster and quorum -----------------------------------------------------------------------


def test_describe_cluster_and_quorum(cluster: ClientCluster, admin: Admin) -> None:
    description = admin.describe_cluster()
    assert sorted(b.broker_id for b in description.brokers) == sorted(cluster.addresses)
    # At their Kafka listeners, the listener the client came through.
    assert {f"{b.host}:{b.port}" for b in description.brokers} == set(kafka(cluster).split(","))
    assert description.controller_id in cluster.addresses
    quorum = admin.describe_quorum(timeout_ms=10_000)
    assert quorum.leader_id in cluster.addresses
    assert sorted(quorum.voters) == sorted(cluster.addresses)
    assert quorum.replicas[0].status == "Leader"


def test_close_releases_and_later_calls_are_refused(cluster: ClientCluster) -> None:
    admin = Admin({"bootstrap.servers": kafka(cluster)})
    admin.list_topics()
    admin.close()
    admin.close()
    with pytest.raises(ClientClosedError):
        admin.list_topics()


# --- the asyncio Admin: every method once ---------------------------------------------------


@pytest.mark.asyncio
async def test_the_asyncio_admin_does_everything(cluster: ClientCluster) -> None:
    async with aio.Admin(bootstrap_servers=kafka(cluster)) as admin:
        (created,) = await admin.create_topics([NewTopic("async", 2, 3)])
        assert created.error is None
        assert "async" in await admin.list_topics()
        assert len((await admin.describe_topics(["async"]))["async"].partitions) == 2
        await admin.create_partitions({"async": 3})
        description = (await admin.describe_topics(["async"]))["async"]
        assert len(description.partitions) == 3

        resource = ConfigResource.topic("async")
        await admin.incremental_alter_configs({resource: {"retention.ms": "60000"}})
        configs = await admin.describe_configs([resource], ["retention.ms"])
        assert configs[resource].overrides() == {"retention.ms": "60000"}

        tp = TopicPartition("async", 0)
        leader = description.partitions[0].leader
        assert leader is not None
        await produce(cluster.kafka_addresses[leader], "async", 0, [10, 20, 30])
        latest = (await admin.list_offsets({tp: OffsetSpec.LATEST}))[tp]
        assert latest is not None and latest.offset == 3
        assert await admin.delete_records({tp: 1}) == {tp: 1}

        (elected,) = await admin.elect_leaders("preferred", [tp])
        assert isinstance(elected.error, ElectionNotNeededError)
        replicas = list(description.partitions[0].replicas)
        (moved,) = await admin.alter_partition_reassignments({tp: replicas})
        assert moved.error is None
        assert await admin.list_partition_reassignments([tp]) == {}

        assert len((await admin.describe_cluster()).brokers) == 3
        assert (await admin.describe_quorum()).leader_id in cluster.addresses

        with pytest.raises(TopicAlreadyExistsError, match="'async'"):
            await admin.create_topics([NewTopic("async", 1, 3)])
        with pytest.raises(UnknownTopicOrPartitionError, match="topic 'nope' does not exist"):
            await admin.describe_topics(["nope"])
        with pytest.raises(UnknownTopicOrPartitionError, match="topic 'nope' does not exist"):
            await admin.list_offsets({TopicPartition("nope", 0): OffsetSpec.EARLIEST})

        await admin.delete_topics(["async"])
        assert "async" not in await admin.list_topics()
    with pytest.raises(ClientClosedError):
        await admin.list_topics()


# --- flags under failure (restarts a node: keep last) ----------------------------------------


def test_a_killed_broker_shows_offline_and_under_replicated_partitions(
    cluster: ClientCluster, admin: Admin
) -> None:
    quorum_leader = admin.describe_quorum().leader_id
    victim = next(n for n in sorted(cluster.addresses) if n != quorum_leader)
    admin.create_topics([NewTopic("solo", assignments={0: [victim]}), NewTopic("trio", 1, 3)])

    cluster.loopback.signal(victim, signal.SIGKILL)
    started = time.monotonic()

    def flagged() -> bool:
        topics = admin.describe_topics(["solo", "trio"], timeout_ms=5_000)
        solo, trio = topics["solo"].partitions[0], topics["trio"].partitions[0]
        return solo.offline and trio.under_replicated and not trio.offline

    wait_for(flagged, 20, "the killed broker's partitions flagged")
    topics = admin.describe_topics(["solo", "trio"])
    assert topics["solo"].partitions[0].leader is None
    assert victim in topics["solo"].partitions[0].offline_replicas
    assert victim not in topics["trio"].partitions[0].isr
    assert time.monotonic() - started < 20

    restarted = cluster.loopback.cli("restart", str(victim))
    assert restarted.returncode == 0, restarted.stderr

    def healed() -> bool:
        topics = admin.describe_topics(["solo", "trio"], timeout_ms=5_000)
        solo, trio = topics["solo"].partitions[0], topics["trio"].partitions[0]
        return not solo.offline and not trio.under_replicated

    wait_for(healed, 30, "the restarted broker back in sync")
