"""bench/produce.py's paced producer behaves as Kafka's producer does when answers are slow.

A linger window's records are ready at its due time and go at once while fewer than
`max.in.flight.requests.per.connection` requests are unanswered; while that many are, they wait
and go in fuller batches (up to `batch.size`), cut from one built batch. Every window is one
latency sample, counted from its due time to the batch holding its last record.
"""

from __future__ import annotations

import pytest
from bench_script import load_bench_script

from replog.record.batch import iter_batches

produce = load_bench_script("produce.py", "produce_bench")


def test_windows_go_alone_while_answers_keep_up() -> None:
    producer = produce.PacedProducer(500, 0.005, 10.0, 1023, max_in_flight=5)
    sent = []
    for _ in range(3):
        producer.close_window()
        sent.append(producer.next_batch())
        assert producer.next_batch() is None  # nothing more is ready
        producer.answered()
    assert sent == [(0, 500), (500, 500), (1000, 500)]
    assert (producer.in_flight, producer.sent) == (0, producer.ready)


def test_a_backlog_goes_in_full_batches_once_answers_come() -> None:
    producer = produce.PacedProducer(500, 0.005, 10.0, 1023, max_in_flight=2)
    producer.close_window()
    producer.close_window()
    assert [producer.next_batch(), producer.next_batch()] == [(0, 1000), None]
    producer.close_window()
    assert producer.next_batch() == (1000, 500)
    for _ in range(5):  # both requests stall: five windows wait
        producer.close_window()
        assert producer.next_batch() is None
    producer.answered()
    assert producer.next_batch() == (1500, 1023)  # batch.size, not a 500-record window
    assert producer.next_batch() is None
    producer.answered()
    assert producer.next_batch() == (2523, 1023)
    producer.answered()
    producer.answered()
    assert producer.next_batch() == (3546, 454)
    producer.answered()
    assert (producer.in_flight, producer.sent) == (0, producer.ready)


@pytest.mark.parametrize(
    ("first", "count", "windows"),
    [
        (0, 500, [0]),
        (0, 499, []),  # window 0's last record is 499
        (499, 1, [0]),
        (500, 1023, [1, 2]),  # records 500-1522: windows 1 and 2 end at 999 and 1499
        (1500, 1023, [3, 4]),
    ],
)
def test_a_batch_counts_the_windows_whose_last_record_it_holds(
    first: int, count: int, windows: list[int]
) -> None:
    producer = produce.PacedProducer(500, 0.005, 10.0, 1023)
    assert list(producer.windows_ending_in(first, count)) == windows


def test_every_window_is_counted_once_however_the_records_are_cut() -> None:
    producer = produce.PacedProducer(300, 0.005, 10.0, 1023)
    cuts = [(0, 1023), (1023, 77), (1100, 1), (1101, 1023), (2124, 876)]  # records 0-2999
    counted = [w for first, count in cuts for w in producer.windows_ending_in(first, count)]
    assert counted == list(range(10))
    assert producer.due(4) == pytest.approx(10.02)


def test_a_batch_of_the_first_records_is_valid_and_stamped() -> None:
    shape = produce.make_shape(1024)
    for count in (1, 500, 1022, 1023):
        data = shape.first_records(count, 987_654_321)
        [batch] = iter_batches(data)  # framing, length and CRC checked
        assert batch.header.records_count == count
        assert batch.header.last_offset_delta == count - 1
        records = list(batch.records())
        assert [r.offset for r in records] == list(range(count))
        assert produce.read_stamp(records[0].value) == 987_654_321
    whole = shape.first_records(1023, 0)
    assert len(whole) == len(shape.data) and whole[21:] == shape.data[21:]  # all but the CRC
    with pytest.raises(ValueError, match="a batch of 1024 records from a shape of 1023"):
        shape.first_records(1024, 0)
