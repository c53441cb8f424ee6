"""A started replica manager's loop turns are bounded in time, not only in count (issue #50):
installing a round's new replicas, a round of role changes of existing ones and a round of the
leaders' refresh each stop once `APPLY_TURN_BUDGET_MS` of the loop's clock has passed. Turns of
250 of them held the loop 20-55 ms of CPU on a loaded machine. Here each replica's step costs
3 ms of a manual clock: a turn takes at most 3, and in the end every replica is as the image
says."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from replog.quorum.metadata.records import (
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    ConfigResourceType,
    FenceChange,
    PartitionChangeRecord,
)
from replog.server.data_plane import replica_manager
from replog.server.data_plane.replica_manager import ReplicaManager
from replog.testing import ManualClock
from tests.metadata.metadata_helpers import create_topic, replayed, topic_id
from tests.server.data_plane.test_replica_manager import TID, Node, clock, cluster_image, nodes_with

__all__ = ["clock"]  # the fixture

PARTITIONS = 11
UID = topic_id(2)
STEP_MS = 3  # with the budget of 8 ms: three a turn


def costing(clock: ManualClock, real: Callable[..., Any]) -> Callable[..., Any]:
    def slow(*args: Any, **kwargs: Any) -> Any:
        clock.advance(STEP_MS)
        return real(*args, **kwargs)

    return slow


async def counts_per_turn(count: Callable[[], int], done: int) -> list[int]:
    """`count()` at every loop turn until it reaches `done` (or 10 s passed: new logs are
    made in a worker thread)."""
    seen = [count()]
    deadline = time.monotonic() + 10
    while seen[-1] != done and time.monotonic() < deadline:
        await asyncio.sleep(0)
        seen.append(count())
    return seen


async def three_a_turn(count: Callable[[], int]) -> None:
    """`count()` goes from none to every partition, by at most 3 a loop turn."""
    seen = await counts_per_turn(count, PARTITIONS)
    assert seen[0] == 0 and seen[-1] == PARTITIONS, seen
    assert max(abs(b - a) for a, b in itertools.pairwise(seen)) <= 3, seen


@pytest.fixture(autouse=True)
def budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replica_manager, "APPLY_TURN_BUDGET_MS", 8, raising=False)


@pytest.mark.asyncio
async def test_new_replicas_are_installed_in_turns_bounded_in_time(
    tmp_path: Path, clock: ManualClock
) -> None:
    node = Node(tmp_path, 1, clock)
    node.rm.apply_image(cluster_image())
    await node.rm.start()
    try:
        node.rm._take_role = costing(clock, node.rm._take_role)  # type: ignore[method-assign]
        node.rm.apply_image(cluster_image(*create_topic("t", TID, *[(1, 2)] * PARTITIONS)))
        await three_a_turn(
            lambda: sum(node.rm.partition("t", p) is not None for p in range(PARTITIONS))
        )
        assert all(node.leader("t", p) is not None for p in range(PARTITIONS))
    finally:
        await node.rm.stop()


@pytest.mark.asyncio
async def test_role_changes_of_existing_replicas_are_applied_in_rounds_bounded_in_time(
    tmp_path: Path, clock: ManualClock
) -> None:
    (node, _) = nodes_with(tmp_path, clock, *[(1, 2)] * PARTITIONS)
    await node.rm.start()
    try:
        node.rm._take_role = costing(clock, node.rm._take_role)  # type: ignore[method-assign]
        moved = replayed(
            node.rm.image,
            *(
                PartitionChangeRecord(TID, p, leader=2)
                for p in range(PARTITIONS)  # broker 1 follows broker 2 from now on
            ),
        )
        node.rm.apply_image(moved)
        await three_a_turn(
            lambda: sum(node.rm.partition("t", p).leader_state is None for p in range(PARTITIONS))  # type: ignore[union-attr]
        )
    finally:
        await node.rm.stop()


@pytest.mark.asyncio
async def test_the_leaders_refresh_goes_in_rounds_bounded_in_time(
    tmp_path: Path, clock: ManualClock
) -> None:
    (node, _) = nodes_with(tmp_path, clock, *[(1, 2)] * PARTITIONS)
    await node.rm.start()
    try:
        node.rm._fetch_news = costing(clock, node.rm._fetch_news)  # type: ignore[method-assign]
        leaders = [node.leader("t", p) for p in range(PARTITIONS)]
        node.rm.apply_image(
            replayed(node.rm.image, BrokerRegistrationChangeRecord(2, 20, fenced=FenceChange.FENCE))
        )
        await three_a_turn(lambda: sum(not leader.eligibility.is_eligible(2) for leader in leaders))
    finally:
        await node.rm.stop()


@pytest.mark.asyncio
async def test_a_topics_new_settings_visit_only_that_topics_replicas(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A topic created with a setting changes the image's configs: every replica of every topic
    # used to be walked (log settings) and listed for the leaders' refresh, 100,000 at a time.
    # A broker level still reaches every replica.
    node = Node(tmp_path, 1, clock)
    node.rm.apply_image(
        cluster_image(
            *create_topic("t", TID, *[(1, 2)] * PARTITIONS), *create_topic("u", UID, (1, 2))
        )
    )
    walked: list[list[object]] = []
    real = ReplicaManager._refresh_leaders

    def recorded(self: ReplicaManager, limit: int, budget_ms: int | None = None) -> None:
        walked.append(sorted(self._leaders_to_refresh))
        real(self, limit, budget_ms)

    monkeypatch.setattr(ReplicaManager, "_refresh_leaders", recorded)
    opened: list[tuple[str, int]] = []
    get_or_create = node.log_manager.get_or_create_log

    def counted(topic: str, partition: int, config: Any) -> Any:
        opened.append((topic, partition))
        return get_or_create(topic, partition, config)

    monkeypatch.setattr(node.log_manager, "get_or_create_log", counted)
    node.rm.apply_image(
        replayed(node.rm.image, ConfigRecord(ConfigResourceType.TOPIC, "u", "retention.ms", "1"))
    )
    assert walked == [[("u", 0)]]
    assert opened == [("u", 0)]
    assert node.rm.partition("u", 0).log.config.retention_ms == 1  # type: ignore[union-attr]
    walked.clear()
    node.rm.apply_image(
        replayed(node.rm.image, ConfigRecord(ConfigResourceType.BROKER, "", "retention.ms", "2"))
    )
    assert len(walked[0]) == PARTITIONS + 1
