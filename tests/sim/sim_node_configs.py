"""The three simulated nodes the whole-node simulations run: fast Raft timings, a broker
session that expires in 1.5 virtual seconds, each broker's lifecycle, and each node's real Raft
driver and controller (`quorum_node`)."""

from __future__ import annotations

import random

from quorum.controller.controller_config import ControllerConfig
from quorum.metadata.broker_lifecycle import BrokerLifecycleConfig
from quorum.metadata.records import Endpoint
from quorum.raft import RaftConfig, VoterAddress
from replog.server.controller_service import ControllerService
from replog.server.raft_driver import RaftDriver
from replog.sim.controller_node import simulated_controller
from replog.sim.network import SimNetwork
from replog.sim.raft_node import simulated_raft_driver
from replog.sim.sim_tasks import SimTasks
from replog.sim.virtual_loop import VirtualLoop
from replog.storage.memory_fs import MemoryFileSystem

NODES = (1, 2, 3)
CLUSTER_ID = "sim-cluster"
SESSION_TIMEOUT_MS = 1500


def raft_config() -> RaftConfig:
    return RaftConfig(
        voters=tuple(VoterAddress(i, "sim", 9000 + i) for i in NODES),
        election_timeout_ms=300,
        fetch_timeout_ms=600,
        request_timeout_ms=200,
        retry_backoff_ms=20,
        fetch_wait_ms_max=100,
    )


def controller_config(node_id: int, session_timeout_ms: int) -> ControllerConfig:
    return ControllerConfig(
        node_id=node_id, cluster_id=CLUSTER_ID, broker_session_timeout_ms=session_timeout_ms
    )


def lifecycle_config(
    node_id: int, session_timeout_ms: int = SESSION_TIMEOUT_MS
) -> BrokerLifecycleConfig:
    return BrokerLifecycleConfig(
        broker_id=node_id,
        cluster_id=CLUSTER_ID,
        controller_ids=NODES,
        listeners=(Endpoint("PLAINTEXT", "sim", 9100 + node_id),),
        heartbeat_interval_ms=250,
        session_timeout_ms=session_timeout_ms,
        request_timeout_ms=500,
    )


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
