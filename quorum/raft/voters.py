"""Majority math over the static voter set: vote tallies and the offset a majority reached.

Rules:
- A majority of n voters is n // 2 + 1. The leader counts itself.
- An election is won when the granted votes reach a majority, and lost as soon as the votes
  still possible (granted + not yet answered) cannot reach one.
- The offset a majority reached is, with the voters' end offsets sorted in descending order and
  unknown offsets last, the one at index n // 2: at least n // 2 + 1 voters are at or beyond it,
  and no larger offset has that many. Unknown at that index means "no majority yet".
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from enum import Enum


def majority_size(voter_count: int) -> int:
    """How many voters form a majority of `voter_count`."""
    assert voter_count > 0, "a quorum needs at least one voter"
    return voter_count // 2 + 1


def offset_reached_by_majority(end_offsets: Collection[int | None]) -> int | None:
    """The largest offset that a majority of the given voter end offsets is at or beyond."""
    known = sorted((offset for offset in end_offsets if offset is not None), reverse=True)
    index = len(end_offsets) // 2
    return known[index] if index < len(known) else None


class VoteResult(Enum):
    PENDING = "pending"
    WON = "won"
    LOST = "lost"


class VoteTally:
    """Votes collected by one prospective or candidate; it votes for itself."""

    __slots__ = ("granted", "rejected", "voter_ids")

    def __init__(self, voter_ids: Iterable[int], self_id: int) -> None:
        self.voter_ids = frozenset(voter_ids)
        assert self_id in self.voter_ids, f"node {self_id} is not a voter"
        self.granted: set[int] = {self_id}
        self.rejected: set[int] = set()

    def record(self, voter_id: int, granted: bool) -> None:
        """Count one answer; an answer from a non-voter, or a second answer, changes nothing."""
        if voter_id not in self.voter_ids or voter_id in self.granted | self.rejected:
            return
        (self.granted if granted else self.rejected).add(voter_id)

    def unanswered(self) -> frozenset[int]:
        return self.voter_ids - self.granted - self.rejected

    def result(self) -> VoteResult:
        needed = majority_size(len(self.voter_ids))
        if len(self.granted) >= needed:
            return VoteResult.WON
        if len(self.voter_ids) - len(self.rejected) < needed:
            return VoteResult.LOST
        return VoteResult.PENDING


def end_quorum_epoch_delay_ms(position: int | None, successors: int, backoff_ms_max: int) -> int:
    """How long a follower waits before campaigning after its leader resigned.

    `position` is the follower's index in the resigning leader's preferred successors (None when
    absent): the most caught-up voter campaigns at once, each later one waits twice as long as
    the one before, and none waits longer than `backoff_ms_max`.
    """
    if position is None:
        return backoff_ms_max
    if position == 0:
        return 0
    assert 0 < position < successors, (position, successors)
    return min(backoff_ms_max, (backoff_ms_max >> (successors - 1)) << (position - 1))
