"""replog's consumers with `group.protocol=consumer` (KIP-848) against the in-process fake
cluster, whose coordinator runs the real consumer-group core: members split the partitions,
the listener's callbacks run in poll (revoke, with a commit, before the partitions move), a
closing member leaves with epoch -1, a commit with a stale epoch is refused, the blocking
consumer, and the settings the consumer protocol refuses."""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio
from consumer_fakes import FakeCluster, consumer_settings, poll_until
from test_consumer_group_membership import Recorder, poll_all, split

from replog.client.consumer import Consumer
from replog.client.records import OffsetAndMetadata, TopicPartition
from replog.client.sync_consumer import Consumer as BlockingConsumer
from replog.errors import CommitFailedError, ConfigError

GROUP = {"group_id": "g", "group_protocol": "consumer"}


@pytest_asyncio.fixture
async def cluster(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeCluster]:
    fake = FakeCluster(topic_ids=True)
    fake.install(monkeypatch)
    yield fake
    fake.groups.close()


def member(cluster: FakeCluster, **overrides: Any) -> Consumer:
    return Consumer(**consumer_settings(cluster, **{**GROUP, **overrides}))


@pytest.mark.asyncio
async def test_members_split_revoking_with_a_commit_first_and_take_over_on_close(
    cluster: FakeCluster,
) -> None:
    cluster.create("t", 4)
    for p in range(4):
        cluster.append("t", p, [f"{p}".encode()])
    a = member(cluster, enable_auto_commit=False)
    b = member(cluster)
    commits: list[str] = []

    class CommitOnRevoke(Recorder):
        async def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:  # type: ignore[override]
            self._note("revoked", partitions)
            await a.commit()  # within the member's epoch: the coordinator accepts it
            commits.append("ok")

    listener = CommitOnRevoke()
    a.subscribe(["t"], listener=listener)
    got: list[bytes] = []
    deadline = time.monotonic() + 5
    while len(got) < 4:
        assert time.monotonic() < deadline
        got.extend(r.value or b"" for rs in (await a.poll(50)).values() for r in rs)
    b.subscribe(["t"])
    await poll_all([a, b], lambda: split([a, b], 4))
    assert [kind for kind, _ in listener.calls if _ or kind == "revoked"] == [
        "assigned",
        "revoked",
    ]
    assert commits == ["ok"]
    (revoked_parts,) = [parts for kind, parts in listener.calls if kind == "revoked"]
    for name in revoked_parts:
        tp = TopicPartition("t", int(name.split("-")[1]))
        assert cluster.committed[("g", tp)].offset == 1  # committed before the move
        assert tp in b.assignment()
    await b.close()  # leaves with epoch -1: a gets everything back
    assert "ConsumerGroupHeartbeat(-1)" in cluster.groups.calls
    await poll_all([a], lambda: len(a.assignment()) == 4)
    await a.close()
    assert listener.calls[-1] == ("revoked", ["t-0", "t-1", "t-2", "t-3"])
    assert not [c for c in cluster.groups.calls if not c.startswith("ConsumerGroupHeartbeat")]


@pytest.mark.asyncio
async def test_a_pattern_subscription_sends_the_regex_to_the_coordinator(
    cluster: FakeCluster,
) -> None:
    """KIP-848's broker-side regex: the coordinator matches the pattern (a topic it sees
    first is assigned by id, and the consumer refreshes its metadata to name it); going back
    to topic names clears the regex."""
    cluster.create("orders-eu", 2)
    cluster.create("audit", 1)
    a = member(cluster)  # metadata.max.age.ms stays 5 minutes: only the ids make it look
    a.subscribe(pattern=r"orders-.*")
    await poll_all([a], lambda: len(a.assignment()) == 2)
    (held,) = cluster.groups.consumer.groups["g"].members.values()
    assert (held.subscribed_topic_regex, held.subscribed_topic_names) == (r"orders-.*", ())
    cluster.create("orders-us", 1)
    await poll_all([a], lambda: TopicPartition("orders-us", 0) in a.assignment())
    assert a.subscription() == {"orders-eu", "orders-us"}
    a.subscribe(["audit"])
    await poll_all([a], lambda: a.assignment() == {TopicPartition("audit", 0)})
    (held,) = cluster.groups.consumer.groups["g"].members.values()
    assert (held.subscribed_topic_regex, held.subscribed_topic_names) == (None, ("audit",))
    with pytest.raises(ValueError, match="write them inline"):
        a.subscribe(pattern=re.compile("orders", re.IGNORECASE))
    await a.close()


