"""Committing and fetching a group's offsets through its coordinator, with retries."""

from __future__ import annotations

import asyncio
import time

import pytest
from consumer_fakes import FakeCluster

from replog.client.group_offsets import AutoCommitter, GroupOffsets
from replog.client.records import OffsetAndMetadata, TopicPartition
from replog.clock import monotonic_ms
from replog.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    InvalidGroupIdError,
    KafkaTimeoutError,
    NotCoordinatorError,
    OffsetMetadataTooLargeError,
    UnknownTopicOrPartitionError,
)

A = TopicPartition("a", 0)
B = TopicPartition("b", 1)


def offsets_of(cluster: FakeCluster, **overrides: int) -> GroupOffsets:
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
        **settings,
    )


def soon(ms: int = 5_000) -> int:
    return monotonic_ms() + ms


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
    cluster = FakeCluster()
    cluster.commit_errors.extend(
        CoordinatorLoadInProgressError("offsets loading") for _ in range(1000)
    )
    group = offsets_of(cluster)
    started = time.monotonic()
    with pytest.raises(KafkaTimeoutError) as raised:
        await group.commit({A: OffsetAndMetadata(1)}, deadline_ms=soon(200))
    assert 0.15 < time.monotonic() - started < 1.5
    text = str(raised.value)
    assert "commit of offsets for a-0 in group 'g'" in text
    assert "200 ms" in text and "offsets loading" in text


@pytest.mark.asyncio
async def test_a_dead_cluster_times_out_naming_the_unreachable_brokers() -> None:
    cluster = FakeCluster()
    cluster.down.update({0, 1, 2})
    with pytest.raises(KafkaTimeoutError) as raised:
        await offsets_of(cluster).fetch([A], deadline_ms=soon(100))
    assert "node0:9092" in str(raised.value) and "unreachable" in str(raised.value)


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
async def test_auto_committer_commits_changed_positions_at_its_interval() -> None:
    cluster = FakeCluster()
    now = [0]  # how far the test moved the committer's clock ahead of the real one
    committer = AutoCommitter(
        offsets_of(cluster),
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


@pytest.mark.asyncio
async def test_a_failed_auto_commit_is_logged_and_retried_later(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cluster = FakeCluster()
    cluster.commit_errors.append(OffsetMetadataTooLargeError("too large"))
    now = [0]  # how far the test moved the committer's clock ahead of the real one
    committer = AutoCommitter(
        offsets_of(cluster),
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
