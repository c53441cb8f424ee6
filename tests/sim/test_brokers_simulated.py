"""The real broker data plane on three simulated nodes: each node runs its real Raft driver,
controller and `BrokerRuntime` (replica manager, fetchers over the simulated network,
AlterPartition sender, request cores) on an in-memory disk, under one seed. A topic with
replication factor 3 and min.insync.replicas=2 is created through the controller; acks=all
produces on its leader complete; a follower cut off drops out of the ISR while acks=all still
completes; healed, it catches up and rejoins; every replica holds the same bytes below the
high watermark; a seed replays the same run. No thread or child process starts, no real
clock is read and no operating-system call names a simulated node's directory."""

from __future__ import annotations

import asyncio
import random
import sys
import threading
import time
import uuid
from collections.abc import Callable
from unittest import mock

from sim_node_configs import NODES, lifecycle_config, quorum_node

from replog import clock
from replog.pb import controller_pb2 as pb
from replog.quorum.metadata.broker_lifecycle import LifecycleState
from replog.record import build_batch
from replog.replication import messages as m
from replog.server.broker.broker_runtime import BrokerRuntime
from replog.server.controller.controller_service import ControllerService
from replog.server.data_plane.partition import Partition
from replog.server.data_plane.replica_fetch_service import ReplicaFetchService
from replog.server.raft.raft_driver import RaftDriver
from replog.sim.broker_node import LOG_DIR, simulated_broker
from replog.sim.network import NetworkFaults, SimNetwork
from replog.sim.raft_node import METADATA_DIR
from replog.sim.sim_tasks import SimTasks
from replog.sim.virtual_loop import VirtualLoop
from replog.storage.log import Log
from replog.storage.memory_fs import MemoryFileSystem

TOPIC = "orders"
# A lost message costs a follower its fetch's wait, timeout and backoff (600 ms), a broker its
# heartbeat's timeout and a retry elsewhere: both well within the ISR's and the session's
# bounds, so that only the cut-off node leaves the ISR and is fenced.
BROKER_PROPERTIES = {
    "replica.lag.time.max.ms": "1000",
    "replica.fetch.wait.max.ms": "200",
    "replica.socket.timeout.ms": "300",
    "replica.fetch.backoff.ms": "100",
}
SESSION_TIMEOUT_MS = 3000
# What the run did: (virtual time in ms, what, figures of it).
Event = tuple[int, str, tuple[object, ...]]
# The simulated nodes' directories: no operating-system call may name one (the disks are
# in memory), and no child process may start; `_os_calls_on_sim_paths` hears of any.
SIM_ROOTS = (LOG_DIR, METADATA_DIR)
CHILD_PROCESS_EVENTS = ("subprocess.Popen", "os.fork", "os.posix_spawn", "os.exec")
_os_calls_on_sim_paths: list[tuple[str, str]] | None = None


def _audit(event: str, args: tuple[object, ...]) -> None:
    seen = _os_calls_on_sim_paths
    if seen is None:
        return
    if event.startswith(CHILD_PROCESS_EVENTS):
        seen.append((event, "a child process"))
        return
    if not (event == "open" or event.startswith(("os.", "shutil."))):
        return
    for arg in args:
        if isinstance(arg, bytes):
            arg = arg.decode(errors="replace")
        if isinstance(arg, str) and arg.startswith(SIM_ROOTS):
            seen.append((event, arg))


sys.addaudithook(_audit)


