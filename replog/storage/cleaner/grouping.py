"""How a cleaning pass groups consecutive segments into one cleaned segment each (Kafka's
`Cleaner.groupSegmentsBySize`).

Rules:
- A group starts with the next segment and takes the following ones while the group's log
  bytes stay within `segment.bytes`, its offset and time index bytes each within
  `segment.index.bytes`, and (unless the next segment is empty) the next segment's last
  offset stays within 2^31 - 1 of the group's first base offset: offsets in a segment are
  stored relative to its base as int32.
- A segment's last offset, for that check, is the next segment's base offset - 1, or the
  first uncleanable offset - 1 for the last segment given.
- Pure: sizes and offsets in, groups of indexes out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class GroupedSegment:
    base_offset: int
    size: int
    offset_index_bytes: int
    time_index_bytes: int


def group_segments_by_size(
    segments: Sequence[GroupedSegment],
    max_size: int,
    max_index_size: int,
    first_uncleanable_offset: int,
) -> list[list[int]]:
    """The groups, as lists of indexes into `segments` (in offset order)."""
    groups: list[list[int]] = []
    i = 0
    count = len(segments)
    while i < count:
        first = segments[i]
        group = [i]
        log_size = first.size
        index_size = first.offset_index_bytes
        time_index_size = first.time_index_bytes
        i += 1
        while i < count:
            candidate = segments[i]
            last_offset = (
                segments[i + 1].base_offset - 1 if i + 1 < count else first_uncleanable_offset - 1
            )
            if not (
                log_size + candidate.size <= max_size
                and index_size + candidate.offset_index_bytes <= max_index_size
                and time_index_size + candidate.time_index_bytes <= max_index_size
                and (candidate.size == 0 or last_offset - first.base_offset <= INT32_MAX)
            ):
                break
            group.append(i)
            log_size += candidate.size
            index_size += candidate.offset_index_bytes
            time_index_size += candidate.time_index_bytes
            i += 1
        groups.append(group)
    return groups
