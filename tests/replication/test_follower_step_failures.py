"""A follower step that fails part-way: a disk failure stops the node (as on the leader's side),
and any other failure leaves the follower fetching from where its log now ends.

`FollowerFetchSteps.process` must not swallow `KafkaStorageError` with the other errors (the
node would go on with a failed disk), and a step that emptied the log before failing
(OFFSET_OUT_OF_RANGE restart, then an error) must not leave the fetch position at the old offset,
from which every later fetch would fail the same way: the follower would never catch up."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from scenario_harness import Cluster

from replog.errors import KafkaStorageError, UnknownServerError
from replog.server.data_plane.replica_fetcher import ReplicaFetcherManager
from replog.storage.log import Log
from replog.storage.producer_snapshot_file import ProducerSnapshotFiles
from replog.testing import LoopTasks

A, B = 1, 2
T = "t"


@pytest.mark.asyncio
async def test_a_storage_error_in_a_follower_append_stops_the_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with Cluster(tmp_path, [A, B]) as c:
        c.create_topic(T, [A, B], leader_epoch=1)
        await c.start_produce(A, T, [b"x"], acks=1)
        follower_log = c.log(B, T)
        append = Log._append_validated

        def failing_disk(self: Log, *args: object, **kwargs: object) -> object:
            if self is follower_log:
                raise KafkaStorageError(f"{self.name}: append failed: [Errno 5] EIO")
            return append(self, *args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(Log, "_append_validated", failing_disk)
        reported: list[KafkaStorageError] = []
        fetcher = ReplicaFetcherManager(
            c.rm(B),
            addresses=lambda broker: None,
            on_storage_error=reported.append,
            tasks=LoopTasks(),
        )
        request = c.rm(B).build_follower_fetch(A, c.clock.now_ms)
        answer = await c.rm(A).fetch(request)
        assert fetcher._process(A, request, answer) is False
        assert [str(e) for e in reported] == ["t-0: append failed: [Errno 5] EIO"]


async def _restart_below_the_leaders_log_start(c: Cluster) -> None:
    """B misses records A then deletes (DeleteRecords to 3): B's next fetch is out of range,
    and B restarts its log at A's log start."""
    c.create_topic(T, [A, B], leader_epoch=1)
    c.isolate(B)
    for i in range(3):
        await c.start_produce(A, T, [b"v%d" % i], acks=1)
    await c.advance_past_lag(A)
    c.start_delete_records(A, T, 3)
    await asyncio.sleep(0.01)
    assert c.log(A, T).log_start_offset == 3
    c.heal(B)


@pytest.mark.asyncio
async def test_an_os_error_in_a_follower_step_is_a_storage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with Cluster(tmp_path, [A, B]) as c:
        await _restart_below_the_leaders_log_start(c)

        def eio(self: ProducerSnapshotFiles, *args: object, **kwargs: object) -> None:
            raise OSError(5, "Input/output error")

        monkeypatch.setattr(ProducerSnapshotFiles, "delete_all", eio)
        request = c.rm(B).build_follower_fetch(A, c.clock.now_ms)
        answer = await c.rm(A).fetch(request)
        with pytest.raises(KafkaStorageError, match="t-0: follower step failed on the disk"):
            c.rm(B).process_follower_fetch(A, request, answer, c.clock.now_ms)


@pytest.mark.asyncio
async def test_a_step_that_fails_after_changing_the_log_fetches_from_its_new_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with Cluster(tmp_path, [A, B]) as c:
        await _restart_below_the_leaders_log_start(c)
        delete_all = ProducerSnapshotFiles.delete_all
        failures = [UnknownServerError("a bug after the log was emptied")]

        def fails_once(self: ProducerSnapshotFiles, *args: object, **kwargs: object) -> None:
            if failures:
                raise failures.pop()
            delete_all(self, *args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(ProducerSnapshotFiles, "delete_all", fails_once)
        request = c.rm(B).build_follower_fetch(A, c.clock.now_ms)
        answer = await c.rm(A).fetch(request)
        c.rm(B).process_follower_fetch(A, request, answer, c.clock.now_ms)  # backs off
        follower = c.rm(B).partition(T, 0)
        assert follower is not None and follower.follower is not None
        assert c.log(B, T).log_end_offset == 3  # restarted at A's log start...
        assert follower.follower.fetch_offset == 3  # ...and fetches from there, not from 0
        await c.start_produce(A, T, [b"after"], acks=1)
        for _ in range(5):
            c.advance(2_000)
            await c.deliver_fetch(B)
            if c.log(B, T).log_end_offset == 4:
                break
        assert c.log(B, T).log_end_offset == 4  # caught up again
