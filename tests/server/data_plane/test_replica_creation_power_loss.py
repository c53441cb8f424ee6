"""Creating and deleting a batch of replicas on a `MemoryFileSystem`, with the power lost at
every file operation in turn: what the next start finds is what a real crash can leave (the
unsynced files, entries and renames gone), not a hand-made approximation of it. Whatever the
point, the restarted broker serves every replica of the image, empty and of the right topic,
and keeps no stray log of a topic that still exists (docs/storage.md, "Creating many
replicas"; tests/server/data_plane/test_replica_creation_crashes.py has the same table on
the disk)."""

from __future__ import annotations

import contextlib

import pytest

from replog.quorum.metadata.image import MetadataImage
from replog.quorum.metadata.records import RemoveTopicRecord
from replog.server.data_plane.replica_manager import ReplicaManager, ReplicaManagerConfig
from replog.storage.log_config import LogConfig
from replog.storage.log_manager import LogManager
from replog.storage.memory_fs import MemoryFileSystem
from replog.testing import LoopTasks, ManualClock
from tests.metadata.metadata_helpers import create_topic, replayed, topic_id
from tests.server.data_plane.test_replica_manager import T0, cluster_image

TID = topic_id(1)
PARTITIONS = 6
LOG_DIR = "/var/replog/broker1"


class PowerLoss(BaseException):
    """The machine stops where it is raised: nothing after it reaches the disk."""


class Broker:
    def __init__(self, fs: MemoryFileSystem) -> None:
        self.fs = fs
        self.log_manager = LogManager(LOG_DIR, LogConfig(), fs=fs, task_clock=ManualClock())
        self.rm = ReplicaManager(
            ReplicaManagerConfig(1),
            self.log_manager,
            clock=ManualClock(),
            wall_clock=ManualClock(T0),
            tasks=LoopTasks(),
        )

    def power_loss(self) -> Broker:
        """The disk as it comes back, and a broker started on it."""
        self.log_manager.close_after_failure()
        return Broker(self.fs.crash())


def image(tid: object = TID) -> MetadataImage:
    return cluster_image(*create_topic("t", tid, *[(1,)] * PARTITIONS))  # type: ignore[arg-type]


def lose_power_at(fs: MemoryFileSystem, operation: int) -> list[tuple[str, str]]:
    """Stop the machine at the `operation`-th file operation from now on (and at every one
    after it, as a dying process's cleanup reaches no disk); returns those seen before."""
    seen: list[tuple[str, str]] = []

    def hook(op: str, path: str) -> None:
        if len(seen) >= operation:
            raise PowerLoss(f"power lost at {op} {path}")
        seen.append((op, path))

    fs.on_operation = hook
    return seen


def operations_of(action: str) -> int:
    """How many file operations `action` makes on a broker that got this far without a loss."""
    broker = Broker(MemoryFileSystem())
    if action == "delete":
        broker.rm.apply_image(image())
    seen = lose_power_at(broker.fs, 10**9)
    act(broker, action)
    broker.log_manager.close_after_failure()
    return len(seen)


def act(broker: Broker, action: str) -> None:
    if action == "create":
        broker.rm.apply_image(image())
    else:
        broker.rm.apply_image(replayed(image(), RemoveTopicRecord(TID)))
        broker.log_manager.remove_deleted_logs()


def assert_serves_the_topic(broker: Broker) -> None:
    broker.rm.apply_image(image())
    partitions = broker.rm.partitions()
    assert len(partitions) == PARTITIONS
    for partition in partitions.values():
        assert partition.log.topic_id() == TID and partition.is_leader
        assert partition.log.log_end_offset == 0
    assert not [n for n in broker.fs.list_dir(LOG_DIR) if n.endswith("-stray")]


def test_a_power_loss_at_any_point_of_a_batch_of_new_replicas_leaves_them_made_again() -> None:
    total = operations_of("create")
    assert total > 4 * PARTITIONS  # a directory, a segment and two small files each
    for operation in range(total + 1):
        broker = Broker(MemoryFileSystem())
        lose_power_at(broker.fs, operation)
        with pytest.raises(PowerLoss) if operation < total else contextlib.nullcontext():
            act(broker, "create")
        broker.fs.on_operation = None
        assert_serves_the_topic(broker.power_loss())


def test_a_power_loss_at_any_point_of_a_deletion_leaves_no_log_served() -> None:
    """Before the deletion's rename is synced the logs come back under their names and are
    set aside as strays (the topic is gone from the image); after, they are gone or removed
    at the start. A topic made again later starts empty either way."""
    total = operations_of("delete")
    for operation in range(total + 1):
        broker = Broker(MemoryFileSystem())
        broker.rm.apply_image(image())
        lose_power_at(broker.fs, operation)
        with pytest.raises(PowerLoss) if operation < total else contextlib.nullcontext():
            act(broker, "delete")
        broker.fs.on_operation = None
        again = broker.power_loss()
        again.rm.apply_image(cluster_image())  # the topic is gone
        assert again.log_manager.all_logs() == {}
        assert not [n for n in again.fs.list_dir(LOG_DIR) if n.startswith("t-") and "." not in n]
        again.rm.apply_image(image(topic_id(7)))
        assert all(p.log.log_end_offset == 0 for p in again.rm.partitions().values())
