"""RecordAccumulator without a network: batching by batch.size, readiness (linger, full, flush,
retry backoff), draining by leader within max.request.size, buffer.memory accounting and the
blocking wait for it (for what the record needs), a reservation larger than the whole buffer
refused at once, unknown leaders reported whether or not the batch is ready, muted partitions,
appends refused after `abort_queued(refuse)`, expiry, re-enqueueing in sequence order, stamping,
and completing the records' futures. Built batches are checked by decoding them (replog's reader and
kafka-python's, the independent oracle)."""

from __future__ import annotations

import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch

from replog.client.accumulator import (
    RECORD_OVERHEAD_MAX,
    RESERVATION_STEP,
    ProducerBatch,
    RecordAccumulator,
    ThreadSafeRecordAccumulator,
    encode_batches,
    record_size_bound,
)
from replog.client.idempotence import Idempotence
from replog.client.records import RecordMetadata, TopicPartition
from replog.errors import (
    ClientClosedError,
    ConfigError,
    MessageSizeTooLargeError,
    NotEnoughReplicasError,
)
from replog.record import (
    COMPRESSION_GZIP,
    BatchBuilder,
    RecordBatch,
    build_batch,
    validate_batch,
)
from replog.record.record import FAST_DATA_LIMIT, FAST_DELTAS, FAST_OFFSETS, encode_record
from replog.testing import ManualClock

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)
TP2 = TopicPartition("u", 0)
TS = 1_700_000_000_000


class Handle:
    """A minimal record future (what asyncio.Future offers the accumulator)."""

    def __init__(self) -> None:
        self.result: RecordMetadata | None = None
        self.error: BaseException | None = None

    def done(self) -> bool:
        return self.result is not None or self.error is not None

    def set_result(self, result: RecordMetadata) -> None:
        self.result = result

    def set_exception(self, exception: BaseException) -> None:
        self.error = exception


def accumulator(
    thread_safe: bool = False, **overrides: object
) -> tuple[RecordAccumulator, ManualClock]:
    clock = ManualClock(1_000)
    settings: dict[str, object] = {"batch_size": 1_000, "linger_ms": 5, "clock": clock}
    settings.update(overrides)
    kind = ThreadSafeRecordAccumulator if thread_safe else RecordAccumulator
    return kind(**settings), clock  # type: ignore[arg-type]


def leaders(mapping: dict[TopicPartition, int]) -> object:
    return mapping.get


def always(_: int) -> bool:
    return True


def test_the_size_bound_is_never_below_the_real_encoding() -> None:
    cases = [
        (None, None, ()),
        (b"k", b"v" * 300, ()),
        (b"k" * 200, None, (("trace", b"x" * 10), ("é", None))),
        (None, b"v" * 70_000, (("h", b""),)),
    ]
    for key, value, headers in cases:
        real = len(encode_record(127, 2**40, key, value, headers))
        slack = RECORD_OVERHEAD_MAX + sum(10 + 3 * len(name) for name, _ in headers)
        assert real <= record_size_bound(key, value, headers) <= real + slack


def test_records_fill_a_batch_up_to_batch_size_then_start_the_next() -> None:
    acc, _ = accumulator()
    value = b"v" * 100  # 109 bytes encoded: 8 fit after the 61-byte header in 1000
    batches = [acc.append(TP0, TS + i, None, value) for i in range(20)]
    assert len({id(b) for b in batches}) == 3
    assert [b.record_count for b in dict.fromkeys(batches)] == [8, 8, 4]  # type: ignore[union-attr]
    assert batches[0].full and batches[0].size_in_bytes == 61 + 8 * 109  # type: ignore[union-attr]
    big = acc.append(TP0, TS, None, b"x" * 5_000)  # larger than batch.size: a batch of its own
    assert big is not None and big.record_count == 1 and big is not batches[-1]
    assert acc.append(TP0, TS, None, b"y") is not big


