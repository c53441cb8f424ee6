"""The asyncio Consumer against an in-process fake cluster (tests/client/consumer_fakes.py).

Covered: assign and subscribe round trips, starting positions (committed offset, each
auto.offset.reset policy), batches starting before the position, OFFSET_OUT_OF_RANGE with each
policy, a leader change mid-stream, the seek family and offset lookups, commit / commit_async /
committed, auto-commit committing only what poll returned, pause/resume, fetching ahead as
answers arrive up to fetch.max.bytes (order, errors met ahead, a model check with seeks and
pauses), iteration and wakeup, a poll on a dead cluster returning within its timeout, calls
cut off by a connection reset (retried, not taken for a close), a missing partition retried
without spinning, and the typed errors of misuse.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator
from typing import Any
from uuid import UUID

import consumer_fakes
import pytest
import pytest_asyncio
from consumer_fakes import (
    BASE_TIMESTAMP,
    FakeCluster,
    FakePartition,
    consumer_settings,
    poll_until,
)

from replog.aio import Consumer as ExportedConsumer
from replog.client.consumer import Consumer
from replog.client.records import (
    ConsumerRecord,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    TopicPartition,
)
from replog.errors import (
    ClientClosedError,
    CoordinatorLoadInProgressError,
    CorruptRecordError,
    IllegalStateError,
    InvalidGroupIdError,
    KafkaTimeoutError,
    NoOffsetForPartitionError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    RecordDeserializationError,
    UnknownTopicOrPartitionError,
)
from replog.testing import ManualClock
from tests.eventually import eventually

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
CRASH = r"the consumer's background tasks stopped on an unexpected error "


@pytest_asyncio.fixture
async def cluster(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeCluster]:
    fake = FakeCluster()
    fake.install(monkeypatch)
    yield fake


def consumer(cluster: FakeCluster, *topics: str, **overrides: object) -> Consumer:
    return Consumer(*topics, **consumer_settings(cluster, **overrides))


def values(records: list[ConsumerRecord]) -> list[bytes | None]:
    return [r.value for r in records]


async def poll_until_assigned(c: Consumer, assigned: set[TopicPartition]) -> None:
    """Poll until the subscription reads exactly `assigned` (metadata refreshes in between),
    for up to 10 s: a prepare step waiting out a committed-offset fetch (request.timeout.ms,
    2 s here) delays the next metadata refresh by that much. The fixed 100 polls of 20 ms were
    about 2 s, too short: the blip test would fail in about half its runs."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        await c.poll(20)
        if c.assignment() == assigned:
            return
    assert c.assignment() == assigned


@pytest.mark.asyncio
async def test_assign_and_poll_from_the_beginning(cluster: FakeCluster) -> None:
    cluster.create("t", 2)
    cluster.append("t", 0, [b"a", b"b"])
    cluster.append("t", 0, [b"c"])
    cluster.append("t", 1, [b"x"])
    async with consumer(cluster) as c:
        c.assign([T0, T1])
        assert c.assignment() == {T0, T1}
        got = await poll_until(c, 4)
        assert sorted(value or b"" for value in values(got)) == [b"a", b"b", b"c", b"x"]
        first = next(r for r in got if r.value == b"a")
        assert first == ConsumerRecord("t", 0, 0, BASE_TIMESTAMP, 0, None, b"a", (), 0)
        assert await c.position(T0) == 3 and await c.position(T1) == 1
        assert c.highwater(T0) == 3
        assert await c.poll(0) == {}
    assert ExportedConsumer is Consumer


@pytest.mark.asyncio
async def test_max_records_splits_one_fetch_over_polls(cluster: FakeCluster) -> None:
    cluster.create("t")
    cluster.append("t", 0, [b"%d" % i for i in range(10)])
    async with consumer(cluster) as c:
        c.assign([T0])
        first = await c.poll(2_000, max_records=4)
        assert [r.offset for r in first[T0]] == [0, 1, 2, 3]
        assert await c.position(T0) == 4
        second = await c.poll(2_000, max_records=100)
        assert [r.offset for r in second[T0]] == [4, 5, 6, 7, 8, 9]


@pytest.mark.asyncio
async def test_a_partition_is_fetched_ahead_of_its_buffered_records_as_answers_arrive(
    cluster: FakeCluster,
) -> None:
    """While a fetch's records are still buffered (max_records cut them), the partition is
    fetched again from where the last buffered answer ends, answer after answer as they
    arrive, with no poll in between; the records come out in order, none twice; a seek drops
    every answer buffered."""
    cluster.create("t")
    for start in range(0, 50, 10):
        cluster.append("t", 0, [b"%d" % i for i in range(start, start + 10)])
    # max.partition.fetch.bytes lets a fetch carry about one 10-record batch
    async with consumer(cluster, max_partition_fetch_bytes=200) as c:
        c.assign([T0])
        got: list[int] = []
        first = await c.poll(2_000, max_records=3)
        got += [r.offset for r in first[T0]]

        def fetched_at() -> list[int]:
            return [o for _, parts in cluster.fetches for _, _, o in parts]

        await eventually(lambda: 40 in fetched_at(), "fetches ahead up to the last batch")
        assert fetched_at()[:5] == [0, 10, 20, 30, 40]  # each from the last answer's end
        while len(got) < 50:
            batch = await c.poll(2_000, max_records=3)
            got += [r.offset for r in batch.get(T0, [])]
        assert got == list(range(50))
        # A seek while answers are buffered ahead: none of them is handed out.
        c.seek(T0, 5)
        sent = len(cluster.fetches)
        assert [r.offset for r in (await c.poll(2_000, max_records=2))[T0]] == [5, 6]
        await eventually(lambda: 20 in fetched_at()[sent:], "answers ahead of 7.. arrived")
        c.seek(T0, 1)
        assert [r.offset for r in (await c.poll(2_000, max_records=2))[T0]] == [1, 2]


@pytest.mark.asyncio
async def test_fetching_ahead_stops_at_fetch_max_bytes_of_buffered_records(
    cluster: FakeCluster,
) -> None:
    """No partition is fetched ahead while the answers buffered hold fetch.max.bytes of record
    bytes: with a bound below one answer, the next fetch waits until poll handed out the
    buffered records."""
    cluster.create("t")
    for start in range(0, 30, 10):
        cluster.append("t", 0, [b"%d" % i for i in range(start, start + 10)])
    async with consumer(cluster, max_partition_fetch_bytes=200, fetch_max_bytes=1) as c:
        c.assign([T0])
        first = await c.poll(2_000, max_records=3)
        assert [r.offset for r in first[T0]] == [0, 1, 2]
        assert not c._fetcher.in_flight  # one answer buffered: nothing fetched ahead
        assert [o for _, parts in cluster.fetches for _, _, o in parts] == [0]
        rest = await c.poll(2_000, max_records=7)
        assert [r.offset for r in rest[T0]] == list(range(3, 10))
        assert c._fetcher.in_flight  # drained: fetched at the position again
    sent = len(cluster.fetches)
    async with consumer(cluster, max_partition_fetch_bytes=200) as c:
        c.assign([T0])
        await c.poll(2_000, max_records=3)
        await eventually(
            lambda: 20 in [o for _, parts in cluster.fetches[sent:] for _, _, o in parts],
            "fetched ahead under the default bound",
        )


