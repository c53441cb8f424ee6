"""Shared by the record tests: the golden batch, Hypothesis strategies, byte-surgery helpers."""

from __future__ import annotations

import struct

from hypothesis import strategies as st

from replog.record.header import CRC_OFFSET, LOG_OVERHEAD, RECORD_BATCH_OVERHEAD, compute_crc

# The golden vector of docs/design/storage.md#records-inside-a-batch: one record,
# null key, value b"a", CreateTime 1700000000000, not idempotent. 69 bytes, batch_length 57, CRC
# 0x965A94B1.
GOLDEN_HEX = (
    "0000000000000000" "00000039" "ffffffff" "02" "965a94b1" "0000" "00000000"
    "0000018bcfe56800" "0000018bcfe56800" "ffffffffffffffff" "ffff" "ffffffff" "00000001"
    "0e00000001026100"
)  # fmt: skip
GOLDEN = bytes.fromhex(GOLDEN_HEX)

# Timestamps anywhere in a range whose pairwise differences still fit an int64 varlong.
timestamps = st.integers(min_value=-(2**61), max_value=2**61)
realistic_timestamps = st.integers(min_value=1_500_000_000_000, max_value=1_900_000_000_000)
optional_bytes = st.none() | st.binary(max_size=300)
header_lists = st.lists(
    st.tuples(st.text(max_size=12), st.none() | st.binary(max_size=24)), max_size=4
)
record_inputs = st.tuples(
    timestamps | realistic_timestamps, optional_bytes, optional_bytes, header_lists
)
record_lists = st.lists(record_inputs, min_size=1, max_size=25)
# Producer state: plain, idempotent, or transactional (which implies idempotent).
producer_states = st.one_of(
    st.just((-1, -1, -1, False)),
    st.tuples(
        st.integers(0, 2**63 - 1),
        st.integers(0, 2**15 - 1),
        st.integers(0, 2**31 - 1),
        st.booleans(),
    ),
)


def reseal(batch: bytes | bytearray) -> bytes:
    """The batch with batch_length and CRC recomputed, after a test edited covered bytes."""
    edited = bytearray(batch)
    struct.pack_into(">i", edited, 8, len(edited) - LOG_OVERHEAD)
    struct.pack_into(">I", edited, CRC_OFFSET, compute_crc(edited, 0, len(edited)))
    return bytes(edited)


def with_records_region(batch: bytes, region: bytes, *, records_count: int | None = None) -> bytes:
    """`batch` with its records region replaced (and, optionally, its record count), resealed."""
    edited = bytearray(batch[:RECORD_BATCH_OVERHEAD] + region)
    if records_count is not None:
        struct.pack_into(">i", edited, 23, records_count - 1)  # last_offset_delta
        struct.pack_into(">i", edited, 57, records_count)
    return reseal(edited)


def set_attributes(batch: bytes, attributes: int) -> bytes:
    edited = bytearray(batch)
    struct.pack_into(">h", edited, 21, attributes)
    return reseal(edited)


def normalise(batch: bytes) -> bytes:
    """Zero the base offset (bytes 0-7) and leader epoch (12-15): broker-owned, not CRC-covered."""
    return bytes(8) + batch[8:12] + bytes(4) + batch[16:]
