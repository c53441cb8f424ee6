"""The replica counts a ReplicaManager keeps for the metrics summary (`LiveReplicaCounts`)
equal a walk over its replicas (`node_state._count_replicas`) after every change: random
sequences of topic creations and deletions, leader and ISR changes through metadata,
reassignments adding and removing replicas, min.insync.replicas changes and AlterPartition
answers, over a real ReplicaManager."""

from __future__ import annotations

import random
from pathlib import Path
from uuid import UUID

import pytest

from replog.errors import RequestTimedOutError
from replog.quorum.metadata.records import (
    ConfigRecord,
    ConfigResourceType,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from replog.server.data_plane.replica_counts import LiveReplicaCounts, ReplicaCounts
from replog.server.process.node_state import _count_replicas
from replog.testing import ManualClock
from tests.metadata.metadata_helpers import replayed, topic_id
from tests.server.data_plane.test_replica_manager import Node, cluster_image

BROKERS = (1, 2, 3, 4)
LOCAL = 1  # the broker whose replica manager is driven
TOPICS = {"a": topic_id(11), "b": topic_id(12), "c": topic_id(13)}
PARTITIONS = 3
STEPS = 120


class Scenario:
    """Broker 1's replica manager and the metadata image it follows; `step` makes a random
    change to either."""

    def __init__(self, root: Path, rng: random.Random) -> None:
        self.rng = rng
        self.clock = ManualClock()
        self.node = Node(root, LOCAL, self.clock)
        self.image = cluster_image(brokers=BROKERS)
        self.node.rm.apply_image(self.image)
        self.seen: set[str] = set()  # the kinds of counts some step made nonzero

    def apply(self, *records: MetadataRecord) -> None:
        self.image = replayed(self.image, *records)
        self.node.rm.apply_image(self.image)

    def isr_of(self, replicas: tuple[int, ...], leader: int) -> tuple[int, ...]:
        rest = [r for r in replicas if r != leader]
        return (leader, *self.rng.sample(rest, self.rng.randint(0, len(rest))))

    def assignment(self) -> tuple[tuple[int, ...], int, tuple[int, ...]]:
        replicas = tuple(self.rng.sample(BROKERS, self.rng.randint(1, 3)))
        if LOCAL not in replicas and self.rng.random() < 0.7:
            replicas = (LOCAL, *replicas[1:])
        leader = self.rng.choice(replicas)
        return replicas, leader, self.isr_of(replicas, leader)

    def partitions(self) -> list[tuple[str, int]]:
        topics = self.image.topics.by_name
        return [(name, p) for name in topics for p in topics[name].partitions]

    def step(self) -> None:
        rng = self.rng
        topics = self.image.topics.by_name
        absent = [name for name in TOPICS if name not in topics]
        kinds = ["create"] * bool(absent) + ["delete"] * bool(topics) + ["config", "answers"]
        if topics:
            kinds += ["leader", "isr", "isr", "reassign", "reassign"]
        kind = rng.choice(kinds)
        if kind == "create":
            name = rng.choice(absent)
            tid = TOPICS[name]
            records: list[MetadataRecord] = [TopicRecord(name, tid)]
            for p in range(PARTITIONS):
                replicas, leader, isr = self.assignment()
                records.append(PartitionRecord(tid, p, replicas, isr, leader))
            self.apply(*records)
        elif kind == "delete":
            self.apply(RemoveTopicRecord(TOPICS[rng.choice(list(topics))]))
        elif kind == "config":
            value = rng.choice([None, "1", "2", "3", "4"])
            if rng.random() < 0.3:  # the brokers' default
                record = ConfigRecord(ConfigResourceType.BROKER, "", "min.insync.replicas", value)
            else:
                name = rng.choice(list(TOPICS))
                record = ConfigRecord(ConfigResourceType.TOPIC, name, "min.insync.replicas", value)
            self.apply(record)
        elif kind == "answers":
            self.answer_isr_changes()
        else:
            name, p = rng.choice(self.partitions())
            registration = topics[name].partitions[p]
            tid = TOPICS[name]
            if kind == "leader":
                leader = rng.choice(registration.replicas)
                isr = self.isr_of(registration.replicas, leader)
                self.apply(PartitionChangeRecord(tid, p, isr=isr, leader=leader))
            elif kind == "isr":
                isr = self.isr_of(registration.replicas, registration.leader)
                self.apply(PartitionChangeRecord(tid, p, isr=isr))
            else:
                self.reassign(tid, p, registration.replicas, registration.adding_replicas)

    def reassign(
        self, tid: UUID, p: int, replicas: tuple[int, ...], adding: tuple[int, ...]
    ) -> None:
        rng = self.rng
        if adding:  # complete it: the targets only, the ISR within them
            target = tuple(r for r in replicas if r in adding or rng.random() < 0.5) or adding
            leader = rng.choice(target)
            record = PartitionChangeRecord(
                tid,
                p,
                isr=self.isr_of(target, leader),
                leader=leader,
                replicas=target,
                adding_replicas=(),
                removing_replicas=(),
            )
        else:  # start one adding the brokers not yet assigned
            new = tuple(b for b in BROKERS if b not in replicas)
            if not new:
                return
            added = tuple(rng.sample(new, rng.randint(1, len(new))))
            record = PartitionChangeRecord(
                tid, p, replicas=(*replicas, *added), adding_replicas=added
            )
        self.apply(record)

    def answer_isr_changes(self) -> None:
        """Let the ISR check propose shrinks (no follower fetches here), and answer each:
        committed (with or without the controller's record following), or failed."""
        rm = self.node.rm
        rm.tick(self.clock.advance(30_001))
        for change in rm.pending_isr_changes():
            roll = self.rng.random()
            if roll < 0.2:
                rm.on_isr_change_result(change, RequestTimedOutError("controller"), (), -1, -1)
                continue
            epoch = change.partition_epoch + 1
            rm.on_isr_change_result(change, None, change.new_isr, change.leader_epoch, epoch)
            if roll < 0.7:
                self.apply(PartitionChangeRecord(change.topic_id, change.partition, change.new_isr))

    def check(self) -> None:
        rm = self.node.rm
        walked = _count_replicas(tuple(rm.partitions().values()))
        assert rm.replica_counts.counts == walked
        for kind in ("leaders", "under_replicated", "under_min_isr", "at_min_isr"):
            if getattr(walked, kind):
                self.seen.add(kind)


@pytest.mark.parametrize("seed", range(6))
def test_the_kept_counts_equal_a_walk_after_every_change(tmp_path: Path, seed: int) -> None:
    scenario = Scenario(tmp_path, random.Random(seed))
    for _ in range(STEPS):
        scenario.step()
        scenario.check()
    # The sequence reached every case the counts distinguish.
    assert scenario.seen == {"leaders", "under_replicated", "under_min_isr", "at_min_isr"}


def test_a_report_moves_a_partitions_contribution() -> None:
    counts = LiveReplicaCounts()
    counts.set_partitions(3)
    counts.set_figures(("t", 0), (3, 2, 2))  # under-replicated, at min ISR
    counts.set_figures(("t", 1), (3, 1, 2))  # under-replicated, under min ISR
    assert counts.counts == ReplicaCounts(3, 2, 2, 1, 1)
    counts.set_figures(("t", 1), (3, 3, 2))  # caught up
    counts.set_figures(("t", 0), None)  # no longer led
    counts.set_figures(("t", 2), None)  # never led: nothing to take out
    assert counts.counts == ReplicaCounts(3, 1, 0, 0, 0)
