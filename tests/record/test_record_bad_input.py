"""Every kind of broken batch raises a typed error whose message says what and where."""

from __future__ import annotations

import struct
import tracemalloc

import pytest
from hypothesis import given
from hypothesis import strategies as st
from record_test_support import GOLDEN, reseal, set_attributes, with_records_region

from replog.errors import CorruptRecordError, InvalidRecordError, UnsupportedCompressionTypeError
from replog.record import (
    COMPRESSION_GZIP,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    RECORD_BATCH_OVERHEAD,
    BatchBuilder,
    RecordBatch,
    available_codecs,
    build_batch,
    codec_name,
    compress,
    compression,
    decompress,
    iter_batches,
    validate_batch,
)

WHERE = "orders-3/00000000000000000000.log at byte 0"
COMPRESSED_CODECS = sorted(available_codecs() - {COMPRESSION_NONE})
# Three records with keys, values and headers: enough structure for flips to land anywhere.
SAMPLE = build_batch(
    [
        (1700000000000, b"key-1", b"value-1", [("trace", b"abc"), ("empty", None)]),
        (1700000000007, None, b"v" * 200, []),
        (1699999999999, b"k", None, [("h", b"")]),
    ],
    producer_id=12,
    producer_epoch=0,
    base_sequence=5,
)


def parse_all(batch: bytes) -> None:
    list(RecordBatch.parse(batch, where=WHERE).records())


# --- Framing, magic, CRC ------------------------------------------------------------------------


@pytest.mark.parametrize("size", range(len(GOLDEN)))
def test_truncated_batch(size: int) -> None:
    expected = "smaller than the 61-byte header" if size < 61 else f"says 69 bytes, {size} present"
    with pytest.raises(CorruptRecordError, match=expected) as raised:
        validate_batch(GOLDEN[:size], where=WHERE)
    assert str(raised.value).startswith(WHERE)


@given(position=st.integers(8, len(SAMPLE) - 1), flip=st.integers(1, 255))
def test_flipped_byte_in_covered_or_framing_bytes_is_corruption(position: int, flip: int) -> None:
    """Bytes 8-11 (batch_length) break framing, 16 is magic, 17-20 the CRC, 21+ fail the CRC."""
    if 12 <= position < 16:
        return  # the leader epoch, tested below
    corrupted = bytearray(SAMPLE)
    corrupted[position] ^= flip
    with pytest.raises(CorruptRecordError) as raised:
        validate_batch(corrupted, where=WHERE)
    assert str(raised.value).startswith(WHERE)
    if position >= 17:
        assert "CRC-32C mismatch at offset 0" in str(raised.value)


@given(position=st.sampled_from([*range(8), *range(12, 16)]), flip=st.integers(1, 255))
def test_flip_in_base_offset_or_leader_epoch_is_not_detected(position: int, flip: int) -> None:
    """By design the CRC does not cover bytes 0-7 and 12-15.

    The leader overwrites the base offset and leader epoch of every batch it appends; leaving
    them out of the CRC is what lets it do so in place, without recomputing the checksum. The
    price is that damage there is invisible to the CRC; Kafka relies on offsets increasing
    monotonically and on the leader-epoch cache to catch such batches at a higher level.
    """
    corrupted = bytearray(SAMPLE)
    corrupted[position] ^= flip
    header = validate_batch(corrupted)
    assert (header.base_offset, header.partition_leader_epoch) != (0, -1)
    records = list(RecordBatch.parse(corrupted).records())
    assert [record.offset - header.base_offset for record in records] == [0, 1, 2]


@pytest.mark.parametrize("magic", [0, 1, 3, 255])
def test_wrong_magic(magic: int) -> None:
    bad = bytearray(GOLDEN)
    bad[16] = magic
    signed = magic - 256 if magic > 127 else magic
    with pytest.raises(CorruptRecordError, match=f"{WHERE}: magic {signed}, only magic 2"):
        validate_batch(bad, where=WHERE)


@pytest.mark.parametrize(
    ("batch_length", "expected"),
    [
        (0, "batch_length 0 is below the header's 49"),
        (48, "batch_length 48 is below the header's 49"),
        (58, "batch_length 58 says 70 bytes, 69 present"),
        (-5, "batch_length -5 is below"),
    ],
)
def test_bad_batch_length(batch_length: int, expected: str) -> None:
    bad = bytearray(GOLDEN)
    struct.pack_into(">i", bad, 8, batch_length)
    with pytest.raises(CorruptRecordError, match=expected):
        validate_batch(bad, where=WHERE)


# --- Counts and offset deltas -------------------------------------------------------------------


