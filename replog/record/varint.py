"""Zig-zag varints and varlongs: the variable-length integers inside every v2 record.

Grammar: a signed integer n is first zig-zag mapped to an unsigned one, so that small negative
numbers stay small, then written little-endian in groups of 7 bits, one group per byte, with the
high bit of each byte set when another byte follows (protobuf's base-128)::

    zigzag(n) = (n << 1) ^ (n >> 31)     varint: int32, at most 5 bytes
    zigzag(n) = (n << 1) ^ (n >> 63)     varlong: int64, at most 10 bytes

For every n that fits the narrower type both formulas agree, so one table serves both.

Worked example: 300 -> zigzag 600 = 0b100_1011000 -> low 7 bits 0x58 with the continuation bit
(0xD8), then 0b100 (0x04): ``d8 04``. Likewise 0 -> ``00``, -1 -> ``01``, 1 -> ``02``,
63 -> ``7e``, 64 -> ``80 01``, -65 -> ``81 01``.

Decoding is strict: a varint longer than 5 bytes (varlong: 10), one whose value overflows its
type, or one that runs past `end` raises `InvalidRecordError` naming the byte position. The
record decoder adds the batch and record to the message.
"""

from __future__ import annotations

from replog.errors import InvalidRecordError

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
VARINT_SIZE_MAX = 5
VARLONG_SIZE_MAX = 10

# Values in [-8192, 8192) encode to one or two bytes. They cover almost every field of a real
# record (lengths up to 8 KiB, offset deltas, small timestamp deltas), so encoding them is one
# range check and one tuple lookup instead of a Python loop.
_TABLE_LOW = -(1 << 13)
_TABLE_HIGH = 1 << 13


def encode_unsigned(unsigned: int) -> bytes:
    """Base-128 little-endian groups of a non-negative integer: protobuf's varint (tags and
    lengths, `replog.wire.record_wire`), and the zig-zag encoders' last step."""
    out = bytearray()
    while unsigned >= 0x80:
        out.append((unsigned & 0x7F) | 0x80)
        unsigned >>= 7
    out.append(unsigned)
    return bytes(out)


_ENCODED_SMALL: tuple[bytes, ...] = tuple(
    encode_unsigned((value << 1) ^ (value >> 63)) for value in range(_TABLE_LOW, _TABLE_HIGH)
)


# Hot encoders index these directly to skip a call: SMALL_SIZE_VARINTS[n] == encode_varint(n)
# for 0 <= n < SMALL_SIZE_LIMIT (sizes, offset deltas), and SMALL_VARINTS[n - SMALL_VARINTS_LOW]
# == encode_varlong(n) for SMALL_VARINTS_LOW <= n < SMALL_SIZE_LIMIT (timestamp deltas).
SMALL_SIZE_LIMIT = _TABLE_HIGH
SMALL_SIZE_VARINTS = _ENCODED_SMALL[-_TABLE_LOW:]
SMALL_VARINTS = _ENCODED_SMALL
SMALL_VARINTS_LOW = _TABLE_LOW
# SMALL_SIZE_LENGTHS[n] == len(SMALL_SIZE_VARINTS[n]) (1 or 2), a byte string: indexing gives an int
SMALL_SIZE_LENGTHS = bytes(len(encoded) for encoded in SMALL_SIZE_VARINTS)


def encode_varint(value: int) -> bytes:
    """The zig-zag varint bytes of an int32; ValueError outside the int32 range."""
    if _TABLE_LOW <= value < _TABLE_HIGH:
        return _ENCODED_SMALL[value - _TABLE_LOW]
    return _encode_checked(value, INT32_MIN, INT32_MAX, "varint", "int32")


def encode_varlong(value: int) -> bytes:
    """The zig-zag varlong bytes of an int64; ValueError outside the int64 range."""
    if _TABLE_LOW <= value < _TABLE_HIGH:
        return _ENCODED_SMALL[value - _TABLE_LOW]
    return _encode_checked(value, INT64_MIN, INT64_MAX, "varlong", "int64")


def _encode_checked(value: int, low: int, high: int, kind: str, type_name: str) -> bytes:
    if not low <= value <= high:
        raise ValueError(f"{kind} value {value} is outside the {type_name} range")
    # The 64-bit zig-zag equals the 32-bit one for every int32, so one formula serves both.
    return encode_unsigned((value << 1) ^ (value >> 63))


def varint_size(value: int) -> int:
    """How many bytes `encode_varint(value)` or `encode_varlong(value)` produces."""
    unsigned = (value << 1) ^ (value >> 63)
    return max(1, (unsigned.bit_length() + 6) // 7)


def decode_varint(buf: bytes | bytearray, position: int, end: int) -> tuple[int, int]:
    """(value, next position) of the int32 varint at `position`; reads nothing at or past `end`.

    `end` must not exceed len(buf).
    """
    # One- and two-byte forms inline: lengths up to 8 KiB and small deltas, nearly all.
    if position < end:
        byte = buf[position]
        if byte < 0x80:
            return (byte >> 1) ^ -(byte & 1), position + 1
        if position + 1 < end and (second := buf[position + 1]) < 0x80:
            unsigned = (byte & 0x7F) | (second << 7)
            return (unsigned >> 1) ^ -(unsigned & 1), position + 2
    return _decode_groups(buf, position, end, VARINT_SIZE_MAX, 32, "varint")


def decode_varlong(buf: bytes | bytearray, position: int, end: int) -> tuple[int, int]:
    """(value, next position) of the int64 varlong at `position`; see `decode_varint`."""
    if position < end:
        byte = buf[position]
        if byte < 0x80:
            return (byte >> 1) ^ -(byte & 1), position + 1
    return _decode_groups(buf, position, end, VARLONG_SIZE_MAX, 64, "varlong")


def _decode_groups(
    buf: bytes | bytearray, position: int, end: int, size_max: int, bits: int, kind: str
) -> tuple[int, int]:
    """The general (multi-byte or failing) path shared by `decode_varint` and `decode_varlong`."""
    unsigned = 0
    shift = 0
    cursor = position
    limit = min(end, position + size_max)
    while cursor < limit:
        byte = buf[cursor]
        cursor += 1
        unsigned |= (byte & 0x7F) << shift
        if byte < 0x80:
            if unsigned >> bits:
                raise InvalidRecordError(
                    f"{kind} at byte {position} overflows {bits} bits ({unsigned:#x} zig-zagged)"
                )
            return (unsigned >> 1) ^ -(unsigned & 1), cursor
        shift += 7
    if cursor - position == size_max:
        raise InvalidRecordError(f"{kind} at byte {position} is longer than {size_max} bytes")
    raise InvalidRecordError(f"{kind} at byte {position} runs past the end at byte {end}")