def test_a_built_batch_holds_the_records_as_appended() -> None:
    acc, _ = accumulator(batch_size=16_384)
    headers = (("trace", b"abc"), ("none", None))
    acc.append(TP0, TS, b"k1", b"v1", headers)
    acc.append(TP0, TS + 7, None, b"v2")
    acc.append(TP0, TS + 3, b"k3", None)
    (batch,) = acc.drain_all()
    raw = batch.close()
    assert raw is batch.close()  # built once
    expected = build_batch(
        [(TS, b"k1", b"v1", headers), (TS + 7, None, b"v2", ()), (TS + 3, b"k3", None, ())]
    )
    assert raw == expected
    parsed = DefaultRecordBatch(bytearray(raw))
    assert parsed.validate_crc()
    records = list(parsed)
    assert [(r.offset, r.timestamp, r.key, r.value) for r in records] == [
        (0, TS, b"k1", b"v1"),
        (1, TS + 7, None, b"v2"),
        (2, TS + 3, b"k3", None),
    ]
    assert records[0].headers == [("trace", b"abc"), ("none", None)]


def test_compression_happens_when_the_batch_is_closed() -> None:
    acc, _ = accumulator(batch_size=16_384, compression=COMPRESSION_GZIP)
    for i in range(50):
        acc.append(TP0, TS, None, b"same text again and again %d" % (i % 3))
    (batch,) = acc.drain_all()
    raw = batch.close()
    assert len(raw) < 50 * 28 / 3
    parsed = RecordBatch.parse(raw)
    assert parsed.compression_codec == COMPRESSION_GZIP
    assert [r.value for r in parsed.records()][:2] == [
        b"same text again and again 0",
        b"same text again and again 1",
    ]


def test_encode_batches_builds_what_kafka_python_reads_back() -> None:
    records = [(TS + i, None, bytes([i % 256]) * 1024) for i in range(40)]
    built = encode_batches(records, batch_size=16_384)
    assert len(built) == 3  # 15 records of 1 KiB per 16 KiB batch
    oracles = [DefaultRecordBatch(bytearray(raw)) for raw in built]
    assert all(batch.validate_crc() for batch in oracles)
    decoded = [r for batch in oracles for r in batch]
    assert [(r.timestamp, r.value) for r in decoded] == [(t, v) for t, _, v in records]


def test_a_partition_is_ready_after_linger_or_when_full_or_flushing() -> None:
    acc, clock = accumulator(linger_ms=5)
    lead = leaders({TP0: 1, TP1: 2})
    acc.append(TP0, TS, None, b"a")
    result = acc.drain(clock.now_ms, lead, always, 1_000_000)  # type: ignore[arg-type]
    assert result.by_node == {} and result.next_ready_ms == clock.now_ms + 5
    clock.now_ms += 5
    result = acc.drain(clock.now_ms, lead, always, 1_000_000)  # type: ignore[arg-type]
    assert [b.record_count for b in result.by_node[1]] == [1]

    for _ in range(9):  # the first batch fills up: ready before linger
        acc.append(TP1, TS, None, b"v" * 100)
    result = acc.drain(clock.now_ms, lead, always, 1_000_000)  # type: ignore[arg-type]
    assert [b.record_count for b in result.by_node[2]] == [8]

    acc.append(TP0, TS, None, b"b")
    acc.flushing += 1
    result = acc.drain(clock.now_ms, lead, always, 1_000_000)  # type: ignore[arg-type]
    assert set(result.by_node) == {1, 2}  # TP1's remainder too
    assert acc.incomplete()  # drained, not done


def test_a_ready_leader_takes_the_first_batch_of_each_partition_it_leads() -> None:
    acc, clock = accumulator(linger_ms=50)
    lead = leaders({TP0: 1, TP1: 1, TP2: 2})
    for _ in range(9):
        acc.append(TP0, TS, None, b"v" * 100)  # TP0's first batch full: node 1 ready
    acc.append(TP1, TS, None, b"x")  # lingering, but rides along to node 1
    acc.append(TP2, TS, None, b"y")  # lingering on node 2: stays
    result = acc.drain(clock.now_ms, lead, always, 1_000_000)  # type: ignore[arg-type]
    assert [(b.topic_partition, b.record_count) for b in result.by_node[1]] == [
        (TP0, 8),
        (TP1, 1),
    ]
    assert 2 not in result.by_node
    # One batch per partition per request: TP0's second batch waits for the next drain.
    assert set(acc.queued_partitions()) == {TP0, TP2}


