"""The `__consumer_offsets` record codec: Kafka's byte layouts, checked against hand-computed
vectors and against kafka-python's protocol types (an independent encoder of Kafka's STRING,
INT16/32/64), every older value version decodes, and garbage is a typed error."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.protocol.old import types as kafka_types  # kafka-python: a dev dependency

from replog.coordinator.offsets_records import (
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from replog.errors import CorruptRecordError

T0 = 1_700_000_000_000


def test_key_is_kafkas_version_1_layout_byte_for_byte() -> None:
    data = encode_key(OffsetCommitKey("g", "t", 0))
    assert data.hex() == "0001" + "0001" + "67" + "0001" + "74" + "00000000"


def test_value_is_kafkas_version_3_layout_byte_for_byte() -> None:
    data = encode_value(OffsetCommitValue(5, -1, "", T0))
    assert data.hex() == "0003" + "0000000000000005" + "ffffffff" + "0000" + "0000018bcfe56800"


def test_a_longer_vector_with_utf8_and_negative_numbers() -> None:
    key = OffsetCommitKey("grüppe", "orders", 2**31 - 1)
    assert encode_key(key) == (
        b"\x00\x01" + b"\x00\x07gr\xc3\xbcppe" + b"\x00\x06orders" + b"\x7f\xff\xff\xff"
    )
    value = OffsetCommitValue(2**63 - 1, 7, "meta", -1)
    assert encode_value(value) == (
        b"\x00\x03"
        + b"\x7f\xff\xff\xff\xff\xff\xff\xff"
        + b"\x00\x00\x00\x07"
        + b"\x00\x04meta"
        + b"\xff" * 8
    )


KEY_SCHEMA = kafka_types.Schema(
    ("version", kafka_types.Int16),
    ("group", kafka_types.String("utf-8")),
    ("topic", kafka_types.String("utf-8")),
    ("partition", kafka_types.Int32),
)
VALUE_SCHEMA_V3 = kafka_types.Schema(
    ("version", kafka_types.Int16),
    ("offset", kafka_types.Int64),
    ("leader_epoch", kafka_types.Int32),
    ("metadata", kafka_types.String("utf-8")),
    ("commit_timestamp", kafka_types.Int64),
)

names = st.text(min_size=0, max_size=40)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)


@given(group=names, topic=names, partition=int32)
def test_keys_match_kafka_pythons_encoder_and_round_trip(
    group: str, topic: str, partition: int
) -> None:
    key = OffsetCommitKey(group, topic, partition)
    data = encode_key(key)
    assert data == KEY_SCHEMA.encode((1, group, topic, partition))
    assert decode_key(data) == key


@given(offset=int64, leader_epoch=int32, metadata=names, timestamp=int64)
def test_values_match_kafka_pythons_encoder_and_round_trip(
    offset: int, leader_epoch: int, metadata: str, timestamp: int
) -> None:
    value = OffsetCommitValue(offset, leader_epoch, metadata, timestamp)
    data = encode_value(value)
    assert data == VALUE_SCHEMA_V3.encode((3, offset, leader_epoch, metadata, timestamp))
    assert decode_value(data) == value


def _string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def test_key_version_0_reads_like_version_1_and_version_2_is_group_metadata() -> None:
    v0 = b"\x00\x00" + _string("g") + _string("t") + struct.pack(">i", 3)
    assert decode_key(v0) == OffsetCommitKey("g", "t", 3)
    assert decode_key(b"\x00\x02" + _string("g")) == GroupMetadataKey("g")


def test_every_older_value_version_decodes() -> None:
    v0 = struct.pack(">hq", 0, 11) + _string("m0") + struct.pack(">q", T0)
    v1 = struct.pack(">hq", 1, 12) + _string("m1") + struct.pack(">qq", T0, T0 + 1)
    v2 = struct.pack(">hq", 2, 13) + _string("m2") + struct.pack(">q", T0)
    assert decode_value(v0) == OffsetCommitValue(11, -1, "m0", T0)
    assert decode_value(v1) == OffsetCommitValue(12, -1, "m1", T0)
    assert decode_value(v2) == OffsetCommitValue(13, -1, "m2", T0)


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"", "end inside the key version"),
        (b"\x00\x01\x00\x05ab", "end inside the group id"),
        (b"\x00\x01\xff\xff", "has length -1"),
        (b"\x00\x01" + _string("g") + _string("t"), "end inside partition"),
        (b"\x00\x01" + _string("g") + _string("t") + b"\x00\x00\x00\x00\x00", "1 bytes left"),
        (b"\x00\x01\x00\x01\xff" + _string("t") + b"\x00" * 4, "not UTF-8"),
        (b"\x00\x03" + _string("g"), "unknown key version 3"),
    ],
)
def test_garbage_keys_are_corrupt_records_naming_the_problem(data: bytes, problem: str) -> None:
    with pytest.raises(CorruptRecordError, match=problem):
        decode_key(data)


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"\x00\x04" + b"\x00" * 30, "unknown value version 4"),
        (b"\xff\xff", "unknown value version -1"),
        (b"\x00\x03" + b"\x00" * 8, "end inside the leader epoch"),
        (encode_value(OffsetCommitValue(1, 1, "x", 1)) + b"\x00", "1 bytes left"),
    ],
)
def test_garbage_values_are_corrupt_records_naming_the_problem(data: bytes, problem: str) -> None:
    with pytest.raises(CorruptRecordError, match=problem):
        decode_value(data)


def test_what_cannot_be_encoded_is_refused_naming_the_field() -> None:
    with pytest.raises(ValueError, match="metadata is 32768 UTF-8 bytes"):
        encode_value(OffsetCommitValue(0, -1, "x" * 32768, 0))
    with pytest.raises(ValueError, match="partition 2147483648 does not fit in 32 bits"):
        encode_key(OffsetCommitKey("g", "t", 2**31))
    # The longest string Kafka's STRING holds still encodes.
    assert decode_value(encode_value(OffsetCommitValue(0, -1, "y" * 32767, 0))).metadata == (
        "y" * 32767
    )
