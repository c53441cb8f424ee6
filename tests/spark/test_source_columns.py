"""The range reader's raw path without a cluster: which batches of a fetch answer it decodes,
and the Arrow batches it builds from decoded columns (no Spark session needed).

- `_batches_to_read` keeps the consumer's rules: batches wholly before the position are
  skipped, reading stops at the bound (the planned end or the high watermark), control batches
  are skipped but move the position, a CRC mismatch is a `CorruptRecordError` unless
  `check.crcs` is off, and a partial batch at the end is left for the next fetch.
- `columns_to_record_batch` gives exactly what `to_record_batch` gives for the same records,
  in the Arrow schema Spark derives, with and without headers, for a narrower schema too;
  `headers` is null for a record without any, and a header key that is not valid UTF-8 gets
  U+FFFD for each malformed sequence (Java's decoding) instead of failing the batch.
- The decoder's paths a fetch answer takes, beyond tests/record/test_record_columnar.py:
  uncompressed batches are read where they lie in the answer (no copy), with or without
  bytes after the last one (varints read up to the answer's end), on random and on damaged
  records; keys and values all of one size (a gather) or not (Arrow's filter), with nulls
  and empty values, copied or not; varints at their limits (5-byte ints, 10-byte longs, not
  minimal) decode, longer or overflowing ones get the strict decoder's error, at the
  answer's end or before other bytes.
- The answer may be a memoryview (what the fetcher hands over): decoded where it lies, with
  the same columns or the same error as from bytes, headers and the strict fallback included.
- Every comparison with the strict decoder runs both columnar decoders, the compiled one and
  numpy (`test_record_columnar._columnar_rows`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from unittest.mock import patch

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import LongType, StructField, StructType
from test_source_arrow import SPARK_SCHEMA

from replog.client.records import ConsumerRecord
from replog.errors import CorruptRecordError, InvalidRecordError
from replog.record import (
    COMPRESSION_GZIP,
    COMPRESSION_NONE,
    RecordBatch,
    available_codecs,
    build_batch,
    validate_batch,
)
from replog.record.varint import encode_varint, encode_varlong
from replog.spark import arrow, batch_columns
from replog.spark.arrow import ConstantColumns, columns_to_record_batch, to_record_batch
from replog.spark.batch_columns import decode_batches
from replog.spark.range_reader import _batches_to_read

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "record"))
from record_test_support import record_lists, with_records_region

# The oracle and the comparison helpers of the decoder's own property tests, not a copy.
from test_record_columnar import (
    _columnar_rows,
    _compiled_rows,
    _damaged_outcome,
    _oracle,
    _rows,
    draw_damaged_batch,
)

NOW = 1_700_000_000_000


def _batch(base_offset: int, count: int, *, control: bool = False, codec: int = 0) -> bytes:
    records = [(NOW + i, b"k%d" % i, b"v%d" % (base_offset + i), ()) for i in range(count)]
    return build_batch(records, base_offset=base_offset, is_control=control, compression=codec)


def _answer() -> bytes:
    # offsets 0-4, 5-9, a control batch at 10, 11-15, and a partial batch (16-20) cut short
    last = _batch(16, 5)
    return _batch(0, 5) + _batch(5, 5) + _batch(10, 1, control=True) + _batch(11, 5) + last[:30]


def _offsets(data: bytes, found: list) -> list[int]:  # type: ignore[type-arg]
    return decode_batches(data, found, where="t").offsets.tolist()


def test_batches_before_the_position_and_at_the_bound_are_not_read() -> None:
    data = _answer()
    found, next_position = _batches_to_read(data, 7, 1 << 62, True, "t")
    assert [h.base_offset for _, h in found] == [5, 11]  # 0-4 skipped, control skipped
    assert _offsets(data, found) == [5, 6, 7, 8, 9, 11, 12, 13, 14, 15]
    assert next_position == 16  # the partial batch is fetched again next time
    found, next_position = _batches_to_read(data, 7, 9, True, "t")
    assert [h.base_offset for _, h in found] == [5]
    assert next_position == 9  # never past the bound
    found, next_position = _batches_to_read(data, 10, 11, True, "t")
    assert found == [] and next_position == 11  # only the control batch: the position moves


def test_a_crc_mismatch_is_corruption_unless_check_crcs_is_off() -> None:
    good = _batch(0, 3)
    bad = bytearray(good)
    bad[-1] ^= 0x01  # a value byte: CRC-covered
    with pytest.raises(CorruptRecordError, match=r"t: record batch at offset 0 failed its CRC"):
        _batches_to_read(bytes(bad), 0, 10, True, "t")
    found, next_position = _batches_to_read(bytes(bad), 0, 10, False, "t")
    assert len(found) == 1 and next_position == 3


@pytest.mark.parametrize("codec", sorted(available_codecs()))
def test_columns_give_the_same_arrow_batch_as_records(codec: int) -> None:
    headers = (("h", b"1"), ("n", None))
    raw = build_batch(
        [(NOW + 1, b"k", b"v", headers), (NOW + 2, None, None, ()), (NOW + 3, b"", b"x" * 20, ())],
        base_offset=40,
        compression=codec,
    )
    found, _ = _batches_to_read(raw, 41, 100, True, "t")
    columns = decode_batches(raw, found, where="t")
    records = [
        ConsumerRecord("t", 3, r.offset, r.timestamp, 0, r.key, r.value, r.headers, -1)
        for r in RecordBatch.parse(raw).records()
    ]
    schema = to_arrow_schema(SPARK_SCHEMA, timezone="UTC")
    for first, stop in ((0, 3), (1, 3), (1, 2)):
        got = columns_to_record_batch("t", 3, columns.slice(first, stop), schema)
        assert got.schema.equals(schema)
        assert got.to_pylist() == to_record_batch("t", 3, records[first:stop], schema).to_pylist()
    narrow = to_arrow_schema(StructType([StructField("offset", LongType())]), timezone="UTC")
    assert columns_to_record_batch("t", 3, columns, narrow).to_pylist() == [
        {"offset": 40},
        {"offset": 41},
        {"offset": 42},
    ]


def test_records_without_headers_have_null_headers() -> None:
    schema = to_arrow_schema(SPARK_SCHEMA, timezone="UTC")
    raw = _batch(0, 4, codec=COMPRESSION_NONE)
    found, _ = _batches_to_read(raw, 0, 4, True, "t")
    columns = decode_batches(raw, found, where="t")
    assert columns.headers is None
    batch = columns_to_record_batch("t", 0, columns, schema)
    assert batch.column("headers").to_pylist() == [None, None, None, None]
    assert batch.schema.equals(schema)
    batch.validate(full=True)
    # next to a record with headers, too
    raw = build_batch([(NOW, b"k", b"v", (("h", b"1"),)), (NOW + 1, None, None, ())])
    found, _ = _batches_to_read(raw, 0, 2, True, "t")
    batch = columns_to_record_batch("t", 0, decode_batches(raw, found, where="t"), schema)
    assert batch.column("headers").to_pylist() == [[{"key": "h", "value": b"1"}], None]


@pytest.mark.parametrize("codec", sorted(available_codecs()))
def test_a_header_key_that_is_not_utf8_gets_replacement_characters(codec: int) -> None:
    # A non-Python producer may write any bytes as a key; Java decodes them with U+FFFD for
    # each malformed sequence. The key is written here as the surrogate escapes of its bytes:
    # 0xff, then a 3-byte sequence cut short (0xe2 0x82), then "ok".
    key = b"\xff\xe2\x82ok".decode("utf-8", "surrogateescape")
    raw = build_batch([(NOW, b"k", b"v", ((key, b"1"), ("fine", None)))], compression=codec)
    found, _ = _batches_to_read(raw, 0, 1, True, "t")
    schema = to_arrow_schema(SPARK_SCHEMA, timezone="UTC")
    batch = columns_to_record_batch("t", 0, decode_batches(raw, found, where="t"), schema)
    expected = [[{"key": "\ufffd\ufffdok", "value": b"1"}, {"key": "fine", "value": None}]]
    assert batch.column("headers").to_pylist() == expected
    records = [ConsumerRecord("t", 0, 0, NOW, 0, b"k", b"v", ((key, b"1"), ("fine", None)), -1)]
    assert to_record_batch("t", 0, records, schema).column("headers").to_pylist() == expected


def _in_answer(batches: list[bytes], tail: bytes) -> tuple[bytes, list]:  # type: ignore[type-arg]
    """The batches back to back, then `tail` (as a fetch answer ending with a partial batch)."""
    data = b"".join(batches) + tail
    placed, at = [], 0
    for raw in batches:
        placed.append((at, validate_batch(raw)))
        at += len(raw)
    return data, placed


@settings(max_examples=200, deadline=None)
@given(st.lists(record_lists, min_size=1, max_size=4), st.binary(max_size=20))
def test_uncompressed_batches_are_decoded_where_they_lie(specs: list, tail: bytes) -> None:  # type: ignore[type-arg]
    batches, base_offset = [], 0
    for records in specs:
        batches.append(build_batch(records, base_offset=base_offset))
        base_offset += len(records)
    data, placed = _in_answer(batches, tail)
    buffer, _ = batch_columns._regions(data, placed, "test")
    assert buffer is data  # no copy: the case under test
    expected = _oracle(data, placed)
    assert _rows(batch_columns._vectorised(data, placed, "test")) == expected
    assert _rows(decode_batches(data, placed, where="test")) == expected
    view = memoryview(data)
    assert batch_columns._regions(view, placed, "test")[0] is view  # a view: no copy either
    assert _rows(batch_columns._vectorised(view, placed, "test")) == expected
    assert _rows(decode_batches(view, placed, where="test")) == expected
    for answer in (data, view):
        assert _compiled_rows(answer, placed) == expected


@settings(max_examples=300, deadline=None)
@given(record_lists, st.data())
def test_damaged_batch_where_it_lies_gives_the_record_decoders_answer(records, data) -> None:  # type: ignore[no-untyped-def]
    damaged = draw_damaged_batch(records, data)
    answer, placed = _in_answer([build_batch(records), damaged], data.draw(st.binary(max_size=9)))
    assert batch_columns._regions(answer, placed, "test")[0] is answer
    expected = _damaged_outcome(_oracle, answer, placed)
    assert _damaged_outcome(_columnar_rows, answer, placed) == expected
    assert _damaged_outcome(_columnar_rows, memoryview(answer), placed) == expected


@pytest.mark.parametrize(
    "keys,values",
    [
        ([b"k1", None, b"k3", None], [b"v" * 100, b"w" * 100, None, b"x" * 100]),  # one size
        ([None, None], [None, None]),  # all null
        ([b"", b""], [b"", None]),  # empty
        ([b"a", b"bb", None], [b"v" * 10, None, b"v" * 300]),  # sizes differ: filter
        ([b"k", b"k"], [b"v" * 20_000, b"w"]),  # a 3-byte record length: decode_varint
    ],
)
def test_keys_and_values_of_one_size_or_not_with_nulls(keys: list, values: list) -> None:  # type: ignore[type-arg]
    records = [(NOW + i, k, v, ()) for i, (k, v) in enumerate(zip(keys, values, strict=True))]
    for codec in sorted(available_codecs()):  # where it lies (none), or copied
        data, placed = _in_answer([build_batch(records, base_offset=7, compression=codec)], b"")
        for answer in (data, memoryview(data)):
            columns = batch_columns._vectorised(answer, placed, "test")
            assert columns.keys.to_pylist() == keys
            assert columns.values.to_pylist() == values
            assert _rows(columns) == _oracle(data, placed)


def _one_record(timestamp_delta: bytes, key_length: bytes, key: bytes) -> bytes:
    """A records region of one record whose timestamp delta and key length are given encoded
    (any length, minimal or not); offset delta 0, value b"v", no headers."""
    body = b"\x00" + timestamp_delta + b"\x00" + key_length + key + encode_varint(1) + b"v\x00"
    return encode_varint(len(body)) + body


KEY_LENGTH = encode_varint(2)  # b"\x04"; spelt b"\x84\x80...\x00" below, at more bytes


@pytest.mark.parametrize("tail", [b"", b"\xff" * 9], ids=["at-the-end", "0xff-after"])
@pytest.mark.parametrize(
    "region,error",
    [
        (_one_record(b"\x00", b"\x84\x80\x80\x80\x00", b"ab"), None),  # 5 bytes
        (_one_record(encode_varlong(2**62), KEY_LENGTH, b"ab"), None),  # 10 bytes: bytewise
        (_one_record(b"\x00", b"\x84\x80\x80\x80\x80\x00", b"ab"), "longer than 5"),
        (_one_record(b"\x00", b"\x84\x80\x80\x80\x70", b"ab"), "overflows 32 bits"),
        (_one_record(b"\x80" * 10 + b"\x00", KEY_LENGTH, b"ab"), "longer than 10"),
        (_one_record(b"\xff" * 9 + b"\x02", KEY_LENGTH, b"ab"), "overflows 64 bits"),
    ],
    ids=[
        "int-5-bytes",
        "long-10-bytes",
        "int-6-bytes",
        "int-overflow",
        "long-11-bytes",
        "long-overflow",
    ],
)
def test_varint_lengths_at_the_limits_decode_or_fall_back(
    region: bytes, error: str | None, tail: bytes
) -> None:
    # Varints at the length limits, read 8 bytes at a time (ints) or byte by byte (a varlong
    # longer than 8 bytes): the vectorised path itself decodes the valid ones and refuses
    # the others, which then get the strict decoder's error.
    raw = with_records_region(build_batch([(NOW, b"ab", b"v", ())]), region)
    data, placed = _in_answer([raw], tail)
    if error is None:
        assert _rows(batch_columns._vectorised(data, placed, "test")) == _oracle(data, placed)
        return
    with pytest.raises(batch_columns._NotVectorised):
        batch_columns._vectorised(data, placed, "test")
    with pytest.raises(InvalidRecordError, match=error):
        decode_batches(data, placed, where="test")


# --- runs of records of one size, decoded as tables (`_table_group`) -----------------------

# One run of records: how many, the key and value (None: null; every record of the run has
# them, so all its records have one size unless the deltas' varints grow), the timestamp step
# between records (1 ms keeps the delta's varint one size for 63 records; 3000 makes it grow
# inside a run of a few records), and headers for the run's records (usually none).
runs_of_one_size = st.tuples(
    st.integers(1, 300),
    st.none() | st.binary(max_size=8),
    st.none() | st.binary(max_size=40),
    st.sampled_from([0, 1, 3, 3000]),
    st.sampled_from([(), (), (), (("h", b"1"),)]),
)


def _records_of_runs(runs: list) -> list:  # type: ignore[type-arg]
    records, timestamp = [], NOW
    for count, key, value, step, headers in runs:
        for _ in range(count):
            records.append((timestamp, key, value, headers))
            timestamp += step
    return records


def _batches_of_runs(runs: list, per_batch: int, codec: int, append_time: bool) -> list[bytes]:  # type: ignore[type-arg]
    records = _records_of_runs(runs)
    return [
        build_batch(
            records[at : at + per_batch],
            base_offset=at,
            compression=codec,
            log_append_time=NOW + 5 if append_time else None,
        )
        for at in range(0, len(records), per_batch)
    ]


# Runs for `_BinaryOut`: keys up to past _HEAD_MAX (a head too long for a table: one by one),
# values of any size, nulls, short runs (one by one) between long ones (tables), so a call's
# columns are written by table runs and by stretches of other rows, in any order.
mixed_runs = st.tuples(
    st.sampled_from([1, 5, 63, 64, 65, 130, 300]),
    st.none() | st.binary(max_size=12) | st.binary(min_size=100, max_size=160),
    st.none() | st.binary(max_size=300),
    st.sampled_from([0, 1, 3]),
    st.sampled_from([(), (), (), (), (("h", b"1"),)]),
)


@settings(max_examples=120, deadline=None)
@given(
    st.lists(runs_of_one_size | mixed_runs, min_size=1, max_size=6),
    st.integers(50, 700),
    st.sampled_from(sorted(available_codecs())),
    st.booleans(),
    st.binary(max_size=9),
)
def test_runs_of_one_size_decode_as_the_record_decoder_does(
    runs: list,  # type: ignore[type-arg]
    per_batch: int,
    codec: int,
    append_time: bool,
    tail: bytes,
) -> None:
    # Long runs of one size, broken by other sizes, null keys or values, headers, a
    # timestamp delta whose varint grows inside a run, batch boundaries inside runs, keys
    # too long for a table, compression and LogAppendTime: the table path and the per-record
    # path together give the strict decoder's rows (each row's key and value where
    # `_BinaryOut` puts it), from bytes and from a view.
    data, placed = _in_answer(_batches_of_runs(runs, per_batch, codec, append_time), tail)
    expected = _oracle(data, placed)
    assert _rows(batch_columns._vectorised(data, placed, "test")) == expected
    assert _rows(decode_batches(memoryview(data), placed, where="test")) == expected


def test_records_of_one_size_in_another_layout_are_tables_of_their_own() -> None:
    # Batch 0: keys of 6 bytes and values of 100; batch 1: keys of 7 and values of 99, records
    # of the same size. A run's layout is first taken from the first run of its size, so
    # batch 1's runs fail its checks; the call is read again with each run's own layout, and
    # every record is still read as a table.
    first = _batches_of_runs([(500, b"key-01", b"v" * 100, 1, ())], 500, COMPRESSION_NONE, False)
    second = _batches_of_runs([(500, b"key-012", b"w" * 99, 1, ())], 500, COMPRESSION_NONE, False)
    second = [(500).to_bytes(8, "big") + raw[8:] for raw in second]  # base offset 500
    data, placed = _in_answer(first + second, b"")
    assert [h.size_in_bytes for _, h in placed] == [placed[0][1].size_in_bytes] * 2
    attempts = []
    real = batch_columns._table_groups

    def recording(buffer, buf, runs, refused):  # type: ignore[no-untyped-def]
        attempts.append(refused)
        return real(buffer, buf, runs, refused)

    with patch.object(batch_columns, "_table_groups", recording):
        columns = batch_columns._vectorised(data, placed, "test")
    assert attempts == [None, frozenset()]
    assert _rows(columns) == _oracle(data, placed)
    assert _uniform_rows(data, placed) == 1000
    # Empty keys, then null keys: records of one size, one key length byte apart. The layout
    # comes from the first run (which is no table itself: compressed, it starts the buffer),
    # the second run is checked against its own first record, which must have that layout.
    runs = [(64, b"", None, 0, ()), (64, None, None, 0, ())]
    data, placed = _in_answer(_batches_of_runs(runs, 64, COMPRESSION_GZIP, False), b"")
    assert _rows(batch_columns._vectorised(data, placed, "test")) == _oracle(data, placed)


def _uniform_rows(data: bytes, placed: list) -> int:  # type: ignore[type-arg]
    """How many records of the call are decoded as tables (`_table_group`; the rest go
    `_one_by_one`), in the call's last attempt (runs that fail a table's check send the call
    round again without them)."""
    decoded = 0
    real_groups, real_group = batch_columns._table_groups, batch_columns._table_group

    def grouping(*args):  # type: ignore[no-untyped-def]
        nonlocal decoded
        decoded = 0  # a new attempt
        return real_groups(*args)

    def counting(buffer, buf, layout, members, *rest):  # type: ignore[no-untyped-def]
        nonlocal decoded
        failed = real_group(buffer, buf, layout, members, *rest)
        decoded += sum(r.count for r in members if r not in failed)
        return failed

    with (
        patch.object(batch_columns, "_table_groups", grouping),
        patch.object(batch_columns, "_table_group", counting),
    ):
        batch_columns._vectorised(data, placed, "test")
    return decoded


def test_a_long_run_of_one_size_is_decoded_as_a_table_and_the_rest_one_by_one() -> None:
    # 1 ms apart, the deltas' varints grow at records 64 (both: one record size up to 63, the
    # next from 64 on): both runs are read as tables, each of its own layout.
    runs = [(1000, b"key-01", b"v" * 100, 1, ())]
    data, placed = _in_answer(_batches_of_runs(runs, 1000, COMPRESSION_NONE, False), b"")
    assert _uniform_rows(data, placed) == 1000
    assert _rows(decode_batches(data, placed, where="test")) == _oracle(data, placed)
    # 3 ms apart, the timestamp delta grows at record 22: runs of 22, 42 and 936 records, each
    # a table, so the key and value columns have one length each (the bench's records: four
    # batches of 250 records here).
    runs = [(1000, b"key-01", b"v" * 100, 3, ())]
    data, placed = _in_answer(_batches_of_runs(runs, 1000, COMPRESSION_NONE, False), b"")
    assert _uniform_rows(data, placed) == 1000
    assert _rows(decode_batches(data, placed, where="test")) == _oracle(data, placed)
    data, placed = _in_answer(_batches_of_runs(runs, 250, COMPRESSION_NONE, False), b"")
    assert _uniform_rows(data, placed) == 1000
    assert _binary_lengths(data, placed) == [6, 100]
    # A run shorter than _UNIFORM_MIN (15 records, then another size) is read one by one.
    runs = [(15, b"key-01", b"v" * 100, 1, ()), (985, b"key-01", b"w" * 90, 1, ())]
    data, placed = _in_answer(_batches_of_runs(runs, 1000, COMPRESSION_NONE, False), b"")
    assert 1000 - 64 <= _uniform_rows(data, placed) < 1000
    assert _rows(decode_batches(data, placed, where="test")) == _oracle(data, placed)
    # A "run" that is no record (the answer's first bytes are a batch header): left to
    # `_one_by_one`, and nothing written.
    buf = np.frombuffer(data, dtype=np.uint8)
    run = batch_columns._Run(0, 200, 0, 117, 0)
    assert batch_columns._layout(data, run) is None
    assert batch_columns._table_groups(data, buf, [run], None) == {}
    # Headers on every record: nothing is read as a table.
    runs = [(300, b"k", b"v" * 10, 1, (("h", b"x"),))]
    data, placed = _in_answer(_batches_of_runs(runs, 300, COMPRESSION_NONE, False), b"")
    assert _uniform_rows(data, placed) == 0
    assert _rows(decode_batches(data, placed, where="test")) == _oracle(data, placed)


def test_runs_of_one_layout_in_many_batches_are_one_group() -> None:
    # Ten batches of 500 records 1 ms apart: the same two layouts in every batch (offset and
    # timestamp deltas of one byte up to record 63, two from 64), so two groups of ten runs.
    runs = [(5000, b"key-01", b"v" * 100, 1, ())]
    data, placed = _in_answer(_batches_of_runs(runs, 500, COMPRESSION_NONE, False), b"")
    groups = []
    real = batch_columns._table_group

    def recording(buffer, buf, layout, members, *rest):  # type: ignore[no-untyped-def]
        groups.append(len(members))
        return real(buffer, buf, layout, members, *rest)

    with patch.object(batch_columns, "_table_group", recording):
        columns = batch_columns._vectorised(data, placed, "test")
    assert groups == [10, 10]
    assert _rows(columns) == _oracle(data, placed)
    assert np.array_equal(columns.offsets, np.arange(5000))


def _binary_lengths(data: bytes, placed: list) -> list:  # type: ignore[type-arg]
    """The keys' and the values' lengths a call with table rows builds its columns from
    (`_BinaryOut`): one int, or "array" (per row)."""
    seen = []
    real = batch_columns._BinaryOut.__init__

    def recording(self, count, lengths):  # type: ignore[no-untyped-def]
        seen.append(lengths if isinstance(lengths, int) else "array")
        real(self, count, lengths)

    with patch.object(batch_columns._BinaryOut, "__init__", recording):
        assert _rows(batch_columns._vectorised(data, placed, "test")) == _oracle(data, placed)
    return seen


def test_lengths_of_table_rows_are_one_int_only_when_every_row_has_them() -> None:
    # Every record in long runs of one key and one value size: both columns of one size,
    # known from the layouts alone (no length array filled or checked).
    runs = [(1000, b"key-01", b"v" * 100, 1, ())]
    data, placed = _in_answer(_batches_of_runs(runs, 500, COMPRESSION_NONE, False), b"")
    assert _binary_lengths(data, placed) == [6, 100]
    # Two value sizes, each in long runs: the keys one int, the values the filled array.
    runs = [(300, b"key-01", b"v" * 100, 1, ()), (300, b"key-02", b"w" * 50, 1, ())]
    data, placed = _in_answer(_batches_of_runs(runs, 600, COMPRESSION_NONE, False), b"")
    assert _uniform_rows(data, placed) == 600
    assert _binary_lengths(data, placed) == [6, "array"]
    # Long runs and a few records read one by one, of the same sizes or not: arrays.
    runs = [(300, b"key-01", b"v" * 100, 1, ()), (5, b"k", b"v" * 100, 1, ())]
    data, placed = _in_answer(_batches_of_runs(runs, 305, COMPRESSION_NONE, False), b"")
    assert _binary_lengths(data, placed) == ["array", "array"]
    runs = [(300, b"key-01", b"v" * 100, 1, ()), (5, b"key-01", b"v" * 100, 1, (("h", b"x"),))]
    data, placed = _in_answer(_batches_of_runs(runs, 305, COMPRESSION_NONE, False), b"")
    assert _binary_lengths(data, placed) == ["array", "array"]
    # A long run of null keys and tombstones (bytes after it: its last records' words lie
    # inside the answer): length -1 is never taken as a size.
    runs = [(300, None, None, 1, ())]
    data, placed = _in_answer(_batches_of_runs(runs, 300, COMPRESSION_NONE, False), b"\0" * 9)
    assert _uniform_rows(data, placed) == 300
    assert _binary_lengths(data, placed) == ["array", "array"]


def test_a_partitions_constant_columns_are_built_once_and_sliced() -> None:
    runs = [(400, b"key-01", b"v" * 10, 1, ())]
    data, placed = _in_answer(_batches_of_runs(runs, 400, COMPRESSION_NONE, False), b"")
    columns = decode_batches(data, placed, where="test")
    schema = to_arrow_schema(SPARK_SCHEMA, timezone="UTC")
    constants = ConstantColumns("orders", 7)
    built = []
    real = arrow.constant_array

    def counting(value, kind, count):  # type: ignore[no-untyped-def]
        built.append(count)
        return real(value, kind, count)

    with patch.object(arrow, "constant_array", counting):
        for first, stop in ((0, 300), (100, 200), (0, 0), (50, 350), (0, 400)):
            rows = columns.slice(first, stop)
            got = columns_to_record_batch("orders", 7, rows, schema, constants)
            alone = columns_to_record_batch("orders", 7, rows, schema)
            assert got.schema.equals(schema)
            assert got.equals(alone)
            assert got.column("topic").to_pylist() == ["orders"] * (stop - first)
            assert got.column("partition").to_pylist() == [7] * (stop - first)
    # With `constants`: built at 300 rows and an eighth (topic, partition), sliced for 100, 0
    # and 300, built again for 400; each batch built alone builds its own.
    assert built == [337, 337, 337, 337, 112, 112, 0, 0, 337, 337, 450, 450, 450, 450]


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ("orders", pa.string()),
        ("", pa.string()),
        ("z\u00fcrich-\u20ac", pa.string()),
        (7, pa.int32()),
        (-3, pa.int64()),
        (2, pa.int16()),  # not built by numpy: pa.repeat's own
        ("orders", pa.large_string()),
    ],
)
@pytest.mark.parametrize("count", [0, 1, 1000])
def test_constant_columns_are_what_arrow_repeats(
    value: object, kind: pa.DataType, count: int
) -> None:
    built = arrow.constant_array(value, kind, count)  # type: ignore[arg-type]
    built.validate(full=True)
    assert built.type == kind
    assert built.equals(pa.repeat(pa.scalar(value, type=kind), count))
    assert built.null_count == 0


def test_offset_delta_table_holds_each_delta_as_a_record_writes_it() -> None:
    table = batch_columns._offset_delta_words(20_000)
    for delta in [0, 1, 63, 64, 65, 8191, 8192, 8193, 12_345, 19_999]:
        written = encode_varint(delta)
        assert int(table[delta]) == int.from_bytes(written, "little"), delta
    grown = batch_columns._offset_delta_words(1 << 20)
    assert len(grown) == 1 << 20
    assert int(grown[(1 << 20) - 1]) == int.from_bytes(encode_varint((1 << 20) - 1), "little")
    assert np.array_equal(grown[:20_000], table[:20_000])


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 9), st.data())
def test_a_damaged_run_among_runs_of_one_layout_gives_the_record_decoders_answer(
    batches: int,
    data,  # type: ignore[no-untyped-def]
) -> None:
    # Several batches of runs of one layout, one of them damaged (a byte or three overwritten,
    # its end cut): the others are still read as a group and the call gives the strict
    # decoder's rows or error.
    records = _records_of_runs([(150, b"key", b"value-" * 5, 1, ())])
    damaged_at = data.draw(st.integers(0, batches - 1))
    raws = []
    for i in range(batches):
        raw = draw_damaged_batch(records, data) if i == damaged_at else build_batch(records)
        raws.append((150 * i).to_bytes(8, "big") + raw[8:])  # base offset: outside the CRC
    answer, placed = _in_answer(raws, b"")
    expected = _damaged_outcome(_oracle, answer, placed)
    assert _damaged_outcome(_columnar_rows, answer, placed) == expected
    if not isinstance(expected, tuple):  # valid after all: every undamaged batch a table
        assert _uniform_rows(answer, placed) >= 150 * (batches - 1)


def test_offset_deltas_written_longer_than_needed_are_read_one_by_one() -> None:
    # Three batches of 200 records with one timestamp. The middle one's offset deltas are all
    # two-byte varints (0x80 | d, 0x00 below 64: valid, longer than needed): records of one
    # size, of the layout the other batches have from record 64 on, found as two runs (a guess
    # stops at record 64), so all runs from record 64 on are one group with the middle batch's
    # first run. That run's expected words do not match: its 64 records alone are read one by
    # one (the strict rules accept them), the others still as tables.
    records = _records_of_runs([(200, b"key", b"v" * 20, 0, ())])
    region = bytearray()
    for i, (timestamp, key, value, _) in enumerate(records):
        body = (
            b"\x00"
            + encode_varlong(timestamp - NOW)
            + bytes([0x80 | (2 * i & 0x7F), 2 * i >> 7])
            + encode_varint(len(key))
            + key
            + encode_varint(len(value))
            + value
            + b"\x00"
        )
        region += encode_varint(len(body)) + body
    raws = [build_batch(records, base_offset=200 * i) for i in range(3)]
    raws[1] = with_records_region(raws[1], bytes(region))
    answer, placed = _in_answer(raws, b"")
    assert _uniform_rows(answer, placed) == 600 - 64
    assert _rows(decode_batches(answer, placed, where="test")) == _oracle(answer, placed)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_a_damaged_long_run_gives_the_record_decoders_answer(data) -> None:  # type: ignore[no-untyped-def]
    # A byte or three of a run of 200 same-size records overwritten: a run cut short, a
    # key length or header count changed, an offset delta skipped, a varint made longer...
    # the call gives exactly the strict decoder's rows or error.
    records = _records_of_runs([(200, b"key", b"value-" * 5, 1, ())])
    damaged = draw_damaged_batch(records, data)
    answer, placed = _in_answer([damaged], b"")
    expected = _damaged_outcome(_oracle, answer, placed)
    assert _damaged_outcome(_columnar_rows, answer, placed) == expected


@settings(max_examples=150, deadline=None)
@given(st.integers(16, 63), st.sampled_from([1, 3, 7]), st.data())
def test_a_damaged_short_run_gives_the_record_decoders_answer(count: int, apart: int, data) -> None:  # type: ignore[no-untyped-def]
    # Runs shorter than a batch's first 64 records (records 3 or 7 ms apart: the timestamp
    # delta's varint grows among them), read as tables since _UNIFORM_MIN is _RUN_MIN, with a
    # byte or three overwritten: exactly the strict decoder's rows or error; undamaged, every
    # record a table row.
    records = _records_of_runs([(count, b"key", b"value-" * 5, apart, ())])
    raws = [build_batch(records), draw_damaged_batch(records, data)]
    raws[1] = count.to_bytes(8, "big") + raws[1][8:]  # base offset: outside the CRC
    answer, placed = _in_answer(raws, b"")
    expected = _damaged_outcome(_oracle, answer, placed)
    assert _damaged_outcome(_columnar_rows, answer, placed) == expected
    # Undamaged: one run (1 ms apart), or runs of 22 and 16 or more records (3 ms): all tables.
    # (7 ms apart the first run has 10 records: none, and the walk goes on one by one.)
    whole, whole_placed = _in_answer([raws[0], count.to_bytes(8, "big") + raws[0][8:]], b"")
    if apart == 1 or (apart == 3 and count >= 22 + batch_columns._RUN_MIN):
        assert _uniform_rows(whole, whole_placed) == 2 * count
    assert _rows(decode_batches(whole, whole_placed, where="test")) == _oracle(whole, whole_placed)


def _straddling_records() -> list:  # type: ignore[type-arg]
    # 200 records of 100-byte values 1 s apart: two-byte lengths and, from record 9 on,
    # three-byte timestamp deltas, so a record's offset delta starts at the head's byte 7 and,
    # from record 64 on (two bytes), ends in the head's second word (`_head_mismatches`).
    return _records_of_runs([(200, b"key-01", b"v" * 100, 1000, ())])


def test_offset_deltas_across_a_word_of_the_head_are_read_as_tables() -> None:
    raws = [build_batch(_straddling_records(), base_offset=200 * i) for i in range(3)]
    answer, placed = _in_answer(raws, b"")
    # Records 0-8 (timestamp deltas of one and two bytes) and the walk after them are read one
    # by one; records 64-199 of every batch, their deltas across the words, as tables.
    assert _uniform_rows(answer, placed) >= 3 * (200 - 64)
    assert _rows(decode_batches(answer, placed, where="test")) == _oracle(answer, placed)


@pytest.mark.parametrize("record", [70, 199])
@pytest.mark.parametrize("change", [0x01, 0x80, 0x81])
def test_a_changed_offset_delta_across_a_word_gives_the_record_decoders_answer(
    record: int, change: int
) -> None:
    # A bit of the second byte of one record's two-byte offset delta flipped (the byte in the
    # head's second word): another delta, or a longer varint; exactly the strict decoder's
    # error or rows.
    raw = build_batch(_straddling_records())
    region = bytearray(raw[61:])  # the records region (RECORD_BATCH_OVERHEAD)
    at = 0
    for _ in range(record):
        at += 2 + (region[at] >> 1 | (region[at + 1] & 0x7F) << 6)  # a two-byte length
    region[at + 2 + 1 + 3 + 1] ^= change  # length, attributes, timestamp, delta's first byte
    answer = with_records_region(raw, bytes(region))
    placed = [(0, validate_batch(answer))]
    expected = _damaged_outcome(_oracle, answer, placed)
    assert _damaged_outcome(_columnar_rows, answer, placed) == expected


@pytest.mark.parametrize("apart", [1, 3, 1000])
def test_every_head_byte_of_a_table_row_changed_gives_the_record_decoders_answer(
    apart: int,
) -> None:
    # Each byte of a record's head (the byte before it up to its value: what
    # `_head_mismatches` reads), in a run read as a table, and the run's last header count,
    # xor-ed with a few patterns: exactly the strict decoder's error or rows (a record whose
    # changed byte is still valid may be read one by one). Records 1 ms apart, 3 ms apart
    # (the cluster's answers to the Spark bench) and 1 s apart (offset deltas across the
    # head's words); in each, some runs' fields end at a word's end, so their heads leave the
    # byte before the record out and each record's header count is read on its own
    # (`_Layout.lead`).
    records = _records_of_runs([(200, b"key-01", b"v" * 100, apart, ())])
    raw = build_batch(records)
    region = raw[61:]  # the records region (RECORD_BATCH_OVERHEAD)
    starts = [0]
    for _ in range(199):
        at = starts[-1]
        starts.append(at + 2 + (region[at] >> 1 | (region[at + 1] & 0x7F) << 6))
    placed = [(0, validate_batch(raw))]
    assert {lay.lead for lay in _table_layouts(raw, placed)} == {0, 1}
    changes = [(record, byte) for record in (40, 100, 199) for byte in range(-1, 17)]
    for record, byte in [*changes, (200, -1)]:  # (200, -1): the last record's header count
        for change in (0x01, 0x40, 0x80, 0xFF):
            changed = bytearray(region)
            changed[(starts[record] if record < 200 else len(region)) + byte] ^= change
            answer = with_records_region(raw, bytes(changed))
            placed = [(0, validate_batch(answer))]
            expected = _damaged_outcome(_oracle, answer, placed)
            assert _damaged_outcome(_columnar_rows, answer, placed) == expected, (
                record,
                byte,
                change,
            )


def _table_layouts(data: bytes, placed: list) -> list:  # type: ignore[type-arg]
    """The layouts of the table groups `_vectorised` decodes (each attempt's)."""
    layouts = []
    real = batch_columns._table_group

    def recording(buffer, buf, layout, members, *rest):  # type: ignore[no-untyped-def]
        layouts.append(layout)
        return real(buffer, buf, layout, members, *rest)

    with patch.object(batch_columns, "_table_group", recording):
        batch_columns._vectorised(data, placed, "test")
    return layouts
