"""ReplicationControl: topics, partitions, ISRs and leaders, as the controller keeps them.

The controller's replication manager (Kafka's `ReplicationControlManager`;
docs/design/kraft.md#controller, #metadata-records, #partitions-and-alterpartition). It turns admin
requests (CreateTopics, DeleteTopics, CreatePartitions, ElectLeaders, AlterPartitionReassignments)
and broker events (AlterPartition, fencing, unfencing, controlled shutdown) into metadata records,
replays those records into timeline structures, and answers reads at the committed offset.

Rules:
- Writes validate against the *latest* state, uncommitted records included, so that successive
  writes see each other; they return a `ControllerResult` (records and response) and never
  change state. Only `replay(record, offset)` changes state, on the active controller as soon
  as the records have offsets, on standbys once they commit.
- Reads take `offset`, the committed (last stable) offset, and read the timeline as of it, so
  they never show uncommitted state; an offset without a timeline snapshot raises
  `UnknownSnapshotError`. `offset=None` reads the latest state (the write path and tests only).
- Per-item failures are `ApiError` values in the response, with Kafka's error codes and a
  message that names the topic or partition. A failure of the whole request (a stale broker
  epoch on AlterPartition, too many partitions in one request) is raised as the `KafkaError`.
- Every partition change goes through `PartitionChangeBuilder`. Leaders are acceptable when
  `BrokerLiveness.is_active` (registered, unfenced, not in controlled shutdown, not being
  evacuated); the same test admits a broker into an ISR and into a placement; unclean
  elections happen only where the topic allows them (`TopicConfigs`), or when an operator asks
  for one (ElectLeaders UNCLEAN).
- A broker that is fenced, enters controlled shutdown or is unregistered leaves every ISR
  (KIP-841), except as the last member, which stays with leader -1; where it led, a new leader
  is elected. With `eligible.leader.replicas.version` on (KIP-966, `elr_enabled`) the last
  member leaves too, and the members that left below min ISR are the ELR (the builder's rules);
  a broker registering after an unclean shutdown leaves every ISR and ELR
  (`handle_broker_unclean_shutdown`). ISR members in controlled shutdown leave in the same
  change (without ELR the last of them stays if nobody else does): a whole cluster's stop
  writes one change a partition. When a
  broker is unfenced, every leaderless partition gets an election.
- Broker events are bounded: each call makes at most `max_records` changes (the caller steps
  the rest), and passes over partitions where nothing can change without building a change.
  `elect_leaderless_partitions` is the safety net behind unfencing: clean elections for
  leaderless partitions with an active ISR member (docs/controller.md#leaderless-partitions).
- Records of a new topic: TopicRecord, then one PartitionRecord per partition, then its
  ConfigRecords. New partitions start with ISR = the active assigned replicas, leader = ISR[0],
  both epochs 0, RECOVERED.
- A reassignment to target T over current replicas R (whose original replicas are O = R minus
  adding): adding = T minus O, removing = R minus T, replicas = T followed by removing. It
  completes inside the builder once the ISR covers T. Cancelling reverts replicas and ISR to
  themselves minus adding; if that empties the ISR, the cancel is an unclean election of the
  first active original replica (ISR = [it], RECOVERING), refused with
  INVALID_REPLICA_ASSIGNMENT unless the topic allows unclean elections and one is active.

State (timeline structures on one `SnapshotRegistry`, so every read at a snapshot offset and
every revert covers all of it):
- topics by id (`_Topic`: name, id, and a timeline map of partition id -> registration);
- topic ids by name; names that collide once '.' is read as '_' (Kafka's metric-name rule);
- broker -> partitions whose ISR holds it, except leaderless partitions whose only ISR member
  it is; broker -> those (key -1: leaderless partitions whose ISR has several members or none
  but an ELR; key -2: neither), which together are every
  leaderless partition; broker -> partitions whose ELR holds it; and broker -> partitions it
  leads, for fencing, unfencing, controlled shutdown and the leaderless sweep, so that each of
  their steps visits only partitions it changes;
- partitions being reassigned, and partitions whose leader is not their preferred replica.
The partition sets hold one key object per partition for its topic's life (`_Topic.key`),
hashed by identity: a `TopicIdPartition` hashes its UUID with a Python call, and a replay
writes 4-5 sets a partition. Only `_index` puts keys into the sets, and only `_Topic.key`
makes them, so no two equal keys can meet in a set (the sets are typed `_PartitionKey`: mypy
refuses a plain `TopicIdPartition` added to one). A key equals, but does not hash like, a
plain `TopicIdPartition`: never mix the two in one set or dict.
Nested timeline structures (one partition map per topic, one set per broker) are created on
first use; created while snapshots exist, they read as empty at older snapshots, which is when
their parent did not hold them yet.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from functools import partial
from typing import NamedTuple, Protocol, TypedDict
from uuid import UUID

from replog.errors import (
    ElectionNotNeededError,
    EligibleLeadersNotAvailableError,
    FencedLeaderEpochError,
    IneligibleReplicaError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidTopicError,
    InvalidUpdateVersionError,
    KafkaError,
    MetadataReplayError,
    NewLeaderElectedError,
    NoReassignmentInProgressError,
    NotControllerError,
    PolicyViolationError,
    PreferredLeaderNotAvailableError,
    StaleBrokerEpochError,
    TopicAlreadyExistsError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)
from replog.quorum.controller.broker_liveness import BrokerLiveness
from replog.quorum.controller.controller_result import ControllerResult, StepContext
from replog.quorum.controller.partition_change_builder import Election, PartitionChangeBuilder
from replog.quorum.controller.placement import RandomSource, place_replicas
from replog.quorum.metadata.deferred_records import DeferredItem, DeferredRecords, PartitionRecordOf
from replog.quorum.metadata.partition_registration import PartitionRegistration
from replog.quorum.metadata.records import (
    LEADER_UNCHANGED,
    NO_LEADER,
    ConfigRecord,
    ConfigResourceType,
    LeaderRecoveryState,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from replog.timeline import SnapshotRegistry, TimelineHashMap, TimelineHashSet
from replog.topic_names import check_topic_creatable

# Kafka's limits: one CreateTopics (here also CreatePartitions) request may add at most this
# many partitions, and one user operation may write at most this many records.
MAX_PARTITIONS_PER_REQUEST = 10_000
MAX_RECORDS_PER_USER_OP = 10_000
# Kafka's bound on the elections one periodic run (leader balancing, unclean) may write.
MAX_ELECTIONS_PER_RUN = 1_000
# Partitions one step of a CreateTopics writes (whole topics; `create_topics`): 100 topics of
# 10 partitions in one write held the controller's loop 40-60 ms of a loaded machine's CPU
# (placement, 1,100 records built, replayed and encoded); 250 take about a quarter of that.
CREATE_TOPICS_STEP_PARTITIONS = 250

ReplayedRecord = TopicRecord | PartitionRecord | PartitionChangeRecord | RemoveTopicRecord
REPLAYED_RECORD_TYPES: tuple[type, ...] = (
    TopicRecord,
    PartitionRecord,
    PartitionChangeRecord,
    RemoveTopicRecord,
)


class TopicConfigs(Protocol):
    """What replication control needs from the config manager (`ConfigControl`)."""

    def unclean_leader_election_enabled(self, topic_name: str, /) -> bool:
        """`unclean.leader.election.enable` of the topic, latest state (default false)."""
        ...

    def min_insync_replicas(self, topic_name: str, /) -> int:
        """`min.insync.replicas` of the topic, latest state (read only with ELR on)."""
        ...

    def delete_topic_configs(self, topic_name: str, /) -> None:
        """Forget a deleted topic's configs: replaying its RemoveTopicRecord does this."""
        ...


# Validates the configs of a topic about to be created, raising a KafkaError
# (InvalidConfigError) that names the bad key; whatever it returns is ignored. Config validation
# belongs to the config manager.
ConfigValidator = Callable[[str, Mapping[str, str]], object]


class TopicIdPartition(NamedTuple):
    topic_id: UUID
    partition_id: int


class ElectionType(IntEnum):
    """ElectLeaders' election type, with Kafka's wire values."""

    PREFERRED = 0
    UNCLEAN = 1


@dataclass(frozen=True, slots=True)
class ApiError:
    """One item's failure in a response: the error class (its Kafka code) and a message."""

    error: type[KafkaError]
    message: str

    @classmethod
    def of(cls, exc: KafkaError) -> ApiError:
        return cls(type(exc), str(exc))

    @property
    def code(self) -> int:
        return self.error.code

    @property
    def error_name(self) -> str:
        return self.error.error_name

    def exception(self) -> KafkaError:
        """The error as an exception, for callers that raise it."""
        return self.error(self.message)


# -- requests and responses ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CreatableTopic:
    name: str
    num_partitions: int = -1  # -1: the default (`num.partitions`)
    replication_factor: int = -1  # -1: the default (`default.replication.factor`)
    # Manual assignment: partition id -> replicas. Both counts above must then be -1.
    assignments: Mapping[int, Sequence[int]] = field(default_factory=dict)
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CreateTopicResult:
    name: str
    topic_id: UUID | None = None
    num_partitions: int = -1
    replication_factor: int = -1
    error: ApiError | None = None


