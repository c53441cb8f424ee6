"""QuorumController scenarios: brokers, topics and failovers on a shared in-memory log, with the
real replication manager (docs/design/kraft.md#controller, #broker-lifecycle)."""

from __future__ import annotations

import uuid

import pytest
from controller_harness import (
    BROKER_FEATURES,
    CLUSTER_ID,
    Cluster,
    controller_view,
    image_view,
    replayed_image,
)

from replog.errors import DuplicateBrokerRegistrationError
from replog.quorum.controller.cluster_control import BrokerRegistrationRequest
from replog.quorum.controller.config_control import AlterConfigOp, AlterConfigOpType, topic_resource
from replog.quorum.controller.replication_control import (
    AlterPartitionItem,
    CreatableTopic,
    IsrMember,
    TopicDescription,
)
from replog.quorum.metadata.records import (
    BrokerRegistrationChangeRecord,
    FenceChange,
    NoOpRecord,
    PartitionChangeRecord,
    RegisterBrokerRecord,
)

SESSION_MS = 9000


@pytest.fixture
def cluster() -> Cluster:
    cluster = Cluster.create((1, 2, 3))
    cluster.elect(1)
    cluster.log.commit()
    return cluster


def describe(cluster: Cluster, topic: str) -> TopicDescription:
    (description,) = cluster.active.read(
        lambda ctx: ctx.replication.describe_topics(ctx.offset, [topic])
    )
    return description


def new_batches(cluster: Cluster, since: int) -> list[tuple[object, ...]]:
    return [b.records for b in cluster.log.batches[since:]]


# -- broker lifecycle -----------------------------------------------------------------------------


def test_register_catch_up_unfence(cluster: Cluster) -> None:
    registered = cluster.register(1)
    epoch = registered.result().broker_epoch
    (record,) = cluster.log.batches[-1].records
    assert isinstance(record, RegisterBrokerRecord)
    assert cluster.log.batches[-1].base_offset == epoch == record.broker_epoch
    # Not caught up to its own registration record yet.
    behind = cluster.heartbeat(1, metadata_offset=epoch - 1).result()
    assert behind.is_fenced and not behind.is_caught_up
    caught_up = cluster.heartbeat(1, metadata_offset=epoch).result()
    assert not caught_up.is_fenced and caught_up.is_caught_up
    assert cluster.active.read(lambda ctx: ctx.cluster.registration(1, ctx.offset)).fenced is False


def test_a_duplicate_registration_is_refused_while_the_session_lives(cluster: Cluster) -> None:
    cluster.start_broker(1)
    duplicate = cluster.active.register_broker(
        BrokerRegistrationRequest(1, CLUSTER_ID, uuid.uuid4(), features=BROKER_FEATURES),
        cluster.now_ms,
    )
    assert isinstance(duplicate.error, DuplicateBrokerRegistrationError)


def test_an_unfenced_broker_is_fenced_exactly_at_the_session_timeout(cluster: Cluster) -> None:
    cluster.start_broker(1)
    epoch = cluster.active.cluster.broker_epoch(1)
    assert cluster.active.next_wake_ms(cluster.now_ms) == cluster.now_ms + 500  # the NoOp first
    cluster.advance(SESSION_MS - 1)
    assert cluster.active.cluster.is_active(1)
    cluster.advance(1)
    assert not cluster.active.cluster.is_active(1)
    fence = BrokerRegistrationChangeRecord(1, epoch or 0, FenceChange.FENCE)
    assert any(fence in batch.records for batch in cluster.log.uncommitted_batches())


def test_stale_brokers_are_fenced_one_per_write(cluster: Cluster) -> None:
    cluster.start_broker(1)
    cluster.start_broker(2)
    start = len(cluster.log.batches)
    cluster.advance(SESSION_MS)
    fences = [
        batch.records
        for batch in cluster.log.batches[start:]
        if any(isinstance(r, BrokerRegistrationChangeRecord) for r in batch.records)
    ]
    assert len(fences) == 2 and all(len(records) == 1 for records in fences)


