"""A step of a broker event costs what it changes, not what earlier steps passed over.

A fencing leaves the partitions the broker was the last ISR member of leaderless, with the
broker still their ISR; a sweep passes over leaderless partitions no active broker can lead.
Had each step rescanned those, a broker in 100k partitions would cost O(partitions x steps)
visits: quadratic. Pure-core scenarios with a step of 4 changes count the partitions each
event's steps look up (`ReplicationControl._topics`, read once per partition visited) against
the partitions they change: two lookups per change (one to build it, one to replay it)
(docs/controller.md, "Stepped writes").
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from uuid import UUID

from controller_harness import Cluster

from replog.quorum.metadata.records import PartitionChangeRecord

STEP = 4
SOLO = 120  # RF 1 on two brokers: about 60 led by each alone


class CountingView(Mapping[UUID, object]):
    """A read-only view that counts lookups by key (one per partition visited)."""

    def __init__(self, inner: Mapping[UUID, object]) -> None:
        self.inner = inner
        self.lookups = 0

    def __getitem__(self, key: UUID) -> object:
        self.lookups += 1
        return self.inner[key]

    def __iter__(self) -> Iterator[UUID]:
        return iter(self.inner)

    def __len__(self) -> int:
        return len(self.inner)


def count_visits(cluster: Cluster) -> CountingView:
    topics = cluster.active.replication._topics
    view = CountingView(topics.live)
    topics.live = view  # type: ignore[assignment]
    return view


def changes_since(cluster: Cluster, start: int) -> int:
    return sum(
        isinstance(r, PartitionChangeRecord) for b in cluster.log.batches[start:] for r in b.records
    )


def turn(cluster: Cluster, *heartbeating: int) -> None:
    for broker_id in heartbeating:
        cluster.heartbeat(broker_id)
    cluster.advance(10)
    cluster.log.commit()


def solo_cluster() -> Cluster:
    cluster = Cluster.with_brokers((1, 2), max_partition_changes_per_step=STEP)
    cluster.create_topic("solo", SOLO, 1)
    return cluster


def test_a_fencing_step_never_revisits_the_partitions_it_left_leaderless() -> None:
    cluster = solo_cluster()
    led = cluster.active.replication.partitions_led_by(1)
    assert led >= 10 * STEP
    visits = count_visits(cluster)
    start = len(cluster.log.batches)
    reply = cluster.heartbeat(1, want_fence=True)
    while not reply.done:
        turn(cluster, 2)
    assert reply.result().is_fenced
    changes = changes_since(cluster, start)
    assert changes == led  # each of its leaderships moved once, to no leader
    # Every partition visited is changed; rescanning the stranded ones would cost about
    # led^2 / (2 x STEP) visits more (about 450 here).
    assert visits.lookups <= 2 * changes + STEP, (visits.lookups, changes)


def test_a_registration_costs_what_its_predecessor_still_holds() -> None:
    cluster = solo_cluster()
    fenced = cluster.heartbeat(1, want_fence=True)
    while not fenced.done:
        turn(cluster, 2)
    visits = count_visits(cluster)
    registered = cluster.register(1)  # a new incarnation: its predecessor is fenced already
    assert registered.done and registered.result().broker_epoch > 0
    assert visits.lookups == 0


def test_sweep_steps_never_visit_partitions_stranded_on_a_fenced_broker() -> None:
    cluster = solo_cluster()
    for broker_id in (1, 2):  # broker 1 first: its partitions stay stranded on it, fenced
        fenced = cluster.heartbeat(broker_id, want_fence=True)
        while not fenced.done:
            turn(cluster, *(b for b in (2,) if b != broker_id))
    stranded_on_1 = cluster.active.replication.partitions_with_isr_member(1)
    stranded_on_2 = cluster.active.replication.partitions_with_isr_member(2)
    assert stranded_on_1 >= 10 * STEP and stranded_on_2 >= 10 * STEP
    visits = count_visits(cluster)
    start = len(cluster.log.batches)
    assert not cluster.heartbeat(2).result().is_fenced  # unfenced: its elections follow
    first_step = visits.lookups  # the unfencing's own step: every leaderless partition once
    while cluster.active.replication.partitions_led_by(2) < stranded_on_2:
        turn(cluster, 2)
    assert changes_since(cluster, start) == stranded_on_2
    # The sweep's steps visit only what they elect; rescanning broker 1's partitions at each
    # step would cost about stranded_on_1 x stranded_on_2 / STEP visits.
    swept = visits.lookups - first_step
    assert swept <= 2 * stranded_on_2 + STEP, (swept, stranded_on_1, stranded_on_2)
