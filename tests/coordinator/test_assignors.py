"""The client-side assignors: Kafka's documented examples, and properties over random groups
(every partition once, to a member subscribed to its topic; balance; stickiness, eager and
cooperative; rack locality where it costs no balance)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from replog.common import TopicPartition
from replog.coordinator.assignors import (
    Member,
    range_assign,
    roundrobin_assign,
)
from replog.coordinator.consumer_protocol import (
    Subscription,
    assigned_partitions,
    assignment_to_bytes,
    generation_from_user_data,
    sticky_user_data_from_bytes,
    sticky_user_data_to_bytes,
    subscription_from_bytes,
    subscription_to_bytes,
)
from replog.coordinator.sticky_assignors import (
    cooperative_sticky_assign,
    sticky_assign,
    subscription_user_data,
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
    cases = [(a, members, None) for a in (range_assign, roundrobin_assign, sticky_assign)]
    cases += [(cooperative_sticky_assign, members, None), (range_assign, racked_members, racks)]
    cases += [(sticky_assign, racked_members, racks)]
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


def sticky_member(
    name: str,
    *topics: str,
    had: tuple[TopicPartition, ...] | None = None,
    gen: int = 1,
    rack: str | None = None,
) -> Member:
    """A `sticky` member whose user data says it had `had` in generation `gen`."""
    data = subscription_user_data("sticky", None if had is None else frozenset(had), gen)
    return Member(name, None, Subscription(topics, user_data=data, rack=rack))


def test_sticky_user_data_is_kafkas_layout() -> None:
    # StickyAssignorUserData v1: [topic [partition]] then the generation.
    data = sticky_user_data_to_bytes([tp("t", 1), tp("t", 0)], 5)
    assert data == (
        b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\x00\x00\x00\x02"
        b"\x00\x00\x00\x00\x00\x00\x00\x01" + b"\x00\x00\x00\x05"
    )
    assert sticky_user_data_from_bytes(data) == ((tp("t", 0), tp("t", 1)), 5)
    # v0 (no generation), none, and bytes that do not parse.
    assert sticky_user_data_from_bytes(data[:-4]) == ((tp("t", 0), tp("t", 1)), -1)
    assert sticky_user_data_from_bytes(None) == ((), -1)
    assert sticky_user_data_from_bytes(b"\x00\x00\x00\x09") == ((), -1)
    # A member that never had an assignment sends none; cooperative-sticky sends its generation.
    assert subscription_user_data("sticky", None, -1) is None
    assert generation_from_user_data(subscription_user_data("cooperative-sticky", None, 7)) == 7
    assert subscription_user_data("range", frozenset(), 3) is None


def test_sticky_reads_kafka_pythons_user_data_too() -> None:
    """kafka-python 3's StickyPartitionAssignor puts an int16 version before the fields (Java's
    StickyAssignor does not): a leader here still reads what its members had."""
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
    from kafka.structs import TopicPartition as KafkaTopicPartition

    theirs = StickyPartitionAssignor._metadata(
        ["t"], [KafkaTopicPartition("t", 1), KafkaTopicPartition("t", 0)], 5
    ).encode()
    sub = subscription_from_bytes(theirs)
    assert sub.topics == ("t",)
    assert sticky_user_data_from_bytes(sub.user_data) == ((tp("t", 0), tp("t", 1)), 5)


def test_sticky_keeps_what_members_had_when_one_joins() -> None:
    members = [
        sticky_member("a", "t", had=(tp("t", 0), tp("t", 1), tp("t", 2))),
        sticky_member("b", "t", had=(tp("t", 3), tp("t", 4), tp("t", 5))),
        sticky_member("c", "t"),
    ]
    got = names(sticky_assign(members, {"t": 6}))
    assert len(got["c"]) == 2 and set(got["a"]) < {"t0", "t1", "t2"}
    assert set(got["b"]) < {"t3", "t4", "t5"}
    # Fed its own answer back, nothing moves.
    again = [
        sticky_member(m, "t", had=tuple(tp("t", int(p[1:])) for p in parts), gen=2)
        for m, parts in got.items()
    ]
    assert names(sticky_assign(again, {"t": 6})) == got


def test_sticky_settles_claims_by_generation_and_drops_a_tie() -> None:
    members = [
        sticky_member("a", "t", had=(tp("t", 0), tp("t", 1)), gen=1),
        sticky_member("b", "t", had=(tp("t", 0),), gen=4),
    ]
    assert names(sticky_assign(members, {"t": 2})) == {"a": ["t1"], "b": ["t0"]}
    tie = [
        Member("a", None, Subscription(("t",), (tp("t", 0),), 3)),
        Member("b", None, Subscription(("t",), (tp("t", 0), tp("t", 1)), 3)),
    ]
    # Claimed twice in one generation: nobody keeps t0, and cooperatively nobody gets it yet.
    assert names(cooperative_sticky_assign(tie, {"t": 2})) == {"a": [], "b": ["t1"]}


def test_sticky_prefers_racks_without_costing_balance() -> None:
    # Partitions 0-1 have their only replica in rack c, 2-3 in b, 4-5 in a; fresh members
    # of racks a, b, c (in order, dealt without racks, they would get 0-1, 2-3, 4-5).
    racks = {tp("t", p): frozenset("cba"[p // 2]) for p in range(6)}
    members = [sticky_member(f"c{i}", "t", rack="abc"[i]) for i in range(3)]
    assert names(sticky_assign(members, {"t": 6}, racks)) == {
        "c0": ["t4", "t5"],
        "c1": ["t2", "t3"],
        "c2": ["t0", "t1"],
    }
    # Both members in rack a, where only partitions 0-3 have replicas: still 3 each.
    racks = {tp("t", p): frozenset("a" if p < 4 else "b") for p in range(6)}
    both = [sticky_member("c0", "t", rack="a"), sticky_member("c1", "t", rack="a")]
    assert sorted(len(p) for p in sticky_assign(both, {"t": 6}, racks).values()) == [3, 3]


def test_a_partition_moves_to_its_rack_and_cooperatively_waits_a_round() -> None:
    # c0 (rack a) owns t1, whose replica is in rack b only, and c1 (rack b) has room: as in
    # Kafka, locality wins over stickiness; balance still holds.
    racks = {tp("t", 0): frozenset("a"), tp("t", 1): frozenset("b")}
    owned = [
        Member("c0", None, Subscription(("t",), (tp("t", 0), tp("t", 1)), 2, rack="a")),
        Member("c1", None, Subscription(("t",), (), 2, rack="b")),
    ]
    assert names(cooperative_sticky_assign(owned, {"t": 2}, racks)) == {"c0": ["t0"], "c1": []}
    assert names(
        sticky_assign(
            [
                sticky_member("c0", "t", had=(tp("t", 0), tp("t", 1)), rack="a"),
                sticky_member("c1", "t", rack="b"),
            ],
            {"t": 2},
            racks,
        )
    ) == {"c0": ["t0"], "c1": ["t1"]}


def _had(draw_owners: list[int], size: int) -> dict[int, list[TopicPartition]]:
    had: dict[int, list[TopicPartition]] = {i: [] for i in range(size)}
    for p, owner in enumerate(draw_owners):
        if owner >= 0:
            had[owner].append(tp("t", p))
    return had


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 7), st.integers(0, 30), st.booleans(), st.data())
def test_sticky_is_valid_balanced_and_keeps_what_it_can(
    size: int, partitions: int, with_racks: bool, data: st.DataObject
) -> None:
    owners = data.draw(
        st.lists(st.integers(-1, size - 1), min_size=partitions, max_size=partitions)
    )
    had = _had(owners, size)
    racks = {tp("t", p): frozenset({f"r{p % 3}"}) for p in range(partitions)}
    members = [
        sticky_member(f"m{i}", "t", had=tuple(had[i]), rack=f"r{i % 2}" if with_racks else None)
        for i in range(size)
    ]
    assignment = sticky_assign(members, {"t": partitions}, racks if with_racks else None)
    every = sorted(p for parts in assignment.values() for p in parts)
    assert every == [tp("t", p) for p in range(partitions)]
    sizes = [len(parts) for parts in assignment.values()]
    assert max(sizes) - min(sizes) <= 1
    if not with_racks:
        share = partitions // size
        for i in range(size):
            assert len(set(assignment[f"m{i}"]) & set(had[i])) >= min(share, len(had[i]))
    # Stable: fed back, the assignment does not change.
    again = [
        sticky_member(
            m.member_id, "t", had=tuple(assignment[m.member_id]), gen=2, rack=m.subscription.rack
        )
        for m in members
    ]
    assert sticky_assign(again, {"t": partitions}, racks if with_racks else None) == assignment


@settings(max_examples=60, deadline=None)
@given(groups, st.integers(1, 8), st.integers(0, 8), st.data())
def test_sticky_with_unequal_subscriptions_leaves_no_move_that_narrows_a_gap(
    spec: list[tuple[set[str], set[int]]], t_count: int, u_count: int, data: st.DataObject
) -> None:
    counts = {"t": t_count, "u": u_count}
    members = [
        sticky_member(f"m{i}", *sorted(topics), had=tuple(tp("t", p) for p in sorted(had)))
        for i, (topics, had) in enumerate(spec)
    ]
    assignment = sticky_assign(members, counts)
    size = {m: len(parts) for m, parts in assignment.items()}
    for m, parts in assignment.items():
        for p in parts:
            takers = [o for o in members if p.topic in o.subscription.topics]
            assert all(size[o.member_id] + 2 > size[m] for o in takers)
