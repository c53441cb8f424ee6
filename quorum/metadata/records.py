"""The metadata records: every change to cluster metadata is one of these, in the metadata log.

These are the in-memory forms the controller emits and every node replays; `record_codec.py`
turns them into the bytes of a Raft record (protobuf, `proto/replog/pb/metadata.proto`).
Names, fields, sentinels and api keys follow Kafka's KRaft records (KIP-631), so a Kafka
operator reading `replog dump-log` of the metadata log sees familiar shapes.

Rules:
- Immutable values (frozen dataclasses, tuples); equality is by value. The two records written
  once per partition (`PartitionRecord`, `PartitionChangeRecord`) are `NamedTuple`s: every node
  builds one per partition a creation or broker event writes, and a frozen dataclass's
  `__init__` sets its fields one call at a time (1.7-2.0 us against 0.3-0.4 us). Being tuples,
  they also equal a plain tuple of the same values, which nothing compares them with.
- KIP-966's fields (`elr`, `last_known_elr`: Kafka's EligibleLeaderReplicas and LastKnownElr)
  are written only while the `eligible.leader.replicas.version` feature is on; `elr` holds
  replicas that left the ISR while it was below min.insync.replicas (each holds every
  committed record), `last_known_elr` those taken out of it by an unclean shutdown.
- `PartitionChangeRecord` says "absent means unchanged": `None` for lists,
  `LEADER_UNCHANGED` (-2) for the leader, `RECOVERY_STATE_UNCHANGED` (-1) for the recovery state.
  Replaying one with a leader other than -2 bumps the leader epoch (even to the same broker: that
  is how a bump is forced); every replay bumps the partition epoch.
- `RegisterBrokerRecord.broker_epoch` is the offset at which that record lands in the log.
- `ConfigRecord.value is None` deletes the key.
- `FeatureLevelRecord.feature_level == 0` removes a feature (except `metadata.version`).
- An `AccessControlEntryRecord` is one ACL under its id; `RemoveAccessControlEntryRecord`
  removes that id. Its codes are Kafka's (`replog.common.acl_codes`).
- A `UserScramCredentialRecord` sets a user's credential for one mechanism (salt, stored key,
  server key, iterations: never the password nor the salted password);
  `RemoveUserScramCredentialRecord` removes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import NamedTuple
from uuid import UUID

from replog.common.acl_codes import AclOperation, AclPermissionType, PatternType, ResourceType

NO_LEADER = -1
LEADER_UNCHANGED = -2
RECOVERY_STATE_UNCHANGED = -1
METADATA_VERSION_FEATURE = "metadata.version"
METADATA_VERSION_MINIMUM = 1  # the metadata.version levels this code reads and writes
METADATA_VERSION_LATEST = 12
# Kafka's 3.5-IV2: the first level whose logs may hold SCRAM credentials
# (`UserScramCredentialRecord`, `RemoveUserScramCredentialRecord`; Kafka's isScramSupported).
METADATA_VERSION_SCRAM = 11
# KIP-890/KIP-1022: 0 the original transaction protocol, 1 flexible `__transaction_state`
# records, 2 an epoch bump at every EndTxn and partitions added by Produce and TxnOffsetCommit.
# Kafka 4.x finalizes 2 on a new cluster.
TRANSACTION_VERSION_FEATURE = "transaction.version"
TRANSACTION_VERSION_LATEST = 2
# KIP-966's feature: level 1 turns on eligible leader replicas and unclean-shutdown handling.
ELR_VERSION_FEATURE = "eligible.leader.replicas.version"
ELR_VERSION_LATEST = 1


class LeaderRecoveryState(IntEnum):
    RECOVERED = 0
    RECOVERING = 1  # after an unclean election, until the new leader has recovered


# Each state by its number, as the codecs read it (a lookup, not the enum's call and raise).
RECOVERY_STATE_OF = {int(state): state for state in LeaderRecoveryState}


class ConfigResourceType(IntEnum):
    """Kafka's ConfigResource.Type codes as written in ConfigRecord."""

    TOPIC = 2
    BROKER = 4
    GROUP = 32  # KIP-848's per-group configs


class FenceChange(IntEnum):
    """BrokerRegistrationChangeRecord.fenced: Kafka's tri-state."""

    UNFENCE = -1
    NONE = 0
    FENCE = 1


@dataclass(frozen=True, slots=True)
class Endpoint:
    name: str  # listener name, e.g. "PLAINTEXT"
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"


@dataclass(frozen=True, slots=True)
class FeatureRange:
    name: str
    min_supported_version: int
    max_supported_version: int


