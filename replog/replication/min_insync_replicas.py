"""Which min.insync.replicas a topic's partitions use: Kafka's config precedence.

Rules:
- The levels, strongest first: the topic's config, this broker's dynamic config, the dynamic
  cluster default (the broker resource named ""), then server.properties. The first level
  that sets the key gives the value; a level whose value is not an integer is refused (the
  caller warns, naming it) and the next level gives it instead.
- A value below 1 counts as 1: the acks=all gate is never off.
"""

from __future__ import annotations

from collections.abc import Iterable


def min_insync_replicas(
    levels: Iterable[tuple[object, str | None]], default: int
) -> tuple[int, list[tuple[object, str]]]:
    """(the value, the refused (level, raw value) pairs) for `levels`, (level, raw value or
    None when that level does not set the key) strongest first, over `default`."""
    refused: list[tuple[object, str]] = []
    for level, raw in levels:
        if raw is None:
            continue
        try:
            return max(1, int(raw)), refused
        except ValueError:
            refused.append((level, raw))
    return default, refused
