"""Replica placement: errors, determinism, balance (properties) and rack awareness."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replog.errors import InvalidPartitionsError, InvalidReplicationFactorError
from replog.quorum.controller.placement import place_replicas


def brokers(count: int, racks: int = 0) -> list[tuple[int, str | None]]:
    return [(10 + i, f"rack-{i % racks}" if racks else None) for i in range(count)]


def counts(placements: list[tuple[int, ...]]) -> tuple[Counter[int], Counter[int]]:
    replicas = Counter(b for replica_list in placements for b in replica_list)
    leaders = Counter(replica_list[0] for replica_list in placements)
    return replicas, leaders


def spread(counter: Counter[int], broker_ids: list[int]) -> int:
    values = [counter[b] for b in broker_ids]
    return max(values) - min(values)


# -- errors ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("replication_factor", [0, -1, -3])
def test_a_non_positive_replication_factor_is_invalid(replication_factor: int) -> None:
    with pytest.raises(InvalidReplicationFactorError, match=str(replication_factor)):
        place_replicas(brokers(3), 1, replication_factor, random.Random(0))


def test_a_replication_factor_above_the_active_brokers_names_both_numbers() -> None:
    with pytest.raises(InvalidReplicationFactorError) as raised:
        place_replicas(brokers(2), 1, 3, random.Random(0))
    assert "replication factor 3" in str(raised.value)
    assert "(2)" in str(raised.value)


def test_no_active_brokers_at_all_is_an_invalid_replication_factor() -> None:
    with pytest.raises(InvalidReplicationFactorError, match=r"\(0\)"):
        place_replicas([], 1, 1, random.Random(0))


def test_a_non_positive_partition_count_is_invalid() -> None:
    with pytest.raises(InvalidPartitionsError, match="0"):
        place_replicas(brokers(3), 0, 1, random.Random(0))


# -- shape and determinism ------------------------------------------------------------------------


def test_each_partition_gets_distinct_brokers_from_the_input() -> None:
    placements = place_replicas(brokers(5), 20, 3, random.Random(1))
    assert len(placements) == 20
    for replica_list in placements:
        assert len(replica_list) == 3
        assert len(set(replica_list)) == 3
        assert set(replica_list) <= {b for b, _ in brokers(5)}


def test_the_same_seed_gives_the_same_placement_whatever_the_input_order() -> None:
    shuffled = brokers(6)
    random.Random(5).shuffle(shuffled)
    first = place_replicas(brokers(6), 12, 3, random.Random(42))
    assert place_replicas(shuffled, 12, 3, random.Random(42)) == first


def test_different_seeds_start_on_different_brokers() -> None:
    starts = {place_replicas(brokers(6), 1, 1, random.Random(seed))[0] for seed in range(30)}
    assert len(starts) > 1


def test_replication_factor_equal_to_the_broker_count_uses_every_broker() -> None:
    for replica_list in place_replicas(brokers(3), 6, 3, random.Random(3)):
        assert sorted(replica_list) == [10, 11, 12]


def test_leaders_rotate_over_all_brokers() -> None:
    placements = place_replicas(brokers(4), 8, 2, random.Random(9))
    _, leaders = counts(placements)
    assert sorted(leaders.values()) == [2, 2, 2, 2]


# -- racks ---------------------------------------------------------------------------------------


def test_replicas_go_to_distinct_racks() -> None:
    cluster = brokers(6, racks=3)
    rack_of = dict(cluster)
    for replica_list in place_replicas(cluster, 30, 3, random.Random(4)):
        assert len({rack_of[b] for b in replica_list}) == 3


def test_with_fewer_racks_than_replicas_every_rack_is_used() -> None:
    cluster = brokers(6, racks=2)
    rack_of = dict(cluster)
    for replica_list in place_replicas(cluster, 30, 3, random.Random(4)):
        assert len({rack_of[b] for b in replica_list}) == 2


def test_a_lone_rack_gets_a_replica_of_every_partition() -> None:
    # Rack diversity wins over balance: "b" has one broker, and every partition wants both racks.
    cluster: list[tuple[int, str | None]] = [(1, "a"), (2, "a"), (3, "a"), (4, "b")]
    placements = place_replicas(cluster, 9, 2, random.Random(8))
    assert all(4 in replica_list for replica_list in placements)
    _, leaders = counts(placements)
    assert spread(leaders, [1, 2, 3, 4]) <= 1


def test_a_broker_without_a_rack_counts_as_a_rack_of_its_own() -> None:
    cluster: list[tuple[int, str | None]] = [(1, "a"), (2, "a"), (3, None)]
    for replica_list in place_replicas(cluster, 6, 2, random.Random(2)):
        assert 3 in replica_list


# -- properties ----------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(
    broker_count=st.integers(1, 16),
    data=st.data(),
    partition_count=st.integers(1, 80),
    seed=st.integers(0, 2**32 - 1),
)
def test_without_racks_replica_and_leader_counts_differ_by_at_most_one(
    broker_count: int, data: st.DataObject, partition_count: int, seed: int
) -> None:
    replication_factor = data.draw(st.integers(1, broker_count))
    cluster = brokers(broker_count)
    placements = place_replicas(cluster, partition_count, replication_factor, random.Random(seed))
    ids = [b for b, _ in cluster]
    replicas, leaders = counts(placements)
    assert spread(replicas, ids) <= 1
    assert spread(leaders, ids) <= 1
    assert all(len(set(r)) == replication_factor for r in placements)


@settings(max_examples=200, deadline=None)
@given(
    broker_count=st.integers(1, 12),
    rack_count=st.integers(1, 5),
    data=st.data(),
    partition_count=st.integers(1, 40),
    seed=st.integers(0, 2**32 - 1),
)
def test_with_racks_each_partition_spans_as_many_racks_as_it_can(
    broker_count: int, rack_count: int, data: st.DataObject, partition_count: int, seed: int
) -> None:
    replication_factor = data.draw(st.integers(1, broker_count))
    rng = random.Random(seed)
    cluster: list[tuple[int, str | None]] = [
        (b, f"rack-{rng.randrange(rack_count)}") for b in range(broker_count)
    ]
    rack_of = dict(cluster)
    racks_present = len(set(rack_of.values()))
    placements = place_replicas(cluster, partition_count, replication_factor, rng)
    for replica_list in placements:
        assert len(set(replica_list)) == replication_factor
        assert len({rack_of[b] for b in replica_list}) == min(replication_factor, racks_present)
    _, leaders = counts(placements)
    assert spread(leaders, list(range(broker_count))) <= 1


# -- the written-out walk against the rule as first written --------------------------------------


def _reference_placement(
    cluster: list[tuple[int, str | None]], partition_count: int, replication_factor: int, seed: int
) -> list[tuple[int, ...]]:
    """The placement rule as first written: every key holds its rotation, and min() picks."""
    order = sorted(cluster, key=lambda broker: broker[0])
    rng = random.Random(seed)
    for i in range(len(order) - 1, 0, -1):  # placement's Fisher-Yates
        j = rng.randrange(0, i + 1)
        order[i], order[j] = order[j], order[i]
    count = len(order)
    racks = [rack for _, rack in order]
    rack_aware = any(rack is not None for rack in racks)
    replica_counts = [0] * count
    leader_counts = [0] * count
    placements: list[tuple[int, ...]] = []
    for partition in range(partition_count):
        rotation = [(i - partition) % count for i in range(count)]
        leader = min(range(count), key=lambda i: (leader_counts[i], replica_counts[i], rotation[i]))
        chosen = [leader]
        used_racks = {racks[leader]}
        leader_counts[leader] += 1
        replica_counts[leader] += 1
        for _ in range(replication_factor - 1):
            follower = min(
                (i for i in range(count) if i not in chosen),
                key=lambda i: (
                    rack_aware and racks[i] in used_racks,
                    replica_counts[i],
                    -leader_counts[i],
                    rotation[i],
                ),
            )
            chosen.append(follower)
            used_racks.add(racks[follower])
            replica_counts[follower] += 1
        placements.append(tuple(order[i][0] for i in chosen))
    return placements


@settings(max_examples=400, deadline=None)
@given(
    broker_count=st.integers(1, 12),
    rack_count=st.integers(0, 4),
    data=st.data(),
    partition_count=st.integers(1, 40),
    seed=st.integers(0, 2**32 - 1),
)
def test_placement_is_the_rule_as_first_written(
    broker_count: int, rack_count: int, data: st.DataObject, partition_count: int, seed: int
) -> None:
    replication_factor = data.draw(st.integers(1, broker_count))
    cluster = brokers(broker_count, racks=rack_count)
    if rack_count and data.draw(st.booleans()):
        cluster[0] = (cluster[0][0], None)  # a broker without a rack among racked ones
    expected = _reference_placement(cluster, partition_count, replication_factor, seed)
    assert place_replicas(cluster, partition_count, replication_factor, random.Random(seed)) == (
        expected
    )
