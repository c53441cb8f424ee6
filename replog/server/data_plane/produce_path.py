"""A leader's appends: Produce and WriteTxnMarkers, each partition as its core decides.

Rules (docs/design/replication.md#acks-and-min-isr; Kafka's `ReplicaManager.appendRecords`):
- Produce: acks must be 0, 1 or -1 (INVALID_REQUIRED_ACKS). Per partition: an internal topic
  (`__consumer_offsets`, `topic_names.INTERNAL_TOPICS`) -> INVALID_TOPIC_EXCEPTION naming it,
  unless the caller passes `internal_topics_allowed=True` (Kafka's `internalTopicsAllowed`:
  only the broker's own group coordinator does; a client's produce never); unknown ->
  UNKNOWN_TOPIC_OR_PARTITION; not the leader -> NOT_LEADER_OR_FOLLOWER with the current
  leader. Then the core decides (`ProduceArrived`): acks=-1 with a committed ISR below the
  effective min ISR is NOT_ENOUGH_REPLICAS before any append; an idempotent retry of one of a
  producer's last 5 batches is answered with the original offsets and not appended; storage
  errors (size, CRC, magic, base offset) pass through. acks=-1 then waits until the core says
  done (HW past the append) or the request's timeout (REQUEST_TIMED_OUT); acks=1 answers after
  the local append; acks=0 answers only the partitions that failed (empty when all
  succeeded): the Kafka listener sends no response, or on a failure closes the connection, as
  Kafka's broker does (`kafka_apis`).
- WriteTxnMarkers (a transaction coordinator's end of a transaction): per partition, only the
  leader; the marker is checked against the producer state (`check_marker`), appended as one
  control batch through the produce path with acks=all (internal topics too) and answered
  once the HW passes it, or REQUEST_TIMED_OUT.
- Every append happens before the first await: the Kafka listener starts one connection's
  requests in the order sent and relies on each reaching its appends before the next starts.
- Metrics: per request and per batch, never per record. Hot path: the records stay bytes; the
  core reads their batch headers only.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from itertools import islice

from replog.errors import KafkaError, UnknownServerError
from replog.record.builder import build_batch
from replog.record.control_record import EndTxnMarker, encode_marker
from replog.replication.messages import (
    ACKS_ALL,
    ACKS_NONE,
    ProducePartition,
    ProducePartitionResult,
    ProduceRequest,
    ProduceResponse,
    TxnMarker,
    TxnMarkerPartitionResult,
    TxnMarkerResult,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from replog.replication.partition_effects import AnswerDuplicate, AnswerProduce, ParkProduce, Refuse
from replog.replication.partition_events import LogAppended, ProduceArrived
from replog.replication.producer_state import AppendOrigin
from replog.replication.request_admission import VALID_ACKS, invalid_acks_error, refuse_internal
from replog.server.data_plane.delayed_operations import DelayedProduce
from replog.server.data_plane.partition import Partition
from replog.server.data_plane.replica_shell import ReplicaShell

log = logging.getLogger("replog.server.data_plane.replica_manager")  # every role's lines


class ProducePath(ReplicaShell):
    """Produce and WriteTxnMarkers (module docstring)."""

    async def produce(
        self, request: ProduceRequest, *, internal_topics_allowed: bool = False
    ) -> ProduceResponse:
        """Append `request`'s batches as leader and answer per partition (module docstring).

        `internal_topics_allowed`: the broker itself appends to an internal topic (its group
        coordinator writing `__consumer_offsets`); a client's Produce never passes it. Such an
        append is a coordinator's (`AppendOrigin.COORDINATOR`): its producer batches, a
        transactional offset commit's, get no sequence check.

        Every append happens before the first await (only the acks=all wait for the high
        watermark comes after): the Kafka listener starts one connection's requests in the
        order sent and relies on each reaching its appends before the next starts.
        """
        if request.acks not in VALID_ACKS:
            return ProduceResponse(
                tuple(
                    ProducePartitionResult(
                        p.topic, p.partition, invalid_acks_error(p.topic, p.partition, request.acks)
                    )
                    for p in request.partitions
                )
            )
        now_ms = self._clock()
        origin = AppendOrigin.COORDINATOR if internal_topics_allowed else AppendOrigin.CLIENT
        results: list[ProducePartitionResult] = []
        pending: dict[int, tuple[Partition, int]] = {}
        for index, entry in enumerate(request.partitions):
            try:
                if not internal_topics_allowed:
                    refuse_internal(entry.topic, entry.partition, "append to")
                result, partition, required_offset = self._append_to_leader(
                    entry, request.acks, now_ms, origin=origin
                )
            except KafkaError as exc:
                result = self._produce_error(entry, exc)
                partition, required_offset = None, -1
            except Exception as exc:  # a bug must not take the other partitions down
                log.exception("%s-%d: produce failed", entry.topic, entry.partition)
                result = self._produce_error(
                    entry, UnknownServerError(f"{entry.topic}-{entry.partition}: {exc!r}")
                )
                partition, required_offset = None, -1
            results.append(result)
            if partition is not None:
                pending[index] = (partition, required_offset)
        if request.acks == ACKS_NONE:
            return ProduceResponse(tuple(r for r in results if r.error is not None))
        answered = await self._acknowledged(results, pending, request.timeout_ms, now_ms)
        return ProduceResponse(answered)

    async def _acknowledged(
        self,
        results: list[ProducePartitionResult],
        pending: dict[int, tuple[Partition, int]],
        timeout_ms: int,
        now_ms: int,
    ) -> tuple[ProducePartitionResult, ...]:
        """`results` once the appends `pending` names (result index -> partition, required
        offset) are replicated as acks=all requires, or failed, or `timeout_ms` passed."""
        if not pending:
            return tuple(results)
        op = DelayedProduce(results, pending)
        if self._delayed.check_produce(op):
            return tuple(op.results)
        if timeout_ms <= 0 or self._stopped:
            self._delayed.expire_produce(op)
            return tuple(op.results)
        await self._delayed.wait_produce(op, now_ms + timeout_ms)
        return tuple(op.results)

    def _produce_error(self, entry: ProducePartition, error: KafkaError) -> ProducePartitionResult:
        return ProducePartitionResult(
            entry.topic,
            entry.partition,
            error,
            current_leader=self._error_leader(error, entry.topic, entry.partition),
        )

    async def write_txn_markers(self, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
        """Write each marker to each of its partitions as leader and answer once the ISR has
        them (acks=all), per marker and partition (Kafka's WriteTxnMarkers, the broker's side
        of a coordinator's EndTxn): a partition this broker does not lead is
        NOT_LEADER_OR_FOLLOWER; a stale producer epoch INVALID_PRODUCER_EPOCH and an older
        coordinator epoch TRANSACTION_COORDINATOR_FENCED (`ProducerStateTable.check_marker`);
        internal topics (`__consumer_offsets`) take markers too."""
        now_ms = self._clock()
        results: list[ProducePartitionResult] = []
        pending: dict[int, tuple[Partition, int]] = {}
        for marker in request.markers:
            for topic, partition_id in marker.partitions:
                try:
                    result, partition, required_offset = self._append_marker(
                        marker, topic, partition_id, now_ms
                    )
                except KafkaError as exc:
                    result = ProducePartitionResult(topic, partition_id, exc)
                    partition, required_offset = None, -1
                except Exception as exc:  # a bug must not take the other partitions down
                    log.exception("%s-%d: marker not written", topic, partition_id)
                    error = UnknownServerError(f"{topic}-{partition_id}: {exc!r}")
                    result = ProducePartitionResult(topic, partition_id, error)
                    partition, required_offset = None, -1
                results.append(result)
                if partition is not None:
                    pending[len(results) - 1] = (partition, required_offset)
        answered = iter(await self._acknowledged(results, pending, request.timeout_ms, now_ms))
        return WriteTxnMarkersResponse(
            tuple(
                TxnMarkerResult(
                    marker.producer_id,
                    tuple(
                        TxnMarkerPartitionResult(r.topic, r.partition, r.error)
                        for r in islice(answered, len(marker.partitions))
                    ),
                )
                for marker in request.markers
            )
        )

    def _append_marker(
        self, marker: TxnMarker, topic: str, partition_id: int, now_ms: int
    ) -> tuple[ProducePartitionResult, Partition | None, int]:
        """Check `marker` against the partition's producer state and append its control
        batch through the produce path (acks=all)."""
        partition = self._leader_partition(topic, partition_id)
        partition.producer_state.check_marker(
            marker.producer_id,
            marker.producer_epoch,
            marker.coordinator_epoch,
            marker.transaction_version,
        )
        key, value = encode_marker(EndTxnMarker(not marker.committed, marker.coordinator_epoch))
        batch = build_batch(
            [(self._wall_clock(), key, value, ())],
            producer_id=marker.producer_id,
            producer_epoch=marker.producer_epoch,
            is_transactional=True,
            is_control=True,
        )
        return self._append_to_leader(
            ProducePartition(topic, partition_id, batch),
            ACKS_ALL,
            now_ms,
            marker=True,
            origin=AppendOrigin.COORDINATOR,
        )

    def _append_to_leader(
        self,
        entry: ProducePartition,
        acks: int,
        now_ms: int,
        *,
        marker: bool = False,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> tuple[ProducePartitionResult, Partition | None, int]:
        """Append one partition's batches as leader, as its core decides: (result, the
        partition and required offset when the produce waits for acks=all, else None);
        `marker`: the batch is a coordinator's end-transaction marker."""
        partition = self._leader_partition(entry.topic, entry.partition)
        core = partition.core
        plog = partition.log
        waiting = self._delayed.produce
        effects = core.step(
            ProduceArrived(acks, entry.records, len(waiting), waiting.max_pending, origin), now_ms
        )
        first = effects[0]
        if type(first) is Refuse:
            raise first.error
        if type(first) is AnswerDuplicate:
            duplicate = first.batch
            log.debug(
                "%s: duplicate batch, answering with offsets %d-%d",
                partition.name,
                duplicate.first_offset,
                duplicate.last_offset,
            )
            result = ProducePartitionResult(
                entry.topic,
                entry.partition,
                base_offset=duplicate.first_offset,
                log_start_offset=plog.log_start_offset,
            )
            return _acks_answer(result, partition, effects[1])
        if marker:
            info = partition.append_marker_as_leader(bytes(entry.records), partition.leader_epoch)
        else:
            info = partition.append_as_leader(
                entry.records,
                partition.leader_epoch,
                coordinator=origin is AppendOrigin.COORDINATOR,
            )
        self.counters.produced(
            entry.topic, len(entry.records), info.last_offset - info.first_offset + 1
        )
        effects = core.step(LogAppended(acks, info.last_offset, plog.log_end_offset), now_ms)
        self._execute(partition, effects[:-1])
        result = ProducePartitionResult(
            entry.topic,
            entry.partition,
            base_offset=info.first_offset,
            log_append_time_ms=info.log_append_time_ms,
            log_start_offset=plog.log_start_offset,
        )
        return _acks_answer(result, partition, effects[-1])


def _acks_answer(
    result: ProducePartitionResult, partition: Partition, answer: object
) -> tuple[ProducePartitionResult, Partition | None, int]:
    """A produce's answer as its core decided (`AnswerProduce` or `ParkProduce`)."""
    if type(answer) is ParkProduce:
        assert isinstance(answer, ParkProduce)
        return result, partition, answer.required_offset
    assert isinstance(answer, AnswerProduce)
    if answer.error is not None:
        result = replace(result, error=answer.error)
    return result, None, -1
