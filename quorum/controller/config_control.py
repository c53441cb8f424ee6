"""ConfigControl: topic, broker and group configs, validated against Kafka's names and types.

State: per config resource (a topic by name, a broker by id, or "" for the cluster default
broker resource, a consumer group by id) the keys set on it, in timeline state, replayed from
ConfigRecords.

Rules (Kafka's ConfigurationControlManager):
- Only known keys with valid values are written (`config_definitions`); anything else is
  INVALID_CONFIG naming the resource, the key and what is wrong. A topic resource must name an
  existing topic (UNKNOWN_TOPIC_OR_PARTITION); a broker resource is "" or a broker id
  (INVALID_REQUEST otherwise), and an alteration's broker id must be a registered broker's
  (BROKER_ID_NOT_REGISTERED naming the registered ones, as Kafka's controller refuses a node id
  it does not know). A group resource names any group id, existing or not (Kafka's too; a
  group's configs outlive it); an empty one is INVALID_REQUEST. A group's alteration is
  checked as a whole against the broker's `group.consumer.min/max.*` bounds
  (`check_group_configs`, the node's static configs): INVALID_CONFIG naming the bound. So is
  a topic's or a broker's, on its effective values (its own keys after the alteration over
  the levels below, as a broker reads them): keys that bound each other must agree
  (`check_topic_configs`, `check_broker_configs`: a topic's `min.compaction.lag.ms` above its
  `max.compaction.lag.ms` is INVALID_CONFIG naming both, in CreateTopics too).
- IncrementalAlterConfigs validates each resource on its own: each succeeds or fails alone,
  and the records of the valid ones are written together, in one atomic batch.
- Operations: SET and DELETE for every key; APPEND and SUBTRACT for list keys
  (`cleanup.policy`), which add or remove items of the current value (or its default).
  DELETE of a key not set is a no-op, an unknown key's too (Kafka's tools clear keys such as
  the replication throttles whatever the broker knows); SET of an unknown key is refused.
- A read-only broker key (`ConfigDefinition.dynamic` False: `replica.lag.time.max.ms`,
  `auto.leader.rebalance.enable`, ...) is read only from server.properties: setting it is
  INVALID_REQUEST naming it ("cannot update these configs dynamically", Kafka's answer, which
  keeps INVALID_REQUEST for it since KAFKA-13609). Deleting one is allowed, so that a value
  stored before can go; DescribeConfigs ignores such a value (it never had an effect).
- ConfigRecord with a value sets the key; with None it deletes it. A resource with no keys
  left disappears. Deleting a topic (RemoveTopicRecord, replayed by the replication manager)
  deletes its configs through `delete_topic_configs`.
- A topic's effective value is its own, else the cluster default broker resource's synonym
  (`log.retention.ms` for `retention.ms`), else the node's static config of that synonym (its
  server.properties), else Kafka's default. A broker's is its own, else the cluster default's,
  else the static config, else Kafka's default. A group's is its own, else the static config
  of its broker key, else Kafka's default. DescribeConfigs names which of these it came from
  (`ConfigSource`, Kafka's names).
- Static configs are the node's own and never in the log: they only decide the active
  controller's writes (an unclean election), whose records carry the outcome.
- Reads take an `offset` (the last stable offset) or None for the latest state.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum, IntEnum
from types import MappingProxyType

from replog.errors import (
    BrokerIdNotRegisteredError,
    BrokerNotAvailableError,
    InvalidConfigError,
    InvalidRequestError,
    KafkaError,
    UnknownTopicOrPartitionError,
)
from replog.quorum.controller.config_definitions import (
    BROKER_CONFIGS,
    GROUP_CONFIGS,
    TOPIC_CONFIGS,
    ConfigDefinition,
    ConfigType,
    ConfigValue,
    check_broker_configs,
    check_group_configs,
    check_static_broker_configs,
    check_topic_configs,
)
from replog.quorum.controller.controller_result import ControllerResult
from replog.quorum.metadata.image import ConfigResource
from replog.quorum.metadata.records import ConfigRecord, ConfigResourceType, MetadataRecord
from replog.timeline import SnapshotRegistry, TimelineHashMap

CLUSTER_DEFAULT = ""  # the broker resource name of the cluster-wide default


class AlterConfigOpType(IntEnum):
    """IncrementalAlterConfigs operation codes, as on Kafka's wire."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@dataclass(frozen=True, slots=True)
