"""Metadata records to and from the bytes of a metadata log record's value.

Grammar: the value is one serialized `replog.pb.MetadataRecord`
(`proto/replog/pb/metadata.proto`); its oneof holds exactly one record, and the oneof field
number is the record's Kafka api key + 1. Worked example: `encode_record(NoOpRecord())` is
``b"\\xaa\\x01\\x00"``: tag varint 0xaa 0x01 (field 21 = api key 20, length-delimited), then
length 0.

Rules:
- `decode_record(encode_record(r)) == r` for every valid record. The other direction holds only
  up to protobuf's freedom in field order, so never compare encoded bytes to detect changes.
- "Absent means unchanged" is presence on the wire: a `PartitionChangeRecord` list that is None
  is an unset wrapper message, an empty tuple is a set, empty one; `LEADER_UNCHANGED` and
  `RECOVERY_STATE_UNCHANGED` are unset `optional` fields. A None rack or config value is an
  unset `optional` string.
- Decoding checks what protobuf cannot: a UUID is exactly 16 bytes, enums hold a known value
  (an ACL's codes one a stored ACL may hold: no UNKNOWN, ANY or MATCH; a SCRAM mechanism 1
  or 2), an ACL's principal is "Type:name" and its resource name not empty, a SCRAM
  credential's keys are its hash's size and its iterations within 4096..16384,
  Kafka's narrower integers (int16 feature versions and levels, uint16 port) are in range,
  partition ids, broker ids, replica ids and epochs of a partition are not negative, a leader
  is -1 (none) or a broker id. A field that breaks one of these, malformed protobuf (strings
  that are not UTF-8 included), or a record kind this version does not know raises
  `CorruptMetadataRecordError` naming the record kind and the field. Unknown fields inside a
  known record are ignored, so a newer writer can add fields.
- Encoding checks the same rules and raises `ValueError`: a record that breaks them is a bug in
  the code that built it, and must not reach the log.
- The records written once per partition (PartitionRecord, PartitionChangeRecord) are written
  and read by hand (`partition_wire`): the same bytes protobuf writes, and whatever is not in
  that form is left to protobuf, so either way the result is the same.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import IntEnum
from typing import Any, TypeVar
from uuid import UUID

from google.protobuf.message import DecodeError
from google.protobuf.unknown_fields import UnknownFieldSet

from replog.common.acl_codes import (
    STORED_OPERATIONS,
    STORED_PATTERN_TYPES,
    STORED_PERMISSION_TYPES,
    STORED_RESOURCE_TYPES,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from replog.common.ids import UUID_BYTES
from replog.common.scram_mechanism import MAX_ITERATIONS, MECHANISM_BY_CODE, MIN_ITERATIONS
from replog.errors import CorruptMetadataRecordError
from replog.pb import metadata_pb2 as pb
from replog.quorum.metadata.partition_wire import (
    PARTITION_CHANGE_TAG,
    PARTITION_TAG,
    partition_change_record_bytes,
    partition_record_bytes,
    read_partition_change_record,
    read_partition_record,
)
from replog.quorum.metadata.records import (
    LEADER_UNCHANGED,
    NO_LEADER,
    RECOVERY_STATE_OF,
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

INT16_MIN, INT16_MAX = -(1 << 15), (1 << 15) - 1
PORT_MAX = (1 << 16) - 1


_E = TypeVar(
    "_E",
    ConfigResourceType,
    FenceChange,
    LeaderRecoveryState,
    ResourceType,
    PatternType,
    AclOperation,
    AclPermissionType,
)


class _Invalid(Exception):
    """A rule broken by a record's field; turned into the caller-facing error at the edge."""


# --- encoding ----------------------------------------------------------------------------------


def encode_record(record: MetadataRecord) -> bytes:
    """The bytes of `record` as a metadata log record value. ValueError if it breaks a rule."""
    kind = type(record)
    encoder = _ENCODERS.get(kind)
    if encoder is None:
        raise TypeError(f"not a metadata record: {record!r}")
    try:
        _check(record)
    except _Invalid as e:
        raise ValueError(f"cannot encode {kind.__name__}: {e}") from None
    written = _BY_HAND.get(kind)
    if written is not None:
        return written(record)
    wrapper = pb.MetadataRecord()
    field_name, build = encoder
    getattr(wrapper, field_name).CopyFrom(build(record))
    data: bytes = wrapper.SerializeToString()
    return data


