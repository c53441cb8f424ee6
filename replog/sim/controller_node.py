"""`simulated_controller`: a node's real `ControllerDriver` and `ControllerService` over its
simulated Raft driver (`raft_node`): its wall clock the virtual loop's, its randomness a seeded
`random.Random`; snapshots taken and the log start moved by size as the run's `SnapshotShape`
says, never on a timer."""

from __future__ import annotations

import random

from replog.clock import Clock
from replog.quorum.controller.controller_config import ControllerConfig
from replog.server.controller.controller_driver import ControllerDriver
from replog.server.controller.controller_service import ControllerService
from replog.server.raft.raft_driver import RaftDriver
from replog.sim.snapshot_shape import NO_SNAPSHOTS, SnapshotShape
from replog.sim.virtual_loop import VirtualLoop

__all__ = ["simulated_controller"]


def simulated_controller(
    raft: RaftDriver,
    config: ControllerConfig,
    *,
    loop: VirtualLoop,
    rng: random.Random,
    wall_clock: Clock | None = None,
    snapshots: SnapshotShape = NO_SNAPSHOTS,
) -> ControllerService:
    """Node `config.node_id`'s controller over `raft` (module docstring); build it before the
    node's broker role, whose Raft listener follows the controller's (as a node does);
    `wall_clock`: the node's (the loop's unless given)."""
    controller = ControllerDriver(
        raft,
        config,
        read_snapshot=raft.storage.read_whole_snapshot,
        snapshot_bytes_max=snapshots.snapshot_bytes_max,
        snapshot_interval_ms=0,
        retention_bytes=snapshots.retention_bytes,
        retention_ms=-1,
        rng=rng,
        wall_clock=wall_clock or loop.now_ms,
    )
    return ControllerService(controller, voters=raft.config.voters)
