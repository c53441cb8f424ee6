"""`replog.wire.record_wire` against protobuf's own serialization and parse.

- join: for random FetchResponse messages, joining each partition's records
  into the message serialized without them parses (protobuf) to the message with them.
- split: the skeleton parses to the message without records, the records are the partitions'
  own in wire order, views of the bytes given (no copy); split then join gives the message
  back; a holder whose records field comes twice keeps the last, as protobuf does; unknown
  fields, groups and a path field of another wire type stay in the skeleton for protobuf.
- Malformed bytes (truncated, mutated) either split to what protobuf parses or raise
  protobuf's DecodeError, never anything else; each refusal names its byte.
"""

from __future__ import annotations

import pytest
from google.protobuf.message import DecodeError
from hypothesis import given, settings
from hypothesis import strategies as st

from replog.pb import broker_pb2 as pb
from replog.wire import broker_codec as codec
from replog.wire.record_wire import join_records, split_records, varint
from tests.wire.broker_message_strategies import fetch_responses

FETCH_PATH = codec.FETCH_RECORDS_PATH  # FetchResponse.topics -> partitions -> records


def _holders(message: pb.FetchResponse) -> list[object]:
    return [p for t in message.topics for p in t.partitions]


def _without_records(message: pb.FetchResponse) -> tuple[object, list[bytes]]:
    bare = type(message)()
    bare.CopyFrom(message)
    records = []
    for p in _holders(bare):
        records.append(p.records)  # type: ignore[attr-defined]
        p.records = b""  # type: ignore[attr-defined]
    return bare, records


@settings(max_examples=150, deadline=None)
@given(message=fetch_responses())
def test_join_parses_to_the_message_with_its_records(message: pb.FetchResponse) -> None:
    path = FETCH_PATH
    bare, records = _without_records(message)
    joined = join_records(bare.SerializeToString(), path, records)  # type: ignore[attr-defined]
    assert type(message).FromString(joined) == message
    assert len(joined) == message.ByteSize()


@settings(max_examples=150, deadline=None)
@given(message=fetch_responses())
def test_split_gives_the_skeleton_and_the_records_as_views(message: pb.FetchResponse) -> None:
    path = FETCH_PATH
    serialized = message.SerializeToString()
    skeleton, records = split_records(serialized, path)
    bare, expected = _without_records(message)
    assert type(message).FromString(skeleton) == bare
    assert [bytes(r) for r in records] == expected
    for view in records:
        assert view.obj is serialized and view.readonly  # a view, not a copy
    assert type(message).FromString(join_records(skeleton, path, records)) == message


def test_a_repeated_records_field_keeps_the_last_and_unknown_fields_stay() -> None:
    partition = (
        pb.FetchPartitionResponse(partition=4).SerializeToString()
        + b"\x42\x03old"  # records (8), then again: protobuf keeps the last
        + b"\xf8\x01\x07"  # unknown varint field 31
        + b"\x42\x03new"
        + b"\x13\x08\x01\x14"  # a group (field 2, wire type 3) holding a varint: unknown
    )
    topic = pb.FetchTopicResponse(topic="t").SerializeToString() + b"\x1a" + varint(len(partition))
    topic += partition
    data = b"\x0a" + varint(len(topic)) + topic
    parsed = pb.FetchResponse.FromString(data)
    skeleton, records = split_records(data, FETCH_PATH)
    assert [bytes(r) for r in records] == [parsed.topics[0].partitions[0].records] == [b"new"]
    bare = pb.FetchResponse.FromString(skeleton)
    assert bare.topics[0].partitions[0].partition == 4
    assert bare.topics[0].partitions[0].records == b""
    assert b"\xf8\x01\x07" in skeleton and b"\x13\x08\x01\x14" in skeleton


def test_a_path_field_of_another_wire_type_is_left_to_protobuf() -> None:
    # topics (1) as a varint: protobuf keeps it as an unknown field, and so does the split.
    data = b"\x08\x05"
    skeleton, records = split_records(data, FETCH_PATH)
    assert skeleton == data and records == []
    assert pb.FetchResponse.FromString(skeleton) == pb.FetchResponse.FromString(data)


@pytest.mark.parametrize(
    ("data", "named"),
    [
        (b"\x0a\x05\x0a\x01", "past the end"),  # a topic of 5 bytes, 3 given
        (b"\x0a\x02\x12\x80", "varint at byte 3"),  # a truncated length
        (b"\x0a\x02\x00\x00", "invalid tag 0 at byte 2"),
        (b"\x0a\x01\x0f", "reserved wire type 7"),
        (b"\x0a\x01\x0c", "end-group tag of field 1 at byte 2"),
        (b"\x0a\x02\x0b\x00", "invalid tag 0"),
        (b"\x0a\x01\x0b", "never ends"),
        (b"\x0a\x02\x0b\x14", "ended by field 2"),
        (b"\x0a\x0b" + b"\xff" * 11, "varint at byte 2"),
        (b"\x0a\x02\x15\x00", "needs 4 bytes"),
    ],
)
def test_malformed_bytes_raise_decode_error_naming_the_byte(data: bytes, named: str) -> None:
    with pytest.raises(DecodeError, match=named):
        split_records(data, FETCH_PATH)
    with pytest.raises(DecodeError):
        pb.FetchResponse.FromString(data)


def test_groups_nested_past_protobufs_limit_are_malformed_not_a_stack_overflow() -> None:
    # Field 9 (unknown) opening 5,000 groups inside one another: what a client can send.
    data = bytes([(9 << 3) | 3]) * 5_000
    with pytest.raises(DecodeError, match="nests deeper than 100 groups"):
        split_records(data, FETCH_PATH)
    # Within the limit a nested group is skipped as protobuf skips it.
    nested = bytes([(9 << 3) | 3]) * 50 + bytes([(9 << 3) | 4]) * 50
    skeleton, _ = split_records(nested, FETCH_PATH)
    assert pb.FetchResponse.FromString(skeleton) == pb.FetchResponse.FromString(nested)


@settings(max_examples=300, deadline=None)
@given(
    message=fetch_responses(),
    cut=st.integers(0, 400),
    flips=st.lists(st.tuples(st.integers(0, 400), st.integers(0, 255)), max_size=3),
)
def test_damaged_bytes_split_as_protobuf_parses_or_raise_decode_error(
    message: pb.FetchResponse, cut: int, flips: list[tuple[int, int]]
) -> None:
    data = bytearray(message.SerializeToString()[: cut or None])
    for at, value in flips:
        if at < len(data):
            data[at] = value
    raw = bytes(data)
    try:
        skeleton, records = split_records(raw, FETCH_PATH)
    except DecodeError:
        return  # protobuf may or may not refuse these: the split never reads past them
    try:
        expected = pb.FetchResponse.FromString(raw)
    except DecodeError:
        with pytest.raises(DecodeError):  # then the skeleton keeps what protobuf refuses
            pb.FetchResponse.FromString(skeleton)
        return
    assert pb.FetchResponse.FromString(join_records(skeleton, FETCH_PATH, records)) == expected


def test_join_needs_one_entry_per_holder() -> None:
    skeleton = pb.FetchResponse(
        topics=[pb.FetchTopicResponse(partitions=[pb.FetchPartitionResponse()] * 2)]
    ).SerializeToString()
    with pytest.raises(ValueError, match="fewer records than holders"):
        join_records(skeleton, FETCH_PATH, [b"a"])
    with pytest.raises(ValueError, match="3 records for 2 holders"):
        join_records(skeleton, FETCH_PATH, [b"a", b"b", b"c"])
