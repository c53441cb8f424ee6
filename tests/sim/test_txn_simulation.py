"""`replog sim`'s transactions (`txn_workload`, `txn_invariants`): the runs commit and abort
transactions across two partitions through the brokers' real transaction coordinators, fence
zombie producer instances and check every read_committed answer; the planted bugs the
transactional checks catch are in `test_whole_cluster_simulation`'s list."""

from __future__ import annotations

from replog.sim.run import simulate

SEEDS = range(10)  # seeds 0-9 at `06ff6417`: 18 commits, 5 aborts, 9 zombies fenced


def test_the_runs_run_transactions() -> None:
    totals: dict[str, int] = {}
    for seed in SEEDS:
        for what, count in simulate(seed).data.items():
            totals[what] = totals.get(what, 0) + count
    assert totals["transactions committed"] > 0
    assert totals["transactions aborted"] > 0
    assert totals["zombies fenced"] > 0
    assert totals["read_committed answers checked"] > 0
