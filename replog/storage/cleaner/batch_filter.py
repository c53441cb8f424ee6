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
- A plain batch (`filter`'s `plain`: the caller knows each of its records is its key's latest
  in the map, with a value, and the batch neither control nor transactional, nor empty) keeps
  every record and needs no horizon: copied as it is, its records not scanned. That is the
  answer the rules above give it, for the cost of its header.
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
from replog.record.record_spans import Span, respan, span_is_tombstone
from replog.storage.cleaner.offset_map import NOT_FOUND, OffsetMap
from replog.storage.cleaner.transactions import CleanedTransactions

_NOT_PLAIN = CONTROL_FLAG_MASK | TRANSACTIONAL_FLAG_MASK


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

    def filter(self, batch: bytes, plain: bool = False) -> bytes | None:
        """The bytes that replace `batch` (one whole, valid batch) in the cleaned segment:
        the batch itself, a rewritten one, or None when it goes. `plain`: the caller knows
        the batch is (module Rules)."""
        parsed = RecordBatch.parse(batch, where="cleaned batch", sparse=True)
        header = parsed.header
        stats = self.stats
        stats.batches_read += 1
        stats.bytes_read += len(batch)
        if plain and not (header.attributes & _NOT_PLAIN) and header.records_count:
            self._transactions.on_batch_read(header)  # a batch not transactional: noted only
            stats.records_read += header.records_count
            stats.batches_written += 1
            stats.bytes_written += len(batch)
            stats.records_kept += header.records_count
            return batch
        data, spans = parsed.spans()
        stats.records_read += len(spans)
        now = self._now_ms
        horizon = delete_horizon(header)
        if header.is_control:
            kind = marker_type(spans[0][2]) if spans else None
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
            stats.records_kept += len(spans)
            return batch
        retention = self._batch_retention(header, discard_records)
        if retention is BatchRetention.DELETE:
            return None
        if discard_records:
            kept: list[Span] = []
        elif header.is_control:
            kept = spans
        else:
            kept = self._kept(header.base_offset, spans, horizon is None or now < horizon)
        if kept:
            needs_horizon = horizon is None and (
                empty_txn_marker or any(map(span_is_tombstone, kept))
            )
            if len(kept) == len(spans) and not needs_horizon:
                out = batch
            else:
                out = _rewritten(
                    header,
                    data,
                    kept,
                    now + self._delete_retention_ms if needs_horizon else horizon,
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

    def _kept(self, base_offset: int, spans: list[Span], retain_deletes: bool) -> list[Span]:
        """The records of a data batch that stay (module Rules, record retention): one loop,
        the map's lookup its only call, as this runs for every record of the log."""
        offset_map = self._map
        reach = offset_map.latest_offset
        latest_of = offset_map.lookup()
        kept: list[Span] = []
        keyless = 0
        for span in spans:
            offset = base_offset + span[0]
            if offset > reach:
                kept.append(span)
            elif (key := span[2]) is None:
                keyless += 1
            elif offset >= latest_of(key, NOT_FOUND) and (retain_deletes or not span[3]):
                kept.append(span)
        self.stats.keyless_records_removed += keyless
        return kept


def _rewritten(header: BatchHeader, data: bytes, kept: list[Span], horizon: int | None) -> bytes:
    """`header`'s batch holding only `kept`, spans of `data` (module Rules): each record's
    bytes as they are when its timestamp delta stays (runs of adjacent records in one
    slice), else with the new delta (`respan`); the body in one join."""
    base_offset = header.base_offset
    log_append_time = header.max_timestamp if header.is_log_append_time else None
    old_base = header.base_timestamp
    if horizon is not None:
        base_timestamp = horizon
    elif log_append_time is not None:
        base_timestamp = log_append_time
    else:
        base_timestamp = old_base + kept[0][1]
    parts: list[bytes] = []
    run_start = run_end = -1  # the bytes of adjacent kept records not in `parts` yet
    max_timestamp = NO_TIMESTAMP
    for span in kept:
        timestamp = old_base + span[1] if log_append_time is None else log_append_time
        if timestamp > max_timestamp:
            max_timestamp = timestamp
        delta = timestamp - base_timestamp
        if delta == span[1]:
            if span[4] != run_end:
                if run_end >= 0:
                    parts.append(data[run_start:run_end])
                run_start = span[4]
            run_end = span[6]
        else:
            if run_end >= 0:
                parts.append(data[run_start:run_end])
                run_end = -1
            parts.append(respan(data, span, delta))
    if run_end >= 0:
        parts.append(data[run_start:run_end])
    if log_append_time is not None:
        max_timestamp = log_append_time
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
