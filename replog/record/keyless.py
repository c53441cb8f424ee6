"""The records without a key in a produce's batches: what a compacted topic refuses.

Kafka's LogValidator refuses, on a topic whose cleanup.policy has `compact`, every record
without a key (the cleaner keeps the latest record of each key; a keyless one has none), with
INVALID_RECORD and a record error per such record. This is the one place the broker reads
records' keys, and only for compacted topics: a batch at a time, each checked as the log
checks it (framing, magic, CRC-32C: a corrupt batch is CORRUPT_MESSAGE first, as in Kafka),
then its records (decompressed if need be) walked for their key lengths only, each record's
length and the varints before its key read a byte at a time (`_keyless_indexes`); a region
the walk doubts is decoded whole by the strict decoder, which words what is wrong.

Rules:
- Control batches are not looked at (a client's are refused by the log anyway).
- A record error's index is the record's position in its batch, counted from 0, and its
  message is Kafka's: "Compacted topic cannot accept message without key in topic partition
  T-P."; the error's message is Kafka's summary of at most the first three.
"""

from __future__ import annotations

from replog.errors import RecordsRejectedError
from replog.record.batch import RecordBatch
from replog.record.compression import COMPRESSION_NONE, decompress
from replog.record.header import RECORD_BATCH_OVERHEAD, iter_frames, validate_batch


def keyless_record_errors(data: bytes | memoryview, name: str) -> list[tuple[int, str]]:
    """(index in its batch, Kafka's message) of each record without a key in `data`, a
    produce's whole batches for partition `name` ("topic-partition")."""
    message = f"Compacted topic cannot accept message without key in topic partition {name}."
    where = f"produce to {name}"
    found: list[tuple[int, str]] = []
    buffer = bytes(data)
    for position, size in iter_frames(buffer):
        header = validate_batch(buffer, position, where=where)
        if header.is_control:
            continue
        region, start, end = buffer, position + RECORD_BATCH_OVERHEAD, position + size
        if header.compression_codec != COMPRESSION_NONE:
            blob = memoryview(buffer)[start:end]
            region = decompress(header.compression_codec, blob, where=where)
            start, end = 0, len(region)
        try:
            keyless = _keyless_indexes(region, start, end, header.records_count)
        except IndexError:  # a record running past the region: the strict walk words it
            keyless = None
        if keyless is None:
            batch = RecordBatch(header, buffer, position, where)
            keyless = [i for i, record in enumerate(batch.records()) if record.key is None]
        found += [(index, message) for index in keyless]
    return found


def _keyless_indexes(data: bytes, pos: int, end: int, count: int) -> list[int] | None:
    """The indexes of the records in data[pos:end] whose key length is -1, reading of each
    record only its length and the varints before its key (one per byte, no value decoded);
    None when the records do not fill the region as their lengths say (the strict decoder
    then decides, and words the error). About 10x cheaper than decoding the records."""
    found: list[int] = []
    for index in range(count):
        raw = data[pos]
        if raw < 0x80:
            pos += 1
        else:
            high = data[pos + 1]
            if high >= 0x80:
                return None  # a record of 8 KiB or more: rare, left to the strict decoder
            raw = (raw & 0x7F) | (high << 7)
            pos += 2
        record_end = pos + (raw >> 1)
        if raw & 1 or record_end > end:
            return None
        at = pos + 1  # after the attributes byte: the timestamp delta, then the offset delta
        while data[at] & 0x80:
            at += 1
        at += 1
        while data[at] & 0x80:
            at += 1
        at += 1
        if at >= record_end:
            return None
        if data[at] == 1:  # the key length's varint: 1 is -1, no key
            found.append(index)
        pos = record_end
    return found if pos == end else None


def refuse_keyless_records(data: bytes | memoryview, name: str) -> None:
    """Raise `RecordsRejectedError` (INVALID_RECORD) if any record of `data` has no key."""
    errors = keyless_record_errors(data, name)
    if errors:
        shown = ", ".join(
            f"RecordError(batchIndex={index}, message='{text}')" for index, text in errors[:3]
        )
        raise RecordsRejectedError(
            f"One or more records have been rejected due to {len(errors)} record errors in "
            f"total, and only showing the first three errors at most: [{shown}]",
            errors,
        )
