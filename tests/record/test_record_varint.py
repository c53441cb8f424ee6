"""Zig-zag varints: the examples of docs/design/storage.md#records-inside-a-batch, round trips over
the full ranges, strict decoding."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.record import util as kafka_util  # kafka-python: a dev dependency

from replog.errors import InvalidRecordError
from replog.record.varint import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    SMALL_SIZE_LIMIT,
    SMALL_SIZE_VARINTS,
    decode_varint,
    decode_varlong,
    encode_varint,
    encode_varlong,
    varint_size,
)

Decoder = Callable[[bytes, int, int], tuple[int, int]]

int32s = st.integers(INT32_MIN, INT32_MAX)
int64s = st.integers(INT64_MIN, INT64_MAX)


@pytest.mark.parametrize(
    ("value", "encoded_hex"),
    [(0, "00"), (-1, "01"), (1, "02"), (63, "7e"), (64, "8001"), (-65, "8101"), (300, "d804")],
)
def test_digest_examples(value: int, encoded_hex: str) -> None:
    encoded = bytes.fromhex(encoded_hex)
    assert encode_varint(value) == encoded
    assert encode_varlong(value) == encoded
    assert decode_varint(encoded, 0, len(encoded)) == (value, len(encoded))
    assert decode_varlong(encoded, 0, len(encoded)) == (value, len(encoded))


def test_extremes() -> None:
    assert encode_varint(INT32_MIN) == bytes.fromhex("ffffffff0f")
    assert encode_varint(INT32_MAX) == bytes.fromhex("feffffff0f")
    assert encode_varlong(INT64_MIN) == bytes.fromhex("ffffffffffffffffff01")
    assert len(encode_varlong(INT64_MAX)) == 10


@given(int32s)
def test_varint_round_trip(value: int) -> None:
    encoded = encode_varint(value)
    assert len(encoded) == varint_size(value) <= 5
    # Decode from the middle of a buffer, with bytes on both sides.
    buffer = b"\xff\xff" + encoded + b"\x80"
    assert decode_varint(buffer, 2, 2 + len(encoded)) == (value, 2 + len(encoded))


@given(int64s)
def test_varlong_round_trip(value: int) -> None:
    encoded = encode_varlong(value)
    assert len(encoded) == varint_size(value) <= 10
    assert decode_varlong(encoded + b"\x00", 0, len(encoded) + 1) == (value, len(encoded))


@given(int64s)
def test_matches_kafka_python(value: int) -> None:
    written = bytearray()
    kafka_util.encode_varint(value, written.append)
    assert encode_varlong(value) == written


def test_small_size_table() -> None:
    assert all(SMALL_SIZE_VARINTS[n] == encode_varint(n) for n in range(SMALL_SIZE_LIMIT))
    assert len(encode_varint(SMALL_SIZE_LIMIT - 1)) == 2


@pytest.mark.parametrize("value", [INT32_MAX + 1, INT32_MIN - 1, 2**40])
def test_encode_varint_rejects_out_of_range(value: int) -> None:
    with pytest.raises(ValueError, match="int32"):
        encode_varint(value)


@pytest.mark.parametrize("value", [INT64_MAX + 1, INT64_MIN - 1])
def test_encode_varlong_rejects_out_of_range(value: int) -> None:
    with pytest.raises(ValueError, match="int64"):
        encode_varlong(value)


@pytest.mark.parametrize(
    ("decode", "data_hex", "expected"),
    [
        (decode_varint, "ffffffffff01", "varint at byte 0 is longer than 5 bytes"),
        (decode_varlong, "ffffffffffffffffffff01", "varlong at byte 0 is longer than 10 bytes"),
        # A fifth varint byte above 0x0f, or a tenth varlong byte above 0x01, sets a bit too many.
        (decode_varint, "ffffffff1f", "varint at byte 0 overflows 32 bits"),
        (decode_varlong, "ffffffffffffffffff03", "varlong at byte 0 overflows 64 bits"),
    ],
    ids=["long-varint", "long-varlong", "varint-overflow", "varlong-overflow"],
)
def test_malformed(decode: Decoder, data_hex: str, expected: str) -> None:
    data = bytes.fromhex(data_hex)
    with pytest.raises(InvalidRecordError, match=expected):
        decode(data, 0, len(data))


def test_malformed_names_its_position() -> None:
    data = bytes.fromhex("0000ffffffffff01")
    with pytest.raises(InvalidRecordError, match="varint at byte 2 is longer than 5 bytes"):
        decode_varint(data, 2, len(data))


@pytest.mark.parametrize("decode", [decode_varint, decode_varlong])
@pytest.mark.parametrize(("data_hex", "end"), [("8080", 2), ("80", 1), ("", 0), ("0102", 0)])
def test_running_past_the_end(decode: Decoder, data_hex: str, end: int) -> None:
    with pytest.raises(InvalidRecordError, match=f"at byte 0 runs past the end at byte {end}"):
        decode(bytes.fromhex(data_hex), 0, end)


@given(int64s, st.data())
def test_truncated_encoding_never_decodes(value: int, data: st.DataObject) -> None:
    encoded = encode_varlong(value)
    cut = data.draw(st.integers(0, len(encoded) - 1))
    with pytest.raises(InvalidRecordError, match="runs past the end"):
        decode_varlong(encoded, 0, cut)