def _ids(values: tuple[int, ...] | None) -> pb.BrokerIdList | None:
    return None if values is None else pb.BrokerIdList(broker_ids=values)


def _register_broker(r: Any) -> pb.RegisterBrokerRecord:
    assert isinstance(r, RegisterBrokerRecord)
    return pb.RegisterBrokerRecord(
        broker_id=r.broker_id,
        incarnation_id=r.incarnation_id.bytes,
        broker_epoch=r.broker_epoch,
        endpoints=[
            pb.MetadataEndpoint(
                name=e.name, host=e.host, port=e.port, security_protocol=e.security_protocol
            )
            for e in r.endpoints
        ],
        features=[
            pb.MetadataFeatureRange(
                name=f.name,
                min_supported_version=f.min_supported_version,
                max_supported_version=f.max_supported_version,
            )
            for f in r.features
        ],
        rack=r.rack,  # None leaves the optional field unset
        fenced=r.fenced,
        in_controlled_shutdown=r.in_controlled_shutdown,
    )


def _unregister_broker(r: Any) -> pb.UnregisterBrokerRecord:
    assert isinstance(r, UnregisterBrokerRecord)
    return pb.UnregisterBrokerRecord(broker_id=r.broker_id, broker_epoch=r.broker_epoch)


def _broker_registration_change(r: Any) -> pb.BrokerRegistrationChangeRecord:
    assert isinstance(r, BrokerRegistrationChangeRecord)
    return pb.BrokerRegistrationChangeRecord(
        broker_id=r.broker_id,
        broker_epoch=r.broker_epoch,
        fenced=int(r.fenced),
        in_controlled_shutdown=r.in_controlled_shutdown,
    )


def _topic(r: Any) -> pb.TopicRecord:
    assert isinstance(r, TopicRecord)
    return pb.TopicRecord(name=r.name, topic_id=r.topic_id.bytes)


def _partition(r: Any) -> pb.PartitionRecord:
    assert isinstance(r, PartitionRecord)
    return pb.PartitionRecord(
        topic_id=r.topic_id.bytes,
        partition_id=r.partition_id,
        replicas=r.replicas,
        isr=r.isr,
        leader=r.leader,
        leader_epoch=r.leader_epoch,
        partition_epoch=r.partition_epoch,
        removing_replicas=r.removing_replicas,
        adding_replicas=r.adding_replicas,
        leader_recovery_state=int(r.leader_recovery_state),
        elr=r.elr,
        last_known_elr=r.last_known_elr,
    )


def _partition_change(r: Any) -> pb.PartitionChangeRecord:
    assert isinstance(r, PartitionChangeRecord)
    return pb.PartitionChangeRecord(
        topic_id=r.topic_id.bytes,
        partition_id=r.partition_id,
        isr=_ids(r.isr),
        leader=None if r.leader == LEADER_UNCHANGED else r.leader,
        replicas=_ids(r.replicas),
        removing_replicas=_ids(r.removing_replicas),
        adding_replicas=_ids(r.adding_replicas),
        leader_recovery_state=(
            None if r.leader_recovery_state == RECOVERY_STATE_UNCHANGED else r.leader_recovery_state
        ),
        elr=_ids(r.elr),
        last_known_elr=_ids(r.last_known_elr),
    )


def _remove_topic(r: Any) -> pb.RemoveTopicRecord:
    assert isinstance(r, RemoveTopicRecord)
    return pb.RemoveTopicRecord(topic_id=r.topic_id.bytes)


def _config(r: Any) -> pb.ConfigRecord:
    assert isinstance(r, ConfigRecord)
    return pb.ConfigRecord(
        resource_type=int(r.resource_type),
        resource_name=r.resource_name,
        name=r.name,
        value=r.value,  # None leaves the optional field unset: delete the key
    )


