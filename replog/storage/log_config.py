"""Per-log configuration with Kafka's names and defaults, and the one place dotted names map.

Rules:
- Every field has Kafka's default (docs/design/storage.md#flush-and-defaults) unless replog adds the
  setting itself, in which case the docstring says so.
- Dotted names are accepted in both forms Kafka has: the topic-level name (`segment.bytes`) and
  the broker-level default (`log.segment.bytes`). `LogConfig.from_properties` is the only code
  that knows them; everything else uses attribute names.
- Invalid values raise `ConfigError` naming the key as the caller wrote it, the value and what
  is accepted. Values are read as Kafka reads them (`replog.config.parse_integer`; int32 for
  Kafka's int settings), and every value the controller accepts for a topic key is accepted
  here too (`quorum/controller/config_definitions.py`; tests/storage/test_log_config.py): a
  topic config the brokers refused would leave them on their defaults for it.
- `cleanup.policy` is a list: items trimmed (`compact, delete`), stored as `compact,delete`;
  an empty list is valid and means neither delete nor compact (nothing is deleted by retention,
  and DeleteRecords, which needs the delete policy, is POLICY_VIOLATION). Only segments below
  the log start offset go.
- `retention.bytes`: any negative value means no size limit (Kafka has no lower bound).
- Broker-level retention times (`log.retention.ms`, `.minutes`, `.hours`): any negative value
  means keep forever, -1, as Kafka's broker reads them; the topic-level `retention.ms` must be
  at least -1.

Flush modes, and what each promises on power loss (a process crash alone never loses an
append that returned: the bytes are in the kernel's page cache once `write` returns):
- default (`flush.messages` and `flush.ms` unset): Kafka's choice. Data reaches the disk on
  segment roll, on clean shutdown, or when the OS writes it back. A power loss can lose any
  suffix of appends that were not yet flushed; durability comes from replication.
- `flush.messages=N` / `flush.ms=T`: the log fsyncs once N messages or T ms have accumulated
  since the last flush; a power loss loses at most that window.
- `flush.each.append=true` (replog's own setting): every append is fdatasync'ed before it
  returns, so every acknowledged append survives a power loss. Costs one disk sync per append.

Page cache (`log.page.cache.tail.bytes`, replog's own broker setting, default 64 MiB): how
many of the newest bytes of a log's active segment stay in the OS page cache. Older bytes, once
their writeback has started, are dropped from the cache (never from the disk), and a rolled
segment drops all of its cache once synced; reads of them then come from the disk. -1 leaves
the cache to the kernel, as Kafka does. Why: docs/storage.md, "Page-cache tail".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from replog.config import parse_double, parse_integer
from replog.errors import ConfigError
from replog.record.varint import INT32_MAX, INT64_MAX, INT64_MIN

# Kafka's int settings are Java ints, its long ones Java longs.
LONG_MIN, LONG_MAX = INT64_MIN, INT64_MAX


# The smallest sizes a log works with: a segment must hold one batch header (61 bytes), an
# index a few entries (4 of the time index's 12 bytes). Kafka accepts 14 and 4; the controller
# refuses what a broker could not use (quorum/controller/config_definitions.py).
MIN_SEGMENT_BYTES = 64
MIN_SEGMENT_INDEX_BYTES = 12 * 4
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
CLEANUP_POLICIES = ("compact", "delete")

# Integer field -> (its name in messages, minimum, maximum): Kafka's ranges, the controller's
# for every topic key.
INTEGER_RANGES: dict[str, tuple[str, int, int]] = {
    "segment_bytes": ("segment.bytes", MIN_SEGMENT_BYTES, INT32_MAX),
    "segment_ms": ("segment.ms", 1, LONG_MAX),
    "segment_jitter_ms": ("segment.jitter.ms", 0, LONG_MAX),
    "segment_index_bytes": ("segment.index.bytes", MIN_SEGMENT_INDEX_BYTES, INT32_MAX),
    "index_interval_bytes": ("index.interval.bytes", 0, INT32_MAX),
    "max_message_bytes": ("max.message.bytes", 0, INT32_MAX),
    "retention_ms": ("retention.ms", -1, LONG_MAX),
    "retention_bytes": ("retention.bytes", LONG_MIN, LONG_MAX),  # negative: no limit
    "flush_interval_messages": ("flush.messages", 1, LONG_MAX),
    "flush_interval_ms": ("flush.ms", 0, LONG_MAX),
    "page_cache_tail_bytes": ("log.page.cache.tail.bytes", -1, LONG_MAX),
    "min_compaction_lag_ms": ("min.compaction.lag.ms", 0, LONG_MAX),
    "max_compaction_lag_ms": ("max.compaction.lag.ms", 1, LONG_MAX),
    "delete_retention_ms": ("delete.retention.ms", 0, LONG_MAX),
}
# Ratio field -> (its name in messages, minimum, maximum): Kafka's `between(0, 1)`.
RATIO_RANGES: dict[str, tuple[str, float, float]] = {
    "min_cleanable_dirty_ratio": ("min.cleanable.dirty.ratio", 0.0, 1.0),
}


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10485760
    index_interval_bytes: int = 4096
    max_message_bytes: int = 1048588
    retention_ms: int = 604800000
    retention_bytes: int = -1
    flush_interval_messages: int = LONG_MAX
    flush_interval_ms: int = LONG_MAX
    flush_each_append: bool = False
    message_timestamp_type: str = "CreateTime"
    cleanup_policy: str = "delete"
    page_cache_tail_bytes: int = 64 << 20
    # The log cleaner's, for logs whose policy has compact (replog/storage/cleaner/).
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    delete_retention_ms: int = 86400000

    def __post_init__(self) -> None:
        for field_name, (name, _, _) in INTEGER_RANGES.items():
            _check(name, field_name, getattr(self, field_name))
        for field_name, (name, _, _) in RATIO_RANGES.items():
            _check(name, field_name, getattr(self, field_name))
        _check("message.timestamp.type", "message_timestamp_type", self.message_timestamp_type)
        _check("cleanup.policy", "cleanup_policy", self.cleanup_policy)

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    # The policy was checked at construction: its only words are delete and compact, so a
    # substring test is the item test, with no split on each append.
    @property
    def deletes_by_retention(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def compacts(self) -> bool:
        """Whether the policy has `compact`: the log cleaner may leave gaps between offsets."""
        return "compact" in self.cleanup_policy

    @property
    def offset_index_entries_max(self) -> int:
        return self.segment_index_bytes // 8

    @property
    def time_index_entries_max(self) -> int:
        return self.segment_index_bytes // 12

    @classmethod
    def from_properties(
        cls, properties: Mapping[str, Any], base: LogConfig | None = None
    ) -> LogConfig:
        """Build a config from Kafka-style dotted names (topic or broker level).

        Keys of other subsystems are ignored so a whole broker properties file can be passed.
        A bad value is a ConfigError naming the key as given (`with_each_valid` keeps the
        good ones instead).
        """
        changes: dict[str, Any] = {}
        for key, raw in properties.items():
            entry = BY_DOTTED_NAME.get(key)
            if entry is not None:
                changes[entry[0]] = parse_setting(key, raw)
        return dataclasses.replace(base or cls(), **changes)

    def with_each_valid(self, properties: Mapping[str, Any]) -> tuple[LogConfig, list[ConfigError]]:
        """This config with every valid log setting of `properties` (stored configs, from the
        metadata: a legacy integer spelling is read, `_legacy_spelling`), and the error of each
        invalid one, which keeps this config's value: a topic whose one bad key cost it every
        other setting (its retention, its size limit) would lose data it was set to keep."""
        changes: dict[str, Any] = {}
        refused = []
        for key, raw in properties.items():
            entry = BY_DOTTED_NAME.get(key)
            if entry is None:
                continue
            try:
                changes[entry[0]] = parse_setting(key, _legacy_spelling(raw))
            except ConfigError as error:
                refused.append(error)
        if not changes:  # no setting at this level (most topics): nothing to copy or check
            return self, refused
        return dataclasses.replace(self, **changes), refused


def parse_setting(key: str, raw: Any) -> Any:
    """The checked field value of dotted `key` (a name of `BY_DOTTED_NAME`) set to `raw`; a
    ConfigError naming the key otherwise."""
    field_name, parse = BY_DOTTED_NAME[key]
    try:
        value = parse(raw)
        _check_value(field_name, value)
    except (TypeError, ValueError) as reason:
        raise ConfigError(f"{key}={raw!r}: {reason}") from None
    return value


def _check(name: str, field_name: str, value: Any) -> None:
    try:
        _check_value(field_name, value)
    except ValueError as reason:
        raise ConfigError(f"{name}={value!r}: {reason}") from None


def _check_value(field_name: str, value: Any) -> None:
    """`ValueError` saying what is accepted unless `value` is valid for the field."""
    if field_name in INTEGER_RANGES:
        _, minimum, maximum = INTEGER_RANGES[field_name]
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            bound = "" if minimum == LONG_MIN else f" >= {minimum}"
            raise ValueError(f"must be an integer{bound}")
        if value > maximum:
            raise ValueError(f"must be at most {maximum}")
    elif field_name in RATIO_RANGES:
        _, low, high = RATIO_RANGES[field_name]
        if not isinstance(value, float) or not low <= value <= high:
            raise ValueError(f"must be a number between {low} and {high}")
    elif field_name == "message_timestamp_type":
        if value not in TIMESTAMP_TYPES:
            raise ValueError("accepted values are CreateTime and LogAppendTime")
    elif field_name == "cleanup_policy":
        _policy_items(value)


def _policy_items(policy: str) -> tuple[str, ...]:
    """The items of a `cleanup.policy` list (none for an empty one); `ValueError` for an item
    that is neither delete nor compact."""
    items = tuple(item.strip() for item in policy.split(",")) if policy.strip() else ()
    for item in items:
        if item not in CLEANUP_POLICIES:
            raise ValueError(
                "accepted values are a comma list of delete and compact, or empty (neither)"
            )
    return items


def _parse_int(raw: Any) -> int:
    if isinstance(raw, bool):
        raise ValueError("expected an integer, got a boolean")
    if isinstance(raw, int):
        return raw
    return parse_integer(str(raw))


def _legacy_spelling(raw: Any) -> Any:
    """`raw`, or the canonical spelling of an integer Python reads and Kafka does not
    (`2_592_000_000`): the controller refuses such values now but accepted them before, so a
    stored topic config may hold one, and it must keep its value rather than fall back to the
    broker default (which would delete data early). For stored configs only
    (`with_each_valid`); server.properties is read strictly."""
    if not isinstance(raw, str):
        return raw
    try:
        parse_integer(raw)
        return raw
    except ValueError:
        pass
    try:
        return str(int(raw.strip()))
    except ValueError:
        return raw


def _parse_bool(raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise ValueError("expected true or false")


def _parse_double(raw: Any) -> float:
    """A Java double as Kafka's `ConfigDef` reads one (`replog.config.parse_double`)."""
    if isinstance(raw, bool):
        raise ValueError("expected a number, got a boolean")
    if isinstance(raw, int | float):
        return parse_double(repr(float(raw)))
    return parse_double(str(raw))