def test_a_backlog_of_complete_batches_goes_in_one_request() -> None:
    acc, clock = accumulator(linger_ms=50, batch_size=300)
    lead = leaders({TP0: 1})
    for _ in range(4):  # 200 B records: one per batch; three complete, the last still open
        acc.append(TP0, TS, None, b"v" * 200)
    with acc.lock:
        queued = list(acc._deques[TP0])
    result = acc.drain(clock.now_ms, lead, always, 10**6)  # type: ignore[arg-type]
    assert result.by_node[1] == queued[:3]  # in order; the open batch keeps lingering
    assert all(b.records is not None for b in queued[:3])
    assert acc.queued_partitions() == [TP0]
    # max.request.size bounds how many go along.
    for _ in range(4):
        acc.append(TP0, TS, None, b"v" * 200)
    size = queued[0].size_in_bytes
    second = acc.drain(clock.now_ms, lead, always, 2 * size)  # type: ignore[arg-type]
    assert len(second.by_node[1]) == 2


def test_every_partition_gets_its_turn_before_a_backlog_fills_the_request() -> None:
    acc, clock = accumulator(linger_ms=50, batch_size=300)
    lead = leaders({TP0: 1, TP1: 1})
    for _ in range(5):
        acc.append(TP0, TS, None, b"v" * 200)  # four complete batches and an open one
    acc.append(TP1, TS, None, b"w" * 200)  # lingering: rides along
    with acc.lock:
        tp0 = list(acc._deques[TP0])
        (tp1,) = acc._deques[TP1]
    size = tp0[0].size_in_bytes
    result = acc.drain(clock.now_ms, lead, always, 3 * size)  # type: ignore[arg-type]
    assert result.by_node[1] == [tp0[0], tp1, tp0[1]]


def test_a_retried_batch_goes_alone() -> None:
    acc, clock = accumulator(linger_ms=0, batch_size=300)
    lead = leaders({TP0: 1})
    acc.append(TP0, TS, None, b"v" * 200)
    (retried,) = acc.drain(clock.now_ms, lead, always, 10**6).by_node[1]  # type: ignore[arg-type]
    for _ in range(3):
        acc.append(TP0, TS, None, b"v" * 200)
    retried.attempts = 1
    acc.reenqueue(retried, clock.now_ms)
    assert acc.drain(clock.now_ms, lead, always, 10**6).by_node[1] == [retried]  # type: ignore[arg-type]


def test_with_idempotence_a_request_stays_within_the_pending_limit() -> None:
    acc, clock = accumulator(linger_ms=0, batch_size=300)
    idempotence = Idempotence()
    idempotence.set_producer_id(7, 0)
    acc.idempotence = idempotence
    lead = leaders({TP0: 1})
    for _ in range(9):
        acc.append(TP0, TS, None, b"v" * 200)
    first = acc.drain(clock.now_ms, lead, always, 10**6).by_node[1]  # type: ignore[arg-type]
    assert [b.base_sequence for b in first] == [0, 1, 2, 3, 4]  # 5 pending at most
    assert acc.drain(clock.now_ms, lead, always, 10**6).by_node == {}  # type: ignore[arg-type]
    for batch in first[:2]:
        idempotence.on_success(batch)
    second = acc.drain(clock.now_ms, lead, always, 10**6).by_node[1]  # type: ignore[arg-type]
    assert [b.base_sequence for b in second] == [5, 6]


def test_max_request_size_splits_requests_and_partitions_take_turns() -> None:
    acc, clock = accumulator(linger_ms=0, batch_size=300)
    tps = [TopicPartition("t", p) for p in range(4)]
    lead = leaders(dict.fromkeys(tps, 1))
    for tp in tps:
        acc.append(tp, TS, None, b"v" * 200)
    first = acc.drain(clock.now_ms, lead, always, 600)  # type: ignore[arg-type]
    assert [b.topic_partition for b in first.by_node[1]] == tps[:2]
    for tp in tps[:2]:
        acc.append(tp, TS, None, b"v" * 200)
    second = acc.drain(clock.now_ms, lead, always, 600)  # type: ignore[arg-type]
    assert [b.topic_partition for b in second.by_node[1]] == tps[2:]
    # A batch larger than max.request.size still goes, alone, when its turn comes.
    acc.append(TP2, TS, None, b"z" * 900)
    lead = leaders({TP2: 1, **dict.fromkeys(tps, 1)})
    third = acc.drain(clock.now_ms, lead, always, 600)  # type: ignore[arg-type]
    assert [b.topic_partition for b in third.by_node[1]] == tps[:2]
    fourth = acc.drain(clock.now_ms, lead, always, 600)  # type: ignore[arg-type]
    assert [b.topic_partition for b in fourth.by_node[1]] == [TP2]