def _feature_level(r: Any) -> pb.FeatureLevelRecord:
    assert isinstance(r, FeatureLevelRecord)
    return pb.FeatureLevelRecord(name=r.name, feature_level=r.feature_level)


def _producer_ids(r: Any) -> pb.ProducerIdsRecord:
    assert isinstance(r, ProducerIdsRecord)
    return pb.ProducerIdsRecord(
        broker_id=r.broker_id, broker_epoch=r.broker_epoch, next_producer_id=r.next_producer_id
    )


def _no_op(r: Any) -> pb.NoOpRecord:
    assert isinstance(r, NoOpRecord)
    return pb.NoOpRecord()


def _access_control_entry(r: Any) -> pb.AccessControlEntryRecord:
    assert isinstance(r, AccessControlEntryRecord)
    return pb.AccessControlEntryRecord(
        id=r.acl_id.bytes,
        resource_type=int(r.resource_type),
        resource_name=r.resource_name,
        pattern_type=int(r.pattern_type),
        principal=r.principal,
        host=r.host,
        operation=int(r.operation),
        permission_type=int(r.permission_type),
    )


def _remove_access_control_entry(r: Any) -> pb.RemoveAccessControlEntryRecord:
    assert isinstance(r, RemoveAccessControlEntryRecord)
    return pb.RemoveAccessControlEntryRecord(id=r.acl_id.bytes)


def _user_scram_credential(r: Any) -> pb.UserScramCredentialRecord:
    assert isinstance(r, UserScramCredentialRecord)
    return pb.UserScramCredentialRecord(
        name=r.name,
        mechanism=r.mechanism,
        salt=r.salt,
        stored_key=r.stored_key,
        server_key=r.server_key,
        iterations=r.iterations,
    )


def _remove_user_scram_credential(r: Any) -> pb.RemoveUserScramCredentialRecord:
    assert isinstance(r, RemoveUserScramCredentialRecord)
    return pb.RemoveUserScramCredentialRecord(name=r.name, mechanism=r.mechanism)


# Record type -> (MetadataRecord oneof field, builder of the inner message).
_ENCODERS: dict[type, tuple[str, Callable[[Any], Any]]] = {
    RegisterBrokerRecord: ("register_broker", _register_broker),
    UnregisterBrokerRecord: ("unregister_broker", _unregister_broker),
    BrokerRegistrationChangeRecord: ("broker_registration_change", _broker_registration_change),
    TopicRecord: ("topic", _topic),
    PartitionRecord: ("partition", _partition),
    PartitionChangeRecord: ("partition_change", _partition_change),
    RemoveTopicRecord: ("remove_topic", _remove_topic),
    ConfigRecord: ("config", _config),
    FeatureLevelRecord: ("feature_level", _feature_level),
    ProducerIdsRecord: ("producer_ids", _producer_ids),
    NoOpRecord: ("no_op", _no_op),
    AccessControlEntryRecord: ("access_control_entry", _access_control_entry),
    RemoveAccessControlEntryRecord: ("remove_access_control_entry", _remove_access_control_entry),
    UserScramCredentialRecord: ("user_scram_credential", _user_scram_credential),
    RemoveUserScramCredentialRecord: (
        "remove_user_scram_credential",
        _remove_user_scram_credential,
    ),
}


# The records written by the thousand (a creation, a broker event), as bytes put together by
# hand: the same bytes as protobuf's (`partition_wire`).
_BY_HAND: dict[type, Callable[[Any], bytes]] = {
    PartitionRecord: partition_record_bytes,
    PartitionChangeRecord: partition_change_record_bytes,
}
# Their readers, by the value's first byte (the oneof field's tag); a reader's None means
# "not in the form written here": protobuf decodes it.
_READ_BY_HAND: dict[int, Callable[[bytes, Callable[[bytes], UUID]], MetadataRecord | None]] = {
    PARTITION_TAG: read_partition_record,
    PARTITION_CHANGE_TAG: read_partition_change_record,
}


# --- decoding ----------------------------------------------------------------------------------


