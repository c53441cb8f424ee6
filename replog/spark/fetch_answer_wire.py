"""A serialized Fetch answer read where it lies: each topic's and partition's fields, and the
partitions' records as memoryviews of the answer's bytes.

Why: gRPC hands Python the answer as one bytes object. Parsing it with the generated classes
copies the records into the message, and reading the message's `records` field copies them
once more; for the Spark source's 8 MiB answers those two copies (and the pages they touch)
were a fifth of a worker's CPU (2M records read by `range_reader` without Spark: 1.0 s of CPU
with them, 0.8 s without). This walk copies nothing: the records are a slice of a view of the
bytes gRPC gave (which the view keeps alive).

The walk knows only the nesting of `FetchResponse` (proto/replog/pb/broker.proto):
FetchResponse.topics -> FetchTopicResponse (topic, topic_id, partitions) ->
FetchPartitionResponse (its scalars, records, and three small messages: error ErrorStatus,
diverging_epoch EpochEndOffset, current_leader LeaderIdAndEpoch).

Rules (what protobuf's own parse gives, which the tests compare this with):
- A scalar field seen twice: the last value wins. A message field seen twice: the two are
  merged (fields of the later one win). A repeated field: one element per occurrence.
- Fields of unknown numbers are skipped (varint, 64-bit, length-delimited, 32-bit).
- int32 fields are the low 32 bits of their varint, int64 the low 64, both signed; strings
  must be UTF-8. Absent fields are 0, empty, or None for the three messages.
- Malformed bytes raise `MalformedFetchAnswerError` naming the message, the field and the byte
  position: a truncated varint, a varint longer than 10 bytes (a tag longer than 5 or above
  32 bits), a length past the end of its message, field number 0, a reserved wire type,
  invalid UTF-8 in a string. Nothing is read outside the bytes given.
- Stricter than protobuf in two cases no replog broker produces, refused rather than guessed
  at: a known field with another wire type (protobuf keeps it as an unknown field) and groups
  (wire types 3 and 4, which proto3 does not use).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from replog.spark.errors import MalformedFetchAnswerError

_VARINT, _I64, _LEN, _GROUP_START, _GROUP_END, _I32 = 0, 1, 2, 3, 4, 5
_MASK64 = (1 << 64) - 1
_WIRE_TYPE_NAMES = {0: "varint", 1: "64-bit", 2: "length-delimited", 5: "32-bit"}


@dataclass(frozen=True, slots=True)
class ErrorStatus:
    """A partition's `error` field as sent (code 0 means no error)."""

    code: int
    error_name: str
    message: str


@dataclass(frozen=True, slots=True)
class PartitionAnswer:
    """One FetchPartitionResponse."""

    partition: int
    error: ErrorStatus | None  # None: the field is absent
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    diverging_epoch: tuple[int, int] | None  # (leader_epoch, end_offset)
    current_leader: tuple[int, int] | None  # (leader_id, leader_epoch)
    records: memoryview  # a slice of the answer: no copy
    log_end_offset: int


@dataclass(frozen=True, slots=True)
class TopicAnswer:
    """One FetchTopicResponse."""

    topic: str
    topic_id: bytes  # as sent: checking its length is the caller's business
    partitions: list[PartitionAnswer]


# Per message: field number -> (name, wire type). Other numbers are unknown fields.
_RESPONSE = {1: ("topics", _LEN)}
_TOPIC = {1: ("topic", _LEN), 2: ("topic_id", _LEN), 3: ("partitions", _LEN)}
_PARTITION = {
    1: ("partition", _VARINT),
    2: ("error", _LEN),
    3: ("high_watermark", _VARINT),
    4: ("last_stable_offset", _VARINT),
    5: ("log_start_offset", _VARINT),
    6: ("diverging_epoch", _LEN),
    7: ("current_leader", _LEN),
    8: ("records", _LEN),
    9: ("log_end_offset", _VARINT),
}
_ERROR_STATUS = {1: ("code", _VARINT), 2: ("error_name", _LEN), 3: ("message", _LEN)}
_EPOCH_END_OFFSET = {1: ("leader_epoch", _VARINT), 2: ("end_offset", _VARINT)}
_LEADER = {1: ("leader_id", _VARINT), 2: ("leader_epoch", _VARINT)}


def fetch_answer_topics(data: bytes | memoryview) -> list[TopicAnswer]:
    """Every topic of the serialized FetchResponse `data` with its partitions, in wire order
    (module docstring); raises `MalformedFetchAnswerError` for bytes protobuf would not
    parse."""
    view = data if isinstance(data, memoryview) else memoryview(data)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return [
        _topic(view, start, end)
        for _, start, end in _fields(view, 0, len(view), _RESPONSE, "FetchResponse")
    ]


def _topic(view: memoryview, pos: int, end: int) -> TopicAnswer:
    topic = ""
    topic_id = b""
    partitions: list[PartitionAnswer] = []
    for number, start, stop in _fields(view, pos, end, _TOPIC, "FetchTopicResponse"):
        if number == 1:
            topic = _string(view, start, stop, "FetchTopicResponse.topic")
        elif number == 2:
            topic_id = bytes(view[start:stop])
        else:
            partitions.append(_partition(view, start, stop))
    return TopicAnswer(topic, topic_id, partitions)


