"""A leader's offsets: ListOffsets, OffsetsForLeaderEpoch, and DeleteRecords' log start move.

Rules (docs/design/replication.md#low-watermark; Kafka's `ReplicaManager`):
- Only the leader answers; ListOffsets (read_committed: bounded by the LSO) and
  OffsetsForLeaderEpoch read the log (`leader_offsets`).
- DeleteRecords on an internal topic is INVALID_TOPIC_EXCEPTION unless
  `internal_topics_allowed=True` (Kafka's `allowInternalTopicDeletion`). Its checks (policy,
  offset range, the purgatory bound) and its wait for the low watermark are the partition
  core's (`DeleteRecordsArrived`, `LogStartMoved`): it answers once the low watermark reaches
  the offset, or REQUEST_TIMED_OUT.
"""

from __future__ import annotations

from replog.errors import KafkaError, PurgatoryFullError
from replog.replication.messages import (
    DeleteRecordsPartitionResult,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    IsolationLevel,
    ListOffsetsPartitionResult,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetForLeaderPartitionResult,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
)
from replog.replication.partition_effects import CompleteDeleteRecords, MoveLogStart, Refuse
from replog.replication.partition_events import DeleteRecordsArrived, LogStartMoved
from replog.replication.request_admission import refuse_internal
from replog.server.data_plane.delayed_operations import DelayedDeleteRecords
from replog.server.data_plane.leader_offsets import (
    delete_records_on_leader,
    list_offset,
    offset_for_leader_epoch,
)
from replog.server.data_plane.partition import Partition
from replog.server.data_plane.replica_shell import ReplicaShell


class OffsetRequests(ReplicaShell):
    """ListOffsets, OffsetsForLeaderEpoch, DeleteRecords (module docstring)."""

    def list_offsets(self, request: ListOffsetsRequest) -> ListOffsetsResponse:
        is_replica = request.replica_id >= 0
        read_committed = request.isolation_level == IsolationLevel.READ_COMMITTED
        results = []
        for entry in request.partitions:
            try:
                partition = self._leader_partition(entry.topic, entry.partition)
                results.append(
                    list_offset(
                        partition, entry, is_replica=is_replica, read_committed=read_committed
                    )
                )
            except KafkaError as exc:
                results.append(ListOffsetsPartitionResult(entry.topic, entry.partition, exc))
        return ListOffsetsResponse(tuple(results))

    def offsets_for_leader_epoch(
        self, request: OffsetsForLeaderEpochRequest
    ) -> OffsetsForLeaderEpochResponse:
        results = []
        for entry in request.partitions:
            try:
                partition = self._leader_partition(entry.topic, entry.partition)
                results.append(offset_for_leader_epoch(partition, entry))
            except KafkaError as exc:
                results.append(OffsetForLeaderPartitionResult(entry.topic, entry.partition, exc))
        return OffsetsForLeaderEpochResponse(tuple(results))

    async def delete_records(
        self, request: DeleteRecordsRequest, *, internal_topics_allowed: bool = False
    ) -> DeleteRecordsResponse:
        now_ms = self._clock()
        results: list[DeleteRecordsPartitionResult] = []
        pending: dict[int, tuple[Partition, int]] = {}
        may_wait = request.timeout_ms > 0 and not self._stopped
        for index, entry in enumerate(request.partitions):
            try:
                if not internal_topics_allowed:
                    refuse_internal(entry.topic, entry.partition, "delete records of")
                partition = self._leader_partition(entry.topic, entry.partition)
                plog = partition.log
                waiting = self._delayed.delete_records
                effects = partition.core.step(
                    DeleteRecordsArrived(
                        entry.offset,
                        plog.config.cleanup_policy,
                        plog.log_start_offset,
                        may_wait,
                        len(waiting),
                        waiting.max_pending,
                    ),
                    now_ms,
                )
                move = effects[0]
                if type(move) is Refuse:
                    raise move.error
                assert isinstance(move, MoveLogStart)
                offset = move.offset
                moved = delete_records_on_leader(partition, offset)
                effects = partition.core.step(
                    LogStartMoved(offset, moved, plog.log_start_offset), now_ms
                )
                self._execute(partition, effects[:-1])
                result = DeleteRecordsPartitionResult(entry.topic, entry.partition)
                done = effects[-1]
                if type(done) is CompleteDeleteRecords:
                    result = done.applied_to(result)
                else:
                    pending[index] = (partition, offset)
                results.append(result)
            except KafkaError as exc:
                results.append(DeleteRecordsPartitionResult(entry.topic, entry.partition, exc))
        if not pending:
            return DeleteRecordsResponse(tuple(results))
        op = DelayedDeleteRecords(results, pending)
        if self._delayed.check_delete_records(op):
            return DeleteRecordsResponse(tuple(op.results))
        if request.timeout_ms <= 0 or self._stopped:
            self._delayed.expire_delete_records(op)
            return DeleteRecordsResponse(tuple(op.results))
        try:
            await self._delayed.wait_delete_records(op, now_ms + request.timeout_ms)
        except PurgatoryFullError as exc:
            refused: KafkaError = exc
            op.fail_pending(lambda _partition, _offset: refused)
        return DeleteRecordsResponse(tuple(op.results))
