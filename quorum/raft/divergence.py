"""Where a fetcher's log stops matching the leader's, and how far the fetcher truncates.

Rules (leader side, `validate_fetch_position`, in this order):
1. Fetch offset 0 while the leader has a snapshot: SNAPSHOT(latest). Loading it is cheaper than
   replaying the whole log.
2. Log start 0 and fetch offset 0: VALID.
3. The fetcher is below the log start, or at it with an epoch other than the snapshot's there,
   or its last epoch is older than that snapshot's: SNAPSHOT(latest).
4. (e, end) = the leader's end offset for the fetcher's last epoch. If e differs from that
   epoch or end < fetch offset: DIVERGING(e, end). Otherwise VALID.

Rules (follower side, `truncation_offset` for DIVERGING(e, end)):
- end below the follower's high watermark is fatal: committed data never diverges.
- e == 0: truncate to min(end, log end offset).
- the follower holds epoch e too: truncate to min(its own end of e, end).
- otherwise: truncate to where its largest epoch below e ends; the next Fetch then carries an
  older epoch, and the exchange repeats once per divergent epoch.

Worked example (leader epochs {1: 0, 3: 5, 4: 9}, log end 12; follower epochs {1: 0, 2: 5},
log end 8): Fetch(8, 2) -> leader's end for epoch 2 is (1, 5), 1 != 2 -> DIVERGING(1, 5) ->
follower's end for epoch 1 is (1, 5), same epoch -> truncate to min(5, 5) = 5 -> Fetch(5, 1)
is VALID and returns the epoch-3 batches from offset 5.
"""

from __future__ import annotations

from dataclasses import dataclass

from replog.quorum.raft.log_view import EpochEndOffset, LogSummary
from replog.quorum.raft.snapshot_id import SnapshotId


@dataclass(frozen=True, slots=True)
class ValidPosition:
    """The fetcher's log matches the leader's up to the fetch offset."""


@dataclass(frozen=True, slots=True)
class DivergingPosition:
    diverging_epoch: EpochEndOffset


@dataclass(frozen=True, slots=True)
class SnapshotPosition:
    snapshot_id: SnapshotId


FetchPosition = ValidPosition | DivergingPosition | SnapshotPosition


def validate_fetch_position(
    fetch_offset: int,
    last_fetched_epoch: int,
    log: LogSummary,
    latest_snapshot: SnapshotId | None,
) -> FetchPosition:
    """How the leader with `log` answers Fetch(fetch_offset, last_fetched_epoch)."""
    if fetch_offset == 0 and latest_snapshot is not None:
        return SnapshotPosition(latest_snapshot)
    if log.log_start_offset == 0 and fetch_offset == 0:
        return ValidPosition()
    if log.log_start_offset > 0:
        assert latest_snapshot is not None, f"log start {log.log_start_offset} without snapshot"
        start, start_epoch = log.log_start_offset, log.start_quorum_epoch
        if (
            fetch_offset < start
            or (fetch_offset == start and last_fetched_epoch != start_epoch)
            or last_fetched_epoch < start_epoch
        ):
            return SnapshotPosition(latest_snapshot)
    epoch_end = log.end_offset_for_epoch(last_fetched_epoch)
    if epoch_end.quorum_epoch != last_fetched_epoch or epoch_end.end_offset < fetch_offset:
        return DivergingPosition(epoch_end)
    return ValidPosition()


def truncation_offset(diverging: EpochEndOffset, log: LogSummary, high_watermark: int) -> int:
    """Where a follower with `log` truncates on DIVERGING (module Rules)."""
    if diverging.end_offset < high_watermark:
        raise AssertionError(
            f"leader asks to truncate to {diverging} below the high watermark {high_watermark}"
        )
    if diverging.quorum_epoch == 0:
        target = min(diverging.end_offset, log.log_end_offset)
    else:
        local = log.end_offset_for_epoch(diverging.quorum_epoch)
        if local.quorum_epoch == diverging.quorum_epoch:
            target = min(local.end_offset, diverging.end_offset)
        else:
            target = local.end_offset
    target = min(target, log.log_end_offset)
    if target < high_watermark:
        raise AssertionError(
            f"truncation to {target} for {diverging} would cut below the high watermark "
            f"{high_watermark}"
        )
    return target
