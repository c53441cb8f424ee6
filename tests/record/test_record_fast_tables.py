"""The producer's fast-path tables and size functions (`replog.record.record`) against the
plain encoders: the accumulator writes records from these tables instead of `append_record`,
so every entry must be the bytes `append_record` would write."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from replog.record.record import (
    AFTER_EMPTY_HEADERS,
    EQUAL_TIMESTAMP_FIELDS,
    FAST_DATA_LIMIT,
    FAST_DELTAS,
    FAST_OFFSETS,
    NO_HEADERS,
    NULL_KEY_FIELDS,
    RECORD_OVERHEAD_MAX,
    TIMESTAMP_FIELDS,
    encode_record,
    record_size,
    record_size_bound,
)
from replog.record.varint import (
    SMALL_SIZE_LENGTHS,
    SMALL_SIZE_LIMIT,
    SMALL_SIZE_VARINTS,
    encode_varint,
    encode_varlong,
)

headers = st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=20)), max_size=3)
deltas = st.sampled_from([0, 1, 63, 64, -1, -64, -65, 8191, 8192, -8192, -8193]) | st.integers(
    -(2**62), 2**62
)
offsets = st.sampled_from([0, 1, 63, 64, 4095, 4096, 8191, 8192]) | st.integers(0, 2**31 - 1)
payloads = st.none() | st.binary(max_size=100) | st.sampled_from([b"x" * 8191, b"y" * 8192])


def test_every_table_entry_is_the_plain_encoding() -> None:
    assert encode_varint(0) == NO_HEADERS
    for delta in range(FAST_DELTAS):
        assert TIMESTAMP_FIELDS[delta] == b"\x00" + encode_varlong(delta)
    for offset in range(FAST_OFFSETS):
        assert NULL_KEY_FIELDS[offset] == encode_varint(offset) + encode_varint(-1)
        assert (
            EQUAL_TIMESTAMP_FIELDS[offset] == b"\x00" + encode_varlong(0) + NULL_KEY_FIELDS[offset]
        )
    for size in range(SMALL_SIZE_LIMIT):
        assert AFTER_EMPTY_HEADERS[size] == NO_HEADERS + encode_varint(size)
        assert SMALL_SIZE_LENGTHS[size] == len(SMALL_SIZE_VARINTS[size])


def test_a_fast_record_is_its_table_fields_then_its_value() -> None:
    """What the accumulator writes for a null-key, no-header record equals `encode_record`."""
    for offset, delta, value in [
        (0, 0, b""),
        (5, 0, b"v" * 60),
        (63, 3, b"v" * 61),
        (64, FAST_DELTAS - 1, b"v" * 1024),
        (FAST_OFFSETS - 1, 1, b"v" * (FAST_DATA_LIMIT - 1)),
    ]:
        fields = (
            EQUAL_TIMESTAMP_FIELDS[offset]
            if delta == 0
            else TIMESTAMP_FIELDS[delta] + NULL_KEY_FIELDS[offset]
        ) + SMALL_SIZE_VARINTS[len(value)]
        body = len(fields) + len(value) + 1
        assert SMALL_SIZE_VARINTS[body] + fields + value + NO_HEADERS == encode_record(
            offset, delta, None, value
        )
        assert SMALL_SIZE_LENGTHS[body] + body == record_size(offset, delta, None, value, ())


@given(offsets, deltas, payloads, payloads, headers)
def test_record_size_is_exact_and_the_bound_above_it(
    offset: int,
    delta: int,
    key: bytes | None,
    value: bytes | None,
    record_headers: list[tuple[str, bytes | None]],
) -> None:
    encoded = encode_record(offset, delta, key, value, record_headers)
    assert record_size(offset, delta, key, value, record_headers) == len(encoded)
    assert len(encoded) <= record_size_bound(key, value, record_headers)
    if not record_headers:
        assert record_size_bound(key, value, ()) - len(encoded) <= RECORD_OVERHEAD_MAX