@pytest.mark.asyncio
async def test_a_commit_with_a_stale_member_epoch_is_refused(cluster: FakeCluster) -> None:
    cluster.create("t", 2)
    a = member(cluster, enable_auto_commit=False)
    a.subscribe(["t"])
    await poll_all([a], lambda: len(a.assignment()) == 2)
    group = a._group
    assert group is not None
    real = group.identity
    group.identity = lambda: (real()[0] - 1, *real()[1:])
    with pytest.raises(CommitFailedError, match="epoch"):
        await a.commit({TopicPartition("t", 0): 1})
    group.identity = real
    await a.commit({TopicPartition("t", 0): 1})
    await a.close()


@pytest.mark.asyncio
async def test_a_partition_assigned_while_committed_offsets_are_fetched_starts_at_its_own(
    cluster: FakeCluster,
) -> None:
    """A member asks the committed offset of its first partition; while that answer is on its
    way, the other member leaves and its partition is assigned too. That partition reads from
    the group's committed offset (asked in turn), never from auto.offset.reset: records read
    and committed before are not read again."""
    cluster.create("t", 2)
    for p in range(2):
        cluster.append("t", p, [b"old"] * 10)
        cluster.committed[("g", TopicPartition("t", p))] = OffsetAndMetadata(10)
    b = member(cluster, enable_auto_commit=False)
    b.subscribe(["t"])
    await poll_all([b], lambda: len(b.assignment()) == 2 and b._subscriptions.has_all_positions())
    a = member(cluster, enable_auto_commit=False)
    a.subscribe(["t"])
    cluster.offset_fetch_gate = gate = asyncio.Event()
    await poll_all([a, b], lambda: split([a, b], 2) and len(cluster.offset_fetches) == 2)
    (first,) = a.assignment()
    assert cluster.offset_fetches[-1] == (first,)  # a's, held back
    await b.close()
    await poll_all([a], lambda: len(a.assignment()) == 2)
    gate.set()
    for p in range(2):
        cluster.append("t", p, [b"new"])
    got = await poll_until(a, 2)
    for _ in range(3):
        got.extend(r for rs in (await a.poll(20)).values() for r in rs)
    assert sorted((r.partition, r.offset) for r in got) == [(0, 10), (1, 10)]
    assert len(cluster.offset_fetches) == 3  # the second partition's committed offset, asked
    await a.close()


@pytest.fixture
def sync_cluster(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeCluster]:
    fake = FakeCluster(topic_ids=True)
    fake.install(monkeypatch)
    yield fake


def test_the_blocking_consumer_joins_and_runs_callbacks_in_the_polling_thread(
    sync_cluster: FakeCluster,
) -> None:
    sync_cluster.create("t", 2)
    sync_cluster.append("t", 0, [b"a"])
    threads: list[str] = []

    class Listener:
        def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
            threads.append(threading.current_thread().name)

        def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:
            threads.append(threading.current_thread().name)

    with BlockingConsumer(**consumer_settings(sync_cluster, **GROUP)) as consumer:
        consumer.subscribe(["t"], listener=Listener())
        deadline = time.monotonic() + 5
        got: list[bytes] = []
        while not got:
            assert time.monotonic() < deadline
            got.extend(r.value or b"" for rs in consumer.poll(100).values() for r in rs)
        assert consumer.assignment() == {TopicPartition("t", 0), TopicPartition("t", 1)}
    assert threads == [threading.current_thread().name] * 2  # assigned, then revoked on close


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"group_protocol": "consumer", "session_timeout_ms": 10_000}, "session.timeout.ms"),
        ({"group_protocol": "consumer", "heartbeat_interval_ms": 1_000}, "heartbeat.interval"),
        (
            {"group_protocol": "consumer", "partition_assignment_strategy": "range"},
            "partition.assignment.strategy",
        ),
        ({"group_remote_assignor": "range"}, "only with group.protocol=consumer"),
        ({"group_protocol": "eager"}, "classic, consumer"),
    ],
)
def test_settings_the_protocol_does_not_take_are_refused(
    settings: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        Consumer(bootstrap_servers="127.0.0.1:1", group_id="g", **settings)
