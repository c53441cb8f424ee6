"""A standby's replay of a committed batch in steps (`QuorumController.commit_in_steps`): a
large batch is replayed in slices of at most `REPLAY_STEP_RECORDS` records, the offsets move
only at its last step, and the state it ends in is the one a whole replay gives."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
from controller_harness import CLUSTER_ID, Cluster, controller_view

from replog.quorum.controller.controller import QuorumController
from replog.quorum.controller.controller_config import ControllerConfig
from replog.quorum.controller.replication_control import CreatableTopic
from replog.quorum.metadata.log_batches import SnapshotRecords
from replog.quorum.metadata.records import MetadataRecord
from replog.quorum.metadata.steps import REPLAY_STEP_RECORDS, run_to_end


def _standby(cluster: Cluster, node_id: int) -> QuorumController:
    """A controller outside the cluster's delivery: only the test hands it batches."""
    return QuorumController(
        ControllerConfig(node_id=node_id, cluster_id=CLUSTER_ID),
        cluster.log.for_node(node_id),
        random.Random(node_id),
    )


def _replays_per_step(controller: QuorumController, steps: Iterator[None]) -> list[int]:
    """Run `steps` to the end; how many records each step replayed."""
    counts = [0]
    original = controller._replay

    def counting(record: MetadataRecord, offset: int) -> None:
        counts[-1] += 1
        original(record, offset)

    controller._replay = counting  # type: ignore[method-assign]
    try:
        for _ in steps:
            counts.append(0)
    finally:
        controller._replay = original  # type: ignore[method-assign]
    return counts


def test_a_large_committed_batch_is_replayed_in_bounded_steps_like_a_whole_replay() -> None:
    cluster = Cluster.with_brokers([1, 2, 3])
    # One CreateTopics of 1,200 partitions: one committed batch of 1,201 records.
    pending = cluster.active.create_topics([CreatableTopic("big", 1_200, 3)], cluster.now_ms)
    cluster.log.commit()
    assert pending.result()[0].error is None
    big = max(cluster.log.batches, key=lambda batch: len(batch.records))
    assert len(big.records) > 4 * REPLAY_STEP_RECORDS

    stepped = _standby(cluster, 9)
    for batch in cluster.log.batches:
        if batch is not big:
            stepped.handle_commit(batch.committed())
            continue
        before = stepped.last_committed_offset
        steps = stepped.commit_in_steps(batch.committed())
        next(steps)  # the first slice replayed: nothing of the batch committed yet
        assert stepped.last_committed_offset == before
        assert stepped.last_stable_offset == before
        counts = [REPLAY_STEP_RECORDS, *_replays_per_step(stepped, steps)]
        assert sum(counts) == len(big.records)
        assert max(counts) <= REPLAY_STEP_RECORDS
        assert len(counts) == -(-len(big.records) // REPLAY_STEP_RECORDS)
        assert stepped.last_committed_offset == batch.last_offset

    whole = cluster.controller(2)  # a standby that heard every batch whole
    assert stepped.last_stable_offset == whole.last_stable_offset
    assert controller_view(stepped, None) == controller_view(whole, None)
    assert controller_view(stepped, stepped.last_stable_offset) == controller_view(
        whole, whole.last_stable_offset
    )


def test_random_batches_replayed_in_steps_or_whole_give_the_same_state() -> None:
    """Property: however the committed batches are sized, replaying each in steps (in any
    sizes of random topic creations and deletions) ends in the state a whole replay gives."""
    for seed in range(3):
        rng = random.Random(seed)
        cluster = Cluster.with_brokers([1, 2, 3])
        for index in range(6):
            pending = cluster.active.create_topics(
                [CreatableTopic(f"t{index}", rng.randint(1, 600), rng.randint(1, 3))],
                cluster.now_ms,
            )
            cluster.log.commit()
            assert pending.result()[0].error is None
            if rng.random() < 0.3:
                cluster.active.delete_topics(cluster.now_ms, names=[f"t{index}"])
                cluster.log.commit()
        stepped = _standby(cluster, 9)
        for batch in cluster.log.batches:
            counts = _replays_per_step(stepped, stepped.commit_in_steps(batch.committed()))
            assert max(counts) <= REPLAY_STEP_RECORDS, (seed, counts)
        whole = cluster.controller(3)
        assert controller_view(stepped, None) == controller_view(whole, None), seed


def test_a_raft_event_between_two_steps_is_refused_not_applied_to_half_a_batch() -> None:
    """A standby that claimed leadership over half a batch would write at offsets the rest
    of the batch holds: a leader change (or a snapshot load, another batch) between two
    steps fails loudly, and nothing of the batch is committed."""
    cluster = Cluster.with_brokers([1, 2, 3])
    pending = cluster.active.create_topics([CreatableTopic("big", 600, 3)], cluster.now_ms)
    cluster.log.commit()
    assert pending.result()[0].error is None
    big = max(cluster.log.batches, key=lambda batch: len(batch.records))
    stepped = _standby(cluster, 9)
    for batch in cluster.log.batches:
        if batch is big:
            break
        stepped.handle_commit(batch.committed())
    before = stepped.last_committed_offset
    steps = stepped.commit_in_steps(big.committed())
    next(steps)
    with pytest.raises(RuntimeError, match="a leader change arrived while committed batch"):
        stepped.handle_leader_change(9, big.quorum_epoch + 1, cluster.now_ms)
    assert not stepped.is_active and stepped.last_committed_offset == before
    with pytest.raises(RuntimeError, match="a committed batch arrived"):
        run_to_end(stepped.commit_in_steps(big.committed()))
    for _ in steps:  # the batch's own steps finish it; then events are taken again
        pass
    assert stepped.last_committed_offset == big.last_offset
    stepped.handle_leader_change(1, big.quorum_epoch + 1, cluster.now_ms)


def test_a_snapshot_is_loaded_in_bounded_steps_and_stands_for_its_offset_only_at_the_end() -> None:
    """A restart loads a snapshot of a record per partition: in slices of at most
    `REPLAY_STEP_RECORDS` records, the offsets staying where they were until the last one,
    a Raft event between two slices refused, and the same state as a whole load."""
    cluster = Cluster.with_brokers([1, 2, 3])
    pending = cluster.active.create_topics([CreatableTopic("big", 1_000, 3)], cluster.now_ms)
    cluster.log.commit()
    assert pending.result()[0].error is None
    active = cluster.active
    snapshot = SnapshotRecords(
        active.last_stable_offset,
        cluster.log.quorum_epoch,
        tuple(active.snapshot_records(active.last_stable_offset)),
    )
    assert len(snapshot.records) > 4 * REPLAY_STEP_RECORDS

    stepped = _standby(cluster, 9)
    before = stepped.last_committed_offset
    steps = stepped.load_snapshot_in_steps(snapshot)
    next(steps)
    assert stepped.last_committed_offset == stepped.last_stable_offset == before
    with pytest.raises(RuntimeError, match="a leader change arrived while the snapshot ending"):
        stepped.handle_leader_change(9, cluster.log.quorum_epoch + 1, cluster.now_ms)
    counts = [REPLAY_STEP_RECORDS, *_replays_per_step(stepped, steps)]
    assert sum(counts) == len(snapshot.records) and max(counts) <= REPLAY_STEP_RECORDS
    assert stepped.last_stable_offset == snapshot.last_contained_offset

    whole = _standby(cluster, 8)
    whole.handle_load_snapshot(snapshot)
    assert controller_view(stepped, stepped.last_stable_offset) == controller_view(
        whole, whole.last_stable_offset
    )
    assert controller_view(stepped, None) == controller_view(active, active.last_stable_offset)
