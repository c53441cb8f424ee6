"""A group's `__consumer_offsets` partition: Java's String.hashCode on known strings (values
any JVM prints), Kafka's abs at Integer.MIN_VALUE, and the partition numbers that follow."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from replog.coordinator.group_partition import (
    java_string_hashcode,
    kafka_abs,
    partition_for_group,
)

# (string, "string".hashCode() on a JVM)
JAVA_HASHCODES = [
    ("", 0),
    ("a", 97),
    ("Aa", 2112),
    ("BB", 2112),  # the classic collision
    ("hello", 99162322),
    ("Hello", 69609650),
    ("polygenelubricants", -(2**31)),  # hashes to Integer.MIN_VALUE
    ("\U0001f600", 1772899),  # a surrogate pair: 0xD83D * 31 + 0xDE00
    ("é", 233),
]


@pytest.mark.parametrize(("text", "expected"), JAVA_HASHCODES)
def test_java_string_hashcode_of_known_strings(text: str, expected: int) -> None:
    assert java_string_hashcode(text) == expected


def test_kafka_abs_maps_integer_min_value_to_zero() -> None:
    assert kafka_abs(-(2**31)) == 0
    assert kafka_abs(-(2**31) + 1) == 2**31 - 1
    assert kafka_abs(-5) == 5
    assert kafka_abs(7) == 7


def test_partition_numbers_follow_kafkas_rule() -> None:
    assert partition_for_group("hello", 50) == 99162322 % 50 == 22
    assert partition_for_group("polygenelubricants", 50) == 0  # not negative, not an error
    assert partition_for_group("Hello", 50) == 69609650 % 50
    assert partition_for_group("anything", 1) == 0
    with pytest.raises(ValueError, match="needs at least 1"):
        partition_for_group("g", 0)


def _reference_hashcode(text: str) -> int:
    """The textbook definition: s[0]*31^(n-1) + ... + s[n-1] over UTF-16 code units, as a
    signed 32-bit integer (computed with unbounded integers, wrapped once at the end)."""
    units: list[int] = []
    for char in text:
        code = ord(char)
        if code > 0xFFFF:
            code -= 0x10000
            units += [0xD800 + (code >> 10), 0xDC00 + (code & 0x3FF)]
        else:
            units.append(code)
    n = len(units)
    total = sum(unit * 31 ** (n - 1 - i) for i, unit in enumerate(units)) % 2**32
    return total - 2**32 if total >= 2**31 else total


@given(st.text(max_size=30), st.integers(1, 200))
def test_hashcode_and_partition_agree_with_the_textbook_definition(
    text: str, partitions: int
) -> None:
    expected = _reference_hashcode(text)
    assert java_string_hashcode(text) == expected
    partition = partition_for_group(text, partitions)
    assert 0 <= partition < partitions
    assert partition == (0 if expected == -(2**31) else abs(expected)) % partitions
