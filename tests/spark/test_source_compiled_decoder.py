"""The compiled record decoder (`replog/spark/_batch_decode.c`) is built, and is safe on any
input.

- A read past the buffer would crash the test process: the fuzzed buffers end right before
  a page that cannot be read (`_guarded`), so such a read fails the test instead of passing
  unnoticed.
- It must be built: the suite is CI, and a checkout whose install built no decoder (no C
  compiler) would run the slower numpy decoder unnoticed, so this fails rather than skips.
- Its answers are compared with the strict decoder's on random and damaged batches in
  tests/record/test_record_columnar.py and tests/spark/test_source_columns.py; here, its
  arguments themselves are fuzzed: random bytes, regions outside the buffer, out of order or
  overlapping, record counts too large or negative, a region cut short. It answers columns or
  None (the caller then decodes in Python), never crashes nor reads outside the buffer;
  columns only where the strict decoder gives the same records.
"""

from __future__ import annotations

import ctypes
import mmap
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replog.errors import InvalidRecordError
from replog.record import build_batch, validate_batch
from replog.record.header import RECORD_BATCH_OVERHEAD
from replog.spark import batch_columns

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "record"))
from record_test_support import record_lists, with_records_region
from test_record_columnar import _oracle, draw_damaged_batch

NOW = 1_700_000_000_000
PROT_NONE = 0  # <sys/mman.h>


def test_the_compiled_decoder_is_built_and_chosen() -> None:
    assert batch_columns._compiled is not None, (
        "replog/spark/_batch_decode.c is not built: `pip install -e .` (needs a C compiler)"
    )
    assert batch_columns.DECODER == "compiled"


def _decode(buffer: bytes | memoryview, spans: list, infos: list) -> object:  # type: ignore[type-arg]
    assert batch_columns._compiled is not None
    return batch_columns._compiled.decode(buffer, spans, infos)


def _guarded(data: bytes) -> memoryview:
    """`data` at the very end of a readable page, the next page unreadable: a read past its end
    is a segmentation fault."""
    page = mmap.PAGESIZE
    pages = (len(data) + page - 1) // page + 1
    area = mmap.mmap(-1, pages * page)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    start = ctypes.addressof(ctypes.c_char.from_buffer(area))
    assert libc.mprotect(start + (pages - 1) * page, page, PROT_NONE) == 0
    end = (pages - 1) * page
    area[end - len(data) : end] = data
    return memoryview(area)[end - len(data) : end]


infos = st.tuples(
    st.integers(-2, 300),
    st.integers(0, 2**62),
    st.integers(-(2**62), 2**62),
    st.booleans(),
)


@settings(max_examples=500, deadline=None)
@given(
    st.binary(max_size=400),
    st.lists(st.tuples(st.integers(-5, 420), st.integers(-5, 420), infos), max_size=4),
)
def test_random_bytes_and_regions_give_none_or_columns(buffer: bytes, batches: list) -> None:  # type: ignore[type-arg]
    spans = [(start, end) for start, end, _ in batches]
    found = _decode(buffer, spans, [info for _, _, info in batches])
    if found is not None:
        assert isinstance(found, tuple) and len(found) == 9
        for start, end, _ in batches:
            assert 0 <= start <= end <= len(buffer)
    _decode(_guarded(buffer), spans, [info for _, _, info in batches])


