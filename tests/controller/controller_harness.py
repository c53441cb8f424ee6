"""A shared in-memory metadata log driving one or more `QuorumController`s, for the tests.

`LocalLog` plays Raft for the controllers, as Kafka's `LocalLogManager` does in its controller
tests: one log of batches, a leader and a quorum epoch, and commits the test decides. It keeps
Raft's promises to the controller:
- `prepare_append` works only for the leader in its epoch, and places batches end to end;
- committed batches reach every controller in offset order, exactly once;
- a new leader's LeaderChange control batch commits everything before it, and the new leader
  hears of its leadership only after all of that was delivered.
An election may keep the old leader's uncommitted batches (the new leader had them) or drop
them (it had not), so both outcomes of a failover are reachable.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from replog.errors import NotControllerError
from replog.quorum.controller.broker_heartbeat import BrokerHeartbeatReply, BrokerHeartbeatRequest
from replog.quorum.controller.cluster_control import (
    BrokerRegistrationReply,
    BrokerRegistrationRequest,
)
from replog.quorum.controller.controller import QuorumController
from replog.quorum.controller.controller_config import ControllerConfig
from replog.quorum.controller.pending_response import PendingResponse
from replog.quorum.controller.replication_control import CreatableTopic
from replog.quorum.metadata.broker_lifecycle import SUPPORTED_FEATURES
from replog.quorum.metadata.delta import MetadataDelta
from replog.quorum.metadata.image import MetadataImage, MetadataProvenance
from replog.quorum.metadata.log_batches import CommittedRecords
from replog.quorum.metadata.records import (
    Endpoint,
    MetadataRecord,
    TopicRecord,
)

CLUSTER_ID = "test-cluster"
BROKER_FEATURES = SUPPORTED_FEATURES


@dataclass(frozen=True)
class Batch:
    base_offset: int
    last_offset: int
    quorum_epoch: int
    records: tuple[MetadataRecord, ...]  # empty: a control batch

    def committed(self) -> CommittedRecords:
        return CommittedRecords(self.base_offset, self.last_offset, self.quorum_epoch, self.records)


class LocalLog:
    """The metadata log and Raft's decisions about it, shared by every controller."""

    def __init__(self) -> None:
        self.batches: list[Batch] = []
        self.committed_count = 0  # batches[:committed_count] are committed and delivered
        self.leader_id: int | None = None
        self.quorum_epoch = 0
        self.controllers: dict[int, QuorumController] = {}
        self.resigned: list[tuple[int, int]] = []  # (node, quorum epoch) of each resign call
        # Makes the next prepare_append of the leader fail like this, once (fault injection).
        self.fail_next_append: Exception | None = None

    # -- what the controllers call ---------------------------------------------------------------

    def for_node(self, node_id: int) -> NodeLog:
        return NodeLog(self, node_id)

    def append(self, node_id: int, quorum_epoch: int, records: Sequence[MetadataRecord]) -> int:
        if node_id != self.leader_id or quorum_epoch != self.quorum_epoch:
            raise NotControllerError(
                f"node {node_id} is not the leader in quorum epoch {quorum_epoch} (leader "
                f"{self.leader_id} in {self.quorum_epoch})"
            )
        if self.fail_next_append is not None:
            error, self.fail_next_append = self.fail_next_append, None
            raise error
        base = self.log_end_offset
        batch = Batch(base, base + len(records) - 1, quorum_epoch, tuple(records))
        self.batches.append(batch)
        return batch.last_offset

    # -- what the test does ----------------------------------------------------------------------

    @property
    def log_end_offset(self) -> int:
        return self.batches[-1].last_offset + 1 if self.batches else 0

    @property
    def committed_offset(self) -> int:
        """The last committed offset (inclusive); -1 if none."""
        return self.batches[self.committed_count - 1].last_offset if self.committed_count else -1

    def committed_records(self) -> list[tuple[int, MetadataRecord]]:
        return [
            (batch.base_offset + index, record)
            for batch in self.batches[: self.committed_count]
            for index, record in enumerate(batch.records)
        ]

    def uncommitted_batches(self) -> list[Batch]:
        return self.batches[self.committed_count :]

    def commit(self, batch_count: int | None = None) -> None:
        """Commit the next `batch_count` batches (all, if None) and deliver them."""
        end = len(self.batches) if batch_count is None else self.committed_count + batch_count
        assert end <= len(self.batches), "cannot commit batches that do not exist"
        while self.committed_count < end:
            batch = self.batches[self.committed_count]
            self.committed_count += 1
            for controller in self.controllers.values():
                controller.handle_commit(batch.committed())

    def commit_through(self, offset: int) -> None:
        """Commit every batch ending at or before `offset`."""
        count = sum(1 for batch in self.uncommitted_batches() if batch.last_offset <= offset)
        self.commit(count)

    def elect(self, leader_id: int | None, now_ms: int, *, keep_uncommitted: bool = True) -> None:
        """A new quorum epoch with `leader_id` as leader (None: no leader yet).

        The old leader's uncommitted batches survive (`keep_uncommitted`) or are truncated
        away. With a leader, its LeaderChange control batch commits everything before it."""
        self.quorum_epoch += 1
        self.leader_id = leader_id
        if not keep_uncommitted:
            del self.batches[self.committed_count :]
        for controller in self.controllers.values():
            # Everyone hears of the new epoch; the leader itself only once caught up (below).
            if controller.node_id != leader_id:
                controller.handle_leader_change(leader_id, self.quorum_epoch, now_ms)
        if leader_id is None:
            return
        base = self.log_end_offset
        self.batches.append(Batch(base, base, self.quorum_epoch, ()))
        self.commit()
        self.controllers[leader_id].handle_leader_change(leader_id, self.quorum_epoch, now_ms)

    def resign(self, node_id: int, quorum_epoch: int) -> None:
        self.resigned.append((node_id, quorum_epoch))
        if node_id == self.leader_id and quorum_epoch == self.quorum_epoch:
            self.leader_id = None


