"""What other writes see and may do between two steps of a broker event (issue #50's review).

A fencing the broker asked for (WantFence) moves it out of ISRs and leaderships a bounded step
at a time and writes the fencing record with its last step; the broker stays registered and
unfenced until then, but is being evacuated, so no write between two steps (here a leader's
AlterPartition) may name it in an ISR again, and its last step leaves it in none. A controller
that lost leadership between two steps runs none of its queued steps afterwards, however
often its shell asks (`run_steps`, posted by the driver). Pure-core scenarios, steps of 4.
"""

from __future__ import annotations

import uuid

from controller_harness import Cluster, controller_view, fenced, image_view, replayed_image

from replog.errors import IneligibleReplicaError, NotControllerError
from replog.quorum.controller.replication_control import (
    AlterPartitionItem,
    CreatableTopic,
    IsrMember,
)
from replog.quorum.metadata.partition_registration import NO_LEADER, PartitionRegistration
from replog.quorum.metadata.records import PartitionChangeRecord

STEP = 4


def three_brokers() -> Cluster:
    cluster = Cluster.with_brokers((1, 2, 3), max_partition_changes_per_step=STEP)
    cluster.create_topic("t", 12, 3)
    return cluster


def topic(cluster: Cluster) -> tuple[uuid.UUID, list[PartitionRegistration]]:
    (description,) = cluster.active.read(
        lambda ctx: ctx.replication.describe_topics(ctx.offset, ["t"])
    )
    assert description.topic_id is not None
    return description.topic_id, list(description.partitions)


def turn(cluster: Cluster) -> None:
    cluster.advance(10)
    cluster.log.commit()


def test_an_alter_partition_between_fencing_steps_cannot_name_the_broker_again() -> None:
    cluster = three_brokers()
    reply = cluster.heartbeat(1, want_fence=True)  # its first step: 4 of 12 partitions
    assert not reply.done
    topic_id, before = topic(cluster)
    moved = [i for i, p in enumerate(before) if 1 not in p.isr]
    assert 0 < len(moved) < len(before)
    # The leaders of the moved partitions see broker 1 caught up and ask to add it back.
    refused = 0
    for i in moved:
        p = before[i]
        epoch = cluster.active.cluster.broker_epoch(p.leader)
        assert epoch is not None
        isr = (*(IsrMember(b) for b in p.isr), IsrMember(1))
        altered = cluster.active.alter_partition(
            p.leader,
            epoch,
            [AlterPartitionItem(topic_id, i, p.leader_epoch, isr, p.partition_epoch)],
            cluster.now_ms,
        )
        cluster.log.commit()
        (result,) = altered.result()
        error = result.error
        assert error is not None and error.error is IneligibleReplicaError, result
        # It is not fenced yet (the record comes with the last step): the answer says why.
        assert "1 (being moved out of every ISR)" in error.message, error.message
        refused += 1
    assert refused == len(moved)
    turns = 0
    while not reply.done and turns < 10:
        turn(cluster)
        turns += 1
    assert reply.result().is_fenced and fenced(cluster, 1)
    _, after = topic(cluster)
    assert all(1 not in p.isr and p.leader != 1 for p in after)


def test_a_renounced_controller_runs_none_of_its_queued_steps() -> None:
    cluster = three_brokers()
    reply = cluster.heartbeat(1, want_fence=True)
    old = cluster.controller(1)
    assert old.steps_queued
    cluster.elect(2)  # node 1 loses leadership between two steps
    assert isinstance(reply.error, NotControllerError)
    assert not old.steps_queued
    end = cluster.log.log_end_offset
    old.run_steps(cluster.now_ms)  # a posted `run_steps` that arrives after the loss
    old.tick(cluster.now_ms)
    assert cluster.log.log_end_offset == end  # nothing of the old leader's written
    # The broker asks the new controller again; node 1, a standby now, replays its steps.
    again = cluster.heartbeat(1, want_fence=True)
    turns = 0
    while not again.done and turns < 10:
        turn(cluster)
        turns += 1
    assert again.result().is_fenced
    for node in (1, 2, 3):
        controller = cluster.controller(node)
        assert controller.last_stable_offset == cluster.log.committed_offset
        registration = controller.cluster.registration(1)
        assert registration is not None and registration.fenced
    _, after = topic(cluster)
    assert all(1 not in p.isr and p.leader != 1 for p in after)


