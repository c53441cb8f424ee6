"""MetadataDelta: committed records replayed over a base image, turned into the next image.

A broker's metadata loader replays each committed record into a delta (`replay`) and, at a
batch boundary, builds the next image (`apply`); publishers then read both the delta (what
changed) and the new image. A snapshot loads as a delta over the empty image.

Rules (Kafka's replay semantics, KIP-631):
- RegisterBrokerRecord replaces the broker's registration; its broker epoch is the record's
  (the offset the controller wrote it at). UnregisterBrokerRecord removes it and
  BrokerRegistrationChangeRecord fences, unfences or starts controlled shutdown; both name a
  registered broker and its current broker epoch.
- TopicRecord creates an empty topic with a name no live topic has and an id never seen.
  PartitionRecord creates (or replaces) a partition; PartitionChangeRecord merges into it
  (`PartitionRegistration.merge`). RemoveTopicRecord removes the topic, its partitions and its
  topic configs; the name may be reused by a later TopicRecord, even in the same delta.
- ConfigRecord sets a key, or deletes it when its value is None; a resource with no keys left
  disappears from the image.
- FeatureLevelRecord sets a level; level 0 removes the feature. `metadata.version` can be set,
  never removed.
- ProducerIdsRecord moves the next producer id forward, never back.
- AccessControlEntryRecord adds an ACL under an id no live ACL has;
  RemoveAccessControlEntryRecord removes a live one. UserScramCredentialRecord sets (or
  replaces) a user's credential for its mechanism; RemoveUserScramCredentialRecord removes one
  that exists.
- NoOpRecord changes nothing.
- A record that names an unknown topic, partition or broker, a stale broker epoch, or that breaks
  a rule above raises `MetadataReplayError` naming the record and the offending part. The
  controller never writes such a record, so the delta is then unusable.
- Offsets never go back: each record's offset is above the base image's last offset and not
  below the previous record's (records of a snapshot share its last offset), and `apply`
  takes a provenance at or after the last record replayed.

Theory of operation: the delta keeps only what changed: per feature, broker and config
resource the new value (None = removed), per topic a `TopicDelta` with its changed partitions,
and the ids of base topics that were removed. `apply` copies the base image's indexes that
changed and reuses everything else, so its cost follows the size of the change plus one
shallow copy of each touched index (the topic index, not every partition).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TypeVar
from uuid import UUID

from replog.errors import MetadataReplayError
from replog.quorum.metadata.broker_registration import BrokerRegistration, registration_named_by
from replog.quorum.metadata.image import (
    AclsImage,
    ClusterImage,
    ConfigResource,
    ConfigsImage,
    FeaturesImage,
    MetadataImage,
    MetadataProvenance,
    ScramImage,
    TopicImage,
    TopicsImage,
    copied,
    frozen_mapping,
)
from replog.quorum.metadata.partition_registration import PartitionRegistration
from replog.quorum.metadata.records import (
    METADATA_VERSION_FEATURE,
    AccessControlEntryRecord,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    ConfigResourceType,
    FeatureLevelRecord,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
)


class TopicDelta:
    """The changes to one live topic: created in this delta (`base is None`) or changed."""

    __slots__ = ("base", "name", "partition_changes", "topic_id")

    def __init__(self, name: str, topic_id: UUID, base: TopicImage | None) -> None:
        self.name = name
        self.topic_id = topic_id
        self.base = base
        # Partition id -> its registration after this delta, for partitions that changed.
        self.partition_changes: dict[int, PartitionRegistration] = {}

    @property
    def is_new(self) -> bool:
        return self.base is None

    def partition(self, partition_id: int) -> PartitionRegistration | None:
        """The partition's registration as of the records replayed so far."""
        changed = self.partition_changes.get(partition_id)
        if changed is not None or self.base is None:
            return changed
        return self.base.partitions.get(partition_id)

    def apply(self) -> TopicImage:
        partitions = copied(self.base.partitions) if self.base is not None else {}
        partitions.update(self.partition_changes)
        return TopicImage(self.name, self.topic_id, frozen_mapping(partitions))


def _count_leader(leaders: dict[int, int], leader: int, change: int) -> None:
    """`TopicsImage.leaders` after one partition led by `leader` came (1) or went (-1)."""
    if leader < 0:
        return
    count = leaders.get(leader, 0) + change
    if count:
        leaders[leader] = count
    else:
        del leaders[leader]