@dataclass
class NodeLog:
    """One controller's `MetadataLog` on the shared log."""

    log: LocalLog
    node_id: int

    def prepare_append(self, quorum_epoch: int, records: Sequence[MetadataRecord]) -> int:
        return self.log.append(self.node_id, quorum_epoch, records)

    def resign(self, quorum_epoch: int) -> None:
        self.log.resign(self.node_id, quorum_epoch)


@dataclass
class Cluster:
    """Controllers on a `LocalLog`, with a clock."""

    log: LocalLog
    controllers: dict[int, QuorumController]
    now_ms: int = 0
    incarnations: dict[int, uuid.UUID] = field(default_factory=dict)

    @classmethod
    def create(cls, node_ids: Sequence[int] = (1,), seed: int = 0, **config: object) -> Cluster:
        log = LocalLog()
        controllers = {
            node_id: QuorumController(
                ControllerConfig(node_id=node_id, cluster_id=CLUSTER_ID, **config),  # type: ignore[arg-type]
                log.for_node(node_id),
                random.Random(seed + node_id),
            )
            for node_id in node_ids
        }
        log.controllers = controllers
        return cls(log, controllers)

    @classmethod
    def with_brokers(cls, broker_ids: Sequence[int], **config: object) -> Cluster:
        """Controllers 1-3, node 1 active, and these brokers registered and unfenced."""
        cluster = cls.create((1, 2, 3), 0, **config)
        cluster.elect(1)
        cluster.log.commit()
        for broker_id in broker_ids:
            cluster.start_broker(broker_id)
        return cluster

    def create_topic(self, name: str, partitions: int, replication_factor: int) -> None:
        """Create a topic and commit it; it must succeed."""
        pending = self.active.create_topics(
            [CreatableTopic(name, partitions, replication_factor)], self.now_ms
        )
        self.log.commit()
        (result,) = pending.result()
        assert result.error is None, result.error

    def controller(self, node_id: int) -> QuorumController:
        return self.controllers[node_id]

    @property
    def active(self) -> QuorumController:
        (active,) = [c for c in self.controllers.values() if c.is_active]
        return active

    def elect(self, leader_id: int | None, *, keep_uncommitted: bool = True) -> None:
        self.log.elect(leader_id, self.now_ms, keep_uncommitted=keep_uncommitted)

    def advance(self, ms: int) -> None:
        """Move the clock and tick every controller."""
        self.now_ms += ms
        for controller in self.controllers.values():
            controller.tick(self.now_ms)

    def register(
        self,
        broker_id: int,
        *,
        rack: str | None = None,
        commit: bool = True,
        previous_broker_epoch: int = -1,
    ) -> PendingResponse[BrokerRegistrationReply]:
        incarnation = uuid.UUID(int=broker_id * 1000 + len(self.incarnations) + 1)
        self.incarnations[broker_id] = incarnation
        pending = self.active.register_broker(
            BrokerRegistrationRequest(
                broker_id,
                CLUSTER_ID,
                incarnation,
                endpoints=(Endpoint("PLAINTEXT", "localhost", 9092 + broker_id),),
                features=BROKER_FEATURES,
                rack=rack,
                previous_broker_epoch=previous_broker_epoch,
            ),
            self.now_ms,
        )
        if commit:
            self.log.commit()
        return pending

    def heartbeat(
        self,
        broker_id: int,
        *,
        metadata_offset: int | None = None,
        want_fence: bool = False,
        want_shut_down: bool = False,
        commit: bool = True,
    ) -> PendingResponse[BrokerHeartbeatReply]:
        """A heartbeat at the broker's current epoch, reporting the committed offset unless
        told otherwise."""
        epoch = self.active.cluster.broker_epoch(broker_id)
        assert epoch is not None, f"broker {broker_id} is not registered"
        pending = self.active.broker_heartbeat(
            BrokerHeartbeatRequest(
                broker_id,
                epoch,
                self.log.committed_offset if metadata_offset is None else metadata_offset,
                want_fence=want_fence,
                want_shut_down=want_shut_down,
            ),
            self.now_ms,
        )
        if commit:
            self.log.commit()
        return pending

    def start_broker(self, broker_id: int, *, rack: str | None = None) -> int:
        """Register a broker and heartbeat it until unfenced; return its broker epoch."""
        epoch = self.register(broker_id, rack=rack).result().broker_epoch
        reply = self.heartbeat(broker_id).result()
        assert not reply.is_fenced, reply
        return epoch


