"""The read options of `spark.read/readStream.format("replog")`: parsed and checked, pure.

The names and meanings are those of Spark's Kafka source, so code written against
`format("kafka")` moves over by changing the format name:

- `bootstrap.servers` (or `kafka.bootstrap.servers`): required.
- exactly one of `subscribe` (comma list of topics), `subscribePattern` (a Python `re` regex
  matched against the whole topic name; Kafka's is a Java regex) and `assign` (JSON
  `{"topic": [0, 1]}`).
- `startingOffsets`: `earliest`, `latest` or JSON `{"topic": {"0": 23, "1": -2}}` (-2 =
  earliest, -1 = latest) naming every partition read. Default `earliest` for batch, `latest`
  for streaming; `latest` (and -1) is not allowed in batch.
- `startingOffsetsByTimestamp`: JSON `{"topic": {"0": ms}}`; `startingTimestamp`: one ms value
  for every partition. Precedence: `startingTimestamp` > `startingOffsetsByTimestamp` >
  `startingOffsets`. `startingOffsetsByTimestampStrategy`: `error` (default: no record at or
  after the time fails the query) or `latest` (start at the high watermark).
- `endingOffsets` (batch only): `latest` (default) or JSON with -1 = latest; -2 not allowed.
- `maxOffsetsPerTrigger` (streaming): a positive total per micro-batch, split across partitions
  by backlog.
- `minOffsetsPerTrigger` (streaming): a positive total a micro-batch waits for, unless
  `maxTriggerDelay` (a Spark time string: `15m` default, `30s`, `500ms`, a bare number is ms)
  has passed since the last one started; not above `maxOffsetsPerTrigger` when both are set.
- `minPartitions`: a positive hint; large ranges are split so there are at least this many tasks.
- `failOnDataLoss` (default true), `includeHeaders` (default false): booleans.
- `pollTimeoutMs` (Kafka's `kafkaConsumer.pollTimeoutMs`, also accepted): how long a task may
  wait without progress, as Kafka's bounds one poll (default 120000; `range_reader`).
- `kafka.<setting>`: passed to the executors' fetchers (checked as consumer settings) and, for
  the `ADMIN_PASSTHROUGH` settings (`security.protocol` and the TLS ones among them), the
  driver's admin client; settings that would change what
  is read (`group.id`, `auto.offset.reset`, `enable.auto.commit`, deserializers, ...) are
  refused, as Kafka refuses them. `kafka.isolation.level` is read_committed unless given
  (Spark's Kafka source reads read_uncommitted unless told; replog's reads what a
  transactional writer committed: below the last stable offset, aborted records skipped);
  read_uncommitted reads up to the high watermark, aborted records included.

Rules:
- Spark hands options over lower-cased (a case-insensitive dict), so keys are matched without
  case; every error names the option in its documented spelling.
- Anything unknown or malformed is a `SourceOptionError` here, at planning, never in a task.
- Offsets in JSON are checked for shape here; whether they name exactly the subscribed
  partitions is checked in planning, once the partitions are known.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from replog.client.config import consumer_config
from replog.client.tls_settings import SECURITY_KEYS
from replog.common import TopicPartitionKey
from replog.errors import ConfigError
from replog.spark.errors import SourceOptionError

EARLIEST = -2  # Kafka's per-partition JSON values for "earliest" and "latest"
LATEST = -1

DEFAULT_POLL_TIMEOUT_MS = 120_000
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60_000  # Spark's Kafka source: 15m
# Spark's time strings (JavaUtils.timeStringAsMs): a number and an optional unit, ms without.
_TIME_STRING = re.compile(r"([0-9]+)([a-z]+)?")
_TIME_UNITS_MS = {"us": 0.001, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000}
_TIME_UNITS_MS["d"] = 24 * _TIME_UNITS_MS["h"]

Positions = dict[TopicPartitionKey, int]

# Documented spelling of every known option, by its lower-cased key.
KNOWN = {
    name.lower(): name
    for name in (
        "bootstrap.servers",
        "kafka.bootstrap.servers",
        "subscribe",
        "subscribePattern",
        "assign",
        "startingOffsets",
        "endingOffsets",
        "startingOffsetsByTimestamp",
        "startingTimestamp",
        "startingOffsetsByTimestampStrategy",
        "maxOffsetsPerTrigger",
        "minOffsetsPerTrigger",
        "maxTriggerDelay",
        "minPartitions",
        "failOnDataLoss",
        "includeHeaders",
        "pollTimeoutMs",
        "kafkaConsumer.pollTimeoutMs",
    )
}
# Kafka's source refuses these consumer settings: each would change which records are read or
# how offsets are tracked, which the source decides itself.
REFUSED_PASSTHROUGH = {
    "group.id": "the source tracks offsets in Spark's checkpoint, not in a consumer group",
    "auto.offset.reset": "use startingOffsets instead",
    "enable.auto.commit": "the source never commits offsets",
    "key.deserializer": "keys are always binary; cast or decode them in the query",
    "value.deserializer": "values are always binary; cast or decode them in the query",
    "interceptor.classes": "not supported",
    "consumer.timeout.ms": "the source reads exact offset ranges",
}
# Client settings the driver's admin client accepts too (the rest are consumer-only).
ADMIN_PASSTHROUGH = {
    "client.id",
    "request.timeout.ms",
    "retry.backoff.ms",
    "retry.backoff.max.ms",
    "metadata.max.age.ms",
    "default.api.timeout.ms",
    *SECURITY_KEYS,  # security.protocol and TLS: the driver connects as the executors do
}


class Mode(Enum):
    BATCH = "batch"
    STREAMING = "streaming"


# --- the subscription ------------------------------------------------------------------------


@dataclass(frozen=True)
class Subscribe:
    topics: tuple[str, ...]


@dataclass(frozen=True)
class SubscribePattern:
    pattern: str

    def matches(self, topic: str) -> bool:
        return re.fullmatch(self.pattern, topic) is not None


@dataclass(frozen=True)
class Assign:
    partitions: tuple[TopicPartitionKey, ...]  # sorted by topic, then partition


Subscription = Subscribe | SubscribePattern | Assign


# --- where to start and end ------------------------------------------------------------------


@dataclass(frozen=True)
class Earliest:
    pass


@dataclass(frozen=True)
class Latest:
    pass


@dataclass(frozen=True)
class SpecificOffsets:
    """Per partition: an offset >= 0, EARLIEST (-2) or LATEST (-1)."""

    option: str  # the option it came from, for errors found in planning
    offsets: Mapping[TopicPartitionKey, int]


@dataclass(frozen=True)
class ByTimestamp:
    """Per partition a time in ms (`per_partition`), or one time for all (`everywhere`)."""

    option: str
    per_partition: Mapping[TopicPartitionKey, int] | None
    everywhere: int | None
    latest_when_missing: bool  # startingOffsetsByTimestampStrategy=latest


StartSpec = Earliest | Latest | SpecificOffsets | ByTimestamp
EndSpec = Latest | SpecificOffsets


@dataclass(frozen=True)
class SourceOptions:
    mode: Mode
    bootstrap_servers: str
    subscription: Subscription
    starting: StartSpec
    ending: EndSpec
    max_offsets_per_trigger: int | None
    min_offsets_per_trigger: int | None
    max_trigger_delay_ms: int
    min_partitions: int | None
    fail_on_data_loss: bool
    include_headers: bool
    poll_timeout_ms: int
    client_settings: Mapping[str, str] = field(default_factory=dict)  # kafka.* passthrough

    @property
    def isolation_level(self) -> str:
        """read_committed unless `kafka.isolation.level` says otherwise (module docstring)."""
        return self.client_settings.get("isolation.level", "read_committed")

    def consumer_settings(self) -> dict[str, str]:
        """The executors' consumer config: passthrough plus what exact-range reads need."""
        return {
            **self.client_settings,
            "bootstrap.servers": self.bootstrap_servers,
            "isolation.level": self.isolation_level,
            "enable.auto.commit": "false",
            "auto.offset.reset": "none",
        }

    def admin_settings(self) -> dict[str, str]:
        chosen = {k: v for k, v in self.client_settings.items() if k in ADMIN_PASSTHROUGH}
        return {**chosen, "bootstrap.servers": self.bootstrap_servers}


