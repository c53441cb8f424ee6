"""The pure parts of `replog transactions`: Kafka's hanging-transaction rule (a candidate is an
open transaction silent past the window; it hangs when no transactional id is listed for its
producer, the id is unknown, or the id's transaction does not hold the partition), the abort
found at a start offset, Kafka's columns and "None"/-1 for absent values, the answers read
into results (an item's error raised naming it), and which partitions find-hanging searches
(a broker's replicas of topics not internal, or the topic named)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from replog.admin import transaction_results as results
from replog.admin.transaction_results import AbortSpec, ProducerState, TransactionDescription
from replog.cli import transactions as cli
from replog.common import TopicPartition
from replog.errors import (
    CoordinatorNotAvailableError,
    InvalidProducerEpochError,
    InvalidRequestError,
    NoOpenTransactionError,
    NotLeaderOrFollowerError,
    TransactionalIdNotFoundError,
    UnknownServerError,
)
from replog.kafka.messages import describe_producers_response as dpr
from replog.kafka.messages import describe_transactions_response as dtr
from replog.kafka.messages import list_transactions_response as ltr
from replog.kafka.messages import write_txn_markers_response as wtr

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
NOW = 10_000_000


def state(
    pid: int, start: int | None, last_ms: int, coordinator_epoch: int | None = 3
) -> ProducerState:
    return ProducerState(pid, 2, 5, last_ms, coordinator_epoch, start)


def described(tid: str, *partitions: TopicPartition) -> TransactionDescription:
    return TransactionDescription(1, tid, "Ongoing", 60_000, NOW - 5, 9, 0, partitions)


def test_candidates_are_open_transactions_silent_past_the_window() -> None:
    producers = {
        T0: [state(1, 40, NOW - 61_000), state(2, None, NOW - 99_000), state(3, 7, NOW - 60_000)],
        T1: [state(4, 0, NOW - 120_000)],
    }
    found = cli.candidates(producers, NOW, 60_000)
    assert [(tp, p.producer_id) for tp, p in found] == [(T0, 1), (T1, 4)]


def test_hanging_when_no_id_an_unknown_id_or_a_transaction_without_the_partition() -> None:
    open_ones = [
        (T0, state(1, 0, 0)),
        (T0, state(2, 0, 0)),
        (T0, state(3, 0, 0)),
        (T1, state(3, 9, 0)),
    ]
    ids = {2: "gone", 3: "live"}
    descriptions = {"gone": None, "live": described("live", T1)}
    found = cli.hanging(open_ones, ids, descriptions)
    # 1 has no id, 2's id is unknown, 3's transaction holds t-1 but not t-0.
    assert [(tp, p.producer_id) for tp, p in found] == [(T0, 1), (T0, 2), (T0, 3)]


@given(
    st.lists(
        st.tuples(st.integers(0, 5), st.sampled_from([T0, T1]), st.booleans(), st.booleans()),
        max_size=12,
    )
)
def test_hanging_is_exactly_the_candidates_no_coordinator_will_close(
    rows: list[tuple[int, TopicPartition, bool, bool]],
) -> None:
    """Model: a candidate is kept unless its id is listed, known and holds its partition."""
    open_ones = [(tp, state(pid, 0, 0)) for pid, tp, _, _ in rows]
    ids = {pid: f"id-{pid}" for pid, _, listed, _ in rows if listed}
    holds = {(pid, tp) for pid, tp, _, held in rows if held}
    descriptions: dict[str, TransactionDescription | None] = {
        f"id-{pid}": described(f"id-{pid}", *sorted(tp for p, tp in holds if p == pid))
        for pid in ids
    }
    expected = [
        (tp, p)
        for tp, p in open_ones
        if p.producer_id not in ids or (p.producer_id, tp) not in holds
    ]
    assert cli.hanging(open_ones, ids, descriptions) == expected


def test_the_abort_at_a_start_offset_is_its_producers_with_coordinator_epoch_at_least_0() -> None:
    producers = [state(1, None, 0), state(2, 40, 0, coordinator_epoch=None), state(3, 41, 0)]
    assert cli.abort_spec_at(T0, producers, 40) == AbortSpec(T0, 2, 2, 0)
    assert cli.abort_spec_at(T0, producers, 41) == AbortSpec(T0, 3, 2, 3)
    with pytest.raises(NoOpenTransactionError, match="offset 39 on partition t-0"):
        cli.abort_spec_at(T0, producers, 39)


def test_kafkas_columns_and_absent_values() -> None:
    d = TransactionDescription(2, "tx", "Empty", 60_000, None, 9, 1, ())
    assert cli.describe_row(d, NOW) == ["2", "tx", "9", "1", "Empty", "60000", "None", "None", ""]
    ongoing = described("tx", T0, T1)
    assert cli.describe_row(ongoing, NOW)[6:] == [str(NOW - 5), "5", "t-0,t-1"]
    assert cli.producer_rows([state(4, None, 7, coordinator_epoch=None)]) == [
        ["4", "2", "-1", "5", "7", "None"]
    ]
    assert cli.hanging_rows([(T1, state(4, 12, NOW - 125_000))], NOW) == [
        ["t", "1", "4", "2", "3", "12", str(NOW - 125_000), "2"]
    ]
    assert len(cli.DESCRIBE_HEADER) == len(cli.describe_row(d, NOW))


def test_answers_are_read_into_results_and_item_errors_raised_naming_them() -> None:
    listed = ltr.ListTransactionsResponse(
        transaction_states=[
            ltr.TransactionState(transactional_id="a", producer_id=5, transaction_state="Ongoing")
        ]
    )
    assert results.transaction_listings(listed, 1, "h:1") == [
        results.TransactionListing("a", 5, "Ongoing", 1)
    ]
    unknown = ltr.ListTransactionsResponse(unknown_state_filters=["Bogus"])
    with pytest.raises(InvalidRequestError, match="no transaction state 'Bogus'"):
        results.transaction_listings(unknown, 1, "h:1")
    with pytest.raises(CoordinatorNotAvailableError, match="broker 2 at h:2"):
        results.transaction_listings(ltr.ListTransactionsResponse(error_code=15), 2, "h:2")

    def describe(code: int, start: int = -1) -> dtr.DescribeTransactionsResponse:
        return dtr.DescribeTransactionsResponse(
            transaction_states=[
                dtr.TransactionState(
                    error_code=code, transactional_id="a", transaction_state="Ongoing",
                    transaction_timeout_ms=60_000, transaction_start_time_ms=start,
                    producer_id=5, producer_epoch=1,
                    topics=[dtr.TopicData(topic="t", partitions=[1, 0])],
                )
            ]
        )  # fmt: skip

    got = results.transaction_description(describe(0, 77), "a", 3)
    assert (got.start_time_ms, got.partitions, got.coordinator_id) == (77, (T0, T1), 3)
    assert results.transaction_description(describe(0), "a", 3).start_time_ms is None
    with pytest.raises(TransactionalIdNotFoundError, match="'a'"):
        results.transaction_description(describe(105), "a", 3)
    with pytest.raises(UnknownServerError, match="0 descriptions"):
        results.transaction_description(describe(0), "b", 3)

    producers = dpr.DescribeProducersResponse(
        topics=[
            dpr.TopicResponse(
                name="t",
                partitions=[
                    dpr.PartitionResponse(
                        partition_index=0,
                        active_producers=[
                            dpr.ProducerState(
                                producer_id=5, producer_epoch=1, last_sequence=3,
                                last_timestamp=9, coordinator_epoch=-1,
                                current_txn_start_offset=-1,
                            )
                        ],
                    ),
                    dpr.PartitionResponse(partition_index=1, error_code=6),
                ],
            )
        ]
    )  # fmt: skip
    found = results.producer_states(producers, [T0, T1, TopicPartition("u", 0)], "h:1")
    assert found[T0] == [ProducerState(5, 1, 3, 9, None, None)]
    assert isinstance(found[T1], NotLeaderOrFollowerError) and "t-1" in str(found[T1])
    assert isinstance(found[TopicPartition("u", 0)], UnknownServerError)


def test_the_abort_marker_and_its_answer() -> None:
    spec = AbortSpec(T1, 5, 2, 4)
    (marker,) = results.abort_request(spec).markers
    assert (marker.producer_id, marker.producer_epoch, marker.coordinator_epoch) == (5, 2, 4)
    assert marker.transaction_result is False  # ABORT
    assert [(t.name, t.partition_indexes) for t in marker.topics] == [("t", [1])]

    def answer(code: int) -> wtr.WriteTxnMarkersResponse:
        partition = wtr.WritableTxnMarkerPartitionResult(partition_index=1, error_code=code)
        topic = wtr.WritableTxnMarkerTopicResult(name="t", partitions=[partition])
        return wtr.WriteTxnMarkersResponse(
            markers=[wtr.WritableTxnMarkerResult(producer_id=5, topics=[topic])]
        )

    results.abort_result(answer(0), spec, "h:1")
    with pytest.raises(InvalidProducerEpochError, match="producer 5's transaction on t-1"):
        results.abort_result(answer(47), spec, "h:1")
    with pytest.raises(UnknownServerError, match="did not answer"):
        results.abort_result(wtr.WriteTxnMarkersResponse(markers=[]), spec, "h:1")


def test_find_hanging_searches_a_brokers_replicas_of_topics_not_internal() -> None:
    """`--broker-id` alone: the partitions with a replica there, internal topics left out as
    Kafka's tool lists topics; `--topic` names one, internal or not."""
    from argparse import Namespace
    from types import SimpleNamespace

    def topic(name: str, *replicas: tuple[int, ...]) -> SimpleNamespace:
        partitions = [SimpleNamespace(partition=i, replicas=r) for i, r in enumerate(replicas)]
        return SimpleNamespace(name=name, error=None, partitions=partitions)

    topics = [topic("t", (1, 2), (2, 3)), topic("__consumer_offsets", (1,)), topic("u", (3, 1))]

    class Cluster:
        def metadata(self, names: list[str] | None) -> SimpleNamespace:
            return SimpleNamespace(topics=[t for t in topics if names is None or t.name in names])

    def search(**options: object) -> list[TopicPartition]:
        given: dict[str, object] = {"topic": None, "partition": None, "broker_id": None}
        return cli._partitions_to_search(Cluster(), Namespace(**(given | options)))  # type: ignore[arg-type]

    assert search(broker_id=1) == [T0, TopicPartition("u", 0)]
    assert search(topic="__consumer_offsets") == [TopicPartition("__consumer_offsets", 0)]
    assert search(topic="t", broker_id=3) == [T1]
    assert search(topic="t", partition=7) == [TopicPartition("t", 7)]
