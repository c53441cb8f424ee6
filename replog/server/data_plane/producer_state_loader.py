"""Loading a replica's idempotent-producer table from its log, with or without a `Partition`.

The replica manager's partitions load their table when they first take a role
(`Partition.ensure_producer_state`); a starting broker loads every log's table first, in the
thread that recovered the logs (`preload_producer_tables`), as Kafka's log loading does, so that
taking a role after a crash replays no segment on the event loop.

Rules:
- The table is the newest usable producer snapshot plus the batch headers after it, else the
  log's headers from `rebuild_start`; then the expired producers are forgotten. Snapshots above
  the LEO (a truncation; deleted durably) or below the log start are deleted first, and one that
  fails its checks is deleted and the next older one, or the log, is used instead.
- A snapshot keeps each producer's open transaction only, not the closed ones whose markers the
  high watermark has not passed (Kafka's unreplicated transactions, which still bound the LSO:
  `partition_transactions`). So a snapshot above the log's HW is used only when no control
  batch lies between the HW and it (a walk of those headers, usually a few); else the next
  older one is tried, or the log replayed, and the replay sees those transactions close.
- Headers are read with `Log.batch_headers_and_markers` (bounded chunks); of the records only a
  control batch's one marker is decoded, so the table's transactions know commits from aborts.
- After a recovery (`Log.txn_index_rebuild_from`), the replay starts at or below the first
  segment rescanned (no newer snapshot is used), and the aborted transactions whose markers
  it applied from there rewrite those segments' `.txnindex` (Kafka's recovery rebuilds them
  with the producer state the same way).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from replog.common.frozen_init import fast_frozen_init
from replog.errors import CorruptProducerSnapshotError, KafkaError
from replog.replication.producer_snapshot import decode_producer_snapshot
from replog.replication.producer_state import ProducerEntry, ProducerStateTable
from replog.storage.aborted_transactions import AbortedTransaction
from replog.storage.log import Log
from replog.storage.producer_snapshot_file import ProducerSnapshotFiles

log = logging.getLogger("replog.server.data_plane.partition")


@dataclass(frozen=True, slots=True)
class ProducerExpiry:
    """`producer.id.expiration.ms` at a wall-clock time: a producer whose last batch's largest
    timestamp is `expiration_ms` or more behind `wall_now_ms` is forgotten (Kafka's rule)."""

    wall_now_ms: int
    expiration_ms: int

    @property
    def oldest_kept_ms(self) -> int:
        """The smallest last-batch timestamp a kept producer can have."""
        return self.wall_now_ms - self.expiration_ms + 1


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class PreloadedTable:
    """A table loaded before its replica existed, valid while its log is where it was."""

    log: Log
    log_start_offset: int
    log_end_offset: int
    table: ProducerStateTable

    def matches(self, plog: Log) -> bool:
        return (
            plog is self.log
            and plog.log_start_offset == self.log_start_offset
            and plog.log_end_offset == self.log_end_offset
        )


def load_producer_table(
    table: ProducerStateTable,
    name: str,
    plog: Log,
    snapshots: ProducerSnapshotFiles,
    expiry: ProducerExpiry | None,
) -> None:
    """Make `table` match `plog` (module Rules)."""
    start = rebuild_start(plog, expiry)
    rebuild_txn_from = plog.txn_index_rebuild_from
    ceiling = plog.log_end_offset
    if rebuild_txn_from is not None:
        start = min(start, rebuild_txn_from)
        ceiling = rebuild_txn_from
    # A snapshot below where a rebuild would start saves nothing (`rebuild_start` says why).
    usable = [o for o in drop_snapshots_outside_log(plog, snapshots) if start <= o <= ceiling]
    aborted: list[AbortedTransaction] = []
    for offset in reversed(usable):
        if _forgets_unreplicated_transactions(plog, offset):
            continue
        entries = _read_snapshot(name, snapshots, offset)
        if entries is None:
            continue
        table.load(entries)
        # Snapshots sit on batch boundaries (a segment base, the LEO): the walk from one
        # starts with the batch at its offset.
        for header, marker in plog.batch_headers_and_markers(offset):
            entry = table.update(header, marker)
            if entry is not None:
                aborted.append(entry)
        log.info(
            "%s: producer state from snapshot %d, replayed to %d",
            name,
            offset,
            plog.log_end_offset,
        )
        break
    else:
        aborted = table.replay(plog.batch_headers_and_markers(start))
    if rebuild_txn_from is not None:
        plog.rebuild_aborted_transactions(rebuild_txn_from, aborted)
    if expiry is not None:
        table.remove_expired(expiry.wall_now_ms, expiry.expiration_ms)


def preload_producer_tables(
    logs: Mapping[tuple[str, int], Log], expiry: ProducerExpiry
) -> dict[tuple[str, int], PreloadedTable]:
    """Every log's table, for the replicas a starting broker is about to create. A log whose
    table cannot be read is left out (warned about): its replica loads it when it takes a
    role, and meets the same error there, where a storage error is handled."""
    tables: dict[tuple[str, int], PreloadedTable] = {}
    for (topic, partition), plog in logs.items():
        name = f"{topic}-{partition}"
        table = ProducerStateTable(name)
        try:
            load_producer_table(
                table, name, plog, ProducerSnapshotFiles(plog.directory, plog.file_system), expiry
            )
        except (OSError, KafkaError) as exc:
            log.warning("%s: producer state not preloaded: %s", name, exc)
            continue
        tables[(topic, partition)] = PreloadedTable(
            plog, plog.log_start_offset, plog.log_end_offset, table
        )
    return tables


def drop_snapshots_outside_log(plog: Log, snapshots: ProducerSnapshotFiles) -> list[int]:
    """Delete the snapshots above the LEO (durably: Rules of `producer_snapshot_file`) or
    below the log start; the offsets of those left, ascending."""
    start, end = plog.log_start_offset, plog.log_end_offset
    offsets = snapshots.offsets()
    snapshots.delete_all((o for o in offsets if o > end or o < start), durable=True)
    return [o for o in offsets if start <= o <= end]


def _forgets_unreplicated_transactions(plog: Log, offset: int) -> bool:
    """Whether a snapshot at `offset` misses a closed transaction the HW has not passed
    (module Rules): a control batch lies between the HW and it."""
    high_watermark = plog.high_watermark
    if offset <= high_watermark:
        return False
    return any(header.is_control for header in plog.batch_headers(high_watermark, offset))


def _read_snapshot(
    name: str, snapshots: ProducerSnapshotFiles, offset: int
) -> list[ProducerEntry] | None:
    data = snapshots.read(offset)
    if data is None:
        return None
    try:
        return decode_producer_snapshot(data, snapshots.path(offset))
    except CorruptProducerSnapshotError as exc:
        log.warning("%s: %s; deleting it and replaying the log instead", name, exc)
        snapshots.delete(offset)
        return None


def rebuild_start(plog: Log, expiry: ProducerExpiry | None) -> int:
    """Where a rebuild from the log's headers starts.

    Why not always from the log start: the rebuild reads every byte it walks (~1.5 s per GiB
    not in page cache here). The segments before the first one whose largest timestamp is not
    expired are skipped: a producer whose last batch lies in them is one the expiry forgets
    anyway (its last batch's timestamp is at most that segment's largest), and every other
    producer's last batch lies in the part read, so the table is the one a full rebuild then the
    expiry gives. Only the prefix is skipped: a later old segment may hold some producer's last
    batch. (A producer read in part keeps fewer of its earlier batches for duplicate detection;
    those are over `producer.id.expiration.ms` old, past any retry.)"""
    if expiry is None:
        return plog.log_start_offset
    for segment in plog.segments():
        if segment.largest_timestamp() >= expiry.oldest_kept_ms:
            return max(segment.base_offset, plog.log_start_offset)
    return plog.log_end_offset
