"""The blocking Consumer against the in-process fake cluster: the thread hop, iteration,
wakeup and close from another thread, Ctrl-C, timeouts on a dead cluster."""

from __future__ import annotations

import asyncio
import concurrent.futures
import signal
import threading
import time
from collections.abc import Iterator

import pytest
from consumer_fakes import FakeCluster, consumer_settings

from replog import Consumer as ExportedConsumer
from replog.client.records import ConsumerRecord, OffsetAndMetadata, TopicPartition
from replog.client.sync_consumer import Consumer
from replog.errors import ClientClosedError, ConfigError, IllegalStateError, InvalidGroupIdError
from tests.eventually import wait_until

T0 = TopicPartition("t", 0)


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeCluster]:
    fake = FakeCluster()
    fake.install(monkeypatch)
    yield fake


def consumer(cluster: FakeCluster, *topics: str, **overrides: object) -> Consumer:
    return Consumer(*topics, **consumer_settings(cluster, **overrides))


def poll_until(c: Consumer, count: int, timeout_s: float = 5.0) -> list[ConsumerRecord]:
    got: list[ConsumerRecord] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < count:
        assert time.monotonic() < deadline, f"only {len(got)} of {count} records arrived"
        for records in c.poll(100).values():
            got.extend(records)
    return got


def test_round_trip_commit_and_positions(cluster: FakeCluster) -> None:
    assert ExportedConsumer is Consumer
    cluster.create("t")
    cluster.append("t", 0, [b"a", b"b"])
    with consumer(cluster, "t", group_id="g") as c:
        assert [r.value for r in poll_until(c, 2)] == [b"a", b"b"]
        assert c.assignment() == {T0} and c.subscription() == {"t"}
        assert c.position(T0) == 2
        c.commit()
        assert c.committed(T0) == 2
        assert c.beginning_offsets([T0]) == {T0: 0} and c.end_offsets([T0]) == {T0: 2}
        assert c.partitions_for_topic("t") == {0} and c.topics() == {"t"}
        c.seek_to_beginning()
        assert [r.value for r in poll_until(c, 2)] == [b"a", b"b"]
        done = c.commit_async({T0: OffsetAndMetadata(1)})
        assert done.result(timeout=5) is None
        assert cluster.committed[("g", T0)].offset == 1
        c.pause(T0)
        assert c.paused() == {T0}
        c.resume(T0)
        assert c.highwater(T0) == 2


def test_a_bad_config_fails_at_construction_without_a_thread() -> None:
    with pytest.raises(ConfigError, match=r"auto_offset_reset='smallest-ish': accepted values"):
        Consumer(bootstrap_servers="x:1", auto_offset_reset="smallest-ish", client_id="refused")
    # By name: threads other tests left behind may start or end meanwhile.
    assert not [t for t in threading.enumerate() if t.name.startswith("replog-consumer-refused")]


def test_iteration_stops_at_consumer_timeout(cluster: FakeCluster) -> None:
    cluster.create("t")
    cluster.append("t", 0, [b"%d" % i for i in range(5)])
    with consumer(cluster, consumer_timeout_ms=200) as c:
        c.assign([T0])
        started = time.monotonic()
        assert [r.offset for r in c] == [0, 1, 2, 3, 4]
        assert time.monotonic() - started < 3


def test_wakeup_from_another_thread_returns_a_blocked_poll(cluster: FakeCluster) -> None:
    cluster.create("t")
    with consumer(cluster) as c:
        c.assign([T0])
        timer = threading.Timer(0.2, c.wakeup)
        timer.start()
        started = time.monotonic()
        assert c.poll(10_000) == {}
        assert time.monotonic() - started < 2
        timer.join()


def test_close_from_another_thread_ends_a_blocked_iteration(cluster: FakeCluster) -> None:
    cluster.create("t")
    c = consumer(cluster)
    c.assign([T0])
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        iterating = pool.submit(lambda: list(c))
        wait_until(lambda: cluster.fetches, "the iteration polls (only a poll sends a fetch)")
        started = time.monotonic()
        c.close()
        assert iterating.result(timeout=5) == []
        assert time.monotonic() - started < 3
    with pytest.raises(ClientClosedError, match="poll: the consumer is closed"):
        c.poll(0)
    c.close()  # idempotent


