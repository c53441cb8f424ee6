"""`simulated_raft_driver`: a node's real `RaftDriver` and `RaftStorage`, wired to a
simulation: its clocks are the virtual loop's, its disk the node's in-memory file system, its
link the simulated network, its randomness a seeded `random.Random`."""

from __future__ import annotations

import random
from collections.abc import Sequence

from replog.clock import Clock
from replog.quorum.raft import RaftConfig
from replog.server.raft.raft_driver import RaftDriver
from replog.server.raft.raft_storage import RaftStorage
from replog.sim.network import SimNetwork
from replog.sim.raft_link import sim_raft_links
from replog.sim.sim_tasks import SimTasks
from replog.sim.virtual_loop import VirtualLoop
from replog.storage.memory_fs import MemoryFileSystem

__all__ = ["METADATA_DIR", "simulated_raft_driver"]

METADATA_DIR = "/metadata"  # each node's metadata log directory on its own disk


def simulated_raft_driver(
    node_id: int,
    voter_ids: Sequence[int],
    config: RaftConfig,
    *,
    loop: VirtualLoop,
    network: SimNetwork,
    disk: MemoryFileSystem,
    rng: random.Random,
    tasks: SimTasks | None = None,
    wall_clock: Clock | None = None,
) -> RaftDriver:
    """Node `node_id`'s Raft driver over `disk`, as a restart finds it (module docstring);
    `tasks`: the node's background tasks; `wall_clock`: its wall clock (the loop's unless
    given: a node's own may jump), which its log's timestamps and batch times read."""
    wall_clock = wall_clock or loop.now_ms
    return RaftDriver(
        node_id,
        config,
        RaftStorage(METADATA_DIR, voter_ids, fs=disk, clock=wall_clock),
        tasks=tasks or SimTasks(),
        clock=loop.now_ms,
        wall_clock=wall_clock,
        rng=rng,
        transport=sim_raft_links(network),
        turn_clock=loop.time,
    )
