"""ControllerConfig: the settings of one quorum controller, with Kafka's defaults.

Rules:
- Names are the Python spelling of Kafka's config keys, units last
  (`broker.session.timeout.ms` -> `broker_session_timeout_ms`); the shell maps the dotted
  names in one place.
- Every limit is explicit: batch size, purgatory size.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from replog.common import metadata_versions
from replog.quorum.controller.config_definitions import check_static_broker_configs
from replog.quorum.controller.controller_result import MAX_PARTITION_CHANGES_PER_STEP
from replog.quorum.controller.feature_updates import ELR_METADATA_VERSION, bootstrap_refusal
from replog.quorum.metadata.records import (
    ELR_VERSION_FEATURE,
    ELR_VERSION_LATEST,
    METADATA_VERSION_FEATURE,
    METADATA_VERSION_LATEST,
    METADATA_VERSION_MINIMUM,
    METADATA_VERSION_SCRAM,
    TRANSACTION_VERSION_FEATURE,
    TRANSACTION_VERSION_LATEST,
    UserScramCredentialRecord,
)


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    node_id: int
    cluster_id: str
    # broker.session.timeout.ms: an unfenced broker unheard of this long is fenced.
    broker_session_timeout_ms: int = 9000
    # metadata.max.idle.interval.ms: the active controller writes a NoOpRecord this often, so
    # the high watermark keeps moving and brokers and standbys can measure their lag. 0: never.
    metadata_max_idle_interval_ms: int = 500
    # Kafka's maxRecordsPerBatch: a write is split into Raft batches of at most this many
    # records (an atomic write must fit in one).
    max_records_per_batch: int = 10_000
    # How many partition changes one step of a broker event's write may make (fencing,
    # unfencing, controlled shutdown, a new incarnation, unregistration, leaderless elections):
    # the rest follow in later steps, one per loop turn, so no turn is held for long.
    max_partition_changes_per_step: int = MAX_PARTITION_CHANGES_PER_STEP
    # How many writes may wait for their commit at once; beyond it new writes fail fast with
    # REQUEST_TIMED_OUT (retriable) instead of growing the purgatory without bound.
    max_pending_writes: int = 100_000
    # The metadata.version a new metadata log begins with (Kafka's `kafka-storage format
    # --release-version`); UpdateFeatures moves it later.
    bootstrap_metadata_version: int = METADATA_VERSION_LATEST
    # The transaction.version a new metadata log begins with (Kafka's `kafka-storage format
    # --feature transaction.version=N`). 0 writes no record; None: Kafka 4.x's for a new
    # cluster (the latest level) where bootstrap_metadata_version allows one (7, 3.3-IV3, or
    # later), else 0.
    bootstrap_transaction_version: int | None = None
    # SCRAM credentials a new metadata log begins with, written with the feature levels (Kafka's
    # `kafka-storage format --add-scram`): a cluster whose every listener needs SASL has its
    # first user before any client could create one.
    bootstrap_scram_credentials: tuple[UserScramCredentialRecord, ...] = ()
    # eligible.leader.replicas.enable: a new metadata log finalizes the
    # eligible.leader.replicas.version feature at level 1 (KIP-966: eligible leader replicas,
    # and unclean shutdowns kept out of ISRs and ELRs), which needs bootstrap_metadata_version
    # at ELR_METADATA_VERSION or above. Kafka 4.x finalizes it for new clusters by default;
    # replog keeps it off unless asked.
    eligible_leader_replicas_enable: bool = False
    # num.partitions and default.replication.factor: what CreateTopics uses when a topic
    # names neither its partition count nor its replication factor.
    default_num_partitions: int = 1
    default_replication_factor: int = 1
    # auto.leader.rebalance.enable and leader.imbalance.check.interval.seconds (in ms here):
    # every interval, partitions not led by their preferred replica get preferred elections.
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_ms: int = 300_000
    # Kafka's internal unclean.leader.election.interval.ms: how often leaderless partitions of
    # topics with unclean.leader.election.enable=true get unclean elections.
    unclean_leader_election_interval_ms: int = 300_000
    # replog's own: how often leaderless partitions with an active ISR member get clean
    # elections, the safety net behind the ones on unfencing and on activation.
    leaderless_partition_check_interval_ms: int = 10_000
    # The node's static broker configs (server.properties keys of `config_definitions`, such
    # as min.insync.replicas and unclean.leader.election.enable): the defaults below every
    # dynamic config (`ConfigControl`). Not hashed: a mapping.
    static_broker_configs: Mapping[str, str] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        if self.broker_session_timeout_ms <= 0:
            raise ValueError(
                f"broker.session.timeout.ms must be positive, not {self.broker_session_timeout_ms}"
            )
        if self.metadata_max_idle_interval_ms < 0:
            raise ValueError(
                "metadata.max.idle.interval.ms must not be negative, not "
                f"{self.metadata_max_idle_interval_ms}"
            )
        if self.max_records_per_batch <= 0:
            raise ValueError(
                f"max_records_per_batch must be positive: {self.max_records_per_batch}"
            )
        if self.max_partition_changes_per_step <= 0:
            raise ValueError(
                "max_partition_changes_per_step must be positive: "
                f"{self.max_partition_changes_per_step}"
            )
        if (
            not METADATA_VERSION_MINIMUM
            <= self.bootstrap_metadata_version
            <= (METADATA_VERSION_LATEST)
        ):
            raise ValueError(
                f"bootstrap.metadata.version must be within {METADATA_VERSION_MINIMUM}.."
                f"{METADATA_VERSION_LATEST}, not {self.bootstrap_metadata_version}"
            )
        transaction_version = self.bootstrap_transaction_version
        if transaction_version is not None:
            if not 0 <= transaction_version <= TRANSACTION_VERSION_LATEST:
                raise ValueError(
                    "bootstrap.transaction.version must be within 0.."
                    f"{TRANSACTION_VERSION_LATEST}, not {transaction_version}"
                )
            refusal = bootstrap_refusal(
                {
                    METADATA_VERSION_FEATURE: self.bootstrap_metadata_version,
                    TRANSACTION_VERSION_FEATURE: transaction_version,
                }
            )
            if refusal is not None:
                minimum = metadata_versions.name_of(metadata_versions.KAFKA_MINIMUM)
                raise ValueError(
                    f"bootstrap.transaction.version={transaction_version} needs "
                    f"bootstrap.metadata.version {minimum} or later: {refusal}"
                )
        if self.bootstrap_scram_credentials and (
            self.bootstrap_metadata_version < METADATA_VERSION_SCRAM
        ):
            # Kafka's `kafka-storage format --add-scram` refuses the same.
            raise ValueError(
                f"bootstrap.scram.credentials: SCRAM is only supported in "
                f"{METADATA_VERSION_FEATURE} 3.5-IV2 (level {METADATA_VERSION_SCRAM}) or later, "
                f"not at level {self.bootstrap_metadata_version}"
            )
        if self.eligible_leader_replicas_enable:
            refusal = bootstrap_refusal(
                {
                    METADATA_VERSION_FEATURE: self.bootstrap_metadata_version,
                    ELR_VERSION_FEATURE: ELR_VERSION_LATEST,
                }
            )
            if refusal is not None:
                raise ValueError(
                    "eligible.leader.replicas.enable=true needs bootstrap.metadata.version "
                    f"{metadata_versions.name_of(ELR_METADATA_VERSION)} or later: {refusal}"
                )
        if self.default_num_partitions < 1:
            raise ValueError(
                f"num.partitions must be at least 1, not {self.default_num_partitions}"
            )
        if self.default_replication_factor < 1:
            raise ValueError(
                "default.replication.factor must be at least 1, not "
                f"{self.default_replication_factor}"
            )
        for name in (
            "leader_imbalance_check_interval_ms",
            "unclean_leader_election_interval_ms",
            "leaderless_partition_check_interval_ms",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, not {getattr(self, name)}")
        if self.max_pending_writes <= 0:
            raise ValueError(f"max_pending_writes must be positive: {self.max_pending_writes}")
        check_static_broker_configs(self.static_broker_configs)
