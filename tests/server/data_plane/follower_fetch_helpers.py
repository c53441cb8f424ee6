"""`FollowerFetchSteps` over a test's own partitions dict, for the follower-fetch tests."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any
from uuid import UUID

from replog.server.config.replica_manager_config import ReplicaManagerConfig
from replog.server.data_plane.follower_fetch import FollowerFetchSteps

LOCAL = 1  # the broker whose follower fetches are planned


def follower_steps(
    partitions: dict[Any, Any], broker_epoch: Callable[[], int] = lambda: 1
) -> FollowerFetchSteps:
    """Steps of broker LOCAL over `partitions`, with no deadline callback."""
    return FollowerFetchSteps(
        ReplicaManagerConfig(broker_id=LOCAL),
        partitions,
        broker_epoch=broker_epoch,
        on_new_deadline=lambda _ms: None,
    )


def partition(key: tuple[str, int], leader: int) -> SimpleNamespace:
    """A replica of `key` following `leader` from offset 0, as the steps read it."""
    return SimpleNamespace(
        topic=key[0],
        partition=key[1],
        key=key,
        topic_id=UUID(int=1),
        log=SimpleNamespace(log_start_offset=0),
        follower=SimpleNamespace(
            leader_id=leader,
            leader_epoch=1,
            fetch_offset=0,
            last_fetched_epoch=-1,
            backoff_until_ms=0,
            caught_up=None,
        ),
    )
