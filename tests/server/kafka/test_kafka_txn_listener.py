"""The transaction APIs behind a real Kafka listener on 127.0.0.1 (a free port), in front of a
real TransactionCoordinator (a ReplicaManager and logs in tmp_path, markers through a fake
channel): confluent-kafka's transactional producer finds its coordinator, initializes,
produces inside a transaction and commits or aborts it (each ending with the markers the
coordinator sends and a Complete* record); a second producer with the same transactional id
fences the first; DescribeTransactions and ListTransactions show the transaction; a broker
without a running coordinator answers COORDINATOR_NOT_AVAILABLE. The listener verifies each
transaction's first produce to a partition with the coordinator (KIP-890), which librdkafka's
transaction version 1 passes by adding its partitions first."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator
from contextlib import ExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from replog.coordinator.transaction_metadata import TxnState
from replog.errors import CoordinatorNotAvailableError, InvalidRequestError, KafkaError
from replog.kafka.connection import KafkaRequest
from replog.kafka.messages.add_partitions_to_txn_request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from replog.kafka.messages.describe_transactions_request import DescribeTransactionsRequest
from replog.kafka.messages.end_txn_request import EndTxnRequest
from replog.kafka.messages.init_producer_id_request import InitProducerIdRequest
from replog.kafka.messages.list_transactions_request import ListTransactionsRequest
from replog.kafka.messages.request_header import RequestHeader
from replog.quorum.metadata.image import MetadataImage
from replog.quorum.metadata.records import Endpoint, RegisterBrokerRecord
from replog.replication import messages as m
from replog.server.data_plane.broker_cores import BrokerCores
from replog.server.kafka.kafka_apis import KafkaApis
from replog.server.kafka.kafka_group_apis import KafkaGroupApis
from replog.server.kafka.kafka_listener import KafkaListener
from replog.server.kafka.kafka_txn_apis import KafkaTxnApis
from replog.server.transactions.produce_verifier import ProduceVerifier, producer_entry
from replog.server.transactions.txn_verifier import TxnVerifier
from replog.topic_names import TRANSACTION_STATE_TOPIC
from tests.metadata.metadata_helpers import bootstrapped, create_topic, replayed, topic_id
from tests.server.transactions.test_transaction_coordinator import STATE_TID, Broker

DATA_TID = topic_id(70)


@dataclass
class Current:
    """The coordinator the broker has now (None: not running)."""

    coordinator: Any


class NoOtherBroker:
    """The inter-broker channel of a one-broker cluster: its coordinator is local."""

    async def add_partitions(
        self, broker_id: int, request: m.TxnPartitionsRequest
    ) -> dict[tuple[str, int], KafkaError | None]:
        raise AssertionError(f"asked broker {broker_id} about {request}")


@asynccontextmanager
async def serving(tmp_path: Path) -> AsyncIterator[tuple[Broker, Current, KafkaApis, str]]:
    """Broker 1 leading `__transaction_state-0` and t-0, behind its Kafka listener, verifying
    transactional produces with its own coordinator (KIP-890)."""
    broker = Broker(tmp_path / "b")
    current = Current(broker.coordinator)
    images: list[MetadataImage] = [MetadataImage.EMPTY]

    def image() -> MetadataImage:
        return images[-1]

    verifier = ProduceVerifier(
        TxnVerifier(1, lambda: current.coordinator, image, NoOtherBroker()),
        functools.partial(producer_entry, broker.rm),
    )
    apis = KafkaApis(
        1,
        cluster_id="c1",
        image=image,
        broker_service=BrokerCores(1, replica_manager=broker.rm),
        extensions=[
            KafkaGroupApis(1, lambda: None, image, lambda: current.coordinator),
            KafkaTxnApis(1, lambda: current.coordinator, image),
        ],
        transactions=lambda: current.coordinator,
        produce_verifier=lambda: verifier,
    )
    listener = KafkaListener("PLAINTEXT", "127.0.0.1", 0)
    await listener.start(apis)
    try:
        endpoint = Endpoint("PLAINTEXT", "127.0.0.1", listener.port)
        images.append(
            replayed(
                bootstrapped(),
                RegisterBrokerRecord(1, UUID(int=1001), 10, endpoints=(endpoint,), fenced=False),
                *create_topic(TRANSACTION_STATE_TOPIC, STATE_TID, (1,)),
                *create_topic("t", DATA_TID, (1,)),
            )
        )
        await broker.loaded(images[-1])
        yield broker, current, apis, f"127.0.0.1:{listener.port}"
    finally:
        await listener.stop()
        await broker.close()


@asynccontextmanager
async def transactional(address: str, tid: str) -> AsyncIterator[Any]:
    """A librdkafka transactional producer of the listener at `address`, destroyed on leaving
    (`confluent_producer`), in a thread: its handle's end must not wait on this loop, which
    serves the listener."""
    from tests.confluent_producer import confluent_producer

    ending = ExitStack()
    producer = ending.enter_context(
        confluent_producer(
            {
                "bootstrap.servers": address,
                "transactional.id": tid,
                "transaction.timeout.ms": 60_000,
            }
        )
    )
    try:
        yield producer
    finally:
        await asyncio.to_thread(ending.close)


def run_transaction(producer: Any, commit: bool) -> None:
    producer.begin_transaction()
    producer.produce("t", value=b"v", key=b"k", partition=0)
    # Delivered first: librdkafka ends a transaction it has added no partition to by itself.
    assert producer.flush(10) == 0
    if commit:
        producer.commit_transaction(10)
    else:
        producer.abort_transaction(10)


@pytest.mark.asyncio
async def test_confluent_kafka_commits_and_aborts_through_the_coordinator(
    tmp_path: Path,
) -> None:
    async with (
        serving(tmp_path) as (broker, _, _, address),
        transactional(address, "lk") as producer,
    ):
        await asyncio.to_thread(producer.init_transactions, 10)
        meta = broker.coordinator.metadata_of("lk")
        assert meta is not None and (meta.state, meta.producer_epoch) == (TxnState.EMPTY, 0)
        await asyncio.to_thread(run_transaction, producer, True)
        await broker.idle()
        assert broker.coordinator.metadata_of("lk").state is TxnState.COMPLETE_COMMIT  # type: ignore[union-attr]
        ((leader, marker),) = broker.channel.sent
        assert (leader, marker.commit, marker.partitions) == (1, True, (("t", 0),))
        assert marker.producer_id == meta.producer_id
        await asyncio.to_thread(run_transaction, producer, False)
        await broker.idle()
        assert broker.coordinator.metadata_of("lk").state is TxnState.COMPLETE_ABORT  # type: ignore[union-attr]
        assert [mk.commit for _, mk in broker.channel.sent] == [True, False]
        assert [s for tid, s in broker.states() if tid == "lk"] == [
            "Empty",
            "Ongoing",
            "PrepareCommit",
            "CompleteCommit",
            "Ongoing",
            "PrepareAbort",
            "CompleteAbort",
        ]
        await asyncio.to_thread(producer.flush, 5)


@pytest.mark.asyncio
async def test_a_second_producer_fences_the_first(tmp_path: Path) -> None:
    import confluent_kafka as confluent

    async with (
        serving(tmp_path) as (broker, _, _, address),
        transactional(address, "zombie") as first,
        transactional(address, "zombie") as second,
    ):
        await asyncio.to_thread(first.init_transactions, 10)
        await asyncio.to_thread(second.init_transactions, 10)
        with pytest.raises(confluent.KafkaException) as raised:
            await asyncio.to_thread(run_transaction, first, True)
        assert raised.value.args[0].fatal()
        await asyncio.to_thread(run_transaction, second, True)
        await broker.idle()
        meta = broker.coordinator.metadata_of("zombie")
        assert meta is not None and (meta.state, meta.producer_epoch) == (
            TxnState.COMPLETE_COMMIT,
            1,
        )


def call(apis: KafkaApis, body: Any, version: int, key: int) -> Any:
    """The handlers' answer to `body` as API `key` at `version` (awaitable)."""
    header = RequestHeader(request_api_key=key, request_api_version=version, correlation_id=1)
    return apis.handle(KafkaRequest(0, header, body, 0), "PLAINTEXT")


