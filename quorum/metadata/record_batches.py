"""Metadata records inside RecordBatch v2 batches: a committed Raft batch, and a snapshot file.

The metadata log is an ordinary replog log: each Raft batch is a RecordBatch v2 whose record
values are metadata records (`record_codec`), keys null; control batches (Raft's LeaderChange)
carry no metadata records. A metadata snapshot uses the same framing.

Grammar of a snapshot (the `data` of `RaftNode.create_snapshot`, stored as
`<end offset>-<quorum epoch>.checkpoint`)::

    snapshot = data_batch*
    data_batch = RecordBatch v2, uncompressed, not control, holding at most
                 SNAPSHOT_RECORDS_PER_BATCH records:
                   base_offset            = index in the snapshot of its first record (0, 1000,
                                            2000, ...): offsets run densely from 0
                   partition_leader_epoch = the quorum epoch of the snapshot id
                   each record            = key null, value encode_record(record),
                                            timestamp = when the snapshot was taken

The records are the state written as records (`QuorumController.snapshot_records`, or
`snapshot.image_to_records` on a broker), replayed in order into the empty state to load it.
Control batches are skipped when reading, so a later writer may frame the records with Kafka's
SnapshotHeader and SnapshotFooter control records.

Worked example: a snapshot of quorum epoch 3 holding the two records FeatureLevelRecord
(metadata.version 7) and NoOpRecord is one batch of 2 records, base offset 0, last offset
delta 1, partition leader epoch 3; `decode_snapshot` returns the two records.

Rules:
- Every error names where the bytes came from (`where`) and the offset of the bad record:
  `CorruptRecordError` for framing and CRC, `CorruptMetadataRecordError` for a value that is
  not a metadata record (or a data record without a value).
- `decode_snapshot(encode_snapshot(records, ...)) == records`.
"""

from __future__ import annotations

from collections.abc import Sequence

from replog.errors import CorruptMetadataRecordError, CorruptRecordError
from replog.quorum.metadata.record_codec import decode_record, encode_record
from replog.quorum.metadata.records import MetadataRecord
from replog.quorum.metadata.steps import Steps, run_to_end
from replog.record import BatchBuilder, RecordBatch, iter_batches

SNAPSHOT_RECORDS_PER_BATCH = 1000
# Records `encode_snapshot_in_steps` encodes a step: a few milliseconds of CPU.
SNAPSHOT_RECORDS_PER_STEP = 250


def batch_records(batch: RecordBatch) -> tuple[MetadataRecord, ...]:
    """The metadata records of one validated batch (none for a control batch)."""
    return run_to_end(batch_records_in_steps(batch, records_per_step=0))


def batch_records_in_steps(
    batch: RecordBatch, *, records_per_step: int
) -> Steps[tuple[MetadataRecord, ...]]:
    """`batch_records` as steps of `records_per_step` records decoded each (0: one step), for
    a caller on an event loop; the records are the generator's value."""
    if batch.is_control:
        return ()
    records: list[MetadataRecord] = []
    for index, value in enumerate(batch.values()):  # no `Record` each: only values are read
        if records_per_step and index and index % records_per_step == 0:
            yield
        if value is None:
            raise CorruptMetadataRecordError(
                f"{batch.where}: record at offset {batch.base_offset + index} has no value"
            )
        try:
            records.append(decode_record(value))
        except CorruptMetadataRecordError as error:
            raise CorruptMetadataRecordError(
                f"{batch.where}: record at offset {batch.base_offset + index}: {error}"
            ) from None
    return tuple(records)


def decode_batch(data: bytes, *, where: str) -> tuple[MetadataRecord, ...]:
    """The metadata records of the single batch `data` (a committed Raft batch)."""
    return batch_records(_one_batch(data, where))


def decode_batch_in_steps(
    data: bytes, *, where: str, records_per_step: int
) -> Steps[tuple[MetadataRecord, ...]]:
    """`decode_batch` in steps (`batch_records_in_steps`)."""
    return batch_records_in_steps(_one_batch(data, where), records_per_step=records_per_step)


def _one_batch(data: bytes, where: str) -> RecordBatch:
    batch = RecordBatch.parse(data, where=where)
    if batch.size_in_bytes != len(data):
        raise CorruptRecordError(
            f"{where}: expected one batch of {len(data)} bytes, found one of "
            f"{batch.size_in_bytes} bytes"
        )
    return batch


def encode_snapshot(
    records: Sequence[MetadataRecord], *, quorum_epoch: int, timestamp_ms: int
) -> bytes:
    """The bytes of a snapshot holding `records` (grammar in the module docstring)."""
    return run_to_end(
        encode_snapshot_in_steps(records, quorum_epoch=quorum_epoch, timestamp_ms=timestamp_ms)
    )


def encode_snapshot_in_steps(
    records: Sequence[MetadataRecord], *, quorum_epoch: int, timestamp_ms: int
) -> Steps[bytes]:
    """`encode_snapshot` as steps of `SNAPSHOT_RECORDS_PER_STEP` records each (a batch holds
    several steps' records), for a caller on an event loop (11,000 records at 10,000 partitions
    took 90 ms of a loaded machine's CPU, a batch of 1,000 about 10 ms); the bytes are the
    generator's value."""
    parts: list[bytes] = []
    total = len(records)
    for start in range(0, total, SNAPSHOT_RECORDS_PER_BATCH):
        builder = BatchBuilder(base_offset=start, partition_leader_epoch=quorum_epoch)
        end = min(start + SNAPSHOT_RECORDS_PER_BATCH, total)
        for first in range(start, end, SNAPSHOT_RECORDS_PER_STEP):
            if first:
                yield
            for record in records[first : min(first + SNAPSHOT_RECORDS_PER_STEP, end)]:
                builder.append(timestamp_ms, None, encode_record(record))
        parts.append(builder.build())
    return b"".join(parts)


def decode_snapshot(data: bytes, *, where: str) -> list[MetadataRecord]:
    """The records of a snapshot, in order; control batches are skipped."""
    return run_to_end(decode_snapshot_in_steps(data, where=where, records_per_step=0))


def decode_snapshot_in_steps(
    data: bytes, *, where: str, records_per_step: int
) -> Steps[list[MetadataRecord]]:
    """`decode_snapshot` as steps of `records_per_step` records decoded each (0: one step),
    for a caller on an event loop (a restart's snapshot holds 11,000 records at 10,000
    partitions); the records are the generator's value."""
    records: list[MetadataRecord] = []
    for batch in iter_batches(data, where=where):
        if batch.is_control:
            continue
        if batch.base_offset != len(records):
            raise CorruptRecordError(
                f"{batch.where}: data batch starts at offset {batch.base_offset}, but "
                f"{len(records)} records come before it"
            )
        if records and records_per_step:
            yield
        records.extend(
            (yield from batch_records_in_steps(batch, records_per_step=records_per_step))
        )
    return records
