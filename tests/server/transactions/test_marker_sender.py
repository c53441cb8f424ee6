"""TxnMarkerSender over a fake channel: a partition without a leader waits for one, a
partition the leader left out of its answer is sent again, a write stops once the coordinator
is no longer current, and a failing channel is retried with a doubling backoff up to 1 s."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from replog.common.topic_partition import TopicPartitionKey
from replog.coordinator.transaction_markers import NO_LEADER, TxnMarker
from replog.coordinator.transaction_metadata import TxnMetadata, TxnState
from replog.errors import KafkaError, NotEnoughReplicasError
from replog.server.transactions.marker_channel import GrpcMarkerChannel
from replog.server.transactions.marker_sender import TxnMarkerSender

META = TxnMetadata(
    "tx",
    5,
    producer_epoch=2,
    state=TxnState.PREPARE_ABORT,
    partitions=frozenset({("a", 0), ("a", 1)}),
    start_ms=1,
)


class Channel:
    def __init__(self, answers: list[dict[TopicPartitionKey, KafkaError | None] | None]) -> None:
        self.answers = answers
        self.sent: list[tuple[int, tuple[TopicPartitionKey, ...]]] = []

    async def send(
        self, broker_id: int, markers: Sequence[TxnMarker]
    ) -> list[Mapping[TopicPartitionKey, KafkaError | None]]:
        (marker,) = markers
        self.sent.append((broker_id, marker.partitions))
        answer = self.answers.pop(0) if self.answers else None
        return [dict.fromkeys(marker.partitions) if answer is None else answer]


class Sleeps:
    def __init__(self, on_sleep: object = None) -> None:
        self.slept: list[float] = []
        self.on_sleep = on_sleep

    async def __call__(self, seconds: float) -> None:
        self.slept.append(seconds)
        if callable(self.on_sleep):
            self.on_sleep()


@pytest.mark.asyncio
async def test_a_leaderless_partition_waits_and_a_missing_answer_is_sent_again() -> None:
    leaders = {("a", 0): 1, ("a", 1): NO_LEADER}
    channel = Channel([{}])  # the first answer names no partition
    sleeps = Sleeps(lambda: leaders.update({("a", 1): 2}))
    sender = TxnMarkerSender(1, channel, leaders.get, sleep=sleeps)
    assert await sender.write(META, 3, lambda: True)
    assert channel.sent == [(1, (("a", 0),)), (1, (("a", 0),)), (2, (("a", 1),))]
    assert sleeps.slept == [0.1]


@pytest.mark.asyncio
async def test_the_write_stops_when_the_coordinator_moves_on() -> None:
    channel = Channel([{("a", 0): NotEnoughReplicasError("1 of 3")}] * 10)
    current = iter([True, True, True, False])
    sleeps = Sleeps()
    sender = TxnMarkerSender(1, channel, {("a", 0): 1, ("a", 1): 1}.get, sleep=sleeps)
    single = TxnMetadata(
        "tx",
        5,
        producer_epoch=2,
        state=TxnState.PREPARE_COMMIT,
        partitions=frozenset({("a", 0)}),
        start_ms=1,
    )
    assert not await sender.write(single, 3, lambda: next(current))
    assert len(channel.sent) == 3 and sleeps.slept == [0.1, 0.2, 0.4]


@pytest.mark.asyncio
async def test_a_leader_without_an_address_keeps_the_markers_waiting_with_a_capped_backoff() -> (
    None
):
    attempts = iter(range(8))
    sleeps = Sleeps()
    channel = GrpcMarkerChannel(1, {}.get, request_timeout_ms=1000)  # broker 2 not registered
    sender = TxnMarkerSender(1, channel, {("a", 0): 2, ("a", 1): 2}.get, sleep=sleeps)
    assert not await sender.write(META, 3, lambda: next(attempts) < 7)
    assert sleeps.slept == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0]