def test_a_broker_in_many_isrs_is_fenced_at_once_and_moved_out_in_steps() -> None:
    """Fencing a broker whose session expired, in more ISRs than one write may change: the
    fencing record comes with the first write (nobody would ask again after a failover half
    way), the rest of the moves follow one write per tick, each committed on its own, and at
    the end the broker is in no ISR (KIP-841)."""
    cluster = Cluster.create((1, 2, 3), max_partition_changes_per_step=4)
    cluster.elect(1)
    cluster.log.commit()
    for broker_id in (1, 2, 3):
        cluster.start_broker(broker_id)
    cluster.create_topic("wide", 10, 3)
    start = len(cluster.log.batches)
    for _ in range(SESSION_MS // 1000):
        cluster.advance(1000)
        cluster.heartbeat(2)
        cluster.heartbeat(3)
    for _ in range(10):  # one step per tick; each commits before the next
        cluster.advance(10)
        cluster.log.commit()
    steps = [
        records
        for records in new_batches(cluster, start)
        if any(isinstance(r, PartitionChangeRecord) for r in records)
        or any(isinstance(r, BrokerRegistrationChangeRecord) and r.broker_id == 1 for r in records)
    ]
    assert [len(records) for records in steps] == [5, 4, 2], steps  # the fence, 10 changes
    assert all(isinstance(r, PartitionChangeRecord) for r in steps[0][:-1] + steps[1] + steps[2])
    assert isinstance(steps[0][-1], BrokerRegistrationChangeRecord)
    assert steps[0][-1].fenced == FenceChange.FENCE
    assert not cluster.active.cluster.is_active(1)
    for partition in describe(cluster, "wide").partitions:
        assert 1 not in partition.isr and partition.leader in (2, 3), partition


def test_heartbeats_keep_a_broker_unfenced(cluster: Cluster) -> None:
    cluster.start_broker(1)
    for _ in range(10):
        cluster.advance(2000)
        cluster.heartbeat(1)
    assert cluster.active.cluster.is_active(1)


def test_a_failover_gives_every_broker_a_fresh_session(cluster: Cluster) -> None:
    cluster.start_broker(1)
    cluster.advance(8000)
    cluster.elect(2)
    cluster.advance(1000)  # 9000 since the last heartbeat, 1000 since the failover
    assert cluster.active.cluster.is_active(1)
    cluster.advance(SESSION_MS - 1000)
    assert not cluster.active.cluster.is_active(1)


def test_fencing_a_leader_moves_its_leaderships_in_the_same_write(cluster: Cluster) -> None:
    for broker in (1, 2, 3):
        cluster.start_broker(broker)
    cluster.create_topic("t", 3, 3)
    led_by_1 = [p for p in describe(cluster, "t").partitions if p.leader == 1]
    assert led_by_1
    # Brokers 2 and 3 keep heartbeating; broker 1 goes silent.
    for _ in range(4):
        cluster.advance(2000)
        cluster.heartbeat(2)
        cluster.heartbeat(3)
    start = len(cluster.log.batches)
    cluster.advance(SESSION_MS - 8000)
    (fence_batch,) = [
        b.records
        for b in cluster.log.batches[start:]
        if any(isinstance(r, BrokerRegistrationChangeRecord) for r in b.records)
    ]
    assert all(isinstance(r, PartitionChangeRecord) for r in fence_batch[:-1])
    assert isinstance(fence_batch[-1], BrokerRegistrationChangeRecord)
    cluster.log.commit()
    for partition in describe(cluster, "t").partitions:
        assert partition.leader in (2, 3) and 1 not in partition.isr


def test_controlled_shutdown_moves_leadership_then_says_shut_down(cluster: Cluster) -> None:
    for broker in (1, 2, 3):
        cluster.start_broker(broker)
    cluster.create_topic("t", 3, 3)
    first = cluster.heartbeat(1, want_shut_down=True).result()
    assert first.in_controlled_shutdown and not first.should_shut_down
    shutdown_offset = cluster.log.committed_offset
    partitions = describe(cluster, "t").partitions
    assert all(p.leader != 1 and 1 not in p.isr for p in partitions)
    # Leads nothing now, but brokers 2 and 3 have not reported applying the moves.
    cluster.heartbeat(2, metadata_offset=shutdown_offset - 1)
    cluster.heartbeat(3, metadata_offset=shutdown_offset - 1)
    waiting = cluster.heartbeat(1, want_shut_down=True).result()
    assert waiting.in_controlled_shutdown and not waiting.should_shut_down
    cluster.heartbeat(2, metadata_offset=shutdown_offset)
    cluster.heartbeat(3, metadata_offset=shutdown_offset)
    done = cluster.heartbeat(1, want_shut_down=True).result()
    assert done.should_shut_down and done.is_fenced


def test_a_new_incarnation_of_a_dead_leader_moves_its_leaderships_first(cluster: Cluster) -> None:
    for broker in (1, 2):
        cluster.start_broker(broker)
    cluster.create_topic("t", 2, 2)
    # The session of broker 1 expires, and its new process registers before the periodic check
    # fences the old one (here: the check never runs).
    cluster.active._fence_stale_brokers = lambda now_ms: None  # type: ignore[method-assign]
    cluster.advance(SESSION_MS - 1)
    cluster.heartbeat(2)
    cluster.advance(1)
    registered = cluster.register(1)
    records = cluster.log.batches[-1].records
    assert isinstance(records[-1], RegisterBrokerRecord)
    assert all(isinstance(r, PartitionChangeRecord) for r in records[:-1]) and records[:-1]
    assert registered.result().broker_epoch == cluster.log.batches[-1].last_offset
    assert all(p.leader == 2 for p in describe(cluster, "t").partitions)


# -- periodic work --------------------------------------------------------------------------------


def test_the_active_controller_writes_a_no_op_every_500_ms(cluster: Cluster) -> None:
    start = len(cluster.log.batches)
    cluster.advance(499)
    assert new_batches(cluster, start) == []
    cluster.advance(1)
    assert new_batches(cluster, start) == [(NoOpRecord(),)]
    cluster.advance(500)
    cluster.advance(500)
    assert new_batches(cluster, start) == [(NoOpRecord(),)] * 3
    # Standbys never write.
    assert not cluster.controller(2).is_active and cluster.controller(2).next_wake_ms(0) is None


def test_leaders_are_rebalanced_to_preferred_replicas_periodically() -> None:
    cluster = Cluster.create((1,), leader_imbalance_check_interval_ms=60_000)
    cluster.elect(1)
    cluster.log.commit()
    for broker in (1, 2):
        cluster.start_broker(broker)
    cluster.create_topic("t", 2, 2)
    preferred = {i: p.replicas[0] for i, p in enumerate(describe(cluster, "t").partitions)}
    # Broker 1 restarts: it loses its leaderships, then comes back.
    cluster.heartbeat(1, want_fence=True)
    cluster.heartbeat(1)
    partitions = describe(cluster, "t").partitions
    assert {i: p.leader for i, p in enumerate(partitions)} != preferred
    # Its followers catch up: the leader (broker 2) adds broker 1 back to every ISR.
    items = [
        AlterPartitionItem(
            describe(cluster, "t").topic_id or uuid.UUID(int=0),
            i,
            p.leader_epoch,
            (IsrMember(2), IsrMember(1)),
            p.partition_epoch,
        )
        for i, p in enumerate(partitions)
    ]
    epoch2 = cluster.active.cluster.broker_epoch(2) or 0
    altered = cluster.active.alter_partition(2, epoch2, items, cluster.now_ms)
    cluster.log.commit()
    assert all(result.error is None for result in altered.result())

    def leaders() -> dict[int, int]:
        return {i: p.leader for i, p in enumerate(describe(cluster, "t").partitions)}

    while cluster.now_ms + 2000 < 60_000:  # heartbeats every 2 s until the check runs at 60 s
        cluster.advance(2000)
        cluster.heartbeat(1)
        cluster.heartbeat(2)
    assert leaders() != preferred
    cluster.advance(60_000 - cluster.now_ms)
    cluster.log.commit()
    assert leaders() == preferred


# -- failover and replay --------------------------------------------------------------------------


def test_every_controller_holds_the_committed_state_the_log_says(cluster: Cluster) -> None:
    for broker in (1, 2, 3):
        cluster.start_broker(broker, rack=f"r{broker % 2}")
    cluster.create_topic("a", 4, 2)
    cluster.create_topic("b", 1, 3)
    cluster.active.incremental_alter_configs(
        {topic_resource("a"): [AlterConfigOp("retention.ms", AlterConfigOpType.SET, "1000")]},
        cluster.now_ms,
    )
    epoch = cluster.active.cluster.broker_epoch(2)
    cluster.active.allocate_producer_ids(2, epoch or 0, cluster.now_ms)
    cluster.log.commit()
    cluster.active.delete_topics(cluster.now_ms, names=["b"])
    cluster.log.commit()
    oracle = image_view(replayed_image(cluster.log.committed_records()))
    for controller in cluster.controllers.values():
        assert controller.last_stable_offset == cluster.log.committed_offset
        assert controller_view(controller, controller.last_stable_offset) == oracle
        assert controller_view(controller, None) == oracle  # nothing uncommitted is pending


def test_a_failover_replays_nothing_already_committed(cluster: Cluster) -> None:
    for broker in (1, 2):
        cluster.start_broker(broker)
    cluster.create_topic("t", 2, 2)
    standby = cluster.controller(2)
    replayed: list[int] = []
    original = standby._replay

    def counting(record: object, offset: int) -> None:
        replayed.append(offset)
        original(record, offset)  # type: ignore[arg-type]

    standby._replay = counting  # type: ignore[method-assign]
    committed = cluster.log.committed_offset
    cluster.elect(2)
    assert standby.is_active
    assert all(offset > committed for offset in replayed)
    # The new active controller writes on top of the state it already held.
    created = standby.create_topics([CreatableTopic("u", 1, 2)], cluster.now_ms)
    cluster.log.commit()
    assert created.result()[0].error is None


def test_uncommitted_writes_of_a_deposed_leader_vanish_or_commit_everywhere(
    cluster: Cluster,
) -> None:
    cluster.start_broker(1)
    cluster.active.create_topics([CreatableTopic("lost", 1, 1)], cluster.now_ms)
    cluster.elect(2, keep_uncommitted=False)
    for controller in cluster.controllers.values():
        assert not controller.read(lambda ctx: ctx.replication.topic_exists("lost"))
        assert not controller.replication.topic_exists("lost")
    kept = cluster.active.create_topics([CreatableTopic("kept", 1, 1)], cluster.now_ms)
    cluster.elect(3, keep_uncommitted=True)
    assert isinstance(kept.error, Exception)  # the caller never learns it succeeded...
    for controller in cluster.controllers.values():
        assert controller.replication.topic_exists("kept")  # ...but it did commit
