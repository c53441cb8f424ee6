"""The blocking Producer against the fake cluster: futures and callbacks (on the loop thread),
the hot path without a loop round trip, blocking up to max.block.ms for metadata and memory,
Ctrl-C in every blocking call, timeouts of get/flush/close, close semantics, and sends from
many threads keeping each thread's order. Also what once went wrong: a send racing close
returning a future that never completed, a send for a record larger than batch.size spinning
while it waited for memory, close from a callback leaving the loop thread running, sends
accepted after the sender crashed."""

from __future__ import annotations

import gc
import itertools
import logging
import signal
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from producer_fakes import SENDER_CRASH, FakeCluster, break_drain, producer_settings

from replog.client.records import RecordMetadata
from replog.client.sync_producer import FutureRecordMetadata, Producer
from replog.errors import (
    ClientClosedError,
    IllegalStateError,
    InvalidRecordError,
    KafkaTimeoutError,
    MessageSizeTooLargeError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
)


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> FakeCluster:
    fake = FakeCluster()
    fake.create("one", 1)
    fake.create("t", 3)
    fake.install(monkeypatch)
    return fake


@pytest.fixture
def make(cluster: FakeCluster) -> Iterator[Callable[..., Producer]]:
    made: list[Producer] = []

    def build(**overrides: object) -> Producer:
        producer = Producer(producer_settings(cluster, **overrides))
        made.append(producer)
        return producer

    yield build
    cluster.gate.open()
    for producer in made:
        producer.close(timeout=0)


