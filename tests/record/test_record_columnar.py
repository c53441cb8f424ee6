"""The Spark source's columnar decoder equals the record-by-record decoder.

`replog.spark.batch_columns.decode_batches` turns whole batches into columns with numpy; the
strict decoder (`RecordBatch.records()`) is the oracle. Properties, over random batches
(keys, values and header values null or not, headers, any timestamps, every available codec,
LogAppendTime, several batches in one buffer):
- the vectorised path itself (not its fallback) gives exactly the oracle's records;
- the compiled decoder (`_batch_decode.c`) alone does too, headers included;
- `decode_batches` does too, with the compiled decoder first (as built) and without it;
- on a batch whose records region was damaged (resealed, so the CRC passes), every decoder
  agrees: the same columns, or an `InvalidRecordError` with the same message; the compiled
  decoder alone gives the same columns or declines (None), and declines whatever the strict
  decoder refuses.
"""

from __future__ import annotations

import random
from unittest.mock import patch

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from record_test_support import record_lists, with_records_region

from replog.errors import InvalidRecordError
from replog.record import (
    COMPRESSION_NONE,
    RECORD_BATCH_OVERHEAD,
    RecordBatch,
    available_codecs,
    build_batch,
    validate_batch,
)
from replog.record.header import BatchHeader
from replog.spark import batch_columns
from replog.spark.batch_columns import BatchColumns, decode_batches

CODECS = sorted(available_codecs())

batch_specs = st.lists(
    st.tuples(
        record_lists,
        st.sampled_from(CODECS),
        st.integers(0, 2**40),
        st.none() | st.integers(1_500_000_000_000, 1_900_000_000_000),
    ),
    min_size=1,
    max_size=4,
)


def _build(specs: list[tuple[list, int, int, int | None]], lead: int = 0) -> tuple[bytes, list]:
    """The batches back to back after `lead` junk bytes, and their (position, header)."""
    data = bytearray(b"\xff" * lead)
    placed: list[tuple[int, BatchHeader]] = []
    for records, codec, base_offset, append_time in specs:
        raw = build_batch(
            records, compression=codec, base_offset=base_offset, log_append_time=append_time
        )
        placed.append((len(data), validate_batch(raw)))
        data += raw
    return bytes(data), placed


def _oracle(data: bytes, placed: list[tuple[int, BatchHeader]]) -> list[tuple]:
    rows = []
    for position, header in placed:
        kind = 1 if header.is_log_append_time else 0
        for r in RecordBatch(header, data, position, "test").records():
            rows.append((r.offset, _micros(r.timestamp), kind, r.key, r.value, r.headers))
    return rows


def _micros(millis: int) -> int:
    """`millis` * 1000 as the columns hold it: an int64, wrapped as numpy's multiply wraps."""
    return (millis * 1000 + 2**63) % 2**64 - 2**63


def _rows(columns: BatchColumns) -> list[tuple]:
    assert columns.keys.type == pa.binary() and columns.values.type == pa.binary()
    columns.keys.validate(full=True)
    columns.values.validate(full=True)
    headers = columns.headers if columns.headers is not None else [()] * len(columns)
    return list(
        zip(
            columns.offsets.tolist(),
            columns.timestamps_us.tolist(),
            columns.timestamp_types.tolist(),
            columns.keys.to_pylist(),
            columns.values.to_pylist(),
            headers,
            strict=True,
        )
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch_specs, st.integers(0, 9))
def test_vectorised_path_equals_the_record_decoder(specs: list, lead: int) -> None:
    data, placed = _build(specs, lead)
    expected = _oracle(data, placed)
    # The vectorised path itself, so a silent fallback cannot make this pass.
    assert _rows(batch_columns._vectorised(data, placed, "test")) == expected
    assert _rows(decode_batches(data, placed, where="test")) == expected
    assert _compiled_rows(data, placed) == expected


def test_headers_column_is_none_without_headers_and_slices_keep_rows() -> None:
    records = [
        (1_700_000_000_000 + i, None if i % 3 else b"k%d" % i, b"v" * i, ()) for i in range(40)
    ]
    data, placed = _build([(records, COMPRESSION_NONE, 100, None)])
    columns = decode_batches(data, placed, where="test")
    assert columns.headers is None
    part = columns.slice(5, 9)
    assert _rows(part) == _oracle(data, placed)[5:9]


