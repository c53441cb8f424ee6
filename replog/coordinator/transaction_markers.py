"""The WriteTxnMarkers a transaction coordinator sends to finish a PrepareCommit or
PrepareAbort transaction, and what each partition's answer means (Kafka's
`TransactionMarkerChannelManager` and `TransactionMarkerRequestCompletionHandler`).

Rules:
- Every partition of the transaction gets one marker (COMMIT or ABORT, the transaction's
  producer id and epoch, the coordinator epoch: the `__transaction_state` partition's leader
  epoch), sent to the partition's current leader; the partitions of one leader go in one
  marker. A partition whose topic or partition is gone from the metadata is dropped (there is
  nothing left to mark, as Kafka drops it); one without a leader waits for the next attempt.
- A partition's answer: none, done; UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER,
  NOT_ENOUGH_REPLICAS(_AFTER_APPEND), REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR, a leader
  that could not be reached (any retriable error), sent again after a backoff, to whichever
  broker leads it then; UNSUPPORTED_FOR_MESSAGE_FORMAT and UNSUPPORTED_VERSION, dropped (the
  partition cannot hold a marker, Kafka gives it up too); INVALID_PRODUCER_EPOCH and
  TRANSACTION_COORDINATOR_FENCED, fenced: a newer coordinator owns the transaction, and this
  one stops sending its markers. Any other error is a fault of the partition's side: retried,
  and the shell logs it at ERROR (Kafka throws there; a coordinator that gives up would leave
  the transaction hanging).
- Once no partition remains, the coordinator appends Complete*.
Pure: leaders come from a lookup; the shell sends, waits and retries.
"""

from __future__ import annotations

import enum
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from replog.common.topic_partition import TopicPartitionKey
from replog.coordinator.transaction_metadata import TxnMetadata, TxnState
from replog.errors import (
    InvalidProducerEpochError,
    KafkaError,
    TransactionCoordinatorFencedError,
    UnsupportedVersionError,
)

__all__ = [
    "NO_LEADER",
    "MarkerOutcome",
    "MarkerPlan",
    "TxnMarker",
    "marker_outcome",
    "plan_markers",
]

NO_LEADER = -1
UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
_DROPPED = frozenset({UNSUPPORTED_FOR_MESSAGE_FORMAT, UnsupportedVersionError.code})
_FENCED = frozenset({InvalidProducerEpochError.code, TransactionCoordinatorFencedError.code})


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """One WriteTxnMarkers entry: a transaction's end for some partitions of one leader."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    transaction_version: int
    partitions: tuple[TopicPartitionKey, ...]


@dataclass(frozen=True, slots=True)
class MarkerPlan:
    """One attempt: the marker for each leader, the partitions dropped (gone from the
    metadata) and those waiting for a leader."""

    by_broker: dict[int, TxnMarker]
    dropped: frozenset[TopicPartitionKey]
    waiting: frozenset[TopicPartitionKey]


class MarkerOutcome(enum.Enum):
    DONE = "done"
    RETRY = "retry"
    DROPPED = "dropped"
    FENCED = "fenced"
    UNEXPECTED = "unexpected"  # retried, and logged as a fault of the partition's side


# The leader of a partition; None when the topic or the partition no longer exists.
Leaders = Callable[[TopicPartitionKey], int | None]


def plan_markers(
    meta: TxnMetadata,
    coordinator_epoch: int,
    remaining: Iterable[TopicPartitionKey],
    leaders: Leaders,
) -> MarkerPlan:
    """The markers of one attempt for the `remaining` partitions of a Prepare* `meta`."""
    if meta.state not in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
        raise AssertionError(
            f"transactional id {meta.transactional_id!r}: markers for state "
            f"{meta.state.display_name}"
        )
    grouped: dict[int, list[TopicPartitionKey]] = defaultdict(list)
    dropped: set[TopicPartitionKey] = set()
    waiting: set[TopicPartitionKey] = set()
    for tp in sorted(remaining):
        leader = leaders(tp)
        if leader is None:
            dropped.add(tp)
        elif leader < 0:
            waiting.add(tp)
        else:
            grouped[leader].append(tp)
    commit = meta.state is TxnState.PREPARE_COMMIT
    return MarkerPlan(
        {
            broker: TxnMarker(
                meta.transactional_id,
                meta.producer_id,
                meta.producer_epoch,
                commit,
                coordinator_epoch,
                meta.transaction_version,
                tuple(tps),
            )
            for broker, tps in sorted(grouped.items())
        },
        frozenset(dropped),
        frozenset(waiting),
    )


def marker_outcome(error: KafkaError | None) -> MarkerOutcome:
    """What a partition's answer to its marker means (module Rules)."""
    if error is None:
        return MarkerOutcome.DONE
    if error.code in _FENCED:
        return MarkerOutcome.FENCED
    if error.code in _DROPPED:
        return MarkerOutcome.DROPPED
    if error.retriable:
        return MarkerOutcome.RETRY
    return MarkerOutcome.UNEXPECTED
