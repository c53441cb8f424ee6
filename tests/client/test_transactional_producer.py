"""A Producer with a transactional.id against a scripted Kafka listener (`FakeKafkaBroker`),
as Kafka 4.x's producer speaks to a broker: FindCoordinator key type 1, InitProducerId with
the transactional id and timeout, AddPartitionsToTxn before a partition's first batch (version
1) or Produce v12 adding it (version 2, the broker's finalized transaction.version),
transactional batches, AddOffsetsToTxn and TxnOffsetCommit, EndTxn; misuse, fencing and
abortable errors. The answers are Kafka's, scripted."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from replog import Consumer, ConsumerGroupMetadata, OffsetAndMetadata, Producer, TopicPartition
from replog.aio import Producer as AsyncProducer
from replog.errors import (
    InvalidGroupIdError,
    KafkaError,
    KafkaTimeoutError,
    MalformedResponseError,
    ProducerFencedError,
    TransactionAbortedError,
    TransactionStateError,
    error_for_code,
)
from replog.kafka.messages.add_offsets_to_txn_response import AddOffsetsToTxnResponse
from replog.kafka.messages.add_partitions_to_txn_response import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnTopicResult,
)
from replog.kafka.messages.api_versions_response import (
    ApiVersion,
    ApiVersionsResponse,
    FinalizedFeatureKey,
)
from replog.kafka.messages.end_txn_response import EndTxnResponse
from replog.kafka.messages.find_coordinator_response import Coordinator, FindCoordinatorResponse
from replog.kafka.messages.init_producer_id_response import InitProducerIdResponse
from replog.kafka.messages.produce_response import (
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)
from replog.kafka.messages.txn_offset_commit_response import (
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)
from replog.kafka.protocol.framing import REQUESTS
from replog.record import read_header
from replog.testing import FakeKafkaBroker, running_fake_kafka_broker

T0 = TopicPartition("t", 0)
PRODUCER: dict[str, Any] = {"max_block_ms": 5000, "linger_ms": 0, "request_timeout_ms": 3000}


def coordinator(port: int):  # type: ignore[no-untyped-def]
    def answer(request: Any, version: int) -> FindCoordinatorResponse:
        return FindCoordinatorResponse(
            coordinators=[
                Coordinator(key=k, node_id=0, host="127.0.0.1", port=port)
                for k in request.coordinator_keys
            ]
        )

    return answer


def partitions_added(request: Any, version: int) -> AddPartitionsToTxnResponse:
    return AddPartitionsToTxnResponse(
        results_by_topic_v3_and_below=[
            AddPartitionsToTxnTopicResult(
                name=topic.name,
                results_by_partition=[
                    AddPartitionsToTxnPartitionResult(partition_index=p) for p in topic.partitions
                ],
            )
            for topic in request.v3_and_below_topics
        ]
    )


def offsets_committed(request: Any, version: int) -> TxnOffsetCommitResponse:
    return TxnOffsetCommitResponse(
        topics=[
            TxnOffsetCommitResponseTopic(
                name=topic.name,
                partitions=[
                    TxnOffsetCommitResponsePartition(partition_index=p.partition_index)
                    for p in topic.partitions
                ],
            )
            for topic in request.topics
        ]
    )


def produced(request: Any, version: int) -> ProduceResponse:
    return ProduceResponse(
        responses=[
            TopicProduceResponse(
                name=topic.name,
                partition_responses=[
                    PartitionProduceResponse(index=p.index, base_offset=0)
                    for p in topic.partition_data
                ],
            )
            for topic in request.topic_data
        ]
    )


def api_versions(transaction_version: int) -> ApiVersionsResponse:
    return ApiVersionsResponse(
        api_keys=[
            ApiVersion(api_key=k, min_version=c.MIN_VERSION, max_version=c.MAX_VERSION)
            for k, c in sorted(REQUESTS.items())
        ],
        finalized_features=[
            FinalizedFeatureKey(
                name="transaction.version",
                max_version_level=transaction_version,
                min_version_level=transaction_version,
            )
        ],
    )


@pytest.fixture
def broker() -> Iterator[FakeKafkaBroker]:
    with running_fake_kafka_broker() as fake:
        fake.answer("Metadata", fake.metadata("t"))
        fake.answer("FindCoordinator", coordinator(fake.port))
        fake.answer("InitProducerId", InitProducerIdResponse(producer_id=42, producer_epoch=0))
        fake.answer("AddPartitionsToTxn", partitions_added)
        fake.answer("AddOffsetsToTxn", AddOffsetsToTxnResponse())
        fake.answer("TxnOffsetCommit", offsets_committed)
        fake.answer("Produce", produced)
        fake.answer("EndTxn", EndTxnResponse(producer_id=-1, producer_epoch=-1))
        yield fake


def asked(broker: FakeKafkaBroker, api: str | None = None) -> list[tuple[str, Any, int]]:
    return [r for r in broker.requests if api is None or r[0] == api]


def produced_batches(broker: FakeKafkaBroker) -> list[tuple[int, Any]]:
    """(version, header) of every batch produced."""
    return [
        (version, read_header(p.records))
        for _, request, version in asked(broker, "Produce")
        for topic in request.topic_data
        for p in topic.partition_data
    ]


def test_a_version_1_transaction_from_init_to_commit(broker: FakeKafkaBroker) -> None:
    with Producer(
        bootstrap_servers=broker.address,
        transactional_id="tx",
        transaction_timeout_ms=30_000,
        **PRODUCER,
    ) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send("t", b"a", partition=0)
        producer.send("t", b"b", partition=0).get(timeout=5)
        producer.commit_transaction()
    (_, find, _), *_ = asked(broker, "FindCoordinator")
    assert find.key_type == 1 and find.coordinator_keys == ["tx"]
    (_, init, init_version), *_ = asked(broker, "InitProducerId")
    assert (init.transactional_id, init.transaction_timeout_ms) == ("tx", 30_000)
    assert init_version <= 5
    names = [name for name, _, _ in broker.requests if name != "ApiVersions"]
    assert names.index("AddPartitionsToTxn") < names.index("Produce") < names.index("EndTxn")
    (_, add, add_version), *_ = asked(broker, "AddPartitionsToTxn")
    assert add_version <= 3
    assert (add.v3_and_below_transactional_id, add.v3_and_below_producer_id) == ("tx", 42)
    assert [(t.name, t.partitions) for t in add.v3_and_below_topics] == [("t", [0])]
    for version, header in produced_batches(broker):
        assert version <= 11  # a version 1 producer stays below Produce v12
        assert header.is_transactional and header.producer_id == 42
    assert all(r.transactional_id == "tx" for _, r, _ in asked(broker, "Produce"))
    ((_, end, end_version),) = asked(broker, "EndTxn")
    assert end.committed and end.producer_id == 42 and end_version <= 4


def test_version_2_adds_partitions_by_producing_and_takes_endtxns_epoch(
    broker: FakeKafkaBroker,
) -> None:
    broker.answer("ApiVersions", api_versions(2))
    broker.answer(
        "EndTxn",
        EndTxnResponse(producer_id=42, producer_epoch=1),
        EndTxnResponse(producer_id=42, producer_epoch=2),
    )
    with Producer(bootstrap_servers=broker.address, transactional_id="tx", **PRODUCER) as producer:
        producer.init_transactions()
        for _ in range(2):
            producer.begin_transaction()
            producer.send("t", b"x", partition=0).get(timeout=5)
            producer.commit_transaction()
    assert not asked(broker, "AddPartitionsToTxn")
    batches = produced_batches(broker)
    assert [v for v, _ in batches] == [12, 12]
    # The second transaction's batch: the epoch EndTxn answered, sequences from 0 again.
    assert [(h.producer_epoch, h.base_sequence) for _, h in batches] == [(0, 0), (1, 0)]
    assert [v for _, _, v in asked(broker, "EndTxn")] == [5, 5]


def test_offsets_go_to_the_group_coordinator_in_the_transaction(broker: FakeKafkaBroker) -> None:
    with Producer(bootstrap_servers=broker.address, transactional_id="tx", **PRODUCER) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send_offsets_to_transaction(
            {T0: OffsetAndMetadata(17, "m")}, ConsumerGroupMetadata("billing", 3, "member-1")
        )
        producer.commit_transaction()
    ((_, add, _),) = asked(broker, "AddOffsetsToTxn")
    assert (add.transactional_id, add.group_id, add.producer_id) == ("tx", "billing", 42)
    group_find = [r for _, r, _ in asked(broker, "FindCoordinator") if r.key_type == 0]
    assert group_find and group_find[0].coordinator_keys == ["billing"]
    ((_, commit, _),) = asked(broker, "TxnOffsetCommit")
    assert (commit.group_id, commit.generation_id, commit.member_id) == ("billing", 3, "member-1")
    (topic,) = commit.topics
    assert [
        (p.partition_index, p.committed_offset, p.committed_metadata) for p in topic.partitions
    ] == [(0, 17, "m")]
    ((_, end, _),) = asked(broker, "EndTxn")
    assert end.committed  # offsets alone make a transaction to end


def test_misuse_is_refused_at_once_naming_the_call(broker: FakeKafkaBroker) -> None:
    with Producer(bootstrap_servers=broker.address, transactional_id="tx", **PRODUCER) as producer:
        with pytest.raises(TransactionStateError, match="begin_transaction needs state READY"):
            producer.begin_transaction()  # before init_transactions
        producer.init_transactions()
        with pytest.raises(TransactionStateError, match="send needs state IN_TRANSACTION"):
            producer.send("t", b"x", partition=0)
        with pytest.raises(TransactionStateError, match="commit_transaction needs"):
            producer.commit_transaction()
    with (
        Producer(bootstrap_servers=broker.address, **PRODUCER) as plain,
        pytest.raises(TransactionStateError, match=r"no transactional\.id"),
    ):
        plain.begin_transaction()
    assert not asked(broker, "Produce") and not asked(broker, "EndTxn")


def test_a_fenced_producer_fails_for_good(broker: FakeKafkaBroker) -> None:
    broker.answer("EndTxn", EndTxnResponse(error_code=ProducerFencedError.code))
    with Producer(bootstrap_servers=broker.address, transactional_id="tx", **PRODUCER) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send("t", b"x", partition=0).get(timeout=5)
        with pytest.raises(ProducerFencedError):
            producer.commit_transaction()
        for call in (producer.begin_transaction, producer.abort_transaction):
            with pytest.raises(ProducerFencedError):
                call()


def test_an_abortable_produce_error_allows_abort_then_a_new_transaction(
    broker: FakeKafkaBroker,
) -> None:
    refused = ProduceResponse(
        responses=[
            TopicProduceResponse(
                name="t",
                partition_responses=[
                    PartitionProduceResponse(index=0, error_code=29)  # TOPIC_AUTHORIZATION_FAILED
                ],
            )
        ]
    )
    broker.answer("Produce", refused, produced)
    with Producer(bootstrap_servers=broker.address, transactional_id="tx", **PRODUCER) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        failed = producer.send("t", b"x", partition=0)
        with pytest.raises(type(error_for_code(29))):
            failed.get(timeout=5)
        with pytest.raises(type(error_for_code(29))):
            producer.commit_transaction()  # the transaction cannot commit
        producer.abort_transaction()
        producer.begin_transaction()
        producer.send("t", b"y", partition=0).get(timeout=5)
        producer.commit_transaction()
    ends = [r.committed for _, r, _ in asked(broker, "EndTxn")]
    assert ends == [False, True]
    # Version 1: the failed batch left its sequences unknown, so the abort bumped the epoch
    # with an InitProducerId naming the producer's id and epoch (KIP-360).
    inits = [(r.producer_id, r.producer_epoch) for _, r, _ in asked(broker, "InitProducerId")]
    assert inits == [(-1, -1), (42, 0)]


def test_abort_fails_records_not_yet_sent(broker: FakeKafkaBroker) -> None:
    with Producer(
        bootstrap_servers=broker.address, transactional_id="tx", **{**PRODUCER, "linger_ms": 60_000}
    ) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        waiting = producer.send("t", b"x", partition=0)
        producer.abort_transaction()
        with pytest.raises(TransactionAbortedError):
            waiting.get(timeout=5)
    assert not asked(broker, "Produce")


def test_the_asyncio_producer_has_the_same_calls(broker: FakeKafkaBroker) -> None:
    async def run() -> None:
        async with AsyncProducer(
            bootstrap_servers=broker.address, transactional_id="tx", **PRODUCER
        ) as producer:
            await producer.init_transactions()
            producer.begin_transaction()
            await producer.send("t", b"x", partition=0)
            await producer.send_offsets_to_transaction({T0: OffsetAndMetadata(3)}, "billing")
            await producer.abort_transaction()

    asyncio.run(run())
    ((_, commit, _),) = asked(broker, "TxnOffsetCommit")
    assert (commit.group_id, commit.generation_id, commit.member_id) == ("billing", -1, "")
    ((_, end, _),) = asked(broker, "EndTxn")
    assert not end.committed


def test_a_consumers_group_metadata_is_what_offsets_commit_as(broker: FakeKafkaBroker) -> None:
    with (
        Consumer(bootstrap_servers=broker.address) as loner,
        pytest.raises(InvalidGroupIdError, match=r"no group\.id"),
    ):
        loner.group_metadata()
    with Consumer(
        bootstrap_servers=broker.address, group_id="billing", group_instance_id="i-1"
    ) as member:
        assert member.group_metadata() == ConsumerGroupMetadata("billing", -1, "", "i-1")


def test_coordinator_answers_to_retry_are_retried_and_a_moved_coordinator_found_again(
    broker: FakeKafkaBroker,
) -> None:
    broker.answer(
        "EndTxn",
        EndTxnResponse(error_code=51),  # CONCURRENT_TRANSACTIONS: asked again
        EndTxnResponse(error_code=16),  # NOT_COORDINATOR: found again, then asked again
        EndTxnResponse(),
    )
    with Producer(bootstrap_servers=broker.address, transactional_id="tx", **PRODUCER) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send("t", b"x", partition=0).get(timeout=5)
        producer.commit_transaction()
        producer.begin_transaction()  # READY again
    assert len(asked(broker, "EndTxn")) == 3
    finds = [r for _, r, _ in asked(broker, "FindCoordinator") if r.key_type == 1]
    assert len(finds) == 2


def test_a_coordinator_answer_naming_partitions_not_asked_for_is_malformed(
    broker: FakeKafkaBroker,
) -> None:
    broker.answer(
        "TxnOffsetCommit",
        TxnOffsetCommitResponse(
            topics=[
                TxnOffsetCommitResponseTopic(
                    name="other", partitions=[TxnOffsetCommitResponsePartition(partition_index=0)]
                )
            ]
        ),
    )
    with Producer(bootstrap_servers=broker.address, transactional_id="tx", **PRODUCER) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        with pytest.raises(MalformedResponseError, match="TxnOffsetCommit for other-0"):
            producer.send_offsets_to_transaction({T0: OffsetAndMetadata(1)}, "billing")


def test_a_commit_that_timed_out_is_resumed_by_the_next_call(broker: FakeKafkaBroker) -> None:
    broker.answer("EndTxn", EndTxnResponse(error_code=51))  # CONCURRENT_TRANSACTIONS, always
    settings = {**PRODUCER, "max_block_ms": 400, "retry_backoff_ms": 50}
    with Producer(bootstrap_servers=broker.address, transactional_id="tx", **settings) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send("t", b"x", partition=0).get(timeout=5)
        with pytest.raises(
            KafkaTimeoutError, match=r"EndTxn did not succeed within max\.block\.ms"
        ):
            producer.commit_transaction()
        broker.answer("EndTxn", EndTxnResponse())
        producer.commit_transaction()  # the same commit, finished
        producer.begin_transaction()
    assert all(r.committed for _, r, _ in asked(broker, "EndTxn"))


def test_a_coordinator_lookup_refused_for_the_transactional_id_is_fatal(
    broker: FakeKafkaBroker,
) -> None:
    # What a broker serving no transaction coordinator answers.
    refused = FindCoordinatorResponse(
        coordinators=[Coordinator(key="tx", node_id=-1, host="", port=-1, error_code=53)]
    )
    broker.answer("FindCoordinator", refused)
    with Producer(bootstrap_servers=broker.address, transactional_id="tx", **PRODUCER) as producer:
        # TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53): a generic error of the table's.
        with pytest.raises(KafkaError) as refusal:
            producer.init_transactions()
        assert refusal.value.code == 53
        with pytest.raises(KafkaError) as again:
            producer.begin_transaction()
        assert again.value.code == 53
    assert not asked(broker, "InitProducerId")


def test_init_transactions_that_timed_out_is_resumed(broker: FakeKafkaBroker) -> None:
    broker.answer("InitProducerId", InitProducerIdResponse(error_code=51))  # always concurrent
    settings = {**PRODUCER, "max_block_ms": 300, "retry_backoff_ms": 50}
    with Producer(bootstrap_servers=broker.address, transactional_id="tx", **settings) as producer:
        with pytest.raises(KafkaTimeoutError, match="InitProducerId"):
            producer.init_transactions()
        broker.answer("InitProducerId", InitProducerIdResponse(producer_id=42, producer_epoch=0))
        producer.init_transactions()
        producer.begin_transaction()


def test_an_abortable_error_fails_the_batches_still_queued(broker: FakeKafkaBroker) -> None:
    broker.answer("Metadata", broker.metadata("t", partitions=2))

    def add_only_partition_0(request: Any, version: int) -> AddPartitionsToTxnResponse:
        (topic,) = request.v3_and_below_topics
        return AddPartitionsToTxnResponse(
            results_by_topic_v3_and_below=[
                AddPartitionsToTxnTopicResult(
                    name=topic.name,
                    results_by_partition=[
                        # CONCURRENT_TRANSACTIONS for partition 1: asked again and again
                        AddPartitionsToTxnPartitionResult(
                            partition_index=p, partition_error_code=51 if p else 0
                        )
                        for p in topic.partitions
                    ],
                )
            ]
        )

    broker.answer("AddPartitionsToTxn", add_only_partition_0)
    refused = ProduceResponse(
        responses=[
            TopicProduceResponse(
                name="t",
                partition_responses=[PartitionProduceResponse(index=0, error_code=29)],
            )
        ]
    )
    broker.answer("Produce", refused)
    with Producer(bootstrap_servers=broker.address, transactional_id="tx", **PRODUCER) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        waiting = producer.send("t", b"later", partition=1)  # its partition is never added
        failed = producer.send("t", b"x", partition=0)
        with pytest.raises(type(error_for_code(29))):
            failed.get(timeout=5)
        with pytest.raises(type(error_for_code(29))):
            waiting.get(timeout=5)  # failed with the transaction's error, not sent
        producer.abort_transaction()
    sent = [
        p.index
        for _, r, _ in asked(broker, "Produce")
        for t in r.topic_data
        for p in t.partition_data
    ]
    assert sent == [0]


def test_the_group_coordinator_is_kept_across_transactions(broker: FakeKafkaBroker) -> None:
    with Producer(bootstrap_servers=broker.address, transactional_id="tx", **PRODUCER) as producer:
        producer.init_transactions()
        for offset in (5, 9):
            producer.begin_transaction()
            producer.send_offsets_to_transaction({T0: OffsetAndMetadata(offset)}, "billing")
            producer.commit_transaction()
    group_finds = [r for _, r, _ in asked(broker, "FindCoordinator") if r.key_type == 0]
    assert len(group_finds) == 1
    assert [
        c.topics[0].partitions[0].committed_offset for _, c, _ in asked(broker, "TxnOffsetCommit")
    ] == [5, 9]
