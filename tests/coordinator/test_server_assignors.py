"""The server assignors. `uniform` as a group grows and shrinks: counts differ by at most one,
every partition is assigned once, and when a member joins no member that stays gains a
partition (each move then waits only for its one old owner's release). With racks (KIP-881):
members get the partitions with a replica in their rack when balance allows, for `uniform`
and `range` alike, and plain assignments when racks cannot matter."""

from __future__ import annotations

from uuid import UUID

from hypothesis import given, settings
from hypothesis import strategies as st

from replog.coordinator.consumer_member import Partitions
from replog.coordinator.server_assignors import AssignorMember, range_assign, uniform_assign

T = UUID(int=1)
U = UUID(int=2)


def racked(name: str, rack: str | None, current: Partitions = frozenset()) -> AssignorMember:
    return AssignorMember(name, frozenset({T}), current, rack)


def test_uniform_and_range_give_members_their_racks_partitions() -> None:
    # Partitions 0-1 have their only replica in rack c, 2-3 in b, 4-5 in a.
    racks = {(T, p): frozenset("cba"[p // 2]) for p in range(6)}
    members = [racked(f"m{i}", "abc"[i]) for i in range(3)]
    expected = {
        "m0": frozenset({(T, 4), (T, 5)}),
        "m1": frozenset({(T, 2), (T, 3)}),
        "m2": frozenset({(T, 0), (T, 1)}),
    }
    assert uniform_assign(members, {T: 6}, racks) == expected
    assert range_assign(members, {T: 6}, racks) == expected
    # Without racks (or a replica in every rack): the plain assignments.
    everywhere = {(T, p): frozenset("abc") for p in range(6)}
    plain = {f"m{i}": frozenset({(T, 2 * i), (T, 2 * i + 1)}) for i in range(3)}
    assert range_assign(members, {T: 6}, everywhere) == range_assign(members, {T: 6}) == plain
    assert uniform_assign(members, {T: 6}, everywhere) == uniform_assign(members, {T: 6})


def test_uniform_moves_a_partition_to_its_rack_but_never_unbalances() -> None:
    # m0 (rack a) holds all four; partitions 0-1 have their replica in rack b, m1's: m0
    # keeps 2-3 (without racks it would keep the first two).
    racks = {(T, p): frozenset("b" if p < 2 else "a") for p in range(4)}
    every = frozenset((T, p) for p in range(4))
    new = uniform_assign([racked("m0", "a", every), racked("m1", "b")], {T: 4}, racks)
    assert new == {"m0": frozenset({(T, 2), (T, 3)}), "m1": frozenset({(T, 0), (T, 1)})}
    # Both in rack a, where only partition 0 has a replica: balance first, 2 each.
    racks = {(T, p): frozenset("a" if p == 0 else "b") for p in range(4)}
    both = uniform_assign([racked("m0", "a"), racked("m1", "a")], {T: 4}, racks)
    assert sorted(len(tps) for tps in both.values()) == [2, 2]


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 6), st.integers(0, 24), st.data())
def test_rack_aware_uniform_is_even_and_local_where_it_can_be(
    size: int, partitions: int, data: st.DataObject
) -> None:
    placement = data.draw(st.lists(st.sampled_from("ab"), min_size=partitions, max_size=partitions))
    racks = {(T, p): frozenset(r) for p, r in enumerate(placement)}
    members = [racked(f"m{i}", "ab"[i % 2]) for i in range(size)]
    new = uniform_assign(members, {T: partitions}, racks)
    every = sorted(tp for tps in new.values() for tp in tps)
    assert every == [(T, p) for p in range(partitions)]
    sizes = {mid: len(tps) for mid, tps in new.items()}
    assert max(sizes.values()) - min(sizes.values()) <= 1
    # No two members could swap a partition each so that both are local (a wasted match).
    rack = {m.member_id: m.rack for m in members}
    for a, b in ((a, b) for a in new for b in new if rack[a] != rack[b]):
        a_foreign = [tp for tp in new[a] if rack[a] not in racks[tp]]
        b_foreign = [tp for tp in new[b] if rack[b] not in racks[tp]]
        assert not (
            any(rack[b] in racks[tp] for tp in a_foreign)
            and any(rack[a] in racks[tp] for tp in b_foreign)
        )


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