def test_unknown_leaders_and_busy_nodes_keep_batches_queued() -> None:
    acc, clock = accumulator(linger_ms=0)
    acc.append(TP0, TS, None, b"a")
    acc.append(TP1, TS, None, b"b")
    result = acc.drain(clock.now_ms, leaders({TP1: 3}), lambda node: node != 3, 1_000_000)  # type: ignore[arg-type]
    assert result.by_node == {}
    assert result.unknown_leaders == {TP0}
    assert set(acc.queued_partitions()) == {TP0, TP1}


def test_an_unknown_leader_is_reported_while_the_batch_still_lingers() -> None:
    # Else nothing asks for the leader until linger.ms passed, and nothing wakes the sender then.
    acc, clock = accumulator(linger_ms=1_000)
    acc.append(TP0, TS, None, b"a")
    result = acc.drain(clock.now_ms, leaders({}), always, 1_000_000)  # type: ignore[arg-type]
    assert result.unknown_leaders == {TP0}
    assert set(acc.queued_partitions()) == {TP0}


def test_a_muted_partition_is_not_drained_until_unmuted() -> None:
    acc, clock = accumulator(linger_ms=0)
    acc.append(TP0, TS, None, b"a")
    acc.append(TP1, TS, None, b"b")
    acc.mute(TP0)
    lead = leaders({TP0: 1, TP1: 1})
    first = acc.drain(clock.now_ms, lead, always, 1_000_000)  # type: ignore[arg-type]
    assert [b.topic_partition for b in first.by_node[1]] == [TP1]
    assert acc.is_muted(TP0) and not first.unknown_leaders
    acc.unmute(TP0)
    second = acc.drain(clock.now_ms, lead, always, 1_000_000)  # type: ignore[arg-type]
    assert [b.topic_partition for b in second.by_node[1]] == [TP0]


@pytest.mark.parametrize("thread_safe", [False, True])
def test_a_reservation_larger_than_all_of_buffer_memory_raises_at_once(thread_safe: bool) -> None:
    acc, _ = accumulator(thread_safe, batch_size=1_000, buffer_memory=900)
    with pytest.raises(ConfigError, match=r"^batch.size=1000 is larger than buffer.memory=900"):
        acc.append(TP0, TS, None, b"a")
    acc, _ = accumulator(thread_safe, batch_size=100, buffer_memory=900)
    with pytest.raises(MessageSizeTooLargeError) as raised:
        acc.append(TP0, TS, None, b"v" * 900)
    assert str(raised.value) == (
        "the record to topic 't' is up to 997 bytes when serialized, larger than buffer.memory=900"
    )
    assert acc.available_memory == 900 and not acc.has_queued()


@pytest.mark.parametrize("thread_safe", [False, True])
def test_after_abort_queued_with_refuse_every_append_raises(thread_safe: bool) -> None:
    acc, _ = accumulator(thread_safe, linger_ms=1_000)
    aborted = acc.append(TP0, TS, None, b"a")
    assert acc.abort_queued(lambda tp: ClientClosedError(f"closed: {tp.partition}")) == [aborted]
    for _ in range(2):  # also where an open batch was
        with pytest.raises(ClientClosedError, match=r"^closed: 0$"):
            acc.append(TP0, TS, None, b"b")
    assert not acc.has_queued()


def test_a_blocked_thread_waits_for_as_much_memory_as_the_record_needs() -> None:
    acc, _ = accumulator(thread_safe=True, batch_size=1_000, buffer_memory=3_000)
    assert isinstance(acc, ThreadSafeRecordAccumulator)
    assert acc.append(TP0, TS, None, b"a") is not None  # 2000 left: more than batch.size
    started = time.monotonic()
    acc.wait_for_memory(0.2, needed=2_500)
    assert time.monotonic() - started >= 0.15
    started = time.monotonic()
    acc.wait_for_memory(5, needed=2_000)
    assert time.monotonic() - started < 1


def test_a_retry_waits_for_its_backoff_and_goes_back_in_sequence_order() -> None:
    acc, clock = accumulator(linger_ms=0)
    acc.idempotence = object()  # type: ignore[assignment]  # only tested for None
    batches = []
    for sequence in (10, 0, 5):
        batch = ProducerBatch(TP0, clock.now_ms, 0)
        batch.base_sequence = sequence
        batch.attempts = 1
        batches.append(batch)
    new = acc.append(TP0, TS, None, b"new")
    for batch in batches:
        acc.reenqueue(batch, clock.now_ms + 20)
    with acc.lock:
        queued = list(acc._deques[TP0])
    assert [b.base_sequence for b in queued] == [0, 5, 10, -1]
    assert queued[-1] is new