class AlterConfigOp:
    name: str
    op: AlterConfigOpType
    value: str | None = None  # unused by DELETE


class ConfigSource(Enum):
    """Where a described config value comes from (Kafka's DescribeConfigs source names)."""

    TOPIC_CONFIG = "TOPIC_CONFIG"
    DYNAMIC_BROKER_CONFIG = "DYNAMIC_BROKER_CONFIG"
    DYNAMIC_DEFAULT_BROKER_CONFIG = "DYNAMIC_DEFAULT_BROKER_CONFIG"
    STATIC_BROKER_CONFIG = "STATIC_BROKER_CONFIG"
    DEFAULT_CONFIG = "DEFAULT_CONFIG"
    GROUP_CONFIG = "GROUP_CONFIG"


@dataclass(frozen=True, slots=True)
class DescribedConfig:
    """One config of a resource as DescribeConfigs shows it: its effective value and source."""

    name: str
    value: str
    source: ConfigSource

    @property
    def is_default(self) -> bool:
        return self.source is ConfigSource.DEFAULT_CONFIG


def topic_resource(topic_name: str) -> ConfigResource:
    return ConfigResource(ConfigResourceType.TOPIC, topic_name)


def group_resource(group_id: str) -> ConfigResource:
    return ConfigResource(ConfigResourceType.GROUP, group_id)


def broker_resource(broker_id: int | None = None) -> ConfigResource:
    """A broker's resource; None: the cluster-wide default."""
    return ConfigResource(
        ConfigResourceType.BROKER, CLUSTER_DEFAULT if broker_id is None else str(broker_id)
    )


