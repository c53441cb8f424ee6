"""Committing and fetching a group's offsets through its coordinator, with retries."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable

import pytest
import pytest_asyncio
from consumer_fakes import FakeCluster, consumer_settings

from replog.client.consumer import Consumer
from replog.client.group_offsets import RECOMMIT_UNCHANGED_MS, AutoCommitter, GroupOffsets
from replog.client.records import OffsetAndMetadata, TopicPartition
from replog.client.task_owner import TaskOwner
from replog.clock import monotonic_ms
from replog.coordinator import messages as cm
from replog.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    InvalidGroupIdError,
    KafkaTimeoutError,
    NotCoordinatorError,
    OffsetMetadataTooLargeError,
    UnknownTopicOrPartitionError,
)
from replog.testing import ManualClock

A = TopicPartition("a", 0)
B = TopicPartition("b", 1)


def offsets_of(
    cluster: FakeCluster, clock: Callable[[], int] = monotonic_ms, **overrides: int
) -> GroupOffsets:
    connections = cluster.connections()
    settings = {
        "request_timeout_ms": 1_000,
        "retry_backoff_ms": 5,
        "retry_backoff_max_ms": 20,
        **overrides,
    }
    return GroupOffsets(
        "g",
        coordinator_for=connections.coordinator,
        brokers=lambda: [cluster.address(n) for n in range(cluster.nodes)],
        clock=clock,
        **settings,
    )


def soon(ms: int = 5_000) -> int:
    return monotonic_ms() + ms


@pytest_asyncio.fixture
async def tasks() -> AsyncIterator[TaskOwner]:
    """The TaskGroup a consumer hands its AutoCommitter, for a test of the committer alone."""
    owner = TaskOwner("the test consumer", lambda _: None, logging.getLogger("tests"))
    await owner.open()
    yield owner
    await owner.close()


@pytest.mark.asyncio
async def test_commit_then_fetch_round_trip() -> None:
    cluster = FakeCluster()
    group = offsets_of(cluster)
    await group.commit({A: OffsetAndMetadata(7, "m", 2)}, deadline_ms=soon())
    assert await group.fetch([A, B], deadline_ms=soon()) == {
        A: OffsetAndMetadata(7, "m", 2),
        B: None,
    }
    assert cluster.calls.count("FindCoordinator") == 1  # remembered


@pytest.mark.asyncio
async def test_not_coordinator_finds_the_coordinator_again() -> None:
    cluster = FakeCluster()
    group = offsets_of(cluster)
    await group.fetch([A], deadline_ms=soon())
    cluster.coordinator_node = 2  # moved: node 0 now answers NOT_COORDINATOR
    await group.commit({A: OffsetAndMetadata(3)}, deadline_ms=soon())
    assert group.coordinator == (2, "node2:9092")
    assert cluster.calls.count("FindCoordinator") == 2
    assert cluster.committed[("g", A)].offset == 3


@pytest.mark.asyncio
async def test_load_in_progress_is_retried_with_the_same_coordinator() -> None:
    cluster = FakeCluster()
    cluster.commit_errors.extend(
        [CoordinatorLoadInProgressError("loading"), CoordinatorLoadInProgressError("loading")]
    )
    group = offsets_of(cluster)
    await group.commit({A: OffsetAndMetadata(1)}, deadline_ms=soon())
    assert cluster.calls.count("FindCoordinator") == 1
    assert cluster.calls.count("OffsetCommit") == 3


@pytest.mark.asyncio
async def test_coordinator_not_available_while_finding_is_retried() -> None:
    cluster = FakeCluster()
    cluster.find_errors.append(CoordinatorNotAvailableError("__consumer_offsets has no leader"))
    group = offsets_of(cluster)
    assert await group.fetch([A], deadline_ms=soon()) == {A: None}
    assert cluster.calls.count("FindCoordinator") == 2


@pytest.mark.asyncio
async def test_an_unreachable_coordinator_is_forgotten_and_found_again() -> None:
    cluster = FakeCluster()
    group = offsets_of(cluster)
    await group.fetch([A], deadline_ms=soon())
    cluster.down.add(0)
    cluster.coordinator_node = 1
    await group.commit({A: OffsetAndMetadata(4)}, deadline_ms=soon())
    assert group.coordinator == (1, "node1:9092")


@pytest.mark.asyncio
async def test_only_partitions_with_retriable_errors_are_retried() -> None:
    cluster = FakeCluster()
    cluster.commit_partition_errors.append({B: UnknownTopicOrPartitionError("b-1: no leader")})
    group = offsets_of(cluster)
    await group.commit({A: OffsetAndMetadata(1), B: OffsetAndMetadata(2)}, deadline_ms=soon())
    assert cluster.commits == [{A: OffsetAndMetadata(1)}, {B: OffsetAndMetadata(2)}]


@pytest.mark.asyncio
async def test_a_non_retriable_partition_error_is_raised_at_once() -> None:
    cluster = FakeCluster()
    cluster.commit_partition_errors.append(
        {A: OffsetMetadataTooLargeError("a-0: metadata of 5000 bytes exceeds 4096")}
    )
    group = offsets_of(cluster)
    with pytest.raises(OffsetMetadataTooLargeError, match="4096"):
        await group.commit({A: OffsetAndMetadata(1, "x" * 5000)}, deadline_ms=soon())
    assert cluster.calls.count("OffsetCommit") == 1


@pytest.mark.asyncio
async def test_invalid_group_id_is_not_retried() -> None:
    cluster = FakeCluster()
    cluster.offset_fetch_errors.append(InvalidGroupIdError("group id '' is invalid"))
    with pytest.raises(InvalidGroupIdError):
        await offsets_of(cluster).fetch([A], deadline_ms=soon())
    with pytest.raises(InvalidGroupIdError, match=r"group\.id"):
        GroupOffsets(
            "",
            coordinator_for=cluster.connections().coordinator,
            brokers=list,
            request_timeout_ms=1,
            retry_backoff_ms=1,
            retry_backoff_max_ms=1,
        )


@pytest.mark.asyncio
async def test_the_deadline_names_operation_group_timeout_and_last_error() -> None:
    """The error names the caller's timeout as given: the clock moving between the caller
    computing its deadline and the commit starting (here 7 ms at every read, a loaded machine's
    worth) must not turn "200 ms" into "193 ms"."""
    cluster = FakeCluster()
    cluster.commit_errors.extend(
        CoordinatorLoadInProgressError("offsets loading") for _ in range(1000)
    )
    clock = ManualClock(tick_ms=7)
    group = offsets_of(cluster, clock=clock)
    deadline = clock() + 200
    with pytest.raises(KafkaTimeoutError) as raised:
        await group.commit({A: OffsetAndMetadata(1)}, deadline_ms=deadline, timeout_ms=200)
    assert clock.now_ms >= deadline and cluster.calls.count("OffsetCommit") >= 2
    text = str(raised.value)
    assert "commit of offsets for a-0 in group 'g' did not finish within 200 ms" in text
    assert "offsets loading" in text
    cluster.offset_fetch_errors.extend(
        CoordinatorLoadInProgressError("offsets loading") for _ in range(1000)
    )
    with pytest.raises(KafkaTimeoutError, match=r"fetch .* did not finish within 300 ms"):
        await group.fetch([A], deadline_ms=clock() + 300, timeout_ms=300)


@pytest.mark.asyncio
async def test_a_deadline_without_its_timeout_is_named_as_the_time_from_the_call() -> None:
    """Given only a deadline, the error cannot know the caller's timeout: it names the time
    from the call to the deadline and says so, counting a wait behind an earlier commit."""
    cluster = FakeCluster()
    cluster.commit_errors.extend(
        CoordinatorLoadInProgressError("offsets loading") for _ in range(1000)
    )
    clock = ManualClock(tick_ms=7)
    group = offsets_of(cluster, clock=clock)
    first = asyncio.create_task(
        group.commit({A: OffsetAndMetadata(1)}, deadline_ms=clock() + 100, timeout_ms=100)
    )
    await asyncio.sleep(0)  # the first commit holds the lock until its deadline
    with pytest.raises(KafkaTimeoutError) as raised:
        await group.commit({A: OffsetAndMetadata(2)}, deadline_ms=clock.now_ms + 300)
    assert "did not finish by its deadline, 293 ms after it was called" in str(raised.value)
    with pytest.raises(KafkaTimeoutError, match="within 100 ms"):
        await first


@pytest.mark.asyncio
async def test_a_dead_cluster_times_out_naming_the_unreachable_brokers() -> None:
    cluster = FakeCluster()
    cluster.down.update({0, 1, 2})
    with pytest.raises(KafkaTimeoutError) as raised:
        await offsets_of(cluster).fetch([A], deadline_ms=soon(100))
    assert "cannot connect to node0:9092: connection refused" in str(raised.value)


@pytest.mark.asyncio
async def test_commits_are_serialised_in_call_order() -> None:
    cluster = FakeCluster()
    cluster.commit_errors.append(CoordinatorLoadInProgressError("slow first"))
    group = offsets_of(cluster)
    first = asyncio.create_task(group.commit({A: OffsetAndMetadata(1)}, deadline_ms=soon()))
    await asyncio.sleep(0)
    second = asyncio.create_task(group.commit({A: OffsetAndMetadata(2)}, deadline_ms=soon()))
    await asyncio.gather(first, second)
    assert cluster.committed[("g", A)].offset == 2
    assert [c[A].offset for c in cluster.commits] == [1, 2]


@pytest.mark.asyncio
async def test_not_coordinator_per_partition_refinds_the_coordinator() -> None:
    cluster = FakeCluster()
    cluster.commit_partition_errors.append({A: NotCoordinatorError("moved")})
    group = offsets_of(cluster)
    await group.commit({A: OffsetAndMetadata(5)}, deadline_ms=soon())
    assert cluster.calls.count("FindCoordinator") == 2


@pytest.mark.asyncio
async def test_auto_committer_commits_changed_positions_at_its_interval(tasks: TaskOwner) -> None:
    cluster = FakeCluster()
    now = [0]  # how far the test moved the committer's clock ahead of the real one
    committer = AutoCommitter(
        offsets_of(cluster),
        tasks,
        interval_ms=100,
        request_timeout_ms=1_000,
        clock=lambda: monotonic_ms() + now[0],
    )
    committer.maybe_commit({A: OffsetAndMetadata(1)})
    assert committer._task is None  # interval not over
    now[0] = 100
    committer.maybe_commit({A: OffsetAndMetadata(1)})
    await committer.close()
    now[0] = 200
    committer.maybe_commit({A: OffsetAndMetadata(1), B: OffsetAndMetadata(9)})
    await committer.close()
    now[0] = 300
    committer.maybe_commit({A: OffsetAndMetadata(1), B: OffsetAndMetadata(9)})  # nothing new
    await committer.close()
    assert cluster.commits == [{A: OffsetAndMetadata(1)}, {B: OffsetAndMetadata(9)}]
    # An unchanged position is committed again once its last commit is an hour old, so that
    # the coordinator's retention does not expire an idle partition's offset under a consumer.
    now[0] = 1_000
    committer.maybe_commit({A: OffsetAndMetadata(1), B: OffsetAndMetadata(10)})
    await committer.close()
    now[0] = 500 + RECOMMIT_UNCHANGED_MS  # A's commit (at 100) an hour old, B's (at 1,000) not
    committer.maybe_commit({A: OffsetAndMetadata(1), B: OffsetAndMetadata(10)})
    await committer.close()
    assert cluster.commits[2:] == [{B: OffsetAndMetadata(10)}, {A: OffsetAndMetadata(1)}]


@pytest.mark.asyncio
async def test_a_failed_auto_commit_is_logged_and_retried_later(
    tasks: TaskOwner, caplog: pytest.LogCaptureFixture
) -> None:
    cluster = FakeCluster()
    cluster.commit_errors.append(OffsetMetadataTooLargeError("too large"))
    now = [0]  # how far the test moved the committer's clock ahead of the real one
    committer = AutoCommitter(
        offsets_of(cluster),
        tasks,
        interval_ms=10,
        request_timeout_ms=1_000,
        clock=lambda: monotonic_ms() + now[0],
    )
    now[0] = 10
    committer.maybe_commit({A: OffsetAndMetadata(1)})
    await committer.close()
    assert "auto-commit in group 'g' failed: too large" in caplog.text
    now[0] = 20
    committer.maybe_commit({A: OffsetAndMetadata(1)})
    await committer.close()
    assert cluster.committed[("g", A)].offset == 1


@pytest.mark.asyncio
async def test_an_auto_commit_that_times_out_names_the_request_timeout(
    tasks: TaskOwner, caplog: pytest.LogCaptureFixture
) -> None:
    cluster = FakeCluster()
    cluster.commit_errors.extend(
        CoordinatorLoadInProgressError("offsets loading") for _ in range(1000)
    )
    clock = ManualClock(tick_ms=7)
    committer = AutoCommitter(
        offsets_of(cluster, clock=clock), tasks, interval_ms=1, request_timeout_ms=250, clock=clock
    )
    committer.maybe_commit({A: OffsetAndMetadata(1)})
    await committer.close()
    assert "auto-commit in group 'g' failed" in caplog.text
    assert "did not finish within 250 ms; last error: offsets loading" in caplog.text


@pytest.mark.asyncio
async def test_the_consumer_names_the_timeout_its_caller_gave(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`Consumer.commit`/`committed` pass their caller's timeout down: the error names it even
    when time passed between the consumer computing its deadline and the call starting (here
    the consumer's clock moves 50 ms at every read, so the call starts with less than 150 ms
    left)."""
    cluster = FakeCluster()
    cluster.install(monkeypatch)
    cluster.commit_errors.extend(
        CoordinatorLoadInProgressError("offsets loading") for _ in range(1000)
    )
    cluster.offset_fetch_errors.extend(
        CoordinatorLoadInProgressError("offsets loading") for _ in range(1000)
    )
    settings = consumer_settings(cluster, group_id="g", enable_auto_commit=False)
    async with Consumer(**settings, clock=ManualClock(tick_ms=50)) as consumer:
        with pytest.raises(KafkaTimeoutError, match=r"commit .* did not finish within 150 ms"):
            await consumer.commit({A: 1}, timeout_ms=150)
        with pytest.raises(KafkaTimeoutError, match=r"fetch .* did not finish within 150 ms"):
            await consumer.committed(A, timeout_ms=150)


