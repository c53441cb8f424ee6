"""`SimCluster`: the nodes of one simulation run, each the real metadata-quorum shells of a
combined node (Raft driver and storage, controller driver and service, the broker's lifecycle
driver) on its own in-memory disk, all on one virtual loop and one simulated network.

Rules:
- Everything random comes from the cluster's `random.Random` (each node's own generators are
  drawn from it when the node starts), so a seed replays a run.
- `kill(node)` is kill -9: the node's tasks are cancelled at once, nothing it would do on a
  clean stop runs, its disk keeps every write (`MemoryFileSystem.kill`). `power_loss(node)`
  is the same with only the synced data kept (`crash`, a torn tail possible). `start(node)`
  brings a stopped node back from its disk as a restart would.
- A node's broker lifecycle hears of the metadata its node has committed (the high watermark
  of its Raft driver), as a combined node's metadata publisher tells it.
- Each node reads two clocks, as a node process does: the loop's for timeouts and intervals
  (monotonic: it never goes back) and a wall clock of its own (`wall_clock`: record and file
  timestamps), which starts at `WALL_EPOCH_MS` and jumps when `wall_offset_ms` changes.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field

from quorum.controller.controller_config import ControllerConfig
from quorum.metadata.broker_lifecycle import BrokerLifecycleConfig
from quorum.metadata.records import Endpoint
from quorum.raft import RaftConfig, VoterAddress
from replog.clock import Clock
from replog.server.broker_lifecycle_driver import BrokerLifecycleDriver
from replog.server.controller_service import ControllerService
from replog.server.raft_driver import RaftDriver
from replog.sim.controller_link import sim_controller_links
from replog.sim.controller_node import simulated_controller
from replog.sim.counted_steps import counted
from replog.sim.network import SimNetwork
from replog.sim.raft_link import SimRaftLink
from replog.sim.raft_node import simulated_raft_driver
from replog.sim.sim_tasks import SimTasks
from replog.sim.virtual_loop import VirtualLoop
from replog.storage.memory_fs import MemoryFileSystem

__all__ = ["CLUSTER_ID", "SimCluster", "SimNode"]

CLUSTER_ID = "sim-cluster"
SESSION_TIMEOUT_MS = 1500
HEARTBEAT_INTERVAL_MS = 250
METADATA_FOLLOW_S = 0.05  # how often a lifecycle hears of its node's committed metadata
# The wall clocks' time at the start of a run: a real date, so that a clock jumping back
# gives timestamps a real clock could (never negative, never Kafka's "no timestamp", -1).
WALL_EPOCH_MS = 1_800_000_000_000


def raft_config(node_ids: tuple[int, ...]) -> RaftConfig:
    return RaftConfig(
        voters=tuple(VoterAddress(i, "sim", 9000 + i) for i in node_ids),
        election_timeout_ms=300,
        fetch_timeout_ms=600,
        request_timeout_ms=200,
        retry_backoff_ms=20,
        fetch_wait_ms_max=100,
    )


def controller_config(
    node_id: int, session_timeout_ms: int = SESSION_TIMEOUT_MS
) -> ControllerConfig:
    return ControllerConfig(
        node_id=node_id, cluster_id=CLUSTER_ID, broker_session_timeout_ms=session_timeout_ms
    )


def lifecycle_config(
    node_id: int, node_ids: tuple[int, ...], session_timeout_ms: int = SESSION_TIMEOUT_MS
) -> BrokerLifecycleConfig:
    return BrokerLifecycleConfig(
        broker_id=node_id,
        cluster_id=CLUSTER_ID,
        controller_ids=node_ids,
        listeners=(Endpoint("PLAINTEXT", "sim", 9100 + node_id),),
        heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
        session_timeout_ms=session_timeout_ms,
        request_timeout_ms=500,
    )


@dataclass
class SimNode:
    """One node's disk and, while it runs, its shells."""

    node_id: int
    disk: MemoryFileSystem
    incarnation: int = 0
    wall_offset_ms: int = 0  # how far its wall clock has jumped, in all (module Rules)
    steps: int = 0  # how often its Raft driver's task ran, in all (`counted_steps`)
    tasks: SimTasks = field(default_factory=SimTasks)
    raft: RaftDriver | None = None
    lifecycle: BrokerLifecycleDriver | None = None

    @property
    def up(self) -> bool:
        return self.raft is not None


