"""A replication throttle (KIP-73; Kafka's `ReplicationQuotaManager`): which partitions it
throttles and whether its byte rate is over its bound, with the clock passed in.

A broker holds two: the leader's (`leader.replication.throttled.rate` over the partitions
`leader.replication.throttled.replicas` names for this broker) and the follower's (the
`follower.*` pair). The leader leaves a throttled partition's records out of a fetch answer to
a replica not in its ISR while the leader throttle is over its bound; the follower leaves a
throttled partition it has not caught up on out of its fetch while the follower throttle is
(`shouldLeaderThrottle`, `shouldFollowerThrottle`). Each records the bytes of every throttled
partition it sends or receives, in-sync replicas' included, so that the throttled traffic as a
whole stays under the bound.

Rules (Kafka's, to the letter):
- The rate is `SampledStat` + `SimpleRate`: `window_num` samples of `window_ms`
  (`replication.quota.window.num` 11, `replication.quota.window.size.seconds` 1), plus one
  overlapping sample; a sample with no event for `window_num * window_ms` restarts; the rate
  is the samples' sum over the time since the oldest sample's start, at least one window.
- Over the bound means a rate above it (`Quota.upperBound`: `rate <= bound` is acceptable). A
  new bound applies at once to the samples kept; no bound (`UNBOUNDED`, Kafka's
  `Long.MAX_VALUE`) is never over.
- A throttled-replicas value is `*` (every partition) or `partition:broker` pairs; a broker
  throttles the partitions whose pair names it (`ConfigHandler.parseThrottledPartitions`).
  An empty value or none throttles nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from replog.config import parse_integer
from replog.quorum.controller.config_definitions import check_throttled_replicas

UNBOUNDED = 2**63 - 1  # Kafka's QUOTA_BYTES_PER_SECOND_DEFAULT: no throttle
ALL_PARTITIONS = frozenset({-1})  # `*` (Kafka's `AllReplicas`)

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"


def throttled_partitions(value: str, broker_id: int) -> frozenset[int]:
    """The partitions a throttled-replicas `value` throttles on `broker_id` (ALL_PARTITIONS
    for `*`); `ValueError` (Kafka's wording) for a value that is neither."""
    text = value.strip()
    check_throttled_replicas(text)
    if text == "*":
        return ALL_PARTITIONS
    found = set()
    for item in text.split(","):
        pair = item.strip()
        if pair:
            partition, broker = pair.split(":")
            if int(broker) == broker_id:
                found.add(int(partition))
    return frozenset(found)


class _Sample:
    __slots__ = ("last_event_ms", "start_ms", "value")

    def __init__(self, now_ms: int) -> None:
        self.reset(now_ms)

    def reset(self, now_ms: int) -> None:
        self.value = 0.0
        self.start_ms = now_ms
        self.last_event_ms = now_ms


class SampledRate:
    """Bytes per second over a window of samples (Kafka's `SampledStat` with `SimpleRate`)."""

    def __init__(self, window_num: int, window_ms: int) -> None:
        if window_num < 1 or window_ms < 1:
            raise ValueError(
                f"window_num and window_ms must be at least 1 ({window_num}, {window_ms})"
            )
        self.window_num = window_num
        self.window_ms = window_ms
        self._samples: list[_Sample] = []
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self.window_ms:
            # The next sample; one more than `window_num` is kept, the one overlapping the
            # window's start.
            self._current = (self._current + 1) % (self.window_num + 1)
            if self._current >= len(self._samples):
                sample = _Sample(now_ms)
                self._samples.append(sample)
            else:
                sample = self._samples[self._current]
                sample.reset(now_ms)
        sample.value += value
        sample.last_event_ms = now_ms

    def measure(self, now_ms: int) -> float:
        """The rate in bytes per second at `now_ms`."""
        expire_ms = self.window_num * self.window_ms
        for sample in self._samples:
            if now_ms - sample.last_event_ms >= expire_ms:
                sample.reset(now_ms)
        if not self._samples:
            self._samples.append(_Sample(now_ms))  # the window starts at the first look
        total = sum(sample.value for sample in self._samples)
        oldest = min(sample.start_ms for sample in self._samples)
        return total / (max(now_ms - oldest, self.window_ms) / 1000)

    def _current_sample(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        return self._samples[self._current]


class ReplicationQuota:
    """One replication throttle: its bound, its throttled partitions and its rate."""

    def __init__(self, window_num: int = 11, window_ms: int = 1000) -> None:
        self.bound = UNBOUNDED
        self._rate = SampledRate(window_num, window_ms)
        # Topic -> its throttled partitions on this broker (ALL_PARTITIONS: `*`); topics with
        # none are absent, so an empty mapping means nothing is throttled.
        self.throttled: dict[str, frozenset[int]] = {}
        # The last verdict of `is_exceeded`, asked once per throttled partition a fetch reads:
        # kept while the time, the bound and the bytes recorded are the same.
        self._verdict: tuple[int, int, int, bool] = (-1, -1, -1, False)
        self._records = 0

    def is_throttled(self, topic: str, partition: int) -> bool:
        partitions = self.throttled.get(topic)
        return partitions is not None and (partitions is ALL_PARTITIONS or partition in partitions)

    def is_exceeded(self, now_ms: int) -> bool:
        if self.bound == UNBOUNDED:
            return False
        at, bound, records, exceeded = self._verdict
        if (at, bound, records) != (now_ms, self.bound, self._records):
            exceeded = self._rate.measure(now_ms) > self.bound
            self._verdict = (now_ms, self.bound, self._records, exceeded)
        return exceeded

    def throttles_leader_read(
        self, topic: str, partition: int, *, in_sync: bool, now_ms: int
    ) -> bool:
        """Whether a leader leaves `topic`-`partition`'s records out of a follower's fetch now
        (Kafka's `shouldLeaderThrottle`): a replica outside the ISR (`in_sync` False), of a
        partition this throttle names, while the throttle is over its bound."""
        return not in_sync and self.is_throttled(topic, partition) and self.is_exceeded(now_ms)

    def record(self, size: int, now_ms: int) -> None:
        """Count `size` bytes of throttled partitions sent or received at `now_ms`."""
        self._rate.record(size, now_ms)
        self._records += 1

    def rate(self, now_ms: int) -> float:
        return self._rate.measure(now_ms)

    def set_throttled(self, topic: str, partitions: frozenset[int]) -> None:
        """`topic`'s throttled partitions, replacing any before (none: throttle none)."""
        if partitions:
            self.throttled[topic] = partitions
        else:
            self.throttled.pop(topic, None)


def effective_rate(levels: Iterable[Mapping[str, str]], key: str) -> tuple[int, list[str]]:
    """The bound `key` sets at the strongest of `levels` (strongest first) that sets it to a
    valid value (a long, at least 0), and the values refused on the way (the level below then
    counts, as for every other broker config); UNBOUNDED when none sets it."""
    refused = []
    for level in levels:
        raw = level.get(key)
        if raw is None:
            continue
        try:
            value = parse_integer(raw)
        except ValueError:
            value = -1
        if not 0 <= value <= UNBOUNDED:
            refused.append(raw)
            continue
        return value, refused
    return UNBOUNDED, refused
