"""The metadata record codec: exact round trips for every record kind, "absent means unchanged"
kept apart from empty, and typed errors naming what is wrong in malformed bytes."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from metadata_strategies import STRATEGIES, any_record

from replog.errors import CorruptMetadataRecordError, CorruptRecordError
from replog.pb import metadata_pb2 as pb
from replog.quorum.metadata.record_codec import decode_record, encode_record
from replog.quorum.metadata.records import (
    API_KEYS,
    LEADER_UNCHANGED,
    NO_LEADER,
    RECOVERY_STATE_UNCHANGED,
    ConfigRecord,
    ConfigResourceType,
    Endpoint,
    FeatureLevelRecord,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)

TOPIC_ID = UUID("00000000-0000-0000-0000-00000000000a")
ACL_FIELDS: dict[str, Any] = dict(
    id=TOPIC_ID.bytes,
    resource_type=2,
    resource_name="orders",
    pattern_type=3,
    principal="User:alice",
    host="*",
    operation=3,
    permission_type=3,
)
SCRAM_FIELDS: dict[str, Any] = dict(
    name="alice",
    mechanism=1,
    salt=b"s",
    stored_key=bytes(32),
    server_key=bytes(32),
    iterations=4096,
)


def acl(**changes: Any) -> pb.AccessControlEntryRecord:
    """A valid AccessControlEntryRecord message but for `changes`."""
    return pb.AccessControlEntryRecord(**{**ACL_FIELDS, **changes})


def scram(**changes: Any) -> pb.UserScramCredentialRecord:
    """A valid UserScramCredentialRecord message but for `changes`."""
    return pb.UserScramCredentialRecord(**{**SCRAM_FIELDS, **changes})


@pytest.mark.parametrize("record_type", list(STRATEGIES), ids=lambda t: t.__name__)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_every_record_kind_round_trips(record_type: type, data: st.DataObject) -> None:
    record = data.draw(STRATEGIES[record_type])
    decoded = decode_record(encode_record(record))
    assert decoded == record
    assert type(decoded) is record_type


def test_every_record_kind_has_a_strategy_and_an_api_key() -> None:
    assert set(STRATEGIES) == set(API_KEYS)


@pytest.mark.parametrize("record_type", list(STRATEGIES), ids=lambda t: t.__name__)
@settings(max_examples=5, deadline=None)
@given(data=st.data())
def test_the_oneof_field_number_is_the_kafka_api_key_plus_one(
    record_type: type, data: st.DataObject
) -> None:
    encoded = encode_record(data.draw(STRATEGIES[record_type]))
    (field, _), *_ = pb.MetadataRecord.FromString(encoded).ListFields()
    assert field.number == API_KEYS[record_type] + 1


def test_worked_example_of_the_module_docstring() -> None:
    assert encode_record(NoOpRecord()) == b"\xaa\x01\x00"
    assert decode_record(b"\xaa\x01\x00") == NoOpRecord()


def test_absent_and_empty_lists_stay_apart() -> None:
    unchanged = PartitionChangeRecord(TOPIC_ID, 0)
    emptied = PartitionChangeRecord(
        TOPIC_ID, 0, isr=(), replicas=(), removing_replicas=(), adding_replicas=()
    )
    assert decode_record(encode_record(unchanged)) == unchanged
    assert decode_record(encode_record(emptied)) == emptied
    assert encode_record(unchanged) != encode_record(emptied)


@pytest.mark.parametrize("leader", [LEADER_UNCHANGED, NO_LEADER, 0, 7])
@pytest.mark.parametrize("recovery", [RECOVERY_STATE_UNCHANGED, 0, 1])
def test_leader_and_recovery_sentinels_survive_next_to_broker_zero(
    leader: int, recovery: int
) -> None:
    # Broker 0 and state 0 are proto3 defaults: only presence keeps them apart from "unchanged".
    record = PartitionChangeRecord(TOPIC_ID, 0, leader=leader, leader_recovery_state=recovery)
    assert decode_record(encode_record(record)) == record


def test_null_rack_and_null_config_value_differ_from_empty_strings() -> None:
    incarnation = UUID(int=1)
    for rack in (None, ""):
        record = RegisterBrokerRecord(1, incarnation, 5, rack=rack)
        assert decode_record(encode_record(record)).rack == rack  # type: ignore[union-attr]
    for value in (None, ""):
        config = ConfigRecord(ConfigResourceType.TOPIC, "orders", "retention.ms", value)
        assert decode_record(encode_record(config)) == config


# --- malformed bytes -------------------------------------------------------------------------


def corrupt(data: bytes) -> str:
    with pytest.raises(CorruptMetadataRecordError) as caught:
        decode_record(data)
    return str(caught.value)


def test_the_error_is_a_corrupt_record_error_that_is_not_retriable() -> None:
    assert issubclass(CorruptMetadataRecordError, CorruptRecordError)
    assert CorruptMetadataRecordError.code == CorruptRecordError.code
    assert not CorruptMetadataRecordError.retriable


def test_bytes_that_are_not_protobuf() -> None:
    assert "not a valid MetadataRecord message" in corrupt(b"\xff")


def test_a_string_that_is_not_utf8() -> None:
    inner = b"\x0a\x02\xff\xfe"  # TopicRecord.name: two bytes that are not UTF-8
    assert "bad UTF-8" in corrupt(b"\x1a" + bytes([len(inner)]) + inner)


def test_no_record_at_all() -> None:
    assert "no record at all" in corrupt(b"")


def test_a_record_kind_this_version_does_not_know() -> None:
    # Field 15 (api key 14, ClientQuotaRecord in Kafka), empty message.
    message = corrupt(b"\x7a\x00")
    assert "does not know" in message
    assert "api keys [14]" in message


@settings(max_examples=60, deadline=None)
@given(record=any_record, data=st.data())
def test_every_strict_prefix_of_a_record_is_corrupt(
    record: MetadataRecord, data: st.DataObject
) -> None:
    encoded = encode_record(record)
    cut = data.draw(st.integers(0, len(encoded) - 1))
    corrupt(encoded[:cut])


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=64))
def test_random_bytes_decode_or_raise_the_typed_error(data: bytes) -> None:
    try:
        record = decode_record(data)
    except CorruptMetadataRecordError:
        return
    assert decode_record(encode_record(record)) == record


def wire(**record: Any) -> bytes:
    data: bytes = pb.MetadataRecord(**record).SerializeToString()
    return data


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            wire(topic=pb.TopicRecord(name="t", topic_id=b"x" * 15)),
            "topic: topic_id must be 16 bytes, got 15",
        ),
        (
            wire(remove_topic=pb.RemoveTopicRecord()),
            "remove_topic: topic_id must be 16 bytes, got 0",
        ),
        (
            wire(register_broker=pb.RegisterBrokerRecord(broker_id=1, incarnation_id=b"")),
            "incarnation_id must be 16 bytes",
        ),
        (
            wire(config=pb.ConfigRecord(resource_type=3, name="k")),
            "config: resource_type 3 is not one of 2, 4",
        ),
        (
            wire(
                broker_registration_change=pb.BrokerRegistrationChangeRecord(broker_id=1, fenced=2)
            ),
            "fenced 2 is not one of -1, 0, 1",
        ),
        (
            wire(partition=pb.PartitionRecord(topic_id=TOPIC_ID.bytes, leader=-3)),
            "partition: leader -3",
        ),
        (
            wire(partition=pb.PartitionRecord(topic_id=TOPIC_ID.bytes, replicas=[1, -4])),
            "replicas [1, -4] holds negative broker ids [-4]",
        ),
        (
            wire(partition=pb.PartitionRecord(topic_id=TOPIC_ID.bytes, partition_id=-1)),
            "partition_id -1 is negative",
        ),
        (
            wire(partition=pb.PartitionRecord(topic_id=TOPIC_ID.bytes, leader_recovery_state=5)),
            "leader_recovery_state 5 is not one of 0, 1",
        ),
        (
            wire(
                partition_change=pb.PartitionChangeRecord(
                    topic_id=TOPIC_ID.bytes, leader_recovery_state=-1
                )
            ),
            "leader_recovery_state -1 is not one of 0, 1",
        ),
        (
            wire(feature_level=pb.FeatureLevelRecord(name="metadata.version", feature_level=40000)),
            "feature 'metadata.version' level 40000 not in 0..32767",
        ),
        (
            wire(
                register_broker=pb.RegisterBrokerRecord(
                    incarnation_id=TOPIC_ID.bytes,
                    endpoints=[pb.MetadataEndpoint(name="PLAINTEXT", port=70000)],
                )
            ),
            "endpoint 'PLAINTEXT' port 70000 not in 0..65535",
        ),
        (wire(access_control_entry=acl(id=b"")), "id must be 16 bytes, got 0"),
        (
            wire(access_control_entry=acl(resource_type=1)),
            "access_control_entry: resource_type 1 is not one of 2, 3, 4, 5, 6, 7",
        ),
        (
            wire(access_control_entry=acl(resource_type=9)),
            "resource_type 9 is not one of 0, 1, 2, 3, 4, 5, 6, 7",
        ),
        (
            wire(access_control_entry=acl(pattern_type=2)),
            "pattern_type 2 is not one of 3, 4",
        ),
        (wire(access_control_entry=acl(operation=1)), "operation 1 is not one of 2, 3,"),
        (
            wire(access_control_entry=acl(permission_type=0)),
            "permission_type 0 is not one of 2, 3",
        ),
        (wire(access_control_entry=acl(resource_name="")), "resource_name is empty"),
        (
            wire(access_control_entry=acl(principal="alice")),
            "principal 'alice' is not Type:name",
        ),
        (
            wire(user_scram_credential=scram(mechanism=3)),
            "user_scram_credential: mechanism 3 is not one of 1, 2",
        ),
        (
            wire(user_scram_credential=scram(stored_key=bytes(64))),
            "stored_key of user 'alice' is not 32 bytes",
        ),
        (wire(user_scram_credential=scram(salt=b"")), "salt of user 'alice' is empty"),
        (
            wire(user_scram_credential=scram(iterations=4095)),
            "iterations 4095 of user 'alice' not in 4096..16384",
        ),
        (
            wire(remove_user_scram_credential=pb.RemoveUserScramCredentialRecord(name="a")),
            "remove_user_scram_credential: mechanism 0 is not one of 1, 2",
        ),
    ],
)
def test_invalid_fields_are_named(data: bytes, expected: str) -> None:
    assert expected in corrupt(data)


def test_unknown_fields_inside_a_known_record_are_ignored() -> None:
    # A newer writer may add fields; field 15 of TopicRecord does not exist here.
    inner = pb.TopicRecord(name="orders", topic_id=TOPIC_ID.bytes).SerializeToString()
    inner += b"\x78\x01"  # field 15, varint 1
    data = b"\x1a" + bytes([len(inner)]) + inner  # MetadataRecord field 3 (topic)
    assert decode_record(data) == TopicRecord("orders", TOPIC_ID)


# --- encoding refuses what decoding would refuse ---------------------------------------------


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        (PartitionRecord(TOPIC_ID, 0, (1,), (1,), leader=-5), "leader -5"),
        (PartitionRecord(TOPIC_ID, -1, (1,), (1,)), "partition_id -1 is negative"),
        (FeatureLevelRecord("metadata.version", -1), "level -1 not in 0..32767"),
        (
            RegisterBrokerRecord(1, UUID(int=1), 0, endpoints=(Endpoint("A", "h", 65536),)),
            "port 65536",
        ),
        (PartitionChangeRecord(TOPIC_ID, 0, leader_recovery_state=4), "leader_recovery_state 4"),
    ],
)
def test_encoding_an_invalid_record_raises_value_error(
    record: MetadataRecord, expected: str
) -> None:
    with pytest.raises(ValueError, match=expected):
        encode_record(record)


def test_encoding_something_else_raises_type_error() -> None:
    with pytest.raises(TypeError, match="not a metadata record"):
        encode_record("TopicRecord")  # type: ignore[arg-type]