@pytest.mark.parametrize(("records_count", "last_offset_delta"), [(2, 0), (0, -1), (1, 1)])
def test_count_disagreeing_with_last_offset_delta(
    records_count: int, last_offset_delta: int
) -> None:
    bad = bytearray(GOLDEN)
    struct.pack_into(">i", bad, 23, last_offset_delta)
    struct.pack_into(">i", bad, 57, records_count)
    with pytest.raises(InvalidRecordError, match=f"records_count {records_count} does not equal"):
        validate_batch(reseal(bad), where=WHERE)


def test_fewer_records_than_declared() -> None:
    bad = with_records_region(GOLDEN, GOLDEN[RECORD_BATCH_OVERHEAD:], records_count=2)
    with pytest.raises(InvalidRecordError, match="declares 2 records, its records region holds"):
        parse_all(bad)


def test_more_records_than_declared() -> None:
    region = GOLDEN[RECORD_BATCH_OVERHEAD:]
    bad = with_records_region(GOLDEN, region + region)
    with pytest.raises(InvalidRecordError, match="has 8 bytes after its 1 declared records"):
        parse_all(bad)


def test_offset_delta_not_0_to_n_minus_1() -> None:
    # The golden record with offsetDelta 1 (zig-zag 0x02) instead of 0.
    bad = with_records_region(GOLDEN, bytes.fromhex("0e00000201026100"))
    with pytest.raises(InvalidRecordError, match=r"record 0 \(offset 0\): offset delta 1"):
        parse_all(bad)


# --- Record structure ---------------------------------------------------------------------------

# The golden record is 0e | 00 attributes | 00 ts delta | 00 offset delta | 01 null key |
# 02 61 value "a" | 00 no headers. Each case breaks one rule.
RECORD_CASES = [
    pytest.param("100000000102610000", "declared length 8, the body parses to 7", id="longer"),
    pytest.param("0c00000001026100", "varint at byte 68 runs past the end at byte 68", id="short"),
    pytest.param("1000000001026100", "length 8 at byte 62 does not fit the 7 bytes", id="overrun"),
    pytest.param("01", "length -1 at byte 62 does not fit", id="negative-length"),
    pytest.param("0e00000001026101", "headers count -1 is negative", id="negative-headers"),
    pytest.param("1200000001026102010100", "header 0 has a null key", id="null-header-key"),
    pytest.param("0e00000003026100", "key length -2 at byte 66 is below -1", id="key-length"),
    pytest.param("0e000000010a6100", "value of 5 bytes at byte 67 runs 3 bytes past", id="value"),
    pytest.param("ffffffffff0100", "varint at byte 61 is longer than 5 bytes", id="long-varint"),
    pytest.param("ffffffff1f", "varint at byte 61 overflows 32 bits", id="overflow"),
    pytest.param(
        "2200" + "ff" * 10 + "010001026100",
        "varlong at byte 63 is longer than 10 bytes",
        id="long-varlong",
    ),
]


@pytest.mark.parametrize(("region_hex", "expected"), RECORD_CASES)
def test_malformed_record(region_hex: str, expected: str) -> None:
    bad = with_records_region(GOLDEN, bytes.fromhex(region_hex))
    with pytest.raises(InvalidRecordError, match=expected) as raised:
        parse_all(bad)
    message = str(raised.value)
    assert message.startswith(f"{WHERE}: batch at offset 0, record 0 (offset 0): ")
    # The values alone, and the offsets and keys alone, are read with the same checks and the
    # same message.
    with pytest.raises(InvalidRecordError) as raised_reading_values:
        list(RecordBatch.parse(bad, where=WHERE).values())
    assert str(raised_reading_values.value) == message
    with pytest.raises(InvalidRecordError) as raised_reading_keys:
        list(RecordBatch.parse(bad, where=WHERE).keys())
    assert str(raised_reading_keys.value) == message


@pytest.mark.parametrize("codec", COMPRESSED_CODECS)
def test_malformed_record_inside_a_compressed_batch(codec: int) -> None:
    region = bytes.fromhex("0e00000001026101")  # negative headers count
    bad = set_attributes(with_records_region(GOLDEN, compress(codec, region)), codec)
    with pytest.raises(InvalidRecordError, match="headers count -1 is negative"):
        parse_all(bad)


# --- Compression --------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", COMPRESSED_CODECS)
@pytest.mark.parametrize("damage", ["garbage", "truncated", "trailing junk"])
def test_corrupt_compressed_blob(codec: int, damage: str) -> None:
    good = build_batch([(0, None, b"payload " * 50, [])], compression=codec)
    blob = good[RECORD_BATCH_OVERHEAD:]
    damaged = {
        "garbage": b"\x00not a compressed stream at all\xff" * 3,
        "truncated": blob[: len(blob) - 5],
        "trailing junk": blob + b"\x01\x02\x03junk",
    }[damage]
    bad = with_records_region(good, damaged)
    name = codec_name(codec)
    with pytest.raises(CorruptRecordError, match=f"{WHERE}: batch at offset 0: corrupt {name}"):
        parse_all(bad)


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_unknown_codec_id(codec: int) -> None:
    bad = set_attributes(GOLDEN, codec)
    batch = RecordBatch.parse(bad, where=WHERE)  # the header itself is fine
    with pytest.raises(
        UnsupportedCompressionTypeError, match=f"codec {codec} \\(unknown codec id {codec}\\)"
    ):
        batch.records()
    with pytest.raises(UnsupportedCompressionTypeError, match="is not a Kafka codec"):
        BatchBuilder(compression=codec)


