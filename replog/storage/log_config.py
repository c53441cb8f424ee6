"""Per-log configuration with Kafka's names and defaults, and the one place dotted names map.

Rules:
- Every field has Kafka's default (reference digest §9) unless replog adds the setting itself,
  in which case the docstring says so.
- Dotted names are accepted in both forms Kafka has: the topic-level name (`segment.bytes`) and
  the broker-level default (`log.segment.bytes`). `LogConfig.from_properties` is the only code
  that knows them; everything else uses attribute names.
- Invalid values raise `ConfigError` naming the key, the value and what is accepted.

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

from replog.errors import ConfigError

LONG_MAX = 9223372036854775807


# The smallest sizes a log works with: a segment must hold one batch header (61 bytes), an
# index a few entries (4 of the time index's 12 bytes). Kafka accepts 14 and 4; the controller
# refuses what a broker could not use (quorum/controller/config_definitions.py).
MIN_SEGMENT_BYTES = 64
MIN_SEGMENT_INDEX_BYTES = 12 * 4


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

    def __post_init__(self) -> None:
        _check_at_least("segment.bytes", self.segment_bytes, MIN_SEGMENT_BYTES)
        _check_at_least("segment.ms", self.segment_ms, 1)
        _check_at_least("segment.jitter.ms", self.segment_jitter_ms, 0)
        _check_at_least("segment.index.bytes", self.segment_index_bytes, MIN_SEGMENT_INDEX_BYTES)
        _check_at_least("index.interval.bytes", self.index_interval_bytes, 0)
        _check_at_least("max.message.bytes", self.max_message_bytes, 0)
        _check_at_least("retention.ms", self.retention_ms, -1)
        _check_at_least("retention.bytes", self.retention_bytes, -1)
        _check_at_least("flush.messages", self.flush_interval_messages, 1)
        _check_at_least("flush.ms", self.flush_interval_ms, 0)
        _check_at_least("log.page.cache.tail.bytes", self.page_cache_tail_bytes, -1)
        if self.message_timestamp_type not in ("CreateTime", "LogAppendTime"):
            raise ConfigError(
                f"message.timestamp.type={self.message_timestamp_type!r}: "
                "accepted values are CreateTime and LogAppendTime"
            )
        policies = set(self.cleanup_policy.split(","))
        if not policies or not policies <= {"delete", "compact"}:
            raise ConfigError(
                f"cleanup.policy={self.cleanup_policy!r}: accepted values are delete, compact"
            )

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def deletes_by_retention(self) -> bool:
        return "delete" in self.cleanup_policy.split(",")

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

        Unknown keys that look like log settings raise; keys of other subsystems are ignored so
        a whole broker properties file can be passed.
        """
        changes: dict[str, Any] = {}
        for key, raw in properties.items():
            entry = BY_DOTTED_NAME.get(key)
            if entry is None:
                continue
            field, parse = entry
            try:
                changes[field] = parse(raw)
            except (TypeError, ValueError) as exc:
                raise ConfigError(f"{key}={raw!r}: {exc}") from None
        return dataclasses.replace(base or cls(), **changes)


def _check_at_least(name: str, value: int, minimum: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ConfigError(f"{name}={value!r}: must be an integer >= {minimum}")


def _parse_int(raw: Any) -> int:
    if isinstance(raw, bool):
        raise ValueError("expected an integer, got a boolean")
    return int(raw)


def _parse_bool(raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise ValueError("expected true or false")


def _parse_str(raw: Any) -> str:
    return str(raw).strip()


def _hours_to_ms(raw: Any) -> int:
    return _parse_int(raw) * 3_600_000


def _minutes_to_ms(raw: Any) -> int:
    return _parse_int(raw) * 60_000


# (field, parser) for each accepted dotted name: topic level first, then broker level.
BY_DOTTED_NAME: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "segment.bytes": ("segment_bytes", _parse_int),
    "log.segment.bytes": ("segment_bytes", _parse_int),
    "segment.ms": ("segment_ms", _parse_int),
    "log.roll.ms": ("segment_ms", _parse_int),
    "log.roll.hours": ("segment_ms", _hours_to_ms),
    "segment.jitter.ms": ("segment_jitter_ms", _parse_int),
    "log.roll.jitter.ms": ("segment_jitter_ms", _parse_int),
    "segment.index.bytes": ("segment_index_bytes", _parse_int),
    "log.index.size.max.bytes": ("segment_index_bytes", _parse_int),
    "index.interval.bytes": ("index_interval_bytes", _parse_int),
    "log.index.interval.bytes": ("index_interval_bytes", _parse_int),
    "max.message.bytes": ("max_message_bytes", _parse_int),
    "message.max.bytes": ("max_message_bytes", _parse_int),
    "retention.ms": ("retention_ms", _parse_int),
    "log.retention.ms": ("retention_ms", _parse_int),
    "log.retention.minutes": ("retention_ms", _minutes_to_ms),
    "log.retention.hours": ("retention_ms", _hours_to_ms),
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
    "cleanup.policy": ("cleanup_policy", _parse_str),
    "log.cleanup.policy": ("cleanup_policy", _parse_str),
    # replog's own setting, broker level only (server.properties): there is no topic-level name.
    "log.page.cache.tail.bytes": ("page_cache_tail_bytes", _parse_int),
}
