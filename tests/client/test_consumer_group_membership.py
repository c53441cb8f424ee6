"""replog's consumers in a group (`group_membership`) against the in-process fake cluster, whose
coordinator runs the real group coordinator core: members split partitions, the listener's
callbacks run in poll around the assignment changes, cooperative rebalancing keeps reading,
max.poll.interval.ms, commits fenced by generation, and the blocking consumer's callbacks
calling its blocking methods."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio
from consumer_fakes import FakeCluster, FakePartition, consumer_settings

from replog.client.consumer import Consumer
from replog.client.records import TopicPartition
from replog.client.sync_consumer import Consumer as BlockingConsumer
from replog.errors import CommitFailedError, InvalidGroupIdError

GROUP = {"group_id": "g", "session_timeout_ms": 1_000, "heartbeat_interval_ms": 100}


@pytest_asyncio.fixture
async def cluster(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeCluster]:
    fake = FakeCluster()
    fake.install(monkeypatch)
    yield fake
    fake.groups.close()


class Recorder:
    """A rebalance listener that writes down each callback."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []

    def _note(self, kind: str, partitions: set[TopicPartition]) -> None:
        self.calls.append((kind, sorted(f"{p.topic}-{p.partition}" for p in partitions)))

    def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:
        self._note("revoked", partitions)

    def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
        self._note("assigned", partitions)

    def on_partitions_lost(self, partitions: set[TopicPartition]) -> None:
        self._note("lost", partitions)


def member(cluster: FakeCluster, **overrides: Any) -> Consumer:
    return Consumer(**consumer_settings(cluster, **{**GROUP, **overrides}))


async def poll_all(consumers: list[Consumer], until: Any, timeout_s: float = 10.0) -> None:
    """Poll every consumer in turn until `until()` holds."""
    deadline = time.monotonic() + timeout_s
    while not until():
        assert time.monotonic() < deadline, [sorted(c.assignment()) for c in consumers]
        for c in consumers:
            await c.poll(20)


def split(consumers: list[Consumer], partitions: int) -> bool:
    owned = [c.assignment() for c in consumers]
    every = [tp for mine in owned for tp in mine]
    sizes = sorted(len(mine) for mine in owned)
    return len(every) == partitions == len(set(every)) and sizes[-1] - sizes[0] <= 1


@pytest.mark.asyncio
@pytest.mark.parametrize("strategy", ["range", "sticky", "cooperative-sticky"])
async def test_members_split_the_partitions_and_take_over_from_one_that_closes(
    cluster: FakeCluster, strategy: str
) -> None:
    cluster.create("t", 4)
    for p in range(4):
        cluster.append("t", p, [f"{p}".encode()])
    a, b = (member(cluster, partition_assignment_strategy=strategy) for _ in range(2))
    listener = Recorder()
    a.subscribe(["t"], listener=listener)
    b.subscribe(["t"])
    got: list[bytes] = []
    deadline = time.monotonic() + 10
    while not split([a, b], 4) or len(got) < 4:
        assert time.monotonic() < deadline
        for c in (a, b):
            for records in (await c.poll(20)).values():
                got.extend(r.value or b"" for r in records)
    assert sorted(got) == [b"0", b"1", b"2", b"3"]  # each record read once between the two
    await b.close()  # leaves the group: a gets everything back
    await poll_all([a], lambda: len(a.assignment()) == 4)
    assert listener.calls[-1][0] == "assigned"
    if strategy != "cooperative-sticky":  # eager
        assert [kind for kind, _ in listener.calls].count("revoked") >= 1
    await a.close()
    assert listener.calls[-1] == ("revoked", ["t-0", "t-1", "t-2", "t-3"])  # close revokes
    assert "LeaveGroup" in cluster.groups.calls