@pytest.mark.asyncio
async def test_a_consumer_told_of_another_committer_warns_once_per_other_consumer(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Commits name the consumer (client.id, a random instance id per consumer); an answer
    naming another consumer of the group on the same partitions is a WARNING, once per other
    consumer however often it is named (consumers outside the group's membership)."""
    cluster = FakeCluster()
    cluster.install(monkeypatch)
    other = cm.Committer("reader", "f" * 32, "10.0.0.7")
    third = cm.Committer("reader", "e" * 32, "10.0.0.8")
    cluster.shared_commits.extend(
        [
            (cm.SharedCommit(other, (("a", 0),), 1_200),),
            (cm.SharedCommit(other, (("a", 0),), 900),),
            (cm.SharedCommit(third, (("a", 0),), 300),),
        ]
    )
    settings = consumer_settings(cluster, group_id="g", enable_auto_commit=False)
    caplog.set_level(logging.WARNING, logger="replog.client.consumer")
    async with Consumer(**settings, client_id="reader") as first, Consumer(**settings) as second:
        for _ in range(3):
            await first.commit({A: 1})
        await second.commit({A: 2})
    me, _, _, them = cluster.committers
    assert me.client_id == "reader" and len(me.instance_id) == 32 and me.host == ""
    assert them.client_id == "replog-consumer" and them.instance_id != me.instance_id
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warned == [
        "another consumer commits offsets for group 'g' and the same partitions (a-0): client "
        f"'reader' (instance {'f' * 32}) at 10.0.0.7, 1200 ms before this commit; both read "
        f"every record of them, {cm.SHARED_COMMIT_ADVICE}",
        "another consumer commits offsets for group 'g' and the same partitions (a-0): client "
        f"'reader' (instance {'e' * 32}) at 10.0.0.8, 300 ms before this commit; both read "
        f"every record of them, {cm.SHARED_COMMIT_ADVICE}",
    ]
