"""The end-of-run transaction liveness of `replog sim` (`txn_liveness`, `txn_timeouts`): a
coordinator times a transaction out by its own wall clock against the start a coordinator's
wall clock stamped when the transaction began, as Kafka's, so the bound grows by how far that
stamp leads the clock that times it out, read per transaction from the coordinators' loaded
state; a transaction whose lead passes the cap leaves its partitions' LSOs unheld, and no
other. A read_committed consumer here waits at offset 11 below an open transaction until its
abort, at a chosen virtual time."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from types import SimpleNamespace

import pytest

from replog.coordinator.transaction_metadata import TxnMetadata, TxnState
from replog.sim.cluster import WALL_EPOCH_MS, SimNode
from replog.sim.data_invariants import DataChecker, TopicSpec
from replog.sim.invariants import InvariantViolation
from replog.sim.txn_invariants import TxnChecker
from replog.sim.txn_liveness import CLOCK_SKEW_MAX_S, transactions_finished
from replog.sim.txn_timeouts import clock_skew_ms
from replog.sim.virtual_loop import VirtualLoop
from replog.storage.memory_fs import MemoryFileSystem

TOPIC, BOUND_S = "txn", 15.0
TIMEOUT_MS = 3000  # the workload's transaction timeout
TIMEOUT_AND_ABORT_PASS_S = 3.5  # that and the abort interval
HELD = "read_committed partitions held to their end"


@pytest.fixture
def loop() -> Iterator[VirtualLoop]:
    loop = VirtualLoop()
    yield loop
    loop.close()


class Coordinator:
    """A node's transaction coordinator as the end reads it: its loaded state."""

    def __init__(self) -> None:
        self.shards: dict[int, dict[str, TxnMetadata]] = {}

    def loaded(self) -> dict[int, list[TxnMetadata]]:
        return {partition: list(metas.values()) for partition, metas in self.shards.items()}


def cluster(loop: VirtualLoop, *jumps: tuple[int, int]) -> SimpleNamespace:
    """Nodes 1-3, up, whose wall clocks jumped by `jumps` ((node, ms), in order)."""
    nodes = {i: SimNode(i, MemoryFileSystem()) for i in (1, 2, 3)}
    for node in nodes.values():
        node.broker = SimpleNamespace(transaction_coordinator=Coordinator())  # type: ignore[assignment]
    for node_id, jump_ms in jumps:
        nodes[node_id].jump_wall_clock(jump_ms)

    def wall_clock(node_id: int) -> object:
        return lambda: WALL_EPOCH_MS + loop.now_ms() + nodes[node_id].wall_offset_ms

    return SimpleNamespace(
        loop=loop,
        nodes=nodes,
        power_losses=[],
        up_nodes=lambda: list(nodes.values()),
        wall_clock=wall_clock,
    )


@dataclass
class Open:
    """A transaction left open in partition `index` at the run's start, its start stamped by a
    wall clock `stamp_ms` ahead, which its coordinator aborts `aborted_at_s` after the end
    check begins (None: never), its consumer reading the marker `read_after_s` later."""

    index: int
    stamp_ms: int
    aborted_at_s: float | None
    read_after_s: float = 0.0  # how long after the abort its consumer reads the marker


def the_end(nodes: SimpleNamespace, *txns: Open, coordinator: int | None = 1) -> TxnChecker:
    """`transactions_finished` over `txns`, each holding its partition's consumer at offset
    11 (high watermark 13), the state partition loaded at node `coordinator` (None: none)."""
    data = DataChecker(nodes, [TopicSpec(TOPIC, 2, 3, 2, flushed=False)])  # type: ignore[arg-type]
    checker = TxnChecker(nodes, data, 1)  # type: ignore[arg-type]
    shard: dict[str, TxnMetadata] = {}
    if coordinator is not None:
        nodes.nodes[coordinator].broker.transaction_coordinator.shards[0] = shard
    for txn in txns:
        view = checker.view(TOPIC, txn.index)
        view.position = view.last_stable = 11
        view.high_watermark = 13
        tid = f"t{txn.index}"
        shard[tid] = TxnMetadata(
            tid,
            txn.index,
            timeout_ms=TIMEOUT_MS,
            state=TxnState.ONGOING,
            partitions=frozenset({(TOPIC, txn.index)}),
            start_ms=WALL_EPOCH_MS + txn.stamp_ms,
        )

        def aborted(tid: str = tid) -> None:
            shard[tid] = TxnMetadata(tid, 0, state=TxnState.COMPLETE_ABORT)

        def read(view: object = view) -> None:
            # The ABORT marker at 13 read: the LSO at the high watermark.
            view.position = view.last_stable = view.high_watermark = 14  # type: ignore[attr-defined]

        if txn.aborted_at_s is not None:
            nodes.loop.call_later(txn.aborted_at_s, aborted)
            nodes.loop.call_later(txn.aborted_at_s + txn.read_after_s, read)
    nodes.loop.run_until_complete(transactions_finished(nodes, checker, BOUND_S))  # type: ignore[arg-type]
    return checker


