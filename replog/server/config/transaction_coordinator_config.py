"""The broker settings of the transaction coordinator, checked once at construction.

Rules: every setting has Kafka's name, default and a lower bound; dotted names are read from
`.properties` in `from_properties`, the one place that maps them to fields. The four
`transaction.state.log.*` topic settings apply when a broker creates `__transaction_state` (on
the first FindCoordinator of a transactional id); a topic that exists keeps what it was created
with. Its replication factor is the setting capped by the brokers registered then, so a
one-broker cluster can run transactions (Kafka refuses the creation instead).
`transaction.max.timeout.ms` bounds a producer's transaction timeout; Ongoing transactions
past their timeout are aborted every
`transaction.abort.timed.out.transaction.cleanup.interval.ms`; transactional ids idle for
`transactional.id.expiration.ms` are removed every
`transaction.remove.expired.transaction.cleanup.interval.ms`. `request.timeout.ms` bounds an
append to `__transaction_state` (acks=all).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from replog.config import integer_settings
from replog.errors import ConfigError

PROPERTY_NAMES = {
    "transaction.state.log.num.partitions": "state_log_num_partitions",
    "transaction.state.log.replication.factor": "state_log_replication_factor",
    "transaction.state.log.min.isr": "state_log_min_isr",
    "transaction.state.log.segment.bytes": "state_log_segment_bytes",
    "transaction.state.log.load.buffer.size": "state_log_load_buffer_size",
    "transaction.max.timeout.ms": "max_timeout_ms",
    "transactional.id.expiration.ms": "transactional_id_expiration_ms",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "abort_interval_ms",
    "transaction.remove.expired.transaction.cleanup.interval.ms": "expiration_interval_ms",
    "request.timeout.ms": "request_timeout_ms",
}


@dataclass(frozen=True, slots=True)
class TransactionCoordinatorConfig:
    """Transaction coordinator settings (Kafka's names in PROPERTY_NAMES)."""

    state_log_num_partitions: int = 50
    state_log_replication_factor: int = 3
    state_log_min_isr: int = 2
    state_log_segment_bytes: int = 100 * 1024 * 1024
    state_log_load_buffer_size: int = 5 * 1024 * 1024
    max_timeout_ms: int = 900_000
    transactional_id_expiration_ms: int = 7 * 24 * 3600 * 1000
    abort_interval_ms: int = 10_000
    expiration_interval_ms: int = 3600 * 1000
    request_timeout_ms: int = 30_000

    def __post_init__(self) -> None:
        for key, field_name in PROPERTY_NAMES.items():
            value = getattr(self, field_name)
            if value < 1:
                raise ConfigError(f"{key}={value}: must be at least 1")

    def state_log_replication(self, registered_brokers: int) -> int:
        """The replication factor `__transaction_state` is created with (module docstring)."""
        return max(1, min(self.state_log_replication_factor, registered_brokers))

    def state_log_configs(self, replication_factor: int) -> dict[str, str]:
        """The topic configs `__transaction_state` is created with (Kafka's
        `TransactionLog.transactionTopicConfigs`): compacted, uncompressed, its segment size,
        and min.insync.replicas capped by the replicas it gets."""
        return {
            "cleanup.policy": "compact",
            "compression.type": "uncompressed",
            "segment.bytes": str(self.state_log_segment_bytes),
            "min.insync.replicas": str(min(self.state_log_min_isr, replication_factor)),
        }

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> TransactionCoordinatorConfig:
        return cls(**integer_settings(properties, PROPERTY_NAMES))