@dataclass(frozen=True, slots=True)
class DeleteTopicResult:
    name: str | None  # as requested, or resolved from the id
    topic_id: UUID | None
    error: ApiError | None = None


@dataclass(frozen=True, slots=True)
class CreatePartitionsTopic:
    name: str
    count: int  # the new total number of partitions
    assignments: Sequence[Sequence[int]] | None = None  # one replica list per new partition


@dataclass(frozen=True, slots=True)
class CreatePartitionsResult:
    name: str
    error: ApiError | None = None


@dataclass(frozen=True, slots=True)
class IsrMember:
    broker_id: int
    broker_epoch: int = -1  # -1: not checked (senders before KIP-903)


@dataclass(frozen=True, slots=True)
class AlterPartitionItem:
    topic_id: UUID
    partition_id: int
    leader_epoch: int
    new_isr: tuple[IsrMember, ...]
    partition_epoch: int
    leader_recovery_state: LeaderRecoveryState = LeaderRecoveryState.RECOVERED


@dataclass(frozen=True, slots=True)
class AlterPartitionResult:
    topic_id: UUID
    partition_id: int
    error: ApiError | None = None
    # The partition's state after the change (unset when `error` is set).
    leader: int = NO_LEADER
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    leader_recovery_state: LeaderRecoveryState = LeaderRecoveryState.RECOVERED
    partition_epoch: int = -1


@dataclass(frozen=True, slots=True)
class ElectLeadersResult:
    topic: str
    partition_id: int
    error: ApiError | None = None


@dataclass(frozen=True, slots=True)
class ReassignablePartition:
    topic: str
    partition_id: int
    replicas: tuple[int, ...] | None  # the target; None cancels the ongoing reassignment


@dataclass(frozen=True, slots=True)
class ReassignmentResult:
    topic: str
    partition_id: int
    error: ApiError | None = None


@dataclass(frozen=True, slots=True)
class OngoingReassignment:
    topic: str
    partition_id: int
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class TopicDescription:
    name: str
    topic_id: UUID | None
    partitions: tuple[PartitionRegistration, ...] = ()  # partitions[i] is partition i
    error: ApiError | None = None


class _OverRequestLimit(Exception):
    """CreatePartitions: one topic's new partitions alone exceed what the request may add."""

    def __init__(self, additional: int) -> None:
        super().__init__(additional)
        self.additional = additional


# -- state --------------------------------------------------------------------------------------


class _PartitionKey(TopicIdPartition):
    """A partition in the index sets: hashed by identity, in C (module State)."""

    __slots__ = ()
    __hash__ = object.__hash__


class _Topic:
    """One topic: its name, id, partitions (a timeline map of its own) and their index keys."""

    __slots__ = ("keys", "name", "partitions", "topic_id")

    def __init__(self, registry: SnapshotRegistry, name: str, topic_id: UUID) -> None:
        self.name = name
        self.topic_id = topic_id
        self.partitions: TimelineHashMap[int, PartitionRegistration] = TimelineHashMap(registry)
        # Never emptied: a revert may bring back a partition whose key the sets then hold.
        self.keys: dict[int, _PartitionKey] = {}

    def key(self, partition_id: int) -> _PartitionKey:
        """The one key of this topic's partition `partition_id` in the index sets."""
        key = self.keys.get(partition_id)
        if key is None:
            key = self.keys[partition_id] = _PartitionKey(self.topic_id, partition_id)
        return key

    def __repr__(self) -> str:
        return f"_Topic({self.name!r}, {self.topic_id})"


def _isr_index_entry(
    registration: PartitionRegistration | None,
) -> tuple[tuple[int, ...], int | None]:
    """Where a partition stands in the ISR indexes: the brokers whose `_isr_members` hold it,
    and the key of `_leaderless_by_member` holding it (None: it has a leader). A leaderless
    partition whose ISR is one broker is that broker's only, under its id: fencing it again
    changes nothing there, so no step visits it; NO_LEADER keys the leaderless partitions
    whose ISR has several members (each of them can still leave it), or none but an ELR (an
    ELR member may lead it, KIP-966); _NONE_ELIGIBLE those with neither."""
    if registration is None:
        return (), None
    isr = registration.isr
    if registration.leader != NO_LEADER:
        return isr, None
    if len(isr) == 1:
        return (), isr[0]
    if not isr and not registration.elr:
        return (), _NONE_ELIGIBLE
    return isr, NO_LEADER


# The `_leaderless_by_member` key of leaderless partitions with neither ISR nor ELR members
# (KIP-966: each left through an unclean shutdown): only an unclean election can lead them.
_NONE_ELIGIBLE = -2


def _imbalanced_entry(registration: PartitionRegistration | None) -> int | None:
    """The key of `_imbalanced_by_preferred` holding a partition: its preferred replica when
    another (or none) leads it, else None."""
    if registration is None:
        return None
    replicas = registration.replicas
    if not replicas:
        return NO_LEADER
    preferred = replicas[0]
    return None if preferred == registration.leader else preferred


def _collision_key(name: str) -> str | None:
    """The name with '.' read as '_', for names that hold either; None for the others."""
    if "." in name or "_" in name:
        return name.replace(".", "_")
    return None


class _ElrSettings(TypedDict, total=False):
    elr_enabled: bool
    min_isr: int


_ELR_OFF: _ElrSettings = {}


