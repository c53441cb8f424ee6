"""`DataChecker.observe` and `loss_excuse`: a committed batch found replaced is excused exactly
in the cases `replog.sim.data_invariants` names, with the batch's send time read from its
record timestamp (the clients' wall clock) on the loop's scale, as power losses are timed."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from replog.record import build_batch
from replog.sim.cluster import SimCluster
from replog.sim.data_invariants import DataChecker, PartitionHistory, TopicSpec
from replog.sim.invariants import InvariantViolation
from replog.sim.network import SimNetwork
from replog.sim.virtual_loop import VirtualLoop

TOPIC = "data"
REPLICAS = (1, 2, 3)
LEADER = 2


@pytest.fixture
def cluster() -> Iterator[SimCluster]:
    loop = VirtualLoop(start_s=5.0)  # virtual ms and wall-clock ms far apart from the start
    yield SimCluster(REPLICAS, loop, SimNetwork(loop, random.Random(1)), random.Random(2))
    loop.close()


def _checker(cluster: SimCluster, *, flushed: bool = False) -> tuple[DataChecker, PartitionHistory]:
    spec = TopicSpec(TOPIC, 1, len(REPLICAS), min_isr=2, flushed=flushed)
    checker = DataChecker(cluster, [spec])
    history = checker.histories[(TOPIC, 0)] = PartitionHistory(REPLICAS, 2, flushed)
    return checker, history


def _batch(cluster: SimCluster, value: bytes) -> bytes:
    return build_batch([(cluster.client_wall_clock(), None, value, ())], producer_id=-1)


def _advance_ms(cluster: SimCluster, ms: int) -> None:
    cluster.loop.block(ms / 1000)  # the virtual clock moves on, nothing runs


def _replaced_after(cluster: SimCluster, *, lost_power: bool, elected_short: bool) -> DataChecker:
    """A batch sent and committed, then (`lost_power`) the leader's power loss and
    (`elected_short`) its election with an ISR below min.insync.replicas, then another batch
    at its offset: the checker that saw all this (or raised)."""
    checker, history = _checker(cluster)
    sent = _batch(cluster, b"acked")
    _advance_ms(cluster, 20)
    checker.observe(TOPIC, 0, sent, "node 1's replica")
    _advance_ms(cluster, 30)
    if lost_power:
        cluster.power_losses.append((cluster.loop.now_ms(), LEADER))
    _advance_ms(cluster, 30)
    if elected_short:
        history.short_isr_leaders.append((LEADER, cluster.loop.now_ms()))
    _advance_ms(cluster, 30)
    checker.observe(TOPIC, 0, _batch(cluster, b"other"), f"node {LEADER}'s replica")
    return checker


def test_a_power_lost_last_replica_elected_alone_excuses_what_it_had_not_synced(
    cluster: SimCluster,
) -> None:
    checker = _replaced_after(cluster, lost_power=True, elected_short=True)
    assert checker.excused == 1
    assert b"other" in checker.histories[(TOPIC, 0)].batches[0]  # the history goes on from it


@pytest.mark.parametrize(
    ("lost_power", "elected_short"), [(False, True), (True, False), (False, False)]
)
def test_a_replacement_is_a_break_without_both_the_power_loss_and_the_short_election(
    cluster: SimCluster, lost_power: bool, elected_short: bool
) -> None:
    with pytest.raises(InvariantViolation, match="committed data lost or replaced"):
        _replaced_after(cluster, lost_power=lost_power, elected_short=elected_short)


def test_a_power_loss_before_the_batch_was_sent_excuses_nothing(cluster: SimCluster) -> None:
    checker, history = _checker(cluster)
    cluster.power_losses.append((cluster.loop.now_ms(), LEADER))
    _advance_ms(cluster, 10)
    sent = _batch(cluster, b"acked")
    written = cluster.client_time_to_virtual_ms(cluster.client_wall_clock())
    _advance_ms(cluster, 10)
    history.short_isr_leaders.append((LEADER, cluster.loop.now_ms()))
    assert checker.loss_excuse(history, written, written) is None
    checker.observe(TOPIC, 0, sent, "node 1's replica")
    with pytest.raises(InvariantViolation, match="offset 0"):
        checker.observe(TOPIC, 0, _batch(cluster, b"other"), f"node {LEADER}'s replica")


def test_flushed_topics_are_never_excused(cluster: SimCluster) -> None:
    checker, history = _checker(cluster, flushed=True)
    sent_ms = cluster.loop.now_ms()
    for node in REPLICAS:
        cluster.power_losses.append((sent_ms + 1, node))
    history.short_isr_leaders.append((LEADER, sent_ms + 2))
    assert checker.loss_excuse(history, sent_ms, sent_ms) is None


def test_more_power_losses_than_the_replicas_above_min_isr_excuse_a_loss(
    cluster: SimCluster,
) -> None:
    checker, history = _checker(cluster)
    acked_ms = cluster.loop.now_ms()
    cluster.power_losses.append((acked_ms + 1, 1))
    assert checker.loss_excuse(history, acked_ms, acked_ms) is None
    cluster.power_losses.append((acked_ms + 2, 3))
    assert checker.loss_excuse(history, acked_ms, acked_ms) is not None


def test_a_record_timestamp_reads_back_as_the_virtual_ms_it_was_stamped_at(
    cluster: SimCluster,
) -> None:
    _advance_ms(cluster, 1234)
    now = cluster.loop.now_ms()
    assert cluster.client_time_to_virtual_ms(cluster.client_wall_clock()) == now
