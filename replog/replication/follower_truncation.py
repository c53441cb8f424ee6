"""Where a follower truncates its log when it learns where the leader's epochs end (KIP-101/279).

Rules (docs/design/replication.md#follower-truncation, #truncate-on-fetch, #follower-out-of-range,
Kafka's `AbstractFetcherThread.getOffsetTruncationState`):

The leader's answer is `(leader_epoch, leader_end_offset)` = (E_L, O_L): an OffsetsForLeaderEpoch
reply for the follower's latest epoch, or a Fetch response's DivergingEpoch. The follower then
truncates to:

1. O_L == -1 (the leader does not know the epoch): the initial fetch offset (the follower's
   HW). Done.
2. E_L == -1 (a pre-KIP-279 answer: an offset without its epoch): min(O_L, LEO). Done.
3. Otherwise the follower looks up (E_F, O_F) = its own end offset for E_L:
   a. nothing (it tracks no epochs): min(O_L, LEO). Done.
   b. E_F != E_L (the follower never had epoch E_L): min(O_F, LEO). NOT done: the truncation
      also drops the follower's epoch-cache entries from that offset on, so its latest epoch is
      now lower, and it asks again with that epoch. One round per divergent epoch.
   c. E_F == E_L: min(O_L, O_F, LEO). Done.

The follower never truncates to its HW when it knows an epoch (that is the KIP-101 bug): its
initial fetch offset is its LEO whenever the log has a latest leader epoch, the HW otherwise.

After each fetch the follower's HW is the leader's HW clamped into [log start, LEO]; it may move
backwards (a new leader can start with a lower HW).

Theory of operation: the shell holds the Log. It asks the leader (or reads the DivergingEpoch),
calls `offset_truncation_state` with a lookup into its own leader-epoch cache, truncates the Log
to `.offset`, and repeats while `truncation_completed` is False. Convergence: each incomplete
round removes at least the follower's latest epoch, so the rounds are bounded by the number of
epochs in the follower's cache; after the final round the follower's log is a prefix of the
leader's (every offset below it has the same epoch on both), so fetching from there makes the
logs identical.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

UNDEFINED_LEADER_EPOCH = -1
UNDEFINED_END_OFFSET = -1


@dataclass(frozen=True, slots=True)
class TruncationState:
    """Truncate the follower's log to `offset`; if not `truncation_completed`, ask again with the
    follower's (new, lower) latest leader epoch."""

    offset: int
    truncation_completed: bool


def offset_truncation_state(
    *,
    leader_epoch: int,
    leader_end_offset: int,
    follower_end_offset_for: Callable[[int], tuple[int, int] | None],
    follower_log_end_offset: int,
    initial_fetch_offset: int,
) -> TruncationState:
    """Kafka's truncation decision (Rules 1-3) for one answer (E_L, O_L) from the leader.

    `follower_end_offset_for(leader_epoch)` is the follower's `(leader_epoch, end_offset)` for an
    epoch, as its leader-epoch cache computes it against its own LEO, or None when the follower
    tracks no epochs. An answer with end offset -1 (the cache's "unknown") counts as None, as in
    Kafka's `UnifiedLog.endOffsetForEpoch`.
    """
    if leader_end_offset == UNDEFINED_END_OFFSET:
        return TruncationState(initial_fetch_offset, True)
    if leader_epoch == UNDEFINED_LEADER_EPOCH:
        return TruncationState(min(leader_end_offset, follower_log_end_offset), True)
    follower = follower_end_offset_for(leader_epoch)
    if follower is None or follower[1] == UNDEFINED_END_OFFSET:
        return TruncationState(min(leader_end_offset, follower_log_end_offset), True)
    follower_epoch, follower_end_offset = follower
    if follower_epoch != leader_epoch:
        # The follower never wrote epoch E_L: everything from the end of its largest epoch below
        # E_L may differ from the leader. Cut there and ask again about that lower epoch.
        return TruncationState(min(follower_end_offset, follower_log_end_offset), False)
    return TruncationState(
        min(leader_end_offset, follower_end_offset, follower_log_end_offset), True
    )


def follower_high_watermark(
    leader_high_watermark: int, log_start_offset: int, log_end_offset: int
) -> int:
    """The follower's HW after a fetch: the leader's HW clamped into [log start, LEO]."""
    assert log_start_offset <= log_end_offset, (
        f"log start offset {log_start_offset} above log end offset {log_end_offset}"
    )
    return max(log_start_offset, min(leader_high_watermark, log_end_offset))


def initial_fetch_offset(
    *, log_end_offset: int, latest_leader_epoch: int | None, high_watermark: int
) -> int:
    """Where a new follower starts fetching (docs/design/replication.md#truncate-on-fetch): its LEO
    when its log knows a leader epoch (truncate on fetch, KIP-101 safe), else its HW (no epochs:
    truncate to the HW)."""
    if latest_leader_epoch is not None and latest_leader_epoch >= 0:
        return log_end_offset
    return high_watermark
