"""The ReplicaFetch stream's fetch messages (`broker_codec`): every request and response survives
dataclass -> protobuf -> bytes -> protobuf -> dataclass (the answers, dataclass -> bytes ->
dataclass, with records small enough for protobuf and large enough for `record_wire`), absent
optional epochs are -1, topic ids are 16 bytes, errors keep their class and message; garbage
the dataclasses cannot hold is INVALID_REQUEST naming the field."""

from __future__ import annotations

import random
from dataclasses import fields, is_dataclass, replace
from typing import Any
from uuid import UUID

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replog.errors import InvalidRequestError, KafkaError, wire_error_classes
from replog.pb import broker_pb2 as pb
from replog.replication import messages as m
from replog.wire import broker_codec as codec
from replog.wire import framed_wire

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
EPOCH = st.one_of(st.just(-1), st.integers(0, 2**31 - 1))
TOPIC = st.sampled_from(["orders", "payments", "a.b-c_d", "t"])
PARTITION = st.integers(0, 1000)
# Small records, and ones that take a message past SPLIT_MIN_BYTES (joined and split by hand).
RECORDS = st.one_of(
    st.binary(max_size=64),
    st.binary(min_size=7, max_size=8).map(lambda pattern: pattern * 9_400),
)
TOPIC_ID = st.one_of(st.none(), st.uuids())
ERROR_CLASSES = sorted(wire_error_classes().items())


@st.composite
def errors(draw: st.DrawFn) -> KafkaError | None:
    if draw(st.booleans()):
        return None
    _, cls = draw(st.sampled_from(ERROR_CLASSES))
    message = draw(st.text(min_size=1, max_size=40))
    return cls(message)


LEADER = st.one_of(st.none(), st.builds(m.LeaderIdAndEpoch, INT32, INT32))


def normalized(value: Any) -> Any:
    """Dataclasses to comparable tuples; errors by class and message (exceptions compare by
    identity)."""
    if isinstance(value, KafkaError):
        return ("error", type(value), str(value))
    if is_dataclass(value) and not isinstance(value, type):
        return (type(value), tuple(normalized(getattr(value, f.name)) for f in fields(value)))
    if isinstance(value, tuple):
        return tuple(normalized(v) for v in value)
    if isinstance(value, memoryview):  # records split off a serialized message
        return bytes(value)
    return value


def through_the_wire(message: Any) -> Any:
    if isinstance(message, bytes):  # already serialized (`*_to_wire`)
        return message
    again = type(message)()
    again.ParseFromString(message.SerializeToString())
    return again


def grouped_by_topic(partitions: list[Any], key: Any = lambda p: p.topic) -> tuple[Any, ...]:
    """The wire groups by topic, so only orders where a topic's partitions are together (in
    first-appearance order) survive a round trip unchanged; this gives that order."""
    order: dict[Any, list[Any]] = {}
    for p in partitions:
        order.setdefault(key(p), []).append(p)
    return tuple(p for group in order.values() for p in group)


def topic_and_id(p: Any) -> Any:
    return (p.topic, p.topic_id)


fetch_requests = st.builds(
    m.FetchRequest,
    st.lists(
        st.builds(
            m.FetchPartition,
            TOPIC,
            PARTITION,
            INT64,
            INT32,
            EPOCH,
            EPOCH,
            INT64,
            TOPIC_ID,
        )
    ).map(lambda ps: grouped_by_topic(ps, topic_and_id)),
    INT32,
    INT64,
    INT32,
    INT32,
    INT32,
    st.sampled_from(list(m.IsolationLevel)),
)
# Incremental fetches of a session (KIP-227): an epoch past 0 and partitions to forget, grouped
# by topic as the wire groups them.
session_fetch_requests = st.builds(
    lambda request, epoch, forgotten: replace(
        request, session_epoch=epoch, forgotten=tuple(sorted(forgotten))
    ),
    fetch_requests,
    st.integers(1, 2**31 - 1),
    st.sets(st.tuples(TOPIC, PARTITION)),
)
fetch_responses = st.builds(
    m.FetchResponse,
    st.lists(
        st.builds(
            m.FetchPartitionResult,
            TOPIC,
            PARTITION,
            errors(),
            INT64,
            INT64,
            INT64,
            st.one_of(st.none(), st.builds(m.EpochEndOffsetResult, INT32, INT64)),
            LEADER,
            RECORDS,
            TOPIC_ID,
            INT64,
        )
    ).map(lambda ps: grouped_by_topic(ps, topic_and_id)),
)

