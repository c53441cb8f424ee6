"""The primitive types of Kafka's wire protocol and the base classes of the generated messages.

Rules:
- Readers take a `memoryview` of the whole frame and a position and return `(value, position)`;
  writers append to a `bytearray`. The generated code in `replog.kafka.messages` calls them
  straight-line, one call per field: there is no schema walked per message.
- Big-endian integers, float64, 16-byte UUIDs; STRING/BYTES/ARRAY carry an int16/int32/int32
  length, their COMPACT forms an unsigned varint holding length + 1; a negative length (0 in
  the COMPACT forms) is null, as Kafka reads it; a string is at most 32767 bytes.
- RECORDS stay raw: a `memoryview` slice of the frame, never decoded or copied here. Written
  into a `HeldRecords` buffer, BYTES and RECORDS of `HOLD_MIN_BYTES` or more are not copied
  either: the buffer notes where they go (`held`) and the writer sends them apart (`pieces`),
  as a leader's Fetch answer carries up to 8 MiB a partition that would otherwise be copied
  into the frame twice. Such a buffer also holds records left in their file (`FileRecords`),
  which no other buffer takes: only a writer that sends from files writes them.
- A helper that meets bad bytes raises `CodecFault` (or lets struct.error / IndexError out);
  `Message.decode` turns any of them into one `ProtocolDecodeError` naming the message,
  version and field (found from the generated module's line table), so callers see only
  typed errors.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any, ClassVar, NoReturn, Protocol, TypeVar, cast, runtime_checkable
from uuid import UUID

from replog.errors import ProtocolDecodeError, ProtocolEncodeError, UnsupportedVersionError

Buffer = bytes | bytearray | memoryview

ZERO_UUID = UUID(int=0)
# Default of list and struct fields in generated constructors: each object gets a fresh one.
UNSET: Any = object()

new = object.__new__

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")

__all__ = [
    "HOLD_MIN_BYTES",
    "FileRecords",
    "HeldRecords",
    "read_array_length",
    "read_bytes",
    "read_carray_length",
    "read_cbytes",
    "read_cnbytes",
    "read_cnrecords",
    "read_cnstr",
    "read_crecords",
    "read_cstr",
    "read_nbytes",
    "read_nrecords",
    "read_nstr",
    "read_records",
    "read_str",
    "read_uuid",
    "read_uvarint",
    "write_array_length",
    "write_bytes",
    "write_carray_length",
    "write_cbytes",
    "write_cnbytes",
    "write_cnrecords",
    "write_cnstr",
    "write_crecords",
    "write_cstr",
    "write_nbytes",
    "write_nrecords",
    "write_nstr",
    "write_records",
    "write_str",
    "write_tagged_fields",
    "write_uuid",
    "write_uvarint",
]


class CodecFault(ValueError):
    """Bad bytes or a bad value met inside a generated codec (wrapped before it escapes)."""


class NonDefaultField(CodecFault):
    """A field the version being written lacks holds a value other than its default."""


# --- varints ----------------------------------------------------------------------------------


def read_uvarint(b: memoryview, p: int) -> tuple[int, int]:
    """An unsigned LEB128 varint of at most 5 bytes (32 bits), as Kafka reads them."""
    value = b[p]
    if value < 0x80:
        return value, p + 1
    value &= 0x7F
    shift = 7
    p += 1
    while True:
        byte = b[p]
        p += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, p
        shift += 7
        if shift > 28:
            raise CodecFault("unsigned varint longer than 5 bytes")


def write_uvarint(out: bytearray, value: int) -> None:
    if value < 0:
        raise CodecFault(f"unsigned varint {value} is negative")
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def read_uvarlong(b: memoryview, p: int) -> tuple[int, int]:
    """An unsigned varint of at most 10 bytes (64 bits)."""
    value = 0
    shift = 0
    while True:
        byte = b[p]
        p += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, p
        shift += 7
        if shift > 63:
            raise CodecFault("unsigned varlong longer than 10 bytes")


def read_varint(b: memoryview, p: int) -> tuple[int, int]:
    """A zig-zag signed varint (32 bits)."""
    raw, p = read_uvarint(b, p)
    return (raw >> 1) ^ -(raw & 1), p


def read_varlong(b: memoryview, p: int) -> tuple[int, int]:
    """A zig-zag signed varlong (64 bits)."""
    raw, p = read_uvarlong(b, p)
    return (raw >> 1) ^ -(raw & 1), p


def write_varint(out: bytearray, value: int) -> None:
    if not -(2**31) <= value < 2**31:
        raise CodecFault(f"varint {value} out of the int32 range")
    write_uvarint(out, ((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def write_varlong(out: bytearray, value: int) -> None:
    if not -(2**63) <= value < 2**63:
        raise CodecFault(f"varlong {value} out of the int64 range")
    raw = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)


def _null(what: str, null: str = "None") -> NoReturn:
    """A null met where the spec forbids it (the non-nullable strings and bytes)."""
    raise CodecFault(f"{null} for {what}")


# --- lengths ----------------------------------------------------------------------------------


def _span(b: memoryview, p: int, n: int, what: str) -> int:
    end = p + n
    if end > len(b):
        raise CodecFault(f"{what} of {n} bytes runs past the end ({len(b) - p} left)")
    return end


def read_array_length(b: memoryview, p: int) -> tuple[int, int]:
    """An int32 element count; any negative count is null (-1 returned), as Kafka reads it.
    More elements than bytes left is corrupt (Kafka's check too)."""
    (n,) = _I32.unpack_from(b, p)
    p += 4
    if n < 0:
        return -1, p
    if n > len(b) - p:
        raise CodecFault(f"array of {n} elements but only {len(b) - p} bytes left")
    return n, p


def read_carray_length(b: memoryview, p: int) -> tuple[int, int]:
    n, p = read_uvarint(b, p)
    n -= 1
    if n > len(b) - p:
        raise CodecFault(f"array of {n} elements but only {len(b) - p} bytes left")
    return n, p


def write_array_length(out: bytearray, n: int) -> None:
    out += _I32.pack(n)


def write_carray_length(out: bytearray, n: int) -> None:
    write_uvarint(out, n + 1)


# --- strings ----------------------------------------------------------------------------------


def read_nstr(b: memoryview, p: int) -> tuple[str | None, int]:
    (n,) = _I16.unpack_from(b, p)
    p += 2
    if n < 0:
        return None, p
    end = _span(b, p, n, "string")
    return str(b[p:end], "utf-8"), end


def read_str(b: memoryview, p: int) -> tuple[str, int]:
    value, p = read_nstr(b, p)
    return (value if value is not None else _null("a non-nullable string", "null")), p


def read_cnstr(b: memoryview, p: int) -> tuple[str | None, int]:
    n, p = read_uvarint(b, p)
    if n == 0:
        return None, p
    if n - 1 > 0x7FFF:
        raise CodecFault(f"string length {n - 1} is over 32767")
    end = _span(b, p, n - 1, "string")
    return str(b[p:end], "utf-8"), end


def read_cstr(b: memoryview, p: int) -> tuple[str, int]:
    value, p = read_cnstr(b, p)
    return (value if value is not None else _null("a non-nullable string", "null")), p


def _utf8(s: object, limit: int) -> bytes:
    if not isinstance(s, str):
        raise CodecFault(f"expected a str, got {type(s).__name__}")
    data = s.encode("utf-8")
    if len(data) > limit:
        raise CodecFault(f"string of {len(data)} bytes is longer than {limit}")
    return data


def write_nstr(out: bytearray, s: str | None) -> None:
    if s is None:
        out += b"\xff\xff"
        return
    data = _utf8(s, 0x7FFF)
    out += _I16.pack(len(data))
    out += data


def write_str(out: bytearray, s: str | None) -> None:
    write_nstr(out, s if s is not None else _null("a non-nullable string"))


def write_cnstr(out: bytearray, s: str | None) -> None:
    if s is None:
        out.append(0)
        return
    data = _utf8(s, 0x7FFF)
    write_uvarint(out, len(data) + 1)
    out += data


def write_cstr(out: bytearray, s: str | None) -> None:
    write_cnstr(out, s if s is not None else _null("a non-nullable string"))


# --- bytes and records ------------------------------------------------------------------------


def read_nrecords(b: memoryview, p: int) -> tuple[memoryview | None, int]:
    (n,) = _I32.unpack_from(b, p)
    p += 4
    if n < 0:
        return None, p
    end = _span(b, p, n, "bytes")
    return b[p:end], end


def read_cnrecords(b: memoryview, p: int) -> tuple[memoryview | None, int]:
    n, p = read_uvarint(b, p)
    if n == 0:
        return None, p
    end = _span(b, p, n - 1, "bytes")
    return b[p:end], end


def read_records(b: memoryview, p: int) -> tuple[memoryview, int]:
    value, p = read_nrecords(b, p)
    return (value if value is not None else _null("non-nullable bytes", "null")), p


def read_crecords(b: memoryview, p: int) -> tuple[memoryview, int]:
    value, p = read_cnrecords(b, p)
    return (value if value is not None else _null("non-nullable bytes", "null")), p


def read_nbytes(b: memoryview, p: int) -> tuple[bytes | None, int]:
    value, p = read_nrecords(b, p)
    return (None if value is None else value.tobytes()), p


def read_bytes(b: memoryview, p: int) -> tuple[bytes, int]:
    value, p = read_records(b, p)
    return value.tobytes(), p


def read_cnbytes(b: memoryview, p: int) -> tuple[bytes | None, int]:
    value, p = read_cnrecords(b, p)
    return (None if value is None else value.tobytes()), p


def read_cbytes(b: memoryview, p: int) -> tuple[bytes, int]:
    value, p = read_crecords(b, p)
    return value.tobytes(), p


@runtime_checkable
class FileRecords(Protocol):
    """Records left in a file, read only when sent (`replog.storage.file_region.Region`): a
    `HeldRecords` buffer holds them apart whatever their size, for a writer that sends them
    from the file (module Rules); any other buffer refuses them."""

    def __len__(self) -> int: ...

    def read(self) -> bytes: ...

    def close(self) -> None: ...


def _check_bytes(out: bytearray, value: object) -> Buffer | FileRecords:
    if isinstance(value, bytes | bytearray | memoryview):
        return value
    if type(out) is HeldRecords and isinstance(value, FileRecords):
        return value
    raise CodecFault(f"expected bytes, got {type(value).__name__}")


HOLD_MIN_BYTES = 65536  # smaller values are copied: a piece of their own costs more


class HeldRecords(bytearray):
    """An encoding buffer that holds large values (records, mostly) apart instead of copying
    them in (module Rules): `held` lists (position in this buffer, value) in order. Its bytes
    with each held value inserted at its position are the encoding (`pieces`)."""

    __slots__ = ("held",)

    def __init__(self, initial: Buffer = b"") -> None:
        super().__init__(initial)
        self.held: list[tuple[int, Buffer | FileRecords]] = []

    @property
    def held_bytes(self) -> int:
        return sum(len(value) for _, value in self.held)

    def drop_from(self, mark: int) -> None:
        """Forget the values written after byte `mark` (the encoding was cut back to it): a
        value written after it is held at a later byte, past its length prefix."""
        while self.held and self.held[-1][0] > mark:
            self.held.pop()

    def pieces(self) -> list[Buffer | FileRecords]:
        """The encoding in order: views of this buffer between the held values, and them."""
        if not self.held:
            return [self]
        view = memoryview(self)
        pieces: list[Buffer | FileRecords] = []
        start = 0
        for position, value in self.held:
            if position > start:
                pieces.append(view[start:position])
            pieces.append(value)
            start = position
        if start < len(self):
            pieces.append(view[start:])
        return pieces


def _append(out: bytearray, value: Buffer | FileRecords) -> None:
    """`value` at the end of `out`, or held apart when `out` holds large values (module Rules);
    `FileRecords` only ever reach a `HeldRecords` buffer (`_check_bytes`)."""
    if isinstance(value, bytes | bytearray | memoryview) and (
        type(out) is not HeldRecords or len(value) < HOLD_MIN_BYTES
    ):
        out += value
    else:
        cast("HeldRecords", out).held.append((len(out), value))


def write_nbytes(out: bytearray, value: Buffer | None) -> None:
    if value is None:
        out += b"\xff\xff\xff\xff"
        return
    out += _I32.pack(len(_check_bytes(out, value)))
    _append(out, value)


def write_bytes(out: bytearray, value: Buffer | None) -> None:
    write_nbytes(out, value if value is not None else _null("non-nullable bytes"))


def write_cnbytes(out: bytearray, value: Buffer | None) -> None:
    if value is None:
        out.append(0)
        return
    write_uvarint(out, len(_check_bytes(out, value)) + 1)
    _append(out, value)


def write_cbytes(out: bytearray, value: Buffer | None) -> None:
    write_cnbytes(out, value if value is not None else _null("non-nullable bytes"))


write_records = write_bytes
write_nrecords = write_nbytes
write_crecords = write_cbytes
write_cnrecords = write_cnbytes


# --- uuid -------------------------------------------------------------------------------------


def read_uuid(b: memoryview, p: int) -> tuple[UUID, int]:
    end = _span(b, p, 16, "uuid")
    return UUID(bytes=b[p:end].tobytes()), end


def write_uuid(out: bytearray, value: UUID) -> None:
    if not isinstance(value, UUID):
        raise CodecFault(f"expected a UUID, got {type(value).__name__}")
    out += value.bytes


# --- tagged fields ----------------------------------------------------------------------------


def write_tagged_fields(
    out: bytearray,
    known: list[tuple[int, bytes | bytearray]],
    unknown: Sequence[tuple[int, bytes]],
) -> None:
    """The tag buffer: count, then (tag, size, bytes) in ascending tag order."""
    fields = known if not unknown else sorted([*known, *unknown], key=lambda t: t[0])
    write_uvarint(out, len(fields))
    for tag, data in fields:
        write_uvarint(out, tag)
        write_uvarint(out, len(data))
        out += data


# --- the generated classes' bases -------------------------------------------------------------


class Struct:
    """A struct of a message: plain slots, compared field by field."""

    __slots__ = ("unknown_tagged_fields",)

    # Tagged fields this codec does not know, kept as (tag, raw bytes) and written back.
    unknown_tagged_fields: tuple[tuple[int, bytes], ...]

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in self._all_slots())

    __hash__ = None  # type: ignore[assignment]

    def _all_slots(self) -> tuple[str, ...]:
        return (*type(self).__slots__, "unknown_tagged_fields")

    def __repr__(self) -> str:
        parts = ", ".join(f"{name}={getattr(self, name)!r}" for name in type(self).__slots__)
        return f"{type(self).__name__}({parts})"


