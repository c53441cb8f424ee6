"""The end-of-run transaction liveness of `replog sim` (`txn_liveness`): a coordinator times a
transaction out by its own wall clock against the start a coordinator's wall clock stamped
when the transaction began, as Kafka's, so the bound grows by how far a stamping clock may
lead the clock that times the transaction out; with clocks too far apart the LSOs are not
held to their high watermarks. A read_committed consumer here waits at offset 11 below an
open transaction until its abort, at a chosen virtual time."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from replog.sim.cluster import SimNode
from replog.sim.data_invariants import DataChecker, TopicSpec
from replog.sim.invariants import InvariantViolation
from replog.sim.txn_invariants import TxnChecker
from replog.sim.txn_liveness import clock_skew_ms, transactions_finished
from replog.sim.virtual_loop import VirtualLoop
from replog.storage.memory_fs import MemoryFileSystem

TOPIC, BOUND_S = "txn", 15.0
TIMEOUT_AND_ABORT_PASS_S = 3.5  # the workload's transaction timeout and the abort interval


@pytest.fixture
def loop() -> Iterator[VirtualLoop]:
    loop = VirtualLoop()
    yield loop
    loop.close()


def cluster(loop: VirtualLoop, *jumps: tuple[int, int]) -> SimpleNamespace:
    """Nodes 1-3 whose wall clocks jumped by `jumps` ((node, ms), in order)."""
    nodes = {i: SimNode(i, MemoryFileSystem()) for i in (1, 2, 3)}
    for node_id, jump_ms in jumps:
        nodes[node_id].jump_wall_clock(jump_ms)
    return SimpleNamespace(loop=loop, nodes=nodes, power_losses=[], up_nodes=lambda: [])


def the_end(nodes: SimpleNamespace, aborted_at_s: float | None) -> TxnChecker:
    """`transactions_finished` over one partition whose open transaction (offset 11, high
    watermark 13) its coordinator aborts `aborted_at_s` after the check begins (None: never)."""
    data = DataChecker(nodes, [TopicSpec(TOPIC, 1, 3, 2, flushed=False)])  # type: ignore[arg-type]
    checker = TxnChecker(nodes, data, 1)  # type: ignore[arg-type]
    view = checker.view(TOPIC, 0)
    view.position = view.last_stable = 11
    view.high_watermark = 13

    def aborted() -> None:  # the ABORT marker at 13 read: the LSO at the high watermark
        view.position = view.last_stable = view.high_watermark = 14

    if aborted_at_s is not None:
        nodes.loop.call_later(aborted_at_s, aborted)
    nodes.loop.run_until_complete(transactions_finished(nodes, checker, BOUND_S))  # type: ignore[arg-type]
    return checker


def test_the_skew_is_how_far_a_clock_was_ahead_against_how_far_one_is_behind(
    loop: VirtualLoop,
) -> None:
    assert clock_skew_ms(cluster(loop)) == 0
    assert clock_skew_ms(cluster(loop, (1, -30_000))) == 30_000  # a timing clock set back
    assert clock_skew_ms(cluster(loop, (3, 30_000))) == 30_000  # a stamping clock ahead
    # Ahead while it stamped, back since: its stamps still lead every clock by 30 s.
    assert clock_skew_ms(cluster(loop, (3, 30_000), (3, -30_000))) == 30_000
    assert clock_skew_ms(cluster(loop, (3, 30_000), (3, -30_000), (3, -1_000))) == 31_000
    # Every clock jumped alike: no clock leads another.
    assert clock_skew_ms(cluster(loop, (1, 1_000), (2, 1_000), (3, 1_000))) == 0


def test_a_start_stamped_by_a_clock_ahead_is_aborted_that_much_later_within_the_bound(
    loop: VirtualLoop,
) -> None:
    # Node 3's clock, 30 s ahead, stamped the start; node 1's, 1 s ahead, times it out: the
    # abort comes 29 s after the timeout, past the 15 s bound and within it grown by 30 s.
    nodes = cluster(loop, (3, 30_000), (1, 1_000))
    checker = the_end(nodes, 29 + TIMEOUT_AND_ABORT_PASS_S)
    assert checker.lso_held and checker.unfinished() == []


def test_a_transaction_never_aborted_or_aborted_late_fails_the_check(loop: VirtualLoop) -> None:
    with pytest.raises(InvariantViolation, match=r"by 30 s at most\): \['txn-0: read up to 11"):
        the_end(cluster(loop, (3, 30_000)), None)
    with pytest.raises(InvariantViolation, match=r"by 0 s at most\): \['txn-0: read up to 11"):
        the_end(cluster(loop), BOUND_S + 1)


def test_clocks_further_apart_than_the_skews_cap_hold_no_lso(loop: VirtualLoop) -> None:
    checker = the_end(cluster(loop, (2, 600_000)), None)
    assert not checker.lso_held
    assert checker.report()["read_committed partitions held to their end"] == 0
