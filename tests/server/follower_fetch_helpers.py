"""`FollowerFetchSteps` over a test's own partitions dict, for the follower-fetch tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from replog.server.follower_fetch import FollowerFetchSteps
from replog.server.replica_manager_config import ReplicaManagerConfig

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