@pytest.mark.asyncio
async def test_the_leader_rebalances_when_a_topic_only_another_member_reads_grows(
    cluster: FakeCluster,
) -> None:
    """Kafka's leader watches every member's topics: u, read only by b, gains partitions and
    the leader a, which reads only t, sees it in its metadata and rebalances."""
    cluster.create("t", 2)
    cluster.create("u", 2)
    a, b = (member(cluster, metadata_max_age_ms=100) for _ in range(2))
    a.subscribe(["t"])
    await poll_all([a], lambda: len(a.assignment()) == 2)
    b.subscribe(["u"])
    await poll_all([a, b], lambda: len(b.assignment()) == 2)
    cluster.topics["u"] += [FakePartition(leader=0), FakePartition(leader=1)]
    await poll_all([a, b], lambda: len(b.assignment()) == 4)
    assert sorted(tp.partition for tp in b.assignment()) == [0, 1, 2, 3]
    await a.close()
    await b.close()


@pytest.mark.asyncio
async def test_a_listener_may_be_a_coroutine_and_seek_in_assigned(cluster: FakeCluster) -> None:
    cluster.create("t", 1)
    cluster.append("t", 0, [b"a", b"b", b"c"])
    c = member(cluster)
    T0 = TopicPartition("t", 0)

    class Seeker:
        async def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:
            pass

        async def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
            await asyncio.sleep(0)
            c.seek(T0, 2)

    c.subscribe(["t"], listener=Seeker())
    deadline = time.monotonic() + 5
    records: list[bytes] = []
    while not records:
        assert time.monotonic() < deadline
        records = [r.value or b"" for rs in (await c.poll(50)).values() for r in rs]
    assert records == [b"c"]
    await c.close()


@pytest.mark.asyncio
async def test_a_member_that_does_not_poll_leaves_and_its_commit_is_refused(
    cluster: FakeCluster,
) -> None:
    cluster.create("t", 2)
    a = member(cluster, max_poll_interval_ms=300, enable_auto_commit=False)
    b = member(cluster, max_poll_interval_ms=30_000)
    listener = Recorder()
    a.subscribe(["t"], listener=listener)
    b.subscribe(["t"])
    await poll_all([a, b], lambda: split([a, b], 2))
    # a does not poll: past max.poll.interval.ms it leaves, and b gets both partitions
    await poll_all([b], lambda: len(b.assignment()) == 2)
    with pytest.raises(CommitFailedError, match="membership was lost"):
        await a.commit({TopicPartition("t", 0): 1})
    await poll_all([a, b], lambda: split([a, b], 2))  # a polls again: rejoins
    kinds = [kind for kind, _ in listener.calls]
    assert "lost" in kinds and kinds[-1] == "assigned"
    await a.close()
    await b.close()


@pytest.mark.asyncio
async def test_a_heartbeat_unanswered_for_a_session_looks_the_coordinator_up_again(
    cluster: FakeCluster,
) -> None:
    """Its coordinator stopped (SIGSTOP) while a request timeout far longer than the session:
    the coordinator removes the member after its session, and the member, which would read
    on beside the partitions' next owner until the request timeout, gives the heartbeat up
    after its session instead, asks for the coordinator again, and learns it is out: its
    partitions are lost, and it joins again (Kafka's heartbeat thread marks the coordinator
    unknown the same way)."""
    cluster.create("t", 2)
    a = member(cluster, request_timeout_ms=60_000, retry_backoff_ms=50)
    listener = Recorder()
    a.subscribe(["t"], listener=listener)
    await poll_all([a], lambda: len(a.assignment()) == 2)
    cluster.heartbeats_hang = True
    await poll_all([a], lambda: "Heartbeat unanswered" in cluster.calls)
    cluster.heartbeats_hang = False  # the next heartbeats are answered: a coordinator again
    finds = cluster.calls.count("FindCoordinator")
    await poll_all([a], lambda: ("lost", ["t-0", "t-1"]) in listener.calls, timeout_s=5)
    assert cluster.calls.count("FindCoordinator") > finds
    await poll_all([a], lambda: len(a.assignment()) == 2)  # joined again
    await a.close()


@pytest.mark.asyncio
async def test_a_listener_needs_a_group_and_the_listener_shape(cluster: FakeCluster) -> None:
    async with Consumer(**consumer_settings(cluster)) as plain:
        with pytest.raises(InvalidGroupIdError, match=r"group\.id"):
            plain.subscribe(["t"], listener=Recorder())
    async with member(cluster) as c:
        with pytest.raises(TypeError, match="on_partitions_revoked"):
            c.subscribe(["t"], listener=object())


