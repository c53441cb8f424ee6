"""Producer-state snapshots: the bytes of a `<offset>.snapshot` file, in Kafka's version 1 layout.

A snapshot named N holds a partition's idempotent-producer table as the batches below offset N
left it, so a replica that needs the table (at start-up, after a truncation) reads the newest
snapshot at or below where it needs to be and replays only the log's headers after it, instead
of the whole log (docs/design/storage.md#segment-files-and-names names the file,
docs/design/storage.md#segment-roll takes one at every roll, docs/design/storage.md#log-recovery
item 9 loads one).

Layout, big-endian (Kafka's `ProducerStateManager` schema, version 1):
  version int16 = 1 | crc uint32 | count int32 | count entries of
  producer_id int64, epoch int16, last_sequence int32, last_offset int64, offset_delta int32,
  timestamp int64, coordinator_epoch int32, current_txn_first_offset int64 (46 bytes each).
The CRC-32C covers every byte after the crc field (count and entries).

Rules:
- An entry keeps only its producer's last data batch, as Kafka's does: `last_offset` and
  `last_sequence` are that batch's last, `offset_delta` its last minus first (offsets and
  sequences advance together in an idempotent batch), `timestamp` the producer's last
  timestamp. A producer whose retained batches are none (it only wrote control batches in its
  current epoch) is written with last_offset -1 and last_sequence -1, and read back with none.
  So a table loaded from a snapshot detects a retry of each producer's last batch only; the
  batches replayed after the snapshot add the rest back, up to the usual 5.
- `coordinator_epoch` is the producer's last marker's coordinator epoch and
  `current_txn_first_offset` its open transaction's first offset (-1: none), as Kafka's.
- Any defect (short, long, unknown version, CRC mismatch, a negative count) raises
  `CorruptProducerSnapshotError` naming the source and what is wrong; the caller then deletes
  the file and falls back to an older snapshot or to the log.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

import crc32c

from replog.common.offsets import NO_OFFSET as NO_OFFSET
from replog.errors import CorruptProducerSnapshotError
from replog.replication.producer_state import (
    INT32_MAX,
    NO_SEQUENCE,
    BatchMetadata,
    ProducerEntry,
)

PRODUCER_SNAPSHOT_VERSION = 1

_PREFIX = struct.Struct(">hIi")  # version, crc, count
_CRC_FROM = 6  # the crc covers everything after version and crc
_ENTRY = struct.Struct(">qhiqiqiq")


def encode_producer_snapshot(entries: Iterable[ProducerEntry]) -> bytes:
    """The snapshot file's bytes for `entries` (their order is kept)."""
    body = bytearray()
    count = 0
    for entry in entries:
        if entry.batches:
            last = entry.batches[-1]
            last_sequence, last_offset = last.last_sequence, last.last_offset
            offset_delta = last.last_offset - last.first_offset
        else:
            last_sequence, last_offset, offset_delta = NO_SEQUENCE, NO_OFFSET, 0
        body += _ENTRY.pack(
            entry.producer_id,
            entry.producer_epoch,
            last_sequence,
            last_offset,
            offset_delta,
            entry.last_timestamp_ms,
            entry.coordinator_epoch,
            entry.current_txn_first_offset,
        )
        count += 1
    counted = struct.pack(">i", count) + bytes(body)
    return struct.pack(">hI", PRODUCER_SNAPSHOT_VERSION, crc32c.crc32c(counted)) + counted


def decode_producer_snapshot(data: bytes, source: str) -> list[ProducerEntry]:
    """The entries of a snapshot file's bytes; `source` names the file in errors."""
    if len(data) < _PREFIX.size:
        raise CorruptProducerSnapshotError(
            f"{source}: {len(data)} bytes, shorter than the {_PREFIX.size}-byte header"
        )
    version, crc, count = _PREFIX.unpack_from(data)
    if version != PRODUCER_SNAPSHOT_VERSION:
        raise CorruptProducerSnapshotError(
            f"{source}: version {version}, only {PRODUCER_SNAPSHOT_VERSION} is known"
        )
    computed = crc32c.crc32c(memoryview(data)[_CRC_FROM:])
    if crc != computed:
        raise CorruptProducerSnapshotError(
            f"{source}: CRC-32C {computed:#010x} does not match the stored {crc:#010x}"
        )
    expected = _PREFIX.size + count * _ENTRY.size
    if count < 0 or len(data) != expected:
        raise CorruptProducerSnapshotError(
            f"{source}: {len(data)} bytes for {count} entries ({expected} expected)"
        )
    entries = []
    for fields in _ENTRY.iter_unpack(memoryview(data)[_PREFIX.size :]):
        producer_id, epoch, last_sequence, last_offset, offset_delta, timestamp = fields[:6]
        coordinator_epoch, txn_first = fields[6:]
        batches: tuple[BatchMetadata, ...] = ()
        if last_offset >= 0:
            # Sequences wrap from Int32 max to 0 (as BatchHeader.last_sequence counts them).
            first_sequence = (
                last_sequence if last_sequence < 0 else (last_sequence - offset_delta) & INT32_MAX
            )
            batches = (
                BatchMetadata(
                    first_sequence=first_sequence,
                    last_sequence=last_sequence,
                    first_offset=last_offset - offset_delta,
                    last_offset=last_offset,
                    timestamp_ms=timestamp,
                ),
            )
        entries.append(
            ProducerEntry(producer_id, epoch, batches, timestamp, txn_first, coordinator_epoch)
        )
    return entries
