"""Offset questions and the log-start move a leader replica answers from its own log:
ListOffsets, OffsetsForLeaderEpoch and the first, synchronous step of DeleteRecords.

Rules (docs/design/replication.md#end-offset-for-an-epoch, #read-bounds, #low-watermark; Kafka's
`Partition.fetchOffsetForTimestamp`, `lastOffsetForLeaderEpoch`, `deleteRecordsOnLeader`):
- Every question first checks the request's current leader epoch against the leader's
  (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH).
- ListOffsets: consumers see only committed data (bound = HW), replicas up to the LEO.
  -2 (earliest) is the log start offset, -1 (latest) the bound with the leader's epoch, -3 the
  first record with the largest timestamp below the bound (Kafka 3.8's answer); a time is the
  first offset at or after it below the bound, else no offset. With no tiered storage (Kafka's
  `UnifiedLog.fetchOffsetByTimestamp` with remote storage off): -4 (earliest local) is the log
  start offset too, as -2; -5 (latest tiered) and -6 (earliest pending upload) are no offset
  and no epoch, without an error. Any other negative is INVALID_REQUEST. Each answer carries
  the leader epoch of its offset.
- While a new leader's HW is still below the start offset of its leader epoch (its followers
  have not fetched since the election; the HW it inherited can be far behind what the old
  leader had acknowledged), a consumer's -1 and a time or -3 that finds nothing below the HW
  are OFFSET_NOT_AVAILABLE (retriable), as in Kafka: "latest" would be a stale HW, and "no
  record at or after that time" may be false.
- OffsetsForLeaderEpoch answers the leader-epoch cache's end offset for the asked epoch.
- DeleteRecords: the log start offset rises at once to the offset the partition's core chose
  (`partition_core`: the policy and range checks, the purgatory bound, the wait for the low
  watermark).

Theory of operation: plain functions of a `Partition` that this broker leads; the replica
manager finds the partition (or the error Kafka answers instead) and does any waking.
"""

from __future__ import annotations

from replog.errors import (
    InvalidRequestError,
    OffsetNotAvailableError,
)
from replog.replication.fetch_rules import check_current_leader_epoch
from replog.replication.leader_state import PartitionLeaderState
from replog.replication.messages import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_PENDING_UPLOAD_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    NO_LEADER_EPOCH,
    ListOffsetsPartition,
    ListOffsetsPartitionResult,
    OffsetForLeaderPartition,
    OffsetForLeaderPartitionResult,
)
from replog.server.data_plane.partition import Partition


def _checked_leader_state(partition: Partition, current_leader_epoch: int) -> PartitionLeaderState:
    leader_state = partition.leader_state
    assert leader_state is not None, f"{partition.name}: not the leader"
    check_current_leader_epoch(partition.name, current_leader_epoch, leader_state.leader_epoch)
    return leader_state


def list_offset(
    partition: Partition,
    entry: ListOffsetsPartition,
    *,
    is_replica: bool,
    read_committed: bool = False,
) -> ListOffsetsPartitionResult:
    """ListOffsets for one partition this broker leads (docs/design/replication.md#read-bounds);
    `read_committed`: a consumer's at isolation level 1, bounded by the last stable offset."""
    leader_state = _checked_leader_state(partition, entry.current_leader_epoch)
    plog = partition.log
    cache = plog.leader_epoch_cache
    # Consumers see only committed data, read_committed ones only below the LSO; replicas see
    # up to the LEO (docs/design/replication.md#read-bounds; Kafka's lastFetchableOffset).
    if is_replica:
        bound = plog.log_end_offset
    elif read_committed:
        bound = partition.last_stable_offset(leader_state.high_watermark)
    else:
        bound = leader_state.high_watermark

    def epoch_of(offset: int) -> int:
        found = cache.epoch_for_offset(offset)
        return NO_LEADER_EPOCH if found is None else found

    def check_available() -> None:
        """OFFSET_NOT_AVAILABLE while a consumer's bound lags the leader epoch (module doc)."""
        start = leader_state.leader_epoch_start_offset
        if not is_replica and bound < start:
            raise OffsetNotAvailableError(
                f"{partition.name}: the high watermark {bound} of leader epoch "
                f"{leader_state.leader_epoch} is still below the epoch's start offset {start} "
                "(its followers have not caught up since the election); retry"
            )

    timestamp = entry.timestamp
    if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
        # No tiered storage: the whole log is local, and starts at the log start offset.
        offset = plog.log_start_offset
        return ListOffsetsPartitionResult(
            entry.topic, entry.partition, offset=offset, leader_epoch=epoch_of(offset)
        )
    if timestamp == LATEST_TIMESTAMP:
        check_available()
        return ListOffsetsPartitionResult(
            entry.topic, entry.partition, offset=bound, leader_epoch=leader_state.leader_epoch
        )
    if timestamp == MAX_TIMESTAMP:
        largest = plog.max_timestamp_and_offset(bound)
        if largest is None:
            check_available()
            return ListOffsetsPartitionResult(entry.topic, entry.partition)
        best_timestamp, best_offset = largest
        return ListOffsetsPartitionResult(
            entry.topic,
            entry.partition,
            timestamp=best_timestamp,
            offset=best_offset,
            leader_epoch=epoch_of(best_offset),
        )
    if timestamp in (LATEST_TIERED_TIMESTAMP, EARLIEST_PENDING_UPLOAD_TIMESTAMP):
        # Nothing is tiered, nor waits to be: Kafka's answer without remote storage.
        return ListOffsetsPartitionResult(entry.topic, entry.partition)
    if timestamp < 0:
        raise InvalidRequestError(
            f"{partition.name}: ListOffsets timestamp {timestamp} is not a time nor one of -1 "
            "(latest), -2 (earliest), -3 (max timestamp), -4 (earliest local), -5 (latest "
            "tiered), -6 (earliest pending upload)"
        )
    found = plog.offsets_for_times(timestamp)
    if found is None or found[0] >= bound:
        check_available()
        return ListOffsetsPartitionResult(entry.topic, entry.partition)
    offset, record_timestamp = found
    return ListOffsetsPartitionResult(
        entry.topic,
        entry.partition,
        timestamp=record_timestamp,
        offset=offset,
        leader_epoch=epoch_of(offset),
    )


def offset_for_leader_epoch(
    partition: Partition, entry: OffsetForLeaderPartition
) -> OffsetForLeaderPartitionResult:
    """OffsetsForLeaderEpoch for one partition this broker leads
    (docs/design/replication.md#end-offset-for-an-epoch)."""
    _checked_leader_state(partition, entry.current_leader_epoch)
    plog = partition.log
    end = plog.leader_epoch_cache.end_offset_for(entry.leader_epoch, plog.log_end_offset)
    return OffsetForLeaderPartitionResult(
        entry.topic, entry.partition, leader_epoch=end.leader_epoch, end_offset=end.end_offset
    )


def delete_records_on_leader(partition: Partition, offset: int) -> bool:
    """Raise the log start offset of a partition this broker leads to `offset`, which its
    core chose (`partition_core`, `MoveLogStart`); whether it moved."""
    return partition.log.increment_log_start_offset(offset, "delete records")
