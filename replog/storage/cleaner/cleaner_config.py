"""The broker's log cleaner settings (Kafka's `CleanerConfig`), read from server.properties.

Rules:
- Kafka's names and defaults: `log.cleaner.enable` true, `log.cleaner.threads` 1,
  `log.cleaner.dedupe.buffer.size` 128 MiB (the key maps' memory, shared by the threads),
  `log.cleaner.io.max.bytes.per.second` Double.MAX_VALUE (no throttle),
  `log.cleaner.backoff.ms` 15000 (how long a thread sleeps when no log needs cleaning).
- replog's own: `log.cleaner.idle.max.wait.ms` 60000, how long a log may stay cleanable while
  its passes run at `SCHED_IDLE` before one runs at the cleaner's nice (`pass_priority`).
- Bounds: at least one thread, a buffer of at least one key-map entry per thread, a positive
  rate, a backoff and a wait of at least 0; anything else is a ConfigError naming the key.
- `log.cleaner.enable` is read at start-up only; the others are Kafka's
  `LogCleaner.ReconfigurableConfigs` (and replog's idle wait): a running cleaner takes them
  from the dynamic broker levels (`reconfigured`: this broker's, else the cluster default's,
  else server.properties).
  A value it cannot take keeps the one below (a warning says which); a set of values that
  disagree, or a thread count outside half to double of the running one (Kafka's
  `validateReconfiguration`), keeps the running threads and buffer.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from replog.config import parse_double, parse_integer
from replog.errors import ConfigError
from replog.storage.cleaner.offset_map import ENTRY_BYTES

MAX_DOUBLE = sys.float_info.max  # Java's Double.MAX_VALUE

# Kafka's broker property -> CleanerConfig field.
PROPERTY_NAMES = {
    "log.cleaner.enable": "enable",
    "log.cleaner.threads": "threads",
    "log.cleaner.dedupe.buffer.size": "dedupe_buffer_size",
    "log.cleaner.io.max.bytes.per.second": "io_max_bytes_per_second",
    "log.cleaner.backoff.ms": "backoff_ms",
    "log.cleaner.idle.max.wait.ms": "idle_max_wait_ms",
}


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    enable: bool = True
    threads: int = 1
    dedupe_buffer_size: int = 128 << 20
    io_max_bytes_per_second: float = MAX_DOUBLE
    backoff_ms: int = 15000
    idle_max_wait_ms: int = 60000

    def __post_init__(self) -> None:
        if self.threads < 1:
            raise ConfigError(f"log.cleaner.threads={self.threads}: must be at least 1")
        if self.dedupe_buffer_size < ENTRY_BYTES * self.threads:
            raise ConfigError(
                f"log.cleaner.dedupe.buffer.size={self.dedupe_buffer_size}: must hold one "
                f"{ENTRY_BYTES}-byte entry for each of the {self.threads} cleaner threads"
            )
        if not self.io_max_bytes_per_second > 0:
            raise ConfigError(
                f"log.cleaner.io.max.bytes.per.second={self.io_max_bytes_per_second}: "
                "must be a number above 0"
            )
        if self.backoff_ms < 0:
            raise ConfigError(f"log.cleaner.backoff.ms={self.backoff_ms}: must be at least 0")
        if self.idle_max_wait_ms < 0:
            raise ConfigError(
                f"log.cleaner.idle.max.wait.ms={self.idle_max_wait_ms}: must be at least 0"
            )

    @property
    def buffer_per_thread(self) -> int:
        """Each thread's share of the dedupe buffer, Kafka's `dedupeBufferSize / numThreads`."""
        return self.dedupe_buffer_size // self.threads

    @classmethod
    def from_properties(cls, properties: Mapping[str, object]) -> CleanerConfig:
        values: dict[str, object] = {}
        for key in PROPERTY_NAMES:
            raw = properties.get(key)
            if raw is not None:
                values.update(_parse(key, raw))
        return cls(**values)  # type: ignore[arg-type]


# The keys a running cleaner takes (Kafka's `LogCleaner.ReconfigurableConfigs` it has).
DYNAMIC_PROPERTIES = tuple(key for key in PROPERTY_NAMES if key != "log.cleaner.enable")


def reconfigured(
    running: CleanerConfig,
    static: CleanerConfig,
    levels: Sequence[Mapping[str, str]],
    *,
    starting: bool = False,
) -> tuple[CleanerConfig, list[str]]:
    """The config a `running` cleaner takes from the dynamic broker `levels` (weakest first)
    over `static` (server.properties), and a warning for each value it did not take (module
    Rules). `enable` stays the running one's. `starting`: its threads have not started, and
    take any number (Kafka's broker reads its dynamic configs before it starts its cleaner)."""
    values: dict[str, object] = {}
    refused: list[str] = []
    for key in DYNAMIC_PROPERTIES:
        for level in reversed(levels):
            if key not in level:
                continue
            try:
                parsed = _parse(key, level[key])
                CleanerConfig(**parsed)  # type: ignore[arg-type]  # its bounds, alone
            except ConfigError as error:
                refused.append(f"{error}; ignored, the level below stands")
                continue
            values.update(parsed)
            break
    try:
        wanted = replace(static, enable=running.enable, **values)  # type: ignore[arg-type]
    except ConfigError as error:  # the values disagree (a buffer too small for the threads)
        refused.append(f"{error}; the cleaner keeps its threads and dedupe buffer")
        values = {k: v for k, v in values.items() if k not in ("threads", "dedupe_buffer_size")}
        wanted = replace(
            static,
            enable=running.enable,
            threads=running.threads,
            dedupe_buffer_size=running.dedupe_buffer_size,
            **values,  # type: ignore[arg-type]
        )
    current = running.threads
    if not starting and not current // 2 <= wanted.threads <= current * 2:
        refused.append(
            f"log.cleaner.threads={wanted.threads}: the number of cleaner threads changes to no "
            f"less than half and no more than double the running {current}; it stays {current}"
        )
        wanted = replace(wanted, threads=current, dedupe_buffer_size=running.dedupe_buffer_size)
    return wanted, refused


def _parse(key: str, raw: object) -> dict[str, object]:
    """{field: value} of server.properties key `key` set to `raw`; a ConfigError naming it."""
    field_name = PROPERTY_NAMES[key]
    text = str(raw).strip()
    try:
        if field_name == "enable":
            if text.lower() not in ("true", "false"):
                raise ValueError("expected true or false")
            return {field_name: text.lower() == "true"}
        if field_name == "io_max_bytes_per_second":
            return {field_name: parse_double(text)}
        return {field_name: parse_integer(text)}
    except ValueError as reason:
        raise ConfigError(f"{key}={raw!r}: {reason}") from None
