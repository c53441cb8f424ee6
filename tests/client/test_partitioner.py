"""The default partitioner: murmur2 equal to Kafka's and kafka-python's, sticky null keys."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.partitioner.default import DefaultPartitioner as KafkaPythonPartitioner
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from replog.client.partitioner import DefaultPartitioner, murmur2, to_positive
from replog.errors import InvalidPartitionsError

# Kafka's own known answers (its UtilsTest.testMurmur2).
JAVA_MURMUR2 = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


class FakeCluster:
    """The three methods kafka-python's partitioner asks of its ClusterMetadata."""

    def __init__(self, topic: str, partitions: int) -> None:
        self.topic = topic
        self.partitions = set(range(partitions))

    def topics(self) -> set[str]:
        return {self.topic}

    def partitions_for_topic(self, topic: str) -> set[int]:
        return self.partitions

    def available_partitions_for_topic(self, topic: str) -> set[int]:
        return self.partitions


def kafka_python_partition(key: bytes, partitions: int) -> int:
    cluster = FakeCluster("t", partitions)
    result: int = KafkaPythonPartitioner().partition("t", key, key, None, None, cluster)
    return result


@pytest.mark.parametrize(("data", "expected"), sorted(JAVA_MURMUR2.items()))
def test_murmur2_matches_kafkas_known_answers(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


def test_worked_example_of_the_docstring() -> None:
    assert to_positive(murmur2(b"21")) == 1173551340
    assert DefaultPartitioner().partition("t", b"21", 3) == 0


@given(st.binary(max_size=300))
def test_murmur2_equals_kafka_python(data: bytes) -> None:
    # kafka-python returns the unsigned 32-bit form of the same value
    assert murmur2(data) & 0xFFFFFFFF == kafka_python_murmur2(data)
    assert -(2**31) <= murmur2(data) < 2**31


@given(st.binary(max_size=64), st.integers(min_value=1, max_value=1000))
def test_keyed_partition_equals_kafka_python(key: bytes, partitions: int) -> None:
    assert DefaultPartitioner().partition("t", key, partitions) == kafka_python_partition(
        key, partitions
    )


def test_many_keys_of_every_length_equal_kafka_python() -> None:
    rng = random.Random(7)
    partitioner = DefaultPartitioner()
    for length in range(0, 70):
        for _ in range(30):
            key = rng.randbytes(length)
            count = rng.randint(1, 500)
            assert partitioner.partition("t", key, count) == kafka_python_partition(key, count)
    for number in range(2000):  # typical string keys
        key = f"user-{number}".encode()
        assert partitioner.partition("t", key, 12) == kafka_python_partition(key, 12)


def test_to_positive_clears_the_sign_bit() -> None:
    assert to_positive(-(2**31)) == 0
    assert to_positive(-1) == 2**31 - 1
    assert to_positive(5) == 5


def test_null_keys_stick_to_one_partition_until_a_batch_completes() -> None:
    partitioner = DefaultPartitioner(rng=random.Random(1))
    first = partitioner.partition("t", None, 8)
    assert {partitioner.partition("t", None, 8) for _ in range(100)} == {first}
    partitioner.on_new_batch("t", first, 8)
    second = partitioner.partition("t", None, 8)
    assert second != first
    assert {partitioner.partition("t", None, 8) for _ in range(100)} == {second}


def test_a_batch_of_another_partition_does_not_move_the_sticky_one() -> None:
    partitioner = DefaultPartitioner(rng=random.Random(2))
    sticky = partitioner.partition("t", None, 8)
    partitioner.on_new_batch("t", (sticky + 1) % 8, 8)
    assert partitioner.partition("t", None, 8) == sticky


def test_sticky_partitions_are_per_topic_and_spread_over_batches() -> None:
    partitioner = DefaultPartitioner(rng=random.Random(3))
    chosen: Counter[int] = Counter()
    for _ in range(4000):
        partition = partitioner.partition("a", None, 4)
        chosen[partition] += 1
        partitioner.on_new_batch("a", partition, 4)
    assert set(chosen) == {0, 1, 2, 3}
    assert min(chosen.values()) > 800  # uniform-ish: 1000 expected each
    partitioner.partition("b", None, 4)
    assert set(partitioner._sticky) == {"a", "b"}


def test_new_sticky_partition_only_among_available_ones() -> None:
    partitioner = DefaultPartitioner(rng=random.Random(4))
    first = partitioner.partition("t", None, 6, available=[2, 4])
    assert first in (2, 4)
    for _ in range(50):
        previous = partitioner.partition("t", None, 6)
        partitioner.on_new_batch("t", previous, 6, available=[2, 4])
        now = partitioner.partition("t", None, 6)
        assert now in (2, 4) and now != previous
    # no partition with a leader: any partition rather than none
    partitioner.on_new_batch("t", partitioner.partition("t", None, 6), 6, available=[])
    assert 0 <= partitioner.partition("t", None, 6) < 6


def test_one_partition_stays_put() -> None:
    partitioner = DefaultPartitioner()
    assert partitioner.partition("t", None, 1) == 0
    partitioner.on_new_batch("t", 0, 1)
    assert partitioner.partition("t", None, 1) == 0


def test_sticky_partition_is_rechosen_when_the_count_shrinks_below_it() -> None:
    partitioner = DefaultPartitioner(rng=random.Random(5))
    partitioner._sticky["t"] = 7
    assert partitioner.partition("t", None, 3) in (0, 1, 2)


def test_ignore_keys_treats_keys_like_null_keys() -> None:
    partitioner = DefaultPartitioner(ignore_keys=True, rng=random.Random(6))
    partitions = {partitioner.partition("t", f"k{i}".encode(), 16) for i in range(100)}
    assert len(partitions) == 1


def test_keyed_records_ignore_availability() -> None:
    # Kafka: a key always maps over all partitions, leaderless or not (ordering per key)
    partitioner = DefaultPartitioner()
    assert partitioner.partition("t", b"21", 3, available=[1, 2]) == 0


def test_a_topic_without_partitions_is_a_typed_error() -> None:
    with pytest.raises(InvalidPartitionsError, match="'t' has 0 partitions"):
        DefaultPartitioner().partition("t", b"k", 0)
