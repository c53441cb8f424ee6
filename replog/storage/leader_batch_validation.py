"""The checks and stamps of a leader's append: what a client batch must be before a leader
gives it offsets (docs/design/storage.md#leader-validation-on-produce), and the bytes a leader
changes in it.

Rules: pure functions over bytes, a log's name (for error messages) and its config; no `Log`,
no I/O, no lock (the log calls them under its own). Validation reads each batch's header and
checks its CRC-32C, never decodes its records. A rejected batch raises a typed error naming
the log, the batch's index in the append and its byte position. The caller's bytes are never
changed: `immutable` copies whatever someone else could change while it is validated.
"""

from __future__ import annotations

import struct
from collections.abc import Sized
from typing import NoReturn

from replog.errors import (
    CorruptRecordError,
    InvalidRecordError,
    MessageSizeTooLargeError,
    RecordBatchTooLargeError,
)
from replog.record.header import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_CODEC_MASK,
    CONTROL_FLAG_MASK,
    CRC_OFFSET,
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    compute_crc,
    validate_batch,
)
from replog.record.varint import INT32_MAX
from replog.storage.log_config import LogConfig

_MAX_TIMESTAMP_OFFSET = 35
# Bytes 0-15 of a batch as a leader writes them: base offset, batch length, leader epoch.
STAMPED_PREFIX = struct.Struct(">qii")
# The smallest record: length, attributes, timestamp delta, offset delta, key length, value
# length and header count, one byte each (null key, null value, no headers).
MIN_RECORD_BYTES = 7
_BATCH_LENGTH = struct.Struct(">i")
new_tuple = tuple.__new__  # builds a named tuple from its fields without a Python-level call
# Bytes no one can change while they are validated and written: `bytes`, or a byte view of one.
Unchangeable = bytes | memoryview


def validate_leader_batches(
    data: Unchangeable, allow_control: bool, name: str, config: LogConfig
) -> list[tuple[int, BatchHeader]]:
    """(byte position, header) of each batch of a leader's append to the log `name`, every
    one checked: a valid v2 batch (CRC-32C included) following `check_leader_batch` and
    `check_records_fit`, the whole append within `segment.bytes`."""
    size = len(data)
    if not size:
        raise InvalidRecordError(f"{name}: an append needs at least one batch")
    check_append_size(name, config, size)
    max_message_bytes = config.max_message_bytes
    headers: list[tuple[int, BatchHeader]] = []
    position = 0
    while position < size:
        try:
            header = validate_batch(data, position, where=name)
        except (CorruptRecordError, InvalidRecordError):
            raise_naming_batch(name, "append", data, headers, position)
        batch_size = header.batch_length + LOG_OVERHEAD
        check_leader_batch(name, header, headers, position, allow_control, max_message_bytes)
        check_records_fit(name, header, headers, position)
        headers.append((position, header))
        position += batch_size
    if len(headers) > 1 and sum(h.records_count for _, h in headers) > INT32_MAX:
        # No segment could hold them: offsets are stored relative to a segment's base
        # offset in 32 bits (a single batch is bounded by its own count field).
        raise InvalidRecordError(
            f"{name}: an append of {len(headers)} batches claims more than {INT32_MAX} records"
        )
    return headers


def check_append_size(name: str, config: LogConfig, size: int) -> None:
    """A whole append must fit in one segment (Kafka's RecordBatchTooLargeException)."""
    if size > config.segment_bytes:
        raise RecordBatchTooLargeError(
            f"{name}: append of {size} bytes exceeds segment.bytes {config.segment_bytes}"
        )


def check_leader_batch(
    name: str,
    header: BatchHeader,
    headers: Sized,
    position: int,
    allow_control: bool,
    max_message_bytes: int,
) -> None:
    """The rules a client batch must follow beyond being a valid batch
    (docs/design/storage.md#leader-validation-on-produce)."""
    if header.base_offset != 0:
        raise InvalidRecordError(
            f"{batch_where(name, 'append', headers, position)}: base offset must be 0, got "
            f"{header.base_offset}"
        )
    if header.attributes & CONTROL_FLAG_MASK and not allow_control:
        raise InvalidRecordError(
            f"{batch_where(name, 'append', headers, position)}: clients may not append "
            "control batches"
        )
    # A coordinator's batch (a marker, a transactional offset commit) carries no sequence
    # (Kafka checks it of clients' batches only).
    if header.producer_id >= 0 and header.base_sequence < 0 and not allow_control:
        raise InvalidRecordError(
            f"{batch_where(name, 'append', headers, position)}: idempotent batch (producer id "
            f"{header.producer_id}) has base sequence {header.base_sequence}"
        )
    batch_size = header.batch_length + LOG_OVERHEAD
    if batch_size > max_message_bytes:
        raise MessageSizeTooLargeError(
            f"{batch_where(name, 'append', headers, position)}: batch of {batch_size} bytes "
            f"exceeds max.message.bytes {max_message_bytes}"
        )


