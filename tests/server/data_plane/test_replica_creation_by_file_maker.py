"""A large round's new logs made by the file maker process (docs/storage.md, "Creating many
replicas"; replog/storage/file_maker_process.py): the same logs as the bulk threads make, a
fallback when the child is gone, and a loop that never waits for the log manager's lock."""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import signal
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from replog.errors import KafkaStorageError
from replog.quorum.metadata.image import MetadataImage
from replog.quorum.metadata.records import RemoveTopicRecord
from replog.server.data_plane import file_maker
from replog.server.data_plane.replica_manager import ReplicaManager, ReplicaManagerConfig
from replog.server.data_plane.replica_shell import SYNC_EACH_MAX
from replog.storage.file_maker_process import FileMakerAnswer, FileMakerProcess, NewLogRequest
from replog.storage.fs import OsFileSystem
from replog.storage.log_config import LogConfig
from replog.storage.log_manager import LogManager
from replog.testing import LoopTasks, ManualClock
from tests.leftovers import close_after_test
from tests.metadata.metadata_helpers import create_topic, replayed, topic_id
from tests.server.data_plane.test_replica_manager import T0, cluster_image

TID = topic_id(1)
PARTITIONS = 3 * SYNC_EACH_MAX  # a round large enough for the file maker
# Led here, followed here (broker 2 leads), alternately.
ASSIGNMENTS = [(1, 2) if p % 2 == 0 else (2, 1) for p in range(PARTITIONS)]


class CountingMaker(FileMakerProcess):
    """A real child; counts the logs it was asked to make."""

    asked = 0

    async def make(
        self, logs: Sequence[NewLogRequest], sync_dirs: Sequence[str]
    ) -> FileMakerAnswer:
        self.asked += len(logs)
        return await super().make(logs, sync_dirs)


class Broker:
    def __init__(self, root: Path, *, maker: FileMakerProcess | None = None) -> None:
        self.clock = ManualClock()
        self.log_manager = LogManager(str(root), LogConfig(), task_clock=self.clock)
        close_after_test(self.log_manager.close_after_failure)
        self.errors: list[KafkaStorageError] = []
        self.rm = ReplicaManager(
            ReplicaManagerConfig(1),
            self.log_manager,
            clock=self.clock,
            wall_clock=ManualClock(T0),
            tasks=LoopTasks(),
            on_storage_error=self.errors.append,
        )
        if maker is not None:
            close_after_test(maker.close)
            self.rm.use_file_maker(maker)

    async def apply(self, image: MetadataImage) -> None:
        self.rm.apply_image(image)
        async with asyncio.timeout(20):
            await self.rm.wait_applied()


def image(tid: object = TID, name: str = "t") -> MetadataImage:
    return cluster_image(*create_topic(name, tid, *ASSIGNMENTS))  # type: ignore[arg-type]


