"""The log cleaner's decision for each batch of a segment it rewrites (Kafka's `Cleaner`
`RecordFilter` over `MemoryRecords.filterTo`).

Rules, per batch (offsets are never changed: a kept batch keeps its base offset and its last
offset, removed records leave gaps):
- Batch retention: the batch holding the last data of a producer id that still has state
  (`ProducerLastBatch`; for a producer whose last batch is a marker, a control batch of its
  epoch) is kept, emptied of its records if none survives (RETAIN_EMPTY), so an idempotent
  producer keeps its sequence numbers. Otherwise a batch the transaction state discards goes
  whole (DELETE): an aborted transaction's data, and a marker whose transaction has no data
  left once its delete horizon has passed. Any other batch goes when no record survives
  (DELETE_EMPTY).
- Record retention: a control batch keeps its records; a record past the offset map's
  coverage is kept; a record without a key is removed; a keyed record is kept when its offset
  is at least the map's for its key and it has a value, or it is a tombstone whose batch has
  no delete horizon yet or one still in the future.
- Delete horizon (KIP-534): a batch keeping a tombstone, or a discardable marker, without a
  horizon is rewritten with one, now + `delete.retention.ms`, in its base timestamp with the
  delete-horizon attribute bit; a later pass at or past it removes them.
- A batch starting past the offset map's reach (`OffsetMap.latest_offset`) was not reached
  by the pass: copied as it is (its transaction state still noted). A batch keeping every
  record and needing no horizon is copied as it is. A rewritten batch
  keeps its base offset, last offset delta, leader epoch, producer id, epoch and base
  sequence, transactional and control bits, timestamp type and compression codec; its base
  timestamp is the horizon if it has one, else its first kept record's; its max timestamp is
  the log append time (LogAppendTime) or its kept records' largest; a new CRC. An emptied
  batch is Kafka's empty header: no records, no compression, first timestamp -1, max
  timestamp as before.
- Pure: batches in, bytes out; the time is given (`now_ms`).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from replog.record.batch import RecordBatch
from replog.record.builder import seal_batch
from replog.record.compression import COMPRESSION_NONE, compress
from replog.record.control_record import marker_type
from replog.record.header import (
    COMPRESSION_CODEC_MASK,
    CONTROL_FLAG_MASK,
    DELETE_HORIZON_FLAG_MASK,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
    BatchHeader,
)
from replog.record.record import Record, append_record
from replog.storage.cleaner.offset_map import OffsetMap
from replog.storage.cleaner.transactions import CleanedTransactions


class BatchRetention(enum.Enum):
    DELETE = "delete"  # the whole batch goes, whatever its records
    DELETE_EMPTY = "delete-empty"  # the batch goes if no record survives
    RETAIN_EMPTY = "retain-empty"  # the batch stays, emptied if no record survives


@dataclass(frozen=True, slots=True)
class ProducerLastBatch:
    """What the log's producer state says of a producer id's last batch: the last offset of its
    last data batch (None when its last batch is a transaction marker), and its epoch."""

    last_data_offset: int | None
    producer_epoch: int


@dataclass(slots=True)
class FilterStats:
    """What a pass read and wrote (Kafka's `CleanerStats`, the filter's part)."""

    batches_read: int = 0
    bytes_read: int = 0
    records_read: int = 0
    batches_written: int = 0
    bytes_written: int = 0
    records_kept: int = 0
    batches_rewritten: int = 0
    keyless_records_removed: int = 0


def delete_horizon(header: BatchHeader) -> int | None:
    """The batch's delete horizon (ms), or None when it has none."""
    if header.attributes & DELETE_HORIZON_FLAG_MASK:
        return header.base_timestamp
    return None


