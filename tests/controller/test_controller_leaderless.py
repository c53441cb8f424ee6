"""Leaderless partitions with a live ISR member get a clean leader, whatever was missed.

The unfencing write elects leaders for the partitions the returning broker can lead; when that
write is lost half way (a failover between its batches) or refused, nothing else happens to
those partitions until the controller sweeps: on activation, after an unfencing whose elections
did not fit one step, and periodically (docs/controller.md, "Leaderless partitions"). These are
pure-core scenarios on a shared in-memory log.
"""

from __future__ import annotations

import pytest
from controller_harness import Cluster

from replog.quorum.controller.controller_result import ControllerResult
from replog.quorum.controller.operation import WriteContext
from replog.quorum.controller.replication_control import TopicDescription
from replog.quorum.metadata.partition_registration import PartitionRegistration
from replog.quorum.metadata.records import NO_LEADER, PartitionChangeRecord

# Four topics of three partitions: each creation fits a batch of four records.
TOPICS = [f"t{i}" for i in range(4)]
PARTITIONS = 3 * len(TOPICS)
# The periodic sweep's interval (ControllerConfig.leaderless_partition_check_interval_ms).
SWEEP_MS = 10_000


@pytest.fixture
def cluster() -> Cluster:
    cluster = Cluster.with_brokers((1, 2), max_records_per_batch=4)
    for topic in TOPICS:
        cluster.create_topic(topic, 3, 2)
    return cluster


def describe(cluster: Cluster, topic: str = "t0") -> TopicDescription:
    (description,) = cluster.active.read(
        lambda ctx: ctx.replication.describe_topics(ctx.offset, [topic])
    )
    return description


def partitions(cluster: Cluster) -> list[PartitionRegistration]:
    return [p for topic in TOPICS for p in describe(cluster, topic).partitions]


def leaders(cluster: Cluster) -> list[int]:
    return [p.leader for p in partitions(cluster)]


def only_broker_2_in_every_isr_and_leaderless(cluster: Cluster) -> None:
    """Broker 1 fenced (broker 2 leads all), then broker 2 fenced as the last ISR member."""
    cluster.heartbeat(1, want_fence=True)
    cluster.heartbeat(2, want_fence=True)
    assert all(p.isr == (2,) and p.leader == NO_LEADER for p in partitions(cluster))


def settle(cluster: Cluster, ms: int = 10, turns: int = 5) -> None:
    """A few loop turns: ticks, each followed by Raft committing what was written."""
    for _ in range(turns):
        cluster.advance(ms)
        cluster.log.commit()


def test_a_failover_half_way_through_an_unfencing_leaves_no_partition_leaderless(
    cluster: Cluster,
) -> None:
    only_broker_2_in_every_isr_and_leaderless(cluster)
    cluster.heartbeat(2, commit=False)  # unfence: the change, then 12 elections, 4 a batch
    assert len(cluster.log.uncommitted_batches()) > 1
    cluster.log.commit(1)  # the unfencing commits with the first elections only...
    cluster.elect(2, keep_uncommitted=False)  # ...and the rest is lost with the leader
    assert cluster.active.cluster.is_active(2)
    assert NO_LEADER in leaders(cluster)
    settle(cluster)
    assert leaders(cluster) == [2] * PARTITIONS


def test_the_periodic_sweep_elects_a_leader_nothing_else_would(cluster: Cluster) -> None:
    """A leaderless partition whose ISR member is active, reached by no broker event: only the
    periodic check repairs it (here the state is forced with a raw record)."""
    topic_id = describe(cluster).topic_id
    assert topic_id is not None

    def drop_leader(ctx: WriteContext) -> ControllerResult[None]:
        return ControllerResult.of([PartitionChangeRecord(topic_id, 0, leader=NO_LEADER)], None)

    cluster.active.write(drop_leader, cluster.now_ms)
    cluster.log.commit()
    assert leaders(cluster)[0] == NO_LEADER
    assert describe(cluster).partitions[0].isr  # an active broker is in its ISR
    while cluster.now_ms + 2000 < SWEEP_MS:
        cluster.advance(2000)
        cluster.heartbeat(1)
        cluster.heartbeat(2)
    cluster.log.commit()
    assert leaders(cluster)[0] == NO_LEADER  # not before the interval
    cluster.advance(SWEEP_MS - cluster.now_ms)
    cluster.log.commit()
    assert NO_LEADER not in leaders(cluster)


def test_the_sweep_never_elects_uncleanly(cluster: Cluster) -> None:
    """Replicas outside the ISR stay out: a partition whose only ISR member is fenced keeps
    no leader, even though its other replica is active (the topic forbids unclean elections)."""
    only_broker_2_in_every_isr_and_leaderless(cluster)
    cluster.heartbeat(1)  # broker 1 back: a replica of every partition, in no ISR
    cluster.elect(2)
    for _ in range(SWEEP_MS // 2000 + 1):
        cluster.advance(2000)
        cluster.heartbeat(1)
        cluster.log.commit()
    assert leaders(cluster) == [NO_LEADER] * PARTITIONS
