"""Which `__transaction_state` partition keeps a transactional id, and what a coordinator that
becomes leader of such a partition knows once it has read it (Kafka's
`TransactionStateManager.loadTransactionsForTxnTopicPartition`).

Rules:
- A transactional id lives in partition `abs(hashCode) % partitions`, the group rule
  (`group_partition`), with transaction.state.log.num.partitions (50) partitions.
- Replay in offset order: the last record of a transactional id wins; a tombstone removes it.
  A key or value that does not parse is `CorruptRecordError` naming the offset: the loader
  stops, as Kafka's does, rather than serve a state it cannot read.
- After the load, every transaction in PrepareCommit or PrepareAbort has its markers written
  again (a coordinator may have failed between the two records) and then completes; one in
  Ongoing is left to its timeout.
"""

from __future__ import annotations

from collections.abc import Iterable

from replog.coordinator.group_partition import java_string_hashcode, kafka_abs
from replog.coordinator.transaction_metadata import TxnMetadata, TxnState
from replog.coordinator.transaction_records import decode_key, decode_value
from replog.errors import CorruptRecordError

__all__ = ["TRANSACTION_STATE_PARTITIONS", "partition_for_transactional_id", "replay", "unfinished"]

TRANSACTION_STATE_PARTITIONS = 50  # transaction.state.log.num.partitions' default


def partition_for_transactional_id(transactional_id: str, partition_count: int) -> int:
    if partition_count < 1:
        raise ValueError(f"__transaction_state has {partition_count} partitions; needs at least 1")
    return kafka_abs(java_string_hashcode(transactional_id)) % partition_count


def replay(records: Iterable[tuple[int, bytes, bytes | None]]) -> dict[str, TxnMetadata]:
    """The transactional ids of one partition from its (offset, key, value) records."""
    loaded: dict[str, TxnMetadata] = {}
    for offset, key, value in records:
        try:
            transactional_id = decode_key(key)
            if value is None:
                loaded.pop(transactional_id, None)
            else:
                loaded[transactional_id] = decode_value(transactional_id, value)
        except CorruptRecordError as error:
            raise CorruptRecordError(f"__transaction_state at offset {offset}: {error}") from None
    return loaded


def unfinished(loaded: dict[str, TxnMetadata]) -> list[TxnMetadata]:
    """The transactions whose markers must be written again after a load, by id."""
    return [
        loaded[tid]
        for tid in sorted(loaded)
        if loaded[tid].state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
    ]