def required_bootstrap_servers(given: Mapping[str, str], error: type[ConfigError]) -> str:
    """`bootstrap.servers` (or `kafka.bootstrap.servers`) of lower-cased options, stripped;
    `error` when neither is given (read and write options share the rule)."""
    servers = given.get("bootstrap.servers") or given.get("kafka.bootstrap.servers")
    if not servers or not servers.strip():
        raise error("option 'bootstrap.servers' is required (host:port,...)")
    return servers.strip()


def parse_options(options: Mapping[str, str], mode: Mode) -> SourceOptions:
    """Checked read options (module docstring); raises SourceOptionError naming the option."""
    given = {str(k).lower(): str(v) for k, v in options.items()}
    passthrough = _passthrough(given)
    for key in given:
        if key not in KNOWN and not key.startswith("kafka."):
            raise SourceOptionError(
                f"unknown option {key!r} for format 'replog'; known options: "
                + ", ".join(sorted(KNOWN.values()))
                + ", and kafka.<client setting>"
            )
    servers = required_bootstrap_servers(given, SourceOptionError)
    ending: EndSpec = Latest()
    if "endingoffsets" in given:
        if mode is Mode.STREAMING:
            raise SourceOptionError("option 'endingOffsets' is not valid in streaming queries")
        ending = _ending(given["endingoffsets"])
    poll = given.get("polltimeoutms", given.get("kafkaconsumer.polltimeoutms"))
    max_offsets = _positive(given, "maxOffsetsPerTrigger")
    min_offsets = _positive(given, "minOffsetsPerTrigger")
    if min_offsets is not None and max_offsets is not None and min_offsets > max_offsets:
        raise SourceOptionError(
            f"option 'minOffsetsPerTrigger' ({min_offsets}) must not be above "
            f"'maxOffsetsPerTrigger' ({max_offsets})"
        )
    return SourceOptions(
        mode=mode,
        bootstrap_servers=servers,
        subscription=_subscription(given),
        starting=_starting(given, mode),
        ending=ending,
        max_offsets_per_trigger=max_offsets,
        min_offsets_per_trigger=min_offsets,
        max_trigger_delay_ms=_duration_ms(given, "maxTriggerDelay", DEFAULT_MAX_TRIGGER_DELAY_MS),
        min_partitions=_positive(given, "minPartitions"),
        fail_on_data_loss=_boolean(given, "failOnDataLoss", True),
        include_headers=_boolean(given, "includeHeaders", False),
        poll_timeout_ms=(
            DEFAULT_POLL_TIMEOUT_MS
            if poll is None
            else _integer_value("pollTimeoutMs", poll, minimum=1)
        ),
        client_settings=passthrough,
    )