def test_without_idempotence_retries_go_back_in_creation_order() -> None:
    # A failed call fails its requests oldest first; each request's retries go back then, and
    # must not jump ahead of the older requests' (putting each one first would reverse them).
    acc, clock = accumulator(linger_ms=0, batch_size=300)
    lead = leaders({TP0: 1})
    for _ in range(4):
        acc.append(TP0, TS, None, b"v" * 200)
    sent = [acc.drain(clock.now_ms, lead, always, 300).by_node[1][0] for _ in range(3)]  # type: ignore[arg-type]
    for batch in sent:  # three requests, answered (failed) oldest first
        batch.attempts = 1
        acc.reenqueue(batch, clock.now_ms)
    with acc.lock:
        queued = list(acc._deques[TP0])
    assert queued[:3] == sent
    assert [b.serial for b in queued] == [0, 1, 2, 3]


def test_retry_backoff_delays_readiness() -> None:
    acc, clock = accumulator(linger_ms=0)
    acc.append(TP0, TS, None, b"a")
    (batch,) = acc.drain(clock.now_ms, leaders({TP0: 1}), always, 10**6).by_node[1]  # type: ignore[arg-type]
    batch.attempts = 1
    acc.reenqueue(batch, clock.now_ms + 20)
    result = acc.drain(clock.now_ms, leaders({TP0: 1}), always, 10**6)  # type: ignore[arg-type]
    assert result.by_node == {} and result.next_ready_ms == clock.now_ms + 20
    clock.now_ms += 20
    assert acc.drain(clock.now_ms, leaders({TP0: 1}), always, 10**6).by_node[1] == [batch]  # type: ignore[arg-type]


def test_buffer_memory_is_reserved_per_batch_and_returned_when_done() -> None:
    acc, _ = accumulator(batch_size=1_000, buffer_memory=2_500)
    first = acc.append(TP0, TS, None, b"a")
    second = acc.append(TP1, TS, None, b"b")
    assert first is not None and second is not None
    assert acc.available_memory == 500
    assert acc.append(TP2, TS, None, b"c") is None  # a third batch does not fit
    assert acc.append(TP0, TS, None, b"d") is first  # appending to an open batch does
    first.complete(0)
    acc.deallocate(first)
    acc.deallocate(first)  # once only
    assert acc.available_memory == 1_500
    assert acc.append(TP2, TS, None, b"c") is not None


def test_a_blocked_thread_wakes_when_memory_is_freed() -> None:
    acc, _ = accumulator(thread_safe=True, batch_size=1_000, buffer_memory=1_000)
    assert isinstance(acc, ThreadSafeRecordAccumulator)
    batch = acc.append(TP0, TS, None, b"a")
    assert batch is not None and acc.append(TP1, TS, None, b"b") is None
    woke = threading.Event()

    def waiter() -> None:
        while acc.append(TP1, TS, None, b"b") is None:
            acc.wait_for_memory(5)
        woke.set()

    thread = threading.Thread(target=waiter)
    thread.start()
    deadline = time.monotonic() + 5
    while acc.memory_waiters == 0 and time.monotonic() < deadline:
        time.sleep(0.001)
    assert acc.memory_waiters == 1
    assert not woke.is_set()
    batch.complete(0)
    acc.deallocate(batch)
    assert woke.wait(5)
    thread.join(5)
    assert acc.memory_waiters == 0


def test_batches_older_than_the_delivery_timeout_expire_from_the_front() -> None:
    acc, clock = accumulator(linger_ms=1_000, batch_size=200)
    old = acc.append(TP0, TS, None, b"v" * 120)
    clock.now_ms += 50
    young = acc.append(TP0, TS, None, b"v" * 120)
    assert old is not young
    assert acc.expired(clock.now_ms, 100) == []
    assert acc.next_expiry_ms(100) == 1_100
    clock.now_ms = 1_100
    assert acc.expired(clock.now_ms, 100) == [old]
    assert old is not None and old.expired
    assert acc.next_expiry_ms(100) == 1_150


