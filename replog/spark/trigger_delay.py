"""`minOffsetsPerTrigger` with `maxTriggerDelay`: whether a micro-batch may start now, pure.

Spark's Kafka source rule, which this keeps:
- A micro-batch waits until at least `minOffsetsPerTrigger` new offsets (summed over every
  partition, between the start and the high watermarks) are available: until then the source
  answers its start as the latest offset, so Spark plans no micro-batch and asks again at the
  next trigger.
- Once `maxTriggerDelay` has passed since the last micro-batch the gate let through (or since
  the query started: the first ask after a start always passes), the next one starts whatever
  is available (nothing at all still makes no micro-batch, as Spark skips empty ones).
- A micro-batch that passes restarts the delay; `maxOffsetsPerTrigger` then still limits it.

Rules: no I/O and no clock of its own: the caller passes the time (ms, monotonic), so tests
drive it. The delay is the driver reader's state: a restarted query starts it afresh, as
Spark's Kafka source does.
"""

from __future__ import annotations

from collections.abc import Mapping

from replog.common import TopicPartitionKey


class TriggerDelay:
    """The gate of one query (module docstring)."""

    def __init__(self, min_offsets: int, max_delay_ms: int) -> None:
        self.min_offsets = min_offsets
        self.max_delay_ms = max_delay_ms
        self._last_ms: int | None = None  # when the last micro-batch passed; None: none yet

    def admits(
        self,
        start: Mapping[TopicPartitionKey, int],
        latest: Mapping[TopicPartitionKey, int],
        now_ms: int,
    ) -> bool:
        """Whether a micro-batch from `start` may end at `latest` now (module docstring)."""
        if self._last_ms is None or now_ms - self._last_ms >= self.max_delay_ms:
            self._last_ms = now_ms
            return True
        # A partition new since `start` counts from 0; one whose HW moved back adds nothing.
        available = sum(max(0, hw - start.get(tp, 0)) for tp, hw in latest.items())
        if available < self.min_offsets:
            return False
        self._last_ms = now_ms
        return True