@pytest.mark.asyncio
async def test_an_error_met_ahead_of_the_buffered_records_comes_after_them_at_its_offset(
    cluster: FakeCluster,
) -> None:
    """The fetch ahead meets OFFSET_OUT_OF_RANGE (the log start moved past where the buffered
    records end) and then a scripted error: neither is raised, nor resets the position, while
    records before them are buffered; once those are handed out, the fetch at the position
    meets the out-of-range and raises it naming that offset."""
    cluster.create("t")
    part = cluster.partition("t")
    for base in range(0, 30, 10):
        cluster.append("t", 0, [b"%d" % i for i in range(base, base + 10)])
    part.hw_lag = 20  # the first fetch gets 0..9, the fetch ahead at 10 waits
    async with consumer(cluster, auto_offset_reset="none") as c:
        c.assign([T0])
        c.seek(T0, 0)
        got = [r.offset for r in (await c.poll(2_000, max_records=3))[T0]]
        await eventually(
            lambda: any(o == 10 for _, parts in cluster.fetches for _, _, o in parts),
            "a fetch ahead from 10",
        )
        part.log_start, part.hw_lag = 25, 0
        cluster.wake()
        await eventually(lambda: not c._fetcher.in_flight, "the fetch ahead answered")
        part.errors.append(NotLeaderOrFollowerError("t-0: moving"))
        with pytest.raises(OffsetOutOfRangeError, match="fetch offset 10 is out of range"):
            while True:
                got += [r.offset for r in (await c.poll(2_000, max_records=3)).get(T0, [])]
        assert got == list(range(10))
        assert await c.position(T0) == 10


@pytest.mark.asyncio
async def test_a_retriable_error_met_ahead_asks_for_metadata_before_the_buffer_drains(
    cluster: FakeCluster,
) -> None:
    """The fetch ahead meets NOT_LEADER_OR_FOLLOWER (the partition moved to broker 1): the
    metadata is asked again at once, while the buffered records are still being handed out
    (as Kafka's consumer asks when it sees the error), not once they are; the records still
    come out in order, the answer ahead dropped and fetched again from the new leader."""
    cluster.create("t")
    part = cluster.partition("t")
    for base in range(0, 20, 10):
        cluster.append("t", 0, [b"%d" % i for i in range(base, base + 10)])
    part.hw_lag = 10  # the first fetch gets 0..9, the fetch ahead at 10 waits
    async with consumer(cluster, fetch_max_wait_ms=1_500) as c:
        c.assign([T0])
        got = [r.offset for r in (await c.poll(2_000, max_records=1))[T0]]
        await eventually(
            lambda: any(o == 10 for _, parts in cluster.fetches for _, _, o in parts),
            "a fetch ahead from 10",
        )
        asked = cluster.calls.count("Metadata")
        cluster.move_leader("t", 0, 1)
        part.hw_lag = 0
        cluster.wake()
        await eventually(lambda: not c._fetcher.in_flight, "the fetch ahead answered")
        while cluster.calls.count("Metadata") == asked:
            assert len(got) < 9, "the metadata was not asked again while records were buffered"
            got += [r.offset for r in (await c.poll(2_000, max_records=1)).get(T0, [])]
            await asyncio.sleep(0.02)  # the update the poll started runs
        while len(got) < 20:
            got += [r.offset for r in (await c.poll(2_000, max_records=3)).get(T0, [])]
        assert got == list(range(20))
        assert (1, (("t", 0, 10),)) in cluster.fetches


@pytest.mark.asyncio
@pytest.mark.parametrize("seed", range(6))
async def test_fetched_ahead_or_not_poll_hands_out_each_partition_s_log_in_order(
    cluster: FakeCluster, seed: int
) -> None:
    """Random polls (small max_records), seeks, pauses, resumes, appends and pauses of the
    caller against two partitions read one batch a fetch (so answers are fetched ahead): every
    poll hands out each partition's records from its position on, consecutively, none of a
    paused partition, and the position is always just past what was handed out."""
    rng = random.Random(seed)
    cluster.create("t", 2)
    written = {T0: 0, T1: 0}

    def append(tp: TopicPartition) -> None:
        count = rng.randint(1, 12)
        cluster.append("t", tp.partition, [b"%d" % (written[tp] + i) for i in range(count)])
        written[tp] += count

    for _ in range(5):
        append(T0)
        append(T1)
    fetch_bytes = rng.choice([100, 300, 2000])
    async with consumer(cluster, max_partition_fetch_bytes=fetch_bytes) as c:
        c.assign([T0, T1])
        expected = {T0: 0, T1: 0}
        for tp in expected:
            c.seek(tp, 0)
        for step in range(80):
            tp, choice = rng.choice([T0, T1]), rng.random()
            if choice < 0.1:
                expected[tp] = rng.randint(0, written[tp])
                c.seek(tp, expected[tp])
            elif choice < 0.15:
                c.pause(tp)
            elif choice < 0.22:
                c.resume(tp)
            elif choice < 0.27:
                append(tp)
            elif choice < 0.32:
                await asyncio.sleep(rng.choice([0, 0.01]))  # answers (ahead) arrive meanwhile
            else:
                got = await c.poll(rng.choice([0, 50]), max_records=rng.randint(1, 7))
                for part, records in got.items():
                    assert part not in c.paused(), (step, part)
                    start = expected[part]
                    assert [r.offset for r in records] == list(range(start, start + len(records)))
                    assert [r.value for r in records] == [b"%d" % r.offset for r in records]
                    expected[part] += len(records)
            for part, offset in expected.items():
                assert await c.position(part) == offset, (step, part)


@pytest.mark.asyncio
async def test_subscribe_reads_every_partition_and_picks_up_new_ones(
    cluster: FakeCluster,
) -> None:
    cluster.create("t", 2)
    cluster.append("t", 0, [b"p0"])
    cluster.append("t", 1, [b"p1"])
    async with consumer(cluster, "t", metadata_max_age_ms=100) as c:
        assert c.subscription() == {"t"}
        assert sorted(value or b"" for value in values(await poll_until(c, 2))) == [b"p0", b"p1"]
        assert c.assignment() == {T0, T1}
        cluster.topics["t"].append(type(cluster.partition("t"))(leader=2))
        cluster.append("t", 2, [b"p2"])
        assert values(await poll_until(c, 1)) == [b"p2"]
        assert TopicPartition("t", 2) in c.assignment()
        c.unsubscribe()
        assert c.subscription() is None and c.assignment() == set()