class MetadataDelta:
    """Records replayed over `base`; see the module docstring for the rules."""

    def __init__(self, base: MetadataImage) -> None:
        self.base = base
        # Replay takes only offsets above the base's, so "anything replayed" is derivable.
        self._last_offset = base.provenance.last_offset
        self._features: dict[str, int | None] = {}
        self._brokers: dict[int, BrokerRegistration | None] = {}
        self._topics: dict[UUID, TopicDelta] = {}  # live topics created or changed
        self._created_topic_names: dict[str, UUID] = {}  # names of live topics not in base
        self._deleted_topic_ids: set[UUID] = set()  # base topics removed
        self._configs: dict[ConfigResource, dict[str, str]] = {}  # whole new key maps
        self._next_producer_id: int | None = None
        self._acls: dict[UUID, AccessControlEntryRecord | None] = {}  # None: removed
        self._scram: dict[tuple[str, int], UserScramCredentialRecord | None] = {}

    @classmethod
    def of_image(cls, image: MetadataImage) -> MetadataDelta:
        """`image` as a delta over the empty image: what replaying `image_to_records(image)`
        at its last offset gives (`snapshot.delta_from_records`), built from the image's own
        immutable parts rather than through records. A publisher installed late gets the
        whole image this way: 10,000 partitions cost a copy of each topic's partition map
        (milliseconds) instead of a record made and replayed per partition (a stalled loop
        for 0.1-0.2 s per publisher)."""
        delta = cls(MetadataImage.EMPTY)
        delta._last_offset = image.provenance.last_offset
        levels = image.features.levels
        for name in sorted(levels, key=lambda n: (n != METADATA_VERSION_FEATURE, n)):
            delta._features[name] = levels[name]
        brokers = image.cluster.brokers
        for broker_id in sorted(brokers):
            delta._brokers[broker_id] = brokers[broker_id]
        for name in sorted(image.topics.by_name):
            topic = image.topics.by_name[name]
            topic_delta = TopicDelta(name, topic.topic_id, None)
            topic_delta.partition_changes = dict(sorted(topic.partitions.items()))
            delta._topics[topic.topic_id] = topic_delta
            delta._created_topic_names[name] = topic.topic_id
        resources = image.configs.resources
        for resource in sorted(resources):
            delta._configs[resource] = dict(sorted(resources[resource].items()))
        if image.next_producer_id != -1:
            delta._next_producer_id = image.next_producer_id
        delta._acls.update(sorted(image.acls.acls.items()))
        delta._scram.update(sorted(image.scram.credentials.items()))
        return delta

    # --- what changed (for publishers and local_changes) -----------------------------------

    @property
    def topic_deltas(self) -> Mapping[UUID, TopicDelta]:
        """Live topics created or changed, by id (not the removed ones)."""
        return MappingProxyType(self._topics)

    @property
    def deleted_topic_ids(self) -> frozenset[UUID]:
        """Topics of the base image that were removed (a topic both created and removed in
        this delta appears nowhere)."""
        return frozenset(self._deleted_topic_ids)

    @property
    def broker_changes(self) -> Mapping[int, BrokerRegistration | None]:
        """Broker id -> its registration after the delta; None when it was unregistered."""
        return MappingProxyType(self._brokers)

    @property
    def feature_changes(self) -> Mapping[str, int | None]:
        """Feature name -> its level after the delta; None when it was removed."""
        return MappingProxyType(self._features)

    @property
    def changed_config_resources(self) -> frozenset[ConfigResource]:
        return frozenset(self._configs)

    @property
    def acl_changes(self) -> Mapping[UUID, AccessControlEntryRecord | None]:
        """ACL id -> the ACL added; None when it was removed."""
        return MappingProxyType(self._acls)

    @property
    def scram_changes(self) -> Mapping[tuple[str, int], UserScramCredentialRecord | None]:
        """(user, mechanism code) -> the credential set; None when it was removed."""
        return MappingProxyType(self._scram)

    # --- replay ----------------------------------------------------------------------------

    def replay(self, record: MetadataRecord, offset: int) -> None:
        """Apply one committed record, written at `offset`, to this delta."""
        if offset <= self.base.provenance.last_offset or offset < self._last_offset:
            raise MetadataReplayError(
                f"{type(record).__name__} at offset {offset} replayed out of order: the base "
                f"image ends at offset {self.base.provenance.last_offset} and the previous "
                f"record was at offset {self._last_offset}"
            )
        self._last_offset = offset
        # The partition records first: all but a few of a large log's records are those.
        if isinstance(record, PartitionRecord):
            topic = self._topic_delta(record, record.topic_id, offset)
            topic.partition_changes[record.partition_id] = PartitionRegistration.from_record(record)
        elif isinstance(record, PartitionChangeRecord):
            topic = self._topic_delta(record, record.topic_id, offset)
            current_partition = topic.partition(record.partition_id)
            if current_partition is None:
                raise MetadataReplayError(
                    f"PartitionChangeRecord at offset {offset} names unknown partition "
                    f"{topic.name}-{record.partition_id} (topic id {record.topic_id})"
                )
            topic.partition_changes[record.partition_id] = current_partition.merge(record)
        elif isinstance(record, RegisterBrokerRecord):
            self._brokers[record.broker_id] = BrokerRegistration.from_record(record)
        elif isinstance(record, UnregisterBrokerRecord):
            self._registered(record, offset)
            self._brokers[record.broker_id] = None
        elif isinstance(record, BrokerRegistrationChangeRecord):
            current = self._registered(record, offset)
            self._brokers[record.broker_id] = current.merge(record)
        elif isinstance(record, TopicRecord):
            self._replay_topic(record, offset)
        elif isinstance(record, RemoveTopicRecord):
            self._replay_remove_topic(record, offset)
        elif isinstance(record, ConfigRecord):
            keys = self._config_keys(ConfigResource(record.resource_type, record.resource_name))
            if record.value is None:
                keys.pop(record.name, None)
            else:
                keys[record.name] = record.value
        elif isinstance(record, FeatureLevelRecord):
            self._replay_feature_level(record, offset)
        elif isinstance(record, ProducerIdsRecord):
            current_next = (
                self.base.next_producer_id
                if self._next_producer_id is None
                else self._next_producer_id
            )
            if record.next_producer_id <= current_next:
                raise MetadataReplayError(
                    f"ProducerIdsRecord at offset {offset} moves the next producer id back from "
                    f"{current_next} to {record.next_producer_id}"
                )
            self._next_producer_id = record.next_producer_id
        elif isinstance(record, NoOpRecord):
            pass  # keeps the high watermark moving; nothing to replay
        elif isinstance(record, AccessControlEntryRecord | RemoveAccessControlEntryRecord):
            self._replay_acl(record, offset)
        elif isinstance(record, UserScramCredentialRecord):
            self._scram[(record.name, record.mechanism)] = record
        elif isinstance(record, RemoveUserScramCredentialRecord):
            key = (record.name, record.mechanism)
            live = self._scram[key] if key in self._scram else self.base.scram.credentials.get(key)
            if live is None:
                raise MetadataReplayError(
                    f"{record!r} at offset {offset} removes a credential the user does not have"
                )
            self._scram[key] = None
        else:
            raise TypeError(f"not a metadata record: {record!r}")

    def _replay_acl(
        self, record: AccessControlEntryRecord | RemoveAccessControlEntryRecord, offset: int
    ) -> None:
        acl_id = record.acl_id
        live = self._acls[acl_id] if acl_id in self._acls else self.base.acls.acls.get(acl_id)
        adding = isinstance(record, AccessControlEntryRecord)
        if adding == (live is not None):
            state = "an existing" if adding else "an unknown"
            raise MetadataReplayError(
                f"{type(record).__name__} at offset {offset} names {state} ACL id {acl_id}"
            )
        self._acls[acl_id] = record if isinstance(record, AccessControlEntryRecord) else None

    def _registered(
        self, record: UnregisterBrokerRecord | BrokerRegistrationChangeRecord, offset: int
    ) -> BrokerRegistration:
        broker_id = record.broker_id
        current = (
            self._brokers[broker_id]
            if broker_id in self._brokers
            else self.base.cluster.brokers.get(broker_id)
        )
        return registration_named_by(record, current, offset)

    def _live_topic_id(self, name: str) -> UUID | None:
        created = self._created_topic_names.get(name)
        if created is not None:
            return created
        base_topic = self.base.topics.by_name.get(name)
        if base_topic is None or base_topic.topic_id in self._deleted_topic_ids:
            return None
        return base_topic.topic_id

    def _replay_topic(self, record: TopicRecord, offset: int) -> None:
        topic_id = record.topic_id
        if (
            topic_id in self._topics
            or topic_id in self._deleted_topic_ids
            or topic_id in self.base.topics.by_id
        ):
            raise MetadataReplayError(
                f"TopicRecord at offset {offset} creates topic {record.name!r} with id "
                f"{topic_id}, which is already in use"
            )
        holder = self._live_topic_id(record.name)
        if holder is not None:
            raise MetadataReplayError(
                f"TopicRecord at offset {offset} creates topic {record.name!r} (id {topic_id}), "
                f"but topic id {holder} already has that name"
            )
        self._topics[topic_id] = TopicDelta(record.name, topic_id, None)
        self._created_topic_names[record.name] = topic_id

    def _topic_delta(self, record: MetadataRecord, topic_id: UUID, offset: int) -> TopicDelta:
        """The live topic `record` names, as a TopicDelta that may take partition changes."""
        topic = self._topics.get(topic_id)
        if topic is not None:
            return topic
        base_topic = self.base.topics.by_id.get(topic_id)
        if base_topic is None or topic_id in self._deleted_topic_ids:
            raise MetadataReplayError(
                f"{type(record).__name__} at offset {offset} names unknown topic id {topic_id}"
            )
        topic = self._topics[topic_id] = TopicDelta(base_topic.name, topic_id, base_topic)
        return topic

    def _replay_remove_topic(self, record: RemoveTopicRecord, offset: int) -> None:
        topic = self._topic_delta(record, record.topic_id, offset)
        del self._topics[record.topic_id]
        if topic.base is None:
            del self._created_topic_names[topic.name]
        else:
            self._deleted_topic_ids.add(record.topic_id)
        # The topic's configs go with it: a topic created later under the same name starts
        # with none.
        self._configs[ConfigResource(ConfigResourceType.TOPIC, topic.name)] = {}

    def _config_keys(self, resource: ConfigResource) -> dict[str, str]:
        keys = self._configs.get(resource)
        if keys is None:
            keys = self._configs[resource] = copied(self.base.configs.get(resource))
        return keys

    def _replay_feature_level(self, record: FeatureLevelRecord, offset: int) -> None:
        if record.feature_level == 0:
            if record.name == METADATA_VERSION_FEATURE:
                raise MetadataReplayError(
                    f"FeatureLevelRecord at offset {offset} sets {METADATA_VERSION_FEATURE} to "
                    "level 0; it can be changed, never removed"
                )
            self._features[record.name] = None
        else:
            self._features[record.name] = record.feature_level

    # --- apply -----------------------------------------------------------------------------

    def apply(self, provenance: MetadataProvenance) -> MetadataImage:
        """The image after every record replayed so far, ending at `provenance`."""
        replayed_any = self._last_offset > self.base.provenance.last_offset
        if replayed_any and provenance.last_offset < self._last_offset:
            raise MetadataReplayError(
                f"image provenance ends at offset {provenance.last_offset}, before the last "
                f"replayed record at offset {self._last_offset}"
            )
        base = self.base
        return MetadataImage(
            provenance=provenance,
            features=self._apply_features(base.features),
            cluster=self._apply_cluster(base.cluster),
            topics=self._apply_topics(base.topics),
            configs=self._apply_configs(base.configs),
            next_producer_id=(
                base.next_producer_id if self._next_producer_id is None else self._next_producer_id
            ),
            acls=AclsImage(_patched(base.acls.acls, self._acls)) if self._acls else base.acls,
            scram=(
                ScramImage(_patched(base.scram.credentials, self._scram))
                if self._scram
                else base.scram
            ),
        )

    def _apply_features(self, base: FeaturesImage) -> FeaturesImage:
        if not self._features:
            return base
        return FeaturesImage(_patched(base.levels, self._features))

    def _apply_cluster(self, base: ClusterImage) -> ClusterImage:
        if not self._brokers:
            return base
        return ClusterImage(_patched(base.brokers, self._brokers))

    def _apply_topics(self, base: TopicsImage) -> TopicsImage:
        if not self._topics and not self._deleted_topic_ids:
            return base
        by_id = copied(base.by_id)
        by_name = copied(base.by_name)
        leaders = dict(base.leaders)  # a few brokers; kept by the changes, not recounted
        # Removals first: a name removed here may belong to a topic created below.
        for topic_id in self._deleted_topic_ids:
            removed = by_id.pop(topic_id)
            del by_name[removed.name]
            for partition in removed.partitions.values():
                _count_leader(leaders, partition.leader, -1)
        for topic_id, topic_delta in self._topics.items():
            before = topic_delta.base.partitions if topic_delta.base is not None else {}
            for partition_id, registration in topic_delta.partition_changes.items():
                old = before.get(partition_id)
                if old is not None:
                    _count_leader(leaders, old.leader, -1)
                _count_leader(leaders, registration.leader, 1)
            topic = topic_delta.apply()
            by_id[topic_id] = topic
            by_name[topic.name] = topic
        return TopicsImage(
            MappingProxyType(by_id), MappingProxyType(by_name), MappingProxyType(leaders)
        )

    def _apply_configs(self, base: ConfigsImage) -> ConfigsImage:
        if not self._configs:
            return base
        changes = {
            resource: frozen_mapping(keys) if keys else None
            for resource, keys in self._configs.items()
        }
        return ConfigsImage(_patched(base.resources, changes))


K = TypeVar("K")
V = TypeVar("V")


def _patched(base: Mapping[K, V], changes: Mapping[K, V | None]) -> Mapping[K, V]:
    """`base` with `changes` applied: a None value removes the key."""
    result = copied(base)
    for key, value in changes.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = value
    return MappingProxyType(result)
