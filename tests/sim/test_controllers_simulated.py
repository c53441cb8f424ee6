"""The real controller shells (`ControllerDriver`, `ControllerService`) on three simulated
nodes, and each node's real broker lifecycle (`BrokerLifecycleDriver`) reaching them over the
simulated network: the brokers register and are unfenced, a broker cut off from the active
controller is fenced while the others stay unfenced under a new controller, and it is
unfenced again once the cut heals; a seed replays the same run."""

from __future__ import annotations

import asyncio
import random

from sim_node_configs import NODES, lifecycle_config, quorum_node

from replog.pb import controller_pb2 as pb
from replog.server.broker.broker_lifecycle_driver import BrokerLifecycleDriver
from replog.server.controller.controller_service import ControllerService
from replog.server.raft.raft_driver import RaftDriver
from replog.sim.controller_link import sim_controller_links
from replog.sim.network import NetworkFaults, SimNetwork
from replog.sim.virtual_loop import VirtualLoop
from replog.storage.memory_fs import MemoryFileSystem
from replog.testing import LoopTasks


def _run(seed: int, faults: NetworkFaults) -> list[tuple[int, str]]:
    rng = random.Random(seed)
    loop = VirtualLoop()
    network = SimNetwork(loop, random.Random(rng.getrandbits(64)), faults)
    services: dict[int, ControllerService] = {}
    trace: list[tuple[int, str]] = []

    async def main() -> None:
        rafts: dict[int, RaftDriver] = {}
        lifecycles: dict[int, BrokerLifecycleDriver] = {}
        for i in NODES:
            raft, services[i] = quorum_node(
                i, loop=loop, network=network, disk=MemoryFileSystem(clock=loop.now_ms), rng=rng
            )
            rafts[i] = raft
            lifecycles[i] = BrokerLifecycleDriver(
                lifecycle_config(i),
                {c: f"sim:{9000 + c}" for c in NODES},
                tasks=LoopTasks(),
                clock=loop.now_ms,
                rng=random.Random(rng.getrandbits(64)),
                controller_links=sim_controller_links(network, i, services),
            )
        tasks = [asyncio.create_task(raft.run()) for raft in rafts.values()]

        async def follow_metadata() -> None:
            # Stands in for each broker's metadata publisher: the lifecycle hears of the
            # metadata its node has committed.
            while True:
                for i in NODES:
                    lifecycles[i].update_metadata_offset(rafts[i].status().high_watermark - 1)
                await asyncio.sleep(0.05)

        follower = asyncio.create_task(follow_metadata())
        for lifecycle in lifecycles.values():
            lifecycle.set_ready_to_unfence()
            lifecycle.start()

        async def fenced_at_controller() -> dict[int, bool]:
            while True:
                for service in services.values():
                    answer = await service.DescribeCluster(pb.DescribeClusterRequest(), None)
                    if not answer.error.code and answer.controller_id in NODES:
                        return {b.broker_id: b.fenced for b in answer.brokers}
                await asyncio.sleep(0.05)

        async def until(expected: dict[int, bool], what: str) -> None:
            while (seen := await fenced_at_controller()) != expected:
                await asyncio.sleep(0.1)
            trace.append((loop.now_ms(), f"{what}: fenced {seen}"))

        await until({1: False, 2: False, 3: False}, "started")
        leader = next(r.status().leader_id for r in rafts.values() if r.status().leader_id)
        others = [i for i in NODES if i != leader]
        network.partition([[leader], others])
        await until({**{i: False for i in others}, leader: True}, f"node {leader} cut off")
        network.heal()
        await until({1: False, 2: False, 3: False}, "healed")
        follower.cancel()
        for lifecycle in lifecycles.values():
            await lifecycle.stop()
        for raft in rafts.values():
            await raft.stop(graceful=False)
        await asyncio.gather(*tasks, return_exceptions=True)
        for raft in rafts.values():
            raft.storage.close()

    try:
        loop.run_until_complete(asyncio.wait_for(main(), timeout=120))
    finally:
        loop.close()
    return trace


def test_brokers_register_are_fenced_when_cut_off_and_unfenced_after() -> None:
    trace = _run(3, NetworkFaults(drop_rate=0.02, delay_ms_max=10))
    assert trace[0][1].startswith("started")
    assert "cut off" in trace[1][1] and trace[2][1].startswith("healed")


def test_a_seed_replays_the_same_controller_run() -> None:
    faults = NetworkFaults(drop_rate=0.02, delay_ms_max=10)
    assert _run(4, faults) == _run(4, faults)
