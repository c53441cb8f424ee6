"""DeferredSyncs (the epoch checkpoints a round of leadership changes wrote, synced off the
loop while the rounds go on): alone with a fake sync, and in a replica manager over a disk
whose file-system sync can be held back (docs/storage.md, "Creating many replicas")."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from replog.errors import KafkaStorageError
from replog.quorum.metadata.image import MetadataImage
from replog.quorum.metadata.records import PartitionChangeRecord, RemoveTopicRecord
from replog.server.data_plane.deferred_syncs import DeferredSyncs
from replog.storage.fs import OsFileSystem, Unsynced
from replog.testing import LoopTasks
from tests.metadata.metadata_helpers import create_topic, replayed
from tests.server.data_plane.test_replica_creation_crashes import TID, Broker
from tests.server.data_plane.test_replica_manager import batch, cluster_image, produce

PARTITIONS = 12  # above SYNC_EACH_MAX: a round's epoch files go to one file-system sync


def unsynced(*paths: str) -> Unsynced:
    found = Unsynced()
    found.paths.update(paths)
    return found


class HeldSync:
    """A sync function that records what it syncs and can be held back."""

    def __init__(self) -> None:
        self.synced: list[set[str]] = []
        self.go = threading.Event()
        self.go.set()
        self.entered = threading.Event()

    def __call__(self, what: Unsynced) -> None:
        self.entered.set()
        self.go.wait(10)
        self.synced.append(set(what.paths))


async def first_sync_held() -> tuple[HeldSync, DeferredSyncs]:
    """Syncs whose first sync (of "a") has begun and is held."""
    sync = HeldSync()
    sync.go.clear()
    syncs = DeferredSyncs(sync, tasks=LoopTasks())
    syncs.add(unsynced("a"))
    await asyncio.to_thread(sync.entered.wait, 5)
    return sync, syncs


@pytest.mark.asyncio
async def test_adding_never_waits_and_what_comes_during_a_sync_goes_into_one_next_sync() -> None:
    sync, syncs = await first_sync_held()
    for path in ("b", "c", "d"):
        syncs.add(unsynced(path))  # returns at once while the disk is busy
    assert syncs.waiting
    sync.go.set()
    async with asyncio.timeout(5):
        await syncs.drain()
    assert sync.synced == [{"a"}, {"b", "c", "d"}]
    assert not syncs.waiting
    await syncs.stop()


@pytest.mark.asyncio
async def test_nothing_to_sync_starts_nothing() -> None:
    sync = HeldSync()
    syncs = DeferredSyncs(sync, tasks=LoopTasks())
    syncs.add(Unsynced())
    async with asyncio.timeout(1):
        await syncs.drain()
    assert sync.synced == [] and not syncs.waiting
    await syncs.stop()


@pytest.mark.asyncio
async def test_a_failed_sync_is_a_storage_error_and_ends_the_syncs() -> None:
    errors: list[KafkaStorageError] = []
    calls: list[Unsynced] = []

    def failing(what: Unsynced) -> None:
        calls.append(what)
        raise OSError(5, "Input/output error")

    syncs = DeferredSyncs(failing, tasks=LoopTasks(), on_storage_error=errors.append)
    syncs.add(unsynced("a"))
    async with asyncio.timeout(5):
        await syncs.drain()
    assert len(errors) == 1 and "Input/output error" in str(errors[0])
    syncs.add(unsynced("b"))  # nothing is synced after a failure
    await syncs.drain()
    assert len(calls) == 1
    await syncs.stop()


@pytest.mark.asyncio
async def test_stop_lets_the_sync_under_way_finish_and_starts_no_other() -> None:
    sync, syncs = await first_sync_held()
    syncs.add(unsynced("b"))
    stopping = asyncio.ensure_future(syncs.stop())
    await asyncio.sleep(0.05)
    assert not stopping.done()  # the sync under way is not abandoned mid-way
    sync.go.set()
    async with asyncio.timeout(5):
        await stopping
    assert sync.synced == [{"a"}]
    syncs.add(unsynced("c"))
    assert not syncs.waiting


class HeldDisk(OsFileSystem):
    """The real disk, whose deferred writes and syncs wait while `go` is clear."""

    def __init__(self) -> None:
        self.go = threading.Event()
        self.go.set()

    def sync_unsynced(self, unsynced: Unsynced, *, each_up_to: int = 0) -> None:
        self.go.wait(10)
        super().sync_unsynced(unsynced, each_up_to=each_up_to)


async def leaderships_taken_on_a_held_disk(broker: Broker, disk: HeldDisk) -> MetadataImage:
    """Broker 1 follows every partition of `t`; then, with the disk's deferred writes and
    syncs held back, leads them all at leader epoch 1. Returns that image."""
    followed = cluster_image(*create_topic("t", TID, *[(2, 1)] * PARTITIONS))
    led = replayed(
        followed,
        *(PartitionChangeRecord(TID, p, isr=(1, 2), leader=1) for p in range(PARTITIONS)),
    )
    broker.rm.apply_image(followed)
    async with asyncio.timeout(10):
        await broker.rm.wait_applied()
    disk.go.clear()  # from now on the disk takes its time
    broker.rm.apply_image(led)
    async with asyncio.timeout(5):
        await broker.rm.wait_applied()  # every leadership taken, nothing synced yet
    return led


def epoch_files_unsynced(broker: Broker) -> list[bool]:
    return [
        partition.log.leader_epoch_cache._store.needs_sync  # type: ignore[attr-defined]
        for partition in broker.rm.partitions().values()
    ]


@pytest.mark.asyncio
async def test_leaderships_are_taken_while_their_epoch_files_wait_for_a_slow_sync(
    tmp_path: Path,
) -> None:
    disk = HeldDisk()
    broker = Broker(tmp_path, disk)
    await broker.rm.start()
    try:
        await leaderships_taken_on_a_held_disk(broker, disk)
        assert all(p.is_leader for p in broker.rm.partitions().values())
        assert all(epoch_files_unsynced(broker))
        # A leader serves before its epoch file is synced: the log syncs the file itself
        # before its recovery point passes a record of that epoch.
        assert (await produce(broker, batch(2))).error is None
        disk.go.set()
        async with asyncio.timeout(10):
            while any(epoch_files_unsynced(broker)):
                await asyncio.sleep(0.01)
        for partition in broker.rm.partitions().values():
            path = Path(partition.log.directory) / "leader-epoch-checkpoint"
            assert path.read_text().splitlines()[-1] == "1 0"  # leader epoch 1 from offset 0
    finally:
        disk.go.set()
        await broker.rm.stop()


@pytest.mark.asyncio
async def test_a_partition_deleted_before_its_epoch_file_synced_stops_nothing(
    tmp_path: Path,
) -> None:
    disk = HeldDisk()
    broker = Broker(tmp_path, disk)
    errors: list[KafkaStorageError] = []
    broker.rm._syncs._on_storage_error = errors.append  # the broker's storage-failure path
    await broker.rm.start()
    try:
        led = await leaderships_taken_on_a_held_disk(broker, disk)
        # Deleted while the syncs of its epoch files wait: their directories are renamed aside
        # (and then removed), so nothing may be written or synced under the old names.
        broker.rm.apply_image(replayed(led, RemoveTopicRecord(TID)))
        async with asyncio.timeout(5):
            await broker.rm.wait_applied()
        assert broker.rm.partitions() == {}
        disk.go.set()
        async with asyncio.timeout(10):
            await broker.rm._syncs.drain()
        assert errors == []
        assert not list(broker.log_dir.glob("t-*/leader-epoch-checkpoint*"))
    finally:
        disk.go.set()
        await broker.rm.stop()
