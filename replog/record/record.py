"""One record inside a v2 batch: the `Record` value and its byte encoding.

Grammar (every integer a zig-zag varint, see `varint.py`, except the attributes byte)::

    length          varint   bytes of everything below (the body)
    attributes      int8     unused, written 0, ignored on read as Kafka does
    timestampDelta  varlong  record timestamp - batch baseTimestamp
    offsetDelta     varint   record offset - batch baseOffset
    keyLength       varint   -1 for a null key
    key             bytes
    valueLength     varint   -1 for a null value
    value           bytes
    headersCount    varint   >= 0
    headers         headersCount x (keyLength varint >= 0, key UTF-8,
                                    valueLength varint (-1 null), value bytes)

Worked example (the golden record of docs/design/storage.md#records-inside-a-batch): offset delta 0,
timestamp delta 0, null key, value ``b"a"``, no headers encodes as ``0e 00 00 00 01 02 61 00``:
length 7 (zig-zag 0x0e), attributes 0, timestampDelta 0, offsetDelta 0, keyLength -1 (0x01),
valueLength 1 (0x02), ``a`` (0x61), headersCount 0.

Header keys are text. They are encoded and decoded as UTF-8 with ``surrogateescape``, so a key
some other client wrote with invalid UTF-8 still decodes (to lone surrogates) and re-encodes to
the same bytes instead of making its record unreadable.

Decoding is strict about structure: the body must end exactly at its declared length, lengths
must be -1 or more (0 or more for header keys and counts) and stay inside the record; every
violation is an `InvalidRecordError` naming the batch and the record's index and offset. Byte
positions in those messages count from the start of the batch's buffer for an uncompressed
batch, and from the start of the decompressed records for a compressed one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

from replog.errors import InvalidRecordError
from replog.record.varint import (
    SMALL_SIZE_LIMIT,
    SMALL_SIZE_VARINTS,
    SMALL_VARINTS,
    SMALL_VARINTS_LOW,
    decode_varint,
    decode_varlong,
    encode_varint,
    encode_varlong,
    varint_size,
)

Header = tuple[str, bytes | None]
HeaderInput = Sequence[tuple[str, bytes | None]]

# Upper bound of a record's encoding beyond its key, value and header bytes: length varint (5),
# attributes (1), timestamp delta varlong (10), offset delta (5), key and value lengths (5 + 5),
# header count (5).
RECORD_OVERHEAD_MAX = 36
HEADER_OVERHEAD_MAX = 10  # a header's key and value length varints

_NULL_LENGTH = encode_varint(-1)
NO_HEADERS = encode_varint(0)
_ATTRIBUTES = b"\x00"

# Tables for the producer's fast path (inlined in `RecordAccumulator.try_append`): a record
# with no headers and a value, at an offset delta below FAST_OFFSETS and a timestamp delta in
# [0, FAST_DELTAS), has its fields up to the value in two or three lookups and one to three
# concatenations:
# - TIMESTAMP_FIELDS[d]: the attributes byte and timestamp delta d;
# - NULL_KEY_FIELDS[n]: offset delta n and a null key's length (-1);
# - EQUAL_TIMESTAMP_FIELDS[n]: attributes, timestamp delta 0, offset delta n and a null key;
# - AFTER_EMPTY_HEADERS[n]: the previous record's headers count (0), then this record's length
#   n, so that consecutive records without headers add two pieces each, not three.
# Each entry equals what `append_record` writes (tests/record checks).
FAST_OFFSETS = 1 << 12
FAST_DELTAS = 1 << 10
TIMESTAMP_FIELDS = tuple(_ATTRIBUTES + SMALL_SIZE_VARINTS[n] for n in range(FAST_DELTAS))
NULL_KEY_FIELDS = tuple(SMALL_SIZE_VARINTS[n] + _NULL_LENGTH for n in range(FAST_OFFSETS))
EQUAL_TIMESTAMP_FIELDS = tuple(TIMESTAMP_FIELDS[0] + fields for fields in NULL_KEY_FIELDS)
AFTER_EMPTY_HEADERS = tuple(NO_HEADERS + length for length in SMALL_SIZE_VARINTS)
# A fast record's body is its key and value plus at most 10 bytes (attributes 1, deltas 2 + 2,
# lengths 2 + 2, headers count 1): key and value sizes summing below this keep every length
# inside SMALL_SIZE_VARINTS.
FAST_DATA_LIMIT = SMALL_SIZE_LIMIT - 16


@dataclass(frozen=True, slots=True)
class Record:
    """A decoded record: absolute offset and timestamp, key, value and headers."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


