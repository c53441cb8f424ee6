"""The Consumers (blocking `replog.Consumer`, asyncio `replog.aio.Consumer`) on a real 3-node
cluster (issue #7). Records are written with the broker's own client (acks=all), so all tests but
the one end to end depend on nothing of the producer's.

- assign and subscribe round trips (every record once, in offset order per partition, with
  its key, value, headers and timestamp), blocking and asyncio;
- the seek family, offsets_for_times, beginning and end offsets;
- committed offsets survive a consumer restart (the group's offsets topic is created by the
  first FindCoordinator); auto-commit is at-least-once and never commits past what poll
  returned; auto.offset.reset latest and none;
- a position below the log start offset (after DeleteRecords) is reset by
  auto.offset.reset, saying so at WARNING, or raises OffsetOutOfRangeError with `none`;
- records never above the high watermark: with the follower of an RF=2 partition stopped, an
  acks=1 record is on the leader but not committed, and no consumer sees it until the
  follower is back;
- the Producer's records reach the Consumer, in order per key;
- a consumer whose bootstrap address is dead: poll returns empty within its timeout, the
  network calls raise KafkaTimeoutError naming the address within theirs.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from client_cluster import NO_GROUP_DELAY, ClientCluster, client_cluster

from replog import Admin, Consumer, Producer, aio
from replog.client.records import ConsumerRecord, OffsetAndTimestamp, TopicPartition
from replog.errors import (
    KafkaError,
    KafkaTimeoutError,
    NoOffsetForPartitionError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
)
from replog.record import build_batch
from replog.replication import messages as m
from tests.kafka_broker_clients import kafka_broker_client

pytestmark = pytest.mark.slow

TS = 1_700_000_000_000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClientCluster]:
    with client_cluster(tmp_path_factory.mktemp("c"), 3, *NO_GROUP_DELAY) as started:
        yield started


def settings(cluster: ClientCluster, **overrides: object) -> dict[str, Any]:
    return {
        "bootstrap_servers": cluster.bootstrap,
        "auto_offset_reset": "earliest",
        "fetch_max_wait_ms": 100,
        "default_api_timeout_ms": 20_000,
        **overrides,
    }


async def _leader(cluster: ClientCluster, topic: str, partition: int) -> tuple[int, list[int]]:
    """(leader, replicas) as the first node that answers says (a test may have one stopped)."""
    for address in cluster.kafka_addresses.values():
        async with kafka_broker_client(address) as client:
            try:
                answer = await client.metadata([topic], timeout_ms=2_000)
            except (KafkaError, OSError):
                continue
        (found,) = [t for t in answer.topics if t.name == topic]
        state = next(p for p in found.partitions if p.partition_index == partition)
        return state.leader_id, list(state.replica_nodes)
    raise AssertionError(f"no node answered Metadata for {topic}")


def produce(
    cluster: ClientCluster,
    topic: str,
    partition: int,
    values: list[bytes],
    *,
    timestamps: list[int] | None = None,
    acks: int = m.ACKS_ALL,
) -> int:
    """Append one batch at the partition's leader; its base offset."""
    stamps = timestamps or [TS + i for i in range(len(values))]
    records = [
        (t, b"k-%d" % i, v, (("h", b"%d" % i),))
        for i, (t, v) in enumerate(zip(stamps, values, strict=True))
    ]

    async def send() -> int:
        deadline = time.monotonic() + 20
        while True:
            leader, _ = await _leader(cluster, topic, partition)
            async with kafka_broker_client(cluster.kafka_addresses[leader]) as client:
                answer = await client.produce(
                    m.ProduceRequest(
                        acks,
                        10_000,
                        (m.ProducePartition(topic, partition, build_batch(records)),),
                    )
                )
            (result,) = answer.partitions
            if result.error is None:
                return result.base_offset
            assert isinstance(result.error, NotLeaderOrFollowerError), result.error
            assert time.monotonic() < deadline, result.error
            await asyncio.sleep(0.2)

    return asyncio.run(send())


def poll_until(c: Consumer, count: int, timeout_s: float = 20) -> list[ConsumerRecord]:
    got: list[ConsumerRecord] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < count:
        assert time.monotonic() < deadline, f"only {len(got)} of {count} records arrived"
        for records in c.poll(500).values():
            got.extend(records)
    return got