def _partition(view: memoryview, pos: int, end: int) -> PartitionAnswer:
    partition = high_watermark = last_stable_offset = log_start_offset = log_end_offset = 0
    records = view[0:0]
    # The three messages: None while absent; a second occurrence merges into the first.
    error: ErrorStatus | None = None
    diverging: tuple[int, int] | None = None
    leader: tuple[int, int] | None = None
    for number, a, b in _fields(view, pos, end, _PARTITION, "FetchPartitionResponse"):
        # For varint fields `a` is the value; for length-delimited ones [a, b) is the payload.
        if number == 1:
            partition = _int32(a)
        elif number == 3:
            high_watermark = _int64(a)
        elif number == 4:
            last_stable_offset = _int64(a)
        elif number == 5:
            log_start_offset = _int64(a)
        elif number == 9:
            log_end_offset = _int64(a)
        elif number == 8:
            records = view[a:b]
        elif number == 2:
            code, name, message = (
                (0, "", "") if error is None else (error.code, error.error_name, error.message)
            )
            for field, x, y in _fields(view, a, b, _ERROR_STATUS, "ErrorStatus"):
                if field == 1:
                    code = _int32(x)
                elif field == 2:
                    name = _string(view, x, y, "ErrorStatus.error_name")
                else:
                    message = _string(view, x, y, "ErrorStatus.message")
            error = ErrorStatus(code, name, message)
        elif number == 6:
            diverging = _int_pair(
                view, a, b, _EPOCH_END_OFFSET, "EpochEndOffset", diverging, _int64
            )
        else:  # 7
            leader = _int_pair(view, a, b, _LEADER, "LeaderIdAndEpoch", leader, _int32)
    return PartitionAnswer(
        partition,
        error,
        high_watermark,
        last_stable_offset,
        log_start_offset,
        diverging,
        leader,
        records,
        log_end_offset,
    )


def _int_pair(
    view: memoryview,
    pos: int,
    end: int,
    known: dict[int, tuple[str, int]],
    what: str,
    previous: tuple[int, int] | None,
    second: Callable[[int], int],
) -> tuple[int, int]:
    """A two-integer message (int32 first field, `second` for the other), merged over
    `previous` as protobuf merges a repeated sub-message."""
    first, other = previous or (0, 0)
    for field, value, _ in _fields(view, pos, end, known, what):
        if field == 1:
            first = _int32(value)
        else:
            other = second(value)
    return first, other


def _fields(
    view: memoryview, pos: int, end: int, known: dict[int, tuple[str, int]], what: str
) -> list[tuple[int, int, int]]:
    """(field number, a, b) of each known field of the message in view[pos:end], in wire
    order: a varint field's value and 0, a length-delimited field's payload [a, b). Unknown
    fields are checked and skipped."""
    found: list[tuple[int, int, int]] = []
    while pos < end:
        at = pos
        tag, pos = _varint(view, pos, end, what, "tag", size_max=5)
        if tag > 0xFFFFFFFF:
            raise MalformedFetchAnswerError(f"{what}: tag at byte {at} overflows 32 bits")
        number, wire_type = tag >> 3, tag & 7
        if number == 0:
            raise MalformedFetchAnswerError(f"{what}: field number 0 at byte {at}")
        field = known.get(number)
        name = f"field {number}" + (f" ({field[0]})" if field else "")
        if wire_type not in _WIRE_TYPE_NAMES:
            kind = "a group" if wire_type in (_GROUP_START, _GROUP_END) else "reserved"
            raise MalformedFetchAnswerError(
                f"{what}: {name} at byte {at} has wire type {wire_type} ({kind}), which no "
                "FetchResponse uses"
            )
        if field is not None and wire_type != field[1]:
            raise MalformedFetchAnswerError(
                f"{what}: {name} at byte {at} has wire type {wire_type} "
                f"({_WIRE_TYPE_NAMES[wire_type]}), not {field[1]} ({_WIRE_TYPE_NAMES[field[1]]})"
            )
        if wire_type == _VARINT:
            value, pos = _varint(view, pos, end, what, f"the value of {name}")
            if field is not None:
                found.append((number, value, 0))
            continue
        if wire_type == _LEN:
            size_at = pos
            size, pos = _varint(view, pos, end, what, f"length of {name}")
            if size > end - pos:
                raise MalformedFetchAnswerError(
                    f"{what}: {name} at byte {at} says {size} bytes at byte {size_at}, "
                    f"past the end of its message at byte {end}"
                )
            if field is not None:
                found.append((number, pos, pos + size))
            pos += size
            continue
        width = 8 if wire_type == _I64 else 4
        if width > end - pos:
            raise MalformedFetchAnswerError(
                f"{what}: {name} at byte {at} needs {width} bytes, the message ends at byte {end}"
            )
        pos += width
    return found


def _varint(
    view: memoryview, pos: int, end: int, what: str, name: str, size_max: int = 10
) -> tuple[int, int]:
    """(value, next position) of the varint at `pos`, its bits beyond 64 dropped as protobuf
    drops them; it must end before `end` within `size_max` bytes."""
    start = pos
    result = 0
    shift = 0
    while pos < end:
        byte = view[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result & _MASK64, pos
        shift += 7
        if pos - start == size_max:
            raise MalformedFetchAnswerError(
                f"{what}: {name} at byte {start} is a varint longer than {size_max} bytes"
            )
    raise MalformedFetchAnswerError(
        f"{what}: {name} at byte {start} is a truncated varint (the message ends at byte {end})"
    )


def _string(view: memoryview, start: int, stop: int, what: str) -> str:
    try:
        return str(view[start:stop], "utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedFetchAnswerError(
            f"{what} at byte {start}: not UTF-8 ({exc.reason} at byte {start + exc.start})"
        ) from None


def _int32(value: int) -> int:
    return ((value & 0xFFFFFFFF) ^ 0x80000000) - 0x80000000


def _int64(value: int) -> int:
    return (value ^ (1 << 63)) - (1 << 63)
