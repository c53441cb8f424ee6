"""The reads the controller service answers: DescribeCluster, Metadata, ListPartitionReassignments,
DescribeConfigs and the finalized features, as `ReadOperation`s over the committed state.

The shell runs them with `QuorumController.read`, on the controller's single thread, and only
translates what they return into protobuf; every choice of what a reader sees is made here.

Rules:
- Everything is read at `ctx.offset`, the last stable offset: committed state only, on the
  active controller and on standbys alike. Every answer carries that offset, so a reader can
  tell how fresh it is.
- DescribeCluster lists every registered broker, with its fenced and controlled-shutdown
  flags; Metadata lists only unfenced brokers, as Kafka's clients see the cluster.
- A broker is reached at its first registered listener (brokers register their client
  listener first).
- A partition's offline replicas are those on brokers that are fenced or not registered. A
  partition without a leader carries LEADER_NOT_AVAILABLE, naming it; a topic asked for by name
  and absent carries UNKNOWN_TOPIC_OR_PARTITION, naming it.
- DescribeConfigs answers each resource on its own: one resource's error does not fail the
  others (`ConfigControl.describe_configs` says what each value is and where it comes from).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from uuid import UUID

from replog.errors import KafkaError, LeaderNotAvailableError
from replog.quorum.controller.config_control import (
    CLUSTER_DEFAULT,
    DescribedConfig,
    broker_resource,
    describe_resource_configs,
)
from replog.quorum.controller.operation import ReadContext, ReadOperation
from replog.quorum.controller.replication_control import ApiError, OngoingReassignment
from replog.quorum.metadata.broker_registration import BrokerRegistration
from replog.quorum.metadata.image import ConfigResource, MetadataImage
from replog.quorum.metadata.partition_registration import PartitionRegistration
from replog.quorum.metadata.records import NO_LEADER, ConfigResourceType, Endpoint


@dataclass(frozen=True, slots=True)
class BrokerView:
    broker_id: int
    endpoint: Endpoint | None  # the first registered listener; None if it registered none
    rack: str | None
    fenced: bool
    in_controlled_shutdown: bool
    broker_epoch: int

    @classmethod
    def of(cls, registration: BrokerRegistration) -> BrokerView:
        return cls(
            registration.broker_id,
            registration.endpoints[0] if registration.endpoints else None,
            registration.rack,
            registration.fenced,
            registration.in_controlled_shutdown,
            registration.broker_epoch,
        )


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    cluster_id: str
    brokers: tuple[BrokerView, ...]  # by broker id
    offset: int  # the committed offset this was read at


@dataclass(frozen=True, slots=True)
class PartitionView:
    partition_id: int
    registration: PartitionRegistration
    offline_replicas: tuple[int, ...]
    error: ApiError | None = None

    @classmethod
    def of(
        cls, topic: str, partition_id: int, registration: PartitionRegistration, live: set[int]
    ) -> PartitionView:
        """The view of a registration given the live brokers: LEADER_NOT_AVAILABLE if
        leaderless, naming its ISR and offline replicas (the Metadata answer's rule, used by
        the controller's read and the broker's answer from its image alike)."""
        offline = tuple(r for r in registration.replicas if r not in live)
        error = None
        if registration.leader == NO_LEADER:
            error = ApiError(
                LeaderNotAvailableError,
                f"partition {topic}-{partition_id} has no leader (isr {list(registration.isr)}, "
                f"offline replicas {list(offline)})",
            )
        return cls(partition_id, registration, offline, error)


@dataclass(frozen=True, slots=True)
class TopicView:
    name: str
    topic_id: UUID | None
    partitions: tuple[PartitionView, ...] = ()
    error: ApiError | None = None


@dataclass(frozen=True, slots=True)
class MetadataView:
    cluster_id: str
    brokers: tuple[BrokerView, ...]  # unfenced only, by broker id
    topics: tuple[TopicView, ...]  # by name, or in the order asked for
    offset: int


@dataclass(frozen=True, slots=True)
class ConfigDescription:
    resource: ConfigResource
    configs: tuple[DescribedConfig, ...] = ()
    error: ApiError | None = None


def describe_cluster() -> ReadOperation[ClusterDescription]:
    def read(ctx: ReadContext) -> ClusterDescription:
        registrations = ctx.cluster.registrations(ctx.offset)
        brokers = tuple(BrokerView.of(registrations[b]) for b in sorted(registrations))
        return ClusterDescription(ctx.cluster.cluster_id, brokers, ctx.offset)

    return read


@dataclass(frozen=True, slots=True)
class FinalizedFeatures:
    levels: dict[str, int]  # finalized feature -> level; a removed feature is absent
    offset: int  # the committed offset this was read at


def finalized_features() -> ReadOperation[FinalizedFeatures]:
    def read(ctx: ReadContext) -> FinalizedFeatures:
        return FinalizedFeatures(ctx.features.finalized_levels(ctx.offset), ctx.offset)

    return read


def metadata(topic_names: Sequence[str] | None) -> ReadOperation[MetadataView]:
    """Metadata of the named topics (None: every topic)."""

    def read(ctx: ReadContext) -> MetadataView:
        registrations = ctx.cluster.registrations(ctx.offset)
        live = {b for b, registration in registrations.items() if not registration.fenced}
        topics = tuple(
            TopicView(
                description.name,
                description.topic_id,
                tuple(
                    PartitionView.of(description.name, partition_id, registration, live)
                    for partition_id, registration in enumerate(description.partitions)
                ),
                description.error,
            )
            for description in ctx.replication.describe_topics(
                ctx.offset, None if topic_names is None else list(topic_names)
            )
        )
        brokers = tuple(BrokerView.of(registrations[b]) for b in sorted(live))
        return MetadataView(ctx.cluster.cluster_id, brokers, topics, ctx.offset)

    return read


def list_partition_reassignments(
    partitions: Sequence[tuple[str, int]] | None,
) -> ReadOperation[tuple[OngoingReassignment, ...]]:
    """The reassignments in progress among `partitions` (None: all of them)."""

    def read(ctx: ReadContext) -> tuple[OngoingReassignment, ...]:
        return ctx.replication.list_partition_reassignments(ctx.offset, partitions)

    return read


def describe_configs(
    resources: Sequence[tuple[ConfigResource, Sequence[str] | None]],
) -> ReadOperation[tuple[ConfigDescription, ...]]:
    """Each resource's configs: all known keys (None) or the named ones, in request order."""

    def read(ctx: ReadContext) -> tuple[ConfigDescription, ...]:
        # The topic names, read once and only if a topic resource is asked for.
        topics = functools.cache(lambda: set(ctx.replication.topic_ids(ctx.offset)))

        def described(resource: ConfigResource, names: Sequence[str] | None) -> ConfigDescription:
            exists = config_resource_exists(
                resource,
                lambda name: name in topics(),
                lambda broker_id: ctx.cluster.registration(broker_id, ctx.offset) is not None,
            )
            try:
                configs = ctx.configs.describe_configs(resource, names, ctx.offset, exists=exists)
            except KafkaError as error:
                return ConfigDescription(resource, error=ApiError.of(error))
            return ConfigDescription(resource, configs)

        return tuple(described(resource, names) for resource, names in resources)

    return read