def test_assign_round_trip_with_the_seek_family_and_offset_lookups(cluster: ClientCluster) -> None:
    cluster.create_topic("assigned", 2, 3)
    produce(cluster, "assigned", 0, [b"a0", b"a1", b"a2"], timestamps=[TS, TS + 10, TS + 20])
    produce(cluster, "assigned", 0, [b"a3"], timestamps=[TS + 30])
    produce(cluster, "assigned", 1, [b"b0", b"b1"])
    p0, p1 = TopicPartition("assigned", 0), TopicPartition("assigned", 1)
    with Consumer(**settings(cluster)) as consumer:
        consumer.assign([p0, p1])
        got = poll_until(consumer, 6)
        by_partition = {
            tp: [(r.offset, r.value) for r in got if r.partition == tp.partition] for tp in (p0, p1)
        }
        assert by_partition[p0] == [(0, b"a0"), (1, b"a1"), (2, b"a2"), (3, b"a3")]
        assert by_partition[p1] == [(0, b"b0"), (1, b"b1")]
        first = got[[r.value for r in got].index(b"a1")]
        assert (first.key, first.headers, first.timestamp) == (b"k-1", (("h", b"1"),), TS + 10)
        assert consumer.position(p0) == 4 and consumer.position(p1) == 2
        assert consumer.beginning_offsets([p0, p1]) == {p0: 0, p1: 0}
        assert consumer.end_offsets([p0, p1]) == {p0: 4, p1: 2}
        found = consumer.offsets_for_times({p0: TS + 15, p1: TS + 10_000})
        assert found[p0] == OffsetAndTimestamp(2, TS + 20, found[p0].leader_epoch)  # type: ignore[union-attr]
        assert found[p1] is None

        consumer.seek(p0, 2)
        consumer.pause(p1)
        assert [r.value for r in poll_until(consumer, 2)] == [b"a2", b"a3"]
        consumer.resume(p1)
        consumer.seek_to_beginning(p1)
        assert [r.value for r in poll_until(consumer, 2)] == [b"b0", b"b1"]
        consumer.seek_to_end()
        assert consumer.poll(300) == {}
        produce(cluster, "assigned", 1, [b"b2"])
        assert [(r.offset, r.value) for r in poll_until(consumer, 1)] == [(2, b"b2")]


def test_subscribe_commit_and_restart_continue_after_the_committed_offset(
    cluster: ClientCluster,
) -> None:
    cluster.create_topic("subscribed", 3, 3)
    for partition in range(3):
        produce(cluster, "subscribed", partition, [b"%d-%d" % (partition, i) for i in range(4)])
    group = settings(cluster, group_id="restart", enable_auto_commit=False)
    with Consumer("subscribed", **group) as consumer:
        got = poll_until(consumer, 12)
        assert sorted(r.value or b"" for r in got) == sorted(
            b"%d-%d" % (p, i) for p in range(3) for i in range(4)
        )
        assert consumer.assignment() == {TopicPartition("subscribed", p) for p in range(3)}
        consumer.commit()
        assert consumer.committed(TopicPartition("subscribed", 1)) == 4
    produce(cluster, "subscribed", 1, [b"later"])
    with Consumer("subscribed", **group) as again:
        assert [(r.partition, r.offset, r.value) for r in poll_until(again, 1)] == [
            (1, 4, b"later")
        ]
        assert again.poll(300) == {}


def test_two_consumers_of_one_group_are_warned_by_the_coordinator_and_the_consumers(
    cluster: ClientCluster, caplog: pytest.LogCaptureFixture
) -> None:
    """Both assign() every partition (outside the group's membership): both read everything.
    Before: silence on both sides."""
    cluster.create_topic("shared", 2, 3)
    for partition in range(2):
        produce(cluster, "shared", partition, [b"%d" % partition])
    group = settings(cluster, group_id="twins", enable_auto_commit=False, client_id="twin")
    caplog.set_level(logging.WARNING, logger="replog.client.consumer")
    with Consumer(**group) as first, Consumer(**group) as second:
        first.assign([TopicPartition("shared", p) for p in range(2)])
        second.assign([TopicPartition("shared", p) for p in range(2)])
        assert len(poll_until(first, 2)) == len(poll_until(second, 2)) == 2  # both read all
        first.commit()
        assert not [r for r in caplog.records if "another consumer" in r.getMessage()]
        second.commit()
        second.commit()
        first.commit()
    told = [r.getMessage() for r in caplog.records if "another consumer" in r.getMessage()]
    assert len(told) == 2, told  # each consumer once, however often it commits
    assert all(
        "another consumer commits offsets for group 'twins' and the same partitions "
        "(shared-0, shared-1): client 'twin' (instance "
        in message
        and "subscribe with the group.id so that the group splits them" in message
        for message in told
    ), told
    logs = "".join(
        (cluster.loopback.data_dir / f"node-{n}" / "node.log").read_text()
        for n in cluster.addresses
    )
    warned = [line for line in logs.splitlines() if "two consumers commit offsets" in line]
    assert len(warned) == 1, warned  # once per group and pair of consumers
    assert "WARNING" in warned[0] and "group 'twins'" in warned[0]
    assert "(shared-0, shared-1)" in warned[0] and warned[0].count("client 'twin' (instance") == 2
    assert "at 127.0.0.1" in warned[0]