def test_poll_on_a_dead_cluster_returns_within_its_timeout(cluster: FakeCluster) -> None:
    cluster.create("t")
    cluster.down.update({0, 1, 2})
    # The request timeouts far beyond the bound: a poll that waited one out fails it, and one
    # that kept its own timeout has 2 s to spare on a loaded machine.
    with consumer(
        cluster, group_id="g", request_timeout_ms=30_000, default_api_timeout_ms=60_000
    ) as c:
        c.assign([T0])
        started = time.monotonic()
        assert c.poll(500) == {}
        assert 0.45 < time.monotonic() - started < 2.5


def test_ctrl_c_interrupts_a_blocked_poll() -> None:
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals reach the main thread only")
    cluster = FakeCluster()
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    main = threading.main_thread().ident
    assert main is not None
    timer = threading.Timer(0.2, signal.pthread_kill, (main, signal.SIGINT))
    try:
        with pytest.MonkeyPatch.context() as patch:
            cluster.install(patch)
            cluster.create("t")
            with consumer(cluster) as c:
                c.assign([T0])
                timer.start()
                started = time.monotonic()
                with pytest.raises(KeyboardInterrupt):
                    c.poll(10_000)
                assert time.monotonic() - started < 2
                assert c.poll(0) == {}  # still usable afterwards
    finally:
        # Even when the test fails early: a SIGINT after the handler is restored would
        # interrupt whatever this process runs next (the rest of the session).
        timer.cancel()
        if timer.ident is not None:  # started
            timer.join()
        signal.signal(signal.SIGINT, previous)


def test_misuse_raises_typed_errors(cluster: FakeCluster) -> None:
    with consumer(cluster) as c:
        with pytest.raises(IllegalStateError, match="neither subscribed"):
            c.poll(0)
        with pytest.raises(InvalidGroupIdError):
            c.commit_async()
        with pytest.raises(InvalidGroupIdError):
            c.commit()


def test_a_config_dict_may_come_first_and_topic_names_must_be_str(cluster: FakeCluster) -> None:
    # Consumer({...}) (confluent-kafka's form, which replog's Producer takes) works, and
    # subscribe(None) or a non-str name are clear errors, not raw TypeErrors from inside.
    settings = consumer_settings(cluster)
    with Consumer(dict(settings), "orders") as c:
        assert c.subscription() == {"orders"}
        with pytest.raises(TypeError, match="subscribe: expected topic names, got NoneType"):
            c.subscribe(None)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"a topic name must be a str, not int \(7\)"):
            c.subscribe(["orders", 7])  # type: ignore[list-item]
        assert c.subscription() == {"orders"}  # unchanged by the refused calls
    with pytest.raises(TypeError, match="config dict given twice"):
        Consumer(dict(settings), config=dict(settings))


def test_a_timeout_that_is_no_number_is_a_value_error(cluster: FakeCluster) -> None:
    # poll("100") is a clear error, not a TypeError from adding an int to a str.
    with consumer(cluster, group_id="g") as c:
        c.assign([TopicPartition("t", 0)])
        with pytest.raises(ValueError, match="poll: timeout_ms must be a number >= 0"):
            c.poll("100")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="timeout_ms must be a number >= 0 or None"):
            c.committed(TopicPartition("t", 0), timeout_ms="100")  # type: ignore[call-overload]


def test_assign_takes_a_collection_of_partitions_only(cluster: FakeCluster) -> None:
    # assign("t3") names the string, not "got 't'" from iterating it.
    with consumer(cluster) as c:
        with pytest.raises(TypeError, match=r"takes a list of TopicPartition, not str \('t3'\)"):
            c.assign("t3")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="not one TopicPartition"):
            c.assign(TopicPartition("t", 0))  # type: ignore[arg-type]
        c.assign((TopicPartition("t", 0),))  # a tuple of them is a collection
        assert c.assignment() == {TopicPartition("t", 0)}


def test_a_blocking_consumer_works_where_an_event_loop_runs(cluster: FakeCluster) -> None:
    # A notebook cell runs inside the kernel's event loop: a blocking consumer made and used
    # there must not take that loop for its own (its engine lives on its private loop thread).
    cluster.create("t", 1)
    cluster.append("t", 0, [b"a", b"b"])

    async def cell() -> list[bytes | None]:
        c = consumer(cluster, "t", auto_offset_reset="earliest")
        try:
            got = [r.value for r in poll_until(c, 2)]
            c.seek(TopicPartition("t", 0), 1)
            return got + [r.value for r in poll_until(c, 1)]
        finally:
            c.close()

    assert asyncio.run(cell()) == [b"a", b"b", b"b"]
