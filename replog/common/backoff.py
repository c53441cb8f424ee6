"""Kafka's retry backoff without jitter: `retry.backoff.ms` doubling per failure up to
`retry.backoff.max.ms`. Pure."""

from __future__ import annotations

MAX_DOUBLINGS = 10  # past 1024x the base the cap has long applied


def doubling_backoff_ms(failures: int, base_ms: int, max_ms: int) -> int:
    """The wait after the `failures`-th failure in a row (1: the first): `base_ms`, doubled
    for each failure after the first, never above `max_ms`."""
    return int(min(max_ms, base_ms * 2 ** min(max(failures - 1, 0), MAX_DOUBLINGS)))