def decode_record(data: bytes) -> MetadataRecord:
    """The record whose bytes are `data`; CorruptMetadataRecordError naming what is wrong."""
    if data:
        read = _READ_BY_HAND.get(data[0])
        if read is not None:
            record = read(data, _topic_id)
            if record is not None:
                return record
    return _decode_with_protobuf(data)


def _decode_with_protobuf(data: bytes) -> MetadataRecord:
    wrapper = pb.MetadataRecord()
    try:
        wrapper.ParseFromString(data)
    except DecodeError as e:
        raise CorruptMetadataRecordError(
            f"metadata record of {len(data)} bytes is not a valid MetadataRecord message: {e}"
        ) from None
    kind = wrapper.WhichOneof("record")
    if kind is None:
        # The parser keeps fields it does not know: a record kind added by a newer version
        # lands there, and its field number tells which api key it was.
        unknown = sorted({f.field_number for f in UnknownFieldSet(wrapper)})
        what = (
            f"a record kind this version does not know (field numbers {unknown}, "
            f"Kafka api keys {[n - 1 for n in unknown]})"
            if unknown
            else "no record at all"
        )
        raise CorruptMetadataRecordError(f"metadata record of {len(data)} bytes holds {what}")
    try:
        record = _DECODERS[kind](getattr(wrapper, kind))
        _check(record)
    except _Invalid as e:
        raise CorruptMetadataRecordError(f"metadata record {kind}: {e}") from None
    return record


def _topic_id(value: bytes) -> UUID:
    return _uuid("topic_id", value)


def _uuid(field: str, value: bytes) -> UUID:
    found = _recent_uuids.get(value)
    if found is not None:
        return found
    if len(value) != UUID_BYTES:
        raise _Invalid(f"{field} must be {UUID_BYTES} bytes, got {len(value)}")
    if len(_recent_uuids) >= _RECENT_UUIDS_KEPT:
        _recent_uuids.clear()
    made = _recent_uuids[value] = UUID(bytes=value)
    return made


# The topic ids decoded lately, by their bytes: a topic's partition records follow its topic
# record, and a broker event's changes come a topic's partitions at a time, so most ids were
# just made (a UUID from bytes costs a third of the rest of a record's decoding). UUIDs are
# immutable: sharing one changes nothing. Emptied when full: a bound, not a policy.
_RECENT_UUIDS_KEPT = 4096
_recent_uuids: dict[bytes, UUID] = {}


def _enum(kind: type[_E], field: str, value: int) -> _E:
    try:
        return kind(value)
    except ValueError:
        known = ", ".join(str(int(v)) for v in kind)
        raise _Invalid(f"{field} {value} is not one of {known}") from None


def _dec_register_broker(m: pb.RegisterBrokerRecord) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id=m.broker_id,
        incarnation_id=_uuid("incarnation_id", m.incarnation_id),
        broker_epoch=m.broker_epoch,
        endpoints=tuple(Endpoint(e.name, e.host, e.port, e.security_protocol) for e in m.endpoints),
        features=tuple(
            FeatureRange(f.name, f.min_supported_version, f.max_supported_version)
            for f in m.features
        ),
        rack=m.rack if m.HasField("rack") else None,
        fenced=m.fenced,
        in_controlled_shutdown=m.in_controlled_shutdown,
    )


def _dec_unregister_broker(m: pb.UnregisterBrokerRecord) -> UnregisterBrokerRecord:
    return UnregisterBrokerRecord(broker_id=m.broker_id, broker_epoch=m.broker_epoch)


def _dec_broker_registration_change(
    m: pb.BrokerRegistrationChangeRecord,
) -> BrokerRegistrationChangeRecord:
    return BrokerRegistrationChangeRecord(
        broker_id=m.broker_id,
        broker_epoch=m.broker_epoch,
        fenced=_enum(FenceChange, "fenced", m.fenced),
        in_controlled_shutdown=m.in_controlled_shutdown,
    )


def _dec_topic(m: pb.TopicRecord) -> TopicRecord:
    return TopicRecord(name=m.name, topic_id=_uuid("topic_id", m.topic_id))