# --- helpers ---------------------------------------------------------------------------------


def _passthrough(given: Mapping[str, str]) -> dict[str, str]:
    settings: dict[str, str] = {}
    for key, value in given.items():
        if not key.startswith("kafka.") or key == "kafka.bootstrap.servers":
            continue
        setting = key.removeprefix("kafka.")
        if setting in REFUSED_PASSTHROUGH:
            raise SourceOptionError(
                f"option 'kafka.{setting}' is not supported: {REFUSED_PASSTHROUGH[setting]}"
            )
        settings[setting] = value
    try:
        consumer_config({**settings, "bootstrap.servers": "checked.elsewhere:9092"})
    except ConfigError as exc:
        raise SourceOptionError(f"a kafka.* option is not a valid consumer setting: {exc}") from exc
    return settings


def _subscription(given: Mapping[str, str]) -> Subscription:
    chosen = [k for k in ("subscribe", "subscribepattern", "assign") if k in given]
    if len(chosen) != 1:
        named = ", ".join(KNOWN[k] for k in chosen) if chosen else "none"
        raise SourceOptionError(
            "exactly one of the options 'subscribe', 'subscribePattern' and 'assign' is "
            f"required; given: {named}"
        )
    (key,) = chosen
    raw = given[key]
    if key == "subscribe":
        topics = tuple(t.strip() for t in raw.split(","))
        if not topics or any(not t for t in topics):
            raise SourceOptionError(
                f"option 'subscribe' must be a comma-separated list of topic names, got {raw!r}"
            )
        return Subscribe(tuple(sorted(set(topics))))
    if key == "subscribepattern":
        if not raw.strip():
            raise SourceOptionError("option 'subscribePattern' must not be empty")
        try:
            re.compile(raw)
        except re.error as exc:
            raise SourceOptionError(
                f"option 'subscribePattern' is not a valid regex {raw!r}: {exc}"
            ) from exc
        return SubscribePattern(raw)
    decoded = _json("assign", raw)
    if not isinstance(decoded, dict) or not decoded:
        raise SourceOptionError(
            f"option 'assign' must be a JSON object like {{\"topic\": [0, 1]}}, got {raw!r}"
        )
    partitions: set[TopicPartitionKey] = set()
    for topic, indexes in decoded.items():
        if not isinstance(indexes, list) or not indexes:
            raise SourceOptionError(
                f"option 'assign': topic {topic!r} needs a non-empty list of partitions, "
                f"got {indexes!r}"
            )
        for index in indexes:
            if not isinstance(index, int) or isinstance(index, bool) or index < 0:
                raise SourceOptionError(
                    f"option 'assign': partition {index!r} of topic {topic!r} is not an int >= 0"
                )
            partitions.add((topic, index))
    return Assign(tuple(sorted(partitions)))


