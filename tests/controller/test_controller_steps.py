"""Broker events that change many partitions are written in bounded steps, one per loop turn.

Fencing, a new incarnation's registration, unregistration, unfencing and controlled shutdown
make at most `max_partition_changes_per_step` partition changes per step; the rest follow on the
next ticks while other writes go on between them, and the registration change that matters
comes where a partial write is harmless (docs/controller.md, "Stepped writes"). Pure-core
scenarios on a shared in-memory log, with a step of 4 changes.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest
from controller_harness import BROKER_FEATURES, CLUSTER_ID, Cluster

from replog.errors import NotControllerError
from replog.quorum.controller.cluster_control import BrokerRegistrationRequest
from replog.quorum.controller.controller_result import ControllerResult
from replog.quorum.controller.replication_control import CreatableTopic
from replog.quorum.metadata.partition_registration import PartitionRegistration
from replog.quorum.metadata.records import (
    NO_LEADER,
    BrokerRegistrationChangeRecord,
    FenceChange,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    RegisterBrokerRecord,
    UnregisterBrokerRecord,
)

STEP = 4
TOPICS = [f"t{i}" for i in range(5)]  # 5 x 3 partitions, RF 3: 15 in each broker's ISRs


@pytest.fixture
def cluster() -> Cluster:
    cluster = Cluster.with_brokers((1, 2, 3), max_partition_changes_per_step=STEP)
    for topic in TOPICS:
        cluster.create_topic(topic, 3, 3)
    return cluster


def partitions(cluster: Cluster) -> list[PartitionRegistration]:
    names = list(TOPICS)
    descriptions = cluster.active.read(
        lambda ctx: ctx.replication.describe_topics(ctx.offset, names)
    )
    return [p for description in descriptions for p in description.partitions]


def changes_in(records: tuple[MetadataRecord, ...]) -> int:
    return sum(isinstance(r, PartitionChangeRecord) for r in records)


def turn(cluster: Cluster) -> None:
    """One loop turn: a tick (the next steps), then Raft commits what was written."""
    cluster.advance(10)
    cluster.log.commit()


def test_fencing_on_request_goes_in_steps_and_answers_after_the_last(cluster: Cluster) -> None:
    start = len(cluster.log.batches)
    reply = cluster.heartbeat(1, want_fence=True)
    assert not reply.done  # 15 changes: the first 4 written, the rest on the next turns
    # Other writes are not held up behind the fencing, and place nothing on the broker.
    created = cluster.active.create_topics([CreatableTopic("other", 1, 2)], cluster.now_ms)
    cluster.log.commit()
    assert created.done and created.result()[0].error is None
    (other,) = cluster.active.read(
        lambda ctx: ctx.replication.describe_topics(ctx.offset, ["other"])
    )
    assert all(1 not in p.replicas for p in other.partitions)
    for _ in range(3):
        assert not cluster.active.cluster.registration(1).fenced  # type: ignore[union-attr]
        turn(cluster)
    assert reply.result().is_fenced
    written = [b.records for b in cluster.log.batches[start:] if changes_in(b.records)]
    counts = [changes_in(records) for records in written]
    assert counts[:-1] == [STEP] * (len(counts) - 1) and 0 < counts[-1] <= STEP, counts
    assert sum(counts) >= 15
    records = [r for b in cluster.log.batches[start:] for r in b.records]
    (fence,) = [i for i, r in enumerate(records) if isinstance(r, BrokerRegistrationChangeRecord)]
    assert records[fence] == BrokerRegistrationChangeRecord(
        1, cluster.active.cluster.broker_epoch(1) or 0, FenceChange.FENCE
    )
    assert not any(isinstance(r, PartitionChangeRecord) for r in records[fence:])
    assert all(1 not in p.isr and p.leader != 1 for p in partitions(cluster))


def test_a_new_incarnation_registers_after_its_predecessor_left_every_isr(
    cluster: Cluster,
) -> None:
    cluster.active._fence_stale_brokers = lambda now_ms: None  # type: ignore[method-assign]
    cluster.advance(9000)  # broker 1's old incarnation is gone, its session expired
    start = len(cluster.log.batches)
    request = BrokerRegistrationRequest(
        1, CLUSTER_ID, uuid.uuid4(), features=BROKER_FEATURES, rack=None
    )
    registered = cluster.active.register_broker(request, cluster.now_ms)
    cluster.log.commit()
    while not registered.done:
        turn(cluster)
    records = [r for b in cluster.log.batches[start:] for r in b.records]
    registration = [i for i, r in enumerate(records) if isinstance(r, RegisterBrokerRecord)]
    assert len(registration) == 1
    assert not any(isinstance(r, PartitionChangeRecord) for r in records[registration[0] :])
    epoch = registered.result().broker_epoch
    assert cluster.active.cluster.broker_epoch(1) == epoch
    assert cluster.active.cluster.registration_offset(1) == epoch
    assert all(1 not in p.isr and p.leader in (2, 3) for p in partitions(cluster))


def test_unfencing_answers_at_once_and_the_elections_follow(cluster: Cluster) -> None:
    for broker_id in (1, 2, 3):
        cluster.heartbeat(broker_id, want_fence=True)
        for _ in range(5):
            turn(cluster)
    # Broker 3, fenced last, is the last ISR member of every partition.
    assert all(p.leader == NO_LEADER and p.isr == (3,) for p in partitions(cluster))
    start = len(cluster.log.batches)
    reply = cluster.heartbeat(3)
    assert not reply.result().is_fenced  # answered with the first step
    assert sum(p.leader == 3 for p in partitions(cluster)) == STEP
    for _ in range(4):
        turn(cluster)
    assert all(p.leader == 3 for p in partitions(cluster))
    assert all(changes_in(b.records) <= STEP for b in cluster.log.batches[start:])


def test_controlled_shutdown_says_shut_down_once_every_step_is_applied(
    cluster: Cluster,
) -> None:
    first = cluster.heartbeat(1, want_shut_down=True).result()
    assert first.in_controlled_shutdown and not first.should_shut_down
    assert any(1 in p.isr for p in partitions(cluster))  # moves still to come
    for _ in range(4):
        turn(cluster)
    assert all(1 not in p.isr and p.leader != 1 for p in partitions(cluster))
    last_step = cluster.log.committed_offset
    cluster.heartbeat(2, metadata_offset=last_step - 1)
    cluster.heartbeat(3, metadata_offset=last_step - 1)
    waiting = cluster.heartbeat(1, want_shut_down=True).result()
    assert not waiting.should_shut_down  # the others have not applied the last step
    cluster.heartbeat(2)
    cluster.heartbeat(3)
    assert cluster.heartbeat(1, want_shut_down=True).result().should_shut_down


def test_unregistration_goes_in_steps_and_ends_with_the_unregistration(
    cluster: Cluster,
) -> None:
    start = len(cluster.log.batches)
    done = cluster.active.unregister_broker(3, cluster.now_ms)
    cluster.log.commit()
    while not done.done:
        turn(cluster)
    done.result()
    records = [r for b in cluster.log.batches[start:] for r in b.records]
    last_change = max(i for i, r in enumerate(records) if isinstance(r, PartitionChangeRecord))
    (unregistered,) = [i for i, r in enumerate(records) if isinstance(r, UnregisterBrokerRecord)]
    assert last_change < unregistered
    assert all(3 not in p.isr for p in partitions(cluster))


def test_losing_leadership_between_steps_fails_the_write_and_drops_the_rest(
    cluster: Cluster,
) -> None:
    reply = cluster.heartbeat(1, want_fence=True)
    turn(cluster)
    cluster.elect(2)
    assert isinstance(reply.error, NotControllerError)
    assert cluster.controller(1).next_wake_ms(cluster.now_ms) is None  # nothing left queued
    # The broker asks again, and the new active controller fences it, in steps too.
    again = cluster.heartbeat(1, want_fence=True)
    while not again.done:
        turn(cluster)
    assert again.result().is_fenced
    assert all(1 not in p.isr and p.leader != 1 for p in partitions(cluster))


def test_a_stepped_write_whose_last_step_writes_nothing_waits_for_its_steps(
    cluster: Cluster,
) -> None:
    # The records of its earlier steps wait in no response of their own: the last step,
    # writing nothing, must wait for them, or its caller hears of state a failover may revert
    # (a fencing asked for while another chain evacuates the broker ends this way).
    def last(ctx: object) -> ControllerResult[str]:
        return ControllerResult.of((), "done")

    pending = cluster.active.write(
        lambda ctx: ControllerResult.partial([NoOpRecord()], last), cluster.now_ms, "two steps"
    )
    cluster.advance(10)  # the last step: no records
    assert not pending.done
    cluster.log.commit()
    assert pending.result() == "done"


def nothing(response: str) -> Callable[[object], ControllerResult[str]]:
    """A last step that writes nothing and answers `response`."""
    return lambda ctx: ControllerResult.of((), response)


def test_a_write_of_nothing_waits_for_another_writes_earlier_steps(cluster: Cluster) -> None:
    # The other write's first step parks no response, so the purgatory is empty; a write of
    # nothing run now sees its records all the same, and must wait for them.
    active = cluster.active
    stepped = active.write(
        lambda ctx: ControllerResult.partial([NoOpRecord()], nothing("stepped")),
        cluster.now_ms,
        "two steps",
    )
    assert len(active.purgatory) == 0
    empty = active.write(nothing("empty"), cluster.now_ms, "write nothing")
    assert not empty.done
    cluster.log.commit()
    assert empty.result() == "empty" and not stepped.done
    cluster.advance(10)  # the last step: its records committed already, so answered at once
    assert stepped.result() == "stepped"


def test_a_stepped_write_whose_middle_and_last_steps_write_nothing_waits_for_its_first(
    cluster: Cluster,
) -> None:
    def middle(ctx: object) -> ControllerResult[str]:
        return ControllerResult.partial((), nothing("done"))

    pending = cluster.active.write(
        lambda ctx: ControllerResult.partial([NoOpRecord()], middle), cluster.now_ms, "three"
    )
    cluster.advance(10)
    cluster.advance(10)
    assert not pending.done and cluster.active.next_wake_ms(cluster.now_ms) != cluster.now_ms
    cluster.log.commit()
    assert pending.result() == "done"


@pytest.mark.parametrize("parked", [False, True], ids=["between-steps", "parked"])
def test_a_stepped_write_of_nothing_last_fails_on_a_leader_change(
    cluster: Cluster, parked: bool
) -> None:
    # Never answered, never left waiting: a lost leadership fails it, whether its last step
    # was still queued or already waits for the first step's records.
    pending = cluster.active.write(
        lambda ctx: ControllerResult.partial([NoOpRecord()], nothing("done")),
        cluster.now_ms,
        "two steps",
    )
    if parked:
        cluster.advance(10)
        assert not pending.done
    cluster.elect(2)
    assert isinstance(pending.error, NotControllerError)


def test_a_large_create_topics_is_written_in_steps_and_answered_after_the_last(
    cluster: Cluster,
) -> None:
    """A CreateTopics of 300 partitions goes in steps of whole topics (250 partitions a step):
    the caller is answered once the last step commits; a failover between two steps fails
    it with NOT_CONTROLLER, the earlier steps' topics committed, and a retry creates the
    rest and answers TOPIC_ALREADY_EXISTS for those."""
    topics = [CreatableTopic(f"new{i:02d}", 10, 3) for i in range(30)]
    pending = cluster.active.create_topics(topics, cluster.now_ms)
    cluster.log.commit()
    assert not pending.done  # the first step committed, the second not written yet
    turn(cluster)
    assert [r.name for r in pending.result()] == [t.name for t in topics]
    assert all(r.error is None for r in pending.result())

    more = [CreatableTopic(f"more{i:02d}", 10, 3) for i in range(30)]
    interrupted = cluster.active.create_topics(more, cluster.now_ms)
    cluster.log.commit()
    cluster.elect(2)
    assert isinstance(interrupted.error, NotControllerError)
    retried = cluster.active.create_topics(more, cluster.now_ms)
    cluster.log.commit()
    turn(cluster)
    answers = {r.name: r.error for r in retried.result()}
    assert sum(error is None for error in answers.values()) == 5
    assert {e.error_name for e in answers.values() if e is not None} == {"TOPIC_ALREADY_EXISTS"}


def test_by_default_a_step_makes_at_most_250_partition_changes() -> None:
    # A step of 1,000 changes (built, replayed and encoded in one loop turn) took 60-90 ms of a
    # loaded machine's CPU at a 10,000-partition restart; 250 keep a turn near 20 ms
    # (docs/controller.md, "Stepped writes").
    cluster = Cluster.with_brokers((1, 2, 3))
    cluster.create_topic("wide", 600, 3)
    start = len(cluster.log.batches)
    reply = cluster.heartbeat(1, want_fence=True)
    while not reply.done:
        turn(cluster)
    assert reply.result().is_fenced
    counts = [changes_in(b.records) for b in cluster.log.batches[start:]]
    assert sum(counts) == 600 and max(counts) == 250, counts
