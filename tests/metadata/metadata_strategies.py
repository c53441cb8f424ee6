"""Hypothesis strategies for the metadata tests: every record kind with any valid field values,
and whole valid metadata logs.

`any_record` covers the codec's whole domain (Kafka's integer widths, nullable fields,
sentinels). `valid_logs` draws a log a controller could have written: broker epochs are the
offsets of their registrations, records name live topics, partitions and brokers, names of
removed topics come back with new ids, and the producer-id block only moves forward.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from uuid import UUID

from hypothesis import strategies as st

from replog.common.acl_codes import (
    STORED_OPERATIONS,
    STORED_PATTERN_TYPES,
    STORED_PERMISSION_TYPES,
    STORED_RESOURCE_TYPES,
)
from replog.common.scram_mechanism import MAX_ITERATIONS, MIN_ITERATIONS, SCRAM_MECHANISMS
from replog.quorum.metadata.records import (
    LEADER_UNCHANGED,
    METADATA_VERSION_FEATURE,
    NO_LEADER,
    RECOVERY_STATE_UNCHANGED,
    AccessControlEntryRecord,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    ConfigResourceType,
    Endpoint,
    FeatureLevelRecord,
    FeatureRange,
    FenceChange,
    LeaderRecoveryState,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
)

INT16 = st.integers(-(2**15), 2**15 - 1)
INT32_NON_NEGATIVE = st.integers(0, 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
# Protobuf strings are UTF-8: no lone surrogates.
TEXT = st.text(st.characters(codec="utf-8"), max_size=12)
BROKER_IDS = st.lists(INT32_NON_NEGATIVE, max_size=5).map(tuple)

endpoints = st.builds(Endpoint, TEXT, TEXT, st.integers(0, 65535), TEXT)
feature_ranges = st.builds(FeatureRange, TEXT, INT16, INT16)

register_broker = st.builds(
    RegisterBrokerRecord,
    broker_id=INT32_NON_NEGATIVE,
    incarnation_id=st.uuids(),
    broker_epoch=INT64,
    endpoints=st.lists(endpoints, max_size=3).map(tuple),
    features=st.lists(feature_ranges, max_size=3).map(tuple),
    rack=st.none() | TEXT,
    fenced=st.booleans(),
    in_controlled_shutdown=st.booleans(),
)
unregister_broker = st.builds(UnregisterBrokerRecord, INT32_NON_NEGATIVE, INT64)
broker_registration_change = st.builds(
    BrokerRegistrationChangeRecord,
    broker_id=INT32_NON_NEGATIVE,
    broker_epoch=INT64,
    fenced=st.sampled_from(FenceChange),
    in_controlled_shutdown=st.booleans(),
)
topic = st.builds(TopicRecord, TEXT, st.uuids())


def partition_records(
    ids: st.SearchStrategy[tuple[int, ...]] = BROKER_IDS,
    ints: st.SearchStrategy[int] = INT32_NON_NEGATIVE,
) -> st.SearchStrategy[PartitionRecord]:
    """PartitionRecords whose broker ids are drawn from `ids` and other integers from `ints`."""
    return st.builds(
        PartitionRecord,
        topic_id=st.uuids(),
        partition_id=ints,
        replicas=ids,
        isr=ids,
        leader=st.just(NO_LEADER) | ints,
        leader_epoch=ints,
        partition_epoch=ints,
        removing_replicas=ids,
        adding_replicas=ids,
        leader_recovery_state=st.sampled_from(LeaderRecoveryState),
        elr=ids,
        last_known_elr=ids,
    )


def partition_change_records(
    ids: st.SearchStrategy[tuple[int, ...]] = BROKER_IDS,
    ints: st.SearchStrategy[int] = INT32_NON_NEGATIVE,
) -> st.SearchStrategy[PartitionChangeRecord]:
    """As `partition_records`, for PartitionChangeRecords (each list None or not)."""
    return st.builds(
        PartitionChangeRecord,
        topic_id=st.uuids(),
        partition_id=ints,
        isr=st.none() | ids,
        leader=st.sampled_from([LEADER_UNCHANGED, NO_LEADER, 0]) | ints,
        replicas=st.none() | ids,
        removing_replicas=st.none() | ids,
        adding_replicas=st.none() | ids,
        leader_recovery_state=st.sampled_from([RECOVERY_STATE_UNCHANGED, 0, 1]),
        elr=st.none() | ids,
        last_known_elr=st.none() | ids,
    )


partition = partition_records()
partition_change = partition_change_records()
remove_topic = st.builds(RemoveTopicRecord, st.uuids())
config = st.builds(ConfigRecord, st.sampled_from(ConfigResourceType), TEXT, TEXT, st.none() | TEXT)
feature_level = st.builds(FeatureLevelRecord, TEXT, st.integers(0, 2**15 - 1))
producer_ids = st.builds(ProducerIdsRecord, st.integers(-1, 2**31 - 1), INT64, INT64)
no_op = st.just(NoOpRecord())
access_control_entry = st.builds(
    AccessControlEntryRecord,
    st.uuids(),
    st.sampled_from(sorted(STORED_RESOURCE_TYPES)),
    TEXT.filter(bool),
    st.sampled_from(sorted(STORED_PATTERN_TYPES)),
    st.builds("{}:{}".format, TEXT.map(lambda t: t.replace(":", "")), TEXT),
    TEXT,
    st.sampled_from(sorted(STORED_OPERATIONS)),
    st.sampled_from(sorted(STORED_PERMISSION_TYPES)),
)
remove_access_control_entry = st.builds(RemoveAccessControlEntryRecord, st.uuids())


@st.composite
def user_scram_credentials(draw: st.DrawFn) -> UserScramCredentialRecord:
    mechanism = draw(st.sampled_from(SCRAM_MECHANISMS))
    key = st.binary(min_size=mechanism.digest_size, max_size=mechanism.digest_size)
    return UserScramCredentialRecord(
        name=draw(TEXT),
        mechanism=mechanism.code,
        salt=draw(st.binary(min_size=1, max_size=32)),
        stored_key=draw(key),
        server_key=draw(key),
        iterations=draw(st.integers(MIN_ITERATIONS, MAX_ITERATIONS)),
    )


user_scram_credential = user_scram_credentials()
remove_user_scram_credential = st.builds(
    RemoveUserScramCredentialRecord, TEXT, st.sampled_from([m.code for m in SCRAM_MECHANISMS])
)

STRATEGIES: dict[type, st.SearchStrategy[MetadataRecord]] = {
    RegisterBrokerRecord: register_broker,
    UnregisterBrokerRecord: unregister_broker,
    BrokerRegistrationChangeRecord: broker_registration_change,
    TopicRecord: topic,
    PartitionRecord: partition,
    PartitionChangeRecord: partition_change,
    RemoveTopicRecord: remove_topic,
    ConfigRecord: config,
    FeatureLevelRecord: feature_level,
    ProducerIdsRecord: producer_ids,
    NoOpRecord: no_op,
    AccessControlEntryRecord: access_control_entry,
    RemoveAccessControlEntryRecord: remove_access_control_entry,
    UserScramCredentialRecord: user_scram_credential,
    RemoveUserScramCredentialRecord: remove_user_scram_credential,
}
any_record = st.one_of(*STRATEGIES.values())


# --- valid logs --------------------------------------------------------------------------------

BROKER_POOL = range(5)
TOPIC_NAMES = ["orders", "payments", "audit"]
CONFIG_KEYS = ["retention.ms", "min.insync.replicas", "cleanup.policy"]


@dataclass
class LogModel:
    """What the log written so far says, as far as writing the next valid record needs."""

    brokers: dict[int, tuple[UUID, int]] = field(default_factory=dict)  # id -> incarnation, epoch
    topics: dict[UUID, tuple[str, int]] = field(default_factory=dict)  # id -> name, partitions
    used_topic_ids: set[UUID] = field(default_factory=set)
    next_producer_id: int = 0
    acl_ids: set[UUID] = field(default_factory=set)  # live ACLs
    used_acl_ids: set[UUID] = field(default_factory=set)
    credentials: set[tuple[str, int]] = field(default_factory=set)  # (user, mechanism) set
    records: list[MetadataRecord] = field(default_factory=list)

    @property
    def next_offset(self) -> int:
        return len(self.records)


def _replica_ids(draw: st.DrawFn, min_size: int = 1) -> tuple[int, ...]:
    ids = st.lists(st.sampled_from(BROKER_POOL), min_size=min_size, max_size=3, unique=True)
    return tuple(draw(ids))


def _write_register(draw: st.DrawFn, log: LogModel) -> None:
    broker_id = draw(st.sampled_from(BROKER_POOL))
    existing = log.brokers.get(broker_id)
    if existing is not None and draw(st.booleans()):
        incarnation, broker_epoch = existing  # a retried registration keeps its epoch
    else:
        incarnation, broker_epoch = draw(st.uuids()), log.next_offset
    log.brokers[broker_id] = (incarnation, broker_epoch)
    log.records.append(
        RegisterBrokerRecord(
            broker_id,
            incarnation,
            broker_epoch,
            endpoints=(Endpoint("PLAINTEXT", f"host{broker_id}", 9092 + broker_id),),
            rack=draw(st.none() | st.sampled_from(["r1", "r2"])),
            fenced=draw(st.booleans()),
        )
    )


def _write_broker_change(draw: st.DrawFn, log: LogModel) -> None:
    broker_id = draw(st.sampled_from(sorted(log.brokers)))
    broker_epoch = log.brokers[broker_id][1]
    if draw(st.integers(0, 4)) == 0:
        del log.brokers[broker_id]
        log.records.append(UnregisterBrokerRecord(broker_id, broker_epoch))
        return
    log.records.append(
        BrokerRegistrationChangeRecord(
            broker_id,
            broker_epoch,
            fenced=draw(st.sampled_from(FenceChange)),
            in_controlled_shutdown=draw(st.booleans()),
        )
    )


def _write_create_topic(draw: st.DrawFn, log: LogModel) -> None:
    live_names = {name for name, _ in log.topics.values()}
    free = [name for name in TOPIC_NAMES if name not in live_names]
    if not free:
        return
    name = draw(st.sampled_from(free))
    topic_id = draw(st.uuids().filter(lambda u: u not in log.used_topic_ids))
    log.used_topic_ids.add(topic_id)
    partitions = draw(st.integers(0, 3))
    log.topics[topic_id] = (name, partitions)
    log.records.append(TopicRecord(name, topic_id))
    for partition_id in range(partitions):
        replicas = _replica_ids(draw)
        log.records.append(
            PartitionRecord(topic_id, partition_id, replicas, replicas, leader=replicas[0])
        )
    if draw(st.booleans()):
        log.records.append(ConfigRecord(ConfigResourceType.TOPIC, name, "retention.ms", "1000"))


def _write_partition_change(draw: st.DrawFn, log: LogModel) -> None:
    with_partitions = sorted((i, t) for i, t in log.topics.items() if t[1] > 0)
    if not with_partitions:
        return
    topic_id, (_, partitions) = draw(st.sampled_from(with_partitions))

    def maybe_ids(min_size: int) -> tuple[int, ...] | None:
        return _replica_ids(draw, min_size) if draw(st.booleans()) else None

    log.records.append(
        PartitionChangeRecord(
            topic_id,
            draw(st.integers(0, partitions - 1)),
            isr=maybe_ids(0),
            leader=draw(st.sampled_from([LEADER_UNCHANGED, NO_LEADER, *BROKER_POOL])),
            replicas=maybe_ids(1),
            removing_replicas=maybe_ids(0),
            adding_replicas=maybe_ids(0),
            leader_recovery_state=draw(st.sampled_from([RECOVERY_STATE_UNCHANGED, 0, 1])),
            elr=maybe_ids(0),
            last_known_elr=maybe_ids(0),
        )
    )


def _write_remove_topic(draw: st.DrawFn, log: LogModel) -> None:
    if not log.topics:
        return
    topic_id = draw(st.sampled_from(sorted(log.topics)))
    del log.topics[topic_id]
    log.records.append(RemoveTopicRecord(topic_id))


def _write_config(draw: st.DrawFn, log: LogModel) -> None:
    resource_type, resource_name = draw(
        st.sampled_from(
            [(ConfigResourceType.TOPIC, name) for name in TOPIC_NAMES]
            + [(ConfigResourceType.BROKER, ""), (ConfigResourceType.BROKER, "1")]
        )
    )
    value = draw(st.none() | st.sampled_from(["1", "2", "delete"]))
    log.records.append(
        ConfigRecord(resource_type, resource_name, draw(st.sampled_from(CONFIG_KEYS)), value)
    )


def _write_feature(draw: st.DrawFn, log: LogModel) -> None:
    if draw(st.booleans()):
        log.records.append(FeatureLevelRecord(METADATA_VERSION_FEATURE, draw(st.integers(1, 30))))
    else:
        log.records.append(FeatureLevelRecord("kraft.version", draw(st.integers(0, 2))))


def _write_producer_ids(draw: st.DrawFn, log: LogModel) -> None:
    log.next_producer_id += 1000
    broker_id = draw(st.sampled_from(BROKER_POOL))
    log.records.append(ProducerIdsRecord(broker_id, 0, log.next_producer_id))


def _write_acl(draw: st.DrawFn, log: LogModel) -> None:
    if log.acl_ids and draw(st.booleans()):
        gone = draw(st.sampled_from(sorted(log.acl_ids)))
        log.acl_ids.discard(gone)
        log.records.append(RemoveAccessControlEntryRecord(gone))
        return
    acl = draw(access_control_entry.filter(lambda a: a.acl_id not in log.used_acl_ids))
    log.acl_ids.add(acl.acl_id)
    log.used_acl_ids.add(acl.acl_id)
    log.records.append(acl)


def _write_scram(draw: st.DrawFn, log: LogModel) -> None:
    if log.credentials and draw(st.booleans()):
        name, mechanism = draw(st.sampled_from(sorted(log.credentials)))
        log.credentials.discard((name, mechanism))
        log.records.append(RemoveUserScramCredentialRecord(name, mechanism))
        return
    credential = draw(user_scram_credential)
    log.credentials.add((credential.name, credential.mechanism))
    log.records.append(credential)


WRITERS = [
    _write_register,
    _write_register,
    _write_broker_change,
    _write_create_topic,
    _write_create_topic,
    _write_partition_change,
    _write_partition_change,
    _write_partition_change,
    _write_partition_change,
    _write_partition_change,
    _write_remove_topic,
    _write_config,
    _write_feature,
    _write_producer_ids,
    _write_acl,
    _write_scram,
]


@st.composite
def valid_logs(draw: st.DrawFn, max_steps: int = 40) -> list[MetadataRecord]:
    """A valid metadata log; the record at index i is at offset i."""
    log = LogModel()
    log.records.append(FeatureLevelRecord(METADATA_VERSION_FEATURE, 7))
    for _ in range(draw(st.integers(0, max_steps))):
        writer = draw(st.sampled_from(WRITERS))
        if writer is _write_broker_change and not log.brokers:
            writer = _write_register
        writer(draw, log)
        if draw(st.integers(0, 9)) == 0:
            log.records.append(NoOpRecord())
    return log.records
