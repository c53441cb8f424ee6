"""`replog sim`'s transactions (`txn_workload`, `txn_invariants`): the runs commit and abort
transactions across two partitions through the brokers' real transaction coordinators, fence
zombie producer instances and check every read_committed answer (each chunk of CI's seeds
does: `runs_reach`); the planted bugs the
transactional checks catch are in `test_whole_cluster_simulation`'s list, and here a
coordinator that never times a transaction out, beside a clock jumped 600 s ahead."""

from __future__ import annotations

import pytest
from planted_bug_seeds import caught_within

from replog.server.transactions.transaction_coordinator import TransactionCoordinator
from replog.sim.run import simulate


def test_a_run_whose_producers_never_found_a_coordinator_ends_with_the_state_topic() -> None:
    # Seed 2103: every FindCoordinator during the faults was lost or answered by a broker
    # whose data plane was starting, so no broker asked for __transaction_state before the
    # producers stopped; a producer starting after the faults asks, and the end checks find
    # the topic led and fully replicated (else `simulate` raises).
    assert simulate(2103).data["coordinator lookups after the faults"] > 0


def test_a_coordinator_that_never_times_out_is_caught_beside_a_clock_jumped_far_ahead(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Seed 191: a node's wall clock jumped 600 s ahead, which once turned the end's LSO check
    # off for the whole seed; the transaction left open at the end was stamped by another
    # clock, so its timeout is due within the bound and a coordinator that never times
    # transactions out leaves its partition's LSO below the high watermark.
    monkeypatch.setattr(TransactionCoordinator, "abort_timed_out_transactions", lambda self: 0)
    caught_within(range(191, 192), "transactions not finished")
