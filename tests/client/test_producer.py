"""The asyncio Producer (accumulator + sender + idempotence) against a fake cluster whose logs
judge idempotent batches as a replog broker does.

Covered: delivery and offsets, keyed partitioning, acks=0, batching, retries of retriable
errors, ordering with 5 requests in flight when an early batch fails, a later one overtakes it
or a failed call fails them all together, lost answers deduplicated by the broker (and
duplicated without idempotence), leader moves, expiry with its exact error, non-retriable
errors, a backlog sent as one entry per partition (offsets per batch, order kept through
retries, a refused entry resent batch by batch), the producer id's retries (and the fatal end of
one refused for good), bad input and unknown topics failing fast, backpressure up to
max.block.ms, flush and close, and the in-flight limit (one request per partition with a limit
of 1, across a leader move). Also what once went wrong: a lingering batch whose leader was
unknown waiting out delivery.timeout.ms, a send waiting for metadata that failed late and
stalled every send behind it, a cancelled waiting send written anyway, batch.size above
buffer.memory blocking every send, sends accepted after the sender crashed.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import time
from collections.abc import AsyncIterator, Callable

import pytest
import pytest_asyncio
from producer_fakes import (
    SENDER_CRASH,
    FakeCluster,
    FakeConnections,
    break_drain,
    producer_settings,
)

from replog.client.partitioner import murmur2, to_positive
from replog.client.producer import Producer
from replog.client.records import RecordMetadata
from replog.errors import (
    ClientClosedError,
    ConfigError,
    CoordinatorLoadInProgressError,
    IllegalStateError,
    InvalidRecordError,
    InvalidTopicError,
    KafkaTimeoutError,
    MessageSizeTooLargeError,
    NetworkError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
)


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> FakeCluster:
    fake = FakeCluster()
    fake.create("t", 3)
    fake.create("one", 1)
    fake.install(monkeypatch)
    return fake


class Made:
    """Producers a test made, closed at its end."""

    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster
        self.producers: list[Producer] = []

    def __call__(self, **overrides: object) -> Producer:
        producer = Producer(producer_settings(self.cluster, **overrides))
        self.producers.append(producer)
        return producer


@pytest_asyncio.fixture
async def make(cluster: FakeCluster) -> AsyncIterator[Made]:
    made = Made(cluster)
    yield made
    cluster.gate.open()
    for producer in made.producers:
        await producer.close(timeout_ms=0)


async def until(condition: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.001)


@pytest.mark.asyncio
async def test_send_returns_where_the_record_landed(cluster: FakeCluster, make: Made) -> None:
    producer = make()
    metadata = await producer.send(
        "one", b"hello", key=b"k", headers=[("h", b"1")], timestamp_ms=1_700_000_000_000
    )
    assert metadata == RecordMetadata("one", 0, 0, 1_700_000_000_000, 1, 5)
    second = await producer.send("one", b"again")
    assert (second.partition, second.offset) == (0, 1)
    (record, _) = cluster.log("one").records()
    assert (record.key, record.value, record.headers) == (b"k", b"hello", (("h", b"1"),))
    header = cluster.log("one").headers()[0]
    assert header.producer_id == 1000 and header.base_sequence == 0  # idempotent by default


@pytest.mark.asyncio
async def test_keyed_records_go_where_murmur2_says(cluster: FakeCluster, make: Made) -> None:
    producer = make()
    keys = [b"21", b"user-1", b"user-2", b"", b"x" * 50]
    results = await asyncio.gather(*(producer.send("t", b"v", key=k) for k in keys))
    assert [r.partition for r in results] == [to_positive(murmur2(k)) % 3 for k in keys]


@pytest.mark.asyncio
async def test_records_of_one_linger_share_a_batch(cluster: FakeCluster, make: Made) -> None:
    producer = make(linger_ms=50)
    futures = [producer.send_nowait("one", b"%d" % i) for i in range(100)]
    results = await asyncio.gather(*futures)
    assert [r.offset for r in results] == list(range(100))
    assert len(cluster.calls) == 1
    assert cluster.log("one").values() == [b"%d" % i for i in range(100)]


@pytest.mark.asyncio
async def test_null_keys_stick_to_one_partition_per_batch(cluster: FakeCluster, make: Made) -> None:
    producer = make(linger_ms=50, batch_size=1_000)
    results = await asyncio.gather(*(producer.send("t", b"v" * 100) for _ in range(40)))
    runs = [results[i].partition for i in range(0, 40, 8)]  # 8 records of 109 B per batch
    assert all(results[i].partition == results[i - i % 8].partition for i in range(40))
    assert any(a != b for a, b in itertools.pairwise(runs))


@pytest.mark.asyncio
async def test_acks_0_delivers_without_offsets(cluster: FakeCluster, make: Made) -> None:
    producer = make(acks=0)
    result = await producer.send("one", b"fire and forget", timestamp_ms=5)
    assert result == RecordMetadata("one", 0, -1, 5, -1, 15)
    assert cluster.log("one").values() == [b"fire and forget"]
    assert cluster.calls[0].acks == 0
    assert cluster.log("one").headers()[0].producer_id == -1  # idempotence needs acks=all


@pytest.mark.asyncio
async def test_retriable_errors_are_retried_until_delivered(
    cluster: FakeCluster, make: Made
) -> None:
    cluster.refuse("one", 0, NotEnoughReplicasError("one-0: ISR 1 < min.insync.replicas 2"), 3)
    producer = make()
    result = await producer.send("one", b"v")
    assert result.offset == 0
    assert len(cluster.calls) == 4
    assert producer.metrics()["batches_retried"] == 3


@pytest.mark.asyncio
async def test_order_holds_when_an_early_batch_fails_with_five_in_flight(
    cluster: FakeCluster, make: Made
) -> None:
    producer = make(batch_size=1)  # one record per batch
    await producer.send("one", b"warm-up")  # the broker knows the id; the connection is warm
    cluster.gate.close()
    futures = []
    for i in range(8):  # one at a time: each of the first five goes in a request of its own
        futures.append(producer.send_nowait("one", b"%d" % i))
        await until(lambda: cluster.gate.held == min(i + 1, 5))  # noqa: B023
    assert cluster.peak_outstanding[0] == 5  # max.in.flight.requests.per.connection
    cluster.refuse("one", 0, NotEnoughReplicasError("one-0: not enough replicas"))
    cluster.gate.open()  # the first refused; the four after it are out of order
    results = await asyncio.gather(*futures)
    assert [r.offset for r in results] == list(range(1, 9))
    assert cluster.log("one").values() == [b"warm-up"] + [b"%d" % i for i in range(8)]
    assert producer.metrics()["batches_retried"] >= 5


@pytest.mark.asyncio
async def test_order_holds_when_a_later_request_overtakes_an_earlier_one(
    cluster: FakeCluster, make: Made
) -> None:
    producer = make(batch_size=1)
    await producer.send("one", b"warm-up")
    cluster.gate.close()
    futures = []
    for i in range(3):  # one at a time: three requests
        futures.append(producer.send_nowait("one", b"%d" % i))
        await until(lambda: cluster.gate.held == i + 1)  # noqa: B023
    cluster.gate.release_one(2)  # the last overtakes: OUT_OF_ORDER_SEQUENCE_NUMBER
    cluster.gate.release_one(1)
    await until(lambda: len(cluster.calls) >= 4)  # retried (and held again)
    cluster.gate.open()
    results = await asyncio.gather(*futures)
    assert [r.offset for r in results] == [1, 2, 3]
    assert cluster.log("one").values() == [b"warm-up", b"0", b"1", b"2"]


@pytest.mark.parametrize("idempotence", [True, False])
@pytest.mark.asyncio
async def test_order_holds_when_a_failed_call_fails_five_requests_together(
    cluster: FakeCluster, make: Made, idempotence: bool
) -> None:
    # A failed ProduceStream call fails every request on it, oldest first, none appended;
    # each request's batch is retried, and the retries must go back in the order sent.
    producer = make(batch_size=1, enable_idempotence=idempotence, retries=5)
    await producer.send("one", b"warm-up")
    cluster.gate.close()
    futures = []
    for i in range(5):  # one at a time: each in a request of its own
        futures.append(producer.send_nowait("one", b"%d" % i))
        await until(lambda: cluster.gate.held == i + 1)  # noqa: B023
    assert cluster.cut(0, NetworkError("node 0: the call failed")) == 5
    cluster.gate.open()
    results = await asyncio.gather(*futures)
    assert [r.offset for r in results] == list(range(1, 6))
    assert cluster.log("one").values() == [b"warm-up"] + [b"%d" % i for i in range(5)]
    assert producer.metrics()["batches_retried"] == 5


@pytest.mark.asyncio
async def test_the_first_batch_under_a_new_id_goes_alone(cluster: FakeCluster, make: Made) -> None:
    producer = make(batch_size=1)
    cluster.gate.close()
    futures = [producer.send_nowait("one", b"%d" % i) for i in range(3)]
    await until(lambda: cluster.gate.held == 1)
    await asyncio.sleep(0.02)
    assert cluster.gate.held == 1  # an unknown id may start anywhere: nothing may overtake
    cluster.gate.open()
    assert [r.offset for r in await asyncio.gather(*futures)] == [0, 1, 2]


@pytest.mark.asyncio
async def test_a_lost_answer_is_retried_without_a_duplicate(
    cluster: FakeCluster, make: Made
) -> None:
    producer = make(batch_size=1)
    await producer.send("one", b"warm-up")
    cluster.lose("one", 0, times=2)
    results = await asyncio.gather(*(producer.send("one", b"%d" % i) for i in range(4)))
    assert cluster.log("one").values() == [b"warm-up", b"0", b"1", b"2", b"3"]
    assert [r.offset for r in results] == [1, 2, 3, 4]  # the original offsets
    assert producer.metrics()["batches_retried"] >= 2


@pytest.mark.asyncio
async def test_without_idempotence_a_lost_answer_duplicates(
    cluster: FakeCluster, make: Made
) -> None:
    producer = make(enable_idempotence=False)
    cluster.lose("one", 0)
    result = await producer.send("one", b"v")
    assert cluster.log("one").values() == [b"v", b"v"]
    assert result.offset == 1


@pytest.mark.asyncio
async def test_a_moved_leader_is_found_through_metadata(cluster: FakeCluster, make: Made) -> None:
    producer = make()
    assert (await producer.send("one", b"a")).offset == 0
    refreshes = cluster.metadata_calls
    cluster.move_leader("one", 0, 2)
    assert (await producer.send("one", b"b")).offset == 1
    assert cluster.metadata_calls > refreshes
    assert [c.node for c in cluster.calls][-1] == 2
    assert cluster.log("one").values() == [b"a", b"b"]


@pytest.mark.asyncio
async def test_stale_metadata_is_refreshed_with_nothing_left_to_send(
    cluster: FakeCluster, make: Made
) -> None:
    """The batch that marked the metadata stale was the last (failed, no retries; drained at
    once with no linger): the refresh still comes, as Kafka's sender acts on requestUpdate at
    its next poll, so the next send finds the leader that moved."""
    producer = make(linger_ms=0, retries=0, enable_idempotence=False)
    assert (await producer.send("one", b"a")).offset == 0
    cluster.move_leader("one", 0, 2)
    asked = cluster.metadata_calls
    with pytest.raises(NotLeaderOrFollowerError):
        await producer.send("one", b"b")
    await until(lambda: cluster.metadata_calls > asked)
    assert (await producer.send("one", b"c")).offset == 1  # at the new leader
    assert [c.node for c in cluster.calls][-2:] == [0, 2]


@pytest.mark.asyncio
async def test_a_leader_cut_off_from_the_cluster_is_not_asked_who_leads(
    cluster: FakeCluster, make: Made
) -> None:
    """A leader cut off from its followers and the controller answers acks=all with
    REQUEST_TIMED_OUT and, asked for metadata, names itself. The producer must ask another
    broker (cluster_metadata.py, `distrust`), or it sends to the cut-off one until the
    partition heals or its batches expire."""
    producer = make(delivery_timeout_ms=5_000)
    assert (await producer.send("one", b"a")).offset == 0
    cluster.cut_off_leader("one", 0, 2)
    asked = len(cluster.metadata_nodes)
    assert (await producer.send("one", b"b")).offset == 1
    assert 0 not in cluster.metadata_nodes[asked:], cluster.metadata_nodes
    assert [c.node for c in cluster.calls][-2:] == [0, 2]
    assert cluster.log("one").values() == [b"a", b"b"]


@pytest.mark.asyncio
async def test_a_partition_without_a_leader_expires_with_the_exact_error(
    cluster: FakeCluster, make: Made
) -> None:
    cluster.log("one").leader = -1
    producer = make(request_timeout_ms=200, delivery_timeout_ms=300)
    started = time.monotonic()
    with pytest.raises(KafkaTimeoutError) as raised:
        await producer.send("one", b"v")
    assert 0.25 < time.monotonic() - started < 2
    assert str(raised.value) == (
        "one-0: 1 record(s) expired in the queue: not delivered within "
        "delivery.timeout.ms=300 ms of the batch's creation, after 0 attempt(s); "
        "last error: no leader known for one-0"
    )
    assert producer.metrics()["batches_expired"] == 1


@pytest.mark.asyncio
async def test_a_lingering_batch_goes_as_soon_as_its_partition_gets_a_leader(
    cluster: FakeCluster, make: Made
) -> None:
    # Kafka's default linger: the batch is not ready yet when the sender first sees that its
    # leader is unknown, and must still make it refresh the metadata (and be woken by it).
    producer = make(linger_ms=5, delivery_timeout_ms=10_000)
    cluster.log("one").leader = -1  # an election in progress
    asked = cluster.metadata_calls
    future = producer.send_nowait("one", b"v")
    await until(lambda: cluster.metadata_calls > asked + 1)  # told again: no leader yet
    cluster.log("one").leader = 0
    started = time.monotonic()
    assert (await asyncio.wait_for(future, 2)).offset == 0
    assert time.monotonic() - started < 1


@pytest.mark.asyncio
async def test_expiry_after_retries_names_the_last_error(cluster: FakeCluster, make: Made) -> None:
    cluster.refuse("one", 0, NotEnoughReplicasError("one-0: ISR 1 < min.insync.replicas 2"), 1000)
    producer = make(request_timeout_ms=200, delivery_timeout_ms=300, retry_backoff_max_ms=20)
    with pytest.raises(KafkaTimeoutError) as raised:
        await producer.send("one", b"v")
    text = str(raised.value)
    # Between two refusals the batch waits in the queue; the deadline may also fall while a
    # retry is out (a slow machine answers it late), which says "on the wire": either way the
    # error must name the last refusal.
    assert re.match(
        r"one-0: 1 record\(s\) expired (in the queue|on the wire): not delivered within ", text
    ), text
    assert "delivery.timeout.ms=300 ms" in text
    assert text.endswith("last error: NotEnoughReplicasError: one-0: ISR 1 < min.insync.replicas 2")


@pytest.mark.asyncio
async def test_a_batch_expires_on_the_wire_and_its_late_answer_settles_the_partition(
    cluster: FakeCluster, make: Made
) -> None:
    producer = make(request_timeout_ms=200, delivery_timeout_ms=300)
    await producer.send("one", b"warm-up")
    cluster.gate.close()
    with pytest.raises(KafkaTimeoutError, match=r"expired on the wire.*no answer from the leader"):
        await producer.send("one", b"late")
    cluster.gate.open()  # the broker wrote it after all
    result = await producer.send("one", b"next")
    assert cluster.log("one").values() == [b"warm-up", b"late", b"next"]
    assert result.offset == 2
    assert producer.metrics()["producer_ids"] == 1  # written: no reset needed


@pytest.mark.asyncio
async def test_a_batch_lost_for_good_resets_the_partition_under_a_new_id(
    cluster: FakeCluster, make: Made
) -> None:
    producer = make(request_timeout_ms=200, delivery_timeout_ms=300)
    await producer.send("one", b"warm-up")
    cluster.down.add(0)  # every call to the leader fails: the outcome stays unknown
    with pytest.raises(KafkaTimeoutError, match="last error: NetworkError: broker 0 at node0"):
        await producer.send("one", b"lost")
    cluster.down.clear()
    result = await producer.send("one", b"next")
    assert cluster.log("one").values() == [b"warm-up", b"next"]
    assert result.offset == 1
    assert producer.metrics()["producer_ids"] == 2
    assert cluster.log("one").headers()[-1].producer_id == 1001


@pytest.mark.asyncio
async def test_a_non_retriable_error_fails_only_its_batch(cluster: FakeCluster, make: Made) -> None:
    producer = make()
    await producer.send("one", b"ok")
    cluster.refuse("one", 0, InvalidRecordError("one-0: compacted topics need keys"))
    with pytest.raises(InvalidRecordError, match="compacted topics need keys"):
        await producer.send("one", b"bad")
    assert (await producer.send("one", b"fine")).offset == 1
    assert cluster.log("one").values() == [b"ok", b"fine"]


@pytest.mark.asyncio
async def test_a_backlog_goes_in_one_request_and_each_batch_gets_its_offsets(
    cluster: FakeCluster, make: Made
) -> None:
    producer = make(batch_size=1)  # one record per batch
    await producer.send("one", b"warm-up")
    cluster.gate.close()
    futures = [producer.send_nowait("one", b"%d" % i) for i in range(4)]
    await until(lambda: cluster.gate.held == 2)
    # The three complete batches in one entry; the fourth, still open then, in the next.
    assert [call.batches for call in cluster.calls] == [[1], [3], [1]]
    cluster.gate.open()
    results = await asyncio.gather(*futures)
    assert [r.offset for r in results] == [1, 2, 3, 4]
    assert cluster.log("one").values() == [b"warm-up", b"0", b"1", b"2", b"3"]
    assert [h.base_sequence for h in cluster.log("one").headers()] == [0, 1, 2, 3, 4]


@pytest.mark.asyncio
async def test_an_entry_retried_after_a_retriable_error_keeps_its_order(
    cluster: FakeCluster, make: Made
) -> None:
    # Without idempotence nothing but the queue keeps the order: one request at a time.
    producer = make(
        batch_size=1, enable_idempotence=False, acks=1, max_in_flight_requests_per_connection=1
    )
    await producer.send("one", b"warm-up")
    cluster.gate.close()
    futures = [producer.send_nowait("one", b"%d" % i) for i in range(4)]
    await until(lambda: cluster.gate.held == 1)
    assert cluster.calls[1].batches == [3]  # b0-b2; b3, still open then, waits its turn
    cluster.refuse("one", 0, NotEnoughReplicasError("one-0: not enough replicas"))
    cluster.gate.open()
    results = await asyncio.gather(*futures)
    assert [r.offset for r in results] == [1, 2, 3, 4]
    assert cluster.log("one").values() == [b"warm-up", b"0", b"1", b"2", b"3"]


@pytest.mark.asyncio
@pytest.mark.parametrize("idempotence", [True, False])
async def test_a_refused_entry_of_several_batches_is_resent_batch_by_batch(
    cluster: FakeCluster, make: Made, idempotence: bool
) -> None:
    producer = make(
        batch_size=1,
        enable_idempotence=idempotence,
        acks=-1 if idempotence else 1,
        delivery_timeout_ms=3_000,
    )
    await producer.send("one", b"warm-up")
    cluster.gate.close()
    futures = [producer.send_nowait("one", b"%d" % i) for i in range(3)]
    await until(lambda: cluster.gate.held == 2)  # [b0, b1] and, still open then, [b2]
    # One batch's fault refuses the entry as a whole: each of its batches is resent alone.
    error = InvalidRecordError("one-0: compacted topics need keys")
    cluster.refuse("one", 0, error)
    cluster.gate.release_one(0)
    # b0 resent alone, held after [b2] (a call is counted before it waits at the gate).
    await until(lambda: len(cluster.calls) >= 4 and cluster.gate.held >= 2)
    assert [call.batches for call in cluster.calls[1:4]] == [[2], [1], [1]]
    assert cluster.calls[3].partitions[0][3] == 1
    # The resent first batch is refused on its own: only it fails.
    cluster.refuse("one", 0, error)
    cluster.gate.release_one(1)
    with pytest.raises(InvalidRecordError):
        await futures[0]
    cluster.gate.open()
    delivered = await asyncio.gather(*futures[1:])
    assert all(call.batches == [1] for call in cluster.calls[2:])
    if idempotence:  # in order
        assert [r.offset for r in delivered] == [1, 2]
        assert cluster.log("one").values() == [b"warm-up", b"1", b"2"]
    else:  # a retry may be overtaken, as in Kafka with max.in.flight > 1
        assert sorted(v or b"" for v in cluster.log("one").values()) == [b"1", b"2", b"warm-up"]


@pytest.mark.asyncio
@pytest.mark.parametrize("idempotence", [True, False])
async def test_an_entry_of_unknown_outcome_is_resent_batch_by_batch_only_with_idempotence(
    cluster: FakeCluster, make: Made, idempotence: bool
) -> None:
    producer = make(batch_size=1, enable_idempotence=idempotence, acks=-1 if idempotence else 1)
    await producer.send("one", b"warm-up")
    cluster.gate.close()
    futures = [producer.send_nowait("one", b"%d" % i) for i in range(3)]
    await until(lambda: cluster.gate.held == 2)  # [b0, b1] and, still open then, [b2]
    # It may have been written: a resent batch is recognised as a duplicate by its sequence;
    # without sequences, resending could write it twice.
    cluster.refuse("one", 0, UnknownServerError("one-0: the broker failed"))
    cluster.gate.open()
    outcomes = await asyncio.gather(*futures, return_exceptions=True)
    if idempotence:
        assert [o.offset for o in outcomes] == [1, 2, 3]  # type: ignore[union-attr]
        assert cluster.calls[1].batches == [2]
        assert all(call.batches == [1] for call in cluster.calls[2:])
    else:
        assert [type(o) for o in outcomes[:2]] == [UnknownServerError] * 2
        assert outcomes[2].offset == 1  # type: ignore[union-attr]


@pytest.mark.asyncio
async def test_the_producer_id_request_is_retried(cluster: FakeCluster, make: Made) -> None:
    cluster.pid_errors.extend([CoordinatorLoadInProgressError("no producer id block yet")] * 2)
    producer = make()
    assert (await producer.send("one", b"v")).offset == 0
    assert cluster.pid_calls >= 3


@pytest.mark.asyncio
async def test_a_producer_id_error_that_is_not_retriable_is_fatal(
    cluster: FakeCluster, make: Made
) -> None:
    """Kafka's InitProducerIdHandler makes an error that is not retriable fatal: the waiting
    batch and every later one fail with it at once, not at delivery.timeout.ms."""
    cluster.pid_errors.append(UnknownServerError("the broker failed"))
    producer = make(delivery_timeout_ms=600_000)
    for value in (b"waiting", b"later"):
        with pytest.raises(UnknownServerError, match=r"cannot send.*: the broker failed") as caught:
            await asyncio.wait_for(producer.send("one", value), 10)
        assert str(caught.value.__cause__) == "the broker failed"  # the broker's own error
    assert cluster.pid_calls == 1 and cluster.calls == []
    assert producer.metrics()["batches_failed"] == 2
    await asyncio.wait_for(producer.close(timeout_ms=None), 10)  # nothing left to wait for


@pytest.mark.asyncio
async def test_bad_input_raises_at_once(cluster: FakeCluster, make: Made) -> None:
    producer = make(max_request_size=1_000)
    with pytest.raises(TypeError, match=r"value must be bytes or None, not str \(or configure"):
        producer.send_nowait("one", "text")
    # A header, which has no serializer setting, and a configured serializer returning str get
    # different advice, not both "configure ....serializer".
    with pytest.raises(TypeError, match=r"header 'h' .*not str \(encode header values"):
        producer.send_nowait("one", b"v", headers=[("h", "x")])
    stringly = make(value_serializer=str)
    with pytest.raises(TypeError, match=r"not str \(as the configured value.serializer returned"):
        stringly.send_nowait("one", 7)
    with pytest.raises(TypeError, match="key must be bytes"):
        producer.send_nowait("one", b"v", key=12)
    with pytest.raises(TypeError, match="header key must be a str"):
        producer.send_nowait("one", b"v", headers=[(b"h", b"v")])
    with pytest.raises(ValueError, match="partition must be an int >= 0"):
        producer.send_nowait("one", b"v", partition=-1)
    with pytest.raises(InvalidTopicError):
        producer.send_nowait("bad topic!", b"v")
    with pytest.raises(MessageSizeTooLargeError) as raised:
        producer.send_nowait("one", b"v" * 2_000)
    assert str(raised.value) == (
        "the record to topic 'one' is up to 2097 bytes when serialized, larger than "
        "max.request.size=1000"
    )
    assert cluster.calls == []


@pytest.mark.asyncio
async def test_what_appending_would_refuse_raises_before_waiting_for_metadata(
    cluster: FakeCluster, make: Made
) -> None:
    producer = make()  # knows no topic yet: a send that got through would wait for metadata
    with pytest.raises(ValueError) as raised:
        producer.send_nowait("one", b"v", timestamp_ms=2**63)
    assert str(raised.value) == (
        "timestamp_ms must be >= 0 and <= 9223372036854775807 (an Int64), not 9223372036854775808"
    )
    surrogate = "\ud800"
    with pytest.raises(ValueError, match=re.escape(f"header key {surrogate!r} is not valid UTF-8")):
        producer.send_nowait("one", b"v", headers=[(surrogate, b"v")])
    assert producer.metrics()["waiting_sends"] == 0
    assert (await producer.send("one", b"v", timestamp_ms=2**63 - 1)).timestamp == 2**63 - 1


@pytest.mark.asyncio
async def test_an_unexpected_error_appending_a_waiting_send_fails_only_that_send(
    cluster: FakeCluster, make: Made, monkeypatch: pytest.MonkeyPatch
) -> None:
    producer = make()
    append = producer._append
    calls = 0

    def broken_once(*args: object) -> object:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("a bug")
        return append(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(producer, "_append", broken_once)
    first = producer.send_nowait("one", b"a")  # the topic is not known yet: both wait
    second = producer.send_nowait("one", b"b")
    with pytest.raises(RuntimeError, match="a bug"):
        await asyncio.wait_for(first, 2)
    assert (await asyncio.wait_for(second, 2)).offset == 0
    assert cluster.log("one").values() == [b"b"]


@pytest.mark.asyncio
async def test_serializers_turn_values_into_bytes(cluster: FakeCluster, make: Made) -> None:
    producer = make(value_serializer=lambda v: v.encode(), key_serializer=str.encode)
    await producer.send("one", "value", key="key")
    (record,) = cluster.log("one").records()
    assert (record.key, record.value) == (b"key", b"value")


@pytest.mark.asyncio
async def test_an_unknown_topic_fails_at_once(cluster: FakeCluster, make: Made) -> None:
    producer = make(max_block_ms=30_000)
    started = time.monotonic()
    with pytest.raises(UnknownTopicOrPartitionError, match=r"^topic 'nope' does not exist$"):
        await producer.send("nope", b"v")
    assert time.monotonic() - started < 5  # not max.block.ms (30 s); room for a loaded machine


@pytest.mark.asyncio
async def test_a_missing_partition_fails_naming_the_count(cluster: FakeCluster, make: Made) -> None:
    producer = make()
    with pytest.raises(UnknownTopicOrPartitionError) as raised:
        await producer.send("t", b"v", partition=3)
    assert str(raised.value) == (
        "partition 3 of topic 't' does not exist: the topic has 3 partition(s), 0-2"
    )
    assert (await producer.send("t", b"v", partition=2)).partition == 2


@pytest.mark.asyncio
async def test_a_dead_cluster_fails_sends_within_max_block_ms(
    cluster: FakeCluster, make: Made
) -> None:
    cluster.down.update({0, 1, 2})
    producer = make(max_block_ms=300)
    started = time.monotonic()
    with pytest.raises(KafkaTimeoutError) as raised:
        await producer.send("one", b"v")
    assert 0.25 < time.monotonic() - started < 2
    text = str(raised.value)
    assert "send to topic 'one': metadata not available within max.block.ms=300 ms" in text
    assert "node0:9092" in text and "connection refused" in text


@pytest.mark.asyncio
async def test_a_full_buffer_makes_sends_wait_then_go_in_order(
    cluster: FakeCluster, make: Made
) -> None:
    producer = make(batch_size=1_000, buffer_memory=3_000, max_block_ms=5_000)
    await producer.send("one", b"warm-up")
    cluster.gate.close()
    futures = [producer.send_nowait("one", b"%d" % i + b"v" * 900) for i in range(6)]
    await until(lambda: producer.metrics()["waiting_sends"] == 3)
    assert producer.metrics()["buffer_available_bytes"] == 0
    cluster.gate.open()
    results = await asyncio.gather(*futures)
    assert [r.offset for r in results] == list(range(1, 7))
    assert producer.metrics()["buffer_available_bytes"] == 3_000


@pytest.mark.asyncio
async def test_a_send_cancelled_while_it_waits_for_memory_is_dropped(
    cluster: FakeCluster, make: Made
) -> None:
    producer = make(batch_size=1_000, buffer_memory=1_500, max_block_ms=5_000)
    await producer.send("one", b"warm-up")
    cluster.gate.close()
    first = producer.send_nowait("one", b"a" * 900)  # takes the buffer
    await until(lambda: cluster.gate.held == 1)
    cancelled = producer.send_nowait("one", b"b" * 900)  # waits for memory
    behind = producer.send_nowait("one", b"c")
    await until(lambda: producer._accumulator.memory_waiters == 1)  # in the wait, not before
    assert producer.metrics()["waiting_sends"] == 2
    cancelled.cancel()  # e.g. asyncio.wait_for(send, ...) gave up: the user will send again
    cluster.gate.open()
    await first
    await asyncio.wait_for(behind, 2)
    assert cluster.log("one").values() == [b"warm-up", b"a" * 900, b"c"]


@pytest.mark.asyncio
async def test_batch_size_larger_than_buffer_memory_fails_sends_at_once(
    cluster: FakeCluster, make: Made
) -> None:
    # Kafka's BufferPool refuses at once an allocation larger than the whole buffer; every
    # batch reserves batch.size (16384 here), so no send could ever get room.
    producer = make(batch_size=16_384, buffer_memory=10_000, max_block_ms=5_000)
    with pytest.raises(ConfigError) as raised:
        producer.send_nowait("one", b"tiny")
    assert str(raised.value) == (
        "batch.size=16384 is larger than buffer.memory=10000: every batch reserves batch.size "
        "bytes of the buffer, so no record to topic 'one' can ever be sent (raise "
        "buffer.memory or lower batch.size)"
    )
    assert producer.metrics()["waiting_sends"] == 0


@pytest.mark.asyncio
async def test_a_buffer_smaller_than_a_first_reservation_fails_sends_at_once(
    cluster: FakeCluster, make: Made
) -> None:
    # With a batch.size above 16 KiB (the default), a new batch first reserves 16 KiB.
    producer = make(buffer_memory=10_000, max_block_ms=5_000)
    with pytest.raises(ConfigError) as raised:
        producer.send_nowait("one", b"tiny")
    assert str(raised.value) == (
        "buffer.memory=10000 is smaller than the 16384 bytes every batch reserves first "
        "(batch.size=1000000), so no record to topic 'one' can ever be sent (raise "
        "buffer.memory or lower batch.size)"
    )


@pytest.mark.asyncio
async def test_a_buffer_full_for_max_block_ms_fails_the_send(
    cluster: FakeCluster, make: Made
) -> None:
    producer = make(batch_size=1_000, buffer_memory=2_000, max_block_ms=200)
    await producer.send("one", b"warm-up")
    cluster.gate.close()
    held = [producer.send_nowait("one", b"v" * 900) for _ in range(2)]
    started = time.monotonic()
    with pytest.raises(KafkaTimeoutError) as raised:
        await producer.send("one", b"v" * 900)
    assert 0.15 < time.monotonic() - started < 2
    assert str(raised.value) == (
        "send to topic 'one': no room in buffer.memory=2000 bytes within max.block.ms=200 ms "
        "(records are produced faster than the cluster takes them)"
    )
    cluster.gate.open()
    await asyncio.gather(*held)


@pytest.mark.asyncio
async def test_flush_sends_at_once_and_waits(cluster: FakeCluster, make: Made) -> None:
    producer = make(linger_ms=60_000)
    futures = [producer.send_nowait("one", b"%d" % i) for i in range(10)]
    started = time.monotonic()
    await producer.flush(timeout_ms=5_000)
    assert time.monotonic() - started < 2
    assert all(f.done() for f in futures)
    assert len(cluster.log("one").values()) == 10


@pytest.mark.asyncio
async def test_flush_times_out_naming_what_is_left(cluster: FakeCluster, make: Made) -> None:
    producer = make()
    await producer.send("one", b"warm-up")
    cluster.gate.close()
    future = producer.send_nowait("one", b"v")
    with pytest.raises(KafkaTimeoutError, match=r"flush did not finish within 100 ms: 1 batch"):
        await producer.flush(timeout_ms=100)
    cluster.gate.open()
    await future


@pytest.mark.asyncio
async def test_close_delivers_what_is_queued(cluster: FakeCluster) -> None:
    async with Producer(producer_settings(cluster, linger_ms=60_000)) as producer:
        futures = [producer.send_nowait("one", b"%d" % i) for i in range(5)]
    assert producer.closed
    assert [f.result().offset for f in futures] == list(range(5))
    with pytest.raises(ClientClosedError):
        producer.send_nowait("one", b"late")
    await producer.close()  # idempotent


@pytest.mark.asyncio
async def test_close_with_a_timeout_fails_what_is_left(cluster: FakeCluster) -> None:
    producer = Producer(producer_settings(cluster))
    await producer.send("one", b"warm-up")
    cluster.gate.close()
    on_wire = producer.send_nowait("one", b"on the wire")
    await until(lambda: cluster.gate.held == 1)
    queued = producer.send_nowait("one", b"queued")
    await producer.close(timeout_ms=50)
    for future in (on_wire, queued):
        with pytest.raises(ClientClosedError, match=r"one-0: 1 record.* closed"):
            future.result()
    cluster.gate.open()


@pytest.mark.asyncio
async def test_in_flight_requests_per_broker_stay_within_the_limit(
    cluster: FakeCluster, make: Made
) -> None:
    producer = make(batch_size=1, max_in_flight_requests_per_connection=2, enable_idempotence=False)
    await producer.send("one", b"warm-up")
    cluster.gate.close()
    futures = [producer.send_nowait("one", b"%d" % i) for i in range(6)]
    await until(lambda: cluster.gate.held == 2)
    await asyncio.sleep(0.02)
    assert cluster.gate.held == 2
    cluster.gate.open()
    await asyncio.gather(*futures)
    assert cluster.peak_outstanding[0] == 2


@pytest.mark.parametrize("idempotence", [False, True])
@pytest.mark.asyncio
async def test_with_one_request_in_flight_a_new_leader_gets_nothing_before_the_retry(
    cluster: FakeCluster, make: Made, idempotence: bool
) -> None:
    # The in-flight limit counts per broker: after a leader move, B could go to the new
    # leader while A, on the wire to the old one, is still to be retried (and land after B).
    producer = make(
        enable_idempotence=idempotence,
        max_in_flight_requests_per_connection=1,
        batch_size=1,
        metadata_max_age_ms=50,
    )
    await producer.send("one", b"warm-up")
    cluster.gate.close()
    first = producer.send_nowait("one", b"A")
    await until(lambda: cluster.gate.held == 1)  # on the wire to node 0
    cluster.move_leader("one", 0, 1)
    await until(producer._metadata.needs_refresh)  # the metadata aged out
    refreshes = cluster.metadata_calls
    second = producer.send_nowait("one", b"B")
    await until(lambda: cluster.metadata_calls > refreshes)  # node 1 is known to lead
    await asyncio.sleep(0.05)
    assert cluster.gate.held == 1
    cluster.gate.open()
    await asyncio.gather(first, second)
    assert cluster.log("one").values() == [b"warm-up", b"A", b"B"]


@pytest.mark.asyncio
async def test_after_the_sender_crashed_sends_and_flush_raise_naming_the_crash(
    cluster: FakeCluster, make: Made, monkeypatch: pytest.MonkeyPatch
) -> None:
    producer = make()
    await producer.send("one", b"warm-up")
    break_drain(monkeypatch, producer._accumulator)
    with pytest.raises(UnknownServerError, match="the producer's sender failed"):
        await asyncio.wait_for(producer.send("one", b"v"), 2)
    with pytest.raises(IllegalStateError, match=r"^send to topic 'one': " + SENDER_CRASH):
        producer.send_nowait("one", b"late")
    with pytest.raises(IllegalStateError, match=r"^flush: " + SENDER_CRASH):
        await producer.flush(timeout_ms=1_000)


@pytest.mark.asyncio
async def test_a_sender_task_that_dies_fails_the_pending_sends_with_its_cause(
    cluster: FakeCluster, make: Made, caplog: pytest.LogCaptureFixture
) -> None:
    # The producer id request is a task of the sender's TaskGroup: its death (a bug) stops
    # the sender, logged once, instead of leaving the sends to expire with no word of why.
    cluster.pid_errors.append(RuntimeError("a bug in InitProducerId"))
    producer = make(delivery_timeout_ms=60_000)
    # Failed as a batch (UnknownServerError) or refused as an append after the crash.
    with pytest.raises((UnknownServerError, IllegalStateError), match="a bug in InitProducerId"):
        await asyncio.wait_for(producer.send("one", b"v"), 5)
    crash = r"the producer's sender stopped on an unexpected error \(RuntimeError: a bug in Init"
    with pytest.raises(IllegalStateError, match=r"^flush: " + crash):
        await producer.flush(timeout_ms=1_000)
    logged = [r for r in caplog.records if r.exc_info and "a bug in" in str(r.exc_info[1])]
    assert len(logged) == 1
    assert logged[0].getMessage() == "the producer's sender stopped on an unexpected error"


@pytest.mark.asyncio
async def test_a_topic_limit_describe_that_dies_fails_the_producer_with_its_cause(
    cluster: FakeCluster,
    make: Made,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The describe of a topic's max.message.bytes is a task of the producer's TaskGroup: its
    # death (a bug) stops the producer, logged once; the send waiting on it fails naming it.
    async def broken(*args: object, **kwargs: object) -> dict[str, object]:
        raise RuntimeError("a bug in DescribeConfigs")

    monkeypatch.setattr(FakeConnections, "topic_configs", broken)
    producer = make()
    crash = r"the producer's sender stopped on an unexpected error \(RuntimeError: a bug in Desc"
    with pytest.raises(IllegalStateError, match=r"^send to topic 'one': " + crash):
        await asyncio.wait_for(producer.send("one", b"v"), 5)
    with pytest.raises(IllegalStateError, match=r"^send to topic 'one': " + crash):
        producer.send_nowait("one", b"late")
    logged = [r for r in caplog.records if r.exc_info and "a bug in" in str(r.exc_info[1])]
    assert [r.getMessage() for r in logged] == [
        "the producer's sender stopped on an unexpected error"
    ]


@pytest.mark.asyncio
async def test_close_leaves_no_task_of_the_producer_running(cluster: FakeCluster) -> None:
    """Every task the producer started (the sender, requests, metadata refreshes, sends
    waiting for metadata, topic limit describes) has ended when close returns."""
    before = asyncio.all_tasks()
    producer = Producer(producer_settings(cluster, linger_ms=5))
    sends = [producer.send_nowait("t", b"%d" % i) for i in range(20)]  # wait for metadata
    await asyncio.gather(*sends)
    producer.send_nowait("one", b"queued")  # waiting for its topic when close comes
    await producer.close(timeout_ms=1_000)
    assert asyncio.all_tasks() - before == set()


@pytest.mark.asyncio
async def test_partitions_for_and_metrics(cluster: FakeCluster, make: Made) -> None:
    producer = make()
    assert await producer.partitions_for("t") == {0, 1, 2}
    await producer.send("t", b"v", partition=1)
    metrics = producer.metrics()
    assert metrics["records_delivered"] == 1 and metrics["requests"] == 1
    assert metrics["producer_ids"] == 1


def test_a_producer_is_bound_to_the_event_loop_it_started_on(cluster: FakeCluster) -> None:
    # Used from a second loop, a send and close() are refused clearly, not failing deep inside
    # asyncio ("Future attached to a different loop").
    producer = Producer(producer_settings(cluster))

    async def first() -> int:
        return (await producer.send("one", b"a")).offset

    assert asyncio.run(first()) == 0

    async def elsewhere() -> None:
        with pytest.raises(IllegalStateError, match="runs on the event loop it was first used on"):
            await producer.send("one", b"b")
        with pytest.raises(IllegalStateError, match="create one per event loop"):
            await producer.flush()

    asyncio.run(elsewhere())
    asyncio.run(producer.close())  # its loop ended: nothing of it can run, close just ends
    with pytest.raises(ClientClosedError):
        asyncio.run(first())
