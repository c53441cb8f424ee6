"""The operator's admin client of a run (`AdminClient`) and the end checks of what the
controllers acknowledged to it.

Rules:
- It owns one topic, `admin` (replication factor min(3, nodes), one partition at first),
  created before the faults begin. During the faults phase it sends one request at a time,
  every 0.2-1 s, through the simulated network to the controller it believes active (a
  refusal names the active one; a lost call makes it pick a voter at random): one partition
  more (CreatePartitions, up to `MAX_PARTITIONS`), `retention.ms` set to the attempt's own
  number (IncrementalAlterConfigs: each value names the attempt that asked for it), a
  partition moved to a random set of nodes (AlterPartitionReassignments), preferred
  elections of every partition (ElectLeaders), or the creation or deletion of one of
  `PASSING_TOPICS` (a deleted one is created again under a new topic id).
- Their records are checked as every committed record is (`metadata_invariants`: leader
  epochs, choices, shapes); after the faults stop the topic's partitions must be led and
  fully replicated (or offline by KIP-966, then elected by the operator) as the data topics'
  are, and `settled` waits for every reassignment to complete.
- `check`, on the committed metadata at the end: the topic has at least the partitions of
  the largest acknowledged addition and at most those asked for; its `retention.ms` and each
  partition's replicas (as a set) are what the last acknowledged request set, or what a
  request asked for after it whose answer was not a success (a lost answer, a timeout:
  its write may have committed); whether each passing topic exists is likewise what its last
  acknowledged creation or deletion left (TOPIC_ALREADY_EXISTS and UNKNOWN_TOPIC_OR_PARTITION
  acknowledge what they name), or what a request after it asked for; with nothing
  acknowledged, not checked.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from replog.errors import (
    ElectionNotNeededError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from replog.pb import common_pb2
from replog.pb import controller_pb2 as pb
from replog.quorum.metadata.image import ConfigResource, MetadataImage
from replog.quorum.metadata.records import ConfigResourceType
from replog.server.controller.controller_service import ControllerService
from replog.sim.cluster import SimCluster
from replog.sim.data_invariants import TopicSpec
from replog.sim.invariants import InvariantViolation
from replog.sim.network import CallLost

__all__ = ["ADMIN_TOPIC", "AdminClient", "Asked"]

ADMIN_TOPIC = "admin"
# Topics it creates and deletes again and again (each creation a new topic id).
PASSING_TOPICS = ("admin-a", "admin-b")
CLIENT_ID = 997
MAX_PARTITIONS = 4
EVERY_S = (0.2, 1.0)
CALL_TIMEOUT_S = 2.0
POLL_S = 0.1
RETENTION = "retention.ms"
TOPIC_RESOURCE = 2  # ConfigResourceKeys.resource_type: TOPIC
SET = 0  # AlterableConfig.operation
PREFERRED = 0  # ElectLeadersRequest.election_type


@dataclass
class Asked:
    """The requests of one kind, in the order sent: (what each asked, whether acknowledged)."""

    requests: list[tuple[Any, bool]] = field(default_factory=list)

    def allowed(self) -> list[Any] | None:
        """What the state may end as (module Rules); None: anything."""
        last = max((i for i, (_, ok) in enumerate(self.requests) if ok), default=None)
        if last is None:
            return None
        return [asked for asked, _ in self.requests[last:]]


class AdminClient:
    """See module docstring."""

    def __init__(self, cluster: SimCluster, rng: random.Random) -> None:
        self.cluster = cluster
        self.rng = rng
        self.replication_factor = min(3, len(cluster.node_ids))
        self.controller_hint: int | None = None
        self.attempts = 0
        self.counts: dict[str, int] = {"admin requests": 0, "admin requests acknowledged": 0}
        self.partitions_asked = 1  # the largest count asked for
        self.partitions_acked = 1  # the largest count acknowledged
        self.retention = Asked()
        self.replicas: dict[int, Asked] = {}
        self.existence = {name: Asked() for name in PASSING_TOPICS}  # True: created

    # --- requests -----------------------------------------------------------------------------

    async def create_topic(self) -> None:
        """Create the topic, asking again until a controller acknowledges it (or it exists)."""
        request = pb.CreateTopicsRequest(
            topics=[
                pb.CreatableTopic(
                    name=ADMIN_TOPIC,
                    num_partitions=1,
                    replication_factor=self.replication_factor,
                )
            ],
            timeout_ms=int(CALL_TIMEOUT_S * 1000),
        )

        # TOPIC_ALREADY_EXISTS: an earlier attempt's creation whose answer was lost.
        while not self._acknowledged(
            await self._call(lambda s: s.CreateTopics(request, None)), _not_created
        ):
            await asyncio.sleep(POLL_S)

    async def run(self) -> None:
        """One request at a time until cancelled (module Rules)."""
        while True:
            await asyncio.sleep(self.rng.uniform(*EVERY_S))
            kind = self.rng.choice(
                ("partitions", "config", "reassign", "reassign", "elect", "create", "delete")
            )
            if kind == "partitions" and self.partitions_asked < MAX_PARTITIONS:
                await self.add_partition()
            elif kind == "create":
                await self.create_passing()
            elif kind == "delete":
                await self.delete_passing()
            elif kind == "config":
                await self.alter_retention()
            elif kind == "reassign":
                await self.reassign()
            else:
                await self.elect_preferred()

    async def create_passing(self) -> None:
        name = self.rng.choice(PASSING_TOPICS)
        request = pb.CreateTopicsRequest(
            topics=[
                pb.CreatableTopic(
                    name=name,
                    num_partitions=self.rng.randint(1, 2),
                    replication_factor=self.rng.randint(1, self.replication_factor),
                )
            ],
            timeout_ms=int(CALL_TIMEOUT_S * 1000),
        )
        await self._sent(
            self.existence[name], True, lambda s: s.CreateTopics(request, None), _not_created
        )

    async def delete_passing(self) -> None:
        name = self.rng.choice(PASSING_TOPICS)
        request = pb.DeleteTopicsRequest(topic_names=[name], timeout_ms=int(CALL_TIMEOUT_S * 1000))
        await self._sent(
            self.existence[name], False, lambda s: s.DeleteTopics(request, None), _not_deleted
        )

    async def add_partition(self) -> None:
        count = self.partitions_asked = self.partitions_asked + 1
        request = pb.CreatePartitionsRequest(
            topics=[pb.CreatePartitionsTopic(name=ADMIN_TOPIC, count=count)],
            timeout_ms=int(CALL_TIMEOUT_S * 1000),
        )
        answer = await self._call(lambda s: s.CreatePartitions(request, None))
        if self._acknowledged(answer, lambda a: a.results[0].error.code):
            self.partitions_acked = max(self.partitions_acked, count)

    async def alter_retention(self) -> None:
        value = str(self.attempts + 1)
        request = pb.IncrementalAlterConfigsRequest(
            resources=[
                pb.AlterConfigsResource(
                    resource_type=TOPIC_RESOURCE,
                    resource_name=ADMIN_TOPIC,
                    configs=[pb.AlterableConfig(name=RETENTION, operation=SET, value=value)],
                )
            ]
        )
        await self._sent(
            self.retention,
            value,
            lambda s: s.IncrementalAlterConfigs(request, None),
            lambda a: a.results[0].error.code,
        )

    async def reassign(self) -> None:
        index = self.rng.randrange(self.partitions_acked)
        target = self.rng.sample(self.cluster.node_ids, self.replication_factor)
        request = pb.AlterPartitionReassignmentsRequest(
            topics=[
                pb.ReassignableTopic(
                    name=ADMIN_TOPIC,
                    partitions=[
                        pb.ReassignablePartition(
                            partition_index=index, replicas=pb.BrokerIds(broker_ids=target)
                        )
                    ],
                )
            ],
            timeout_ms=int(CALL_TIMEOUT_S * 1000),
        )
        await self._sent(
            self.replicas.setdefault(index, Asked()),
            frozenset(target),
            lambda s: s.AlterPartitionReassignments(request, None),
            lambda a: a.results[0].error.code,
        )

    async def elect_preferred(self) -> None:
        request = pb.ElectLeadersRequest(
            election_type=PREFERRED,
            partitions=[
                common_pb2.TopicPartition(topic=ADMIN_TOPIC, partition=index)
                for index in range(self.partitions_acked)
            ],
            timeout_ms=int(CALL_TIMEOUT_S * 1000),
        )
        answer = await self._call(lambda s: s.ElectLeaders(request, None))
        self._acknowledged(
            answer,
            lambda a: next(
                (r.error.code for r in a.results if r.error.code != ElectionNotNeededError.code),
                0,
            ),
        )

    async def _sent(
        self,
        asked: Asked,
        what: Any,
        method: Callable[[ControllerService], Coroutine[Any, Any, Any]],
        result_error: Callable[[Any], int | bool],
    ) -> None:
        """Send a request of `asked`'s kind, kept as unanswered from before it leaves: the
        operator is cancelled when the faults stop, perhaps with a request on its way, whose
        write may commit all the same; then kept with its outcome."""
        index = len(asked.requests)
        asked.requests.append((what, False))
        answer = await self._call(method)
        asked.requests[index] = (what, self._acknowledged(answer, result_error))

    def _acknowledged(self, answer: Any, result_error: Callable[[Any], int | bool]) -> bool:
        """Whether `answer` (None: lost) acknowledges the request (`result_error` of it is
        falsy); learns the active controller from a refusal."""
        self.attempts += 1
        self.counts["admin requests"] += 1
        if answer is None:
            return False
        if answer.error.code:
            self.controller_hint = answer.controller_id if answer.controller_id > 0 else None
            return False
        if result_error(answer):
            return False
        self.counts["admin requests acknowledged"] += 1
        return True

    async def _call(
        self, method: Callable[[ControllerService], Coroutine[Any, Any, Any]]
    ) -> Any | None:
        """`method` of the service of the controller believed active; None if lost."""
        cluster = self.cluster
        target = self.controller_hint or self.rng.choice(cluster.voter_ids)
        service = cluster.services.get(target)

        async def serve(service: ControllerService | None = service) -> Any:
            assert service is not None
            return await method(service)

        try:
            return await cluster.network.call(
                CLIENT_ID, target, None if service is None else serve, timeout_s=CALL_TIMEOUT_S
            )
        except CallLost:
            self.controller_hint = None
            return None

    # --- the end ------------------------------------------------------------------------------

    def spec(self, image: MetadataImage) -> TopicSpec:
        """The topic as `image` has it, for the liveness checks of the data topics."""
        topic = image.topics.by_name.get(ADMIN_TOPIC)
        partitions = 0 if topic is None else len(topic.partitions)
        return TopicSpec(ADMIN_TOPIC, partitions, self.replication_factor, 1, flushed=False)

    async def settled(self, image: Callable[[], MetadataImage], deadline: float) -> None:
        """Wait until no partition of the topic is being reassigned in the committed
        metadata; raises once `deadline` (virtual seconds) passes first."""
        loop = self.cluster.loop
        while True:
            topic = image().topics.by_name.get(ADMIN_TOPIC)
            moving = (
                []
                if topic is None
                else [
                    (index, p)
                    for index, p in sorted(topic.partitions.items())
                    if p.adding_replicas or p.removing_replicas
                ]
            )
            if not moving:
                return
            if loop.time() > deadline:
                raise InvariantViolation(
                    f"reassignments of {ADMIN_TOPIC} not complete in time: {moving[:3]}"
                )
            await asyncio.sleep(POLL_S)

    def check(self, image: MetadataImage) -> None:
        """Module Rules, on `image`, the committed metadata at the end."""
        topic = image.topics.by_name.get(ADMIN_TOPIC)
        if topic is None:
            raise InvariantViolation(f"the acknowledged topic {ADMIN_TOPIC} is not committed")
        count = len(topic.partitions)
        if not self.partitions_acked <= count <= self.partitions_asked:
            raise InvariantViolation(
                f"{ADMIN_TOPIC} has {count} partitions, not between the {self.partitions_acked} "
                f"acknowledged and the {self.partitions_asked} asked for"
            )
        resource = ConfigResource(ConfigResourceType.TOPIC, ADMIN_TOPIC)
        retention = image.configs.get(resource).get(RETENTION)
        allowed = self.retention.allowed()
        if allowed is not None and retention not in allowed:
            raise InvariantViolation(
                f"{ADMIN_TOPIC}'s {RETENTION} is {retention}, not what the last acknowledged "
                f"change or a later unanswered one set ({allowed}): an acknowledged config "
                "change lost"
            )
        for name, asked in sorted(self.existence.items()):
            allowed = asked.allowed()
            exists = name in image.topics.by_name
            if allowed is not None and exists not in allowed:
                what = "creation" if allowed[0] else "deletion"
                raise InvariantViolation(
                    f"topic {name} {'exists' if exists else 'is absent'} at the end, against "
                    f"its last acknowledged {what} and the unanswered requests after it: an "
                    f"acknowledged topic {what} lost"
                )
        for index, asked in sorted(self.replicas.items()):
            allowed = asked.allowed()
            partition = topic.partitions.get(index)
            replicas = None if partition is None else frozenset(partition.replicas)
            if allowed is not None and replicas not in allowed:
                raise InvariantViolation(
                    f"{ADMIN_TOPIC}-{index} has replicas {partition and partition.replicas}, "
                    f"not a target of its last acknowledged reassignment or a later unanswered "
                    f"one ({[sorted(a) for a in allowed]}): an acknowledged reassignment lost"
                )


def _not_created(answer: pb.CreateTopicsResponse) -> bool:
    return answer.topics[0].error.code not in (0, TopicAlreadyExistsError.code)


def _not_deleted(answer: pb.DeleteTopicsResponse) -> bool:
    return answer.topics[0].error.code not in (0, UnknownTopicOrPartitionError.code)
