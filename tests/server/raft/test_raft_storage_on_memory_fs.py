"""The metadata quorum's storage (`RaftStorage`) on a `MemoryFileSystem` that loses what was
not synced at a crash: what `apply` made durable before the shell may send (the election
state, the flushed log, a frozen snapshot) survives; an unflushed tail and a partial
download do not (replog/server/raft/raft_storage.py, Rules)."""

from __future__ import annotations

import pytest

from replog.errors import KafkaStorageError
from replog.quorum.raft.election_state import ElectionState
from replog.quorum.raft.log_view import EpochStart, summarize
from replog.quorum.raft.ready import (
    AppendBatches,
    DeleteLogPrefix,
    LogOp,
    Ready,
    WriteSnapshot,
    WriteSnapshotChunk,
)
from replog.quorum.raft.snapshot_id import SnapshotId
from replog.record import build_batch, stamp_batch
from replog.server.raft.raft_storage import RaftStorage
from replog.storage.memory_fs import MemoryFileSystem
from replog.testing import ManualClock

T0 = 1_700_000_000_000
METADATA_DIR = "/var/replog/metadata"


def batch_at(offset: int, quorum_epoch: int) -> bytes:
    data = bytearray(build_batch([(T0 + offset, None, f"record {offset}".encode(), ())]))
    stamp_batch(data, 0, offset, quorum_epoch)
    return bytes(data)


def ready(*ops: LogOp, election: ElectionState | None = None, flush: bool = True) -> Ready:
    return Ready(election, tuple(ops), flush, (), (), 0, None)


def append(storage: RaftStorage, count: int, quorum_epoch: int) -> bytes:
    start = storage.log_end_offset
    batches = b"".join(batch_at(start + i, quorum_epoch) for i in range(count))
    storage.apply(ready(AppendBatches(start, start + count, batches, as_leader=True), flush=False))
    return batches


def test_what_apply_persisted_survives_a_crash_and_nothing_else() -> None:
    clock = ManualClock(T0)
    fs = MemoryFileSystem(clock=clock)
    storage = RaftStorage(METADATA_DIR, [1, 2, 3], fs=fs, clock=clock)
    storage.apply(ready(election=ElectionState(4, leader_id=1, voted_id=1)))
    flushed = append(storage, 5, quorum_epoch=4)
    assert storage.flush() == 5
    snapshot = SnapshotId(end_offset=3, quorum_epoch=4)
    storage.apply(ready(WriteSnapshot(snapshot, b"snapshot bytes")))
    append(storage, 3, quorum_epoch=4)  # never flushed
    partial = SnapshotId(end_offset=8, quorum_epoch=4)
    storage.apply(ready(WriteSnapshotChunk(partial, 0, b"half a download"), flush=False))

    fs = fs.crash()
    storage.log.close_without_flush()
    again = RaftStorage(METADATA_DIR, [1, 2, 3], fs=fs, clock=clock)
    assert again.read_election_state() == ElectionState(4, leader_id=1, voted_id=1)
    assert again.log_end_offset == 5
    assert again.read(0, 1 << 20) == flushed
    assert list(again.snapshot_ids()) == [snapshot]
    assert again.read_whole_snapshot(snapshot) == b"snapshot bytes"
    assert not [name for name in fs.list_dir(again.directory) if name.endswith(".part")]
    assert [(e.quorum_epoch, e.start_offset) for e in again.epoch_starts()] == [(4, 0)]
    again.close()


def test_an_election_state_written_but_not_yet_synced_is_the_old_one_after_a_crash() -> None:
    """The quorum-state write is atomic: a crash in the middle of one (its directory's sync
    refused) leaves the previous vote, never a mix or nothing."""
    clock = ManualClock(T0)
    fs = MemoryFileSystem(clock=clock)
    storage = RaftStorage(METADATA_DIR, [1, 2, 3], fs=fs, clock=clock)
    storage.write_election_state(ElectionState(2, voted_id=3))
    fs.fail_next("sync", storage.directory)
    with pytest.raises(KafkaStorageError, match="quorum-state"):  # the node stops on it
        storage.write_election_state(ElectionState(3, voted_id=2))
    fs = fs.crash()
    storage.log.close_without_flush()
    again = RaftStorage(METADATA_DIR, [1, 2, 3], fs=fs, clock=clock)
    assert again.read_election_state() == ElectionState(2, voted_id=3)
    again.close()