def _dec_partition(m: pb.PartitionRecord) -> PartitionRecord:
    recovery = RECOVERY_STATE_OF.get(m.leader_recovery_state)
    if recovery is None:
        recovery = _enum(LeaderRecoveryState, "leader_recovery_state", m.leader_recovery_state)
    return PartitionRecord(
        _uuid("topic_id", m.topic_id),
        m.partition_id,
        tuple(m.replicas),
        tuple(m.isr),
        m.leader,
        m.leader_epoch,
        m.partition_epoch,
        tuple(m.removing_replicas),
        tuple(m.adding_replicas),
        recovery,
        tuple(m.elr),
        tuple(m.last_known_elr),
    )


def _dec_partition_change(m: pb.PartitionChangeRecord) -> PartitionChangeRecord:
    has = m.HasField
    recovery = RECOVERY_STATE_UNCHANGED
    if has("leader_recovery_state"):
        recovery = m.leader_recovery_state
        if recovery not in RECOVERY_STATE_OF:
            _enum(LeaderRecoveryState, "leader_recovery_state", recovery)
    return PartitionChangeRecord(
        _uuid("topic_id", m.topic_id),
        m.partition_id,
        tuple(m.isr.broker_ids) if has("isr") else None,
        m.leader if has("leader") else LEADER_UNCHANGED,
        tuple(m.replicas.broker_ids) if has("replicas") else None,
        tuple(m.removing_replicas.broker_ids) if has("removing_replicas") else None,
        tuple(m.adding_replicas.broker_ids) if has("adding_replicas") else None,
        recovery,
        tuple(m.elr.broker_ids) if has("elr") else None,
        tuple(m.last_known_elr.broker_ids) if has("last_known_elr") else None,
    )


def _dec_remove_topic(m: pb.RemoveTopicRecord) -> RemoveTopicRecord:
    return RemoveTopicRecord(topic_id=_uuid("topic_id", m.topic_id))


def _dec_config(m: pb.ConfigRecord) -> ConfigRecord:
    return ConfigRecord(
        resource_type=_enum(ConfigResourceType, "resource_type", m.resource_type),
        resource_name=m.resource_name,
        name=m.name,
        value=m.value if m.HasField("value") else None,
    )


def _dec_feature_level(m: pb.FeatureLevelRecord) -> FeatureLevelRecord:
    return FeatureLevelRecord(name=m.name, feature_level=m.feature_level)


def _dec_producer_ids(m: pb.ProducerIdsRecord) -> ProducerIdsRecord:
    return ProducerIdsRecord(
        broker_id=m.broker_id, broker_epoch=m.broker_epoch, next_producer_id=m.next_producer_id
    )


def _dec_no_op(m: pb.NoOpRecord) -> NoOpRecord:
    return NoOpRecord()


def _dec_access_control_entry(m: pb.AccessControlEntryRecord) -> AccessControlEntryRecord:
    return AccessControlEntryRecord(
        acl_id=_uuid("id", m.id),
        resource_type=_enum(ResourceType, "resource_type", m.resource_type),
        resource_name=m.resource_name,
        pattern_type=_enum(PatternType, "pattern_type", m.pattern_type),
        principal=m.principal,
        host=m.host,
        operation=_enum(AclOperation, "operation", m.operation),
        permission_type=_enum(AclPermissionType, "permission_type", m.permission_type),
    )


def _dec_remove_access_control_entry(
    m: pb.RemoveAccessControlEntryRecord,
) -> RemoveAccessControlEntryRecord:
    return RemoveAccessControlEntryRecord(acl_id=_uuid("id", m.id))


def _dec_user_scram_credential(m: pb.UserScramCredentialRecord) -> UserScramCredentialRecord:
    return UserScramCredentialRecord(
        name=m.name,
        mechanism=m.mechanism,
        salt=m.salt,
        stored_key=m.stored_key,
        server_key=m.server_key,
        iterations=m.iterations,
    )


def _dec_remove_user_scram_credential(
    m: pb.RemoveUserScramCredentialRecord,
) -> RemoveUserScramCredentialRecord:
    return RemoveUserScramCredentialRecord(name=m.name, mechanism=m.mechanism)


