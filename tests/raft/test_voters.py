"""Majority math against a naive model (Hypothesis), vote tallies, and successor delays."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from replog.quorum.raft.voters import (
    VoteResult,
    VoteTally,
    end_quorum_epoch_delay_ms,
    majority_size,
    offset_reached_by_majority,
)


def naive_offset_reached_by_majority(offsets: list[int | None]) -> int | None:
    """The largest x such that a majority of voters is at or beyond x, found by trying all."""
    needed = len(offsets) // 2 + 1
    reached = [
        x
        for x in {o for o in offsets if o is not None}
        if sum(1 for o in offsets if o is not None and o >= x) >= needed
    ]
    return max(reached, default=None)


@given(st.lists(st.none() | st.integers(0, 50), min_size=1, max_size=9))
def test_offset_reached_by_majority_matches_the_naive_model(offsets: list[int | None]) -> None:
    assert offset_reached_by_majority(offsets) == naive_offset_reached_by_majority(offsets)


def test_the_reference_example() -> None:
    # Five voters at [20 (leader), 18, 15, 9, unknown]: index 2 of the sorted list is 15.
    assert offset_reached_by_majority([20, 18, 15, 9, None]) == 15
    assert offset_reached_by_majority([20, None, None]) is None
    assert offset_reached_by_majority([7]) == 7


def test_majority_sizes() -> None:
    assert [majority_size(n) for n in range(1, 8)] == [1, 2, 2, 3, 3, 4, 4]


@given(st.integers(1, 7), st.data())
def test_a_tally_is_won_or_lost_exactly_when_a_majority_decides(
    voter_count: int, data: st.DataObject
) -> None:
    voters = list(range(1, voter_count + 1))
    tally = VoteTally(voters, 1)
    answers = data.draw(st.lists(st.tuples(st.sampled_from(voters), st.booleans())))
    for voter_id, granted in answers:
        tally.record(voter_id, granted)
    granted_count, rejected_count = len(tally.granted), len(tally.rejected)
    assert granted_count + rejected_count + len(tally.unanswered()) == voter_count
    needed = majority_size(voter_count)
    expected = (
        VoteResult.WON
        if granted_count >= needed
        else VoteResult.LOST
        if voter_count - rejected_count < needed
        else VoteResult.PENDING
    )
    assert tally.result() is expected


def test_a_voter_answers_once_and_non_voters_do_not_count() -> None:
    tally = VoteTally([1, 2, 3], 1)
    tally.record(2, False)
    tally.record(2, True)
    tally.record(9, True)
    assert tally.granted == {1} and tally.rejected == {2}
    assert tally.result() is VoteResult.PENDING


def test_successor_delays_double_by_position_up_to_the_backoff() -> None:
    # n = 4 successors, backoff max 1000: positions 0..3 wait 0, 125, 250, 500; absent 1000.
    delays = [end_quorum_epoch_delay_ms(p, 4, 1000) for p in range(4)]
    assert delays == [0, 125, 250, 500]
    assert end_quorum_epoch_delay_ms(None, 4, 1000) == 1000
