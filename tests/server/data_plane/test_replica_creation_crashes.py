"""Creating and deleting replicas in batches, off the event loop, and what a crash at each point
leaves (docs/storage.md, "Creating many replicas": one test per row of its crash table).

A power loss is modelled by changing the files a batch wrote but had not synced: removed,
emptied, or a rename undone; a process crash by opening a new LogManager and ReplicaManager over
the same log dir without a clean shutdown.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from replog.checkpoints import CLEAN_SHUTDOWN_MARKER
from replog.errors import KafkaStorageError
from replog.quorum.metadata.image import MetadataImage
from replog.quorum.metadata.records import RemoveTopicRecord
from replog.server.data_plane.replica_manager import ReplicaManager, ReplicaManagerConfig
from replog.storage.fs import OsFileSystem
from replog.storage.log import Log
from replog.storage.log_config import LogConfig
from replog.storage.log_manager import LogManager
from replog.testing import LoopTasks, ManualClock
from tests.leftovers import close_after_test
from tests.metadata.metadata_helpers import create_topic, replayed, topic_id
from tests.server.data_plane.test_replica_manager import (
    T0,
    batch,
    cluster_image,
    produce,
)

TID = topic_id(1)
PARTITIONS = 12


class SyncCounting(OsFileSystem):
    """The real disk, counting fsyncs and file-system syncs."""

    def __init__(self) -> None:
        self.fsyncs = 0
        self.fs_syncs = 0

    def fsync_dir(self, path: str) -> None:
        if not self._defer(path):
            self.fsyncs += 1
        super().fsync_dir(path)

    def sync_file_systems(self, directories: object) -> None:
        self.fs_syncs += 1
        super().sync_file_systems(directories)  # type: ignore[arg-type]


class Broker:
    def __init__(self, root: Path, fs: OsFileSystem | None = None) -> None:
        self.clock = ManualClock()
        self.log_manager = LogManager(
            str(root / "broker1"), LogConfig(), fs=fs or OsFileSystem(), task_clock=self.clock
        )
        close_after_test(self.log_manager.close_after_failure)
        self.rm = ReplicaManager(
            ReplicaManagerConfig(1),
            self.log_manager,
            clock=self.clock,
            wall_clock=ManualClock(T0),
            tasks=LoopTasks(),
        )

    @property
    def log_dir(self) -> Path:
        return Path(self.log_manager.log_dirs[0])


def many_partitions(tid: object = TID) -> MetadataImage:
    return cluster_image(*create_topic("t", tid, *[(1,)] * PARTITIONS))  # type: ignore[arg-type]


def test_a_batch_of_new_replicas_costs_one_file_system_sync_not_an_fsync_each(
    tmp_path: Path,
) -> None:
    fs = SyncCounting()
    broker = Broker(tmp_path, fs)
    before = fs.fsyncs
    broker.rm.apply_image(many_partitions())
    assert len(broker.rm.partitions()) == PARTITIONS
    assert fs.fs_syncs == 1
    assert fs.fsyncs == before  # no per-replica fsync of any file or directory
    for partition in broker.rm.partitions().values():
        assert partition.log.topic_id() == TID
        assert partition.is_leader
        assert partition.log.leader_epoch_cache.latest_epoch == 0


def test_a_new_replicas_small_files_are_written_in_place_without_a_rename(
    tmp_path: Path,
) -> None:
    class CountingWrites(OsFileSystem):
        def __init__(self) -> None:
            self.in_place: list[str] = []
            self.replaced: list[str] = []

        def write_new_file(self, path: str, data: bytes) -> None:
            self.in_place.append(os.path.basename(path))
            super().write_new_file(path, data)

        def atomic_write(self, path: str, data: bytes) -> None:
            self.replaced.append(os.path.basename(path))
            super().atomic_write(path, data)

    fs = CountingWrites()
    broker = Broker(tmp_path, fs)
    broker.rm.apply_image(many_partitions())
    assert sorted(set(fs.in_place)) == ["leader-epoch-checkpoint", "partition.metadata"]
    assert len(fs.in_place) == 2 * PARTITIONS  # every replica leads here
    assert fs.replaced == []
    assert not list(broker.log_dir.glob("*/*.tmp"))


@pytest.mark.asyncio
async def test_a_started_manager_applies_images_in_rounds_off_the_loop(tmp_path: Path) -> None:
    broker = Broker(tmp_path)
    await broker.rm.start()
    try:
        broker.rm.apply_image(many_partitions())
        assert broker.rm.partitions() == {}  # nothing created on the caller's turn
        async with asyncio.timeout(10):
            await broker.rm.wait_applied()
        assert len(broker.rm.partitions()) == PARTITIONS
        assert broker.rm.pending_changes == 0
        assert (await produce(broker_node(broker), batch(2))).error is None
    finally:
        await broker.rm.stop()


def broker_node(broker: Broker) -> Any:
    """`produce` takes anything with an `rm`."""
    return broker


@pytest.mark.asyncio
async def test_images_applied_while_a_batch_is_off_the_loop_apply_in_order(
    tmp_path: Path,
) -> None:
    broker = Broker(tmp_path)
    await broker.rm.start()
    try:
        created = many_partitions()
        broker.rm.apply_image(created)
        # Deleted and created again under another id before the first batch is back.
        gone = replayed(created, RemoveTopicRecord(TID))
        broker.rm.apply_image(gone)
        again = replayed(gone, *create_topic("t", topic_id(2), *[(1,)] * PARTITIONS))
        broker.rm.apply_image(again)
        async with asyncio.timeout(10):
            await broker.rm.wait_applied()
        assert len(broker.rm.partitions()) == PARTITIONS
        for partition in broker.rm.partitions().values():
            assert partition.topic_id == topic_id(2)
            assert partition.log.topic_id() == topic_id(2)
        assert not list(broker.log_dir.glob("*-stray"))
    finally:
        await broker.rm.stop()


def test_a_process_crash_after_a_batch_loses_no_replica(tmp_path: Path) -> None:
    broker = Broker(tmp_path)
    broker.rm.apply_image(many_partitions())
    # kill -9: no shutdown; a new incarnation over the same log dir.
    again = Broker(tmp_path)
    assert len(again.log_manager.all_logs()) == PARTITIONS
    again.rm.apply_image(many_partitions())
    assert len(again.rm.partitions()) == PARTITIONS
    assert not list(again.log_dir.glob("*-stray"))


def test_a_power_loss_before_a_batch_synced_leaves_replicas_that_are_made_again(
    tmp_path: Path,
) -> None:
    broker = Broker(tmp_path)
    broker.rm.apply_image(many_partitions())
    # What a power loss before the batch's sync may leave, one case per partition: the
    # directory gone, `partition.metadata` gone or empty, the epoch checkpoint gone or empty,
    # segment files gone.
    dirs = sorted(broker.log_dir.glob("t-*"), key=lambda p: int(p.name.rsplit("-", 1)[1]))
    for directory in dirs[0:2]:
        for child in directory.iterdir():
            child.unlink()
        directory.rmdir()
    (dirs[2] / "partition.metadata").unlink()
    (dirs[3] / "partition.metadata").write_bytes(b"")
    (dirs[4] / "leader-epoch-checkpoint").unlink()
    (dirs[5] / "leader-epoch-checkpoint").write_bytes(b"")
    for name in ("00000000000000000000.log", "00000000000000000000.index"):
        (dirs[6] / name).unlink(missing_ok=True)
    again = Broker(tmp_path)
    again.rm.apply_image(many_partitions())
    assert len(again.rm.partitions()) == PARTITIONS
    for partition in again.rm.partitions().values():
        assert partition.log.topic_id() == TID
        assert partition.is_leader and partition.log.leader_epoch_cache.latest_epoch == 0
        assert partition.log.log_end_offset == 0
    assert not list(again.log_dir.glob("*-stray"))


@pytest.mark.asyncio
async def test_a_power_loss_before_a_deletion_synced_sets_the_log_aside(tmp_path: Path) -> None:
    broker = Broker(tmp_path)
    created = many_partitions()
    broker.rm.apply_image(created)
    assert (await produce(broker_node(broker), batch(3))).error is None
    broker.rm.apply_image(replayed(created, RemoveTopicRecord(TID)))
    # The renames happened; the log dir's fsync (the background task's) did not: a power
    # loss may bring back the old names.
    renamed = sorted(broker.log_dir.glob("*-delete"))
    assert len(renamed) == PARTITIONS
    for path in renamed:
        name = path.name.split(".", 1)[0]
        path.rename(broker.log_dir / name)
    again = Broker(tmp_path)
    again.rm.apply_image(cluster_image())  # the topic is gone
    assert again.log_manager.all_logs() == {}
    assert len(list(again.log_dir.glob("*-stray"))) == PARTITIONS  # kept, never served
    again.rm.apply_image(many_partitions(topic_id(7)))
    assert all(p.log.log_end_offset == 0 for p in again.rm.partitions().values())


def test_a_deletion_is_made_durable_before_any_file_goes(tmp_path: Path) -> None:
    order: list[str] = []

    class Recording(OsFileSystem):
        def fsync_dir(self, path: str) -> None:
            order.append(f"fsync {os.path.basename(path)}")
            super().fsync_dir(path)

        def remove_tree(self, path: str) -> None:
            order.append("remove")
            super().remove_tree(path)

    broker = Broker(tmp_path, Recording())
    created = many_partitions()
    broker.rm.apply_image(created)
    order.clear()
    broker.rm.apply_image(replayed(created, RemoveTopicRecord(TID)))
    assert order == []  # renames only, on the caller's thread
    broker.log_manager.remove_deleted_logs()
    assert order == ["fsync broker1"] + ["remove"] * PARTITIONS
    assert not list(broker.log_dir.glob("*-delete"))


def test_a_power_loss_during_removal_leaves_a_directory_loading_removes(tmp_path: Path) -> None:
    broker = Broker(tmp_path)
    created = many_partitions()
    broker.rm.apply_image(created)
    broker.rm.apply_image(replayed(created, RemoveTopicRecord(TID)))
    [first, *_] = sorted(broker.log_dir.glob("*-delete"))
    next(first.glob("*.log")).unlink()  # removal began, then the power went
    again = Broker(tmp_path)
    assert not list(again.log_dir.glob("*-delete"))
    assert again.log_manager.all_logs() == {}


def test_a_leader_epoch_written_without_a_sync_is_synced_before_the_recovery_point_passes(
    tmp_path: Path,
) -> None:
    fs = SyncCounting()
    broker = Broker(tmp_path, fs)
    broker.rm.apply_image(many_partitions())
    plog = broker.log_manager.get_log("t", 0)
    checkpoint = plog.leader_epoch_cache._store
    # A round of leadership changes on the loop: the epoch is written, its sync deferred.
    with broker.log_manager.collect_unsynced() as unsynced:
        plog.leader_epoch_cache.assign(5, plog.log_end_offset)
    assert checkpoint.needs_sync and unsynced  # type: ignore[attr-defined]
    plog.append_as_leader(batch(2), leader_epoch=5)
    before = fs.fsyncs
    plog.flush()  # the recovery point passes epoch 5's records: the epoch file first
    assert not checkpoint.needs_sync  # type: ignore[attr-defined]
    assert fs.fsyncs > before
    assert plog.recovery_point == 2


def test_a_round_sync_marks_the_deferred_epoch_files_synced(tmp_path: Path) -> None:
    broker = Broker(tmp_path)
    broker.rm.apply_image(many_partitions())
    logs = [broker.log_manager.get_log("t", p) for p in range(3)]
    with broker.log_manager.collect_unsynced() as unsynced:
        for plog in logs:
            plog.leader_epoch_cache.assign(7, 0)
    assert all(plog.leader_epoch_cache._store.needs_sync for plog in logs)  # type: ignore[attr-defined]
    broker.log_manager.sync_unsynced(unsynced)
    assert not any(plog.leader_epoch_cache._store.needs_sync for plog in logs)  # type: ignore[attr-defined]


def test_a_clean_close_leaves_an_epoch_written_without_a_sync_on_disk(tmp_path: Path) -> None:
    broker = Broker(tmp_path)
    broker.rm.apply_image(many_partitions())
    plog = broker.log_manager.get_log("t", 0)
    with broker.log_manager.collect_unsynced():
        plog.leader_epoch_cache.assign(9, 0)  # no record of epoch 9 yet
    path = Path(plog.directory) / "leader-epoch-checkpoint"
    assert b"9 0" not in path.read_bytes()  # left to the round's worker
    broker.log_manager.shutdown()
    assert b"9 0" in path.read_bytes()


def test_a_storage_error_creating_a_batch_fails_the_apply_and_leaves_nothing_held(
    tmp_path: Path,
) -> None:
    class NoRoomForMetadata(OsFileSystem):
        # A new log's file is written in place, a later one replaced: both refused.
        def write_new_file(self, path: str, data: bytes) -> None:
            if "partition.metadata" in path:
                raise OSError(28, "No space left on device", path)
            super().write_new_file(path, data)

        def atomic_write(self, path: str, data: bytes) -> None:
            if "partition.metadata" in path:
                raise OSError(28, "No space left on device", path)
            super().atomic_write(path, data)

    broker = Broker(tmp_path, NoRoomForMetadata())
    with pytest.raises(KafkaStorageError, match=r"partition\.metadata.*No space left"):
        broker.rm.apply_image(many_partitions())
    # Nothing is left held: a later image is applied (and fails the same way) instead of
    # spinning on partitions nobody will release (a stopping broker hung so on a full disk).
    with pytest.raises(KafkaStorageError):
        broker.rm.apply_image(many_partitions(topic_id(3)))


def test_a_start_after_a_disk_filled_while_writing_partition_metadata_makes_the_replicas(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The disk fills after a new log's partition.metadata got its first bytes (a short
    # write, then ENOSPC): the broker stops, and once room is made its next start takes
    # the logs as the topic's, as after a crash before the file was written.
    real_write = os.write

    def short_write_of_metadata(fd: int, data: object) -> int:
        if not os.readlink(f"/proc/self/fd/{fd}").endswith("partition.metadata"):
            return real_write(fd, data)  # type: ignore[call-overload]
        if bytes(data).startswith(b"version"):  # type: ignore[call-overload]
            return real_write(fd, bytes(data)[:5])  # type: ignore[call-overload]
        raise OSError(28, "No space left on device")

    broker = Broker(tmp_path)
    monkeypatch.setattr(os, "write", short_write_of_metadata)
    with pytest.raises(KafkaStorageError, match=r"partition\.metadata.*No space left"):
        broker.rm.apply_image(many_partitions())
    monkeypatch.undo()
    again = Broker(tmp_path)  # kill -9, room made
    again.rm.apply_image(many_partitions())
    assert len(again.rm.partitions()) == PARTITIONS
    for partition in again.rm.partitions().values():
        assert partition.log.topic_id() == TID and partition.is_leader


@pytest.mark.asyncio
async def test_a_stopped_manager_takes_no_more_images(tmp_path: Path) -> None:
    broker = Broker(tmp_path)
    await broker.rm.start()
    await broker.rm.stop()
    broker.rm.apply_image(many_partitions())
    assert broker.rm.partitions() == {}
    assert broker.log_manager.all_logs() == {}


def test_a_few_new_replicas_sync_each_write_and_no_file_system(tmp_path: Path) -> None:
    # A file-system sync also writes back everything else dirty on the disk (0.1-0.5 s under
    # a produce load), so a small batch syncs its own few files instead.
    fs = SyncCounting()
    broker = Broker(tmp_path, fs)
    broker.rm.apply_image(cluster_image(*create_topic("t", TID, (1,), (1,))))
    assert len(broker.rm.partitions()) == 2
    assert fs.fs_syncs == 0
    for partition in broker.rm.partitions().values():
        assert partition.log.topic_id() == TID
        assert not partition.log.leader_epoch_cache._store.needs_sync  # type: ignore[attr-defined]


def test_a_round_of_few_epoch_files_syncs_each_and_no_file_system(tmp_path: Path) -> None:
    fs = SyncCounting()
    broker = Broker(tmp_path, fs)
    broker.rm.apply_image(many_partitions())
    syncs = fs.fs_syncs
    logs = [broker.log_manager.get_log("t", p) for p in range(3)]
    with broker.log_manager.collect_unsynced() as unsynced:
        for plog in logs:
            plog.leader_epoch_cache.assign(7, 0)
    broker.log_manager.sync_unsynced(unsynced, each_up_to=8)
    assert fs.fs_syncs == syncs
    for plog in logs:
        assert not plog.leader_epoch_cache._store.needs_sync  # type: ignore[attr-defined]
        assert b"7 0" in (Path(plog.directory) / "leader-epoch-checkpoint").read_bytes()


def test_a_power_loss_while_loading_leaves_a_load_that_is_done_again(tmp_path: Path) -> None:
    """Loading after a crash cuts idle leaders' epoch entries back to their logs' ends without
    a sync of its own per file (a clean load keeps them: docs/storage.md, "Leader epochs at a
    clean open"). A power loss before the load's one sync may undo those rewrites; the
    marker's removal was synced before, so the next start is unclean and cuts them again."""
    root = tmp_path / "broker1"
    first = LogManager(str(root), LogConfig())
    for partition in range(3):
        created = first.get_or_create_log("t", partition)
        created.leader_epoch_cache.assign(4, 0)
    first.shutdown()
    (root / CLEAN_SHUTDOWN_MARKER).unlink()  # it crashed instead: the load cuts them
    epoch_files = {p: root / f"t-{p}" / "leader-epoch-checkpoint" for p in range(3)}
    before = {p: path.read_bytes() for p, path in epoch_files.items()}

    class PowerLossAtTheLoadsSync(OsFileSystem):
        def sync_file_systems(self, directories: object) -> None:
            for p, path in epoch_files.items():  # what was not synced is lost
                path.write_bytes(before[p])
            raise OSError(5, "power lost")

    with pytest.raises(KafkaStorageError):
        LogManager(str(root), LogConfig(), fs=PowerLossAtTheLoadsSync())
    assert not (root / CLEAN_SHUTDOWN_MARKER).exists()
    again = LogManager(str(root), LogConfig())
    try:
        assert again.previous_broker_epoch() == -1  # unclean
        assert [again.get_log("t", p).leader_epoch_cache.entries() for p in range(3)] == [()] * 3
    finally:
        again.shutdown()


def test_a_batchs_new_logs_are_made_as_files_off_the_loop_and_built_as_objects_on_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker thread (`_open_logs`) makes no log object (it would hold the GIL for it,
    below the loop's priority: `bulk_threads`' Rules); `_install` builds them."""
    broker = Broker(tmp_path)
    built: list[str] = []
    real_init = Log.__init__

    def recorded(self: Log, *args: Any, **kwargs: Any) -> None:
        built.append(phase)
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(Log, "__init__", recorded)
    real_open, real_install = broker.rm._open_logs, broker.rm._install
    phase = "none"

    def open_logs(creations: Any) -> Any:
        nonlocal phase
        phase = "open"
        try:
            return real_open(creations)
        finally:
            phase = "none"

    def install(opened: Any, first: int = 0, budget_ms: int | None = None) -> int:
        nonlocal phase
        phase = "install"
        try:
            return real_install(opened, first, budget_ms)
        finally:
            phase = "none"

    monkeypatch.setattr(broker.rm, "_open_logs", open_logs)
    monkeypatch.setattr(broker.rm, "_install", install)
    broker.rm.apply_image(many_partitions())
    assert built == ["install"] * PARTITIONS
    for partition in broker.rm.partitions().values():
        assert partition.log.topic_id() == TID
        assert partition.log.leader_epoch_cache.latest_epoch == 0
        assert partition.producer_state_loaded
    assert len(broker.log_manager.all_logs()) == PARTITIONS


def test_new_log_files_never_built_load_at_the_next_start(tmp_path: Path) -> None:
    """A stop between a batch's files and its install (the loop never took them): the next
    start loads each as a log of its topic, at its epoch."""
    broker = Broker(tmp_path)
    config = LogConfig()
    with broker.log_manager.deferred_sync():
        made = [
            broker.log_manager.make_new_log("t", p, config, topic_id=TID, leader_epoch=3)
            for p in range(PARTITIONS)
        ]
    assert all(m is not None for m in made)
    assert broker.log_manager.all_logs() == {}
    broker.log_manager.shutdown()
    again = Broker(tmp_path)
    loaded = again.log_manager.all_logs()
    assert len(loaded) == PARTITIONS
    for plog in loaded.values():
        assert plog.topic_id() == TID
        assert plog.leader_epoch_cache.latest_epoch == 3
        assert plog.log_end_offset == 0
    again.rm.apply_image(many_partitions())
    assert len(again.rm.partitions()) == PARTITIONS
    assert not list(again.log_dir.glob("*-stray"))


@pytest.mark.asyncio
async def test_new_logs_wait_for_a_busy_log_manager_without_holding_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The log manager's task thread holds its lock through a pass over every log (flushes,
    # checkpoints): the install on the loop must come back for it, not block the loop on it.
    broker = Broker(tmp_path)
    manager = broker.log_manager
    held, release = threading.Event(), threading.Event()

    def hold_the_lock() -> None:
        with manager._lock:
            held.set()
            release.wait(10)

    make = manager.make_new_log
    made = 0

    def make_then_hold(*args: Any, **kwargs: Any) -> Any:
        nonlocal made
        result = make(*args, **kwargs)
        made += 1
        if made == PARTITIONS:  # every file made: another thread takes the lock now
            threading.Thread(target=hold_the_lock, daemon=True).start()
            held.wait(10)
        return result

    monkeypatch.setattr(manager, "make_new_log", make_then_hold)
    await broker.rm.start()
    try:
        broker.rm.apply_image(many_partitions())
        await asyncio.to_thread(held.wait, 10)
        longest_s = 0.0
        for _ in range(30):  # the loop goes on while the lock is held
            before = time.monotonic()
            await asyncio.sleep(0.01)
            longest_s = max(longest_s, time.monotonic() - before)
        assert longest_s < 2, f"the loop was held {longest_s:.1f} s"
        assert broker.rm.partitions() == {}  # nothing installed without the lock
        release.set()
        async with asyncio.timeout(10):
            await broker.rm.wait_applied()
        assert len(broker.rm.partitions()) == PARTITIONS
    finally:
        release.set()
        await broker.rm.stop()