def check_records_fit(name: str, header: BatchHeader, headers: Sized, position: int) -> None:
    """Records are not decoded here, but an uncompressed client batch that claims more
    records than its bytes can hold would take that many offsets and fail every reader.
    After the CRC check (a flipped count is corruption first)."""
    records_bytes = header.batch_length + LOG_OVERHEAD - RECORD_BATCH_OVERHEAD
    if (
        not header.attributes & COMPRESSION_CODEC_MASK
        and records_bytes < MIN_RECORD_BYTES * header.records_count
    ):
        raise InvalidRecordError(
            f"{batch_where(name, 'append', headers, position)}: claims {header.records_count} "
            f"records in {records_bytes} bytes of uncompressed records (each takes at "
            f"least {MIN_RECORD_BYTES})"
        )


def batch_where(name: str, kind: str, headers: Sized, position: int) -> str:
    """Names a batch of an append in error messages."""
    return f"{name} {kind}, batch {len(headers)} at byte {position}"


def raise_naming_batch(
    name: str, kind: str, data: Unchangeable, headers: Sized, position: int
) -> NoReturn:
    """Check a batch that just failed validation again, to raise with the batch named.

    Appends validate with only the log's name, because formatting the batch's name costs
    about as much as checking a small batch; the full name is made only for a bad one.
    """
    try:
        validate_batch(data, position, where=batch_where(name, kind, headers, position))
    except (CorruptRecordError, InvalidRecordError) as exc:
        raise exc from None
    raise AssertionError(f"{name}: batch at byte {position} failed only once")


def set_log_append_time(buf: bytearray, position: int, size: int, now_ms: int) -> None:
    """Mark a batch LogAppendTime with max timestamp `now_ms`; both are CRC-covered."""
    attributes = int.from_bytes(
        buf[position + ATTRIBUTES_OFFSET : position + ATTRIBUTES_OFFSET + 2], "big"
    )
    buf[position + ATTRIBUTES_OFFSET : position + ATTRIBUTES_OFFSET + 2] = (
        attributes | TIMESTAMP_TYPE_MASK
    ).to_bytes(2, "big")
    buf[position + _MAX_TIMESTAMP_OFFSET : position + _MAX_TIMESTAMP_OFFSET + 8] = now_ms.to_bytes(
        8, "big", signed=True
    )
    buf[position + CRC_OFFSET : position + CRC_OFFSET + 4] = compute_crc(
        buf, position, size
    ).to_bytes(4, "big")


def immutable(data: bytes | bytearray | memoryview) -> Unchangeable:
    """`data` itself when nobody can change it (`bytes`, or a byte view of `bytes`), else a
    copy, so the bytes validated are the bytes written even if the caller's buffer changes
    meanwhile. Requests read off a socket are `bytes`, or views of them (a Kafka produce request's
    records), so the usual append copies nothing."""
    if isinstance(data, bytes):
        return data
    # A strided view of `bytes` is unchangeable too, but one write cannot take it: copied.
    if (
        isinstance(data, memoryview)
        and type(data.obj) is bytes
        and data.format == "B"
        and data.c_contiguous
    ):
        return data
    return bytes(data)


def restamped(header: BatchHeader, base_offset: int, leader_epoch: int) -> BatchHeader:
    """`header` with the base offset and leader epoch a leader stamps."""
    # Building the tuple directly: `_replace` costs about 4 times as much, once per batch.
    return new_tuple(BatchHeader, (base_offset, header[1], leader_epoch, *header[3:]))


def single_batch(data: Unchangeable) -> bool:
    """Whether `data` frames as exactly one batch (its length field covers all of it)."""
    return len(data) >= LOG_OVERHEAD and _BATCH_LENGTH.unpack_from(data, 8)[
        0
    ] + LOG_OVERHEAD == len(data)