def _run(seed: int, faults: NetworkFaults) -> list[Event]:
    rng = random.Random(seed)
    loop = VirtualLoop()
    network = SimNetwork(loop, random.Random(rng.getrandbits(64)), faults)
    controller_services: dict[int, ControllerService] = {}
    fetch_services: dict[int, ReplicaFetchService] = {}
    trace: list[Event] = []

    async def main() -> None:
        rafts: dict[int, RaftDriver] = {}
        brokers: dict[int, BrokerRuntime] = {}
        node_tasks = {i: SimTasks() for i in NODES}
        for i in NODES:
            raft, controller_services[i] = quorum_node(
                i,
                loop=loop,
                network=network,
                disk=(disk := MemoryFileSystem(clock=loop.now_ms)),
                rng=rng,
                tasks=node_tasks[i],
                session_timeout_ms=SESSION_TIMEOUT_MS,
            )
            rafts[i] = raft
            brokers[i] = simulated_broker(
                lifecycle_config(i, SESSION_TIMEOUT_MS),
                raft,
                loop=loop,
                network=network,
                disk=disk,
                rng=random.Random(rng.getrandbits(64)),
                incarnation_id=uuid.UUID(int=rng.getrandbits(128)),
                tasks=node_tasks[i],
                controller_services=controller_services,
                fetch_services=fetch_services,
                properties=BROKER_PROPERTIES,
                brokers=brokers.get,
            )
        raft_runs = [asyncio.create_task(raft.run()) for raft in rafts.values()]
        for broker in brokers.values():
            await broker.start()

        async def until(done: Callable[[], bool], what: str) -> None:
            while not done():
                await asyncio.sleep(0.05)
            trace.append((loop.now_ms(), what, ()))

        def replica(i: int) -> Partition | None:
            rm = brokers[i].replica_manager
            return None if rm is None else rm.partition(TOPIC, 0)

        def log_of(i: int) -> Log:
            hosted = replica(i)
            assert hosted is not None, f"broker {i} hosts no replica of {TOPIC}-0"
            return hosted.log

        def leader_isr() -> tuple[int, tuple[int, ...]] | None:
            """The leader and ISR in the image of the broker that leads (its replica too)."""
            for i in NODES:
                p = replica(i)
                topic = brokers[i].image.topics.by_name.get(TOPIC)
                if p is not None and p.is_leader and topic is not None:
                    registration = topic.partitions[0]
                    if registration.leader == i:
                        return i, tuple(sorted(registration.isr))
            return None

        await until(
            lambda: all(b.state is LifecycleState.RUNNING for b in brokers.values()),
            "every broker unfenced",
        )
        while True:  # the active controller answers; the others say which one it is
            answers = [
                await s.CreateTopics(
                    pb.CreateTopicsRequest(
                        topics=[
                            pb.CreatableTopic(
                                name=TOPIC,
                                num_partitions=1,
                                replication_factor=3,
                                configs={"min.insync.replicas": "2"},
                            )
                        ]
                    ),
                    None,
                )
                for s in controller_services.values()
            ]
            if any(not a.error.code and not a.topics[0].error.code for a in answers):
                break
            await asyncio.sleep(0.1)
        await until(
            lambda: (state := leader_isr()) is not None and state[1] == NODES,
            "topic created, full ISR",
        )
        leader, _ = leader_isr() or (-1, ())
        raft_leader = next(r.status().leader_id for r in rafts.values() if r.status().leader_id)
        followers = [i for i in NODES if i != leader]
        cut = next((i for i in followers if i != raft_leader), followers[0])
        sent = 0

        async def produce(count: int, what: str) -> None:
            nonlocal sent
            for _ in range(count):
                batch = build_batch([(loop.now_ms(), None, f"record {sent}".encode(), ())])
                answer = await brokers[leader].service.produce(
                    m.ProduceRequest(-1, 30_000, (m.ProducePartition(TOPIC, 0, batch),))
                )
                assert answer is not None
                (result,) = answer.partitions
                assert result.error is None, result.error
                assert result.base_offset == sent
                sent += 1
            trace.append((loop.now_ms(), what, (sent,)))

        await produce(20, "acks=all with a full ISR")
        network.partition([[cut], [i for i in NODES if i != cut]])
        trace.append((loop.now_ms(), f"node {cut} cut off", ()))
        await produce(20, "acks=all with a follower cut off")
        shrunk = tuple(i for i in NODES if i != cut)
        await until(lambda: leader_isr() == (leader, shrunk), f"ISR shrank to {shrunk}")
        assert sent == 40
        network.heal()
        trace.append((loop.now_ms(), "healed", ()))
        await until(lambda: leader_isr() == (leader, NODES), "ISR expanded to all")
        await produce(10, "acks=all after the heal")

        high_watermark = log_of(leader).high_watermark
        assert high_watermark == sent
        await until(
            lambda: all(log_of(i).log_end_offset >= high_watermark for i in NODES),
            "every replica holds the acknowledged records",
        )
        images = {i: log_of(i).read(0, 1 << 20, high_watermark) for i in NODES}
        assert images[1] == images[2] == images[3]
        assert len(images[leader]) > 0
        trace.append(
            (
                loop.now_ms(),
                "replicas identical below the high watermark",
                (
                    high_watermark,
                    len(images[leader]),
                    (network.sent, network.delivered, network.dropped),
                ),
            )
        )

        for broker in brokers.values():
            await broker.stop(graceful=False)
        for raft in rafts.values():
            await raft.stop(graceful=False)
        await asyncio.gather(*raft_runs, return_exceptions=True)
        for tasks in node_tasks.values():
            tasks.cancel_all()
        for raft in rafts.values():
            raft.storage.close()

    global _os_calls_on_sim_paths
    os_calls: list[tuple[str, str]] = []
    _os_calls_on_sim_paths = os_calls
    threads: list[str] = []
    start_thread = threading.Thread.start

    def thread_started(thread: threading.Thread) -> None:
        threads.append(thread.name)
        start_thread(thread)

    clock_reads: list[str] = []

    class ClockReads:
        """`time` as the clock seam (`replog.clock`) sees it: a read is noted."""

        def __getattr__(self, name: str) -> object:
            clock_reads.append(name)
            return getattr(time, name)

    try:
        with (
            mock.patch.object(threading.Thread, "start", thread_started),
            mock.patch.object(clock, "time", ClockReads()),
        ):
            loop.run_until_complete(asyncio.wait_for(main(), timeout=300))
    finally:
        _os_calls_on_sim_paths = None
        loop.close()
    assert os_calls == [], f"the operating system was asked for a simulated node: {os_calls}"
    assert threads == [], f"the simulation started threads: {threads}"
    assert clock_reads == [], f"a shell read the real clock, not the loop's: {clock_reads}"
    return trace


def test_acks_all_survives_a_follower_cut_off_and_replicas_agree() -> None:
    trace = _run(5, NetworkFaults(drop_rate=0.01, delay_ms_max=10))
    events = [entry[1] for entry in trace]
    at_ms = {entry[1]: entry[0] for entry in trace}
    assert events[0] == "every broker unfenced"
    # acks=all waited for the cut follower to leave the ISR (replica.lag.time.max.ms), then
    # completed with the two replicas min.insync.replicas asks for.
    cut = next(e for e in events if e.endswith("cut off"))
    assert at_ms["acks=all with a follower cut off"] - at_ms[cut] >= 900
    assert "topic created, full ISR" in events
    assert events.index("healed") < events.index("ISR expanded to all")
    assert events[-1] == "replicas identical below the high watermark"


def test_a_seed_replays_the_same_broker_run() -> None:
    faults = NetworkFaults(drop_rate=0.01, delay_ms_max=10)
    assert _run(6, faults) == _run(6, faults)
