"""Codec details: determinism, multi-member/multi-frame blobs, and Xerial snappy framing."""

from __future__ import annotations

import gzip
import struct

import pytest

from replog.errors import CorruptRecordError, InvalidRecordError
from replog.record import compression
from replog.record.compression import (
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
    available_codecs,
    codec_name,
    compress,
    decompress,
)

CODECS = sorted(available_codecs())
PAYLOAD = b"".join(b"record %d; " % index for index in range(5000))


def test_none_and_gzip_are_always_available() -> None:
    assert {COMPRESSION_NONE, COMPRESSION_GZIP} <= available_codecs()
    assert [codec_name(codec) for codec in range(6)] == [
        "none",
        "gzip",
        "snappy",
        "lz4",
        "zstd",
        "unknown codec id 5",
    ]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("data", [b"", b"a", PAYLOAD], ids=["empty", "one-byte", "large"])
def test_round_trip(codec: int, data: bytes) -> None:
    blob = compress(codec, data)
    assert decompress(codec, blob) == data
    assert decompress(codec, memoryview(blob)) == data
    assert compress(codec, data) == blob  # deterministic: gzip writes mtime 0


def test_gzip_worked_example_from_the_docstring() -> None:
    blob = compress(COMPRESSION_GZIP, b"a" * 1000)
    assert len(blob) == 29
    assert blob[:8].hex() == "1f8b080000000000"
    assert gzip.decompress(blob) == b"a" * 1000


def test_concatenated_gzip_members_are_one_stream() -> None:
    blob = gzip.compress(b"first ") + gzip.compress(b"second")
    assert decompress(COMPRESSION_GZIP, blob) == b"first second"


@pytest.mark.parametrize("codec", sorted(set(CODECS) & {COMPRESSION_LZ4, COMPRESSION_ZSTD}))
def test_concatenated_frames_are_one_stream(codec: int) -> None:
    blob = compress(codec, b"first ") + compress(codec, PAYLOAD)
    assert decompress(codec, blob) == b"first " + PAYLOAD


@pytest.mark.parametrize("codec", sorted(set(CODECS) - {COMPRESSION_NONE}))
def test_cap_is_inclusive(codec: int) -> None:
    blob = compress(codec, PAYLOAD)
    assert decompress(codec, blob, len(PAYLOAD)) == PAYLOAD
    with pytest.raises(InvalidRecordError, match=f"decompressed_bytes_max={len(PAYLOAD) - 1}"):
        decompress(codec, blob, len(PAYLOAD) - 1)


class FakeSnappy:
    """Stands in for python-snappy: a raw block is its length preamble, then the data as is.

    Its blocks are readable by eye, so the tests below can state replog's Xerial framing and
    bounds byte for byte; real snappy against kafka-python's is in test_record_oracle.py.
    """

    class UncompressError(Exception):
        pass

    @staticmethod
    def compress(data: bytes) -> bytes:
        preamble = bytearray()
        size = len(data)
        while size >= 0x80:
            preamble.append(size & 0x7F | 0x80)
            size >>= 7
        preamble.append(size)
        return bytes(preamble) + data

    @staticmethod
    def uncompress(block: bytes) -> bytes:
        position = 0
        while block[position] & 0x80:
            position += 1
        return block[position + 1 :]


@pytest.fixture
def fake_snappy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compression, "snappy", FakeSnappy)


@pytest.mark.usefixtures("fake_snappy")
def test_snappy_xerial_framing() -> None:
    blob = compress(COMPRESSION_SNAPPY, PAYLOAD)
    assert blob[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    # 32 KiB of input per block: the payload spans several.
    first_block_size = struct.unpack_from(">i", blob, 16)[0]
    assert first_block_size == 32 * 1024 + 3
    assert decompress(COMPRESSION_SNAPPY, blob) == PAYLOAD
    # An unframed raw block is accepted too.
    assert decompress(COMPRESSION_SNAPPY, FakeSnappy.compress(b"raw")) == b"raw"


@pytest.mark.usefixtures("fake_snappy")
@pytest.mark.parametrize(
    ("blob", "expected"),
    [
        (b"\x82SNAPPY\x00\x00\x00", "xerial header is cut short"),
        (b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + b"\x00\x00", "block length at byte 16"),
        (b"\x82SNAPPY\x00" + struct.pack(">iii", 1, 1, 99) + b"ab", "block of 99 bytes"),
        (b"\xff\xff\xff\xff\xff", "no valid length preamble"),
    ],
    ids=["header", "block-length", "block-overrun", "preamble"],
)
def test_snappy_corrupt_framing(blob: bytes, expected: str) -> None:
    with pytest.raises(CorruptRecordError, match=f"corrupt snappy records blob: .*{expected}"):
        decompress(COMPRESSION_SNAPPY, blob)


@pytest.mark.usefixtures("fake_snappy")
def test_snappy_cap_is_checked_before_decoding() -> None:
    blob = compress(COMPRESSION_SNAPPY, PAYLOAD)
    with pytest.raises(InvalidRecordError, match="snappy records decompress to more than"):
        decompress(COMPRESSION_SNAPPY, blob, 40_000)
