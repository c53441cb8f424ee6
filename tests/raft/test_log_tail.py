"""`LogTail.read`: Fetch answers may carry pending appends (the shell writes a Ready's log
operations before it sends its messages), never bytes a pending truncation would change."""

from __future__ import annotations

from raft_helpers import log_with

from replog.quorum.raft.log_tail import LogTail
from replog.quorum.raft.log_view import EpochStart
from replog.quorum.raft.snapshot_id import SnapshotId
from replog.record import build_batch


def batch(offset: int, epoch: int = 1) -> bytes:
    return build_batch(
        [(0, None, b"v%d" % offset, ())], base_offset=offset, partition_leader_epoch=epoch
    )


def append(tail: LogTail, offset: int) -> bytes:
    data = batch(offset)
    tail.append(offset, offset + 1, data, [EpochStart(1, offset)], as_leader=True)
    return data


def test_below_the_written_end_it_reads_the_written_log() -> None:
    log = log_with([(1, 2)])
    tail = LogTail(log)
    append(tail, 2)
    assert tail.read(1, 1 << 20) == log.read(1, 1 << 20)


def test_at_the_written_end_it_reads_the_pending_appends_in_order() -> None:
    tail = LogTail(log_with([(1, 2)]))
    first, second = append(tail, 2), append(tail, 3)
    assert tail.read(2, 1 << 20) == first + second
    assert tail.read(3, 1 << 20) == second
    assert tail.read(4, 1 << 20) == b""


def test_pending_appends_respect_max_bytes_but_return_at_least_one() -> None:
    tail = LogTail(log_with([(1, 2)]))
    first, _ = append(tail, 2), append(tail, 3)
    assert tail.read(2, len(first)) == first
    assert tail.read(2, 1) == first


def test_nothing_pending_is_read_across_a_pending_truncation() -> None:
    tail = LogTail(log_with([(1, 3)]))
    tail.truncate_to(2)
    append(tail, 2)
    assert tail.read(3, 1 << 20) == b""


def test_a_pending_prefix_deletion_keeps_the_pending_appends_readable() -> None:
    # Retention moves only the log start: the appends that follow still start at the written end.
    tail = LogTail(log_with([(1, 3)]))
    tail.delete_prefix(SnapshotId(2, 1))
    data = append(tail, 3)
    assert tail.read(3, 1 << 20) == data