@pytest.fixture
def sync_cluster(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeCluster]:
    fake = FakeCluster()
    fake.install(monkeypatch)
    yield fake


def test_blocking_callbacks_run_in_the_polling_thread_and_may_commit(
    sync_cluster: FakeCluster,
) -> None:
    import threading

    cluster = sync_cluster
    cluster.create("t", 1)
    cluster.append("t", 0, [b"a", b"b"])
    T0 = TopicPartition("t", 0)
    threads: list[str] = []
    consumer = BlockingConsumer(
        **consumer_settings(cluster, **{**GROUP, "enable_auto_commit": False})
    )

    class CommitOnRevoke:
        def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
            threads.append(threading.current_thread().name)

        def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:
            threads.append(threading.current_thread().name)
            consumer.commit()  # a blocking call from the callback

    with consumer:
        consumer.subscribe(["t"], listener=CommitOnRevoke())
        got: list[bytes] = []
        deadline = time.monotonic() + 5
        while len(got) < 2:
            assert time.monotonic() < deadline
            got.extend(r.value or b"" for rs in consumer.poll(100).values() for r in rs)
    assert threads == [threading.current_thread().name] * 2
    assert cluster.committed[("g", T0)].offset == 2  # committed from on_partitions_revoked


@pytest.mark.asyncio
async def test_the_leader_assigns_topics_only_other_members_subscribe_to(
    cluster: FakeCluster,
) -> None:
    cluster.create("t", 2)
    cluster.create("u", 3)
    a, b = member(cluster), member(cluster)
    a.subscribe(["t"])
    await poll_all([a], lambda: len(a.assignment()) == 2)  # a leads
    b.subscribe(["u"])
    await poll_all([a, b], lambda: len(b.assignment()) == 3 and len(a.assignment()) == 2)
    assert {tp.topic for tp in b.assignment()} == {"u"}
    await a.close()
    await b.close()


@pytest.mark.asyncio
async def test_unsubscribe_leaves_and_assign_then_reads_without_the_group(
    cluster: FakeCluster,
) -> None:
    cluster.create("t", 2)
    cluster.append("t", 1, [b"x"])
    a, b = member(cluster), member(cluster)
    listener = Recorder()
    a.subscribe(["t"], listener=listener)
    b.subscribe(["t"])
    await poll_all([a, b], lambda: split([a, b], 2))
    a.unsubscribe()
    assert a.assignment() == set()
    await poll_all([b], lambda: len(b.assignment()) == 2)  # a left: b has everything
    assert listener.calls[-1][0] == "revoked"
    a.assign([TopicPartition("t", 1)])  # no group: reads what it is given
    a.seek(TopicPartition("t", 1), 0)  # (its revoke committed what it had read)
    records = []
    deadline = time.monotonic() + 5
    while not records:
        assert time.monotonic() < deadline
        records = [r.value for rs in (await a.poll(50)).values() for r in rs]
    assert records == [b"x"] and len(b.assignment()) == 2
    await a.close()
    await b.close()


@pytest.mark.asyncio
async def test_a_pattern_subscription_follows_the_topics_it_matches(cluster: FakeCluster) -> None:
    """Kafka's subscribe(Pattern) with the classic protocol: the consumer matches the pattern
    against the cluster's topics, again at each metadata refresh, and rejoins when they change."""
    cluster.create("orders-eu", 2)
    cluster.create("audit", 1)
    a, b = member(cluster, metadata_max_age_ms=100), member(cluster, metadata_max_age_ms=100)
    a.subscribe(pattern=r"orders-.*")
    b.subscribe(pattern=r"orders-.*")
    await poll_all([a, b], lambda: split([a, b], 2))
    assert a.subscription() == {"orders-eu"}
    cluster.create("orders-us", 2)  # seen at the next refresh: both rejoin, four partitions
    await poll_all([a, b], lambda: split([a, b], 4))
    assert {tp.topic for c in (a, b) for tp in c.assignment()} == {"orders-eu", "orders-us"}
    with pytest.raises(ValueError, match="not both"):
        a.subscribe(["audit"], pattern="a.*")
    await a.close()
    await b.close()