def files_of(root: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


@pytest.mark.asyncio
async def test_the_file_maker_makes_the_same_logs_as_the_bulk_threads(tmp_path: Path) -> None:
    maker = CountingMaker(FileMakerProcess.start()._process)
    by_child = Broker(tmp_path / "child", maker=maker)
    by_threads = Broker(tmp_path / "threads")
    for broker in (by_child, by_threads):
        await broker.rm.start()
        try:
            await broker.apply(image())
        finally:
            await broker.rm.stop()
    assert maker.asked == PARTITIONS
    assert maker._process.returncode == 0  # closed at the stop
    made, expected = files_of(tmp_path / "child"), files_of(tmp_path / "threads")
    assert made == expected
    assert any(name.endswith("leader-epoch-checkpoint") for name in made)
    assert by_child.errors == by_threads.errors == []
    for broker in (by_child, by_threads):
        assert len(broker.rm.partitions()) == PARTITIONS
        for (_, partition_id), partition in broker.rm.partitions().items():
            assert partition.log.topic_id() == TID
            assert partition.is_leader == (partition_id % 2 == 0)
    # A restart loads what the child made, as it loads what the threads made.
    again = LogManager(str(tmp_path / "child"), LogConfig())
    close_after_test(again.close_after_failure)
    assert len(again.all_logs()) == PARTITIONS


@pytest.mark.asyncio
async def test_a_child_killed_mid_creation_falls_back_to_the_bulk_threads_for_good(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    class DyingMaker(FileMakerProcess):
        """Makes half a round's logs, then dies before it answers."""

        async def make(
            self, logs: Sequence[NewLogRequest], sync_dirs: Sequence[str]
        ) -> FileMakerAnswer:
            await super().make(logs[: len(logs) // 2], [])
            os.kill(self.pid, signal.SIGKILL)
            return await super().make(logs, sync_dirs)

    broker = Broker(tmp_path, maker=DyingMaker(FileMakerProcess.start()._process))
    await broker.rm.start()
    try:
        with caplog.at_level(logging.WARNING, logger="replog.server.data_plane.replica_manager"):
            await broker.apply(image())
            assert len(broker.rm.partitions()) == PARTITIONS
            # Later rounds go to the bulk threads at once.
            await broker.apply(replayed(image(), *create_topic("u", topic_id(2), *ASSIGNMENTS)))
    finally:
        await broker.rm.stop()
    assert len(broker.rm.partitions()) == 2 * PARTITIONS
    for partition in broker.rm.partitions().values():
        assert partition.log.topic_id() in (TID, topic_id(2))
        if partition.is_leader:
            assert partition.log.leader_epoch_cache.latest_epoch == 0
    # Only the replica manager's: on a busy machine the child may also log its promotion.
    warnings = [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and r.name == "replog.server.data_plane.replica_manager"
    ]
    assert len(warnings) == 1, warnings
    assert "killed by signal 9" in warnings[0]
    assert "bulk threads" in warnings[0]
    assert broker.errors == []


@pytest.mark.asyncio
async def test_a_file_the_disk_refuses_is_a_storage_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker = Broker(tmp_path, maker=FileMakerProcess.start())
    log_manager = broker.log_manager
    refused = str(tmp_path / "t-3" / "missing" / "partition.metadata")
    new_log_files = log_manager.new_log_files

    def refusing(place, **kwargs):  # type: ignore[no-untyped-def]
        files = new_log_files(place, **kwargs)
        return [*files, (refused, b"x")] if place.partition == 3 else files

    monkeypatch.setattr(log_manager, "new_log_files", refusing)
    await broker.rm.start()
    try:
        broker.rm.apply_image(image())
        async with asyncio.timeout(10):
            while not broker.errors:
                await asyncio.sleep(0.01)
    finally:
        await broker.rm.stop()
    (error,) = broker.errors
    assert str(error) == (
        f"{refused}: cannot create log: [Errno 2] No such file or directory: '{refused}'"
    )
    assert log_manager._making == {}  # every reservation given up
    assert broker.rm.partitions() == {}


@pytest.mark.asyncio
async def test_a_round_waits_for_the_log_managers_lock_without_blocking_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While another thread holds the lock, the round is refused again and again, and between
    any two refusals the loop ran other work (this test's turns): it waited without blocking,
    however slow the machine."""
    broker = Broker(tmp_path, maker=FileMakerProcess.start())
    await broker.rm.start()
    turns = 0  # loop turns this test took
    refused_at: list[int] = []  # `turns` at each refusal of the busy lock
    reserve = broker.log_manager.reserve_new_logs

    def reserving(wanted):  # type: ignore[no-untyped-def]
        places = reserve(wanted)
        if places is None:
            refused_at.append(turns)
        return places

    monkeypatch.setattr(broker.log_manager, "reserve_new_logs", reserving)
    held = threading.Event()
    release = threading.Event()

    def hold_the_lock() -> None:  # as the task thread's pass over every log does
        with broker.log_manager._lock:
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold_the_lock)
    holder.start()
    try:
        held.wait(10)
        broker.rm.apply_image(image())
        deadline = time.monotonic() + 10
        while len(refused_at) < 3:
            assert time.monotonic() < deadline, (
                f"not within 10 s: 3 refusals of the busy lock by the round ({refused_at})"
            )
            turns += 1
            await asyncio.sleep(0)
        assert broker.rm.partitions() == {}  # the round waits for the lock...
        steps = itertools.pairwise(refused_at)  # ...and the loop does not:
        assert all(a < b for a, b in steps), f"no loop turn between refusals: {refused_at[:8]}"
        release.set()
        async with asyncio.timeout(10):
            await broker.rm.wait_applied()
        assert len(broker.rm.partitions()) == PARTITIONS
    finally:
        release.set()
        holder.join()
        await broker.rm.stop()


@pytest.mark.asyncio
async def test_stale_checkpoints_are_rewritten_before_the_child_makes_a_namesake(
    tmp_path: Path,
) -> None:
    broker = Broker(tmp_path, maker=FileMakerProcess.start())
    await broker.rm.start()
    try:
        created = image()
        await broker.apply(created)
        broker.log_manager.checkpoint_high_watermarks()
        gone = replayed(created, RemoveTopicRecord(TID))
        await broker.apply(gone)
        assert broker.log_manager.has_stale_checkpoints
        await broker.apply(replayed(gone, *create_topic("t", topic_id(2), *ASSIGNMENTS)))
        assert not broker.log_manager.has_stale_checkpoints
        hw = (tmp_path / "replication-offset-checkpoint").read_text().splitlines()
        assert hw[1] == "0"  # no entry of the deleted topic's logs
    finally:
        await broker.rm.stop()


def test_only_a_node_process_and_only_over_the_plain_file_system_starts_a_file_maker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    plain = LogManager(str(tmp_path / "a"), LogConfig())
    close_after_test(plain.close_after_failure)

    class Faulty(OsFileSystem):
        pass

    faulty = LogManager(str(tmp_path / "b"), LogConfig(), fs=Faulty())
    close_after_test(faulty.close_after_failure)
    monkeypatch.setattr(file_maker, "_wanted", False)
    with caplog.at_level(logging.INFO, logger="replog.server"):
        assert file_maker.start_file_maker(plain, 1) is None  # an embedding's broker
        file_maker.make_new_log_files_in_a_process()  # as `replog node` does
        assert file_maker.start_file_maker(faulty, 1) is None
        started = file_maker.start_file_maker(plain, 1)
    assert started is not None
    started.close()
    lines = [r.getMessage() for r in caplog.records if r.name == "replog.server"]
    assert lines[:2] == ["broker 1: new logs' files are made by the bulk threads"] * 2
    assert lines[2] == f"broker 1: new logs' files are made by file maker pid {started.pid}"
