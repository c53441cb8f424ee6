"""Log epochs, fetch position validation and divergence truncation
(docs/design/kraft.md#raft-divergence-and-truncation)."""

from __future__ import annotations

import pytest

from replog.quorum.raft import EpochEndOffset, EpochStart, LogSummary, SnapshotId
from replog.quorum.raft.divergence import (
    DivergingPosition,
    SnapshotPosition,
    ValidPosition,
    truncation_offset,
    validate_fetch_position,
)


def summary(starts: dict[int, int], end: int, start: int = 0, start_epoch: int = 0) -> LogSummary:
    entries = tuple(EpochStart(epoch, offset) for epoch, offset in starts.items())
    return LogSummary(start, end, entries, start_epoch)


LEADER = summary({1: 0, 3: 5, 4: 9}, 12)


@pytest.mark.parametrize(
    ("requested", "expected"),
    [
        (4, (4, 12)),  # the latest epoch ends at the log end
        (7, (4, 12)),  # above every epoch: the latest
        (3, (3, 9)),  # ends where the next epoch starts
        (2, (1, 5)),  # not held: the largest epoch below it, ending where the next starts
        (1, (1, 5)),
        (0, (0, 0)),  # below every epoch: the oldest boundary
    ],
)
def test_end_offset_for_epoch(requested: int, expected: tuple[int, int]) -> None:
    assert LEADER.end_offset_for_epoch(requested) == EpochEndOffset(*expected)


def test_an_empty_log_after_a_snapshot_takes_the_snapshot_epoch() -> None:
    log = summary({}, 40, start=40, start_epoch=6)
    assert log.last_quorum_epoch == 6
    assert log.end_offset_for_epoch(6) == EpochEndOffset(6, 40)
    assert log.end_offset_for_epoch(2) == EpochEndOffset(2, 40)
    assert log.quorum_epoch_at(39) == 6


def test_the_reference_worked_example() -> None:
    follower = summary({1: 0, 2: 5}, 8)
    position = validate_fetch_position(8, 2, LEADER, None)
    assert position == DivergingPosition(EpochEndOffset(1, 5))
    assert truncation_offset(EpochEndOffset(1, 5), follower, high_watermark=3) == 5
    assert validate_fetch_position(5, 1, LEADER, None) == ValidPosition()


@pytest.mark.parametrize(
    ("fetch_offset", "last_epoch", "expected"),
    [
        (0, 0, ValidPosition()),
        (12, 4, ValidPosition()),
        (10, 4, ValidPosition()),
        (13, 4, DivergingPosition(EpochEndOffset(4, 12))),  # beyond the leader's log
        (9, 3, ValidPosition()),
        (10, 3, DivergingPosition(EpochEndOffset(3, 9))),  # longer in an old epoch
        (7, 2, DivergingPosition(EpochEndOffset(1, 5))),
    ],
)
def test_validate_fetch_position(fetch_offset: int, last_epoch: int, expected: object) -> None:
    assert validate_fetch_position(fetch_offset, last_epoch, LEADER, None) == expected


def test_a_fetcher_below_the_log_start_or_new_gets_the_latest_snapshot() -> None:
    latest = SnapshotId(20, 4)
    log = summary({4: 20}, 25, start=20, start_epoch=4)
    assert validate_fetch_position(0, 0, log, latest) == SnapshotPosition(latest)
    assert validate_fetch_position(19, 4, log, latest) == SnapshotPosition(latest)
    assert validate_fetch_position(20, 3, log, latest) == SnapshotPosition(latest)
    assert validate_fetch_position(22, 3, log, latest) == SnapshotPosition(latest)
    assert validate_fetch_position(20, 4, log, latest) == ValidPosition()
    # Fetch offset 0 gets the snapshot even where the leader still has the whole log.
    whole = summary({1: 0, 4: 20}, 25)
    assert validate_fetch_position(0, 0, whole, latest) == SnapshotPosition(latest)


@pytest.mark.parametrize(
    ("follower", "diverging", "expected"),
    [
        (summary({1: 0, 2: 5}, 8), (1, 5), 5),  # same epoch: min(own end, leader's end)
        (summary({1: 0, 2: 5}, 8), (1, 3), 3),
        (summary({1: 0, 3: 5}, 8), (2, 6), 5),  # epoch 2 not held: end of epoch 1 here
        (summary({1: 0}, 8), (0, 4), 4),  # epoch 0: min(end, log end)
        (summary({1: 0}, 3), (0, 4), 3),
    ],
)
def test_truncation_offset(follower: LogSummary, diverging: tuple[int, int], expected: int) -> None:
    assert truncation_offset(EpochEndOffset(*diverging), follower, high_watermark=0) == expected


def test_truncating_below_the_high_watermark_is_fatal() -> None:
    follower = summary({1: 0, 2: 5}, 8)
    with pytest.raises(AssertionError, match="below the high watermark 6"):
        truncation_offset(EpochEndOffset(1, 5), follower, high_watermark=6)
