"""The protobuf wire form of the Broker messages that carry record bytes, with the records kept
out of protobuf's hands: `join_records` writes them into a serialized message, `split_records`
takes them out of one, each batch's bytes copied at most once.

Why: protobuf copies a `bytes` field into a message when it is set or parsed, again when the
message is serialized or the field is read, and `ByteSize` serializes the whole message once
more. For a leader that took three copies of every batch it answered a fetch with and four
of every batch produced to it, about a seventh of its CPU (perf, docs/benchmarks.md). Here
every field but `records` is still protobuf's: the caller serializes or parses the message
without its records (the *skeleton*), and only the records are placed by hand.

A *path* names where the records sit: the field numbers of the repeated message fields to
walk down, then the records field, e.g. FetchResponse.topics (1) -> partitions (3) ->
records (8) is (1, 3, 8). The messages the walk ends in (the partitions) are the *holders*;
records go with holders in wire order, one entry per holder (empty for one without records).

Rules:
- What `join_records` writes is the message protobuf would write with those records set, but
  for field order: each holder's records come last in it. Protobuf readers accept fields in
  any order, so any of them parses it to the same message.
- `split_records` accepts whatever protobuf accepts along the path: fields in any order,
  unknown fields, groups, a repeated message field split over several occurrences (each one a
  new element), and for a holder with its records field more than once, the last one (as
  protobuf keeps the last value of a scalar). A path field with another wire type than
  length-delimited is protobuf's unknown field and is left in the skeleton as is.
- Bytes protobuf would refuse along the path (a truncated varint or length, a length past the
  end of its message, field number 0, an end-group without its start, a reserved wire type)
  raise protobuf's `DecodeError` naming the byte position; the rest of the message is
  checked by protobuf's parse of the skeleton.
- The records `split_records` returns are read-only memoryviews of the bytes given: nothing
  is copied, and they keep those bytes alive.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence, Sized
from typing import Any, TypeVar

from google.protobuf.message import DecodeError

from replog.record.batch import Buffer
from replog.record.varint import encode_unsigned

_VARINT, _I64, _LEN, _GROUP_START, _GROUP_END, _I32 = 0, 1, 2, 3, 4, 5
_VARINT_BYTES_MAX = 10
_GROUP_DEPTH_MAX = 100  # protobuf's default recursion limit
# Tags and lengths below 128 (every tag along the paths, and the lengths of small messages)
# are one byte: a table lookup instead of a call.
_ONE_BYTE = tuple(bytes((n,)) for n in range(128))

# What to do with one holder, view[start:end] (its records field number given): append its
# pieces.
_Holder = Callable[[memoryview, int, int, int, list[Any]], None]
# What a holder's records may be in `records_pieces`: a buffer, or a stand-in of that size.
_Records = TypeVar("_Records", bound=Sized)


def varint(value: int) -> bytes:
    """The base-128 varint of a non-negative integer (tags and lengths)."""
    return _ONE_BYTE[value] if value < 128 else encode_unsigned(value)


def join_records(skeleton: bytes, path: Sequence[int], records: Sequence[Buffer]) -> bytes:
    """`skeleton` (a serialized message whose holders have no records) with `records[i]` added
    to the i-th holder along `path`, in wire order (module docstring). There must be one
    entry per holder; an empty one adds nothing."""
    return b"".join(records_pieces(skeleton, path, records))


def records_pieces(
    skeleton: bytes, path: Sequence[int], records: Sequence[_Records]
) -> list[Buffer | _Records]:
    """What `join_records` joins, in order: views of `skeleton`, tags and lengths, and each
    of `records` itself (not copied: a buffer, or anything else of that many bytes that the
    writer sends apart)."""
    left = list(reversed(records))

    def holder(
        view: memoryview, start: int, end: int, number: int, pieces: list[Buffer | _Records]
    ) -> None:
        if not left:
            raise ValueError("fewer records than holders")
        pieces.append(view[start:end])
        added = left.pop()
        if len(added):  # its records field last (module docstring)
            pieces += (varint(number << 3 | _LEN), varint(len(added)), added)

    pieces: list[Buffer | _Records] = []
    _rebuild(memoryview(skeleton), 0, len(skeleton), tuple(path), holder, pieces)
    if left:
        raise ValueError(f"{len(records)} records for {len(records) - len(left)} holders")
    return pieces


def split_records(data: bytes, path: Sequence[int]) -> tuple[bytes, list[memoryview]]:
    """(the skeleton of the serialized message `data`: it without its holders' records fields,
    each holder's records in wire order) along `path` (module docstring)."""
    records: list[memoryview] = []

    def holder(view: memoryview, start: int, end: int, number: int, pieces: list[Buffer]) -> None:
        found = view[0:0]
        for field, wire_type, at, payload, after in _fields(view, start, end):
            if field == number and wire_type == _LEN:
                found = view[payload:after]  # the last occurrence wins
            else:
                pieces.append(view[at:after])
        records.append(found)

    pieces: list[Buffer] = []
    _rebuild(memoryview(data), 0, len(data), tuple(path), holder, pieces)
    return b"".join(pieces), records


def _rebuild(
    view: memoryview,
    pos: int,
    end: int,
    path: tuple[int, ...],
    holder: _Holder,
    pieces: list[Any],
) -> None:
    """Append the pieces of the message view[pos:end] rebuilt along `path`, each holder by
    `holder`, every other field as it is. A path field's length is written anew, as what is
    inside it changes size."""
    if len(path) == 1:
        holder(view, pos, end, path[0], pieces)
        return
    copied_from = pos
    for number, wire_type, at, start, stop in _fields(view, pos, end):
        if number != path[0] or wire_type != _LEN:
            continue
        if copied_from < at:
            pieces.append(view[copied_from:at])
        pieces.append(varint(number << 3 | _LEN))
        slot = len(pieces)
        pieces.append(b"")  # its length, known once what is inside is
        _rebuild(view, start, stop, path[1:], holder, pieces)
        pieces[slot] = varint(sum(map(len, pieces[slot + 1 :])))
        copied_from = stop
    if copied_from < end:
        pieces.append(view[copied_from:end])


def _fields(view: memoryview, pos: int, end: int) -> list[tuple[int, int, int, int, int]]:
    """(number, wire type, tag position, payload start, payload end) of every field of the
    message view[pos:end], in wire order; a group's payload is what lies between its tags."""
    fields: list[tuple[int, int, int, int, int]] = []
    while pos < end:
        at = pos
        number, wire_type, pos = _tag(view, pos, end)
        if wire_type == _GROUP_END:
            raise DecodeError(f"end-group tag of field {number} at byte {at} without its start")
        start, pos = _skip(view, pos, end, number, wire_type, at)
        fields.append((number, wire_type, at, start, pos))
    return fields


def _tag(view: memoryview, pos: int, end: int) -> tuple[int, int, int]:
    at = pos
    tag, pos = _varint(view, pos, end)
    number, wire_type = tag >> 3, tag & 7
    if number == 0 or tag > 0xFFFFFFFF:
        raise DecodeError(f"invalid tag {tag} at byte {at}")
    if wire_type > _I32:
        raise DecodeError(f"field {number} at byte {at} has reserved wire type {wire_type}")
    return number, wire_type, pos


def _skip(
    view: memoryview, pos: int, end: int, number: int, wire_type: int, at: int, depth: int = 0
) -> tuple[int, int]:
    """(payload start, position after the field) of the field whose tag ended at `pos`.
    Groups nest at most `_GROUP_DEPTH_MAX` deep (protobuf's own recursion limit): a request of
    nested group tags is malformed, not a reason to exhaust the stack."""
    if wire_type == _VARINT:
        _, after = _varint(view, pos, end)
        return pos, after
    if wire_type == _LEN:
        size, start = _varint(view, pos, end)
        if size > end - start:
            raise DecodeError(
                f"field {number} at byte {at}: {size} bytes, past the end of its message "
                f"at byte {end}"
            )
        return start, start + size
    if wire_type == _GROUP_START:
        if depth >= _GROUP_DEPTH_MAX:
            raise DecodeError(
                f"group of field {number} at byte {at} nests deeper than {_GROUP_DEPTH_MAX} groups"
            )
        start = pos
        while True:
            if pos >= end:
                raise DecodeError(f"group of field {number} at byte {at} never ends")
            inner_at = pos
            inner, inner_type, pos = _tag(view, pos, end)
            if inner_type == _GROUP_END:
                if inner != number:
                    raise DecodeError(
                        f"group of field {number} at byte {at} ended by field {inner} at byte "
                        f"{inner_at}"
                    )
                return start, pos
            _, pos = _skip(view, pos, end, inner, inner_type, inner_at, depth + 1)
    width = 8 if wire_type == _I64 else 4
    if width > end - pos:
        raise DecodeError(f"field {number} at byte {at} needs {width} bytes past its message")
    return pos, pos + width


def _varint(view: memoryview, pos: int, end: int) -> tuple[int, int]:
    start = pos
    result = shift = 0
    while pos < end and pos - start < _VARINT_BYTES_MAX:
        byte = view[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
    raise DecodeError(f"truncated or overlong varint at byte {start}")
