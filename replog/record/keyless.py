"""The records without a key in a produce's batches: what a compacted topic refuses.

Kafka's LogValidator refuses, on a topic whose cleanup.policy has `compact`, every record
without a key (the cleaner keeps the latest record of each key; a keyless one has none), with
INVALID_RECORD and a record error per such record. This is the one place the broker reads
records' keys, and only for compacted topics: a batch at a time, each checked as the log
checks it (framing, magic, CRC-32C: a corrupt batch is CORRUPT_MESSAGE first, as in Kafka),
then its records decoded (decompressed if need be) for their key lengths.

Rules:
- Control batches are not looked at (a client's are refused by the log anyway).
- A record error's index is the record's position in its batch, counted from 0, and its
  message is Kafka's: "Compacted topic cannot accept message without key in topic partition
  T-P."; the error's message is Kafka's summary of at most the first three.
"""

from __future__ import annotations

from replog.errors import RecordsRejectedError
from replog.record.batch import RecordBatch
from replog.record.header import iter_frames, validate_batch


def keyless_record_errors(data: bytes | memoryview, name: str) -> list[tuple[int, str]]:
    """(index in its batch, Kafka's message) of each record without a key in `data`, a
    produce's whole batches for partition `name` ("topic-partition")."""
    message = f"Compacted topic cannot accept message without key in topic partition {name}."
    found: list[tuple[int, str]] = []
    buffer = bytes(data)
    for position, _ in iter_frames(buffer):
        header = validate_batch(buffer, position, where=f"produce to {name}")
        if header.is_control:
            continue
        batch = RecordBatch(header, buffer, position, f"produce to {name}")
        found += [(i, message) for i, record in enumerate(batch.records()) if record.key is None]
    return found


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
