"""The settings a replica takes from the metadata image: `min.insync.replicas`, log settings,
the log cleaner's and the replication throttles, each by Kafka's precedence.

Rules (docs/design/replication.md#acks-and-min-isr; Kafka's DynamicLogConfig and topic
overrides):
- Precedence, key by key: the topic's config, else this broker's dynamic config, else the
  dynamic cluster default (the broker resource named ""), else server.properties. A value this
  broker refuses is skipped with a warning naming the topic, the key and the value, and the
  level below gives that key (`_log_config`); dropping the whole level would lose its good
  settings too.
- The log cleaner's settings (`log.cleaner.threads`, `.dedupe.buffer.size`,
  `.io.max.bytes.per.second`, `.backoff.ms`) follow the broker levels; the running cleaner
  takes them when a broker level changes (`cleaner_config.reconfigured`).
- The replication throttles (`replication_quota`): the rates from the broker levels, the
  throttled replicas from each topic's config.
- Only the replicas of topics whose config resource changed are given new settings (all of
  them when a broker level changed); a topic's config is built once per topic and image.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable

from replog.common import TopicPartitionKey
from replog.quorum.metadata.image import ConfigResource, MetadataImage
from replog.quorum.metadata.records import ConfigResourceType
from replog.replication.leader_state import PartitionReplicationConfig
from replog.replication.min_insync_replicas import min_insync_replicas
from replog.replication.replication_quota import (
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
    effective_rate,
    throttled_partitions,
)
from replog.server.data_plane.replica_shell import ReplicaShell
from replog.storage.cleaner.cleaner_config import reconfigured
from replog.storage.log_config import LogConfig

log = logging.getLogger("replog.server.data_plane.replica_manager")  # every role's lines


class ReplicaConfigs(ReplicaShell):
    """The replicas' settings from the image (module docstring)."""

    def _replication_config(self, image: MetadataImage, topic: str) -> PartitionReplicationConfig:
        """The topic's replication config in `image`: kept per topic until the image's
        configs change (it reads nothing else that changes), so that each new leader does
        not build it again (three config lookups and two objects, ~6 us a leader, on every
        node at a creation)."""
        if image.configs is not self._replication_configs_of:
            self._replication_configs_of = image.configs
            self._replication_configs = {}
        config = self._replication_configs.get(topic)
        if config is None:
            config = self._replication_configs[topic] = PartitionReplicationConfig(
                min_insync_replicas=self._min_insync_replicas(image, topic),
                replica_lag_time_ms_max=self.config.replica_lag_time_ms_max,
            )
        return config

    def _min_insync_replicas(self, image: MetadataImage, topic: str) -> int:
        """`min_insync_replicas`' precedence over the topic's config, this broker's dynamic
        config, the dynamic cluster default (the broker resource named ""), server.properties.

        The two dynamic broker levels count: the controller stores them in the image and
        DescribeConfigs reports them as in force. `_apply` re-reads this on
        every image whose configs changed, for every led partition.
        """
        value, refused = min_insync_replicas(
            (
                (resource, image.configs.get(resource).get("min.insync.replicas"))
                for resource in reversed(self._log_config_resources(topic))  # strongest first
            ),
            self.config.default_min_insync_replicas,
        )
        for resource, raw in refused:
            assert isinstance(resource, ConfigResource)
            log.warning(
                "%s: ignoring min.insync.replicas=%r of %s %r (not an integer)",
                topic,
                raw,
                resource.resource_type.name.lower(),
                resource.resource_name,
            )
        return value

    def _log_config_resources(self, topic: str) -> tuple[ConfigResource, ...]:
        """Where a topic's log settings come from over server.properties, weakest first:
        the dynamic cluster default, this broker's dynamic config, the topic's own (Kafka's
        DynamicLogConfig and topic overrides)."""
        return (*self._broker_config_resources(), ConfigResource(ConfigResourceType.TOPIC, topic))

    def _broker_config_resources(self) -> tuple[ConfigResource, ...]:
        """The dynamic broker levels, weakest first: the cluster default, this broker's (made
        once: read for every new topic's log and replication configs)."""
        return self._broker_resources

    def _log_config(self, image: MetadataImage, topic: str) -> LogConfig:
        """The topic's `LogConfig`: server.properties, then each level of
        `_log_config_resources` over it.

        A value this broker refuses keeps the level below's value for that key alone, with a
        warning naming the topic, the key and the value: dropping the whole level would lose
        its good settings too (one bad key beside `retention.ms=-1` would have data deleted
        after 7 days). The dynamic broker levels count, as for `min.insync.replicas`.
        """
        config = self.log_manager.config.log
        for resource in self._log_config_resources(topic):
            config, refused = config.with_each_valid(image.configs.get(resource))
            for error in refused:
                log.warning(
                    "%s: ignoring a log setting of %s %r, keeping the value below it: %s",
                    topic,
                    resource.resource_type.name.lower(),
                    resource.resource_name,
                    error,
                )
        return config

    def _reconfigured_topics(
        self,
        previous: MetadataImage,
        image: MetadataImage,
        changed: Collection[ConfigResource] | None,
    ) -> Collection[str] | None:
        """The topics whose own config resource differs between the images (`changed`: the
        resources that did, when known); None when a dynamic broker level did (every topic's
        settings may change)."""
        if changed is None:
            before, after = previous.configs.resources, image.configs.resources
            # An unchanged resource keeps its mapping object from image to image.
            changed = [r for r in before.keys() | after.keys() if before.get(r) is not after.get(r)]
        if any(resource in changed for resource in self._broker_config_resources()):
            return None
        return {
            resource.resource_name
            for resource in changed
            if resource.resource_type is ConfigResourceType.TOPIC
        }

    def _refresh_throttles(self, image: MetadataImage, topics: Collection[str] | None) -> None:
        """Set the replication throttles from `image`: the rates (this broker's dynamic config,
        else the dynamic cluster default, else server.properties: a broker level changed when
        `topics` is None) and the throttled replicas of `topics` (every topic then)."""
        configs = image.configs
        if topics is None:
            levels = [configs.get(r) for r in reversed(self._broker_config_resources())]
            for quota, key, static in (
                (self.leader_quota, LEADER_RATE, self.config.leader_replication_throttled_rate),
                (
                    self.follower_quota,
                    FOLLOWER_RATE,
                    self.config.follower_replication_throttled_rate,
                ),
            ):
                bound, refused = effective_rate([*levels, {key: str(static)}], key)
                for raw in refused:
                    log.warning("ignoring %s=%r (not a long of at least 0)", key, raw)
                quota.bound = bound
            topics = {
                *(
                    r.resource_name
                    for r in configs.resources
                    if r.resource_type is ConfigResourceType.TOPIC
                ),
                *self.leader_quota.throttled,
                *self.follower_quota.throttled,
            }
        for topic in topics:
            own = configs.get(ConfigResource(ConfigResourceType.TOPIC, topic))
            for quota, key in (
                (self.leader_quota, LEADER_REPLICAS),
                (self.follower_quota, FOLLOWER_REPLICAS),
            ):
                value = own.get(key)
                partitions: frozenset[int] = frozenset()
                if value:
                    try:
                        partitions = throttled_partitions(value, self.broker_id)
                    except ValueError as reason:
                        log.warning("%s: ignoring %s=%r: %s", topic, key, value, reason)
                quota.set_throttled(topic, partitions)
        self._follower.throttles_changed()

    def _refresh_cleaner(self, image: MetadataImage, *, starting: bool) -> None:
        """Give the log cleaner the settings of the dynamic broker levels over server.properties
        (Kafka's `LogCleaner.reconfigure`; `cleaner_config.reconfigured` says which it takes)."""
        cleaner = self.log_manager.cleaner
        levels = [image.configs.get(r) for r in self._broker_config_resources()]
        config, refused = reconfigured(
            cleaner.config, self.log_manager.config.cleaner, levels, starting=starting
        )
        for warning in refused:
            log.warning("log cleaner: %s", warning)
        if config != cleaner.config:
            log.info("log cleaner reconfigured: %s", config)
            cleaner.reconfigure(config)

    def _replica_keys_of(
        self, image: MetadataImage, topics: Collection[str]
    ) -> set[TopicPartitionKey]:
        """The keys of this broker's replicas of `topics` (as `image` names their partitions)."""
        keys: set[TopicPartitionKey] = set()
        for topic in topics:
            found = image.topics.by_name.get(topic)
            if found is not None:
                keys.update(
                    key for p in found.partitions if (key := (topic, p)) in self._partitions
                )
        return keys

    def _refresh_log_configs(self, image: MetadataImage, keys: Iterable[TopicPartitionKey]) -> None:
        """Give the local replicas `keys` (those of the topics whose settings changed) their
        new `LogConfig`.

        A topic's log settings (`segment.bytes`, `retention.ms`, `max.message.bytes`, ...)
        may change at any time, so they reach open logs too, not only a Partition being
        created. Only the replicas of topics whose config resource changed are visited (a
        walk over all of them, 100,000 at a time, for each topic created with a setting);
        `get_or_create_log` applies the config to the open log (and does nothing when it is
        equal).
        """
        new_configs: dict[str, LogConfig] = {}
        for topic, partition_id in keys:
            config = new_configs.get(topic)
            if config is None:
                config = new_configs[topic] = self._log_config(image, topic)
            found = self.log_manager.get_or_create_log(topic, partition_id, config)
            assert found is self._partitions[(topic, partition_id)].log, (
                f"{topic}-{partition_id}: another log is open"
            )