@pytest.mark.parametrize("whole", [True, False])
def test_a_snapshot_read_the_disk_fails_is_a_storage_error_naming_the_file(whole: bool) -> None:
    """The node stops on it as on any failed disk, not on an unknown error."""
    clock = ManualClock(T0)
    fs = MemoryFileSystem(clock=clock)
    storage = RaftStorage(METADATA_DIR, [1, 2, 3], fs=fs, clock=clock)
    append(storage, 3, quorum_epoch=1)
    snapshot = SnapshotId(end_offset=3, quorum_epoch=1)
    storage.apply(ready(WriteSnapshot(snapshot, b"snapshot bytes")))
    fs.fail_next("read", f"*{snapshot.file_name()}")
    with pytest.raises(KafkaStorageError, match=f"{snapshot.file_name()}: read failed"):
        if whole:
            storage.read_whole_snapshot(snapshot)
        else:
            storage.read_snapshot(snapshot, 0, 100)
    assert storage.read_whole_snapshot(snapshot) == b"snapshot bytes"
    storage.close()


def test_a_log_emptied_up_to_its_snapshot_names_no_epoch_start() -> None:
    # The core's log summary holds only epochs that start a batch the log holds: a leader
    # whose snapshot ends at its log end, the prefix deleted, would fail its own assertion.
    clock = ManualClock(T0)
    storage = RaftStorage(METADATA_DIR, [1], fs=MemoryFileSystem(clock=clock), clock=clock)
    append(storage, 2, quorum_epoch=1)
    append(storage, 2, quorum_epoch=3)
    storage.flush()
    snapshot = SnapshotId(end_offset=4, quorum_epoch=3)
    storage.apply(ready(WriteSnapshot(snapshot, b"state")))
    storage.apply(Ready(None, (DeleteLogPrefix(4),), True, (), (), 4, None))
    assert (storage.log_start_offset, storage.log_end_offset) == (4, 4)
    assert list(storage.epoch_starts()) == []
    append(storage, 1, quorum_epoch=5)
    assert list(storage.epoch_starts()) == [EpochStart(5, 4)]


def test_a_log_whose_prefix_went_up_to_its_end_holds_no_epoch() -> None:
    """The log's epochs as the core's `LogSummary` counts them: an epoch begun below the log
    start begins at it, and an empty log (its prefix deleted up to its end, behind a
    snapshot there) holds none, where the leader-epoch cache still names the last epoch."""
    clock = ManualClock(T0)
    storage = RaftStorage(METADATA_DIR, [1, 2, 3], fs=MemoryFileSystem(clock=clock), clock=clock)
    append(storage, 4, quorum_epoch=3)
    append(storage, 2, quorum_epoch=8)
    storage.flush()
    inside = SnapshotId(end_offset=5, quorum_epoch=8)
    committed = Ready(None, (WriteSnapshot(inside, b"state at 5"),), True, (), (), 6, None)
    storage.apply(committed)
    storage.apply(ready(DeleteLogPrefix(5)))
    assert [(e.quorum_epoch, e.start_offset) for e in storage.epoch_starts()] == [(8, 5)]
    at_end = SnapshotId(end_offset=6, quorum_epoch=8)
    storage.apply(ready(WriteSnapshot(at_end, b"state at 6"), DeleteLogPrefix(6)))
    assert storage.log.leader_epoch_cache.entries()  # the cache keeps epoch 8
    assert list(storage.epoch_starts()) == []
    summary = summarize(storage)
    assert (summary.log_start_offset, summary.log_end_offset, summary.epoch_starts) == (6, 6, ())
