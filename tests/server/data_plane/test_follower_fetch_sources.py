"""The leader brokers a broker fetches from (`FollowerFetchSteps.fetch_sources`), counted from
the partitions touched since the last call, always equal to a walk over every partition."""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any

import pytest

from tests.server.data_plane.follower_fetch_helpers import LOCAL, follower_steps


def walked(partitions: dict[Any, Any]) -> list[int]:
    return sorted(
        {
            p.follower.leader_id
            for p in partitions.values()
            if p.follower is not None
            and p.follower.leader_id >= 0
            and p.follower.leader_id != LOCAL
        }
    )


@pytest.mark.parametrize("seed", range(20))
def test_the_counted_sources_equal_a_walk_over_every_partition(seed: int) -> None:
    rng = random.Random(seed)
    partitions: dict[Any, Any] = {}
    steps = follower_steps(partitions)
    for _ in range(300):
        key = ("t", rng.randrange(12))
        what = rng.random()
        if what < 0.15:
            partitions.pop(key, None)  # deleted
        elif what < 0.3:
            partitions.setdefault(key, SimpleNamespace()).follower = None  # leads or stopped
        else:  # follows a leader: another broker, none (-1) or, stale, this one
            leader = rng.choice([-1, LOCAL, 2, 3, 4])
            partitions.setdefault(key, SimpleNamespace()).follower = SimpleNamespace(
                leader_id=leader
            )
        steps.touch(key)
        if rng.random() < 0.3:
            assert steps.fetch_sources(LOCAL) == walked(partitions)
    assert steps.fetch_sources(LOCAL) == walked(partitions)
    assert steps.fetch_sources(LOCAL) == walked(partitions)  # nothing touched since


def test_an_untouched_change_is_not_seen_until_touched() -> None:
    """The contract the replica manager keeps: it touches a partition whenever it adds or
    removes one or gives one a role; nothing else is read."""
    partitions: dict[Any, Any] = {("t", 0): SimpleNamespace(follower=SimpleNamespace(leader_id=2))}
    steps = follower_steps(partitions)
    assert steps.fetch_sources(LOCAL) == []
    steps.touch(("t", 0))
    assert steps.fetch_sources(LOCAL) == [2]
    partitions[("t", 0)].follower.leader_id = 3
    assert steps.fetch_sources(LOCAL) == [2]
    steps.touch(("t", 0))
    assert steps.fetch_sources(LOCAL) == [3]
