"""A log's reads: raw batches for fetches (`read`, `read_or_region`) and batch walks for tools
and producer-state rebuilds (`read_batches`, `batch_headers`, `batch_headers_and_markers`).

Rules (docs/design/storage.md#reads):
- Reads return whole batches, starting with the one that holds `start_offset`, and never a
  batch holding an offset at or above `upper_bound_offset` (the broker passes the high
  watermark for consumers). A start below the log start or above the end is out of range.
- The fetch path decodes no record and checks no CRC; `read_batches` checks each batch's CRC.
- `read_or_region` holds the log's lock; `_read_bounded` and `_bound_position` are called with
  it held. A walk takes the lock once per chunk it reads (`read`), so it is not one snapshot
  of the log.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from replog.errors import KafkaStorageError, OffsetOutOfRangeError
from replog.record.control_record import EndTxnMarker, batch_marker
from replog.record.header import BatchHeader, iter_frames, read_frame, read_header, validate_batch
from replog.storage.file_region import Region
from replog.storage.log_state import LogState
from replog.storage.segment import LogSegment

# How many bytes one read of a header walk (`batch_headers`) asks for. The walk keeps only
# headers, so this bounds the memory of a producer-state rebuild.
HEADER_WALK_CHUNK_BYTES = 1 << 20


class LogReads(LogState):
    """The reads of a `Log` (log_state.py says why its parts share one state)."""

    def read(
        self,
        start_offset: int,
        max_bytes: int = 1048576,
        upper_bound_offset: int | None = None,
        *,
        min_one_message: bool = True,
    ) -> bytes:
        """Raw batches from the batch holding `start_offset`, below `upper_bound_offset`.

        At most `max_bytes` of whole batches, except that the first batch is returned whole when
        `min_one_message` (Kafka's KIP-74) even if it is larger. Empty when `start_offset` is at
        or above the bound. OffsetOutOfRangeError outside [log_start_offset, log_end_offset].
        """
        data = self.read_or_region(
            start_offset, max_bytes, upper_bound_offset, min_one_message=min_one_message
        )
        assert isinstance(data, bytes)
        return data

    def read_or_region(
        self,
        start_offset: int,
        max_bytes: int = 1048576,
        upper_bound_offset: int | None = None,
        *,
        min_one_message: bool = True,
        region_min_bytes: int | None = None,
    ) -> bytes | Region:
        """`read`, but with `region_min_bytes` batches of that many bytes or more are left in
        their segment file: a `Region` (never an empty one) for a writer to send
        (`file_region`)."""
        with self._lock:
            if self._closed:  # (the call only to raise, as in append_as_leader)
                self._check_open()
            end = self._log_end_offset
            if start_offset < self._log_start_offset or start_offset > end:
                raise OffsetOutOfRangeError(
                    f"{self.name}: offset {start_offset} is outside the log's range "
                    f"[{self._log_start_offset}, {end}]"
                )
            bound = end if upper_bound_offset is None else min(upper_bound_offset, end)
            if start_offset >= bound or max_bytes < 0:
                return b""
            try:
                return self._read_bounded(
                    start_offset, max_bytes, bound, min_one_message, region_min_bytes
                )
            except OSError as exc:
                raise KafkaStorageError(
                    f"{self.name}: read at offset {start_offset} failed: {exc}"
                ) from exc

    def _read_bounded(
        self,
        start_offset: int,
        max_bytes: int,
        bound: int,
        min_one_message: bool,
        region_min_bytes: int | None,
    ) -> bytes | Region:
        bound_base, bound_position = self._bound_position(bound)
        active = self._active if self._active is not None else self.active_segment
        if start_offset >= active.base_offset:
            # The usual read, near the end: the active segment, found without a lookup (the
            # sorted-dict lookups below are Python code costing a few µs per read). The bound
            # lies in it too, as start_offset < bound.
            if active.base_offset != bound_base:  # pragma: no cover - see above
                return b""
            result = active.read(
                start_offset,
                max_bytes,
                bound_position,
                min_one_message=min_one_message,
                region_min_bytes=region_min_bytes,
            )
            return b"" if result is None else result[0]
        segments = self._segments
        # From the segment holding start_offset (start_offset >= log start >= first base).
        # Indexing by position: two `irange` iterators cost a few µs per read.
        index = max(segments.bisect_right(start_offset) - 1, 0)
        count = len(segments)
        while index < count:
            base, segment = segments.peekitem(index)
            assert isinstance(segment, LogSegment)
            if base > bound_base:
                break
            max_position = bound_position if base == bound_base else None
            result = segment.read(
                start_offset,
                max_bytes,
                max_position,
                min_one_message=min_one_message,
                region_min_bytes=region_min_bytes,
            )
            if result is not None:
                return result[0]
            index += 1  # start_offset lies past this segment's last batch
        return b""

    def _bound_position(self, bound: int) -> tuple[int, int]:
        """(segment base, byte position) where data at or above offset `bound` begins."""
        cached = self._bound_cache
        if cached is not None and cached[0] == bound:
            return cached[1], cached[2]
        if bound == self._log_end_offset:
            segment = self.active_segment
            result = (segment.base_offset, segment.size)
        else:
            base = next(self._segments.irange(maximum=bound, reverse=True))
            segment = self._segments[base]
            found = segment.translate_offset(bound)
            result = (base, found[0] if found is not None else segment.size)
            self._bound_cache = (bound, result[0], result[1])
        return result

    def read_batches(
        self, start_offset: int, upper_bound_offset: int | None = None, max_bytes: int = 1048576
    ) -> Iterator[tuple[int, bytes]]:
        """Yield (base offset, batch bytes) from `start_offset` to the bound, batch by batch,
        each one's CRC checked.

        A convenience for tools (dump-log, tests, the Spark reader); the broker uses `read`.
        """

        def validated(data: bytes, position: int) -> BatchHeader:
            base, _ = read_frame(data, position)
            return validate_batch(
                data, position, where=f"{self.name} offset {base}", sparse=self.config.compacts
            )

        for data, position, size, header in self._walk(
            start_offset, upper_bound_offset, max_bytes, validated
        ):
            yield header.base_offset, data[position : position + size]

    def batch_headers(
        self, start_offset: int, upper_bound_offset: int | None = None
    ) -> Iterator[BatchHeader]:
        """The headers of the batches from the one holding `start_offset` up to the bound
        (default: the LEO), read `HEADER_WALK_CHUNK_BYTES` at a time; no CRC is computed and
        no record decoded (a producer-state rebuild)."""
        for _, _, _, header in self._walk(
            start_offset, upper_bound_offset, HEADER_WALK_CHUNK_BYTES, read_header
        ):
            yield header

    def batch_headers_and_markers(
        self, start_offset: int, upper_bound_offset: int | None = None
    ) -> Iterator[tuple[BatchHeader, EndTxnMarker | None]]:
        """`batch_headers`, each with its end-transaction marker when it is a control batch
        holding one (its one record decoded, `batch_marker`), else None."""
        for data, position, _, header in self._walk(
            start_offset, upper_bound_offset, HEADER_WALK_CHUNK_BYTES, read_header
        ):
            if header.is_control and header.records_count:
                yield header, batch_marker(data, position, header, self.name)
            else:
                yield header, None

    def _walk(
        self,
        start_offset: int,
        upper_bound_offset: int | None,
        chunk_bytes: int,
        header_of: Callable[[bytes, int], BatchHeader],
    ) -> Iterator[tuple[bytes, int, int, BatchHeader]]:
        """(chunk, position, size, header) of every batch from the one holding `start_offset`
        to the bound, reading `chunk_bytes` at a time (at least one batch per read)."""
        offset = start_offset
        bound = self._log_end_offset if upper_bound_offset is None else upper_bound_offset
        while offset < bound:
            data = self.read(offset, chunk_bytes, bound)
            if not data:
                return
            next_offset = offset
            for position, size in iter_frames(data):
                header = header_of(data, position)
                yield data, position, size, header
                next_offset = header.next_offset
            if next_offset <= offset:
                return
            offset = next_offset
