"""Planning a Prepare* transaction's markers (one per leader; partitions gone from the metadata
dropped, those without a leader waiting; every partition in exactly one of them, a property
over random leaderships) and what each partition's answer means."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replog.coordinator.transaction_markers import (
    NO_LEADER,
    MarkerOutcome,
    TxnMarker,
    marker_outcome,
    plan_markers,
)
from replog.coordinator.transaction_metadata import TxnMetadata, TxnState
from replog.errors import (
    CorruptRecordError,
    InvalidProducerEpochError,
    InvalidRequiredAcksError,
    KafkaStorageError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    RequestTimedOutError,
    TransactionCoordinatorFencedError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
    error_for_code,
)

PARTITIONS = frozenset({("a", 0), ("a", 1), ("b", 0), ("gone", 0), ("leaderless", 0)})
LEADERS = {("a", 0): 1, ("a", 1): 2, ("b", 0): 1, ("leaderless", 0): NO_LEADER}


def prepared(state: TxnState, version: int = 0) -> TxnMetadata:
    return TxnMetadata(
        "tx",
        7,
        producer_epoch=3,
        state=state,
        partitions=PARTITIONS,
        start_ms=10,
        transaction_version=version,
    )


def test_one_marker_per_leader_with_the_transactions_fields() -> None:
    plan = plan_markers(prepared(TxnState.PREPARE_COMMIT, 2), 9, PARTITIONS, LEADERS.get)
    assert plan.by_broker == {
        1: TxnMarker("tx", 7, 3, True, 9, 2, (("a", 0), ("b", 0))),
        2: TxnMarker("tx", 7, 3, True, 9, 2, (("a", 1),)),
    }
    assert plan.dropped == {("gone", 0)} and plan.waiting == {("leaderless", 0)}
    abort = plan_markers(prepared(TxnState.PREPARE_ABORT), 9, [("a", 1)], LEADERS.get)
    assert abort.by_broker == {2: TxnMarker("tx", 7, 3, False, 9, 0, (("a", 1),))}


@pytest.mark.parametrize(
    "state", [TxnState.EMPTY, TxnState.ONGOING, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT]
)
def test_markers_only_for_a_prepared_transaction(state: TxnState) -> None:
    meta = TxnMetadata("tx", 7, producer_epoch=3, state=state)
    with pytest.raises(AssertionError, match=state.display_name):
        plan_markers(meta, 9, [("a", 0)], LEADERS.get)


@pytest.mark.parametrize(
    ("error", "outcome"),
    [
        (None, MarkerOutcome.DONE),
        (NotLeaderOrFollowerError("x"), MarkerOutcome.RETRY),
        (UnknownTopicOrPartitionError("x"), MarkerOutcome.RETRY),
        (NotEnoughReplicasError("x"), MarkerOutcome.RETRY),
        (RequestTimedOutError("x"), MarkerOutcome.RETRY),
        (KafkaStorageError("x"), MarkerOutcome.RETRY),
        (UnsupportedVersionError("x"), MarkerOutcome.DROPPED),
        (error_for_code(43, "old format"), MarkerOutcome.DROPPED),
        (InvalidProducerEpochError("x"), MarkerOutcome.FENCED),
        (TransactionCoordinatorFencedError("x"), MarkerOutcome.FENCED),
        (InvalidRequiredAcksError("x"), MarkerOutcome.UNEXPECTED),
        (CorruptRecordError("x"), MarkerOutcome.RETRY),
    ],
)
def test_what_an_answer_means(error: object, outcome: MarkerOutcome) -> None:
    assert marker_outcome(error) is outcome  # type: ignore[arg-type]


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.tuples(st.sampled_from("abc"), st.integers(0, 5)),
        st.one_of(st.none(), st.integers(-1, 3)),
        max_size=12,
    ),
    st.booleans(),
)
def test_every_partition_is_planned_exactly_once(
    leaders: dict[tuple[str, int], int | None], commit: bool
) -> None:
    partitions = frozenset(leaders)
    meta = TxnMetadata(
        "tx",
        7,
        producer_epoch=3,
        state=TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT,
        partitions=partitions,
        start_ms=10,
    )
    plan = plan_markers(meta, 9, partitions, leaders.get)
    sent = [tp for marker in plan.by_broker.values() for tp in marker.partitions]
    assert sorted([*sent, *plan.dropped, *plan.waiting]) == sorted(partitions)
    assert all(leaders[tp] is None for tp in plan.dropped)
    assert all(leaders[tp] == NO_LEADER for tp in plan.waiting)
    for broker, marker in plan.by_broker.items():
        assert all(leaders[tp] == broker for tp in marker.partitions)
        assert (marker.commit, marker.coordinator_epoch) == (commit, 9)