# MetadataRecord oneof field -> decoder of the inner message.
_DECODERS: dict[str, Callable[[Any], MetadataRecord]] = {
    "register_broker": _dec_register_broker,
    "unregister_broker": _dec_unregister_broker,
    "broker_registration_change": _dec_broker_registration_change,
    "topic": _dec_topic,
    "partition": _dec_partition,
    "partition_change": _dec_partition_change,
    "remove_topic": _dec_remove_topic,
    "config": _dec_config,
    "feature_level": _dec_feature_level,
    "producer_ids": _dec_producer_ids,
    "no_op": _dec_no_op,
    "access_control_entry": _dec_access_control_entry,
    "remove_access_control_entry": _dec_remove_access_control_entry,
    "user_scram_credential": _dec_user_scram_credential,
    "remove_user_scram_credential": _dec_remove_user_scram_credential,
}
assert set(_DECODERS) == {field for field, _ in _ENCODERS.values()}, "encoders and decoders differ"


# --- rules both directions check -----------------------------------------------------------------


def _check(record: MetadataRecord) -> None:
    """Raise _Invalid naming the first field of `record` that breaks a rule of the module."""
    check = _CHECKS.get(type(record))
    if check is not None:
        check(record)


def _check_register_broker(record: RegisterBrokerRecord) -> None:
    _broker_id("broker_id", record.broker_id)
    for endpoint in record.endpoints:
        if not 0 <= endpoint.port <= PORT_MAX:
            raise _Invalid(f"endpoint {endpoint.name!r} port {endpoint.port} not in 0..65535")
    for feature in record.features:
        _int16(f"feature {feature.name!r} min_supported_version", feature.min_supported_version)
        _int16(f"feature {feature.name!r} max_supported_version", feature.max_supported_version)


def _check_unregister_broker(record: UnregisterBrokerRecord) -> None:
    _broker_id("broker_id", record.broker_id)


def _check_producer_ids(record: ProducerIdsRecord) -> None:
    # A snapshot's ProducerIdsRecord names no broker (-1), as Kafka writes it.
    if record.broker_id < -1:
        raise _Invalid(f"broker_id {record.broker_id} is below -1")


def _check_broker_registration_change(record: BrokerRegistrationChangeRecord) -> None:
    _broker_id("broker_id", record.broker_id)
    _enum(FenceChange, "fenced", int(record.fenced))


_PARTITION_ID_LISTS = (
    "replicas", "isr", "removing_replicas", "adding_replicas", "elr", "last_known_elr",
)  # fmt: skip


# Written out for the two records of every partition (a third of their decoding was checks):
# each list's lowest id against 0, the fields named only when one breaks a rule.
def _check_partition(record: PartitionRecord) -> None:
    _partition_fields(record.partition_id, record.leader, NO_LEADER)
    replicas, isr = record.replicas, record.isr
    removing, adding = record.removing_replicas, record.adding_replicas
    elr, last_known_elr = record.elr, record.last_known_elr
    if (
        (replicas and min(replicas) < 0)
        or (isr and min(isr) < 0)
        or (removing and min(removing) < 0)
        or (adding and min(adding) < 0)
        or (elr and min(elr) < 0)
        or (last_known_elr and min(last_known_elr) < 0)
    ):
        for field in _PARTITION_ID_LISTS:
            _broker_ids(field, getattr(record, field))
    if record.leader_recovery_state not in RECOVERY_STATE_OF:
        _enum(LeaderRecoveryState, "leader_recovery_state", int(record.leader_recovery_state))
    if record.leader_epoch < 0 or record.partition_epoch < 0:
        raise _Invalid(
            f"negative epoch: leader_epoch {record.leader_epoch}, "
            f"partition_epoch {record.partition_epoch}"
        )


def _check_partition_change(record: PartitionChangeRecord) -> None:
    _partition_fields(record.partition_id, record.leader, LEADER_UNCHANGED)
    for field in _PARTITION_ID_LISTS:
        values = getattr(record, field)
        if values and min(values) < 0:
            _broker_ids(field, values)
    recovery = record.leader_recovery_state
    if recovery != RECOVERY_STATE_UNCHANGED and recovery not in RECOVERY_STATE_OF:
        _enum(LeaderRecoveryState, "leader_recovery_state", recovery)