class ConfigControl:
    """Config keys per resource, in timeline state."""

    __slots__ = ("_configs", "_static")

    def __init__(
        self, registry: SnapshotRegistry, static_configs: Mapping[str, str] | None = None
    ) -> None:
        # Values are read-only mappings, replaced (never changed in place) on every write.
        self._configs: TimelineHashMap[ConfigResource, Mapping[str, str]] = TimelineHashMap(
            registry
        )
        # The node's static broker configs (server.properties), below every dynamic value.
        static = dict(static_configs or {})
        check_static_broker_configs(static)
        self._static: Mapping[str, str] = MappingProxyType(static)

    # -- queries ------------------------------------------------------------------------------

    def describe(self, resource: ConfigResource, offset: int | None = None) -> dict[str, str]:
        """The keys set on `resource` at `offset` (None: latest)."""
        return dict(self._configs.get(resource, _EMPTY, offset=offset))

    def resources(self, offset: int | None = None) -> list[ConfigResource]:
        """Every resource with at least one key set, sorted."""
        return sorted(self._configs.keys(offset))

    def topic_config(self, topic_name: str, name: str, offset: int | None = None) -> str:
        """The effective value of topic config `name` for `topic_name` (module docstring)."""
        if name not in TOPIC_CONFIGS:
            raise KeyError(f"unknown topic config {name!r}")
        own = self._configs.get(topic_resource(topic_name), _EMPTY, offset=offset)
        return self._effective(topic_resource(topic_name), own, name, offset)

    def _effective(
        self,
        resource: ConfigResource,
        own: Mapping[str, str],
        name: str,
        offset: int | None = None,
    ) -> str:
        """The effective value of known key `name` of a topic or broker resource whose own
        keys are `own` (module docstring: then the cluster default, the static config, Kafka's
        default; a read-only key skips the dynamic levels)."""
        is_topic = resource.resource_type is ConfigResourceType.TOPIC
        definition = _definitions(resource)[name]
        broker_key = definition.broker_name if is_topic else name
        if definition.dynamic:
            if name in own:
                return own[name]
            if broker_key is not None and resource != broker_resource():
                cluster_default = self._configs.get(broker_resource(), _EMPTY, offset=offset)
                if broker_key in cluster_default:
                    return cluster_default[broker_key]
        if broker_key is not None and broker_key in self._static:
            return self._static[broker_key]
        return definition.default

    def min_insync_replicas(self, topic_name: str, offset: int | None = None) -> int:
        value = self.topic_config(topic_name, "min.insync.replicas", offset)
        return int(value.strip())

    def unclean_leader_election_enabled(self, topic_name: str, offset: int | None = None) -> bool:
        value = self.topic_config(topic_name, "unclean.leader.election.enable", offset)
        return value.strip().lower() == "true"

    def describe_configs(
        self,
        resource: ConfigResource,
        names: Sequence[str] | None,
        offset: int | None,
        *,
        exists: bool,
    ) -> tuple[DescribedConfig, ...]:
        """DescribeConfigs of one resource at `offset` (`describe_resource_configs`)."""
        return describe_resource_configs(
            resource,
            names,
            own=self._configs.get(resource, _EMPTY, offset=offset),
            cluster_default=self._configs.get(broker_resource(), _EMPTY, offset=offset),
            static=self._static,
            exists=exists,
        )

    # -- validation and writes -----------------------------------------------------------------

    def validate(self, resource: ConfigResource, name: str, value: str) -> None:
        """INVALID_CONFIG unless `name` is a known key of the resource's type and `value` is
        valid for it."""
        _check_resource_name(resource)
        _parse(resource, self._definition(resource, name), value)

    def validate_topic_configs(self, topic_name: str, configs: Mapping[str, str]) -> None:
        """INVALID_CONFIG unless every key of `configs` is a valid topic config (CreateTopics;
        the replication manager's `config_validator`)."""
        resource = topic_resource(topic_name)
        for name in sorted(configs):
            self.validate(resource, name, configs[name])
        self._check_together(resource, configs, _EMPTY)

    def config_records(
        self, resource: ConfigResource, configs: Mapping[str, str]
    ) -> list[ConfigRecord]:
        """Validated records setting `configs` on `resource` (CreateTopics' `--config`)."""
        _check_resource_name(resource)
        records = []
        for name in sorted(configs):
            _parse(resource, self._definition(resource, name), configs[name])
            records.append(
                ConfigRecord(resource.resource_type, resource.resource_name, name, configs[name])
            )
        return records

    def incremental_alter_configs(
        self,
        changes: Mapping[ConfigResource, Sequence[AlterConfigOp]],
        *,
        topic_exists: Callable[[str], bool],
        registered_brokers: Callable[[], Collection[int]],
        validate_only: bool = False,
        replaced: Collection[ConfigResource] = (),
    ) -> ControllerResult[dict[ConfigResource, KafkaError | None]]:
        """Apply `changes` per resource; the response maps each resource to its error (None:
        applied, or with `validate_only` would be applied: then nothing is written). A
        resource in `replaced` starts from no dynamic configs (Kafka's legacy AlterConfigs):
        each one set and not in its changes is deleted."""
        records: list[MetadataRecord] = []
        outcome: dict[ConfigResource, KafkaError | None] = {}
        for resource, ops in changes.items():
            try:
                _check_exists(resource, topic_exists, registered_brokers)
                records.extend(self._alter_one(resource, ops, replace=resource in replaced))
                outcome[resource] = None
            except KafkaError as error:
                outcome[resource] = error
        return ControllerResult.of(() if validate_only else records, outcome, is_atomic=True)

    def _alter_one(
        self,
        resource: ConfigResource,
        ops: Sequence[AlterConfigOp],
        *,
        replace: bool = False,
    ) -> list[ConfigRecord]:
        current = dict(self._configs.get(resource, _EMPTY))
        updated = {} if replace else dict(current)
        seen: set[str] = set()
        for op in ops:
            if op.name in seen:
                raise InvalidRequestError(
                    f"{_describe(resource)}: config {op.name} appears more than once"
                )
            seen.add(op.name)
            if op.op is AlterConfigOpType.DELETE:
                # Any key, known or not: Kafka writes nothing for a key not set, and its tools
                # clear keys this resource may not have (the replication throttles).
                updated.pop(op.name, None)
                continue
            definition = self._definition(resource, op.name)
            if op.value is None:
                raise InvalidConfigError(
                    f"{_describe(resource)}: {op.op.name} of config {op.name} needs a value"
                )
            if not definition.dynamic:
                raise InvalidRequestError(
                    f"{_describe(resource)}: cannot update these configs dynamically: {op.name} "
                    "(read-only: set it in server.properties; every node reads it at start-up)"
                )
            if op.op is AlterConfigOpType.SET:
                _parse(resource, definition, op.value)
                updated[op.name] = op.value
                continue
            if definition.config_type is not ConfigType.LIST:
                raise InvalidConfigError(
                    f"{_describe(resource)}: {op.op.name} applies only to list configs, and "
                    f"{op.name} is a {definition.config_type.value}"
                )
            items = _as_list(resource, definition, updated.get(op.name, definition.default))
            changed = _as_list(resource, definition, op.value)
            if op.op is AlterConfigOpType.APPEND:
                items += tuple(item for item in changed if item not in items)
            else:
                items = tuple(item for item in items if item not in changed)
            updated[op.name] = ",".join(items)
        self._check_together(resource, updated, current)
        return [
            ConfigRecord(resource.resource_type, resource.resource_name, name, updated.get(name))
            for name in sorted(set(current) | set(updated))
            if current.get(name) != updated.get(name)
        ]

    def _check_together(
        self, resource: ConfigResource, updated: Mapping[str, str], current: Mapping[str, str]
    ) -> None:
        """INVALID_CONFIG naming the keys unless the resource's effective values with its own
        keys `updated` (`current` before) agree with each other (module docstring)."""
        kind = resource.resource_type
        try:
            if kind is ConfigResourceType.GROUP:
                check_group_configs(updated, self._static)
            elif kind is ConfigResourceType.TOPIC:
                check_topic_configs(lambda name: self._effective(resource, updated, name))
            else:
                check_broker_configs(
                    lambda name: self._effective(resource, updated, name),
                    lambda name: self._effective(resource, current, name),
                )
        except ValueError as reason:
            raise InvalidConfigError(f"{_describe(resource)}: {reason}") from None

    # -- replay and snapshots ------------------------------------------------------------------

    def replay(self, record: ConfigRecord, offset: int) -> None:
        resource = ConfigResource(record.resource_type, record.resource_name)
        keys = dict(self._configs.get(resource, _EMPTY))
        if record.value is None:
            keys.pop(record.name, None)
        else:
            keys[record.name] = record.value
        if keys:
            self._configs[resource] = MappingProxyType(keys)
        else:
            self._configs.remove(resource)

    def delete_topic_configs(self, topic_name: str) -> None:
        """Forget every config of a deleted topic (replay of its RemoveTopicRecord)."""
        self._configs.remove(topic_resource(topic_name))

    def snapshot_records(self, offset: int | None = None) -> list[ConfigRecord]:
        """Records that recreate the configs at `offset`, sorted by resource and key."""
        configs = self._configs.to_dict(offset)
        return [
            ConfigRecord(resource.resource_type, resource.resource_name, name, keys[name])
            for resource in sorted(configs)
            for keys in (configs[resource],)
            for name in sorted(keys)
        ]

    # -- helpers -------------------------------------------------------------------------------

    @staticmethod
    def _definition(resource: ConfigResource, name: str) -> ConfigDefinition:
        definition = _definitions(resource).get(name)
        if definition is None:
            raise InvalidConfigError(f"{_describe(resource)}: unknown config {name!r}")
        return definition


