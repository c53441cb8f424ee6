"""Build complete RecordBatch v2 bytes from records: the encoder of tests, tools and the broker.

The batch grammar is in `header.py`, the record grammar in `record.py`. The builder fills in the
header fields a producer owns and derives the rest:

- baseTimestamp = the first record's timestamp, maxTimestamp = the largest one (with
  LogAppendTime: the given append time), offset deltas 0..n-1, lastOffsetDelta = n-1;
- the records region is compressed as one blob when a codec is chosen (always: unlike
  kafka-python, no silent fallback to "none" when compression does not help);
- CRC-32C over bytes [21, end), computed last.

Worked example: ``build_batch([(1700000000000, None, b"a", ())])`` is the 69-byte golden vector
of docs/design/storage.md#records-inside-a-batch, CRC 0x965A94B1::

    00000000 00000000 | 00000039 | ffffffff | 02 | 965a94b1 | 0000 | 00000000 |
    0000018b cfe56800 | 0000018b cfe56800 | ffffffff ffffffff | ffff | ffffffff |
    00000001 | 0e 00 00 00 01 02 61 00

`append` encodes a record into three pieces (its fields up to the value joined into one small
bytes, the value itself, the headers; table-driven varints) and `build` joins everything once,
so a value is copied exactly once. `try_append` is `append` with a producer's batch.size
decision on the exact encoded size. `seal_batch` (the header and CRC around an encoded records
region) is shared with the producer's accumulator, which encodes records itself, inline, for
speed (`replog.client.accumulator`).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import TYPE_CHECKING, TypedDict

from crc32c import crc32c

from replog.record.compression import COMPRESSION_NONE, compress, require_codec
from replog.record.header import (
    CONTROL_FLAG_MASK,
    LOG_OVERHEAD,
    MAGIC_V2,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_ID,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
)
from replog.record.record import HeaderInput, append_record
from replog.record.varint import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN

if TYPE_CHECKING:
    from typing_extensions import Unpack

INT16_MIN = -(1 << 15)
INT16_MAX = (1 << 15) - 1

# The header split at the CRC: the part before it is not covered, the part after it is.
_HEAD = struct.Struct(">qiibI")  # base_offset, batch_length, leader epoch, magic, crc
_COVERED_HEAD = struct.Struct(">hiqqqhii")  # attributes .. records_count
assert _HEAD.size + _COVERED_HEAD.size == RECORD_BATCH_OVERHEAD

RecordInput = tuple[int, bytes | None, bytes | None, HeaderInput]
"""(timestamp, key, value, headers) of one record to append."""


class BatchOptions(TypedDict, total=False):
    """`BatchBuilder`'s keyword arguments, for `build_batch`."""

    compression: int
    base_offset: int
    partition_leader_epoch: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    is_transactional: bool
    is_control: bool
    log_append_time: int | None