@pytest.mark.asyncio
async def test_a_missing_subscribed_topic_is_logged_and_read_once_it_exists(
    cluster: FakeCluster, caplog: pytest.LogCaptureFixture
) -> None:
    async with consumer(cluster, "later", retry_backoff_max_ms=20) as c:
        assert await c.poll(200) == {}
        assert "topic 'later' does not exist" in caplog.text
        cluster.create("later")
        cluster.append("later", 0, [b"hello"])
        assert values(await poll_until(c, 1)) == [b"hello"]


@pytest.mark.asyncio
async def test_an_assigned_partition_that_does_not_exist_is_logged_not_hammered(
    cluster: FakeCluster, caplog: pytest.LogCaptureFixture
) -> None:
    cluster.create("t")
    async with consumer(cluster, retry_backoff_max_ms=100) as c:
        lookups = []
        real = c._lookup.list_offsets

        async def counted(*args: Any, **kwargs: Any) -> Any:
            lookups.append(1)
            return await real(*args, **kwargs)

        c._lookup.list_offsets = counted  # type: ignore[method-assign]
        c.assign([TopicPartition("t", 9)])
        assert await c.poll(500) == {}
        assert "partition t-9 does not exist: topic 't' has 1 partitions" in caplog.text
        assert 2 <= len(lookups) <= 8, len(lookups)  # retried after backoffs, not in a spin


@pytest.mark.parametrize("policy", ["earliest", "latest"])
@pytest.mark.asyncio
async def test_a_subscribed_topic_briefly_unknown_keeps_its_position(
    cluster: FakeCluster, policy: str
) -> None:
    cluster.create("t")
    cluster.append("t", 0, [b"0", b"1", b"2"])
    async with consumer(cluster, "t", auto_offset_reset=policy, metadata_max_age_ms=50) as c:
        await c.start()  # the metadata: t-0 is assigned
        c.seek_to_beginning()
        assert values(await poll_until(c, 3)) == [b"0", b"1", b"2"]
        lagging = cluster.topics.pop("t")  # the next metadata answer calls "t" unknown
        await poll_until_assigned(c, set())
        cluster.topics["t"] = lagging
        cluster.append("t", 0, [b"3", b"4"])
        got: list[bytes | None] = []
        for _ in range(50):
            got += values([r for records in (await c.poll(20)).values() for r in records])
            if len(got) >= 2:
                break
        assert got == [b"3", b"4"]  # not from the start again, not from the end
        assert await c.position(T0) == 5


