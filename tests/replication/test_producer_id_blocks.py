"""ProducerIdBlocks, the pure core of the broker's producer-id manager: ids in order from the
current block, each once; the next block wanted at start, at 90% use and when none is left;
one request at a time; COORDINATOR_LOAD_IN_PROGRESS (naming the last failure) while no id is
available; backoff after failures; insane or stale blocks refused."""

from __future__ import annotations

import pytest

from replog.errors import (
    CoordinatorLoadInProgressError,
    StaleBrokerEpochError,
    UnknownServerError,
)
from replog.quorum.controller.producer_id_control import ProducerIdsBlock
from replog.replication.producer_id_blocks import ProducerIdBlocks


def with_block(first: int = 0, size: int = 1000, **options: int) -> ProducerIdBlocks:
    blocks = ProducerIdBlocks(7, **options)
    blocks.want_block()
    assert blocks.start_request(0)
    assert blocks.on_block(first, size, 0) is None
    return blocks


def test_no_block_no_id_but_a_request() -> None:
    blocks = ProducerIdBlocks(7)
    assert not blocks.wanted
    with pytest.raises(CoordinatorLoadInProgressError) as refused:
        blocks.next_id()
    assert refused.value.retriable
    assert "broker 7" in str(refused.value) and "waiting for a block" in str(refused.value)
    assert blocks.wanted
    assert blocks.start_request(0)
    assert blocks.in_flight
    assert not blocks.start_request(0)  # one request at a time
    assert blocks.retry_at_ms() is None
    with pytest.raises(CoordinatorLoadInProgressError):
        blocks.next_id()


def test_ids_come_in_order_each_once_across_blocks() -> None:
    blocks = with_block(0, 1000)
    seen = [blocks.next_id() for _ in range(900)]
    assert seen == list(range(900))
    assert not blocks.wanted  # ids 0..899: below the prefetch threshold
    assert blocks.next_id() == 900  # the 90% id asks for the next block
    assert blocks.wanted
    assert blocks.start_request(1)
    assert blocks.on_block(1000, 1000, 2) is None
    assert not blocks.wanted and blocks.next_block == ProducerIdsBlock(7, 1000, 1000)
    assert not blocks.start_request(3)  # a next block is held: nothing more to ask for
    seen += [900] + [blocks.next_id() for _ in range(1099)]
    assert seen == list(range(2000))
    assert blocks.current == ProducerIdsBlock(7, 1000, 1000) and blocks.next_block is None
    assert blocks.blocks_received == 2


def test_an_exhausted_block_without_a_next_one_refuses() -> None:
    blocks = with_block(5000, 10)
    ids = [blocks.next_id() for _ in range(10)]
    assert ids == list(range(5000, 5010))
    assert blocks.start_request(0)  # the 90% id (5009) wanted the next block
    with pytest.raises(CoordinatorLoadInProgressError):
        blocks.next_id()
    assert blocks.on_block(5010, 10, 0) is None
    assert blocks.next_id() == 5010


def test_a_block_of_one_is_prefetched_at_its_only_id() -> None:
    blocks = with_block(0, 1)
    assert blocks.next_id() == 0
    assert blocks.wanted


def test_failures_back_off_and_are_named_while_no_id_is_available() -> None:
    blocks = ProducerIdBlocks(7, retry_backoff_ms=50, retry_backoff_max_ms=150)
    blocks.want_block()
    assert blocks.start_request(1000)
    blocks.on_failure(StaleBrokerEpochError("broker 7: broker epoch 3 is stale"), 1000)
    assert not blocks.in_flight and blocks.wanted
    assert blocks.retry_at_ms() == 1050
    with pytest.raises(CoordinatorLoadInProgressError) as refused:
        blocks.next_id()
    assert "STALE_BROKER_EPOCH" in str(refused.value) and "epoch 3" in str(refused.value)
    assert not blocks.start_request(1049)
    assert blocks.start_request(1050)
    blocks.on_failure(UnknownServerError("x"), 1100)
    assert blocks.retry_at_ms() == 1200  # doubled
    assert blocks.start_request(1200)
    blocks.on_failure(UnknownServerError("x"), 1200)
    assert blocks.retry_at_ms() == 1350  # capped at the max
    assert blocks.start_request(1350)
    assert blocks.on_block(0, 1000, 1400) is None
    assert blocks.last_failure is None and blocks.retry_at_ms() is None
    assert blocks.next_id() == 0


@pytest.mark.parametrize(
    ("first", "size", "problem"),
    [
        (-1, 1000, "not a block"),
        (0, 0, "not a block"),
        (2**63 - 10, 1000, "largest int64"),
        (500, 1000, "already holds (up to 999)"),  # overlaps the current block
        (0, 1000, "already holds"),  # the same block again
    ],
)
def test_insane_or_stale_blocks_are_refused(first: int, size: int, problem: str) -> None:
    blocks = with_block(0, 1000)
    for _ in range(901):
        blocks.next_id()
    assert blocks.start_request(10)
    error = blocks.on_block(first, size, 10)
    assert isinstance(error, UnknownServerError)
    assert problem in str(error) and "broker 7" in str(error)
    assert blocks.next_block is None and blocks.wanted and not blocks.in_flight
    assert blocks.last_failure is error
    assert blocks.retry_at_ms() == 60
    assert blocks.next_id() == 901  # the current block still serves


def test_want_block_is_a_no_op_while_a_next_block_is_held() -> None:
    blocks = with_block(0, 10)
    blocks.want_block()
    assert not blocks.wanted
    assert not blocks.start_request(0)
