"""Group membership records of `__consumer_offsets`: Kafka's GroupMetadataKey v2 and
GroupMetadataValue v0 to v3, byte for byte."""

from __future__ import annotations

import struct

import pytest

from replog.coordinator.group_records import (
    GroupMetadataValue,
    MemberMetadata,
    decode_group_value,
    encode_group_key,
    encode_group_value,
)
from replog.coordinator.offsets_records import GroupMetadataKey, decode_key
from replog.errors import CorruptRecordError

MEMBER = MemberMetadata("c-1", "i1", "c", "/10.0.0.1", 30000, 10000, b"\x00\x01", b"\x02")
VALUE = GroupMetadataValue("consumer", 3, "range", "c-1", 1700000000000, (MEMBER,))


def _s(text: str | None) -> bytes:
    if text is None:
        return struct.pack(">h", -1)
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def _b(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def _value(version: int) -> bytes:
    """VALUE as Kafka writes it in `version`, field by field from the schema."""
    parts = [struct.pack(">h", version), _s("consumer"), struct.pack(">i", 3), _s("range")]
    parts.append(_s("c-1"))
    if version >= 2:
        parts.append(struct.pack(">q", 1700000000000))
    parts.append(struct.pack(">i", 1))
    parts.append(_s("c-1"))
    if version >= 3:
        parts.append(_s("i1"))
    parts += [_s("c"), _s("/10.0.0.1")]
    if version >= 1:
        parts.append(struct.pack(">i", 30000))
    parts += [struct.pack(">i", 10000), _b(b"\x00\x01"), _b(b"\x02")]
    return b"".join(parts)


def test_key_is_version_2_and_the_group() -> None:
    key = encode_group_key(GroupMetadataKey("g"))
    assert key == bytes.fromhex("0002 0001 67")
    assert decode_key(key) == GroupMetadataKey("g")


def test_value_is_written_as_version_3() -> None:
    assert encode_group_value(VALUE) == _value(3)
    assert decode_group_value(encode_group_value(VALUE)) == VALUE


def test_an_empty_group_has_null_protocol_and_leader() -> None:
    empty = GroupMetadataValue("consumer", 4, None, None, -1, ())
    data = encode_group_value(empty)
    assert data == bytes.fromhex("0003 0008 636f6e73756d6572 00000004 ffff ffff") + (
        struct.pack(">q", -1) + bytes(4)
    )
    assert decode_group_value(data) == empty


@pytest.mark.parametrize("version", [0, 1, 2])
def test_older_versions_decode_with_kafkas_defaults(version: int) -> None:
    value = decode_group_value(_value(version))
    member = value.members[0]
    assert member.group_instance_id is None
    assert member.session_timeout_ms == 10000
    # v0 has no rebalance timeout: the session timeout stands in, as Kafka loads it.
    assert member.rebalance_timeout_ms == (30000 if version >= 1 else 10000)
    assert value.current_state_timestamp_ms == (1700000000000 if version >= 2 else -1)
    assert (member.subscription, member.assignment) == (b"\x00\x01", b"\x02")


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (_value(3)[:-1], "end inside member 0's assignment"),
        (_value(3) + b"\x00", "1 bytes left"),
        (struct.pack(">h", 4) + _value(3)[2:], "unknown value version 4"),
        (
            _value(3)[:2] + _s("consumer") + struct.pack(">i", 1) + struct.pack(">h", -2),
            "length -2",
        ),
        (
            _value(3)[:2]
            + _s("consumer")
            + struct.pack(">i", 1)
            + _s(None) * 2
            + struct.pack(">q", 0)
            + struct.pack(">i", -1),
            "member count -1",
        ),
    ],
)
def test_bad_bytes_name_the_problem(data: bytes, problem: str) -> None:
    with pytest.raises(CorruptRecordError, match=problem):
        decode_group_value(data)


def test_values_that_do_not_fit_are_refused() -> None:
    with pytest.raises(ValueError, match="generation"):
        encode_group_value(GroupMetadataValue("consumer", 1 << 31, None, None, -1, ()))
    with pytest.raises(ValueError, match="member id"):
        encode_group_value(
            GroupMetadataValue(
                "consumer",
                1,
                "range",
                None,
                -1,
                (MemberMetadata("x" * 40000, None, "c", "h", 1, 1, b"", b""),),
            )
        )