def test_stamping_writes_the_producer_fields_and_a_valid_crc() -> None:
    acc, _ = accumulator()
    acc.append(TP0, TS, None, b"a")
    acc.append(TP0, TS, None, b"b")
    (batch,) = acc.drain_all()
    batch.stamp(4242, 3, 2**31 - 1)
    header = validate_batch(batch.records)  # type: ignore[arg-type]
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (4242, 3, 2**31 - 1)
    assert batch.last_sequence == 0  # wraps
    assert header.records_count == 2


def test_a_batch_stamped_before_it_is_built_is_built_once_with_the_producer_fields() -> None:
    acc, _ = accumulator()
    acc.append(TP0, TS, None, b"a")
    acc.append(TP0, TS, None, b"b")
    (batch,) = acc.abort_queued()
    batch.stamp(4242, 3, 17)
    assert batch.records is None  # the drain stamps, then builds: one build, one CRC
    header = validate_batch(batch.close())
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (4242, 3, 17)
    assert batch.last_sequence == 18


def test_completing_a_batch_resolves_each_records_future() -> None:
    acc, _ = accumulator()
    handles = [Handle() for _ in range(3)]
    acc.append(TP0, TS, b"key", b"v1", (), handles[0])
    acc.append(TP0, TS + 1, None, b"v22", (), handles[1])
    acc.append(TP0, TS + 2, None, None, (), handles[2])
    (batch,) = acc.drain_all()
    seen: list[ProducerBatch] = []
    batch.add_done_callback(seen.append)
    assert batch.complete(40)
    assert not batch.complete(99) and not batch.fail(RuntimeError())
    assert [h.result for h in handles] == [
        RecordMetadata("t", 0, 40, TS, 3, 2),
        RecordMetadata("t", 0, 41, TS + 1, -1, 3),
        RecordMetadata("t", 0, 42, TS + 2, -1, -1),
    ]
    assert seen == [batch]
    batch.add_done_callback(seen.append)  # already done: at once
    assert seen == [batch, batch]


def test_log_append_time_and_unknown_offsets_reach_the_futures() -> None:
    acc, _ = accumulator()
    handle = Handle()
    acc.append(TP0, TS, None, b"v", (), handle)
    (batch,) = acc.drain_all()
    batch.complete(-1, 1_800_000_000_000)
    assert handle.result == RecordMetadata("t", 0, -1, 1_800_000_000_000, -1, 1)


def test_failing_a_batch_fails_each_future_with_the_error() -> None:
    acc, _ = accumulator(thread_safe=True)
    handles = [Handle(), Handle()]
    for handle in handles:
        acc.append(TP0, TS, None, b"v", (), handle)
    (batch,) = acc.drain_all()
    error = NotEnoughReplicasError("t-0: 1 in sync, 2 needed")
    assert batch.done_event is not None and not batch.done_event.is_set()
    batch.fail(error)
    assert [h.error for h in handles] == [error, error]
    assert batch.done_event.is_set()


@pytest.mark.parametrize("batch_size", [0, 1])
def test_a_tiny_batch_size_means_one_record_per_batch(batch_size: int) -> None:
    acc, _ = accumulator(batch_size=batch_size)
    batches = {id(acc.append(TP0, TS, None, b"v")) for _ in range(3)}
    assert len(batches) == 3


# --- the encoding: the accumulator's own (fast path and general) against BatchBuilder ----------

AppendedRecord = tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]

# Records that reach every branch of `try_append`: null and non-null keys and values, headers,
# timestamp deltas of 0, small, past the fast tables and negative, sizes around the limits.
appended_records = st.tuples(
    st.sampled_from([0, 0, 0, 1, 7, FAST_DELTAS - 1, FAST_DELTAS, 9_000, -1, -5_000]),
    st.none() | st.binary(max_size=40) | st.just(b"k" * FAST_DATA_LIMIT),
    st.none()
    | st.binary(max_size=400)
    | st.sampled_from([b"v" * (FAST_DATA_LIMIT - 1), b"w" * FAST_DATA_LIMIT, b"x" * 9_000]),
    st.just([])
    | st.lists(st.tuples(st.text(max_size=6), st.none() | st.binary(max_size=9)), max_size=2),
)