@pytest.mark.asyncio
async def test_a_partition_of_a_re_created_topic_does_not_get_the_old_topics_position(
    cluster: FakeCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The topic is deleted and created again with one partition (a new id); when the new
    # topic gets a second partition, that partition starts afresh, not at the old t-1's
    # position (kept for a metadata blip, it belongs to the old topic).
    ids = {"t": UUID(bytes=b"x" * 16)}
    answer_metadata = consumer_fakes.FakeBroker.metadata

    async def with_topic_ids(self: Any, topics: Any = None, *, timeout_ms: Any = None) -> Any:
        answer = await answer_metadata(self, topics, timeout_ms=timeout_ms)
        for topic in answer.topics:
            if topic.name in ids and not topic.error_code:
                topic.topic_id = ids[topic.name]
        return answer

    monkeypatch.setattr(consumer_fakes.FakeBroker, "metadata", with_topic_ids)
    cluster.create("t", partitions=2)
    cluster.append("t", 1, [b"old%d" % i for i in range(10)])
    async with consumer(cluster, "t", auto_offset_reset="earliest", metadata_max_age_ms=50) as c:
        assert len(await poll_until(c, 10)) == 10
        cluster.topics["t"] = [FakePartition(leader=0)]
        ids["t"] = UUID(bytes=b"y" * 16)
        await poll_until_assigned(c, {T0})
        cluster.topics["t"].append(FakePartition(leader=1))
        cluster.append("t", 1, [b"new%d" % i for i in range(12)])
        got = await poll_until(c, 12)
        assert [r.offset for r in got if r.partition == 1] == list(range(12))


@pytest.mark.asyncio
async def test_a_pending_seek_survives_a_blip(cluster: FakeCluster) -> None:
    cluster.create("t")
    cluster.append("t", 0, [b"0", b"1", b"2"])
    async with consumer(cluster, "t", auto_offset_reset="latest", metadata_max_age_ms=50) as c:
        await c.start()
        assert await c.position(T0) == 3
        c.seek_to_beginning(T0)  # pending until the next poll
        c.pause(T0)
        lagging = cluster.topics.pop("t")
        await poll_until_assigned(c, set())
        cluster.topics["t"] = lagging
        await poll_until_assigned(c, {T0})
        assert c.paused() == {T0}  # still paused
        c.resume(T0)
        assert values(await poll_until(c, 3)) == [b"0", b"1", b"2"]  # the seek still applies


@pytest.mark.asyncio
async def test_a_pause_survives_a_blip_before_the_position_is_known(cluster: FakeCluster) -> None:
    cluster.create("t")
    cluster.append("t", 0, [b"0", b"1", b"2"])
    # No group (in a group the group assigns, and a topic that departs is a rebalance): the
    # leader down keeps the position (a ListOffsets of auto.offset.reset) unknown.
    cluster.down.add(cluster.partition("t").leader)
    async with consumer(cluster, "t", metadata_max_age_ms=50) as c:
        await poll_until_assigned(c, {T0})
        c.pause(T0)
        lagging = cluster.topics.pop("t")
        await poll_until_assigned(c, set())
        cluster.topics["t"] = lagging
        await poll_until_assigned(c, {T0})
        cluster.down.clear()
        assert c.paused() == {T0}
        assert await c.poll(300) == {}


@pytest.mark.asyncio
async def test_assign_and_subscribe_exclude_each_other(cluster: FakeCluster) -> None:
    cluster.create("t")
    async with consumer(cluster) as c:
        c.assign([T0])
        with pytest.raises(IllegalStateError, match="unsubscribe"):
            c.subscribe(["t"])
        c.unsubscribe()
        c.subscribe("t")  # one name, not its characters
        assert c.subscription() == {"t"}
        with pytest.raises(IllegalStateError, match="unsubscribe"):
            c.assign([T0])
        with pytest.raises(TypeError, match="TopicPartition"):
            c.unsubscribe()
            c.assign(["t"])  # type: ignore[list-item]


@pytest.mark.asyncio
async def test_committed_offset_is_the_start_and_a_batch_before_it_is_trimmed(
    cluster: FakeCluster,
) -> None:
    cluster.create("t")
    cluster.append("t", 0, [b"0", b"1", b"2", b"3", b"4"])
    cluster.committed[("g", T0)] = OffsetAndMetadata(3)
    async with consumer(cluster, group_id="g", enable_auto_commit=False) as c:
        c.assign([T0])
        got = await poll_until(c, 2)
        assert [r.offset for r in got] == [3, 4]
        assert cluster.fetches[0][1] == (("t", 0, 3),)


@pytest.mark.asyncio
async def test_a_committed_offset_asked_before_a_reassignment_is_not_applied_after_it(
    cluster: FakeCluster,
) -> None:
    """The committed offset of a partition is on its way when the partition leaves the
    assignment and comes back (another consumer committed further meanwhile): the answer
    belongs to the earlier assignment; the partition starts at the offset asked anew."""
    cluster.create("t", 2)
    cluster.append("t", 0, [b"%d" % i for i in range(6)])
    cluster.committed[("g", T0)] = OffsetAndMetadata(2)
    cluster.offset_fetch_gate = gate = asyncio.Event()
    async with consumer(cluster, group_id="g", enable_auto_commit=False) as c:
        c.assign([T0])
        await c.poll(10)
        await eventually(lambda: cluster.offset_fetches == [(T0,)], "the OffsetFetch of t-0")
        c.assign([T1])
        c.assign([T0])
        cluster.committed[("g", T0)] = OffsetAndMetadata(4)
        gate.set()
        got = await poll_until(c, 2)
        assert [r.offset for r in got] == [4, 5]
        assert cluster.offset_fetches[-1] == (T0,)


@pytest.mark.parametrize(
    ("policy", "expected"), [("earliest", [b"old", b"new"]), ("latest", [b"new"])]
)
@pytest.mark.asyncio
async def test_without_a_committed_offset_the_reset_policy_decides(
    cluster: FakeCluster, policy: str, expected: list[bytes]
) -> None:
    cluster.create("t")
    cluster.append("t", 0, [b"old"])
    async with consumer(cluster, group_id="g", auto_offset_reset=policy) as c:
        c.assign([T0])
        assert await c.position(T0) == (0 if policy == "earliest" else 1)
        cluster.append("t", 0, [b"new"])
        assert values(await poll_until(c, len(expected))) == expected


@pytest.mark.asyncio
async def test_reset_none_without_a_committed_offset_raises(cluster: FakeCluster) -> None:
    cluster.create("t")
    async with consumer(cluster, group_id="g", auto_offset_reset="none") as c:
        c.assign([T0])
        with pytest.raises(NoOffsetForPartitionError, match=r"t-0 \(group 'g'\)"):
            await c.poll(1_000)
        with pytest.raises(NoOffsetForPartitionError):
            await c.position(T0)
        c.seek(T0, 0)
        assert await c.poll(100) == {}


@pytest.mark.parametrize("policy", ["earliest", "latest"])
@pytest.mark.asyncio
async def test_offset_out_of_range_resets_by_policy(cluster: FakeCluster, policy: str) -> None:
    cluster.create("t")
    cluster.append("t", 0, [b"0", b"1"])
    cluster.append("t", 0, [b"2", b"3"])
    cluster.partition("t").log_start = 2  # records 0-1 deleted
    async with consumer(cluster, auto_offset_reset=policy) as c:
        c.assign([T0])
        c.seek(T0, 1)
        if policy == "earliest":
            assert values(await poll_until(c, 2)) == [b"2", b"3"]
        else:
            assert await c.poll(300) == {}
            assert await c.position(T0) == 4
            cluster.append("t", 0, [b"4"])
            assert values(await poll_until(c, 1)) == [b"4"]


@pytest.mark.asyncio
async def test_offset_out_of_range_with_reset_none_raises_naming_partition_and_offset(
    cluster: FakeCluster,
) -> None:
    cluster.create("t")
    cluster.append("t", 0, [b"0"])
    async with consumer(cluster, auto_offset_reset="none") as c:
        c.assign([T0])
        c.seek(T0, 9)
        with pytest.raises(OffsetOutOfRangeError, match="t-0: fetch offset 9 is out of range"):
            await poll_until(c, 1)
        c.seek(T0, 0)
        assert values(await poll_until(c, 1)) == [b"0"]


@pytest.mark.asyncio
async def test_a_fetch_error_is_raised_once_and_never_after_a_seek_or_unassignment(
    cluster: FakeCluster,
) -> None:
    # t-0 out of range under reset none, t-1 with records: t-0's error is raised once per
    # fetch, soon, while t-1 goes on delivering each record once; after the user seeks to a
    # valid offset or drops t-0, no stale copy of the error is raised (not one queued per
    # prefetch and raised by every later poll).
    cluster.create("t", partitions=2)
    cluster.append("t", 0, [b"a", b"b"])
    cluster.append("t", 1, [b"%d" % i for i in range(5)])
    async with consumer(cluster, auto_offset_reset="none") as c:
        c.assign([T0, T1])
        c.seek(T0, 9)
        c.seek(T1, 0)
        handed: list[int] = []
        raised = 0
        for _ in range(20):
            try:
                handed += [r.offset for r in (await c.poll(500, max_records=1)).get(T1, [])]
            except OffsetOutOfRangeError as error:
                assert "t-0: fetch offset 9" in str(error)
                raised += 1
                if raised == 2:
                    break
            await asyncio.sleep(0.02)  # the application works; prefetches complete
        assert raised == 2  # raised at once, and again by the next fetch: not held back
        c.seek(T0, 0)
        for _ in range(20):
            records = await c.poll(200)  # no stale copy of the error
            handed += [r.offset for r in records.get(T1, [])]
            if records.get(T0):
                assert values(records[T0]) == [b"a", b"b"]
                break
        else:
            raise AssertionError("t-0 delivered nothing after the seek")
        for _ in range(5):
            handed += [r.offset for r in (await c.poll(100)).get(T1, [])]
        assert handed == [0, 1, 2, 3, 4]  # each of t-1's records once, in order
        assert await c.poll(200) == {}

        c.seek(T0, 9)
        with pytest.raises(OffsetOutOfRangeError):
            await poll_until(c, 1)
        await c.poll(0)  # a prefetch of t-0 may be under way again
        await asyncio.sleep(0.05)
        c.assign([T1])  # t-0 dropped: its error goes with it
        assert await c.poll(200) == {}


@pytest.mark.asyncio
async def test_a_corrupt_batch_is_raised_while_another_partition_keeps_delivering(
    cluster: FakeCluster,
) -> None:
    cluster.create("t", partitions=2)
    cluster.append("t", 0, [b"0"])
    raw = bytearray(cluster.partition("t", 0).batches[0])
    raw[-2] ^= 0x01
    cluster.partition("t", 0).batches[0] = bytes(raw)
    cluster.append("t", 1, [b"%d" % i for i in range(50)])
    async with consumer(cluster) as c:
        c.assign([T0, T1])
        await c.start()
        await asyncio.sleep(0.1)  # both fetches answered: t-1's records wait in the buffer
        for _ in range(10):
            try:
                await c.poll(200, max_records=1)  # t-1 has one for every poll
            except CorruptRecordError as error:
                assert "t-0: record batch at offset 0" in str(error)
                break
        else:
            raise AssertionError("t-0's corrupt batch was never raised")


@pytest.mark.asyncio
async def test_a_record_the_deserializer_rejects_is_named_and_skipped_by_a_seek(
    cluster: FakeCluster,
) -> None:
    cluster.create("t")
    cluster.append("t", 0, [b"1", b"two", b"3"])
    async with consumer(cluster, value_deserializer=lambda v: int(v)) as c:
        c.assign([T0])
        assert values(await poll_until(c, 1)) == [1]
        for _ in range(2):  # raised again until the caller seeks past it, as Kafka does
            with pytest.raises(RecordDeserializationError) as raised:
                await c.poll(1000)
            assert (raised.value.topic_partition, raised.value.offset) == (T0, 1)
            assert await c.position(T0) == 1
        c.seek(T0, raised.value.offset + 1)
        assert values(await poll_until(c, 1)) == [3]


@pytest.mark.asyncio
async def test_a_leader_change_mid_stream_loses_and_repeats_nothing(cluster: FakeCluster) -> None:
    cluster.create("t")
    cluster.append("t", 0, [b"0", b"1"])
    async with consumer(cluster) as c:
        c.assign([T0])
        assert values(await poll_until(c, 2)) == [b"0", b"1"]
        cluster.move_leader("t", 0, 1)  # node 0 now answers NOT_LEADER_OR_FOLLOWER
        cluster.append("t", 0, [b"2", b"3"])
        assert values(await poll_until(c, 2)) == [b"2", b"3"]
        nodes = [node for node, _ in cluster.fetches]
        assert nodes[-1] == 1 and 0 in nodes
        # The stream to the former leader is closed; the new leader's stays open until close.
        streams = {stream.broker.address: stream for stream in cluster.streams}
        assert [s.broker.address for s in cluster.streams] == ["node0:9092", "node1:9092"]
        assert streams["node0:9092"].closed and not streams["node1:9092"].closed
    assert all(stream.closed for stream in cluster.streams)


@pytest.mark.asyncio
async def test_fencing_and_not_leader_answers_refresh_metadata(cluster: FakeCluster) -> None:
    cluster.create("t")
    cluster.append("t", 0, [b"0"])
    cluster.partition("t").errors.extend(
        [NotLeaderOrFollowerError("t-0: moving"), NotLeaderOrFollowerError("t-0: moving")]
    )
    async with consumer(cluster) as c:
        c.assign([T0])
        before = cluster.calls.count("Metadata")
        assert values(await poll_until(c, 1)) == [b"0"]
        assert cluster.calls.count("Metadata") > before


@pytest.mark.asyncio
async def test_after_a_failed_fetch_the_broker_is_not_asked_first_who_leads(
    cluster: FakeCluster,
) -> None:
    """A leader cut off from the cluster names itself in Metadata. After a fetch from it
    failed, the consumer asks the other brokers first (cluster_metadata.py, `distrust`);
    asking it again would name it again, forever."""
    cluster.create("t")
    cluster.append("t", 0, [b"0"])
    async with consumer(cluster) as c:
        c.assign([T0])
        assert values(await poll_until(c, 1)) == [b"0"]
        old = cluster.partition("t")
        cluster.stale_views[old.leader] = {("t", 0): (old.leader, old.epoch)}
        cluster.move_leader("t", 0, 1)
        cluster.append("t", 0, [b"1"])
        cluster.cut_off.append("Fetch")
        assert values(await poll_until(c, 1)) == [b"1"]
        assert cluster.fetches[-1][0] == 1


@pytest.mark.asyncio
async def test_calls_cut_off_by_a_connection_reset_are_retried(cluster: FakeCluster) -> None:
    # Another call's UNAVAILABLE replaces the channel and cancels the calls in flight on it;
    # for the consumer that is a network error to retry, not a close.
    cluster.create("t")
    cluster.append("t", 0, [b"0"])
    cluster.cut_off.extend(["OffsetFetch", "ListOffsets", "Fetch"])
    async with consumer(cluster, group_id="g") as c:
        c.assign([T0])
        assert values(await poll_until(c, 1)) == [b"0"]
        cluster.cut_off.append("OffsetCommit")
        await c.commit()
        assert cluster.committed[("g", T0)].offset == 1
        assert not cluster.cut_off


@pytest.mark.asyncio
async def test_records_above_the_high_watermark_are_not_returned(cluster: FakeCluster) -> None:
    cluster.create("t")
    cluster.append("t", 0, [b"0"])
    cluster.append("t", 0, [b"1"])
    cluster.partition("t").hw_lag = 1  # offset 1 is not committed yet
    async with consumer(cluster) as c:
        c.assign([T0])
        assert values(await poll_until(c, 1)) == [b"0"]
        assert await c.poll(200) == {}
        assert await c.end_offsets([T0]) == {T0: 1}
        cluster.partition("t").hw_lag = 0
        cluster.wake()
        assert values(await poll_until(c, 1)) == [b"1"]


@pytest.mark.asyncio
async def test_a_corrupt_batch_raises_after_the_records_before_it(cluster: FakeCluster) -> None:
    cluster.create("t")
    cluster.append("t", 0, [b"0"])
    cluster.append("t", 0, [b"1"])
    raw = bytearray(cluster.partition("t").batches[1])
    raw[-2] ^= 0x01
    cluster.partition("t").batches[1] = bytes(raw)
    async with consumer(cluster) as c:
        c.assign([T0])
        assert values(await poll_until(c, 1)) == [b"0"]
        with pytest.raises(CorruptRecordError, match="t-0: record batch at offset 1"):
            await poll_until(c, 1)
        with pytest.raises(CorruptRecordError):  # again, until the user seeks past it
            await poll_until(c, 1)
        c.seek(T0, 2)
        assert await c.poll(100) == {}


@pytest.mark.asyncio
async def test_an_offset_lookup_that_times_out_names_the_callers_timeout(
    cluster: FakeCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The deadline is set a few ms before the lookup starts (here the clock moves 5 ms at
    # every read): the error still names the timeout the caller gave, not what was left of it.
    cluster.create("t", 1)
    cluster.down.add(cluster.partition("t").leader)
    async with consumer(cluster, clock=ManualClock(tick_ms=5)) as c:
        c.assign([T0])
        with pytest.raises(
            KafkaTimeoutError, match="end_offsets for t-0 did not finish within 200 ms"
        ):
            await c.end_offsets([T0], timeout_ms=200)
        with pytest.raises(KafkaTimeoutError, match=r"offsets_for_times .* within 150 ms"):
            await c.offsets_for_times({T0: BASE_TIMESTAMP}, timeout_ms=150)


@pytest.mark.asyncio
async def test_seek_family_and_offset_lookups(cluster: FakeCluster) -> None:
    cluster.create("t", 2)
    for i in range(5):
        cluster.append("t", 0, [b"%d" % i])
    cluster.partition("t").log_start = 1
    async with consumer(cluster) as c:
        c.assign([T0, T1])
        assert await c.beginning_offsets([T0, T1]) == {T0: 1, T1: 0}
        assert await c.end_offsets([T0, T1]) == {T0: 5, T1: 0}
        found = await c.offsets_for_times({T0: BASE_TIMESTAMP + 3, T1: BASE_TIMESTAMP})
        assert found == {T0: OffsetAndTimestamp(3, BASE_TIMESTAMP + 3, 0), T1: None}
        c.seek(T0, 3)
        assert await c.position(T0) == 3
        assert values(await poll_until(c, 2)) == [b"3", b"4"]
        c.seek_to_beginning(T0)
        assert await c.position(T0) == 1
        c.seek_to_end()
        assert await c.position(T0) == 5 and await c.position(T1) == 0
        with pytest.raises(TypeError, match=r"seek_to_beginning\(\): expected a TopicPartition"):
            c.seek_to_beginning([T0])  # type: ignore[arg-type]
        c.seek_to_beginning(T0)
        assert values(await poll_until(c, 4)) == [b"1", b"2", b"3", b"4"]
        with pytest.raises(IllegalStateError, match="not assigned"):
            c.seek(TopicPartition("t", 7), 0)
        with pytest.raises(ValueError, match="offset"):
            c.seek(T0, -1)
        with pytest.raises(ValueError, match="timestamp"):
            await c.offsets_for_times({T0: -5})
        with pytest.raises(UnknownTopicOrPartitionError, match="t-9 does not exist"):
            await c.end_offsets([TopicPartition("t", 9)])
        with pytest.raises(UnknownTopicOrPartitionError, match="'nope' does not exist"):
            await c.beginning_offsets([TopicPartition("nope", 0)])


@pytest.mark.asyncio
async def test_commit_committed_and_commit_async(cluster: FakeCluster) -> None:
    cluster.create("t")
    cluster.append("t", 0, [b"0", b"1", b"2"])
    async with consumer(cluster, group_id="g", enable_auto_commit=False) as c:
        c.assign([T0])
        assert await c.committed(T0) is None
        await poll_until(c, 3)
        await c.commit()
        assert await c.committed(T0) == 3  # the next offset to read
        await c.commit({T0: OffsetAndMetadata(1, "note")})
        assert await c.committed(T0, metadata=True) == OffsetAndMetadata(1, "note", -1)
        seen: list[tuple[dict[TopicPartition, OffsetAndMetadata], Exception | None]] = []
        await c.commit_async({T0: 2}, lambda offsets, error: seen.append((offsets, error)))
        assert seen == [({T0: OffsetAndMetadata(2)}, None)]
        assert cluster.committed[("g", T0)].offset == 2
        with pytest.raises(ValueError, match="must be >= 0"):
            await c.commit({T0: -1})
        # Clear errors here, not failures in protobuf's encoder.
        with pytest.raises(TypeError, match=r"metadata for t-0 must be a str, got int \(7\)"):
            await c.commit({T0: OffsetAndMetadata(5, 7)})  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="leader_epoch for t-0 must be an int"):
            await c.commit({T0: OffsetAndMetadata(5, "", "3")})  # type: ignore[arg-type]
        assert cluster.committed[("g", T0)].offset == 2


@pytest.mark.asyncio
async def test_commit_needs_a_group_id(cluster: FakeCluster) -> None:
    cluster.create("t")
    async with consumer(cluster) as c:
        c.assign([T0])
        with pytest.raises(InvalidGroupIdError, match=r"commit\(\) needs a group\.id"):
            await c.commit()
        with pytest.raises(InvalidGroupIdError):
            await c.committed(T0)
        with pytest.raises(InvalidGroupIdError):
            c.commit_async()


@pytest.mark.asyncio
async def test_auto_commit_commits_only_what_poll_returned(cluster: FakeCluster) -> None:
    cluster.create("t")
    cluster.append("t", 0, [b"%d" % i for i in range(5)])
    c = consumer(cluster, group_id="g", auto_commit_interval_ms=0)
    c.assign([T0])
    first = await c.poll(2_000, max_records=2)
    assert [r.offset for r in first[T0]] == [0, 1]
    # The fetcher holds offsets 2-4 already; only what poll returned may be committed.
    assert ("g", T0) not in cluster.committed or cluster.committed[("g", T0)].offset <= 2
    second = await c.poll(2_000, max_records=1)  # auto-commits 2 before returning offset 2
    assert [r.offset for r in second[T0]] == [2]
    for _ in range(20):
        if cluster.committed.get(("g", T0)) is not None:
            break
        await asyncio.sleep(0.01)
    assert cluster.committed[("g", T0)].offset == 2
    await c.close()  # commits what the last poll returned
    assert cluster.committed[("g", T0)].offset == 3
    assert all(entry[T0].offset <= 3 for entry in cluster.commits if T0 in entry)


@pytest.mark.asyncio
async def test_close_without_autocommit_commits_nothing(cluster: FakeCluster) -> None:
    cluster.create("t")
    cluster.append("t", 0, [b"0"])
    c = consumer(cluster, group_id="g")
    c.assign([T0])
    await poll_until(c, 1)
    await c.close(autocommit=False)
    assert ("g", T0) not in cluster.committed


@pytest.mark.asyncio
async def test_close_keeps_its_timeout_while_an_auto_commit_retries(cluster: FakeCluster) -> None:
    cluster.create("t")
    cluster.append("t", 0, [b"0", b"1"])
    # Timeouts far past the bound below, which leaves a loaded machine seconds to spare.
    c = consumer(
        cluster,
        group_id="g",
        auto_commit_interval_ms=50,
        request_timeout_ms=30_000,
        default_api_timeout_ms=60_000,
    )
    c.assign([T0])
    await poll_until(c, 2)
    cluster.commit_errors.extend(CoordinatorLoadInProgressError("loading") for _ in range(10_000))
    await asyncio.sleep(0.1)
    await c.poll(0)  # the interval passed: an auto-commit starts, and retries
    started = time.monotonic()
    await c.close(timeout_ms=200)  # the failed commit is logged, not raised
    assert time.monotonic() - started < 5  # not the commit's request timeout, nor the API's
    assert ("g", T0) not in cluster.committed


@pytest.mark.asyncio
async def test_a_restarted_consumer_continues_after_the_committed_offset(
    cluster: FakeCluster,
) -> None:
    cluster.create("t")
    cluster.append("t", 0, [b"0", b"1", b"2"])
    async with consumer(cluster, "t", group_id="g") as c:
        assert values(await poll_until(c, 3)) == [b"0", b"1", b"2"]
    cluster.append("t", 0, [b"3"])
    async with consumer(cluster, "t", group_id="g") as again:
        assert values(await poll_until(again, 1)) == [b"3"]


@pytest.mark.asyncio
async def test_pause_and_resume(cluster: FakeCluster) -> None:
    cluster.create("t", 2)
    cluster.append("t", 0, [b"a"])
    cluster.append("t", 1, [b"b"])
    async with consumer(cluster) as c:
        c.assign([T0, T1])
        c.pause(T1)
        assert c.paused() == {T1}
        assert values(await poll_until(c, 1)) == [b"a"]
        assert await c.poll(200) == {}
        c.resume(T1)
        assert values(await poll_until(c, 1)) == [b"b"]
        with pytest.raises(IllegalStateError):
            c.pause(TopicPartition("t", 5))


@pytest.mark.asyncio
async def test_async_iteration_ends_at_consumer_timeout_and_commits_only_yielded(
    cluster: FakeCluster,
) -> None:
    cluster.create("t")
    cluster.append("t", 0, [b"0", b"1", b"2", b"3"])
    c = consumer(cluster, group_id="g", consumer_timeout_ms=300)
    c.assign([T0])
    seen = []
    async for record in c:
        seen.append(record.value)
        if len(seen) == 2:
            break
    await c.commit()  # offsets 2 and 3 were polled but never yielded
    assert cluster.committed[("g", T0)].offset == 2
    assert await c.position(T0) == 2
    started = time.monotonic()
    async for record in c:
        seen.append(record.value)
    assert seen == [b"0", b"1", b"2", b"3"]
    assert 0.25 < time.monotonic() - started < 2.0
    await c.close()
    assert cluster.committed[("g", T0)].offset == 4


@pytest.mark.asyncio
async def test_a_new_subscription_drops_the_old_topics_records_held_for_iteration(
    cluster: FakeCluster,
) -> None:
    cluster.create("a")
    cluster.create("b")
    cluster.append("a", 0, [b"a0", b"a1", b"a2"])
    cluster.append("b", 0, [b"b0"])
    async with consumer(cluster, "a", consumer_timeout_ms=500) as c:
        first = await c.__anext__()  # the poll behind it fetched a1 and a2 as well
        assert first.value == b"a0"
        c.subscribe(["b"])
        assert [(r.topic, r.value) async for r in c] == [("b", b"b0")]


@pytest.mark.asyncio
async def test_wakeup_makes_a_waiting_poll_return_and_ends_iteration(
    cluster: FakeCluster,
) -> None:
    cluster.create("t")
    async with consumer(cluster) as c:
        c.assign([T0])
        waiting = asyncio.create_task(c.poll(10_000))
        await poll_until_fetching(cluster)  # the poll waits for the fetch's answer
        started = time.monotonic()
        c.wakeup()
        assert await waiting == {}
        assert time.monotonic() - started < 5  # not the poll's 10 s; room for a loaded machine

        async def iterate() -> list[ConsumerRecord]:
            return [record async for record in c]

        fetches = len(cluster.fetches)
        iterating = asyncio.create_task(iterate())
        # Only a poll sends a fetch: one more says the iteration's poll runs.
        await eventually(lambda: len(cluster.fetches) > fetches, "the iteration polls")
        c.wakeup()
        assert await asyncio.wait_for(iterating, 1) == []


@pytest.mark.asyncio
async def test_poll_on_a_dead_cluster_returns_within_its_timeout(
    cluster: FakeCluster, caplog: pytest.LogCaptureFixture
) -> None:
    cluster.create("t")
    cluster.down.update({0, 1, 2})
    # The request timeouts far beyond the bound: a poll that waited one out fails it, and one
    # that kept its own timeout has 2 s to spare on a loaded machine.
    async with consumer(
        cluster, group_id="g", request_timeout_ms=30_000, default_api_timeout_ms=60_000
    ) as c:
        c.assign([T0])
        for timeout_ms in (0, 300):
            started = time.monotonic()
            assert await c.poll(timeout_ms) == {}
            assert time.monotonic() - started < timeout_ms / 1000 + 2
        assert "unreachable" in caplog.text or "no broker reachable" in caplog.text


@pytest.mark.asyncio
async def test_a_poll_loop_with_zero_timeouts_still_makes_progress(cluster: FakeCluster) -> None:
    cluster.create("t")
    cluster.append("t", 0, [b"0"])
    async with consumer(cluster, group_id="g") as c:
        c.assign([T0])
        got: list[ConsumerRecord] = []
        deadline = time.monotonic() + 5
        while not got:
            assert time.monotonic() < deadline
            for records in (await c.poll(0)).values():
                got.extend(records)
            await asyncio.sleep(0.005)
        assert values(got) == [b"0"]


@pytest.mark.asyncio
async def test_misuse_raises_typed_errors(cluster: FakeCluster) -> None:
    c = consumer(cluster)
    with pytest.raises(IllegalStateError, match="neither subscribed"):
        await c.poll(0)
    with pytest.raises(ValueError, match="max_records"):
        c.assign([T0])
        await c.poll(0, max_records=0)
    await c.close()
    await c.close()  # idempotent
    with pytest.raises(ClientClosedError, match="poll: the consumer is closed"):
        await c.poll(0)
    with pytest.raises(ClientClosedError):
        c.assign([T0])
    with pytest.raises(ClientClosedError):
        await c.position(T0)


@pytest.mark.asyncio
async def test_kafka_pythons_topic_lookups(cluster: FakeCluster) -> None:
    """`partitions_for_topic` and `topics()`, as kafka-python's consumer has them (found
    missing by a user review: docs/client.md promises kafka-python's method names)."""
    cluster.create("t", 2)
    cluster.create("u", 1)
    async with consumer(cluster) as c:
        assert await c.partitions_for_topic("t") == {0, 1}
        # Every topic, not only those the consumer has asked about.
        assert await c.topics() == {"t", "u"}
        with pytest.raises(UnknownTopicOrPartitionError, match="'nope'"):
            await c.partitions_for_topic("nope", timeout_ms=500)


@pytest.mark.asyncio
async def test_a_partition_whose_fetch_brought_records_is_asked_after_the_others(
    cluster: FakeCluster,
) -> None:
    """Kafka's movePartitionToEnd: a broker spends fetch.max.bytes on the partitions in the
    order asked, so with a fixed order t-0, while it had data, took every answer."""
    for partition in cluster.create("t", 3):
        partition.leader = 0  # one broker leads all three: one fetch asks for them all
    cluster.append("t", 0, [b"a"])
    async with consumer(cluster, fetch_max_wait_ms=50) as c:
        c.assign([T0, T1, TopicPartition("t", 2)])
        assert values(await poll_until(c, 1)) == [b"a"]
        cluster.append("t", 1, [b"x"])
        assert values(await poll_until(c, 1)) == [b"x"]
        cluster.append("t", 0, [b"b"])
        assert values(await poll_until(c, 1)) == [b"b"]
    asked = [tuple(p for _, p, _ in fetch) for _, fetch in cluster.fetches if len(fetch) == 3]
    assert asked[0] == (0, 1, 2)
    assert (1, 2, 0) in asked and (2, 0, 1) in asked
    assert asked.index((1, 2, 0)) < asked.index((2, 0, 1))


def test_a_consumer_is_bound_to_the_event_loop_it_was_first_used_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Used from a second asyncio.run, poll and position are refused clearly, not failing deep
    # inside asyncio ("bound to a different event loop", "Event loop is closed").
    fake = FakeCluster()
    fake.install(monkeypatch)
    fake.create("t", 1)
    fake.append("t", 0, [b"a"])
    c = consumer(fake)
    c.assign([T0])  # no running loop: binds nothing

    async def first() -> list[bytes | None]:
        return values(await poll_until(c, 1))

    assert asyncio.run(first()) == [b"a"]

    async def elsewhere() -> None:
        with pytest.raises(IllegalStateError, match="asyncio Consumer runs on the event loop"):
            await c.poll(0)
        with pytest.raises(IllegalStateError, match="create one per event loop"):
            await c.position(T0)
        c.seek(T0, 0)  # a setter on another loop would start a commit there: refused too

    with pytest.raises(IllegalStateError):
        asyncio.run(elsewhere())
    asyncio.run(c.close())  # its loop ended: nothing of it can run, close just ends
    with pytest.raises(ClientClosedError):
        asyncio.run(first())


@pytest.mark.asyncio
async def test_a_fetch_task_that_dies_fails_the_waiting_poll_with_its_cause(
    cluster: FakeCluster, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # The fetches run in the consumer's TaskGroup: one that dies (a bug) fails the consumer,
    # logged once, instead of being retried after a backoff with the cause lost in the log.
    cluster.create("t")
    cluster.append("t", 0, [b"a"])
    blocked = asyncio.Event()

    async def broken(self: Any, request: Any, *, resend: Any = ()) -> Any:
        await blocked.wait()  # the poll waits for it, then it dies
        raise RuntimeError("a bug in fetch")

    monkeypatch.setattr(consumer_fakes.FakeFetchStream, "fetch", broken)
    async with consumer(cluster) as c:
        c.assign([T0])
        poll = asyncio.create_task(c.poll(30_000))
        await poll_until_fetching(cluster)
        blocked.set()
        crash = CRASH + r"\(RuntimeError: a bug in"
        with pytest.raises(IllegalStateError, match=r"^poll: " + crash) as raised:
            await asyncio.wait_for(poll, 5)
        assert isinstance(raised.value.__cause__, RuntimeError)
        with pytest.raises(IllegalStateError, match=r"^poll: " + crash):
            await c.poll(0)
    logged = [r for r in caplog.records if r.exc_info and "a bug in" in str(r.exc_info[1])]
    assert [r.getMessage() for r in logged] == [
        "the consumer's background tasks stopped on an unexpected error"
    ]


@pytest.mark.asyncio
async def test_an_auto_commit_that_dies_fails_the_consumer_with_its_cause(
    cluster: FakeCluster, caplog: pytest.LogCaptureFixture
) -> None:
    # Auto-commits run in the consumer's TaskGroup: a commit that dies on a bug (here the
    # fake coordinator raises one) fails the consumer, logged once, instead of a warning
    # per interval while positions are never committed.
    cluster.create("t")
    cluster.append("t", 0, [b"a"])
    clock = ManualClock()
    async with consumer(cluster, group_id="g", auto_commit_interval_ms=1_000, clock=clock) as c:
        c.assign([T0])
        await poll_until(c, 1)
        cluster.commit_errors.append(RuntimeError("a bug in OffsetCommit"))
        clock.advance(1_000)  # the interval is over: the next poll commits
        crash = r"^poll: " + CRASH + r"\(RuntimeError: a bug in OffsetCommit\)$"
        with pytest.raises(IllegalStateError, match=crash) as raised:
            await asyncio.wait_for(c.poll(30_000), 5)
        assert isinstance(raised.value.__cause__, RuntimeError)
        with pytest.raises(IllegalStateError, match=r"^position: " + CRASH):
            await c.position(T0)
    logged = [r for r in caplog.records if r.exc_info and "a bug in" in str(r.exc_info[1])]
    assert [r.getMessage() for r in logged] == [
        "the consumer's background tasks stopped on an unexpected error"
    ]


@pytest.mark.asyncio
async def test_close_leaves_no_task_of_the_consumer_running(cluster: FakeCluster) -> None:
    """Every task the consumer started (fetches, the prepare step, auto-commit, membership,
    asynchronous commits) has ended when close returns."""
    cluster.create("t", 2)
    cluster.append("t", 0, [b"a"])
    before = asyncio.all_tasks()
    c = consumer(cluster, "t", group_id="g", auto_commit_interval_ms=0)
    await poll_until(c, 1)
    c.commit_async()
    await c.poll(10)  # another auto-commit, fetches in flight
    await c.close()
    assert asyncio.all_tasks() - before == set()


async def poll_until_fetching(cluster: FakeCluster) -> None:
    """Until a FetchStream is open (the consumer knows the leader and the position)."""
    deadline = time.monotonic() + 5
    while not cluster.streams:
        assert time.monotonic() < deadline, "no fetch started"
        await asyncio.sleep(0.001)