M = TypeVar("M", bound="Message")
Reader = Callable[[memoryview, int], tuple[Any, int]]
Writer = Callable[[Any, bytearray], None]


class Message(Struct):
    """A whole request, response or header, codable at every version its spec defines."""

    __slots__ = ()

    NAME: ClassVar[str]
    API_KEY: ClassVar[int]
    MIN_VERSION: ClassVar[int]
    MAX_VERSION: ClassVar[int]
    FLEXIBLE_MIN_VERSION: ClassVar[int | None]
    _READERS: ClassVar[dict[int, Reader]]
    _WRITERS: ClassVar[dict[int, Writer]]

    @classmethod
    def is_flexible(cls, version: int) -> bool:
        return cls.FLEXIBLE_MIN_VERSION is not None and version >= cls.FLEXIBLE_MIN_VERSION

    @classmethod
    def check_version(cls, version: int) -> None:
        if not cls.MIN_VERSION <= version <= cls.MAX_VERSION:
            raise UnsupportedVersionError(
                f"{cls.NAME} v{version} is not supported (versions "
                f"{cls.MIN_VERSION}-{cls.MAX_VERSION})"
            )

    @classmethod
    def read(cls: type[M], data: memoryview, pos: int, version: int) -> tuple[M, int]:
        """Decode from `data` at `pos`; returns the message and the position after it."""
        cls.check_version(version)
        try:
            return cls._READERS[version](data, pos)
        except (CodecFault, struct.error, IndexError, ValueError, OverflowError) as exc:
            raise ProtocolDecodeError(
                cls.NAME, version, field_path(exc.__traceback__, data), describe(exc)
            ) from None

    @classmethod
    def decode(cls: type[M], data: Buffer, version: int) -> M:
        """Decode exactly `data` (bytes left over are an error, as in a frame's body)."""
        view = data if isinstance(data, memoryview) else memoryview(data)
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        message, end = cls.read(view, 0, version)
        if end != len(view):
            raise ProtocolDecodeError(
                cls.NAME, version, "(end)", f"{len(view) - end} bytes left over after the message"
            )
        return message

    def write(self, out: bytearray, version: int) -> None:
        """Append the encoding at `version` to `out`."""
        self.check_version(version)
        mark = len(out)
        try:
            self._WRITERS[version](self, out)
        except NonDefaultField as exc:
            _cut(out, mark)
            raise UnsupportedVersionError(
                f"{self.NAME} v{version} has no field "
                f"{field_path(exc.__traceback__, None) or exc}: it must keep its default"
            ) from None
        except (CodecFault, struct.error, TypeError, AttributeError, ValueError) as exc:
            _cut(out, mark)
            raise ProtocolEncodeError(
                self.NAME, version, field_path(exc.__traceback__, None), describe(exc)
            ) from None

    def encode(self, version: int) -> bytes:
        out = bytearray()
        self.write(out, version)
        return bytes(out)


