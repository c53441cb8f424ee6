"""The follower's requests (`FollowerFetchSteps.build`): every build lists the plan as it
stands, in its order, and a build that finds nothing changed since the previous one hands out
that request again (no copy of the plan), with no changes for the fetch session."""

from __future__ import annotations

import random
import tracemalloc
from typing import Any

import pytest

from tests.server.data_plane.follower_fetch_helpers import follower_steps, partition

SOURCES = (2, 3)


@pytest.mark.parametrize("seed", range(20))
def test_every_build_lists_the_plan_and_an_unchanged_plan_is_not_copied(seed: int) -> None:
    rng = random.Random(seed)
    partitions: dict[Any, Any] = {}
    epoch = [1]
    steps = follower_steps(partitions, lambda: epoch[0])
    last: dict[int, Any] = {}
    for _ in range(400):
        key = ("t", rng.randrange(16))
        what = rng.random()
        if what < 0.1:
            partitions.pop(key, None)
            steps.touch(key)
        elif what < 0.3:
            partitions[key] = partition(key, rng.choice(SOURCES))
            steps.touch(key)
        elif what < 0.45 and key in partitions:
            partitions[key].follower.fetch_offset += 1  # an answer appended records
            steps.touch(key)
        elif what < 0.5 and key in partitions:
            steps.touch(key)  # touched, nothing changed
        elif what < 0.52:
            epoch[0] += 1  # the broker registered again
        source = rng.choice(SOURCES)
        request = steps.build(source, now_ms=0)
        plan = steps._plans.get(source)
        if not plan:
            assert request is None
            continue
        assert request is not None
        assert request.partitions == tuple(plan.values())
        assert request.replica_epoch == epoch[0]
        changes = steps.changes(source)
        assert changes is not None
        previous = last.get(source)
        if request is previous:
            assert not changes.entries and changes.since is previous
        last[source] = request


def test_a_build_with_nothing_changed_hands_out_the_same_request() -> None:
    partitions: dict[Any, Any] = {("t", 0): partition(("t", 0), 2)}
    steps = follower_steps(partitions)
    steps.touch(("t", 0))
    first = steps.build(2, now_ms=0)
    again = steps.build(2, now_ms=0)
    assert again is first
    changes = steps.changes(2)
    assert changes is not None and changes.since is first and not changes.entries
    partitions[("t", 0)].follower.fetch_offset = 5
    steps.touch(("t", 0))
    moved = steps.build(2, now_ms=0)
    assert moved is not first and moved is not None
    assert moved.partitions[0].fetch_offset == 5


@pytest.mark.parametrize("seed", range(20))
def test_the_plan_an_answer_is_read_against_is_the_plan_the_request_was_built_from(
    seed: int,
) -> None:
    """What `process` reads an answer against stays the plan as the request was built from it
    (the request's own entries), through the refreshes that change the plan while the fetch is
    away; it is the live plan seen through the entries kept at the build, not a copy."""
    rng = random.Random(seed)
    partitions: dict[Any, Any] = {}
    steps = follower_steps(partitions)
    built: dict[int, dict[Any, Any]] = {}
    for _ in range(400):
        key = ("t", rng.randrange(16))
        what = rng.random()
        if what < 0.1:
            partitions.pop(key, None)
        elif what < 0.3:
            partitions[key] = partition(key, rng.choice(SOURCES))  # new, or another leader
        elif what < 0.5 and key in partitions:
            partitions[key].follower.fetch_offset += 1
        elif what < 0.55 and key in partitions:
            partitions[key].follower.leader_id = -1  # no leader known
        steps.touch(key)
        if rng.random() < 0.5:
            steps.refresh(now_ms=0)  # a round of replica changes while fetches are away
        else:
            source = rng.choice(SOURCES)
            request = steps.build(source, now_ms=0)
            if request is not None:
                built[source] = {(e.topic, e.partition): e for e in request.partitions}
        for source, asked in built.items():
            as_built = steps._built[source][1]
            assert dict(as_built) == asked
            assert len(as_built) == len(asked)
            for k in {*asked, *steps._plans.get(source, {}), ("t", 99)}:
                assert as_built.get(k) is asked.get(k)


def test_a_build_after_one_change_does_not_copy_the_plan() -> None:
    """A build after a change allocates the request's entries, not a copy of the plan as well
    (a dict of 20,000 entries is about 1 MB; the request's tuple of them 160 kB)."""
    keys = [("t", n) for n in range(20_000)]
    partitions: dict[Any, Any] = {key: partition(key, 2) for key in keys}
    steps = follower_steps(partitions)
    for key in keys:
        steps.touch(key)
    assert steps.build(2, now_ms=0) is not None
    partitions[keys[0]].follower.fetch_offset = 7
    steps.touch(keys[0])
    tracemalloc.start()
    try:
        request = steps.build(2, now_ms=0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert request is not None and request.partitions[0].fetch_offset == 7
    assert peak < 400_000, f"a build after one change allocated {peak} bytes"
