"""The Raft Fetch connection's byte format: greeting, frames cut at any chunk boundary, and a
typed error naming what was wrong for bytes that break the format."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from replog.errors import InvalidRequestError
from replog.server.raft import raft_fetch_wire as wire


def test_a_greeting_names_the_caller() -> None:
    data = wire.greeting(7)
    assert len(data) == wire.GREETING_BYTES
    assert wire.parse_greeting(data) == 7


def test_a_connection_that_is_not_a_fetch_connection_is_named() -> None:
    expected = r"not a Raft Fetch connection: it began with b'GET "
    with pytest.raises(InvalidRequestError, match=expected):
        wire.parse_greeting(b"GET / HTTP/1.1\r\n"[: wire.GREETING_BYTES])


def test_an_unknown_version_is_named() -> None:
    data = struct.pack(">4sBi", wire.MAGIC, 9, 1)
    with pytest.raises(InvalidRequestError, match="version 9 is not supported"):
        wire.parse_greeting(data)


@given(
    st.lists(st.tuples(st.integers(0, 2**32 - 1), st.binary(max_size=300)), max_size=8),
    st.lists(st.integers(1, 50), min_size=1, max_size=40),
)
def test_frames_come_out_whole_and_in_order_however_the_bytes_are_cut(
    messages: list[tuple[int, bytes]], cuts: list[int]
) -> None:
    stream = b"".join(wire.frame(sequence, payload) for sequence, payload in messages)
    reader = wire.FORMAT.reader()
    out: list[tuple[int, bytes]] = []
    position = 0
    for size in cuts * (len(stream) // max(1, sum(cuts)) + 1):
        out += reader.feed(stream[position : position + size])
        position += size
        if position >= len(stream):
            break
    out += reader.feed(stream[position:])
    assert out == messages
    assert reader.buffered == 0


def test_a_frame_longer_than_the_limit_is_refused_from_its_header() -> None:
    reader = wire.FORMAT.reader()
    header = struct.pack(">II", wire.MAX_FRAME_BYTES + 5, 1)
    with pytest.raises(InvalidRequestError, match=r"Raft Fetch frame of \d+ bytes: must be 4 to"):
        reader.feed(header)  # refused before any of the body is buffered


def test_a_frame_too_short_for_its_sequence_number_is_refused() -> None:
    with pytest.raises(InvalidRequestError, match="frame of 3 bytes"):
        wire.FORMAT.reader().feed(struct.pack(">II", 3, 1))
