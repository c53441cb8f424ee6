"""Offsets and planning of the replog source: pure functions, no Spark and no cluster."""

from __future__ import annotations

import json

import pytest

from replog.spark.errors import SourceOptionError
from replog.spark.offsets import describe, from_offset_dict, to_offset_dict
from replog.spark.options import ByTimestamp, Earliest, Latest, SpecificOffsets
from replog.spark.planning import (
    Bounds,
    OffsetRange,
    check_order,
    moved_back,
    next_end,
    plan_ranges,
    rate_limit,
    resolve_end,
    resolve_start,
)

BOUNDS = {("t", 0): Bounds(5, 100), ("t", 1): Bounds(0, 40), ("u", 0): Bounds(0, 0)}


def test_offset_dicts_have_one_fixed_order_whatever_the_input_order() -> None:
    a = {("t", 10): 3, ("t", 2): 1, ("a", 0): 7}
    b = dict(reversed(list(a.items())))
    assert json.dumps(to_offset_dict(a)) == json.dumps(to_offset_dict(b))
    assert json.dumps(to_offset_dict(a)) == '{"a": {"0": 7}, "t": {"2": 1, "10": 3}}'
    assert from_offset_dict(json.loads(json.dumps(to_offset_dict(a)))) == a
    assert describe(a) == "a-0@7, t-2@1, t-10@3"


@pytest.mark.parametrize(
    ("offset", "named"),
    [
        ([1], "not a {topic"),
        ({"t": 3}, "entry 't'"),
        ({"t": {"x": 1}}, "'x' of topic 't'"),
        ({"t": {"0": -1}}, "t-0 has -1"),
        ({"t": {"0": "5"}}, "t-0 has '5'"),
    ],
)
def test_bad_offset_dicts_are_named(offset: object, named: str) -> None:
    with pytest.raises(SourceOptionError, match=named):
        from_offset_dict(offset)


def test_start_and_end_resolve_against_log_start_and_high_watermark() -> None:
    assert resolve_start(Earliest(), BOUNDS) == {("t", 0): 5, ("t", 1): 0, ("u", 0): 0}
    assert resolve_start(Latest(), BOUNDS) == {("t", 0): 100, ("t", 1): 40, ("u", 0): 0}
    spec = SpecificOffsets("startingOffsets", {("t", 0): -2, ("t", 1): -1, ("u", 0): 0})
    assert resolve_start(spec, BOUNDS) == {("t", 0): 5, ("t", 1): 40, ("u", 0): 0}
    # below the log start is kept: the reader decides (failOnDataLoss)
    below = SpecificOffsets("startingOffsets", {("t", 0): 1, ("t", 1): 0, ("u", 0): 0})
    assert resolve_start(below, BOUNDS)[("t", 0)] == 1
    ending = SpecificOffsets("endingOffsets", {("t", 0): 50, ("t", 1): 500, ("u", 0): -1})
    # an end above the high watermark is clamped to it: never plan an uncommitted offset
    assert resolve_end(ending, BOUNDS) == {("t", 0): 50, ("t", 1): 40, ("u", 0): 0}
    assert resolve_end(Latest(), BOUNDS) == {("t", 0): 100, ("t", 1): 40, ("u", 0): 0}


def test_per_partition_offsets_must_name_exactly_the_partitions_read() -> None:
    missing = SpecificOffsets("startingOffsets", {("t", 0): 1, ("t", 1): 0})
    with pytest.raises(SourceOptionError, match=r"'startingOffsets' must name every.*u-0"):
        resolve_start(missing, BOUNDS)
    extra = SpecificOffsets("endingOffsets", {**{tp: -1 for tp in BOUNDS}, ("t", 7): 3})
    with pytest.raises(SourceOptionError, match=r"'endingOffsets' names partitions.*t-7"):
        resolve_end(extra, BOUNDS)


def test_a_start_past_the_high_watermark_or_its_end_is_an_error() -> None:
    late = SpecificOffsets("startingOffsets", {("t", 0): 101, ("t", 1): 0, ("u", 0): 0})
    with pytest.raises(SourceOptionError, match=r"t-0 starts at 101, after its latest.*100"):
        resolve_start(late, BOUNDS)
    with pytest.raises(SourceOptionError, match="t-0 starts at 30, after its end 20"):
        check_order({("t", 0): 30}, {("t", 0): 20})