def expected_batches(records: list[AppendedRecord], batch_size: int) -> list[bytes]:
    """The batches `BatchBuilder.try_append` (an independent encoder) makes of the records
    with batch.size as the limit: what the accumulator must build, byte for byte."""
    built: list[bytes] = []
    builder = BatchBuilder()
    for record in records:
        if builder.try_append(*record, size_limit=batch_size) < 0:
            built.append(builder.build())
            builder = BatchBuilder()
            builder.append(*record)
    built.append(builder.build())
    return built


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(appended_records, min_size=1, max_size=40),
    st.sampled_from([0, 100, 1_000, 5_000, 16_384, 100_000]),
    st.booleans(),
)
def test_batches_are_byte_identical_to_batch_builders(
    records: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
    batch_size: int,
    thread_safe: bool,
) -> None:
    acc, _ = accumulator(thread_safe, batch_size=batch_size, buffer_memory=10**9)
    timed = [(TS + delta, key, value, headers) for delta, key, value, headers in records]
    handles = [Handle() for _ in timed]
    batches: list[ProducerBatch] = []
    for (timestamp, key, value, headers), handle in zip(timed, handles, strict=True):
        batch = acc.append(TP0, timestamp, key, value, headers, handle)
        assert batch is not None
        if not batches or batch is not batches[-1]:
            batches.append(batch)
        if len(batches) > 1 or batch.record_count > 1:
            assert batch.size_in_bytes <= batch_size or batch.record_count == 1
    assert acc.drain_all() == batches
    expected = expected_batches(timed, batch_size)
    assert [batch.close() for batch in batches] == expected
    assert [batch.size_in_bytes for batch in batches] == [len(raw) for raw in expected]
    # every record's future learns its offset, timestamp and sizes
    base = 100
    for batch in batches:
        batch.complete(base)
        base += batch.record_count
        acc.deallocate(batch)
    assert acc.available_memory == 10**9
    assert [h.result for h in handles] == [
        RecordMetadata(
            "t",
            0,
            100 + index,
            timestamp,
            -1 if key is None else len(key),
            -1 if value is None else len(value),
        )
        for index, (timestamp, key, value, _) in enumerate(timed)
    ]


def test_offset_deltas_past_the_fast_tables_take_the_general_path() -> None:
    acc, _ = accumulator(batch_size=100_000)
    count = FAST_OFFSETS + 50
    for i in range(count):
        assert acc.append(TP0, TS + i % 3, None if i % 2 else b"k", b"") is not None
    (batch,) = acc.drain_all()
    assert batch.close() == build_batch(
        [(TS + i % 3, None if i % 2 else b"k", b"", ()) for i in range(count)]
    )


def test_a_timestamp_out_of_range_raises_and_changes_nothing() -> None:
    acc, _ = accumulator(thread_safe=True, batch_size=16_384, buffer_memory=50_000)
    with pytest.raises(ValueError, match="timestamp"):
        acc.append(TP0, 2**63, None, b"a")
    assert acc.available_memory == 50_000 and not acc.queued_partitions()
    batch = acc.append(TP0, -(2**62), None, b"a")
    assert batch is not None
    with pytest.raises(ValueError, match="int64"):
        acc.append(TP0, 2**62 + 1, None, b"b")  # the delta to the first is no int64
    with pytest.raises(ValueError, match="timestamp"):
        acc.append(TP0, -(2**63) - 1, None, b"c")
    assert acc.append(TP0, -(2**62) + 5, b"k", b"d") is batch
    (drained,) = acc.drain_all()
    assert drained.close() == build_batch(
        [(-(2**62), None, b"a", ()), (-(2**62) + 5, b"k", b"d", ())]
    )


def test_a_batch_holds_no_more_than_its_reservation() -> None:
    """What a batch holds (its encoded pieces: its uncompressed size) never exceeds the
    buffer.memory it reserved, whatever mix of records fills it; only a batch of one record
    larger than batch.size reserves more than batch.size."""
    acc, _ = accumulator(batch_size=2_000, buffer_memory=10**9)
    sizes = [0, 5, 100, 700, 1_900, 3_000, 10, 1_950]
    for i, size in enumerate(sizes * 5):
        assert acc.append(TP0, TS + i, b"k" if i % 3 else None, b"v" * size) is not None
    batches = acc.drain_all()
    assert len(batches) > 10
    for batch in batches:
        built = len(batch.close())
        assert built <= batch.reserved
        if batch.record_count > 1 or built <= 2_000:
            assert built <= 2_000 and batch.reserved == 2_000
        else:  # one record past batch.size: its upper bound plus the header
            assert batch.reserved - built <= RECORD_OVERHEAD_MAX


