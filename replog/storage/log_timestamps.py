"""A log's lookups by timestamp, for ListOffsets: the largest timestamp (`MAX_TIMESTAMP`) and
the first record at or after a time (`offsets_for_times`).

Rules: each holds the log's lock; each decodes only the batches that may hold its answer (this
serves ListOffsets, not the data path); records below the log start offset are never an
answer.
"""

from __future__ import annotations

from replog.storage.log_reads import LogReads


class LogTimestamps(LogReads):
    """The timestamp lookups of a `Log` (log_state.py says why its parts share one state)."""

    def max_timestamp_and_offset(self, upper_bound_offset: int) -> tuple[int, int] | None:
        """(largest timestamp, offset of the first record carrying it) among the batches
        holding an offset in [log start, `upper_bound_offset`), or None when none has a
        timestamp: ListOffsets' MAX_TIMESTAMP (KIP-734, with Kafka 3.8's record offset,
        KAFKA-16310). Each segment answers from its tracked maximum and its time index, so only
        the batches after the last time-index entry below the bound, and those of a segment cut
        by the log start, are read; then the one batch found is decoded. A batch straddling the
        log start counts by its header; if its largest timestamp lies below the start, the
        answer is its first offset at or above the start."""
        with self._lock:
            self._check_open()
            start = self._log_start_offset
            first = next(self._segments.irange(maximum=start, reverse=True), None)
            best_ts, best_offset = -1, -1
            for base in self._segments.irange(minimum=first, maximum=upper_bound_offset - 1):
                segment = self._segments[base]
                if segment.size == 0:
                    continue
                ts, offset = segment.max_timestamp_between(start, upper_bound_offset)
                if ts > best_ts:
                    best_ts, best_offset = ts, offset
            if best_offset < 0:
                return None
            return best_ts, self._first_record_at(best_ts, best_offset, start)

    def _first_record_at(self, timestamp: int, offset: int, floor: int) -> int:
        """The offset of the first record at or above `floor` with `timestamp` in the batch
        holding `offset` (decoded), else the batch's first offset at or above `floor`."""
        from replog.record.batch import RecordBatch

        data = self.read(offset, 1)  # the batch holding it, whole (min_one_message)
        batch = RecordBatch.parse(
            data, where=f"{self.name} at offset {offset}", sparse=self.config.compacts
        )
        for record in batch.records():
            if record.offset >= floor and record.timestamp == timestamp:
                return record.offset
        return max(floor, batch.base_offset)

    def offsets_for_times(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the earliest record with timestamp >= `timestamp_ms`, or None.

        Decodes the records of one batch: this serves ListOffsets, not the data path.
        """
        from replog.record.batch import RecordBatch

        with self._lock:
            self._check_open()
            for segment in self._segments.values():
                if segment.size == 0 or segment.largest_timestamp() < timestamp_ms:
                    continue
                segment.ensure_indexes()
                _, indexed_offset = segment.time_index.lookup(timestamp_ms)
                # The time index only says where to start reading: its offset is the last of
                # the batch holding a timestamp, and records before it in that batch may
                # carry the timestamp too (all of them under LogAppendTime), or a larger one.
                # Records are filtered by the log start alone, as Kafka's search is.
                floor = max(self._log_start_offset, segment.base_offset)
                _, position = segment.offset_index.lookup(max(indexed_offset, floor))
                for batch_position, header in segment._walk_headers(position):
                    if header.max_timestamp < timestamp_ms or header.last_offset < floor:
                        continue
                    data = segment.log_file.read_fully(batch_position, header.size_in_bytes)
                    for record in RecordBatch.parse(
                        data,
                        where=f"{segment.log_path}@{batch_position}",
                        sparse=self.config.compacts,  # a cleaned batch has gaps
                    ).records():
                        if record.timestamp >= timestamp_ms and record.offset >= floor:
                            return record.offset, record.timestamp
            return None