def test_auto_commit_is_at_least_once_and_never_ahead_of_poll(cluster: ClientCluster) -> None:
    cluster.create_topic("autocommit", 1, 3)
    tp = TopicPartition("autocommit", 0)
    produce(cluster, "autocommit", 0, [b"%d" % i for i in range(20)])
    group = settings(cluster, group_id="auto", auto_commit_interval_ms=0)
    processed: list[int] = []
    first = Consumer(**group)
    first.assign([tp])
    while len(processed) < 7:
        for records in first.poll(1_000, max_records=3).values():
            processed.extend(r.offset for r in records)
    # Auto-commits run in the background of later polls and cover only what earlier polls
    # returned.
    deadline = time.monotonic() + 10
    while (committed := first.committed(tp)) is None:
        assert time.monotonic() < deadline, "no auto-commit"
        for records in first.poll(100, max_records=1).values():
            processed.extend(r.offset for r in records)
    assert committed <= processed[-1] + 1
    # A crash: nothing more is committed (an auto-commit already on its way may still land).
    first.close(autocommit=False)
    with Consumer(**group) as second:
        second.assign([tp])
        start = second.committed(tp)
        assert start is not None and committed <= start <= processed[-1] + 1
        rest = [r.offset for r in poll_until(second, 20 - start)]
    assert rest[0] == start  # at least once: nothing between what was processed and the rest
    assert sorted(set(processed) | set(rest)) == list(range(20))


def test_reset_policies_latest_and_none(cluster: ClientCluster) -> None:
    cluster.create_topic("resets", 1, 3)
    tp = TopicPartition("resets", 0)
    produce(cluster, "resets", 0, [b"old"])
    with Consumer(**settings(cluster, group_id="latest", auto_offset_reset="latest")) as latest:
        latest.assign([tp])
        assert latest.position(tp) == 1
        produce(cluster, "resets", 0, [b"new"])
        assert [r.value for r in poll_until(latest, 1)] == [b"new"]
    with Consumer(**settings(cluster, group_id="none", auto_offset_reset="none")) as none:
        none.assign([tp])
        with pytest.raises(NoOffsetForPartitionError, match="resets-0"):
            none.poll(2_000)


def test_records_above_the_high_watermark_are_never_returned(cluster: ClientCluster) -> None:
    cluster.create_topic("watermark", 1, 2)
    tp = TopicPartition("watermark", 0)
    produce(cluster, "watermark", 0, [b"committed"])
    leader, replicas = asyncio.run(_leader(cluster, "watermark", 0))
    (follower,) = [r for r in replicas if r != leader]
    with Consumer(**settings(cluster)) as consumer:
        consumer.assign([tp])
        assert [r.value for r in poll_until(consumer, 1)] == [b"committed"]
        cluster.loopback.signal(follower, signal.SIGSTOP)
        try:
            produce(cluster, "watermark", 0, [b"uncommitted"], acks=m.ACKS_LEADER)
            deadline = time.monotonic() + 1.5
            while time.monotonic() < deadline:
                assert consumer.poll(200) == {}
            assert consumer.end_offsets([tp]) == {tp: 1}
        finally:
            cluster.loopback.signal(follower, signal.SIGCONT)
        assert [(r.offset, r.value) for r in poll_until(consumer, 1)] == [(1, b"uncommitted")]