def test_snappy_without_its_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compression, "snappy", None)
    bad = set_attributes(GOLDEN, COMPRESSION_SNAPPY)
    with pytest.raises(UnsupportedCompressionTypeError, match=r"codec 2 \(snappy\) has no package"):
        RecordBatch.parse(bad, where=WHERE).records()
    with pytest.raises(UnsupportedCompressionTypeError, match="snappy"):
        build_batch([(0, None, b"a", [])], compression=COMPRESSION_SNAPPY)


@pytest.mark.parametrize("codec", COMPRESSED_CODECS)
def test_decompression_is_bounded(codec: int) -> None:
    """A small blob that expands hugely stops at the cap without allocating the expansion."""
    bomb = compress(codec, bytes(24 * 1024 * 1024))
    assert len(bomb) < 24 * 1024 * 1024 // 20  # snappy's limit is about 21:1; the others' far more
    cap = 1024 * 1024
    tracemalloc.start()
    try:
        with pytest.raises(InvalidRecordError, match=f"decompressed_bytes_max={cap}"):
            decompress(codec, bomb, cap, where=WHERE)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 6 * cap
    assert len(decompress(codec, bomb, 24 * 1024 * 1024)) == 24 * 1024 * 1024


def test_record_batch_passes_the_cap_through() -> None:
    batch = build_batch([(0, None, bytes(100_000), [])], compression=COMPRESSION_GZIP)
    with pytest.raises(InvalidRecordError, match="gzip records decompress to more than"):
        RecordBatch.parse(batch).records(decompressed_bytes_max=50_000)
    [record] = RecordBatch.parse(batch).records(decompressed_bytes_max=200_000)
    assert record.value == bytes(100_000)


# --- Builder input ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"producer_epoch": 2**15}, "producer_epoch"),
        ({"partition_leader_epoch": 2**31}, "partition_leader_epoch"),
        ({"base_sequence": -(2**31) - 1}, "base_sequence"),
        ({"base_offset": 2**63}, "base_offset"),
    ],
)
def test_builder_rejects_out_of_range_header_fields(options: dict[str, int], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        BatchBuilder(**options)  # type: ignore[arg-type]


def test_builder_rejects_empty_batches_and_bad_timestamps() -> None:
    with pytest.raises(ValueError, match="at least one record"):
        BatchBuilder().build()
    with pytest.raises(ValueError, match="timestamp"):
        BatchBuilder().append(2**63, None, None)
    builder = BatchBuilder()
    builder.append(-(2**62), None, None)
    with pytest.raises(ValueError, match="int64"):
        builder.append(2**62 + 1, None, None)  # the delta overflows a varlong


# --- Concatenations ----------------------------------------------------------------------------


def concatenation() -> bytes:
    first = build_batch([(0, None, b"a", [])], base_offset=0)
    second = build_batch([(0, None, b"b", []), (1, None, b"c", [])], base_offset=1)
    return first + second


@pytest.mark.parametrize(
    ("tail", "expected"),
    [
        (GOLDEN[:40], "partial batch at byte 146: needs 69 bytes, 40 remain"),
        (GOLDEN[:11], "11 trailing bytes at byte 146 are too few to frame a batch"),
        (bytes(64), "batch_length 0 at byte 146 is below 14"),
    ],
    ids=["partial-batch", "partial-frame", "zero-fill"],
)
def test_partial_or_garbage_tail(tail: bytes, expected: str) -> None:
    raw = concatenation() + tail
    with pytest.raises(CorruptRecordError, match=f"fetch response: {expected}"):
        list(iter_batches(raw, where="fetch response"))
    lenient = list(iter_batches(raw, strict=False))
    assert [batch.base_offset for batch in lenient] == [0, 1]


def test_complete_but_corrupt_batch_raises_even_when_lenient() -> None:
    raw = bytearray(concatenation() + GOLDEN)
    raw[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="segment, batch at byte 146: CRC-32C mismatch"):
        list(iter_batches(raw, strict=False, where="segment"))


def test_iter_batches_from_a_position() -> None:
    raw = concatenation()
    assert [batch.base_offset for batch in iter_batches(raw, 69)] == [1]
    assert list(iter_batches(raw, len(raw))) == []
