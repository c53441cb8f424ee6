"""SharedCommits: which other consumer instances commit the same partitions of a group (the
warning for commits from outside the group's membership)."""

from __future__ import annotations

from replog.coordinator.messages import Committer, SharedCommit
from replog.coordinator.shared_commits import SHARED_COMMIT_WINDOW_MS, SharedCommits

A = Committer("reader", "aaaa", "10.0.0.1")
B = Committer("reader", "bbbb", "10.0.0.2")
P0, P1, P2 = ("orders", 0), ("orders", 1), ("orders", 2)


def test_a_second_instance_on_the_same_partitions_is_told_and_reported_once() -> None:
    tracker = SharedCommits()
    assert tracker.record("g", A, [P0, P1], 1_000) == ((), ())
    found, new = tracker.record("g", B, [P1, P2], 1_500)
    assert found == (SharedCommit(A, (P1,), 500),)
    assert new == found  # first time for this pair: the coordinator logs it
    found, new = tracker.record("g", A, [P0, P1, P2], 2_000)
    assert found == (SharedCommit(B, (P1, P2), 500),) and new == ()  # told, not logged again
    found, new = tracker.record("g", B, [P1], 2_100)
    assert found == (SharedCommit(A, (P1,), 100),) and new == ()
    assert tracker.record("other-group", B, [P0], 2_200) == ((), ())  # groups are apart
    assert tracker.record("g", A, [P0], 2_300) == ((), ())  # P0: only A commits it


def test_commits_without_an_instance_and_committers_gone_quiet_are_not_compared() -> None:
    tracker = SharedCommits()
    anonymous = Committer()
    tracker.record("g", A, [P0], 0)
    assert tracker.record("g", anonymous, [P0], 10) == ((), ())
    # B replaces A after A stopped for longer than the window: a restart, not two readers.
    assert tracker.record("g", B, [P0], SHARED_COMMIT_WINDOW_MS + 1) == ((), ())
    # A new pair later is reported again: its pair was never seen.
    third = Committer("reader", "cccc")
    found, new = tracker.record("g", third, [P0], SHARED_COMMIT_WINDOW_MS + 2)
    assert [s.other for s in found] == [B] and new == found