def append_record(
    parts: list[bytes],
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: HeaderInput,
) -> int:
    """Append one encoded record to `parts` as pieces; return its size in bytes.

    The pieces are: everything up to the value (length, attributes, deltas, key, value length)
    joined into one small bytes, then the value itself, then the headers. The value is never
    copied here, only once by the batch's final join; the key (usually short) is copied twice,
    which costs less than carrying it as a piece of its own. Few pieces per record keep both
    this function and that final join cheap: this is the producer's cost per record.
    """
    # Sizes and offset deltas are never negative; below SMALL_SIZE_LIMIT their varint is a
    # table lookup (timestamp deltas: from SMALL_VARINTS_LOW), inlined here because a call per
    # field is a measurable share of the cost.
    timestamp_bytes = (
        SMALL_VARINTS[timestamp_delta - SMALL_VARINTS_LOW]
        if SMALL_VARINTS_LOW <= timestamp_delta < SMALL_SIZE_LIMIT
        else encode_varlong(timestamp_delta)
    )
    offset_bytes = (
        SMALL_SIZE_VARINTS[offset_delta]
        if offset_delta < SMALL_SIZE_LIMIT
        else encode_varint(offset_delta)
    )
    if key is None:
        key_length_bytes = _NULL_LENGTH
        key = b""
    else:
        key_size = len(key)
        key_length_bytes = (
            SMALL_SIZE_VARINTS[key_size] if key_size < SMALL_SIZE_LIMIT else encode_varint(key_size)
        )
    if value is None:
        value_size = 0
        value_length_bytes = _NULL_LENGTH
    else:
        value_size = len(value)
        value_length_bytes = (
            SMALL_SIZE_VARINTS[value_size]
            if value_size < SMALL_SIZE_LIMIT
            else encode_varint(value_size)
        )
    tail = _encode_headers(headers) if headers else NO_HEADERS
    fields = b"".join(
        (_ATTRIBUTES, timestamp_bytes, offset_bytes, key_length_bytes, key, value_length_bytes)
    )
    body_size = len(fields) + value_size + len(tail)
    length_bytes = (
        SMALL_SIZE_VARINTS[body_size] if body_size < SMALL_SIZE_LIMIT else encode_varint(body_size)
    )
    head = length_bytes + fields
    if value is None:
        parts += (head, tail)
    else:
        parts += (head, value, tail)
    return len(length_bytes) + body_size


def _encode_headers(headers: HeaderInput) -> bytes:
    """The headers field: count, then each key field and its value's length and bytes."""
    pieces = [encode_varint(len(headers))]
    for header_key, header_value in headers:
        pieces.append(_HEADER_KEY_FIELDS.get(header_key) or _header_key_field(header_key))
        if header_value is None:
            pieces.append(_NULL_LENGTH)
        else:
            size = len(header_value)
            pieces.append(
                SMALL_SIZE_VARINTS[size] if size < SMALL_SIZE_LIMIT else encode_varint(size)
            )
            pieces.append(header_value)
    return b"".join(pieces)


# Producers reuse a handful of header keys ("trace-id", "content-type"), so each key's encoded
# field (length varint + UTF-8) is cached. The cache stops growing at a fixed size, so keys that
# are unique per record cost the plain encoding and never unbounded memory.
_HEADER_KEY_FIELDS: dict[str, bytes] = {}
_HEADER_KEY_FIELDS_MAX = 1024


def _header_key_field(header_key: str) -> bytes:
    key_bytes = header_key.encode("utf-8", "surrogateescape")
    field = encode_varint(len(key_bytes)) + key_bytes
    if len(_HEADER_KEY_FIELDS) < _HEADER_KEY_FIELDS_MAX:
        _HEADER_KEY_FIELDS[header_key] = field
    return field


