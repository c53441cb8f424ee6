"""SegmentMap against sortedcontainers' SortedDict, the map a log used before: same answers."""

from __future__ import annotations

import random

import pytest
from sortedcontainers import SortedDict

from replog.storage.segment_map import SegmentMap


def _same(made: SegmentMap[str], oracle: SortedDict) -> None:
    assert len(made) == len(oracle)
    assert list(made) == list(oracle)
    assert list(made.values()) == list(oracle.values())
    assert list(made.items()) == list(oracle.items())
    for index in range(-len(oracle), len(oracle)):
        assert made.peekitem(index) == oracle.peekitem(index)


@pytest.mark.parametrize("seed", range(5))
def test_random_operations_answer_as_a_sorted_dict(seed: int) -> None:
    rng = random.Random(seed)
    made: SegmentMap[str] = SegmentMap()
    oracle = SortedDict()
    for _ in range(400):
        op = rng.randrange(6)
        key = rng.randrange(60)
        if op <= 1:  # mostly appended after the last, as rolls do; sometimes before
            if op == 0 and len(oracle):
                key = oracle.peekitem(-1)[0] + rng.randrange(1, 5)
            made[key] = oracle[key] = f"s{key}"
        elif op == 2 and key in oracle:
            assert made.pop(key) == oracle.pop(key)
        elif op == 3 and key in oracle:
            del made[key]
            del oracle[key]
        elif op == 4:
            assert made.bisect_right(key) == oracle.bisect_right(key)
            assert made.get(key) == oracle.get(key)
            assert (key in made) == (key in oracle)
        else:
            low = rng.choice([None, key])
            high = rng.choice([None, key + rng.randrange(20)])
            for reverse in (False, True):
                assert list(made.irange(low, high, reverse=reverse)) == list(
                    oracle.irange(minimum=low, maximum=high, reverse=reverse)
                )
        _same(made, oracle)
    made.clear()
    oracle.clear()
    _same(made, oracle)


def test_a_walk_of_irange_may_change_the_map() -> None:
    made = SegmentMap.of_one(0, "a")
    made[10] = "b"
    made[20] = "c"
    for base in made.irange(minimum=5):
        made.pop(base)
    assert list(made.items()) == [(0, "a")]


def test_missing_keys_raise_as_a_dict() -> None:
    made = SegmentMap.of_one(3, "a")
    with pytest.raises(KeyError):
        made.pop(4)
    with pytest.raises(KeyError):
        del made[4]
    with pytest.raises(IndexError):
        SegmentMap().peekitem(-1)
