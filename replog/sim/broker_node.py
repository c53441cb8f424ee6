"""`simulated_broker`: a node's real `BrokerRuntime` (metadata listener, lifecycle, replica
manager, fetchers, AlterPartition sender, producer ids, request cores, group and transaction
coordinators), wired to a simulation through its seams: `DataPlaneHost` (the node's in-memory
disk, the virtual clock, no threads or child processes), the controllers, leaders and
transaction coordinators reached over the simulated network (`controller_link`,
`replica_fetch_link`, `txn_link`), its tasks the node's `SimTasks`.

Rules:
- The work a node process runs off its event loop runs on the virtual loop: bulk work and
  `asyncio.to_thread` inline (`VirtualLoop.run_in_executor`); the log manager's background
  tasks and log cleaner passes in one task of the node (`_log_tasks_on_the_loop`), every
  `LOG_TASKS_POLL_MS` of virtual time at most (a roll's segments are synced by the next pass,
  not by a wake-up); new logs' files made by the bulk work (no file maker process).
- The broker's timeouts read the loop's clock (`now_ms`), its record and file timestamps the
  node's wall clock when given; its randomness is a seeded `random.Random`: a seed replays
  the same run.
- A clean stop's controlled shutdown waits `CONTROLLED_SHUTDOWN_TIMEOUT_MS` at most.
- The broker's ReplicaFetch servicer is entered in `fetch_services` under its node id once
  built, where followers' fetches find it; the simulation removes it when the node goes down.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

from replog.clock import Clock
from replog.errors import KafkaStorageError
from replog.quorum.metadata.broker_lifecycle import BrokerLifecycleConfig
from replog.server.broker.broker_runtime import BrokerRuntime
from replog.server.config.data_plane_config import data_plane_config
from replog.server.controller.controller_service import ControllerService
from replog.server.data_plane.data_plane_host import DataPlaneHost
from replog.server.data_plane.replica_fetch_service import ReplicaFetchService
from replog.server.raft.raft_driver import RaftDriver
from replog.sim.controller_link import sim_controller_links
from replog.sim.network import SimNetwork
from replog.sim.replica_fetch_link import sim_fetch_streams
from replog.sim.sim_tasks import SimTasks
from replog.sim.txn_link import SimBrokerCalls
from replog.sim.virtual_loop import VirtualLoop
from replog.storage.log_manager import LogManager
from replog.storage.memory_fs import MemoryFileSystem

__all__ = ["LOG_DIR", "LOG_TASKS_POLL_MS", "simulated_broker"]

LOG_DIR = "/data"  # each node's partition logs on its own disk
LOG_TASKS_POLL_MS = 100
# A clean stop's controlled shutdown on the run's time scale (Kafka's 30 s would outlast the
# faults phase): the controller answers within a few heartbeats or the stop goes on without it.
CONTROLLED_SHUTDOWN_TIMEOUT_MS = 2_000


def _log_tasks_on_the_loop(
    loop: VirtualLoop, tasks: SimTasks
) -> Callable[[LogManager, Callable[[KafkaStorageError], None]], None]:
    """Runs a log manager's background tasks and cleaner passes in a task of the node."""

    def run(log_manager: LogManager, on_storage_error: Callable[[KafkaStorageError], None]) -> None:
        async def passes() -> None:
            while (due_ms := log_manager.background_pass(on_storage_error)) is not None:
                try:
                    log_manager.cleaner.clean_once(now_ms=loop.now_ms())
                except KafkaStorageError as error:
                    on_storage_error(error)
                    return
                wait_ms = min(max(1, due_ms - loop.now_ms()), LOG_TASKS_POLL_MS)
                await asyncio.sleep(wait_ms / 1000)

        tasks.spawn(passes(), name="the log manager's background tasks")

    return run


def simulated_host(
    node_id: int,
    *,
    loop: VirtualLoop,
    network: SimNetwork,
    disk: MemoryFileSystem,
    tasks: SimTasks,
    fetch_services: Mapping[int, ReplicaFetchService],
    wall_clock: Clock | None = None,
) -> DataPlaneHost:
    """What node `node_id`'s data plane runs on in the simulation (module Rules);
    `wall_clock`: the node's (record and file timestamps), the loop's when not given."""
    return DataPlaneHost(
        fs=disk,
        wall_clock=wall_clock or loop.now_ms,
        prepare_bulk_work=lambda: None,
        start_file_maker=lambda log_manager, broker_id: None,
        run_log_tasks=_log_tasks_on_the_loop(loop, tasks),
        on_logs_loaded=None,
        fetch_streams=sim_fetch_streams(network, node_id, fetch_services),
    )


def simulated_broker(
    config: BrokerLifecycleConfig,
    raft: RaftDriver,
    *,
    loop: VirtualLoop,
    network: SimNetwork,
    disk: MemoryFileSystem,
    rng: random.Random,
    incarnation_id: uuid.UUID,
    tasks: SimTasks,
    controller_services: Mapping[int, ControllerService],
    fetch_services: MutableMapping[int, ReplicaFetchService],
    properties: Mapping[str, str],
    brokers: Callable[[int], BrokerRuntime | None],
    serving: MutableMapping[asyncio.Task[Any], None] | None = None,
    wall_clock: Clock | None = None,
) -> BrokerRuntime:
    """Node `config.broker_id`'s broker role over its Raft driver `raft` (module docstring);
    `properties`: its Kafka-named settings (log, replica manager, transaction coordinator);
    `brokers`: the broker running at each node now (None: down), `serving` the run's calls
    between brokers being served (`txn_link`). Call before `raft.run`."""
    node_id = config.broker_id
    runtime = BrokerRuntime(
        config,
        {c: f"sim:{c}" for c in config.controller_ids},
        tasks=tasks,
        read_snapshot=raft.storage.read_whole_snapshot,
        high_watermark=raft.learned_high_watermark,
        clock=loop.now_ms,
        rng=rng,
        incarnation_id=incarnation_id,
        data_plane=data_plane_config((LOG_DIR,), properties),
        controlled_shutdown_timeout_ms=CONTROLLED_SHUTDOWN_TIMEOUT_MS,
        controller_links=sim_controller_links(network, node_id, controller_services),
        host=simulated_host(
            node_id,
            loop=loop,
            network=network,
            disk=disk,
            tasks=tasks,
            fetch_services=fetch_services,
            wall_clock=wall_clock,
        ),
        txn_calls=SimBrokerCalls(network, node_id, brokers, serving),
    )
    raft.add_stepped_listener(runtime.listener_steps)
    fetch_services[node_id] = runtime.replica_fetch_service
    return runtime
