"""The controller service's reads (`replog.quorum.controller.reads`): committed state only, unfenced
brokers for clients, offline replicas, leaderless partitions, configs with their sources, the
finalized features."""

from __future__ import annotations

import pytest
from controller_harness import CLUSTER_ID, Cluster

from replog.errors import (
    BrokerNotAvailableError,
    InvalidRequestError,
    LeaderNotAvailableError,
    UnknownTopicOrPartitionError,
)
from replog.quorum.controller import reads
from replog.quorum.controller.config_control import (
    AlterConfigOp,
    AlterConfigOpType,
    ConfigSource,
    broker_resource,
    topic_resource,
)
from replog.quorum.controller.replication_control import CreatableTopic, ReassignablePartition
from replog.quorum.metadata.image import ConfigResource
from replog.quorum.metadata.records import METADATA_VERSION_LATEST, NO_LEADER, ConfigResourceType

SET = AlterConfigOpType.SET


@pytest.fixture
def cluster() -> Cluster:
    cluster = Cluster.create((1, 2, 3), static_broker_configs={"min.insync.replicas": "2"})
    cluster.elect(1)
    cluster.log.commit()
    for broker_id in (1, 2, 3):
        cluster.start_broker(broker_id)
    return cluster


def create(cluster: Cluster, name: str, partitions: int, replication_factor: int) -> None:
    pending = cluster.active.create_topics(
        [CreatableTopic(name, partitions, replication_factor)], cluster.now_ms
    )
    cluster.log.commit()
    (result,) = pending.result()
    assert result.error is None, result.error


def test_metadata_is_committed_state_only(cluster: Cluster) -> None:
    create(cluster, "orders", 3, 2)
    cluster.active.create_topics([CreatableTopic("pending", 1, 1)], cluster.now_ms)  # no commit
    view = cluster.active.read(reads.metadata(None))
    assert [t.name for t in view.topics] == ["orders"]
    assert view.offset == cluster.log.committed_offset
    assert view.cluster_id == CLUSTER_ID
    (orders,) = view.topics
    assert [p.partition_id for p in orders.partitions] == [0, 1, 2]
    assert all(p.error is None and p.offline_replicas == () for p in orders.partitions)
    # A standby serves the same committed view.
    assert cluster.controller(2).read(reads.metadata(["orders"])).topics == view.topics


def test_the_finalized_features_are_read_at_the_committed_offset(cluster: Cluster) -> None:
    features = cluster.active.read(reads.finalized_features())
    assert features.levels == {
        "metadata.version": METADATA_VERSION_LATEST,
        "transaction.version": 2,
    }
    assert features.offset == cluster.log.committed_offset
    assert cluster.controller(2).read(reads.finalized_features()) == features


def test_an_unknown_topic_is_named(cluster: Cluster) -> None:
    (missing,) = cluster.active.read(reads.metadata(["nope"])).topics
    assert missing.error is not None
    assert missing.error.error is UnknownTopicOrPartitionError
    assert "'nope'" in missing.error.message


def test_fenced_brokers_are_offline_and_hidden_from_clients(cluster: Cluster) -> None:
    create(cluster, "orders", 1, 3)
    cluster.heartbeat(2, want_fence=True)
    view = cluster.active.read(reads.metadata(None))
    assert [b.broker_id for b in view.brokers] == [1, 3]
    (partition,) = view.topics[0].partitions
    assert partition.offline_replicas == (2,)
    described = cluster.active.read(reads.describe_cluster())
    assert [(b.broker_id, b.fenced) for b in described.brokers] == [
        (1, False),
        (2, True),
        (3, False),
    ]
    assert described.brokers[0].endpoint is not None
    assert described.brokers[0].endpoint.port == 9093
    assert described.brokers[0].broker_epoch == cluster.active.cluster.broker_epoch(1)


def test_a_leaderless_partition_says_so(cluster: Cluster) -> None:
    create(cluster, "solo", 1, 1)
    (partition,) = cluster.active.read(reads.metadata(["solo"])).topics[0].partitions
    leader = partition.registration.leader
    cluster.heartbeat(leader, want_fence=True)
    (partition,) = cluster.active.read(reads.metadata(["solo"])).topics[0].partitions
    assert partition.registration.leader == NO_LEADER
    assert partition.error is not None and partition.error.error is LeaderNotAvailableError
    assert "solo-0" in partition.error.message
    assert partition.offline_replicas == (leader,)


def test_configs_name_their_source(cluster: Cluster) -> None:
    create(cluster, "orders", 1, 1)
    cluster.active.incremental_alter_configs(
        {
            topic_resource("orders"): [AlterConfigOp("retention.ms", SET, "1000")],
            broker_resource(): [AlterConfigOp("log.segment.bytes", SET, "2048")],
        },
        cluster.now_ms,
    )
    cluster.log.commit()
    (topic,) = cluster.active.read(
        reads.describe_configs(
            [(topic_resource("orders"), ["retention.ms", "segment.bytes", "min.insync.replicas"])]
        )
    )
    assert topic.error is None
    found = {c.name: (c.value, c.source) for c in topic.configs}
    assert found == {
        "retention.ms": ("1000", ConfigSource.TOPIC_CONFIG),
        "segment.bytes": ("2048", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        "min.insync.replicas": ("2", ConfigSource.STATIC_BROKER_CONFIG),
    }
    (broker,) = cluster.active.read(reads.describe_configs([(broker_resource(1), None)]))
    by_name = {c.name: c for c in broker.configs}
    assert by_name["log.segment.bytes"].source is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    assert by_name["log.retention.ms"].is_default
    assert by_name["min.insync.replicas"].source is ConfigSource.STATIC_BROKER_CONFIG


def test_config_errors_are_per_resource(cluster: Cluster) -> None:
    missing, bad, unregistered, good = cluster.active.read(
        reads.describe_configs(
            [
                (topic_resource("nope"), None),
                (ConfigResource(ConfigResourceType.BROKER, "x"), None),
                (broker_resource(7), None),
                (broker_resource(), ["log.retention.ms", "no.such.key"]),
            ]
        )
    )
    assert missing.error is not None and missing.error.error is UnknownTopicOrPartitionError
    assert "'nope'" in missing.error.message
    assert bad.error is not None and bad.error.error is InvalidRequestError
    # A broker that is not registered has no configs to list (defaults would read as if it
    # were there).
    assert unregistered.error is not None
    assert unregistered.error.error is BrokerNotAvailableError
    assert "broker 7" in unregistered.error.message
    assert [c.name for c in good.configs] == ["log.retention.ms"]


def test_reassignments_in_progress(cluster: Cluster) -> None:
    create(cluster, "orders", 1, 1)
    (partition,) = cluster.active.read(reads.metadata(["orders"])).topics[0].partitions
    current = partition.registration.replicas[0]
    others = tuple(b for b in (1, 2, 3) if b != current)
    cluster.active.alter_partition_reassignments(
        [ReassignablePartition("orders", 0, others)], cluster.now_ms
    )
    assert cluster.active.read(reads.list_partition_reassignments(None)) == ()  # not committed
    cluster.log.commit()
    (ongoing,) = cluster.active.read(reads.list_partition_reassignments([("orders", 0)]))
    assert ongoing.topic == "orders" and set(ongoing.adding_replicas) == set(others)
    assert cluster.active.read(reads.list_partition_reassignments([("other", 0)])) == ()