def fenced(cluster: Cluster, broker_id: int) -> bool:
    """Whether the broker is registered and fenced, as the active controller has it now."""
    registration = cluster.active.cluster.registration(broker_id)
    return registration is not None and registration.fenced


def replayed_image(records: Sequence[tuple[int, MetadataRecord]]) -> MetadataImage:
    """The image built by replaying `records` from scratch with the broker-side metadata code
    (`MetadataDelta`), which nobody on the controller side wrote: an independent oracle."""
    delta = MetadataDelta(MetadataImage.EMPTY)
    for offset, record in records:
        delta.replay(record, offset)
    last = records[-1][0] if records else -1
    return delta.apply(MetadataProvenance(last, 0 if records else -1))


def controller_view(controller: QuorumController, offset: int | None) -> dict[str, object]:
    """The controller's state at `offset` (None: latest), in comparable plain values."""
    return {
        "features": controller.features.finalized_levels(offset),
        "brokers": {
            b: r.to_record() for b, r in sorted(controller.cluster.registrations(offset).items())
        },
        "configs": {
            (r.resource_type, r.resource_name): controller.configs.describe(r, offset)
            for r in controller.configs.resources(offset)
        },
        "next_producer_id": controller.producer_ids.next_producer_id(offset),
        "topics": controller.replication.snapshot_records(offset),
        "acls": controller.acls.acls(offset),
    }


def image_view(image: MetadataImage) -> dict[str, object]:
    """An image in the same shape as `controller_view`."""
    topics: list[MetadataRecord] = []
    for name in sorted(image.topics.by_name):
        topic = image.topics.by_name[name]
        topics.append(TopicRecord(name, topic.topic_id))
        topics.extend(
            topic.partitions[partition_id].to_record(topic.topic_id, partition_id)
            for partition_id in sorted(topic.partitions)
        )
    return {
        "features": dict(image.features.levels),
        "brokers": {b: r.to_record() for b, r in sorted(image.cluster.brokers.items())},
        "configs": {
            (r.resource_type, r.resource_name): dict(keys)
            for r, keys in sorted(image.configs.resources.items())
        },
        # The image starts at -1 ("no block yet"), the controller at 0 (the first block's start).
        "next_producer_id": max(image.next_producer_id, 0),
        "topics": topics,
        "acls": [image.acls.acls[acl_id] for acl_id in sorted(image.acls.acls)],
    }
