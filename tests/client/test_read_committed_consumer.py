"""A Consumer with isolation.level read_committed, against a scripted Kafka listener
(`FakeKafkaBroker`): Fetch and ListOffsets ask with isolation level 1, the aborted
transactions an answer names are skipped, nothing at or above the last stable offset is
returned, control batches never are; read_uncommitted returns the aborted records."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from replog import Consumer, TopicPartition
from replog.kafka.messages.fetch_response import (
    AbortedTransaction,
    FetchableTopicResponse,
    FetchResponse,
    PartitionData,
)
from replog.kafka.messages.list_offsets_response import (
    ListOffsetsPartitionResponse,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from replog.testing import FakeKafkaBroker, running_fake_kafka_broker
from tests.client.txn_batches import data_batch, marker_batch
from tests.eventually import wait_until

T0 = TopicPartition("t", 0)


batch, marker = data_batch, marker_batch


# 0-1 aborted (producer 5), 2 plain, 3 ABORT, 4 committed (producer 6), 5 COMMIT, 6 open txn.
LOG = (
    batch(0, [b"a0", b"a1"], pid=5, txn=True)
    + batch(2, [b"p2"])
    + marker(3, 5, aborted=True)
    + batch(4, [b"c4"], pid=6, txn=True)
    + marker(5, 6, aborted=False)
    + batch(6, [b"o6"], pid=7, txn=True)
)


def answer(lso: int, aborted: list[AbortedTransaction] | None) -> FetchResponse:
    return FetchResponse(
        responses=[
            FetchableTopicResponse(
                topic="t",
                partitions=[
                    PartitionData(
                        partition_index=0,
                        high_watermark=7,
                        last_stable_offset=lso,
                        log_start_offset=0,
                        aborted_transactions=aborted,
                        records=LOG,
                    )
                ],
            )
        ]
    )


@pytest.fixture
def cluster() -> Iterator[FakeKafkaBroker]:
    with running_fake_kafka_broker() as fake:
        fake.answer("Metadata", fake.metadata("t"))
        yield fake


def values_polled(consumer: Consumer, count: int) -> list[bytes]:
    got: list[bytes] = []

    def enough() -> bool:
        for records in consumer.poll(timeout_ms=200).values():
            got.extend(r.value for r in records)
        return len(got) >= count

    wait_until(enough, f"{count} records")
    return got


def test_read_committed_skips_aborted_records_and_stops_at_the_lso(
    cluster: FakeKafkaBroker,
) -> None:
    cluster.answer(
        "Fetch",
        answer(6, [AbortedTransaction(producer_id=5, first_offset=0)]),
        answer(6, []),
    )
    with Consumer(bootstrap_servers=cluster.address, isolation_level="read_committed") as consumer:
        consumer.assign([T0])
        consumer.seek(T0, 0)
        assert values_polled(consumer, 2) == [b"p2", b"c4"]
        wait_until(lambda: consumer.position(T0) == 6, "the position at the LSO")
    fetches = [r for name, r, _ in cluster.requests if name == "Fetch"]
    assert fetches and all(r.isolation_level == 1 for r in fetches)  # type: ignore[attr-defined]


def test_read_uncommitted_returns_aborted_records_but_no_markers(
    cluster: FakeKafkaBroker,
) -> None:
    cluster.answer("Fetch", answer(6, None), answer(7, None))
    with Consumer(bootstrap_servers=cluster.address) as consumer:
        consumer.assign([T0])
        consumer.seek(T0, 0)
        assert values_polled(consumer, 5) == [b"a0", b"a1", b"p2", b"c4", b"o6"]
    fetches = [r for name, r, _ in cluster.requests if name == "Fetch"]
    assert all(r.isolation_level == 0 for r in fetches)  # type: ignore[attr-defined]


def test_read_committed_end_offsets_ask_for_the_last_stable_offset(
    cluster: FakeKafkaBroker,
) -> None:
    cluster.answer(
        "ListOffsets",
        ListOffsetsResponse(
            topics=[
                ListOffsetsTopicResponse(
                    name="t",
                    partitions=[ListOffsetsPartitionResponse(partition_index=0, offset=6)],
                )
            ]
        ),
    )
    with Consumer(bootstrap_servers=cluster.address, isolation_level="read_committed") as consumer:
        assert consumer.end_offsets([T0]) == {T0: 6}
    asked = [r for name, r, _ in cluster.requests if name == "ListOffsets"]
    assert asked and all(r.isolation_level == 1 for r in asked)  # type: ignore[attr-defined]
