"""The broker's log cleaner settings (Kafka's `CleanerConfig`), read from server.properties.

Rules:
- Kafka's names and defaults: `log.cleaner.enable` true, `log.cleaner.threads` 1,
  `log.cleaner.dedupe.buffer.size` 128 MiB (the key maps' memory, shared by the threads),
  `log.cleaner.io.max.bytes.per.second` Double.MAX_VALUE (no throttle),
  `log.cleaner.backoff.ms` 15000 (how long a thread sleeps when no log needs cleaning).
- Bounds: at least one thread, a buffer of at least one key-map entry per thread, a positive
  rate, a backoff of at least 0; anything else is a ConfigError naming the key.
- Read at start-up only (read-only here; Kafka lets an alter change the threads, the buffer
  and the rate of a running cleaner).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass

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
}


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    enable: bool = True
    threads: int = 1
    dedupe_buffer_size: int = 128 << 20
    io_max_bytes_per_second: float = MAX_DOUBLE
    backoff_ms: int = 15000

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

    @property
    def buffer_per_thread(self) -> int:
        """Each thread's share of the dedupe buffer, Kafka's `dedupeBufferSize / numThreads`."""
        return self.dedupe_buffer_size // self.threads

    @classmethod
    def from_properties(cls, properties: Mapping[str, object]) -> CleanerConfig:
        values: dict[str, object] = {}
        for key, field_name in PROPERTY_NAMES.items():
            raw = properties.get(key)
            if raw is None:
                continue
            text = str(raw).strip()
            try:
                if field_name == "enable":
                    if text.lower() not in ("true", "false"):
                        raise ValueError("expected true or false")
                    values[field_name] = text.lower() == "true"
                elif field_name == "io_max_bytes_per_second":
                    values[field_name] = parse_double(text)
                else:
                    values[field_name] = parse_integer(text)
            except ValueError as reason:
                raise ConfigError(f"{key}={raw!r}: {reason}") from None
        return cls(**values)  # type: ignore[arg-type]
