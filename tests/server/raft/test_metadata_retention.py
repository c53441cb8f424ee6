"""Metadata log retention (KIP-630) as `SnapshotWriter.apply_retention` applies it, by size
(`metadata.max.retention.bytes`) and by age (`metadata.max.retention.ms`, Kafka's pairwise rule:
while the oldest snapshot is older than the limit, the log start moves to the next one), and a
snapshot's age as `RaftStorage` reads it (the time its writer took it, kept by copies).

The writer runs against a scripted Raft driver: snapshot ids, their timestamps, the log's size
and start, the applied offset; `delete_log_prefix` calls are recorded.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from replog.quorum.metadata.record_batches import encode_snapshot
from replog.quorum.metadata.records import NoOpRecord
from replog.quorum.raft.ready import WriteSnapshot
from replog.quorum.raft.snapshot_id import SnapshotId
from replog.server.raft.metadata_snapshots import SnapshotWriter
from replog.server.raft.raft_storage import RaftStorage

NOW = 1_700_000_000_000  # a wall clock: 0 is long ago
DAY = 86_400_000


@dataclass
class ScriptedLog:
    size_in_bytes: int = 100
    log_start_offset: int = 0


@dataclass
class ScriptedStorage:
    taken_ms: dict[SnapshotId, int]
    log: ScriptedLog = field(default_factory=ScriptedLog)
    reads: list[SnapshotId] = field(default_factory=list)

    def snapshot_ids(self) -> tuple[SnapshotId, ...]:
        return tuple(sorted(self.taken_ms, key=lambda s: s.end_offset))

    def snapshot_timestamp_ms(self, snapshot_id: SnapshotId) -> int | None:
        self.reads.append(snapshot_id)
        return self.taken_ms.get(snapshot_id)


@dataclass
class Status:
    applied_offset: int


@dataclass
class ScriptedNode:
    storage: ScriptedStorage
    applied_offset: int = 1_000
    deleted_to: list[int] = field(default_factory=list)

    def status(self) -> Status:
        return Status(self.applied_offset)

    def delete_log_prefix(self, snapshot_id: SnapshotId, now_ms: int) -> None:
        self.deleted_to.append(snapshot_id.end_offset)
        self.storage.log.log_start_offset = snapshot_id.end_offset
        for older in [s for s in self.storage.taken_ms if s.end_offset < snapshot_id.end_offset]:
            del self.storage.taken_ms[older]


class ScriptedRaft:
    node_id = 1

    def __init__(self, taken_ms: dict[int, int]) -> None:
        self.storage = ScriptedStorage({SnapshotId(end, 1): ts for end, ts in taken_ms.items()})
        self.node = ScriptedNode(self.storage)
        self.clock = lambda: 0


def writer(
    raft: ScriptedRaft, *, retention_bytes: int = 1 << 30, retention_ms: int = DAY
) -> SnapshotWriter:
    return SnapshotWriter(
        raft,  # type: ignore[arg-type]
        snapshot_bytes_max=1 << 30,
        snapshot_interval_ms=0,
        retention_bytes=retention_bytes,
        retention_ms=retention_ms,
        wall_clock=lambda: NOW,
    )


OLD, RECENT = NOW - DAY - 1, NOW - DAY  # older than a day; exactly a day (kept, as Kafka's >)


@pytest.mark.parametrize(
    ("taken", "moved_to"),
    [
        ({10: RECENT, 20: RECENT, 30: RECENT}, []),
        ({10: OLD, 20: RECENT, 30: RECENT}, [20]),
        ({10: OLD, 20: OLD, 30: RECENT}, [30]),
        ({10: OLD, 20: OLD, 30: OLD}, [30]),  # the newest always stays
        ({10: OLD}, []),  # one old snapshot alone removes nothing
        ({10: RECENT, 20: OLD, 30: OLD}, []),  # oldest first: stops at the first recent one
    ],
    ids=["none-old", "oldest-old", "two-old", "all-old", "lone", "oldest-recent"],
)
def test_old_snapshots_move_the_log_start_to_the_next_one(
    taken: dict[int, int], moved_to: list[int]
) -> None:
    raft = ScriptedRaft(taken)
    writer(raft).apply_retention(0)
    assert raft.node.deleted_to == moved_to


def test_negative_limits_are_no_limits_and_size_goes_to_the_newest() -> None:
    raft = ScriptedRaft({10: OLD, 20: OLD, 30: OLD})
    writer(raft, retention_ms=-1).apply_retention(0)
    assert raft.node.deleted_to == []
    raft.storage.log.size_in_bytes = 200
    writer(raft, retention_bytes=-1, retention_ms=-1).apply_retention(0)
    assert raft.node.deleted_to == []
    writer(raft, retention_bytes=199, retention_ms=-1).apply_retention(0)
    assert raft.node.deleted_to == [30]


def test_a_target_this_node_has_not_applied_is_not_taken() -> None:
    raft = ScriptedRaft({10: OLD, 20: OLD, 30: RECENT})
    raft.node.applied_offset = 29
    snapshots = writer(raft)
    snapshots.apply_retention(0)
    assert raft.node.deleted_to == []
    raft.node.applied_offset = 30
    snapshots.apply_retention(0)
    assert raft.node.deleted_to == [30]


def test_each_snapshot_is_read_once() -> None:
    raft = ScriptedRaft({10: RECENT, 20: RECENT, 30: RECENT})
    snapshots = writer(raft)
    for _ in range(3):
        snapshots.apply_retention(0)
    assert raft.storage.reads == [SnapshotId(10, 1)]  # the walk stops at the first recent one


def test_a_snapshot_whose_age_cannot_be_read_stops_the_walk() -> None:
    # Its file vanished (a prefix delete in the storage thread) or cannot be read: its age is
    # unknown, so nothing moves past it, even though the snapshots after it are old.
    raft = ScriptedRaft({10: OLD, 20: OLD, 30: RECENT})
    raft.storage.snapshot_timestamp_ms = lambda snapshot_id: None  # type: ignore[method-assign]
    writer(raft).apply_retention(0)
    assert raft.node.deleted_to == []


def test_a_snapshot_is_as_old_as_its_records_say(tmp_path: Path) -> None:
    storage = RaftStorage(str(tmp_path), [1])
    taken = SnapshotId(5, 1)
    data = encode_snapshot([NoOpRecord()], quorum_epoch=1, timestamp_ms=123_456)
    storage._apply_op(WriteSnapshot(taken, data))
    assert storage.snapshot_timestamp_ms(taken) == 123_456  # not the file's (new) mtime
    empty = SnapshotId(7, 1)
    storage._apply_op(WriteSnapshot(empty, b""))
    path = os.path.join(storage.directory, empty.file_name())
    os.utime(path, ns=(1_700_000_000_000_000_000, 1_700_000_000_000_000_000))
    assert storage.snapshot_timestamp_ms(empty) == 1_700_000_000_000  # no records: the mtime
    assert storage.snapshot_timestamp_ms(SnapshotId(9, 1)) is None
    storage.close()