_EMPTY: Mapping[str, str] = MappingProxyType({})


def describe_resource_configs(
    resource: ConfigResource,
    names: Sequence[str] | None,
    *,
    own: Mapping[str, str],
    cluster_default: Mapping[str, str],
    static: Mapping[str, str],
    exists: bool,
) -> tuple[DescribedConfig, ...]:
    """DescribeConfigs of one resource whose own keys are `own`, over the cluster default's
    and the node's `static` ones: every known key (`names` None) or the known keys among
    `names` (unknown names are left out, as Kafka does), sorted, each with its effective value
    and source. `exists`: whether the resource's topic exists, or its broker is registered
    (UNKNOWN_TOPIC_OR_PARTITION or BROKER_NOT_AVAILABLE if not: Kafka's admin could not reach
    a broker that is not there, and listing defaults for it would read as if it were). Pure:
    the controller runs it on its timeline state, a broker on its metadata image."""
    _check_resource_name(resource)
    is_topic = resource.resource_type is ConfigResourceType.TOPIC
    is_group = resource.resource_type is ConfigResourceType.GROUP
    if not exists:
        if is_topic:
            raise UnknownTopicOrPartitionError(
                f"cannot describe configs of topic {resource.resource_name!r}: it does not exist"
            )
        raise BrokerNotAvailableError(
            f"cannot describe configs of broker {resource.resource_name}: no broker with "
            "that id is registered"
        )
    known = _definitions(resource)
    wanted = sorted(known) if names is None else sorted({n for n in names if n in known})
    own_source = (
        ConfigSource.TOPIC_CONFIG
        if is_topic
        else ConfigSource.GROUP_CONFIG
        if is_group
        else ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        if resource.resource_name == CLUSTER_DEFAULT
        else ConfigSource.DYNAMIC_BROKER_CONFIG
    )
    described = []
    for name in wanted:
        definition = known[name]
        # The broker-level key that stands in for this one below its own value.
        broker_key = definition.broker_name if is_topic or is_group else name
        candidates: list[tuple[str | None, ConfigSource]] = []
        if definition.dynamic:
            candidates.append((own.get(name), own_source))
            if broker_key is not None:
                default_source = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
                candidates.append((cluster_default.get(broker_key), default_source))
        if broker_key is not None:
            candidates.append((static.get(broker_key), ConfigSource.STATIC_BROKER_CONFIG))
        described.append(
            next(
                (DescribedConfig(name, v, s) for v, s in candidates if v is not None),
                DescribedConfig(name, definition.default, ConfigSource.DEFAULT_CONFIG),
            )
        )
    return tuple(described)