def test_timestamps_resolve_to_looked_up_offsets_or_follow_the_strategy() -> None:
    bounds = {("t", 0): Bounds(0, 10), ("t", 1): Bounds(0, 7)}
    found = {("t", 0): 4, ("t", 1): None}
    strict = ByTimestamp("startingTimestamp", None, 1000, latest_when_missing=False)
    with pytest.raises(SourceOptionError, match="t-1 has no record at or after timestamp 1000"):
        resolve_start(strict, bounds, found)
    lenient = ByTimestamp("startingTimestamp", None, 1000, latest_when_missing=True)
    assert resolve_start(lenient, bounds, found) == {("t", 0): 4, ("t", 1): 7}
    # an offset found above the HW read (an HW read low for a moment) starts at that HW, never
    # after the end the start is planned with
    above = {("t", 0): 12, ("t", 1): 3}
    assert resolve_start(strict, bounds, above) == {("t", 0): 10, ("t", 1): 3}


def test_ranges_skip_empty_partitions_and_split_for_min_partitions() -> None:
    start = {("t", 0): 0, ("t", 1): 10, ("u", 0): 5}
    end = {("t", 0): 90, ("t", 1): 40, ("u", 0): 5}
    assert plan_ranges(start, end) == [OffsetRange("t", 0, 0, 90), OffsetRange("t", 1, 10, 40)]
    split = plan_ranges(start, end, min_partitions=4)
    assert split == [
        OffsetRange("t", 0, 0, 30),
        OffsetRange("t", 0, 30, 60),
        OffsetRange("t", 0, 60, 90),
        OffsetRange("t", 1, 10, 40),
    ]
    # a range is never split below one offset per task
    assert plan_ranges({("t", 0): 0}, {("t", 0): 2}, min_partitions=10) == [
        OffsetRange("t", 0, 0, 1),
        OffsetRange("t", 0, 1, 2),
    ]
    # partitions new since the start are read from offset 0
    assert plan_ranges({}, {("n", 0): 3}) == [OffsetRange("n", 0, 0, 3)]


def test_micro_batch_ends_are_high_watermarks_even_below_the_start() -> None:
    # t-0's HW fell below its start (topic re-created, log truncated): moved_back names it for
    # the data-loss report, its end is the new HW and no range is planned for it, so the next
    # micro-batch reads on from 40; a gone partition stays where it was.
    start = {("t", 0): 50, ("gone", 0): 9, ("t", 2): 7}
    latest = {("t", 0): 40, ("t", 1): 12, ("t", 2): 7}
    assert moved_back(start, latest) == {("t", 0): 40}
    end = next_end(start, latest)
    assert end == {("gone", 0): 9, ("t", 0): 40, ("t", 1): 12, ("t", 2): 7}
    assert plan_ranges(start, end) == [OffsetRange("t", 1, 0, 12)]
    assert moved_back(end, {("t", 0): 130}) == {}
    assert plan_ranges(end, next_end(end, {("t", 0): 130})) == [OffsetRange("t", 0, 40, 130)]


def test_rate_limit_splits_the_limit_by_backlog_like_kafka() -> None:
    start = {("t", 0): 0, ("t", 1): 0}
    end = {("t", 0): 100, ("t", 1): 50}
    assert rate_limit(start, end, 60) == {("t", 0): 40, ("t", 1): 20}
    assert rate_limit(start, end, 1000) == end
    # an end below its start (moved back) keeps its end and takes no share of the limit
    moved = rate_limit({("t", 0): 0, ("t", 1): 90}, {("t", 0): 100, ("t", 1): 10}, 60)
    assert moved == {("t", 0): 60, ("t", 1): 10}
    # a tiny share still moves one offset
    assert rate_limit({("a", 0): 0, ("b", 0): 0}, {("a", 0): 1000, ("b", 0): 1}, 10) == {
        ("a", 0): 9,
        ("b", 0): 1,
    }