def test_the_skew_is_how_far_a_clock_was_ahead_against_how_far_one_is_behind(
    loop: VirtualLoop,
) -> None:
    assert clock_skew_ms(cluster(loop)) == 0  # type: ignore[arg-type]
    assert clock_skew_ms(cluster(loop, (1, -30_000))) == 30_000  # type: ignore[arg-type]
    assert clock_skew_ms(cluster(loop, (3, 30_000))) == 30_000  # type: ignore[arg-type]
    # Ahead while it stamped, back since: its stamps still lead every clock by 30 s.
    assert clock_skew_ms(cluster(loop, (3, 30_000), (3, -30_000))) == 30_000  # type: ignore[arg-type]
    # Every clock jumped alike: no clock leads another.
    assert clock_skew_ms(cluster(loop, (1, 1_000), (2, 1_000), (3, 1_000))) == 0  # type: ignore[arg-type]


def test_a_start_stamped_by_a_clock_ahead_is_aborted_that_much_later_within_the_bound(
    loop: VirtualLoop,
) -> None:
    # Node 3's clock, 30 s ahead, stamped the start; node 1's, 1 s ahead, times it out: the
    # abort comes 29 s after the timeout, past the 15 s bound and within it grown by 29 s.
    checker = the_end(cluster(loop, (3, 30_000), (1, 1_000)), Open(0, 30_000, 32.5))
    assert checker.unfinished() == [] and checker.report()[HELD] == 1


def test_the_lead_of_an_aborted_transaction_still_covers_its_markers_being_read(
    loop: VirtualLoop,
) -> None:
    # Aborted 29 s late, its marker read 5 s after: the bound keeps the 29 s lead it saw.
    nodes = cluster(loop, (3, 30_000), (1, 1_000))
    assert the_end(nodes, Open(0, 30_000, 32.5, read_after_s=5)).unfinished() == []


def test_a_transaction_never_aborted_or_aborted_late_fails_the_check(loop: VirtualLoop) -> None:
    with pytest.raises(InvariantViolation, match=r"grown by 29.0 s.*\['txn-0: read up to 11"):
        the_end(cluster(loop, (3, 30_000), (1, 1_000)), Open(0, 30_000, None))
    with pytest.raises(InvariantViolation, match=r"grown by 0.0 s.*\['txn-0: read up to 11"):
        the_end(cluster(loop), Open(0, 0, BOUND_S + 1))
    # The lead is the stamp's over the coordinator's clock, not over the furthest behind one.
    with pytest.raises(InvariantViolation, match=r"grown by 0.0 s.*\['txn-0: read up to 11"):
        the_end(cluster(loop, (3, 30_000), (2, -30_000)), Open(0, 30_000, None), coordinator=3)


def test_a_coordinator_that_never_times_out_is_caught_beside_a_clock_jumped_far_ahead(
    loop: VirtualLoop,
) -> None:
    # Node 2's clock jumped 600 s ahead, past the cap, but stamped nothing: the coarse skew
    # (600 s) held no LSO, so a coordinator (node 1) that never aborted its transaction
    # passed; its own stamp leads its clock by nothing, so the LSO is held and it fails.
    nodes = cluster(loop, (2, 600_000))
    assert clock_skew_ms(nodes) > CLOCK_SKEW_MAX_S * 1000  # type: ignore[arg-type]
    with pytest.raises(InvariantViolation, match=r"grown by 0.0 s.*\['txn-0: read up to 11"):
        the_end(nodes, Open(0, 0, None))
    the_end(cluster(loop, (2, 600_000)), Open(0, 0, TIMEOUT_AND_ABORT_PASS_S))


def test_a_lead_past_the_cap_leaves_only_that_transactions_partitions_unheld(
    loop: VirtualLoop,
) -> None:
    # Node 2's clock, 600 s ahead, stamped the transaction in txn-0; node 1 times it out 600 s
    # on: txn-0's LSO is not held. txn-1's transaction, stamped by node 1, still must end.
    checker = the_end(cluster(loop, (2, 600_000)), Open(0, 600_000, None), Open(1, 0, 3.5))
    assert checker.lso_unheld == {(TOPIC, 0)} and checker.unfinished() == []
    assert checker.report()[HELD] == 1
    assert checker.report()["transactions whose abort lay past the end's cap"] == 1
    with pytest.raises(InvariantViolation, match=r"\['txn-1: read up to 11"):
        the_end(cluster(loop, (2, 600_000)), Open(0, 600_000, None), Open(1, 0, None))


def test_a_state_partition_loaded_nowhere_takes_the_coarse_skew(loop: VirtualLoop) -> None:
    # Unknown stamps: the most a clock may lead another (30 s) stands for them.
    checker = the_end(cluster(loop, (3, 30_000)), Open(0, 30_000, 40.0), coordinator=None)
    assert checker.lso_held and checker.unfinished() == []
    with pytest.raises(InvariantViolation, match=r"grown by 30.0 s, .*__transaction_state-0 not"):
        the_end(cluster(loop, (3, 30_000)), Open(0, 30_000, None), coordinator=None)
    # Past the cap, no LSO is held while it is loaded nowhere.
    checker = the_end(cluster(loop, (2, 600_000)), Open(0, 0, None), coordinator=None)
    assert not checker.lso_held and checker.report()[HELD] == 0