def _definitions(resource: ConfigResource) -> Mapping[str, ConfigDefinition]:
    """The keys a resource of this type may have."""
    if resource.resource_type is ConfigResourceType.TOPIC:
        return TOPIC_CONFIGS
    if resource.resource_type is ConfigResourceType.GROUP:
        return GROUP_CONFIGS
    return BROKER_CONFIGS


def _describe(resource: ConfigResource) -> str:
    if resource.resource_type is ConfigResourceType.TOPIC:
        return f"topic {resource.resource_name!r}"
    if resource.resource_type is ConfigResourceType.GROUP:
        return f"group {resource.resource_name!r}"
    if resource.resource_name == CLUSTER_DEFAULT:
        return "the cluster default broker config"
    return f"broker {resource.resource_name}"


def _check_exists(
    resource: ConfigResource,
    topic_exists: Callable[[str], bool],
    registered_brokers: Callable[[], Collection[int]],
) -> None:
    """Refuse an alteration of a topic that does not exist or of a broker not registered."""
    _check_resource_name(resource)
    name = resource.resource_name
    if resource.resource_type is ConfigResourceType.GROUP:
        return
    if resource.resource_type is ConfigResourceType.TOPIC:
        if not topic_exists(name):
            raise UnknownTopicOrPartitionError(
                f"cannot alter configs of topic {name!r}: it does not exist"
            )
        return
    if name == CLUSTER_DEFAULT:
        return
    registered = sorted(registered_brokers())
    if int(name) not in registered:
        known = ", ".join(map(str, registered)) or "none"
        raise BrokerIdNotRegisteredError(
            f"cannot alter configs of broker {name}: no broker with that id is registered "
            f"(registered brokers: {known}); the cluster-wide default is the broker resource "
            'named ""'
        )


def _check_resource_name(resource: ConfigResource) -> None:
    if resource.resource_type in (ConfigResourceType.TOPIC, ConfigResourceType.GROUP):
        if not resource.resource_name:
            kind = resource.resource_type.name.lower()
            raise InvalidRequestError(f"a {kind} config resource must name a {kind}")
        return
    name = resource.resource_name
    if name != CLUSTER_DEFAULT and not (name.isascii() and name.isdigit()):
        raise InvalidRequestError(
            f"broker config resource {name!r} is neither a broker id nor the cluster default"
        )


def _parse(resource: ConfigResource, definition: ConfigDefinition, value: str) -> ConfigValue:
    try:
        return definition.parse(value)
    except ValueError as reason:
        raise InvalidConfigError(
            f"{_describe(resource)}: invalid value {value!r} for config {definition.name}: {reason}"
        ) from None


def _as_list(resource: ConfigResource, definition: ConfigDefinition, value: str) -> tuple[str, ...]:
    parsed = _parse(resource, definition, value)
    assert isinstance(parsed, tuple), "list configs parse to tuples"
    return parsed
