"""Idempotent-producer state: Kafka's epoch/sequence rules, the 5-batch de-duplication window,
and rebuild-from-log against incremental updates."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replog.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    OutOfOrderSequenceNumberError,
)
from replog.record.header import CONTROL_FLAG_MASK, BatchHeader
from replog.replication.producer_state import (
    INT32_MAX,
    NUM_BATCHES_TO_RETAIN,
    BatchMetadata,
    ProducerStateTable,
    in_sequence,
)

WHERE = "payments-2"


def batch(
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    count: int = 1,
    base_offset: int = 0,
    timestamp_ms: int = 1000,
    control: bool = False,
) -> BatchHeader:
    return BatchHeader(
        base_offset=base_offset,
        batch_length=49 + 10 * count,
        partition_leader_epoch=0,
        magic=2,
        crc=0,
        attributes=CONTROL_FLAG_MASK if control else 0,
        last_offset_delta=count - 1,
        base_timestamp=timestamp_ms,
        max_timestamp=timestamp_ms,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        records_count=count,
    )


class Leader:
    """A log of headers driven the way the partition leader drives the table."""

    def __init__(self) -> None:
        self.table = ProducerStateTable(WHERE)
        self.log: list[BatchHeader] = []
        self.next_offset = 0

    def produce(self, header: BatchHeader) -> tuple[int, int]:
        """(first offset, last offset) of the batch, appended or found as a duplicate."""
        duplicate = self.table.check(header)
        if duplicate is not None:
            return duplicate.first_offset, duplicate.last_offset
        stamped = header._replace(base_offset=self.next_offset)
        self.next_offset = stamped.next_offset
        self.log.append(stamped)
        self.table.update(stamped)
        return stamped.base_offset, stamped.last_offset


# --- Not idempotent, unknown producers --------------------------------------------------------


def test_batches_without_a_producer_id_are_not_tracked() -> None:
    table = ProducerStateTable(WHERE)
    header = batch(-1, -1, -1)
    assert table.check(header) is None
    table.update(header)
    assert len(table) == 0


@pytest.mark.parametrize(("producer_epoch", "base_sequence"), [(0, 0), (0, 42), (7, 1_000_000)])
def test_an_unknown_producer_may_start_at_any_sequence_and_epoch(
    producer_epoch: int, base_sequence: int
) -> None:
    assert ProducerStateTable(WHERE).check(batch(9, producer_epoch, base_sequence)) is None


def test_within_an_unknown_producers_first_request_sequences_are_not_checked() -> None:
    # Kafka accepts when the producer had no epoch before the request, for every batch of it.
    table = ProducerStateTable(WHERE)
    assert table.check_batches([batch(9, 0, 5, count=2), batch(9, 0, 40)]) is None


# --- Sequences -------------------------------------------------------------------------------


def test_the_next_sequence_is_accepted_and_a_gap_is_out_of_order() -> None:
    leader = Leader()
    assert leader.produce(batch(1, 0, 0, count=3)) == (0, 2)
    assert leader.table.check(batch(1, 0, 3)) is None
    with pytest.raises(
        OutOfOrderSequenceNumberError,
        match=r"payments-2: producer 1 epoch 0 sent sequence 5, expected 3 after its last "
        r"sequence 2",
    ):
        leader.table.check(batch(1, 0, 5))


def test_an_overlapping_range_that_is_no_retained_batch_is_out_of_order() -> None:
    leader = Leader()
    leader.produce(batch(1, 0, 0, count=3))
    with pytest.raises(OutOfOrderSequenceNumberError):
        leader.table.check(batch(1, 0, 1, count=2))  # seq 1-2: not the retained 0-2


@pytest.mark.parametrize(
    ("last_sequence", "next_sequence", "expected"),
    [
        (4, 5, True),
        (4, 6, False),
        (4, 4, False),
        (-1, 0, True),
        (INT32_MAX, 0, True),
        (INT32_MAX - 1, INT32_MAX, True),
        (INT32_MAX, 1, False),
        (0, INT32_MAX, False),
    ],
)
def test_in_sequence(last_sequence: int, next_sequence: int, expected: bool) -> None:
    assert in_sequence(last_sequence, next_sequence) is expected


def test_sequences_wrap_after_int32_max() -> None:
    leader = Leader()
    leader.produce(batch(1, 0, INT32_MAX - 1, count=3))  # INT32_MAX-1, INT32_MAX, 0
    entry = leader.table.entry(1)
    assert entry is not None
    assert entry.last_sequence == 0
    assert leader.table.check(batch(1, 0, 1)) is None
    leader.produce(batch(1, 0, 1, count=1))
    # And a batch ending exactly at INT32_MAX is followed by 0.
    leader2 = Leader()
    leader2.produce(batch(2, 0, INT32_MAX - 1, count=2))
    assert leader2.table.check(batch(2, 0, 0)) is None
    with pytest.raises(OutOfOrderSequenceNumberError, match="sent sequence 1, expected 0"):
        leader2.table.check(batch(2, 0, 1))


# --- Epochs ----------------------------------------------------------------------------------


def test_an_older_epoch_is_fenced_even_for_a_retry() -> None:
    leader = Leader()
    leader.produce(batch(1, 3, 0))
    with pytest.raises(
        InvalidProducerEpochError,
        match="payments-2: producer 1 sent epoch 2, older than its current epoch 3",
    ):
        leader.table.check(batch(1, 2, 0))


def test_an_epoch_bump_must_restart_at_sequence_zero() -> None:
    leader = Leader()
    leader.produce(batch(1, 3, 0, count=5))
    with pytest.raises(OutOfOrderSequenceNumberError, match=r"bumped its epoch from 3 to 4 .* 5"):
        leader.table.check(batch(1, 4, 5))
    assert leader.table.check(batch(1, 4, 0)) is None


def test_an_epoch_bump_forgets_the_old_epochs_batches() -> None:
    leader = Leader()
    leader.produce(batch(1, 3, 0))
    leader.produce(batch(1, 4, 0))
    entry = leader.table.entry(1)
    assert entry is not None
    assert (entry.producer_epoch, len(entry.batches)) == (4, 1)
    with pytest.raises(InvalidProducerEpochError):
        leader.table.check(batch(1, 3, 0))  # the old epoch's retry is no duplicate any more


def test_a_marker_moves_the_epoch_and_leaves_only_sequence_zero() -> None:
    leader = Leader()
    leader.produce(batch(1, 0, 0, count=2))
    leader.produce(batch(1, 1, -1, control=True, timestamp_ms=5000))
    entry = leader.table.entry(1)
    assert entry is not None
    assert (entry.producer_epoch, entry.batches, entry.last_timestamp_ms) == (1, (), 5000)
    with pytest.raises(
        OutOfOrderSequenceNumberError, match="expected 0 after its last sequence -1"
    ):
        leader.table.check(batch(1, 1, 2))
    assert leader.table.check(batch(1, 1, 0)) is None


def test_a_marker_is_checked_for_its_epoch_only() -> None:
    leader = Leader()
    leader.produce(batch(1, 2, 0))
    assert leader.table.check(batch(1, 2, -1, control=True)) is None
    with pytest.raises(InvalidProducerEpochError):
        leader.table.check(batch(1, 1, -1, control=True))


# --- De-duplication --------------------------------------------------------------------------


def test_each_of_the_last_five_batches_is_recognised_with_its_original_offsets() -> None:
    leader = Leader()
    leader.produce(batch(7, 0, 0, count=10))  # filler from another range
    originals = [leader.produce(batch(1, 0, 2 * i, count=2)) for i in range(6)]
    for i in range(1, 6):
        assert leader.produce(batch(1, 0, 2 * i, count=2)) == originals[i]
    assert leader.log[-1].base_sequence == 10  # nothing appended by the retries
    # The sixth-latest fell out of the window: it is no duplicate, just out of order.
    with pytest.raises(OutOfOrderSequenceNumberError):
        leader.table.check(batch(1, 0, 0, count=2))


def test_a_duplicate_answer_carries_the_batch_metadata() -> None:
    leader = Leader()
    leader.produce(batch(1, 0, 0, count=4, timestamp_ms=777))
    assert leader.table.check(batch(1, 0, 0, count=4)) == BatchMetadata(0, 3, 0, 3, 777)


def test_a_request_is_a_retry_as_a_whole_or_refused() -> None:
    leader = Leader()
    leader.produce(batch(1, 0, 0, count=2))  # offsets 0-1
    leader.produce(batch(1, 0, 2, count=3))  # offsets 2-4
    # Every batch a duplicate, back to back in the log: answered as one run, so that acks=all
    # waits for the last of them.
    found = leader.table.check_batches([batch(1, 0, 0, count=2), batch(1, 0, 2, count=3)])
    assert found == BatchMetadata(0, 4, 0, 4, 1000)
    # A retry next to a new batch: one answer cannot place both, and answering from the
    # retry alone would drop the new batch unwritten.
    with pytest.raises(InvalidRecordError, match="1 of the request's 2 batches are retries"):
        leader.table.check_batches([batch(1, 0, 2, count=3), batch(1, 0, 5)])
    with pytest.raises(InvalidRecordError, match="1 of the request's 2 batches are retries"):
        leader.table.check_batches([batch(2, 0, 0), batch(1, 0, 0, count=2)])
    # Retries of batches another producer's batch separates in the log.
    leader.produce(batch(2, 0, 0))  # offset 5
    leader.produce(batch(1, 0, 5))  # offset 6
    with pytest.raises(InvalidRecordError, match="offsets 2-4 and 6-6"):
        leader.table.check_batches([batch(1, 0, 2, count=3), batch(1, 0, 5)])


def test_batches_of_one_request_are_checked_in_order() -> None:
    leader = Leader()
    leader.produce(batch(1, 0, 0))
    assert leader.table.check_batches([batch(1, 0, 1, count=2), batch(1, 0, 3)]) is None
    with pytest.raises(OutOfOrderSequenceNumberError, match="sent sequence 4, expected 3"):
        leader.table.check_batches([batch(1, 0, 1, count=2), batch(1, 0, 4)])
    # A batch repeated inside one request is not a duplicate of the log: out of order.
    with pytest.raises(OutOfOrderSequenceNumberError):
        leader.table.check_batches([batch(1, 0, 1), batch(1, 0, 1)])
    # An epoch bump then its next batch, in one request.
    assert leader.table.check_batches([batch(1, 1, 0), batch(1, 1, 1)]) is None
    # check_batches changes nothing.
    entry = leader.table.entry(1)
    assert entry is not None
    assert (entry.producer_epoch, entry.last_sequence) == (0, 0)


# --- Table upkeep ----------------------------------------------------------------------------


def test_at_most_five_batches_are_retained_per_producer() -> None:
    leader = Leader()
    for i in range(8):
        leader.produce(batch(1, 0, i))
    entry = leader.table.entry(1)
    assert entry is not None
    assert [b.first_sequence for b in entry.batches] == [3, 4, 5, 6, 7]
    assert NUM_BATCHES_TO_RETAIN == 5


def test_truncate_forgets_every_producer() -> None:
    leader = Leader()
    leader.produce(batch(1, 0, 0))
    leader.produce(batch(2, 0, 0))
    assert len(leader.table) == 2
    leader.table.truncate()
    assert len(leader.table) == 0
    assert leader.table.check(batch(1, 0, 17)) is None  # unknown again


def test_remove_expired_forgets_idle_producers() -> None:
    leader = Leader()
    leader.produce(batch(1, 0, 0, timestamp_ms=1_000))
    leader.produce(batch(2, 0, 0, timestamp_ms=5_000))
    assert leader.table.remove_expired(10_999, producer_id_expiration_ms=10_000) == []
    assert leader.table.remove_expired(11_000, producer_id_expiration_ms=10_000) == [1]
    assert list(leader.table.entries()) == [2]


def test_rebuild_equals_the_incremental_table() -> None:
    leader = Leader()
    leader.produce(batch(1, 0, 0, count=3))
    leader.produce(batch(2, 5, 9))
    leader.produce(batch(1, 0, 3))
    leader.produce(batch(2, 6, 0))
    rebuilt = ProducerStateTable(WHERE)
    rebuilt.update(batch(3, 0, 0))  # stale state that rebuild must drop
    rebuilt.rebuild(leader.log)
    assert rebuilt.entries() == leader.table.entries()


def test_rebuild_refuses_headers_out_of_offset_order() -> None:
    with pytest.raises(AssertionError, match="payments-2"):
        ProducerStateTable(WHERE).rebuild(
            [batch(1, 0, 0, base_offset=5), batch(1, 0, 1, base_offset=2)]
        )


# --- Properties: retrying producers, and rebuild vs incremental -----------------------------


@dataclass
class Producer:
    producer_id: int
    producer_epoch: int = 0
    next_sequence: int = 0
    # Batches sent in this epoch and appended: (header, (first offset, last offset)).
    sent: list[tuple[BatchHeader, tuple[int, int]]] = field(default_factory=list)


steps = st.lists(
    st.one_of(
        st.tuples(st.just("send"), st.integers(0, 2), st.integers(1, 3)),
        st.tuples(st.just("retry"), st.integers(0, 2), st.integers(0, 6)),
        st.tuples(st.just("bump"), st.integers(0, 2), st.just(0)),
        st.tuples(st.just("zombie"), st.integers(0, 2), st.just(0)),
        st.tuples(st.just("gap"), st.integers(0, 2), st.integers(1, 3)),
    ),
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(steps, st.integers(0, INT32_MAX - 10))
def test_retrying_producers_never_duplicate_and_rebuild_matches(
    script: list[tuple[str, int, int]], first_sequence: int
) -> None:
    """Three producers send, retry any of their recent batches, bump epochs, run zombies and
    skip sequences. Then: a retry of one of the last 5 batches gets its original offsets and
    appends nothing; older ones, zombies and gaps are refused; the log holds each (producer,
    epoch, sequence) once, in order; and after every step rebuilding from the log gives the
    incremental table (also for every prefix of the log)."""
    leader = Leader()
    producers = [Producer(producer_id=100 + i) for i in range(3)]
    for producer in producers:
        # Start one producer near the Int32 wrap; an unknown producer may start anywhere.
        producer.next_sequence = first_sequence if producer.producer_id == 100 else 0
    snapshots = [leader.table.entries()]
    for kind, index, amount in script:
        producer = producers[index]
        log_length = len(leader.log)
        if kind == "send":
            header = batch(
                producer.producer_id, producer.producer_epoch, producer.next_sequence, amount
            )
            offsets = leader.produce(header)
            assert len(leader.log) == log_length + 1
            producer.sent.append((header, offsets))
            producer.next_sequence = (producer.next_sequence + amount) & INT32_MAX
        elif kind == "retry" and producer.sent:
            header, offsets = producer.sent[-1 - min(amount, len(producer.sent) - 1)]
            back = len(producer.sent) - producer.sent.index((header, offsets))
            if back <= NUM_BATCHES_TO_RETAIN:
                assert leader.produce(header) == offsets
                assert len(leader.log) == log_length
            else:
                with pytest.raises(OutOfOrderSequenceNumberError):
                    leader.produce(header)
        elif kind == "bump":
            producer.producer_epoch += 1
            producer.next_sequence = 0
            producer.sent = []
        elif kind == "zombie":
            entry = leader.table.entry(producer.producer_id)
            if entry is not None and entry.producer_epoch > 0:
                # A fenced instance of this producer still sending with the previous epoch.
                with pytest.raises(InvalidProducerEpochError):
                    leader.produce(batch(producer.producer_id, entry.producer_epoch - 1, 0))
        elif kind == "gap" and leader.table.entry(producer.producer_id) is not None:
            skipped = (producer.next_sequence + amount) & INT32_MAX
            with pytest.raises(OutOfOrderSequenceNumberError):
                leader.produce(batch(producer.producer_id, producer.producer_epoch, skipped))
        rebuilt = ProducerStateTable(WHERE)
        rebuilt.rebuild(leader.log)
        assert rebuilt.entries() == leader.table.entries()
        if len(leader.log) > log_length:
            snapshots.append(leader.table.entries())
        assert len(snapshots) == len(leader.log) + 1
    for length, snapshot in enumerate(snapshots):
        rebuilt = ProducerStateTable(WHERE)
        rebuilt.rebuild(leader.log[:length])
        assert rebuilt.entries() == snapshot
    # Each (producer, epoch) wrote contiguous sequences, each once.
    for producer in producers:
        by_epoch: dict[int, list[BatchHeader]] = {}
        for header in leader.log:
            if header.producer_id == producer.producer_id:
                by_epoch.setdefault(header.producer_epoch, []).append(header)
        for headers in by_epoch.values():
            for previous, following in itertools.pairwise(headers):
                assert in_sequence(previous.last_sequence, following.base_sequence)
