"""The Fetch answer's wire walk (`replog.spark.fetch_answer_wire`) against protobuf's own parse.

- For random FetchResponse messages built with the generated classes, the walk gives exactly
  what the parsed message says, and each partition's records are a view of the bytes given
  (no copy).
- For truncated, mutated and concatenated bytes it either agrees with protobuf's parse or
  raises `MalformedFetchAnswerError`: always when protobuf refuses the bytes, and otherwise
  only for the two cases it refuses on purpose (a known field with another wire type, a
  group); it never crashes otherwise nor reads outside the bytes.
- Each kind of malformed input is named: truncated varint, a varint or tag too long, a
  length past the end, field number 0, a wrong or reserved wire type, bad UTF-8.
"""

from __future__ import annotations

import pytest
from google.protobuf.message import DecodeError
from hypothesis import given, settings
from hypothesis import strategies as st

from replog.pb import broker_pb2 as pb
from replog.spark.errors import MalformedFetchAnswerError
from replog.spark.fetch_answer_wire import PartitionAnswer, TopicAnswer, fetch_answer_topics
from tests.wire.broker_message_strategies import INT32, INT64, TEXT, fetch_responses

Row = tuple[object, ...]


def _parsed(message: pb.FetchResponse) -> list[Row]:
    rows: list[Row] = []
    for t in message.topics:
        rows.append(("topic", t.topic, t.topic_id, len(t.partitions)))
        for p in t.partitions:
            error = p.error
            epoch = p.diverging_epoch
            leader = p.current_leader
            rows.append(
                (
                    t.topic,
                    t.topic_id,
                    p.partition,
                    (error.code, error.error_name, error.message) if p.HasField("error") else None,
                    p.high_watermark,
                    p.last_stable_offset,
                    p.log_start_offset,
                    (epoch.leader_epoch, epoch.end_offset)
                    if p.HasField("diverging_epoch")
                    else None,
                    (leader.leader_id, leader.leader_epoch)
                    if p.HasField("current_leader")
                    else None,
                    p.records,
                    p.log_end_offset,
                )
            )
    return rows


def _walked(topics: list[TopicAnswer]) -> list[Row]:
    rows: list[Row] = []
    for t in topics:
        rows.append(("topic", t.topic, t.topic_id, len(t.partitions)))
        rows.extend(_walked_partition(t, a) for a in t.partitions)
    return rows


def _walked_partition(t: TopicAnswer, a: PartitionAnswer) -> Row:
    return (
        t.topic,
        t.topic_id,
        a.partition,
        None if a.error is None else (a.error.code, a.error.error_name, a.error.message),
        a.high_watermark,
        a.last_stable_offset,
        a.log_start_offset,
        a.diverging_epoch,
        a.current_leader,
        bytes(a.records),
        a.log_end_offset,
    )


def _agrees_or_refuses(data: bytes) -> None:
    """The walk of `data` agrees with protobuf's parse, or refuses it with the typed error
    (refusing what protobuf parses only for the cases the walker refuses on purpose)."""
    try:
        expected = _parsed(pb.FetchResponse.FromString(data))
    except DecodeError:
        with pytest.raises(MalformedFetchAnswerError):
            fetch_answer_topics(data)
        return
    try:
        walked = fetch_answer_topics(data)
    except MalformedFetchAnswerError as exc:
        assert "wire type" in str(exc), str(exc)  # stricter on purpose: a wire type only
        return
    assert _walked(walked) == expected


@settings(max_examples=300, deadline=None)
@given(fetch_responses())
def test_the_walk_gives_what_protobuf_parses_and_records_are_views(
    message: pb.FetchResponse,
) -> None:
    data = message.SerializeToString()
    topics = fetch_answer_topics(data)
    assert _walked(topics) == _parsed(message)
    for answer in (p for t in topics for p in t.partitions):
        assert answer.records.obj is data  # a view of the answer, not a copy
    assert _walked(fetch_answer_topics(memoryview(data))) == _parsed(message)


@settings(max_examples=300, deadline=None)
@given(fetch_responses(), fetch_responses())
def test_concatenated_answers_merge_as_protobuf_merges(
    first: pb.FetchResponse, second: pb.FetchResponse
) -> None:
    # Repeated fields append; at the partition level the same holds for sub-messages.
    _agrees_or_refuses(first.SerializeToString() + second.SerializeToString())


