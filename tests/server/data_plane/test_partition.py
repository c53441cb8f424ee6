"""Partition: role changes against a real Log under a real LogManager in tmp_path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from replog.checkpoints import RECOVERY_POINT_CHECKPOINT
from replog.quorum.metadata.partition_registration import PartitionRegistration
from replog.record import build_batch
from replog.replication.leader_state import PartitionReplicationConfig, ReplicaEligibility
from replog.server.data_plane.partition import Partition
from replog.server.data_plane.producer_state_loader import ProducerExpiry
from replog.storage import log_reads
from replog.storage.log_config import LogConfig
from replog.storage.log_manager import LogManager
from tests.leftovers import close_after_test
from tests.metadata.metadata_helpers import topic_id

TID = topic_id(1)
T0 = 1_700_000_000_000
NOW_MS = 5_000


def registration(leader: int = 1, leader_epoch: int = 3, **kwargs: Any) -> PartitionRegistration:
    return PartitionRegistration(
        replicas=kwargs.pop("replicas", (1, 2)),
        isr=kwargs.pop("isr", (1, 2)),
        leader=leader,
        leader_epoch=leader_epoch,
        **kwargs,
    )


def batch(count: int = 1, *, tag: int = 0, **options: Any) -> bytes:
    return build_batch(
        [(T0 + i, b"k", f"v-{tag}-{i}".encode(), ()) for i in range(count)], **options
    )


def make(
    root: Path,
    broker_id: int = 1,
    *,
    config: LogConfig | None = None,
    expiry: ProducerExpiry | None = None,
) -> tuple[Partition, LogManager]:
    manager = LogManager(str(root), config or LogConfig())
    close_after_test(manager.close_after_failure)
    plog = manager.get_or_create_log("t", 0)
    return (
        Partition(
            topic="t",
            topic_id=TID,
            partition=0,
            local_broker_id=broker_id,
            log=plog,
            log_manager=manager,
            producer_expiry=None if expiry is None else lambda: expiry,
        ),
        manager,
    )


def lead(partition: Partition, reg: PartitionRegistration) -> object:
    return partition.make_leader(
        reg,
        config=PartitionReplicationConfig(),
        eligibility=ReplicaEligibility.everyone((1, 2)),
        now_ms=NOW_MS,
    )


def test_make_leader_assigns_the_leader_epoch_durably_before_any_append(tmp_path: Path) -> None:
    partition, _ = make(tmp_path)
    partition.log.append_as_leader(batch(2), 1)
    lead(partition, registration(leader_epoch=3))
    assert partition.is_leader and partition.follower is None
    assert partition.leader_state is not None and partition.leader_state.leader_epoch == 3
    entries = [(e.leader_epoch, e.start_offset) for e in partition.log.leader_epoch_cache.entries()]
    assert entries == [(1, 0), (3, 2)]
    # Written through to the checkpoint file before make_leader returned.
    lines = (tmp_path / "t-0" / "leader-epoch-checkpoint").read_text().splitlines()
    assert lines[2:] == ["1 0", "3 2"]


def test_same_leader_epoch_again_is_an_update_not_a_new_term(tmp_path: Path) -> None:
    partition, _ = make(tmp_path)
    lead(partition, registration(leader_epoch=3))
    first = partition.leader_state
    partition.log.append_as_leader(batch(), 3)
    lead(partition, registration(leader_epoch=3, partition_epoch=1, isr=(1,)))
    assert partition.leader_state is first
    assert first is not None and first.isr == (1,)
    assert [e.start_offset for e in partition.log.leader_epoch_cache.entries()] == [0]
    lead(partition, registration(leader_epoch=4, partition_epoch=2, isr=(1,)))
    assert partition.leader_state is first and first.leader_epoch == 4
    assert [
        (e.leader_epoch, e.start_offset) for e in partition.log.leader_epoch_cache.entries()
    ] == [(3, 0), (4, 1)]


def test_make_follower_fetches_from_its_log_end_never_truncating_to_the_hw(
    tmp_path: Path,
) -> None:
    partition, _ = make(tmp_path)
    plog = partition.log
    plog.append_as_leader(batch(2), 1)
    plog.append_as_leader(batch(1), 2)
    plog.update_high_watermark(1)
    started = partition.make_follower(registration(leader=2, leader_epoch=3), NOW_MS)
    assert started
    assert plog.log_end_offset == 3  # KIP-101: no truncation to the HW
    follower = partition.follower
    assert follower is not None and partition.leader_state is None
    assert (follower.leader_id, follower.leader_epoch) == (2, 3)
    assert (follower.fetch_offset, follower.last_fetched_epoch) == (3, 2)
    # An ISR change under the same leader epoch keeps the fetch state.
    follower.backoff_until_ms = 99
    assert not partition.make_follower(
        registration(leader=2, leader_epoch=3, partition_epoch=1, isr=(2,)), NOW_MS
    )
    assert partition.follower is follower and follower.backoff_until_ms == 99
    # A new leader epoch restarts it.
    assert partition.make_follower(registration(leader=2, leader_epoch=4), NOW_MS)
    assert partition.follower is not follower
    assert partition.follower is not None and partition.follower.backoff_until_ms == 0
    assert partition.current_leader().leader_epoch == 4


def test_leader_becoming_follower_drops_leader_state(tmp_path: Path) -> None:
    partition, _ = make(tmp_path)
    lead(partition, registration(leader_epoch=3))
    partition.log.append_as_leader(batch(), 3)
    assert partition.make_follower(registration(leader=2, leader_epoch=4), NOW_MS)
    assert not partition.is_leader
    assert partition.follower is not None
    assert (partition.follower.fetch_offset, partition.follower.last_fetched_epoch) == (1, 3)


def test_empty_log_follows_from_its_start_with_no_epoch(tmp_path: Path) -> None:
    partition, _ = make(tmp_path)
    partition.make_follower(registration(leader=2, leader_epoch=0), NOW_MS)
    assert partition.follower is not None
    assert (partition.follower.fetch_offset, partition.follower.last_fetched_epoch) == (0, -1)


def test_truncation_goes_through_the_log_manager_checkpoint(tmp_path: Path) -> None:
    partition, manager = make(tmp_path)
    plog = partition.log
    for tag in range(3):
        plog.append_as_leader(batch(1, tag=tag), 0)
    plog.flush()
    manager.checkpoint_recovery_points()
    checkpoint = tmp_path / RECOVERY_POINT_CHECKPOINT
    assert "t 0 3" in checkpoint.read_text()
    partition.make_follower(registration(leader=2, leader_epoch=1), NOW_MS)
    partition.truncate_to(1)
    assert plog.log_end_offset == 1
    assert "t 0 1" in checkpoint.read_text()  # rewritten at once, not at the next period
    assert partition.follower is not None and partition.follower.fetch_offset == 1
    partition.truncate_fully_and_start_at(7)
    assert (plog.log_start_offset, plog.log_end_offset) == (7, 7)
    assert partition.follower.fetch_offset == 7 and partition.follower.last_fetched_epoch == -1


def test_high_watermark_is_mirrored_into_the_log(tmp_path: Path) -> None:
    partition, _ = make(tmp_path)
    partition.log.append_as_leader(batch(2), 0)
    lead(partition, registration(leader_epoch=0, replicas=(1,), isr=(1,)))
    # A single-replica leader's HW is its LEO at once.
    assert partition.leader_state is not None and partition.leader_state.high_watermark == 2
    assert partition.log.high_watermark == 2


def test_delete_removes_the_log(tmp_path: Path) -> None:
    partition, manager = make(tmp_path)
    partition.log.append_as_leader(batch(), 0)
    lead(partition, registration())
    partition.delete()
    assert partition.stopped and not partition.is_leader and partition.follower is None
    assert manager.all_logs() == {}
    partition.delete()  # twice is harmless


def test_batch_headers_walks_in_bounded_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    partition, _ = make(tmp_path)
    for tag in range(5):
        partition.log.append_as_leader(batch(tag + 1, tag=tag), 0)
    monkeypatch.setattr(log_reads, "HEADER_WALK_CHUNK_BYTES", 1)
    headers = list(partition.log.batch_headers(0))
    assert [(h.base_offset, h.last_offset) for h in headers] == [
        (0, 0),
        (1, 2),
        (3, 5),
        (6, 9),
        (10, 14),
    ]
    assert [h.base_offset for h in partition.log.batch_headers(4, 10)] == [3, 6]


def test_a_leader_epoch_that_cannot_be_recorded_leaves_the_replica_not_leading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    partition, _ = make(tmp_path)

    def disk_full(cache: object, leader_epoch: int, start_offset: int) -> bool:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(type(partition.log.leader_epoch_cache), "assign", disk_full)
    with pytest.raises(OSError):
        lead(partition, registration(leader_epoch=3))
    assert partition.leader_state is None and partition.core.leader is None
    monkeypatch.undo()
    lead(partition, registration(leader_epoch=3))
    assert [e.leader_epoch for e in partition.log.leader_epoch_cache.entries()] == [3]