class BatchFilter:
    """One cleaning pass's filter, fed a segment group's batches in offset order."""

    __slots__ = (
        "_delete_retention_ms",
        "_last_batches",
        "_map",
        "_now_ms",
        "_transactions",
        "stats",
    )

    def __init__(
        self,
        offset_map: OffsetMap,
        *,
        now_ms: int,
        delete_retention_ms: int,
        last_batches: Mapping[int, ProducerLastBatch],
        transactions: CleanedTransactions,
    ) -> None:
        self._map = offset_map
        self._now_ms = now_ms
        self._delete_retention_ms = delete_retention_ms
        self._last_batches = last_batches
        self._transactions = transactions
        self.stats = FilterStats()

    def filter(self, batch: bytes) -> bytes | None:
        """The bytes that replace `batch` (one whole, valid batch) in the cleaned segment:
        the batch itself, a rewritten one, or None when it goes."""
        header = RecordBatch.parse(batch, where="cleaned batch", sparse=True).header
        stats = self.stats
        stats.batches_read += 1
        stats.bytes_read += len(batch)
        records = list(RecordBatch(header, batch, 0, "cleaned batch").records())
        stats.records_read += len(records)
        now = self._now_ms
        horizon = delete_horizon(header)
        if header.is_control:
            kind = marker_type(records[0].key) if records else None
            can_discard = self._transactions.on_control_batch_read(header, kind)
            discard_records = can_discard and horizon is not None and horizon <= now
            empty_txn_marker = can_discard
        else:
            can_discard = self._transactions.on_batch_read(header)
            discard_records = can_discard
            empty_txn_marker = False
        if header.base_offset > self._map.latest_offset:
            # Past the map's reach: not reached by this pass (module Rules).
            stats.batches_written += 1
            stats.bytes_written += len(batch)
            stats.records_kept += len(records)
            return batch
        retention = self._batch_retention(header, discard_records)
        if retention is BatchRetention.DELETE:
            return None
        if discard_records:
            kept: list[Record] = []
        elif header.is_control:
            kept = records
        else:
            retain_deletes = horizon is None or now < horizon
            kept = [r for r in records if self._retain(r, retain_deletes)]
        if kept:
            has_tombstone = any(r.value is None for r in kept)
            needs_horizon = (has_tombstone or empty_txn_marker) and horizon is None
            if len(kept) == len(records) and not needs_horizon:
                out = batch
            else:
                out = _rewritten(
                    header, kept, now + self._delete_retention_ms if needs_horizon else horizon
                )
                stats.batches_rewritten += 1
        elif retention is BatchRetention.RETAIN_EMPTY:
            if header.records_count == 0:
                out = batch  # emptied by an earlier pass
            else:
                out = _empty(header)
                stats.batches_rewritten += 1
        else:
            return None
        stats.batches_written += 1
        stats.bytes_written += len(out)
        stats.records_kept += len(kept)
        return out

    def _batch_retention(self, header: BatchHeader, discard_records: bool) -> BatchRetention:
        producer_id = header.producer_id
        if producer_id >= 0:
            last = self._last_batches.get(producer_id)
            if last is not None:
                if last.last_data_offset is not None:
                    is_last = header.last_offset == last.last_data_offset
                else:
                    is_last = header.is_control and header.producer_epoch == last.producer_epoch
                if is_last:
                    return BatchRetention.RETAIN_EMPTY
        return BatchRetention.DELETE if discard_records else BatchRetention.DELETE_EMPTY

    def _retain(self, record: Record, retain_deletes: bool) -> bool:
        offset_map = self._map
        if record.offset > offset_map.latest_offset:
            return True
        if record.key is None:
            self.stats.keyless_records_removed += 1
            return False
        latest = record.offset >= offset_map.get(record.key)
        return latest and (record.value is not None or retain_deletes)


def _rewritten(header: BatchHeader, kept: list[Record], horizon: int | None) -> bytes:
    """`header`'s batch holding only `kept` (module Rules)."""
    base_offset = header.base_offset
    base_timestamp = kept[0].timestamp if horizon is None else horizon
    parts: list[bytes] = []
    max_timestamp = NO_TIMESTAMP
    for record in kept:
        append_record(
            parts,
            record.offset - base_offset,
            record.timestamp - base_timestamp,
            record.key,
            record.value,
            record.headers,
        )
        max_timestamp = max(max_timestamp, record.timestamp)
    if header.is_log_append_time:
        max_timestamp = header.max_timestamp
    codec = header.compression_codec
    body = b"".join(parts)
    if codec != COMPRESSION_NONE:
        body = compress(codec, body)
    attributes = header.attributes & (
        COMPRESSION_CODEC_MASK | TIMESTAMP_TYPE_MASK | TRANSACTIONAL_FLAG_MASK | CONTROL_FLAG_MASK
    )
    if horizon is not None:
        attributes |= DELETE_HORIZON_FLAG_MASK
    return seal_batch(
        body,
        len(kept),
        base_timestamp,
        max_timestamp,
        attributes,
        base_offset=base_offset,
        partition_leader_epoch=header.partition_leader_epoch,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        last_offset_delta=header.last_offset_delta,
    )


def _empty(header: BatchHeader) -> bytes:
    """Kafka's empty header in place of `header`'s batch (`writeEmptyHeader`)."""
    attributes = header.attributes & (
        TIMESTAMP_TYPE_MASK | TRANSACTIONAL_FLAG_MASK | CONTROL_FLAG_MASK
    )
    return seal_batch(
        b"",
        0,
        NO_TIMESTAMP,
        header.max_timestamp,
        attributes,
        base_offset=header.base_offset,
        partition_leader_epoch=header.partition_leader_epoch,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        last_offset_delta=header.last_offset_delta,
    )