class SimCluster:
    """The nodes of one run (module docstring)."""

    def __init__(
        self, node_ids: tuple[int, ...], loop: VirtualLoop, network: SimNetwork, rng: random.Random
    ) -> None:
        self.node_ids = node_ids
        self.loop = loop
        self.network = network
        self.rng = rng
        self.raft_config = raft_config(node_ids)
        self.services: dict[int, ControllerService] = {}
        self.nodes: dict[int, SimNode] = {}
        for i in node_ids:  # each disk's file times read its node's wall clock
            self.nodes[i] = SimNode(i, MemoryFileSystem(clock=self.wall_clock(i)))

    def wall_clock(self, node_id: int) -> Clock:
        """Node `node_id`'s wall clock (module Rules)."""
        now_ms, nodes = self.loop.now_ms, self.nodes

        def wall_clock_ms() -> int:
            return WALL_EPOCH_MS + now_ms() + nodes[node_id].wall_offset_ms

        return wall_clock_ms

    def up_nodes(self) -> list[SimNode]:
        return [node for node in self.nodes.values() if node.up]

    # --- starting and stopping ----------------------------------------------------------------

    def start(self, node_id: int) -> None:
        """Start node `node_id` from its disk (module Rules)."""
        node = self.nodes[node_id]
        assert not node.up, f"node {node_id} is running"
        loop, rng = self.loop, self.rng
        node.incarnation += 1
        node.tasks = tasks = SimTasks()
        try:
            raft = simulated_raft_driver(
                node_id,
                self.node_ids,
                self.raft_config,
                loop=loop,
                network=self.network,
                disk=node.disk,
                rng=random.Random(rng.getrandbits(64)),
                tasks=tasks,
                wall_clock=self.wall_clock(node_id),
            )
        except BaseException:
            # The process exits (its disk failed it at start): its link, made before the
            # driver read its disk, listens no more.
            self.network.down(node_id)
            raise
        self.services[node_id] = simulated_controller(
            raft,
            controller_config(node_id),
            loop=loop,
            rng=random.Random(rng.getrandbits(64)),
            wall_clock=self.wall_clock(node_id),
        )
        lifecycle = BrokerLifecycleDriver(
            lifecycle_config(node_id, self.node_ids),
            {c: f"sim:{9000 + c}" for c in self.node_ids},
            tasks=tasks,
            clock=loop.now_ms,
            rng=random.Random(rng.getrandbits(64)),
            controller_links=sim_controller_links(self.network, node_id, self.services),
        )
        node.raft, node.lifecycle = raft, lifecycle
        tasks.spawn(counted(raft.run(), node), name=f"node {node_id}'s Raft driver")
        tasks.spawn(self._follow_metadata(node, node.incarnation), name="metadata follower")
        lifecycle.set_ready_to_unfence()
        lifecycle.start()

    async def _follow_metadata(self, node: SimNode, incarnation: int) -> None:
        while node.incarnation == incarnation and node.raft is not None:
            assert node.lifecycle is not None
            learned = node.raft.learned_high_watermark()
            if learned is not None and learned > 0:
                node.lifecycle.update_metadata_offset(learned - 1)
            await asyncio.sleep(METADATA_FOLLOW_S)

    def kill(self, node_id: int) -> None:
        """kill -9 (module Rules)."""
        self._stop(node_id)
        node = self.nodes[node_id]
        node.disk = node.disk.kill()

    def power_loss(self, node_id: int) -> None:
        """The node's power goes: only what it synced is left (module Rules)."""
        self._stop(node_id)
        node = self.nodes[node_id]
        node.disk = node.disk.crash(random.Random(self.rng.getrandbits(64)))

    def _stop(self, node_id: int) -> None:
        node = self.nodes[node_id]
        assert node.raft is not None, f"node {node_id} is not running"
        transport = node.raft.transport
        assert isinstance(transport, SimRaftLink)
        transport.shut()
        self.services.pop(node_id, None)
        node.tasks.cancel_all()
        node.raft = node.lifecycle = None

    async def stop_all(self) -> None:
        """End of the run: every running node stops at once, its tasks finished."""
        for node in self.up_nodes():
            tasks = node.tasks
            self._stop(node.node_id)
            await tasks.finished()
