"""A scheduled metadata snapshot is written in steps, as a stop's is (issue #50: the whole state
of 100,000 partitions taken and encoded in one loop turn held it for over a second of CPU): its
state a step of whole topics a loop turn, at the stable offset of the first step, its encoding
a batch a turn, then stored on the Raft driver's loop. One is written at a time, and what
committed meanwhile makes the next one due without waiting for another commit."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from replog.quorum.controller import controller as controller_module
from replog.quorum.metadata import record_batches
from replog.quorum.metadata.records import PartitionRecord
from replog.quorum.raft.snapshot_id import SnapshotId
from tests.server.controller.test_controller_driver import (
    LoneController,
    _value,
    count_encoded,
    create_wide,
    eventually,
    lone_controller,
    ticking,
)
from tests.server.raft.test_stop_snapshot_steps import create_topics, parts_taken_at_ticks


async def snapshot_due_at_next_commit(
    node: LoneController, commit: Callable[[], object], tick: Callable[[], None]
) -> SnapshotId:
    """Make every commit due for a snapshot, commit with `commit`, and wait for the snapshot,
    a task calling `tick` at every loop turn meanwhile."""

    async with ticking(tick):
        node.driver.snapshots.schedule.max_bytes_between = 1
        await commit()  # type: ignore[misc]
        ids = await eventually(lambda: _value(node.raft.storage.snapshot_ids()), bool)
        return ids[0]


def test_a_scheduled_snapshot_takes_its_state_a_step_a_loop_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Five topics of 3 partitions, 3 partitions a step: each part in a loop turn of its own,
    # and the snapshot is the state at the commit that made it due.
    ticks, parts_at = parts_taken_at_ticks(monkeypatch, partitions_a_step=3)

    def tick() -> None:
        ticks[0] += 1

    async def scenario() -> None:
        async with lone_controller(tmp_path, metadata_max_idle_interval_ms=0) as node:
            await create_topics(node, "a", "b", "c", "d", first=True)
            assert node.raft.storage.snapshot_ids() == ()  # 1 GiB between snapshots
            parts_at.clear()
            taken = await snapshot_due_at_next_commit(node, lambda: create_topics(node, "e"), tick)
            assert len(parts_at) == 5 and len(set(parts_at)) == 5, parts_at
            controller = node.driver.controller
            assert taken.end_offset == controller.last_committed_offset + 1
            written = record_batches.decode_snapshot(
                node.raft.storage.read_whole_snapshot(taken), where="test"
            )
            assert written == controller.snapshot_records(controller.last_stable_offset)

    asyncio.run(scenario())


def test_a_scheduled_snapshot_is_encoded_a_batch_a_loop_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 1,200 partitions make two batches of records: a ticker sees the first encoded, not the
    # second, and the snapshot holds every partition.
    encoded = count_encoded(monkeypatch)

    async def scenario() -> None:
        async with lone_controller(tmp_path, metadata_max_idle_interval_ms=0) as node:
            await create_wide(node)
            expected = len(node.driver.controller.snapshot_records()) + 3  # and topic "late"
            assert expected > record_batches.SNAPSHOT_RECORDS_PER_BATCH
            encoded[0] = 0
            seen: list[int] = []
            taken = await snapshot_due_at_next_commit(
                node, lambda: create_topics(node, "late"), lambda: seen.append(encoded[0])
            )
            assert encoded[0] == expected + 1  # the TopicRecord of "late" too
            assert any(0 < n < expected for n in seen), sorted(set(seen))
            records = record_batches.decode_snapshot(
                node.raft.storage.read_whole_snapshot(taken), where="test"
            )
            assert sum(isinstance(r, PartitionRecord) for r in records) == 1_200 + 3

    asyncio.run(scenario())


def test_what_committed_while_one_was_written_is_snapshotted_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A snapshot after every commit, a partition a step (each snapshot takes many loop turns),
    # topics created at once: commits come while one is written, and the last commit is
    # snapshotted, though no commit comes after it.
    monkeypatch.setattr(controller_module, "SNAPSHOT_STEP_PARTITIONS", 1)

    async def scenario() -> None:
        async with lone_controller(tmp_path, metadata_max_idle_interval_ms=0) as node:
            await create_topics(node, "a", first=True)
            node.driver.snapshots.schedule.max_bytes_between = 1
            await asyncio.gather(*(create_topics(node, name) for name in "bcdefgh"))
            end = node.driver.controller.last_committed_offset + 1
            await eventually(
                lambda: _value(node.raft.storage.snapshot_ids()),
                lambda ids: bool(ids) and ids[-1].end_offset == end,
            )
            assert not node.driver.snapshots.writing

    asyncio.run(scenario())
