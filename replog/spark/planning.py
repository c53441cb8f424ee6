"""Which offsets each task reads: start and end per partition, and the ranges tasks get, pure.

The driver looks up each partition's earliest offset (log start) and latest offset (high
watermark, HW) once per planning step; everything here works on those numbers:
- `resolve_start` / `resolve_end`: a `startingOffsets` / `endingOffsets` spec as positions.
  "latest" is the HW at planning; an explicit end above the HW is clamped to it, so a batch
  never plans a record that is not committed; an explicit start above the HW, or a start
  after its end, is an error naming the partition. An offset found by timestamp is never
  above the HW either: the caller looks timestamps up before it reads the bounds, and should
  an HW still read lower (a new leader's can, for a moment), the start is clamped to it.
  Per-partition JSON must name exactly the subscribed partitions (Spark's Kafka source
  asserts the same).
- `plan_ranges`: one `OffsetRange` per non-empty partition range, split further when
  `minPartitions` asks for more tasks than partitions (proportionally to range size, as
  Spark's `KafkaOffsetRangeCalculator` does).
- `rate_limit`: the end of the next micro-batch under `maxOffsetsPerTrigger`, the limit split
  across partitions by backlog (Spark's Kafka source rule).
- `next_end`: the end of the next micro-batch: the HW of every partition known now (new
  partitions start at offset 0, as in Spark's Kafka source, so records already deleted there
  count as data loss). An HW below its partition's start (`moved_back`: the topic deleted and
  re-created, or its log truncated) is the end all the same: the caller reports the data loss,
  no range is planned for that partition, and the next micro-batch reads on from there, as
  Spark's Kafka source does.

Rules: no I/O; offsets are `(topic, partition) -> int` maps; results are sorted.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from replog.common import TopicPartitionKey
from replog.spark.errors import SourceOptionError
from replog.spark.options import (
    EARLIEST,
    LATEST,
    ByTimestamp,
    Earliest,
    EndSpec,
    Latest,
    Positions,
    SpecificOffsets,
    StartSpec,
)


@dataclass(frozen=True, slots=True)
class Bounds:
    """A partition's readable offsets at planning: [earliest, latest)."""

    earliest: int  # the log start offset
    latest: int  # the high watermark


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """What one task reads: offsets [start, end) of one partition."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def _name(tp: TopicPartitionKey) -> str:
    return f"{tp[0]}-{tp[1]}"


def check_covers(
    spec: SpecificOffsets | ByTimestamp, partitions: Sequence[TopicPartitionKey]
) -> None:
    """Per-partition JSON must name exactly the partitions read (module docstring)."""
    named = spec.offsets if isinstance(spec, SpecificOffsets) else spec.per_partition
    if named is None:
        return
    missing = sorted(set(partitions) - set(named))
    extra = sorted(set(named) - set(partitions))
    if missing:
        raise SourceOptionError(
            f"option {spec.option!r} must name every partition read; missing: "
            + ", ".join(_name(tp) for tp in missing)
        )
    if extra:
        raise SourceOptionError(
            f"option {spec.option!r} names partitions that are not read (not subscribed or "
            "not existing): " + ", ".join(_name(tp) for tp in extra)
        )


def resolve_start(
    spec: StartSpec,
    bounds: Mapping[TopicPartitionKey, Bounds],
    by_timestamp: Mapping[TopicPartitionKey, int | None] | None = None,
) -> Positions:
    """Start positions of `spec` (by_timestamp: the first offset at or after each time, None
    when no record is that late; needed only for a ByTimestamp spec)."""
    partitions = sorted(bounds)
    if isinstance(spec, Earliest):
        return {tp: bounds[tp].earliest for tp in partitions}
    if isinstance(spec, Latest):
        return {tp: bounds[tp].latest for tp in partitions}
    check_covers(spec, partitions)
    start: Positions = {}
    if isinstance(spec, ByTimestamp):
        found = by_timestamp or {}
        for tp in partitions:
            offset = found.get(tp)
            if offset is None:
                if not spec.latest_when_missing:
                    at = spec.everywhere if spec.per_partition is None else spec.per_partition[tp]
                    raise SourceOptionError(
                        f"option {spec.option!r}: {_name(tp)} has no record at or after "
                        f"timestamp {at} (set startingOffsetsByTimestampStrategy=latest to "
                        "start at the latest offset instead)"
                    )
                offset = bounds[tp].latest
            start[tp] = min(offset, bounds[tp].latest)  # never after the end (module docstring)
        return start
    for tp in partitions:
        wanted = spec.offsets[tp]
        if wanted == EARLIEST:
            start[tp] = bounds[tp].earliest
        elif wanted == LATEST:
            start[tp] = bounds[tp].latest
        elif wanted > bounds[tp].latest:
            raise SourceOptionError(
                f"option {spec.option!r}: {_name(tp)} starts at {wanted}, after its latest "
                f"committed offset {bounds[tp].latest}"
            )
        else:
            start[tp] = wanted  # below earliest: data loss, decided when it is read
    return start


def resolve_end(spec: EndSpec, bounds: Mapping[TopicPartitionKey, Bounds]) -> Positions:
    partitions = sorted(bounds)
    if isinstance(spec, Latest):
        return {tp: bounds[tp].latest for tp in partitions}
    check_covers(spec, partitions)
    return {
        tp: bounds[tp].latest
        if spec.offsets[tp] == LATEST
        else min(spec.offsets[tp], bounds[tp].latest)
        for tp in partitions
    }


def check_order(
    start: Mapping[TopicPartitionKey, int], end: Mapping[TopicPartitionKey, int]
) -> None:
    for tp in sorted(start):
        if tp in end and start[tp] > end[tp]:
            raise SourceOptionError(
                f"startingOffsets/endingOffsets: {_name(tp)} starts at {start[tp]}, after its "
                f"end {end[tp]}"
            )


def plan_ranges(
    start: Mapping[TopicPartitionKey, int],
    end: Mapping[TopicPartitionKey, int],
    min_partitions: int | None = None,
) -> list[OffsetRange]:
    """Non-empty ranges per partition, split to reach `min_partitions` tasks (module doc)."""
    ranges = [
        OffsetRange(tp[0], tp[1], start.get(tp, 0), end[tp])
        for tp in sorted(end)
        if end[tp] > start.get(tp, 0)
    ]
    if min_partitions is None or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    split: list[OffsetRange] = []
    for whole in ranges:
        parts = max(1, round(whole.size / total * min_partitions))
        parts = min(parts, whole.size)
        for i in range(parts):
            lo = whole.start + whole.size * i // parts
            hi = whole.start + whole.size * (i + 1) // parts
            split.append(OffsetRange(whole.topic, whole.partition, lo, hi))
    return split


def moved_back(
    start: Mapping[TopicPartitionKey, int], latest: Mapping[TopicPartitionKey, int]
) -> Positions:
    """The partitions whose HW is now below their start, with that HW (module docstring)."""
    return {tp: latest[tp] for tp in sorted(start) if tp in latest and latest[tp] < start[tp]}


def next_end(
    start: Mapping[TopicPartitionKey, int], latest: Mapping[TopicPartitionKey, int]
) -> Positions:
    """Every partition known now, at its HW, even one below its start (module docstring).
    A partition of `start` missing from `latest` stays where it is: an end offset never drops
    a partition, or a later batch would read it again from 0."""
    known = sorted(set(start) | set(latest))
    return {tp: latest[tp] if tp in latest else start[tp] for tp in known}


def rate_limit(
    start: Mapping[TopicPartitionKey, int], end: Mapping[TopicPartitionKey, int], max_rows: int
) -> Positions:
    """`end`, cut so at most about `max_rows` offsets are read, by backlog (module doc)."""
    # An end below its start (moved_back) reads nothing: no negative backlog may shrink the
    # total and so raise the other partitions' shares.
    backlog = {tp: max(0, end[tp] - start.get(tp, 0)) for tp in sorted(end)}
    total = sum(backlog.values())
    if total <= max_rows:
        return dict(sorted(end.items()))
    limited: Positions = {}
    for tp, behind in backlog.items():
        begin = start.get(tp, 0)
        share = max_rows * behind / total
        # Kafka's rule: a share below one offset still moves one offset, so a slow partition
        # is not starved by a busy one.
        step = math.ceil(share) if share < 1 else math.floor(share)
        limited[tp] = min(begin + step, end[tp])
    return limited
