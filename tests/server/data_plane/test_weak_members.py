"""WeakMembers holds its members weakly and iterates them like a WeakSet would."""

from __future__ import annotations

import gc
import weakref

from hypothesis import given
from hypothesis import strategies as st

from replog.server.data_plane.weak_members import WeakMembers


class Member:
    pass


def test_members_are_held_weakly_and_leave_when_collected() -> None:
    members: WeakMembers[Member] = WeakMembers()
    kept, dropped = Member(), Member()
    members.add(kept)
    members.add(dropped)
    members.add(kept)  # already in
    assert list(members) == [kept, dropped]
    del dropped
    gc.collect()
    assert list(members) == [kept]
    assert len(members) == 1


def test_iteration_walks_the_members_at_its_start() -> None:
    members: WeakMembers[Member] = WeakMembers()
    first = Member()
    members.add(first)
    later = Member()
    seen = []
    for member in members:
        members.add(later)
        seen.append(member)
    assert seen == [first]
    assert list(members) == [first, later]


@given(st.lists(st.tuples(st.booleans(), st.integers(0, 5)), max_size=30))
def test_the_same_members_as_a_weak_set(steps: list[tuple[bool, int]]) -> None:
    """Adds and drops in any order: the live members are those a WeakSet would hold."""

    pool: list[Member | None] = [Member() for _ in range(6)]
    members: WeakMembers[Member] = WeakMembers()
    oracle: weakref.WeakSet[Member] = weakref.WeakSet()
    order: list[Member] = []
    for add, index in steps:
        member = pool[index]
        if member is None:
            continue
        if add:
            members.add(member)
            oracle.add(member)
            if member not in order:
                order.append(member)
        else:
            pool[index] = None
            if member in order:
                order.remove(member)
            del member  # the last reference: CPython collects it here
    assert set(members) == set(oracle)
    assert list(members) == order
