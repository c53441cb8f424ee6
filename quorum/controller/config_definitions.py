"""The topic, broker and group configs the controller accepts: Kafka's names, types, defaults,
ranges.

Each `ConfigDefinition` is one topic-level config and, where Kafka has one, its broker-level
synonym (`retention.ms` <- `log.retention.ms`): the broker key set on the cluster default
broker resource ("") is the default of every topic that does not set its own.

Rules:
- Names, types, defaults and ranges are Kafka's (`TopicConfig`, `LogConfig`, `KafkaConfig`).
- Values arrive as strings (the wire form). `parse` returns the typed value or raises
  `ValueError` saying why; callers turn that into INVALID_CONFIG naming the key.
- int is Kafka's int32 and long its int64, read as Kafka reads them
  (`replog.config.parse_integer`: optional surrounding whitespace and sign, ASCII digits, no
  `1_000`). A boolean is "true" or "false", any case. A string is trimmed before it is checked
  against its valid values, as Kafka's parser trims it. A list is comma-separated, whitespace
  around items ignored; an empty list is valid (an empty `cleanup.policy`: neither delete nor
  compact).
- Every value accepted for a topic key that a broker's log reads (`segment.bytes`,
  `retention.ms`, `cleanup.policy`, ...) is one `replog.storage.log_config.LogConfig` accepts
  too (tests/storage/test_log_config.py holds the two to that): a value the controller writes
  and the brokers refuse would leave every broker on its default for that key.
- Read-only broker keys (`dynamic=False`: Kafka's "read-only" update mode) are read from
  server.properties and described, but an alter that sets one is INVALID_REQUEST ("cannot
  update these configs dynamically", Kafka's answer): stored, they would be reported and
  have no effect.
- Keys that bound each other are checked together on the effective values, after each one
  alone: a topic's `min.compaction.lag.ms` at most its `max.compaction.lag.ms`
  (`check_topic_configs`, Kafka's `LogConfig.validateValues`), and on a broker resource the
  same of their broker defaults, a dedupe buffer holding one key-map entry for each cleaner
  thread, and a change of `log.cleaner.threads` to no less than half and no more than double
  the value before (`check_broker_configs`, Kafka's `LogCleaner.validateReconfiguration`).
- Group keys (KIP-848's `GroupConfig`: a consumer group's own session timeout and heartbeat
  interval) default to their broker keys (`group.consumer.session.timeout.ms`, read-only, from
  server.properties) and must lie within the broker's `group.consumer.min/max.*` bounds, the
  session above the interval (`check_group_configs`, Kafka's checks and wording).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType

from replog.config import parse_double, parse_integer

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


class ConfigType(Enum):
    INT = "int"
    LONG = "long"
    DOUBLE = "double"
    BOOLEAN = "boolean"
    STRING = "string"
    LIST = "list"


ConfigValue = int | float | bool | str | tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ConfigDefinition:
    name: str  # the topic-level name
    config_type: ConfigType
    default: str
    broker_name: str | None = None  # the broker-level synonym, if Kafka has one
    minimum: int | float | None = None
    maximum: float | None = None  # doubles only (Kafka's `between`)
    valid_values: tuple[str, ...] | None = None  # strings: one of; lists: each item one of
    dynamic: bool = True  # False: read-only, set only in server.properties (module docstring)
    check: Callable[[str], None] | None = None  # a further check of the value's form

    def parse(self, value: str) -> ConfigValue:
        """The typed value of `value`; `ValueError` naming what is wrong with it."""
        kind = self.config_type
        if self.check is not None:
            self.check(value)
        if kind is ConfigType.BOOLEAN:
            lowered = value.strip().lower()
            if lowered not in ("true", "false"):
                raise ValueError("expected true or false")
            return lowered == "true"
        if kind in (ConfigType.INT, ConfigType.LONG):
            try:
                number = parse_integer(value)
            except ValueError:
                raise ValueError(f"not a valid {kind.value}") from None
            low, high = (INT32_MIN, INT32_MAX) if kind is ConfigType.INT else (INT64_MIN, INT64_MAX)
            if not low <= number <= high:
                raise ValueError(f"out of the {kind.value} range {low}..{high}")
            if self.minimum is not None and number < self.minimum:
                raise ValueError(f"must be at least {self.minimum}")
            return number
        if kind is ConfigType.DOUBLE:
            try:
                ratio = parse_double(value)
            except ValueError:
                raise ValueError("not a valid double") from None
            if self.minimum is not None and ratio < self.minimum:
                raise ValueError(f"must be at least {self.minimum}")
            if self.maximum is not None and ratio > self.maximum:
                raise ValueError(f"must be at most {self.maximum}")
            return ratio
        if kind is ConfigType.LIST:
            items = tuple(item.strip() for item in value.split(",")) if value.strip() else ()
            if self.valid_values is not None:
                for item in items:
                    if item not in self.valid_values:
                        raise ValueError(f"{item!r} is not one of {', '.join(self.valid_values)}")
            return items
        if self.valid_values is not None and value.strip() not in self.valid_values:
            raise ValueError(f"must be one of {', '.join(self.valid_values)}")
        return value.strip()


_REPLICA_PAIR = re.compile(r"([0-9]+:[0-9]+)?")


def check_throttled_replicas(value: str) -> None:
    """`ValueError` (Kafka's `ThrottledReplicaListValidator` wording) unless `value` is `*` or
    comma-separated `partition:broker` pairs (items trimmed; empty items allowed)."""
    items = [item.strip() for item in value.split(",")]
    if "".join(items) == "*" or all(_REPLICA_PAIR.fullmatch(item) for item in items):
        return
    raise ValueError(
        "must be the literal '*' or a list of replicas in the following format: "
        "[partitionId]:[brokerId],[partitionId]:[brokerId],..."
    )


def check_above_zero(value: str) -> None:
    """`ValueError` unless `value` is a number above 0 (the cleaner's I/O rate: a rate of 0
    would stop it, and the brokers refuse it)."""
    try:
        number = parse_double(value)
    except ValueError:
        raise ValueError("not a valid double") from None
    if not number > 0:
        raise ValueError("must be above 0")


def _defs(*definitions: ConfigDefinition) -> Mapping[str, ConfigDefinition]:
    return MappingProxyType({d.name: d for d in definitions})


# The log cleaner's keys that other keys' bounds name, and the bytes of one key-map entry
# (replog/storage/cleaner/offset_map.py: a key's MD5 digest and its offset).
CLEANER_THREADS = "log.cleaner.threads"
CLEANER_BUFFER = "log.cleaner.dedupe.buffer.size"
CLEANER_ENTRY_BYTES = 24
MIN_LAG, MAX_LAG = "min.compaction.lag.ms", "max.compaction.lag.ms"

_I, _L, _D, _B, _S, _LIST = (
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.DOUBLE,
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.LIST,
)

TOPIC_CONFIGS: Mapping[str, ConfigDefinition] = _defs(
    ConfigDefinition(
        "cleanup.policy", _LIST, "delete", "log.cleanup.policy", valid_values=("compact", "delete")
    ),
    ConfigDefinition(
        "compression.type",
        _S,
        "producer",
        "compression.type",
        valid_values=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
    ),
    ConfigDefinition(
        "delete.retention.ms", _L, "86400000", "log.cleaner.delete.retention.ms", minimum=0
    ),
    ConfigDefinition("file.delete.delay.ms", _L, "60000", "log.segment.delete.delay.ms", minimum=0),
    ConfigDefinition(
        "flush.messages", _L, str(INT64_MAX), "log.flush.interval.messages", minimum=1
    ),
    ConfigDefinition("flush.ms", _L, str(INT64_MAX), "log.flush.interval.ms", minimum=0),
    ConfigDefinition(
        "follower.replication.throttled.replicas", _LIST, "", check=check_throttled_replicas
    ),
    ConfigDefinition("index.interval.bytes", _I, "4096", "log.index.interval.bytes", minimum=0),
    ConfigDefinition(
        "leader.replication.throttled.replicas", _LIST, "", check=check_throttled_replicas
    ),
    ConfigDefinition(MAX_LAG, _L, str(INT64_MAX), "log.cleaner.max.compaction.lag.ms", minimum=1),
    ConfigDefinition("max.message.bytes", _I, "1048588", "message.max.bytes", minimum=0),
    ConfigDefinition(
        "message.timestamp.type",
        _S,
        "CreateTime",
        "log.message.timestamp.type",
        valid_values=("CreateTime", "LogAppendTime"),
    ),
    ConfigDefinition(
        "min.cleanable.dirty.ratio",
        _D,
        "0.5",
        "log.cleaner.min.cleanable.ratio",
        minimum=0.0,
        maximum=1.0,
    ),
    ConfigDefinition(MIN_LAG, _L, "0", "log.cleaner.min.compaction.lag.ms", minimum=0),
    ConfigDefinition("min.insync.replicas", _I, "1", "min.insync.replicas", minimum=1),
    ConfigDefinition("preallocate", _B, "false", "log.preallocate"),
    ConfigDefinition("retention.bytes", _L, "-1", "log.retention.bytes"),
    ConfigDefinition("retention.ms", _L, "604800000", "log.retention.ms", minimum=-1),
    # Minimums are a replog log's (replog/storage/log_config.py), above Kafka's 14 and 4: a
    # value the brokers could not use is refused here rather than ignored by every broker.
    ConfigDefinition("segment.bytes", _I, "1073741824", "log.segment.bytes", minimum=64),
    ConfigDefinition("segment.index.bytes", _I, "10485760", "log.index.size.max.bytes", minimum=48),
    ConfigDefinition("segment.ms", _L, "604800000", "log.roll.ms", minimum=1),
    ConfigDefinition(
        "unclean.leader.election.enable", _B, "false", "unclean.leader.election.enable"
    ),
)

# A consumer group's own settings (Kafka's GroupConfig), each defaulting to a broker key.
GROUP_SESSION_TIMEOUT = "consumer.session.timeout.ms"
GROUP_HEARTBEAT_INTERVAL = "consumer.heartbeat.interval.ms"
GROUP_CONFIGS: Mapping[str, ConfigDefinition] = _defs(
    ConfigDefinition(
        GROUP_SESSION_TIMEOUT, _I, "45000", "group.consumer.session.timeout.ms", minimum=1
    ),
    ConfigDefinition(
        GROUP_HEARTBEAT_INTERVAL, _I, "5000", "group.consumer.heartbeat.interval.ms", minimum=1
    ),
)
# Their broker bounds (read-only broker keys, Kafka's defaults).
_GROUP_BOUNDS = {
    GROUP_SESSION_TIMEOUT: (
        ("group.consumer.min.session.timeout.ms", "45000"),
        ("group.consumer.max.session.timeout.ms", "60000"),
    ),
    GROUP_HEARTBEAT_INTERVAL: (
        ("group.consumer.min.heartbeat.interval.ms", "5000"),
        ("group.consumer.max.heartbeat.interval.ms", "15000"),
    ),
}

# Broker-level keys: the synonyms of the topic configs, plus broker-only ones.
BROKER_CONFIGS: Mapping[str, ConfigDefinition] = _defs(
    *(
        ConfigDefinition(
            d.broker_name,
            d.config_type,
            d.default,
            d.broker_name,
            d.minimum,
            d.maximum,
            d.valid_values,
        )
        for d in TOPIC_CONFIGS.values()
        if d.broker_name is not None
    ),
    # Read-only in Kafka, and read here only at start-up: the controller's rebalance timer,
    # the log manager's retention task, the replica manager's ISR check.
    ConfigDefinition("auto.leader.rebalance.enable", _B, "true", dynamic=False),
    ConfigDefinition(
        "leader.imbalance.check.interval.seconds", _L, "300", minimum=1, dynamic=False
    ),
    ConfigDefinition("log.retention.check.interval.ms", _L, "300000", minimum=1, dynamic=False),
    # The log cleaner's (replog/storage/cleaner/cleaner_config.py): whether it runs is read at
    # start-up only, the rest is Kafka's `LogCleaner.ReconfigurableConfigs` (and replog's own
    # idle wait), taken by a running cleaner (`check_cleaner_configs` holds them together).
    ConfigDefinition("log.cleaner.enable", _B, "true", dynamic=False),
    ConfigDefinition(CLEANER_THREADS, _I, "1", minimum=1),
    ConfigDefinition(CLEANER_BUFFER, _L, str(128 << 20), minimum=CLEANER_ENTRY_BYTES),
    ConfigDefinition(
        "log.cleaner.io.max.bytes.per.second",
        _D,
        "1.7976931348623157E308",  # Java's Double.MAX_VALUE: no throttle
        check=check_above_zero,
    ),
    ConfigDefinition("log.cleaner.backoff.ms", _L, "15000", minimum=0),
    ConfigDefinition("log.cleaner.idle.max.wait.ms", _L, "60000", minimum=0),  # replog's own
    ConfigDefinition("replica.lag.time.max.ms", _L, "30000", minimum=0, dynamic=False),
    # Replication throttles (KIP-73): the rates are dynamic (per broker or the cluster
    # default), the rate's window read-only (replog.replication.replication_quota).
    ConfigDefinition("leader.replication.throttled.rate", _L, str(INT64_MAX), minimum=0),
    ConfigDefinition("follower.replication.throttled.rate", _L, str(INT64_MAX), minimum=0),
    ConfigDefinition("replication.quota.window.num", _I, "11", minimum=1, dynamic=False),
    ConfigDefinition("replication.quota.window.size.seconds", _I, "1", minimum=1, dynamic=False),
    # KIP-890's verification of a transaction's first append by its partition leader
    # (replog/replication/txn_verification.py), dynamic as Kafka's.
    ConfigDefinition("transaction.partition.verification.enable", _B, "true"),
    # Read-only in Kafka: the consumer-protocol groups' defaults and the bounds of their
    # per-group overrides.
    *(
        ConfigDefinition(d.broker_name, _I, d.default, minimum=1, dynamic=False)
        for d in GROUP_CONFIGS.values()
        if d.broker_name is not None
    ),
    *(
        ConfigDefinition(key, _I, default, minimum=1, dynamic=False)
        for bounds in _GROUP_BOUNDS.values()
        for key, default in bounds
    ),
)

# Topic config name -> the broker key that defaults it.
BROKER_SYNONYMS: Mapping[str, str] = MappingProxyType(
    {d.name: d.broker_name for d in TOPIC_CONFIGS.values() if d.broker_name is not None}
)


def check_static_broker_configs(configs: Mapping[str, str]) -> None:
    """`ValueError` naming the first key of a node's static configs (its server.properties
    keys meant for the controller) that is not a known broker config or has an invalid value,
    or the keys whose values disagree (`check_broker_configs`)."""
    for name in sorted(configs):
        definition = BROKER_CONFIGS.get(name)
        if definition is None:
            raise ValueError(f"{name}: not a broker config the controller knows")
        try:
            definition.parse(configs[name])
        except ValueError as reason:
            raise ValueError(f"{name}={configs[name]!r}: {reason}") from None

    def value_of(name: str) -> str:
        return configs.get(name, BROKER_CONFIGS[name].default)

    check_broker_configs(value_of, value_of)


def check_group_configs(values: Mapping[str, str], static: Mapping[str, str]) -> None:
    """`ValueError` (Kafka's wording, naming the bound) unless a group's effective settings,
    `values` (its own keys, else the broker keys of `static`, else the defaults), lie within
    the broker's bounds (`static`, else Kafka's defaults) with the session above the interval."""
    effective: dict[str, int] = {}
    for name, definition in GROUP_CONFIGS.items():
        assert definition.broker_name is not None
        text = values.get(name, static.get(definition.broker_name, definition.default))
        effective[name] = int(definition.parse(text))  # type: ignore[arg-type]
        (low_key, low), (high_key, high) = _GROUP_BOUNDS[name]
        if effective[name] < int(static.get(low_key, low)):
            raise ValueError(f"{name} must be greater than or equal to {low_key}")
        if effective[name] > int(static.get(high_key, high)):
            raise ValueError(f"{name} must be less than or equal to {high_key}")
    if effective[GROUP_SESSION_TIMEOUT] <= effective[GROUP_HEARTBEAT_INTERVAL]:
        raise ValueError(f"{GROUP_SESSION_TIMEOUT} must be greater than {GROUP_HEARTBEAT_INTERVAL}")


def _integers(
    definitions: Mapping[str, ConfigDefinition], value_of: Callable[[str], str], *names: str
) -> tuple[int, ...] | None:
    """The parsed values of integer keys `names` (None when one does not parse: a value
    stored in a spelling the brokers read and the controller no longer writes, which no
    check then holds against the others)."""
    try:
        values = [definitions[n].parse(value_of(n)) for n in names]
    except ValueError:
        return None
    return tuple(v for v in values if isinstance(v, int))


def check_topic_configs(value_of: Callable[[str], str]) -> None:
    """`ValueError` (Kafka's `LogConfig.validateValues` wording) unless a topic's effective
    values (`value_of`: its own, else the broker defaults) agree with each other: its
    `min.compaction.lag.ms` at most its `max.compaction.lag.ms`."""
    _check_lags(TOPIC_CONFIGS, value_of, MIN_LAG, MAX_LAG)


def check_broker_configs(value_of: Callable[[str], str], previous_of: Callable[[str], str]) -> None:
    """`ValueError` naming the keys unless a broker resource's effective values (`value_of`)
    agree with each other: the default compaction lags as a topic's (Kafka's broker checks
    them at start-up), a dedupe buffer with one key-map entry for each cleaner thread, and a
    thread count within half and double of the effective one before (`previous_of`), Kafka's
    `LogCleaner.validateReconfiguration`."""
    _check_lags(BROKER_CONFIGS, value_of, *(BROKER_SYNONYMS[n] for n in (MIN_LAG, MAX_LAG)))
    sizes = _integers(BROKER_CONFIGS, value_of, CLEANER_THREADS, CLEANER_BUFFER)
    if sizes is None:
        return
    threads, buffer = sizes
    if buffer < CLEANER_ENTRY_BYTES * threads:
        raise ValueError(
            f"{CLEANER_BUFFER} ({buffer}) must hold one {CLEANER_ENTRY_BYTES}-byte key-map entry "
            f"for each of the {threads} {CLEANER_THREADS}"
        )
    before = _integers(BROKER_CONFIGS, previous_of, CLEANER_THREADS)
    if before is None:
        return
    (current,) = before
    if threads < current // 2:
        raise ValueError(
            f"{CLEANER_THREADS} ({threads}): log cleaner threads cannot be reduced to less "
            f"than half the current value {current}"
        )
    if threads > current * 2:
        raise ValueError(
            f"{CLEANER_THREADS} ({threads}): log cleaner threads cannot be increased to more "
            f"than double the current value {current}"
        )


def _check_lags(
    definitions: Mapping[str, ConfigDefinition],
    value_of: Callable[[str], str],
    low_name: str,
    high_name: str,
) -> None:
    lags = _integers(definitions, value_of, low_name, high_name)
    if lags is not None and lags[0] > lags[1]:
        raise ValueError(
            f"conflict topic config setting {low_name} ({lags[0]}) > {high_name} ({lags[1]})"
        )