@pytest.mark.parametrize("thread_safe", [False, True])
@pytest.mark.parametrize("headers", [(), (("h", b"x"),)])  # the fast path, and the general one
def test_a_batch_reserves_16_kib_first_and_more_as_it_fills_up_to_batch_size(
    thread_safe: bool, headers: tuple[tuple[str, bytes], ...]
) -> None:
    """A partition with one small record holds 16 KiB of the buffer whatever batch.size is; a
    backlog fills batches to batch.size, each within what it reserved."""
    acc, _ = accumulator(thread_safe, batch_size=100_000, buffer_memory=10**6)
    first = acc.append(TP0, TS, None, b"v" * 10, headers)
    assert first is not None and first.reserved == RESERVATION_STEP
    assert acc.available_memory == 10**6 - RESERVATION_STEP
    batches = [first]
    for _ in range(300):
        batch = acc.append(TP0, TS, None, b"v" * 1_000, headers)
        assert batch is not None
        if batch is not batches[-1]:
            batches.append(batch)
    assert len(batches) == 4
    reserved = sum(batch.reserved for batch in batches)
    assert acc.available_memory == 10**6 - reserved
    built = [len(batch.close()) for batch in acc.drain_all()]
    for batch, size in zip(batches, built, strict=True):
        assert size <= batch.reserved <= 100_000
    assert min(built[:-1]) > 100_000 - 1_100  # full: the next record did not fit batch.size
    counts = [len(list(RecordBatch.parse(batch.close()).records())) for batch in batches]
    assert counts == [batch.record_count for batch in batches] and sum(counts) == 301


@pytest.mark.parametrize("thread_safe", [False, True])
def test_a_batch_that_cannot_grow_is_full_and_the_next_one_waits_for_memory(
    thread_safe: bool,
) -> None:
    acc, _ = accumulator(thread_safe, batch_size=10**6, buffer_memory=40_000)
    first = acc.append(TP0, TS, None, b"v" * 1_000)
    assert first is not None
    while (batch := acc.append(TP0, TS, None, b"v" * 1_000)) is first:
        pass
    assert batch is None  # the buffer is all the first batch's: a second one waits
    assert first.full and first.reserved == 40_000 and acc.available_memory == 0
    assert len(first.close()) <= 40_000
    first.complete(0)
    acc.deallocate(first)
    assert acc.available_memory == 40_000
    assert acc.append(TP0, TS, None, b"v" * 1_000) is not None


def test_a_batch_does_not_grow_while_an_append_waits_for_memory() -> None:
    acc, _ = accumulator(batch_size=10**6, buffer_memory=10**6)
    first = acc.append(TP0, TS, None, b"v" * 10_000)
    assert first is not None and first.reserved == RESERVATION_STEP
    acc.memory_waiters = 1  # a new batch of another partition waits: it gets memory first
    second = acc.append(TP0, TS, None, b"v" * 10_000)
    assert second is not None and second is not first
    assert first.full and first.reserved == RESERVATION_STEP


@pytest.mark.parametrize(
    "record",
    [
        (TS, None, b"v" * 100, ()),  # fast path, the batch's first timestamp
        (TS + 3, None, b"v" * 60, ()),  # fast path, a timestamp delta
        (TS + 1, b"key", b"v" * 200, ()),  # fast path with a key
        (TS, None, b"v" * 50, (("h", b"x"),)),  # general path: headers
        (TS - 1, None, None, ()),  # general path: a negative delta, a null value
    ],
    ids=["equal-timestamps", "delta", "key", "headers", "general"],
)
@pytest.mark.parametrize("slack", [0, -1])
def test_a_record_fits_exactly_up_to_batch_size(record: AppendedRecord, slack: int) -> None:
    """batch.size is decided on exact sizes: k records whose batch is exactly batch.size bytes
    share it, one byte less and the k-th starts the next batch."""
    builder = BatchBuilder()
    for _ in range(5):
        builder.append(*record)
    acc, _ = accumulator(batch_size=builder.size_in_bytes + slack)
    batches = [acc.append(TP0, *record) for _ in range(6)]
    first = batches[0]
    assert first is not None
    assert batches.count(first) == (5 if slack == 0 else 4)
    assert first.size_in_bytes <= builder.size_in_bytes + slack
    assert first.close() == build_batch([record] * batches.count(first))