def _starting(given: Mapping[str, str], mode: Mode) -> StartSpec:
    strategy = given.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise SourceOptionError(
            "option 'startingOffsetsByTimestampStrategy' must be 'error' or 'latest', "
            f"got {given['startingoffsetsbytimestampstrategy']!r}"
        )
    if "startingtimestamp" in given:
        at = _integer_value("startingTimestamp", given["startingtimestamp"], minimum=0)
        return ByTimestamp("startingTimestamp", None, at, strategy == "latest")
    if "startingoffsetsbytimestamp" in given:
        per = _partition_map("startingOffsetsByTimestamp", given["startingoffsetsbytimestamp"])
        for (topic, partition), at in per.items():
            if at < 0:
                raise SourceOptionError(
                    f"option 'startingOffsetsByTimestamp': {topic}-{partition} has {at}, "
                    "not a timestamp in ms (>= 0)"
                )
        return ByTimestamp("startingOffsetsByTimestamp", per, None, strategy == "latest")
    default = "earliest" if mode is Mode.BATCH else "latest"
    raw = given.get("startingoffsets", default).strip()
    if raw.lower() == "earliest":
        return Earliest()
    if raw.lower() == "latest":
        if mode is Mode.BATCH:
            raise SourceOptionError(
                "option 'startingOffsets' cannot be 'latest' for batch queries "
                "(use 'earliest' or per-partition offsets)"
            )
        return Latest()
    offsets = _partition_map("startingOffsets", raw, keyword="'earliest', 'latest'")
    for (topic, partition), offset in offsets.items():
        if offset < EARLIEST or (offset == LATEST and mode is Mode.BATCH):
            allowed = ">= 0 or -2 (earliest)" if mode is Mode.BATCH else ">= 0, -2 or -1"
            raise SourceOptionError(
                f"option 'startingOffsets': {topic}-{partition} has {offset}; allowed: {allowed}"
            )
    return SpecificOffsets("startingOffsets", offsets)


