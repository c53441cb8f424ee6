"""KIP-890 at a real Kafka listener in front of a real TransactionCoordinator (the harness of
`test_kafka_txn_listener`): a transactional Produce whose partition was never added to the
transaction is refused and nothing is appended (INVALID_TXN_STATE for v10-,
TRANSACTION_ABORTABLE for v11); after AddPartitionsToTxn (transaction version 1) it is
appended. Produce v12 (transaction version 2) adds the partition itself, EndTxn v5 bumps the
epoch and answers it, and the next transaction's first produce adds the partition again; a
produce at the epoch before the bump is INVALID_PRODUCER_EPOCH."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from replog.coordinator.transaction_metadata import TxnState
from replog.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    TransactionAbortableError,
)
from replog.kafka.messages.add_partitions_to_txn_request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
)
from replog.kafka.messages.end_txn_request import EndTxnRequest
from replog.kafka.messages.init_producer_id_request import InitProducerIdRequest
from replog.kafka.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from replog.record.builder import BatchBuilder
from replog.server.kafka.kafka_apis import KafkaApis
from tests.server.kafka.test_kafka_txn_listener import call, serving

PRODUCE, ADD_PARTITIONS, END_TXN, INIT_PRODUCER_ID = 0, 24, 26, 22


async def initialized(apis: KafkaApis, tid: str) -> tuple[int, int]:
    init = await call(
        apis, InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=60_000), 4, 22
    )
    assert init.error_code == 0
    return init.producer_id, init.producer_epoch


async def produce(
    apis: KafkaApis, tid: str, pid: int, epoch: int, sequence: int, version: int
) -> int:
    """One transactional record to t-0 at `version`: the partition's error code."""
    builder = BatchBuilder(
        producer_id=pid, producer_epoch=epoch, base_sequence=sequence, is_transactional=True
    )
    builder.append(1, b"k", b"v%d" % sequence)
    request = ProduceRequest(
        transactional_id=tid,
        acks=-1,
        timeout_ms=5000,
        topic_data=[
            TopicProduceData(
                name="t", partition_data=[PartitionProduceData(index=0, records=builder.build())]
            )
        ],
    )
    answer: Any = await call(apis, request, version, PRODUCE)
    ((partition,),) = [t.partition_responses for t in answer.responses]
    return int(partition.error_code)


async def end(apis: KafkaApis, tid: str, pid: int, epoch: int, version: int) -> Any:
    request = EndTxnRequest(
        transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=True
    )
    return await call(apis, request, version, END_TXN)


@pytest.mark.asyncio
async def test_a_partition_never_added_is_refused_until_it_is(tmp_path: Path) -> None:
    async with serving(tmp_path) as (broker, _, apis, _):
        pid, epoch = await initialized(apis, "v1")
        assert await produce(apis, "v1", pid, epoch, 0, 9) == InvalidTxnStateError.code
        assert await produce(apis, "v1", pid, epoch, 0, 11) == TransactionAbortableError.code
        plog = broker.log_manager.get_log("t", 0)
        assert plog.log_end_offset == 0  # nothing appended
        added = await call(
            apis,
            AddPartitionsToTxnRequest(
                v3_and_below_transactional_id="v1",
                v3_and_below_producer_id=pid,
                v3_and_below_producer_epoch=epoch,
                v3_and_below_topics=[AddPartitionsToTxnTopic(name="t", partitions=[0])],
            ),
            3,
            ADD_PARTITIONS,
        )
        assert (
            added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
        )
        assert await produce(apis, "v1", pid, epoch, 0, 11) == 0
        assert await produce(apis, "v1", pid, epoch, 1, 11) == 0  # its transaction is open
        assert plog.log_end_offset == 2
        assert (await end(apis, "v1", pid, epoch, 4)).error_code == 0
        await broker.idle()
        assert broker.coordinator.metadata_of("v1").state is TxnState.COMPLETE_COMMIT  # type: ignore[union-attr]


@pytest.mark.asyncio
async def test_produce_v12_adds_the_partition_and_end_txn_v5_bumps_the_epoch(
    tmp_path: Path,
) -> None:
    async with serving(tmp_path) as (broker, _, apis, _):
        pid, epoch = await initialized(apis, "v2")
        assert await produce(apis, "v2", pid, epoch, 0, 12) == 0
        meta = broker.coordinator.metadata_of("v2")
        assert meta is not None and meta.state is TxnState.ONGOING
        assert meta.partitions == frozenset({("t", 0)})
        ended = await end(apis, "v2", pid, epoch, 5)
        assert (ended.error_code, ended.producer_id, ended.producer_epoch) == (0, pid, epoch + 1)
        await broker.idle()
        meta = broker.coordinator.metadata_of("v2")
        assert meta is not None and meta.state is TxnState.COMPLETE_COMMIT
        # The next transaction, at the bumped epoch, adds the partition again.
        assert await produce(apis, "v2", pid, epoch + 1, 0, 12) == 0
        meta = broker.coordinator.metadata_of("v2")
        assert meta is not None and meta.state is TxnState.ONGOING
        assert await produce(apis, "v2", pid, epoch, 1, 12) == InvalidProducerEpochError.code
        assert broker.log_manager.get_log("t", 0).log_end_offset == 2  # the two accepted
        # The commit's marker (sent to the harness's fake channel) at the bumped epoch.
        ((_, marker),) = broker.channel.sent
        assert (marker.commit, marker.producer_epoch, marker.transaction_version) == (
            True,
            epoch + 1,
            2,
        )
