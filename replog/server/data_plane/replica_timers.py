"""The replica manager's periodic work, in `tick(now_ms)`.

Rules (docs/design/replication.md#isr-shrink; Kafka's `ReplicaManager.maybeShrinkIsr` and
`ProducerStateManager.removeExpiredProducers`):
- The ISR shrink check every `replica.lag.time.max.ms / 2` (each leader's core steps
  `TimerFired` with `check_isr`), producer-id expiry every
  `producer.id.expiration.check.interval.ms` against the wall clock, AlterPartition retries the
  cores scheduled, purgatory expiry, follower back-offs.
- A walk over every replica visits `SWEEP_SLICE` of them a tick, and asks to run again at once
  until done; one INFO line per walk for its shrinks.
- `start()` schedules `tick` from `next_tick_ms()`; tests call it by hand with a fake clock.
"""

from __future__ import annotations

import logging

from replog.common import TopicPartitionKey
from replog.replication.partition_effects import SendAlterPartition
from replog.replication.partition_events import TimerFired
from replog.server.data_plane.log_summaries import few_names
from replog.server.data_plane.replica_fetcher import wait_for_wakeup
from replog.server.data_plane.replica_shell import ReplicaShell

log = logging.getLogger("replog.server.data_plane.replica_manager")  # every role's lines

# Replicas one tick visits in a periodic walk over all of them (the ISR shrink check every
# replica.lag.time.max.ms / 2, producer-id expiry): 100,000 replicas in one tick held the loop
# 50-65 ms for the ISR check alone; a slice of 2,000 is 1-2 ms, and a walk of 100,000 ends
# within a second of loop turns, against a lag bound of 30 s.
SWEEP_SLICE = 2_000


class ReplicaTimers(ReplicaShell):
    """The periodic work (module docstring)."""

    def tick(self, now_ms: int) -> None:
        """ISR shrink every lag/2, producer-id expiry, AlterPartition retries, purgatory expiry,
        follower back-offs."""
        if now_ms >= self._next_isr_check_ms and self._isr_sweep is None:
            self._next_isr_check_ms = now_ms + self._isr_check_interval_ms
            self._isr_sweep = list(self._partitions)
        if self._isr_sweep is not None:
            self._isr_sweep = self._check_isrs(_slice(self._isr_sweep), now_ms)
        if now_ms >= self._next_producer_expiry_ms and self._expiry_sweep is None:
            self._next_producer_expiry_ms = (
                now_ms + self.config.producer_id_expiration_check_interval_ms
            )
            self._expiry_sweep = list(self._partitions)
        if self._expiry_sweep is not None:
            self._expire_producer_ids(_slice(self._expiry_sweep))
            self._expiry_sweep = self._expiry_sweep or None
        for key, retry_at_ms in list(self._isr_retry_at_ms.items()):
            if retry_at_ms <= now_ms:
                del self._isr_retry_at_ms[key]
                partition = self._partitions.get(key)
                if partition is not None:
                    fired = TimerFired(partition.log.log_end_offset)
                    self._execute(partition, partition.core.step(fired, now_ms))
        self._delayed.expire(now_ms)
        if self._follower.end_backoffs(now_ms):
            # Refreshed here, a bounded number per tick, not all at the fetcher's next build.
            self._follower.refresh(now_ms)
            self.fetch_wakeup.set()  # the fetcher may send again

    def _check_isrs(
        self, keys: list[TopicPartitionKey], now_ms: int
    ) -> list[TopicPartitionKey] | None:
        """The ISR shrink check (every lag/2) of `keys`, a slice of the walk; the walk's rest,
        or None once it is done."""
        for key in keys:
            partition = self._partitions.get(key)
            leader_state = None if partition is None else partition.leader_state
            if partition is None or leader_state is None:
                continue
            effects = partition.core.step(
                TimerFired(partition.log.log_end_offset, check_isr=True), now_ms
            )
            for effect in effects:
                if type(effect) is SendAlterPartition and effect.shrink:
                    assert effect.change is not None
                    log.debug(
                        "%s: shrinking the ISR from %s to %s",
                        partition.name,
                        list(leader_state.isr),
                        list(effect.change.new_isr),
                    )
                    self._isr_shrunk.append(partition.name)
            self._execute(partition, effects)
        if self._isr_sweep:
            return self._isr_sweep
        # One INFO line per check, each partition's at DEBUG: thousands of lines (followers
        # of a large CreateTopics still being created elsewhere) held the loop for seconds.
        shrunk, self._isr_shrunk = self._isr_shrunk, []
        if shrunk:
            log.info(
                "broker %d: shrinking the ISR of %d partitions (a follower more than "
                "replica.lag.time.max.ms behind): %s",
                self.broker_id,
                len(shrunk),
                few_names(shrunk),
            )
        return None

    def _expire_producer_ids(self, keys: list[TopicPartitionKey]) -> None:
        """Forget, in the producer tables of `keys` (followers keep one too), a producer
        whose last batch's max timestamp is `producer.id.expiration.ms` or more behind the
        wall clock (Kafka's rule; without it the tables grow without bound)."""
        wall_now_ms = self._wall_clock()
        for key in keys:
            partition = self._partitions.get(key)
            if partition is None:
                continue
            expired = partition.producer_state.remove_expired(
                wall_now_ms, self.config.producer_id_expiration_ms
            )
            if expired:
                log.info("%s: expired %d producer ids", partition.name, len(expired))
            # Retention deleted segments since the last check: their snapshots go too.
            partition.prune_producer_snapshots()

    def next_tick_ms(self) -> int:
        """When `tick` has something to do next."""
        if self._isr_sweep is not None or self._expiry_sweep is not None:
            return self._clock()  # the walk's next slice, after the loop's other tasks
        candidates = [
            self._next_isr_check_ms,
            self._next_producer_expiry_ms,
            *self._isr_retry_at_ms.values(),
        ]
        for deadline in (self._delayed.next_deadline_ms(), self._follower.next_backoff_end_ms()):
            if deadline is not None:
                candidates.append(deadline)
        return min(candidates)

    async def _run_timers(self) -> None:
        while not self._stopped:
            try:
                self.tick(self._clock())
            except Exception:  # a failing tick must not stop ISR shrinks and expiry for good
                log.exception("replica manager tick failed")
            due_ms = self.next_tick_ms()
            delay_ms = max(0, due_ms - self._clock())
            self._timers_changed.clear()
            self._timer_due_ms = due_ms
            try:
                await wait_for_wakeup(self._timers_changed, delay_ms)
            finally:
                self._timer_due_ms = None


def _slice(rest: list[TopicPartitionKey]) -> list[TopicPartitionKey]:
    """The next `SWEEP_SLICE` keys of a walk, taken off the end of `rest` (in place)."""
    taken = rest[-SWEEP_SLICE:]
    del rest[-SWEEP_SLICE:]
    return taken
