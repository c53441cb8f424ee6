"""`observer_snapshots`: the metadata snapshots of a simulated broker-only node (an observer of
the metadata quorum: its Raft driver fetches the log but never votes), as a node process
without a controller takes them (`BrokerMetadataSnapshots`: of the image its broker
published), on the run's `SnapshotShape`, never on a timer."""

from __future__ import annotations

from replog.clock import Clock
from replog.server.broker.broker_runtime import BrokerRuntime
from replog.server.raft.metadata_snapshots import BrokerMetadataSnapshots, SnapshotWriter
from replog.server.raft.raft_driver import RaftDriver
from replog.sim.snapshot_shape import SnapshotShape

__all__ = ["observer_snapshots"]


def observer_snapshots(
    raft: RaftDriver, broker: BrokerRuntime, shape: SnapshotShape, wall_clock: Clock
) -> BrokerMetadataSnapshots:
    """The snapshots of the node of `raft` and `broker`, whose wall clock is `wall_clock`
    (its snapshots' timestamps); build it after the broker (its Raft listener must follow the
    broker's) and before `raft.run`."""
    writer = SnapshotWriter(
        raft,
        snapshot_bytes_max=shape.snapshot_bytes_max,
        snapshot_interval_ms=0,
        retention_bytes=shape.retention_bytes,
        retention_ms=-1,
        wall_clock=wall_clock,
    )
    return BrokerMetadataSnapshots(raft, lambda: broker.metadata.image, writer)
