"""The clients of the simulated controllers: brokers and an admin client, pure and seeded.

Neither runs a process or a Raft node; both talk to controller nodes through the simulator's
`rpc` (network delay, loss, refused connections, a client-side timeout) and learn committed
metadata the way a broker's metadata fetcher does, by reading the committed log (the
checker's oracle image at some committed batch end, possibly lagging).

`SimBroker` follows a broker's lifecycle (KIP-631): register a fresh incarnation with the
controller it believes active, heartbeat every interval reporting its applied metadata offset,
stop when told to shut down, re-register after STALE_BROKER_EPOCH. As a partition leader it
sends AlterPartition built from its committed image: it shrinks the ISR of followers that are
down, stalled or fenced (sometimes of a healthy one), and expands it with caught-up replicas
(which also completes reassignments). Faults (the runner's): a broker crashes and restarts with
a new incarnation, stops heartbeating for a while (a stalled process: fenced once its session
expires, unfenced when it resumes), or leaves by controlled shutdown.

`AdminClient` creates and deletes topics, adds partitions, elects leaders, reassigns, alters
configs, unregisters brokers and reads (describe) from random controllers, standbys included.
Every request goes to the controller it believes active (learned from NOT_CONTROLLER answers,
which name it) or to a random voter; a NOT_CONTROLLER answer or a lost request is normal, the
simulation checks what the answers claim (`sim_controller_invariants.py`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from replog.errors import NotControllerError, StaleBrokerEpochError
from replog.quorum.controller.broker_heartbeat import BrokerHeartbeatReply, BrokerHeartbeatRequest
from replog.quorum.controller.cluster_control import (
    BrokerRegistrationReply,
    BrokerRegistrationRequest,
)
from replog.quorum.controller.config_control import (
    AlterConfigOp,
    AlterConfigOpType,
    broker_resource,
    topic_resource,
)
from replog.quorum.controller.controller import QuorumController
from replog.quorum.controller.pending_response import PendingResponse
from replog.quorum.controller.replication_control import (
    AlterPartitionItem,
    CreatableTopic,
    CreatePartitionsTopic,
    CreateTopicResult,
    ElectionType,
    IsrMember,
    ReassignablePartition,
)
from replog.quorum.metadata.broker_lifecycle import SUPPORTED_FEATURES
from replog.quorum.metadata.image import MetadataImage
from replog.quorum.metadata.records import (
    Endpoint,
)

if TYPE_CHECKING:
    from sim_controller_host import AppendedBatch
    from sim_controller_runner import ControllerSimulation

CLUSTER_ID = "sim-cluster"
BROKER_FEATURES = SUPPORTED_FEATURES
TOPIC_NAMES = ("alpha", "beta", "gamma", "delta", "eps.x", "eps_y")

# What a request does at the controller: a write (a PendingResponse) or a read (its answer).
Invoke = Callable[[QuorumController, int], "PendingResponse[Any] | object"]


@dataclass(frozen=True)
class Reply:
    """What came back for one request: an answer (value or error) or nothing (`answered` is
    False: refused, lost or timed out). `leader_hint` is the answering controller's idea of
    the active controller; `appended` the batches the write appended there."""

    answered: bool
    value: Any = None
    error: Exception | None = None
    leader_hint: int | None = None
    appended: tuple[AppendedBatch, ...] = ()

    @property
    def ok(self) -> bool:
        return self.answered and self.error is None


@dataclass
class ControllerDirectory:
    """A client's belief about which voter is the active controller."""

    voter_ids: tuple[int, ...]
    hint: int | None = None

    def target(self, sim: ControllerSimulation) -> int:
        if self.hint is not None and sim.rng.random() < 0.9:
            return self.hint
        return sim.rng.choice(self.voter_ids)

    def learn(self, reply: Reply) -> None:
        if not reply.answered:
            self.hint = None
        elif isinstance(reply.error, NotControllerError):
            self.hint = reply.leader_hint


