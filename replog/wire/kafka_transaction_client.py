"""A transactional producer's calls over Kafka's protocol: to its transaction coordinator
(InitProducerId with a transactional id, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn) and to
the group coordinator of the offsets it commits (TxnOffsetCommit).

Rules:
- Connections, deadlines and transport errors as `KafkaCoordinatorClient`'s (this class
  extends it: FindCoordinator with key type 1 finds a transactional id's coordinator).
- Answers' errors are returned, never raised: the producer's `TransactionManager` decides what
  each means (`classify`). Per-partition errors come back one per partition asked; an answer
  naming a partition not asked for, or leaving one out, is a MalformedResponseError.
- Versions, as Kafka 4.x's producer picks them: AddPartitionsToTxn at most v3 (the clients'
  shape; v4+ is the brokers' batched verification); with transaction version 2, EndTxn v5
  (its answer carries the next producer id and epoch) and TxnOffsetCommit v5; with version 1
  at most v4 of both, so that a broker never takes this producer for a version 2 one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from replog.common import OffsetAndMetadata, TopicPartition
from replog.errors import KafkaError, MalformedResponseError
from replog.kafka.messages.add_offsets_to_txn_request import AddOffsetsToTxnRequest
from replog.kafka.messages.add_offsets_to_txn_response import AddOffsetsToTxnResponse
from replog.kafka.messages.add_partitions_to_txn_request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
)
from replog.kafka.messages.add_partitions_to_txn_response import AddPartitionsToTxnResponse
from replog.kafka.messages.end_txn_request import EndTxnRequest
from replog.kafka.messages.end_txn_response import EndTxnResponse
from replog.kafka.messages.init_producer_id_request import InitProducerIdRequest
from replog.kafka.messages.init_producer_id_response import InitProducerIdResponse
from replog.kafka.messages.txn_offset_commit_request import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from replog.kafka.messages.txn_offset_commit_response import TxnOffsetCommitResponse
from replog.wire.kafka_coordinator_client import KafkaCoordinatorClient

__all__ = ["TRANSACTION_KEY_TYPE", "KafkaTransactionClient", "ProducerIdAnswer"]

TRANSACTION_KEY_TYPE = 1  # FindCoordinator's key type of a transactional id
ADD_PARTITIONS_CLIENT_MAX_VERSION = 3
INIT_PRODUCER_ID_MAX_VERSION = 5  # v6 is two-phase commit (KIP-939)
VERSION1_MAX = 4  # EndTxn and TxnOffsetCommit under transaction version 1

ProducerIdAnswer = tuple[KafkaError | None, int, int]  # error, producer id, epoch


class KafkaTransactionClient(KafkaCoordinatorClient):
    """A transactional producer's calls to the coordinator at `address` (module docstring)."""

    def _by_partition(
        self,
        api: str,
        asked: Sequence[TopicPartition],
        answered: list[tuple[str, int, int]],
    ) -> dict[TopicPartition, KafkaError | None]:
        results: dict[TopicPartition, KafkaError | None] = {}
        for topic, partition, code in answered:
            tp = TopicPartition(topic, partition)
            if tp not in asked or tp in results:
                raise MalformedResponseError(
                    f"the coordinator at {self.address} answered {api} for {topic}-{partition}, "
                    "which it was not asked for (or twice)"
                )
            results[tp] = self._error(code, about=f"{api} of {topic}-{partition}")
        missing = [tp for tp in asked if tp not in results]
        if missing:
            raise MalformedResponseError(
                f"the coordinator at {self.address} answered {api} with no result for "
                + ", ".join(f"{tp.topic}-{tp.partition}" for tp in missing)
            )
        return results

    async def init_producer_id(
        self,
        transactional_id: str,
        transaction_timeout_ms: int,
        producer_id: int = -1,
        epoch: int = -1,
        *,
        timeout_ms: int | None = None,
    ) -> ProducerIdAnswer:
        """A producer id and epoch for `transactional_id` (an existing `producer_id` and
        `epoch` ask for that producer's epoch to be bumped, KIP-360)."""
        request = InitProducerIdRequest(
            transactional_id=transactional_id,
            transaction_timeout_ms=transaction_timeout_ms,
            producer_id=producer_id,
            producer_epoch=epoch,
        )
        answer, _ = await self._call(
            request, InitProducerIdResponse, timeout_ms, max_version=INIT_PRODUCER_ID_MAX_VERSION
        )
        error = self._error(answer.error_code, about=f"InitProducerId of {transactional_id!r}")
        return error, answer.producer_id, answer.producer_epoch

    async def add_partitions_to_txn(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        partitions: Sequence[TopicPartition],
        *,
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, KafkaError | None]:
        topics: dict[str, list[int]] = {}
        for tp in partitions:
            topics.setdefault(tp.topic, []).append(tp.partition)
        request = AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=transactional_id,
            v3_and_below_producer_id=producer_id,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[
                AddPartitionsToTxnTopic(name=name, partitions=ps) for name, ps in topics.items()
            ],
        )
        answer, _ = await self._call(
            request,
            AddPartitionsToTxnResponse,
            timeout_ms,
            max_version=ADD_PARTITIONS_CLIENT_MAX_VERSION,
        )
        answered = [
            (topic.name, p.partition_index, p.partition_error_code)
            for topic in answer.results_by_topic_v3_and_below
            for p in topic.results_by_partition
        ]
        return self._by_partition("AddPartitionsToTxn", partitions, answered)

    async def add_offsets_to_txn(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        group_id: str,
        *,
        timeout_ms: int | None = None,
    ) -> KafkaError | None:
        request = AddOffsetsToTxnRequest(
            transactional_id=transactional_id,
            producer_id=producer_id,
            producer_epoch=epoch,
            group_id=group_id,
        )
        answer, _ = await self._call(request, AddOffsetsToTxnResponse, timeout_ms)
        return self._error(answer.error_code, about=f"AddOffsetsToTxn of group {group_id!r}")

    async def end_txn(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        committed: bool,
        *,
        version2: bool,
        timeout_ms: int | None = None,
    ) -> ProducerIdAnswer:
        """End the transaction; version 2's answer names the next producer id and epoch (-1
        otherwise)."""
        request = EndTxnRequest(
            transactional_id=transactional_id,
            producer_id=producer_id,
            producer_epoch=epoch,
            committed=committed,
        )
        answer, version = await self._call(
            request,
            EndTxnResponse,
            timeout_ms,
            max_version=None if version2 else VERSION1_MAX,
        )
        error = self._error(answer.error_code, about=f"EndTxn of {transactional_id!r}")
        if version < 5:
            return error, -1, -1
        return error, answer.producer_id, answer.producer_epoch

    async def txn_offset_commit(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        group_metadata: tuple[str, int, str, str | None],
        *,
        version2: bool,
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, KafkaError | None]:
        """Commit `offsets` in the transaction; `group_metadata` is the consumer's (group id,
        generation, member id, group instance id)."""
        group_id, generation, member_id, instance_id = group_metadata
        topics: dict[str, list[TxnOffsetCommitRequestPartition]] = {}
        for tp, committed in offsets.items():
            topics.setdefault(tp.topic, []).append(
                TxnOffsetCommitRequestPartition(
                    partition_index=tp.partition,
                    committed_offset=committed.offset,
                    committed_leader_epoch=committed.leader_epoch,
                    committed_metadata=committed.metadata,
                )
            )
        request = TxnOffsetCommitRequest(
            transactional_id=transactional_id,
            group_id=group_id,
            producer_id=producer_id,
            producer_epoch=epoch,
            generation_id=generation,
            member_id=member_id,
            group_instance_id=instance_id,
            topics=[TxnOffsetCommitRequestTopic(name=n, partitions=ps) for n, ps in topics.items()],
        )
        answer, _ = await self._call(
            request,
            TxnOffsetCommitResponse,
            timeout_ms,
            max_version=None if version2 else VERSION1_MAX,
        )
        answered = [
            (topic.name, p.partition_index, p.error_code)
            for topic in answer.topics
            for p in topic.partitions
        ]
        return self._by_partition("TxnOffsetCommit", list(offsets), answered)