def _cut(out: bytearray, mark: int) -> None:
    del out[mark:]
    if type(out) is HeldRecords:
        out.drop_from(mark)


def describe(exc: BaseException) -> str:
    if isinstance(exc, IndexError | struct.error):
        return f"truncated ({exc})"
    return str(exc) or type(exc).__name__


def field_path(tb: TracebackType | None, data: memoryview | None) -> str:
    """The dotted field path a codec failed at, from the generated modules' line tables.

    Each generated module maps its line numbers to the field a line reads or writes (for a
    run of fixed-size fields read at once: each field with its end offset, so the first field
    the bytes left do not cover is named). Costs nothing until something fails.
    """
    parts: list[str] = []
    while tb is not None:
        frame = tb.tb_frame
        table = frame.f_globals.get("FIELD_AT_LINE")
        if table is not None:
            where = table.get(tb.tb_lineno)
            if isinstance(where, tuple):
                where = _pick_field(where, frame.f_locals, data)
            if where:
                parts.append(where)
        tb = tb.tb_next
    return ".".join(parts)


def _pick_field(
    fields: tuple[tuple[str, int | str], ...], local: dict[str, Any], data: memoryview | None
) -> str:
    """The field of a fixed-size run that failed: on reading, the first the bytes left do not
    cover ((name, end offset) pairs); on writing, the first whose value does not pack
    ((name, struct format) pairs)."""
    buf = local.get("b", data)
    pos = local.get("p")
    obj = local.get("o")
    for name, detail in fields:
        if isinstance(detail, int):
            if isinstance(buf, memoryview) and isinstance(pos, int) and pos + detail > len(buf):
                return name
        elif obj is not None:
            try:
                struct.pack(">" + detail, getattr(obj, name))
            except struct.error:
                return name
    return "/".join(name for name, _ in fields)
