"""The compiled span scan (`replog/record/_record_spans.c`) is built, and answers exactly as the
Python scan (`record_spans._scan`) on any input.

- It must be built: the suite is CI, and a checkout whose install built no scan (no C compiler)
  would clean with the slower Python loop unnoticed, so this fails rather than skips.
- Same answers: on whole, sparse, damaged and random regions, with record counts and last
  offset deltas off by some, and regions anywhere in the bytes, the compiled scan returns the
  Python scan's spans (equal values, keys as `bytes`) or None exactly where the Python scan
  raises `InvalidRecordError`. tests/record/test_record_spans.py checks the scan the module
  chooses against the record decoder.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_record_spans import records, region

from replog.errors import InvalidRecordError
from replog.record import record_spans
from replog.record.record_spans import Span

HEAD = 61  # `region`'s bytes before the records


def _python(data: bytes, position: int, end: int, count: int, last_delta: int) -> list[Span] | None:
    try:
        return record_spans._scan(data, position, end, count, last_delta)
    except InvalidRecordError:
        return None


def _compiled(
    data: bytes, position: int, end: int, count: int, last_delta: int
) -> list[Span] | None:
    compiled = record_spans._compiled
    assert compiled is not None
    spans = compiled.scan(data, position, end, count, last_delta)
    if spans is not None:
        assert all(span[2] is None or type(span[2]) is bytes for span in spans)
    return spans


def test_the_compiled_scan_is_built_and_chosen() -> None:
    assert record_spans._compiled is not None, (
        "replog/record/_record_spans.c is not built: `pip install -e .` (needs a C compiler)"
    )
    assert record_spans.SCANNER == "compiled"


@settings(max_examples=500, deadline=None)
@given(
    chosen=records,
    damage=st.lists(st.tuples(st.integers(0), st.integers(0, 255)), max_size=4),
    cut=st.integers(0, 6),
    count_change=st.sampled_from([0, 0, 0, -1, 1, -5, 1000]),
    delta_change=st.sampled_from([0, 0, 0, -1, 1, 50]),
    tail=st.binary(max_size=3),
)
def test_the_compiled_scan_answers_as_the_python_one(
    chosen: list[tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
    damage: list[tuple[int, int]],
    cut: int,
    count_change: int,
    delta_change: int,
    tail: bytes,
) -> None:
    data, last_delta = region(chosen)
    body = bytearray(data)
    if len(body) > HEAD:
        for at, byte in damage:
            body[HEAD + at % (len(body) - HEAD)] = byte
    damaged = bytes(body[: len(body) - cut] if cut < len(body) - HEAD else body)
    count = len(chosen) + count_change
    for shape in (data, damaged):
        for end in (len(shape), len(shape) - 1):
            for delta in (last_delta, last_delta + delta_change):
                arguments = (shape + tail, HEAD, max(end, HEAD), count, delta)
                assert _compiled(*arguments) == _python(*arguments)


@settings(max_examples=500, deadline=None)
@given(
    data=st.binary(max_size=200),
    position=st.integers(0, 210),
    end=st.integers(0, 210),
    count=st.integers(-2, 12),
    last_delta=st.integers(-2, 40) | st.integers(-(1 << 31), (1 << 31) - 1),
)
def test_random_bytes_get_the_same_answer(
    data: bytes, position: int, end: int, count: int, last_delta: int
) -> None:
    if not position <= end <= len(data):
        # Outside what a batch's parse hands the scan: the compiled one declines.
        assert _compiled(data, position, end, count, last_delta) is None
        return
    assert _compiled(data, position, end, count, last_delta) == _python(
        data, position, end, count, last_delta
    )


@pytest.mark.parametrize(
    "field",
    [
        b"\x80\x80\x80\x80\x10",  # a varint overflowing 32 bits
        b"\x80\x80\x80\x80\x80\x01",  # a varint longer than 5 bytes
        b"\xfe\xff\xff\xff\x0f",  # the largest int32 length: past any record
        b"\x03",  # length -2
    ],
    ids=["overflow", "too-long", "huge", "below-minus-one"],
)
def test_a_bad_key_length_is_refused_by_both(field: bytes) -> None:
    body = b"\x00\x00\x00" + field + b"\x01\x00"  # attributes, deltas, key, null value, headers
    data = b"h" * HEAD + bytes([len(body) << 1]) + body
    assert _python(data, HEAD, len(data), 1, 0) is None
    assert _compiled(data, HEAD, len(data), 1, 0) is None


def test_a_timestamp_delta_at_the_int64_bounds_is_read_alike() -> None:
    for delta in (-(1 << 63), (1 << 63) - 1):
        data, last_delta = region([(1, delta, b"k", b"v", [])])
        spans = _compiled(data, HEAD, len(data), 1, last_delta)
        assert spans == _python(data, HEAD, len(data), 1, last_delta)
        assert spans is not None and spans[0][1] == delta
