"""The consumer's fetch sessions (KIP-227, `replication.fetch_session`) against the fake cluster,
whose FetchStream runs the real session pair (tests/client/consumer_fakes.py).

Covered: after a stream's first (full) fetch, requests carry only the partitions whose entry changed
and name the ones left out; a paused partition is forgotten (no longer served) and added back on
resume; a failed fetch starts the next one afresh (as the fake emulates the client's stream;
tests/server/data_plane/test_broker_cores.py covers the real one); the high watermark stays known:
one that arrives with records the consumer discards (a seek in between) is kept, one the session
reported with an error comes again after an out-of-range reset, and a re-assigned partition whose
entry the session already holds is asked for it again."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable

import pytest
import pytest_asyncio
from consumer_fakes import FakeCluster, consumer_settings, poll_until

from replog.client.consumer import Consumer
from replog.client.records import TopicPartition
from replog.replication import messages as m

PARTITIONS = 6


@pytest_asyncio.fixture
async def cluster(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeCluster]:
    fake = FakeCluster()
    fake.install(monkeypatch)
    fake.create("t", PARTITIONS)
    for p in range(PARTITIONS):  # one leader: one stream, one session
        fake.partition("t", p).leader = 0
    yield fake


def tp(partition: int) -> TopicPartition:
    return TopicPartition("t", partition)


def keys(entries: tuple[m.FetchPartition, ...]) -> set[int]:
    return {entry.partition for entry in entries}


async def polling_until(c: Consumer, condition: Callable[[], bool], timeout_s: float = 5.0) -> None:
    """Poll (the consumer fetches as it polls) until `condition` holds; no records expected."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        assert await c.poll(10) == {}


@pytest.mark.asyncio
async def test_after_the_first_fetch_only_changed_partitions_travel(cluster: FakeCluster) -> None:
    cluster.append("t", 2, [b"a", b"b"])
    async with Consumer(**consumer_settings(cluster)) as c:
        c.assign([tp(p) for p in range(PARTITIONS)])
        assert [r.value for r in await poll_until(c, 2)] == [b"a", b"b"]
        await c.poll(200)  # idle fetches
        cluster.append("t", 2, [b"c"])
        assert [r.value for r in await poll_until(c, 1)] == [b"c"]
        await c.poll(200)
    first, *later = cluster.wire_fetches
    assert first.session_epoch == 0 and keys(first.partitions) == set(range(PARTITIONS))
    assert later, "no fetch after the first"
    assert [w.session_epoch for w in later] == list(range(1, len(later) + 1))
    # Only partition 2 ever moved: it alone is sent again (new position) or left out
    # (its records buffered); the five idle ones never travel again.
    assert all(keys(w.partitions) <= {2} for w in later)
    assert all({p for _, p in w.forgotten} <= {2} for w in later)
    assert any(keys(w.partitions) == {2} for w in later)
    assert any(not w.partitions and not w.forgotten for w in later)  # an idle round: empty
    # The broker still served every partition each round.
    assert all(len(served) in (PARTITIONS - 1, PARTITIONS) for _, served in cluster.fetches)


@pytest.mark.asyncio
async def test_a_paused_partition_is_forgotten_and_added_back_on_resume(
    cluster: FakeCluster,
) -> None:
    async with Consumer(**consumer_settings(cluster)) as c:
        c.assign([tp(p) for p in range(PARTITIONS)])
        await c.poll(100)
        c.pause(tp(4))
        await polling_until(c, lambda: any(("t", 4) in w.forgotten for w in cluster.wire_fetches))
        served_from = len(cluster.fetches)
        cluster.append("t", 4, [b"held"])
        assert await c.poll(200) == {}
        # Forgotten: the broker no longer serves it to this consumer.
        assert all(
            4 not in {p for _, p, _ in served} for _, served in cluster.fetches[served_from:]
        )
        resumed_from = len(cluster.wire_fetches)
        c.resume(tp(4))
        assert [r.value for r in await poll_until(c, 1)] == [b"held"]
    back = cluster.wire_fetches[resumed_from:]
    assert any(4 in keys(w.partitions) for w in back)
    assert all(w.session_epoch > 0 for w in back)  # the same session throughout


@pytest.mark.asyncio
async def test_a_failed_fetch_starts_the_next_session_with_a_full_fetch(
    cluster: FakeCluster,
) -> None:
    async with Consumer(**consumer_settings(cluster)) as c:
        c.assign([tp(p) for p in range(PARTITIONS)])
        await c.poll(100)
        failed_at = len(cluster.wire_fetches)
        cluster.down.add(0)
        await polling_until(c, lambda: len(cluster.wire_fetches) > failed_at)
        cluster.down.clear()
        cluster.append("t", 1, [b"after"])
        assert [r.value for r in await poll_until(c, 1)] == [b"after"]
    again = cluster.wire_fetches[failed_at + 1 :]
    restart = next(w for w in again if w.session_epoch == 0)
    assert keys(restart.partitions) == set(range(PARTITIONS))


@pytest.mark.asyncio
async def test_a_high_watermark_that_came_with_discarded_records_is_kept(
    cluster: FakeCluster,
) -> None:
    settings = consumer_settings(cluster, fetch_max_wait_ms=3_000, request_timeout_ms=6_000)
    async with Consumer(**settings) as c:
        c.assign([tp(0)])
        await c.poll(50)  # the fetch at offset 0 now waits in the fake's long poll
        await polling_until(c, lambda: bool(cluster.fetches))
        c.seek(tp(0), 3)  # while that fetch is out
        cluster.append("t", 0, [b"x", b"y", b"z"])  # its answer: records 0-2, HW 3: stale
        await polling_until(c, lambda: len(cluster.fetches) >= 2)  # the next fetch, from offset 3
        assert await c.poll(100) == {}
        # The session reports a high watermark once; offset 3 brings no news to repeat it.
        assert c.highwater(tp(0)) == 3
        assert await c.position(tp(0)) == 3


@pytest.mark.asyncio
async def test_after_an_out_of_range_reset_the_high_watermark_is_known(
    cluster: FakeCluster,
) -> None:
    # The session's first answer for the partition is the OFFSET_OUT_OF_RANGE error; the
    # consumer resets to the end, and learns the high watermark with no new record.
    cluster.append("t", 0, [b"a", b"b", b"c"])
    async with Consumer(**consumer_settings(cluster, auto_offset_reset="latest")) as c:
        c.assign([tp(0)])
        c.seek(tp(0), 100)
        await polling_until(c, lambda: c.highwater(tp(0)) is not None)
        assert c.highwater(tp(0)) == 3
        assert await c.position(tp(0)) == 3


@pytest.mark.asyncio
async def test_a_reassigned_partition_learns_its_high_watermark_again(
    cluster: FakeCluster,
) -> None:
    # Re-assigned at the position the leader's session already holds: the unchanged entry is
    # sent again, since the consumer's new state of the partition knows no high watermark.
    cluster.append("t", 1, [b"x", b"y"])
    async with Consumer(**consumer_settings(cluster)) as c:
        c.assign([tp(0), tp(1)])
        assert [r.value for r in await poll_until(c, 2)] == [b"x", b"y"]
        await c.poll(100)  # the session's entry for t-1 is now at offset 2
        c.assign([tp(0)])
        c.assign([tp(0), tp(1)])
        c.seek(tp(1), 2)
        assert c.highwater(tp(1)) is None
        await polling_until(c, lambda: c.highwater(tp(1)) is not None)
        assert c.highwater(tp(1)) == 2