def _parse_str(raw: Any) -> str:
    return str(raw).strip()


def _parse_policy(raw: Any) -> str:
    return ",".join(_policy_items(str(raw)))


def _keep_forever_if_negative(ms: int) -> int:
    # Kafka's broker turns any negative retention time into -1 (keep forever), so
    # `log.retention.hours=-1` is not -3600000 refused.
    return -1 if ms < 0 else ms


def _broker_retention_ms(raw: Any) -> int:
    return _keep_forever_if_negative(_parse_int(raw))


def _retention_minutes(raw: Any) -> int:
    return _keep_forever_if_negative(_parse_int(raw) * 60_000)


def _retention_hours(raw: Any) -> int:
    return _keep_forever_if_negative(_parse_int(raw) * 3_600_000)


def _roll_hours(raw: Any) -> int:
    hours = _parse_int(raw)
    if hours < 1:  # Kafka's bound on log.roll.hours
        raise ValueError("must be an integer >= 1")
    return hours * 3_600_000


# (field, parser) for each accepted dotted name: topic level first, then broker level.
BY_DOTTED_NAME: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "segment.bytes": ("segment_bytes", _parse_int),
    "log.segment.bytes": ("segment_bytes", _parse_int),
    "segment.ms": ("segment_ms", _parse_int),
    "log.roll.ms": ("segment_ms", _parse_int),
    "log.roll.hours": ("segment_ms", _roll_hours),
    "segment.jitter.ms": ("segment_jitter_ms", _parse_int),
    "log.roll.jitter.ms": ("segment_jitter_ms", _parse_int),
    "segment.index.bytes": ("segment_index_bytes", _parse_int),
    "log.index.size.max.bytes": ("segment_index_bytes", _parse_int),
    "index.interval.bytes": ("index_interval_bytes", _parse_int),
    "log.index.interval.bytes": ("index_interval_bytes", _parse_int),
    "max.message.bytes": ("max_message_bytes", _parse_int),
    "message.max.bytes": ("max_message_bytes", _parse_int),
    "retention.ms": ("retention_ms", _parse_int),
    "log.retention.ms": ("retention_ms", _broker_retention_ms),
    "log.retention.minutes": ("retention_ms", _retention_minutes),
    "log.retention.hours": ("retention_ms", _retention_hours),
    "retention.bytes": ("retention_bytes", _parse_int),
    "log.retention.bytes": ("retention_bytes", _parse_int),
    "flush.messages": ("flush_interval_messages", _parse_int),
    "log.flush.interval.messages": ("flush_interval_messages", _parse_int),
    "flush.ms": ("flush_interval_ms", _parse_int),
    "log.flush.interval.ms": ("flush_interval_ms", _parse_int),
    "flush.each.append": ("flush_each_append", _parse_bool),
    "log.flush.each.append": ("flush_each_append", _parse_bool),
    "message.timestamp.type": ("message_timestamp_type", _parse_str),
    "log.message.timestamp.type": ("message_timestamp_type", _parse_str),
    "cleanup.policy": ("cleanup_policy", _parse_policy),
    "log.cleanup.policy": ("cleanup_policy", _parse_policy),
    "min.cleanable.dirty.ratio": ("min_cleanable_dirty_ratio", _parse_double),
    "log.cleaner.min.cleanable.ratio": ("min_cleanable_dirty_ratio", _parse_double),
    "min.compaction.lag.ms": ("min_compaction_lag_ms", _parse_int),
    "log.cleaner.min.compaction.lag.ms": ("min_compaction_lag_ms", _parse_int),
    "max.compaction.lag.ms": ("max_compaction_lag_ms", _parse_int),
    "log.cleaner.max.compaction.lag.ms": ("max_compaction_lag_ms", _parse_int),
    "delete.retention.ms": ("delete_retention_ms", _parse_int),
    "log.cleaner.delete.retention.ms": ("delete_retention_ms", _parse_int),
    # replog's own setting, broker level only (server.properties): there is no topic-level name.
    "log.page.cache.tail.bytes": ("page_cache_tail_bytes", _parse_int),
}
