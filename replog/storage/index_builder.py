"""Indexing a segment's batches in file order as they are written or walked: Kafka's sparse
rule, shared by a segment rebuilding its indexes from its `.log` and by the log cleaner
writing a cleaned segment's indexes as it writes the segment.

Rules:
- A batch gets an offset-index entry, (its last offset, its position), once more than
  `index.interval.bytes` were added since the last entry; the time index then gets the largest
  timestamp so far with the last offset of the first batch carrying it (if it grew).
- `finish` adds the final time-index entry (the segment's largest timestamp), as a roll, a
  recovery or a close does: a sealed segment's `.timeindex` holds its largest timestamp.
- The indexes are given empty (`IndexFile.reset` or `start_empty`); writing them is the
  caller's.
"""

from __future__ import annotations

from replog.record.header import BatchHeader
from replog.storage.index_file import OffsetIndex, TimeIndex


class SparseIndexBuilder:
    """Adds the entries of batches given in file order to an offset and a time index."""

    __slots__ = (
        "_interval",
        "_offset_index",
        "_time_index",
        "bytes_since_last_entry",
        "max_timestamp",
        "offset_of_max_timestamp",
    )

    def __init__(self, offset_index: OffsetIndex, time_index: TimeIndex, interval: int) -> None:
        self._offset_index = offset_index
        self._time_index = time_index
        self._interval = interval
        self.bytes_since_last_entry = 0
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1

    def add(self, position: int, header: BatchHeader) -> None:
        """Index the batch of `header` starting at byte `position` (module Rules)."""
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp, self.offset_of_max_timestamp = (
                header.max_timestamp,
                header.last_offset,
            )
        if self.bytes_since_last_entry > self._interval:
            self._offset_index.append(header.last_offset, position)
            self._time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.bytes_since_last_entry = 0
        self.bytes_since_last_entry += header.size_in_bytes

    def finish(self) -> None:
        """Add the final time-index entry (module Rules)."""
        if self.max_timestamp >= 0:
            self._time_index.maybe_append(
                self.max_timestamp, self.offset_of_max_timestamp, final=True
            )
