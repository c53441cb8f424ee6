"""The real Raft driver (`replog.server.raft.raft_driver`) and its storage on the simulator's
virtual loop, network and in-memory disks: three nodes elect a leader, commit what it is asked,
elect another when it is cut off, and keep every commit through a power loss of every node;
a seed replays the same run."""

from __future__ import annotations

import asyncio
import random

import pytest

from replog.errors import KafkaError
from replog.quorum.raft import RaftConfig, VoterAddress
from replog.server.raft.raft_driver import RaftDriver
from replog.sim.network import NetworkFaults, SimNetwork
from replog.sim.raft_node import simulated_raft_driver
from replog.sim.virtual_loop import VirtualLoop
from replog.storage.memory_fs import MemoryFileSystem

VOTERS = (1, 2, 3)


def _config() -> RaftConfig:
    return RaftConfig(
        voters=tuple(VoterAddress(i, "sim", 9000 + i) for i in VOTERS),
        election_timeout_ms=100,
        fetch_timeout_ms=200,
        election_backoff_ms_max=100,
        election_backoff_ms_base=10,
        request_timeout_ms=80,
        retry_backoff_ms=10,
        fetch_wait_ms_max=40,
    )


def _run(seed: int, faults: NetworkFaults) -> list[tuple[int, str]]:
    """One simulated run: what happened, at which virtual millisecond."""
    rng = random.Random(seed)
    loop = VirtualLoop()
    network = SimNetwork(loop, random.Random(rng.getrandbits(64)), faults)
    trace: list[tuple[int, str]] = []
    disks = {i: MemoryFileSystem(clock=loop.now_ms) for i in VOTERS}

    def start(i: int) -> RaftDriver:
        return simulated_raft_driver(
            i,
            VOTERS,
            _config(),
            loop=loop,
            network=network,
            disk=disks[i],
            rng=random.Random(rng.getrandbits(64)),
        )

    async def main() -> None:
        drivers = {i: start(i) for i in VOTERS}
        runs = {i: asyncio.create_task(d.run(), name=f"raft-{i}") for i, d in drivers.items()}

        async def leader() -> RaftDriver:
            while True:
                leaders = {d.status().leader_id for d in drivers.values()} - {None}
                for driver in drivers.values():
                    status = driver.status()
                    if status.role == "leader" and leaders == {status.node_id}:
                        return driver
                await asyncio.sleep(0.01)

        async def commit(count: int) -> None:
            done = 0
            while done < count:
                driver = await leader()
                try:
                    result = await driver.append_and_wait([b"%d" % done], timeout_ms=2000)
                except KafkaError as exc:
                    trace.append((loop.now_ms(), f"retry after {type(exc).__name__}"))
                    continue
                trace.append((loop.now_ms(), f"committed {done} at {result.base_offset}"))
                done += 1

        async def power_loss() -> None:
            """Every node loses what it had not synced at once, then starts again."""
            for i, driver in drivers.items():
                await driver.stop(graceful=False)
                await runs[i]
            for i in VOTERS:
                disks[i] = disks[i].crash(random.Random(rng.getrandbits(64)))
                drivers[i] = start(i)
                runs[i] = asyncio.create_task(drivers[i].run(), name=f"raft-{i}")

        first = await leader()
        trace.append((loop.now_ms(), f"leader {first.node_id}"))
        await commit(20)
        others = [i for i in VOTERS if i != first.node_id]
        network.partition([[first.node_id], others])
        await asyncio.sleep(2)
        second = await leader()
        trace.append((loop.now_ms(), f"leader {second.node_id} after the cut"))
        assert second.node_id != first.node_id
        await commit(20)
        network.heal()
        committed = second.status().high_watermark
        await power_loss()
        await commit(5)
        await asyncio.sleep(2)
        ends = {d.status().high_watermark for d in drivers.values()}
        trace.append((loop.now_ms(), f"high watermarks {sorted(ends)}"))
        assert min(ends) >= committed + 5  # nothing committed before the power loss was lost
        for driver in drivers.values():
            await driver.stop(graceful=False)
        for run in runs.values():
            await run
        # Every node holds the same committed log, byte for byte.
        logs = {d.read_committed(0, 1 << 20)[0] for d in drivers.values()}
        for driver in drivers.values():
            driver.storage.close()
        assert len(logs) == 1

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    return trace


@pytest.mark.parametrize(
    "faults",
    [NetworkFaults(), NetworkFaults(drop_rate=0.05, duplicate_rate=0.05, delay_ms_max=20)],
    ids=["healthy", "lossy"],
)
def test_three_real_drivers_elect_commit_fail_over_and_survive_a_power_loss(
    faults: NetworkFaults,
) -> None:
    trace = _run(11, faults)
    assert sum("committed" in what for _, what in trace) == 45
    assert trace[-1][1].startswith("high watermarks")
    assert len(set(trace[-1][1].split("[")[1].rstrip("]").split(", "))) == 1  # all caught up


def test_a_seed_replays_the_same_run() -> None:
    faults = NetworkFaults(drop_rate=0.05, duplicate_rate=0.05, delay_ms_max=20)
    assert _run(5, faults) == _run(5, faults)