def record_size_bound(key: bytes | None, value: bytes | None, headers: HeaderInput) -> int:
    """An upper bound of the record's encoded size, whatever its deltas (no encoding)."""
    size = RECORD_OVERHEAD_MAX
    if key is not None:
        size += len(key)
    if value is not None:
        size += len(value)
    for header_key, header_value in headers:
        size += HEADER_OVERHEAD_MAX + len(header_key) * 4  # UTF-8: at most 4 bytes a character
        if header_value is not None:
            size += len(header_value)
    return size


def record_size(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: HeaderInput,
) -> int:
    """The record's exact encoded size, length prefix included, without encoding it (but the
    headers, whose keys need UTF-8)."""
    sizes = SMALL_SIZE_VARINTS
    limit = SMALL_SIZE_LIMIT
    body = (
        1
        + (
            len(SMALL_VARINTS[timestamp_delta - SMALL_VARINTS_LOW])
            if SMALL_VARINTS_LOW <= timestamp_delta < limit
            else varint_size(timestamp_delta)
        )
        + (len(sizes[offset_delta]) if offset_delta < limit else varint_size(offset_delta))
    )
    if key is None:
        body += 1
    else:
        size = len(key)
        body += size + (len(sizes[size]) if size < limit else varint_size(size))
    if value is None:
        body += 1
    else:
        size = len(value)
        body += size + (len(sizes[size]) if size < limit else varint_size(size))
    body += len(_encode_headers(headers)) if headers else 1
    return body + (len(sizes[body]) if body < limit else varint_size(body))


def encode_record(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: HeaderInput = (),
) -> bytes:
    """One record's bytes, length prefix included."""
    parts: list[bytes] = []
    append_record(parts, offset_delta, timestamp_delta, key, value, headers)
    return b"".join(parts)


def decode_records(
    data: bytes,
    position: int,
    end: int,
    *,
    records_count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None,
    where: str,
    last_offset_delta: int | None = None,
) -> Iterator[Record]:
    """Yield the `records_count` records in data[position:end], checking every structural rule.

    The region must hold exactly `records_count` records and nothing after them, their offset
    deltas strictly increasing up to `last_offset_delta` (default `records_count - 1`: deltas
    0..n-1, a batch as a producer or leader builds it; larger in a batch the log cleaner
    rewrote, whose removed records leave gaps). `log_append_time`, when not None, replaces
    every record's timestamp (the batch's LogAppendTime maxTimestamp).
    """
    return _decoded(
        data,
        position,
        end,
        records_count,
        base_offset,
        base_timestamp,
        log_append_time,
        where,
        Record,
        records_count - 1 if last_offset_delta is None else last_offset_delta,
    )


def decode_record_values(
    data: bytes, position: int, end: int, *, records_count: int, base_offset: int, where: str
) -> Iterator[bytes | None]:
    """`decode_records`' values alone, with the same checks: no `Record` is built (a frozen
    dataclass's five field sets, about 0.8 us a record), for a reader of values only (every
    node decodes every committed metadata batch, records by the thousand)."""
    return _decoded(
        data, position, end, records_count, base_offset, 0, None, where, _value, records_count - 1
    )


def decode_record_keys(
    data: bytes,
    position: int,
    end: int,
    *,
    records_count: int,
    base_offset: int,
    where: str,
    last_offset_delta: int,
) -> Iterator[tuple[int, bytes | None]]:
    """`decode_records`' offsets and keys alone, with the same checks and no `Record` built,
    for the log cleaner's key map (dense or sparse batches, as `decode_records`)."""
    return _decoded(
        data,
        position,
        end,
        records_count,
        base_offset,
        0,
        None,
        where,
        _offset_and_key,
        last_offset_delta,
    )


def _value(
    offset: int, timestamp: int, key: bytes | None, value: bytes | None, headers: object
) -> bytes | None:
    return value


def _offset_and_key(
    offset: int, timestamp: int, key: bytes | None, value: bytes | None, headers: object
) -> tuple[int, bytes | None]:
    return offset, key


_Decoded = TypeVar("_Decoded")


