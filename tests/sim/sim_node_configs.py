"""The three simulated nodes the whole-node simulations run: fast Raft timings, a broker
session that expires in 1.5 virtual seconds, each broker's lifecycle, and each node's real Raft
driver and controller (`quorum_node`)."""

from __future__ import annotations

import random

from replog.quorum.controller.controller_config import ControllerConfig
from replog.quorum.metadata.broker_lifecycle import BrokerLifecycleConfig
from replog.quorum.raft import RaftConfig
from replog.server.controller.controller_service import ControllerService
from replog.server.raft.raft_driver import RaftDriver
from replog.sim import cluster as sim_cluster
from replog.sim.cluster import SESSION_TIMEOUT_MS
from replog.sim.controller_node import simulated_controller
from replog.sim.network import SimNetwork
from replog.sim.raft_node import simulated_raft_driver
from replog.sim.sim_tasks import SimTasks
from replog.sim.virtual_loop import VirtualLoop
from replog.storage.memory_fs import MemoryFileSystem

NODES = (1, 2, 3)


def raft_config() -> RaftConfig:
    return sim_cluster.raft_config(NODES)


def controller_config(node_id: int, session_timeout_ms: int) -> ControllerConfig:
    return sim_cluster.controller_config(node_id, session_timeout_ms)


def lifecycle_config(
    node_id: int, session_timeout_ms: int = SESSION_TIMEOUT_MS
) -> BrokerLifecycleConfig:
    return sim_cluster.lifecycle_config(node_id, NODES, session_timeout_ms)


def quorum_node(
    node_id: int,
    *,
    loop: VirtualLoop,
    network: SimNetwork,
    disk: MemoryFileSystem,
    rng: random.Random,
    tasks: SimTasks | None = None,
    session_timeout_ms: int = SESSION_TIMEOUT_MS,
) -> tuple[RaftDriver, ControllerService]:
    """Node `node_id`'s real Raft driver and controller on `disk`, seeded from `rng`;
    `session_timeout_ms`: how long the controller waits for a broker's heartbeat."""
    raft = simulated_raft_driver(
        node_id,
        NODES,
        raft_config(),
        loop=loop,
        network=network,
        disk=disk,
        rng=random.Random(rng.getrandbits(64)),
        tasks=tasks,
    )
    controller = simulated_controller(
        raft,
        controller_config(node_id, session_timeout_ms),
        loop=loop,
        rng=random.Random(rng.getrandbits(64)),
    )
    return raft, controller
