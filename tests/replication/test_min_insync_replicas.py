"""`min_insync_replicas`: the strongest level that sets the key wins; a non-integer is
refused and the next level gives the value; below 1 counts as 1."""

from __future__ import annotations

from replog.replication.min_insync_replicas import min_insync_replicas


def test_the_strongest_level_that_sets_it_wins() -> None:
    levels = [("topic", None), ("broker", "3"), ("cluster", "2")]
    assert min_insync_replicas(levels, 1) == (3, [])


def test_no_level_sets_it_the_default_holds() -> None:
    assert min_insync_replicas([("topic", None), ("broker", None)], 2) == (2, [])


def test_a_non_integer_is_refused_and_the_next_level_gives_it() -> None:
    levels = [("topic", "two"), ("broker", None), ("cluster", "2")]
    assert min_insync_replicas(levels, 1) == (2, [("topic", "two")])


def test_every_level_refused_leaves_the_default() -> None:
    assert min_insync_replicas([("topic", "x"), ("cluster", "")], 4) == (
        4,
        [("topic", "x"), ("cluster", "")],
    )


def test_below_one_counts_as_one() -> None:
    assert min_insync_replicas([("topic", "0")], 3) == (1, [])
    assert min_insync_replicas([("topic", "-2")], 3) == (1, [])
