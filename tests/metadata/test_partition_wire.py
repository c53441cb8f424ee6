"""The partition records' bytes put together by hand are protobuf's own, byte for byte, and
read by hand they are the record protobuf reads, or left to protobuf."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from metadata_strategies import (
    partition,
    partition_change,
    partition_change_records,
    partition_records,
)

from replog.errors import CorruptMetadataRecordError
from replog.pb import metadata_pb2 as pb
from replog.quorum.metadata.partition_wire import (
    partition_change_record_bytes,
    partition_record_bytes,
    read_partition_change_record,
    read_partition_record,
)
from replog.quorum.metadata.record_codec import _ENCODERS, _decode_with_protobuf, decode_record
from replog.quorum.metadata.records import (
    PartitionChangeRecord,
    PartitionRecord,
)

# Broker ids around the one-byte varint's end, where the packed lists change form.
SMALL_IDS = st.lists(st.integers(0, 300), max_size=5).map(tuple)
SMALL_INT = st.integers(0, 300)

small_partition = partition_records(SMALL_IDS, SMALL_INT)
small_partition_change = partition_change_records(SMALL_IDS, SMALL_INT)


def protobuf_bytes(record: Any) -> bytes:
    field, build = _ENCODERS[type(record)]
    data: bytes = pb.MetadataRecord(**{field: build(record)}).SerializeToString()
    return data


@settings(max_examples=400, deadline=None)
@given(record=partition | small_partition)
def test_a_partition_record_is_protobufs_bytes(record: PartitionRecord) -> None:
    assert partition_record_bytes(record) == protobuf_bytes(record)


@settings(max_examples=400, deadline=None)
@given(record=partition_change | small_partition_change)
def test_a_partition_change_record_is_protobufs_bytes(record: PartitionChangeRecord) -> None:
    assert partition_change_record_bytes(record) == protobuf_bytes(record)


def test_a_new_partitions_record_as_the_controller_writes_it() -> None:
    topic_id = UUID(int=7)
    record = PartitionRecord(topic_id, 3, (1, 2, 3), (1, 2, 3), 1)
    assert partition_record_bytes(record) == (
        b"\x22\x20\x0a\x10" + topic_id.bytes + b"\x10\x03\x1a\x03\x01\x02\x03\x22\x03\x01\x02\x03"
        b"\x28\x01"
    )


@settings(max_examples=300, deadline=None)
@given(record=partition | small_partition)
def test_a_partition_record_is_read_back_by_hand(record: PartitionRecord) -> None:
    assert read_partition_record(partition_record_bytes(record), UUID_OF) == record


@settings(max_examples=300, deadline=None)
@given(record=partition_change | small_partition_change)
def test_a_partition_change_record_is_read_back_by_hand(record: PartitionChangeRecord) -> None:
    assert read_partition_change_record(partition_change_record_bytes(record), UUID_OF) == record


def UUID_OF(raw: bytes) -> UUID:
    return UUID(bytes=raw)


def decoded_by(decode: Any, data: bytes) -> object:
    """The record, or the type of the error."""
    try:
        return decode(data)
    except CorruptMetadataRecordError:
        return CorruptMetadataRecordError


edits = st.lists(
    st.tuples(
        st.sampled_from(["set", "insert", "delete"]), st.integers(0, 80), st.integers(0, 255)
    ),
    min_size=1,
    max_size=4,
)


def edited(data: bytes, changes: list[tuple[str, int, int]]) -> bytes:
    out = bytearray(data)
    for what, where, byte in changes:
        where %= len(out) + 1
        if what == "insert":
            out[where:where] = bytes((byte,))
        elif out and where < len(out):
            if what == "set":
                out[where] = byte
            else:
                del out[where]
    return bytes(out)


@settings(max_examples=1500, deadline=None)
@given(
    record=partition | small_partition | partition_change | small_partition_change,
    changes=edits,
    cut=st.none() | st.integers(0, 80),
)
def test_edited_bytes_decode_as_protobuf_decodes_them(
    record: PartitionRecord | PartitionChangeRecord,
    changes: list[tuple[str, int, int]],
    cut: int | None,
) -> None:
    data = edited(protobuf_bytes(record), changes)[:cut]
    assert decoded_by(decode_record, data) == decoded_by(_decode_with_protobuf, data)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x22",
        b"\x22\x00",
        b"\x32\x00",
        # fields out of order, repeated, unknown, unpacked, a list element that is -1
        b"\x22\x14\x10\x01\x0a\x10" + bytes(16),
        b"\x22\x16\x0a\x10" + bytes(16) + b"\x10\x01\x10\x02",
        b"\x22\x14\x0a\x10" + bytes(16) + b"\x78\x01",
        b"\x22\x16\x0a\x10" + bytes(16) + b"\x18\x01\x18\x02",
        b"\x22\x1e\x0a\x10" + bytes(16) + b"\x1a\x0a" + b"\xff" * 9 + b"\x01",
        # a leader of -2 in a PartitionRecord; an int32 written as 0xffffffff (-1 to protobuf)
        b"\x22\x1c\x0a\x10" + bytes(16) + b"\x28" + b"\xfe" + b"\xff" * 8 + b"\x01",
        b"\x32\x18\x0a\x10" + bytes(16) + b"\x20\xff\xff\xff\xff\x0f",
        # a packed list in two pieces (protobuf joins them)
        b"\x22\x18\x0a\x10" + bytes(16) + b"\x1a\x01\x01\x1a\x01\x02",
        # a BrokerIdList holding an unknown field (a varint; a length-delimited one)
        b"\x32\x16\x0a\x10" + bytes(16) + b"\x1a\x02\x10\x01",
        b"\x32\x17\x0a\x10" + bytes(16) + b"\x1a\x03\x12\x01\x05",
    ],
)
def test_what_the_readers_leave_to_protobuf_decodes_as_protobuf_decodes_it(data: bytes) -> None:
    assert decoded_by(decode_record, data) == decoded_by(_decode_with_protobuf, data)