class CtrlC:
    """Deliver SIGINT to the main thread after `delay_s` (what pressing Ctrl-C does)."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s

    def __enter__(self) -> CtrlC:
        self._previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        main = threading.main_thread().ident
        assert main is not None and threading.current_thread() is threading.main_thread()
        self._timer = threading.Timer(self.delay_s, signal.pthread_kill, (main, signal.SIGINT))
        self.started = time.monotonic()
        self._timer.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._timer.cancel()
        self._timer.join()
        self.elapsed = time.monotonic() - self.started
        signal.signal(signal.SIGINT, self._previous)


def test_send_returns_a_future_of_the_records_metadata(
    cluster: FakeCluster, make: Callable[..., Producer]
) -> None:
    producer = make()
    future = producer.send("one", b"v", key=b"k", timestamp_ms=1_700_000_000_000)
    assert isinstance(future, FutureRecordMetadata)
    metadata = future.get(timeout=5)
    assert metadata == RecordMetadata("one", 0, 0, 1_700_000_000_000, 1, 1)
    assert future.succeeded() and not future.failed()
    assert future.value == metadata and future.exception is None and future.is_done
    assert cluster.log("one").values() == [b"v"]


def test_callbacks_run_on_the_loop_thread_and_errbacks_get_the_error(
    cluster: FakeCluster, make: Callable[..., Producer]
) -> None:
    producer = make()
    producer.send("one", b"warm-up").get(5)
    seen: list[tuple[str, Any, str]] = []
    done = threading.Event()

    def record(tag: str, outcome: Any) -> None:
        seen.append((tag, outcome, threading.current_thread().name))
        if len(seen) == 2:
            done.set()

    cluster.gate.close()  # so that the callbacks are added before the outcome is known
    ok = producer.send("one", b"ok").add_callback(record, "ok").add_errback(record, "ok-err")
    cluster.gate.open()
    ok.get(5)
    cluster.gate.close()
    cluster.refuse("one", 0, InvalidRecordError("one-0: bad record"))
    bad = producer.send("one", b"bad").add_errback(record, "bad").add_callback(record, "bad-ok")
    cluster.gate.open()
    assert done.wait(5)
    tags = sorted(tag for tag, _, _ in seen)
    assert tags == ["bad", "ok"]
    by_tag = {tag: (outcome, thread) for tag, outcome, thread in seen}
    assert by_tag["ok"][0] == ok.get(1)
    assert isinstance(by_tag["bad"][0], InvalidRecordError)
    assert {thread for _, thread in by_tag.values()} == {"replog-producer-replog-producer"}
    with pytest.raises(InvalidRecordError, match="bad record"):
        bad.get(1)
    assert bad.failed() and isinstance(bad.exception, InvalidRecordError)


def test_a_callback_added_when_done_runs_at_once_and_a_raising_one_is_logged(
    cluster: FakeCluster, make: Callable[..., Producer], caplog: pytest.LogCaptureFixture
) -> None:
    producer = make()
    future = producer.send("one", b"v")
    future.get(5)
    seen: list[RecordMetadata] = []

    def broken(_: RecordMetadata) -> None:
        raise RuntimeError("user bug")

    with caplog.at_level(logging.ERROR, logger="replog.client"):
        future.add_callback(broken).add_callback(seen.append)
    assert seen == [future.get()]
    assert "callback for topic 'one' raised" in caplog.text


def test_the_hot_path_does_not_wait_on_the_loop(
    cluster: FakeCluster, make: Callable[..., Producer], monkeypatch: pytest.MonkeyPatch
) -> None:
    producer = make(linger_ms=20)
    producer.send("t", b"first").get(5)  # learns the topic (one round trip)
    runs: list[str] = []
    original = producer._loop.run

    def counting(coro: Any, *, timeout_s: float | None, what: str) -> Any:
        runs.append(what)
        return original(coro, timeout_s=timeout_s, what=what)

    monkeypatch.setattr(producer._loop, "run", counting)
    futures = [producer.send("t", b"%d" % i, key=b"k%d" % i) for i in range(500)]
    assert runs == []
    producer.flush(5)
    assert all(f.succeeded() for f in futures)
    assert sum(len(log.values()) for log in cluster.topics["t"]) == 501


def test_an_unknown_topic_raises_from_send_at_once(
    cluster: FakeCluster, make: Callable[..., Producer]
) -> None:
    producer = make(max_block_ms=30_000)
    started = time.monotonic()
    with pytest.raises(UnknownTopicOrPartitionError, match=r"^topic 'nope' does not exist$"):
        producer.send("nope", b"v")
    assert time.monotonic() - started < 5  # not max.block.ms (30 s); room for a loaded machine
    with pytest.raises(UnknownTopicOrPartitionError, match="the topic has 1 partition"):
        producer.send("one", b"v", partition=1)


def test_a_dead_cluster_makes_send_raise_within_max_block_ms(
    cluster: FakeCluster, make: Callable[..., Producer]
) -> None:
    cluster.down.update({0, 1, 2})
    producer = make(max_block_ms=300)
    started = time.monotonic()
    with pytest.raises(KafkaTimeoutError, match=r"metadata not available within max\.block\.ms"):
        producer.send("one", b"v")
    assert 0.25 < time.monotonic() - started < 2


def test_send_blocks_for_buffer_memory_then_goes_on(
    cluster: FakeCluster, make: Callable[..., Producer]
) -> None:
    producer = make(batch_size=1_000, buffer_memory=2_000, max_block_ms=5_000)
    producer.send("one", b"warm-up").get(5)
    cluster.gate.close()
    held = [producer.send("one", b"v" * 900) for _ in range(2)]
    threading.Timer(0.2, cluster.gate.open).start()
    started = time.monotonic()
    third = producer.send("one", b"w" * 900)
    assert 0.15 < time.monotonic() - started < 3
    assert [f.get(5).offset for f in [*held, third]] == [1, 2, 3]


def test_send_raises_when_the_buffer_stays_full_for_max_block_ms(
    cluster: FakeCluster, make: Callable[..., Producer]
) -> None:
    producer = make(batch_size=1_000, buffer_memory=2_000, max_block_ms=200)
    producer.send("one", b"warm-up").get(5)
    cluster.gate.close()
    held = [producer.send("one", b"v" * 900) for _ in range(2)]
    started = time.monotonic()
    with pytest.raises(KafkaTimeoutError, match=r"no room in buffer.memory=2000 bytes within"):
        producer.send("one", b"v" * 900)
    assert 0.15 < time.monotonic() - started < 2
    cluster.gate.open()
    for future in held:
        future.get(5)


def test_a_send_waiting_for_memory_for_a_record_larger_than_batch_size_does_not_spin(
    cluster: FakeCluster, make: Callable[..., Producer], monkeypatch: pytest.MonkeyPatch
) -> None:
    producer = make(batch_size=1_000, buffer_memory=10_000, max_block_ms=500)
    producer.send("one", b"warm-up").get(5)
    cluster.gate.close()
    # Each reserves its size, 4097 bytes: 1806 left, more than batch.size, less than needed.
    held = [producer.send("one", b"x" * 4_000) for _ in range(2)]
    engine = producer._aio
    append = engine._append
    appends = 0

    def counting(*args: Any) -> Any:
        nonlocal appends
        appends += 1
        return append(*args)

    monkeypatch.setattr(engine, "_append", counting)
    with pytest.raises(KafkaTimeoutError, match=r"no room in buffer.memory=10000 bytes within"):
        producer.send("one", b"x" * 4_000)
    assert appends <= 10  # once per 0.1 s slice, not in a busy loop
    cluster.gate.open()
    for future in held:
        future.get(5)


def test_ctrl_c_interrupts_a_send_blocked_on_memory(
    cluster: FakeCluster, make: Callable[..., Producer]
) -> None:
    producer = make(batch_size=1_000, buffer_memory=1_000, max_block_ms=60_000)
    producer.send("one", b"warm-up").get(5)
    cluster.gate.close()
    producer.send("one", b"v" * 900)
    with CtrlC(0.2) as ctrl_c, pytest.raises(KeyboardInterrupt):
        producer.send("one", b"v" * 900)
    assert ctrl_c.elapsed < 2


def test_ctrl_c_interrupts_a_send_waiting_for_metadata(
    cluster: FakeCluster, make: Callable[..., Producer]
) -> None:
    cluster.down.update({0, 1, 2})
    producer = make(max_block_ms=60_000)
    with CtrlC(0.2) as ctrl_c, pytest.raises(KeyboardInterrupt):
        producer.send("one", b"v")
    assert ctrl_c.elapsed < 2


def test_ctrl_c_interrupts_get_and_flush(
    cluster: FakeCluster, make: Callable[..., Producer]
) -> None:
    producer = make()
    producer.send("one", b"warm-up").get(5)
    cluster.gate.close()
    future = producer.send("one", b"v")
    with CtrlC(0.2) as ctrl_c, pytest.raises(KeyboardInterrupt):
        future.get()
    assert ctrl_c.elapsed < 2
    with CtrlC(0.2) as ctrl_c, pytest.raises(KeyboardInterrupt):
        producer.flush()
    assert ctrl_c.elapsed < 2
    cluster.gate.open()
    assert future.get(5).offset == 1
    producer.flush(5)  # the interrupted flush left nothing behind


def test_get_and_flush_time_out(cluster: FakeCluster, make: Callable[..., Producer]) -> None:
    producer = make()
    producer.send("one", b"warm-up").get(5)
    cluster.gate.close()
    future = producer.send("one", b"v")
    with pytest.raises(KafkaTimeoutError, match=r"not delivered within get\(timeout=0.1\)"):
        future.get(timeout=0.1)
    with pytest.raises(KafkaTimeoutError, match="flush did not finish within 100 ms"):
        producer.flush(timeout=0.1)
    cluster.gate.open()
    future.get(5)


def test_close_delivers_then_refuses_sends(cluster: FakeCluster) -> None:
    with Producer(producer_settings(cluster, linger_ms=60_000)) as producer:
        futures = [producer.send("one", b"%d" % i) for i in range(5)]
    assert producer.closed
    assert [f.get(0).offset for f in futures] == list(range(5))
    with pytest.raises(ClientClosedError):
        producer.send("one", b"late")
    with pytest.raises(ClientClosedError):
        producer.flush()
    producer.close()  # idempotent


def test_close_with_a_timeout_fails_what_is_left(cluster: FakeCluster) -> None:
    producer = Producer(producer_settings(cluster))
    producer.send("one", b"warm-up").get(5)
    cluster.gate.close()
    future = producer.send("one", b"v")
    started = time.monotonic()
    producer.close(timeout=0.1)
    assert time.monotonic() - started < 2
    with pytest.raises(ClientClosedError, match="closed"):
        future.get(1)
    cluster.gate.open()


def test_close_from_a_callback_does_not_wait_for_itself(cluster: FakeCluster) -> None:
    producer = Producer(producer_settings(cluster))
    closed = threading.Event()

    def close_now(_: RecordMetadata) -> None:
        producer.close()
        closed.set()

    producer.send("one", b"v").add_callback(close_now)
    assert closed.wait(5)
    assert producer.closed
    producer.close()


def test_close_from_a_callback_ends_the_loop_thread(cluster: FakeCluster) -> None:
    producer = Producer(producer_settings(cluster, client_id="closes-in-a-callback"))

    def loop_threads() -> list[threading.Thread]:
        name = "replog-producer-closes-in-a-callback"
        return [t for t in threading.enumerate() if t.name == name and t.is_alive()]

    assert len(loop_threads()) == 1
    producer.send("one", b"v").add_callback(lambda _: producer.close())
    deadline = time.monotonic() + 5
    while not producer.closed and time.monotonic() < deadline:
        time.sleep(0.001)
    producer.close(timeout=5)  # waits for the callback's close to end the thread
    assert loop_threads() == []


def test_a_send_racing_close_from_another_thread_raises(
    cluster: FakeCluster, make: Callable[..., Producer]
) -> None:
    in_serializer = threading.Event()
    go_on = threading.Event()

    def slow(value: bytes) -> bytes:
        if value == b"late":
            in_serializer.set()
            go_on.wait(5)
        return value

    producer = make(value_serializer=slow)
    producer.send("one", b"warm-up").get(5)
    outcome: dict[str, object] = {}

    def send_late() -> None:
        try:
            outcome["future"] = producer.send("one", b"late")
        except ClientClosedError as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=send_late)
    thread.start()
    assert in_serializer.wait(5)  # past the closed check, before the append
    producer.close()
    go_on.set()
    thread.join(5)
    assert "future" not in outcome  # it would never complete: nothing drains the queue now
    assert str(outcome["error"]) == (
        "send to one-0: the producer was closed while the send was in progress; the record "
        "was not sent"
    )
    assert cluster.log("one").values() == [b"warm-up"]


def test_after_the_sender_crashed_send_and_flush_raise_naming_the_crash(
    cluster: FakeCluster, make: Callable[..., Producer], monkeypatch: pytest.MonkeyPatch
) -> None:
    producer = make()
    producer.send("one", b"warm-up").get(5)
    break_drain(monkeypatch, producer._aio._accumulator)
    with pytest.raises(UnknownServerError, match="the producer's sender failed"):
        producer.send("one", b"v").get(5)
    with pytest.raises(IllegalStateError, match=r"^send to topic 'one': " + SENDER_CRASH):
        producer.send("one", b"late")
    with pytest.raises(IllegalStateError, match=r"^flush: " + SENDER_CRASH):
        producer.flush(1)


def test_sends_from_many_threads_keep_each_threads_order(
    cluster: FakeCluster, make: Callable[..., Producer]
) -> None:
    producer = make(batch_size=2_000)
    errors: list[BaseException] = []

    def worker(name: bytes) -> None:
        try:
            for i in range(200):
                producer.send("one", b"%s:%03d" % (name, i))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(b"w%d" % n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    producer.flush(10)
    assert errors == []
    values = cluster.log("one").values()
    assert len(values) == 800
    for n in range(4):
        mine = [v for v in values if v is not None and v.startswith(b"w%d:" % n)]
        assert mine == [b"w%d:%03d" % (n, i) for i in range(200)]


def test_partitions_for_and_metrics(cluster: FakeCluster, make: Callable[..., Producer]) -> None:
    producer = make()
    assert producer.partitions_for("t") == {0, 1, 2}
    producer.send("t", b"v").get(5)
    assert producer.metrics()["records_delivered"] == 1


@pytest.mark.parametrize("timeout", ["1", -1, float("nan"), True])
def test_a_flush_timeout_that_is_no_number_is_a_value_error(
    make: Callable[..., Producer], timeout: object
) -> None:
    # flush("1") is a clear error, not an OverflowError (int("1" * 1000)).
    producer = make()
    with pytest.raises(ValueError, match=r"flush: timeout must be a number >= 0 or None"):
        producer.flush(timeout)  # type: ignore[arg-type]
    producer.flush(float("inf"))  # no limit, as None


fast_record = st.tuples(
    st.one_of(st.none(), st.binary(max_size=20)),
    st.one_of(st.binary(max_size=40), st.binary(min_size=200, max_size=3000)),
)


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    records=st.lists(fast_record, min_size=1, max_size=40), batch_size=st.sampled_from([300, 16384])
)
def test_the_fast_send_writes_the_batches_the_general_one_does(
    cluster: FakeCluster,
    monkeypatch: pytest.MonkeyPatch,
    records: list[tuple[bytes | None, bytes]],
    batch_size: int,
) -> None:
    """A plain bytes send skips `_prepare` (producer.py `_fast_data_limit`); `headers=[]`
    takes the general path to the same record. Both topics' batches must be the same bytes
    (the clock is fixed) and their futures the same metadata."""
    monkeypatch.setattr("replog.client.producer.wall_clock_ms", lambda: 1_700_000_000_000)
    fast, general = f"fast-{next(_TOPIC_NUMBERS)}", f"general-{next(_TOPIC_NUMBERS)}"
    cluster.create(fast, 1)
    cluster.create(general, 1)
    with Producer(producer_settings(cluster, linger_ms=60_000, batch_size=batch_size)) as producer:
        producer.send(fast, b"learn the topic")
        producer.send(general, b"learn the topic")
        producer.flush(5)
        fast_futures = [producer.send(fast, value, key=key) for key, value in records]
        general_futures = [
            producer.send(general, value, key=key, headers=[]) for key, value in records
        ]
        producer.flush(5)
    assert cluster.log(fast).batches == cluster.log(general).batches
    assert [f.get(0)._replace(topic="") for f in fast_futures] == [
        f.get(0)._replace(topic="") for f in general_futures
    ]


_TOPIC_NUMBERS = itertools.count()


def test_a_fast_send_still_refuses_what_the_general_one_refuses(
    make: Callable[..., Producer],
) -> None:
    producer = make(max_request_size=2_000)
    producer.send("one", b"learn the topic").get(5)
    limit = producer._aio._fast_data_limit
    producer.send("one", b"v" * limit).get(5)  # the largest record the fast path takes
    with pytest.raises(MessageSizeTooLargeError, match=r"max\.request\.size=2000"):
        producer.send("one", b"v" * (limit + 1))
    with pytest.raises(TypeError, match="topic must be a str"):
        producer.send(["one"], b"v")  # type: ignore[arg-type]
    assert producer.send("one", bytearray(b"not bytes")).get(5).serialized_value_size == 9
    assert make(value_serializer=str.encode)._aio._fast_data_limit == -1


def test_a_delivered_batch_and_its_futures_are_freed_without_the_cycle_collector(
    make: Callable[..., Producer],
) -> None:
    """A future refers to its batch and the batch to its futures until it is settled; then the
    batch lets go of them, so neither waits for a garbage collection."""
    producer = make()
    producer.send("one", b"learn the topic").get(5)
    gc.disable()
    try:
        future = producer.send("one", b"v")
        future.get(5)
        batch = future._batch
        assert batch is not None
        freed = weakref.ref(batch)
        del batch, future
        producer.flush(5)
        assert freed() is None
    finally:
        gc.enable()


@pytest.mark.parametrize("adding", ["callback and errback", "both"])
def test_callbacks_added_while_futures_settle_run_exactly_once(adding: str) -> None:
    """The loop thread settles futures while another thread adds callbacks to them: every
    callback runs once, with the outcome, whichever thread runs it (a future's first callable
    and the list of the rest alike)."""
    from replog.client.records import RecordMetadata

    futures = [FutureRecordMetadata("t") for _ in range(20_000)]
    ran: list[int] = []
    started = threading.Event()

    def settle() -> None:
        started.wait()
        for i, future in enumerate(futures):
            if i % 3:
                future.set_result(RecordMetadata("t", 0, i, 0, -1, 1))
            else:
                future.set_exception(ValueError(i))

    settler = threading.Thread(target=settle)
    settler.start()
    started.set()
    for future in futures:
        if adding == "both":
            future.add_both(
                lambda outcome: ran.append(
                    outcome.args[0] * 2 + 1
                    if isinstance(outcome, ValueError)
                    else outcome.offset * 2  # type: ignore[union-attr]
                )
            )
        else:
            future.add_callback(lambda metadata: ran.append(metadata.offset * 2))
            future.add_errback(lambda exc: ran.append(exc.args[0] * 2 + 1))
    settler.join()
    assert sorted(ran) == [i * 2 + (0 if i % 3 else 1) for i in range(len(futures))]


def _tracked_objects_per_future(add: Callable[[FutureRecordMetadata], object], n: int) -> float:
    """How many objects the cyclic garbage collector tracks per future of `n` made and given
    their callbacks by `add` (the callables themselves made beforehand)."""
    gc.collect()
    gc.disable()
    try:
        before = len(gc.get_objects())
        futures = [FutureRecordMetadata("t") for _ in range(n)]
        for future in futures:
            add(future)
        after = len(gc.get_objects())
    finally:
        gc.enable()
    return (after - before - 1) / n  # - the list `futures`


def test_a_future_with_one_callable_is_one_object_for_the_garbage_collector() -> None:
    """A producer holds the future of every record it has not delivered; each object a future
    adds is walked by the garbage collector while the record waits. One callable added (a
    callback, an errback, or `add_both`'s) adds none; a second one adds the list of the rest,
    and an errback its marker."""

    def on_success(metadata: object) -> None: ...

    def on_failure(exc: BaseException) -> None: ...

    def on_either(outcome: object) -> None: ...

    def both_ways(future: FutureRecordMetadata) -> None:
        future.add_callback(on_success).add_errback(on_failure)

    assert _tracked_objects_per_future(lambda future: None, 2000) < 1.01
    assert _tracked_objects_per_future(lambda future: future.add_callback(on_success), 2000) < 1.01
    assert _tracked_objects_per_future(lambda future: future.add_errback(on_failure), 2000) < 1.01
    assert _tracked_objects_per_future(lambda future: future.add_both(on_either), 2000) < 1.01
    assert _tracked_objects_per_future(both_ways, 2000) < 3.01


@pytest.mark.parametrize("fail", [False, True])
def test_every_kind_of_callable_runs_on_its_outcome_in_the_order_added(fail: bool) -> None:
    """Callbacks on success, errbacks on failure, `add_both`'s on either; the first one added
    (kept apart from the rest) runs before the others, whichever kind it is."""
    from replog.client import sync_producer
    from replog.client.records import RecordMetadata

    ran: list[str] = []
    future = FutureRecordMetadata("t")
    future.add_errback(lambda exc: ran.append("errback 1"))
    future.add_callback(lambda metadata: ran.append("callback 1"))
    future.add_both(lambda outcome: ran.append("both"))
    future.add_errback(lambda exc: ran.append("errback 2"))
    future.add_callback(lambda metadata: ran.append("callback 2"))
    if fail:
        future.set_exception(ValueError("no"))
        assert ran == ["errback 1", "both", "errback 2"]
    else:
        future.set_result(RecordMetadata("t", 0, 7, 0, -1, 1))
        assert ran == ["callback 1", "both", "callback 2"]
    assert all(future not in first for first in sync_producer._FIRST)  # nothing kept