@dataclass(frozen=True, slots=True)
class RegisterBrokerRecord:
    broker_id: int
    incarnation_id: UUID
    broker_epoch: int
    endpoints: tuple[Endpoint, ...] = ()
    features: tuple[FeatureRange, ...] = ()
    rack: str | None = None
    fenced: bool = True
    in_controlled_shutdown: bool = False


@dataclass(frozen=True, slots=True)
class UnregisterBrokerRecord:
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class BrokerRegistrationChangeRecord:
    broker_id: int
    broker_epoch: int
    fenced: FenceChange = FenceChange.NONE
    in_controlled_shutdown: bool = False  # True: enter controlled shutdown; False: no change


@dataclass(frozen=True, slots=True)
class TopicRecord:
    name: str
    topic_id: UUID


class PartitionRecord(NamedTuple):
    topic_id: UUID
    partition_id: int
    replicas: tuple[int, ...]  # preferred order: replicas[0] is the preferred leader
    isr: tuple[int, ...]
    leader: int = NO_LEADER
    leader_epoch: int = 0
    partition_epoch: int = 0
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    leader_recovery_state: LeaderRecoveryState = LeaderRecoveryState.RECOVERED
    elr: tuple[int, ...] = ()  # KIP-966 eligible leader replicas
    last_known_elr: tuple[int, ...] = ()


class PartitionChangeRecord(NamedTuple):
    topic_id: UUID
    partition_id: int
    isr: tuple[int, ...] | None = None
    leader: int = LEADER_UNCHANGED
    replicas: tuple[int, ...] | None = None
    removing_replicas: tuple[int, ...] | None = None
    adding_replicas: tuple[int, ...] | None = None
    leader_recovery_state: int = RECOVERY_STATE_UNCHANGED
    elr: tuple[int, ...] | None = None
    last_known_elr: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class RemoveTopicRecord:
    topic_id: UUID


@dataclass(frozen=True, slots=True)
class ConfigRecord:
    resource_type: ConfigResourceType
    resource_name: str  # topic or broker id; "" = the cluster-wide default
    name: str
    value: str | None  # None deletes the key


@dataclass(frozen=True, slots=True)
class FeatureLevelRecord:
    name: str
    feature_level: int


@dataclass(frozen=True, slots=True)
class ProducerIdsRecord:
    broker_id: int
    broker_epoch: int
    next_producer_id: int  # the first id of the next block to hand out


@dataclass(frozen=True, slots=True)
class NoOpRecord:
    """Written every `metadata.max.idle.interval.ms` so the high watermark keeps moving."""


@dataclass(frozen=True, slots=True)
class AccessControlEntryRecord:
    acl_id: UUID
    resource_type: ResourceType
    resource_name: str  # "*" with a literal pattern: every resource of the type
    pattern_type: PatternType  # LITERAL or PREFIXED
    principal: str  # "User:alice", "User:*" for every principal
    host: str  # an IP address, "*" for every host
    operation: AclOperation
    permission_type: AclPermissionType


@dataclass(frozen=True, slots=True)
class RemoveAccessControlEntryRecord:
    acl_id: UUID


@dataclass(frozen=True, slots=True)
class UserScramCredentialRecord:
    name: str  # the user name
    mechanism: int  # `replog.common.scram_mechanism` code: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:
        # Stored and server keys are not the password, but a log line has no use for them.
        return (
            f"UserScramCredentialRecord(name={self.name!r}, mechanism={self.mechanism}, "
            f"iterations={self.iterations})"
        )


@dataclass(frozen=True, slots=True)
class RemoveUserScramCredentialRecord:
    name: str
    mechanism: int


MetadataRecord = (
    RegisterBrokerRecord
    | UnregisterBrokerRecord
    | BrokerRegistrationChangeRecord
    | TopicRecord
    | PartitionRecord
    | PartitionChangeRecord
    | RemoveTopicRecord
    | ConfigRecord
    | FeatureLevelRecord
    | ProducerIdsRecord
    | NoOpRecord
    | AccessControlEntryRecord
    | RemoveAccessControlEntryRecord
    | UserScramCredentialRecord
    | RemoveUserScramCredentialRecord
)

# Kafka's metadata record api keys (metadata/src/main/resources/common/metadata/*.json).
API_KEYS: dict[type, int] = {
    RegisterBrokerRecord: 0,
    UnregisterBrokerRecord: 1,
    TopicRecord: 2,
    PartitionRecord: 3,
    ConfigRecord: 4,
    PartitionChangeRecord: 5,
    RemoveTopicRecord: 9,
    FeatureLevelRecord: 12,
    ProducerIdsRecord: 15,
    BrokerRegistrationChangeRecord: 17,
    NoOpRecord: 20,
    UserScramCredentialRecord: 11,
    AccessControlEntryRecord: 18,
    RemoveAccessControlEntryRecord: 19,
    RemoveUserScramCredentialRecord: 22,
}