ROUND_TRIPS = [
    (fetch_requests, codec.fetch_request_to_proto, codec.fetch_request_from_proto),
    (session_fetch_requests, codec.fetch_request_to_proto, codec.fetch_request_from_proto),
    (fetch_responses, codec.fetch_response_to_wire, codec.fetch_response_from_wire),
]


# Every message of ROUND_TRIPS, as (strategy, encode, decode).
over_every_message = pytest.mark.parametrize(
    ("strategy", "encode", "decode"),
    ROUND_TRIPS,
    ids=[
        encode.__name__.removesuffix("_to_proto").removesuffix("_to_wire")
        for _, encode, _ in ROUND_TRIPS
    ],
)


@over_every_message
def test_every_message_survives_the_wire(strategy: Any, encode: Any, decode: Any) -> None:
    @settings(max_examples=60, deadline=None)
    @given(strategy)
    def round_trip(message: Any) -> None:
        decoded = decode(through_the_wire(encode(message)))
        assert normalized(decoded) == normalized(message)
        # And the other way: proto -> dataclass -> proto is stable too.
        assert encode(decoded) == encode(message)

    round_trip()


def interleaved(message: Any) -> Any:
    """`message` with its partitions shuffled (topics interleaved), and what the wire gives
    back: the same partitions grouped by topic in first-appearance order."""
    for name in ("partitions", "topics"):
        if hasattr(message, name):
            break
    items = list(getattr(message, name))
    random.Random(len(items)).shuffle(items)
    key = topic_and_id if items and hasattr(items[0], "topic_id") else (lambda p: p.topic)
    return replace(message, **{name: tuple(items)}), replace(
        message, **{name: grouped_by_topic(items, key)}
    )


@over_every_message
def test_interleaved_topics_keep_each_partitions_data(
    strategy: Any, encode: Any, decode: Any
) -> None:
    # Every partition's fields (its records above all) stay its own whatever order the topics
    # come in: the record-carrying messages join and split their records in serialized order.
    @settings(max_examples=60, deadline=None)
    @given(strategy)
    def round_trip(message: Any) -> None:
        shuffled, expected = interleaved(message)
        decoded = decode(through_the_wire(encode(shuffled)))
        assert normalized(decoded) == normalized(expected)

    round_trip()


@pytest.mark.parametrize("split", [False, True], ids=["through-protobuf", "record-wire"])
def test_interleaved_topics_records_stay_with_their_partitions(split: bool) -> None:
    size = codec.SPLIT_MIN_BYTES // 2 if split else 10  # three of them pass the split size
    fetch = m.FetchResponse(
        (
            m.FetchPartitionResult(topic="a", partition=0, records=b"A" * size),
            m.FetchPartitionResult(topic="b", partition=0, records=b"B" * size),
            m.FetchPartitionResult(topic="a", partition=1, records=b"C" * size),
        )
    )
    answer = codec.fetch_response_from_wire(codec.fetch_response_to_wire(fetch))
    assert {(p.topic, p.partition): bytes(p.records)[:1] for p in answer.partitions} == {
        ("a", 0): b"A",
        ("b", 0): b"B",
        ("a", 1): b"C",
    }


def test_absent_optional_epochs_are_minus_one_and_minus_one_is_absent() -> None:
    request = m.FetchRequest(
        (m.FetchPartition("t", 0, fetch_offset=5),), replica_id=2, replica_epoch=9
    )
    wire = codec.fetch_request_to_proto(request)
    partition = wire.topics[0].partitions[0]
    assert not partition.HasField("current_leader_epoch")
    assert not partition.HasField("last_fetched_epoch")
    assert wire.topics[0].topic_id == b""
    decoded = codec.fetch_request_from_proto(wire).partitions[0]
    assert decoded.current_leader_epoch == -1 and decoded.last_fetched_epoch == -1
    assert decoded.topic_id is None
    # epoch 0 is a real epoch, not "absent"
    zero = codec.fetch_request_to_proto(
        m.FetchRequest((m.FetchPartition("t", 0, 5, current_leader_epoch=0),))
    )
    assert zero.topics[0].partitions[0].HasField("current_leader_epoch")


def test_partitions_are_grouped_by_topic_in_first_appearance_order() -> None:
    request = m.FetchRequest(
        (m.FetchPartition("b", 1, 0), m.FetchPartition("a", 0, 0), m.FetchPartition("b", 0, 0))
    )
    wire = codec.fetch_request_to_proto(request)
    assert [(t.topic, [p.partition for p in t.partitions]) for t in wire.topics] == [
        ("b", [1, 0]),
        ("a", [0]),
    ]


def test_a_topic_id_that_is_not_16_bytes_is_an_invalid_request_naming_the_topic() -> None:
    wire = pb.FetchRequest(topics=[pb.FetchTopic(topic="orders", topic_id=b"\x01\x02\x03")])
    with pytest.raises(InvalidRequestError, match=r"orders.*16 bytes.*got 3"):
        codec.fetch_request_from_proto(wire)


