"""The broker settings of the data plane (`ReplicaManager`), checked once at construction.

Rules: every setting has Kafka's default and a lower bound, and
`replica.fetch.wait.max.ms <= replica.lag.time.max.ms` (Kafka's own check). Dotted names are
read from `.properties` in `from_properties`, the one place that maps them to fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from replog.config import integer_settings
from replog.errors import ConfigError

# Kafka's dotted name -> field of `ReplicaManagerConfig`.
PROPERTY_NAMES = {
    "replica.lag.time.max.ms": "replica_lag_time_ms_max",
    "replica.fetch.wait.max.ms": "replica_fetch_wait_ms_max",
    "replica.fetch.min.bytes": "replica_fetch_min_bytes",
    "replica.fetch.max.bytes": "replica_fetch_max_bytes",
    "replica.fetch.response.max.bytes": "replica_fetch_response_max_bytes",
    "replica.fetch.backoff.ms": "replica_fetch_backoff_ms",
    "min.insync.replicas": "default_min_insync_replicas",
    "replica.purgatory.pending.max": "purgatory_pending_max",
    "fetch.max.bytes": "fetch_max_bytes",
    "producer.id.expiration.ms": "producer_id_expiration_ms",
    "producer.id.expiration.check.interval.ms": "producer_id_expiration_check_interval_ms",
    "replication.quota.window.num": "replication_quota_window_num",
    "replication.quota.window.size.seconds": "replication_quota_window_size_seconds",
    "leader.replication.throttled.rate": "leader_replication_throttled_rate",
    "follower.replication.throttled.rate": "follower_replication_throttled_rate",
}


@dataclass(frozen=True, slots=True)
class ReplicaManagerConfig:
    """Broker settings of the data plane (Kafka's names in the comments)."""

    broker_id: int
    replica_lag_time_ms_max: int = 30000  # replica.lag.time.max.ms
    replica_fetch_wait_ms_max: int = 500  # replica.fetch.wait.max.ms
    replica_fetch_min_bytes: int = 1  # replica.fetch.min.bytes
    replica_fetch_max_bytes: int = 1048576  # replica.fetch.max.bytes
    replica_fetch_response_max_bytes: int = 10485760  # replica.fetch.response.max.bytes
    replica_fetch_backoff_ms: int = 1000  # replica.fetch.backoff.ms
    default_min_insync_replicas: int = 1  # min.insync.replicas (broker default)
    purgatory_pending_max: int = 100_000  # replog's own: replica.purgatory.pending.max
    fetch_max_bytes: int = 57671680  # fetch.max.bytes: caps any fetch response
    producer_id_expiration_ms: int = 86_400_000  # producer.id.expiration.ms
    # producer.id.expiration.check.interval.ms
    producer_id_expiration_check_interval_ms: int = 600_000
    replication_quota_window_num: int = 11  # replication.quota.window.num
    replication_quota_window_size_seconds: int = 1  # replication.quota.window.size.seconds
    # The replication throttles' bounds under the dynamic levels, bytes/s (no bound: Kafka's
    # Long.MAX_VALUE); Kafka reads them only from the dynamic levels.
    leader_replication_throttled_rate: int = 2**63 - 1  # leader.replication.throttled.rate
    follower_replication_throttled_rate: int = 2**63 - 1  # follower.replication.throttled.rate

    def __post_init__(self) -> None:
        for name, value, minimum in (
            ("replica.lag.time.max.ms", self.replica_lag_time_ms_max, 2),
            ("replica.fetch.wait.max.ms", self.replica_fetch_wait_ms_max, 0),
            ("replica.fetch.min.bytes", self.replica_fetch_min_bytes, 1),
            ("replica.fetch.max.bytes", self.replica_fetch_max_bytes, 0),
            ("replica.fetch.response.max.bytes", self.replica_fetch_response_max_bytes, 0),
            ("replica.fetch.backoff.ms", self.replica_fetch_backoff_ms, 0),
            ("min.insync.replicas", self.default_min_insync_replicas, 1),
            ("replica.purgatory.pending.max", self.purgatory_pending_max, 1),
            ("fetch.max.bytes", self.fetch_max_bytes, 0),
            ("producer.id.expiration.ms", self.producer_id_expiration_ms, 1),
            (
                "producer.id.expiration.check.interval.ms",
                self.producer_id_expiration_check_interval_ms,
                1,
            ),
            ("replication.quota.window.num", self.replication_quota_window_num, 1),
            (
                "replication.quota.window.size.seconds",
                self.replication_quota_window_size_seconds,
                1,
            ),
            ("leader.replication.throttled.rate", self.leader_replication_throttled_rate, 0),
            ("follower.replication.throttled.rate", self.follower_replication_throttled_rate, 0),
        ):
            if value < minimum:
                raise ConfigError(f"{name}={value}: must be at least {minimum}")
        # Kafka's own check: a follower waiting longer than the lag allowance in an idle
        # partition would keep falling out of the ISR.
        if self.replica_fetch_wait_ms_max > self.replica_lag_time_ms_max:
            raise ConfigError(
                f"replica.fetch.wait.max.ms={self.replica_fetch_wait_ms_max} must not exceed "
                f"replica.lag.time.max.ms={self.replica_lag_time_ms_max}"
            )

    @classmethod
    def from_properties(cls, broker_id: int, properties: Mapping[str, str]) -> ReplicaManagerConfig:
        return cls(broker_id, **integer_settings(properties, PROPERTY_NAMES))
