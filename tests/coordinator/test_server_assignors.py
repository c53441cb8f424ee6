"""The `uniform` server assignor as a group grows and shrinks: counts differ by at most one,
every partition is assigned once, and when a member joins no member that stays gains a
partition (each move then waits only for its one old owner's release)."""

from __future__ import annotations

from uuid import UUID

from hypothesis import given, settings
from hypothesis import strategies as st

from replog.coordinator.consumer_member import Partitions
from replog.coordinator.server_assignors import AssignorMember, uniform_assign

T = UUID(int=1)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 120),
    st.lists(st.tuples(st.booleans(), st.integers(0, 30)), min_size=1, max_size=15),
)
def test_uniform_is_even_and_a_join_takes_only_from_the_others(
    partitions: int, steps: list[tuple[bool, int]]
) -> None:
    targets: dict[str, Partitions] = {}
    joined = 0
    for join, pick in steps:
        join = join or len(targets) < 2
        if join:
            targets[f"m{joined:03d}-{pick}"] = frozenset()
            joined += 1
        else:
            del targets[sorted(targets)[pick % len(targets)]]
        members = [AssignorMember(mid, frozenset({T}), current) for mid, current in targets.items()]
        new = uniform_assign(members, {T: partitions})
        every = [tp for tps in new.values() for tp in tps]
        assert sorted(every) == [(T, p) for p in range(partitions)]
        sizes = [len(tps) for tps in new.values()]
        assert max(sizes) - min(sizes) <= 1
        if join:
            for mid, current in targets.items():
                assert new[mid] <= current or not current, f"{mid} gained a partition"
        targets = dict(new)