@dataclass
class SimBroker:
    """One simulated broker (module docstring). `mode`: down, running, stalled (alive, but
    sends nothing), shutting_down (heartbeats asking for a controlled shutdown)."""

    sim: ControllerSimulation
    broker_id: int
    rack: str | None
    mode: str = "down"
    incarnations: int = 0
    incarnation: uuid.UUID | None = None
    epoch: int | None = None
    fenced: bool = True  # as the last heartbeat answer said
    applied_end: int = 0  # the committed metadata applied: a batch end offset (exclusive)
    generation: int = 0  # bumped at every stop, so answers to a dead process are ignored
    in_flight: set[str] = field(default_factory=set)
    directory: ControllerDirectory = field(init=False)

    def __post_init__(self) -> None:
        self.directory = ControllerDirectory(self.sim.voter_ids)

    # --- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        """A fresh process: a new incarnation, which must register before anything else."""
        assert self.mode == "down"
        self.incarnations += 1
        self.incarnation = uuid.UUID(int=(self.broker_id << 64) | self.incarnations)
        self.mode = "running"
        self.epoch = None
        self.fenced = True
        self.in_flight.clear()
        # `applied_end` stays: a restarted broker reloads the metadata it had applied.

    def stop(self, restart_after_ms: int) -> None:
        """The process ends (crash or completed shutdown); it starts again later."""
        self.mode = "down"
        self.generation += 1
        generation = self.generation

        def restart() -> None:
            if self.mode == "down" and self.generation == generation:
                self.start()

        self.sim.at(self.sim.now_ms + restart_after_ms, restart)

    @property
    def alive(self) -> bool:
        return self.mode != "down"

    # --- the periodic work ------------------------------------------------------------------

    def tick(self) -> None:
        sim = self.sim
        if self.alive and self.mode != "stalled":
            if sim.rng.random() < 0.8:
                self.applied_end = sim.checker.latest_image_end()
            if self.epoch is None:
                self._register()
            else:
                self._heartbeat()
                if self.mode == "running" and not self.fenced:
                    if sim.rng.random() < 0.3:
                        self._alter_partition()
                    if sim.rng.random() < 0.02:
                        self._allocate_producer_ids()
        jitter = sim.rng.randrange(0, 5)
        sim.at(sim.now_ms + sim.ctl.heartbeat_interval_ms + jitter, self.tick)

    def _send(self, kind: str, invoke: Invoke, on_reply: Callable[[Reply], None]) -> None:
        if kind in self.in_flight:
            return  # one request of each kind at a time, as a broker's lifecycle manager
        self.in_flight.add(kind)
        generation = self.generation

        def handle(reply: Reply) -> None:
            if generation != self.generation:
                return  # an answer to a previous process
            self.in_flight.discard(kind)
            self.directory.learn(reply)
            on_reply(reply)

        self.sim.rpc(
            self.directory.target(self.sim), f"broker {self.broker_id} {kind}", invoke, handle
        )

    def _register(self) -> None:
        assert self.incarnation is not None
        request = BrokerRegistrationRequest(
            self.broker_id,
            CLUSTER_ID,
            self.incarnation,
            endpoints=(Endpoint("PLAINTEXT", f"broker-{self.broker_id}", 9092),),
            features=BROKER_FEATURES,
            rack=self.rack,
        )

        def on_reply(reply: Reply) -> None:
            if reply.ok:
                answer: BrokerRegistrationReply = reply.value
                self.epoch = answer.broker_epoch

        self._send("register", lambda c, now: c.register_broker(request, now), on_reply)

    def _heartbeat(self) -> None:
        assert self.epoch is not None
        request = BrokerHeartbeatRequest(
            self.broker_id,
            self.epoch,
            self.applied_end - 1,
            want_shut_down=self.mode == "shutting_down",
        )

        def on_reply(reply: Reply) -> None:
            if reply.ok:
                answer: BrokerHeartbeatReply = reply.value
                self.fenced = answer.is_fenced
                if answer.should_shut_down and self.mode == "shutting_down":
                    self.sim.stats["controlled shutdowns completed"] += 1
                    self.stop(self.sim.broker_restart_delay_ms())
            elif isinstance(reply.error, StaleBrokerEpochError):
                self.epoch = None  # register again (same incarnation: a retry)

        self._send("heartbeat", lambda c, now: c.broker_heartbeat(request, now), on_reply)

    def _image(self) -> MetadataImage:
        image = self.sim.checker.image_at(self.applied_end)
        assert image is not None, f"broker {self.broker_id} applied a non-batch end"
        return image

    def _caught_up(self, broker_id: int, image: MetadataImage) -> bool:
        """Whether a follower fetches (as its leader would see it): alive, not stalled, and
        the committed image's registration is its live, unfenced incarnation."""
        broker = self.sim.brokers.get(broker_id)
        registration = image.cluster.brokers.get(broker_id)
        return (
            broker is not None
            and broker.mode in ("running", "shutting_down")
            and registration is not None
            and registration.incarnation_id == broker.incarnation
            and not registration.fenced
        )

    def _alter_partition(self) -> None:
        """Shrink or expand the ISR of one partition this broker leads (module docstring)."""
        sim = self.sim
        image = self._image()
        mine = image.cluster.brokers.get(self.broker_id)
        if mine is None or mine.broker_epoch != self.epoch:
            return
        led = [
            (topic.topic_id, partition_id, partition)
            for _, topic in sorted(image.topics.by_name.items())
            for partition_id, partition in sorted(topic.partitions.items())
            if partition.leader == self.broker_id
        ]
        if not led:
            return
        topic_id, partition_id, partition = sim.rng.choice(led)
        isr = list(partition.isr)
        lagging = [b for b in isr if b != self.broker_id and not self._caught_up(b, image)]
        healthy = [b for b in isr if b != self.broker_id and b not in lagging]
        joining = [b for b in partition.replicas if b not in isr and self._caught_up(b, image)]
        if lagging:
            isr.remove(sim.rng.choice(lagging))
        elif joining:
            isr.append(sim.rng.choice(joining))
        elif healthy and sim.rng.random() < 0.2:
            isr.remove(sim.rng.choice(healthy))  # a follower that fell behind for a moment
        else:
            return
        brokers = image.cluster.brokers
        item = AlterPartitionItem(
            topic_id,
            partition_id,
            partition.leader_epoch,
            tuple(IsrMember(b, brokers[b].broker_epoch if b in brokers else -1) for b in isr),
            partition.partition_epoch,
        )
        epoch = self.epoch
        assert epoch is not None
        self._send(
            "alter_partition",
            lambda c, now: c.alter_partition(self.broker_id, epoch, [item], now),
            lambda reply: None,
        )

    def _allocate_producer_ids(self) -> None:
        epoch = self.epoch
        assert epoch is not None
        self._send(
            "producer_ids",
            lambda c, now: c.allocate_producer_ids(self.broker_id, epoch, now),
            lambda reply: None,
        )

    def healthy_in(self, image: MetadataImage) -> bool:
        """Liveness: running, registered as this incarnation, unfenced, not shutting down."""
        registration = image.cluster.brokers.get(self.broker_id)
        return (
            self.mode == "running"
            and registration is not None
            and registration.incarnation_id == self.incarnation
            and registration.broker_epoch == self.epoch
            and registration.is_active
        )


