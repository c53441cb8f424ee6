"""The Kafka listener's transaction APIs: each request translated for the broker's
`TransactionCoordinator` (docs/kafka-protocol.md, "Transactions"), its answer into Kafka's
response.

Rules:
- `TXN_SERVED` holds the versions handled, Kafka 4.x's ranges; the broker runtime passes these
  handlers to `kafka_apis.KafkaApis` as an extension. Until the broker's data plane runs (no
  coordinator yet), and after it stops, every entry is COORDINATOR_NOT_AVAILABLE, which
  clients retry.
- AddPartitionsToTxn v0-3 (a client's, one transaction): a partition the image does not have is
  UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED (Kafka's answer), else the
  coordinator's error is every partition's. v4+ (a leader's, a batch of transactions,
  KIP-890): `verify_only` asks whether the partitions are in the transaction (per partition);
  without it the partitions are added, with transaction version 2 from v5 on.
- EndTxn: transaction version 2 from v5 on (every EndTxn bumps the epoch, and v5 answers the
  producer id and epoch to use next).
- DescribeTransactions answers each id from its coordinator (NOT_COORDINATOR elsewhere);
  ListTransactions the transactions of the partitions coordinated here (v1 the duration
  filter, v2 the id pattern), as every Kafka broker answers its own.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping

from replog.common.topic_partition import TopicPartitionKey
from replog.coordinator.transaction_listing import Listing, unknown_states
from replog.errors import (
    CoordinatorNotAvailableError,
    InvalidRequestError,
    KafkaError,
    OperationNotAttemptedError,
    UnknownTopicOrPartitionError,
)
from replog.kafka.connection import KafkaRequest
from replog.kafka.messages import add_offsets_to_txn_response as aotr
from replog.kafka.messages import add_partitions_to_txn_response as aptr
from replog.kafka.messages import describe_transactions_response as dtr
from replog.kafka.messages import end_txn_response as etr
from replog.kafka.messages import list_transactions_response as ltr
from replog.kafka.messages.add_offsets_to_txn_request import AddOffsetsToTxnRequest
from replog.kafka.messages.add_partitions_to_txn_request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
)
from replog.kafka.messages.describe_transactions_request import DescribeTransactionsRequest
from replog.kafka.messages.end_txn_request import EndTxnRequest
from replog.kafka.messages.list_transactions_request import ListTransactionsRequest
from replog.kafka.protocol.codec import Message
from replog.quorum.metadata.image import MetadataImage
from replog.server.transactions.transaction_coordinator import TransactionCoordinator

ADD_PARTITIONS_TO_TXN = 24
ADD_OFFSETS_TO_TXN = 25
END_TXN = 26
DESCRIBE_TRANSACTIONS = 65
LIST_TRANSACTIONS = 66
TXN_SERVED: Mapping[int, tuple[int, int]] = {
    ADD_PARTITIONS_TO_TXN: (0, 5),
    ADD_OFFSETS_TO_TXN: (0, 4),
    END_TXN: (0, 5),
    DESCRIBE_TRANSACTIONS: (0, 0),
    LIST_TRANSACTIONS: (0, 2),
}
# The first versions of: AddPartitionsToTxn's batch form (KIP-890 part 1), and transaction
# version 2 in AddPartitionsToTxn and EndTxn (KIP-890 part 2).
ADD_PARTITIONS_BATCH_VERSION = 4
TV2_ADD_PARTITIONS_VERSION = 5
TV2_END_TXN_VERSION = 5


class KafkaTxnApis:
    """The transaction handlers of one broker's Kafka listeners."""

    def __init__(
        self,
        broker_id: int,
        coordinator: Callable[[], TransactionCoordinator | None],
        image: Callable[[], MetadataImage],
    ) -> None:
        self.broker_id = broker_id
        self._coordinator = coordinator
        self._image = image

    @property
    def served(self) -> Mapping[int, tuple[int, int]]:
        return TXN_SERVED

    def unavailable(self) -> CoordinatorNotAvailableError:
        return CoordinatorNotAvailableError(
            f"broker {self.broker_id} coordinates no transactions yet (its data plane is "
            "starting) or any more (it is stopping)"
        )

    async def handle(self, request: KafkaRequest, listener_name: str) -> Message:
        body, version = request.body, request.api_version
        coordinator = self._coordinator()
        if isinstance(body, AddPartitionsToTxnRequest):
            if version >= ADD_PARTITIONS_BATCH_VERSION:
                return await self.add_partitions_batch(coordinator, body, version)
            return await self.add_partitions(coordinator, body)
        if isinstance(body, AddOffsetsToTxnRequest):
            error = (
                self.unavailable()
                if coordinator is None
                else await coordinator.add_offsets(
                    body.transactional_id, body.producer_id, body.producer_epoch, body.group_id
                )
            )
            return aotr.AddOffsetsToTxnResponse(error_code=_code(error))
        if isinstance(body, EndTxnRequest):
            if coordinator is None:
                return etr.EndTxnResponse(error_code=self.unavailable().code)
            answer = await coordinator.end_txn(
                body.transactional_id,
                body.producer_id,
                body.producer_epoch,
                commit=body.committed,
                transaction_version=2 if version >= TV2_END_TXN_VERSION else 0,
            )
            return etr.EndTxnResponse(
                error_code=_code(answer.error),
                producer_id=answer.producer_id,
                producer_epoch=answer.producer_epoch,
            )
        if isinstance(body, DescribeTransactionsRequest):
            return self.describe_transactions(coordinator, body)
        if isinstance(body, ListTransactionsRequest):
            return self.list_transactions(coordinator, body)
        raise InvalidRequestError(f"no transaction handler for {type(body).__name__}")

    async def add_partitions(
        self, coordinator: TransactionCoordinator | None, body: AddPartitionsToTxnRequest
    ) -> aptr.AddPartitionsToTxnResponse:
        """A client's AddPartitionsToTxn (v0-3): one error per partition (module Rules)."""
        topics = body.v3_and_below_topics
        asked = _partitions(topics)
        errors: dict[TopicPartitionKey, KafkaError | None]
        unknown = [tp for tp in asked if not self._exists(tp)]
        if unknown:
            not_attempted = OperationNotAttemptedError("another partition of the request failed")
            errors = {
                tp: UnknownTopicOrPartitionError(f"{tp[0]}-{tp[1]} does not exist")
                if tp in unknown
                else not_attempted
                for tp in asked
            }
        else:
            error = (
                self.unavailable()
                if coordinator is None
                else await coordinator.add_partitions(
                    body.v3_and_below_transactional_id,
                    body.v3_and_below_producer_id,
                    body.v3_and_below_producer_epoch,
                    asked,
                    transaction_version=0,
                )
            )
            errors = dict.fromkeys(asked, error)
        return aptr.AddPartitionsToTxnResponse(results_by_topic_v3_and_below=_results(errors))

    async def add_partitions_batch(
        self,
        coordinator: TransactionCoordinator | None,
        body: AddPartitionsToTxnRequest,
        version: int,
    ) -> aptr.AddPartitionsToTxnResponse:
        """A leader's AddPartitionsToTxn (v4+), per transaction (module Rules)."""
        answers = []
        for txn in body.transactions:
            asked = _partitions(txn.topics)
            errors: Mapping[TopicPartitionKey, KafkaError | None]
            if coordinator is None:
                errors = dict.fromkeys(asked, self.unavailable())
            elif txn.verify_only:
                errors = coordinator.verify_partitions(
                    txn.transactional_id, txn.producer_id, txn.producer_epoch, asked
                )
            else:
                error = await coordinator.add_partitions(
                    txn.transactional_id,
                    txn.producer_id,
                    txn.producer_epoch,
                    asked,
                    transaction_version=2 if version >= TV2_ADD_PARTITIONS_VERSION else 0,
                )
                errors = dict.fromkeys(asked, error)
            answers.append(
                aptr.AddPartitionsToTxnResult(
                    transactional_id=txn.transactional_id, topic_results=_results(errors)
                )
            )
        return aptr.AddPartitionsToTxnResponse(results_by_transaction=answers)

    def describe_transactions(
        self, coordinator: TransactionCoordinator | None, body: DescribeTransactionsRequest
    ) -> dtr.DescribeTransactionsResponse:
        if coordinator is None:
            unavailable = self.unavailable()
            return dtr.DescribeTransactionsResponse(
                transaction_states=[
                    dtr.TransactionState(error_code=unavailable.code, transactional_id=tid)
                    for tid in body.transactional_ids
                ]
            )
        states = []
        for found in coordinator.describe_transactions(body.transactional_ids):
            meta = found.meta
            if meta is None:
                states.append(
                    dtr.TransactionState(
                        error_code=_code(found.error), transactional_id=found.transactional_id
                    )
                )
                continue
            by_topic: dict[str, list[int]] = defaultdict(list)
            for topic, partition in sorted(meta.partitions):
                by_topic[topic].append(partition)
            states.append(
                dtr.TransactionState(
                    transactional_id=meta.transactional_id,
                    transaction_state=meta.state.display_name,
                    transaction_timeout_ms=meta.timeout_ms,
                    transaction_start_time_ms=meta.start_ms,
                    producer_id=meta.producer_id,
                    producer_epoch=meta.producer_epoch,
                    topics=[
                        dtr.TopicData(topic=topic, partitions=partitions)
                        for topic, partitions in by_topic.items()
                    ],
                )
            )
        return dtr.DescribeTransactionsResponse(transaction_states=states)

    def list_transactions(
        self, coordinator: TransactionCoordinator | None, body: ListTransactionsRequest
    ) -> ltr.ListTransactionsResponse:
        listing = Listing(
            frozenset(body.state_filters),
            frozenset(body.producer_id_filters),
            body.duration_filter,
            body.transactional_id_pattern,
        )
        if coordinator is None:
            return ltr.ListTransactionsResponse(error_code=self.unavailable().code)
        error, listed = coordinator.list_transactions(listing)
        return ltr.ListTransactionsResponse(
            error_code=_code(error),
            unknown_state_filters=unknown_states(listing),
            transaction_states=[
                ltr.TransactionState(
                    transactional_id=meta.transactional_id,
                    producer_id=meta.producer_id,
                    transaction_state=meta.state.display_name,
                )
                for meta in listed
            ],
        )

    def _exists(self, tp: TopicPartitionKey) -> bool:
        topic = self._image().topics.by_name.get(tp[0])
        return topic is not None and tp[1] in topic.partitions


def _partitions(topics: Iterable[AddPartitionsToTxnTopic]) -> list[TopicPartitionKey]:
    return [(topic.name, p) for topic in topics for p in topic.partitions]


def _results(
    errors: Mapping[TopicPartitionKey, KafkaError | None],
) -> list[aptr.AddPartitionsToTxnTopicResult]:
    by_topic: dict[str, list[aptr.AddPartitionsToTxnPartitionResult]] = defaultdict(list)
    for (topic, partition), error in errors.items():
        by_topic[topic].append(
            aptr.AddPartitionsToTxnPartitionResult(
                partition_index=partition, partition_error_code=_code(error)
            )
        )
    return [
        aptr.AddPartitionsToTxnTopicResult(name=topic, results_by_partition=results)
        for topic, results in by_topic.items()
    ]


def _code(error: KafkaError | None) -> int:
    return 0 if error is None else error.code
