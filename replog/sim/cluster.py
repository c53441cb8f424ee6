"""`SimCluster`: the nodes of one simulation run, each the real shells of a combined node (Raft
driver and storage, controller driver and service, the broker role: `simulated_broker`, its
lifecycle, replica manager and request cores) on its own in-memory disk, all on one virtual
loop and one simulated network. The combined nodes are the metadata quorum's voters; a run may
add broker-only nodes (`observer_ids`: a Raft observer of the metadata log, a broker, no
controller, its metadata snapshots taken of its broker's image: `observer_node`), as a node
process with process.roles=broker runs.

Rules:
- Everything random comes from the cluster's `random.Random` (each node's own generators are
  drawn from it when the node starts), so a seed replays a run.
- `kill(node)` is kill -9: the node's tasks are cancelled at once, nothing it would do on a
  clean stop runs, its disk keeps every write (`MemoryFileSystem.kill`). `power_loss(node)`
  is the same with only the synced data kept (`crash`, a torn tail possible), with
  `around_power_loss` (a checker's) around it. `shut_down(node)` is the clean part of a
  node process's stop on SIGTERM (`replog.server.process.node`): the broker's controlled
  shutdown and clean log shutdown (the clean-shutdown marker with its broker epoch), then
  the Raft driver resigning; the process then exits (`kill`: every write is on the disk).
  `start(node)` brings a stopped node back from its disk as a restart would; its broker
  registers with the epoch of its disk's clean-shutdown marker (KIP-966's previous broker
  epoch), read before its logs load, as a node process's config reads it; an incarnation
  whose disk holds no marker naming an epoch is in `unclean_starts`.
- A node's broker replays the metadata its node's Raft driver has committed (its stepped
  listener), as a combined node's does; its ReplicaFetch servicer is in `fetch_services`
  while the node runs. A broker that cannot go on (a storage error, `wait_failed`) ends a
  task of its node with that error, as its process would exit.
- `changes` moves whenever a node's Raft driver runs (a resumption of its task), a node starts
  or stops, or a task of a node ends with an error (`task_errors` counts those alone): a check
  that reads only such state skips the loop iterations in which `changes` did not move.
- Each node snapshots its metadata log and moves its log start as the run's `SnapshotShape`
  says (`snapshot_shape`: drawn from the seed).
- Each node reads two clocks, as a node process does: the loop's for timeouts and intervals
  (monotonic: it never goes back) and a wall clock of its own (`wall_clock`: record and file
  timestamps), which starts at `WALL_EPOCH_MS` and jumps when `wall_offset_ms` changes
  (`SimNode.jump_wall_clock`, which keeps the furthest ahead it has been). The clients' wall
  clock (`client_wall_clock`, their record timestamps) never jumps: a broker compares those
  timestamps with its own clock (producer-id expiry, retention). The checks read when a
  record was sent from its timestamp on the loop's scale (`client_time_to_virtual_ms`), as
  power losses are timed.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from replog.clock import Clock
from replog.quorum.controller.controller_config import ControllerConfig
from replog.quorum.controller.controller_result import MAX_PARTITION_CHANGES_PER_STEP
from replog.quorum.metadata.broker_lifecycle import BrokerLifecycleConfig
from replog.quorum.metadata.records import Endpoint
from replog.quorum.raft import RaftConfig, VoterAddress
from replog.server.broker.broker_runtime import BrokerRuntime
from replog.server.controller.controller_service import ControllerService
from replog.server.data_plane.replica_fetch_service import ReplicaFetchService
from replog.server.raft.raft_driver import RaftDriver
from replog.sim.broker_node import LOG_DIR, simulated_broker
from replog.sim.controller_node import simulated_controller
from replog.sim.counted_steps import counted
from replog.sim.network import SimNetwork
from replog.sim.observer_node import observer_snapshots
from replog.sim.raft_link import SimRaftLink
from replog.sim.raft_node import simulated_raft_driver
from replog.sim.sim_tasks import SimTasks
from replog.sim.snapshot_shape import NO_SNAPSHOTS, SnapshotShape
from replog.sim.virtual_loop import VirtualLoop
from replog.storage.log_manager import clean_shutdown_broker_epoch
from replog.storage.memory_fs import MemoryFileSystem

__all__ = ["CLUSTER_ID", "STATE_PARTITIONS", "SimCluster", "SimNode"]

CLUSTER_ID = "sim-cluster"
SESSION_TIMEOUT_MS = 1500
HEARTBEAT_INTERVAL_MS = 250
# Preferred-leader elections on the run's time scale: a restarted node leads its partitions
# again within seconds, so leaderships move away and back (and leader epochs pass a client by).
LEADER_IMBALANCE_CHECK_MS = 2000
# The brokers' settings: a lost message costs a follower its fetch's wait, timeout and
# backoff (600 ms), well within the ISR's bound, so that a follower leaves the ISR for a
# partition, a crash or a fenced session, not for one dropped fetch.
# __transaction_state's partitions: one coordinator for both transactional ids; each more
# partition costs the runs a replicated partition and its loads (a second one: 10% more CPU).
STATE_PARTITIONS = 1
BROKER_PROPERTIES = {
    "replica.lag.time.max.ms": "1000",
    "replica.fetch.wait.max.ms": "200",
    "replica.socket.timeout.ms": "300",
    "replica.fetch.backoff.ms": "100",
    # The transaction coordinator on the run's time scale: few state partitions, appends and
    # markers bounded within the call timeouts, timed-out transactions aborted within a second.
    "transaction.state.log.num.partitions": str(STATE_PARTITIONS),
    "request.timeout.ms": "1500",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
}
# The wall clocks' time at the start of a run: a real date, so that a clock jumping back
# gives timestamps a real clock could (never negative, never Kafka's "no timestamp", -1).
WALL_EPOCH_MS = 1_800_000_000_000


def raft_config(node_ids: tuple[int, ...], fetch_bytes_max: int = 8 << 20) -> RaftConfig:
    return RaftConfig(
        voters=tuple(VoterAddress(i, "sim", 9000 + i) for i in node_ids),
        election_timeout_ms=300,
        fetch_timeout_ms=600,
        request_timeout_ms=200,
        retry_backoff_ms=20,
        fetch_wait_ms_max=100,
        fetch_bytes_max=fetch_bytes_max,
    )


def controller_config(
    node_id: int,
    session_timeout_ms: int = SESSION_TIMEOUT_MS,
    partition_changes_per_step: int = MAX_PARTITION_CHANGES_PER_STEP,
) -> ControllerConfig:
    return ControllerConfig(
        node_id=node_id,
        cluster_id=CLUSTER_ID,
        broker_session_timeout_ms=session_timeout_ms,
        max_partition_changes_per_step=partition_changes_per_step,
        # KIP-966: a replica that lost power is kept out of every ISR and ELR, so no
        # acknowledged record depends on what it had not synced.
        eligible_leader_replicas_enable=True,
        leader_imbalance_check_interval_ms=LEADER_IMBALANCE_CHECK_MS,
    )


def lifecycle_config(
    node_id: int,
    node_ids: tuple[int, ...],
    session_timeout_ms: int = SESSION_TIMEOUT_MS,
    previous_broker_epoch: int = -1,
) -> BrokerLifecycleConfig:
    return BrokerLifecycleConfig(
        broker_id=node_id,
        cluster_id=CLUSTER_ID,
        controller_ids=node_ids,
        listeners=(Endpoint("PLAINTEXT", "sim", 9100 + node_id),),
        heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
        session_timeout_ms=session_timeout_ms,
        request_timeout_ms=500,
        previous_broker_epoch=previous_broker_epoch,
    )


@dataclass
class SimNode:
    """One node's disk and, while it runs, its shells."""

    node_id: int
    disk: MemoryFileSystem
    incarnation: int = 0
    wall_offset_ms: int = 0  # how far its wall clock has jumped, in all (module Rules)
    wall_offset_peak_ms: int = 0  # the furthest ahead its wall clock has been
    steps: int = 0  # how often its Raft driver's task ran, in all (`counted_steps`)
    tasks: SimTasks = field(default_factory=SimTasks)
    failure_watch: asyncio.Task[None] | None = None  # `_broker_failure`'s task
    raft: RaftDriver | None = None
    broker: BrokerRuntime | None = None

    @property
    def up(self) -> bool:
        return self.raft is not None

    def jump_wall_clock(self, jump_ms: int) -> None:
        """Its wall clock jumps by `jump_ms`, forward or back (module Rules)."""
        self.wall_offset_ms += jump_ms
        self.wall_offset_peak_ms = max(self.wall_offset_peak_ms, self.wall_offset_ms)