def _ending(raw: str) -> EndSpec:
    raw = raw.strip()
    if raw.lower() == "latest":
        return Latest()
    if raw.lower() == "earliest":
        raise SourceOptionError("option 'endingOffsets' cannot be 'earliest' (use 'latest')")
    offsets = _partition_map("endingOffsets", raw, keyword="'latest'")
    for (topic, partition), offset in offsets.items():
        if offset < LATEST:
            raise SourceOptionError(
                f"option 'endingOffsets': {topic}-{partition} has {offset}; "
                "allowed: >= 0 or -1 (latest)"
            )
    return SpecificOffsets("endingOffsets", offsets)


def _json(option: str, raw: str) -> object:
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise SourceOptionError(f"option {option!r} is not valid JSON ({exc}): {raw!r}") from exc


def _partition_map(option: str, raw: str, keyword: str = "") -> dict[TopicPartitionKey, int]:
    """`{"topic": {"0": n}}` as {(topic, 0): n}."""
    shape = f'{keyword + " or " if keyword else ""}JSON like {{"topic": {{"0": 23}}}}'
    try:
        decoded = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise SourceOptionError(f"option {option!r} must be {shape}, got {raw!r}") from exc
    if not isinstance(decoded, dict) or not decoded:
        raise SourceOptionError(f"option {option!r} must be {shape}, got {raw!r}")
    found: dict[TopicPartitionKey, int] = {}
    for topic, partitions in decoded.items():
        if not isinstance(partitions, dict) or not partitions:
            raise SourceOptionError(
                f"option {option!r}: topic {topic!r} must map partitions to numbers, "
                f"got {partitions!r}"
            )
        for key, value in partitions.items():
            try:
                partition = int(key)
            except ValueError:
                partition = -1
            if partition < 0 or str(partition) != str(key).strip():
                raise SourceOptionError(
                    f"option {option!r}: {key!r} of topic {topic!r} is not a partition number"
                )
            if not isinstance(value, int) or isinstance(value, bool):
                raise SourceOptionError(
                    f"option {option!r}: {topic}-{partition} has {value!r}, not an integer"
                )
            found[(topic, partition)] = value
    return found


def _integer_value(option: str, raw: str, *, minimum: int) -> int:
    try:
        value = int(raw.strip())
    except ValueError:
        raise SourceOptionError(f"option {option!r} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise SourceOptionError(f"option {option!r} must be >= {minimum}, got {raw!r}")
    return value


def _positive(given: Mapping[str, str], option: str) -> int | None:
    raw = given.get(option.lower())
    return None if raw is None else _integer_value(option, raw, minimum=1)


def _duration_ms(given: Mapping[str, str], option: str, default: int) -> int:
    """A Spark time string (`_TIME_STRING`) in whole ms, as Spark's Kafka source reads it."""
    raw = given.get(option.lower())
    if raw is None:
        return default
    found = _TIME_STRING.fullmatch(raw.strip().lower())
    unit = "ms" if found is None or found.group(2) is None else found.group(2)
    if found is None or unit not in _TIME_UNITS_MS:
        raise SourceOptionError(
            f"option {option!r} must be a duration such as '15m', '30s' or '500ms' (units: "
            f"{', '.join(_TIME_UNITS_MS)}; a bare number is ms), got {raw!r}"
        )
    return int(int(found.group(1)) * _TIME_UNITS_MS[unit])


def _boolean(given: Mapping[str, str], option: str, default: bool) -> bool:
    raw = given.get(option.lower())
    if raw is None:
        return default
    if raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise SourceOptionError(f"option {option!r} must be 'true' or 'false', got {raw!r}")