@pytest.mark.parametrize("size", [12, 13, 8_200, 70_000])
def test_long_values_and_view_boundaries(size: int) -> None:
    records = [(1_700_000_000_000, b"x" * size, bytes(range(256)) * (size // 256 + 1), ())] * 3
    data, placed = _build([(records, COMPRESSION_NONE, 0, None)])
    assert _rows(batch_columns._vectorised(data, placed, "test")) == _oracle(data, placed)


def _damaged_outcome(decode, data: bytes, placed: list) -> object:  # type: ignore[no-untyped-def]
    try:
        return decode(data, placed)
    except InvalidRecordError as error:
        return ("error", str(error))


def _compiled_rows(data: bytes | memoryview, placed: list) -> list[tuple] | None:  # type: ignore[type-arg]
    """The compiled decoder's rows alone (no fallback): None where it declines."""
    assert batch_columns._compiled is not None, "the compiled decoder is not built"
    try:
        columns = batch_columns._compiled_columns(data, placed, "test")
    except InvalidRecordError:  # a compressed region that does not decompress
        return None
    return None if columns is None else _rows(columns)


def _columnar_rows(data: bytes | memoryview, placed: list) -> list[tuple]:  # type: ignore[type-arg]
    """`decode_batches`' rows, checked equal with the compiled decoder first and without it
    (numpy alone), and with the compiled decoder's own answer where it gives one; its
    `InvalidRecordError` when the batches are not valid, which the compiled decoder must
    then have declined."""
    compiled = _compiled_rows(data, placed)
    with patch.object(batch_columns, "_compiled", None):
        try:
            rows = _rows(decode_batches(data, placed, where="test"))
        except InvalidRecordError:
            assert compiled is None  # it took nothing the strict decoder refuses
            raise
    assert compiled is None or compiled == rows
    assert _rows(decode_batches(data, placed, where="test")) == rows
    return rows


def draw_damaged_batch(records: list, data) -> bytes:  # type: ignore[no-untyped-def]
    """A batch of `records` with 1-3 bytes of its records region overwritten and 0-2 bytes cut
    from its end (its header and CRC made to match, so only the records are wrong)."""
    raw = build_batch(records)
    region = bytearray(raw[RECORD_BATCH_OVERHEAD:])
    edits = data.draw(
        st.lists(
            st.tuples(st.integers(0, len(region) - 1), st.integers(0, 255)), min_size=1, max_size=3
        )
    )
    for at, value in edits:
        region[at] = value
    cut = data.draw(st.integers(0, 2))
    return with_records_region(raw, bytes(region[: len(region) - cut]))


@settings(max_examples=400, deadline=None)
@given(record_lists, st.data())
def test_damaged_records_region_gives_the_record_decoders_answer(records: list, data) -> None:  # type: ignore[no-untyped-def]
    damaged = draw_damaged_batch(records, data)
    placed = [(0, validate_batch(damaged))]
    assert _damaged_outcome(_columnar_rows, damaged, placed) == _damaged_outcome(
        _oracle, damaged, placed
    )


def test_many_records_in_many_batches() -> None:
    rng = random.Random(7)
    specs = []
    offset = 0
    for _ in range(20):
        records = [
            (
                1_700_000_000_000 + rng.randrange(10_000),
                None if rng.random() < 0.1 else rng.randbytes(rng.randrange(20)),
                None if rng.random() < 0.05 else rng.randbytes(rng.randrange(300)),
                (),
            )
            for _ in range(rng.randrange(1, 500))
        ]
        specs.append((records, rng.choice(CODECS), offset, None))
        offset += len(records)
    data, placed = _build(specs)
    columns = batch_columns._vectorised(data, placed, "test")
    assert _rows(columns) == _oracle(data, placed)
    assert np.array_equal(columns.offsets, np.arange(offset))


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 80), st.integers(0, 200), st.none() | st.binary(max_size=8)),
        min_size=1,
        max_size=6,
    ),
    st.sampled_from(CODECS),
)
def test_runs_of_equal_sized_records_are_found(runs: list, codec: int) -> None:  # type: ignore[type-arg]
    # Runs of records of one size (what `_record_starts` guesses), with one-byte (< 64) and
    # two-byte lengths, timestamps whose delta varint grows inside a run, and null keys.
    records = []
    for count, value_size, key in runs:
        records += [(NOW_MS + 7 * len(records), key, b"v" * value_size, ()) for _ in range(count)]
    data, placed = _build([(records, codec, 5, None)])
    assert _rows(batch_columns._vectorised(data, placed, "test")) == _oracle(data, placed)


NOW_MS = 1_700_000_000_000