def _decoded(
    data: bytes,
    position: int,
    end: int,
    records_count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None,
    where: str,
    make: Callable[[int, int, bytes | None, bytes | None, tuple[Header, ...]], _Decoded],
    last_offset_delta: int,
) -> Iterator[_Decoded]:
    # A dense batch's deltas are exactly its record indexes; a cleaned one's only increase.
    dense = last_offset_delta == records_count - 1
    lowest = 0
    for index in range(records_count):
        if position >= end:
            raise InvalidRecordError(
                f"{where}: batch at offset {base_offset} declares {records_count} records, "
                f"its records region holds only {index}"
            )
        try:
            record, position, offset_delta = _decode_one(
                data,
                position,
                end,
                index if dense else -1,
                base_offset,
                base_timestamp,
                log_append_time,
                make,
            )
            if not dense and not lowest <= offset_delta <= last_offset_delta:
                raise InvalidRecordError(
                    f"offset delta {offset_delta}, expected {lowest} to {last_offset_delta}"
                )
            lowest = offset_delta + 1
        except InvalidRecordError as error:
            raise InvalidRecordError(
                f"{where}: batch at offset {base_offset}, record {index} "
                f"(offset {base_offset + index}): {error}"
            ) from None
        yield record
    if position != end:
        raise InvalidRecordError(
            f"{where}: batch at offset {base_offset} has {end - position} bytes after its "
            f"{records_count} declared records"
        )


def _decode_one(
    data: bytes,
    position: int,
    end: int,
    index: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None,
    make: Callable[[int, int, bytes | None, bytes | None, tuple[Header, ...]], _Decoded],
) -> tuple[_Decoded, int, int]:
    """Decode the record at `position`, given to `make`, and return it, where the next one
    starts and its offset delta, which must be `index` unless that is -1 (the caller checks);
    errors name only the byte, the caller adds the rest."""
    body_size, position = decode_varint(data, position, end)
    record_end = position + body_size
    if body_size < 1 or record_end > end:
        raise InvalidRecordError(
            f"length {body_size} at byte {position} does not fit the {end - position} bytes left"
        )
    # data[position] is the unused attributes byte.
    timestamp_delta, position = decode_varlong(data, position + 1, record_end)
    offset_delta, position = decode_varint(data, position, record_end)
    if offset_delta != index and index >= 0:
        raise InvalidRecordError(f"offset delta {offset_delta}, expected {index}")
    key, position = decode_bytes_field(data, position, record_end, "key")
    value, position = decode_bytes_field(data, position, record_end, "value")
    header_count, position = decode_varint(data, position, record_end)
    if header_count < 0:
        raise InvalidRecordError(f"headers count {header_count} is negative")
    headers: tuple[Header, ...] = ()
    if header_count:
        header_list: list[Header] = []
        for _ in range(header_count):
            header_key, position = decode_bytes_field(data, position, record_end, "header key")
            if header_key is None:
                raise InvalidRecordError(f"header {len(header_list)} has a null key")
            header_value, position = decode_bytes_field(data, position, record_end, "header value")
            header_list.append((header_key.decode("utf-8", "surrogateescape"), header_value))
        headers = tuple(header_list)
    if position != record_end:
        parsed_size = body_size - (record_end - position)
        raise InvalidRecordError(f"declared length {body_size}, the body parses to {parsed_size}")
    timestamp = base_timestamp + timestamp_delta if log_append_time is None else log_append_time
    return make(base_offset + offset_delta, timestamp, key, value, headers), position, offset_delta


def decode_bytes_field(
    data: bytes, position: int, record_end: int, field: str
) -> tuple[bytes | None, int]:
    """A length-prefixed byte field; length -1 is null."""
    size, position = decode_varint(data, position, record_end)
    if size < 0:
        if size == -1:
            return None, position
        raise InvalidRecordError(f"{field} length {size} at byte {position} is below -1")
    field_end = position + size
    if field_end > record_end:
        raise InvalidRecordError(
            f"{field} of {size} bytes at byte {position} runs {field_end - record_end} bytes past "
            "the record's declared length"
        )
    return data[position:field_end], field_end
