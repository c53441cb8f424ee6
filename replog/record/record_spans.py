"""Where each record of a batch's (decompressed) records region lies, and its offset delta,
timestamp delta and key, without building a `Record` or copying a value: the log cleaner's
view of a batch (it decides per key and copies the records it keeps as bytes).

Rules:
- A region `scan_records` accepts is one `decode_records` (record.py) decodes: the same checks
  (structure, lengths, offset deltas). One it refuses is handed to the decoder, which raises
  its `InvalidRecordError` with its message (the scan's own checks say nothing of why).
- A span is (offset delta, timestamp delta, key or None, whether the value is null, where the
  record starts, where its timestamp delta ends, where it ends): the bytes from the timestamp
  delta's end to the record's end (offset delta, key, value, headers) stay valid whatever the
  batch's base timestamp, so a rewritten batch copies them and encodes only the length and
  the timestamp delta anew (`respan`).
- The scan is compiled (`_record_spans.c`, built by setup.py where a C compiler is; `SCANNER`
  says which runs) for a `bytes` region, else Python (`_scan`): the same spans, refusing the
  same regions (tests/record/test_record_spans_compiled.py checks both on any region). The
  cleaner scans every record of a log once or twice a pass, and the Python loop was most of a
  pass's CPU.
- In the Python scan, the one-byte varints every small field has are read inline (a call per
  field is most of the cost of a record); any other goes through `varint.py`'s decoders.
"""

from __future__ import annotations

import operator
from types import ModuleType

from replog.errors import InvalidRecordError
from replog.record.record import decode_bytes_field, decode_record_keys
from replog.record.varint import (
    decode_varint,
    decode_varlong,
    encode_varint,
    encode_varlong,
)

# (offset delta, timestamp delta, key, null value, start, timestamp delta's end, end)
Span = tuple[int, int, bytes | None, bool, int, int, int]
span_key = operator.itemgetter(2)  # a span's key (None: a record without one)
span_is_tombstone = operator.itemgetter(3)  # whether a span's record has a null value


def _load_compiled() -> ModuleType | None:
    """The compiled scan (`_record_spans.c`), or None where it was not built."""
    try:
        from replog.record import _record_spans
    except ImportError:
        return None
    return _record_spans


_compiled = _load_compiled()
SCANNER = "python" if _compiled is None else "compiled"


def scan_records(
    data: bytes,
    position: int,
    end: int,
    *,
    records_count: int,
    base_offset: int,
    where: str,
    last_offset_delta: int,
) -> list[Span]:
    """The spans of the `records_count` records in data[position:end] (module Rules)."""
    if _compiled is not None and type(data) is bytes:
        spans: list[Span] | None = _compiled.scan(
            data, position, end, records_count, last_offset_delta
        )
        if spans is not None:
            return spans
    else:
        try:
            return _scan(data, position, end, records_count, last_offset_delta)
        except InvalidRecordError:
            pass
    # Refused: the decoder says why, in its words.
    for _ in decode_record_keys(
        data,
        position,
        end,
        records_count=records_count,
        base_offset=base_offset,
        where=where,
        last_offset_delta=last_offset_delta,
    ):
        pass
    raise InvalidRecordError(
        f"{where}: batch at offset {base_offset}: the records region was refused by the "
        "span scan and accepted by the decoder"
    )


def _scan(
    data: bytes, position: int, end: int, records_count: int, last_offset_delta: int
) -> list[Span]:
    """`scan_records`' spans; any fault raises a bare `InvalidRecordError`."""
    dense = last_offset_delta == records_count - 1
    lowest = 0
    spans: list[Span] = []
    append = spans.append
    for index in range(records_count):
        if position >= end:
            raise _Refused
        start = position
        byte = data[position]
        if byte < 0x80:
            body_size = (byte >> 1) ^ -(byte & 1)
            position += 1
        elif position + 1 < end and (second := data[position + 1]) < 0x80:
            unsigned = (byte & 0x7F) | (second << 7)
            body_size = (unsigned >> 1) ^ -(unsigned & 1)
            position += 2
        else:
            body_size, position = decode_varint(data, position, end)
        record_end = position + body_size
        if body_size < 1 or record_end > end:
            raise _Refused
        position += 1  # the unused attributes byte
        if position < record_end and (byte := data[position]) < 0x80:
            timestamp_delta = (byte >> 1) ^ -(byte & 1)
            position += 1
        else:
            timestamp_delta, position = decode_varlong(data, position, record_end)
        fields = position
        if position < record_end and (byte := data[position]) < 0x80:
            offset_delta = (byte >> 1) ^ -(byte & 1)
            position += 1
        else:
            offset_delta, position = decode_varint(data, position, record_end)
        if offset_delta != index and dense:
            raise _Refused
        if position < record_end and 0 < (byte := data[position]) < 0x80 and not byte & 1:
            key_end = position + 1 + (byte >> 1)  # a key of 1 to 63 bytes
            key: bytes | None = data[position + 1 : key_end]
            position = key_end
        else:
            key, position = decode_bytes_field(data, position, record_end, "key")
        if position + 1 < record_end and (byte := data[position]) >= 0x80:
            if (second := data[position + 1]) < 0x80:
                unsigned = (byte & 0x7F) | (second << 7)
                size = (unsigned >> 1) ^ -(unsigned & 1)
                position += 2
            else:
                size, position = decode_varint(data, position, record_end)
        elif position < record_end and (byte := data[position]) < 0x80:
            size = (byte >> 1) ^ -(byte & 1)
            position += 1
        else:
            size, position = decode_varint(data, position, record_end)
        if size >= 0:
            position += size
        elif size != -1:
            raise _Refused
        if position < record_end and data[position] == 0:  # no headers
            position += 1
        else:
            position = _skip_headers(data, position, record_end)
        # Past the record's end (a key or value too long for it) or short of it.
        if position != record_end or not lowest <= offset_delta <= last_offset_delta:
            raise _Refused
        lowest = offset_delta + 1
        append((offset_delta, timestamp_delta, key, size == -1, start, fields, record_end))
    if position != end:
        raise _Refused
    return spans


class _Refused(InvalidRecordError):
    """A fault `_scan` found (`scan_records` asks the decoder why)."""


def _skip_headers(data: bytes, position: int, record_end: int) -> int:
    """Past the headers field at `position`, checked as `decode_records` checks it."""
    header_count, position = decode_varint(data, position, record_end)
    if header_count < 0:
        raise _Refused
    for _ in range(header_count):
        header_key, position = decode_bytes_field(data, position, record_end, "header key")
        if header_key is None:
            raise _Refused
        _, position = decode_bytes_field(data, position, record_end, "header value")
    return position


def respan(data: bytes, span: Span, timestamp_delta: int) -> bytes:
    """The record of `span` with `timestamp_delta` in place of its own (its attributes byte
    written 0, as every encoder writes it); the rest of its bytes as they are."""
    fields, record_end = span[5], span[6]
    timestamp_bytes = encode_varlong(timestamp_delta)
    length_bytes = encode_varint(1 + len(timestamp_bytes) + record_end - fields)
    return b"".join((length_bytes, b"\x00", timestamp_bytes, data[fields:record_end]))