def held_equal_everywhere(cluster: Cluster) -> None:
    """Every controller holds the committed state the log says (standbys replayed the steps)."""
    oracle = image_view(replayed_image(cluster.log.committed_records()))
    for controller in cluster.controllers.values():
        assert controller.last_stable_offset == cluster.log.committed_offset
        assert controller_view(controller, controller.last_stable_offset) == oracle


def unfencing_half_done() -> tuple[Cluster, list[int]]:
    """Broker 1, sole replica of about half of 24 partitions, fenced, then unfenced: the first
    step of its elections made; the partitions its fencing left leaderless."""
    cluster = Cluster.with_brokers((1, 2), max_partition_changes_per_step=STEP)
    cluster.create_topic("t", 24, 1)
    reply = cluster.heartbeat(1, want_fence=True)
    while not reply.done:
        turn(cluster)
    _, fenced_off = topic(cluster)
    orphans = [i for i, p in enumerate(fenced_off) if p.leader == NO_LEADER]
    assert len(orphans) > 2 * STEP  # its unfencing elects them in several steps
    assert not cluster.heartbeat(1).result().is_fenced  # the first step of elections
    return cluster, orphans


def test_a_broker_fenced_again_half_way_through_its_unfencing_is_elected_nowhere() -> None:
    cluster, orphans = unfencing_half_done()
    _, half = topic(cluster)
    assert 0 < sum(half[i].leader == 1 for i in orphans) < len(orphans)
    start = len(cluster.log.batches)
    again = cluster.heartbeat(1, want_fence=True)  # between two steps of the elections
    turns = 0
    while not again.done and turns < 20:
        turn(cluster)
        turns += 1
    assert again.result().is_fenced and fenced(cluster, 1)
    for _ in range(3):
        turn(cluster)  # whatever the unfencing left queued has run out
    _, after = topic(cluster)
    assert all(p.leader != 1 for p in after)
    elected = [
        r
        for b in cluster.log.batches[start:]
        for r in b.records
        if isinstance(r, PartitionChangeRecord) and r.leader == 1
    ]
    assert not elected
    held_equal_everywhere(cluster)


def test_a_controlled_shutdown_cut_by_a_failover_is_finished_by_the_next_controller() -> None:
    cluster = three_brokers()
    first = cluster.heartbeat(1, want_shut_down=True).result()
    assert first.in_controlled_shutdown and not first.should_shut_down
    cluster.elect(2)  # between two of its steps
    held_equal_everywhere(cluster)
    _, half = topic(cluster)
    assert any(p.leader == 1 for p in half)  # moves left for the next controller
    answers = []
    for _ in range(10):
        for broker_id in (2, 3):
            cluster.heartbeat(broker_id)
        answers.append(cluster.heartbeat(1, want_shut_down=True).result())
        if answers[-1].should_shut_down:
            break
        turn(cluster)
    assert answers[-1].should_shut_down, answers
    _, after = topic(cluster)
    assert all(p.leader != 1 and 1 not in p.isr for p in after)
    held_equal_everywhere(cluster)


def test_an_unfencing_cut_by_a_failover_has_its_elections_finished_by_the_next_controller() -> None:
    cluster, _ = unfencing_half_done()
    cluster.elect(2)  # the rest are dropped with node 1's leadership
    _, half = topic(cluster)
    assert any(p.leader == NO_LEADER for p in half)
    for _ in range(10):
        turn(cluster)  # no broker event: the new controller's activation sweep elects them
    _, after = topic(cluster)
    assert all(p.leader != NO_LEADER for p in after)
    held_equal_everywhere(cluster)


def test_a_topic_created_between_fencing_steps_is_placed_on_the_other_brokers() -> None:
    cluster = three_brokers()
    reply = cluster.heartbeat(1, want_fence=True)
    assert not reply.done  # steps left
    created = cluster.active.create_topics([CreatableTopic("new", 6, 2)], cluster.now_ms)
    cluster.log.commit()
    (result,) = created.result()
    assert result.error is None, result.error
    (description,) = cluster.active.read(
        lambda ctx: ctx.replication.describe_topics(ctx.offset, ["new"])
    )
    assert all(1 not in p.replicas for p in description.partitions)
    too_wide = cluster.active.create_topics([CreatableTopic("wide", 1, 3)], cluster.now_ms)
    cluster.log.commit()
    (refused,) = too_wide.result()
    assert refused.error is not None  # two brokers may take replicas while it is moved out
