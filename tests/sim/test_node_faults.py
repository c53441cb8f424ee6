"""`replog.sim.node_faults`: a node stops on its failed disk (and only then), keeping what
its process wrote or, after a failed fsync, what it synced; the cluster goes on without it and
takes it back once its disk is repaired; slow disks take virtual time; wall clocks jump while
the loop's clock does not."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from replog.sim.cluster import WALL_EPOCH_MS, SimCluster
from replog.sim.network import SimNetwork
from replog.sim.node_faults import NodeFaults
from replog.sim.virtual_loop import VirtualLoop

NODES = (1, 2, 3)


@pytest.fixture
def cluster() -> Iterator[SimCluster]:
    loop = VirtualLoop()
    made = SimCluster(NODES, loop, SimNetwork(loop, random.Random(1)), random.Random(2))
    yield made
    loop.run_until_complete(made.stop_all())
    loop.close()


def run_for(cluster: SimCluster, faults: NodeFaults, seconds: float) -> list[str]:
    """The loop for `seconds`, stopping failed nodes after each iteration as `simulate` does."""
    loop, events = cluster.loop, []
    end = loop.time() + seconds
    while loop.time() < end:
        loop.run_once()
        events += faults.stop_failed_nodes()
    return events


def leader(cluster: SimCluster) -> int:
    [found] = [n.node_id for n in cluster.up_nodes() if n.raft and n.raft.status().role == "leader"]
    return found


def start_all(cluster: SimCluster, faults: NodeFaults) -> None:
    async def start() -> None:
        for node_id in NODES:
            faults.start(node_id)

    cluster.loop.run_until_complete(start())
    run_for(cluster, faults, 3.0)


@pytest.mark.parametrize("kind", ["write", "sync", "full"])
def test_a_node_stops_on_its_failed_disk_and_comes_back_once_it_is_repaired(
    cluster: SimCluster, kind: str
) -> None:
    faults = NodeFaults(cluster, random.Random(3))
    start_all(cluster, faults)
    victim = leader(cluster)
    faults.fail_disk(victim, kind, rate=1.0)
    if kind == "full":
        cluster.nodes[victim].disk.fill_after(0)
    events = run_for(cluster, faults, 3.0)
    assert any(f"node {victim} stopped on its failed disk" in e for e in events), events
    assert not cluster.nodes[victim].up and faults.fail_stops >= 1
    assert leader(cluster) != victim  # the others elected without it
    assert all(not n.tasks.failures for n in cluster.nodes.values())
    # Started on its still failed disk it may fail again; repaired, it runs and catches up.
    faults.repair_disk()

    async def restart() -> str:
        return faults.start(victim)

    assert cluster.loop.run_until_complete(restart()) == f"start node {victim}"
    run_for(cluster, faults, 3.0)
    statuses = [n.raft.status() for n in cluster.up_nodes() if n.raft]
    assert len(statuses) == 3 and len({s.high_watermark for s in statuses}) == 1


def test_a_storage_error_on_a_healthy_disk_is_left_to_the_checker(cluster: SimCluster) -> None:
    faults = NodeFaults(cluster, random.Random(3))
    start_all(cluster, faults)
    victim = leader(cluster)
    cluster.nodes[victim].disk.fail_next("sync", times=100)  # not one of the run's faults
    run_for(cluster, faults, 2.0)
    assert cluster.nodes[victim].up and faults.fail_stops == 0
    assert any("KafkaStorageError" in f for f in cluster.nodes[victim].tasks.failures)


def test_a_slow_disk_takes_virtual_time_and_none_while_suspended(cluster: SimCluster) -> None:
    faults = NodeFaults(cluster, random.Random(3))
    faults.slow_disk(1)
    slow = faults.slow[1]
    disk, loop = cluster.nodes[1].disk, cluster.loop
    before = loop.time()
    disk.write_bytes("/f", b"x", fsync=True)  # on the loop: the loop's thread is held
    assert loop.time() - before == pytest.approx((slow.write_ms + slow.sync_ms) / 1000)
    with faults.suspended():
        disk.write_bytes("/f", b"y", fsync=True)
    assert loop.time() - before == pytest.approx((slow.write_ms + slow.sync_ms) / 1000)
    assert faults.slow_disk(1) == "disk of node 1 fast again" and not faults.slow


def test_a_wall_clock_jumps_and_the_loops_clock_does_not(cluster: SimCluster) -> None:
    faults = NodeFaults(cluster, random.Random(3))
    wall = cluster.wall_clock(2)
    assert wall() == WALL_EPOCH_MS
    what = faults.jump_clock(2)
    jump = cluster.nodes[2].wall_offset_ms
    assert what == f"wall clock of node 2 jumps {jump:+} ms" and jump != 0
    assert wall() == WALL_EPOCH_MS + jump and cluster.loop.now_ms() == 0
    assert cluster.wall_clock(1)() == WALL_EPOCH_MS


def test_a_disk_fails_on_a_known_operation_only(cluster: SimCluster) -> None:
    faults = NodeFaults(cluster, random.Random(3))
    with pytest.raises(ValueError, match="not 'rename'"):
        faults.fail_disk(1, "rename")
    assert faults.failed_disk is None
    assert faults.fail_disk(1, "read", rate=0.5) == "disk of node 1 fails: EIO on read at rate 0.5"
    with pytest.raises(OSError, match="Input/output error"):
        for _ in range(64):
            cluster.nodes[1].disk.read_bytes("/missing")
    assert faults.repair_disk() == "disk of node 1 repaired" and faults.repair_disk() is None


def test_healing_ends_every_disk_fault(cluster: SimCluster) -> None:
    faults = NodeFaults(cluster, random.Random(3))
    faults.fail_disk(2, "full")
    faults.slow_disk(3)
    faults.heal()
    assert faults.failed_disk is None and not faults.slow
    assert cluster.nodes[2].disk.capacity is None


def test_a_node_failed_by_its_disk_before_the_repair_stops_after_it_and_starts_again(
    cluster: SimCluster,
) -> None:
    faults = NodeFaults(cluster, random.Random(3))
    start_all(cluster, faults)
    victim = leader(cluster)
    faults.slow_disk(victim)  # the failed fsync's error reaches its task later
    faults.fail_disk(victim, "sync", rate=1.0)
    loop, events = cluster.loop, []
    while victim not in faults._failed_it:
        loop.run_once()
    faults.heal()  # the faults stop with the error still on its way
    end = loop.time() + 3.0
    while loop.time() < end:
        loop.run_once()
        events += faults.stop_failed_nodes()
    assert f"node {victim} starts again on its repaired disk" in events, events
    assert cluster.nodes[victim].up and faults.fail_stops == 1
    assert all(not n.tasks.failures for n in cluster.nodes.values())


def test_a_clean_restart_leaves_the_marker_with_the_broker_epoch_and_a_kill_none(
    cluster: SimCluster,
) -> None:
    """A clean stop writes the clean-shutdown marker with the epoch the broker registered
    with, which its next start reads (KIP-966's proof of a clean shutdown); a kill -9 none."""
    faults = NodeFaults(cluster, random.Random(3))
    start_all(cluster, faults)
    victim = next(i for i in NODES if i != leader(cluster))
    broker = cluster.nodes[victim].broker
    assert broker is not None
    epoch = broker.lifecycle.broker_epoch
    assert epoch is not None and epoch >= 0
    incarnation = cluster.nodes[victim].incarnation
    events = cluster.loop.run_until_complete(faults.clean_restart(victim))
    assert events == [f"clean stop of node {victim}", f"start node {victim}"]
    assert cluster.nodes[victim].incarnation == incarnation + 1 and faults.clean_restarts == 1
    run_for(cluster, faults, 3.0)
    restarted = cluster.nodes[victim].broker
    assert restarted is not None and restarted.log_manager is not None
    assert restarted.log_manager.previous_broker_epoch() == epoch
    assert all(not n.tasks.failures for n in cluster.nodes.values())
    cluster.kill(victim)

    async def restart() -> str:
        return faults.start(victim)

    cluster.loop.run_until_complete(restart())
    run_for(cluster, faults, 3.0)
    killed = cluster.nodes[victim].broker
    assert killed is not None and killed.log_manager is not None
    assert killed.log_manager.previous_broker_epoch() == -1
