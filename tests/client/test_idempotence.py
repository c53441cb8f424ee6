"""Idempotence bookkeeping on its own (no network): sequences assigned at drain, the one-batch
start under an id the broker does not know, retries only from the oldest pending batch, real
gaps and UNKNOWN_PRODUCER_ID renumbering the partition under a new id, failed batches settled
as written or renumbered, and partitions moving to a new id only when idle. Stamped batches
are checked against the broker's own rules (`ProducerStateTable`), and a property test runs
the client against that table with requests processed and answered in any order."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replog.client.accumulator import ProducerBatch, RecordAccumulator
from replog.client.idempotence import (
    Idempotence,
    ProducerIdAndEpoch,
    increment_sequence,
    sequence_after,
)
from replog.client.records import TopicPartition
from replog.errors import (
    NotEnoughReplicasError,
    OutOfOrderSequenceNumberError,
    UnknownProducerIdError,
)
from replog.record import read_header
from replog.replication.producer_state import ProducerStateTable

TP = TopicPartition("t", 0)
OTHER = TopicPartition("t", 1)
INT32_MAX = 2**31 - 1


def batch(records: int = 2, tp: TopicPartition = TP) -> ProducerBatch:
    acc = RecordAccumulator(batch_size=1024)
    for i in range(records):
        acc.append(tp, 1_700_000_000_000 + i, None, b"v%d" % i)
    (made,) = acc.drain_all()
    return made


def drain(idem: Idempotence, made: ProducerBatch) -> ProducerBatch:
    assert idem.can_drain(made.topic_partition, made)
    idem.on_drained(made)
    made.attempts += 1
    return made


def started(pid: int = 7) -> Idempotence:
    idem = Idempotence()
    assert idem.needs_producer_id()
    idem.set_producer_id(pid, 0)
    assert not idem.needs_producer_id()
    return idem


def test_sequence_arithmetic_wraps_at_int32_max() -> None:
    assert increment_sequence(5, 3) == 8
    assert increment_sequence(INT32_MAX, 1) == 0
    assert increment_sequence(INT32_MAX - 1, 3) == 1
    assert sequence_after(1, 0) and not sequence_after(0, 1)
    assert sequence_after(0, INT32_MAX)
    assert not sequence_after(4, 4)


def test_nothing_drains_before_the_producer_id() -> None:
    idem = Idempotence()
    assert not idem.can_drain(TP, batch())


def test_sequences_are_assigned_at_drain_per_partition_and_stamped() -> None:
    idem = started(pid=42)
    first = drain(idem, batch(3))
    idem.on_success(first)
    second = drain(idem, batch(2))
    other = drain(idem, batch(4, OTHER))
    assert [(b.producer_id, b.producer_epoch, b.base_sequence) for b in (first, second, other)] == [
        (42, 0, 0),
        (42, 0, 3),
        (42, 0, 0),
    ]
    header = read_header(second.records)  # type: ignore[arg-type]
    assert (header.producer_id, header.base_sequence, header.last_sequence) == (42, 3, 4)
    assert idem.next_sequence(TP) == 5 and idem.next_sequence(OTHER) == 4
    # The broker accepts them in this order.
    table = ProducerStateTable("t-0")
    for made in (first, second):
        assert table.check(read_header(made.records)) is None  # type: ignore[arg-type]
        table.update(read_header(made.records))  # type: ignore[arg-type]


def test_one_batch_at_a_time_until_the_broker_knows_the_id_then_up_to_five() -> None:
    idem = started()
    first = drain(idem, batch())
    assert not idem.can_drain(TP, batch())  # a second could overtake the first
    idem.on_success(first)
    pending = [drain(idem, batch()) for _ in range(5)]
    assert not idem.can_drain(TP, batch())  # the broker retains 5 batches per producer
    idem.on_success(pending[0])
    assert idem.can_drain(TP, batch())


def test_later_batches_acknowledged_first_do_not_free_room_past_the_oldest_pending() -> None:
    """Concurrent calls answer out of order: an acks=all request can time out on the leader
    while later ones, written after it, are acknowledged once the high watermark moves. The
    broker retains the producer's last 5 batches, so the 5 counts every batch stamped since
    the oldest unacknowledged one, acknowledged or not: else its retry would meet a broker
    whose retained batches no longer include it, and be refused as out of order forever."""
    idem = started()
    table = ProducerStateTable("t-0")

    def written(made: ProducerBatch) -> None:
        header = read_header(made.records)  # type: ignore[arg-type]
        assert table.check(header) is None
        table.update(header)

    first = drain(idem, batch())
    written(first)
    idem.on_success(first)
    oldest, *later = (drain(idem, batch()) for _ in range(5))
    for made in (oldest, *later):
        written(made)
    for made in later:
        idem.on_success(made)  # answered before the oldest's timeout
    assert not idem.can_drain(TP, batch())  # a sixth batch after `oldest` would evict it
    idem.on_retry(oldest, NotEnoughReplicasError("t-0: timed out"))
    assert idem.can_drain(TP, oldest)
    # The retry is still among the broker's retained batches: a duplicate, not an error.
    assert table.check(read_header(oldest.records)) is not None  # type: ignore[arg-type]
    drain(idem, oldest)
    idem.on_success(oldest)
    assert idem.can_drain(TP, batch())


def test_a_retry_is_resent_only_as_the_oldest_pending_batch() -> None:
    idem = started()
    idem.on_success(drain(idem, batch()))
    b1, b2, b3 = (drain(idem, batch()) for _ in range(3))
    idem.on_retry(b2, OutOfOrderSequenceNumberError("t-0: overtook b1"))
    assert not idem.can_drain(TP, b2)  # b1 is older and still out
    idem.on_retry(b1, NotEnoughReplicasError("t-0"))
    assert idem.can_drain(TP, b1) and not idem.can_drain(TP, b2)
    drain(idem, b1)
    idem.on_success(b1)
    assert idem.can_drain(TP, b2)
    assert not idem.is_blocked(TP)
    assert idem.pending(TP) == [b2, b3]


def test_out_of_order_on_the_next_expected_batch_renumbers_under_a_new_id() -> None:
    idem = started(pid=7)
    idem.on_success(drain(idem, batch(2)))
    b1 = drain(idem, batch(2))
    b2 = drain(idem, batch(2))
    assert (b1.base_sequence, b2.base_sequence) == (2, 4)
    idem.on_retry(b1, OutOfOrderSequenceNumberError("t-0: the broker lost its state"))
    assert idem.is_blocked(TP)
    idem.on_retry(b2, OutOfOrderSequenceNumberError("t-0"))
    assert idem.needs_producer_id()
    idem.set_producer_id(8, 0)
    assert not idem.is_blocked(TP)
    assert [(b.producer_id, b.base_sequence) for b in (b1, b2)] == [(8, 0), (8, 2)]
    assert read_header(b2.records).producer_id == 8  # type: ignore[arg-type]
    assert idem.next_sequence(TP) == 4 and idem.resets == 1
    assert idem.can_drain(TP, b1) and not idem.can_drain(TP, b2)


def test_renumbering_waits_until_nothing_of_the_partition_is_on_the_wire() -> None:
    idem = started(pid=7)
    idem.on_success(drain(idem, batch()))
    b1 = drain(idem, batch())
    b2 = drain(idem, batch())
    idem.on_retry(b1, UnknownProducerIdError("t-0: no state for producer 7"))
    assert not idem.needs_producer_id()  # b2 is still out
    idem.on_retry(b2, OutOfOrderSequenceNumberError("t-0"))
    assert idem.needs_producer_id()
    idem.set_producer_id(9, 0)
    assert [(b.producer_id, b.base_sequence) for b in (b1, b2)] == [(9, 0), (9, 2)]


def test_a_failed_batch_followed_by_an_acknowledged_one_was_written() -> None:
    idem = started()
    idem.on_success(drain(idem, batch()))
    b1 = drain(idem, batch())
    b2 = drain(idem, batch())
    idem.on_expired(b1)  # timed out on the wire: outcome unknown
    assert idem.is_blocked(TP) and not idem.can_drain(TP, batch())
    idem.on_success(b2)  # the broker took b2, so it had b1
    idem.on_failed(b1)
    idem.maybe_resolve()
    assert not idem.is_blocked(TP) and not idem.needs_producer_id()
    assert idem.can_drain(TP, batch())


def test_a_failed_batch_with_nothing_after_it_acknowledged_renumbers() -> None:
    idem = started(pid=7)
    idem.on_success(drain(idem, batch()))
    b1 = drain(idem, batch())
    b2 = drain(idem, batch())
    idem.on_failed(b1)  # e.g. expired after retries
    idem.on_retry(b2, OutOfOrderSequenceNumberError("t-0: gap"))
    idem.maybe_resolve()
    assert idem.needs_producer_id()
    idem.set_producer_id(8, 0)
    assert (b2.producer_id, b2.base_sequence) == (8, 0)
    assert idem.pending(TP) == [b2]


def test_other_partitions_keep_their_id_until_idle_then_start_over() -> None:
    idem = started(pid=7)
    idem.on_success(drain(idem, batch(tp=OTHER)))
    busy = drain(idem, batch(tp=OTHER))
    idem.on_success(drain(idem, batch()))
    gap = drain(idem, batch())
    idem.on_retry(gap, OutOfOrderSequenceNumberError("t-0: gap"))
    idem.set_producer_id(8, 0)
    assert idem.producer == ProducerIdAndEpoch(8, 0)
    assert busy.producer_id == 7
    assert not idem.can_drain(OTHER, batch(tp=OTHER))  # waits for the old id's batch
    idem.on_success(busy)
    fresh = drain(idem, batch(tp=OTHER))
    assert (fresh.producer_id, fresh.base_sequence) == (8, 0)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_any_processing_and_answer_order_writes_every_batch_once_in_order(
    data: st.DataObject,
) -> None:
    """Property: the client against the broker's own table (`ProducerStateTable`), with
    requests processed in any order (concurrent calls) and their answers delivered in any
    order, an appended batch answered either as written or as timed out (acks=all: written,
    not yet replicated), and a new producer id whenever the client asks for one (as the
    sender does). However it interleaves, every batch ends in the log exactly once, each
    producer id's sequences in order without a gap, and no retry is refused forever: a bounded
    run of fair steps ends with every batch acknowledged."""
    idem = started()
    table = ProducerStateTable("t-0")
    log: list[tuple[int, int, int]] = []  # (producer id, first, last) of each appended batch
    appended: list[int] = []  # which batch (its id()) each append was
    unsent = [batch(data.draw(st.integers(1, 3), label="records")) for _ in range(12)]
    retries: list[ProducerBatch] = []
    wire: list[ProducerBatch] = []  # sent, not yet processed by the broker
    answers: list[tuple[ProducerBatch, BaseException | None]] = []
    acknowledged: set[int] = set()

    def process(made: ProducerBatch, times_out: bool) -> None:
        header = read_header(made.records)  # type: ignore[arg-type]
        try:
            duplicate = table.check(header)
        except OutOfOrderSequenceNumberError as exc:
            answers.append((made, exc))
            return
        if duplicate is None:
            table.update(header)
            log.append((header.producer_id, header.base_sequence, header.last_sequence))
            appended.append(id(made))
        answers.append((made, NotEnoughReplicasError("t-0: timed out") if times_out else None))

    def answer(made: ProducerBatch, error: BaseException | None) -> None:
        if error is None:
            idem.on_success(made)
            acknowledged.add(id(made))
        else:
            idem.on_retry(made, error)
            retries.append(made)
            retries.sort(key=lambda b: b.base_sequence)

    def step(choice: int, times_out: bool, index: int) -> None:
        if idem.needs_producer_id():
            assert idem.producer is not None
            idem.set_producer_id(idem.producer.producer_id + 1, 0)
        if choice == 0 and retries and idem.can_drain(TP, retries[0]):
            wire.append(drain(idem, retries.pop(0)))
        elif choice == 1 and unsent and not retries and idem.can_drain(TP, unsent[0]):
            wire.append(drain(idem, unsent.pop(0)))
        elif choice == 2 and wire:
            # Mostly in the order sent, sometimes overtaken (concurrent calls).
            process(wire.pop(0 if index < 7 else index % len(wire)), times_out)
        elif choice == 3 and answers:
            # Newest first as often as not: acknowledgements overtaking older answers are
            # what the 5-batch window must survive.
            answer(*answers.pop(-1 - index % len(answers)))

    steps = st.tuples(st.integers(0, 3), st.booleans(), st.integers(0, 10))
    for choice, times_out, index in data.draw(
        st.lists(steps, min_size=60, max_size=200), label="steps"
    ):
        step(choice, times_out, index)
    # Then fair: oldest first, nothing times out, until done (or clearly stuck).
    for _ in range(300):
        if not (unsent or retries or wire or answers):
            break
        for choice in (3, 2, 0, 1):
            step(choice, False, 0)
    assert not (unsent or retries or wire or answers), (
        f"stuck: {len(unsent)} unsent, retries at {[b.base_sequence for b in retries]}, log "
        f"{log[-6:]}"
    )
    assert len(acknowledged) == 12
    assert sorted(appended) == sorted(acknowledged), f"a batch written twice or never: {log}"
    expected: dict[int, int] = {}
    for producer_id, first, last in log:
        want = expected.get(producer_id, 0)
        assert first == want, f"log {log}: a gap or a duplicate at {producer_id}/{first}"
        expected[producer_id] = last + 1
