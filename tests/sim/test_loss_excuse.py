"""`DataChecker.observe` and `loss_excuse`: a committed batch found replaced is excused exactly
in the case `replog.sim.data_invariants` names (more power losses than the replicas above min
ISR), and a record timestamp (the clients' wall clock) reads back on the loop's scale, as power
losses are timed."""

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


def test_a_power_lost_replica_leading_again_is_not_excused(cluster: SimCluster) -> None:
    """The last replica standing lost power after the batch was committed and led again (ISR
    below min.insync.replicas): KIP-966 keeps it from leading, so a replacement is a break."""
    checker, _ = _checker(cluster)
    checker.observe(TOPIC, 0, _batch(cluster, b"acked"), "node 1's replica")
    _advance_ms(cluster, 30)
    cluster.power_losses.append((cluster.loop.now_ms(), LEADER))
    _advance_ms(cluster, 30)
    with pytest.raises(InvariantViolation, match="committed data lost or replaced"):
        checker.observe(TOPIC, 0, _batch(cluster, b"other"), f"node {LEADER}'s replica")


def test_a_power_loss_before_the_batch_was_sent_excuses_nothing(cluster: SimCluster) -> None:
    checker, history = _checker(cluster)
    cluster.power_losses.append((cluster.loop.now_ms(), LEADER))
    _advance_ms(cluster, 10)
    sent = _batch(cluster, b"acked")
    written = cluster.client_time_to_virtual_ms(cluster.client_wall_clock())
    _advance_ms(cluster, 10)
    assert checker.loss_excuse(history, written) is None
    checker.observe(TOPIC, 0, sent, "node 1's replica")
    with pytest.raises(InvariantViolation, match="offset 0"):
        checker.observe(TOPIC, 0, _batch(cluster, b"other"), f"node {LEADER}'s replica")


def test_flushed_topics_are_never_excused(cluster: SimCluster) -> None:
    checker, history = _checker(cluster, flushed=True)
    sent_ms = cluster.loop.now_ms()
    for node in REPLICAS:
        cluster.power_losses.append((sent_ms + 1, node))
    assert checker.loss_excuse(history, sent_ms) is None


def test_more_power_losses_than_the_replicas_above_min_isr_excuse_a_loss(
    cluster: SimCluster,
) -> None:
    checker, history = _checker(cluster)
    acked_ms = cluster.loop.now_ms()
    cluster.power_losses.append((acked_ms + 1, 1))
    assert checker.loss_excuse(history, acked_ms) is None
    cluster.power_losses.append((acked_ms + 2, 3))
    assert checker.loss_excuse(history, acked_ms) is not None


def test_a_record_timestamp_reads_back_as_the_virtual_ms_it_was_stamped_at(
    cluster: SimCluster,
) -> None:
    _advance_ms(cluster, 1234)
    now = cluster.loop.now_ms()
    assert cluster.client_time_to_virtual_ms(cluster.client_wall_clock()) == now
