"""The client-side assignors: Kafka's documented examples, and properties over random groups
(every partition once, to a member subscribed to its topic; balance; cooperative stickiness)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from replog.common import TopicPartition
from replog.coordinator.assignors import (
    Member,
    cooperative_sticky_assign,
    range_assign,
    roundrobin_assign,
)
from replog.coordinator.consumer_protocol import (
    Subscription,
    assigned_partitions,
    assignment_to_bytes,
    subscription_from_bytes,
    subscription_to_bytes,
)


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic, partition)


def member(
    name: str, *topics: str, owned: tuple[TopicPartition, ...] = (), gen: int = -1
) -> Member:
    return Member(name, None, Subscription(topics, owned, gen))


def names(assignment: dict[str, list[TopicPartition]]) -> dict[str, list[str]]:
    return {m: [f"{p.topic}{p.partition}" for p in parts] for m, parts in assignment.items()}


def test_range_is_kafkas_example() -> None:
    # Kafka's RangeAssignor javadoc: C0, C1; t0, t1 with 3 partitions each.
    members = [member("C0", "t0", "t1"), member("C1", "t0", "t1")]
    assert names(range_assign(members, {"t0": 3, "t1": 3})) == {
        "C0": ["t00", "t01", "t10", "t11"],
        "C1": ["t02", "t12"],
    }


def racked(name: str, rack: str | None, *topics: str) -> Member:
    return Member(name, None, Subscription(topics, rack=rack))


def test_range_prefers_partitions_with_a_replica_in_the_members_rack() -> None:
    """KIP-881: partition p's only replica in rack r(p % 3); each member takes its rack's."""
    members = [racked(f"c{i}", "abc"[i], "t") for i in range(3)]
    racks = {tp("t", p): frozenset("abc"[p % 3]) for p in range(6)}
    assert names(range_assign(members, {"t": 6}, racks)) == {
        "c0": ["t0", "t3"],
        "c1": ["t1", "t4"],
        "c2": ["t2", "t5"],
    }
    # Without racks (or with replicas in every rack): Kafka's plain ranges.
    plain = {"c0": ["t0", "t1"], "c1": ["t2", "t3"], "c2": ["t4", "t5"]}
    assert names(range_assign(members, {"t": 6})) == plain
    everywhere = {tp("t", p): frozenset("abc") for p in range(6)}
    assert names(range_assign(members, {"t": 6}, everywhere)) == plain


def test_rack_aware_range_keeps_shares_and_co_partitioning() -> None:
    # Both members in rack a, where only partitions 0-3 have replicas: each still gets its
    # share (3 of 6), its rack's partitions first; t and u (same members, same count) get the
    # same partition numbers.
    members = [racked("c0", "a", "t", "u"), racked("c1", "a", "t", "u")]
    racks = {tp(t, p): frozenset("a" if p < 4 else "b") for t in "tu" for p in range(6)}
    got = names(range_assign(members, {"t": 6, "u": 6}, racks))
    assert sorted(len(parts) for parts in got.values()) == [6, 6]
    for parts in got.values():
        assert sorted(p[1:] for p in parts if p[0] == "t") == sorted(
            p[1:] for p in parts if p[0] == "u"
        )
    assert got["c0"] == ["t0", "u0", "t1", "u1", "t2", "u2"]  # rack matches, in order
    # A member without a rack takes only what is left.
    mixed = [racked("c0", None, "t"), racked("c1", "b", "t")]
    assert names(range_assign(mixed, {"t": 6}, racks)) == {
        "c0": ["t0", "t1", "t2"],
        "c1": ["t4", "t5", "t3"],
    }


def test_roundrobin_is_kafkas_example() -> None:
    # Kafka's RoundRobinAssignor javadoc: C0 subscribes t0; C1 t0, t1; C2 t0, t1, t2;
    # t0 has 1 partition, t1 2, t2 3.
    members = [member("C0", "t0"), member("C1", "t0", "t1"), member("C2", "t0", "t1", "t2")]
    assert names(roundrobin_assign(members, {"t0": 1, "t1": 2, "t2": 3})) == {
        "C0": ["t00"],
        "C1": ["t10"],
        "C2": ["t11", "t20", "t21", "t22"],
    }


def test_cooperative_sticky_holds_back_a_partition_that_changes_owner() -> None:
    members = [member("a", "t", owned=(tp("t", 0), tp("t", 1)), gen=3), member("b", "t")]
    assignment = cooperative_sticky_assign(members, {"t": 2})
    # a must give one up: it is not given to b in this round (a revokes it first).
    assert len(assignment["a"]) == 1 and assignment["b"] == []


def test_cooperative_sticky_settles_a_double_claim_by_generation() -> None:
    members = [
        member("a", "t", owned=(tp("t", 0),), gen=2),
        member("b", "t", owned=(tp("t", 0),), gen=5),
    ]
    assignment = cooperative_sticky_assign(members, {"t": 2})
    assert assignment["b"] == [tp("t", 0)] and assignment["a"] == [tp("t", 1)]


def test_the_protocol_bytes_round_trip() -> None:
    sub = Subscription(("t", "u"), (tp("t", 1), tp("u", 0)), 7, b"x", "rack1")
    assert subscription_from_bytes(subscription_to_bytes(sub)) == sub
    data = assignment_to_bytes([tp("u", 0), tp("t", 2), tp("t", 1)])
    assert assigned_partitions(data) == [("t", 1), ("t", 2), ("u", 0)]


def test_a_version_0_subscription_reads_with_defaults() -> None:
    # version 0, topics ["t"], user_data null: what kafka-python sends.
    data = b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\xff\xff\xff\xff"
    assert subscription_from_bytes(data) == Subscription(("t",))


groups = st.lists(
    st.tuples(st.sets(st.sampled_from("tu"), min_size=1), st.sets(st.integers(0, 7))),
    min_size=1,
    max_size=6,
)


@settings(max_examples=60, deadline=None)
@given(groups, st.integers(1, 8), st.integers(0, 8))
def test_every_assignor_gives_each_partition_once_to_a_subscriber(
    spec: list[tuple[set[str], set[int]]], t_count: int, u_count: int
) -> None:
    counts = {"t": t_count, "u": u_count}
    members = [member(f"m{i}", *sorted(topics)) for i, (topics, _) in enumerate(spec)]
    racks = {tp(t, p): frozenset({f"r{p % 3}"}) for t in counts for p in range(counts[t])}
    racked_members = [
        Member(m.member_id, None, Subscription(m.subscription.topics, rack=f"r{i % 2}"))
        for i, m in enumerate(members)
    ]
    cases = [(a, members, None) for a in (range_assign, roundrobin_assign)]
    cases += [(cooperative_sticky_assign, members, None), (range_assign, racked_members, racks)]
    for assign, members, racks_given in cases:
        assignment = assign(members, counts, racks_given)
        given_out = [p for parts in assignment.values() for p in parts]
        assert len(given_out) == len(set(given_out))
        wanted = {t for m in members for t in m.subscription.topics}
        assert set(given_out) == {tp(t, p) for t in wanted for p in range(counts[t])}
        for m in members:
            assert all(p.topic in m.subscription.topics for p in assignment[m.member_id])


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 7), st.integers(0, 30), st.data())
def test_cooperative_sticky_is_balanced_sticky_and_never_gives_an_owned_partition_away(
    size: int, partitions: int, data: st.DataObject
) -> None:
    # Owned partitions: each partition owned by at most one member (or by none).
    owners = data.draw(
        st.lists(st.integers(-1, size - 1), min_size=partitions, max_size=partitions)
    )
    owned: dict[int, list[TopicPartition]] = {i: [] for i in range(size)}
    for p, owner in enumerate(owners):
        if owner >= 0:
            owned[owner].append(tp("t", p))
    members = [member(f"m{i}", "t", owned=tuple(owned[i]), gen=1) for i in range(size)]
    assignment = cooperative_sticky_assign(members, {"t": partitions})
    share = partitions // size
    for i in range(size):
        mine = set(assignment[f"m{i}"])
        assert len(mine) <= share + 1
        # Sticky: a member keeps at least min(its share, what it owned).
        assert len(mine & set(owned[i])) >= min(share, len(owned[i]))
        # Never a partition another member owns (KIP-429's revoke first).
        assert all(owners[p.partition] in (-1, i) for p in mine)
    if all(o == -1 for o in owners):  # nothing owned: everything assigned, balanced
        sizes = [len(parts) for parts in assignment.values()]
        assert sum(sizes) == partitions and max(sizes) - min(sizes) <= 1
