"""A broker whose stepped evacuation is half done is no elector's candidate, and steps stay
bounded per tick however many writes go on.

Between the steps of a fencing the broker asked for (WantFence), it is still unfenced in the
registrations; the electors that run between the steps (the leaderless sweep, the
preferred-leader balance) must not give it back what a step just moved, or a broker that is
the only ISR member of many partitions is never fenced (docs/controller.md, "Evacuating
brokers"). A session-expiry fencing fences with its first step, and its moves go on while the
same electors run. Pure-core scenarios with a step of 4 changes, and with the sweep and the
balance due at every tick.
"""

from __future__ import annotations

import math

import pytest
from controller_harness import Cluster, fenced

from replog.quorum.metadata.records import MetadataRecord, PartitionChangeRecord

STEP = 4
SOLO = 40  # RF 1: about half are led by broker 1 alone
EVERY_TICK = {
    "sweep": {"leaderless_partition_check_interval_ms": 10},
    "balance": {"leader_imbalance_check_interval_ms": 10},
}


def solo_cluster(broker_ids: tuple[int, ...] = (1, 2), **config: object) -> Cluster:
    cluster = Cluster.with_brokers(broker_ids, max_partition_changes_per_step=STEP, **config)
    cluster.create_topic("solo", SOLO, 1)
    cluster.create_topic("pair", 8, 2)
    return cluster


def records_since(cluster: Cluster, start: int) -> list[MetadataRecord]:
    return [r for b in cluster.log.batches[start:] for r in b.records]


def changes_since(cluster: Cluster, start: int) -> list[PartitionChangeRecord]:
    return [r for r in records_since(cluster, start) if isinstance(r, PartitionChangeRecord)]


def turn(cluster: Cluster) -> None:
    """One loop turn: broker 2 heartbeats, a tick, then Raft commits what was written."""
    cluster.heartbeat(2)
    cluster.advance(10)
    cluster.log.commit()


@pytest.mark.parametrize("elector", sorted(EVERY_TICK))
def test_session_expiry_fencing_ends_while_electors_run_between_its_steps(elector: str) -> None:
    cluster = solo_cluster(**EVERY_TICK[elector])  # type: ignore[arg-type]
    assert cluster.active.replication.partitions_led_by(1) >= 3 * STEP
    member = cluster.active.replication.partitions_with_isr_member(1)
    cluster.advance(4500)
    cluster.heartbeat(2)
    start = len(cluster.log.batches)
    cluster.advance(4500)  # broker 1's session expires: the first step of its fencing
    cluster.log.commit()
    # Fenced with its first moves: inactive for every elector, durably.
    assert changes_since(cluster, start) and fenced(cluster, 1)
    assert not cluster.active.cluster.is_active(1)
    ticks = 1
    while (
        cluster.active.replication.fenced_brokers_named() and ticks <= math.ceil(member / STEP) + 1
    ):
        turn(cluster)
        ticks += 1
    assert not cluster.active.replication.fenced_brokers_named(), f"moves left after {ticks}"
    assert ticks <= math.ceil(member / STEP) + 1
    assert not [r for r in changes_since(cluster, start) if r.leader == 1]
    assert not cluster.active.cluster.is_evacuating(1)
    assert cluster.active.replication.partitions_led_by(1) == 0


def test_fencing_on_request_ends_while_electors_run_between_its_steps() -> None:
    cluster = solo_cluster(**EVERY_TICK["sweep"], **EVERY_TICK["balance"])  # type: ignore[arg-type]
    member = cluster.active.replication.partitions_with_isr_member(1)
    start = len(cluster.log.batches)
    reply = cluster.heartbeat(1, want_fence=True)
    ticks = 0
    while not reply.done and ticks <= math.ceil(member / STEP) + 1:
        turn(cluster)
        ticks += 1
    assert reply.result().is_fenced and fenced(cluster, 1)
    assert ticks <= math.ceil(member / STEP) + 1
    assert not [r for r in changes_since(cluster, start) if r.leader == 1]


def test_repeated_fencing_requests_share_one_chain_of_steps() -> None:
    cluster = solo_cluster()
    member = cluster.active.replication.partitions_with_isr_member(1)
    replies = [cluster.heartbeat(1, want_fence=True)]
    per_tick = []
    while not fenced(cluster, 1) and len(per_tick) <= math.ceil(member / STEP) + 1:
        start = len(cluster.log.batches)
        turn(cluster)
        per_tick.append(len(changes_since(cluster, start)))
        start = len(cluster.log.batches)
        replies.append(cluster.heartbeat(1, want_fence=True))  # the broker asks again
        assert not changes_since(cluster, start)  # it waits for the chain under way
    assert fenced(cluster, 1)
    assert max(per_tick) <= STEP, per_tick
    for _ in range(2):
        turn(cluster)
    assert all(reply.done and reply.result().is_fenced for reply in replies)


def test_a_broker_heard_from_half_way_through_its_fencing_leads_again() -> None:
    cluster = solo_cluster()
    led = cluster.active.replication.partitions_led_by(1)
    cluster.advance(4500)
    cluster.heartbeat(2)
    cluster.advance(4500)  # the first step of its session-expiry fencing
    cluster.log.commit()
    assert cluster.active.replication.partitions_led_by(1) == led - STEP
    cluster.heartbeat(1)  # late, but before the fencing ended: it is given up
    turn(cluster)
    turn(cluster)
    assert not fenced(cluster, 1) and cluster.active.cluster.is_active(1)
    assert not cluster.active.cluster.is_evacuating(1)
    # What the first step left without a leader is elected again (only broker 1 can lead it).
    assert cluster.active.replication.partitions_led_by(1) == led


def test_brokers_unfencing_at_once_share_the_step_budget_of_a_tick() -> None:
    brokers = (1, 2, 3, 4)
    cluster = Cluster.with_brokers(brokers, max_partition_changes_per_step=STEP)
    cluster.create_topic("solo", 12 * len(brokers), 1)
    # Every broker leaves: their partitions stay leaderless, each with its one ISR member.
    for broker_id in brokers:
        reply = cluster.heartbeat(broker_id, want_fence=True)
        while not reply.done:
            cluster.advance(10)
            cluster.log.commit()
    assert all(fenced(cluster, b) for b in brokers)
    # They all come back in one loop turn: each unfencing elects its first STEP at once, and
    # the rest goes on in later steps.
    for broker_id in brokers:
        cluster.heartbeat(broker_id, commit=False)
    cluster.log.commit()
    per_tick = []
    while cluster.active.replication.has_leaderless_partitions() and len(per_tick) < 50:
        start = len(cluster.log.batches)
        cluster.advance(10)
        per_tick.append(len(changes_since(cluster, start)))
        cluster.log.commit()
    assert not cluster.active.replication.has_leaderless_partitions()
    # A tick runs steps while they wrote fewer than STEP records: under 2 x STEP in all.
    assert max(per_tick) < 2 * STEP, per_tick
