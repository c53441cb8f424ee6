"""Following an internal topic's partitions as their coordinator (`__consumer_offsets` for the
group coordinator, `__transaction_state` for the transaction coordinator): which of them this
broker leads in an image, the coordinator a client is told of for a key's partition, and what
both coordinators need of the replica manager and of their topic's creator.

Rules:
- A partition is led here at a (topic id, leader epoch): a new leader epoch or a re-created
  topic is a new leadership, which the coordinator loads again from the log (`led_partitions`).
- A key's coordinator (`coordinator_of`) is its partition's leader at its endpoint of the
  client's listener (any listener when none is named); a missing topic is the caller's
  (it creates it); a partition without a leader, a leader unregistered or without that
  listener, COORDINATOR_NOT_AVAILABLE naming which.
- A request is served from the coordinator's loaded partition of its key (`coordinating`);
  else NOT_COORDINATOR (no topic yet, a partition led elsewhere, or one whose load failed) or
  COORDINATOR_LOAD_IN_PROGRESS (still loading), naming the broker and the partition.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from typing import Protocol, TypeVar
from uuid import UUID

from replog.coordinator import messages as cm
from replog.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    KafkaError,
    NotCoordinatorError,
)
from replog.quorum.metadata.image import MetadataImage, TopicImage
from replog.replication.messages import ProduceRequest, ProduceResponse
from replog.server.data_plane.partition import Partition

__all__ = [
    "CoordinatorReplicas",
    "ShardState",
    "TopicCreator",
    "coordinating",
    "coordinator_of",
    "leader_of",
    "leadership_changes",
    "led_partitions",
]


class CoordinatorReplicas(Protocol):
    """What a coordinator needs of the replica manager (`replica_manager.ReplicaManager`)."""

    def partition(self, topic: str, partition: int) -> Partition | None: ...

    async def produce(
        self, request: ProduceRequest, *, internal_topics_allowed: bool = False
    ) -> ProduceResponse: ...


class TopicCreator(Protocol):
    """What a coordinator needs of `internal_topic_creator.InternalTopicCreator`."""

    @property
    def last_failure(self) -> KafkaError | None: ...
    def request(self) -> None: ...
    async def stop(self) -> None: ...


class ShardState(enum.Enum):
    LOADING = "loading"
    ACTIVE = "active"
    FAILED = "failed"


class Shard(Protocol):
    """A coordinator's partition: its leadership, its load's state, name and why it failed."""

    @property
    def topic_id(self) -> UUID: ...
    @property
    def leader_epoch(self) -> int: ...
    @property
    def state(self) -> ShardState: ...
    @property
    def name(self) -> str: ...
    @property
    def failure(self) -> str: ...


S = TypeVar("S", bound=Shard)


def led_partitions(image: MetadataImage, topic: str, broker_id: int) -> dict[int, tuple[UUID, int]]:
    """The partitions of `topic` that `broker_id` leads in `image`: id -> (topic id, epoch)."""
    found = image.topics.by_name.get(topic)
    if found is None:
        return {}
    return {
        partition_id: (found.topic_id, registration.leader_epoch)
        for partition_id, registration in found.partitions.items()
        if registration.leader == broker_id
    }


def leadership_changes(
    image: MetadataImage, topic: str, broker_id: int, shards: Mapping[int, S]
) -> tuple[list[S], list[tuple[int, UUID, int]]]:
    """The shards to drop (no longer led here at their topic id and leader epoch) and the
    partitions to load, (partition, topic id, leader epoch) in partition order."""
    led = led_partitions(image, topic, broker_id)
    dropped = [
        shard
        for partition_id, shard in shards.items()
        if led.get(partition_id) != (shard.topic_id, shard.leader_epoch)
    ]
    gone = {id(shard) for shard in dropped}
    kept = {p for p, shard in shards.items() if id(shard) not in gone}
    loaded = [(p, tid, epoch) for p, (tid, epoch) in sorted(led.items()) if p not in kept]
    return dropped, loaded


def leader_of(topic: TopicImage, partition_id: int) -> int:
    registration = topic.partitions.get(partition_id)
    return -1 if registration is None else registration.leader


def coordinator_of(
    image: MetadataImage, topic: TopicImage, partition_id: int, listener_name: str | None, who: str
) -> cm.FindCoordinatorResponse:
    """The coordinator of the key `who` names, whose partition is `partition_id` (module
    Rules)."""
    leader = leader_of(topic, partition_id)
    if leader < 0:
        return cm.FindCoordinatorResponse(
            CoordinatorNotAvailableError(f"{who}: {topic.name}-{partition_id} has no leader")
        )
    broker = image.cluster.brokers.get(leader)
    if broker is None or not broker.endpoints:
        return cm.FindCoordinatorResponse(
            CoordinatorNotAvailableError(
                f"{who}: the coordinator, broker {leader}, has no registered listener"
            )
        )
    endpoint = next((e for e in broker.endpoints if listener_name in (None, e.name)), None)
    if endpoint is None:
        return cm.FindCoordinatorResponse(
            CoordinatorNotAvailableError(
                f"{who}: the coordinator, broker {leader}, has no listener {listener_name!r}"
            )
        )
    return cm.FindCoordinatorResponse(None, leader, endpoint.host, endpoint.port)


def coordinating(
    image: MetadataImage,
    topic_name: str,
    shards: Mapping[int, S],
    partition_for: Callable[[int], int],
    who: str,
    broker_id: int,
    contents: str,
) -> tuple[S | None, KafkaError | None]:
    """The loaded shard that keeps the key `who` names (its partition `partition_for(partition
    count)`), or the error to answer (module Rules); `contents` names what a shard holds in
    the messages ("the offsets")."""
    topic = image.topics.by_name.get(topic_name)
    if topic is None or not topic.partitions:
        return None, NotCoordinatorError(
            f"{who}: broker {broker_id} is not its coordinator: {topic_name} does not exist yet"
        )
    partition_id = partition_for(len(topic.partitions))
    shard = shards.get(partition_id)
    if shard is None:
        return None, NotCoordinatorError(
            f"{who}: broker {broker_id} is not its coordinator: {topic_name}-{partition_id} is "
            f"led by broker {leader_of(topic, partition_id)}"
        )
    if shard.state is ShardState.LOADING:
        return None, CoordinatorLoadInProgressError(
            f"{who}: broker {broker_id} is still loading {contents} of {shard.name}"
        )
    if shard.state is ShardState.FAILED:
        return None, NotCoordinatorError(
            f"{who}: broker {broker_id} could not load {contents} of {shard.name}: {shard.failure}"
        )
    return shard, None