def _check_config(record: ConfigRecord) -> None:
    _enum(ConfigResourceType, "resource_type", int(record.resource_type))


def _check_feature_level(record: FeatureLevelRecord) -> None:
    if not 0 <= record.feature_level <= INT16_MAX:
        raise _Invalid(f"feature {record.name!r} level {record.feature_level} not in 0..32767")


def _check_access_control_entry(record: AccessControlEntryRecord) -> None:
    codes: tuple[tuple[str, int, frozenset[IntEnum]], ...] = (
        ("resource_type", record.resource_type, STORED_RESOURCE_TYPES),
        ("pattern_type", record.pattern_type, STORED_PATTERN_TYPES),
        ("operation", record.operation, STORED_OPERATIONS),
        ("permission_type", record.permission_type, STORED_PERMISSION_TYPES),
    )
    for field, value, stored in codes:
        if value not in stored:
            known = ", ".join(str(int(v)) for v in sorted(stored))
            raise _Invalid(f"{field} {int(value)} is not one of {known}")
    if not record.resource_name:
        raise _Invalid("resource_name is empty")
    if ":" not in record.principal:
        raise _Invalid(f"principal {record.principal!r} is not Type:name")


def _check_scram_mechanism(code: int) -> int:
    """The digest size of mechanism `code`."""
    mechanism = MECHANISM_BY_CODE.get(code)
    if mechanism is None:
        raise _Invalid(f"mechanism {code} is not one of {', '.join(map(str, MECHANISM_BY_CODE))}")
    return mechanism.digest_size


def _check_user_scram_credential(record: UserScramCredentialRecord) -> None:
    size = _check_scram_mechanism(record.mechanism)
    for field in ("stored_key", "server_key"):
        if len(getattr(record, field)) != size:
            raise _Invalid(f"{field} of user {record.name!r} is not {size} bytes")
    if not record.salt:
        raise _Invalid(f"salt of user {record.name!r} is empty")
    if not MIN_ITERATIONS <= record.iterations <= MAX_ITERATIONS:
        raise _Invalid(
            f"iterations {record.iterations} of user {record.name!r} not in "
            f"{MIN_ITERATIONS}..{MAX_ITERATIONS}"
        )


def _check_remove_user_scram_credential(record: RemoveUserScramCredentialRecord) -> None:
    _check_scram_mechanism(record.mechanism)


# Record type -> its rules (the kinds not named have none beyond protobuf's).
_CHECKS: dict[type, Callable[[Any], None]] = {
    RegisterBrokerRecord: _check_register_broker,
    UnregisterBrokerRecord: _check_unregister_broker,
    ProducerIdsRecord: _check_producer_ids,
    BrokerRegistrationChangeRecord: _check_broker_registration_change,
    PartitionRecord: _check_partition,
    PartitionChangeRecord: _check_partition_change,
    ConfigRecord: _check_config,
    FeatureLevelRecord: _check_feature_level,
    AccessControlEntryRecord: _check_access_control_entry,
    UserScramCredentialRecord: _check_user_scram_credential,
    RemoveUserScramCredentialRecord: _check_remove_user_scram_credential,
}


def _int16(field: str, value: int) -> None:
    if not INT16_MIN <= value <= INT16_MAX:
        raise _Invalid(f"{field} {value} does not fit in int16")


def _broker_id(field: str, value: int) -> None:
    if value < 0:
        raise _Invalid(f"{field} {value} is negative")


def _broker_ids(field: str, values: tuple[int, ...]) -> None:
    negative = [v for v in values if v < 0]
    if negative:
        raise _Invalid(f"{field} {list(values)} holds negative broker ids {negative}")


def _partition_fields(partition_id: int, leader: int, lowest_leader: int) -> None:
    if partition_id < 0:
        raise _Invalid(f"partition_id {partition_id} is negative")
    if leader < lowest_leader:
        raise _Invalid(f"leader {leader} is neither a broker id nor {lowest_leader}")