def describe_image_configs(
    image: MetadataImage,
    static: Mapping[str, str],
    resource: ConfigResource,
    names: Sequence[str] | None,
) -> ConfigDescription:
    """One resource's configs as a broker describes them from its metadata image over its own
    static configs (Kafka's brokers answer DescribeConfigs locally, so a broker answers while
    the quorum has no leader): the values and sources of the controller's read."""
    exists = config_resource_exists(
        resource, image.topics.by_name.__contains__, image.cluster.brokers.__contains__
    )
    try:
        configs = describe_resource_configs(
            resource,
            names,
            own=image.configs.get(resource),
            cluster_default=image.configs.get(broker_resource()),
            static=static,
            exists=exists,
        )
    except KafkaError as error:
        return ConfigDescription(resource, error=ApiError.of(error))
    return ConfigDescription(resource, configs)


def config_resource_exists(
    resource: ConfigResource,
    topic_exists: Callable[[str], bool],
    broker_registered: Callable[[int], bool],
) -> bool:
    """Whether a config resource's topic exists or its broker is registered. Any group id has
    configs (its own, or the defaults); a broker resource naming the cluster default, or no
    broker id at all (the config manager's to refuse, as INVALID_REQUEST), counts as there."""
    if resource.resource_type is ConfigResourceType.TOPIC:
        return topic_exists(resource.resource_name)
    if resource.resource_type is ConfigResourceType.GROUP:
        return True
    if resource.resource_name == CLUSTER_DEFAULT:
        return True
    try:
        broker_id = int(resource.resource_name)
    except ValueError:
        return True
    return broker_registered(broker_id)