def test_the_asyncio_consumer_round_trip_with_auto_commit_on_close(cluster: ClientCluster) -> None:
    cluster.create_topic("asyncio", 1, 3)
    tp = TopicPartition("asyncio", 0)
    produce(cluster, "asyncio", 0, [b"x", b"y"])

    async def run() -> None:
        async with aio.Consumer("asyncio", **settings(cluster, group_id="aio")) as consumer:
            seen: list[bytes | None] = []
            while len(seen) < 2:
                for records in (await consumer.poll(1_000)).values():
                    seen.extend(r.value for r in records)
            assert seen == [b"x", b"y"]
        async with aio.Consumer(**settings(cluster, group_id="aio")) as again:
            assert await again.committed(tp) == 2

    asyncio.run(run())


def test_producer_to_consumer_keeps_per_key_order(cluster: ClientCluster) -> None:
    cluster.create_topic("pipeline", 3, 3)
    sent = [(b"key-%d" % (i % 5), b"value-%d" % i) for i in range(300)]
    with Producer(bootstrap_servers=cluster.bootstrap, linger_ms=5) as producer:
        futures = [producer.send("pipeline", value, key=key) for key, value in sent]
        producer.flush(timeout=20)
        placed = {f.get(timeout=20).partition for f in futures}
    assert len(placed) > 1
    with Consumer("pipeline", **settings(cluster, group_id="pipeline")) as consumer:
        got = poll_until(consumer, len(sent))
    assert len(got) == len(sent)
    for key in {k for k, _ in sent}:
        assert [r.value for r in got if r.key == key] == [v for k, v in sent if k == key]


def test_a_dead_bootstrap_address_bounds_every_call_by_its_timeout() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{sock.getsockname()[1]}"
    tp = TopicPartition("t", 0)
    with Consumer(bootstrap_servers=address, group_id="g", retry_backoff_ms=20) as consumer:
        consumer.assign([tp])
        started = time.monotonic()
        assert consumer.poll(500) == {}
        assert 0.45 < time.monotonic() - started < 1.5
        started = time.monotonic()
        with pytest.raises(KafkaTimeoutError, match=address):
            consumer.position(tp, timeout_ms=500)
        assert time.monotonic() - started < 1.5
        with pytest.raises(KafkaTimeoutError, match="did not finish within 300 ms"):
            consumer.end_offsets([tp], timeout_ms=300)


def test_a_position_below_the_log_start_offset_is_reset_and_said(
    cluster: ClientCluster, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue #52: reading from below the log start offset (after DeleteRecords) used to return
    nothing, silently. OFFSET_OUT_OF_RANGE applies auto.offset.reset and says so (Kafka's
    Fetcher: "Fetch position ... is out of range for partition ..., resetting offset"); with
    `none` it raises OffsetOutOfRangeError naming the partition and the offset."""
    cluster.create_topic("trimmed", 1, 3)
    tp = TopicPartition("trimmed", 0)
    produce(cluster, "trimmed", 0, [b"%d" % i for i in range(5)])
    produce(cluster, "trimmed", 0, [b"%d" % i for i in range(5, 10)])
    with Admin(bootstrap_servers=cluster.bootstrap) as admin:
        assert admin.delete_records({tp: 5}) == {tp: 5}
    caplog.set_level(logging.INFO, logger="replog.client")
    with Consumer(**settings(cluster, auto_offset_reset="earliest")) as earliest:
        earliest.assign([tp])
        earliest.seek(tp, 2)
        assert [r.offset for r in poll_until(earliest, 5)] == [5, 6, 7, 8, 9]
    (said,) = [r for r in caplog.records if "out of range" in r.getMessage()]
    assert said.levelno == logging.WARNING
    assert said.getMessage() == (
        "Fetch position 2 is out of range for partition trimmed-0 (the log holds [5, 10) for "
        "consumers), resetting offset to earliest (auto.offset.reset)"
    )
    with Consumer(**settings(cluster, auto_offset_reset="latest")) as latest:
        latest.assign([tp])
        latest.seek(tp, 0)
        deadline = time.monotonic() + 20
        while latest.position(tp) != 10:
            assert latest.poll(200) == {}
            assert time.monotonic() < deadline
    with Consumer(**settings(cluster, auto_offset_reset="none")) as none:
        none.assign([tp])
        none.seek(tp, 0)
        with pytest.raises(OffsetOutOfRangeError, match=r"trimmed-0: fetch offset 0 is out of"):
            poll_until(none, 1)
