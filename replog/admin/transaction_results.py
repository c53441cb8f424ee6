"""What the transaction admin calls return, and the requests they send: Kafka's
`TransactionListing`, `TransactionDescription`, `ProducerState` and `AbortTransactionSpec`,
read from ListTransactions, DescribeTransactions, DescribeProducers and WriteTxnMarkers.

Rules:
- Pure: answers in, results out; the calls themselves are `kafka_admin_client`'s.
- Kafka's "absent" values (-1 start time, coordinator epoch, transaction start offset) are None,
  as Kafka's admin client gives them as empty optionals.
- An item's error is raised as its typed error naming the transactional id or partition; a
  state filter the broker does not know is INVALID_REQUEST naming it.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TypeVar

from replog.common import TopicPartition
from replog.errors import InvalidRequestError, KafkaError, UnknownServerError, answer_error
from replog.kafka.messages import describe_producers_response as dpr
from replog.kafka.messages import describe_transactions_response as dtr
from replog.kafka.messages import list_transactions_response as ltr
from replog.kafka.messages import write_txn_markers_response as wtr
from replog.kafka.messages.describe_producers_request import DescribeProducersRequest, TopicRequest
from replog.kafka.messages.list_transactions_request import ListTransactionsRequest
from replog.kafka.messages.write_txn_markers_request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)

ABSENT = -1  # Kafka's "none" in these answers
T = TypeVar("T")


@dataclass(frozen=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str  # Kafka's state name: Ongoing, CompleteCommit, ...
    coordinator_id: int  # the broker that listed it


@dataclass(frozen=True)
class TransactionDescription:
    coordinator_id: int
    transactional_id: str
    state: str
    timeout_ms: int
    start_time_ms: int | None  # None while no transaction is open
    producer_id: int
    producer_epoch: int
    partitions: tuple[TopicPartition, ...]  # those in the transaction, or awaiting a marker


@dataclass(frozen=True)
class ProducerState:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp_ms: int
    coordinator_epoch: int | None
    current_txn_start_offset: int | None  # None: no open transaction on the partition


@dataclass(frozen=True)
class AbortSpec:
    """Kafka's `AbortTransactionSpec`: the ABORT marker to write on one partition."""

    partition: TopicPartition
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int


def the_one(found: Sequence[T], answered: str, what: str) -> T:
    """The single item of an answer about one key; any other count is the peer's bug, named:
    "`answered` answered N `what`"."""
    if len(found) != 1:
        raise UnknownServerError(f"{answered} answered {len(found)} {what}")
    return found[0]


def _present(value: int) -> int | None:
    return None if value == ABSENT else value


def list_transactions_request(
    states: Collection[str], producer_ids: Collection[int], duration_ms: int | None
) -> ListTransactionsRequest:
    return ListTransactionsRequest(
        state_filters=sorted(states),
        producer_id_filters=sorted(producer_ids),
        duration_filter=ABSENT if duration_ms is None else duration_ms,
    )


def transaction_listings(
    answer: ltr.ListTransactionsResponse, coordinator_id: int, address: str
) -> list[TransactionListing]:
    """The listings of one broker; its error (COORDINATOR_LOAD_IN_PROGRESS, ...) raised."""
    failed = answer_error(
        answer.error_code, None, f"from broker {coordinator_id} at {address} listing transactions"
    )
    if failed is not None:
        raise failed
    if answer.unknown_state_filters:
        # The broker matches nothing to a name it does not know: an empty list would hide it.
        raise InvalidRequestError(
            f"broker {coordinator_id} at {address} knows no transaction state "
            f"{', '.join(map(repr, answer.unknown_state_filters))}"
        )
    return [
        TransactionListing(s.transactional_id, s.producer_id, s.transaction_state, coordinator_id)
        for s in answer.transaction_states
    ]


def transaction_description(
    answer: dtr.DescribeTransactionsResponse, transactional_id: str, coordinator_id: int
) -> TransactionDescription:
    """The description of `transactional_id`; its error raised (TRANSACTIONAL_ID_NOT_FOUND,
    NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, ...) naming the id."""
    state = the_one(
        [s for s in answer.transaction_states if s.transactional_id == transactional_id],
        f"coordinator {coordinator_id}",
        f"descriptions of transactional id {transactional_id!r}",
    )
    failed = answer_error(
        state.error_code,
        None,
        f"for transactional id {transactional_id!r} from coordinator {coordinator_id}",
    )
    if failed is not None:
        raise failed
    return TransactionDescription(
        coordinator_id=coordinator_id,
        transactional_id=transactional_id,
        state=state.transaction_state,
        timeout_ms=state.transaction_timeout_ms,
        start_time_ms=_present(state.transaction_start_time_ms),
        producer_id=state.producer_id,
        producer_epoch=state.producer_epoch,
        partitions=tuple(
            sorted(TopicPartition(t.topic, p) for t in state.topics for p in t.partitions)
        ),
    )


def describe_producers_request(partitions: Sequence[TopicPartition]) -> DescribeProducersRequest:
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return DescribeProducersRequest(
        topics=[TopicRequest(name=t, partition_indexes=ps) for t, ps in by_topic.items()]
    )


def producer_states(
    answer: dpr.DescribeProducersResponse, wanted: Collection[TopicPartition], address: str
) -> dict[TopicPartition, list[ProducerState] | KafkaError]:
    """Per partition asked for, its active producers or its error; a partition the answer left
    out is an error naming it."""
    found: dict[TopicPartition, list[ProducerState] | KafkaError] = {}
    for topic in answer.topics:
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            about = f"describing the producers of {tp.topic}-{tp.partition} at {address}"
            failed = answer_error(p.error_code, p.error_message, about)
            found[tp] = failed or [
                ProducerState(
                    s.producer_id,
                    s.producer_epoch,
                    s.last_sequence,
                    s.last_timestamp,
                    _present(s.coordinator_epoch),
                    _present(s.current_txn_start_offset),
                )
                for s in p.active_producers
            ]
    for tp in wanted:
        if tp not in found:
            found[tp] = UnknownServerError(
                f"{address} did not describe the producers of {tp.topic}-{tp.partition}"
            )
    return found


def abort_request(spec: AbortSpec) -> WriteTxnMarkersRequest:
    """WriteTxnMarkers with one ABORT marker, as Kafka's admin abortTransaction sends it."""
    return WriteTxnMarkersRequest(
        markers=[
            WritableTxnMarker(
                producer_id=spec.producer_id,
                producer_epoch=spec.producer_epoch,
                transaction_result=False,
                topics=[
                    WritableTxnMarkerTopic(
                        name=spec.partition.topic, partition_indexes=[spec.partition.partition]
                    )
                ],
                coordinator_epoch=spec.coordinator_epoch,
            )
        ]
    )


def abort_result(answer: wtr.WriteTxnMarkersResponse, spec: AbortSpec, address: str) -> None:
    """Raises the marker's error on the partition (or its absence from the answer)."""
    tp = spec.partition
    for marker in answer.markers:
        for topic in marker.topics:
            for p in topic.partitions:
                if (topic.name, p.partition_index) == tp and marker.producer_id == spec.producer_id:
                    failed = answer_error(
                        p.error_code,
                        None,
                        f"aborting producer {spec.producer_id}'s transaction on "
                        f"{tp.topic}-{tp.partition} at {address}",
                    )
                    if failed is not None:
                        raise failed
                    return
    raise UnknownServerError(
        f"{address} did not answer the abort marker of {tp.topic}-{tp.partition}"
    )
