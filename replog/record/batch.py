"""A read-only view of one validated RecordBatch v2, and iteration over concatenated batches.

The byte layout is in `header.py` (header) and `record.py` (records). `RecordBatch.parse`
validates framing, magic, the record count and the CRC-32C once; the header fields are then
plain attributes, and `records()` decodes (and, if needed, decompresses) the records on demand.

Worked example::

    raw = build_batch([(1700000000000, None, b"a", ())], base_offset=42)
    batch = RecordBatch.parse(raw)
    batch.last_offset            -> 42
    list(batch.records())        -> [Record(offset=42, timestamp=1700000000000, key=None,
                                            value=b"a", headers=())]

A log segment or a fetch response is several batches back to back; `iter_batches` walks them.
Rules for its tail: bytes that cannot even be framed as a batch (fewer than 12 bytes, a
`batch_length` below 14, or a batch longer than what is left) are a *partial tail*, which a
fetch response may legitimately end with: `strict=False` stops there silently, `strict=True`
raises `CorruptRecordError`. A batch that is fully present but invalid (bad magic, CRC, ...)
always raises.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Generic, TypeVar, overload

from replog.errors import CorruptRecordError
from replog.record.compression import (
    COMPRESSION_NONE,
    DECOMPRESSED_BYTES_MAX_DEFAULT,
    decompress,
)
from replog.record.header import (
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    iter_frames,
    read_frame,
    validate_batch,
)
from replog.record.record import (
    Record,
    decode_record_values,
    decode_records,
)
from replog.record.record_spans import Span, scan_records

Buffer = bytes | bytearray | memoryview
_Value = TypeVar("_Value")


class _FromHeader(Generic[_Value]):
    """A read-only attribute of `RecordBatch` answered by its `BatchHeader`, by the same name."""

    __slots__ = ("name",)

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, batch: None, owner: type) -> _FromHeader[_Value]: ...

    @overload
    def __get__(self, batch: RecordBatch, owner: type) -> _Value: ...

    def __get__(self, batch: RecordBatch | None, owner: type) -> _FromHeader[_Value] | _Value:
        if batch is None:
            return self
        value: _Value = getattr(batch.header, self.name)
        return value


class RecordBatch:
    """One batch whose bytes passed `validate_batch`; header fields are attributes.

    The header is decoded at parse time: stamping the underlying buffer afterwards is not
    reflected here. A `bytes` buffer is shared, any other buffer is copied, so the view never
    pins or observes a mutable buffer.
    """

    __slots__ = ("_buffer", "_position", "header", "where")

    base_offset = _FromHeader[int]()
    partition_leader_epoch = _FromHeader[int]()
    magic = _FromHeader[int]()
    crc = _FromHeader[int]()
    attributes = _FromHeader[int]()
    last_offset_delta = _FromHeader[int]()
    base_timestamp = _FromHeader[int]()
    max_timestamp = _FromHeader[int]()
    producer_id = _FromHeader[int]()
    producer_epoch = _FromHeader[int]()
    base_sequence = _FromHeader[int]()
    records_count = _FromHeader[int]()
    size_in_bytes = _FromHeader[int]()
    last_offset = _FromHeader[int]()
    next_offset = _FromHeader[int]()
    last_sequence = _FromHeader[int]()
    compression_codec = _FromHeader[int]()
    is_log_append_time = _FromHeader[bool]()
    is_transactional = _FromHeader[bool]()
    is_control = _FromHeader[bool]()
    is_idempotent = _FromHeader[bool]()

    def __init__(self, header: BatchHeader, buffer: bytes, position: int, where: str) -> None:
        """Wrap an already validated batch; use `parse` unless `validate_batch` just ran."""
        self.header = header
        self._buffer = buffer
        self._position = position
        self.where = where

    @classmethod
    def parse(
        cls, buf: Buffer, position: int = 0, *, where: str = "batch", sparse: bool = False
    ) -> RecordBatch:
        """Validate the batch at `position` (see `validate_batch`; `sparse`: a batch the log
        cleaner may have rewritten, with gaps between its records' offsets) and view it."""
        header = validate_batch(buf, position, where=where, sparse=sparse)
        if isinstance(buf, bytes):
            return cls(header, buf, position, where)
        return cls(header, bytes(buf[position : position + header.size_in_bytes]), 0, where)

    def to_bytes(self) -> bytes:
        """The batch's bytes exactly as validated."""
        if self._position == 0 and len(self._buffer) == self.header.size_in_bytes:
            return self._buffer
        return self._buffer[self._position : self._position + self.header.size_in_bytes]

    def records(
        self, decompressed_bytes_max: int = DECOMPRESSED_BYTES_MAX_DEFAULT
    ) -> Iterator[Record]:
        """The records with absolute offsets and timestamps, decompressing first if needed.

        Raises `InvalidRecordError` (structure, count, offset deltas) while iterating, and
        `UnsupportedCompressionTypeError` / `CorruptRecordError` right away for the blob.
        With LogAppendTime every record's timestamp is the batch's max_timestamp.
        """
        header = self.header
        data, start, end = self._records_region(decompressed_bytes_max)
        return decode_records(
            data,
            start,
            end,
            records_count=header.records_count,
            base_offset=header.base_offset,
            base_timestamp=header.base_timestamp,
            log_append_time=header.max_timestamp if header.is_log_append_time else None,
            where=self.where,
            last_offset_delta=header.last_offset_delta,
        )

    def values(
        self, decompressed_bytes_max: int = DECOMPRESSED_BYTES_MAX_DEFAULT
    ) -> Iterator[bytes | None]:
        """The records' values alone, in order, checked as `records` checks them."""
        header = self.header
        data, start, end = self._records_region(decompressed_bytes_max)
        return decode_record_values(
            data,
            start,
            end,
            records_count=header.records_count,
            base_offset=header.base_offset,
            where=self.where,
        )

    def keys(
        self, decompressed_bytes_max: int = DECOMPRESSED_BYTES_MAX_DEFAULT
    ) -> Iterator[tuple[int, bytes | None]]:
        """Each record's offset and key, in order, checked as `records` checks them."""
        base_offset = self.header.base_offset
        return iter(
            [(base_offset + span[0], span[2]) for span in self.spans(decompressed_bytes_max)[1]]
        )

    def spans(
        self, decompressed_bytes_max: int = DECOMPRESSED_BYTES_MAX_DEFAULT
    ) -> tuple[bytes, list[Span]]:
        """The bytes holding the records (decompressed) and each record's span in them
        (`record_spans`), checked as `records` checks them."""
        header = self.header
        data, start, end = self._records_region(decompressed_bytes_max)
        return data, scan_records(
            data,
            start,
            end,
            records_count=header.records_count,
            base_offset=header.base_offset,
            where=self.where,
            last_offset_delta=header.last_offset_delta,
        )

    def _records_region(self, decompressed_bytes_max: int) -> tuple[bytes, int, int]:
        """The bytes holding the records, and where they start and end (decompressed)."""
        header = self.header
        start = self._position + RECORD_BATCH_OVERHEAD
        end = self._position + header.size_in_bytes
        data = self._buffer
        codec = header.compression_codec
        if codec != COMPRESSION_NONE:
            where = f"{self.where}: batch at offset {header.base_offset}"
            blob = memoryview(data)[start:end]
            data = decompress(codec, blob, decompressed_bytes_max, where=where)
            start, end = 0, len(data)
        return data, start, end

    def __iter__(self) -> Iterator[Record]:
        return self.records()

    def __repr__(self) -> str:
        header = self.header
        return (
            f"RecordBatch(base_offset={header.base_offset}, last_offset={header.last_offset}, "
            f"records_count={header.records_count}, size_in_bytes={header.size_in_bytes}, "
            f"partition_leader_epoch={header.partition_leader_epoch}, "
            f"compression_codec={header.compression_codec})"
        )


def iter_batches(
    buf: Buffer,
    position: int = 0,
    *,
    strict: bool = True,
    where: str = "records",
    sparse: bool = False,
) -> Iterator[RecordBatch]:
    """Validate and yield each batch of a concatenation, from `position` to the end of `buf`.

    See the module docstring for what happens at a partial tail. `where` names the buffer
    (a file, a fetch response) in error messages; each batch adds its byte position.
    `sparse`: batches of a compacted log, which may hold fewer records than their offsets
    (`RecordBatch.parse`).
    """
    next_position = position
    for batch_position, size in iter_frames(buf, position):
        batch_where = f"{where}, batch at byte {batch_position}"
        yield RecordBatch.parse(buf, batch_position, where=batch_where, sparse=sparse)
        next_position = batch_position + size
    if strict and next_position != len(buf):
        raise CorruptRecordError(f"{where}: {_describe_tail(buf, next_position)}")


def _describe_tail(buf: Buffer, position: int) -> str:
    """Why the bytes from `position` on could not be framed as a batch."""
    remaining = len(buf) - position
    if remaining < LOG_OVERHEAD:
        return f"{remaining} trailing bytes at byte {position} are too few to frame a batch"
    _, size = read_frame(buf, position)
    batch_length = size - LOG_OVERHEAD
    if batch_length < MIN_BATCH_LENGTH:
        return f"batch_length {batch_length} at byte {position} is below {MIN_BATCH_LENGTH}"
    return f"partial batch at byte {position}: needs {size} bytes, {remaining} remain"