class SimCluster:
    """The nodes of one run (module docstring)."""

    def __init__(
        self,
        node_ids: tuple[int, ...],
        loop: VirtualLoop,
        network: SimNetwork,
        rng: random.Random,
        snapshots: SnapshotShape = NO_SNAPSHOTS,
        partition_changes_per_step: int = MAX_PARTITION_CHANGES_PER_STEP,
        observer_ids: tuple[int, ...] = (),
    ) -> None:
        self.voter_ids = node_ids  # the combined nodes: the metadata quorum's voters
        self.observer_ids = observer_ids  # the broker-only nodes
        self.node_ids = node_ids + observer_ids
        self.partition_changes_per_step = partition_changes_per_step
        self.loop = loop
        self.network = network
        self.rng = rng
        self.snapshots = snapshots
        self.raft_config = raft_config(self.voter_ids, snapshots.fetch_bytes_max)
        self.services: dict[int, ControllerService] = {}
        self.fetch_services: dict[int, ReplicaFetchService] = {}
        self.power_losses: list[tuple[int, int]] = []  # (virtual ms, node), oldest first
        # The brokers' incarnation ids that started without a clean-shutdown marker naming a
        # broker epoch: to the controller, their predecessors stopped uncleanly (KIP-966).
        self.unclean_starts: set[uuid.UUID] = set()
        self.around_power_loss: Callable[[SimNode], AbstractContextManager[None]] = lambda _node: (
            contextlib.nullcontext()
        )
        # Called with each Raft driver a start makes, before it runs (a checker's listener).
        self.on_raft_driver: list[Callable[[int, RaftDriver], None]] = []
        # Calls between brokers being served (`txn_link`), in start order, as `SimTasks` keeps
        # a node's: one to a node that died with it is cancelled at the end (`stop_all`).
        self.serving: dict[asyncio.Task[Any], None] = {}
        self.changes = 0  # module Rules
        self.task_errors = 0
        self.nodes: dict[int, SimNode] = {}
        for i in self.node_ids:  # each disk's file times read its node's wall clock
            self.nodes[i] = SimNode(i, MemoryFileSystem(clock=self.wall_clock(i)))

    def _task_failed(self) -> None:
        self.task_errors += 1
        self.changes += 1

    def wall_clock(self, node_id: int) -> Clock:
        """Node `node_id`'s wall clock (module Rules)."""
        now_ms, nodes = self.loop.now_ms, self.nodes

        def wall_clock_ms() -> int:
            return WALL_EPOCH_MS + now_ms() + nodes[node_id].wall_offset_ms

        return wall_clock_ms

    def client_wall_clock(self) -> int:
        """The clients' wall clock (their record timestamps): the nodes' before any jump."""
        return WALL_EPOCH_MS + self.loop.now_ms()

    def client_time_to_virtual_ms(self, timestamp_ms: int) -> int:
        """The loop's ms (`power_losses`' scale) at which the clients' wall clock read
        `timestamp_ms`: when a client built a record stamped so."""
        return timestamp_ms - WALL_EPOCH_MS

    def up_nodes(self) -> list[SimNode]:
        return [node for node in self.nodes.values() if node.up]

    # --- starting and stopping ----------------------------------------------------------------

    def start(self, node_id: int) -> None:
        """Start node `node_id` from its disk (module Rules)."""
        node = self.nodes[node_id]
        assert not node.up, f"node {node_id} is running"
        loop, rng = self.loop, self.rng
        node.incarnation += 1
        self.changes += 1
        node.tasks = tasks = SimTasks(on_error=self._task_failed)
        try:
            raft = simulated_raft_driver(
                node_id,
                self.voter_ids,
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
        if node_id in self.voter_ids:
            self.services[node_id] = simulated_controller(
                raft,
                controller_config(
                    node_id, partition_changes_per_step=self.partition_changes_per_step
                ),
                loop=loop,
                rng=random.Random(rng.getrandbits(64)),
                wall_clock=self.wall_clock(node_id),
                snapshots=self.snapshots,
            )
        # Read before its logs load (which removes the marker), as a node process's config is.
        previous_epoch = clean_shutdown_broker_epoch((LOG_DIR,), node.disk)
        broker_rng = random.Random(rng.getrandbits(64))
        incarnation_id = uuid.UUID(int=rng.getrandbits(128))
        if previous_epoch <= 0:
            self.unclean_starts.add(incarnation_id)
        broker = simulated_broker(
            lifecycle_config(node_id, self.voter_ids, previous_broker_epoch=previous_epoch),
            raft,
            loop=loop,
            network=self.network,
            disk=node.disk,
            rng=broker_rng,
            incarnation_id=incarnation_id,
            tasks=tasks,
            controller_services=self.services,
            fetch_services=self.fetch_services,
            properties=BROKER_PROPERTIES,
            brokers=lambda i: self.nodes[i].broker,
            serving=self.serving,
            wall_clock=self.wall_clock(node_id),
        )
        if node_id in self.observer_ids:
            observer_snapshots(raft, broker, self.snapshots, self.wall_clock(node_id))
        node.raft, node.broker = raft, broker
        for hook in self.on_raft_driver:
            hook(node_id, raft)
        tasks.spawn(
            counted(raft.run(), _DriverSteps(node, self)), name=f"node {node_id}'s Raft driver"
        )
        tasks.spawn(broker.start(), name=f"node {node_id}'s broker start")
        node.failure_watch = tasks.spawn(
            _broker_failure(broker), name=f"node {node_id}'s broker failure"
        )

    async def shut_down(self, node_id: int, timeout_s: float) -> bool:
        """The clean part of node `node_id`'s stop (module Rules), bounded by `timeout_s` (a
        supervisor's grace period); False if it did not end in time or the node stopped
        otherwise meanwhile (a fault). The caller ends the process (`kill`, `power_loss`)."""
        node = self.nodes[node_id]
        raft, broker = node.raft, node.broker
        assert raft is not None and broker is not None, f"node {node_id} is not running"
        if node.failure_watch is not None:  # the process stops its roles: no failure exit
            node.failure_watch.cancel()
        try:
            async with asyncio.timeout(timeout_s):
                await broker.stop(graceful=True)
                if node.raft is raft:
                    await raft.stop(graceful=True)
        except TimeoutError:
            return False
        except asyncio.CancelledError:
            # A task the stop waits for was cancelled by the node's fail-stop (`_stop`), not
            # this one: the stop ends there.
            current = asyncio.current_task()
            if node.raft is raft or (current is not None and current.cancelling()):
                raise
            return False
        return node.raft is raft

    def kill(self, node_id: int) -> None:
        """kill -9 (module Rules)."""
        self._stop(node_id)
        node = self.nodes[node_id]
        node.disk = node.disk.kill()

    def power_loss(self, node_id: int) -> None:
        """The node's power goes: only what it synced is left (module Rules)."""
        node = self.nodes[node_id]
        with self.around_power_loss(node):
            self._stop(node_id)
            self.power_losses.append((self.loop.now_ms(), node_id))
            node.disk = node.disk.crash(random.Random(self.rng.getrandbits(64)))

    def _stop(self, node_id: int) -> None:
        node = self.nodes[node_id]
        assert node.raft is not None, f"node {node_id} is not running"
        transport = node.raft.transport
        assert isinstance(transport, SimRaftLink)
        transport.shut()
        self.services.pop(node_id, None)
        self.fetch_services.pop(node_id, None)
        node.tasks.cancel_all()
        node.raft = node.broker = None
        self.changes += 1

    async def stop_all(self) -> None:
        """End of the run: every running node stops at once, its tasks finished."""
        for node in self.up_nodes():
            tasks = node.tasks
            self._stop(node.node_id)
            await tasks.finished()
        serving = list(self.serving)
        for call in serving:
            call.cancel()
        await asyncio.gather(*serving, return_exceptions=True)


class _DriverSteps:
    """`counted`'s counter for a node's Raft driver: its node's `steps` and its cluster's
    `changes` move together."""

    __slots__ = ("_cluster", "_node")

    def __init__(self, node: SimNode, cluster: SimCluster) -> None:
        self._node, self._cluster = node, cluster

    @property
    def steps(self) -> int:
        return self._node.steps

    @steps.setter
    def steps(self, value: int) -> None:
        self._node.steps = value
        self._cluster.changes += 1


async def _broker_failure(broker: BrokerRuntime) -> None:
    """What a node process does when its broker role cannot go on (`wait_failed`): it exits.
    Here the task ends with the broker's error: a storage error is the node's fail-stop on its
    failed disk (`node_faults`), anything else a failed task the checks report."""
    why = await broker.wait_failed()
    if broker.storage_error is not None:
        raise broker.storage_error
    raise RuntimeError(f"broker {broker.config.broker_id} cannot go on: {why}")