@dataclass
class AdminClient:
    """The operator's client (module docstring)."""

    sim: ControllerSimulation
    directory: ControllerDirectory = field(init=False)
    marker_attempts: int = 0
    marker_in_flight: bool = False
    # The last offset of the records of the liveness phase's successful CreateTopics.
    marker_offset: int | None = None

    def __post_init__(self) -> None:
        self.directory = ControllerDirectory(self.sim.voter_ids)

    def _send(self, description: str, invoke: Invoke, on_reply: Callable[[Reply], None]) -> None:
        def handle(reply: Reply) -> None:
            self.directory.learn(reply)
            on_reply(reply)

        self.sim.rpc(self.directory.target(self.sim), description, invoke, handle)

    def random_request(self) -> None:
        """One request of the safety phase, chosen by weight."""
        rng = self.sim.rng
        ops: list[tuple[float, Callable[[], None]]] = [
            (25, self._create_topic),
            (self.sim.ctl.topic_delete_weight, self._delete_topic),
            (6, self._create_partitions),
            (8, self._elect_leaders),
            (8, self._alter_configs),
            (6, self._reassign),
            (1, self._unregister_broker),
            (25, self._read),
        ]
        pick = rng.uniform(0, sum(weight for weight, _ in ops))
        for weight, op in ops:
            pick -= weight
            if pick <= 0:
                op()
                return
        ops[-1][1]()

    def _create_topic(self) -> None:
        rng = self.sim.rng
        configs: dict[str, str] = {}
        if rng.random() < 0.3:
            configs["unclean.leader.election.enable"] = "true"
        if rng.random() < 0.1:
            configs["min.insync.replicas"] = "2"
        topic = CreatableTopic(
            rng.choice(TOPIC_NAMES),
            num_partitions=rng.randint(1, self.sim.ctl.partitions_per_topic),
            replication_factor=rng.randint(1, 3),
            configs=configs,
        )
        self._send(
            f"create topic {topic.name}",
            lambda c, now: c.create_topics([topic], now),
            lambda reply: None,
        )

    def _delete_topic(self) -> None:
        name = self.sim.rng.choice(TOPIC_NAMES)
        self._send(
            f"delete topic {name}", lambda c, now: c.delete_topics(now, [name]), lambda r: None
        )

    def _create_partitions(self) -> None:
        request = CreatePartitionsTopic(
            self.sim.rng.choice(TOPIC_NAMES), self.sim.rng.randint(2, 4)
        )
        self._send(
            f"create partitions {request}",
            lambda c, now: c.create_partitions([request], now),
            lambda r: None,
        )

    def _elect_leaders(self) -> None:
        rng = self.sim.rng
        election = rng.choice((ElectionType.PREFERRED, ElectionType.UNCLEAN))
        partitions = None if rng.random() < 0.5 else [(rng.choice(TOPIC_NAMES), rng.randint(0, 2))]
        self._send(
            f"{election.name} elections for {partitions or 'all'}",
            lambda c, now: c.elect_leaders(election, now, partitions),
            lambda r: None,
        )

    def _alter_configs(self) -> None:
        rng = self.sim.rng
        if rng.random() < 0.3:
            resource = broker_resource()
            op = AlterConfigOp("log.retention.ms", AlterConfigOpType.SET, str(rng.randint(1, 9)))
        else:
            resource = topic_resource(rng.choice(TOPIC_NAMES))
            op = rng.choice(
                (
                    AlterConfigOp("retention.ms", AlterConfigOpType.SET, str(rng.randint(1, 9))),
                    AlterConfigOp("retention.ms", AlterConfigOpType.DELETE),
                    AlterConfigOp(
                        "unclean.leader.election.enable",
                        AlterConfigOpType.SET,
                        rng.choice(("true", "false")),
                    ),
                )
            )
        self._send(
            f"alter config {resource} {op}",
            lambda c, now: c.incremental_alter_configs({resource: [op]}, now),
            lambda r: None,
        )

    def _reassign(self) -> None:
        rng = self.sim.rng
        broker_ids = sorted(self.sim.brokers)
        replicas: tuple[int, ...] | None = None
        if rng.random() < 0.7:
            replicas = tuple(rng.sample(broker_ids, rng.randint(1, min(3, len(broker_ids)))))
        target = ReassignablePartition(rng.choice(TOPIC_NAMES), rng.randint(0, 2), replicas)
        self._send(
            f"reassign {target}",
            lambda c, now: c.alter_partition_reassignments([target], now),
            lambda r: None,
        )

    def _unregister_broker(self) -> None:
        """Decommission a broker (usually a dead one; a live one registers again after its
        next heartbeat is refused with STALE_BROKER_EPOCH)."""
        sim = self.sim
        down = [b.broker_id for b in sim.brokers.values() if not b.alive]
        broker_id = sim.rng.choice(down or sorted(sim.brokers))
        self._send(
            f"unregister broker {broker_id}",
            lambda c, now: c.unregister_broker(broker_id, now),
            lambda r: None,
        )

    def _read(self) -> None:
        """Describe everything, from any controller (standbys serve committed reads)."""
        self.sim.read_from(self.sim.rng.choice(self.sim.voter_ids))

    # --- the liveness phase -----------------------------------------------------------------

    def create_marker_topic(self) -> None:
        """Liveness: create a fresh topic until one CreateTopics succeeds."""
        if self.marker_offset is not None or self.marker_in_flight:
            return
        self.marker_in_flight = True
        self.marker_attempts += 1
        topic = CreatableTopic(f"live-{self.marker_attempts}", 1, 1)

        def on_reply(reply: Reply) -> None:
            self.marker_in_flight = False
            if not reply.ok:
                return
            results: tuple[CreateTopicResult, ...] = reply.value
            if results[0].error is None and reply.appended:
                self.marker_offset = max(batch.last_offset for batch in reply.appended)

        self._send(
            f"create topic {topic.name}", lambda c, now: c.create_topics([topic], now), on_reply
        )
