"""The priority of a cleaning pass in a child process: `IDLE` (`SCHED_IDLE`, the CPU no one
else wants) by default, `URGENT` (the cleaner's nice value) once its log has waited or grown
too long, so that a busy cleaner costs the event loop nothing while a machine whose cores are
never free still cleans every log (aging, as schedulers avoid starvation).

Rules:
- A log is cleanable from the first choice round that finds it qualifying
  (`LogToClean.qualifies`) until a pass over it ends (not abandoned, not aborted); a round that
  finds it not qualifying forgets it (`CleanableSince`).
- A pass is `URGENT` when its log is past `max.compaction.lag.ms` (Kafka's promise), when it
  has been cleanable for `log.cleaner.idle.max.wait.ms` (replog's own) or longer, or when its
  dirty bytes are at least twice its clean bytes and at least twice the bytes that qualify it
  (a dirty ratio >= max(2/3, 2m / (1 + m)) for a minimum m, with clean bytes > 0: the log has
  grown to 3x its cleaned size, 1.5x what Kafka's default ratio of 0.5 lets it reach); else
  `IDLE`. A never-cleaned log has no clean size to grow past: the wait bounds it.
- An `IDLE` pass is promoted at `promotion_ms`: when its log has been cleanable for the wait,
  or passes `max.compaction.lag.ms`, whichever comes first; or once the log's bytes (all its
  segments, the active one too) reach `promotion_bytes`, the size at which its clean bytes
  would make a choice's pass `URGENT` (none for a never-cleaned log): a log that grows while
  an idle pass starves is not left to grow for the whole wait.
- Pure: the candidate, the times and the wait in, the priority out.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable
from typing import Generic, TypeVar

from replog.storage.cleaner.cleanable import LogToClean

IDLE = "idle"
URGENT = "urgent"

K = TypeVar("K", bound=Hashable)


def urgent_dirty_ratio(min_cleanable_dirty_ratio: float) -> float:
    """The dirty ratio from which a log's pass is `URGENT` (module Rules)."""
    m = min(max(min_cleanable_dirty_ratio, 0.0), 1.0)
    return max(2 / 3, 2 * m / (1 + m))


def grown_too_far(candidate: LogToClean) -> bool:
    """Whether its dirty bytes make its pass `URGENT` (module Rules)."""
    return candidate.clean_bytes > 0 and candidate.dirty_ratio >= urgent_dirty_ratio(
        candidate.log.min_cleanable_dirty_ratio
    )


def promotion_ms(candidate: LogToClean, cleanable_since_ms: int, idle_max_wait_ms: int) -> int:
    """The first time at which an `IDLE` pass over `candidate` is `URGENT` (module Rules): the
    log is past `max.compaction.lag.ms` from 1 ms after it is due."""
    return min(cleanable_since_ms + idle_max_wait_ms, candidate.compaction_due_ms + 1)


def promotion_bytes(candidate: LogToClean) -> int | None:
    """The log's size from which an `IDLE` pass over `candidate` is `URGENT` (module Rules);
    None: never by its size."""
    urgent = urgent_dirty_ratio(candidate.log.min_cleanable_dirty_ratio)
    if candidate.clean_bytes <= 0 or urgent >= 1.0:
        return None
    # clean / (1 - urgent), rounded first: a float's last bit is not a byte.
    return math.ceil(round(candidate.clean_bytes / (1 - urgent), 6))


def pass_priority(
    candidate: LogToClean, cleanable_since_ms: int, now_ms: int, idle_max_wait_ms: int
) -> str:
    """`URGENT` or `IDLE` for a pass over `candidate` starting at `now_ms` (module Rules)."""
    if candidate.needs_compaction_now or grown_too_far(candidate):
        return URGENT
    if now_ms >= promotion_ms(candidate, cleanable_since_ms, idle_max_wait_ms):
        return URGENT
    return IDLE


class CleanableSince(Generic[K]):
    """Since when each log has been cleanable (module Rules); not thread-safe."""

    def __init__(self) -> None:
        self._since: dict[K, int] = {}

    def observe(self, measured: Iterable[tuple[K, bool]], now_ms: int) -> None:
        """A choice round measured these logs: (log, whether it qualifies)."""
        for key, qualifies in measured:
            if qualifies:
                self._since.setdefault(key, now_ms)
            else:
                self._since.pop(key, None)

    def cleaned(self, key: K) -> None:
        """A pass over `key` ended (not abandoned, not aborted), or the log is gone."""
        self._since.pop(key, None)

    def since(self, key: K, now_ms: int) -> int:
        """Since when `key` has been cleanable (`now_ms` if no round saw it qualify)."""
        return self._since.get(key, now_ms)