class BatchBuilder:
    """Accumulates records and produces one batch's bytes.

    Append with `append`, then call `build` once. `size_in_bytes` is the uncompressed batch
    size so far, for a producer's `batch.size` decision.
    """

    __slots__ = (
        "_attributes",
        "_base_offset",
        "_base_sequence",
        "_base_timestamp",
        "_codec",
        "_log_append_time",
        "_max_timestamp",
        "_partition_leader_epoch",
        "_parts",
        "_producer_epoch",
        "_producer_id",
        "_records_bytes",
        "_records_count",
    )

    def __init__(
        self,
        *,
        compression: int = COMPRESSION_NONE,
        base_offset: int = 0,
        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        is_transactional: bool = False,
        is_control: bool = False,
        log_append_time: int | None = None,
    ) -> None:
        if compression != COMPRESSION_NONE:
            require_codec(compression)
        # One combined test first: a producer builds a batch every few records, and five
        # separate checks would cost as much as encoding a record.
        if not (
            INT64_MIN <= base_offset <= INT64_MAX
            and INT32_MIN <= partition_leader_epoch <= INT32_MAX
            and INT64_MIN <= producer_id <= INT64_MAX
            and INT16_MIN <= producer_epoch <= INT16_MAX
            and INT32_MIN <= base_sequence <= INT32_MAX
        ):
            _check_range("base_offset", base_offset, INT64_MIN, INT64_MAX)
            _check_range("partition_leader_epoch", partition_leader_epoch, INT32_MIN, INT32_MAX)
            _check_range("producer_id", producer_id, INT64_MIN, INT64_MAX)
            _check_range("producer_epoch", producer_epoch, INT16_MIN, INT16_MAX)
            _check_range("base_sequence", base_sequence, INT32_MIN, INT32_MAX)
        attributes = compression
        if is_transactional:
            attributes |= TRANSACTIONAL_FLAG_MASK
        if is_control:
            attributes |= CONTROL_FLAG_MASK
        if log_append_time is not None:
            _check_range("log_append_time", log_append_time, INT64_MIN, INT64_MAX)
            attributes |= TIMESTAMP_TYPE_MASK
        self._attributes = attributes
        self._codec = compression
        self._base_offset = base_offset
        self._partition_leader_epoch = partition_leader_epoch
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence
        self._log_append_time = log_append_time
        self._parts: list[bytes] = []
        self._records_count = 0
        self._records_bytes = 0
        self._base_timestamp = 0
        self._max_timestamp = 0

    @property
    def records_count(self) -> int:
        return self._records_count

    @property
    def size_in_bytes(self) -> int:
        """Header plus every record appended so far, before compression."""
        return RECORD_BATCH_OVERHEAD + self._records_bytes

    def append(
        self,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: HeaderInput = (),
    ) -> int:
        """Add a record (CreateTime `timestamp` in ms); return its offset delta."""
        offset_delta = self._records_count
        if offset_delta == 0:
            _check_range("timestamp", timestamp, INT64_MIN, INT64_MAX)
            self._base_timestamp = self._max_timestamp = timestamp
        elif timestamp > self._max_timestamp:
            self._max_timestamp = timestamp
        # Records store only the delta, and encode_varlong range-checks it.
        self._records_bytes += append_record(
            self._parts, offset_delta, timestamp - self._base_timestamp, key, value, headers
        )
        self._records_count = offset_delta + 1
        return offset_delta

    def try_append(
        self,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: HeaderInput = (),
        *,
        size_limit: int,
    ) -> int:
        """`append` unless the record would take a non-empty batch past `size_limit` bytes
        (`size_in_bytes` after it, uncompressed); then nothing changes and the answer is -1.

        A producer's batch.size decision on the record's exact size, in the same call that
        encodes it: cheaper than bounding the size first, and the first record always fits.
        """
        offset_delta = self._records_count
        if offset_delta == 0:
            return self.append(timestamp, key, value, headers)
        parts = self._parts
        mark = len(parts)
        size = append_record(
            parts, offset_delta, timestamp - self._base_timestamp, key, value, headers
        )
        if RECORD_BATCH_OVERHEAD + self._records_bytes + size > size_limit:
            del parts[mark:]
            return -1
        if timestamp > self._max_timestamp:
            self._max_timestamp = timestamp
        self._records_bytes += size
        self._records_count = offset_delta + 1
        return offset_delta

    def extend(self, records: Iterable[RecordInput]) -> None:
        """Append every (timestamp, key, value, headers) tuple."""
        for timestamp, key, value, headers in records:
            self.append(timestamp, key, value, headers)

    def build(self) -> bytes:
        """The complete batch. At least one record must have been appended."""
        if not self._records_count:
            raise ValueError("a record batch needs at least one record")
        records = b"".join(self._parts)
        if self._codec != COMPRESSION_NONE:
            records = compress(self._codec, records)
        max_timestamp = (
            self._max_timestamp if self._log_append_time is None else self._log_append_time
        )
        return seal_batch(
            records,
            self._records_count,
            self._base_timestamp,
            max_timestamp,
            self._attributes,
            base_offset=self._base_offset,
            partition_leader_epoch=self._partition_leader_epoch,
            producer_id=self._producer_id,
            producer_epoch=self._producer_epoch,
            base_sequence=self._base_sequence,
        )


def seal_batch(
    records: bytes,
    records_count: int,
    base_timestamp: int,
    max_timestamp: int,
    attributes: int = COMPRESSION_NONE,
    *,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    last_offset_delta: int | None = None,
) -> bytes:
    """The complete batch around an encoded (and, per `attributes`, compressed) records region
    of `records_count` records: the header, its CRC last. The header fields are the caller's
    to check (`BatchBuilder` does), but `max_timestamp`: appends check the first timestamp and
    the deltas, so the largest may still overflow the int64 header field. `last_offset_delta`
    defaults to `records_count - 1`; the log cleaner keeps a rewritten batch's own, larger."""
    if not INT64_MIN <= max_timestamp <= INT64_MAX:
        _check_range("max_timestamp", max_timestamp, INT64_MIN, INT64_MAX)
    covered_head = _COVERED_HEAD.pack(
        attributes,
        records_count - 1 if last_offset_delta is None else last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        records_count,
    )
    crc = crc32c(records, crc32c(covered_head))
    head = _HEAD.pack(
        base_offset,
        RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + len(records),
        partition_leader_epoch,
        MAGIC_V2,
        crc,
    )
    return b"".join((head, covered_head, records))


def build_batch(records: Iterable[RecordInput], **options: Unpack[BatchOptions]) -> bytes:
    """One batch holding `records`, (timestamp, key, value, headers) tuples.

    `options` are `BatchBuilder`'s keyword arguments (compression, base_offset, ...).
    """
    builder = BatchBuilder(**options)
    builder.extend(records)
    return builder.build()


def _check_range(name: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise ValueError(f"{name} {value} is outside [{low}, {high}]")