@pytest.mark.asyncio
async def test_describe_list_and_the_batch_form(tmp_path: Path) -> None:
    async with serving(tmp_path) as (broker, current, apis, _):
        init = await call(
            apis, InitProducerIdRequest(transactional_id="d", transaction_timeout_ms=5000), 4, 22
        )
        assert init.error_code == 0
        pid, epoch = init.producer_id, init.producer_epoch
        one_set = InitProducerIdRequest(transactional_id="d", producer_id=pid)
        assert (await call(apis, one_set, 4, 22)).error_code == InvalidRequestError.code
        added = await call(
            apis,
            AddPartitionsToTxnRequest(
                v3_and_below_transactional_id="d",
                v3_and_below_producer_id=pid,
                v3_and_below_producer_epoch=epoch,
                v3_and_below_topics=[
                    AddPartitionsToTxnTopic(name="t", partitions=[0]),
                    AddPartitionsToTxnTopic(name="missing", partitions=[3]),
                ],
            ),
            3,
            24,
        )
        codes = {
            (t.name, p.partition_index): p.partition_error_code
            for t in added.results_by_topic_v3_and_below
            for p in t.results_by_partition
        }
        assert codes == {("t", 0): 55, ("missing", 3): 3}  # OPERATION_NOT_ATTEMPTED, UNKNOWN
        txn = AddPartitionsToTxnTransaction(
            transactional_id="d",
            producer_id=pid,
            producer_epoch=epoch,
            verify_only=False,
            topics=[AddPartitionsToTxnTopic(name="t", partitions=[0])],
        )
        batch = await call(apis, AddPartitionsToTxnRequest(transactions=[txn]), 4, 24)
        assert [
            p.partition_error_code
            for p in batch.results_by_transaction[0].topic_results[0].results_by_partition
        ] == [0]
        txn.verify_only = True
        txn.topics = [AddPartitionsToTxnTopic(name="t", partitions=[0, 1])]
        verified = await call(apis, AddPartitionsToTxnRequest(transactions=[txn]), 4, 24)
        (topic,) = verified.results_by_transaction[0].topic_results
        assert [
            (p.partition_index, p.partition_error_code) for p in topic.results_by_partition
        ] == [
            (0, 0),
            (1, 120),  # TRANSACTION_ABORTABLE: not in the transaction
        ]
        described = await call(
            apis, DescribeTransactionsRequest(transactional_ids=["d", "x"]), 0, 65
        )
        d, x = described.transaction_states
        assert (d.error_code, d.transaction_state, d.producer_id, d.transaction_timeout_ms) == (
            0,
            "Ongoing",
            pid,
            5000,
        )
        assert [(t.topic, t.partitions) for t in d.topics] == [("t", [0])]
        assert x.error_code == 105  # TRANSACTIONAL_ID_NOT_FOUND
        listed = await call(apis, ListTransactionsRequest(state_filters=["Ongoing", "Nope"]), 1, 66)
        assert [(s.transactional_id, s.transaction_state) for s in listed.transaction_states] == [
            ("d", "Ongoing")
        ]
        assert listed.unknown_state_filters == ["Nope"]
        ended = await call(
            apis,
            EndTxnRequest(
                transactional_id="d", producer_id=pid, producer_epoch=epoch, committed=True
            ),
            3,
            26,
        )
        assert ended.error_code == 0
        current.coordinator = None
        for body, version, key in (
            (InitProducerIdRequest(transactional_id="d"), 4, 22),
            (EndTxnRequest(transactional_id="d", producer_id=pid, producer_epoch=epoch), 3, 26),
            (ListTransactionsRequest(), 0, 66),
        ):
            assert (
                await call(apis, body, version, key)
            ).error_code == CoordinatorNotAvailableError.code
        await broker.idle()