@pytest.mark.parametrize(
    ("decode", "message"),
    [
        (codec.fetch_request_from_proto, pb.FetchRequest(isolation_level=2)),
        (codec.fetch_request_from_proto, pb.FetchRequest(isolation_level=-1)),
    ],
)
def test_an_unknown_isolation_level_is_an_invalid_request(decode: Any, message: Any) -> None:
    with pytest.raises(InvalidRequestError, match="isolation_level"):
        decode(message)


@pytest.mark.parametrize(
    ("message", "named"),
    [
        (pb.FetchRequest(session_epoch=-1), "session_epoch -1"),
        (
            pb.FetchRequest(session_epoch=0, forgotten_topics=[pb.ForgottenTopic(topic="t")]),
            "forgotten_topics need an incremental fetch",
        ),
        (
            pb.FetchRequest(forgotten_topics=[pb.ForgottenTopic(topic="t", partitions=[1])]),
            "forgotten_topics need an incremental fetch",
        ),
    ],
)
def test_a_fetch_session_field_out_of_place_is_an_invalid_request(message: Any, named: str) -> None:
    with pytest.raises(InvalidRequestError, match=named):
        codec.fetch_request_from_proto(message)


def test_a_fetch_without_a_session_epoch_has_none() -> None:
    decoded = codec.fetch_request_from_proto(pb.FetchRequest())
    assert (decoded.session_epoch, decoded.forgotten) == (m.NO_SESSION, ())
    assert not codec.fetch_request_to_proto(decoded).HasField("session_epoch")
    assert codec.fetch_request_to_proto(replace(decoded, session_epoch=0)).session_epoch == 0


def test_an_error_code_zero_is_no_error_and_an_unknown_code_is_unknown_server_error() -> None:
    wire = pb.FetchResponse(
        topics=[
            pb.FetchTopicResponse(
                topic="t",
                partitions=[
                    pb.FetchPartitionResponse(partition=0, error={"code": 0}),
                    pb.FetchPartitionResponse(
                        partition=1, error={"code": 9999, "message": "t-1: what"}
                    ),
                ],
            )
        ]
    )
    first, second = codec.fetch_response_from_wire(wire.SerializeToString()).partitions
    assert first.error is None
    assert second.error is not None and second.error.code == -1
    assert "t-1: what" in str(second.error)


def test_topic_ids_survive_as_16_raw_bytes() -> None:
    topic_id = UUID(int=0xABCDEF)
    response = m.FetchResponse((m.FetchPartitionResult("t", 0, topic_id=topic_id),))
    data = codec.fetch_response_to_wire(response)
    assert pb.FetchResponse.FromString(data).topics[0].topic_id == topic_id.bytes
    assert codec.fetch_response_from_wire(data).partitions[0].topic_id == topic_id


class _Writes:
    """A transport that keeps what it is given to write."""

    def __init__(self) -> None:
        self.writes: list[object] = []

    def write(self, data: object) -> None:
        self.writes.append(data)


def test_a_fetch_answer_is_written_in_pieces_its_records_never_copied() -> None:
    records = bytes(range(256)) * 400  # 100 KiB: a piece of its own
    response = m.FetchResponse(
        (
            m.FetchPartitionResult("t", 0, high_watermark=9, records=records),
            m.FetchPartitionResult("t", 1, high_watermark=3, records=b""),
            m.FetchPartitionResult("u", 0, high_watermark=5, records=b"x" * 10),
        )
    )
    pieces = codec.fetch_response_pieces(response)
    assert any(piece is records for piece in pieces)
    joined = b"".join(pieces)
    assert joined == codec.fetch_response_to_wire(response)
    assert codec.fetch_response_from_wire(joined) == response
    transport = _Writes()
    framed_wire.write_frame_pieces(transport, 7, pieces)  # type: ignore[arg-type]
    # The header and the skeleton before the records in one write, the records as they are,
    # the rest in one more.
    assert len(transport.writes) == 3 and transport.writes[1] is records
    assert b"".join(transport.writes) == framed_wire.frame(7, joined)  # type: ignore[arg-type]
    # A small answer: one piece, one write with its header.
    small = m.FetchResponse((m.FetchPartitionResult("t", 0, high_watermark=1, records=b"abc"),))
    transport = _Writes()
    framed_wire.write_frame_pieces(transport, 8, codec.fetch_response_pieces(small))  # type: ignore[arg-type]
    assert transport.writes == [framed_wire.frame(8, codec.fetch_response_to_wire(small))]