class ReplicationControl:
    """Topics and partitions: records from requests, state from records, reads at offsets."""

    def __init__(
        self,
        snapshot_registry: SnapshotRegistry,
        cluster: BrokerLiveness,
        configs: TopicConfigs,
        rng: RandomSource,
        *,
        default_num_partitions: int = 1,
        default_replication_factor: int = 1,
        elr_enabled: Callable[[], bool] = lambda: False,
    ) -> None:
        if default_num_partitions < 1:
            raise ValueError(f"num.partitions must be at least 1, not {default_num_partitions}")
        if default_replication_factor < 1:
            raise ValueError(
                f"default.replication.factor must be at least 1, not {default_replication_factor}"
            )
        self._registry = snapshot_registry
        self._cluster = cluster
        self._configs = configs
        self._rng = rng
        self._default_num_partitions = default_num_partitions
        self._default_replication_factor = default_replication_factor
        # Whether the `eligible.leader.replicas.version` feature is on (latest state).
        self._elr_enabled = elr_enabled
        self._topics: TimelineHashMap[UUID, _Topic] = TimelineHashMap(snapshot_registry)
        self._topic_ids: TimelineHashMap[str, UUID] = TimelineHashMap(snapshot_registry)
        self._colliding: TimelineHashMap[str, frozenset[str]] = TimelineHashMap(snapshot_registry)
        self._isr_members: TimelineHashMap[int, TimelineHashSet[_PartitionKey]] = TimelineHashMap(
            snapshot_registry
        )
        self._leaderless_by_member: TimelineHashMap[int, TimelineHashSet[_PartitionKey]] = (
            TimelineHashMap(snapshot_registry)
        )
        self._leaders: TimelineHashMap[int, TimelineHashSet[_PartitionKey]] = TimelineHashMap(
            snapshot_registry
        )
        self._elr_members: TimelineHashMap[int, TimelineHashSet[_PartitionKey]] = TimelineHashMap(
            snapshot_registry
        )
        self._reassigning: TimelineHashSet[_PartitionKey] = TimelineHashSet(snapshot_registry)
        # Partitions not led by their preferred replica, by that replica: leader balancing
        # visits only the active brokers' own (a stopping cluster's are all imbalanced).
        self._imbalanced_by_preferred: TimelineHashMap[int, TimelineHashSet[_PartitionKey]] = (
            TimelineHashMap(snapshot_registry)
        )

    # == writes: topics =========================================================================

    def create_topics(
        self,
        topics: Sequence[CreatableTopic],
        *,
        validate_only: bool = False,
        config_validator: ConfigValidator | None = None,
        step_partitions: int = CREATE_TOPICS_STEP_PARTITIONS,
    ) -> ControllerResult[tuple[CreateTopicResult, ...]]:
        """CreateTopics: one result per requested topic, in request order.

        Raises PolicyViolationError if the request would add more than
        MAX_PARTITIONS_PER_REQUEST partitions (counted before validation, as Kafka does). Each
        topic's records are atomic (no broker sees a topic with part of its partitions), so
        they must fit one batch: a topic whose records would take its step past
        MAX_RECORDS_PER_USER_OP fails with POLICY_VIOLATION, to be created by another request.

        A request is written in steps of whole topics, a step ending once it holds
        `step_partitions` partitions (a topic larger than that is a step of its own), each
        step validated against the state the earlier ones left (`ControllerResult.then`;
        docs/controller.md, "Stepped writes"); the last step answers for every topic. A
        request checking only (`validate_only`) is one step.
        """
        total = sum(self._requested_partition_count(t) for t in topics)
        if total > MAX_PARTITIONS_PER_REQUEST:
            raise PolicyViolationError(
                f"CreateTopics would add {total} partitions; at most "
                f"{MAX_PARTITIONS_PER_REQUEST} are allowed per request"
            )
        occurrences = Counter(t.name for t in topics)
        if validate_only:
            step_partitions = total + 1  # one step, which writes nothing
        return self._create_topics_step(
            tuple(topics), (), occurrences, step_partitions, validate_only, config_validator
        )

    def _create_topics_step(
        self,
        topics: tuple[CreatableTopic, ...],
        answered: tuple[CreateTopicResult, ...],
        occurrences: Counter[str],
        step_partitions: int,
        validate_only: bool,
        config_validator: ConfigValidator | None,
        ctx: StepContext | None = None,
    ) -> ControllerResult[tuple[CreateTopicResult, ...]]:
        """The next step of `create_topics`: whole topics from the head of `topics` until
        `step_partitions` partitions (at least one topic); `answered` holds the results of
        the earlier steps. (`ctx`: a later step is called with one, which it does not need.)"""
        # Names and ids this step creates: not replayed yet, yet later topics must see them.
        # (An earlier step's are replayed: the state this step validates against has them.)
        claimed_keys: dict[str, str] = {}
        claimed_ids: set[UUID] = set()
        records: list[MetadataRecord] = []
        results: list[CreateTopicResult] = []
        placed = 0
        # Nothing this step does changes which brokers are active: placement reads them once.
        active = self._cluster.active_brokers()
        for index, topic in enumerate(topics):
            if placed >= step_partitions:
                then = partial(
                    self._create_topics_step,
                    topics[index:],
                    (*answered, *results),
                    occurrences,
                    step_partitions,
                    False,
                    config_validator,
                )
                return ControllerResult.partial(records, then, is_atomic=True)
            try:
                if occurrences[topic.name] > 1:
                    raise InvalidRequestError(
                        f"the request names it {occurrences[topic.name]} times"
                    )
                check_topic_creatable(topic.name)
                if topic.name in self._topic_ids.live:
                    raise TopicAlreadyExistsError("it already exists")
                self._check_collision(topic.name, claimed_keys)
                if config_validator is not None:
                    config_validator(topic.name, topic.configs)
                partitions = self._new_topic_partitions(topic, active)
                placed += len(partitions)
                needed = 1 + len(partitions) + len(topic.configs)
                if len(records) + needed > MAX_RECORDS_PER_USER_OP:
                    raise PolicyViolationError(
                        f"its {needed} records would take the request past "
                        f"{MAX_RECORDS_PER_USER_OP} records; create it in another request"
                    )
            except KafkaError as e:
                error = ApiError(type(e), f"cannot create topic {topic.name!r}: {e}")
                results.append(CreateTopicResult(topic.name, error=error))
                continue
            topic_id = self._new_topic_id(claimed_ids)
            claimed_ids.add(topic_id)
            key = _collision_key(topic.name)
            if key is not None:
                claimed_keys[key] = topic.name
            records.append(TopicRecord(name=topic.name, topic_id=topic_id))
            records.extend(
                PartitionRecord(topic_id, partition_id, replicas, isr, isr[0])
                for partition_id, (replicas, isr) in enumerate(partitions)
            )
            records.extend(
                ConfigRecord(ConfigResourceType.TOPIC, topic.name, name, topic.configs[name])
                for name in sorted(topic.configs)
            )
            results.append(
                CreateTopicResult(
                    topic.name,
                    topic_id=topic_id,
                    num_partitions=len(partitions),
                    replication_factor=len(partitions[0][0]),
                )
            )
        return ControllerResult.of(
            () if validate_only else records, (*answered, *results), is_atomic=True
        )

    def delete_topics(
        self, names: Sequence[str] = (), topic_ids: Sequence[UUID] = ()
    ) -> ControllerResult[tuple[DeleteTopicResult, ...]]:
        """DeleteTopics by name and/or id: one result per requested name, then per id.

        A topic reached both by name and by id is deleted once; a name or id repeated in the
        request is INVALID_REQUEST.
        """
        name_count = Counter(names)
        id_count = Counter(topic_ids)
        deleted: set[UUID] = set()
        records: list[MetadataRecord] = []
        results: list[DeleteTopicResult] = []

        def delete(topic: _Topic) -> None:
            if topic.topic_id not in deleted:
                deleted.add(topic.topic_id)
                records.append(RemoveTopicRecord(topic.topic_id))

        for name in names:
            if name_count[name] > 1:
                error = ApiError(
                    InvalidRequestError, f"cannot delete topic {name!r}: the request repeats it"
                )
                results.append(DeleteTopicResult(name, None, error))
                continue
            topic_id = self._topic_ids.live.get(name)
            if topic_id is None:
                error = ApiError(UnknownTopicOrPartitionError, f"no topic named {name!r}")
                results.append(DeleteTopicResult(name, None, error))
                continue
            delete(self._topics.live[topic_id])
            results.append(DeleteTopicResult(name, topic_id))
        for topic_id in topic_ids:
            if id_count[topic_id] > 1:
                message = f"cannot delete topic id {topic_id}: the request repeats it"
                error = ApiError(InvalidRequestError, message)
                results.append(DeleteTopicResult(None, topic_id, error))
                continue
            found = self._topics.live.get(topic_id)
            if found is None:
                error = ApiError(UnknownTopicIdError, f"no topic with id {topic_id}")
                results.append(DeleteTopicResult(None, topic_id, error))
                continue
            delete(found)
            results.append(DeleteTopicResult(found.name, topic_id))
        return ControllerResult.of(records, tuple(results))

    def create_partitions(
        self, topics: Sequence[CreatePartitionsTopic], *, validate_only: bool = False
    ) -> ControllerResult[tuple[CreatePartitionsResult, ...]]:
        """CreatePartitions: raise topics' partition counts (never lower them).

        Raises PolicyViolationError if the request would add more than
        MAX_PARTITIONS_PER_REQUEST partitions (one record each, so the atomic result fits one
        batch).
        """
        occurrences = Counter(t.name for t in topics)
        records: list[MetadataRecord] = []
        results: list[CreatePartitionsResult] = []
        added = 0
        for request in topics:
            try:
                if occurrences[request.name] > 1:
                    raise InvalidRequestError(
                        f"the request names it {occurrences[request.name]} times"
                    )
                new_records = self._new_partitions(request, MAX_PARTITIONS_PER_REQUEST - added)
            except _OverRequestLimit as over:
                # Checked before any placement: a count near 2**31 would otherwise build that
                # many registrations on the controller's one thread before the refusal.
                raise PolicyViolationError(
                    f"CreatePartitions would add at least {added + over.additional} partitions; "
                    f"at most {MAX_PARTITIONS_PER_REQUEST} are allowed per request"
                ) from None
            except KafkaError as e:
                error = ApiError(
                    type(e), f"cannot create partitions for topic {request.name!r}: {e}"
                )
                results.append(CreatePartitionsResult(request.name, error))
                continue
            added += len(new_records)
            records.extend(new_records)
            results.append(CreatePartitionsResult(request.name))
        if added > MAX_PARTITIONS_PER_REQUEST:
            raise PolicyViolationError(
                f"CreatePartitions would add {added} partitions; at most "
                f"{MAX_PARTITIONS_PER_REQUEST} are allowed per request"
            )
        return ControllerResult.of(() if validate_only else records, tuple(results), is_atomic=True)

    # == writes: ISR and leaders ================================================================

    def alter_partition(
        self, broker_id: int, broker_epoch: int, items: Sequence[AlterPartitionItem]
    ) -> ControllerResult[tuple[AlterPartitionResult, ...]]:
        """AlterPartition from a partition leader: Kafka's checks in Kafka's order.

        The whole request fails with StaleBrokerEpochError (raised) if `broker_epoch` is not the
        sender's current registration. Per partition: UNKNOWN_TOPIC_ID,
        UNKNOWN_TOPIC_OR_PARTITION, NOT_CONTROLLER (the sender knows newer epochs than this
        controller), FENCED_LEADER_EPOCH, INVALID_REQUEST (not the leader), INVALID_UPDATE_VERSION,
        INVALID_REQUEST (ISR not within the replicas or without the leader; bad recovery state),
        INELIGIBLE_REPLICA; then the builder. NEW_LEADER_ELECTED if completing a reassignment
        moved leadership away from the sender; otherwise the partition's new (or, for a no-op,
        unchanged) state.
        """
        registered_epoch = self._cluster.broker_epoch(broker_id)
        if registered_epoch != broker_epoch:
            raise StaleBrokerEpochError(
                f"AlterPartition from broker {broker_id} carries broker epoch {broker_epoch}, "
                + (
                    "but the broker is not registered"
                    if registered_epoch is None
                    else f"but its registration has broker epoch {registered_epoch}"
                )
            )
        repeated = Counter((item.topic_id, item.partition_id) for item in items)
        records: list[MetadataRecord] = []
        results: list[AlterPartitionResult] = []
        for item in items:
            topic_id, partition_id = item.topic_id, item.partition_id
            topic = self._topics.live.get(topic_id)
            if topic is None:
                message = f"AlterPartition: no topic with id {topic_id}"
                error = ApiError(UnknownTopicIdError, message)
                results.append(AlterPartitionResult(topic_id, partition_id, error))
                continue
            where = f"{topic.name}-{partition_id}"
            partition = topic.partitions.live.get(partition_id)
            try:
                if partition is None:
                    raise UnknownTopicOrPartitionError("no such partition")
                if repeated[(topic_id, partition_id)] > 1:
                    raise InvalidRequestError("the request names the partition more than once")
                self._check_alter_partition(broker_id, item, partition)
            except KafkaError as e:
                error = ApiError(type(e), f"AlterPartition of {where} from broker {broker_id}: {e}")
                results.append(AlterPartitionResult(topic_id, partition_id, error))
                continue
            record = PartitionChangeBuilder(
                partition,
                topic_id,
                partition_id,
                self._cluster.is_active,
                election=self._election_for(topic.name),
                target_isr=tuple(member.broker_id for member in item.new_isr),
                target_leader_recovery_state=item.leader_recovery_state,
                **self._elr_settings(topic.name),
            ).build()
            if record is not None:
                records.append(record)
                partition = partition.merge(record)
                if record.leader not in (LEADER_UNCHANGED, broker_id):
                    error = ApiError(
                        NewLeaderElectedError,
                        f"AlterPartition of {where} completed its reassignment, and broker "
                        f"{record.leader} now leads it instead of broker {broker_id}",
                    )
                    results.append(AlterPartitionResult(topic_id, partition_id, error))
                    continue
            results.append(
                AlterPartitionResult(
                    topic_id,
                    partition_id,
                    leader=partition.leader,
                    leader_epoch=partition.leader_epoch,
                    isr=partition.isr,
                    leader_recovery_state=partition.leader_recovery_state,
                    partition_epoch=partition.partition_epoch,
                )
            )
        return ControllerResult.of(records, tuple(results))

    def handle_broker_fenced(
        self, broker_id: int, *, max_records: int | None = None
    ) -> tuple[PartitionChangeRecord, ...]:
        """The partition changes when `broker_id` is fenced (or its session expired).

        It leaves every ISR (KIP-841) except as the last member, which stays with leader -1;
        partitions it led get a new leader from the ISR, or an unclean one where the topic
        allows. The broker is treated as unacceptable already, because the caller's fencing
        record (which it appends after these) is not replayed yet.

        With `max_records`, at most that many changes; fewer means these are all. The caller
        then fences in steps (one per loop turn), so that one write never holds the single
        thread, and the Raft loop with it, for seconds. Partitions it is the last ISR member of
        with no leader are not visited at all (nothing would change; they are indexed apart,
        `_leaderless_by_member`), so every partition a step visits changes and a step costs
        what it changes, however many partitions earlier steps left with the broker as their
        last ISR member. Such partitions of a topic that allows unclean elections wait for the
        unclean check or another broker's unfencing, as partitions left leaderless by any
        earlier fencing do.
        """
        members = self._isr_members.live.get(broker_id)
        if members is None:
            return ()
        return self._update_isrs_and_leaders(
            members.live, broker_to_remove=broker_id, max_records=max_records
        )

    def handle_controlled_shutdown(
        self, broker_id: int, *, max_records: int | None = None
    ) -> tuple[PartitionChangeRecord, ...]:
        """The partition changes when `broker_id` enters controlled shutdown: as for fencing.

        The caller writes its controlled-shutdown record first, then these.
        """
        return self.handle_broker_fenced(broker_id, max_records=max_records)

    def handle_broker_unregistered(
        self, broker_id: int, *, max_records: int | None = None
    ) -> tuple[PartitionChangeRecord, ...]:
        """The partition changes when `broker_id` is unregistered: as for fencing, before the
        caller's UnregisterBrokerRecord."""
        return self.handle_broker_fenced(broker_id, max_records=max_records)

    def handle_broker_unclean_shutdown(
        self, broker_id: int, *, max_records: int | None = None
    ) -> tuple[PartitionChangeRecord, ...]:
        """The partition changes when `broker_id` registers after an unclean shutdown (KIP-966,
        Kafka's `handleBrokerUncleanShutdown`): its log may have lost what it had not synced,
        so it leaves every ISR, as for fencing, and every ELR. With ELR on, a partition whose
        last ISR member it was is left without a leader rather than led by a replica that may
        miss acknowledged records. The caller appends the new incarnation's registration after
        these. Bounded as `handle_broker_fenced`."""
        partitions: list[_PartitionKey] = []
        indexes = [self._isr_members, self._elr_members]
        if self._elr_enabled():
            # Without ELR a leaderless partition keeps its last ISR member whatever happens
            # to it, so those are visited with ELR only.
            indexes.append(self._leaderless_by_member)
        for index in indexes:
            members = index.live.get(broker_id)
            if members is not None:
                partitions.extend(members.live)
        return self._update_isrs_and_leaders(
            partitions, broker_to_remove=broker_id, max_records=max_records, unclean_shutdown=True
        )

    def fenced_brokers_named(self) -> list[int]:
        """The fenced or unregistered brokers still in some ISR beside other members, or still
        leading (a leader is in its ISR): moves a session-expiry fencing left for later, which
        `move_off_fenced_brokers` makes. A leaderless partition whose one ISR member is such a
        broker does not count: KIP-841 keeps it there. Costs the number of brokers."""
        return sorted(self._fenced_brokers_named())

    def names_fenced_brokers(self) -> bool:
        """Whether `fenced_brokers_named` names any (asked at every look at the controller's
        deadlines: stops at the first)."""
        return any(True for _ in self._fenced_brokers_named())

    def _fenced_brokers_named(self) -> Iterator[int]:
        cluster = self._cluster
        return (
            broker_id
            for broker_id, members in self._isr_members.live.items()
            if len(members)
            and (not cluster.is_registered(broker_id) or cluster.is_fenced(broker_id))
        )

    def move_off_fenced_brokers(
        self, max_records: int = MAX_ELECTIONS_PER_RUN
    ) -> ControllerResult[None]:
        """The moves of a fencing not made yet (`fenced_brokers_named`), as `handle_broker_fenced`
        makes them: at most `max_records` a step, for one broker a step (two brokers' changes
        to one partition built from the same state would undo each other), and `then` the
        next step, against the state this one leaves, until a step finds nothing."""
        for broker_id in self.fenced_brokers_named():
            records = self.handle_broker_fenced(broker_id, max_records=max_records)
            if records:
                return ControllerResult.partial(
                    records, lambda ctx: self.move_off_fenced_brokers(max_records)
                )
        return ControllerResult.of((), None)

    def handle_broker_unfenced(
        self, broker_id: int, *, max_records: int = MAX_ELECTIONS_PER_RUN
    ) -> ControllerResult[None]:
        """Elections for every leaderless partition, now that `broker_id` may lead (each in
        its topic's mode: unclean where the topic allows it, as Kafka's unfencing does).

        The broker counts as acceptable already, because the caller's unfencing record (which
        precedes these) is not replayed yet. At most `max_records` elections; if there may be
        more, `then` elects the rest cleanly on later turns (`elect_leaderless_partitions`),
        by which time the unfencing is replayed.
        """
        records = self._elect_leaderless(max_records, broker_to_add=broker_id, clean_only=False)
        return self._leaderless_step(records, max_records)

    def elect_leaderless_partitions(
        self, max_records: int = MAX_ELECTIONS_PER_RUN
    ) -> ControllerResult[None]:
        """Clean elections for every leaderless partition with an active ISR member: the safety
        net behind unfencing (a new active controller, and the periodic check, run it). At most
        `max_records` per step; `then` elects the rest on later turns."""
        records = self._elect_leaderless(max_records, broker_to_add=NO_LEADER, clean_only=True)
        return self._leaderless_step(records, max_records)

    def _leaderless_step(
        self, records: tuple[PartitionChangeRecord, ...], max_records: int
    ) -> ControllerResult[None]:
        if len(records) < max_records:
            return ControllerResult.of(records, None)
        return ControllerResult.partial(
            records, lambda ctx: self.elect_leaderless_partitions(max_records)
        )

    def elect_leaders(
        self,
        election_type: ElectionType,
        partitions: Sequence[tuple[str, int]] | None = None,
    ) -> ControllerResult[tuple[ElectLeadersResult, ...]]:
        """ElectLeaders (PREFERRED or UNCLEAN) for (topic, partition) pairs, or all partitions.

        Per partition: UNKNOWN_TOPIC_OR_PARTITION; ELECTION_NOT_NEEDED (preferred: the preferred
        replica already leads; unclean: it has a leader); PREFERRED_LEADER_NOT_AVAILABLE or
        ELIGIBLE_LEADERS_NOT_AVAILABLE when no election is possible. For all partitions
        (`partitions=None`), those that need no election are left out of the response. An
        operator's UNCLEAN election does not consult the topic's config.
        """
        records: list[MetadataRecord] = []
        results: list[ElectLeadersResult] = []
        every = partitions is None
        if partitions is None:
            partitions = [
                (name, partition_id)
                for name, topic_id in sorted(self._topic_ids.live.items())
                for partition_id in range(len(self._topics.live[topic_id].partitions))
            ]
        repeated = Counter(partitions)
        for name, partition_id in partitions:
            try:
                if repeated[(name, partition_id)] > 1:
                    raise InvalidRequestError("the request names the partition more than once")
                record = self._elect_leader(name, partition_id, election_type)
                if len(records) >= MAX_RECORDS_PER_USER_OP:
                    raise PolicyViolationError(
                        f"one request may hold at most {MAX_RECORDS_PER_USER_OP} elections; "
                        "elect the rest in another request"
                    )
            except ElectionNotNeededError as e:
                if not every:
                    error = ApiError.of(e)
                    results.append(ElectLeadersResult(name, partition_id, error))
                continue
            except KafkaError as e:
                message = f"{election_type.name} election of {name}-{partition_id}: {e}"
                error = ApiError(type(e), message)
                results.append(ElectLeadersResult(name, partition_id, error))
                continue
            records.append(record)
            results.append(ElectLeadersResult(name, partition_id))
        return ControllerResult.of(records, tuple(results))

    def balance_partition_leaders(
        self, max_elections: int = MAX_ELECTIONS_PER_RUN
    ) -> ControllerResult[bool]:
        """Preferred-leader elections for partitions not led by their preferred replica
        (`auto.leader.rebalance.enable`), visiting only those whose preferred replica is an
        active broker: no other can be elected, so a run costs what it may elect however many
        partitions wait on stopped brokers. The response says whether partitions were left for
        another run because `max_elections` was reached."""
        records: list[MetadataRecord] = []
        index = self._imbalanced_by_preferred.live
        for broker_id, _ in self._cluster.active_brokers():
            waiting = index.get(broker_id)
            for tp in () if waiting is None else waiting.live:
                if len(records) >= max_elections:
                    return ControllerResult.of(records, True)
                record = self._periodic_election(tp, Election.PREFERRED)
                if record is not None:
                    records.append(record)
        return ControllerResult.of(records, False)

    def elect_unclean_leaders(
        self, max_elections: int = MAX_ELECTIONS_PER_RUN
    ) -> ControllerResult[bool]:
        """Unclean elections for leaderless partitions of topics that allow them (the periodic
        check). Each topic's config is read once a run, and a partition of a topic that does
        not allow them is passed over before its registration is read. The response says
        whether partitions were left for another run."""
        records: list[MetadataRecord] = []
        allowed: dict[UUID, bool] = {}
        for tp in self._leaderless():
            allows = allowed.get(tp.topic_id)
            if allows is None:
                name = self._topics.live[tp.topic_id].name
                allows = allowed[tp.topic_id] = self._configs.unclean_leader_election_enabled(name)
            if not allows:
                continue
            if len(records) >= max_elections:
                return ControllerResult.of(records, True)
            record = self._periodic_election(tp, Election.UNCLEAN)
            if record is not None:
                records.append(record)
        return ControllerResult.of(records, False)

    # == writes: reassignment ===================================================================

    def alter_partition_reassignments(
        self, partitions: Sequence[ReassignablePartition]
    ) -> ControllerResult[tuple[ReassignmentResult, ...]]:
        """AlterPartitionReassignments: start (or replace) a reassignment, or cancel one.

        Per partition: UNKNOWN_TOPIC_OR_PARTITION; INVALID_REPLICA_ASSIGNMENT for a bad target
        (empty, unregistered broker, duplicate) or a cancel that would need an unclean election
        the topic forbids; NO_REASSIGNMENT_IN_PROGRESS for a cancel with nothing to cancel.
        """
        repeated = Counter((p.topic, p.partition_id) for p in partitions)
        records: list[MetadataRecord] = []
        results: list[ReassignmentResult] = []
        for target in partitions:
            try:
                if repeated[(target.topic, target.partition_id)] > 1:
                    raise InvalidRequestError("the request names the partition more than once")
                record = self._reassign(target)
            except KafkaError as e:
                where = f"{target.topic}-{target.partition_id}"
                error = ApiError(type(e), f"cannot reassign {where}: {e}")
                results.append(ReassignmentResult(target.topic, target.partition_id, error))
                continue
            if record is not None:
                records.append(record)
            results.append(ReassignmentResult(target.topic, target.partition_id))
        return ControllerResult.of(records, tuple(results))

    # == replay =================================================================================

    def replay(self, record: ReplayedRecord, offset: int) -> None:
        """Apply a committed (or, on the active controller, just appended) record.

        Raises MetadataReplayError for a record that does not fit the state (an unknown topic
        or partition, a duplicate topic): the controller never writes one.
        """
        if isinstance(record, PartitionChangeRecord):
            topic = self._replay_topic(record.topic_id, record, offset)
            previous = topic.partitions.live.get(record.partition_id)
            if previous is None:
                raise MetadataReplayError(
                    f"{record} at offset {offset}: topic {topic.name!r} has no partition "
                    f"{record.partition_id}"
                )
            changed = previous.merge(record)
            topic.partitions[record.partition_id] = changed
            self._index(topic.key(record.partition_id), previous, changed)
        elif isinstance(record, PartitionRecord):
            topic = self._replay_topic(record.topic_id, record, offset)
            registration = PartitionRegistration.from_record(record)
            previous = topic.partitions.live.get(record.partition_id)
            topic.partitions[record.partition_id] = registration
            self._index(topic.key(record.partition_id), previous, registration)
        elif isinstance(record, TopicRecord):
            self._replay_topic_record(record, offset)
        elif isinstance(record, RemoveTopicRecord):
            topic = self._replay_topic(record.topic_id, record, offset)
            for partition_id, registration in topic.partitions.live.items():
                self._index(topic.key(partition_id), registration, None)
            del self._topics[topic.topic_id]
            del self._topic_ids[topic.name]
            # As in Kafka, a topic's configs go with it, in the same replay.
            self._configs.delete_topic_configs(topic.name)
            key = _collision_key(topic.name)
            if key is not None:
                remaining = self._colliding.live[key] - {topic.name}
                if remaining:
                    self._colliding[key] = remaining
                else:
                    del self._colliding[key]
        else:
            raise TypeError(f"replication control does not replay {type(record).__name__}")

    # == reads (at the committed offset) ========================================================

    def describe_topics(
        self, offset: int | None, names: Sequence[str] | None = None
    ) -> tuple[TopicDescription, ...]:
        """Topics with their partitions (leader, replicas, ISR, epochs) as of `offset`.

        All topics by name if `names` is None; an unknown name gets UNKNOWN_TOPIC_OR_PARTITION.
        """
        topic_ids = self._topic_ids.to_dict(offset)
        wanted = sorted(topic_ids) if names is None else list(names)
        descriptions: list[TopicDescription] = []
        for name in wanted:
            topic_id = topic_ids.get(name)
            if topic_id is None:
                error = ApiError(UnknownTopicOrPartitionError, f"no topic named {name!r}")
                descriptions.append(TopicDescription(name, None, error=error))
                continue
            descriptions.append(
                TopicDescription(name, topic_id, self._partitions_at(topic_id, offset))
            )
        return tuple(descriptions)

    def topic_exists(self, name: str) -> bool:
        """Whether a topic named `name` exists in the latest state (the write path)."""
        return name in self._topic_ids.live

    def snapshot_records(self, offset: int | None = None) -> list[MetadataRecord]:
        """Records that recreate the topics and partitions as of `offset`: per topic, by name,
        its TopicRecord and then its PartitionRecords."""
        return list(self.deferred_snapshot_records(offset))

    def deferred_snapshot_records(self, offset: int | None = None) -> DeferredRecords:
        """`snapshot_records` with each PartitionRecord made only when read
        (`deferred_records`)."""
        return DeferredRecords(*self.deferred_snapshot_parts(offset, parts_of=0))

    def deferred_snapshot_parts(
        self, offset: int | None, *, parts_of: int
    ) -> Iterator[list[DeferredItem]]:
        """`deferred_snapshot_records` in parts of whole topics, each ending at the topic that
        takes it to `parts_of` partitions or more (0: one part), for a caller taking the state
        a part a loop turn (a stop's snapshot: 100,000 partitions in one turn held the loop
        155-172 ms of CPU). Every part reads at `offset`, whose snapshot the caller keeps
        between parts (`OffsetControl.hold`)."""
        part: list[DeferredItem] = []
        partitions = 0
        for name, topic_id in sorted(self._topic_ids.to_dict(offset).items()):
            registrations = self._partitions_at(topic_id, offset)
            part.append(TopicRecord(name=name, topic_id=topic_id))
            part.extend(
                PartitionRecordOf(topic_id, partition_id, registration)
                for partition_id, registration in enumerate(registrations)
            )
            partitions += len(registrations)
            if parts_of and partitions >= parts_of:
                yield part
                part, partitions = [], 0
        if part or not parts_of:
            yield part

    def topic_ids(self, offset: int | None) -> dict[str, UUID]:
        """Every topic's id by name, as of `offset`."""
        return self._topic_ids.to_dict(offset)

    def topic_name(self, topic_id: UUID, offset: int | None) -> str | None:
        """The name of topic `topic_id` as of `offset`, or None."""
        topic = self._topics.get(topic_id, offset=offset)
        return None if topic is None else topic.name

    def partition(
        self, topic_id: UUID, partition_id: int, offset: int | None
    ) -> PartitionRegistration | None:
        """One partition's registration as of `offset`, or None."""
        topic = self._topics.get(topic_id, offset=offset)
        if topic is None:
            return None
        return topic.partitions.get(partition_id, offset=offset)

    def list_partition_reassignments(
        self, offset: int | None, partitions: Sequence[tuple[str, int]] | None = None
    ) -> tuple[OngoingReassignment, ...]:
        """The reassignments in progress as of `offset`: all, or those among `partitions`
        (unknown or not reassigning partitions are left out). Sorted by topic, partition."""
        if partitions is None:
            candidates: Iterable[TopicIdPartition] = self._reassigning.iter(offset)
        else:
            candidates = []
            for name, partition_id in partitions:
                topic_id = self._topic_ids.get(name, offset=offset)
                if topic_id is not None:
                    candidates.append(TopicIdPartition(topic_id, partition_id))
        ongoing: list[OngoingReassignment] = []
        for tp in set(candidates):
            topic = self._topics.get(tp.topic_id, offset=offset)
            if topic is None:
                continue
            registration = topic.partitions.get(tp.partition_id, offset=offset)
            if registration is None or not registration.is_reassigning:
                continue
            ongoing.append(
                OngoingReassignment(
                    topic.name,
                    tp.partition_id,
                    registration.replicas,
                    registration.adding_replicas,
                    registration.removing_replicas,
                )
            )
        return tuple(sorted(ongoing, key=lambda r: (r.topic, r.partition_id)))

    def partitions_led_by(self, broker_id: int, offset: int | None = None) -> int:
        """How many partitions `broker_id` leads (NO_LEADER: how many have no leader)."""
        if broker_id == NO_LEADER:
            return sum(
                partitions.size(offset)
                for partitions in self._leaderless_by_member.to_dict(offset).values()
            )
        led = self._leaders.get(broker_id, offset=offset)
        return 0 if led is None else led.size(offset)

    def partitions_with_isr_member(self, broker_id: int, offset: int | None = None) -> int:
        """How many partitions have `broker_id` in their ISR."""
        return sum(
            0 if members is None else members.size(offset)
            for members in (
                self._isr_members.get(broker_id, offset=offset),
                self._leaderless_by_member.get(broker_id, offset=offset),
            )
        )

    def has_leaderships(self, broker_id: int) -> bool:
        """Whether `broker_id` leads any partition now (controlled shutdown waits for none)."""
        return self.partitions_led_by(broker_id) > 0

    def has_imbalanced_partitions(self) -> bool:
        """Whether some partition is not led by its preferred replica (leader balancing)."""
        return any(len(waiting) for waiting in self._imbalanced_by_preferred.live.values())

    def has_leaderless_partitions(self) -> bool:
        """Whether some partition has no leader (the periodic unclean-election check)."""
        return any(len(partitions) for partitions in self._leaderless_by_member.live.values())

    # == internals: validation and record building ==============================================

    def _requested_partition_count(self, topic: CreatableTopic) -> int:
        """An upper bound of what `topic` would add (invalid counts add nothing)."""
        if topic.assignments:
            return len(topic.assignments)
        if topic.num_partitions == -1:
            return self._default_num_partitions
        return max(topic.num_partitions, 0)

    def _check_collision(self, name: str, claimed_keys: Mapping[str, str]) -> None:
        key = _collision_key(name)
        if key is None:
            return
        existing = self._colliding.live.get(key)
        other = min(existing) if existing else claimed_keys.get(key)
        if other is not None:
            raise InvalidTopicError(
                f"it collides with topic {other!r}: with '.' read as '_' (as in metric names) "
                "the two are the same"
            )

    def _new_topic_id(self, claimed: set[UUID]) -> UUID:
        while True:
            topic_id = UUID(int=self._rng.randrange(0, 1 << 128), version=4)
            if topic_id not in claimed and topic_id not in self._topics.live:
                return topic_id

    def _new_topic_partitions(
        self, topic: CreatableTopic, active: Sequence[tuple[int, str | None]]
    ) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
        """(replicas, ISR) of each new partition of `topic`, in partition order; `active`:
        the active brokers (`BrokerLiveness.active_brokers`), where placement puts replicas."""
        if topic.assignments:
            if topic.replication_factor != -1:
                raise InvalidRequestError(
                    "a manual assignment was given, so the replication factor must be -1, "
                    f"not {topic.replication_factor}"
                )
            if topic.num_partitions != -1:
                raise InvalidRequestError(
                    "a manual assignment was given, so the number of partitions must be -1, "
                    f"not {topic.num_partitions}"
                )
            by_partition: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] = {}
            replication_factor: int | None = None
            for partition_id, assigned in topic.assignments.items():
                replicas = tuple(assigned)
                self._check_assignment(partition_id, replicas, replication_factor)
                replication_factor = len(replicas)
                by_partition[partition_id] = (replicas, self._initial_isr(partition_id, replicas))
            if sorted(by_partition) != list(range(len(by_partition))):
                raise InvalidReplicaAssignmentError(
                    f"the manual assignment names partitions {sorted(by_partition)}; they must "
                    f"be 0 to {len(by_partition) - 1}"
                )
            return [by_partition[i] for i in range(len(by_partition))]
        if topic.replication_factor < -1 or topic.replication_factor == 0:
            raise InvalidReplicationFactorError(
                f"replication factor must be at least 1, or -1 for the default "
                f"({self._default_replication_factor}), not {topic.replication_factor}"
            )
        if topic.num_partitions < -1 or topic.num_partitions == 0:
            raise InvalidPartitionsError(
                f"number of partitions must be at least 1, or -1 for the default "
                f"({self._default_num_partitions}), not {topic.num_partitions}"
            )
        count = self._default_num_partitions if topic.num_partitions == -1 else topic.num_partitions
        replication_factor = (
            self._default_replication_factor
            if topic.replication_factor == -1
            else topic.replication_factor
        )
        # Placement puts replicas on active brokers only: each is its partition's whole ISR.
        return [
            (replicas, replicas)
            for replicas in place_replicas(active, count, replication_factor, self._rng)
        ]

    def _new_partitions(self, request: CreatePartitionsTopic, budget: int) -> list[PartitionRecord]:
        """The records of `request`'s new partitions; `_OverRequestLimit` (before building
        anything) if they would be more than `budget`."""
        topic_id = self._topic_ids.live.get(request.name)
        if topic_id is None:
            raise UnknownTopicOrPartitionError("no such topic")
        topic = self._topics.live[topic_id]
        existing = len(topic.partitions)
        if request.count == existing:
            raise InvalidPartitionsError(f"the topic already has {existing} partition(s)")
        if request.count < existing:
            raise InvalidPartitionsError(
                f"the topic has {existing} partition(s); {request.count} would not be an increase"
            )
        additional = request.count - existing
        if additional > budget:
            raise _OverRequestLimit(additional)
        first = topic.partitions.live[0]
        # The topic's replication factor is its target one: a reassignment in progress on
        # partition 0 lists the replicas it removes as well.
        replication_factor = len(first.replicas) - len(first.removing_replicas)
        if request.assignments is not None:
            if len(request.assignments) != additional:
                raise InvalidReplicaAssignmentError(
                    f"{additional} partition(s) are to be added, but {len(request.assignments)} "
                    "assignment(s) were given"
                )
            partitions = []
            for index, assigned in enumerate(request.assignments):
                partition_id = existing + index
                replicas = tuple(assigned)
                self._check_assignment(partition_id, replicas, replication_factor)
                partitions.append((replicas, self._initial_isr(partition_id, replicas)))
        else:
            placements = place_replicas(
                self._cluster.active_brokers(), additional, replication_factor, self._rng
            )
            partitions = [(replicas, replicas) for replicas in placements]  # as for a new topic
        return [
            PartitionRecord(topic_id, existing + index, replicas, isr, isr[0])
            for index, (replicas, isr) in enumerate(partitions)
        ]

    def _check_assignment(
        self, partition_id: int, replicas: tuple[int, ...], replication_factor: int | None
    ) -> None:
        """A manual assignment (or a reassignment target, with `replication_factor` None)."""
        if not replicas:
            raise InvalidReplicaAssignmentError(f"partition {partition_id}: no replicas given")
        previous: int | None = None
        for broker_id in sorted(replicas):
            if not self._cluster.is_registered(broker_id):
                raise InvalidReplicaAssignmentError(
                    f"partition {partition_id}: broker {broker_id} is not registered"
                )
            if broker_id == previous:
                raise InvalidReplicaAssignmentError(
                    f"partition {partition_id}: broker {broker_id} is named more than once"
                )
            previous = broker_id
        if replication_factor is not None and len(replicas) != replication_factor:
            raise InvalidReplicaAssignmentError(
                f"partition {partition_id} has {len(replicas)} replica(s), but the topic's "
                f"other partitions have {replication_factor}"
            )

    def _initial_isr(self, partition_id: int, replicas: tuple[int, ...]) -> tuple[int, ...]:
        """The ISR of a new partition manually assigned `replicas`: the active ones (its
        leader the first of them)."""
        isr = tuple(b for b in replicas if self._cluster.is_active(b))
        if not isr:
            raise InvalidReplicaAssignmentError(
                f"partition {partition_id}: every one of brokers {list(replicas)} is fenced or "
                "in controlled shutdown, so none can lead"
            )
        return isr

    def _check_alter_partition(
        self, broker_id: int, item: AlterPartitionItem, partition: PartitionRegistration
    ) -> None:
        """Kafka's AlterPartition checks, in Kafka's order; raises the first that fails."""
        if item.leader_epoch > partition.leader_epoch:
            raise NotControllerError(
                f"the request's leader epoch {item.leader_epoch} is newer than this "
                f"controller's {partition.leader_epoch}; this controller is behind"
            )
        if item.partition_epoch > partition.partition_epoch:
            raise NotControllerError(
                f"the request's partition epoch {item.partition_epoch} is newer than this "
                f"controller's {partition.partition_epoch}; this controller is behind"
            )
        if item.leader_epoch < partition.leader_epoch:
            raise FencedLeaderEpochError(
                f"leader epoch {item.leader_epoch} is older than the current "
                f"{partition.leader_epoch}"
            )
        if broker_id != partition.leader:
            raise InvalidRequestError(
                f"broker {broker_id} is not the leader (the leader is {partition.leader})"
            )
        if item.partition_epoch < partition.partition_epoch:
            raise InvalidUpdateVersionError(
                f"partition epoch {item.partition_epoch} is older than the current "
                f"{partition.partition_epoch}"
            )
        new_isr = [member.broker_id for member in item.new_isr]
        if len(set(new_isr)) != len(new_isr) or not set(new_isr) <= set(partition.replicas):
            raise InvalidRequestError(
                f"the new ISR {new_isr} repeats a broker or names one outside the replicas "
                f"{list(partition.replicas)}"
            )
        if partition.leader not in new_isr:
            raise InvalidRequestError(
                f"the new ISR {new_isr} does not hold the leader {partition.leader}"
            )
        recovering = LeaderRecoveryState.RECOVERING
        if item.leader_recovery_state == recovering and len(new_isr) > 1:
            raise InvalidRequestError(
                f"the new ISR {new_isr} has more than one member while the leader is recovering"
            )
        if (
            partition.leader_recovery_state == LeaderRecoveryState.RECOVERED
            and item.leader_recovery_state == recovering
        ):
            raise InvalidRequestError("the leader recovery state cannot go from RECOVERED back")
        ineligible = [
            f"{member.broker_id} ({reason})"
            for member in item.new_isr
            if (reason := self._ineligibility(member)) is not None
        ]
        if ineligible:
            raise IneligibleReplicaError(
                f"the new ISR {new_isr} holds ineligible replicas: {', '.join(ineligible)}"
            )

    def _ineligibility(self, member: IsrMember) -> str | None:
        """Why `member` may not join an ISR, or None if it may."""
        cluster = self._cluster
        if not cluster.is_registered(member.broker_id):
            return "not registered"
        if cluster.in_controlled_shutdown(member.broker_id):
            return "in controlled shutdown"
        if cluster.is_fenced(member.broker_id):
            return "fenced"
        if not cluster.is_active(member.broker_id):
            # Unfenced still, but a stepped fencing, unregistration or new incarnation's
            # registration is moving it out of every ISR (ClusterControl's evacuation).
            return "being moved out of every ISR"
        registered_epoch = cluster.broker_epoch(member.broker_id)
        if member.broker_epoch != -1 and member.broker_epoch != registered_epoch:
            return f"broker epoch {member.broker_epoch}, registered {registered_epoch}"
        return None

    def _elect_leader(
        self, name: str, partition_id: int, election_type: ElectionType
    ) -> PartitionChangeRecord:
        topic_id, partition = self._live_partition(name, partition_id)
        if election_type == ElectionType.PREFERRED:
            if partition.leader == partition.replicas[0]:
                raise ElectionNotNeededError(
                    f"{name}-{partition_id} is already led by its preferred replica "
                    f"{partition.leader}"
                )
            election = Election.PREFERRED
        else:
            if partition.has_leader:
                raise ElectionNotNeededError(
                    f"{name}-{partition_id} already has a leader ({partition.leader})"
                )
            election = Election.UNCLEAN
        record = PartitionChangeBuilder(
            partition,
            topic_id,
            partition_id,
            self._cluster.is_active,
            election=election,
            **self._elr_settings(name),
        ).build()
        if record is None:
            if election_type == ElectionType.PREFERRED:
                raise PreferredLeaderNotAvailableError(
                    f"preferred replica {partition.replicas[0]} is not an active ISR member"
                    + (
                        f"; broker {partition.leader} keeps leading"
                        if partition.has_leader
                        else ", and no other ISR member can lead either"
                    )
                )
            raise EligibleLeadersNotAvailableError(
                f"none of replicas {list(partition.replicas)} is active"
            )
        return record

    def _reassign(self, target: ReassignablePartition) -> PartitionChangeRecord | None:
        topic_id, partition = self._live_partition(target.topic, target.partition_id)
        if target.replicas is None:
            election = self._election_for(target.topic)
            if not partition.is_reassigning:
                raise NoReassignmentInProgressError("no reassignment is in progress")
            was_adding = set(partition.adding_replicas)
            replicas = tuple(r for r in partition.replicas if r not in was_adding)
            isr = tuple(r for r in partition.isr if r not in was_adding)
            if not isr:
                # Every in-sync replica was one being added: going back means trusting
                # replicas that fell out of sync, which only an unclean election may do.
                if election is not Election.UNCLEAN:
                    raise InvalidReplicaAssignmentError(
                        "cancelling would need an unclean leader election: no original "
                        "replica is in the ISR, and the topic does not allow unclean elections"
                    )
                # Kafka puts every original replica into the ISR here. We run a real unclean
                # election instead (an empty target ISR leaves the builder no clean choice):
                # ISR = [new leader], RECOVERING, and no fenced broker joins an ISR.
                if not any(self._cluster.is_active(r) for r in replicas):
                    raise InvalidReplicaAssignmentError(
                        "cancelling needs an unclean leader election, but none of the original "
                        f"replicas {list(replicas)} is active to lead; retry once one is back"
                    )
            return PartitionChangeBuilder(
                partition,
                topic_id,
                target.partition_id,
                self._cluster.is_active,
                election=election,
                target_isr=isr,
                target_replicas=replicas,
                target_adding_replicas=(),
                target_removing_replicas=(),
                **self._elr_settings(target.topic),
            ).build()
        wanted = tuple(target.replicas)
        self._check_assignment(target.partition_id, wanted, None)
        # Relative to the original replicas (those not being added), so that a cancel, which
        # takes the adding replicas away, returns to them even after a reassignment replaced
        # another: a replica the earlier one was still adding is adding again if the new target
        # keeps it, and leaves the replicas and the ISR at once if it does not.
        was_adding = set(partition.adding_replicas)
        original = set(partition.replicas) - was_adding
        wanted_set = set(wanted)
        dropped = was_adding - wanted_set
        isr = tuple(r for r in partition.isr if r not in dropped)
        if not isr:
            # Only replicas being added are in sync: dropping them would need an unclean
            # election, so they stay (as removing replicas), and a cancel keeps them too.
            dropped, original = set(), set(partition.replicas)
            isr = partition.isr
        removing = tuple(r for r in partition.replicas if r not in wanted_set and r not in dropped)
        adding = tuple(r for r in wanted if r not in original)
        # Starting a reassignment elects (if the leader is invalid) only cleanly, as in Kafka.
        return PartitionChangeBuilder(
            partition,
            topic_id,
            target.partition_id,
            self._cluster.is_active,
            target_isr=isr,
            target_replicas=wanted + removing,
            target_adding_replicas=adding,
            target_removing_replicas=removing,
            **self._elr_settings(target.topic),
        ).build()

    def _update_isrs_and_leaders(
        self,
        partitions: Iterable[TopicIdPartition],
        *,
        broker_to_remove: int,
        max_records: int | None = None,
        unclean_shutdown: bool = False,
    ) -> tuple[PartitionChangeRecord, ...]:
        """Take `broker_to_remove` out of these partitions' ISRs and re-elect where needed.
        Stops after `max_records` changes, if given. With `unclean_shutdown` it leaves their
        ELRs too (KIP-966: its log may have lost what it had not synced).

        Members in controlled shutdown leave with it, in the same change (they leave every
        ISR anyway, their own moves would do it a record later), except that the last of them
        stays when no other member does (the last-member rule): a full cluster's stop of
        100,000 partitions wrote a change per partition and broker, 200,000, for 3 brokers
        (over the brokers' 30 s wait for their controlled shutdown), and now writes one."""
        cluster = self._cluster

        def acceptable(broker_id: int) -> bool:
            return broker_id != broker_to_remove and cluster.is_active(broker_id)

        def target_isr(isr: tuple[int, ...], elr_enabled: bool) -> tuple[int, ...]:
            rest = tuple(b for b in isr if b != broker_to_remove)
            staying = tuple(b for b in rest if not cluster.in_controlled_shutdown(b))
            # With ELR the members that leave become the ELR, so the ISR may empty.
            return staying if staying or not rest or elr_enabled else rest[-1:]

        unclean = (broker_to_remove,) if unclean_shutdown else ()
        records: list[PartitionChangeRecord] = []
        # The election mode and ELR settings are topic configs: looked up once per topic, not
        # per partition (a broker's fencing can touch 100k partitions of a few topics).
        settings: dict[UUID, tuple[Election, _ElrSettings]] = {}
        for tp in partitions:
            topic = self._topics.live[tp.topic_id]
            partition = topic.partitions.live[tp.partition_id]
            found = settings.get(tp.topic_id)
            if found is None:
                found = settings[tp.topic_id] = (
                    self._election_for(topic.name),
                    self._elr_settings(topic.name),
                )
            election, elr = found
            record = PartitionChangeBuilder(
                partition,
                tp.topic_id,
                tp.partition_id,
                acceptable,
                election=election,
                target_isr=target_isr(partition.isr, bool(elr)),
                unclean_shutdown_replicas=unclean,
                **elr,
            ).build()
            if record is not None:
                records.append(record)
                if max_records is not None and len(records) >= max_records:
                    break
        return tuple(records)

    def _elect_leaderless(
        self, max_records: int, *, broker_to_add: int, clean_only: bool
    ) -> tuple[PartitionChangeRecord, ...]:
        """Up to `max_records` elections for leaderless partitions; `broker_to_add` counts as
        active. Partitions that no ISR member could lead cleanly are passed over without
        building a change, unless an unclean election is allowed for them."""
        cluster = self._cluster

        def acceptable(broker_id: int) -> bool:
            return broker_id == broker_to_add or cluster.is_active(broker_id)

        records: list[PartitionChangeRecord] = []
        settings: dict[UUID, tuple[Election, _ElrSettings]] = {}
        for tp in self._cleanly_electable() if clean_only else self._leaderless():
            topic = self._topics.live[tp.topic_id]
            partition = topic.partitions.live[tp.partition_id]
            found = settings.get(tp.topic_id)
            if found is None:
                election = Election.ONLINE if clean_only else self._election_for(topic.name)
                found = settings[tp.topic_id] = (election, self._elr_settings(topic.name))
            election, elr = found
            # With an empty ISR, an ELR member may lead cleanly (KIP-966).
            electable = partition.isr or (partition.elr if elr else ())
            if election is not Election.UNCLEAN and not any(map(acceptable, electable)):
                continue
            record = PartitionChangeBuilder(
                partition, tp.topic_id, tp.partition_id, acceptable, election=election, **elr
            ).build()
            if record is not None:
                records.append(record)
                if len(records) >= max_records:
                    break
        return tuple(records)

    def _cleanly_electable(self) -> Iterator[TopicIdPartition]:
        """The leaderless partitions an active ISR member may lead: those whose only ISR
        member is an active broker, then those whose ISR has several members (the caller
        checks these). Leaderless partitions stranded on an inactive broker are not visited, so
        a sweep's step costs what it elects, however many such partitions wait."""
        index = self._leaderless_by_member.live
        for broker_id, _ in self._cluster.active_brokers():
            stranded = index.get(broker_id)
            if stranded is not None:
                yield from stranded.live
        shared = index.get(NO_LEADER)
        if shared is not None:
            yield from shared.live

    def _periodic_election(
        self, tp: TopicIdPartition, election: Election
    ) -> PartitionChangeRecord | None:
        """The change a periodic run's `election` makes to `tp`, electing among active brokers."""
        topic = self._topics.live[tp.topic_id]
        partition = topic.partitions.live[tp.partition_id]
        return PartitionChangeBuilder(
            partition,
            tp.topic_id,
            tp.partition_id,
            self._cluster.is_active,
            election=election,
            **self._elr_settings(topic.name),
        ).build()

    def _election_for(self, topic: str) -> Election:
        if self._configs.unclean_leader_election_enabled(topic):
            return Election.UNCLEAN
        return Election.ONLINE

    def _elr_settings(self, topic: str) -> _ElrSettings:
        """The builder's KIP-966 arguments for a partition of `topic` (latest state)."""
        if not self._elr_enabled():
            return _ELR_OFF
        return {"elr_enabled": True, "min_isr": self._configs.min_insync_replicas(topic)}

    def _live_partition(self, name: str, partition_id: int) -> tuple[UUID, PartitionRegistration]:
        topic_id = self._topic_ids.live.get(name)
        if topic_id is None:
            raise UnknownTopicOrPartitionError(f"no topic named {name!r}")
        partition = self._topics.live[topic_id].partitions.live.get(partition_id)
        if partition is None:
            raise UnknownTopicOrPartitionError(f"topic {name!r} has no partition {partition_id}")
        return topic_id, partition

    def _leaderless(self) -> Iterator[TopicIdPartition]:
        """Every leaderless partition (live state), by its only ISR member."""
        for partitions in self._leaderless_by_member.live.values():
            yield from partitions.live

    def _partitions_at(
        self, topic_id: UUID, offset: int | None
    ) -> tuple[PartitionRegistration, ...]:
        topic = self._topics.get(topic_id, offset=offset)
        assert topic is not None, f"topic id {topic_id} is named but absent at offset {offset}"
        by_id = topic.partitions.to_dict(offset)
        # Partition ids are 0..n-1: a gap is a KeyError here.
        return tuple(by_id[i] for i in range(len(by_id)))

    # == internals: replay ======================================================================

    def _replay_topic(self, topic_id: UUID, record: MetadataRecord, offset: int) -> _Topic:
        topic = self._topics.live.get(topic_id)
        if topic is None:
            raise MetadataReplayError(f"{record} at offset {offset}: no topic with id {topic_id}")
        return topic

    def _replay_topic_record(self, record: TopicRecord, offset: int) -> None:
        existing = self._topics.live.get(record.topic_id)
        if existing is not None:
            raise MetadataReplayError(
                f"{record} at offset {offset}: topic id {record.topic_id} already names topic "
                f"{existing.name!r}"
            )
        if record.name in self._topic_ids.live:
            raise MetadataReplayError(
                f"{record} at offset {offset}: a topic named {record.name!r} already exists"
            )
        self._topics[record.topic_id] = _Topic(self._registry, record.name, record.topic_id)
        self._topic_ids[record.name] = record.topic_id
        key = _collision_key(record.name)
        if key is not None:
            self._colliding[key] = self._colliding.live.get(key, frozenset()) | {record.name}

    def _index(
        self,
        tp: _PartitionKey,
        previous: PartitionRegistration | None,
        current: PartitionRegistration | None,
    ) -> None:
        """Keep the broker and partition-set indexes in step with one partition's change."""
        old_members, old_stranded = _isr_index_entry(previous)
        new_members, new_stranded = _isr_index_entry(current)
        self._move_members(self._isr_members, tp, old_members, new_members)
        if old_stranded != new_stranded:
            if old_stranded is not None:
                self._leaderless_by_member.live[old_stranded].discard(tp)
            if new_stranded is not None:
                self._member_set(self._leaderless_by_member, new_stranded).add(tp)
        self._move_members(
            self._elr_members,
            tp,
            () if previous is None else previous.elr,
            () if current is None else current.elr,
        )
        old_leader = None if previous is None else previous.leader
        new_leader = None if current is None else current.leader
        if old_leader != new_leader:
            # Leaderless partitions are `_leaderless_by_member`'s alone.
            if old_leader is not None and old_leader != NO_LEADER:
                self._leaders.live[old_leader].discard(tp)
            if new_leader is not None and new_leader != NO_LEADER:
                self._member_set(self._leaders, new_leader).add(tp)
        old_preferred, new_preferred = _imbalanced_entry(previous), _imbalanced_entry(current)
        if old_preferred != new_preferred:
            if old_preferred is not None:
                self._imbalanced_by_preferred.live[old_preferred].discard(tp)
            if new_preferred is not None:
                self._member_set(self._imbalanced_by_preferred, new_preferred).add(tp)
        # The set holds exactly the partitions whose registration is reassigning: only one
        # that was or is touches it.
        if current is not None and current.is_reassigning:
            self._reassigning.add(tp)
        elif previous is not None and previous.is_reassigning:
            self._reassigning.discard(tp)

    def _move_members(
        self,
        index: TimelineHashMap[int, TimelineHashSet[_PartitionKey]],
        tp: _PartitionKey,
        old: tuple[int, ...],
        new: tuple[int, ...],
    ) -> None:
        """`tp` leaves the sets of the brokers of `old` not in `new` and joins those of `new`."""
        if old == new:
            return
        for broker_id in old:
            if broker_id not in new:
                index.live[broker_id].discard(tp)
        for broker_id in new:
            if broker_id not in old:
                self._member_set(index, broker_id).add(tp)

    def _member_set(
        self, index: TimelineHashMap[int, TimelineHashSet[_PartitionKey]], broker_id: int
    ) -> TimelineHashSet[_PartitionKey]:
        members = index.live.get(broker_id)
        if members is None:
            members = TimelineHashSet(self._registry)
            index[broker_id] = members
        return members