@settings(max_examples=400, deadline=None)
@given(record_lists, st.data())
def test_a_damaged_batch_at_the_end_of_readable_memory_is_read_inside_it(records, data) -> None:  # type: ignore[no-untyped-def]
    damaged = draw_damaged_batch(records, data)
    header = validate_batch(damaged)
    info = (header.records_count, 0, header.base_timestamp, False)
    _decode(_guarded(damaged), [(RECORD_BATCH_OVERHEAD, len(damaged))], [info])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.binary(max_size=30), min_size=1, max_size=30),
    st.integers(-3, 3),
    st.integers(-3, 3),
    st.integers(-3, 3),
    st.binary(max_size=8),
)
def test_a_real_region_with_wrong_bounds_or_count_gives_none_or_the_strict_answer(
    values: list[bytes], start_moved: int, end_moved: int, count_moved: int, tail: bytes
) -> None:
    raw = build_batch([(NOW + i, b"k", v, ()) for i, v in enumerate(values)], base_offset=9)
    header = validate_batch(raw)
    data = raw + tail
    start, end = RECORD_BATCH_OVERHEAD + start_moved, len(raw) + end_moved
    count = len(values) + count_moved
    found = _decode(data, [(start, end)], [(count, 9, header.base_timestamp, False)])
    if found is None:
        return
    assert (start_moved, end_moved, count_moved) == (0, 0, 0)
    offsets = memoryview(found[0]).cast("q").tolist()
    assert offsets == [row[0] for row in _oracle(data, [(0, header)])]


def test_a_region_past_the_buffer_or_overlapping_is_declined_before_reading() -> None:
    raw = build_batch([(NOW, b"k", b"v", ())])
    header = validate_batch(raw)
    info = (1, 0, header.base_timestamp, False)
    assert _decode(raw, [(RECORD_BATCH_OVERHEAD, len(raw) + 1)], [info]) is None
    assert _decode(raw[:-1], [(RECORD_BATCH_OVERHEAD, len(raw))], [info]) is None
    assert _decode(raw, [(-1, len(raw))], [info]) is None
    # The same region twice: its keys and values would not fit a buffer's length.
    span = (RECORD_BATCH_OVERHEAD, len(raw))
    assert _decode(raw, [span, span], [info, info]) is None
    assert _decode(raw, [(RECORD_BATCH_OVERHEAD, len(raw))], [(10**12, 0, 0, False)]) is None
    assert _decode(raw, [(RECORD_BATCH_OVERHEAD, len(raw))], [info]) is not None


def test_a_timestamp_or_offset_past_int64_is_declined() -> None:
    raw = build_batch([(NOW, b"k", b"v", ()), (NOW + 5, b"k", b"v", ())])
    span = [(RECORD_BATCH_OVERHEAD, len(raw))]
    assert _decode(raw, span, [(2, 2**63 - 1, 0, False)]) is None
    assert _decode(raw, span, [(2, 0, 2**63 - 3, False)]) is None
    assert _decode(raw, span, [(2, 0, 2**63 - 3, True)]) is not None  # LogAppendTime: no sum


def test_the_compiled_columns_are_arrow_binary_without_copies() -> None:
    records = [(NOW + i, None if i % 2 else b"k%d" % i, b"v" * i, ()) for i in range(50)]
    raw = build_batch(records, base_offset=3)
    placed = [(0, validate_batch(raw))]
    columns = batch_columns._compiled_columns(memoryview(raw), placed, "test")
    assert columns is not None
    assert columns.keys.null_count == 25 and columns.values.null_count == 0
    assert columns.offsets.tolist() == list(range(3, 53))
    assert columns.offsets.flags.writeable and columns.timestamps_us.flags.writeable
    rows = _oracle(raw, placed)
    assert columns.values.to_pylist() == [row[4] for row in rows]
    assert columns.keys.to_pylist() == [row[3] for row in rows]


def test_a_null_header_key_is_declined() -> None:
    # One record: attributes, deltas 0, null key and value, one header whose key length is -1
    # and that ends there. Read as a length of -1 bytes (a step back), the key's length byte
    # would read again as a null value and the record would end where it should.
    region = bytes([0x0E, 0x00, 0x00, 0x00, 0x01, 0x01, 0x02, 0x01])
    raw = with_records_region(build_batch([(NOW, None, None, ())]), region)
    placed = [(0, validate_batch(raw))]
    with pytest.raises(InvalidRecordError, match="null key"):
        _oracle(raw, placed)
    assert batch_columns._compiled_columns(raw, placed, "test") is None
    with pytest.raises(InvalidRecordError, match="null key"):
        batch_columns.decode_batches(raw, placed, where="test")
