"""The metadata append connection's byte format: requests and answers survive the trip cut
at any chunk boundary, and bytes that are not a request or an answer get a typed error naming
what was wrong."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from replog.errors import (
    InvalidRequestError,
    MalformedRequestError,
    MalformedResponseError,
    MessageSizeTooLargeError,
    NotLeaderOrFollowerError,
)
from replog.pb import raft_pb2 as pb
from replog.server.raft import metadata_append_wire as wire

values_lists = st.lists(st.binary(max_size=200), max_size=5)


@given(
    st.lists(st.tuples(st.integers(1, 2**32 - 1), values_lists), max_size=6),
    st.lists(st.integers(1, 40), min_size=1, max_size=20),
)
def test_requests_come_out_whole_and_in_order_however_the_bytes_are_cut(
    requests: list[tuple[int, list[bytes]]], cuts: list[int]
) -> None:
    stream = b"".join(wire.request_frame(sequence, values) for sequence, values in requests)
    reader = wire.FORMAT.reader()
    frames: list[tuple[int, bytes]] = []
    position = 0
    while position < len(stream):
        for size in cuts:
            frames += reader.feed(stream[position : position + size])
            position += size
    assert [(s, wire.parse_request(s, p)) for s, p in frames] == requests
    assert reader.buffered == 0


@given(
    st.integers(0, 2**32 - 1),
    st.integers(-1, 2**31 - 1),
    st.integers(0, 2**31 - 1),
    st.integers(0, 2**62),
    st.integers(0, 1000),
)
def test_a_committed_answer_round_trips_to_its_offsets(
    sequence: int, leader: int, epoch: int, base: int, count: int
) -> None:
    answer = pb.AppendResponse(
        leader_id=leader, quorum_epoch=epoch, base_offset=base, last_offset=base + count
    )
    [(got_sequence, payload)] = wire.FORMAT.reader().feed(wire.answer_frame(sequence, answer))
    assert got_sequence == sequence
    assert wire.result_of(wire.parse_answer(payload, "node 1")) == wire.AppendResult(
        epoch, base, base + count
    )


def test_a_refusal_comes_back_as_the_error_the_node_raised() -> None:
    refused = NotLeaderOrFollowerError("node 1 is not the quorum leader; the leader is 3")
    answer = wire.refusal(refused, leader_id=3, quorum_epoch=7)
    assert (answer.leader_id, answer.quorum_epoch) == (3, 7)
    with pytest.raises(NotLeaderOrFollowerError, match="the leader is 3"):
        wire.result_of(answer)
    with pytest.raises(MessageSizeTooLargeError, match="exceeds"):
        wire.result_of(wire.refusal(MessageSizeTooLargeError("1 record exceeds the limit")))


def test_a_frame_that_is_not_an_append_request_is_named() -> None:
    with pytest.raises(
        MalformedRequestError, match=r"metadata append request 9: 2 bytes that are not an "
    ) as caught:
        wire.parse_request(9, b"\xff\xff")
    assert caught.value.code == InvalidRequestError.code  # INVALID_REQUEST, as Kafka's


def test_an_answer_that_is_not_an_append_response_is_named() -> None:
    with pytest.raises(MalformedResponseError, match="node 2 sent 1 bytes that are not an Ap"):
        wire.parse_answer(b"\x0a", "node 2")


def test_a_connection_that_is_not_a_metadata_append_connection_is_named() -> None:
    raft_fetch_greeting = struct.pack(">4sBi", b"RLRF", 1, 2)
    with pytest.raises(InvalidRequestError, match="not a metadata append connection"):
        wire.FORMAT.parse_greeting(raft_fetch_greeting)
    assert wire.FORMAT.parse_greeting(wire.FORMAT.greeting(wire.NOT_A_NODE)) == -1


def test_a_frame_longer_than_the_limit_is_refused_from_its_header() -> None:
    header = struct.pack(">II", wire.FORMAT.max_frame_bytes + 5, 1)
    with pytest.raises(InvalidRequestError, match=r"metadata append frame of \d+ bytes"):
        wire.FORMAT.reader().feed(header)
