"""`DataChecker.check_fenced`: an answer without an error comes from a replica leading the
epoch the fetch names; a parked fetch's answer, which its caller sees one loop iteration after
the purgatory gave it, may come from a replica that stopped leading in that iteration, never
from one that stopped earlier (replog.sim.data_invariants, Rules)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from replog.errors import FencedLeaderEpochError
from replog.replication import messages as m
from replog.sim.cluster import SimCluster
from replog.sim.data_invariants import DataChecker, TopicSpec
from replog.sim.invariants import InvariantViolation
from replog.sim.network import SimNetwork
from replog.sim.virtual_loop import VirtualLoop

TOPIC = "data"
EPOCH = 5


@dataclass
class _Leading:
    leader_epoch: int


@dataclass
class _Replica:
    leader_state: _Leading | None


class _Broker:
    """What the check reads of a broker: its replica manager's replica of the partition."""

    def __init__(self) -> None:
        self.replica = _Replica(_Leading(EPOCH))
        self.replica_manager = self

    def partition(self, topic: str, partition: int) -> _Replica:
        return self.replica

    def stop_leading(self) -> None:
        self.replica.leader_state = None


@pytest.fixture
def checker() -> Iterator[DataChecker]:
    loop = VirtualLoop()
    cluster = SimCluster((1, 2, 3), loop, SimNetwork(loop, random.Random(1)), random.Random(2))
    yield DataChecker(cluster, [TopicSpec(TOPIC, 1, 3, 2, flushed=False)])
    loop.close()


REQUEST = m.FetchRequest((m.FetchPartition(TOPIC, 0, 0, current_leader_epoch=EPOCH),))
ANSWERED = m.FetchResponse((m.FetchPartitionResult(TOPIC, 0, high_watermark=3),))
REFUSED = m.FetchResponse((m.FetchPartitionResult(TOPIC, 0, FencedLeaderEpochError("fenced")),))


def _as_broker(broker: _Broker) -> Any:
    return broker


def _answer(checker: DataChecker, broker: Any, answer: m.FetchResponse, parked: Any = None) -> None:
    if parked is not None:
        checker.unpark(parked)
    checker.check_fenced(broker, 1, REQUEST, answer, "consumer", parked)


def _broken(checker: DataChecker) -> bool:
    try:
        checker.check_replicas()  # raises what a call found
    except InvariantViolation as found:
        assert "a stale leader epoch accepted" in str(found)
        return True
    return False


def test_an_answer_at_once_needs_the_epochs_leader_now(checker: DataChecker) -> None:
    broker = _Broker()
    _answer(checker, broker, ANSWERED)
    assert not _broken(checker)
    broker.stop_leading()
    _answer(checker, broker, REFUSED)
    assert not _broken(checker)
    _answer(checker, broker, ANSWERED)
    assert _broken(checker)


def test_a_parked_answer_may_come_from_the_iteration_that_ended_the_leadership(
    checker: DataChecker,
) -> None:
    broker = _Broker()
    parked = checker.park_fetch(_as_broker(broker), REQUEST)
    checker.note_iteration()
    broker.stop_leading()  # the purgatory answered in this iteration, then leadership went
    checker.note_iteration()
    _answer(checker, broker, ANSWERED, parked)  # the caller resumes in the next iteration
    assert not _broken(checker)


def test_a_parked_answer_after_the_leadership_ended_is_a_break(checker: DataChecker) -> None:
    broker = _Broker()
    parked = checker.park_fetch(_as_broker(broker), REQUEST)
    broker.stop_leading()
    checker.note_iteration()
    checker.note_iteration()  # an iteration passed with no leader of the epoch here
    _answer(checker, broker, ANSWERED, parked)
    assert _broken(checker)


def test_a_parked_answer_seen_in_the_iteration_that_ended_the_leadership_passes(
    checker: DataChecker,
) -> None:
    broker = _Broker()
    parked = checker.park_fetch(_as_broker(broker), REQUEST)
    checker.note_iteration()
    broker.stop_leading()  # later in the iteration whose earlier callback saw the answer
    _answer(checker, broker, ANSWERED, parked)
    assert not _broken(checker)
