"""A segment's roll jitter (Kafka's `segment.jitter.ms`): the one random choice a log makes on
its append path.

Rules: drawn from the caller's `random.Random` when it has one (a log manager's, seeded by a
simulation), so that logs seeded alike roll alike; from the `random` module otherwise.
"""

from __future__ import annotations

import random

from replog.storage.log_config import LogConfig


def random_roll_jitter(config: LogConfig, rng: random.Random | None) -> int:
    """Kafka's `randomSegmentJitter`: 0 without `segment.jitter.ms`, else uniform in
    [0, min(segment.jitter.ms, segment.ms)). A time-based roll waits `segment.ms` minus this,
    so partitions created together do not all roll at the same moment."""
    if config.segment_jitter_ms <= 0:
        return 0
    draw = random.randrange if rng is None else rng.randrange
    return draw(min(config.segment_jitter_ms, config.segment_ms))