@st.composite
def _partition_pieces(draw: st.DrawFn) -> bytes:
    """One topic with one partition built of fields in any order, some repeated: last scalar
    wins, messages merge, unknown fields are skipped."""
    pieces: list[bytes] = []
    for _ in range(draw(st.integers(1, 6))):
        p = pb.FetchPartitionResponse()
        choice = draw(st.integers(0, 4))
        if choice == 0:
            p.error.code = draw(INT32)
        elif choice == 1:
            p.error.message = draw(TEXT)
        elif choice == 2:
            p.current_leader.leader_epoch = draw(INT32)
        elif choice == 3:
            p.high_watermark = draw(INT64)
        else:
            p.records = draw(st.binary(max_size=20))
        pieces.append(p.SerializeToString())
    unknown = draw(
        st.sampled_from([b"", b"\x50\x07", b"\x59" + b"\x01" * 8, b"\x65\x01\x02\x03\x04"])
    )
    partition = b"".join(pieces) + unknown  # fields 10 and 11 and 12: unknown
    topic = b"\x1a" + _varint(len(partition)) + partition
    return b"\x0a" + _varint(len(topic)) + topic


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


@settings(max_examples=300, deadline=None)
@given(_partition_pieces())
def test_repeated_fields_merge_and_unknown_fields_are_skipped(data: bytes) -> None:
    assert _walked(fetch_answer_topics(data)) == _parsed(pb.FetchResponse.FromString(data))


@settings(max_examples=500, deadline=None)
@given(fetch_responses(), st.data())
def test_truncated_or_mutated_bytes_agree_with_protobuf_or_raise_the_typed_error(
    message: pb.FetchResponse, data: st.DataObject
) -> None:
    raw = bytearray(message.SerializeToString())
    if not raw:
        raw = bytearray(b"\x0a\x00")
    kind = data.draw(st.sampled_from(["truncate", "flip", "insert", "delete"]))
    at = data.draw(st.integers(0, len(raw) - 1))
    if kind == "truncate":
        del raw[at:]
    elif kind == "flip":
        raw[at] ^= data.draw(st.integers(1, 255))
    elif kind == "insert":
        raw[at:at] = data.draw(st.binary(min_size=1, max_size=4))
    else:
        del raw[at : at + data.draw(st.integers(1, 4))]
    _agrees_or_refuses(bytes(raw))


@pytest.mark.parametrize(
    "data,error",
    [
        (
            b"\x0a\x05\x0a\x01a",
            r"FetchResponse: field 1 \(topics\) at byte 0 says 5 bytes .*past the end",
        ),
        (b"\x0a\x00\x88", r"FetchResponse: tag at byte 2 is a truncated varint"),
        (
            b"\x0a\x03\x1a\x01\x08",
            r"FetchPartitionResponse: the value of field 1 \(partition\) at byte 5 is a truncated",
        ),
        (
            b"\x0a\x0d\x1a\x0b\x08" + b"\x80" * 10,
            r"the value of field 1 \(partition\) at byte 5 is a varint longer than 10 bytes",
        ),
        (
            b"\x88\x80\x80\x80\x80\x00",
            r"FetchResponse: tag at byte 0 is a varint longer than 5 bytes",
        ),
        (b"\xf8\xff\xff\xff\x1f\x00", r"FetchResponse: tag at byte 0 overflows 32 bits"),
        (b"\x00\x00", r"FetchResponse: field number 0 at byte 0"),
        (
            b"\x08\x01",
            r"FetchResponse: field 1 \(topics\) at byte 0 has wire type 0 \(varint\), not 2",
        ),
        (
            b"\x0a\x02\x1a\x00\x0b",
            r"FetchResponse: field 1 \(topics\) at byte 4 has wire type 3 \(a group\)",
        ),
        (b"\x0e", r"FetchResponse: field 1 \(topics\) at byte 0 has wire type 6 \(reserved\)"),
        (b"\x0a\x03\x0a\x01\xff", r"FetchTopicResponse.topic at byte 4: not UTF-8"),
        (b"\x0a\x07\x1a\x05\x12\x03\x12\x01\xff", r"ErrorStatus.error_name at byte 8: not UTF-8"),
        (
            b"\x0a\x04\x1a\x02\x42\x01",
            r"FetchPartitionResponse: field 8 \(records\) at byte 4 says 1 bytes",
        ),
        (b"\x0a\x05\x1a\x03\x59\x00\x00", r"field 11 at byte 4 needs 8 bytes"),
    ],
    ids=[
        "length-past-end",
        "truncated-tag",
        "truncated-value",
        "varint-too-long",
        "tag-too-long",
        "tag-overflow",
        "field-0",
        "wrong-wire-type",
        "group",
        "reserved-wire-type",
        "bad-utf8-topic",
        "bad-utf8-error-name",
        "records-past-end",
        "fixed64-truncated",
    ],
)
def test_malformed_bytes_raise_an_error_naming_what_was_wrong(data: bytes, error: str) -> None:
    with pytest.raises(MalformedFetchAnswerError, match=error):
        fetch_answer_topics(data)
    _agrees_or_refuses(data)
